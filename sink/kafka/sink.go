package kafka

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/sluice-cdc/sluice/binlog"
	"github.com/sluice-cdc/sluice/codec"
	"github.com/sluice-cdc/sluice/sink"
)

// HeaderPipeline names the pipeline that wrote a record. Recovery counts
// only records of its own pipeline, so that pipelines whose topic
// templates overlap on one cluster do not take each other's records for
// their own.
const HeaderPipeline = "sluice-pipeline"

// HeaderSnapshot ("true") marks, in format debezium, a record of a snapshot
// (a row it read, or the TRUNCATE before a table read again whole), which
// recovery leaves out of its count of a cut transaction; in format sluice
// recovery tells them from the value (sink.SnapshotRow).
const HeaderSnapshot = sink.HeaderSnapshot

// HeaderReselected lists, as a JSON array of column names, the columns of
// a record's row images that were read from the source's current row
// rather than the binlog (source.fill_missing: reselect), in every
// format: format debezium's value has no place for it.
const HeaderReselected = "sluice-reselected"

var snapshotVal = []byte("true")

// Debezium's headers on the records of an update that changed the primary
// key: the delete carries the new key, the create the old one.
const (
	HeaderNewKey = "__debezium.newkey"
	HeaderOldKey = "__debezium.oldkey"
)

// keyHeader is a key as the key-change headers carry it: the key struct's
// JSON without its schema ({"id":20}), as Kafka Connect's default header
// converter (SimpleHeaderConverter) writes the Struct that Debezium's
// connector puts there, whatever the topics' converter does with schemas.
// With schemas on, the key's bytes are {"schema":...,"payload":{"id":20}}:
// in a header, a consumer's SimpleHeaderConverter made them a map of a
// schema and a payload, on which Debezium's JDBC sink connector fails
// ("Invalid Java object for schema with type INT8 ... __debezium.newkey").
// Only an update of a primary key has these headers, so the decoding costs
// nothing in the common case.
func keyHeader(key []byte, schemas bool) []byte {
	if !schemas {
		return key
	}
	var env struct {
		Payload json.RawMessage `json:"payload"`
	}
	if err := json.Unmarshal(key, &env); err != nil || len(env.Payload) == 0 {
		return key
	}
	return env.Payload
}

// Producer tuning (see BenchmarkWrite and docs/SINKS-kafka.md).
const (
	// linger lets partitions fill record batches while the first produce
	// request of a Write is in flight; Write flushes at its end, so the
	// linger never delays a Write's last records.
	linger = 5 * time.Millisecond
	// maxBufferedRecords bounds the records the client holds unsent: a
	// larger batch waits for room as earlier records are acknowledged.
	maxBufferedRecords = 100000
	// recordOverhead is what a record costs in a batch beyond its key,
	// value and headers (varint lengths, deltas, attributes), rounded up.
	recordOverhead = 64
	// batchOverhead is the size of a record batch's header.
	batchOverhead = 61
)

// Sink writes a pipeline's messages to Kafka, one transaction per Write.
// See the package documentation for the design.
type Sink struct {
	cfg Config
	// notWritten counts the schema changes not written (format debezium
	// with include.schema.changes false) in batches written; skipped
	// counts those of the batch being written.
	notWritten atomic.Uint64
	skipped    uint64
	pipeline   string
	log        *slog.Logger
	topic      topicTemplate
	// schemaTopic is, in format debezium with include.schema.changes, the
	// template of the schema-change topic (nil otherwise).
	schemaTopic *topicTemplate
	// opts are the client options both clients share: brokers, TLS,
	// SASL, client id, timeouts, logger, and the hook that records which
	// broker refused a connection.
	opts    []kgo.Opt
	refused *refusals

	// meta serves metadata and admin requests and recovery's reads; it
	// lives as long as the sink.
	meta *kgo.Client
	adm  *kadm.Client

	// mu is held by Recover, Write and Close, and by the heartbeat timer
	// (heartbeat.go) while it writes: the producer is one.
	mu sync.Mutex
	// hbStop and hbDone stop the heartbeat timer; hbErr is the failure of
	// a heartbeat, which the next Write reports.
	hbStop, hbDone chan struct{}
	hbErr          error

	// The rest belongs to the goroutine that calls Recover and Write.

	// prod is the transactional producer: made by each Recover (whose
	// initialisation fences older producers with the transactional id
	// and aborts their open transaction), closed when a Write fails.
	prod  *kgo.Client
	ready bool // Recover succeeded and no Write has failed since
	epoch uint64
	offs  offsets
	// known holds the topics known to exist.
	known  map[string]bool
	topics map[topicKey]string
	// owners holds the table each table topic stands for: two tables
	// whose names map to one topic stop the sink (sink.Names).
	owners *sink.Names
	// txnTopics holds each source's transaction topic (format debezium
	// with provide.transaction.metadata), rendered from txnTmpl.
	txnTopics map[string]string
	txnTmpl   topicTemplate

	// Reused by every Write.
	recs    []kgo.Record
	hdrs    []kgo.RecordHeader
	vals    []byte
	idx     []int
	names   []string
	sources map[string][]byte
	pipeVal []byte
	// out collects the outcome of the records of the current producer
	// (prod): each producer has its own, because a closed producer's
	// promises may still run after Close returns.
	out *produced

	// compactChecked holds the topics whose compaction settings
	// recovery has looked at (compact.go).
	compactChecked map[string]bool

	// beforeCommit, set only by tests, runs in Write after every record
	// was acknowledged and before the commit (a process paused there).
	beforeCommit func()
}

