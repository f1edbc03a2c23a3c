package pipeline

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-cdc/sluice/binlog"
	"github.com/sluice-cdc/sluice/checkpoint"
	"github.com/sluice-cdc/sluice/codec"
	"github.com/sluice-cdc/sluice/internal/backoff"
	"github.com/sluice-cdc/sluice/internal/bytebudget"
	"github.com/sluice-cdc/sluice/position"
	"github.com/sluice-cdc/sluice/snapshot"
)

// Config is one pipeline: its sources, its sinks and a checkpoint store.
type Config struct {
	// Name identifies the pipeline in checkpoints and sinks.
	Name string
	// Source is the pipeline's source when it has one; Sources lists them
	// when it has several (Source is then ignored). Each source's
	// transactions keep their order; transactions of different sources
	// interleave whole.
	Source  SourceConfig
	Sources []SourceConfig
	// Align keeps sources together in event time (off unless MaxSkew is
	// set); its clock sampling also gives every source's clock offset and
	// the pipeline's low watermark.
	Align AlignConfig
	Sinks []Sink
	Store checkpoint.Store
	// BatchBytes cuts a batch when its encoded messages reach this size
	// (default 1 MiB). A batch is also cut whenever the source has nothing
	// more ready, so that latency stays low under light load.
	BatchBytes int
	// BufferBytes bounds the memory of batches read but not yet written by
	// every sink (default 64 MiB): a slow sink slows the reader.
	BufferBytes int
	// CheckpointEvery is how often a checkpoint is saved (default 1 s).
	// Recovery scans the sinks past the checkpoint, so a longer interval
	// costs only a longer scan at start.
	CheckpointEvery time.Duration
	// Epoch, when set, returns the fencing epoch of this run (a
	// coordinator's leadership). Without it each start takes the stored
	// epoch plus one.
	Epoch func(ctx context.Context, stored uint64) (uint64, error)
	// RetryMin and RetryMax bound the backoff between attempts to write to
	// a sink that failed (default 100 ms and 5 s).
	RetryMin, RetryMax time.Duration
	Logger             *slog.Logger
	// Now is the clock (default time.Now).
	Now func() time.Time
	// OnDelivered, when set, is called after each batch is durable in every
	// sink with the time each of its source transactions was read.
	OnDelivered func(read []time.Time, now time.Time)
}

