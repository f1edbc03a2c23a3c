package redis

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strconv"
	"strings"

	goredis "github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"

	"github.com/sluice-cdc/sluice/binlog"
	"github.com/sluice-cdc/sluice/codec"
	"github.com/sluice-cdc/sluice/pipeline"
)

// Sink writes a pipeline's messages to Redis. It is used from one
// goroutine at a time (the pipeline's writer).
type Sink struct {
	name  string
	cfg   Config
	log   *slog.Logger
	opts  *goredis.Options
	c     *goredis.Client
	tmpl  keyTemplate
	hwKey string

	offset  string // the high-water seq after the last Write or Recover
	checked bool   // the server's durability settings were looked at
	// broken is set by a connection error: the next Recover starts a new
	// client, whose pool has not learnt to refuse dialing (go-redis fails
	// fast for a while after failed dials, until a probe succeeds).
	broken bool

	tables map[tableID]*tableKeys

	// Reused from call to call: the command and the bytes its arguments
	// point into.
	args, keys, argv []any
	arena            []byte
	tmp              []byte
}

// tableID names what a key template expands from.
type tableID struct{ db, table, source string }

// tableKeys caches, per table, what every message of it repeats, boxed
// once.
type tableKeys struct {
	stream any    // stream mode: the stream's key
	prefix []byte // materialize mode: key_prefix + key + ":"
	source any
}

var _ pipeline.Sink = (*Sink)(nil)

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
	tmpl, err := parseKeyTemplate(cfg.Key)
	if err != nil { // Validate has checked it
		return nil, fmt.Errorf("redis sink %s: key %q: %w", name, cfg.Key, err)
	}
	opts := &goredis.Options{
		Addr:     cfg.Addr,
		Username: cfg.Username,
		Password: cfg.Password,
		DB:       cfg.DB,
		// RESP2 and no CLIENT SETINFO / maintenance notifications: works
		// the same on every server from Redis 6 on.
		Protocol:                 2,
		DisableIdentity:          true,
		MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled},
		// The pipeline retries a failed Write itself, after Recover, so a
		// failure is reported at once rather than retried here.
		MaxRetries:            -1,
		DialerRetries:         1,
		DialTimeout:           cfg.DialTimeout,
		ReadTimeout:           cfg.WriteTimeout,
		WriteTimeout:          cfg.WriteTimeout,
		ContextTimeoutEnabled: true,
		// One writer: one connection, which WAIT needs too (it counts the
		// writes of its own connection).
		PoolSize: 1,
	}
	if cfg.TLS || cfg.CAFile != "" {
		host, _, _ := net.SplitHostPort(cfg.Addr)
		tc := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: host}
		if cfg.CAFile != "" {
			pem, err := os.ReadFile(cfg.CAFile)
			if err != nil {
				return nil, fmt.Errorf("redis sink %s: ca_file: %w", name, err)
			}
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(pem) {
				return nil, fmt.Errorf("redis sink %s: ca_file %s holds no PEM certificate", name, cfg.CAFile)
			}
			tc.RootCAs = pool
		}
		opts.TLSConfig = tc
	}
	return &Sink{
		name:   name,
		cfg:    cfg,
		log:    log.With("sink", name),
		opts:   opts,
		c:      goredis.NewClient(opts),
		tmpl:   tmpl,
		hwKey:  HighWaterKey(cfg.KeyPrefix, pipelineName),
		tables: map[tableID]*tableKeys{},
	}, nil
}

// HighWaterKey returns the key of a pipeline's high-water hash.
func HighWaterKey(keyPrefix, pipelineName string) string {
	return keyPrefix + "sluice:" + pipelineName + ":hw"
}

// Name returns the sink's name.
func (s *Sink) Name() string { return s.name }

// Close closes the connection.
func (s *Sink) Close() error {
	if err := s.c.Close(); err != nil {
		return fmt.Errorf("redis sink %s: closing the connection to %s: %w", s.name, s.cfg.Addr, err)
	}
	return nil
}

