package nats

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"time"

	gonats "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sluice-cdc/sluice/codec"
	"github.com/sluice-cdc/sluice/position"
	"github.com/sluice-cdc/sluice/sink"
)

// JetStream error codes the sink tells apart. The server answers
// "wrong last sequence" (10071; 10164 on replicated streams) to a message
// whose Nats-Expected-Last-Sequence does not hold, and "wrong last msg ID"
// (10070) to one whose Nats-Expected-Last-Msg-Id does not.
const (
	errCodeWrongLastMsgID = 10070
	errCodeSubjectOverlap = 10065
)

// HeaderFence marks a fence message: headers only (Nats-Msg-Id,
// sluice-epoch and sluice-fence, both the epoch), an empty body, on the
// subject template rendered with empty names ("sluice._._" by default).
// A leader's recovery appends one before it writes, unless the stream
// already ends with a message of its epoch; consumers skip it.
const HeaderFence = "sluice-fence"

// IsFence reports whether a message with headers h is a fence message.
// h is the message's headers as the NATS client gives them (a nats.Header,
// which is a map[string][]string, passes as it is).
func IsFence(h map[string][]string) bool { return gonats.Header(h).Get(HeaderFence) != "" }

// HeaderSnapshot ("true") marks, in format debezium, a message of a
// snapshot row, as the Kafka sink's header of the same name: Debezium's
// value has no sluice block, from which recovery tells snapshot rows in
// format sluice.
const HeaderSnapshot = sink.HeaderSnapshot

// scanBatch is how many message headers a recovery scan asks for at once.
const scanBatch = 1000

// Sink publishes a pipeline's messages to a JetStream stream. See the
// package documentation for the design.
type Sink struct {
	cfg      Config
	pipeline string
	log      *slog.Logger
	subject  subjectTemplate
	idPrefix string // "<pipeline>:"
	dbz      bool   // format debezium
	// schemaSubject is, in format debezium, the subject of schema changes.
	schemaSubject subjectTemplate

	nc *gonats.Conn
	js jetstream.JetStream

	// The rest belongs to the goroutine that calls Recover and Write.

	stream   jetstream.Stream
	ready    bool   // Recover succeeded and no Write has failed since
	epoch    uint64 // the epoch given to Recover
	epochStr string
	last     uint64 // the stream's last sequence as this sink knows it
	subjects map[subjectKey]string
	// owners holds the table each table subject stands for: two tables
	// whose names map to one subject stop the sink (sink.Names).
	owners *sink.Names
	futs   []jetstream.PubAckFuture
	buf    []byte

	// beforeFence, set by tests, runs between a recovery's scan and its
	// fence.
	beforeFence func()
}

type subjectKey struct{ source, db, table string }

var _ sink.Sink = (*Sink)(nil)

