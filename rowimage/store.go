package rowimage

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"

	"github.com/sluice-cdc/sluice/binlog"
	"github.com/sluice-cdc/sluice/internal/keyenc"
	"github.com/sluice-cdc/sluice/position"
)

// ErrMissing is a partial image of a row the store has never seen whole
// (no snapshot of its table, a table added later, an insert logged without
// every column, or a row last seen before its table's columns changed).
var ErrMissing = errors.New("rowimage: a partial row image of a row the store does not hold")

// ErrNoKey is a partial before image of a table without a primary key.
// (MINIMAL and NOBLOB log every column of such a table in the before
// image, so it is not expected.)
var ErrNoKey = errors.New("rowimage: a partial before image of a table without a primary key")

// Store holds the last full image of every row of one source's captured
// tables. Fill is called by one goroutine; Sync, Trim and Stats may be
// called by another.
type Store struct {
	db  *pebble.DB
	log *slog.Logger
	// b is the chunk being applied (indexed: its reads see its writes).
	b       *pebble.Batch
	touched map[string]bool
	undo    []byte
	kbuf    []byte
	vbuf    []byte
	// lastSeq and lastSub are the newest undo record's key.
	lastSeq, lastSub uint64
	haveLast         bool

	// reselect, when set (fill_missing: reselect), reads a row the store
	// does not hold from the source.
	reselect Reselect

	completed  atomic.Int64
	reselected atomic.Int64
	// mu guards closed: Stats may run while the store closes.
	mu struct {
		sync.RWMutex
		closed bool
	}
}

// Stats are the store's counters.
type Stats struct {
	// Completed counts the changes with a partial image that were
	// completed from the store.
	Completed int64
	// Reselected counts the changes completed from the source's current
	// row (fill_missing: reselect), each marked (binlog.Change.Reselected).
	Reselected int64
	// DiskBytes is the store's size on disk.
	DiskBytes uint64
}

// cacheBytes is the store's block cache.
const cacheBytes = 64 << 20

// Open opens (or creates) the store in dir.
func Open(dir string, log *slog.Logger) (*Store, error) {
	if log == nil {
		log = slog.Default()
	}
	opts := &pebble.Options{
		FormatMajorVersion: pebble.FormatNewest,
		Logger:             pebbleLogger{log},
		CacheSize:          cacheBytes,
	}
	// Every read is a point read of one key: bloom filters spare the
	// levels that do not hold it.
	for i := range opts.Levels {
		opts.Levels[i].FilterPolicy = bloom.FilterPolicy(10)
	}
	db, err := pebble.Open(dir, opts)
	if err != nil {
		return nil, fmt.Errorf("rowimage: opening the row image store %s: %w", dir, err)
	}
	s := &Store{db: db, log: log, touched: map[string]bool{}}
	if err := s.loadLast(); err != nil {
		db.Close()
		return nil, err
	}
	return s, nil
}

// Close closes the store.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.closed {
		return nil
	}
	s.mu.closed = true
	return s.db.Close()
}

// Stats returns the store's counters (its size is 0 once it is closed).
func (s *Store) Stats() Stats {
	st := Stats{Completed: s.completed.Load(), Reselected: s.reselected.Load()}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if !s.mu.closed {
		st.DiskBytes = s.db.Metrics().DiskSpaceUsage()
	}
	return st
}

// Reselect reads the current row of t whose primary key is key's (a row
// aligned with t.Columns holding at least the primary key's columns) from
// the source; found is false when the source has no such row. The row
// returned is the caller's to keep.
type Reselect func(t *binlog.Table, key binlog.Row) (row binlog.Row, found bool, err error)

// SetReselect makes Fill complete a partial image of a row the store has
// never seen whole from the source's current row, read by r, instead of
// failing with ErrMissing (source.fill_missing: reselect). The columns so
// completed are listed in the change's Reselected: their values are the
// row's at the time of the read, not at the time of the change. Call it
// before the first Fill.
func (s *Store) SetReselect(r Reselect) { s.reselect = r }