// Format returns the format of the sink's records (sink.Formatted).
func (s *Sink) Format() codec.Format { return s.cfg.Format }

// produced is the outcome of one producer's records in the current
// Write: failed is set by the first record that fails, whose error and
// topic are kept.
type produced struct {
	failed atomic.Bool
	mu     sync.Mutex
	err    error
	topic  string
}

// promise is the promise of every record of one producer.
func (p *produced) promise(r *kgo.Record, err error) {
	if err == nil {
		return
	}
	p.mu.Lock()
	if p.err == nil {
		p.err, p.topic = err, r.Topic
	}
	p.mu.Unlock()
	p.failed.Store(true)
}

// reset starts a Write.
func (p *produced) reset() {
	p.mu.Lock()
	p.err, p.topic = nil, ""
	p.mu.Unlock()
	p.failed.Store(false)
}

// result is the first failure of the Write, if any.
func (p *produced) result() (topic string, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.topic, p.err
}

type topicKey struct{ source, db, table string }

var _ sink.Sink = (*Sink)(nil)

// New validates cfg and makes the sink's clients for pipeline
// pipelineName. It does not connect: Recover does, and must be called
// before Write. log may be nil (slog.Default()).
func New(cfg Config, pipelineName string, log *slog.Logger) (*Sink, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("sink %s: %w", cfg.withDefaults().Name, err)
	}
	cfg = cfg.withDefaults()
	if pipelineName == "" {
		return nil, fmt.Errorf("sink %s: the pipeline has no name (it makes the transactional id and marks the records)", cfg.Name)
	}
	if cfg.TransactionalID == "" {
		cfg.TransactionalID = DefaultTransactionalID(pipelineName, cfg.Name)
	}
	tmpl, err := parseTopic(cfg.Topic)
	if err != nil { // Validate has checked it; keep the compiler honest
		return nil, fmt.Errorf("sink %s: topic %q: %w", cfg.Name, cfg.Topic, err)
	}
	txnTmpl, err := parseTopic(cfg.TransactionTopic)
	if err != nil { // likewise
		return nil, fmt.Errorf("sink %s: transaction_topic %q: %w", cfg.Name, cfg.TransactionTopic, err)
	}
	if log == nil {
		log = slog.Default()
	}
	log = log.With("sink", cfg.Name)
	var schemaTopic *topicTemplate
	if cfg.Format.IsDebezium() {
		if *cfg.IncludeSchemaChanges {
			st, err := parseTopic(cfg.SchemaChangeTopic)
			if err != nil { // Validate has checked it
				return nil, fmt.Errorf("sink %s: schema_change_topic %q: %w", cfg.Name, cfg.SchemaChangeTopic, err)
			}
			schemaTopic = &st
		} else {
			log.Warn("include.schema.changes is false: DDL statements are not written to Kafka at all (Debezium's behaviour with the option off)")
		}
	}
	s := &Sink{
		cfg:         cfg,
		pipeline:    pipelineName,
		log:         log,
		topic:       tmpl,
		schemaTopic: schemaTopic,
		txnTmpl:     txnTmpl,
		known:       map[string]bool{},
		topics:      map[topicKey]string{},
		owners:      sink.NewNames(tmpl.parts, "topic"),
		sources:     map[string][]byte{},
		pipeVal:     []byte(pipelineName),
		offs:        offsets{},
		refused:     &refusals{},
	}
	if s.opts, err = clientOpts(cfg, log); err != nil {
		return nil, fmt.Errorf("sink %s: %w", cfg.Name, err)
	}
	s.opts = append(s.opts, kgo.WithHooks(s.refused))
	if s.meta, err = kgo.NewClient(s.opts...); err != nil {
		return nil, fmt.Errorf("sink %s: %w", cfg.Name, err)
	}
	s.adm = kadm.NewClient(s.meta)
	if s.heartbeatOn() {
		s.startHeartbeat()
	}
	return s, nil
}

// metadataMinAge is the least time between two metadata requests of the
// client (kgo's default is 5 s).
const metadataMinAge = 250 * time.Millisecond

