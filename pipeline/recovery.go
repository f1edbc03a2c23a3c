package pipeline

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strings"

	"github.com/sluice-cdc/sluice/binlog"
	"github.com/sluice-cdc/sluice/checkpoint"
	"github.com/sluice-cdc/sluice/position"
	"github.com/sluice-cdc/sluice/snapshot"
)

// The recovery planner: where a run resumes, decided from the checkpoint
// and from what each sink's Recover found beyond it. It is pure: no sink,
// store or clock is called, so its decisions are tested step by step from
// text (testdata/recovery). The shell (Pipeline.recoverPlan) loads the
// checkpoint, asks the sinks, and hands the results here:
//
//	cp ──► planner.start ──► (each sink's Recover) ──► planner.plan ──► plan
//
// start reads the checkpoint's own state (each source's saved position and
// unfinished snapshot) before any sink is asked, so that a checkpoint that
// cannot be read fails before a sink is fenced with the new epoch.

// plan is where a run resumes: each source's position, the next sequence
// number, and per sink what it already holds.
type plan struct {
	srcs    []srcPlan
	nextSeq uint64
	skip    []uint64 // per sink: messages up to this seq are already there
	offsets []string // per sink: offset at the end of what it holds
	// holds says, per sink and source, which replayed transactions a sink
	// already holds (several sources only; nil when none).
	holds    [][]hold
	snapshot bool // a checkpoint inside a snapshot: no seq skipping
	// noLast says, per source, that every sink holds its resumed
	// snapshot's `last` row: the rows read again are not marked again.
	noLast []bool
	// pins are the partly written transactions, oldest first: each must be
	// written again before any other source's, so that in the sink holding
	// its first part the rest follows at once (what a sink holds of it is
	// counted from its first message).
	pins []pin
}

// pin is the first transaction of source src (with messages) that begins
// at or after after (zero: its first one).
type pin struct {
	src   int
	after position.Position
}

// first reports whether t is (a chunk of) the transaction p names.
func (p pin) first(t *binlog.Txn) bool {
	return !t.Snapshot && (len(t.Changes) > 0 || t.Chunk > 0) && (p.after.IsZero() || t.Begin.Compare(p.after) >= 0)
}

// srcPlan is where one source resumes.
type srcPlan struct {
	pos   position.Position
	saved bool // pos is a saved position (not the configured start)
	// given: the configured start counts as saved (StartGiven), so a
	// snapshot is taken only when one is needed for a saved position.
	given  bool
	resume *snapshot.State
}

// startSaved reports whether the source starts from a position that
// counts as saved (see source.run).
func (sp srcPlan) startSaved() bool { return sp.saved || sp.given }

// hold is what one sink already holds of one source's replayed
// transactions: every transaction that begins before until, and the first
// openCount messages of the transaction open names (the first one with
// messages that begins at or after open.after). openBegin is that
// transaction's Begin once the builder has seen it (openSeen).
type hold struct {
	until     position.Position
	open      pin
	openCount int
	openBegin position.Position
	openSeen  bool
}

// runEpoch is the epoch of a run: the stored one plus one, or with a
// coordinator (coordinated) its leadership's epoch leader, which may not
// be below the stored one.
func runEpoch(stored, leader uint64, coordinated bool) (uint64, error) {
	if !coordinated {
		return stored + 1, nil
	}
	if leader < stored {
		return leader, fmt.Errorf("%w: epoch %d is below the checkpoint's %d", ErrFenced, leader, stored)
	}
	return leader, nil
}

// planner decides a run's plan. Its logger receives the decisions worth a
// line in the log (the same lines as before the planner was pulled out of
// the pipeline).
type planner struct {
	log      *slog.Logger
	pipeline string          // the pipeline's name, for errors
	sources  []plannerSource // in the config's order
	sinks    []string        // the sinks' names, in the config's order
}

// plannerSource is what the planner needs of a source's config.
type plannerSource struct {
	name string
	// startGiven: the configured start counts as a saved position (see
	// SourceConfig.StartGiven).
	startGiven bool
}

func (p *Pipeline) planner() planner {
	r := planner{log: p.log, pipeline: p.cfg.Name}
	for _, s := range p.srcs {
		r.sources = append(r.sources, plannerSource{name: s.cfg.Name, startGiven: s.cfg.StartGiven})
	}
	for _, s := range p.cfg.Sinks {
		r.sinks = append(r.sinks, s.Name())
	}
	return r
}