func (c *Config) defaults() {
	if c.BatchBytes <= 0 {
		c.BatchBytes = 1 << 20
	}
	if c.BufferBytes <= 0 {
		c.BufferBytes = 64 << 20
	}
	if c.BufferBytes < 2*c.BatchBytes {
		c.BufferBytes = 2 * c.BatchBytes
	}
	if c.CheckpointEvery <= 0 {
		c.CheckpointEvery = time.Second
	}
	if c.RetryMin <= 0 {
		c.RetryMin = 100 * time.Millisecond
	}
	if c.RetryMax <= 0 {
		c.RetryMax = 5 * time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if len(c.Sources) == 0 {
		c.Sources = []SourceConfig{c.Source}
	}
	if len(c.Sources) == 1 && c.Sources[0].Name == "" {
		c.Sources[0].Name = c.Name
	}
	c.Align.defaults()
}

// Validate reports what is missing from c.
func (c *Config) Validate() error {
	switch {
	case c.Name == "":
		return errors.New("pipeline: a name is required")
	case len(c.Sinks) == 0:
		return errors.New("pipeline: at least one sink is required")
	case c.Store == nil:
		return errors.New("pipeline: a checkpoint store is required")
	}
	if len(c.Sinks) > maxSinks {
		return fmt.Errorf("pipeline: %d sinks; at most %d are supported", len(c.Sinks), maxSinks)
	}
	srcs := map[string]bool{}
	for i, s := range c.Sources {
		if s.Name == "" {
			return fmt.Errorf("pipeline: sources[%d] has no name; with several sources each needs a name (it goes into messages and checkpoints)", i)
		}
		if srcs[s.Name] {
			return fmt.Errorf("pipeline: two sources are named %q; give each a different name", s.Name)
		}
		srcs[s.Name] = true
	}
	if err := c.Align.validate(); err != nil {
		return err
	}
	seen := map[string]bool{}
	for _, s := range c.Sinks {
		if seen[s.Name()] {
			return fmt.Errorf("pipeline: two sinks are named %q; give each a different name", s.Name())
		}
		seen[s.Name()] = true
	}
	return nil
}

// maxSinks bounds the sinks of a pipeline (a message marks the sinks that
// already hold it in a 64-bit mask after a recovery).
const maxSinks = 64

// Pipeline moves changes from its sources to its sinks.
type Pipeline struct {
	cfg  Config
	srcs []*source
	log  *slog.Logger

	stats  counters
	mu     sync.Mutex // guards status
	status Status
	// merger is the current run's (for metrics); nil between runs.
	merger atomic.Pointer[merger]
	// watermark is the low watermark (Unix ns); skew the spread of the
	// live sources' progress (ns); delivered the watermark of what every
	// sink holds.
	watermark, skew, delivered atomic.Int64
	// formats are the distinct formats the sinks use (see Formatted), in
	// the order of the first sink using each; sinkFmt is each sink's.
	formats []codec.Format
	sinkFmt []int
}

// New checks cfg and returns a pipeline ready to Run.
func New(cfg Config) (*Pipeline, error) {
	cfg.defaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	p := &Pipeline{cfg: cfg, log: cfg.Logger}
	for _, s := range cfg.Sinks {
		p.status.Sinks = append(p.status.Sinks, s.Name())
		f := SinkFormat(s)
		if err := f.Validate(); err != nil {
			return nil, fmt.Errorf("pipeline: sink %s: %w", s.Name(), err)
		}
		fi := slices.Index(p.formats, f)
		if fi < 0 {
			fi = len(p.formats)
			p.formats = append(p.formats, f)
		}
		p.sinkFmt = append(p.sinkFmt, fi)
	}
	if err := checkPlain(&cfg); err != nil {
		return nil, err
	}
	full := false // format debezium writes every column: refuse partial row images
	for _, f := range p.formats {
		full = full || f.IsDebezium()
	}
	for _, sc := range cfg.Sources {
		if sc.RowImage.Fill && sc.RowImage.Dir == "" {
			return nil, fmt.Errorf("pipeline: source %s: row_image fill needs a directory for its store", sc.Name)
		}
		// With row_image: fill every image is full when it is encoded.
		sc.Binlog.FullRowImages = sc.Binlog.FullRowImages || (full && !sc.RowImage.Fill)
		log := cfg.Logger
		if len(cfg.Sources) > 1 {
			log = log.With("source", sc.Name)
		}
		i := len(p.srcs)
		status := func(fn func(*SourceStatus)) { p.setStatus(func(s *Status) { fn(&s.Sources[i]) }) }
		p.srcs = append(p.srcs, &source{cfg: sc, pipeline: cfg.Name, log: log, status: status, text: binlog.NewTextCheck(log)})
	}
	p.status.Sources = make([]SourceStatus, len(p.srcs))
	for i, s := range p.srcs {
		p.status.Sources[i].Name = s.cfg.Name
	}
	return p, nil
}

// recoverPlan asks every sink what it holds beyond the checkpoint and
// returns where the run resumes (the planner decides, see recovery.go).
func (p *Pipeline) recoverPlan(ctx context.Context, cp *checkpoint.Checkpoint, epoch uint64) (plan, error) {
	r := p.planner()
	pl, err := r.start(cp)
	if err != nil {
		return pl, err
	}
	recs := make([]Recovery, len(p.cfg.Sinks))
	for i, s := range p.cfg.Sinks {
		rec, err := p.recoverSink(ctx, s, epoch, cp.Sinks[s.Name()])
		if err != nil {
			return pl, err
		}
		recs[i] = rec
		p.log.Info("sink recovered", "sink", s.Name(), "max_seq", rec.MaxSeq, "offset", rec.Offset, "checkpoint_seq", cp.LastSeq)
	}
	return r.plan(cp, recs, pl)
}

// recoverSink asks a sink what it holds, retrying with backoff while it is
// unavailable (a sink that is down at start is waited for, not fatal).
func (p *Pipeline) recoverSink(ctx context.Context, s Sink, epoch uint64, offset string) (Recovery, error) {
	bo := backoff.New(p.cfg.RetryMin, p.cfg.RetryMax)
	for attempt := 1; ; attempt++ {
		rec, err := s.Recover(ctx, epoch, offset)
		if err == nil {
			if attempt > 1 {
				p.log.Info("sink is back; delivery continues", "sink", s.Name(), "attempts", attempt)
				p.setStatus(func(st *Status) { delete(st.SinkDown, s.Name()) })
			}
			return rec, nil
		}
		if errors.Is(err, ErrFenced) || errors.Is(err, ErrPermanent) {
			return rec, fmt.Errorf("sink %s: %w", s.Name(), err)
		}
		if ctx.Err() != nil {
			return rec, ctx.Err()
		}
		delay := bo.Next()
		p.log.Warn("sink unavailable at start; retrying", "sink", s.Name(), "attempt", attempt, "retry_in", delay.String(), "err", err.Error())
		p.sinkDown(s.Name(), err)
		if err := backoff.Sleep(ctx, delay); err != nil {
			return rec, err
		}
	}
}

// Run loads the checkpoint, recovers the sinks, and moves changes until
// ctx ends (nil), every source ends (nil: stop position, snapshot mode
// "only"), or an error that retrying cannot fix.
func (p *Pipeline) Run(ctx context.Context) error {
	cfg := &p.cfg
	store := cfg.Store
	cp, err := store.Load(ctx)
	if err != nil {
		return err
	}
	var leader uint64
	if cfg.Epoch != nil {
		if leader, err = cfg.Epoch(ctx, cp.Epoch); err != nil {
			return err
		}
	}
	epoch, err := runEpoch(cp.Epoch, leader, cfg.Epoch != nil)
	if err != nil {
		return err
	}
	pl, err := p.recoverPlan(ctx, &cp, epoch)
	if err != nil {
		return err
	}
	closeImages, err := p.openImages(ctx, pl, &cp)
	if err != nil {
		return err
	}
	defer closeImages()
	// Claim the epoch in the checkpoint: a compare-and-set, so a second
	// writer that loaded the same version fails here or at its next save.
	cp.Pipeline, cp.Epoch = cfg.Name, epoch
	// The sinks' offsets stay where the checkpoint had them: a sink may
	// hold more than the checkpoint's positions cover, and the next
	// recovery must find that again.
	if cp.Sinks == nil {
		cp.Sinks = map[string]string{}
	}
	if cp.Version, err = store.Save(ctx, cp, cp.Version); err != nil {
		return p.saveError(err)
	}
	if err := p.trimImages(&cp); err != nil {
		return err
	}
	attrs := []any{"pipeline", cfg.Name, "epoch", epoch, "next_seq", pl.nextSeq, "checkpoint_version", cp.Version}
	for i, s := range p.srcs {
		attrs = append(attrs, "position."+s.cfg.Name, pl.srcs[i].pos.String())
	}
	p.log.Info("pipeline starting", attrs...)
	p.setStatus(func(s *Status) {
		s.Epoch, s.LastSeq, s.Started, s.Running = epoch, pl.nextSeq-1, cfg.Now(), true
		for i := range s.Sources {
			s.Sources[i].Position = pl.srcs[i].pos
		}
		s.Position = pl.srcs[0].pos
	})
	defer p.setStatus(func(s *Status) { s.Running = false })

	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	w := newWriter(p, &cp, epoch, pl)
	m := newMerger(p)
	m.b = newBuilder(p, w, epoch, pl.nextSeq, pl.holds)
	m.b.noLast = pl.noLast
	m.core.pins = pl.pins
	p.merger.Store(m)
	defer p.merger.Store(nil)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := w.run(ctx); err != nil {
			cancel(err)
		}
	}()
	sctx, scancel := context.WithCancel(ctx)
	var swg sync.WaitGroup
	for i, s := range p.srcs {
		in, sp := m.ins[i], pl.srcs[i]
		swg.Add(2)
		go func() {
			defer swg.Done()
			in.sampleClock(sctx, cfg.Align.SampleEvery)
		}()
		go func() {
			defer swg.Done()
			m.sourceDone(i, s.run(sctx, sp.pos, sp.startSaved(), sp.resume, in))
		}()
	}
	srcErr := m.run(sctx)
	if srcErr == nil || errors.Is(srcErr, context.Canceled) {
		// Deliver what was read, then stop the writer.
		if err := m.b.flush(ctx); err != nil && srcErr == nil {
			srcErr = err
		}
	}
	scancel()
	swg.Wait()
	w.close()
	wg.Wait()
	if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, context.Canceled) {
		return cause
	}
	if srcErr != nil && !errors.Is(srcErr, context.Canceled) {
		return srcErr
	}
	if errors.Is(w.err, context.Canceled) {
		return nil
	}
	return w.err
}

// AddTable starts an incremental snapshot of db.table while the pipeline
// streams (the admin API's POST /snapshot). With several sources, source
// names the one to read it from.
func (p *Pipeline) AddTable(ctx context.Context, source, db, table, where string) error {
	if source == "" {
		if len(p.srcs) > 1 {
			names := make([]string, len(p.srcs))
			for i, s := range p.srcs {
				names[i] = s.cfg.Name
			}
			return fmt.Errorf("the pipeline has several sources (%s): name the one to snapshot %s.%s from", strings.Join(names, ", "), db, table)
		}
		return p.srcs[0].addTable(ctx, db, table, where)
	}
	if si := p.srcIndex(source); si >= 0 {
		return p.srcs[si].addTable(ctx, db, table, where)
	}
	return fmt.Errorf("the pipeline has no source named %q", source)
}

// DeliveredWatermark returns the low watermark of what every sink holds:
// every message with an earlier event time has been written to all sinks
// (zero before any). Operators that are sinks (the interval join) advance
// by it: no message still to come to them is older, within the lateness
// that MariaDB's one-second commit times need.
func (p *Pipeline) DeliveredWatermark() time.Time {
	if w := p.delivered.Load(); w > 0 {
		return time.Unix(0, w)
	}
	return time.Time{}
}

