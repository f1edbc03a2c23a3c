package redis

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"strconv"
	"strings"

	"github.com/sluice-cdc/sluice/binlog"
	"github.com/sluice-cdc/sluice/codec"
	"github.com/sluice-cdc/sluice/sink"
)

// Sink writes a pipeline's messages to Redis. It is used from one
// goroutine at a time (the pipeline's writer).
//
// Each chunk of a batch is applied with optimistic locking, in two round
// trips on the sink's one connection:
//
//  1. WATCH the high-water hash, HGETALL it, TYPE the keys the chunk
//     writes to (streams; row hashes that are updated in place). The sink
//     checks the epoch (fencing), leaves out the messages the mark covers
//     and stops before a message whose key holds the wrong type.
//  2. MULTI, the chunk's commands (XADD, or DEL/HSET/RENAME), HSET of the
//     new mark, EXEC. If anyone changed the high-water hash after the
//     WATCH, EXEC does nothing and the sink starts over from step 1: a
//     new leader that recovered (a higher epoch) is then seen and the
//     write refused.
//
// EXEC runs the commands natively (about 30% less of the server's time
// than the same commands called from a Lua script) and atomically: no
// other client's command runs in between, and with appendonly the
// transaction reaches the append-only file as a whole.
type Sink struct {
	name  string
	cfg   Config
	log   *slog.Logger
	dial  dialOptions
	cn    *conn // nil until connected, and after a connection error
	tmpl  sink.Template
	hwKey string

	offset  string // the high-water seq after the last Write or Recover
	checked bool   // the server's durability settings were looked at

	tables map[tableID]*tableKeys
	// owners holds the table each key (stream, or rows' prefix) stands
	// for (sink.Names).
	owners *sink.Names
	gen    uint64 // marks the tables of the chunk being built

	// The chunk being applied, rebuilt for each chunk and reused.
	body    []byte     // every message's commands, one after the other
	msgs    []msgCmds  // per message of the chunk
	checks  []keyCheck // keys whose type is checked before the chunk
	arena   []byte     // end JSON and keys that checks point into
	queued  []int32    // per command of the transaction: its message
	tmp     []byte
	hwState highWater

	// beforeExec, when set (by tests), runs between reading the high-water
	// mark and sending the transaction.
	beforeExec func()
}

// msgCmds is where a message's commands are in Sink.body.
type msgCmds struct {
	start, end int
	seq        uint64
	source     string
	endJSON    []byte // sink.AppendEnd of its End; nil if none
	cmds       int32  // commands queued for it (0 for DDL in materialize mode)
	rename     bool   // its first command is a RENAME whose "no such key" is fine
	snapshot   bool   // a snapshot row (not counted in open:<source>)
}

// keyCheck is a key that must hold a given type (or nothing) for the
// chunk's commands to succeed.
type keyCheck struct {
	key   []byte
	want  string // "stream" or "hash"
	first int    // the first message of the chunk that writes it
}

// tableID names what a key template expands from.
type tableID struct{ db, table, source string }

// tableKeys caches, per table, what every message of it repeats.
type tableKeys struct {
	source string
	stream []byte    // stream mode: the stream's key
	xadd   [2][]byte // stream mode: XADD up to the seq value, without and with an end
	prefix []byte    // materialize mode: key_prefix + key + ":"
	gen    uint64
}

var _ sink.Sink = (*Sink)(nil)

// New returns a Redis sink for the pipeline named pipelineName. It does
// not connect: Recover does, and so does every Write (connections are
// made again after an outage).
func New(cfg Config, pipelineName string, log *slog.Logger) (*Sink, error) {
	name := cfg.Name
	if name == "" {
		name = DefaultName
	}
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("redis sink %s: %w", name, err)
	}
	if pipelineName == "" {
		return nil, fmt.Errorf("redis sink %s: the pipeline has no name; it names the sink's high-water hash (sluice:<pipeline>:hw)", name)
	}
	cfg = cfg.withDefaults()
	if log == nil {
		log = slog.Default()
	}
	tmpl, err := sink.ParseTemplate(cfg.Key)
	if err != nil { // Validate has checked it
		return nil, fmt.Errorf("redis sink %s: key %q: %w", name, cfg.Key, err)
	}
	d := dialOptions{
		addr:        cfg.Addr,
		username:    cfg.Username,
		password:    cfg.Password,
		db:          cfg.DB,
		dialTimeout: cfg.DialTimeout,
		timeout:     cfg.WriteTimeout,
	}
	if cfg.TLS.On || cfg.TLS.Set() || cfg.CAFile != "" {
		host, _, _ := net.SplitHostPort(cfg.Addr)
		block, tcfg := "tls.", cfg.TLS.Config
		if tcfg.CAFile == "" && cfg.CAFile != "" {
			block, tcfg.CAFile = "", cfg.CAFile
		}
		tc, err := tcfg.Client(block, host)
		if err != nil {
			return nil, fmt.Errorf("redis sink %s: %w", name, err)
		}
		d.tls = tc
	}
	return &Sink{
		name:   name,
		cfg:    cfg,
		log:    log.With("sink", name),
		dial:   d,
		tmpl:   tmpl,
		hwKey:  HighWaterKey(cfg.KeyPrefix, pipelineName),
		tables: map[tableID]*tableKeys{},
		owners: sink.NewNames(tmpl, "key"),
	}, nil
}

