package join

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
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
// (event time, key) order. An Operator is not safe for concurrent use.
//
// Design: each side has two keyspaces, (key, time) → entries, which Add
// probes with one range read, and the time index (time, key) → count,
// which Advance walks from the side's horizon (everything before it is
// already evicted, persisted in the meta) to the new horizon: eviction
// reads only the index entries it removes, and the index range it leaves
// behind is removed with one range deletion, so tombstones of earlier
// evictions are never walked again.
type Operator struct {
	cfg      OperatorConfig
	lo, hi   int64 // right.time - left.time must lie in [lo, hi] (µs)
	lateness int64
	db       *pebble.DB
	b        *pebble.Batch

	committed, cur opMeta
	pend           pending
	stats          opCounters

	kbuf, kbuf2, vbuf, lbuf, ubuf []byte
	ents                          []Entry
	rewrites                      []rewrite
	newEntry                      Entry
}

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
	// Rows and Bytes per side (keys and values of both keyspaces).
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
	opts := &pebble.Options{
		FormatMajorVersion: pebble.FormatNewest,
		CacheSize:          cfg.CacheBytes,
		MemTableSize:       64 << 20,
		Logger:             pebbleLogger{cfg.Logger},
	}
	for i := range opts.Levels {
		opts.Levels[i].FilterPolicy = bloom.FilterPolicy(10)
	}
	db, err := pebble.Open(dir, opts)
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
	o.b = db.NewIndexedBatch()
	o.publish()
	return o, nil
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
	o.b.Close()
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

// store appends r to its (key, time) entries and counts it in the index.
func (o *Operator) store(s Side, r *Row, matched bool) error {
	o.kbuf = entriesKey(o.kbuf[:0], s, r.Key, r.Time)
	old, closer, err := o.b.Get(o.kbuf)
	count, oldLen := 0, 0
	switch {
	case errors.Is(err, pebble.ErrNotFound):
		o.vbuf = append(o.vbuf[:0], entriesVersion)
	case err != nil:
		return err
	default:
		o.ents, err = decodeEntries(o.ents, r.Time, old)
		if err != nil {
			closer.Close()
			return fmt.Errorf("%w (key %x)", err, o.kbuf)
		}
		count, oldLen = len(o.ents), len(old)
		o.vbuf = append(o.vbuf[:0], old...)
		closer.Close()
	}
	o.vbuf = appendEntry(o.vbuf, matched, r.ID, r.Data)
	if err := o.b.Set(o.kbuf, o.vbuf, nil); err != nil {
		return err
	}
	o.kbuf2 = indexKey(o.kbuf2[:0], s, r.Time, r.Key)
	var iv [20]byte
	val := appendIndexValue(iv[:0], count+1, len(o.vbuf))
	if err := o.b.Set(o.kbuf2, val, nil); err != nil {
		return err
	}
	if count == 0 {
		o.cur.Bytes[s] += int64(len(o.kbuf) + len(o.kbuf2) + len(val) + len(o.vbuf))
	} else {
		var ov [20]byte
		o.cur.Bytes[s] += int64(len(o.vbuf)-oldLen) + int64(len(val)-len(appendIndexValue(ov[:0], count, oldLen)))
	}
	o.cur.Rows[s]++
	return nil
}