func (r planner) srcIndex(name string) int {
	return slices.IndexFunc(r.sources, func(s plannerSource) bool { return s.name == name })
}

// start reads what the checkpoint says of each source: its saved position
// and its unfinished snapshot. It moves an older sluice's one snapshot
// (cp.Snapshot) to its source.
func (r planner) start(cp *checkpoint.Checkpoint) (plan, error) {
	if len(cp.Snapshot) > 0 && len(r.sources) == 1 {
		// A checkpoint of an older sluice: its one source's snapshot.
		if cp.Snapshots == nil {
			cp.Snapshots = map[string]json.RawMessage{}
		}
		cp.Snapshots[r.sources[0].name] = cp.Snapshot
		cp.Snapshot = nil
	}
	pl := plan{nextSeq: cp.LastSeq + 1, srcs: make([]srcPlan, len(r.sources))}
	for i, s := range r.sources {
		sp := &pl.srcs[i]
		sp.pos = cp.Sources[s.name]
		sp.saved = !sp.pos.IsZero()
		sp.given = s.startGiven
		raw := cp.Snapshots[s.name]
		resume, err := ResumeState(raw)
		if err != nil {
			return pl, fmt.Errorf("source %s: %w", s.name, err)
		}
		sp.resume = resume
		pl.snapshot = pl.snapshot || resume != nil || len(raw) > 0
	}
	return pl, nil
}

// plan completes pl (from start) with what the sinks hold, recs[i] being
// what sink i's Recover returned. It records in cp each source's resume
// position when every sink holds the source past the checkpoint (see
// planSources).
//
// With one source the run resumes after the last transaction that every
// sink holds, renumbering nothing: each sink skips what it already has by
// sequence number. With several, each source resumes after the last of its
// transactions that every sink holds, and each sink skips the transactions
// (and the part of a large one) it already has; messages sent again are
// numbered after everything the sinks hold.
func (r planner) plan(cp *checkpoint.Checkpoint, recs []Recovery, pl plan) (plan, error) {
	maxSeq := cp.LastSeq
	for _, rec := range recs {
		maxSeq = max(maxSeq, rec.MaxSeq)
	}
	pl.noLast = make([]bool, len(r.sources))
	for si, s := range r.sources {
		seq, ok := cp.LastMarks[s.name]
		if !ok || pl.srcs[si].resume == nil {
			continue
		}
		var holding []string
		for i, rec := range recs {
			if rec.MaxSeq >= seq {
				holding = append(holding, r.sinks[i])
			}
		}
		switch len(holding) {
		case len(recs):
			pl.noLast[si] = true
			r.log.Info("the sinks hold the snapshot's last row (marked last) beyond the checkpoint: the rows read again are not marked again", "source", s.name, "seq", seq)
		case 0:
		default:
			r.log.Warn("some sinks hold the snapshot's last row (marked last) beyond the checkpoint, others do not: the row read again is marked again, and those sinks see the mark twice", "source", s.name, "seq", seq, "holding", strings.Join(holding, ","))
		}
	}
	pl.skip = make([]uint64, len(recs))
	pl.offsets = make([]string, len(recs))
	for i := range recs {
		pl.offsets[i] = recs[i].Offset
	}
	if len(r.sources) > 1 || r.othersHeld(cp, recs) {
		// Several sources, or one left of several: the sinks' sequence
		// numbers past the checkpoint may be another source's, so the
		// sources resume by position and messages are numbered after
		// everything the sinks hold.
		pl.nextSeq = maxSeq + 1
		return pl, r.planSources(cp, recs, &pl)
	}
	name := r.sources[0].name
	sp := &pl.srcs[0]
	if pl.snapshot {
		// Inside a snapshot the numbering is not deterministic: chunks
		// fall between stream transactions where their watermarks are
		// reached, differently on every run. So the source resumes by
		// position, as with several sources: from the earliest of the
		// transaction ends the sinks hold past the checkpoint (a sink
		// holding more skips, by position, the stream transactions it
		// has, and the part it has of one cut between batches); messages
		// are numbered after everything the sinks hold. Snapshot rows
		// delivered after the checkpoint's state are read again (see
		// docs/DELIVERY.md); no stream transaction is.
		pl.nextSeq = maxSeq + 1
		return pl, r.planSources(cp, recs, &pl)
	}
	if !sp.saved && cp.Version > 0 {
		pl.nextSeq = maxSeq + 1
		if maxSeq > cp.LastSeq {
			// The sinks hold messages past a checkpoint that has no
			// position yet: the process died after writing the first
			// batches (a snapshot's rows, its last one carrying the
			// snapshot's position) and before their checkpoint. Resume by
			// position from what the sinks hold, as inside a snapshot;
			// starting over would read the whole snapshot again.
			return pl, r.planSources(cp, recs, &pl)
		}
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
			return pl, fmt.Errorf("sink %s holds messages of pipeline %q (up to seq %d) but there is no checkpoint and no transaction end among them: restore the checkpoint, or empty the sink to start over", r.sinks[i], r.pipeline, rec.MaxSeq)
		}
		if first || next < pl.nextSeq {
			sp.pos, pl.nextSeq = pos, next
			first = false
		}
		pl.skip[i] = rec.MaxSeq
	}
	sp.saved = !sp.pos.IsZero()
	if cp.Version == 0 && sp.saved {
		r.log.Warn("no checkpoint, but the sinks hold this pipeline's messages: resuming after the last transaction they all hold", "position", sp.pos.String(), "next_seq", pl.nextSeq)
	}
	return pl, nil
}

