package rowimage

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2"

	"github.com/sluice-cdc/sluice/position"
)

// Resume is where a run reads from again: chunks of the stream that begin
// at or after Pos, and snapshot chunks whose messages come after LastSeq
// (the checkpoint's), are read again; the others are not.
//
// Version is the version of the checkpoint the run starts from: Trim
// records the version of every checkpoint saved, so that a store older
// than the checkpoint (a copy restored from a backup, or one that missed
// checkpoints) or newer (a checkpoint restored) is told apart and emptied
// rather than trusted.
type Resume struct {
	Pos     position.Position
	LastSeq uint64
	Version uint64
}

// replayed reports whether the chunk of an undo record is read again.
func (r Resume) replayed(seq uint64, h undoHeader) bool {
	if h.Snapshot {
		return seq > r.LastSeq
	}
	return r.Pos.IsZero() || h.Begin.Compare(r.Pos) >= 0
}

// RewindResult says what Rewind did.
type RewindResult struct {
	// Undone is the number of chunks undone.
	Undone int
	// Cleared is set when the store could not be brought to the resume
	// point and was emptied (see Rewind).
	Cleared bool
	// Reason says why it was cleared.
	Reason string
}

type undoRecord struct {
	seq, sub uint64
	hdr      undoHeader
	raw      []byte
}

func parseUndo(k, v []byte) (undoRecord, error) {
	if len(k) != 17 {
		return undoRecord{}, errors.New("rowimage: an undo key is corrupt")
	}
	r := undoRecord{seq: binary.BigEndian.Uint64(k[1:]), sub: binary.BigEndian.Uint64(k[9:])}
	n, w := binary.Uvarint(v)
	if w <= 0 || uint64(len(v)-w) < n {
		return r, errors.New("rowimage: an undo record is corrupt")
	}
	if err := json.Unmarshal(v[w:w+int(n)], &r.hdr); err != nil {
		return r, fmt.Errorf("rowimage: an undo record is corrupt: %w", err)
	}
	r.raw = append([]byte(nil), v[w+int(n):]...)
	return r, nil
}

// undoRecords returns the undo records, oldest first.
func (s *Store) undoRecords() ([]undoRecord, error) {
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: []byte{prefixUndo}, UpperBound: []byte{prefixUndo + 1}})
	if err != nil {
		return nil, err
	}
	defer it.Close()
	var recs []undoRecord
	for it.First(); it.Valid(); it.Next() {
		r, err := parseUndo(it.Key(), it.Value())
		if err != nil {
			return nil, err
		}
		recs = append(recs, r)
	}
	return recs, it.Error()
}

// Rewind brings the store back to the resume point: it undoes, newest
// first, every chunk from the oldest one that is read again. When that
// would also undo a chunk that is not read again (the sinks hold a
// stream transaction beyond a snapshot chunk read again, after a crash
// inside a snapshot), the store cannot be brought to the resume point
// and is emptied instead: rows are then completed again only once seen
// whole (a snapshot) or by fill_missing: reselect. A store without a
// saved position (r.Pos zero) holding rows is emptied too: the run
// starts over.
func (s *Store) Rewind(r Resume) (RewindResult, error) {
	recs, err := s.undoRecords()
	if err != nil {
		return RewindResult{}, fmt.Errorf("rowimage: reading the undo records: %w", err)
	}
	empty, err := s.empty()
	if err != nil || empty {
		return RewindResult{}, err
	}
	if r.Pos.IsZero() && r.LastSeq == 0 {
		return RewindResult{Cleared: true, Reason: "the pipeline starts without a saved position"}, s.clear()
	}
	v, ok, err := s.version()
	switch {
	case err != nil:
		return RewindResult{}, err
	case !ok:
		return RewindResult{Cleared: true, Reason: "the store records no checkpoint"}, s.clear()
	case v+1 < r.Version || v > r.Version:
		reason := fmt.Sprintf("the store was last checkpointed at version %d, the checkpoint is version %d", v, r.Version)
		return RewindResult{Cleared: true, Reason: reason}, s.clear()
	}
	from := len(recs)
	for i, rec := range recs {
		if r.replayed(rec.seq, rec.hdr) {
			from = i
			break
		}
	}
	for _, rec := range recs[from:] {
		if !r.replayed(rec.seq, rec.hdr) {
			reason := fmt.Sprintf("a chunk that is not read again (seq %d, begin %s) follows one that is", rec.seq, rec.hdr.Begin.String())
			return RewindResult{Cleared: true, Reason: reason}, s.clear()
		}
	}
	b := s.db.NewBatch()
	defer b.Close()
	for i := len(recs) - 1; i >= from; i-- {
		if err := applyUndo(b, recs[i].raw); err != nil {
			return RewindResult{}, err
		}
		if err := b.Delete(undoKey(recs[i].seq, recs[i].sub), nil); err != nil {
			return RewindResult{}, err
		}
	}
	if err := b.Commit(pebble.Sync); err != nil {
		return RewindResult{}, fmt.Errorf("rowimage: rewinding the row image store: %w", err)
	}
	return RewindResult{Undone: len(recs) - from}, s.loadLast()
}