// New validates cfg and connects to the NATS server for pipeline
// pipelineName. The stream is looked up (and created when missing) by
// Recover, which must be called before Write. log may be nil
// (slog.Default()).
func New(cfg Config, pipelineName string, log *slog.Logger) (*Sink, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("sink %s: %w", cfg.withDefaults().Name, err)
	}
	cfg = cfg.withDefaults()
	if pipelineName == "" {
		return nil, fmt.Errorf("sink %s: the pipeline has no name (it names the stream and the messages' Nats-Msg-Id)", cfg.Name)
	}
	if strings.ContainsAny(pipelineName, ": \t\r\n") {
		return nil, fmt.Errorf("sink %s: pipeline name %q may not contain ':' or white space (it starts every Nats-Msg-Id)", cfg.Name, pipelineName)
	}
	if cfg.Stream == "" {
		cfg.Stream = DefaultStream(pipelineName)
		if err := checkStreamName(cfg.Stream); err != nil {
			return nil, fmt.Errorf("sink %s: the default stream name %q %v: set stream in the sink's config", cfg.Name, cfg.Stream, err)
		}
	}
	subj, err := parseSubject(cfg.Subject)
	if err != nil { // Validate has checked it; keep the compiler honest
		return nil, fmt.Errorf("sink %s: subject %q: %w", cfg.Name, cfg.Subject, err)
	}
	var schemaSubj subjectTemplate
	if cfg.Format.IsDebezium() {
		if schemaSubj, err = cfg.schemaSubject(); err != nil {
			return nil, fmt.Errorf("sink %s: %w", cfg.Name, err)
		}
	}
	if log == nil {
		log = slog.Default()
	}
	log = log.With("sink", cfg.Name, "stream", cfg.Stream)
	s := &Sink{
		cfg:      cfg,
		pipeline: pipelineName,
		log:      log,
		subject:  subj,
		idPrefix: pipelineName + ":",
		subjects: map[subjectKey]string{},
		owners:   sink.NewNames(subj.parts, "subject"),
		dbz:      cfg.Format.IsDebezium(),

		schemaSubject: schemaSubj,
	}

	opts := []gonats.Option{
		gonats.Name("sluice " + pipelineName + " sink " + cfg.Name),
		gonats.Timeout(cfg.ConnectTimeout),
		// Keep reconnecting for as long as the process runs: Write fails
		// meanwhile and the pipeline retries.
		gonats.MaxReconnects(-1),
		gonats.ReconnectWait(time.Second),
		// No client-side buffer while disconnected: a publish fails at
		// once instead of leaving for the server after Write has given up.
		gonats.ReconnectBufSize(-1),
		gonats.DisconnectErrHandler(func(_ *gonats.Conn, err error) {
			if err != nil {
				log.Warn("disconnected from NATS; reconnecting", "err", err.Error())
			}
		}),
		gonats.ReconnectHandler(func(c *gonats.Conn) {
			log.Info("reconnected to NATS", "url", c.ConnectedUrlRedacted())
		}),
		gonats.ErrorHandler(func(_ *gonats.Conn, _ *gonats.Subscription, err error) {
			log.Warn("NATS client error", "err", err.Error())
		}),
	}
	switch {
	case cfg.CredsFile != "":
		opts = append(opts, gonats.UserCredentials(cfg.CredsFile))
	case cfg.User != "":
		opts = append(opts, gonats.UserInfo(cfg.User, cfg.Password))
	case cfg.Token != "":
		opts = append(opts, gonats.Token(cfg.Token))
	}
	if cfg.TLS.Set() {
		tc, err := cfg.TLS.Client("tls.", "")
		if err != nil {
			return nil, fmt.Errorf("sink %s: %w", cfg.Name, err)
		}
		opts = append(opts, gonats.Secure(tc))
	}
	nc, err := gonats.Connect(cfg.URL, opts...)
	if err != nil {
		return nil, fmt.Errorf("sink %s: connecting to NATS at %s: %w; %s", cfg.Name, cfg.URL, err, connectHint(cfg, err))
	}
	js, err := jetstream.New(nc,
		jetstream.WithPublishAsyncMaxPending(cfg.MaxPending),
		jetstream.WithPublishAsyncTimeout(cfg.AckTimeout),
		jetstream.WithDefaultTimeout(cfg.AckTimeout),
	)
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("sink %s: %w", cfg.Name, err)
	}
	s.nc, s.js = nc, js
	return s, nil
}

// connectHint says what to check after a failed connection: the
// credentials the server refused, the TLS settings of a handshake that
// failed, a client certificate when a TLS server ended the connection at
// once, else everything.
func connectHint(cfg Config, err error) string {
	switch {
	case errors.Is(err, gonats.ErrAuthorization) && cfg.User != "":
		return fmt.Sprintf("the server refused user %q: check user and password", cfg.User)
	case errors.Is(err, gonats.ErrAuthorization) && cfg.CredsFile != "":
		return "the server refused the credentials in creds_file " + cfg.CredsFile
	case errors.Is(err, gonats.ErrAuthorization) && cfg.Token != "":
		return "the server refused the token: check token"
	case errors.Is(err, gonats.ErrAuthorization):
		return "the server requires authentication: set user and password, token or creds_file"
	case cfg.TLS.Hint("tls.", err) != "":
		return cfg.TLS.Hint("tls.", err)
	case errors.Is(err, gonats.ErrTLS) && cfg.TLS.CertFile == "":
		return "if the server requires client certificates (tls verify), set tls.cert_file and tls.key_file"
	case errors.Is(err, gonats.ErrTLS):
		return "is tls.cert_file " + cfg.TLS.CertFile + " signed by a CA that the server trusts?"
	}
	return "check url, credentials and tls, and that the server is running"
}

// Format is the format of the messages' data (sink.Formatted).
func (s *Sink) Format() codec.Format { return s.cfg.Format }

// Name is the sink's name in the config.
func (s *Sink) Name() string { return s.cfg.Name }

// Stream is the name of the stream the sink writes to.
func (s *Sink) Stream() string { return s.cfg.Stream }

// Close closes the connection. Messages not yet acknowledged are
// abandoned (Write has already failed or not yet returned for them).
func (s *Sink) Close() error {
	s.nc.Close()
	return nil
}