// Watermark returns the pipeline's low watermark: the minimum over live
// sources of the event time each has read everything up to (zero before
// any source streams). Event-time operators evict state behind it.
func (p *Pipeline) Watermark() time.Time {
	if w := p.watermark.Load(); w > 0 {
		return time.Unix(0, w)
	}
	return time.Time{}
}

func (p *Pipeline) saveError(err error) error {
	if errors.Is(err, checkpoint.ErrConflict) {
		return fmt.Errorf("%w: %v; another sluice process is running this pipeline: stop it (or give this one another pipeline name)", ErrFenced, err)
	}
	return err
}

// Status is what the pipeline reports about itself (for `sluice status`,
// the admin API and metrics).
type Status struct {
	Running  bool
	Started  time.Time
	Epoch    uint64
	Position position.Position
	// LastSeq is the sequence number of the last message durable in every
	// sink.
	LastSeq           uint64
	CheckpointVersion uint64
	CheckpointAt      time.Time
	// CommitTime is the source commit time of the last delivered
	// transaction; Lag is how far it was behind the clock when delivered.
	CommitTime time.Time
	Lag        time.Duration
	// SinkErrors counts failed writes per sink; SinkDown names sinks whose
	// last write failed.
	SinkErrors map[string]uint64
	SinkDown   map[string]string
	// Sinks names the sinks.
	Sinks []string
	// Snapshot is the progress of every source's snapshot.
	Snapshot []snapshot.TableProgress
	// Sources is each source's own state; Position is the first source's.
	Sources []SourceStatus
	// Watermark is the low watermark; Skew the spread of the live sources'
	// event times.
	Watermark time.Time
	Skew      time.Duration
}

// SourceStatus is one source's state.
type SourceStatus struct {
	Name string
	// Position is after the source's last delivered transaction.
	Position position.Position
	// EventTime is the (corrected) time up to which the source has been
	// read; Lag how far it is behind the clock.
	EventTime time.Time
	Lag       time.Duration
	// ClockOffset is the source's clock minus sluice's, and ClockRTT the
	// round trip of the sample it came from.
	ClockOffset, ClockRTT time.Duration
	// Streaming is set once the source reads its binlog; Stalled when it
	// sent nothing for align.max_wait.
	Streaming, Stalled bool
	// Queued is the bytes read and waiting for the merger (a source held
	// back by alignment fills it).
	Queued int
	// StatementChanges counts changes to captured tables that the server
	// logged as statements and that were skipped (on_statement_change: skip).
	StatementChanges int64
	// UnparsedDDL counts DDL statements the SQL parser could not read
	// (each a warning; delivered by their default database).
	UnparsedDDL int64
	// SchemaUnknown counts DDL statements the schema history could not
	// apply, and SchemaMismatches rows events whose binlog column metadata
	// differed from the history's definition (each also a warning).
	SchemaUnknown, SchemaMismatches int64
	// TxnEndsMissing counts the transactions whose Debezium END record
	// (provide.transaction.metadata) was not written because their last
	// chunk came without changes (each also a warning; not expected).
	TxnEndsMissing int64
	// InvalidText counts, per column, the characters written as '?'
	// because they are not valid in the column's character set or have
	// no Unicode mapping (each column also warned about once).
	InvalidText []binlog.TextCount
	// Failovers counts the times the source turned out to be another
	// server than the saved position's (it failed over), and CatchUpWait
	// the time spent waiting for such a server to receive transactions
	// already delivered (source.catch_up_wait).
	Failovers   int64
	CatchUpWait time.Duration
	Snapshot    []snapshot.TableProgress
	// SnapshotBlocked is how long the source's last consistent snapshot
	// held writers back with its lock (MySQL; zero when it took none).
	SnapshotBlocked time.Duration
	// SnapshotMethod is the method its last initial snapshot used
	// (snapshot.Result.Method; empty before one ran).
	SnapshotMethod string
	// RowImagesCompleted counts the changes whose partial row images
	// were completed from the row image store (row_image: fill),
	// RowImageStoreBytes is the store's size on disk, and
	// RowImageStoreCleared counts the starts that emptied the store
	// (each a warning with the reason).
	RowImagesCompleted   int64
	RowImageStoreBytes   uint64
	RowImageStoreCleared int64
	// RowImagesReselected counts the changes completed from the source's
	// current row (fill_missing: reselect).
	RowImagesReselected int64
}

// Counters are totals since the process started.
type Counters struct {
	Messages, Txns, Batches, Bytes, Checkpoints uint64
	// BufferedBytes is the memory of batches read and not yet durable.
	BufferedBytes int64
	// Held counts transactions alignment held back, and HoldTime the time
	// they spent held.
	Held     uint64
	HoldTime time.Duration
}

type counters struct {
	messages, txns, batches, bytes, checkpoints atomic.Uint64
	held, holdNanos                             atomic.Uint64
	buffered                                    atomic.Int64
}

// Counters returns the totals.
func (p *Pipeline) Counters() Counters {
	return Counters{
		Messages: p.stats.messages.Load(), Txns: p.stats.txns.Load(), Batches: p.stats.batches.Load(),
		Bytes: p.stats.bytes.Load(), Checkpoints: p.stats.checkpoints.Load(), BufferedBytes: p.stats.buffered.Load(),
		Held: p.stats.held.Load(), HoldTime: time.Duration(p.stats.holdNanos.Load()),
	}
}

// Status returns a copy of the current status.
func (p *Pipeline) Status() Status {
	p.mu.Lock()
	s := p.status
	s.SinkErrors = cloneMap(s.SinkErrors)
	s.SinkDown = cloneMap(s.SinkDown)
	s.Sources = append([]SourceStatus(nil), s.Sources...)
	s.Snapshot = nil
	for i := range s.Sources {
		s.Snapshot = append(s.Snapshot, s.Sources[i].Snapshot...)
		s.Sources[i].Snapshot = append([]snapshot.TableProgress(nil), s.Sources[i].Snapshot...)
	}
	p.mu.Unlock()
	s.Watermark, s.Skew = p.Watermark(), time.Duration(p.skew.Load())
	now := p.cfg.Now()
	if m := p.merger.Load(); m != nil {
		for i, in := range m.ins {
			ss := &s.Sources[i]
			var pr int64
			pr, ss.Streaming, ss.Stalled, ss.Queued = in.status()
			if pr > 0 {
				ss.EventTime = time.Unix(0, pr)
				ss.Lag = now.Sub(ss.EventTime)
			}
			ss.ClockOffset, ss.ClockRTT = time.Duration(in.clock.offset.Load()), time.Duration(in.clock.rtt.Load())
			st := in.src.stats()
			ss.StatementChanges, ss.UnparsedDDL = st.StatementChanges, st.UnparsedDDL
			ss.SchemaUnknown, ss.SchemaMismatches = st.History.Unknown, st.History.Mismatches
			ss.Failovers, ss.CatchUpWait = st.Failovers, st.CatchUpWait
			ss.TxnEndsMissing = in.src.endsMissing.Load()
			ss.InvalidText = in.src.text.Counts()
			if st := in.src.images.Load(); st != nil {
				is := st.Stats()
				ss.RowImagesCompleted, ss.RowImageStoreBytes, ss.RowImagesReselected = is.Completed, is.DiskBytes, is.Reselected
			}
			ss.RowImageStoreCleared = in.src.imagesCleared.Load()
		}
	}
	return s
}

