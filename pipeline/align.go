package pipeline

import (
	"fmt"
	"time"

	"github.com/sluice-cdc/sluice/binlog"
	"github.com/sluice-cdc/sluice/internal/bytebudget"
	"github.com/sluice-cdc/sluice/position"
)

// aligner is the merger's decisions as a state machine, in the manner of
// etcd's raft: no goroutine, lock, channel or clock. The shell (merger,
// input in merge.go) feeds it what the sources hand over and the clock
// samples, each with the time it happens, and asks it, with the time
// again, which item goes out next:
//
//	source goroutines ──read/push/sample/done──►┐
//	                                            aligner ──next(now)──► step ──► builder
//	merger goroutine (wake or 50 ms tick) ──────┘          (item, watermark, stalls)
//
// It decides which source's head goes out (a large transaction's chunks
// back to back, pinned transactions first after a recovery, with
// alignment the eligible head with the lowest event time, else the head
// that arrived first), which heads are held back (leading the low
// watermark by more than MaxSkew), the low watermark, and which sources
// stalled. Tested from text in testdata/align.
type aligner struct {
	srcs []alignSource
	// locked is a source in the middle of a large transaction, or -1.
	locked int
	// pins are transactions to take from their sources, in order, before
	// anything else (recovery of partly written ones).
	pins     []pin
	arrivals uint64
	// emitted is the watermark of what has gone out (Unix ns): batches
	// are stamped with it.
	emitted     int64
	align       bool
	maxSkew     int64
	maxWait     int64
	sampleEvery int64
	fail        bool
	// limit is each source's queue budget in bytes.
	limit int
}

// alignSource is one source's side: its queue, and what it is known to
// have read up to, in event time.
type alignSource struct {
	name  string
	items []item
	head  int
	bytes int
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
}

func newAligner(names []string, a AlignConfig, limit int) *aligner {
	al := &aligner{locked: -1, align: a.MaxSkew > 0, maxSkew: int64(a.MaxSkew), maxWait: int64(a.MaxWait),
		sampleEvery: int64(a.SampleEvery), fail: a.OnStall == StallFail, limit: limit}
	for _, n := range names {
		al.srcs = append(al.srcs, alignSource{name: n})
	}
	return al
}

func (s *alignSource) queued() int { return len(s.items) - s.head }

// progress is the event time up to which the source has read everything.
func (s *alignSource) progress() int64 { return max(s.read, s.caught) }

// full reports whether source si must wait before queueing size bytes
// (they do not fit its queue's budget; an empty queue takes anything):
// the rule of internal/bytebudget, on the bytes the aligner counts.
func (a *aligner) full(si, size int) bool {
	return !bytebudget.Fits(a.srcs[si].bytes, size, a.limit)
}

// waiting records that source si waits for queue space at now: waiting on
// the merger is not a stall.
func (a *aligner) waiting(si int, now int64) { a.srcs[si].alive = now }

// push queues it for source si at now.
func (a *aligner) push(si int, it item, now int64) {
	s := &a.srcs[si]
	a.arrivals++
	it.arrival = a.arrivals
	it.holds = s.holds
	if s.head > 0 && (s.head == len(s.items) || s.head >= 64 && s.head >= len(s.items)/2) {
		// Drop the taken items at the front (a queue that never empties,
		// as a held one, would otherwise grow by every item it ever had).
		n := copy(s.items, s.items[s.head:])
		clear(s.items[n:])
		s.items, s.head = s.items[:n], 0
	}
	s.items = append(s.items, it)
	s.bytes += it.size
	s.alive = now
}

// link is what the clock sampler knows of a source's link when a
// heartbeat arrives.
type link struct {
	now int64 // Unix ns
	// rtt bounds the link's round trip as it is now (see
	// clockEstimate.roundTrip and the reader's own measure).
	rtt int64
	// sampled is the Unix ns of the last successful clock sample.
	sampled int64
}

