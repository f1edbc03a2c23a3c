package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-cdc/sluice/binlog"
	"github.com/sluice-cdc/sluice/checkpoint"
	"github.com/sluice-cdc/sluice/codec"
	"github.com/sluice-cdc/sluice/position"
	"github.com/sluice-cdc/sluice/snapshot"
)

// Config is one pipeline: a source, its sinks and a checkpoint store.
type Config struct {
	// Name identifies the pipeline in checkpoints and sinks.
	Name   string
	Source SourceConfig
	Sinks  []Sink
	Store  checkpoint.Store
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
	if c.Source.Name == "" {
		c.Source.Name = c.Name
	}
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
	seen := map[string]bool{}
	for _, s := range c.Sinks {
		if seen[s.Name()] {
			return fmt.Errorf("pipeline: two sinks are named %q; give each a different name", s.Name())
		}
		seen[s.Name()] = true
	}
	return nil
}

// Pipeline moves changes from its source to its sinks.
type Pipeline struct {
	cfg Config
	src *source
	log *slog.Logger

	stats  counters
	mu     sync.Mutex // guards status
	status Status
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
	}
	p.src = &source{cfg: cfg.Source, pipeline: cfg.Name, log: cfg.Logger}
	return p, nil
}

// plan is where a run resumes: the source position, the next sequence
// number, and per sink what it already holds.
type plan struct {
	pos      position.Position
	saved    bool // pos is a saved position (not the configured start)
	nextSeq  uint64
	skip     []uint64 // per sink: messages up to this seq are already there
	offsets  []string // per sink: offset at the end of what it holds
	resume   *snapshot.State
	snapshot bool // the checkpoint is inside a snapshot: no seq skipping
}

// recoverPlan loads the checkpoint and asks every sink what it holds
// beyond it; the run resumes after the last transaction that every sink
// holds, and each sink skips what it already has.
func (p *Pipeline) recoverPlan(ctx context.Context, cp *checkpoint.Checkpoint, epoch uint64) (plan, error) {
	name := p.cfg.Source.Name
	pl := plan{pos: cp.Sources[name], nextSeq: cp.LastSeq + 1}
	pl.saved = !pl.pos.IsZero()
	resume, err := ResumeState(cp.Snapshot)
	if err != nil {
		return pl, err
	}
	pl.resume = resume
	pl.snapshot = resume != nil || len(cp.Snapshot) > 0
	recs := make([]Recovery, len(p.cfg.Sinks))
	maxSeq := cp.LastSeq
	for i, s := range p.cfg.Sinks {
		rec, err := p.recoverSink(ctx, s, epoch, cp.Sinks[s.Name()])
		if err != nil {
			return pl, err
		}
		recs[i] = rec
		maxSeq = max(maxSeq, rec.MaxSeq)
		p.log.Info("sink recovered", "sink", s.Name(), "max_seq", rec.MaxSeq, "offset", rec.Offset, "checkpoint_seq", cp.LastSeq)
	}
	pl.skip = make([]uint64, len(recs))
	pl.offsets = make([]string, len(recs))
	for i := range recs {
		pl.offsets[i] = recs[i].Offset
	}
	if pl.snapshot || (!pl.saved && cp.Version > 0) {
		// Inside a snapshot the re-read rows are new messages: number them
		// after everything the sinks hold (snapshot rows after the last
		// checkpoint may repeat; see docs/DELIVERY.md).
		pl.nextSeq = maxSeq + 1
		return pl, nil
	}
	// Each sink's own resume point: its last transaction end past the
	// checkpoint, else the checkpoint. The run starts from the earliest.
	first := true
	for i, rec := range recs {
		pos, next := cp.Sources[name], cp.LastSeq+1
		if e, ok := rec.Ends[name]; ok && e.Seq > cp.LastSeq {
			pos, next = e.Pos, e.Seq+1
		}
		if cp.Version == 0 && pos.IsZero() && rec.MaxSeq > 0 {
			// No checkpoint but a sink holding messages without any end:
			// nothing to resume from.
			return pl, fmt.Errorf("sink %s holds messages of pipeline %q (up to seq %d) but there is no checkpoint and no transaction end among them: restore the checkpoint, or empty the sink to start over", p.cfg.Sinks[i].Name(), p.cfg.Name, rec.MaxSeq)
		}
		if first || next < pl.nextSeq {
			pl.pos, pl.nextSeq = pos, next
			first = false
		}
		pl.skip[i] = rec.MaxSeq
	}
	pl.saved = !pl.pos.IsZero()
	if cp.Version == 0 && pl.saved {
		p.log.Warn("no checkpoint, but the sinks hold this pipeline's messages: resuming after the last transaction they all hold", "position", pl.pos.String(), "next_seq", pl.nextSeq)
	}
	return pl, nil
}