// clientOpts returns the options of both clients.
func clientOpts(cfg Config, log *slog.Logger) ([]kgo.Opt, error) {
	opts := []kgo.Opt{
		kgo.SeedBrokers(cfg.Brokers...),
		kgo.ClientID(cfg.ClientID),
		kgo.DialTimeout(min(cfg.RequestTimeout, 10*time.Second)),
		kgo.RequestTimeoutOverhead(min(cfg.RequestTimeout, 10*time.Second)),
		kgo.RetryTimeout(cfg.RequestTimeout),
		// A partition of a topic just created can answer a produce with
		// NOT_LEADER_FOR_PARTITION while the metadata already names its
		// leader (Kafka 4.4 in KRaft: the broker publishes the topic
		// before it has become the partition's leader); the client
		// retries after its next metadata refresh, and the default
		// minimum age of 5 s made every first write to a new topic wait
		// 5 s (and fail with a request_timeout of 5 s or less).
		kgo.MetadataMinAge(metadataMinAge),
		kgo.WithLogger(kgoLogger{log}),
	}
	if t := cfg.TLS; t != nil {
		tc, err := t.Client("tls.", "")
		if err != nil {
			return nil, err
		}
		opts = append(opts, kgo.DialTLSConfig(tc))
	}
	if sa := cfg.SASL; sa != nil {
		switch sa.Mechanism {
		case "PLAIN":
			opts = append(opts, kgo.SASL(plain.Auth{User: sa.User, Pass: sa.Password}.AsMechanism()))
		case "SCRAM-SHA-256":
			opts = append(opts, kgo.SASL(scram.Auth{User: sa.User, Pass: sa.Password}.AsSha256Mechanism()))
		case "SCRAM-SHA-512":
			opts = append(opts, kgo.SASL(scram.Auth{User: sa.User, Pass: sa.Password}.AsSha512Mechanism()))
		}
	}
	return opts, nil
}

// producerOpts returns the transactional producer's options.
func (s *Sink) producerOpts() []kgo.Opt {
	var codec kgo.CompressionCodec
	switch s.cfg.Compression {
	case "none":
		codec = kgo.NoCompression()
	case "gzip":
		codec = kgo.GzipCompression()
	case "snappy":
		codec = kgo.SnappyCompression()
	case "lz4":
		codec = kgo.Lz4Compression()
	case "zstd":
		codec = kgo.ZstdCompression()
	}
	rt := s.cfg.RequestTimeout
	return append(slices.Clip(s.opts),
		kgo.TransactionalID(s.cfg.TransactionalID),
		// Longer than the longest Write (sending, then committing, each
		// bounded by request_timeout): the broker aborts a transaction
		// left open by a dead process after this long.
		kgo.TransactionTimeout(2*rt+10*time.Second),
		kgo.RecordPartitioner(kgo.StickyKeyPartitioner(nil)), // murmur2 of the key, as Java clients
		kgo.ProducerBatchCompression(codec),
		kgo.ProducerBatchMaxBytes(int32(s.cfg.MaxRecordBytes)),
		kgo.ProducerLinger(linger),
		kgo.MaxBufferedRecords(maxBufferedRecords),
		kgo.RecordDeliveryTimeout(rt),
		kgo.ProduceRequestTimeout(rt),
	)
}

// Name is the sink's name in the config.
func (s *Sink) Name() string { return s.cfg.Name }

// TransactionalID is the producer's transactional.id.
func (s *Sink) TransactionalID() string { return s.cfg.TransactionalID }

// Brokers are the sink's seed brokers.
func (s *Sink) Brokers() []string { return slices.Clone(s.cfg.Brokers) }

// TopicTemplates returns the topic templates the sink writes to, each
// with its option's name: the table topics, and in format debezium the
// schema-change, transaction and heartbeat topics it has turned on. Two
// sinks of one pipeline on one cluster must not share one: each sink's
// recovery would count the other's records as its own.
func (s *Sink) TopicTemplates() map[string]string {
	t := map[string]string{"topic": s.cfg.Topic}
	if s.cfg.Format.IsDebezium() {
		if s.schemaTopic != nil {
			t["schema_change_topic"] = s.cfg.SchemaChangeTopic
		}
		if s.cfg.Format.TransactionMetadata {
			t["transaction_topic"] = s.cfg.TransactionTopic
		}
		if s.heartbeatOn() {
			t["heartbeat.topics.prefix"] = s.cfg.HeartbeatTopicsPrefix + ".{source}"
		}
	}
	return t
}

// Close closes the clients. An open transaction (of a Write that has not
// returned) is left to the broker, which aborts it after the transaction
// timeout, or to the next producer with the same transactional id, which
// aborts it when it starts. Close must not run concurrently with Recover
// or Write.
func (s *Sink) Close() error {
	s.stopHeartbeat()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closeProducer()
	s.meta.Close()
	return nil
}

func (s *Sink) closeProducer() {
	if s.prod != nil {
		s.prod.Close()
		s.prod = nil
	}
	s.ready = false
}