// applyUndo restores every key of one undo record. (Within a record each
// key appears once, so the order does not matter.)
func applyUndo(b *pebble.Batch, raw []byte) error {
	for len(raw) > 0 {
		had := raw[0]
		raw = raw[1:]
		n, w := binary.Uvarint(raw)
		if w <= 0 || uint64(len(raw)-w) < n {
			return errors.New("rowimage: an undo record is corrupt")
		}
		key := raw[w : w+int(n)]
		raw = raw[w+int(n):]
		if had == 0 {
			if err := b.Delete(key, nil); err != nil {
				return err
			}
			continue
		}
		n, w = binary.Uvarint(raw)
		if w <= 0 || uint64(len(raw)-w) < n {
			return errors.New("rowimage: an undo record is corrupt")
		}
		if err := b.Set(key, raw[w:w+int(n)], nil); err != nil {
			return err
		}
		raw = raw[w+int(n):]
	}
	return nil
}

// Trim drops the undo records no restart can need once a checkpoint of
// version version, with the source's position pos and sequence number
// lastSeq, is saved (restarts resume at or after it), and records the
// version.
func (s *Store) Trim(pos position.Position, lastSeq, version uint64) error {
	recs, err := s.undoRecords()
	if err != nil {
		return err
	}
	// Before a position is saved only snapshot chunks can be trimmed.
	b := s.db.NewBatch()
	defer b.Close()
	for _, rec := range recs {
		if rec.hdr.Snapshot {
			if rec.seq > lastSeq {
				break
			}
		} else if pos.IsZero() || rec.hdr.Begin.Compare(pos) >= 0 {
			break
		}
		if err := b.Delete(undoKey(rec.seq, rec.sub), nil); err != nil {
			return err
		}
	}
	if err := b.Set(metaVersion, binary.BigEndian.AppendUint64(nil, version), nil); err != nil {
		return err
	}
	return b.Commit(pebble.NoSync)
}

// metaVersion holds the version of the last checkpoint saved.
var metaVersion = []byte{prefixMeta, 'v'}

func (s *Store) version() (uint64, bool, error) {
	v, c, err := s.db.Get(metaVersion)
	if errors.Is(err, pebble.ErrNotFound) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	defer c.Close()
	if len(v) != 8 {
		return 0, false, errors.New("rowimage: the store's checkpoint version is corrupt")
	}
	return binary.BigEndian.Uint64(v), true, nil
}

func (s *Store) empty() (bool, error) {
	it, err := s.db.NewIter(nil)
	if err != nil {
		return false, err
	}
	defer it.Close()
	return !it.First(), it.Error()
}

// clear empties the store.
func (s *Store) clear() error {
	if err := s.db.DeleteRange([]byte{0}, []byte{0xff}, pebble.Sync); err != nil {
		return fmt.Errorf("rowimage: emptying the row image store: %w", err)
	}
	s.haveLast = false
	return nil
}

// loadLast reads the newest undo record's key.
func (s *Store) loadLast() error {
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: []byte{prefixUndo}, UpperBound: []byte{prefixUndo + 1}})
	if err != nil {
		return err
	}
	defer it.Close()
	s.haveLast = false
	if it.Last() {
		k := it.Key()
		if len(k) != 17 {
			return errors.New("rowimage: an undo key is corrupt")
		}
		s.lastSeq, s.lastSub, s.haveLast = binary.BigEndian.Uint64(k[1:]), binary.BigEndian.Uint64(k[9:]), true
	}
	return it.Error()
}