// Recover looks the stream up (creating it when missing), reads the
// headers of every message after offset ("" = from the stream's first
// message), refuses with sink.ErrFenced if any was written by a higher
// epoch than epoch, fences the stream for epoch, and prepares Write to
// append after the stream's last message.
//
// Fencing: unless the stream's last message is already of epoch, Recover
// appends a fence message (headers only, see HeaderFence) that expects
// the stream's last sequence as the scan saw it. Once it is stored, every
// publish of an older leader is refused (it expects an earlier last
// sequence, or a predecessor of its own epoch), so nothing of an older
// epoch lands between this recovery and this leader's first write. If an
// older leader's message landed between the scan and the fence, the fence
// is refused and the scan is done again, so that the recovery reports it.
func (s *Sink) Recover(ctx context.Context, epoch uint64, offset string) (sink.Recovery, error) {
	s.ready = false
	var after uint64
	if offset != "" {
		n, err := strconv.ParseUint(offset, 10, 64)
		if err != nil {
			return sink.Recovery{}, fmt.Errorf("nats: checkpoint offset %q of sink %s is not a stream sequence number: was the checkpoint written by another kind of sink of the same name?", offset, s.cfg.Name)
		}
		after = n
	}
	for attempt := 1; ; attempt++ {
		rec, st, last, lastEpoch, err := s.recoverOnce(ctx, epoch, offset, after, attempt == 1)
		if err != nil {
			return sink.Recovery{}, err
		}
		if lastEpoch != epoch {
			if s.beforeFence != nil {
				s.beforeFence()
			}
			fenceSeq, moved, err := s.fence(ctx, epoch, last)
			if err != nil {
				return sink.Recovery{}, err
			}
			if moved {
				if attempt >= maxFenceAttempts {
					return sink.Recovery{}, fmt.Errorf("nats: stream %s: %d recoveries in a row were overtaken by another writer's messages before the fence of epoch %d could be stored; is another process publishing to the stream? The pipeline retries", s.cfg.Stream, attempt, epoch)
				}
				s.log.Info("the stream moved while it was recovered (an older leader's batch landed); scanning again", "last_seq", last)
				continue
			}
			last = fenceSeq
		}
		s.stream = st
		s.epoch = epoch
		s.epochStr = strconv.FormatUint(epoch, 10)
		s.last = last
		s.ready = true
		rec.Offset = strconv.FormatUint(last, 10)
		return rec, nil
	}
}

// maxFenceAttempts bounds the scans of one Recover that a stream moving
// under it can cause (an older leader finishing its last batch moves it a
// few times at most).
const maxFenceAttempts = 10

// recoverOnce scans the stream after offset (after) up to its current last
// sequence. It returns what it found, the stream's last sequence and the
// epoch of the message there (0 if none).
func (s *Sink) recoverOnce(ctx context.Context, epoch uint64, offset string, after uint64, warn bool) (rec sink.Recovery, st jetstream.Stream, last, lastEpoch uint64, err error) {
	st, err = s.openStream(ctx)
	if err != nil {
		return rec, nil, 0, 0, err
	}
	state := st.CachedInfo().State
	last = state.LastSeq
	if warn && offset != "" && after > last {
		s.log.Warn("the checkpoint's offset is beyond the stream's last message: the stream was deleted and created again, or purged; writing continues after the checkpoint",
			"offset", after, "stream_last_seq", last)
	}
	if warn && offset != "" && after < last && after+1 < state.FirstSeq {
		s.log.Warn("messages after the checkpoint were removed from the stream (limits or purge) before recovery could read them",
			"offset", after, "stream_first_seq", state.FirstSeq)
	}

	var maxEpoch uint64
	if state.Msgs > 0 && (offset == "" || after < last) {
		start := max(after+1, state.FirstSeq)
		if maxEpoch, _, err = s.scan(ctx, st, start, last, &rec); err != nil {
			return sink.Recovery{}, nil, 0, 0, err
		}
	}
	if state.Msgs > 0 {
		// The last message tells whether a newer leader has written here
		// (also when nothing is after the offset), and whether this
		// epoch has fenced the stream already.
		if lastEpoch, err = s.epochAt(ctx, st, last); err != nil {
			return sink.Recovery{}, nil, 0, 0, err
		}
		maxEpoch = max(maxEpoch, lastEpoch)
	}
	if maxEpoch > epoch {
		return sink.Recovery{}, nil, 0, 0, fmt.Errorf("nats: stream %s holds messages of epoch %d, above this process's %d: %w", s.cfg.Stream, maxEpoch, epoch, sink.ErrFenced)
	}
	return rec, st, last, lastEpoch, nil
}

