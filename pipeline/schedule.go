package pipeline

import "time"

// schedule is the writer's timing decisions as a state machine, in the
// manner of etcd's raft (and of the aligner and the recovery planner): no
// goroutine, lock, channel or clock. The shell (writer.run, gather, write
// and save in pipeline.go, and the builder's cuts) tells it what happens,
// each time with the time it happens, and does what it answers:
//
//	builder ──cut(encoded)──► cut the batch here?
//	writer goroutine: batch received ──more(encoded, fixesStart)──► merge the next waiting batch in, or write now
//	                  batch written  ──written(facts)──► force a save?   changed() when the checkpoint moved
//	                  timer fires    ──due(now, false)──► save now?  wake(now) ─► when the timer fires next
//	                  input closed / run stopped ──stop(cancelled)──► bound of the final, forced save
//	                  before a save  ──due(now, force)──► save now?   then saved(now) if the store took it
//
// It decides when a batch is cut (its encoded bytes reach BatchBytes per
// format), how far group commit merges the batches that queued while the
// sinks were busy (up to four batch sizes; never past a batch that fixes
// a start position, which is written and checkpointed before anything
// after it; never for a plain sink), and when the checkpoint is saved: at
// most once per CheckpointEvery and only when it changed, checked at
// ticks of CheckpointEvery counted from the writer's start, or at once
// when a batch forces it (during a snapshot, a snapshot state, a fixed
// start position) and when the writer stops (bounded by stopBound when
// the run was cancelled). Tested from text in testdata/schedule.
//
// cut and more read only the configuration: the builder calls cut from
// the merger's goroutine while the writer's goroutine owns the rest.
type schedule struct {
	// cutAt is BatchBytes × formats: a batch is cut once its encoded
	// bytes reach it.
	cutAt int
	// gatherBelow is four batch sizes: group commit merges waiting batches
	// into one while it is under this (0: never, a plain sink).
	gatherBelow int
	every       time.Duration
	// start is when the writer started: its ticks are start + k×every.
	start time.Time

	// lastSave is when the checkpoint was last saved (zero: not yet by
	// this writer); dirty says it changed since.
	lastSave time.Time
	dirty    bool
}

// stopBound bounds the final save of a run that was cancelled (its own
// context, detached from the run's).
const stopBound = 5 * time.Second

// newSchedule returns the schedule of a writer started at start, for
// batches of batchBytes per format in formats formats, a checkpoint every
// every; plain is set for a plain sink (no group commit).
func newSchedule(batchBytes, formats int, every time.Duration, plain bool, start time.Time) *schedule {
	s := &schedule{cutAt: batchBytes * formats, every: every, start: start}
	if !plain {
		s.gatherBelow = 4 * s.cutAt
	}
	return s
}

// cut reports whether a batch whose encoded messages take encoded bytes
// is cut (handed to the writer) now.
func (s *schedule) cut(encoded int) bool { return encoded >= s.cutAt }

// more reports whether the writer, about to write a batch of encoded
// bytes (fixesStart: it records a start position the reader fixed),
// merges into it the next batch already waiting, if any (group commit: a
// sink slower than the arrival of small batches writes, and syncs, them
// together). A batch that fixes a start is merged after the batches
// before it, never before those after it: merged with them, a crash
// during their write would leave no checkpoint of the start.
func (s *schedule) more(encoded int, fixesStart bool) bool {
	return encoded < s.gatherBelow && !fixesStart
}

// batchFacts is what the schedule needs of a batch the writer wrote.
type batchFacts struct {
	// inSnapshot: some chunk came from a snapshot; snaps: it carries
	// snapshot states (or a snapshot's end); fixesStart: see batch.
	inSnapshot, snaps, fixesStart bool
}

// written reports whether the checkpoint is saved at once (if it
// changed) after a batch was written, rather than at the next tick due:
// during a snapshot every batch is checkpointed (re-read rows cannot be
// told apart from new ones, so the window of repeats stays short), and a
// start position the reader fixed is checkpointed before anything after
// it is written.
func (s *schedule) written(f batchFacts) (force bool) {
	return f.inSnapshot || f.snaps || f.fixesStart
}

// changed records that the checkpoint changed (a batch moved a position,
// a snapshot state or mark, an offset).
func (s *schedule) changed() { s.dirty = true }

// due reports whether the checkpoint is saved at now: it changed since
// the last save, and the interval has passed since then or force is set.
func (s *schedule) due(now time.Time, force bool) bool {
	return s.dirty && (force || now.Sub(s.lastSave) >= s.every)
}

// saved records that the store took the checkpoint as of now. (A save
// that fails records nothing: the writer stops with its error, and the
// checkpoint stays as it was.)
func (s *schedule) saved(now time.Time) { s.lastSave, s.dirty = now, false }

// wake returns when the writer's timer fires next after now: the next
// tick of the interval counted from the writer's start (ticks missed
// while the writer was busy are not made up for).
func (s *schedule) wake(now time.Time) time.Time {
	if s.every <= 0 {
		return time.Time{}
	}
	n := now.Sub(s.start)/s.every + 1
	if n < 1 {
		n = 1
	}
	return s.start.Add(n * s.every)
}

// stop returns the bound of the writer's final save, which is forced
// (see due): stopBound when the run was cancelled (the save gets a
// context of its own), none (0: the run's context) when the input ended.
func (s *schedule) stop(cancelled bool) time.Duration {
	if cancelled {
		return stopBound
	}
	return 0
}