// Recover reads every record after offset ("" = every record of the
// cluster's topics that the template could have made), reporting this
// pipeline's to rec; refuses with sink.ErrFenced if one was written
// by a higher epoch than epoch; and starts a new transactional producer,
// which fences any older producer with the transactional id and aborts its
// open transaction.
//
// The read has two rounds: up to the partitions' last stable offsets as
// they are before the producer starts (so that a process that is already
// fenced by a newer epoch's records does not fence that newer producer in
// turn), then on to the last stable offsets after it started (past the
// transaction it aborted).
func (s *Sink) Recover(ctx context.Context, epoch uint64, offset string) (sink.Recovery, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.hbErr = nil
	s.closeProducer()
	var rec sink.Recovery
	saved, err := parseOffsets(offset)
	if err != nil {
		return rec, fmt.Errorf("kafka: checkpoint offset %q of sink %s %v: was the checkpoint written by another kind of sink of the same name?", offset, s.cfg.Name, err)
	}
	sc := &scanner{s: s, pos: saved, saved: maps.Clone(saved), rec: &rec, gone: map[string]bool{}}
	// What the coordinator holds before this producer starts (and bumps
	// the epoch) is what proves how a hanging transaction ended
	// (hanging.go); while it holds none open, an open transaction of its
	// producer id at an older epoch in a partition is hanging.
	pre := s.describeTxn(ctx)
	if pre.known && !txnInFlight(pre.state) {
		sc.own = &ownProducer{pid: pre.pid, epoch: pre.epoch, pre: pre}
	}
	if err := sc.run(ctx); err != nil {
		return sink.Recovery{}, err
	}
	if sc.maxEpoch > epoch {
		return sink.Recovery{}, s.fencedByEpoch(sc.maxEpoch, epoch)
	}

	prod, err := kgo.NewClient(s.producerOpts()...)
	if err != nil {
		return sink.Recovery{}, fmt.Errorf("kafka: sink %s: %w", s.cfg.Name, err)
	}
	ictx, cancel := context.WithTimeout(ctx, s.cfg.RequestTimeout)
	pid, pepoch, err := prod.ProducerID(ictx)
	cancel()
	if err != nil {
		prod.Close()
		return sink.Recovery{}, s.wrap(fmt.Sprintf("starting the transactional producer %q", s.cfg.TransactionalID), err)
	}
	sc.own = &ownProducer{pid: pid, epoch: pepoch, pre: pre}

	if err := sc.run(ctx); err != nil {
		prod.Close()
		return sink.Recovery{}, err
	}
	if sc.maxEpoch > epoch {
		prod.Close()
		return sink.Recovery{}, s.fencedByEpoch(sc.maxEpoch, epoch)
	}
	s.warnCompacted(ctx, sc.pos.topics())
	s.prod = prod
	s.out = &produced{}
	s.epoch = epoch
	s.offs = sc.pos
	s.known = sc.known
	s.ready = true
	rec.Offset = s.offs.String()
	return rec, nil
}

func (s *Sink) fencedByEpoch(found, epoch uint64) error {
	return fmt.Errorf("kafka: sink %s holds records of pipeline %q written by epoch %d, above this process's %d: %w", s.cfg.Name, s.pipeline, found, epoch, sink.ErrFenced)
}

// Write writes b in one Kafka transaction and returns the offsets after
// it once the transaction has committed.
func (s *Sink) Write(ctx context.Context, b *sink.Batch) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.ready {
		if err := s.heartbeatFailure(); err != nil {
			return "", err
		}
		return "", fmt.Errorf("kafka: sink %s: Write without a successful Recover since the last failure; call Recover first", s.cfg.Name)
	}
	if b.Epoch < s.epoch {
		return "", fmt.Errorf("kafka: sink %s: batch of epoch %d, below the epoch %d the sink recovered under: %w", s.cfg.Name, b.Epoch, s.epoch, sink.ErrFenced)
	}
	if len(b.Messages) == 0 {
		return s.offs.String(), nil
	}
	s.skipped = 0
	if err := s.write(ctx, b); err != nil {
		// The client may hold an open transaction and records in any
		// state: drop it. Recover starts a new one, which aborts the
		// transaction. Close fails the records still buffered through
		// promises that run in the client's goroutines after Close has
		// returned, and those read the records and their headers: give
		// them up to the client instead of reusing them for the next
		// batch (the race detector saw exactly that in TestStalledBroker).
		s.closeProducer()
		s.recs, s.hdrs, s.vals = nil, nil, nil
		return "", err
	}
	s.notWritten.Add(s.skipped)
	return s.offs.String(), nil
}

// SchemaChangesNotWritten is how many DDL statements the sink has not
// written, in batches it wrote (format debezium with
// include.schema.changes false). Safe for concurrent use.
func (s *Sink) SchemaChangesNotWritten() uint64 { return s.notWritten.Load() }

