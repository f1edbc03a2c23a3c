package join

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"slices"
	"sort"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"
)

// Side is one of the join's two streams.
type Side uint8

// The two sides.
const (
	Left  Side = 0
	Right Side = 1
)

func (s Side) String() string {
	if s == Left {
		return "left"
	}
	return "right"
}

func (s Side) other() Side { return 1 - s }

// Row is a row given to Operator.Add.
type Row struct {
	// Key is the join key as AppendKeyValue encodes it, one element per key
	// column; nil when a key column is NULL (the row joins nothing).
	Key []byte
	// Time is the event time in microseconds since the Unix epoch.
	Time int64
	// ID identifies the row for Retract; rows with equal IDs are the same
	// source row.
	ID []byte
	// Data is the payload, stored and handed back in outputs unchanged.
	Data []byte
}

// Output is one result of the join: a joined pair, or a row of an outer
// side with nil for the other side. Its slices are valid only during the
// callback that receives it.
type Output struct {
	// Key is the encoded join key (nil for a row whose key is NULL).
	Key         []byte
	Left, Right *Entry
}

// OperatorConfig configures an Operator.
type OperatorConfig struct {
	// Type is the join type (default inner).
	Type Type
	// Before and After bound the join: left time l joins right time r when
	// l - Before <= r <= l + After. Before + After must not be negative.
	Before, After time.Duration
	// Lateness: a row older than the watermark minus Lateness is late.
	Lateness time.Duration
	// Fingerprint describes what the state depends on (tables, keys, time
	// sources); an existing state with another fingerprint is refused.
	Fingerprint string
	// OnLate, when set, receives each late row (a dead-letter hook); late
	// rows are counted and otherwise dropped.
	OnLate func(Side, *Row) error
	// CacheBytes is the size of Pebble's block cache (default 64 MiB).
	CacheBytes int64
	// Logger receives Pebble's messages (default slog.Default()).
	Logger *slog.Logger
}

// Operator is an event-time interval join whose state lives in Pebble.
//
// Add, Retract and Advance change the state in a pending batch, which
// reads see; Commit makes the pending changes durable at once, Discard
// drops them. Outputs are handed to a callback as they are found, in a
// deterministic order: for Add, the other side's rows of the key in event
// time order (rows of one time in the order they were added); for
// Advance, the left side's expired rows and then the right side's, each in
// (join key, event time) order (rows of one key and time in the order they
// were added). An Operator is not safe for concurrent use.
//
// Design: each side has two keyspaces, (key, time) → entries, which Add
// probes with one range read, and the time index (time, key) → count,
// which Advance walks from the side's horizon (everything before it is
// already evicted, persisted in the meta) to the new horizon: eviction
// reads only the index entries it removes, and starts past the tombstones
// of earlier evictions, so it never walks them again.
//
// Appending a row is two blind writes, Pebble merge operands (the entries
// value is the concatenation of its operands, the index value their sum):
// no read of the row's own keys. Writes go to three batches committed as
// one: b, indexed, for the changes reads must see (rows, matched flags);
// ev for eviction's deletes, which no read of the same batch needs (it is
// folded into b should a read follow before the commit); and out for the
// caller's own keys (the sink's outbox and meta). Commit copies them into
// one batch in key order (sortedRecords).
type Operator struct {
	cfg      OperatorConfig
	lo, hi   int64 // right.time - left.time must lie in [lo, hi] (µs)
	lateness int64
	db       *pebble.DB
	b        *pebble.Batch // indexed: rows and flags
	ev       *pebble.Batch // eviction's deletes
	out      *pebble.Batch // the caller's keys

	committed, cur opMeta
	pend           pending
	stats          opCounters

	kbuf, kbuf2, vbuf, lbuf, ubuf []byte
	ents                          []Entry
	rewrites                      []rewrite
	newEntry                      Entry
	expired                       expiredKeys
	sorted                        sortedRecords
}

// sortedRecords copies the records of several batches into one in user-key
// order. Pebble applies a batch to its memtable skiplist record by record
// with one inserter, which starts each search from where the last insert
// landed: records in key order cost a few comparisons each instead of a
// search from the top of a large skiplist (appends interleave an entries
// key at a random place with a time-index key at the end). The order of
// one key's records is kept (ties broken by position), so the batch means
// the same; a range deletion, whose effect depends on its place among
// point records, keeps the batches' order as given, and so does a batch
// too large for the memtable (Pebble sorts that one itself).
type sortedRecords struct {
	recs  []record
	order []recordRef
}