// fence appends the fence message of epoch right after stream sequence
// last. moved reports that the stream no longer ended there (another
// writer appended first): nothing was stored, and the caller scans again.
func (s *Sink) fence(ctx context.Context, epoch, last uint64) (seq uint64, moved bool, err error) {
	ep := strconv.FormatUint(epoch, 10)
	h := gonats.Header{}
	// The id names the position too: a fence re-sent after a lost
	// acknowledgement is a duplicate, a later fence of the same epoch is
	// not.
	h.Set(jetstream.MsgIDHeader, s.idPrefix+ep+":fence:"+strconv.FormatUint(last, 10))
	h.Set(jetstream.ExpectedLastSeqHeader, strconv.FormatUint(last, 10))
	h.Set(sink.HeaderEpoch, ep)
	h.Set(HeaderFence, ep)
	ack, err := s.js.PublishMsg(ctx, &gonats.Msg{Subject: s.fenceSubject(), Header: h})
	if err != nil {
		var apiErr *jetstream.APIError
		if errors.As(err, &apiErr) {
			switch apiErr.ErrorCode {
			case jetstream.JSErrCodeStreamWrongLastSequence, jetstream.JSErrCodeStreamWrongLastSequenceConstant:
				return 0, true, nil
			}
		}
		return 0, false, fmt.Errorf("nats: recovery: publishing the fence of epoch %d to stream %s: %w; is the server up? The pipeline retries", epoch, s.cfg.Stream, err)
	}
	return ack.Sequence, false, nil
}

// fenceSubject is the subject of fence messages: the subject template
// with every name empty ("sluice._._" by default), which the stream takes
// and no table's subject filter of a consumer matches.
func (s *Sink) fenceSubject() string {
	return string(s.subject.render(nil, "", "", ""))
}

// openStream returns the stream, with fresh info, creating it when it is
// missing and checking that it can take the sink's subjects.
func (s *Sink) openStream(ctx context.Context) (jetstream.Stream, error) {
	st, err := s.js.Stream(ctx, s.cfg.Stream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		st, err = s.createStream(ctx)
		if err != nil {
			return nil, err
		}
	} else if err != nil {
		return nil, fmt.Errorf("nats: looking up stream %s at %s: %w; is the server up, with JetStream enabled?", s.cfg.Stream, s.cfg.URL, err)
	}
	cfg := st.CachedInfo().Config
	covered := false
	for _, subj := range cfg.Subjects {
		if subjectCovers(subj, s.subject.pattern) {
			covered = true
			break
		}
	}
	if !covered {
		return nil, fmt.Errorf("nats: stream %s exists with subjects %q, which do not take the sink's subjects %q (from subject template %q): add %q to the stream's subjects (nats stream edit %s --subjects ...), or set stream or subject in the sink's config to match",
			s.cfg.Stream, cfg.Subjects, s.subject.pattern, s.cfg.Subject, s.subject.filter, s.cfg.Stream)
	}
	if s.dbz && !slices.ContainsFunc(cfg.Subjects, func(subj string) bool { return subjectCovers(subj, s.schemaSubject.pattern) }) {
		return nil, fmt.Errorf("nats: stream %s exists with subjects %q, which do not take the sink's schema-change subjects %q: add %q to the stream's subjects, or set schema_change_subject in the sink's config to match",
			s.cfg.Stream, cfg.Subjects, s.schemaSubject.pattern, s.schemaSubject.pattern)
	}
	if cfg.Sealed || cfg.Mirror != nil {
		return nil, fmt.Errorf("nats: stream %s is sealed or a mirror: it takes no messages; give the sink a stream of its own (config stream)", s.cfg.Stream)
	}
	if cfg.Storage == jetstream.MemoryStorage {
		s.log.Warn("the stream keeps messages in memory only: a server restart loses them; use file storage for a durable sink")
	}
	if cfg.PersistMode == jetstream.AsyncPersistMode {
		s.log.Warn("the stream's persist_mode is async: the server acknowledges before writing, so a crash of the server can lose acknowledged batches; use the default persist mode for a durable sink")
	}
	if cfg.Duplicates <= 0 {
		s.log.Warn("the stream has no duplicate window: a message re-sent after a lost acknowledgement may be stored twice")
	}
	return st, nil
}