func (s *Sink) write(ctx context.Context, b *sink.Batch) error {
	recs, err := s.records(ctx, b)
	if err != nil {
		return err
	}
	if len(recs) == 0 {
		return nil // schema changes only, with include.schema.changes false
	}
	out := s.out
	out.reset()
	if err := s.prod.BeginTransaction(); err != nil {
		return s.writeErr(b, "beginning the transaction", err)
	}
	for i := range recs {
		if out.failed.Load() {
			break
		}
		s.prod.Produce(ctx, &recs[i], out.promise)
	}
	fctx, cancel := context.WithTimeout(ctx, s.cfg.RequestTimeout)
	err = s.prod.Flush(fctx)
	cancel()
	if err != nil {
		return s.writeErr(b, "sending the records", s.timedOut(ctx, "not every record was acknowledged", err))
	}
	if topic, err := out.result(); err != nil {
		what := "sending the records"
		if topic != "" {
			what = fmt.Sprintf("sending the records (first failed: topic %s)", topic)
		}
		return s.writeErr(b, what, err)
	}
	if s.beforeCommit != nil {
		s.beforeCommit()
	}
	cctx, cancel := context.WithTimeout(ctx, s.cfg.RequestTimeout)
	err = s.prod.EndTransaction(cctx, kgo.TryCommit)
	cancel()
	if err != nil {
		return s.writeErr(b, "committing the transaction", s.timedOut(ctx, "no answer", err))
	}
	for i := range recs {
		r := &recs[i]
		tp := topicPartition{r.Topic, r.Partition}
		if next := r.Offset + 1; next > s.offs[tp] {
			s.offs[tp] = next
		}
	}
	return nil
}

// timedOut says what a step's deadline means, when it was the step's
// own deadline (not ctx's) that ended it.
func (s *Sink) timedOut(ctx context.Context, what string, err error) error {
	if ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%s within request_timeout %s: %w", what, s.cfg.RequestTimeout, err)
	}
	return err
}