// Format is the format of the stream entries' key and value
// (sink.Formatted).
func (s *Sink) Format() codec.Format { return s.cfg.Format }

// HighWaterKey returns the key of a pipeline's high-water hash.
func HighWaterKey(keyPrefix, pipelineName string) string {
	return keyPrefix + "sluice:" + pipelineName + ":hw"
}

// Name returns the sink's name.
func (s *Sink) Name() string { return s.name }

// Close closes the connection.
func (s *Sink) Close() error {
	if s.cn == nil {
		return nil
	}
	err := s.cn.close()
	s.cn = nil
	if err != nil {
		return fmt.Errorf("redis sink %s: closing the connection to %s: %w", s.name, s.cfg.Addr, err)
	}
	return nil
}

// connect makes sure there is a connection.
func (s *Sink) connect(ctx context.Context) error {
	if s.cn != nil {
		return nil
	}
	c, err := dial(ctx, &s.dial)
	if err != nil {
		if hint := s.connectHint(err); hint != "" {
			return fmt.Errorf("redis sink %s: connecting to %s: %w; %s", s.name, s.cfg.Addr, err, hint)
		}
		return fmt.Errorf("redis sink %s: connecting to %s: %w", s.name, s.cfg.Addr, err)
	}
	s.cn = c
	return nil
}

// connectHint says what to check after a failed connection: the TLS
// settings for a handshake that failed, a client certificate when a TLS
// server ended the connection, the tls setting when a server ended a
// plain one at once, nothing more after a refusal that says what to
// check, else whether the server is up.
func (s *Sink) connectHint(err error) string {
	block, tcfg := "tls.", s.cfg.TLS.Config
	if tcfg.CAFile == "" && s.cfg.CAFile != "" {
		block, tcfg.CAFile = "", s.cfg.CAFile
	}
	switch {
	case isRespError(err):
		return ""
	case s.dial.tls != nil && tcfg.Hint(block, err) != "":
		return tcfg.Hint(block, err)
	case errors.Is(err, errTLSHandshake) && errors.Is(err, context.DeadlineExceeded):
		return "the server did not answer the TLS handshake: is this its TLS port (tls-port)? A plain port never answers one"
	case errors.Is(err, errClosedAfterHandshake) && tcfg.CertFile == "":
		return "if the server requires client certificates (tls-auth-clients yes), set tls.cert_file and tls.key_file"
	case errors.Is(err, errClosedAfterHandshake):
		return "is tls.cert_file " + tcfg.CertFile + " signed by a CA that the server trusts (tls-ca-cert-file)?"
	case errors.Is(err, errClosedAtFirstCommand):
		return "if this port takes TLS (Redis's tls-port; managed services require it), set tls"
	}
	return "is the Redis server up and reachable?"
}

// Recover fences older writers (it records epoch in the high-water hash,
// or fails with sink.ErrFenced when a higher one is there) and reports
// the high-water mark: MaxSeq and each source's last transaction end, when
// they are after offset.
func (s *Sink) Recover(ctx context.Context, epoch uint64, offset string) (sink.Recovery, error) {
	var after uint64
	if offset != "" {
		var err error
		if after, err = strconv.ParseUint(offset, 10, 64); err != nil {
			return sink.Recovery{}, fmt.Errorf("redis sink %s: the checkpoint's offset %q is not a sequence number: was it saved by another kind of sink? Give this sink another name or remove its entry from the checkpoint", s.name, offset)
		}
	}
	if err := s.connect(ctx); err != nil {
		return sink.Recovery{}, err
	}
	if !s.checked {
		if err := s.checkDurability(ctx); err != nil {
			return sink.Recovery{}, s.wrap("reading the server's settings", err)
		}
	}
	s.msgs, s.checks = s.msgs[:0], s.checks[:0]
	if err := s.apply(ctx, epoch); err != nil {
		return sink.Recovery{}, err
	}
	hw := &s.hwState
	rec := sink.Recovery{Offset: strconv.FormatUint(hw.seq, 10), Uncounted: hw.seq > 0 && !hw.counted}
	if hw.seq > after {
		rec.MaxSeq = hw.seq
	}
	for src, n := range hw.opens {
		if n > 0 {
			if rec.Partial == nil {
				rec.Partial = map[string]int{}
			}
			rec.Partial[src] = int(n)
		}
	}
	for src, e := range hw.ends {
		if e.seq <= after {
			continue
		}
		pos, err := sink.ParseEnd([]byte(e.json))
		if err != nil {
			return sink.Recovery{}, fmt.Errorf("redis sink %s: high-water hash %s: field end:%s: %w; it is written by sluice only: delete it to start over", s.name, s.hwKey, src, err)
		}
		if rec.Ends == nil {
			rec.Ends = map[string]sink.End{}
		}
		rec.Ends[src] = sink.End{Pos: *pos, Seq: e.seq}
	}
	if hw.seq < after {
		s.log.Warn("redis holds less than the checkpoint says was written: messages acknowledged by Redis were lost (a server restart without appendfsync always, a failover, or FLUSHALL); they are not sent again",
			"key", s.hwKey, "redis_seq", hw.seq, "checkpoint_seq", after)
	}
	s.offset = rec.Offset
	return rec, nil
}