type record struct {
	kind       pebble.InternalKeyKind
	key, value []byte
}

// recordRef is what the sort moves: the record's index and its key's first
// eight bytes, which decide most comparisons without touching the key.
type recordRef struct {
	prefix uint64
	i      int32
}

func applyInOrder(dst *pebble.Batch, parts []*pebble.Batch) error {
	for _, part := range parts {
		if err := dst.Apply(part, nil); err != nil {
			return err
		}
	}
	return nil
}

// skiplistNode is about what a record costs in a Pebble memtable beside its
// key and value (a node with a full tower, as Pebble counts it to decide
// whether a batch is too large for the memtable).
const skiplistNode = 200

func keyPrefix(k []byte) uint64 {
	if len(k) >= 8 {
		return binary.BigEndian.Uint64(k)
	}
	var b [8]byte
	copy(b[:], k)
	return binary.BigEndian.Uint64(b[:])
}

func (s *sortedRecords) apply(dst *pebble.Batch, parts ...*pebble.Batch) error {
	n, size := 0, 0
	for _, part := range parts {
		n, size = n+int(part.Count()), size+len(part.Repr())
	}
	if size+n*skiplistNode >= stateMemTable/2 {
		// Pebble queues a batch this large as a flushable batch of its own,
		// which it sorts itself, instead of inserting it into the memtable.
		return applyInOrder(dst, parts)
	}
	s.recs, s.order = s.recs[:0], s.order[:0]
	inOrder := false
	for _, part := range parts {
		r := part.Reader()
		for {
			kind, k, v, ok, err := r.Next()
			if err != nil {
				return fmt.Errorf("join: reading a pending batch: %w", err)
			}
			if !ok {
				break
			}
			switch kind {
			case pebble.InternalKeyKindSet, pebble.InternalKeyKindMerge, pebble.InternalKeyKindDelete:
			default:
				inOrder = true
			}
			s.order = append(s.order, recordRef{prefix: keyPrefix(k), i: int32(len(s.recs))})
			s.recs = append(s.recs, record{kind: kind, key: k, value: v})
		}
	}
	if inOrder {
		clear(s.recs)
		return applyInOrder(dst, parts)
	}
	slices.SortFunc(s.order, func(a, b recordRef) int {
		if a.prefix != b.prefix {
			if a.prefix < b.prefix {
				return -1
			}
			return 1
		}
		if c := bytes.Compare(s.recs[a.i].key, s.recs[b.i].key); c != 0 {
			return c
		}
		return int(a.i - b.i)
	})
	for _, ref := range s.order {
		r := &s.recs[ref.i]
		var err error
		switch r.kind {
		case pebble.InternalKeyKindSet:
			err = dst.Set(r.key, r.value, nil)
		case pebble.InternalKeyKindMerge:
			err = dst.Merge(r.key, r.value, nil)
		case pebble.InternalKeyKindDelete:
			err = dst.Delete(r.key, nil)
		}
		if err != nil {
			return err
		}
	}
	clear(s.recs) // drop the references into the batches
	return nil
}

// expiredKeys collects the entries keys an eviction pass removes from an
// outer side, to read them in key order.
type expiredKeys struct {
	buf   []byte
	spans [][2]int
}

func (e *expiredKeys) reset() { e.buf, e.spans = e.buf[:0], e.spans[:0] }

func (e *expiredKeys) add(k []byte) {
	e.spans = append(e.spans, [2]int{len(e.buf), len(e.buf) + len(k)})
	e.buf = append(e.buf, k...)
}

func (e *expiredKeys) key(i int) []byte { return e.buf[e.spans[i][0]:e.spans[i][1]] }

// sort.Interface, by key.
func (e *expiredKeys) Len() int           { return len(e.spans) }
func (e *expiredKeys) Less(i, j int) bool { return bytes.Compare(e.key(i), e.key(j)) < 0 }
func (e *expiredKeys) Swap(i, j int)      { e.spans[i], e.spans[j] = e.spans[j], e.spans[i] }

// opMeta is the operator's persisted state besides the rows.
type opMeta struct {
	Version     int    `json:"version"`
	Fingerprint string `json:"fingerprint"`
	Type        Type   `json:"type"`
	// Watermark is the last watermark (µs; math.MinInt64 before the first).
	Watermark int64 `json:"watermark"`
	// Horizon per side: every row with an earlier time has been evicted,
	// and the time index holds nothing before it.
	Horizon [2]int64 `json:"horizon"`
	// Rows and Bytes per side (each row's keys in both keyspaces, its entry
	// and index value, as written, before compression).
	Rows  [2]int64 `json:"rows"`
	Bytes [2]int64 `json:"bytes"`
}