func (s *Sink) createStream(ctx context.Context) (jetstream.Stream, error) {
	scfg := jetstream.StreamConfig{
		Name:        s.cfg.Stream,
		Description: "changes of sluice pipeline " + s.pipeline + " (only sluice may publish here)",
		Subjects:    []string{s.subject.filter},
		Retention:   jetstream.LimitsPolicy,
		Discard:     jetstream.DiscardOld,
		Storage:     jetstream.FileStorage,
		Replicas:    s.cfg.Replicas,
		Duplicates:  s.cfg.DuplicateWindow,
		AllowDirect: true,
	}
	st, err := s.js.CreateStream(ctx, scfg)
	if errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
		// Created meanwhile by someone else: use it (openStream checks it).
		st, err = s.js.Stream(ctx, s.cfg.Stream)
	}
	if err != nil {
		var apiErr *jetstream.APIError
		if errors.As(err, &apiErr) && apiErr.ErrorCode == errCodeSubjectOverlap {
			return nil, fmt.Errorf("nats: creating stream %s on subjects %q: another stream already takes some of them (%w): change subject in the sink's config, or use that stream (config stream)", s.cfg.Stream, s.subject.filter, err)
		}
		return nil, fmt.Errorf("nats: creating stream %s (subjects %q, file storage, %d replicas): %w; check the account's JetStream limits and permissions, or create the stream yourself", s.cfg.Stream, s.subject.filter, s.cfg.Replicas, err)
	}
	s.log.Info("created stream", "subjects", s.subject.filter, "replicas", s.cfg.Replicas, "duplicate_window", s.cfg.DuplicateWindow.String())
	return st, nil
}

// meta is what the sink's headers say about a stored message.
type meta struct {
	seq, epoch uint64
	source     string
	end        *position.Position
	fence      bool // a fence message: no seq, source or end
	snapshot   bool // HeaderSnapshot: a snapshot row in format debezium
}

// parseMeta reads the headers of the message at stream sequence sseq.
func (s *Sink) parseMeta(h gonats.Header, sseq uint64) (meta, error) {
	var m meta
	id := h.Get(jetstream.MsgIDHeader)
	if !strings.HasPrefix(id, s.idPrefix) {
		return m, fmt.Errorf("nats: stream %s, message %d has Nats-Msg-Id %q: it was not written by pipeline %q, but the stream must hold this pipeline's messages alone; remove it (nats stream rmm %s %d) or give the sink a stream of its own", s.cfg.Stream, sseq, id, s.pipeline, s.cfg.Stream, sseq)
	}
	var err error
	if f := h.Get(HeaderFence); f != "" {
		m.fence = true
		if m.epoch, err = strconv.ParseUint(f, 10, 64); err != nil {
			return m, fmt.Errorf("nats: stream %s, message %d: bad %s header %q: %w", s.cfg.Stream, sseq, HeaderFence, f, err)
		}
		return m, nil
	}
	if m.seq, err = strconv.ParseUint(h.Get(sink.HeaderSeq), 10, 64); err != nil {
		return m, fmt.Errorf("nats: stream %s, message %d: bad %s header %q: %w", s.cfg.Stream, sseq, sink.HeaderSeq, h.Get(sink.HeaderSeq), err)
	}
	if m.epoch, err = strconv.ParseUint(h.Get(sink.HeaderEpoch), 10, 64); err != nil {
		return m, fmt.Errorf("nats: stream %s, message %d: bad %s header %q: %w", s.cfg.Stream, sseq, sink.HeaderEpoch, h.Get(sink.HeaderEpoch), err)
	}
	m.source = h.Get(sink.HeaderSource)
	m.snapshot = h.Get(HeaderSnapshot) == "true"
	if e := h.Get(sink.HeaderEnd); e != "" {
		if m.end, err = sink.ParseEnd([]byte(e)); err != nil {
			return m, fmt.Errorf("nats: stream %s, message %d: %w", s.cfg.Stream, sseq, err)
		}
	}
	return m, nil
}

// errScanStalled ends a recovery scan that receives nothing for a while.
var errScanStalled = errors.New("no message received within ack_timeout")