// Recover fences older writers (it records epoch in the high-water hash,
// or fails with pipeline.ErrFenced when a higher one is there) and reports
// the high-water mark: MaxSeq and each source's last transaction end, when
// they are after offset.
func (s *Sink) Recover(ctx context.Context, epoch uint64, offset string) (pipeline.Recovery, error) {
	var after uint64
	if offset != "" {
		var err error
		if after, err = strconv.ParseUint(offset, 10, 64); err != nil {
			return pipeline.Recovery{}, fmt.Errorf("redis sink %s: the checkpoint's offset %q is not a sequence number: was it saved by another kind of sink? Give this sink another name or remove its entry from the checkpoint", s.name, offset)
		}
	}
	if s.broken {
		_ = s.c.Close()
		s.c, s.broken = goredis.NewClient(s.opts), false
	}
	if !s.checked {
		s.checkDurability(ctx)
	}
	res, err := s.eval(ctx, fenceScript, []any{s.hwKey}, []any{strconv.FormatUint(epoch, 10)})
	if err != nil {
		return pipeline.Recovery{}, s.wrap("recovering", err)
	}
	hw, err := parseHighWater(res)
	if err != nil {
		return pipeline.Recovery{}, fmt.Errorf("redis sink %s: high-water hash %s: %w; it is written by sluice only: delete it to start over", s.name, s.hwKey, err)
	}
	rec := pipeline.Recovery{Offset: strconv.FormatUint(hw.seq, 10)}
	if hw.seq > after {
		rec.MaxSeq = hw.seq
	}
	for src, e := range hw.ends {
		if e.Seq > after {
			if rec.Ends == nil {
				rec.Ends = map[string]pipeline.End{}
			}
			rec.Ends[src] = e
		}
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
func (s *Sink) checkDurability(ctx context.Context) {
	conf, err := s.c.ConfigGet(ctx, "append*").Result()
	if err != nil {
		var rerr goredis.Error
		if errors.As(err, &rerr) {
			s.checked = true
			s.log.Debug("cannot read the server's appendonly settings", "err", err)
		}
		return // a connection error: Recover will report it
	}
	s.checked = true
	if conf["appendonly"] != "yes" || conf["appendfsync"] != "always" {
		s.log.Warn("the Redis server does not write every change to disk before answering: a crash of the server can lose batches it acknowledged, which the pipeline will not send again; set appendonly yes and appendfsync always on the server",
			"addr", s.cfg.Addr, "appendonly", conf["appendonly"], "appendfsync", conf["appendfsync"])
	}
}

type highWater struct {
	seq, epoch uint64
	ends       map[string]pipeline.End
}

// parseHighWater reads HGETALL's reply: field, value, field, value...
func parseHighWater(res any) (highWater, error) {
	var hw highWater
	list, ok := res.([]any)
	if !ok || len(list)%2 != 0 {
		return hw, fmt.Errorf("unexpected reply %T", res)
	}
	endJSON := map[string]string{}
	endSeq := map[string]uint64{}
	for i := 0; i < len(list); i += 2 {
		f, _ := list[i].(string)
		v, _ := list[i+1].(string)
		var err error
		switch {
		case f == "seq":
			hw.seq, err = strconv.ParseUint(v, 10, 64)
		case f == "epoch":
			hw.epoch, err = strconv.ParseUint(v, 10, 64)
		case strings.HasPrefix(f, "endseq:"):
			endSeq[f[len("endseq:"):]], err = strconv.ParseUint(v, 10, 64)
		case strings.HasPrefix(f, "end:"):
			endJSON[f[len("end:"):]] = v
		}
		if err != nil {
			return hw, fmt.Errorf("field %s: %q is not a number", f, v)
		}
	}
	for src, j := range endJSON {
		seq, ok := endSeq[src]
		if !ok {
			return hw, fmt.Errorf("field end:%s has no endseq:%s", src, src)
		}
		pos, err := pipeline.ParseEnd([]byte(j))
		if err != nil {
			return hw, fmt.Errorf("field end:%s: %w", src, err)
		}
		if hw.ends == nil {
			hw.ends = map[string]pipeline.End{}
		}
		hw.ends[src] = pipeline.End{Pos: *pos, Seq: seq}
	}
	return hw, nil
}

// Write applies the batch in chunks of at most messages_per_script
// messages, each chunk one atomic script call that also advances the
// high-water mark. It returns the high-water seq as the offset.
func (s *Sink) Write(ctx context.Context, b *pipeline.Batch) (string, error) {
	epoch := strconv.FormatUint(b.Epoch, 10)
	msgs := b.Messages
	for len(msgs) > 0 {
		var (
			n   int
			err error
			sc  script
		)
		if s.cfg.Mode == ModeMaterialize {
			sc = materializeScript
			n, err = s.buildMaterialize(epoch, msgs)
		} else {
			sc = streamScript
			n = s.buildStream(epoch, msgs)
		}
		if err != nil {
			return "", err
		}
		res, err := s.eval(ctx, sc, s.keys, s.argv)
		clear(s.keys) // let the message bytes go
		clear(s.argv)
		if err != nil {
			return "", s.wrap(fmt.Sprintf("writing seq %d-%d", msgs[0].Seq, msgs[n-1].Seq), err)
		}
		last, ok := res.(string)
		if !ok {
			return "", fmt.Errorf("redis sink %s: the script answered %T %v, not the high-water seq", s.name, res, res)
		}
		s.offset = last
		msgs = msgs[n:]
	}
	if s.cfg.WaitReplicas > 0 && len(b.Messages) > 0 {
		got, err := s.c.Wait(ctx, s.cfg.WaitReplicas, s.cfg.WriteTimeout).Result()
		if err != nil {
			return "", s.wrap("waiting for replicas", err)
		}
		if got < int64(s.cfg.WaitReplicas) {
			return "", fmt.Errorf("redis sink %s: only %d of %d replicas (wait_replicas) acknowledged seq %d within %s; the batch is on the primary but a failover now could lose it: check the replicas (INFO replication) or lower wait_replicas",
				s.name, got, s.cfg.WaitReplicas, b.LastSeq(), s.cfg.WriteTimeout)
		}
	}
	return s.offset, nil
}

// table returns the cached keys of a message's table.
func (s *Sink) table(m *pipeline.Message) *tableKeys {
	id := tableID{m.DB, m.Table, m.Source}
	if t, ok := s.tables[id]; ok {
		return t
	}
	k := s.tmpl.appendKey([]byte(s.cfg.KeyPrefix), m.DB, m.Table, m.Source)
	t := &tableKeys{stream: string(k), prefix: append(k, ':'), source: m.Source}
	s.tables[id] = t
	return t
}

// bytesOf returns the arena's bytes from start on, capped so that later
// appends cannot touch them.
func (s *Sink) bytesOf(start int) []byte {
	return s.arena[start:len(s.arena):len(s.arena)]
}

// buildStream fills keys and argv for the stream script with as many of
// msgs as one call takes, and returns how many.
func (s *Sink) buildStream(epoch string, msgs []pipeline.Message) int {
	s.keys = append(s.keys[:0], s.hwKey)
	maxLen := "0"
	if s.cfg.MaxLen > 0 {
		maxLen = strconv.FormatInt(s.cfg.MaxLen, 10)
	}
	s.argv = append(s.argv[:0], epoch, maxLen)
	s.arena = s.arena[:0]
	size, n := 0, 0
	for ; n < len(msgs) && n < s.cfg.MessagesPerScript; n++ {
		m := &msgs[n]
		size += len(m.Key) + len(m.Value) + 64
		if n > 0 && size > maxScriptBytes {
			break
		}
		t := s.table(m)
		start := len(s.arena)
		s.arena = strconv.AppendUint(s.arena, m.Seq, 10)
		seq := s.bytesOf(start)
		var end any = ""
		if m.End != nil {
			start = len(s.arena)
			s.arena = pipeline.AppendEnd(s.arena, m.End)
			end = s.bytesOf(start)
		}
		s.keys = append(s.keys, t.stream)
		s.argv = append(s.argv, seq, t.source, m.Key, m.Value, end)
	}
	return n
}

// buildMaterialize fills keys and argv for the materialize script with as
// many of msgs as one call takes, and returns how many.
func (s *Sink) buildMaterialize(epoch string, msgs []pipeline.Message) (int, error) {
	s.keys = append(s.keys[:0], s.hwKey)
	s.argv = append(s.argv[:0], epoch)
	s.arena = s.arena[:0]
	size, n := 0, 0
	for ; n < len(msgs) && n < s.cfg.MessagesPerScript; n++ {
		m := &msgs[n]
		size += len(m.Key) + len(m.Value) + 64 // about the row's size, for cutting chunks
		if n > 0 && size > maxScriptBytes {
			break
		}
		start := len(s.arena)
		s.arena = strconv.AppendUint(s.arena, m.Seq, 10)
		seq := s.bytesOf(start)
		var end any = ""
		if m.End != nil {
			start = len(s.arena)
			s.arena = pipeline.AppendEnd(s.arena, m.End)
			end = s.bytesOf(start)
		}
		if err := s.appendRow(m, seq, end); err != nil {
			return 0, err
		}
	}
	return n, nil
}

// appendRow adds one message to a materialize call.
func (s *Sink) appendRow(m *pipeline.Message, seq, end any) error {
	t := s.table(m)
	switch m.Op {
	case binlog.OpDelete:
		key := s.rowKey(t, m.Key)
		s.keys = append(s.keys, key, key)
		s.argv = append(s.argv, seq, t.source, end, "D", 0)
		return nil
	case binlog.OpInsert, binlog.OpUpdate, binlog.OpRead:
	default: // DDL: no row to keep; only the high-water mark moves
		s.keys = append(s.keys, s.hwKey, s.hwKey)
		s.argv = append(s.argv, seq, t.source, end, "S", 0)
		return nil
	}
	ch := m.Change
	if ch == nil || ch.Table == nil {
		return fmt.Errorf("redis sink %s: materialize mode needs the decoded row of every change, but message seq %d (%s %s.%s) has none", s.name, m.Seq, m.Op, m.DB, m.Table)
	}
	cols := ch.Table.Columns
	key := s.rowKey(t, m.Key)
	old := key
	if m.Op == binlog.OpUpdate && len(ch.Before) > 0 {
		s.tmp = codec.AppendKey(s.tmp[:0], ch.Table, ch.Before)
		if len(s.tmp) > 2 && !bytes.Equal(s.tmp, m.Key) { // "{}": the before image lacks the key
			old = s.rowKey(t, s.tmp)
		}
	}
	action := "R"
	present := 0
	for i := range ch.After {
		if i < len(cols) && !ch.After[i].IsAbsent() {
			present++
		}
	}
	if m.Op == binlog.OpUpdate && present < len(cols) {
		action = "M" // a partial (MINIMAL) after image: update what it has
	}
	s.keys = append(s.keys, key, old)
	s.argv = append(s.argv, seq, t.source, end, action, present)
	for i := range ch.After {
		if i >= len(cols) || ch.After[i].IsAbsent() {
			continue
		}
		start := len(s.arena)
		s.arena = codec.AppendValue(s.arena, &cols[i], ch.After[i])
		s.argv = append(s.argv, cols[i].Name, s.bytesOf(start))
	}
	return nil
}

// rowKey returns a row's hash key: the table's prefix and the key JSON.
func (s *Sink) rowKey(t *tableKeys, keyJSON []byte) []byte {
	start := len(s.arena)
	s.arena = append(s.arena, t.prefix...)
	s.arena = append(s.arena, keyJSON...)
	return s.bytesOf(start)
}

// eval runs a script with EVALSHA, and with EVAL when the server does not
// have it cached (first use, or after a restart or SCRIPT FLUSH).
func (s *Sink) eval(ctx context.Context, sc script, keys, argv []any) (any, error) {
	args := append(s.args[:0], "evalsha", sc.sha, len(keys))
	args = append(args, keys...)
	args = append(args, argv...)
	s.args = args
	res, err := s.c.Do(ctx, args...).Result()
	if err != nil && strings.HasPrefix(err.Error(), "NOSCRIPT") {
		args[0], args[1] = "eval", sc.src
		res, err = s.c.Do(ctx, args...).Result()
	}
	clear(args)
	return res, err
}

// wrap turns a script's FENCED refusal into pipeline.ErrFenced and gives
// other errors their context.
func (s *Sink) wrap(what string, err error) error {
	var rerr goredis.Error
	if !errors.As(err, &rerr) {
		s.broken = true
	}
	if errors.As(err, &rerr) && strings.HasPrefix(rerr.Error(), "FENCED") {
		return fmt.Errorf("redis sink %s: %w: %s (key %s on %s)", s.name, pipeline.ErrFenced, strings.TrimPrefix(rerr.Error(), "FENCED "), s.hwKey, s.cfg.Addr)
	}
	if errors.As(err, &rerr) {
		return fmt.Errorf("redis sink %s: %s: Redis at %s answered: %w", s.name, what, s.cfg.Addr, err)
	}
	return fmt.Errorf("redis sink %s: %s: %w (is the Redis server at %s up and reachable?)", s.name, what, err, s.cfg.Addr)
}