// records makes the records of b (reusing the sink's buffers) and makes
// sure their topics exist.
func (s *Sink) records(ctx context.Context, b *sink.Batch) ([]kgo.Record, error) {
	msgs := b.Messages
	n := len(msgs)
	var fresh []string
	// First pass: topics, and the header values laid out in vals.
	vals := strconv.AppendUint(s.vals[:0], b.Epoch, 10)
	epochEnd := len(vals)
	idx, names := s.idx[:0], s.names[:0]
	txnMeta := s.cfg.Format.IsDebezium() && s.cfg.Format.TransactionMetadata
	for i := range msgs {
		m := &msgs[i]
		topic, err := s.topicOf(m)
		if err != nil {
			return nil, fmt.Errorf("kafka: sink %s: %w", s.cfg.Name, err)
		}
		names = append(names, topic)
		if topic == "" {
			s.skipped++
		}
		if topic != "" && !s.known[topic] && !slices.Contains(fresh, topic) {
			fresh = append(fresh, topic)
		}
		if m.Txn != nil && txnMeta {
			tt, err := s.txnTopic(m.Source)
			if err != nil {
				return nil, err
			}
			if !s.known[tt] && !slices.Contains(fresh, tt) {
				fresh = append(fresh, tt)
			}
		}
		idx = append(idx, len(vals))
		vals = strconv.AppendUint(vals, m.Seq, 10)
		idx = append(idx, len(vals))
		if m.End != nil {
			vals = sink.AppendEndHeader(vals, m.End)
		}
		idx = append(idx, len(vals))
	}
	epochVal := vals[:epochEnd:epochEnd]
	s.vals, s.idx, s.names = vals, idx, names
	if len(fresh) > 0 {
		if err := s.ensureTopics(ctx, fresh); err != nil {
			return nil, err
		}
	}

	// Second pass: the records, and a tombstone after each delete.
	dbz, extra := s.cfg.Format.IsDebezium(), 0
	for i := range msgs {
		if msgs[i].KeyChange != nil {
			extra++ // delete and create in place of the update
		}
		if n := len(msgs[i].Split); n > 1 && dbz {
			extra += n - 1 // Debezium's events in place of one
		}
		if *s.cfg.Tombstones && (msgs[i].Op == binlog.OpDelete && len(msgs[i].Key) > 0 || msgs[i].KeyChange != nil) {
			extra++
		}
		if tm := msgs[i].Txn; tm != nil && txnMeta {
			if tm.Begin {
				extra++
			}
			if tm.End {
				extra++
			}
		}
	}
	if cap(s.recs) < n+extra {
		s.recs = make([]kgo.Record, n+extra)
	}
	recs := s.recs[:n+extra]
	const perRec = 7
	if cap(s.hdrs) < perRec*n {
		s.hdrs = make([]kgo.RecordHeader, perRec*n)
	}
	hdrs := s.hdrs[:perRec*n]
	r := 0
	for i := range msgs {
		m := &msgs[i]
		if names[i] == "" {
			continue // a schema change, with include.schema.changes false
		}
		src, ok := s.sources[m.Source]
		if !ok {
			src = []byte(m.Source)
			s.sources[m.Source] = src
		}
		h := hdrs[perRec*i : perRec*i+perRec : perRec*i+perRec]
		h[0] = kgo.RecordHeader{Key: sink.HeaderSeq, Value: vals[idx[3*i]:idx[3*i+1]:idx[3*i+1]]}
		h[1] = kgo.RecordHeader{Key: sink.HeaderEpoch, Value: epochVal}
		h[2] = kgo.RecordHeader{Key: sink.HeaderSource, Value: src}
		h[3] = kgo.RecordHeader{Key: HeaderPipeline, Value: s.pipeVal}
		size := recordOverhead + batchOverhead + len(m.Key) + len(m.Value) + len(sink.HeaderSeq) + len(sink.HeaderEpoch) + len(sink.HeaderSource) + len(HeaderPipeline) +
			idx[3*i+1] - idx[3*i] + len(epochVal) + len(src) + len(s.pipeVal)
		h = h[:4]
		if dbz && m.Snapshot {
			// Format debezium's values have no sluice block, from which
			// recovery tells snapshot messages in format sluice.
			h = append(h, kgo.RecordHeader{Key: HeaderSnapshot, Value: snapshotVal})
			size += len(HeaderSnapshot) + len(snapshotVal)
		}
		meta := h // a transaction record's headers: without the change's own
		if m.Change != nil && len(m.Change.Reselected) > 0 {
			v := codec.AppendReselected(nil, m.Change)
			h = append(h, kgo.RecordHeader{Key: HeaderReselected, Value: v})
			size += len(HeaderReselected) + len(v)
		}
		base := h // a tombstone's headers: the delete's, without the end
		if m.End != nil {
			h = append(h, kgo.RecordHeader{Key: sink.HeaderEnd, Value: vals[idx[3*i+1]:idx[3*i+2]:idx[3*i+2]]})
			size += len(sink.HeaderEnd) + idx[3*i+2] - idx[3*i+1]
		}
		if size > s.cfg.MaxRecordBytes {
			return nil, fmt.Errorf("kafka: sink %s: message seq %d (table %s.%s) makes a record of about %d bytes, above max_record_bytes %d: raise max_record_bytes, and the topic's max.message.bytes with it",
				s.cfg.Name, m.Seq, m.DB, m.Table, size, s.cfg.MaxRecordBytes)
		}
		key := m.Key
		if len(key) == 0 {
			key = nil // a null key (format debezium, a table without a primary key)
		}
		tm := m.Txn
		if !txnMeta {
			tm = nil
		}
		var err error
		if tm != nil && tm.Begin {
			// Debezium's BEGIN record, in the transaction topic, before
			// the transaction's first event: with that event's seq and no
			// end, so that recovery sees the seq twice, which counts once.
			if recs[r], err = s.txnRecord(m, tm, false, meta); err != nil {
				return nil, err
			}
			r++
		}
		if kc := m.KeyChange; kc != nil {
			// Debezium's primary-key update: a delete of the old key
			// (header __debezium.newkey), its tombstone, a create of the
			// new key (header __debezium.oldkey); all with the update's
			// seq, the end on the create.
			schemas := s.cfg.Format.Schemas
			recs[r] = kgo.Record{Topic: names[i], Key: kc.OldKey, Value: kc.Delete,
				Headers: append(slices.Clip(base), kgo.RecordHeader{Key: HeaderNewKey, Value: keyHeader(key, schemas)})}
			r++
			if *s.cfg.Tombstones {
				recs[r] = kgo.Record{Topic: names[i], Key: kc.OldKey, Headers: base}
				r++
			}
			recs[r] = kgo.Record{Topic: names[i], Key: key, Value: kc.Create,
				Headers: append(slices.Clip(h), kgo.RecordHeader{Key: HeaderOldKey, Value: keyHeader(kc.OldKey, schemas)})}
			r++
			if tm != nil && tm.End {
				if recs[r], err = s.txnRecord(m, tm, true, meta); err != nil {
					return nil, err
				}
				r++
			}
			continue
		}
		if len(m.Split) > 1 && dbz {
			// Debezium's events of a statement it splits (a DROP TABLE
			// of several tables), all with the message's seq, the end on
			// the last.
			for j, v := range m.Split {
				hj := base
				if j == len(m.Split)-1 {
					hj = h
				}
				recs[r] = kgo.Record{Topic: names[i], Key: key, Value: v, Headers: hj}
				r++
			}
			continue
		}
		recs[r] = kgo.Record{
			Topic:   names[i],
			Key:     key,
			Value:   m.Value,
			Headers: h,
		}
		r++
		if *s.cfg.Tombstones && m.Op == binlog.OpDelete && key != nil {
			// The same seq as the delete and no end: recovery sees the
			// seq twice, which counts once.
			recs[r] = kgo.Record{Topic: names[i], Key: key, Headers: base}
			r++
		}
		if tm != nil && tm.End {
			// Debezium's END record, after the transaction's last record,
			// with its seq and no end (the data record carries it).
			if recs[r], err = s.txnRecord(m, tm, true, meta); err != nil {
				return nil, err
			}
			r++
		}
	}
	return recs[:r], nil
}