// scan reads the headers of the messages from stream sequence start to
// last with an ordered consumer (flow-controlled, gap-checked; bodies too,
// which tell snapshot rows from the first messages of a transaction),
// observing each in rec. It returns the highest epoch seen and whether any
// message was seen.
func (s *Sink) scan(ctx context.Context, st jetstream.Stream, start, last uint64, rec *sink.Recovery) (maxEpoch uint64, seen bool, err error) {
	cons, err := st.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{
		DeliverPolicy:     jetstream.DeliverByStartSequencePolicy,
		OptStartSeq:       start,
		InactiveThreshold: 30 * time.Second,
	})
	if err != nil {
		return 0, false, fmt.Errorf("nats: recovery: reading stream %s from sequence %d: %w", s.cfg.Stream, start, err)
	}
	defer func() {
		// The server would drop the consumer after InactiveThreshold;
		// delete it now. Best effort: the scan's outcome stands.
		if info := cons.CachedInfo(); info != nil {
			dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.AckTimeout)
			_ = s.js.DeleteConsumer(dctx, s.cfg.Stream, info.Name)
			cancel()
		}
	}()
	if info := cons.CachedInfo(); info != nil && info.NumPending == 0 {
		return 0, false, nil // everything in range was deleted
	}
	it, err := cons.Messages(jetstream.PullMaxMessages(scanBatch))
	if err != nil {
		return 0, false, fmt.Errorf("nats: recovery: reading stream %s from sequence %d: %w", s.cfg.Stream, start, err)
	}
	defer it.Stop()

	// A watchdog instead of a timeout per message: the scan fails when
	// nothing arrives for ack_timeout, however long it runs in all.
	sctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stall := time.AfterFunc(s.cfg.AckTimeout, func() { cancel(errScanStalled) })
	defer stall.Stop()
	for {
		msg, err := it.Next(jetstream.NextContext(sctx))
		if err != nil {
			if c := context.Cause(sctx); c != nil {
				err = c
			}
			return 0, false, fmt.Errorf("nats: recovery: reading stream %s after sequence %d: %w; is the server up?", s.cfg.Stream, start, err)
		}
		stall.Reset(s.cfg.AckTimeout)
		md, err := msg.Metadata()
		if err != nil {
			return 0, false, fmt.Errorf("nats: recovery: reading stream %s: %w", s.cfg.Stream, err)
		}
		sseq := md.Sequence.Stream
		if sseq > last {
			return maxEpoch, seen, nil // appended after Recover began
		}
		m, err := s.parseMeta(msg.Headers(), sseq)
		if err != nil {
			return 0, false, err
		}
		if !m.fence {
			// Format debezium marks snapshot rows in a header; format
			// sluice's sluice block says so in the body.
			snap := m.snapshot || !s.dbz && sink.SnapshotRow(msg.Data())
			rec.Observe(m.seq, m.source, m.end, snap)
		}
		maxEpoch = max(maxEpoch, m.epoch)
		seen = true
		if sseq == last || md.NumPending == 0 {
			return maxEpoch, seen, nil
		}
	}
}

// epochAt returns the epoch of the message at stream sequence sseq (0 if
// there is none).
func (s *Sink) epochAt(ctx context.Context, st jetstream.Stream, sseq uint64) (uint64, error) {
	msg, err := st.GetMsg(ctx, sseq)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("nats: reading message %d of stream %s: %w", sseq, s.cfg.Stream, err)
	}
	m, err := s.parseMeta(msg.Header, sseq)
	if err != nil {
		return 0, err
	}
	return m.epoch, nil
}

// subjectOf returns the subject of a message, rendered once per table: its
// table's subject; in format debezium, for a schema change, the
// schema-change subject (as the Kafka sink's schema_change_topic; a
// TRUNCATE written as Debezium's op "t" event has the data role and goes
// to its table's subject). In format sluice a DDL message goes to its
// table's subject. Two tables whose names map to one subject (sink.Names)
// are an error wrapping sink.ErrPermanent.
func (s *Sink) subjectOf(m *sink.Message) (string, error) {
	tmpl, table := &s.subject, m.Table
	if s.dbz && m.Role == sink.RoleSchemaChange {
		tmpl, table = &s.schemaSubject, "\x00schema" // a key no table has
	}
	k := subjectKey{m.Source, m.DB, table}
	if subj, ok := s.subjects[k]; ok {
		return subj, nil
	}
	if tmpl == &s.schemaSubject {
		table = ""
	}
	subj := string(tmpl.render(nil, m.Source, m.DB, table))
	if tmpl == &s.subject {
		if err := s.owners.Claim(subj, m.Source, m.DB, table); err != nil {
			return "", err
		}
	}
	s.subjects[k] = subj
	return subj, nil
}

// subjectName is m's subject for a message: subjectOf without its error
// (every subject of a batch is claimed before the batch is published).
func (s *Sink) subjectName(m *sink.Message) string {
	subj, _ := s.subjectOf(m)
	return subj
}

