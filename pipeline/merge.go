package pipeline

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
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

// input is one source's side of the merger: a queue bounded by bytes, and
// what the source is known to have read up to, in event time.
type input struct {
	idx  int
	name string
	src  *source
	m    *merger

	mu    sync.Mutex
	items []item
	head  int
	bytes int
	limit int
	// space is signalled when the merger takes items.
	space chan struct{}
	// read is the highest corrected event time of the transactions read,
	// caught the time up to which the source is known to have sent
	// everything (from clock samples matched by positions read); both Unix
	// ns in sluice's clock.
	read, caught int64
	// sampled is the latest clock sample whose position the stream has
	// passed: every later transaction committed after it.
	sampled int64
	// alive is when the source last handed something over, or was found
	// waiting for queue space (Unix ns).
	alive int64
	// holds counts the times alignment found the source's head too far
	// ahead: an item queued at a lower count waited behind a held head.
	holds     uint64
	streaming bool
	stalled   bool
	done      bool
	err       error
	samples   []sample
	lastEnd   position.Position

	clock clockEstimate
}

// sample is the server's binlog position at a moment (sluice's clock).
type sample struct {
	at  int64
	pos position.Position
}

// now is the merger's clock in Unix ns.
func (m *merger) now() int64 { return m.p.cfg.Now().UnixNano() }

func (in *input) queued() int { return len(in.items) - in.head }

// push queues it, waiting while the queue is over its byte budget (the
// merger holding this source back, or a slow sink).
func (in *input) push(ctx context.Context, it item) error {
	in.mu.Lock()
	for in.bytes > 0 && in.bytes+it.size > in.limit {
		in.alive = in.m.now() // waiting on us is not a stall
		in.mu.Unlock()
		t := time.NewTimer(time.Second)
		select {
		case <-in.space:
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		}
		t.Stop()
		in.mu.Lock()
	}
	it.arrival = in.m.arrivals.Add(1)
	it.holds = in.holds
	if in.head > 0 && (in.head == len(in.items) || in.head >= 64 && in.head >= len(in.items)/2) {
		// Drop the taken items at the front (a queue that never empties,
		// as a held one, would otherwise grow by every item it ever had).
		n := copy(in.items, in.items[in.head:])
		clear(in.items[n:])
		in.items, in.head = in.items[:n], 0
	}
	in.items = append(in.items, it)
	in.bytes += it.size
	in.alive = in.m.now()
	in.mu.Unlock()
	in.m.signal()
	return nil
}

// txn queues a chunk, noting how far in event time the source has read.
func (in *input) txn(ctx context.Context, t *binlog.Txn) error {
	it := item{kind: itemTxn, txn: t, size: max(t.Footprint(), t.Bytes)}
	if !t.Snapshot && !t.CommitTime.IsZero() {
		it.et = t.CommitTime.UnixNano() - in.clock.offset.Load()
	}
	in.mu.Lock()
	if !t.Snapshot {
		in.streaming = true
		if it.et > 0 && in.sampled > it.et {
			// The transaction comes after a sampled position, so it
			// committed after that sample's time: finer than MariaDB's
			// whole seconds (which truncate).
			it.et = in.sampled
		}
		if it.et > in.read {
			in.read = it.et
		}
		if t.Last && !t.End.IsZero() {
			in.lastEnd = t.End
			in.matchSamples()
		}
		if t.Heartbeat {
			// No recent clock sample (a sample takes two round trips):
			// a heartbeat says the source had sent everything when it was
			// sent, at most a round trip ago. The round trip is the
			// link's as it is now: a sample under way for long, or the
			// latest one, shows a link that slowed down since the reader
			// connected and since the shortest recent sample.
			now := in.m.now()
			rtt := max(in.clock.roundTrip(now), int64(in.src.roundTrip()))
			if now-in.clock.ok.Load() > 4*int64(in.m.p.cfg.Align.SampleEvery)+2*rtt {
				in.caught = max(in.caught, now-rtt)
			}
		}
	}
	in.mu.Unlock()
	return in.push(ctx, it)
}

func (in *input) snapshotState(ctx context.Context, st *snapshot.State) error {
	return in.push(ctx, item{kind: itemState, st: st})
}

func (in *input) streamFrom(ctx context.Context, pos position.Position) error {
	return in.push(ctx, item{kind: itemStreamFrom, pos: pos})
}

func (in *input) streamStarted() {
	in.mu.Lock()
	in.streaming = true
	in.alive = in.m.now()
	in.mu.Unlock()
}