// othersHeld reports whether the checkpoint or a sink names a source
// other than the one configured: a pipeline that had several sources and
// now has one.
func (r planner) othersHeld(cp *checkpoint.Checkpoint, recs []Recovery) bool {
	name := r.sources[0].name
	for s := range cp.Sources {
		if s != name {
			return true
		}
	}
	for _, rec := range recs {
		for s := range rec.Ends {
			if s != name {
				return true
			}
		}
		for s, n := range rec.Partial {
			if s != name && n > 0 {
				return true
			}
		}
	}
	return false
}

// planSources resumes each of several sources from the earliest of its
// transaction ends that the sinks hold, and records what each sink holds
// beyond that.
func (r planner) planSources(cp *checkpoint.Checkpoint, recs []Recovery, pl *plan) error {
	pl.holds = make([][]hold, len(recs))
	for i := range recs {
		pl.holds[i] = make([]hold, len(r.sources))
	}
	// sinkEnds is, per sink and source, the last end the sink holds.
	sinkEnds := make([][]position.Position, len(recs))
	for i := range recs {
		sinkEnds[i] = make([]position.Position, len(r.sources))
	}
	holding := false
	for si, s := range r.sources {
		name := s.name
		ends := make([]position.Position, len(recs))
		resume := position.Position{}
		for i, rec := range recs {
			// Sequence numbers of several sources are renumbered after a
			// crash, so positions (not numbers) tell what is newer.
			ends[i] = cp.Sources[name]
			if e, ok := rec.Ends[name]; ok && (ends[i].IsZero() || e.Pos.Compare(ends[i]) > 0) {
				ends[i] = e.Pos
			}
			// A zero position is before everything: that sink needs the
			// source from its configured start.
			if i == 0 || ends[i].IsZero() || (!resume.IsZero() && ends[i].Compare(resume) < 0) {
				resume = ends[i]
			}
		}
		for i := range recs {
			sinkEnds[i][si] = ends[i]
		}
		sp := &pl.srcs[si]
		if !resume.IsZero() {
			sp.pos, sp.saved = resume, true
			// Every sink holds the source up to resume, so the checkpoint
			// says so from now on. Left at an older position, it would let
			// a sink that holds exactly resume move its offset on (it is
			// not ahead of the checkpoint by its holds) while the position
			// stays behind; the next recovery would then find nothing past
			// that offset and send the sink the source's transactions
			// since the older position again.
			if at := cp.Sources[name]; at.IsZero() || resume.Compare(at) > 0 {
				if cp.Sources == nil {
					cp.Sources = map[string]position.Position{}
				}
				cp.Sources[name] = resume
			}
		}
		for i := range recs {
			if !ends[i].IsZero() && (resume.IsZero() || ends[i].Compare(resume) > 0) {
				pl.holds[i][si].until = ends[i]
				holding = true
			}
		}
	}
	// A sink holds part of at most one transaction, its last: the messages
	// of one source after that source's last end in the sink (transactions
	// interleave whole, a large one's chunks back to back, so they are the
	// first messages of that source's next transaction). The recovery scan
	// counts them (Recovery.Partial). A sink that cannot count (a Redis
	// high-water hash of an older sluice) falls back on the open
	// transactions an older checkpoint recorded.
	type partial struct {
		p     pin
		sinks []int
	}
	var parts []partial
	add := func(i, si int, after position.Position, n int) {
		h := &pl.holds[i][si]
		h.open, h.openCount = pin{src: si, after: after}, n
		holding = true
		r.log.Info("a sink holds part of a transaction; the rest follows", "sink", r.sinks[i], "source", r.sources[si].name, "after", after.String(), "messages_held", n)
		k := slices.IndexFunc(parts, func(q partial) bool { return q.p == h.open })
		if k < 0 {
			parts = append(parts, partial{p: h.open, sinks: []int{i}})
		} else {
			parts[k].sinks = append(parts[k].sinks, i)
		}
	}
	for i, rec := range recs {
		if rec.Uncounted {
			if o := recordedOpen(cp, rec); o != nil {
				si := r.srcIndex(o.Source)
				if si < 0 {
					return fmt.Errorf("checkpoint: a transaction of source %q may be partly written, but the config has no such source: put the source back until the pipeline has run once, or empty the sinks to start over", o.Source)
				}
				add(i, si, o.Begin, int(rec.MaxSeq-o.FirstSeq+1))
			}
			continue
		}
		for src, n := range rec.Partial {
			if n <= 0 {
				continue
			}
			si := r.srcIndex(src)
			if si < 0 {
				return fmt.Errorf("sink %s holds the first %d messages of a transaction of source %q, but the config has no such source: put the source back until the pipeline has run once, or empty the sinks to start over", r.sinks[i], n, src)
			}
			add(i, si, sinkEnds[i][si], n)
		}
	}
	// The oldest first: a sink holding part of a later one holds the
	// earlier ones whole (the sinks' contents differ only within the batch
	// being written when the run stopped), so it receives nothing before
	// its own. a is older than b when a sink holding part of b has a's
	// source past a's beginning.
	older := func(a, b partial) bool {
		for _, j := range b.sinks {
			if e := sinkEnds[j][a.p.src]; !e.IsZero() && (a.p.after.IsZero() || e.Compare(a.p.after) > 0) {
				return true
			}
		}
		return false
	}
	slices.SortStableFunc(parts, func(a, b partial) int {
		switch {
		case older(a, b):
			return -1
		case older(b, a):
			return 1
		}
		return 0
	})
	for _, q := range parts {
		pl.pins = append(pl.pins, q.p)
	}
	if !holding {
		pl.holds = nil
	}
	if cp.Version == 0 && pl.nextSeq > 1 {
		r.log.Warn("no checkpoint, but the sinks hold this pipeline's messages: each source resumes after the last of its transactions they all hold", "next_seq", pl.nextSeq)
	}
	return nil
}