// Header value slots of one message, allocated together.
const (
	hvID = iota
	hvExpect
	hvSeq
	hvEpoch
	hvSource
	hvEnd
	hvSnapshot
	hvCount
)

// Write publishes the batch and waits until the stream has acknowledged
// every message. It returns the stream's last sequence after the batch.
//
// Fencing: the first message carries Nats-Expected-Last-Sequence (the
// stream's last sequence as Recover or the previous Write left it), and
// every later one Nats-Expected-Last-Msg-Id (the id of the message before
// it, "<pipeline>:<epoch>:<seq>"). The server stores a message only if the
// stream ends, at that moment, exactly with its predecessor; so a batch
// lands as one contiguous run after the sink's own last message, or stops
// at its first refused message, and no message of another epoch is ever
// followed by one of this batch. (A message already stored under the same
// id, i.e. the same epoch and seq, is answered as a duplicate and not
// stored again.)
func (s *Sink) Write(ctx context.Context, b *sink.Batch) (string, error) {
	if !s.ready {
		return "", fmt.Errorf("nats: sink %s: Write without a successful Recover since the last failure: call Recover first", s.cfg.Name)
	}
	if b.Epoch != s.epoch {
		s.ready = false
		return "", fmt.Errorf("nats: sink %s: batch of epoch %d, but Recover was called for epoch %d: call Recover with the batch's epoch", s.cfg.Name, b.Epoch, s.epoch)
	}
	if len(b.Messages) == 0 {
		return strconv.FormatUint(s.last, 10), nil
	}
	s.ready = false // until this batch is fully acknowledged
	// Every subject of the batch is rendered (and claimed) before the
	// first message goes out, so that a subject two tables would share
	// stops the sink with nothing of the batch written.
	for i := range b.Messages {
		if _, err := s.subjectOf(&b.Messages[i]); err != nil {
			return "", err
		}
	}

	futs := s.futs[:0]
	defer func() {
		clear(futs)
		s.futs = futs[:0]
	}()
	var (
		failed  error
		failIdx int
		maxAck  uint64
		waited  int
	)
	// await consumes the acknowledgement of message i.
	await := func(i int) error {
		f := futs[i]
		select {
		case ack := <-f.Ok():
			maxAck = max(maxAck, ack.Sequence)
		case err := <-f.Err():
			if failed == nil {
				failed, failIdx = err, i
			}
		case <-ctx.Done():
			return fmt.Errorf("nats: waiting for stream %s to acknowledge message seq %d: %w", s.cfg.Stream, b.Messages[i].Seq, ctx.Err())
		}
		return nil
	}

	var prevID string
	for i := range b.Messages {
		for i-waited >= s.cfg.MaxPending && failed == nil {
			if err := await(waited); err != nil {
				return "", err
			}
			waited++
		}
		if failed != nil {
			break // the server refuses every later message anyway
		}
		m := &b.Messages[i]
		vals := make([]string, hvCount)
		h := make(gonats.Header, hvCount)
		s.buf = append(append(append(append(s.buf[:0], s.idPrefix...), s.epochStr...), ':'), strconv.FormatUint(m.Seq, 10)...)
		vals[hvID] = string(s.buf)
		h[jetstream.MsgIDHeader] = vals[hvID : hvID+1 : hvID+1]
		if i == 0 {
			vals[hvExpect] = strconv.FormatUint(s.last, 10)
			h[jetstream.ExpectedLastSeqHeader] = vals[hvExpect : hvExpect+1 : hvExpect+1]
		} else {
			vals[hvExpect] = prevID
			h[jetstream.ExpectedLastMsgIDHeader] = vals[hvExpect : hvExpect+1 : hvExpect+1]
		}
		prevID = vals[hvID]
		vals[hvSeq] = strconv.FormatUint(m.Seq, 10)
		h[sink.HeaderSeq] = vals[hvSeq : hvSeq+1 : hvSeq+1]
		vals[hvEpoch] = s.epochStr
		h[sink.HeaderEpoch] = vals[hvEpoch : hvEpoch+1 : hvEpoch+1]
		vals[hvSource] = m.Source
		h[sink.HeaderSource] = vals[hvSource : hvSource+1 : hvSource+1]
		if s.dbz && m.Snapshot {
			vals[hvSnapshot] = "true"
			h[HeaderSnapshot] = vals[hvSnapshot : hvSnapshot+1 : hvSnapshot+1]
		}
		if m.End != nil {
			s.buf = sink.AppendEnd(s.buf[:0], m.End)
			vals[hvEnd] = string(s.buf)
			h[sink.HeaderEnd] = vals[hvEnd : hvEnd+1 : hvEnd+1]
		}
		subj, _ := s.subjectOf(m) // claimed above
		f, err := s.js.PublishMsgAsync(&gonats.Msg{Subject: subj, Data: m.Value, Header: h})
		if err != nil {
			failed, failIdx = err, len(futs)
			break
		}
		futs = append(futs, f)
	}
	// Wait for what is in flight even after a failure, so that nothing
	// of this batch is still on its way when the pipeline recovers.
	for ; waited < len(futs); waited++ {
		if err := await(waited); err != nil {
			return "", err
		}
	}
	if failed != nil {
		return "", s.writeError(ctx, b, failIdx, failed)
	}
	s.last = max(s.last, maxAck)
	s.ready = true
	return strconv.FormatUint(s.last, 10), nil
}

