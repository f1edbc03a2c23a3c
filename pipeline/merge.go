package pipeline

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/sluice-cdc/sluice/binlog"
	"github.com/sluice-cdc/sluice/position"
	"github.com/sluice-cdc/sluice/snapshot"
)

// AlignConfig keeps sources together in event time (docs/SOURCES.md).
type AlignConfig struct {
	// MaxSkew, when set, turns alignment on: a transaction whose event time
	// leads the slowest live source by more than MaxSkew is held back until
	// that source catches up.
	MaxSkew time.Duration
	// MaxWait is how long a source may send nothing (no event, no
	// heartbeat) before it counts as stalled (default 30s).
	MaxWait time.Duration
	// OnStall says what a stalled source does: "proceed" (default: it is
	// reported and no longer holds the others back) or "fail" (the
	// pipeline stops with an error naming it).
	OnStall string
	// SampleEvery is how often each source's clock and binlog position are
	// sampled on a separate connection (default 250ms).
	SampleEvery time.Duration
}

// Stall policies.
const (
	StallProceed = "proceed"
	StallFail    = "fail"
)

func (a *AlignConfig) defaults() {
	if a.MaxWait <= 0 {
		a.MaxWait = 30 * time.Second
	}
	if a.OnStall == "" {
		a.OnStall = StallProceed
	}
	if a.SampleEvery <= 0 {
		a.SampleEvery = 250 * time.Millisecond
	}
}

func (a *AlignConfig) validate() error {
	switch {
	case a.MaxSkew < 0:
		return fmt.Errorf("pipeline: align.max_skew %s is negative", a.MaxSkew)
	case a.OnStall != StallProceed && a.OnStall != StallFail:
		return fmt.Errorf("pipeline: align.on_stall %q: want %q or %q", a.OnStall, StallProceed, StallFail)
	}
	return nil
}

// itemKind says what a queued item carries.
type itemKind uint8

const (
	itemTxn        itemKind = iota
	itemState               // a snapshot state, saved once what is before it is durable
	itemStreamFrom          // the stream starts at pos (after a snapshot, or a fresh start)
)

// item is one thing a source handed to the merger, in the source's order.
type item struct {
	kind itemKind
	txn  *binlog.Txn
	st   *snapshot.State
	pos  position.Position
	// et is the transaction's corrected event time (Unix ns; 0: none).
	et      int64
	size    int
	arrival uint64
	// heldSince is when alignment first held the item back (Unix ns);
	// holds the source's hold count when the item was queued.
	heldSince int64
	holds     uint64
}

// input is one source's side of the merger's shell: the source's
// goroutine hands its items over here, and its clock sampler its samples;
// the decisions are the aligner's (align.go).
type input struct {
	idx  int
	name string
	src  *source
	m    *merger
	// space is signalled when the merger takes items.
	space chan struct{}

	clock clockEstimate
}

// sample is the server's binlog position at a moment (sluice's clock).
type sample struct {
	at  int64
	pos position.Position
}

// now is the merger's clock in Unix ns.
func (m *merger) now() int64 { return m.p.cfg.Now().UnixNano() }

// push queues it, waiting while the queue is over its byte budget (the
// merger holding this source back, or a slow sink).
func (in *input) push(ctx context.Context, it item) error {
	m := in.m
	m.mu.Lock()
	for m.core.full(in.idx, it.size) {
		m.core.waiting(in.idx, m.now()) // waiting on us is not a stall
		m.mu.Unlock()
		t := time.NewTimer(time.Second)
		select {
		case <-in.space:
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		}
		t.Stop()
		m.mu.Lock()
	}
	m.core.push(in.idx, it, m.now())
	m.mu.Unlock()
	m.signal()
	return nil
}

// txn queues a chunk, noting how far in event time the source has read.
func (in *input) txn(ctx context.Context, t *binlog.Txn) error {
	it := item{kind: itemTxn, txn: t, size: max(t.Footprint(), t.Bytes)}
	if !t.Snapshot && !t.CommitTime.IsZero() {
		it.et = t.CommitTime.UnixNano() - in.clock.offset.Load()
	}
	var l link
	if t.Heartbeat && !t.Snapshot {
		l.now = in.m.now()
		l.rtt = max(in.clock.roundTrip(l.now), int64(in.src.roundTrip()))
		l.sampled = in.clock.ok.Load()
	}
	in.m.mu.Lock()
	it.et = in.m.core.read(in.idx, t, it.et, l)
	in.m.mu.Unlock()
	return in.push(ctx, it)
}

func (in *input) snapshotState(ctx context.Context, st *snapshot.State) error {
	return in.push(ctx, item{kind: itemState, st: st})
}

