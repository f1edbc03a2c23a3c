package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/sluice-cdc/sluice/binlog"
	"github.com/sluice-cdc/sluice/checkpoint"
	"github.com/sluice-cdc/sluice/codec"
	"github.com/sluice-cdc/sluice/pipeline"
)

// tail's pipeline: the name of its pipeline and of its one source, which
// its checkpoint keeps the position under; the size of a batch (small
// enough for its buffer to stay in the CPU's cache while it is encoded
// into and written out) and the memory of the batches and chunks read and
// not yet printed (the least the pipeline takes: what is queued in it is
// memory the reader cannot reuse); and how often the checkpoint is saved
// (a crash prints again at most what was printed in that time).
const (
	tailSource          = "tail"
	tailBatchBytes      = 1 << 20
	tailBufferBytes     = 4 << 20
	tailCheckpointEvery = 100 * time.Millisecond
)

// tailSink is `sluice tail`'s sink: it prints each change as a line
// (pipeline.PlainSink: the encoder's line in the --format chosen, no
// "sluice" block) and keeps the summary's figures in p.
type tailSink struct {
	p      *printer
	format codec.Format
	name   string // source.name in the lines (--name)
	// err is the error writing the output, which ends the run.
	err error
}

var _ pipeline.PlainSink = (*tailSink)(nil)

func (s *tailSink) Name() string { return "stdout" }

// Format is the --format's codec format (format none: sluice's, unused).
func (s *tailSink) Format() codec.Format { return s.format }

// Plain is the encoding: none encodes nothing.
func (s *tailSink) Plain() pipeline.Plain {
	return pipeline.Plain{None: s.p.none, Name: s.name, Keys: s.p.keys}
}

// Chunk counts a chunk in the summary.
func (s *tailSink) Chunk(t *binlog.Txn) { s.p.count(t) }

// Recover: stdout holds nothing to find again; the checkpoint says where
// the run resumes.
func (s *tailSink) Recover(context.Context, uint64, string) (pipeline.Recovery, error) {
	return pipeline.Recovery{}, nil
}

// Write prints the batch's lines (each message holds a run of them). The
// values of a batch lie one after the other in the pipeline's buffer, so
// adjacent ones are printed as one run, written straight to the output
// (after what the printer's buffer holds) rather than copied into it.
func (s *tailSink) Write(_ context.Context, b *pipeline.Batch) (string, error) {
	p := s.p
	var run []byte
	for i := range b.Messages {
		v := b.Messages[i].Value
		p.out += int64(len(v))
		if follows(run, v) {
			run = run[:len(run)+len(v)]
			continue
		}
		if err := s.print(run); err != nil {
			return "", err
		}
		run = v
	}
	if err := s.print(run); err != nil {
		return "", err
	}
	if err := p.w.Flush(); err != nil {
		return "", s.fail(err)
	}
	return "", nil
}

// follows reports whether v begins where run ends, in the same array.
func follows(run, v []byte) bool {
	return len(run) > 0 && len(v) > 0 && cap(run) > len(run) && &run[:len(run)+1][len(run)] == &v[0]
}

// print writes run to the output, after what the printer's buffer holds.
func (s *tailSink) print(run []byte) error {
	if len(run) == 0 {
		return nil
	}
	p := s.p
	if len(run) < p.w.Available() {
		p.w.Write(run) // fits: one write with the next run; an error stays in the writer, for Flush
		return nil
	}
	if err := p.w.Flush(); err != nil {
		return s.fail(err)
	}
	if _, err := p.out0.Write(run); err != nil {
		return s.fail(err)
	}
	return nil
}

// fail records the output's error, which ends the run (tail reports
// s.err), and returns it as permanent.
func (s *tailSink) fail(err error) error {
	s.err = fmt.Errorf("writing output: %w", err)
	return fmt.Errorf("%w (%w)", s.err, pipeline.ErrPermanent)
}

func (s *tailSink) Close() error { return nil }

// tailStore is tail's checkpoint file: the pipeline's checkpoint, with the
// source's unfinished snapshot kept in the Snapshot field, where a
// checkpoint of one source has it (checkpoint.Checkpoint) and where tail
// has always written it. The pipeline reads it there (and a checkpoint an
// older tail wrote, which has only the position and that field).
type tailStore struct {
	checkpoint.FileStore
}

func (s *tailStore) Save(ctx context.Context, cp checkpoint.Checkpoint, expected uint64) (uint64, error) {
	if raw, ok := cp.Snapshots[tailSource]; ok && len(cp.Snapshots) == 1 {
		cp.Snapshot, cp.Snapshots = raw, nil // a copy: the pipeline's map is untouched
	}
	return s.FileStore.Save(ctx, cp, expected)
}

// memStore is the checkpoint of a tail without --checkpoint: kept in
// memory, for the run only.
type memStore struct {
	mu sync.Mutex
	cp checkpoint.Checkpoint
}

func (s *memStore) Load(context.Context) (checkpoint.Checkpoint, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cp, nil
}

func (s *memStore) Save(_ context.Context, cp checkpoint.Checkpoint, expected uint64) (uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cp.Version != expected {
		return 0, fmt.Errorf("%w: version %d, expected %d", checkpoint.ErrConflict, s.cp.Version, expected)
	}
	cp.Version = expected + 1
	s.cp = cp
	return cp.Version, nil
}