// Sync makes every chunk applied so far durable.
func (s *Store) Sync() error {
	if err := s.db.LogData(nil, pebble.Sync); err != nil {
		return fmt.Errorf("rowimage: syncing the row image store: %w", err)
	}
	return nil
}

const (
	prefixMeta = 'm'
	prefixRow  = 'r'
	prefixUndo = 'u'
)

// fingerprint identifies a table's columns by their names: an image
// stored with other columns is not used. (Not by their kinds: a MariaDB
// JSON column is KindJSON in a snapshot and KindString in the binlog read
// with a schema history; see fillValue.)
func fingerprint(t *binlog.Table) uint32 {
	h := crc32.NewIEEE()
	for i := range t.Columns {
		h.Write([]byte(t.Columns[i].Name))
		h.Write([]byte{0})
	}
	return h.Sum32()
}

// fillValue is the stored value v for column c: bytes stored under one
// byte-carrying kind take the column's (a MariaDB JSON column read by a
// snapshot as KindJSON, by the binlog as KindString), so that a completed
// image is written as the binlog's own image of the column would be.
func fillValue(c *binlog.Column, v binlog.Value) binlog.Value {
	if v.Kind() != c.Kind && byteKind(v.Kind()) && byteKind(c.Kind) {
		return binlog.BytesValue(c.Kind, v.Bytes())
	}
	return v
}

// rowKey appends the store key of the row of t whose image is row; ok is
// false when a key column is absent or NULL in it.
func rowKey(dst []byte, t *binlog.Table, row binlog.Row) ([]byte, bool) {
	dst = append(dst, prefixRow)
	dst = append(dst, t.Schema...)
	dst = append(dst, 0)
	dst = append(dst, t.Name...)
	dst = append(dst, 0)
	for _, c := range t.PrimaryKey {
		if c >= len(row) {
			return dst, false
		}
		var ok bool
		if dst, ok = keyenc.AppendValue(dst, &t.Columns[c], row[c]); !ok {
			return dst, false
		}
	}
	return dst, true
}

// byteKind reports whether values of k carry bytes.
func byteKind(k binlog.Kind) bool {
	switch k {
	case binlog.KindString, binlog.KindBytes, binlog.KindDecimal, binlog.KindJSON, binlog.KindGeometry, binlog.KindVector:
		return true
	}
	return false
}

// appendImage encodes a full image: the table's fingerprint, then per
// column its kind and its number or its bytes.
func appendImage(dst []byte, fp uint32, row binlog.Row) []byte {
	dst = binary.BigEndian.AppendUint32(dst, fp)
	for _, v := range row {
		dst = append(dst, byte(v.Kind()))
		if byteKind(v.Kind()) {
			b := v.Bytes()
			dst = binary.AppendUvarint(dst, uint64(len(b)))
			dst = append(dst, b...)
		} else {
			dst = binary.AppendUvarint(dst, v.Uint())
		}
	}
	return dst
}

// decodeImage decodes an image of n columns; the values' bytes are copied
// (the caller's src may be Pebble's). ok is false for an image of other
// columns.
func decodeImage(src []byte, fp uint32, n int) (binlog.Row, bool, error) {
	if len(src) < 4 {
		return nil, false, errors.New("rowimage: a stored image is truncated")
	}
	if binary.BigEndian.Uint32(src) != fp {
		return nil, false, nil
	}
	buf := append([]byte(nil), src[4:]...)
	row := make(binlog.Row, 0, n)
	for len(buf) > 0 {
		k := binlog.Kind(buf[0])
		buf = buf[1:]
		x, w := binary.Uvarint(buf)
		if w <= 0 {
			return nil, false, errors.New("rowimage: a stored image is corrupt")
		}
		buf = buf[w:]
		if byteKind(k) {
			if x > uint64(len(buf)) {
				return nil, false, errors.New("rowimage: a stored image is corrupt")
			}
			b := buf[:x:x]
			if x == 0 {
				b = []byte{}
			}
			row = append(row, binlog.BytesValue(k, b))
			buf = buf[x:]
		} else {
			row = append(row, binlog.NumValue(k, x))
		}
	}
	if len(row) != n {
		return nil, false, nil
	}
	return row, true, nil
}