// addSample records the server's position at a moment; it counts once the
// source has read up to that position.
func (in *input) addSample(s sample) {
	in.mu.Lock()
	if len(in.samples) < 64 {
		in.samples = append(in.samples, s)
	} else {
		in.samples[len(in.samples)-1] = s // far behind: keep the newest
	}
	in.matchSamples()
	in.mu.Unlock()
	in.m.signal()
}

// matchSamples moves caught forward over the samples whose position the
// source has read past (in.mu held).
func (in *input) matchSamples() {
	n := 0
	for _, s := range in.samples {
		if in.lastEnd.IsZero() || !in.lastEnd.HasFile() || in.lastEnd.Compare(s.pos) < 0 {
			break
		}
		if s.at > in.caught {
			in.caught = s.at
		}
		in.sampled = max(in.sampled, s.at)
		n++
	}
	if n > 0 {
		in.samples = append(in.samples[:0], in.samples[n:]...)
	}
}

// progress is the event time up to which the source has read everything
// (in.mu held).
func (in *input) progress() int64 { return max(in.read, in.caught) }

// merger takes transactions from every source's queue and hands them to
// the builder whole (a large transaction's chunks back to back), holding
// back sources that lead the slowest live source by more than MaxSkew.
type merger struct {
	p      *Pipeline
	b      *builder
	ins    []*input
	wake   chan struct{}
	locked int // a source in the middle of a large transaction, or -1
	// pins are transactions to take from their sources, in order, before
	// anything else (recovery of partly written ones).
	pins []pin

	arrivals atomic.Uint64
	// emitted is the watermark of what the builder has been handed (Unix
	// ns): batches are stamped with it.
	emitted int64
	align   bool
	maxSkew int64
	maxWait int64
	fail    bool
}