// read notes a chunk of a transaction read by source si, with its
// corrected event time et (0: none), and returns et made finer by the
// samples; l matters for heartbeats only.
func (a *aligner) read(si int, t *binlog.Txn, et int64, l link) int64 {
	if t.Snapshot {
		return et
	}
	s := &a.srcs[si]
	s.streaming = true
	if et > 0 && s.sampled > et {
		// The transaction comes after a sampled position, so it
		// committed after that sample's time: finer than MariaDB's
		// whole seconds (which truncate).
		et = s.sampled
	}
	if et > s.read {
		s.read = et
	}
	if t.Last && !t.End.IsZero() {
		s.lastEnd = t.End
		s.matchSamples()
	}
	if t.Heartbeat {
		// No recent clock sample (a sample takes two round trips): a
		// heartbeat says the source had sent everything when it was sent,
		// at most a round trip ago. The round trip is the link's as it is
		// now: a sample under way for long, or the latest one, shows a
		// link that slowed down since the reader connected and since the
		// shortest recent sample.
		if l.now-l.sampled > 4*a.sampleEvery+2*l.rtt {
			s.caught = max(s.caught, l.now-l.rtt)
		}
	}
	return et
}

// streamStarted records that source si streams (after its snapshot, or
// from the start) at now.
func (a *aligner) streamStarted(si int, now int64) {
	s := &a.srcs[si]
	s.streaming = true
	s.alive = now
}

// addSample records the server's position at a moment; it counts once the
// source has read up to that position.
func (a *aligner) addSample(si int, sm sample) {
	s := &a.srcs[si]
	if len(s.samples) < 64 {
		s.samples = append(s.samples, sm)
	} else {
		s.samples[len(s.samples)-1] = sm // far behind: keep the newest
	}
	s.matchSamples()
}

// matchSamples moves caught forward over the samples whose position the
// source has read past.
func (s *alignSource) matchSamples() {
	n := 0
	for _, sm := range s.samples {
		if s.lastEnd.IsZero() || !s.lastEnd.HasFile() || s.lastEnd.Compare(sm.pos) < 0 {
			break
		}
		if sm.at > s.caught {
			s.caught = sm.at
		}
		s.sampled = max(s.sampled, sm.at)
		n++
	}
	if n > 0 {
		s.samples = append(s.samples[:0], s.samples[n:]...)
	}
}

// sourceDone records that source si returned (err nil: it ended).
func (a *aligner) sourceDone(si int, err error) {
	s := &a.srcs[si]
	s.done, s.err = true, err
}

// step is what one call of next decided.
type step struct {
	// src is the source whose head goes out (it), or -1: nothing goes out
	// now (finished: every source is done and drained).
	src      int
	it       item
	finished bool
	// err ends the run: a source failed, or stalled with on_stall: fail.
	err error
	// waited: it waited for alignment; held: for how long (ns).
	waited bool
	held   int64
	// emitted is the watermark of what has gone out, with it.
	emitted int64
	// wm is the low watermark and skew the spread of the live sources'
	// progress (live: some source counts; else both are stale).
	wm, skew int64
	live     bool
	// stalls are the sources found stalled or back, in order.
	stalls []stallChange
}

// stallChange is a source found stalled (quiet for that long) or back.
type stallChange struct {
	src     int
	stalled bool
	quiet   int64
}