const opMetaVersion = 1

// pending counts what the uncommitted batch did, published at Commit.
type pending struct {
	evicted, late, nullKey, joined, unmatched, evictions uint64
	evictTime                                            time.Duration
}

type opCounters struct {
	rows, bytes                                          [2]atomic.Int64
	watermark                                            atomic.Int64
	evicted, late, nullKey, joined, unmatched, evictions atomic.Uint64
	evictNanos                                           atomic.Int64
}

type rewrite struct {
	key, value []byte
}

// OpenOperator opens (or creates) the state in dir.
func OpenOperator(dir string, cfg OperatorConfig) (*Operator, error) {
	if cfg.Type == "" {
		cfg.Type = Inner
	}
	if cfg.Before+cfg.After < 0 {
		return nil, fmt.Errorf("join: before %s + after %s is negative: no row could ever join", cfg.Before, cfg.After)
	}
	if cfg.Lateness < 0 {
		return nil, fmt.Errorf("join: lateness %s is negative", cfg.Lateness)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.CacheBytes <= 0 {
		cfg.CacheBytes = 64 << 20
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("join: state directory: %w", err)
	}
	db, err := pebble.Open(dir, stateOptions(cfg.Logger, cfg.CacheBytes))
	if err != nil {
		return nil, fmt.Errorf("join: opening the state in %s: %w (is another sluice process using it?)", dir, err)
	}
	o := &Operator{
		cfg: cfg, db: db,
		lo: -cfg.Before.Microseconds(), hi: cfg.After.Microseconds(), lateness: cfg.Lateness.Microseconds(),
	}
	if err := o.loadMeta(dir); err != nil {
		db.Close()
		return nil, err
	}
	o.newBatches()
	o.publish()
	return o, nil
}

// stateMemTable is the size of the state's memtable.
const stateMemTable = 64 << 20

// stateOptions are the Pebble options of a join's state. No bloom filters:
// Pebble consults them only for point reads and prefix seeks, and the
// state is read by ranges (a key's time range, the time index) only; they
// cost every flush and compaction and served nothing.
func stateOptions(log *slog.Logger, cacheBytes int64) *pebble.Options {
	return &pebble.Options{
		FormatMajorVersion: pebble.FormatNewest,
		CacheSize:          cacheBytes,
		MemTableSize:       stateMemTable,
		Logger:             pebbleLogger{log},
		Merger:             stateMerger,
	}
}

func (o *Operator) newBatches() {
	o.b, o.ev, o.out = o.db.NewIndexedBatch(), o.db.NewBatch(), o.db.NewBatch()
}

func (o *Operator) closeBatches() {
	o.b.Close()
	o.ev.Close()
	o.out.Close()
}

// readable folds pending eviction deletes into the indexed batch, so that
// reads see them (only when a read follows an Advance before a Commit).
func (o *Operator) readable() error {
	if o.ev.Empty() {
		return nil
	}
	if err := o.b.Apply(o.ev, nil); err != nil {
		return err
	}
	o.ev.Reset()
	return nil
}

func (o *Operator) loadMeta(dir string) error {
	v, closer, err := o.db.Get(keyOperatorMeta)
	if errors.Is(err, pebble.ErrNotFound) {
		o.cur = opMeta{Version: opMetaVersion, Fingerprint: o.cfg.Fingerprint, Type: o.cfg.Type,
			Watermark: math.MinInt64, Horizon: [2]int64{math.MinInt64, math.MinInt64}}
		o.committed = o.cur
		return nil
	}
	if err != nil {
		return fmt.Errorf("join: reading the state in %s: %w", dir, err)
	}
	m, err := decodeOpMeta(v)
	closer.Close()
	if err != nil {
		return fmt.Errorf("join: state in %s: %w", dir, err)
	}
	if m.Fingerprint != o.cfg.Fingerprint || m.Type != o.cfg.Type {
		return fmt.Errorf("join: the state in %s was written for another join (type %s, %s), not this one (type %s, %s): its rows cannot be reused; remove the directory to start the join with empty state, or restore the join's former config",
			dir, m.Type, m.Fingerprint, o.cfg.Type, o.cfg.Fingerprint)
	}
	o.cur, o.committed = m, m
	return nil
}

func decodeOpMeta(b []byte) (opMeta, error) {
	var m opMeta
	if err := json.Unmarshal(b, &m); err != nil {
		return m, corrupt("operator meta: %v", err)
	}
	if m.Version != opMetaVersion {
		return m, corrupt("operator meta has version %d; this sluice reads version %d", m.Version, opMetaVersion)
	}
	for s := range 2 {
		if m.Rows[s] < 0 || m.Bytes[s] < 0 {
			return m, corrupt("operator meta: negative row or byte count")
		}
	}
	return m, nil
}

// Close closes the state, dropping uncommitted changes.
func (o *Operator) Close() error {
	if o.db == nil {
		return nil
	}
	o.closeBatches()
	err := o.db.Close()
	o.db = nil
	return err
}

// Watermark returns the last watermark given to Advance, in microseconds
// (math.MinInt64 before the first).
func (o *Operator) Watermark() int64 { return o.cur.Watermark }

// accept is the oldest event time that is not late.
func (o *Operator) accept() int64 { return satAdd(o.cur.Watermark, -o.lateness) }

// horizon returns, for an acceptance time a, the time before which a
// row of side s can no longer join any row still to come (times >= a).
func (o *Operator) horizon(s Side, a int64) int64 {
	if s == Left {
		return satAdd(a, -o.hi) // l + hi >= r >= a
	}
	return satAdd(a, o.lo) // r - lo >= l >= a
}

// Add adds a row to side s: a late row goes to OnLate; otherwise the row
// is joined with the other side's rows of its key within the bounds (each
// pair goes to emit) and kept until the watermark passes it.
func (o *Operator) Add(s Side, r *Row, emit func(*Output) error) error {
	if err := o.readable(); err != nil {
		return err
	}
	if r.Time < o.accept() {
		o.pend.late++
		if o.cfg.OnLate != nil {
			return o.cfg.OnLate(s, r)
		}
		return nil
	}
	o.newEntry = Entry{Time: r.Time, ID: r.ID, Data: r.Data}
	if r.Key == nil {
		o.pend.nullKey++
		if o.cfg.Type.outer(s) {
			return o.emitOne(s, nil, &o.newEntry, emit)
		}
		return nil
	}
	matched, err := o.probe(s, r, emit)
	if err != nil {
		return err
	}
	o.newEntry.Matched = matched
	if r.Time < o.cur.Horizon[s] {
		// Already past its side's horizon (possible when before or after
		// is negative): nothing to come can join it.
		if !matched && o.cfg.Type.outer(s) {
			return o.emitOne(s, r.Key, &o.newEntry, emit)
		}
		return nil
	}
	return o.store(s, r, matched)
}

// probe joins r with the other side's rows and marks them matched.
func (o *Operator) probe(s Side, r *Row, emit func(*Output) error) (bool, error) {
	os := s.other()
	from, to := satAdd(r.Time, o.lo), satAdd(r.Time, o.hi)
	if s == Right {
		from, to = satAdd(r.Time, -o.hi), satAdd(r.Time, -o.lo)
	}
	o.lbuf = entriesKey(o.lbuf[:0], os, r.Key, from)
	o.ubuf = entriesKey(o.ubuf[:0], os, r.Key, to)
	o.ubuf = append(o.ubuf, 0) // inclusive of to
	it, err := o.b.NewIter(&pebble.IterOptions{LowerBound: o.lbuf, UpperBound: o.ubuf})
	if err != nil {
		return false, err
	}
	track := o.cfg.Type.outer(os)
	o.rewrites = o.rewrites[:0]
	matched := false
	var out Output
	out.Key = r.Key
	for ok := it.First(); ok; ok = it.Next() {
		k := it.Key()
		t := readTime(k[len(k)-8:])
		v, err := it.ValueAndErr()
		if err != nil {
			it.Close()
			return false, err
		}
		o.ents, err = decodeEntries(o.ents, t, v)
		if err != nil {
			it.Close()
			return false, fmt.Errorf("%w (key %x)", err, k)
		}
		changed := false
		for i := range o.ents {
			e := &o.ents[i]
			if s == Left {
				out.Left, out.Right = &o.newEntry, e
			} else {
				out.Left, out.Right = e, &o.newEntry
			}
			matched = true
			o.pend.joined++
			if err := emit(&out); err != nil {
				it.Close()
				return false, err
			}
			if track && !e.Matched {
				e.Matched, changed = true, true
			}
		}
		if changed {
			o.rewrites = append(o.rewrites, rewrite{
				key:   append([]byte(nil), k...),
				value: encodeEntries(make([]byte, 0, len(v)), o.ents),
			})
		}
	}
	if err := it.Close(); err != nil {
		return false, err
	}
	for _, rw := range o.rewrites {
		// Same size: the flag byte changed in place; the index is unchanged.
		if err := o.b.Set(rw.key, rw.value, nil); err != nil {
			return false, err
		}
	}
	return matched, nil
}

// store appends r to its (key, time) entries and counts it in the index,
// with two merge operands (no read).
func (o *Operator) store(s Side, r *Row, matched bool) error {
	o.kbuf = entriesKey(o.kbuf[:0], s, r.Key, r.Time)
	o.vbuf = appendEntry(append(o.vbuf[:0], entriesVersion), matched, r.ID, r.Data)
	if err := o.b.Merge(o.kbuf, o.vbuf, nil); err != nil {
		return err
	}
	o.kbuf2 = indexKey(o.kbuf2[:0], s, r.Time, r.Key)
	var iv [20]byte
	if err := o.b.Merge(o.kbuf2, appendIndexValue(iv[:0], 1, len(o.vbuf)-1), nil); err != nil {
		return err
	}
	o.cur.Rows[s]++
	o.cur.Bytes[s] += rowBytes(len(o.kbuf)) + int64(len(o.vbuf)-1)
	return nil
}

// rowBytes is what a row adds to the state besides its entry: its entries
// key and time-index key (the same length), and about 3 bytes of index
// value and version.
func rowBytes(entriesKeyLen int) int64 { return int64(2*entriesKeyLen + 3) }

// Retract removes the rows of side s with join key key and identity id
// from the state (a delete with events.deletes: retract). Rows already
// evicted are gone already. It returns the number of rows removed.
func (o *Operator) Retract(s Side, key, id []byte) (int, error) {
	if key == nil {
		return 0, nil
	}
	if err := o.readable(); err != nil {
		return 0, err
	}
	o.lbuf = append(append(o.lbuf[:0], nsEntries, byte(s)), key...)
	o.ubuf = prefixEnd(append(o.ubuf[:0], o.lbuf...))
	it, err := o.b.NewIter(&pebble.IterOptions{LowerBound: o.lbuf, UpperBound: o.ubuf})
	if err != nil {
		return 0, err
	}
	type change struct {
		key     []byte
		t       int64
		value   []byte // nil: delete
		count   int    // entries left
		removed int64  // bytes of the entries removed
	}
	var changes []change
	removed := 0
	for ok := it.First(); ok; ok = it.Next() {
		k := it.Key()
		if len(k) != len(o.lbuf)+8 {
			continue // cannot happen: keys are prefix-free
		}
		t := readTime(k[len(k)-8:])
		v, err := it.ValueAndErr()
		if err != nil {
			it.Close()
			return 0, err
		}
		o.ents, err = decodeEntries(o.ents, t, v)
		if err != nil {
			it.Close()
			return 0, fmt.Errorf("%w (key %x)", err, k)
		}
		keep := o.ents[:0]
		c := change{key: append([]byte(nil), k...), t: t}
		for _, e := range o.ents {
			if !bytes.Equal(e.ID, id) {
				keep = append(keep, e)
				continue
			}
			c.removed += rowBytes(len(k)) + int64(len(appendEntry(nil, e.Matched, e.ID, e.Data)))
		}
		if len(keep) == len(o.ents) {
			continue
		}
		removed += len(o.ents) - len(keep)
		c.count = len(keep)
		if len(keep) > 0 {
			c.value = encodeEntries(nil, keep)
		}
		changes = append(changes, c)
	}
	if err := it.Close(); err != nil {
		return 0, err
	}
	for _, c := range changes {
		o.kbuf2 = indexKey(o.kbuf2[:0], s, c.t, key)
		o.cur.Bytes[s] -= c.removed
		if c.value == nil {
			if err := o.b.Delete(c.key, nil); err != nil {
				return 0, err
			}
			if err := o.b.Delete(o.kbuf2, nil); err != nil {
				return 0, err
			}
			continue
		}
		if err := o.b.Set(c.key, c.value, nil); err != nil {
			return 0, err
		}
		if err := o.b.Set(o.kbuf2, appendIndexValue(nil, c.count, len(c.value)-1), nil); err != nil {
			return 0, err
		}
	}
	o.cur.Rows[s] -= int64(removed)
	o.cur.Bytes[s] = max(o.cur.Bytes[s], 0)
	return removed, nil
}

// Advance moves the watermark to w (microseconds; a w at or below the
// current watermark does nothing) and evicts every row that can no longer
// join: rows of outer sides that never joined go to emit with nil for the
// other side, the left side's first, each side's in (join key, event
// time) order. It returns the number of rows evicted.
func (o *Operator) Advance(w int64, emit func(*Output) error) (int, error) {
	if w <= o.cur.Watermark {
		return 0, nil
	}
	start := time.Now()
	o.cur.Watermark = w
	a := o.accept()
	n := 0
	for _, s := range []Side{Left, Right} {
		k, err := o.evict(s, o.horizon(s, a), emit)
		if err != nil {
			return n, err
		}
		n += k
	}
	o.pend.evicted += uint64(n)
	o.pend.evictions++
	o.pend.evictTime += time.Since(start)
	return n, nil
}

// evict removes side s's rows older than h: it walks the time index from
// the side's horizon to h and deletes each entry and its index key. The
// next pass starts at h, past these tombstones. A pass of more than
// rangeDeleteFrom index keys removes them with one range deletion instead
// (fewer tombstones to commit; but range deletions are kept few, since
// each one makes the next iterators over the memtable slower).
func (o *Operator) evict(s Side, h int64, emit func(*Output) error) (int, error) {
	from := o.cur.Horizon[s]
	if h <= from {
		return 0, nil
	}
	o.lbuf = append(o.lbuf[:0], nsIndex, byte(s))
	if from != math.MinInt64 {
		o.lbuf = appendTime(o.lbuf, from)
	}
	o.ubuf = appendTime(append(o.ubuf[:0], nsIndex, byte(s)), h)
	it, err := o.b.NewIter(&pebble.IterOptions{LowerBound: o.lbuf, UpperBound: o.ubuf})
	if err != nil {
		return 0, err
	}
	outer := o.cfg.Type.outer(s)
	o.expired.reset()
	n, seen := 0, 0
	var rows, size int64
	for ok := it.First(); ok; ok = it.Next() {
		ik := it.Key()
		t, key, err := splitIndexKey(ik)
		if err != nil {
			it.Close()
			return n, err
		}
		v, err := it.ValueAndErr()
		if err != nil {
			it.Close()
			return n, err
		}
		count, esize, err := decodeIndexValue(v)
		if err != nil {
			it.Close()
			return n, fmt.Errorf("%w (key %x)", err, ik)
		}
		o.kbuf = entriesKey(o.kbuf[:0], s, key, t)
		if outer {
			o.expired.add(o.kbuf)
		}
		if err := o.ev.Delete(o.kbuf, nil); err != nil {
			it.Close()
			return n, err
		}
		if seen < rangeDeleteFrom {
			if err := o.ev.Delete(ik, nil); err != nil {
				it.Close()
				return n, err
			}
		}
		seen++
		n += count
		rows += int64(count)
		size += int64(count)*rowBytes(len(o.kbuf)) + int64(esize)
	}
	if err := it.Close(); err != nil {
		return n, err
	}
	if seen > rangeDeleteFrom {
		if err := o.ev.DeleteRange(o.lbuf, o.ubuf, nil); err != nil {
			return n, err
		}
	}
	if outer && o.expired.Len() > 0 {
		if err := o.emitExpired(s, emit); err != nil {
			return n, err
		}
	}
	o.cur.Horizon[s] = h
	o.cur.Rows[s] = max(o.cur.Rows[s]-rows, 0)
	o.cur.Bytes[s] = max(o.cur.Bytes[s]-size, 0)
	return n, nil
}

// rangeDeleteFrom is the number of index keys of an eviction pass beyond
// which the pass deletes its index range at once.
const rangeDeleteFrom = 4096

// emitExpired emits the rows of the collected entries keys of side s that
// never joined, reading the keys in order (one forward sweep of the side's
// entries, whatever their number).
func (o *Operator) emitExpired(s Side, emit func(*Output) error) error {
	sort.Sort(&o.expired)
	first, last := o.expired.key(0), o.expired.key(o.expired.Len()-1)
	o.lbuf = append(o.lbuf[:0], first...)
	o.ubuf = append(append(o.ubuf[:0], last...), 0)
	it, err := o.b.NewIter(&pebble.IterOptions{LowerBound: o.lbuf, UpperBound: o.ubuf})
	if err != nil {
		return err
	}
	defer it.Close()
	for i := range o.expired.Len() {
		k := o.expired.key(i)
		if !it.SeekGE(k) || !bytes.Equal(it.Key(), k) {
			if err := it.Error(); err != nil {
				return err
			}
			return corrupt("the time index names %x on the %s side, but it has no entries", k, s)
		}
		key, t, err := splitEntriesKey(k)
		if err != nil {
			return err
		}
		v, err := it.ValueAndErr()
		if err != nil {
			return err
		}
		if o.ents, err = decodeEntries(o.ents, t, v); err != nil {
			return fmt.Errorf("%w (key %x)", err, k)
		}
		for j := range o.ents {
			if o.ents[j].Matched {
				continue
			}
			if err := o.emitOne(s, key, &o.ents[j], emit); err != nil {
				return err
			}
		}
	}
	return nil
}

func (o *Operator) emitOne(s Side, key []byte, e *Entry, emit func(*Output) error) error {
	out := Output{Key: key}
	if s == Left {
		out.Left = e
	} else {
		out.Right = e
	}
	o.pend.unmatched++
	return emit(&out)
}

// Commit makes the pending changes durable (with sync, on disk before it
// returns; without, in the write-ahead log's buffer), all at once.
func (o *Operator) Commit(sync bool) error {
	meta, err := json.Marshal(&o.cur)
	if err != nil {
		return err
	}
	// One batch: the indexed batch's records, then eviction's deletes (which
	// come after the rows they remove), then the caller's keys and the meta,
	// written in key order (see sortedRecords).
	final := o.db.NewBatchWithSize(len(o.b.Repr()) + len(o.ev.Repr()) + len(o.out.Repr()) + len(meta) + 64)
	defer final.Close()
	if err := o.sorted.apply(final, o.b, o.ev, o.out); err != nil {
		return err
	}
	if err := final.Set(keyOperatorMeta, meta, nil); err != nil {
		return err
	}
	opt := pebble.NoSync
	if sync {
		opt = pebble.Sync
	}
	if err := final.Commit(opt); err != nil {
		return fmt.Errorf("join: committing the state: %w", err)
	}
	o.closeBatches()
	o.newBatches()
	o.committed = o.cur
	st := &o.stats
	p := o.pend
	o.pend = pending{}
	st.evicted.Add(p.evicted)
	st.late.Add(p.late)
	st.nullKey.Add(p.nullKey)
	st.joined.Add(p.joined)
	st.unmatched.Add(p.unmatched)
	st.evictions.Add(p.evictions)
	st.evictNanos.Add(int64(p.evictTime))
	o.publish()
	return nil
}

// Discard drops the pending changes.
func (o *Operator) Discard() {
	o.closeBatches()
	o.newBatches()
	o.cur = o.committed
	o.pend = pending{}
}

func (o *Operator) publish() {
	for s := range 2 {
		o.stats.rows[s].Store(o.committed.Rows[s])
		o.stats.bytes[s].Store(o.committed.Bytes[s])
	}
	o.stats.watermark.Store(o.committed.Watermark)
}

// Stats are the operator's gauges (as of the last commit) and counters
// (since it was opened, of committed work).
type Stats struct {
	// Rows and Bytes held in the state per side (Left, Right): keys and
	// values of both keyspaces.
	Rows, Bytes [2]int64
	// Watermark is the last committed watermark (zero before the first).
	Watermark time.Time
	// EvictedRows counts rows evicted; Evictions the Advance calls and
	// EvictionTime the time they took.
	EvictedRows, Evictions uint64
	EvictionTime           time.Duration
	// LateRows counts rows older than the watermark minus the lateness.
	LateRows uint64
	// NullKeyRows counts rows with a NULL key column (they join nothing).
	NullKeyRows uint64
	// Joined counts joined pairs; Unmatched rows emitted with nulls.
	Joined, Unmatched uint64

	// Filled by Sink.Stats only:

	// UntimedRows counts rows without an event time (a NULL time column,
	// or a snapshot row with time: commit).
	UntimedRows uint64
	// Outputs counts joined records delivered to the sink, DeadLetters
	// records delivered to the dead-letter sink.
	Outputs, DeadLetters uint64
	// Consumed is the sequence number of the last input message consumed.
	Consumed uint64
}

// Stats returns the operator's figures; safe to call concurrently with
// everything else.
func (o *Operator) Stats() Stats {
	st := &o.stats
	s := Stats{
		EvictedRows: st.evicted.Load(), Evictions: st.evictions.Load(),
		EvictionTime: time.Duration(st.evictNanos.Load()),
		LateRows:     st.late.Load(), NullKeyRows: st.nullKey.Load(),
		Joined: st.joined.Load(), Unmatched: st.unmatched.Load(),
	}
	for i := range 2 {
		s.Rows[i], s.Bytes[i] = st.rows[i].Load(), st.bytes[i].Load()
	}
	if w := st.watermark.Load(); w != math.MinInt64 {
		s.Watermark = time.UnixMicro(w).UTC()
	}
	return s
}

// satAdd is a + b clamped to the int64 range.
func satAdd(a, b int64) int64 {
	c := a + b
	if b > 0 && c < a {
		return math.MaxInt64
	}
	if b < 0 && c > a {
		return math.MinInt64
	}
	return c
}

// prefixEnd returns the smallest key above every key with prefix p
// (p modified in place).
func prefixEnd(p []byte) []byte {
	for i := len(p) - 1; i >= 0; i-- {
		if p[i] != 0xFF {
			p[i]++
			return p[:i+1]
		}
	}
	return nil
}

// pebbleLogger sends Pebble's messages to slog.
type pebbleLogger struct{ l *slog.Logger }

func (p pebbleLogger) Infof(format string, args ...any) {
	p.l.Debug("pebble: " + fmt.Sprintf(format, args...))
}

func (p pebbleLogger) Errorf(format string, args ...any) {
	p.l.Error("pebble: " + fmt.Sprintf(format, args...))
}

func (p pebbleLogger) Fatalf(format string, args ...any) {
	msg := "pebble: " + fmt.Sprintf(format, args...)
	p.l.Error(msg)
	panic(msg)
}

// stateMerger combines the merge operands of the state: an entries value
// is the concatenation of its operands' entries, an index value the sum of
// its operands' counts and sizes. Both are associative, so Pebble may
// combine any run of operands.
var stateMerger = &pebble.Merger{
	Name: "sluice.join.v1",
	Merge: func(key, value []byte) (pebble.ValueMerger, error) {
		if len(key) == 0 {
			return nil, corrupt("merge operand without a key")
		}
		switch key[0] {
		case nsEntries:
			m := &entriesMerger{}
			return m, m.MergeNewer(value)
		case nsIndex:
			m := &indexMerger{}
			return m, m.MergeNewer(value)
		}
		return nil, corrupt("merge operand for key %x, which is not a row or index key", key)
	},
}

// entriesMerger concatenates entries values, older first.
type entriesMerger struct {
	parts [][]byte // newest last, each without its version byte
	size  int
}

func (m *entriesMerger) check(v []byte) error {
	if len(v) == 0 || v[0] != entriesVersion {
		return corrupt("entries merge operand %x has no version %d", v, entriesVersion)
	}
	return nil
}

func (m *entriesMerger) MergeNewer(v []byte) error {
	if err := m.check(v); err != nil {
		return err
	}
	m.parts = append(m.parts, append([]byte(nil), v[1:]...))
	m.size += len(v) - 1
	return nil
}

func (m *entriesMerger) MergeOlder(v []byte) error {
	if err := m.check(v); err != nil {
		return err
	}
	m.parts = append(m.parts, nil)
	copy(m.parts[1:], m.parts)
	m.parts[0] = append([]byte(nil), v[1:]...)
	m.size += len(v) - 1
	return nil
}

func (m *entriesMerger) Finish(bool) ([]byte, io.Closer, error) {
	out := make([]byte, 1, 1+m.size)
	out[0] = entriesVersion
	for _, p := range m.parts {
		out = append(out, p...)
	}
	return out, nil, nil
}

// indexMerger sums index values.
type indexMerger struct{ count, size int }

func (m *indexMerger) MergeNewer(v []byte) error {
	c, s, err := decodeIndexValue(v)
	if err != nil {
		return err
	}
	m.count += c
	m.size += s
	return nil
}

func (m *indexMerger) MergeOlder(v []byte) error { return m.MergeNewer(v) }

func (m *indexMerger) Finish(bool) ([]byte, io.Closer, error) {
	return appendIndexValue(nil, m.count, m.size), nil, nil
}