func newMerger(p *Pipeline) *merger {
	a := p.cfg.Align
	m := &merger{p: p, wake: make(chan struct{}, 1), locked: -1, align: a.MaxSkew > 0,
		maxSkew: int64(a.MaxSkew), maxWait: int64(a.MaxWait), fail: a.OnStall == StallFail}
	n := len(p.srcs)
	limit := max(p.cfg.BufferBytes/(2*n), 4<<20)
	for i, s := range p.srcs {
		m.ins = append(m.ins, &input{idx: i, name: s.cfg.Name, src: s, m: m, limit: limit, space: make(chan struct{}, 1)})
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
	in := m.ins[i]
	in.mu.Lock()
	in.done, in.err = true, err
	in.mu.Unlock()
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
		in, it, finished, err := m.next()
		if err != nil {
			return err
		}
		if finished {
			return nil
		}
		if in == nil {
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
		if err := m.emit(ctx, in, it); err != nil {
			return err
		}
	}
}

// next picks the item to emit: the locked source's next chunk, else (with
// alignment) the eligible head with the lowest event time, else the head
// that arrived first.
func (m *merger) next() (*input, item, bool, error) {
	now := m.now()
	wm, live, err := m.watermark(now)
	if err != nil {
		return nil, item{}, false, err
	}
	if m.locked < 0 && len(m.pins) > 0 {
		m.locked = m.pins[0].src
	}
	if m.locked >= 0 {
		in := m.ins[m.locked]
		in.mu.Lock()
		defer in.mu.Unlock()
		if in.queued() == 0 {
			if in.done {
				if in.err != nil {
					return nil, item{}, false, in.err
				}
				m.locked, m.pins = -1, nil
			}
			return nil, item{}, false, nil
		}
		return in, m.pop(in), false, nil
	}
	var (
		best     *input
		bestKey  int64
		allDone  = true
		holdFrom = wm + m.maxSkew
	)
	for _, in := range m.ins {
		in.mu.Lock()
		if in.done && in.err != nil {
			err := in.err
			in.mu.Unlock()
			return nil, item{}, false, err
		}
		if in.queued() == 0 {
			allDone = allDone && in.done
			in.mu.Unlock()
			continue
		}
		allDone = false
		h := &in.items[in.head]
		var key int64
		if m.align {
			if h.kind == itemTxn && h.et > 0 && live && h.et > holdFrom && !in.stalled {
				if h.heldSince == 0 {
					h.heldSince = now
					in.holds++
				}
				in.mu.Unlock()
				continue
			}
			key = h.et
			if h.kind != itemTxn || h.et == 0 {
				key = -1 << 62 // control items and snapshot rows go first
			}
		} else {
			key = int64(h.arrival)
		}
		if best == nil || key < bestKey {
			best, bestKey = in, key
		}
		in.mu.Unlock()
	}
	if best == nil {
		return nil, item{}, allDone, nil
	}
	best.mu.Lock()
	it := m.pop(best)
	best.mu.Unlock()
	return best, it, false, nil
}

// pop takes in's head (in.mu held).
func (m *merger) pop(in *input) item {
	it := in.items[in.head]
	if it.kind == itemTxn && it.holds != in.holds || it.heldSince > 0 {
		m.p.stats.held.Add(1) // it waited for alignment
	}
	in.items[in.head] = item{}
	in.head++
	in.bytes -= it.size
	select {
	case in.space <- struct{}{}:
	default:
	}
	return it
}

// watermark computes the low watermark: the minimum over live streaming
// sources of the event time each has read up to. live is false when no
// source counts (all snapshotting, stalled or done).
//
// It also records the emitted watermark: the same minimum over what the
// sources have handed to the builder (a source with queued items counts
// only up to just before its head), with which batches are stamped. And,
// in the same pass, it marks sources that sent nothing for MaxWait as
// stalled (applying the stall policy) and clears the mark of those that
// came back.
func (m *merger) watermark(now int64) (wm int64, live bool, err error) {
	lo, hi, elo := int64(0), int64(0), int64(0)
	for _, in := range m.ins {
		in.mu.Lock()
		was := in.stalled
		quiet := now - in.alive
		if in.streaming && !in.done {
			in.stalled = in.queued() == 0 && quiet > m.maxWait
		}
		ok := in.streaming && !in.done && !in.stalled
		pr := in.progress()
		ep := pr
		if in.queued() > 0 {
			for i := in.head; i < len(in.items); i++ {
				if et := in.items[i].et; et > 0 {
					ep = min(ep, et-1)
					break
				}
			}
		}
		stalled := in.stalled
		in.mu.Unlock()
		if stalled != was {
			if err := m.stallChanged(in, stalled, quiet); err != nil {
				return 0, false, err
			}
		}
		if !ok || pr == 0 {
			continue
		}
		if !live || pr < lo {
			lo = pr
		}
		if !live || ep < elo {
			elo = ep
		}
		if !live || pr > hi {
			hi = pr
		}
		live = true
	}
	if live {
		m.p.watermark.Store(lo)
		m.p.skew.Store(hi - lo)
		m.emitted = max(m.emitted, elo)
	}
	return lo, live, nil
}

// stallChanged reports a source that stalled (or fails the run, by the
// stall policy) or came back.
func (m *merger) stallChanged(in *input, stalled bool, quiet int64) error {
	if !stalled {
		m.p.log.Info("source is back; alignment waits for it again", "source", in.name)
		return nil
	}
	if m.fail {
		return fmt.Errorf("%w: source %s sent nothing (no event, no heartbeat) for %s; align.on_stall is %q: check the server and the network, or set on_stall: proceed to carry on without it", ErrSourceStalled, in.name, time.Duration(quiet).Round(time.Millisecond), StallFail)
	}
	m.p.log.Warn("source stalled: it sent nothing, not even a heartbeat; it no longer holds the other sources back", "source", in.name, "quiet", time.Duration(quiet).Round(time.Millisecond).String(), "max_wait", time.Duration(m.maxWait).String())
	return nil
}

// ErrSourceStalled is returned when a source stalls and align.on_stall is
// "fail".
var ErrSourceStalled = errors.New("pipeline: source stalled")

// emit hands one item to the builder.
func (m *merger) emit(ctx context.Context, in *input, it item) error {
	switch it.kind {
	case itemState:
		m.b.snapshotState(in.idx, it.st)
		return nil
	case itemStreamFrom:
		return m.b.streamFrom(ctx, in.idx, it.pos)
	}
	if it.heldSince > 0 {
		m.p.stats.holdNanos.Add(uint64(max(m.now()-it.heldSince, 0)))
	}
	t := it.txn
	if !t.Snapshot {
		if t.Last {
			m.locked = -1
		} else {
			m.locked = in.idx
		}
		// A pin is done with the last chunk of its transaction. (Not with a
		// heartbeat: MySQL sends them while it skips what a replica's GTID
		// set already holds, before the transaction comes again.)
		for len(m.pins) > 0 && m.pins[0].src == in.idx && t.Last && m.pins[0].first(t) {
			m.pins = m.pins[1:]
		}
	}
	m.b.wm = m.emitted
	return m.b.txn(ctx, in.idx, t, it.et, it.size)
}