// checkDurability warns when the server can lose acknowledged writes. A
// server that does not allow CONFIG (some managed services) is trusted.
func (s *Sink) checkDurability(ctx context.Context) error {
	c := s.cn
	c.out = appendCommand(c.out, "CONFIG", "GET", "append*")
	var r reply
	err := c.exchange(ctx, 0, func() (err error) {
		r, err = c.read()
		return err
	})
	if isRespError(err) {
		s.checked = true
		s.log.Debug("cannot read the server's appendonly settings", "err", err)
		return nil
	}
	if err != nil {
		return err
	}
	s.checked = true
	conf := map[string]string{}
	for i := 0; i+1 < len(r.elems); i += 2 {
		conf[r.elems[i].str] = r.elems[i+1].str
	}
	if conf["appendonly"] != "yes" || conf["appendfsync"] != "always" {
		s.log.Warn("the Redis server does not write every change to disk before answering: a crash of the server can lose batches it acknowledged, which the pipeline will not send again; set appendonly yes and appendfsync always on the server",
			"addr", s.cfg.Addr, "appendonly", conf["appendonly"], "appendfsync", conf["appendfsync"])
	}
	return nil
}

// highWater is the high-water hash:
//
//	seq             highest sequence number applied
//	epoch           highest epoch that has written (or recovered)
//	end:<source>    last transaction end of <source> (sink.AppendEnd JSON)
//	endseq:<source> the sequence number of the message that carried it
//	open:<source>   messages of <source> applied after that end (the first
//	                ones of a transaction a crash may cut; snapshot rows
//	                do not count)
//	counted         "1": the open:<source> fields are kept (a hash of an
//	                older sluice lacks them)
type highWater struct {
	seq, epoch uint64
	ends       map[string]rawEnd
	opens      map[string]uint64
	counted    bool
}

// clone returns a copy that shares no map with hw.
func (hw *highWater) clone() highWater {
	c := *hw
	c.ends, c.opens = maps.Clone(hw.ends), maps.Clone(hw.opens)
	return c
}

// apply moves hw over message m (applied after it).
func (hw *highWater) apply(m *msgCmds) {
	hw.seq = m.seq
	if m.endJSON != nil {
		if hw.ends == nil {
			hw.ends = map[string]rawEnd{}
		}
		hw.ends[m.source] = rawEnd{json: string(m.endJSON), seq: m.seq}
		if hw.opens[m.source] != 0 {
			hw.opens[m.source] = 0
		}
	} else if !m.snapshot {
		if hw.opens == nil {
			hw.opens = map[string]uint64{}
		}
		hw.opens[m.source]++
	}
	hw.counted = true
}

type rawEnd struct {
	json string
	seq  uint64
}

// parseHighWater reads HGETALL's reply: field, value, field, value...
func parseHighWater(r reply, hw *highWater) error {
	*hw = highWater{ends: hw.ends, opens: hw.opens}
	clear(hw.ends)
	clear(hw.opens)
	if r.kind != '*' || len(r.elems)%2 != 0 {
		return fmt.Errorf("unexpected reply %q", r.kind)
	}
	var endSeq map[string]uint64
	for i := 0; i < len(r.elems); i += 2 {
		f, v := r.elems[i].str, r.elems[i+1].str
		var err error
		switch {
		case f == "seq":
			hw.seq, err = strconv.ParseUint(v, 10, 64)
		case f == "epoch":
			hw.epoch, err = strconv.ParseUint(v, 10, 64)
		case f == "counted":
			hw.counted = true
		case strings.HasPrefix(f, "open:"):
			if hw.opens == nil {
				hw.opens = map[string]uint64{}
			}
			hw.opens[f[len("open:"):]], err = strconv.ParseUint(v, 10, 64)
		case strings.HasPrefix(f, "endseq:"):
			if endSeq == nil {
				endSeq = map[string]uint64{}
			}
			endSeq[f[len("endseq:"):]], err = strconv.ParseUint(v, 10, 64)
		case strings.HasPrefix(f, "end:"):
			if hw.ends == nil {
				hw.ends = map[string]rawEnd{}
			}
			hw.ends[f[len("end:"):]] = rawEnd{json: v}
		}
		if err != nil {
			return fmt.Errorf("field %s: %q is not a number", f, v)
		}
	}
	for src, e := range hw.ends {
		seq, ok := endSeq[src]
		if !ok {
			return fmt.Errorf("field end:%s has no endseq:%s", src, src)
		}
		e.seq = seq
		hw.ends[src] = e
	}
	return nil
}