func partial(r binlog.Row) bool {
	for _, v := range r {
		if v.IsAbsent() {
			return true
		}
	}
	return false
}

// Where names a change for errors: its table, key and position.
type Where struct {
	Table string
	Key   string
	File  string
	Pos   uint32
}

// MissingError is ErrMissing (or ErrNoKey) for one change.
type MissingError struct {
	Where
	Reason string
	err    error
}

func (e *MissingError) Error() string {
	return fmt.Sprintf("row image of table %s, key %s, at %s:%d: %s", e.Table, e.Key, e.File, e.Pos, e.Reason)
}

func (e *MissingError) Unwrap() error { return e.err }

// keyText renders the primary key of row for errors (the key only: no
// other column's value is ever written).
func keyText(t *binlog.Table, row binlog.Row) string {
	s := "("
	for i, c := range t.PrimaryKey {
		if i > 0 {
			s += ","
		}
		if c < len(row) {
			s += t.Columns[c].Name + "=" + row[c].String()
		}
	}
	return s + ")"
}

// undo record: seq and sub (key), then JSON header length (uvarint), header, then
// entries: kind byte (0 absent before, 1 had a value), uvarint key
// length, key, [uvarint value length, value].
type undoHeader struct {
	Begin    position.Position `json:"begin"`
	Snapshot bool              `json:"snapshot,omitempty"`
}

// undoKey is the key of a chunk's undo record: its first message's
// sequence number and, for chunks with the same one (chunks without
// messages), a counter.
func undoKey(seq, sub uint64) []byte {
	return binary.BigEndian.AppendUint64(binary.BigEndian.AppendUint64([]byte{prefixUndo}, seq), sub)
}

// nextUndoKey is the key of the next chunk's undo record.
func (s *Store) nextUndoKey(seq uint64) []byte {
	if s.haveLast && seq == s.lastSeq {
		s.lastSub++
	} else {
		s.lastSeq, s.lastSub, s.haveLast = seq, 0, true
	}
	return undoKey(s.lastSeq, s.lastSub)
}

// Fill completes the partial images of t's changes from the store and
// applies every change to it, as one Pebble batch with the chunk's undo
// record under seq, the sequence number of the chunk's first message. A
// change it cannot complete is a *MissingError; nothing of the chunk is
// applied then.
func (s *Store) Fill(t *binlog.Txn, seq uint64) error {
	if len(t.Changes) == 0 {
		return nil
	}
	s.b = s.db.NewIndexedBatch()
	defer func() {
		if s.b != nil {
			s.b.Close()
			s.b = nil
		}
	}()
	clear(s.touched)
	hdr, err := json.Marshal(undoHeader{Begin: t.Begin, Snapshot: t.Snapshot})
	if err != nil {
		return err
	}
	s.undo = binary.AppendUvarint(s.undo[:0], uint64(len(hdr)))
	s.undo = append(s.undo, hdr...)
	completed, reselected := int64(0), int64(0)
	for i := range t.Changes {
		ch := &t.Changes[i]
		did, err := s.change(ch)
		if err != nil {
			return err
		}
		if did {
			completed++
		}
		if len(ch.Reselected) > 0 {
			reselected++
		}
	}
	if err := s.b.Set(s.nextUndoKey(seq), s.undo, nil); err != nil {
		return err
	}
	if err := s.b.Commit(pebble.NoSync); err != nil {
		return fmt.Errorf("rowimage: writing the row image store: %w", err)
	}
	s.completed.Add(completed)
	s.reselected.Add(reselected)
	return nil
}