// next decides, at now, the item to emit: the locked source's next chunk,
// else (with alignment) the eligible head with the lowest event time, else
// the head that arrived first.
func (a *aligner) next(now int64) (st step) {
	st.src = -1
	wm, live, err := a.watermark(now, &st)
	if err != nil {
		st.err = err
		return st
	}
	if a.locked < 0 && len(a.pins) > 0 {
		a.locked = a.pins[0].src
	}
	if a.locked >= 0 {
		s := &a.srcs[a.locked]
		if s.queued() == 0 {
			if s.done {
				if s.err != nil {
					st.err = s.err
					return st
				}
				a.locked, a.pins = -1, nil
			}
			return st
		}
		a.take(&st, a.locked, now)
		return st
	}
	var (
		best     = -1
		bestKey  int64
		allDone  = true
		holdFrom = wm + a.maxSkew
	)
	for si := range a.srcs {
		s := &a.srcs[si]
		if s.done && s.err != nil {
			st.err = s.err
			return st
		}
		if s.queued() == 0 {
			allDone = allDone && s.done
			continue
		}
		allDone = false
		h := &s.items[s.head]
		var key int64
		if a.align {
			if h.kind == itemTxn && h.et > 0 && live && h.et > holdFrom && !s.stalled {
				if h.heldSince == 0 {
					h.heldSince = now
					s.holds++
				}
				continue
			}
			key = h.et
			if h.kind != itemTxn || h.et == 0 {
				key = -1 << 62 // control items and snapshot rows go first
			}
		} else {
			key = int64(h.arrival)
		}
		if best < 0 || key < bestKey {
			best, bestKey = si, key
		}
	}
	if best < 0 {
		st.finished = allDone
		return st
	}
	a.take(&st, best, now)
	return st
}

// take pops source si's head into st, and follows a large transaction's
// chunks and the pins.
func (a *aligner) take(st *step, si int, now int64) {
	s := &a.srcs[si]
	it := s.items[s.head]
	st.waited = it.kind == itemTxn && it.holds != s.holds || it.heldSince > 0
	s.items[s.head] = item{}
	s.head++
	s.bytes -= it.size
	st.src, st.it, st.emitted = si, it, a.emitted
	if it.kind != itemTxn {
		return
	}
	if it.heldSince > 0 {
		st.held = max(now-it.heldSince, 0)
	}
	t := it.txn
	if !t.Snapshot {
		if t.Last {
			a.locked = -1
		} else {
			a.locked = si
		}
		// A pin is done with the last chunk of its transaction. (Not with a
		// heartbeat: MySQL sends them while it skips what a replica's GTID
		// set already holds, before the transaction comes again.)
		for len(a.pins) > 0 && a.pins[0].src == si && t.Last && a.pins[0].first(t) {
			a.pins = a.pins[1:]
		}
	}
}

// watermark computes the low watermark: the minimum over live streaming
// sources of the event time each has read up to. live is false when no
// source counts (all snapshotting, stalled or done).
//
// It also records the emitted watermark: the same minimum over what the
// sources have handed out (a source with queued items counts only up to
// just before its head), with which batches are stamped. And, in the same
// pass, it marks sources that sent nothing for MaxWait as stalled
// (applying the stall policy) and clears the mark of those that came back.
func (a *aligner) watermark(now int64, st *step) (wm int64, live bool, err error) {
	lo, hi, elo := int64(0), int64(0), int64(0)
	for si := range a.srcs {
		s := &a.srcs[si]
		was := s.stalled
		quiet := now - s.alive
		if s.streaming && !s.done {
			s.stalled = s.queued() == 0 && quiet > a.maxWait
		}
		ok := s.streaming && !s.done && !s.stalled
		pr := s.progress()
		ep := pr
		if s.queued() > 0 {
			for i := s.head; i < len(s.items); i++ {
				if et := s.items[i].et; et > 0 {
					ep = min(ep, et-1)
					break
				}
			}
		}
		if s.stalled != was {
			if s.stalled && a.fail {
				return 0, false, fmt.Errorf("%w: source %s sent nothing (no event, no heartbeat) for %s; align.on_stall is %q: check the server and the network, or set on_stall: proceed to carry on without it", ErrSourceStalled, s.name, time.Duration(quiet).Round(time.Millisecond), StallFail)
			}
			st.stalls = append(st.stalls, stallChange{src: si, stalled: s.stalled, quiet: quiet})
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
		st.wm, st.skew, st.live = lo, hi-lo, true
		a.emitted = max(a.emitted, elo)
	}
	return lo, live, nil
}