// Write applies the batch in chunks of at most messages_per_script
// messages, each chunk one transaction that also advances the high-water
// mark. It returns the high-water seq as the offset.
func (s *Sink) Write(ctx context.Context, b *sink.Batch) (string, error) {
	if len(b.Messages) == 0 {
		return s.offset, nil
	}
	if err := s.connect(ctx); err != nil {
		return "", err
	}
	msgs := b.Messages
	for len(msgs) > 0 {
		n, err := s.build(msgs)
		if err != nil {
			return "", err
		}
		err = s.apply(ctx, b.Epoch)
		clear(s.msgs) // let the end JSON go
		if err != nil {
			return "", err
		}
		msgs = msgs[n:]
	}
	if s.cfg.WaitReplicas > 0 {
		c := s.cn
		c.out = appendCommand(c.out, "WAIT", strconv.Itoa(s.cfg.WaitReplicas), strconv.FormatInt(s.cfg.WriteTimeout.Milliseconds(), 10))
		var r reply
		err := c.exchange(ctx, s.cfg.WriteTimeout, func() (err error) {
			r, err = c.read()
			return err
		})
		if err != nil {
			return "", s.wrap("waiting for replicas", err)
		}
		if r.n < int64(s.cfg.WaitReplicas) {
			return "", fmt.Errorf("redis sink %s: only %d of %d replicas (wait_replicas) acknowledged seq %d within %s; the batch is on the primary but a failover now could lose it: check the replicas (INFO replication) or lower wait_replicas",
				s.name, r.n, s.cfg.WaitReplicas, b.LastSeq(), s.cfg.WriteTimeout)
		}
	}
	return s.offset, nil
}

// maxAttempts bounds how often a chunk is tried again when its EXEC found
// the high-water hash changed since the WATCH.
const maxAttempts = 10

// apply applies the chunk that build prepared (none: only the epoch is
// recorded, as Recover does) and leaves the high-water mark in s.hwState.
func (s *Sink) apply(ctx context.Context, epoch uint64) error {
	for attempt := 1; ; attempt++ {
		cut, typeErr, err := s.readMark(ctx, s.checks)
		if err != nil {
			return err
		}
		hw := &s.hwState
		if hw.epoch > epoch {
			return fmt.Errorf("redis sink %s: %w: epoch %d has written here, this writer has epoch %d (key %s on %s)", s.name, sink.ErrFenced, hw.epoch, epoch, s.hwKey, s.cfg.Addr)
		}
		done, err := s.exec(ctx, epoch, cut)
		if err != nil {
			return err
		}
		if done {
			s.offset = strconv.FormatUint(hw.seq, 10)
			return typeErr
		}
		if attempt == maxAttempts {
			return fmt.Errorf("redis sink %s: the high-water hash %s changed under this writer %d times in a row: is another sluice writing with the same pipeline name and epoch?", s.name, s.hwKey, attempt)
		}
	}
}

// readMark watches the high-water hash, reads it into s.hwState and
// reads the types of the checked keys. It returns how many messages of the
// chunk can be applied: all, or those before the first one whose key
// holds the wrong type, with an error saying so.
//
// Only the high-water hash is watched: consumers that trim or delete
// entries of the streams must not make the sink's transactions fail. A
// key whose type changes between TYPE and EXEC is caught by repair.
func (s *Sink) readMark(ctx context.Context, checks []keyCheck) (int, error, error) {
	c := s.cn
	if c.watching {
		c.out = appendCommand(c.out, "UNWATCH")
	}
	c.out = appendCommand(c.out, "WATCH", s.hwKey)
	c.out = appendCommand(c.out, "HGETALL", s.hwKey)
	for _, k := range checks {
		c.out = appendArray(c.out, 2)
		c.out = appendBulkString(c.out, "TYPE")
		c.out = appendBulk(c.out, k.key)
	}
	cut := len(s.msgs)
	var typeErr, markErr error
	err := c.exchange(ctx, 0, func() error {
		if c.watching {
			if err := c.skip(); err != nil {
				return err
			}
			c.watching = false
		}
		if _, err := c.read(); err != nil { // WATCH
			return err
		}
		c.watching = true
		r, err := c.read()
		if isRespError(err) {
			// The replies after it are still to be read.
			markErr = fmt.Errorf("redis sink %s: reading the high-water hash %s: Redis at %s answered: %w", s.name, s.hwKey, s.cfg.Addr, err)
		} else if err != nil {
			return err
		} else if err := parseHighWater(r, &s.hwState); err != nil {
			markErr = fmt.Errorf("redis sink %s: high-water hash %s: %w; it is written by sluice only: delete it to start over", s.name, s.hwKey, err)
		}
		for _, k := range checks {
			r, err := c.read()
			if err != nil {
				return err
			}
			if r.str != "none" && r.str != k.want && k.first < cut {
				cut = k.first
				typeErr = fmt.Errorf("redis sink %s: applying seq %d failed: WRONGTYPE key %q holds a %s, not a %s: delete or rename that key, or choose other key names (key, key_prefix); the messages before it in the batch were applied",
					s.name, s.msgs[k.first].seq, k.key, r.str, k.want)
			}
		}
		return nil
	})
	if err != nil {
		return 0, nil, s.wrap("reading the high-water hash", err)
	}
	return cut, typeErr, markErr
}