// change completes and applies one change; did reports a completion.
func (s *Store) change(ch *binlog.Change) (did bool, err error) {
	t := ch.Table
	if t == nil || ch.Op == binlog.OpDDL {
		return false, nil
	}
	where := func(row binlog.Row) Where {
		return Where{Table: t.QualifiedName(), Key: keyText(t, row), File: ch.File, Pos: ch.Pos}
	}
	fp := fingerprint(t)
	n := len(t.Columns)

	var oldKey []byte
	if ch.Op == binlog.OpUpdate || ch.Op == binlog.OpDelete {
		if len(t.PrimaryKey) == 0 {
			if partial(ch.Before) {
				return false, &MissingError{Where: where(ch.Before), err: ErrNoKey,
					Reason: "the table has no primary key and the before image lacks columns, so it cannot be completed: run the server with binlog_row_image=FULL, or give the table a primary key"}
			}
		} else {
			k, ok := rowKey(s.kbuf[:0], t, ch.Before)
			if !ok {
				return false, &MissingError{Where: where(ch.Before), err: ErrMissing, Reason: "the before image lacks a primary key column"}
			}
			s.kbuf = k
			oldKey = append([]byte(nil), k...)
			if partial(ch.Before) {
				stored, ok, err := s.get(oldKey, fp, n)
				if err != nil {
					return false, err
				}
				reselected := false
				if !ok {
					if s.reselect == nil {
						return false, &MissingError{Where: where(ch.Before), err: ErrMissing,
							Reason: "the binlog carries a partial image (binlog_row_image MINIMAL or NOBLOB) of a row the row image store has never seen whole (its table was not snapshotted, or its columns changed since). Snapshot the table again (snapshot.mode: always, once), set source.fill_missing: reselect to complete such rows from the source's current row, or run the server with binlog_row_image=FULL"}
					}
					// The row as it is now: under its new key, for an
					// update that changed it.
					key := ch.Before
					if ch.Op == binlog.OpUpdate {
						key = make(binlog.Row, n)
						copy(key, ch.Before)
						for _, c := range t.PrimaryKey {
							if c < len(ch.After) && !ch.After[c].IsAbsent() {
								key[c] = ch.After[c]
							}
						}
					}
					if stored, err = s.reselectRow(t, key, where(key)); err != nil {
						return false, err
					}
					reselected = true
				}
				before := make(binlog.Row, n)
				copy(before, ch.Before)
				for i, v := range before {
					if v.IsAbsent() {
						before[i] = fillValue(&t.Columns[i], stored[i])
						if reselected {
							ch.Reselected = append(ch.Reselected, i)
						}
					}
				}
				ch.Before = before
				did = true
			}
		}
	}
	if ch.Op == binlog.OpUpdate && partial(ch.After) {
		after := make(binlog.Row, n)
		copy(after, ch.After)
		for i, v := range after {
			if v.IsAbsent() && i < len(ch.Before) {
				after[i] = ch.Before[i]
			}
		}
		ch.After = after
		did = true
	}
	if (ch.Op == binlog.OpInsert || ch.Op == binlog.OpRead) && partial(ch.After) {
		if s.reselect == nil || len(t.PrimaryKey) == 0 {
			return false, &MissingError{Where: where(ch.After), err: ErrMissing,
				Reason: "an inserted row's image lacks columns (with MINIMAL the binlog holds only the columns an INSERT names; the others took their defaults, which it does not carry): name every column in the INSERT, set source.fill_missing: reselect to complete such rows from the source's current row (tables with a primary key), or run the server with binlog_row_image=FULL"}
		}
		if _, ok := rowKey(s.kbuf[:0], t, ch.After); !ok {
			return false, &MissingError{Where: where(ch.After), err: ErrMissing, Reason: "the after image lacks a primary key column"}
		}
		row, err := s.reselectRow(t, ch.After, where(ch.After))
		if err != nil {
			return false, err
		}
		after := make(binlog.Row, n)
		copy(after, ch.After)
		for i, v := range after {
			if v.IsAbsent() {
				after[i] = fillValue(&t.Columns[i], row[i])
				ch.Reselected = append(ch.Reselected, i)
			}
		}
		ch.After = after
		did = true
	}
	if len(t.PrimaryKey) == 0 {
		return did, nil
	}
	switch ch.Op {
	case binlog.OpDelete:
		return did, s.del(oldKey)
	case binlog.OpUpdate, binlog.OpInsert, binlog.OpRead:
		k, ok := rowKey(s.kbuf[:0], t, ch.After)
		s.kbuf = k
		if !ok {
			return did, &MissingError{Where: where(ch.After), err: ErrMissing, Reason: "the after image lacks a primary key column"}
		}
		if oldKey != nil && string(oldKey) != string(k) {
			if err := s.del(oldKey); err != nil {
				return did, err
			}
		}
		s.vbuf = appendImage(s.vbuf[:0], fp, ch.After)
		return did, s.set(k, s.vbuf)
	}
	return did, nil
}

