// Package checkpoint stores how far a pipeline has got, so that a restart
// resumes exactly after the last transaction that was durably delivered.
//
// A store is versioned: Save takes the version the caller last loaded and
// fails with ErrConflict when someone else saved in between, which is how
// a second writer is detected and fenced.
package checkpoint

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/sluice-cdc/sluice/internal/flock"
	"github.com/sluice-cdc/sluice/position"
)

// Errors of the stores.
var (
	// ErrConflict means the stored version is not the one expected.
	ErrConflict = errors.New("checkpoint: version conflict (another writer saved)")
	// ErrCorrupt means the stored checkpoint cannot be read.
	ErrCorrupt = errors.New("checkpoint: corrupt checkpoint")
)

// Checkpoint is what a pipeline records after a batch is durable.
type Checkpoint struct {
	Pipeline string `json:"pipeline,omitempty"`
	// Version is the store's version of this checkpoint; 0 means none saved.
	Version uint64 `json:"version"`
	Epoch   uint64 `json:"epoch,omitempty"`
	// Sources maps a source name to its position after the last whole
	// delivered transaction.
	Sources map[string]position.Position `json:"sources"`
	// Sinks maps a sink name to its durable offset (sink-specific text).
	Sinks   map[string]string `json:"sinks,omitempty"`
	LastSeq uint64            `json:"last_seq,omitempty"`
	// Snapshot holds an unfinished snapshot's state (what is left to read),
	// in the snapshot package's format; empty when none is under way.
	Snapshot json.RawMessage `json:"snapshot,omitempty"`
	// Snapshots holds, per source of a pipeline with several sources (and
	// for every source of `sluice run`), that source's unfinished snapshot.
	Snapshots map[string]json.RawMessage `json:"snapshots,omitempty"`
	// LastMarks holds, per source with an unfinished snapshot, the
	// sequence number of the row marked `"snapshot":"last"` once a batch
	// holding it is being written: saved before that write, so that a
	// restart after it (the sinks hold the row, the checkpoint does not
	// cover it) does not mark the re-read rows again. Dropped with the
	// snapshot's state.
	LastMarks map[string]uint64 `json:"last_marks,omitempty"`
	// Opens names the transactions that sinks may hold only part of, as an
	// older sluice recorded them (large transactions of a pipeline with
	// several sources, recorded before a batch that ends inside one was
	// written). Sluice no longer records them: each sink's recovery counts
	// what it holds of a transaction (pipeline.Recovery.Partial). They are
	// read for a sink that cannot count (a Redis high-water hash of an
	// older sluice) and dropped once every sink holds their ends.
	Opens []Open `json:"opens,omitempty"`
	// Open is the one open transaction of checkpoints of an older sluice;
	// Load moves it into Opens.
	Open    *Open     `json:"open,omitempty"`
	SavedAt time.Time `json:"saved_at"`
}

// Decode reads a stored checkpoint (its JSON) and moves fields of older
// checkpoints to their current place. Stores call it on what they load;
// the error is json's, for the store to wrap with ErrCorrupt and where the
// checkpoint is.
func Decode(data []byte) (Checkpoint, error) {
	var cp Checkpoint
	if err := json.Unmarshal(data, &cp); err != nil {
		return Checkpoint{}, err
	}
	if cp.Open != nil {
		cp.Opens = append(cp.Opens, *cp.Open)
		cp.Open = nil
	}
	return cp, nil
}

// Open is a transaction whose first part was about to be written: its
// source, the position before it, and the sequence number of its first
// message.
type Open struct {
	Source   string            `json:"source"`
	Begin    position.Position `json:"begin"`
	FirstSeq uint64            `json:"first_seq"`
}

// Store loads and saves checkpoints.
type Store interface {
	// Load returns the stored checkpoint, or a zero Checkpoint (Version 0)
	// when none was saved yet.
	Load(ctx context.Context) (Checkpoint, error)
	// Save stores cp if the stored version is still expected, and returns
	// the new version.
	Save(ctx context.Context, cp Checkpoint, expected uint64) (uint64, error)
}

// FileStore keeps the checkpoint in one local file, replaced atomically
// (write to a temporary file, fsync, rename, fsync the directory).
type FileStore struct {
	Path string
}

var _ Store = (*FileStore)(nil)

// Load reads the file; a missing file is an empty checkpoint.
func (s *FileStore) Load(ctx context.Context) (Checkpoint, error) {
	data, err := os.ReadFile(s.Path)
	if errors.Is(err, os.ErrNotExist) {
		return Checkpoint{}, nil
	}
	if err != nil {
		return Checkpoint{}, fmt.Errorf("checkpoint: reading %s: %w", s.Path, err)
	}
	cp, err := Decode(data)
	if err != nil {
		return Checkpoint{}, fmt.Errorf("%w: %s: %v (move it away to start over, or restore a backup)", ErrCorrupt, s.Path, err)
	}
	return cp, nil
}

// Save writes cp atomically if the file still holds version expected.
// A FileStore assumes one writer process; the version check catches a
// second one that saved in between. The check and the write happen under
// an exclusive lock on Path+".lock", so two savers that expect the same
// version cannot both succeed (one would silently overwrite the other).
func (s *FileStore) Save(ctx context.Context, cp Checkpoint, expected uint64) (uint64, error) {
	unlock, err := flock.Lock(s.Path + ".lock")
	if err != nil {
		return 0, fmt.Errorf("checkpoint: %w", err)
	}
	defer unlock()
	cur, err := s.Load(ctx)
	if err != nil && !errors.Is(err, ErrCorrupt) {
		return 0, err
	}
	if cur.Version != expected {
		return 0, fmt.Errorf("%w: %s holds version %d, expected %d", ErrConflict, s.Path, cur.Version, expected)
	}
	cp.Version = expected + 1
	if cp.SavedAt.IsZero() {
		cp.SavedAt = time.Now().UTC()
	}
	data, err := json.MarshalIndent(cp, "", "  ")
	if err != nil {
		return 0, err
	}
	if err := WriteFileAtomic(s.Path, append(data, '\n')); err != nil {
		return 0, fmt.Errorf("checkpoint: saving %s: %w", s.Path, err)
	}
	return cp.Version, nil
}

// WriteFileAtomic replaces path with data so that a crash leaves either
// the old or the new content, never a mix.
func WriteFileAtomic(path string, data []byte) error {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer os.Remove(tmp) // no-op after a successful rename
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