// txnTopic returns the transaction topic of a source (transaction_topic;
// by default Debezium's "<topic.prefix>.transaction", the source's name
// standing for topic.prefix, as in the schema names
// "<source>.<db>.<table>.Value").
func (s *Sink) txnTopic(source string) (string, error) {
	if t, ok := s.txnTopics[source]; ok {
		return t, nil
	}
	t, err := s.txnTmpl.render(source, "", "")
	if err != nil {
		return "", fmt.Errorf("kafka: sink %s: transaction_topic: %w", s.cfg.Name, err)
	}
	if s.txnTopics == nil {
		s.txnTopics = map[string]string{}
	}
	s.txnTopics[source] = t
	return t, nil
}

// isTxnTopic reports whether topic may be a transaction topic this sink
// writes (recovery reads those too).
func (s *Sink) isTxnTopic(topic string) bool {
	return s.cfg.Format.IsDebezium() && s.cfg.Format.TransactionMetadata && s.txnTmpl.matches(topic)
}

// txnRecord makes the BEGIN (end false) or END record of m's transaction.
func (s *Sink) txnRecord(m *sink.Message, tm *sink.TxnMark, end bool, hdrs []kgo.RecordHeader) (kgo.Record, error) {
	schemas := s.cfg.Format.Schemas
	ts := tm.Time
	if ts.IsZero() {
		ts = time.Now()
	}
	key := codec.AppendTxnKey(nil, tm.ID, schemas)
	var val []byte
	if end {
		val = codec.AppendTxnEnd(nil, tm.ID, ts.UnixMilli(), tm.Events, tm.Tables, schemas)
	} else {
		val = codec.AppendTxnBegin(nil, tm.ID, ts.UnixMilli(), schemas)
	}
	size := recordOverhead + batchOverhead + len(key) + len(val)
	for _, h := range hdrs {
		size += len(h.Key) + len(h.Value)
	}
	if size > s.cfg.MaxRecordBytes {
		return kgo.Record{}, fmt.Errorf("kafka: sink %s: the transaction END record of %s (seq %d, %d tables) is about %d bytes, above max_record_bytes %d: raise max_record_bytes, and the topic's max.message.bytes with it",
			s.cfg.Name, tm.ID, m.Seq, len(tm.Tables), size, s.cfg.MaxRecordBytes)
	}
	topic, err := s.txnTopic(m.Source)
	if err != nil {
		return kgo.Record{}, err
	}
	return kgo.Record{Topic: topic, Key: key, Value: val, Headers: slices.Clip(hdrs)}, nil
}

// topicOf returns the topic of a message by its role, rendered once per
// table: a table's topic for data; in format debezium, for a schema
// change, the schema-change topic (schema_change_topic, which the
// recovery scan reads as it reads the table topics), or "" (not written)
// with include.schema.changes false (a TRUNCATE written as Debezium's op
// "t" event has the data role). In format sluice a DDL message goes to its
// table's topic.
func (s *Sink) topicOf(m *sink.Message) (string, error) {
	tmpl, table := &s.topic, m.Table
	if m.Role == sink.RoleSchemaChange && s.cfg.Format.IsDebezium() {
		if s.schemaTopic == nil {
			return "", nil
		}
		tmpl, table = s.schemaTopic, "\x00schema" // a key no table has
	}
	k := topicKey{m.Source, m.DB, table}
	if t, ok := s.topics[k]; ok {
		return t, nil
	}
	if tmpl == s.schemaTopic {
		table = ""
	}
	t, err := tmpl.render(m.Source, m.DB, table)
	if err != nil {
		return "", err
	}
	if tmpl == &s.topic {
		if err := s.owners.Claim(t, m.Source, m.DB, table); err != nil {
			return "", err
		}
	}
	s.topics[k] = t
	return t, nil
}

// matches reports whether topic is one the sink may have written
// messages to (recovery reads those): one the topic template or the
// schema-change topic's could have made. Heartbeat topics hold no
// messages (no sluice-seq) and are not read.
func (s *Sink) matches(topic string) bool {
	if s.cfg.HeartbeatIntervalMs > 0 && strings.HasPrefix(topic, s.cfg.HeartbeatTopicsPrefix+".") {
		return false
	}
	return s.topic.matches(topic) || s.schemaTopic != nil && s.schemaTopic.matches(topic) || s.isTxnTopic(topic)
}