// exec sends the transaction of the chunk's first cut messages that the
// mark does not cover, with the new mark; done is false when EXEC did
// nothing because a watched key changed.
func (s *Sink) exec(ctx context.Context, epoch uint64, cut int) (done bool, err error) {
	c := s.cn
	hw := &s.hwState
	old := hw.clone()
	c.out = appendCommand(c.out, "MULTI")
	s.queued = s.queued[:0]
	applied := 0
	for i := range s.msgs[:cut] {
		m := &s.msgs[i]
		seq := m.seq
		if seq <= hw.seq {
			continue
		}
		c.out = append(c.out, s.body[m.start:m.end]...)
		for j := int32(0); j < m.cmds; j++ {
			s.queued = append(s.queued, int32(i))
		}
		hw.apply(m)
		applied++
	}
	if applied == 0 && epoch == hw.epoch {
		c.out = c.out[:0] // nothing to write; the WATCH is undone next time
		return true, nil
	}
	hw.epoch = epoch
	c.out = s.appendMark(c.out, hw, &old)
	trims := 0
	if s.cfg.MaxLen > 0 && applied > 0 { // stream mode: the checks are the streams
		// Trimming each stream once per transaction costs nothing
		// measurable; XADD MAXLEN on every message cost 10-15%.
		for _, k := range s.checks {
			c.out = appendArray(c.out, 5)
			c.out = appendBulkString(c.out, "XTRIM")
			c.out = appendBulk(c.out, k.key)
			c.out = appendBulkString(c.out, "MAXLEN")
			c.out = appendBulkString(c.out, "~")
			c.out = appendBulkUint(c.out, uint64(s.cfg.MaxLen))
			trims++
		}
	}
	c.out = appendCommand(c.out, "EXEC")
	if s.beforeExec != nil {
		s.beforeExec()
	}
	var (
		aborted bool
		execErr error // EXEC refused: nothing was applied
		failed  = -1  // the first command that failed
		cmdErr  error
	)
	err = c.exchange(ctx, 0, func() error {
		if err := c.skip(); err != nil { // MULTI
			return err
		}
		var queueErr error
		for range len(s.queued) + 1 + trims {
			if err := c.skip(); err != nil {
				if !isRespError(err) {
					return err
				}
				if queueErr == nil {
					queueErr = err
				}
			}
		}
		n, err := c.arrayHeader()
		if isRespError(err) {
			execErr = err
			if queueErr != nil {
				execErr = queueErr // EXECABORT: the refused command says why
			}
			return nil
		}
		if err != nil {
			return err
		}
		c.watching = false
		if n < 0 {
			aborted = true
			return nil
		}
		if n != int64(len(s.queued)+1+trims) {
			return fmt.Errorf("%w: EXEC answered %d replies for %d commands", errProtocol, n, len(s.queued)+1+trims)
		}
		for i := range n {
			err := c.skip()
			if err == nil || failed >= 0 && isRespError(err) {
				continue
			}
			if !isRespError(err) {
				return err
			}
			if i < int64(len(s.queued)) {
				if m := &s.msgs[s.queued[i]]; m.rename && (i == 0 || s.queued[i-1] != s.queued[i]) && strings.HasPrefix(err.Error(), "ERR no such key") {
					continue // RENAME of a row hash that is not there
				}
			}
			failed, cmdErr = int(i), err
		}
		return nil
	})
	if err != nil {
		*hw = old
		return false, s.wrap(s.chunkName(), err)
	}
	if aborted {
		*hw = old
		return false, nil
	}
	if execErr != nil {
		*hw = old
		// The connection may still be in the transaction: start afresh.
		_ = c.close()
		s.cn = nil
		return false, fmt.Errorf("redis sink %s: %s: Redis at %s refused the transaction: %w", s.name, s.chunkName(), s.cfg.Addr, execErr)
	}
	if failed > len(s.queued) {
		return true, fmt.Errorf("redis sink %s: trimming the streams to max_len: Redis at %s answered: %w", s.name, s.cfg.Addr, cmdErr)
	}
	if failed == len(s.queued) {
		*hw = old
		return false, fmt.Errorf("redis sink %s: storing the high-water mark in %s: Redis at %s answered: %w; the messages were applied and will be written again", s.name, s.hwKey, s.cfg.Addr, cmdErr)
	}
	if failed >= 0 {
		return true, s.repair(ctx, failed, cmdErr, &old)
	}
	return true, nil
}