// writeError explains why message i of b was not stored, as ErrFenced
// when a higher epoch has written to the stream.
func (s *Sink) writeError(ctx context.Context, b *sink.Batch, i int, err error) error {
	seq := b.Messages[i].Seq
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) {
		switch apiErr.ErrorCode {
		case jetstream.JSErrCodeStreamWrongLastSequence, jetstream.JSErrCodeStreamWrongLastSequenceConstant, errCodeWrongLastMsgID:
			// Someone else has appended. Who?
			if info, ierr := s.stream.Info(ctx); ierr == nil && info.State.Msgs > 0 {
				epoch, eerr := s.epochAt(ctx, s.stream, info.State.LastSeq)
				if eerr == nil && epoch > s.epoch {
					return fmt.Errorf("nats: stream %s refused message seq %d (%v): its last message (stream sequence %d) was written by epoch %d, above this process's %d: %w",
						s.cfg.Stream, seq, err, info.State.LastSeq, epoch, s.epoch, sink.ErrFenced)
				}
				if eerr == nil && epoch != 0 && epoch < s.epoch {
					// An older epoch's message after this leader's
					// recovery: Recover's fence refuses those, so only a
					// writer that does not fence (an older sluice) or
					// one that publishes outside the pipeline gets here.
					return fmt.Errorf("nats: stream %s refused message seq %d (%w): its last message (stream sequence %d) was written by epoch %d, an older leader that published after this process (epoch %d) recovered; the pipeline recovers again and continues after it",
						s.cfg.Stream, seq, err, info.State.LastSeq, epoch, s.epoch)
				}
			}
			return fmt.Errorf("nats: stream %s refused message seq %d (%w): the stream changed since Recover (a write that timed out landed late, or something else published to %s); the pipeline recovers and retries. If this repeats, make sure nothing but this pipeline publishes to the stream",
				s.cfg.Stream, seq, err, s.subject.filter)
		}
	}
	switch {
	case errors.Is(err, jetstream.ErrNoStreamResponse):
		return fmt.Errorf("nats: publishing message seq %d to %s: %w: stream %s does not take the subject (deleted, or its subjects changed?); Recover creates or checks it", seq, s.subjectName(&b.Messages[i]), err, s.cfg.Stream)
	case errors.Is(err, gonats.ErrReconnectBufExceeded), errors.Is(err, gonats.ErrDisconnected), errors.Is(err, gonats.ErrConnectionReconnecting):
		return fmt.Errorf("nats: publishing message seq %d to stream %s: not connected to the server at %s (%w): it is down or unreachable; the client keeps reconnecting and the pipeline retries", seq, s.cfg.Stream, s.cfg.URL, err)
	case errors.Is(err, gonats.ErrMaxPayload):
		return fmt.Errorf("nats: message seq %d is %d bytes, more than the server's max_payload (%d): raise max_payload in the server's config: %w", seq, len(b.Messages[i].Value), s.nc.MaxPayload(), err)
	case errors.Is(err, gonats.ErrConnectionClosed):
		return fmt.Errorf("nats: publishing message seq %d to stream %s: %w (the sink was closed)", seq, s.cfg.Stream, err)
	case errors.Is(err, jetstream.ErrAsyncPublishTimeout):
		return fmt.Errorf("nats: message seq %d not acknowledged by stream %s within ack_timeout (%s): %w; is the server up and the stream healthy (nats stream info %s)?", seq, s.cfg.Stream, s.cfg.AckTimeout, err, s.cfg.Stream)
	}
	return fmt.Errorf("nats: publishing message seq %d to stream %s at %s: %w; is the server up? The pipeline recovers and retries", seq, s.cfg.Stream, s.cfg.URL, err)
}