// recordedOpen returns the transaction an older checkpoint recorded as open
// that a sink holds part of: the one with the highest first sequence
// number the sink has reached (a transaction written again after a crash
// was recorded once per run), unless the sink holds its end; nil if none.
func recordedOpen(cp *checkpoint.Checkpoint, rec Recovery) *checkpoint.Open {
	var o *checkpoint.Open
	for k := range cp.Opens {
		c := &cp.Opens[k]
		if c.FirstSeq <= rec.MaxSeq && (o == nil || c.FirstSeq > o.FirstSeq) {
			o = c
		}
	}
	if o == nil {
		return nil
	}
	if e, ok := rec.Ends[o.Source]; ok && e.Seq >= o.FirstSeq {
		return nil // the sink holds the whole transaction
	}
	return o
}

// heldWhole returns the sinks that hold the whole transaction t of source
// si (it begins before what they hold of the source ends). A sink's hold
// ends at the first transaction past it.
func heldWhole(holds [][]hold, si int, t *binlog.Txn) uint64 {
	var mask uint64
	for i := range holds {
		h := &holds[i][si]
		if h.until.IsZero() {
			continue
		}
		if t.Begin.Compare(h.until) < 0 {
			mask |= 1 << i
		} else {
			h.until = position.Position{}
		}
	}
	return mask
}

// heldNext returns the sinks that hold the next message of t as part of a
// transaction they hold the beginning of, counting it off their hold.
// opened is called for each sink whose partly held transaction t is found
// to be (at its first message).
func heldNext(holds [][]hold, si int, t *binlog.Txn, opened func(sink int)) uint64 {
	var mask uint64
	for i := range holds {
		h := &holds[i][si]
		if h.openCount == 0 {
			continue
		}
		if !h.openSeen {
			if !h.open.first(t) {
				continue
			}
			h.openBegin, h.openSeen = t.Begin, true
			opened(i)
		} else if t.Begin.Compare(h.openBegin) != 0 {
			continue
		}
		mask |= 1 << i
		h.openCount--
	}
	return mask
}