func (in *input) streamFrom(ctx context.Context, pos position.Position) error {
	return in.push(ctx, item{kind: itemStreamFrom, pos: pos})
}

func (in *input) streamStarted() {
	in.m.mu.Lock()
	in.m.core.streamStarted(in.idx, in.m.now())
	in.m.mu.Unlock()
}

// addSample records the server's position at a moment; it counts once the
// source has read up to that position.
func (in *input) addSample(s sample) {
	in.m.mu.Lock()
	in.m.core.addSample(in.idx, s)
	in.m.mu.Unlock()
	in.m.signal()
}

// status is the source's state for Status: its progress (Unix ns),
// whether it streams and is stalled, and its queued bytes.
func (in *input) status() (progress int64, streaming, stalled bool, queued int) {
	in.m.mu.Lock()
	defer in.m.mu.Unlock()
	s := &in.m.core.srcs[in.idx]
	return s.progress(), s.streaming, s.stalled, s.bytes
}

// merger takes transactions from every source's queue and hands them to
// the builder whole (a large transaction's chunks back to back), holding
// back sources that lead the slowest live source by more than MaxSkew. It
// is the shell around the aligner: it feeds it, wakes it (on every item
// and sample, and every 50 ms), and carries out its steps.
type merger struct {
	p    *Pipeline
	b    *builder
	ins  []*input
	wake chan struct{}

	mu   sync.Mutex // guards core
	core *aligner
}

func newMerger(p *Pipeline) *merger {
	n := len(p.srcs)
	limit := max(p.cfg.BufferBytes/(2*n), 4<<20)
	names := make([]string, n)
	for i, s := range p.srcs {
		names[i] = s.cfg.Name
	}
	m := &merger{p: p, wake: make(chan struct{}, 1), core: newAligner(names, p.cfg.Align, limit)}
	for i, s := range p.srcs {
		m.ins = append(m.ins, &input{idx: i, name: s.cfg.Name, src: s, m: m, space: make(chan struct{}, 1)})
	}
	return m
}

func (m *merger) signal() {
	select {
	case m.wake <- struct{}{}:
	default:
	}
}

// sourceDone records that a source returned.
func (m *merger) sourceDone(i int, err error) {
	m.mu.Lock()
	m.core.sourceDone(i, err)
	m.mu.Unlock()
	m.signal()
}

// run merges until every source is done and its queue empty, a source
// fails, or ctx ends.
func (m *merger) run(ctx context.Context) error {
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		st := m.next()
		if st.err != nil {
			return st.err
		}
		if st.finished {
			return nil
		}
		if st.src < 0 {
			if err := m.b.flush(ctx); err != nil {
				return err
			}
			select {
			case <-m.wake:
			case <-tick.C:
			case <-ctx.Done():
				return ctx.Err()
			}
			continue
		}
		if err := m.emit(ctx, st); err != nil {
			return err
		}
	}
}

// next asks the aligner for a step at the current time, and carries out
// what it says besides the item: the watermark, the stall reports, the
// queue space freed.
func (m *merger) next() step {
	now := m.now()
	m.mu.Lock()
	st := m.core.next(now)
	m.mu.Unlock()
	for _, c := range st.stalls {
		m.stallChanged(m.ins[c.src], c.stalled, c.quiet)
	}
	if st.live {
		m.p.watermark.Store(st.wm)
		m.p.skew.Store(st.skew)
	}
	if st.src >= 0 {
		if st.waited {
			m.p.stats.held.Add(1) // it waited for alignment
		}
		select {
		case m.ins[st.src].space <- struct{}{}:
		default:
		}
	}
	return st
}

// stallChanged reports a source that stalled or came back.
func (m *merger) stallChanged(in *input, stalled bool, quiet int64) {
	if !stalled {
		m.p.log.Info("source is back; alignment waits for it again", "source", in.name)
		return
	}
	m.p.log.Warn("source stalled: it sent nothing, not even a heartbeat; it no longer holds the other sources back", "source", in.name, "quiet", time.Duration(quiet).Round(time.Millisecond).String(), "max_wait", time.Duration(m.core.maxWait).String())
}

// ErrSourceStalled is returned when a source stalls and align.on_stall is
// "fail".
var ErrSourceStalled = errors.New("pipeline: source stalled")

// emit hands one item to the builder.
func (m *merger) emit(ctx context.Context, st step) error {
	it := st.it
	switch it.kind {
	case itemState:
		m.b.snapshotState(st.src, it.st)
		return nil
	case itemStreamFrom:
		return m.b.streamFrom(ctx, st.src, it.pos)
	}
	if st.held > 0 {
		m.p.stats.holdNanos.Add(uint64(st.held))
	}
	m.b.wm = st.emitted
	return m.b.txn(ctx, st.src, it.txn, it.et, it.size)
}