// recoverSink asks a sink what it holds, retrying with backoff while it is
// unavailable (a sink that is down at start is waited for, not fatal).
func (p *Pipeline) recoverSink(ctx context.Context, s Sink, epoch uint64, offset string) (Recovery, error) {
	delay := p.cfg.RetryMin
	for attempt := 1; ; attempt++ {
		rec, err := s.Recover(ctx, epoch, offset)
		if err == nil {
			if attempt > 1 {
				p.log.Info("sink is back; delivery continues", "sink", s.Name(), "attempts", attempt)
				p.setStatus(func(st *Status) { delete(st.SinkDown, s.Name()) })
			}
			return rec, nil
		}
		if errors.Is(err, ErrFenced) {
			return rec, fmt.Errorf("sink %s: %w", s.Name(), err)
		}
		if ctx.Err() != nil {
			return rec, ctx.Err()
		}
		p.log.Warn("sink unavailable at start; retrying", "sink", s.Name(), "attempt", attempt, "retry_in", delay.String(), "err", err.Error())
		p.sinkDown(s.Name(), err)
		select {
		case <-time.After(delay):
		case <-ctx.Done():
			return rec, ctx.Err()
		}
		delay = min(2*delay, p.cfg.RetryMax)
	}
}

// Run loads the checkpoint, recovers the sinks, and moves changes until
// ctx ends (nil), the source ends (nil: stop position, snapshot mode
// "only"), or an error that retrying cannot fix.
func (p *Pipeline) Run(ctx context.Context) error {
	cfg := &p.cfg
	store := cfg.Store
	cp, err := store.Load(ctx)
	if err != nil {
		return err
	}
	epoch := cp.Epoch + 1
	if cfg.Epoch != nil {
		if epoch, err = cfg.Epoch(ctx, cp.Epoch); err != nil {
			return err
		}
		if epoch < cp.Epoch {
			return fmt.Errorf("%w: epoch %d is below the checkpoint's %d", ErrFenced, epoch, cp.Epoch)
		}
	}
	pl, err := p.recoverPlan(ctx, &cp, epoch)
	if err != nil {
		return err
	}
	// Claim the epoch in the checkpoint: a compare-and-set, so a second
	// writer that loaded the same version fails here or at its next save.
	cp.Pipeline, cp.Epoch = cfg.Name, epoch
	if cp.Sinks == nil {
		cp.Sinks = map[string]string{}
	}
	for i, s := range cfg.Sinks {
		cp.Sinks[s.Name()] = pl.offsets[i]
	}
	if cp.Version, err = store.Save(ctx, cp, cp.Version); err != nil {
		return p.saveError(err)
	}
	p.log.Info("pipeline starting", "pipeline", cfg.Name, "epoch", epoch, "position", pl.pos.String(), "next_seq", pl.nextSeq, "checkpoint_version", cp.Version)
	p.setStatus(func(s *Status) {
		s.Epoch, s.Position, s.LastSeq, s.Started, s.Running = epoch, pl.pos, pl.nextSeq-1, cfg.Now(), true
	})
	defer p.setStatus(func(s *Status) { s.Running = false })

	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	w := newWriter(p, &cp, epoch, pl)
	b := newBuilder(p, w, epoch, pl.nextSeq)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := w.run(ctx); err != nil {
			cancel(err)
		}
	}()
	srcErr := p.src.run(ctx, pl.pos, pl.saved || cfg.Source.StartGiven, pl.resume, b)
	if srcErr == nil || errors.Is(srcErr, context.Canceled) {
		// Deliver what was read, then stop the writer.
		if err := b.flush(ctx); err != nil && srcErr == nil {
			srcErr = err
		}
	}
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
// streams (the admin API's POST /snapshot).
func (p *Pipeline) AddTable(ctx context.Context, db, table, where string) error {
	return p.src.addTable(ctx, db, table, where)
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
	Sinks    []string
	Snapshot []snapshot.TableProgress
}