// reselectRow reads the current row of t under key's primary key from
// the source (fill_missing: reselect).
func (s *Store) reselectRow(t *binlog.Table, key binlog.Row, at Where) (binlog.Row, error) {
	row, found, err := s.reselect(t, key)
	if err != nil {
		return nil, &MissingError{Where: at, err: fmt.Errorf("%w: %w", ErrMissing, err),
			Reason: "reading the row from the source to complete its partial image (fill_missing: reselect) failed: " + err.Error()}
	}
	if !found {
		return nil, &MissingError{Where: at, err: ErrMissing,
			Reason: "the binlog carries a partial image (binlog_row_image MINIMAL or NOBLOB) of a row the row image store has never seen whole, and the source no longer has the row, so fill_missing: reselect cannot read it. Snapshot the table again (snapshot.mode: always, once), or run the server with binlog_row_image=FULL"}
	}
	if len(row) != len(t.Columns) {
		return nil, &MissingError{Where: at, err: ErrMissing,
			Reason: fmt.Sprintf("the row read from the source (fill_missing: reselect) has %d columns, the table %d", len(row), len(t.Columns))}
	}
	return row, nil
}

// get reads the stored image of key, and remembers the key's value for
// the undo record (so that the write that follows reads nothing again).
func (s *Store) get(key []byte, fp uint32, n int) (binlog.Row, bool, error) {
	v, c, err := s.b.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		s.rememberValue(key, nil, false)
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("rowimage: reading the row image store: %w", err)
	}
	defer c.Close()
	s.rememberValue(key, v, true)
	return decodeImage(v, fp, n)
}

// rememberValue adds key's value before the chunk (had: it has one) to
// the undo record, once per key and chunk.
func (s *Store) rememberValue(key, v []byte, had bool) {
	if s.touched[string(key)] {
		return
	}
	s.touched[string(key)] = true
	if !had {
		s.undo = append(s.undo, 0)
		s.undo = binary.AppendUvarint(s.undo, uint64(len(key)))
		s.undo = append(s.undo, key...)
		return
	}
	s.undo = append(s.undo, 1)
	s.undo = binary.AppendUvarint(s.undo, uint64(len(key)))
	s.undo = append(s.undo, key...)
	s.undo = binary.AppendUvarint(s.undo, uint64(len(v)))
	s.undo = append(s.undo, v...)
}

// remember adds key's value before the chunk to the undo record (once
// per key and chunk).
func (s *Store) remember(key []byte) error {
	if s.touched[string(key)] {
		return nil
	}
	v, c, err := s.b.Get(key)
	switch {
	case errors.Is(err, pebble.ErrNotFound):
		s.rememberValue(key, nil, false)
		return nil
	case err != nil:
		return fmt.Errorf("rowimage: reading the row image store: %w", err)
	}
	s.rememberValue(key, v, true)
	return c.Close()
}

func (s *Store) set(key, value []byte) error {
	if err := s.remember(key); err != nil {
		return err
	}
	return s.b.Set(key, value, nil)
}

func (s *Store) del(key []byte) error {
	if err := s.remember(key); err != nil {
		return err
	}
	return s.b.Delete(key, nil)
}

// pebbleLogger sends Pebble's log lines to slog.
type pebbleLogger struct{ log *slog.Logger }

func (l pebbleLogger) Infof(format string, args ...any) {
	l.log.Debug(fmt.Sprintf(format, args...), "component", "rowimage")
}

func (l pebbleLogger) Errorf(format string, args ...any) {
	l.log.Error(fmt.Sprintf(format, args...), "component", "rowimage")
}

func (l pebbleLogger) Fatalf(format string, args ...any) {
	l.log.Error(fmt.Sprintf(format, args...), "component", "rowimage")
	panic(fmt.Sprintf(format, args...))
}