// chunkName says what the transaction being sent does, for errors.
func (s *Sink) chunkName() string {
	if len(s.msgs) == 0 {
		return "recording the epoch in the high-water hash " + s.hwKey
	}
	return fmt.Sprintf("writing seq %d-%d", s.msgs[0].seq, s.msgs[len(s.msgs)-1].seq)
}

// appendMark appends the HSET that stores hw; old is the mark before the
// transaction, for the ends that did not change.
func (s *Sink) appendMark(dst []byte, hw, old *highWater) []byte {
	n := 0
	for src, e := range hw.ends {
		if o, ok := old.ends[src]; !ok || o != e {
			n += 4
		}
	}
	for src, c := range hw.opens {
		if o, ok := old.opens[src]; !ok || o != c {
			n += 2
		}
	}
	if hw.counted && !old.counted {
		n += 2
	}
	dst = appendArray(dst, 6+n)
	dst = appendBulkString(dst, "HSET")
	dst = appendBulkString(dst, s.hwKey)
	dst = appendBulkString(dst, "seq")
	dst = appendBulkUint(dst, hw.seq)
	dst = appendBulkString(dst, "epoch")
	dst = appendBulkUint(dst, hw.epoch)
	if hw.counted && !old.counted {
		dst = appendBulkString(dst, "counted")
		dst = appendBulkString(dst, "1")
	}
	for src, c := range hw.opens {
		if o, ok := old.opens[src]; ok && o == c {
			continue
		}
		dst = appendBulkString(dst, "open:"+src)
		dst = appendBulkUint(dst, c)
	}
	for src, e := range hw.ends {
		if o, ok := old.ends[src]; ok && o == e {
			continue
		}
		dst = appendBulkString(dst, "end:"+src)
		dst = appendBulkString(dst, e.json)
		dst = appendBulkString(dst, "endseq:"+src)
		dst = appendBulkUint(dst, e.seq)
	}
	return dst
}