// Counters are totals since the process started.
type Counters struct {
	Messages, Txns, Batches, Bytes, Checkpoints uint64
	// BufferedBytes is the memory of batches read and not yet durable.
	BufferedBytes int64
}

type counters struct {
	messages, txns, batches, bytes, checkpoints atomic.Uint64
	buffered                                    atomic.Int64
}

// Counters returns the totals.
func (p *Pipeline) Counters() Counters {
	return Counters{
		Messages: p.stats.messages.Load(), Txns: p.stats.txns.Load(), Batches: p.stats.batches.Load(),
		Bytes: p.stats.bytes.Load(), Checkpoints: p.stats.checkpoints.Load(), BufferedBytes: p.stats.buffered.Load(),
	}
}

// Status returns a copy of the current status.
func (p *Pipeline) Status() Status {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.status
	s.SinkErrors = cloneMap(s.SinkErrors)
	s.SinkDown = cloneMap(s.SinkDown)
	s.Snapshot = append([]snapshot.TableProgress(nil), s.Snapshot...)
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

// SnapshotProgress records a snapshot's progress in the status (pass it
// as SnapshotConfig.Progress, possibly wrapped).
func (p *Pipeline) SnapshotProgress(ps []snapshot.TableProgress) {
	p.setStatus(func(s *Status) { s.Snapshot = append(s.Snapshot[:0], ps...) })
}

// batch is a Batch with what the pipeline needs to finish it.
type batch struct {
	Batch
	buf     []byte
	spans   []span // Value and Key of each message within buf
	txns    []*binlog.Txn
	size    int // bytes counted against the buffer budget
	encoded int // bytes of the encoded messages
	// end is the source position after the batch's last whole transaction
	// and endSeq the last sequence number at that point; set when the
	// batch holds a transaction end (or moves the snapshot on).
	end    position.Position
	endSeq uint64
	hasEnd bool
	// snap is the snapshot state once the batch is durable (snapSet).
	snap       *snapshot.State
	snapSet    bool
	commit     time.Time
	read       []time.Time
	inSnapshot bool
}

type span struct{ v0, v1, k0, k1 int32 }

// builder turns source chunks into numbered, encoded messages and cuts
// them into batches. It runs on the source's goroutine.
type builder struct {
	p       *Pipeline
	w       *writer
	enc     *codec.Encoder
	epoch   uint64
	nextSeq uint64
	cur     *batch
	source  string
	// metaTail is `,"epoch":E,"source":"S"`, written once.
	metaTail []byte
}

func newBuilder(p *Pipeline, w *writer, epoch, nextSeq uint64) *builder {
	b := &builder{p: p, w: w, epoch: epoch, nextSeq: nextSeq, source: p.cfg.Source.Name,
		enc: codec.NewEncoder(codec.Source{Name: p.cfg.Source.Name})}
	b.metaTail = append(b.metaTail, `,"epoch":`...)
	b.metaTail = strconv.AppendUint(b.metaTail, epoch, 10)
	b.metaTail = append(b.metaTail, `,"source":`...)
	name, _ := json.Marshal(b.source) // JSON's quoting, not Go's
	b.metaTail = append(b.metaTail, name...)
	return b
}

func (b *builder) batch() *batch {
	if b.cur != nil {
		return b.cur
	}
	select {
	case bt := <-b.w.free: // a written batch's memory, reused
		*bt = batch{Batch: Batch{Epoch: b.epoch, Messages: bt.Messages[:0]}, buf: bt.buf[:0], spans: bt.spans[:0], txns: bt.txns[:0], read: bt.read[:0]}
		b.cur = bt
	default:
		b.cur = &batch{Batch: Batch{Epoch: b.epoch}, buf: make([]byte, 0, b.p.cfg.BatchBytes+b.p.cfg.BatchBytes/2)}
	}
	return b.cur
}

// txn encodes one chunk into the current batch.
func (b *builder) txn(ctx context.Context, t *binlog.Txn) error {
	bt := b.batch()
	bt.read = append(bt.read, b.p.cfg.Now())
	n := len(t.Changes)
	for i := range t.Changes {
		if t.Snapshot {
			bt.inSnapshot = true
		}
		ch := &t.Changes[i]
		seq := b.nextSeq
		b.nextSeq++
		v0 := len(bt.buf)
		snap := codec.SnapshotAuto
		if t.SnapshotLast && i == n-1 {
			snap = codec.SnapshotLast
		}
		bt.buf = b.enc.AppendSnapshotChange(bt.buf, t, ch, snap)
		// Replace the final "}\n" with the sluice block.
		bt.buf = bt.buf[:len(bt.buf)-2]
		last := t.Last && !t.Snapshot && i == n-1
		bt.buf = b.appendMeta(bt.buf, seq, last, &t.End)
		v1 := len(bt.buf)
		bt.buf = codec.AppendChangeKey(bt.buf, ch)
		k1 := len(bt.buf)
		m := Message{Seq: seq, Source: b.source, Op: ch.Op, Change: ch, Snapshot: t.Snapshot}
		if !t.Snapshot {
			m.EventTime = t.CommitTime
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
		bt.Messages = append(bt.Messages, m)
		bt.spans = append(bt.spans, span{int32(v0), int32(v1), int32(v1), int32(k1)})
		if len(bt.buf) >= b.p.cfg.BatchBytes && i < n-1 {
			// A big chunk spans batches; the chunk's memory goes back to
			// the reader with the last of them (written after the others).
			if err := b.flush(ctx); err != nil {
				return err
			}
			bt = b.batch()
		}
	}
	bt.txns = append(bt.txns, t)
	if t.Last && !t.Snapshot && !t.End.IsZero() {
		bt.end, bt.endSeq, bt.hasEnd = t.End, b.nextSeq-1, true
		if !t.CommitTime.IsZero() {
			bt.commit = t.CommitTime
		}
		if n > 0 || t.Chunk > 0 {
			b.p.stats.txns.Add(1)
		}
	}
	if len(bt.buf) >= b.p.cfg.BatchBytes || b.idle() {
		return b.flush(ctx)
	}
	return nil
}

// idle reports whether the binlog has nothing more ready right now (a
// consistent snapshot, read before the binlog, cuts batches by size).
func (b *builder) idle() bool {
	r := b.p.src.reader
	return r != nil && r.Pending() == 0
}

func (b *builder) appendMeta(dst []byte, seq uint64, last bool, end *position.Position) []byte {
	dst = append(dst, `,"sluice":{"seq":`...)
	dst = strconv.AppendUint(dst, seq, 10)
	dst = append(dst, b.metaTail...) // epoch and source: the same for the whole run
	if last {
		dst = append(dst, `,"end":`...)
		dst = AppendEnd(dst, end)
	}
	return append(dst, '}', '}')
}

func (b *builder) snapshotState(st *snapshot.State) {
	bt := b.batch()
	bt.snap, bt.snapSet = st, true
	if st != nil && !st.Position.IsZero() {
		// A consistent snapshot's chunks: the stream will start from the
		// snapshot's position.
		bt.end, bt.endSeq, bt.hasEnd = st.Position, b.nextSeq-1, true
	}
}

// snapshotFinished ends a consistent snapshot: the stream starts from pos,
// and the snapshot's last rows go out now.
func (b *builder) snapshotFinished(ctx context.Context, pos position.Position) error {
	bt := b.batch()
	bt.snap, bt.snapSet = nil, true
	bt.end, bt.endSeq, bt.hasEnd = pos, b.nextSeq-1, true
	return b.flush(ctx)
}

// flush hands the current batch to the writer.
func (b *builder) flush(ctx context.Context) error {
	bt := b.cur
	if bt == nil {
		return nil
	}
	b.cur = nil
	for i := range bt.Messages {
		s := bt.spans[i]
		bt.Messages[i].Value = bt.buf[s.v0:s.v1:s.v1]
		bt.Messages[i].Key = bt.buf[s.k0:s.k1:s.k1]
	}
	bt.size, bt.encoded = cap(bt.buf), len(bt.buf)
	for _, t := range bt.txns {
		bt.size += max(t.Footprint(), t.Bytes)
	}
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
	// buffered is the bytes of batches pushed and not yet written; push
	// waits on cond while it is over the budget.
	mu       sync.Mutex
	cond     *sync.Cond
	buffered int
	closed   bool
	err      error

	lastSave time.Time
	dirty    bool
}

func newWriter(p *Pipeline, cp *checkpoint.Checkpoint, epoch uint64, pl plan) *writer {
	w := &writer{p: p, cp: cp, epoch: epoch, skip: pl.skip, offs: pl.offsets, in: make(chan *batch, 64), free: make(chan *batch, 4)}
	w.cond = sync.NewCond(&w.mu)
	if w.skip == nil {
		w.skip = make([]uint64, len(p.cfg.Sinks))
	}
	return w
}

// push queues a batch, waiting while the buffer budget is used up.
func (w *writer) push(ctx context.Context, bt *batch) error {
	stop := context.AfterFunc(ctx, func() {
		w.mu.Lock()
		w.cond.Broadcast()
		w.mu.Unlock()
	})
	defer stop()
	w.mu.Lock()
	for w.buffered > 0 && w.buffered+bt.size > w.p.cfg.BufferBytes && !w.closed && ctx.Err() == nil {
		w.cond.Wait()
	}
	closed := w.closed
	if !closed && ctx.Err() == nil {
		w.buffered += bt.size
	}
	w.mu.Unlock()
	if closed {
		return errors.New("pipeline: writer stopped")
	}
	if err := ctx.Err(); err != nil {
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

func (w *writer) close() {
	w.mu.Lock()
	if !w.closed {
		w.closed = true
		close(w.in)
	}
	w.cond.Broadcast()
	w.mu.Unlock()
}

func (w *writer) run(ctx context.Context) error {
	ticker := time.NewTicker(w.p.cfg.CheckpointEvery)
	defer ticker.Stop()
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
		case <-ticker.C:
			if err := w.save(ctx, false); err != nil {
				w.err = err
				return err
			}
		case <-ctx.Done():
			// Save what is durable, with a short bound of its own.
			sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer cancel()
			return w.save(sctx, true)
		}
	}
}

// gather merges into bt the batches already waiting (up to four batch
// sizes), so that a sink slower than the arrival of small batches writes
// (and syncs) them together: group commit, which keeps latency low under
// a steady load of small transactions.
func (w *writer) gather(bt *batch) (_ *batch, closed bool) {
	for bt.encoded < 4*w.p.cfg.BatchBytes {
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

func (bt *batch) merge(nb *batch) {
	bt.Messages = append(bt.Messages, nb.Messages...)
	bt.txns = append(bt.txns, nb.txns...)
	bt.read = append(bt.read, nb.read...)
	bt.size += nb.size
	bt.encoded += nb.encoded
	if nb.hasEnd {
		bt.end, bt.endSeq, bt.hasEnd = nb.end, nb.endSeq, true
	}
	if nb.snapSet {
		bt.snap, bt.snapSet = nb.snap, true
	}
	if !nb.commit.IsZero() {
		bt.commit = nb.commit
	}
	bt.inSnapshot = bt.inSnapshot || nb.inSnapshot
}

func (w *writer) finish(ctx context.Context) error {
	if ctx.Err() != nil {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
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
		w.cp.Sources[w.p.cfg.Source.Name] = bt.end
		w.cp.LastSeq = bt.endSeq
		w.dirty = true
	}
	if bt.snapSet {
		w.cp.Snapshot = nil
		if bt.snap != nil {
			raw, err := json.Marshal(bt.snap)
			if err != nil {
				return err
			}
			w.cp.Snapshot = raw
		}
		w.dirty = true
	}
	for i, s := range sinks {
		w.cp.Sinks[s.Name()] = w.offs[i]
	}
	last := bt.LastSeq()
	w.p.setStatus(func(s *Status) {
		if last > 0 {
			s.LastSeq = last
		}
		if bt.hasEnd {
			s.Position = bt.end
		}
		if !bt.commit.IsZero() {
			s.CommitTime, s.Lag = bt.commit, now.Sub(bt.commit)
		}
	})
	w.mu.Lock()
	w.buffered -= bt.size
	w.cond.Broadcast()
	w.mu.Unlock()
	st.buffered.Add(-int64(bt.size))
	// During a snapshot every batch is checkpointed: re-read rows cannot be
	// told apart from new ones, so the window of repeats is kept short.
	force := bt.inSnapshot || bt.snapSet
	select {
	case w.free <- bt:
	default:
	}
	return w.save(ctx, force)
}

// writeSink writes bt's messages that sink i does not hold yet, retrying
// with backoff; after a failure the sink recovers before the next try.
func (w *writer) writeSink(ctx context.Context, i int, bt *batch) error {
	s := w.p.cfg.Sinks[i]
	msgs := bt.Messages
	delay := w.p.cfg.RetryMin
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
		if errors.Is(err, ErrFenced) {
			return fmt.Errorf("sink %s: %w", s.Name(), err)
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		w.p.log.Warn("sink write failed; retrying", "sink", s.Name(), "attempt", attempt+1, "retry_in", delay.String(), "err", err.Error())
		w.p.sinkDown(s.Name(), err)
		select {
		case <-time.After(delay):
		case <-ctx.Done():
			return ctx.Err()
		}
		delay = min(2*delay, w.p.cfg.RetryMax)
		rec, rerr := s.Recover(ctx, w.epoch, w.offs[i])
		if rerr != nil {
			if errors.Is(rerr, ErrFenced) {
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

// save stores the checkpoint when something changed and it is due (or
// force is set).
func (w *writer) save(ctx context.Context, force bool) error {
	now := w.p.cfg.Now()
	if !w.dirty || (!force && now.Sub(w.lastSave) < w.p.cfg.CheckpointEvery) {
		return nil
	}
	w.cp.SavedAt = time.Time{}
	v, err := w.p.cfg.Store.Save(ctx, *w.cp, w.cp.Version)
	if err != nil {
		return w.p.saveError(fmt.Errorf("saving checkpoint: %w", err))
	}
	w.cp.Version, w.lastSave, w.dirty = v, now, false
	w.p.stats.checkpoints.Add(1)
	w.p.setStatus(func(s *Status) { s.CheckpointVersion, s.CheckpointAt = v, now })
	return nil
}