// Retract removes the rows of side s with join key key and identity id
// from the state (a delete with events.deletes: retract). Rows already
// evicted are gone already. It returns the number of rows removed.
func (o *Operator) Retract(s Side, key, id []byte) (int, error) {
	if key == nil {
		return 0, nil
	}
	o.lbuf = append(append(o.lbuf[:0], nsEntries, byte(s)), key...)
	o.ubuf = prefixEnd(append(o.ubuf[:0], o.lbuf...))
	it, err := o.b.NewIter(&pebble.IterOptions{LowerBound: o.lbuf, UpperBound: o.ubuf})
	if err != nil {
		return 0, err
	}
	type change struct {
		key        []byte
		t          int64
		value      []byte // nil: delete
		count, was int    // entries after and before
		old        int    // size of the old value
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
		for _, e := range o.ents {
			if !bytes.Equal(e.ID, id) {
				keep = append(keep, e)
			}
		}
		if len(keep) == len(o.ents) {
			continue
		}
		removed += len(o.ents) - len(keep)
		c := change{key: append([]byte(nil), k...), t: t, count: len(keep), was: len(o.ents), old: len(v)}
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
		oldIdx := len(appendIndexValue(nil, c.was, c.old))
		if c.value == nil {
			if err := o.b.Delete(c.key, nil); err != nil {
				return 0, err
			}
			if err := o.b.Delete(o.kbuf2, nil); err != nil {
				return 0, err
			}
			o.cur.Bytes[s] -= int64(len(c.key) + c.old + len(o.kbuf2) + oldIdx)
			continue
		}
		if err := o.b.Set(c.key, c.value, nil); err != nil {
			return 0, err
		}
		val := appendIndexValue(nil, c.count, len(c.value))
		if err := o.b.Set(o.kbuf2, val, nil); err != nil {
			return 0, err
		}
		o.cur.Bytes[s] += int64(len(c.value)-c.old) + int64(len(val)-oldIdx)
	}
	o.cur.Rows[s] -= int64(removed)
	o.cur.Bytes[s] = max(o.cur.Bytes[s], 0)
	return removed, nil
}

// Advance moves the watermark to w (microseconds; a w at or below the
// current watermark does nothing) and evicts every row that can no longer
// join: rows of outer sides that never joined go to emit with nil for the
// other side. It returns the number of rows evicted.
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

// evict removes side s's rows older than h.
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
	n := 0
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
			if err := o.emitUnmatched(s, key, t, emit); err != nil {
				it.Close()
				return n, err
			}
		}
		if err := o.b.Delete(o.kbuf, nil); err != nil {
			it.Close()
			return n, err
		}
		n += count
		rows += int64(count)
		size += int64(len(o.kbuf) + esize + len(ik) + len(v))
	}
	if err := it.Close(); err != nil {
		return n, err
	}
	if n > 0 {
		// One range deletion for the whole index range: the next eviction
		// starts at the horizon and never walks these keys' tombstones.
		if err := o.b.DeleteRange(o.lbuf, o.ubuf, nil); err != nil {
			return n, err
		}
	}
	o.cur.Horizon[s] = h
	o.cur.Rows[s] = max(o.cur.Rows[s]-rows, 0)
	o.cur.Bytes[s] = max(o.cur.Bytes[s]-size, 0)
	return n, nil
}

// emitUnmatched emits the rows at (key, t) of side s that never joined
// (the entries key is in o.kbuf).
func (o *Operator) emitUnmatched(s Side, key []byte, t int64, emit func(*Output) error) error {
	v, closer, err := o.b.Get(o.kbuf)
	if errors.Is(err, pebble.ErrNotFound) {
		return corrupt("time index names key %x at %d on the %s side, but it has no entries", key, t, s)
	}
	if err != nil {
		return err
	}
	defer closer.Close()
	o.ents, err = decodeEntries(o.ents, t, v)
	if err != nil {
		return fmt.Errorf("%w (key %x)", err, o.kbuf)
	}
	for i := range o.ents {
		if o.ents[i].Matched {
			continue
		}
		if err := o.emitOne(s, key, &o.ents[i], emit); err != nil {
			return err
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
// returns; without, in the write-ahead log's buffer).
func (o *Operator) Commit(sync bool) error {
	meta, err := json.Marshal(&o.cur)
	if err != nil {
		return err
	}
	if err := o.b.Set(keyOperatorMeta, meta, nil); err != nil {
		return err
	}
	opt := pebble.NoSync
	if sync {
		opt = pebble.Sync
	}
	if err := o.b.Commit(opt); err != nil {
		return fmt.Errorf("join: committing the state: %w", err)
	}
	o.b.Close()
	o.b = o.db.NewIndexedBatch()
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
	o.b.Close()
	o.b = o.db.NewIndexedBatch()
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