func cloneMap[V any](m map[string]V) map[string]V {
	if m == nil {
		return nil
	}
	out := make(map[string]V, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// sinkDown records a failed write or recovery of a sink.
func (p *Pipeline) sinkDown(name string, err error) {
	p.setStatus(func(st *Status) {
		if st.SinkErrors == nil {
			st.SinkErrors, st.SinkDown = map[string]uint64{}, map[string]string{}
		}
		st.SinkErrors[name]++
		st.SinkDown[name] = err.Error()
	})
}

func (p *Pipeline) setStatus(fn func(*Status)) {
	p.mu.Lock()
	fn(&p.status)
	p.mu.Unlock()
}

// SnapshotProgress records the progress of a source's snapshot in the
// status (call it from SnapshotConfig.Progress).
func (p *Pipeline) SnapshotProgress(source string, ps []snapshot.TableProgress) {
	p.setStatus(func(s *Status) {
		for i := range s.Sources {
			if s.Sources[i].Name == source {
				s.Sources[i].Snapshot = append(s.Sources[i].Snapshot[:0], ps...)
			}
		}
	})
}

// batch is a Batch with what the pipeline needs to finish it.
type batch struct {
	Batch
	buf []byte
	// spans are the Value and Key of each message within buf, one per
	// format (Pipeline.formats): message i's in format f is
	// spans[i*len(formats)+f].
	spans []span
	// alt holds the messages in the formats after the first (alt[f-1]:
	// format f); Messages are in the first.
	alt  [][]Message
	txns []*binlog.Txn
	size int // bytes counted against the buffer budget
	// txnBytes is the memory of the chunks in txns (as the merger
	// measured them when they were queued).
	txnBytes int
	encoded  int // bytes of the encoded messages
	// ends holds, per source, the position after the batch's last whole
	// transaction of that source (zero: none); endSeq is the last sequence
	// number at the last of them; set when the batch holds a transaction
	// end (or moves a snapshot on).
	ends   []position.Position
	endSeq uint64
	hasEnd bool
	// snaps are snapshot states, each saved once the batch is durable.
	snaps []srcSnap
	// opened names the partly held transactions the builder found in
	// this batch (see hold.openBegin), for the writer's pending holds.
	opened []opened
	// held is set when some message is already held by some sink (after a
	// recovery with several sources).
	held bool
	// wm is the emitted watermark when the batch was cut: every message
	// with an earlier event time is in this batch or an earlier one.
	wm         int64
	commit     time.Time
	read       []time.Time
	inSnapshot bool
	// lastMarks are the rows of the batch marked `"snapshot":"last"`.
	lastMarks []srcSeq
	// fixesStart: the batch records a start position the reader fixed
	// (streamFrom). It is written and checkpointed before any later batch:
	// merged with the batches after it, a crash during their write left
	// no checkpoint of the start, and the restart began at a newer one.
	fixesStart bool
}

// opened says that the transaction sink's hold of source src names
// begins at begin.
type opened struct {
	sink, src int
	begin     position.Position
}

type srcSeq struct {
	src int
	seq uint64
}

type srcSnap struct {
	src int
	st  *snapshot.State
}

type span struct{ v0, v1, k0, k1 int32 }

// builder turns source chunks into numbered, encoded messages and cuts
// them into batches. It runs on the merger's goroutine.
type builder struct {
	p       *Pipeline
	w       *writer
	epoch   uint64
	nextSeq uint64
	cur     *batch
	srcs    []builderSource
	// holds: see plan.holds; nil when no sink holds anything replayed.
	holds [][]hold
	// wm is the emitted watermark when the last chunk was handed over.
	wm int64
	// noLast: see plan.noLast (consumed by the first row it unmarks).
	noLast []bool
	// kcs is scratch: the key change of the current change per format;
	// splits its events in place of one (sink.Message.Split).
	kcs    []*KeyChange
	splits [][][]byte
	// fmtTxn and fmtTrunc say, per format, that it has Debezium's
	// transaction metadata and TRUNCATE events; anyTxn and anyTrunc that
	// some format has.
	fmtTxn, fmtTrunc []bool
	anyTxn, anyTrunc bool
	// plain is set when the sink is a PlainSink (see plainTxn).
	plain *plainOut
}

// txnCount counts the data events of a source's current transaction, for
// Debezium's transaction metadata: its chunks come one after the other,
// and after a restart it is read again from its start (what sinks
// already hold is left out after the counting), so the counts are the
// transaction's whole.
type txnCount struct {
	begin  position.Position
	id     string
	events int64
	tables []codec.TxnCount
	// last is the table of the last event, the index of its count.
	last    *binlog.Table
	lastIdx int
}

func (c *txnCount) reset(t *binlog.Txn) {
	c.begin, c.id, c.events, c.tables, c.last = t.Begin, codec.TxnID(t), 0, c.tables[:0], nil
}

// table returns the index in c.tables of ch's table, adding it.
func (c *txnCount) table(ch *binlog.Change) int {
	if ch.Table == c.last && c.last != nil {
		return c.lastIdx
	}
	name := ch.Table.Schema + "." + ch.Table.Name
	i := slices.IndexFunc(c.tables, func(tc codec.TxnCount) bool { return tc.Table == name })
	if i < 0 {
		i = len(c.tables)
		c.tables = append(c.tables, codec.TxnCount{Table: name})
	}
	c.last, c.lastIdx = ch.Table, i
	return i
}

// dataEvent reports whether ch is a data event of Debezium's transaction
// metadata: a row inserted, updated or deleted.
func dataEvent(ch *binlog.Change) bool {
	return (ch.Op == binlog.OpInsert || ch.Op == binlog.OpUpdate || ch.Op == binlog.OpDelete) && ch.Table != nil
}

// keyChange returns ch, an update, as Debezium writes an update that
// changed the primary key (a delete under the old key and a create under
// the new, newKey), or nil when the key stayed.
//
// With transaction metadata, del and ins are the orders of the delete and
// the create (Debezium counts them as two events); nil otherwise.
func keyChange(enc *codec.Encoder, t *binlog.Txn, ch *binlog.Change, newKey []byte, delTx, insTx *codec.TxnOrder) *KeyChange {
	del := *ch
	del.Op, del.After = binlog.OpDelete, nil
	old := enc.AppendKey(nil, &del)
	if bytes.Equal(old, newKey) {
		return nil
	}
	ins := del
	ins.Op, ins.Before, ins.After = binlog.OpInsert, nil, ch.After
	kc := &KeyChange{OldKey: old}
	kc.Delete = bytes.TrimSuffix(enc.AppendDebeziumChange(nil, t, &del, codec.SnapshotFalse, delTx), nl)
	kc.Create = bytes.TrimSuffix(enc.AppendDebeziumChange(nil, t, &ins, codec.SnapshotFalse, insTx), nl)
	return kc
}

// builderSource is one source's encoders (one per format) and its
// constant metadata.
type builderSource struct {
	name string
	encs []*codec.Encoder
	// metaTail is `,"epoch":E,"source":"S"`, written once.
	metaTail []byte
	// tx counts the current transaction's events (transaction metadata).
	tx txnCount
}

func newBuilder(p *Pipeline, w *writer, epoch, nextSeq uint64, holds [][]hold) *builder {
	b := &builder{p: p, w: w, epoch: epoch, nextSeq: nextSeq, holds: holds, plain: newPlainOut(p)}
	for _, f := range p.formats {
		b.fmtTxn = append(b.fmtTxn, f.IsDebezium() && f.TransactionMetadata)
		b.fmtTrunc = append(b.fmtTrunc, f.TruncateEvents())
		b.anyTxn = b.anyTxn || f.IsDebezium() && f.TransactionMetadata
		b.anyTrunc = b.anyTrunc || f.TruncateEvents()
	}
	for _, s := range p.srcs {
		bs := builderSource{name: s.cfg.Name}
		for _, f := range p.formats {
			bs.encs = append(bs.encs, codec.NewEncoder(codec.Source{Name: s.cfg.Name}, codec.WithFormat(f)))
		}
		bs.metaTail = append(bs.metaTail, `,"epoch":`...)
		bs.metaTail = strconv.AppendUint(bs.metaTail, epoch, 10)
		bs.metaTail = append(bs.metaTail, `,"source":`...)
		bs.metaTail = codec.AppendString(bs.metaTail, bs.name)
		b.srcs = append(b.srcs, bs)
	}
	return b
}

func (b *builder) batch() *batch {
	if b.cur != nil {
		return b.cur
	}
	select {
	case bt := <-b.w.free: // a written batch's memory, reused
		clear(bt.ends)
		for k := range bt.alt {
			bt.alt[k] = bt.alt[k][:0]
		}
		*bt = batch{Batch: Batch{Epoch: b.epoch, Messages: bt.Messages[:0]}, buf: bt.buf[:0], spans: bt.spans[:0], alt: bt.alt, txns: bt.txns[:0], read: bt.read[:0], ends: bt.ends, snaps: bt.snaps[:0], opened: bt.opened[:0], lastMarks: bt.lastMarks[:0]}
		b.cur = bt
	default:
		nf := len(b.p.formats)
		bufCap := nf * (b.p.cfg.BatchBytes + b.p.cfg.BatchBytes/2)
		if b.plain != nil && b.plain.none {
			bufCap = 0 // nothing is encoded
		}
		b.cur = &batch{Batch: Batch{Epoch: b.epoch}, buf: make([]byte, 0, bufCap), ends: make([]position.Position, len(b.srcs)), alt: make([][]Message, nf-1)}
	}
	return b.cur
}

// chunkStart notes chunk t in the current batch (when it was read,
// whether it is a snapshot's) and returns the batch, the chunk's number
// of changes and its corrected event time (et, Unix ns; zero when 0).
func (b *builder) chunkStart(t *binlog.Txn, et int64) (*batch, int, time.Time) {
	bt := b.batch()
	n := len(t.Changes)
	if n > 0 {
		bt.read = append(bt.read, b.p.cfg.Now())
	}
	if t.Snapshot && n > 0 {
		bt.inSnapshot = true
	}
	var evt time.Time
	if et != 0 {
		evt = time.Unix(0, et)
	}
	return bt, n, evt
}

// snapMark is the snapshot mark of change i of chunk t of source si, in
// the message numbered seq (codec.SnapshotOf): a snapshot's last row is
// marked last once (not when read again after a restart whose sinks all
// hold it marked).
func (b *builder) snapMark(bt *batch, si int, t *binlog.Txn, i int, seq uint64) codec.Snapshot {
	m := codec.SnapshotOf(t, i)
	if m == codec.SnapshotLast {
		if si < len(b.noLast) && b.noLast[si] {
			b.noLast[si] = false // read again after a restart; the sinks hold it marked
			return codec.SnapshotAuto
		}
		bt.lastMarks = append(bt.lastMarks, srcSeq{si, seq})
	}
	return m
}

// txn encodes one chunk of source si into the current batch; et is its
// corrected event time (Unix ns, 0 when none) and size its memory as the
// merger measured it when it was queued.
func (b *builder) txn(ctx context.Context, si int, t *binlog.Txn, et int64, size int) error {
	if st := b.p.srcs[si].images.Load(); st != nil {
		if err := st.Fill(t, b.nextSeq); err != nil {
			return fmt.Errorf("source %s: %w", b.srcs[si].name, err)
		}
	}
	if b.plain != nil {
		return b.plainTxn(ctx, si, t, et, size)
	}
	bs := &b.srcs[si]
	bt, n, evt := b.chunkStart(t, et)
	var txnMask uint64
	if b.holds != nil && !t.Snapshot {
		txnMask = b.heldBy(si, t)
	}
	var tx *txnCount
	if b.anyTxn && !t.Snapshot && !t.Heartbeat {
		tx = &bs.tx
		if t.Chunk == 0 || t.Begin.Compare(tx.begin) != 0 {
			tx.reset(t)
		}
		if n == 0 && t.Last && tx.events > 0 {
			// Not expected: the reader's last chunk holds the last row.
			b.p.srcs[si].endsMissing.Add(1)
			b.p.log.Warn("a transaction's last chunk came without changes: its Debezium END record is not written (the BEGIN record and every event are); counted in sluice_transaction_ends_missing_total",
				"source", bs.name, "transaction", tx.id, "events", tx.events)
		}
	}
	for i := range t.Changes {
		ch := &t.Changes[i]
		seq := b.nextSeq
		b.nextSeq++
		snap := b.snapMark(bt, si, t, i, seq)
		last := t.Last && !t.Snapshot && i == n-1
		// Transaction metadata: the orders of this change's event (and of
		// the create, for an update that changed the primary key).
		data := tx != nil && dataEvent(ch)
		var ord, ord2 codec.TxnOrder
		var ti int
		first := false
		if data {
			ti = tx.table(ch)
			first = tx.events == 0
			ord = codec.TxnOrder{ID: tx.id, TotalOrder: tx.events + 1, DataCollectionOrder: tx.tables[ti].Count + 1}
			ord2 = codec.TxnOrder{ID: tx.id, TotalOrder: tx.events + 2, DataCollectionOrder: tx.tables[ti].Count + 2}
		}
		trunc := b.anyTrunc && codec.IsTruncate(ch)
		kcs, splits := b.kcs[:0], b.splits[:0]
		twoEvents := false
		for k, enc := range bs.encs {
			v0 := len(bt.buf)
			switch {
			case trunc && b.fmtTrunc[k]:
				bt.buf = enc.AppendTruncate(bt.buf, t, ch, nil)
			case data && b.fmtTxn[k]:
				bt.buf = enc.AppendDebeziumChange(bt.buf, t, ch, snap, &ord)
			default:
				bt.buf = enc.AppendSnapshotChange(bt.buf, t, ch, snap)
			}
			if enc.Format().IsDebezium() {
				// Debezium's bytes exactly: only the newline goes.
				bt.buf = bytes.TrimSuffix(bt.buf, nl)
			} else {
				// Replace the final "}\n" with the sluice block.
				bt.buf = bt.buf[:len(bt.buf)-2]
				bt.buf = appendMeta(bt.buf, seq, bs.metaTail, last, &t.End)
			}
			v1 := len(bt.buf)
			if !trunc || !b.fmtTrunc[k] { // Debezium's op "t" event has no key
				bt.buf = enc.AppendKey(bt.buf, ch)
			}
			bt.spans = append(bt.spans, span{int32(v0), int32(v1), int32(v1), int32(len(bt.buf))})
			var kc *KeyChange
			if enc.Format().IsDebezium() && ch.Op == binlog.OpUpdate && ch.Table != nil && len(ch.Table.PrimaryKey) > 0 {
				if data && b.fmtTxn[k] {
					kc = keyChange(enc, t, ch, bt.buf[v1:], &ord, &ord2)
					twoEvents = twoEvents || kc != nil
				} else {
					kc = keyChange(enc, t, ch, bt.buf[v1:], nil, nil)
				}
			}
			kcs = append(kcs, kc)
			var split [][]byte
			if ch.Op == binlog.OpDDL && !trunc {
				split = enc.AppendDebeziumSplit(t, ch)
			}
			splits = append(splits, split)
		}
		b.kcs, b.splits = kcs, splits
		var mark *TxnMark
		if data {
			inc := int64(1)
			if twoEvents {
				inc = 2 // Debezium writes it as a delete and a create
			}
			tx.events += inc
			tx.tables[ti].Count += inc
			if first {
				mark = &TxnMark{ID: tx.id, Time: t.CommitTime, Begin: true}
			}
		}
		if last && tx != nil && tx.events > 0 {
			if mark == nil {
				mark = &TxnMark{ID: tx.id, Time: t.CommitTime}
			}
			mark.End, mark.Events, mark.Tables = true, tx.events, slices.Clone(tx.tables)
		}
		m := Message{Seq: seq, Source: bs.name, Op: ch.Op, Change: ch, Snapshot: t.Snapshot, EventTime: evt}
		if ch.Op == binlog.OpDDL {
			m.Role = RoleSchemaChange
		}
		if ch.Table != nil {
			m.DB, m.Table = ch.Table.Schema, ch.Table.Name
		} else {
			m.DB = ch.Schema
		}
		if last {
			end := t.End
			m.End = &end
		}
		if b.holds != nil && !t.Snapshot {
			m.Held = txnMask | b.heldOpen(bt, si, t)
			bt.held = bt.held || m.Held != 0
		}
		m.KeyChange, m.Split = kcs[0], splits[0]
		if mark != nil || trunc {
			b.formatMarks(&m, 0, mark, trunc)
		}
		bt.Messages = append(bt.Messages, m)
		for k := range bt.alt {
			m.KeyChange, m.Split = kcs[k+1], splits[k+1]
			if mark != nil || trunc {
				b.formatMarks(&m, k+1, mark, trunc)
			}
			bt.alt[k] = append(bt.alt[k], m)
		}
		if b.w.sched.cut(len(bt.buf)) && i < n-1 {
			// A big chunk spans batches; the chunk's memory goes back to
			// the reader with the last of them (written after the others).
			if err := b.flush(ctx); err != nil {
				return err
			}
			bt = b.batch()
			bt.inSnapshot = t.Snapshot
		}
	}
	bt.txns = append(bt.txns, t)
	bt.txnBytes += size
	if t.Last && !t.Snapshot {
		if !t.End.IsZero() {
			bt.ends[si] = t.End
			bt.endSeq, bt.hasEnd = b.nextSeq-1, true
			if !t.CommitTime.IsZero() {
				bt.commit = t.CommitTime
			}
			if n > 0 || t.Chunk > 0 {
				b.p.stats.txns.Add(1)
			}
		}
	}
	if b.w.sched.cut(len(bt.buf)) {
		return b.flush(ctx)
	}
	return nil
}

// formatMarks sets on m what format k makes of the change: the
// transaction mark when the format has transaction metadata, and, for a
// TRUNCATE the format writes as Debezium's op "t" event, Truncate and the
// data role (the event goes to the table's topic, not with the DDL).
func (b *builder) formatMarks(m *Message, k int, mark *TxnMark, trunc bool) {
	m.Txn = nil
	if b.fmtTxn[k] {
		m.Txn = mark
	}
	m.Truncate = trunc && b.fmtTrunc[k]
	if m.Op == binlog.OpDDL {
		m.Role = RoleSchemaChange
		if m.Truncate {
			m.Role = RoleData
		}
	}
}

// heldBy returns the sinks that hold the whole transaction t of source si
// (it begins before what they hold of the source ends).
func (b *builder) heldBy(si int, t *binlog.Txn) uint64 {
	return heldWhole(b.holds, si, t)
}

// heldOpen returns the sinks that hold the next message of t as part of a
// transaction they hold the beginning of.
func (b *builder) heldOpen(bt *batch, si int, t *binlog.Txn) uint64 {
	return heldNext(b.holds, si, t, func(sink int) {
		bt.opened = append(bt.opened, opened{sink: sink, src: si, begin: t.Begin})
	})
}

var nl = []byte{'\n'}

func appendMeta(dst []byte, seq uint64, tail []byte, last bool, end *position.Position) []byte {
	dst = append(dst, `,"sluice":{"seq":`...)
	dst = strconv.AppendUint(dst, seq, 10)
	dst = append(dst, tail...) // epoch and source: the same for the whole run
	if last {
		dst = append(dst, `,"end":`...)
		dst = AppendEnd(dst, end)
	}
	return append(dst, '}', '}')
}

func (b *builder) snapshotState(si int, st *snapshot.State) {
	bt := b.batch()
	bt.snaps = append(bt.snaps, srcSnap{si, st})
	if st != nil && !st.Position.IsZero() {
		// A consistent snapshot's chunks: the stream will start from the
		// snapshot's position.
		bt.ends[si] = st.Position
		bt.endSeq, bt.hasEnd = b.nextSeq-1, true
	}
}

// streamFrom says that source si streams from pos: the end of a
// consistent snapshot (its last rows go out now), or a start position the
// reader fixed that no checkpoint holds yet. The batch is cut and
// checkpointed.
func (b *builder) streamFrom(ctx context.Context, si int, pos position.Position) error {
	bt := b.batch()
	bt.snaps = append(bt.snaps, srcSnap{si, nil})
	bt.ends[si] = pos
	bt.endSeq, bt.hasEnd = b.nextSeq-1, true
	bt.fixesStart = true
	return b.flush(ctx)
}

// flush hands the current batch to the writer.
func (b *builder) flush(ctx context.Context) error {
	bt := b.cur
	if bt == nil {
		return nil
	}
	b.cur = nil
	nf := len(b.p.formats)
	for f := range nf {
		msgs := bt.messages(f)
		for i := range msgs {
			s := bt.spans[i*nf+f]
			msgs[i].Value = bt.buf[s.v0:s.v1:s.v1]
			msgs[i].Key = bt.buf[s.k0:s.k1:s.k1]
		}
	}
	bt.size, bt.encoded = cap(bt.buf)+bt.txnBytes, len(bt.buf)
	bt.wm = b.wm
	return b.w.push(ctx, bt)
}

// writer delivers batches to the sinks, in order, and saves checkpoints.
type writer struct {
	p     *Pipeline
	cp    *checkpoint.Checkpoint
	epoch uint64
	skip  []uint64
	offs  []string
	in    chan *batch
	// free takes written batches back to the builder for reuse.
	free chan *batch
	// budget bounds the bytes of batches pushed and not yet written
	// (BufferBytes): push acquires a batch's size, write releases it;
	// close closes it, and a push after that fails (errWriterStopped).
	budget    *bytebudget.Budget
	closeOnce sync.Once
	err       error

	// sched decides batch cuts, group commit and checkpoint times.
	sched *schedule
	// pending is, per sink, what it held at the start beyond the
	// checkpoint's positions (several sources); nil once covered.
	pending [][]hold
}

// ahead reports whether sink i holds messages beyond the checkpoint's
// positions as of the batch just written (ending at endSeq): its offset
// must then stay behind, where the next recovery scan finds them.
func (w *writer) ahead(i int, endSeq uint64) bool {
	if len(w.p.srcs) == 1 && w.pending == nil {
		return w.skip[i] > endSeq
	}
	if w.pending == nil || w.pending[i] == nil {
		return false
	}
	for si, h := range w.pending[i] {
		at := w.cp.Sources[w.p.srcs[si].cfg.Name]
		if !h.until.IsZero() && (at.IsZero() || at.Compare(h.until) < 0) {
			return true
		}
		if h.openCount > 0 && (!h.openSeen || at.IsZero() || at.Compare(h.openBegin) <= 0) {
			return true
		}
	}
	w.pending[i] = nil
	return false
}

func newWriter(p *Pipeline, cp *checkpoint.Checkpoint, epoch uint64, pl plan) *writer {
	w := &writer{p: p, cp: cp, epoch: epoch, skip: pl.skip, offs: pl.offsets, in: make(chan *batch, 64), free: make(chan *batch, 4),
		sched:  newSchedule(p.cfg.BatchBytes, len(p.formats), p.cfg.CheckpointEvery, plainSink(p), p.cfg.Now()),
		budget: bytebudget.New(p.cfg.BufferBytes)}
	if pl.holds != nil {
		w.pending = make([][]hold, len(pl.holds))
		for i := range pl.holds {
			w.pending[i] = append([]hold(nil), pl.holds[i]...)
		}
	}
	if w.skip == nil {
		w.skip = make([]uint64, len(p.cfg.Sinks))
	}
	return w
}

// errWriterStopped is push's error after the writer was closed.
var errWriterStopped = errors.New("pipeline: writer stopped")

// push queues a batch, waiting while the buffer budget is used up.
func (w *writer) push(ctx context.Context, bt *batch) error {
	if err := w.budget.Acquire(ctx, bt.size); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		// A stopped run queues nothing more, even with room.
		w.budget.Release(bt.size)
		return err
	}
	w.p.stats.buffered.Add(int64(bt.size))
	select {
	case w.in <- bt:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// close ends the writer's input: it writes what is queued, then makes its
// final save; a push after close fails.
func (w *writer) close() {
	w.closeOnce.Do(func() {
		w.budget.Close(errWriterStopped)
		close(w.in)
	})
}

func (w *writer) run(ctx context.Context) error {
	// The timer wakes the writer at the schedule's ticks, to save the
	// checkpoint when it is due.
	now := w.p.cfg.Now()
	timer := time.NewTimer(w.sched.wake(now).Sub(now))
	defer timer.Stop()
	for {
		select {
		case bt, ok := <-w.in:
			if !ok {
				return w.finish(ctx)
			}
			bt, closed := w.gather(bt)
			if err := w.write(ctx, bt); err != nil {
				w.err = err
				return err
			}
			if closed {
				return w.finish(ctx)
			}
		case <-timer.C:
			now := w.p.cfg.Now()
			timer.Reset(w.sched.wake(now).Sub(now))
			if err := w.save(ctx, false); err != nil {
				w.err = err
				return err
			}
		case <-ctx.Done():
			return w.finish(ctx)
		}
	}
}

// gather merges into bt the batches already waiting, as far as the
// schedule says (group commit, see schedule.more).
func (w *writer) gather(bt *batch) (_ *batch, closed bool) {
	for w.sched.more(bt.encoded, bt.fixesStart) {
		select {
		case nb, ok := <-w.in:
			if !ok {
				return bt, true
			}
			bt.merge(nb)
		default:
			return bt, false
		}
	}
	return bt, false
}

// messages returns the batch's messages in format f (Pipeline.formats).
func (bt *batch) messages(f int) []Message {
	if f == 0 {
		return bt.Messages
	}
	return bt.alt[f-1]
}

func (bt *batch) merge(nb *batch) {
	bt.Messages = append(bt.Messages, nb.Messages...)
	for k := range bt.alt {
		bt.alt[k] = append(bt.alt[k], nb.alt[k]...)
	}
	bt.txns = append(bt.txns, nb.txns...)
	bt.read = append(bt.read, nb.read...)
	bt.size += nb.size
	bt.encoded += nb.encoded
	for si, pos := range nb.ends {
		if !pos.IsZero() {
			bt.ends[si] = pos
		}
	}
	if nb.hasEnd {
		bt.endSeq, bt.hasEnd = nb.endSeq, true
	}
	bt.snaps = append(bt.snaps, nb.snaps...)
	bt.opened = append(bt.opened, nb.opened...)
	bt.lastMarks = append(bt.lastMarks, nb.lastMarks...)
	if !nb.commit.IsZero() {
		bt.commit = nb.commit
	}
	bt.held = bt.held || nb.held
	bt.wm = max(bt.wm, nb.wm)
	bt.inSnapshot = bt.inSnapshot || nb.inSnapshot
	bt.fixesStart = bt.fixesStart || nb.fixesStart
}

// finish makes the writer's final save, forced, when its input ended or
// its run was cancelled: then with a bound of its own (schedule.stop).
func (w *writer) finish(ctx context.Context) error {
	if bound := w.sched.stop(ctx.Err() != nil); bound > 0 {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), bound)
		defer cancel()
		ctx = sctx
	}
	return w.save(ctx, true)
}

// write delivers one batch to every sink (at once), retrying each sink
// until it takes the batch, then records the progress.
func (w *writer) write(ctx context.Context, bt *batch) error {
	// A stopped run (lost leadership, shutdown) writes nothing more, even a
	// batch already received.
	if err := ctx.Err(); err != nil {
		return err
	}
	// What a sink holds is durable in the row image stores first: a
	// restart resumes after it and completes the next images from them.
	if err := w.p.syncImages(); err != nil {
		return err
	}
	for _, o := range bt.opened {
		if w.pending != nil && w.pending[o.sink] != nil {
			h := &w.pending[o.sink][o.src]
			h.openBegin, h.openSeen = o.begin, true
		}
	}
	if len(bt.lastMarks) > 0 {
		// The snapshot's last row goes out: the checkpoint says so first,
		// so that a restart finding it in every sink does not mark the
		// rows it reads again.
		if w.cp.LastMarks == nil {
			w.cp.LastMarks = map[string]uint64{}
		}
		for _, lm := range bt.lastMarks {
			w.cp.LastMarks[w.p.srcs[lm.src].cfg.Name] = lm.seq
		}
		w.sched.changed()
		if err := w.save(ctx, true); err != nil {
			return err
		}
	}
	sinks := w.p.cfg.Sinks
	errs := make([]error, len(sinks))
	var wg sync.WaitGroup
	for i := range sinks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = w.writeSink(ctx, i, bt)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	now := w.p.cfg.Now()
	if bt.wm > w.p.delivered.Load() {
		w.p.delivered.Store(bt.wm)
	}
	st := &w.p.stats
	st.messages.Add(uint64(len(bt.Messages)))
	st.batches.Add(1)
	st.bytes.Add(uint64(bt.encoded))
	if w.p.cfg.OnDelivered != nil {
		w.p.cfg.OnDelivered(bt.read, now)
	}
	for _, t := range bt.txns {
		t.Release()
	}
	if bt.hasEnd {
		if w.cp.Sources == nil {
			w.cp.Sources = map[string]position.Position{}
		}
		for si, pos := range bt.ends {
			if !pos.IsZero() {
				w.cp.Sources[w.p.srcs[si].cfg.Name] = pos
			}
		}
		w.cp.LastSeq = bt.endSeq
		w.sched.changed()
	}
	for _, sn := range bt.snaps {
		name := w.p.srcs[sn.src].cfg.Name
		if sn.st == nil {
			delete(w.cp.Snapshots, name)
			delete(w.cp.LastMarks, name)
		} else {
			raw, err := json.Marshal(sn.st)
			if err != nil {
				return err
			}
			if w.cp.Snapshots == nil {
				w.cp.Snapshots = map[string]json.RawMessage{}
			}
			w.cp.Snapshots[name] = raw
		}
		w.sched.changed()
	}
	if len(w.cp.Opens) > 0 {
		// Open transactions recorded by an older sluice: once every sink
		// holds a batch whose source has moved past one's beginning, it
		// has ended in every sink.
		n := len(w.cp.Opens)
		w.cp.Opens = slices.DeleteFunc(w.cp.Opens, func(o checkpoint.Open) bool {
			si := w.p.srcIndex(o.Source)
			return si >= 0 && !bt.ends[si].IsZero() && bt.ends[si].Compare(o.Begin) > 0
		})
		if len(w.cp.Opens) != n {
			w.sched.changed()
		}
	}
	last := bt.LastSeq()
	if bt.hasEnd && bt.endSeq >= last {
		// The sinks' offsets are saved only where the batch ends with a
		// whole transaction, and only for sinks that hold nothing beyond
		// it: a recovery scans from there and must see everything after
		// the checkpoint's positions.
		for i, s := range sinks {
			if !w.ahead(i, bt.endSeq) {
				w.cp.Sinks[s.Name()] = w.offs[i]
			}
		}
	}
	w.p.setStatus(func(s *Status) {
		if last > 0 {
			s.LastSeq = last
		}
		for si, pos := range bt.ends {
			if !pos.IsZero() {
				s.Sources[si].Position = pos
			}
		}
		s.Position = s.Sources[0].Position
		if !bt.commit.IsZero() {
			s.CommitTime, s.Lag = bt.commit, now.Sub(bt.commit)
		}
	})
	w.budget.Release(bt.size)
	st.buffered.Add(-int64(bt.size))
	force := w.sched.written(batchFacts{inSnapshot: bt.inSnapshot, snaps: len(bt.snaps) > 0, fixesStart: bt.fixesStart})
	select {
	case w.free <- bt:
	default:
	}
	return w.save(ctx, force)
}

// srcIndex returns the index of the source named name, or -1.
func (p *Pipeline) srcIndex(name string) int {
	for i, s := range p.srcs {
		if s.cfg.Name == name {
			return i
		}
	}
	return -1
}

// writeSink writes bt's messages that sink i does not hold yet, retrying
// with backoff; after a failure the sink recovers before the next try.
func (w *writer) writeSink(ctx context.Context, i int, bt *batch) error {
	s := w.p.cfg.Sinks[i]
	msgs := bt.messages(w.p.sinkFmt[i])
	if bt.held {
		// After a recovery with several sources: leave out what the sink
		// already holds.
		all := msgs
		msgs = make([]Message, 0, len(all))
		for _, m := range all {
			if m.Held&(1<<i) == 0 {
				msgs = append(msgs, m)
			}
		}
	}
	bo := backoff.New(w.p.cfg.RetryMin, w.p.cfg.RetryMax)
	for attempt := 0; ; attempt++ {
		j := 0
		for j < len(msgs) && msgs[j].Seq <= w.skip[i] {
			j++
		}
		if j == len(msgs) {
			return nil
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		sub := &Batch{Epoch: bt.Epoch, Messages: msgs[j:]}
		off, err := s.Write(ctx, sub)
		if err == nil {
			w.offs[i] = off
			w.skip[i] = sub.LastSeq()
			if attempt > 0 {
				w.p.log.Info("sink is back; delivery continues", "sink", s.Name(), "attempts", attempt+1)
				w.p.setStatus(func(st *Status) { delete(st.SinkDown, s.Name()) })
			}
			return nil
		}
		if errors.Is(err, ErrFenced) || errors.Is(err, ErrPermanent) {
			return fmt.Errorf("sink %s: %w", s.Name(), err)
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		delay := bo.Next()
		w.p.log.Warn("sink write failed; retrying", "sink", s.Name(), "attempt", attempt+1, "retry_in", delay.String(), "err", err.Error())
		w.p.sinkDown(s.Name(), err)
		if err := backoff.Sleep(ctx, delay); err != nil {
			return err
		}
		rec, rerr := s.Recover(ctx, w.epoch, w.offs[i])
		if rerr != nil {
			if errors.Is(rerr, ErrFenced) || errors.Is(rerr, ErrPermanent) {
				return fmt.Errorf("sink %s: %w", s.Name(), rerr)
			}
			w.p.log.Warn("sink still unavailable", "sink", s.Name(), "err", rerr.Error())
			continue
		}
		if rec.MaxSeq > w.skip[i] {
			w.skip[i] = rec.MaxSeq
		}
		if rec.Offset != "" {
			w.offs[i] = rec.Offset
		}
	}
}

// save stores the checkpoint when the schedule says it is due (it
// changed, and the interval passed or force is set).
func (w *writer) save(ctx context.Context, force bool) error {
	now := w.p.cfg.Now()
	if !w.sched.due(now, force) {
		return nil
	}
	w.cp.SavedAt = time.Time{}
	v, err := w.p.cfg.Store.Save(ctx, *w.cp, w.cp.Version)
	if err != nil {
		return w.p.saveError(fmt.Errorf("saving checkpoint: %w", err))
	}
	w.cp.Version = v
	if err := w.p.trimImages(w.cp); err != nil {
		return err
	}
	w.sched.saved(now)
	w.p.stats.checkpoints.Add(1)
	w.p.setStatus(func(s *Status) { s.CheckpointVersion, s.CheckpointAt = v, now })
	return nil
}