// repair handles a command that failed inside EXEC, which the type checks
// before it make unlikely (a key would have to change its type in
// between): Redis does not undo the others, so the mark stored by the same
// transaction covers a message that is not there. The mark is set back to
// just before that message, if it is still the one this transaction
// stored, so that the message is written again; the messages after it in
// the transaction are then written a second time.
func (s *Sink) repair(ctx context.Context, failed int, cmdErr error, old *highWater) error {
	mi := int(s.queued[failed])
	seq := s.msgs[mi].seq
	hw := &s.hwState
	back := old.clone()
	back.epoch = hw.epoch
	if back.ends == nil {
		back.ends = map[string]rawEnd{}
	}
	for i := range s.msgs[:mi] {
		m := &s.msgs[i]
		if m.seq <= old.seq {
			continue
		}
		back.apply(m)
	}
	failure := fmt.Sprintf("applying seq %d failed: Redis at %s answered: %v", seq, s.cfg.Addr, cmdErr)
	wantSeq, wantEpoch := hw.seq, hw.epoch
	if _, _, err := s.readMark(ctx, nil); err != nil {
		return fmt.Errorf("redis sink %s: %s; then reading the high-water mark to set it back to seq %d: %w; seq %d may be missing from Redis", s.name, failure, back.seq, err, seq)
	}
	if hw.seq != wantSeq || hw.epoch != wantEpoch {
		return fmt.Errorf("redis sink %s: %s; the high-water mark changed meanwhile (seq %d, epoch %d) and is not set back: seq %d may be missing from Redis", s.name, failure, hw.seq, hw.epoch, seq)
	}
	for src := range hw.opens {
		if _, ok := back.opens[src]; !ok {
			if back.opens == nil {
				back.opens = map[string]uint64{}
			}
			back.opens[src] = 0
		}
	}
	c := s.cn
	c.out = appendCommand(c.out, "MULTI")
	c.out = s.appendMark(c.out, &back, hw)
	var gone []string
	for src := range hw.ends {
		if _, ok := back.ends[src]; !ok {
			gone = append(gone, src)
		}
	}
	if len(gone) > 0 {
		c.out = appendArray(c.out, 2+2*len(gone))
		c.out = appendBulkString(c.out, "HDEL")
		c.out = appendBulkString(c.out, s.hwKey)
		for _, src := range gone {
			c.out = appendBulkString(c.out, "end:"+src)
			c.out = appendBulkString(c.out, "endseq:"+src)
		}
	}
	c.out = appendCommand(c.out, "EXEC")
	n := 2 // MULTI, HSET
	if len(gone) > 0 {
		n++
	}
	var aborted bool
	err := c.exchange(ctx, 0, func() error {
		for range n {
			if err := c.skip(); err != nil {
				return err
			}
		}
		l, err := c.arrayHeader()
		if err != nil {
			return err
		}
		c.watching = false
		if aborted = l < 0; aborted {
			return nil
		}
		for range l {
			if err := c.skip(); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return s.wrap(fmt.Sprintf("%s; then setting the high-water mark back to seq %d", failure, back.seq), err)
	}
	if aborted {
		return fmt.Errorf("redis sink %s: %s; the high-water mark changed meanwhile and is not set back: seq %d may be missing from Redis", s.name, failure, seq)
	}
	*hw = back
	return fmt.Errorf("redis sink %s: %s; the messages after it in the same transaction were applied and will be written again", s.name, failure)
}

// isRespError tells whether err is an error reply of the server.
func isRespError(err error) bool {
	if err == nil {
		return false
	}
	if _, ok := err.(respError); ok {
		return true
	}
	var re respError
	return errors.As(err, &re)
}

// wrap gives errors their context; an error other than Redis's answer
// drops the connection (the next Write or Recover makes a new one).
func (s *Sink) wrap(what string, err error) error {
	if isRespError(err) {
		return fmt.Errorf("redis sink %s: %s: Redis at %s answered: %w", s.name, what, s.cfg.Addr, err)
	}
	if s.cn != nil {
		_ = s.cn.close()
		s.cn = nil
	}
	return fmt.Errorf("redis sink %s: %s: %w (is the Redis server at %s up and reachable?)", s.name, what, err, s.cfg.Addr)
}

// ---- building a chunk ----

// Stream entry field names besides the sink.Header* ones.
const (
	FieldKey   = "key"
	FieldValue = "value"
)

var (
	bulkFieldKey   = appendBulkString(nil, FieldKey)
	bulkFieldValue = appendBulkString(nil, FieldValue)
	bulkFieldEnd   = appendBulkString(nil, sink.HeaderEnd)
)

// table returns the cached keys of a message's table. Two tables whose
// names make one key (a "{db}.{table}" of db "a.b", table "c" and of db
// "a", table "b.c") are an error wrapping sink.ErrPermanent (sink.Names).
func (s *Sink) table(m *sink.Message) (*tableKeys, error) {
	id := tableID{m.DB, m.Table, m.Source}
	if t, ok := s.tables[id]; ok {
		return t, nil
	}
	k := s.tmpl.Append([]byte(s.cfg.KeyPrefix), m.DB, m.Table, m.Source, nil)
	if err := s.owners.Claim(string(k), m.Source, m.DB, m.Table); err != nil {
		return nil, err
	}
	t := &tableKeys{source: m.Source, stream: k, prefix: append(k[:len(k):len(k)], ':')}
	for i, withEnd := range []bool{false, true} {
		n := 9
		if withEnd {
			n += 2
		}
		b := appendArray(nil, n)
		b = appendBulkString(b, "XADD")
		b = appendBulk(b, k)
		b = appendBulkString(b, "*")
		b = appendBulkString(b, sink.HeaderSeq)
		t.xadd[i] = b
	}
	s.tables[id] = t
	return t, nil
}

// build prepares the commands of as many of msgs as one transaction takes,
// and returns how many.
func (s *Sink) build(msgs []sink.Message) (int, error) {
	s.body, s.arena = s.body[:0], s.arena[:0]
	s.msgs, s.checks = s.msgs[:0], s.checks[:0]
	s.gen++
	n := 0
	for ; n < len(msgs) && n < s.cfg.MessagesPerScript; n++ {
		if n > 0 && len(s.body) > maxScriptBytes {
			break
		}
		m := &msgs[n]
		t, err := s.table(m)
		if err != nil {
			return 0, err
		}
		mc := msgCmds{start: len(s.body), seq: m.Seq, source: m.Source, snapshot: m.Snapshot}
		if m.End != nil {
			start := len(s.arena)
			s.arena = sink.AppendEnd(s.arena, m.End)
			mc.endJSON = s.arenaBytes(start)
		}
		if s.cfg.Mode == ModeMaterialize {
			if err := s.appendRow(&mc, m, t, n); err != nil {
				return 0, err
			}
		} else {
			s.appendEntry(&mc, m, t, n)
		}
		mc.end = len(s.body)
		s.msgs = append(s.msgs, mc)
	}
	return n, nil
}

// arenaBytes returns the arena's bytes from start on, capped so that later
// appends cannot touch them (an append that grows the arena leaves them
// where they are).
func (s *Sink) arenaBytes(start int) []byte {
	return s.arena[start:len(s.arena):len(s.arena)]
}

// appendEntry appends a message's XADD.
func (s *Sink) appendEntry(mc *msgCmds, m *sink.Message, t *tableKeys, i int) {
	if t.gen != s.gen {
		t.gen = s.gen
		s.checks = append(s.checks, keyCheck{key: t.stream, want: "stream", first: i})
	}
	if mc.endJSON != nil {
		s.body = append(s.body, t.xadd[1]...)
	} else {
		s.body = append(s.body, t.xadd[0]...)
	}
	s.body = appendBulkUint(s.body, m.Seq)
	s.body = append(s.body, bulkFieldKey...)
	s.body = appendBulk(s.body, m.Key)
	s.body = append(s.body, bulkFieldValue...)
	s.body = appendBulk(s.body, m.Value)
	if mc.endJSON != nil {
		s.body = append(s.body, bulkFieldEnd...)
		s.body = appendBulk(s.body, mc.endJSON)
	}
	mc.cmds = 1
}

// appendRow appends a message's commands in materialize mode:
//
//	insert, snapshot read, update with the full row: DEL the old key (if
//	the primary key changed) and the key, HSET every column
//	update with a partial row image: RENAME the old key to the new one (if
//	the primary key changed; "no such key" is fine), HSET the columns
//	present
//	delete: DEL
//	DDL: nothing (only the high-water mark moves)
func (s *Sink) appendRow(mc *msgCmds, m *sink.Message, t *tableKeys, i int) error {
	switch m.Op {
	case binlog.OpDelete:
		s.body = appendArray(s.body, 2)
		s.body = appendBulkString(s.body, "DEL")
		s.body = appendBulk2(s.body, t.prefix, m.Key)
		mc.cmds = 1
		return nil
	case binlog.OpInsert, binlog.OpUpdate, binlog.OpRead:
	default: // DDL: no row to keep
		return nil
	}
	ch := m.Change
	if ch == nil || ch.Table == nil {
		return fmt.Errorf("redis sink %s: materialize mode needs the decoded row of every change, but message seq %d (%s %s.%s) has none", s.name, m.Seq, m.Op, m.DB, m.Table)
	}
	cols := ch.Table.Columns
	var oldKey []byte // the before image's key, when the primary key changed
	if m.Op == binlog.OpUpdate && len(ch.Before) > 0 {
		s.tmp = codec.AppendKey(s.tmp[:0], ch.Table, ch.Before)
		if len(s.tmp) > 2 && !bytes.Equal(s.tmp, m.Key) { // "{}": the before image lacks the key
			oldKey = s.tmp
		}
	}
	present := 0
	for i := range ch.After {
		if i < len(cols) && !ch.After[i].IsAbsent() {
			present++
		}
	}
	if m.Op == binlog.OpUpdate && present < len(cols) {
		// A partial (MINIMAL) after image: update what it has. The hash
		// (and the old one, renamed to it) must be a hash or nothing.
		start := len(s.arena)
		s.arena = append(append(s.arena, t.prefix...), m.Key...)
		s.checks = append(s.checks, keyCheck{key: s.arenaBytes(start), want: "hash", first: i})
		if oldKey != nil {
			start := len(s.arena)
			s.arena = append(append(s.arena, t.prefix...), oldKey...)
			s.checks = append(s.checks, keyCheck{key: s.arenaBytes(start), want: "hash", first: i})
			s.body = appendArray(s.body, 3)
			s.body = appendBulkString(s.body, "RENAME")
			s.body = appendBulk2(s.body, t.prefix, oldKey)
			s.body = appendBulk2(s.body, t.prefix, m.Key)
			mc.cmds++
			mc.rename = true
		}
	} else {
		// Replace the row: DEL, then HSET, which cannot fail on a key just
		// deleted.
		if oldKey != nil {
			s.body = appendArray(s.body, 3)
			s.body = appendBulkString(s.body, "DEL")
			s.body = appendBulk2(s.body, t.prefix, oldKey)
		} else {
			s.body = appendArray(s.body, 2)
			s.body = appendBulkString(s.body, "DEL")
		}
		s.body = appendBulk2(s.body, t.prefix, m.Key)
		mc.cmds++
	}
	if present == 0 {
		return nil
	}
	s.body = appendArray(s.body, 2+2*present)
	s.body = appendBulkString(s.body, "HSET")
	s.body = appendBulk2(s.body, t.prefix, m.Key)
	for i := range ch.After {
		if i >= len(cols) || ch.After[i].IsAbsent() {
			continue
		}
		s.body = appendBulkString(s.body, cols[i].Name)
		s.tmp = codec.AppendValue(s.tmp[:0], &cols[i], ch.After[i])
		s.body = appendBulk(s.body, s.tmp)
	}
	mc.cmds++
	return nil
}