// ensureTopics makes sure topics exist, creating the missing ones when
// create_topics allows.
func (s *Sink) ensureTopics(ctx context.Context, topics []string) error {
	details, err := s.metadata(ctx, topics...)
	if err != nil {
		return s.wrap("looking up topics "+strings.Join(topics, ", "), err)
	}
	var missing []string
	for _, t := range topics {
		d, ok := details[t]
		switch {
		case ok && d.err == nil:
			s.known[t] = true
		case !ok || errors.Is(d.err, kerr.UnknownTopicOrPartition):
			missing = append(missing, t)
		default:
			return s.wrap("looking up topic "+t, d.err)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	if !*s.cfg.CreateTopics {
		return fmt.Errorf("kafka: sink %s: topic %s does not exist and create_topics is false: create it (kafka-topics.sh --create --topic %s), or set create_topics: true",
			s.cfg.Name, strings.Join(missing, ", "), missing[0])
	}
	parts, rf := s.cfg.Partitions, s.cfg.ReplicationFactor
	if parts == 0 {
		parts = -1 // the broker's default
	}
	if rf == 0 {
		rf = -1
	}
	tctx, cancel := context.WithTimeout(ctx, s.cfg.RequestTimeout)
	defer cancel()
	res, err := s.adm.CreateTopics(tctx, parts, rf, nil, missing...)
	if err != nil {
		return s.wrap("creating topics "+strings.Join(missing, ", "), err)
	}
	for _, t := range missing {
		r, ok := res[t]
		if !ok {
			return fmt.Errorf("kafka: sink %s: creating topic %s: the broker did not answer for it", s.cfg.Name, t)
		}
		if r.Err != nil && !errors.Is(r.Err, kerr.TopicAlreadyExists) {
			msg := r.ErrMessage
			if msg != "" {
				msg = " (" + msg + ")"
			}
			return fmt.Errorf("kafka: sink %s: creating topic %s with %d partitions and replication factor %d (-1: the broker's default): %w%s; check partitions and replication_factor, or create the topic yourself",
				s.cfg.Name, t, parts, rf, r.Err, msg)
		}
		if r.Err == nil {
			s.log.Info("created topic", "topic", t, "partitions", r.NumPartitions, "replication_factor", r.ReplicationFactor)
		}
		s.known[t] = true
	}
	return nil
}

// isFenced reports whether err says that a newer producer with the same
// transactional id has started.
func isFenced(err error) bool {
	return errors.Is(err, kerr.ProducerFenced) || errors.Is(err, kerr.InvalidProducerEpoch)
}

// writeErr explains a failed Write.
func (s *Sink) writeErr(b *sink.Batch, what string, err error) error {
	return s.wrap(fmt.Sprintf("writing batch seq %d..%d (epoch %d): %s", b.FirstSeq(), b.LastSeq(), b.Epoch, what), err)
}

// wrap explains an error of the cluster, with sink.ErrFenced when a
// newer producer has fenced this one.
func (s *Sink) wrap(what string, err error) error {
	if isFenced(err) {
		return fmt.Errorf("kafka: sink %s: %s: another producer with transactional id %q has started (a newer process of pipeline %q): %w: %w",
			s.cfg.Name, what, s.cfg.TransactionalID, s.pipeline, sink.ErrFenced, err)
	}
	if hint := s.explainRefusal(err); hint != "" {
		return fmt.Errorf("kafka: sink %s: %s: %w; %s", s.cfg.Name, what, err, hint)
	}
	return fmt.Errorf("kafka: sink %s: %s: %w; is the cluster at %s up and reachable?", s.cfg.Name, what, err, strings.Join(s.cfg.Brokers, ","))
}

// kgoLogger passes the client's warnings and errors to slog.
type kgoLogger struct{ log *slog.Logger }

func (l kgoLogger) Level() kgo.LogLevel { return kgo.LogLevelWarn }

func (l kgoLogger) Log(level kgo.LogLevel, msg string, keyvals ...any) {
	lv := slog.LevelWarn
	if level == kgo.LogLevelError {
		lv = slog.LevelError
	}
	l.log.Log(context.Background(), lv, "kafka client: "+msg, keyvals...)
}

// topicMeta is what a metadata request says of a topic.
type topicMeta struct {
	id       [16]byte
	internal bool
	err      error
	leaders  map[int32]int32 // partition -> leader (-1: none)
}

// metadata asks the cluster about topics (all of them when none is
// named), bypassing the client's metadata cache, which may hold a topic
// as missing for a few seconds after it was created.
func (s *Sink) metadata(ctx context.Context, topics ...string) (map[string]topicMeta, error) {
	mctx, cancel := context.WithTimeout(ctx, s.cfg.RequestTimeout)
	defer cancel()
	req := kmsg.NewPtrMetadataRequest()
	for _, t := range topics {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(t)
		req.Topics = append(req.Topics, rt)
	}
	resp, err := req.RequestWith(mctx, s.meta)
	if err != nil {
		return nil, err
	}
	out := make(map[string]topicMeta, len(resp.Topics))
	for _, t := range resp.Topics {
		if t.Topic == nil {
			continue
		}
		tm := topicMeta{id: t.TopicID, internal: t.IsInternal, err: kerr.ErrorForCode(t.ErrorCode), leaders: make(map[int32]int32, len(t.Partitions))}
		for _, p := range t.Partitions {
			tm.leaders[p.Partition] = p.Leader
		}
		out[*t.Topic] = tm
	}
	return out, nil
}
