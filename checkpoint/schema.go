package checkpoint

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sync"

	"github.com/sluice-cdc/sluice/binlog"
	"github.com/sluice-cdc/sluice/position"
)

// The schema history of a source (binlog.History) is kept beside its
// checkpoint: a base (every captured table's CREATE TABLE at a position)
// and the entries of the DDL after it, each appended durably before the
// DDL's change is delivered, so that any checkpoint past a DDL finds its
// entry. Appends are idempotent: an entry at a position the store already
// holds is dropped (a DDL read again after a restart, or by a zombie).

// schemaLine is one line of a FileSchemaStore.
type schemaLine struct {
	Base  *binlog.HistoryState `json:"base,omitempty"`
	Entry *binlog.HistoryEntry `json:"entry,omitempty"`
}

// FileSchemaStore keeps a schema history in one local file of JSON lines:
// the base first, then one line per entry, appended and fsynced. A line
// cut short by a crash is dropped on load (its DDL was not delivered:
// its append had not returned).
type FileSchemaStore struct {
	Path string

	mu   sync.Mutex
	last position.Position // the last stored entry's (or the base's) position
	read bool
}

var _ binlog.HistoryStore = (*FileSchemaStore)(nil)

// SchemaPath is the schema history file of a source beside a checkpoint file.
func SchemaPath(checkpointPath, source string) string {
	return checkpointPath + ".schema." + source
}

// LoadSchema reads the base and the entries; a missing file is an empty
// history.
func (s *FileSchemaStore) LoadSchema(ctx context.Context) (*binlog.HistoryState, []binlog.HistoryEntry, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.load()
}

func (s *FileSchemaStore) load() (*binlog.HistoryState, []binlog.HistoryEntry, error) {
	data, err := os.ReadFile(s.Path)
	if errors.Is(err, os.ErrNotExist) {
		s.read = true
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("checkpoint: reading the schema history %s: %w", s.Path, err)
	}
	var base *binlog.HistoryState
	var entries []binlog.HistoryEntry
	var last position.Position
	for n := 1; len(data) > 0; n++ {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			break // cut short by a crash: never acknowledged
		}
		line := data[:i]
		data = data[i+1:]
		var l schemaLine
		if err := json.Unmarshal(line, &l); err != nil {
			return nil, nil, fmt.Errorf("%w: schema history %s line %d: %v (move it away and restart from a snapshot, or restore a backup)", ErrCorrupt, s.Path, n, err)
		}
		switch {
		case l.Base != nil:
			base, entries, last = l.Base, nil, l.Base.Pos
		case l.Entry != nil:
			if !last.IsZero() && l.Entry.Pos.Compare(last) < 0 {
				continue // appended again (an older DDL read after a restart)
			}
			if dup(entries, *l.Entry) {
				continue
			}
			entries = append(entries, *l.Entry)
			last = l.Entry.Pos
		}
	}
	s.last, s.read = last, true
	return base, entries, nil
}

// dup reports whether entries end with e's position and holds e (the
// same statement's entry appended twice).
func dup(entries []binlog.HistoryEntry, e binlog.HistoryEntry) bool {
	for i := len(entries) - 1; i >= 0 && entries[i].Pos.Compare(e.Pos) == 0; i-- {
		if entries[i].DB == e.DB && entries[i].Table == e.Table {
			return true
		}
	}
	return false
}

// AppendSchema appends entries and fsyncs; those at or before the last
// stored position are dropped.
func (s *FileSchemaStore) AppendSchema(ctx context.Context, entries []binlog.HistoryEntry) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.read {
		if _, _, err := s.load(); err != nil {
			return err
		}
	}
	var buf bytes.Buffer
	stored, last := s.last, s.last
	for i := range entries {
		e := entries[i]
		if !stored.IsZero() && e.Pos.Compare(stored) <= 0 {
			continue // stored before (one statement's entries come in one call)
		}
		b, err := json.Marshal(schemaLine{Entry: &e})
		if err != nil {
			return err
		}
		buf.Write(b)
		buf.WriteByte('\n')
		last = e.Pos
	}
	if buf.Len() == 0 {
		return nil
	}
	f, err := os.OpenFile(s.Path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("checkpoint: appending to the schema history %s: %w", s.Path, err)
	}
	if _, err := f.Write(buf.Bytes()); err != nil {
		f.Close()
		return fmt.Errorf("checkpoint: appending to the schema history %s: %w", s.Path, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("checkpoint: syncing the schema history %s: %w", s.Path, err)
	}
	if err := f.Close(); err != nil {
		return err
	}
	s.last = last
	return nil
}

// CompactSchema replaces the file, atomically, with state as its base and
// the stored entries after state.Pos.
func (s *FileSchemaStore) CompactSchema(ctx context.Context, state binlog.HistoryState) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, entries, err := s.load()
	if err != nil && !errors.Is(err, ErrCorrupt) {
		return err
	}
	var buf bytes.Buffer
	w := bufio.NewWriter(&buf)
	b, err := json.Marshal(schemaLine{Base: &state})
	if err != nil {
		return err
	}
	w.Write(b)
	w.WriteByte('\n')
	last := state.Pos
	for i := range entries {
		if entries[i].Pos.Compare(state.Pos) <= 0 {
			continue
		}
		b, err := json.Marshal(schemaLine{Entry: &entries[i]})
		if err != nil {
			return err
		}
		w.Write(b)
		w.WriteByte('\n')
		last = entries[i].Pos
	}
	w.Flush()
	if err := WriteFileAtomic(s.Path, buf.Bytes()); err != nil {
		return fmt.Errorf("checkpoint: writing the schema history %s: %w", s.Path, err)
	}
	s.last, s.read = last, true
	return nil
}
