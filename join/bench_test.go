package join

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"

	"github.com/sluice-cdc/sluice/internal/testenv/kafkaenv"
)

// The join-state benchmark, after Spark's stream-stream join state
// benchmark: one side's state holds 1,000,000 rows (100,000 keys, ten rows
// each, event times one second apart); we measure appending rows and
// evicting 0, 100 and 900,000 rows, for sluice's layout (rows by key and
// time, plus the time index) and, in the same run and the same Pebble, for
// the older layout Spark used (key → count, (key, index) → value), which
// has to read all of its state to find what expired.
//
//	go test ./join -run '^$' -bench . -benchtime 2s
//
// Each state is loaded once per process with batch writes, flushed and
// compacted; a benchmark that changes the state works on a checkpoint
// (hard-linked copy) of it.

const (
	benchRows = 1_000_000
	benchKeys = 100_000
	benchStep = int64(time.Second / time.Microsecond) // event times 1 s apart
	benchBase = int64(1_772_618_400_000_000)          // 2026-03-04 10:00 UTC in µs
	benchData = 100                                   // payload bytes per row
)

var benchPayload = func() []byte {
	b := make([]byte, benchData)
	for i := range b {
		b[i] = 'a' + byte(i%26)
	}
	return b
}()

// benchKeyEnc holds the encoded keys, so that making a row allocates
// nothing (the benchmark measures the state, not the key encoding).
var benchKeyEnc = func() [][]byte {
	keys := make([][]byte, benchKeys)
	for k := range keys {
		keys[k] = keyOf(k)
	}
	return keys
}()

// benchRow is row i of the loaded side: its key, time and identity (id
// is written into idBuf).
func benchRow(i int, idBuf *[8]byte) (key []byte, t int64, id []byte) {
	key = benchKeyEnc[(i*7919)%benchKeys] // each key's rows spread over the whole time range
	t = benchBase + int64(i)*benchStep
	binary.BigEndian.PutUint64(idBuf[:], uint64(i))
	return key, t, idBuf[:]
}

// stateFixture is a loaded 1M-row state on disk.
type stateFixture struct {
	once sync.Once
	dir  string
	err  error
	load time.Duration
}

var (
	benchRoot     string
	benchRootOnce sync.Once
	timeFixture   stateFixture
	oldFixture    stateFixture
)

func TestMain(m *testing.M) {
	code := m.Run()
	kafkaenv.Stop() // TestSinkExactlyOnceKafka's broker
	if benchRoot != "" {
		os.RemoveAll(benchRoot)
	}
	os.Exit(code)
}

func fixtureDir(b *testing.B, name string) string {
	benchRootOnce.Do(func() {
		var err error
		if benchRoot, err = os.MkdirTemp("", "sluice-join-bench-"); err != nil {
			panic(err)
		}
	})
	return filepath.Join(benchRoot, name)
}

var benchOpConfig = OperatorConfig{Type: Inner, Before: 10 * time.Second, After: 10 * time.Second, Fingerprint: "bench", CacheBytes: 64 << 20}

// loadTimeIndexed writes the 1M rows in the time-indexed layout with plain
// batches (what Add would write for them, without the reads), then
// flushes and compacts.
func loadTimeIndexed(dir string) error {
	op, err := OpenOperator(dir, benchOpConfig)
	if err != nil {
		return err
	}
	defer op.Close()
	wb := op.db.NewBatch()
	var ka, kb, v, iv []byte
	var idBuf [8]byte
	for i := range benchRows {
		key, t, id := benchRow(i, &idBuf)
		ka = entriesKey(ka[:0], Left, key, t)
		v = appendEntry(append(v[:0], entriesVersion), false, id, benchPayload)
		kb = indexKey(kb[:0], Left, t, key)
		iv = appendIndexValue(iv[:0], 1, len(v))
		if err := wb.Set(ka, v, nil); err != nil {
			return err
		}
		if err := wb.Set(kb, iv, nil); err != nil {
			return err
		}
		op.cur.Rows[Left]++
		op.cur.Bytes[Left] += int64(len(ka) + len(v) + len(kb) + len(iv))
		if wb.Len() > 16<<20 {
			if err := wb.Commit(pebble.NoSync); err != nil {
				return err
			}
			wb = op.db.NewBatch()
		}
	}
	if err := wb.Commit(pebble.NoSync); err != nil {
		return err
	}
	if err := op.Commit(true); err != nil {
		return err
	}
	return settle(op.db)
}

func settle(db *pebble.DB) error {
	if err := db.Flush(); err != nil {
		return err
	}
	return db.Compact(context.Background(), []byte{0}, []byte{0xFF}, true)
}

func (f *stateFixture) get(b *testing.B, name string, load func(string) error) string {
	f.once.Do(func() {
		f.dir = fixtureDir(b, name)
		start := time.Now()
		f.err = load(f.dir)
		f.load = time.Since(start)
		if f.err == nil {
			fmt.Fprintf(os.Stderr, "loaded %d rows in the %s layout in %s\n", benchRows, name, f.load.Round(time.Millisecond))
		}
	})
	if f.err != nil {
		b.Fatal(f.err)
	}
	return f.dir
}

// copyState makes a hard-linked checkpoint of a fixture in a fresh
// directory; merger is the one the fixture was written with.
func copyState(b *testing.B, src string, merger *pebble.Merger) string {
	opts := stateOptions(discardLogger, 8<<20)
	opts.Merger = merger
	db, err := pebble.Open(src, opts)
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	dst := filepath.Join(b.TempDir(), "state")
	if err := db.Checkpoint(dst); err != nil {
		b.Fatal(err)
	}
	return dst
}

func openTimeIndexed(b *testing.B) *Operator {
	src := timeFixture.get(b, "time-index", loadTimeIndexed)
	op, err := OpenOperator(copyState(b, src, stateMerger), benchOpConfig)
	if err != nil {
		b.Fatal(err)
	}
	if op.Stats().Rows[Left] != benchRows {
		b.Fatalf("fixture holds %d rows", op.Stats().Rows[Left])
	}
	return op
}

// evictTo is the watermark that evicts exactly the rows before row i of
// the loaded side: no lateness, so the left horizon is w - after, which
// it puts just after row i-1.
func evictTo(i int) int64 {
	return benchBase + int64(i)*benchStep - benchStep + 1 + benchOpConfig.After.Microseconds()
}

func BenchmarkJoinState(b *testing.B) {
	nop := func(*Output) error { return nil }
	b.Run("layout=time-index/op=append", func(b *testing.B) {
		var idBuf [8]byte
		benchRowsPerSec(b, openTimeIndexed(b), func(op *Operator, i int) error {
			key, t, id := benchRow(benchRows+i, &idBuf)
			return op.store(Left, &Row{Key: key, Time: t, ID: id, Data: benchPayload}, false)
		})
	})
	b.Run("layout=time-index/op=add-probe", func(b *testing.B) {
		// Add on the other side: a range read of the 1M-row side, then
		// the append.
		var idBuf [8]byte
		benchRowsPerSec(b, openTimeIndexed(b), func(op *Operator, i int) error {
			key, t, id := benchRow(i%benchRows, &idBuf)
			return op.Add(Right, &Row{Key: key, Time: t + 500_000, ID: id, Data: benchPayload}, nop)
		})
	})
	b.Run("layout=time-index/op=evict/rows=0", func(b *testing.B) {
		op := openTimeIndexed(b)
		defer op.Close()
		benchEvictNothing(b, op, 0)
	})
	b.Run("layout=time-index/op=evict/rows=0-after-900000", func(b *testing.B) {
		// Nothing to evict right after an eviction of 900,000 rows: the
		// tombstones it left are not walked again.
		op := openTimeIndexed(b)
		defer op.Close()
		if n, err := op.Advance(evictTo(900_000), nop); err != nil || n != 900_000 {
			b.Fatalf("evicted %d (%v)", n, err)
		}
		if err := op.Commit(false); err != nil {
			b.Fatal(err)
		}
		benchEvictNothing(b, op, 900_000)
	})
	b.Run("layout=time-index/op=evict/rows=100", func(b *testing.B) {
		var op *Operator
		next := benchRows // rows evicted so far; refresh when 900k are gone
		b.ReportAllocs()
		for range b.N {
			if next+100 > 900_000 {
				b.StopTimer()
				if op != nil {
					op.Close()
				}
				op, next = openTimeIndexed(b), 0
				b.StartTimer()
			}
			next += 100
			if n, err := op.Advance(evictTo(next), nop); err != nil || n != 100 {
				b.Fatalf("evicted %d (%v), want 100", n, err)
			}
			if err := op.Commit(false); err != nil {
				b.Fatal(err)
			}
		}
		op.Close()
	})
	for _, typ := range []Type{Inner, LeftJoin} {
		b.Run(fmt.Sprintf("layout=time-index/op=evict/rows=900000/type=%s", typ), func(b *testing.B) {
			for range b.N {
				b.StopTimer()
				src := timeFixture.get(b, "time-index", loadTimeIndexed)
				cfg := benchOpConfig
				cfg.Type = typ
				cfg.Fingerprint = "bench"
				op, err := openAs(copyState(b, src, stateMerger), cfg)
				if err != nil {
					b.Fatal(err)
				}
				emitted := 0
				count := func(*Output) error { emitted++; return nil }
				b.StartTimer()
				n, err := op.Advance(evictTo(900_000), count)
				if err != nil || n != 900_000 {
					b.Fatalf("evicted %d (%v)", n, err)
				}
				if err := op.Commit(false); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				if typ == LeftJoin && emitted != 900_000 {
					b.Fatalf("left join emitted %d unmatched rows, want 900000", emitted)
				}
				op.Close()
				b.StartTimer()
			}
		})
	}

	// The older layout, same data, same Pebble.
	b.Run("layout=old/op=append", func(b *testing.B) {
		st := openOld(b)
		var idBuf [8]byte
		b.ReportAllocs()
		b.ResetTimer()
		for i := range b.N {
			key, t, _ := benchRow(benchRows+i, &idBuf)
			if err := st.append(key, t, benchPayload); err != nil {
				b.Fatal(err)
			}
			if i%4096 == 4095 {
				if err := st.commit(); err != nil {
					b.Fatal(err)
				}
			}
		}
		if err := st.commit(); err != nil {
			b.Fatal(err)
		}
		st.close()
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "rows/s")
	})
	for _, rows := range []int{0, 100, 900_000} {
		b.Run(fmt.Sprintf("layout=old/op=evict/rows=%d", rows), func(b *testing.B) {
			for range b.N {
				b.StopTimer()
				st := openOld(b)
				b.StartTimer()
				n, err := st.evict(benchBase + int64(rows)*benchStep)
				if err != nil || n != rows {
					b.Fatalf("evicted %d (%v), want %d", n, err, rows)
				}
				if err := st.commit(); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				st.close()
				b.StartTimer()
			}
		})
	}
}

func openAs(dir string, cfg OperatorConfig) (*Operator, error) {
	// The fixture was written as an inner join; other types reuse its rows.
	op, err := OpenOperator(dir, OperatorConfig{Type: Inner, Fingerprint: cfg.Fingerprint})
	if err != nil {
		return nil, err
	}
	op.cur.Type, op.committed.Type = cfg.Type, cfg.Type
	if err := op.Commit(true); err != nil {
		return nil, err
	}
	op.Close()
	return OpenOperator(dir, cfg)
}

// benchEvictNothing advances the watermark by 1 µs per iteration, from
// where the rows before row `after` are evicted: no row expires (rows are
// 1 s apart) but each is a complete eviction pass and commit.
func benchEvictNothing(b *testing.B, op *Operator, after int) {
	nop := func(*Output) error { return nil }
	w := evictTo(after)
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		if i == 900_000 {
			b.Fatal("more than 900,000 iterations: the next row would expire")
		}
		if n, err := op.Advance(w+int64(i)+1, nop); err != nil || n != 0 {
			b.Fatalf("evicted %d (%v), want 0", n, err)
		}
		if err := op.Commit(false); err != nil {
			b.Fatal(err)
		}
	}
}

// oldState is the older layout, as Spark's first stream-stream join state
// format kept it: key → number of values, and (key, index) → value (event
// time, matched flag, payload). Eviction cannot tell where expired values
// are, so it reads every value; expired ones are removed by moving the
// key's last value into their slot, as Spark did.
type oldState struct {
	db *pebble.DB
	b  *pebble.Batch
	k  []byte
	v  []byte
}

const (
	oldCount = 'n'
	oldValue = 'v'
)

func oldCountKey(dst, key []byte) []byte { return append(append(dst, oldCount), key...) }

func oldValueKey(dst, key []byte, idx uint32) []byte {
	dst = append(append(dst, oldValue), key...)
	return binary.BigEndian.AppendUint32(dst, idx)
}

func openOldDB(dir string) (*pebble.DB, error) {
	opts := &pebble.Options{FormatMajorVersion: pebble.FormatNewest, CacheSize: 64 << 20, MemTableSize: 64 << 20, Logger: pebbleLogger{discardLogger}}
	for i := range opts.Levels {
		opts.Levels[i].FilterPolicy = bloom.FilterPolicy(10)
	}
	return pebble.Open(dir, opts)
}

func loadOld(dir string) error {
	db, err := openOldDB(dir)
	if err != nil {
		return err
	}
	defer db.Close()
	counts := make([]uint32, benchKeys)
	wb := db.NewBatch()
	var k, v []byte
	var idBuf [8]byte
	for i := range benchRows {
		key, t, _ := benchRow(i, &idBuf)
		kn := (i * 7919) % benchKeys
		k = oldValueKey(k[:0], key, counts[kn])
		counts[kn]++
		v = append(appendTime(v[:0], t), 0)
		v = append(v, benchPayload...)
		if err := wb.Set(k, v, nil); err != nil {
			return err
		}
		if wb.Len() > 16<<20 {
			if err := wb.Commit(pebble.NoSync); err != nil {
				return err
			}
			wb = db.NewBatch()
		}
	}
	for kn, c := range counts {
		k = oldCountKey(k[:0], keyOf(kn))
		if err := wb.Set(k, binary.AppendUvarint(nil, uint64(c)), nil); err != nil {
			return err
		}
	}
	if err := wb.Commit(pebble.Sync); err != nil {
		return err
	}
	return settle(db)
}

func openOld(b *testing.B) *oldState {
	src := oldFixture.get(b, "old", loadOld)
	db, err := openOldDB(copyState(b, src, pebble.DefaultMerger))
	if err != nil {
		b.Fatal(err)
	}
	return &oldState{db: db, b: db.NewIndexedBatch()}
}

func (o *oldState) close() {
	o.b.Close()
	o.db.Close()
}

func (o *oldState) commit() error {
	if err := o.b.Commit(pebble.NoSync); err != nil {
		return err
	}
	o.b.Close()
	o.b = o.db.NewIndexedBatch()
	return nil
}

func (o *oldState) append(key []byte, t int64, data []byte) error {
	o.k = oldCountKey(o.k[:0], key)
	count := uint64(0)
	v, closer, err := o.b.Get(o.k)
	switch {
	case err == nil:
		count, _ = binary.Uvarint(v)
		closer.Close()
	case !errors.Is(err, pebble.ErrNotFound):
		return err
	}
	if err := o.b.Set(o.k, binary.AppendUvarint(nil, count+1), nil); err != nil {
		return err
	}
	o.k = oldValueKey(o.k[:0], key, uint32(count))
	o.v = append(append(appendTime(o.v[:0], t), 0), data...)
	return o.b.Set(o.k, o.v, nil)
}

// evict removes every value older than h; it reads all values (one pass
// over the value keyspace, grouped by key: the cheapest full scan).
func (o *oldState) evict(h int64) (int, error) {
	it, err := o.b.NewIter(&pebble.IterOptions{LowerBound: []byte{oldValue}, UpperBound: []byte{oldValue + 1}})
	if err != nil {
		return 0, err
	}
	defer it.Close()
	type val struct{ v []byte }
	var key []byte
	var vals []val
	expired := 0
	n := 0
	flush := func() error {
		if key == nil || expired == 0 {
			return nil
		}
		// Spark's removal: each expired value's slot takes the key's last
		// value, and the count shrinks.
		kept := vals[:0]
		for _, x := range vals {
			if readTime(x.v) >= h {
				kept = append(kept, x)
			}
		}
		for i, x := range kept {
			if err := o.b.Set(oldValueKey(nil, key, uint32(i)), x.v, nil); err != nil {
				return err
			}
		}
		for i := len(kept); i < len(kept)+expired; i++ {
			if err := o.b.Delete(oldValueKey(nil, key, uint32(i)), nil); err != nil {
				return err
			}
		}
		ck := oldCountKey(nil, key)
		if len(kept) == 0 {
			return o.b.Delete(ck, nil)
		}
		return o.b.Set(ck, binary.AppendUvarint(nil, uint64(len(kept))), nil)
	}
	for ok := it.First(); ok; ok = it.Next() {
		k := it.Key()
		kk := k[1 : len(k)-4]
		if key == nil || string(kk) != string(key) {
			if err := flush(); err != nil {
				return n, err
			}
			key, vals, expired = append(key[:0], kk...), vals[:0], 0
		}
		v, err := it.ValueAndErr()
		if err != nil {
			return n, err
		}
		vals = append(vals, val{append([]byte(nil), v...)})
		if readTime(v) < h {
			expired++
			n++
		}
	}
	if err := flush(); err != nil {
		return n, err
	}
	return n, it.Error()
}

var discardLogger = slog.New(slog.DiscardHandler)

// benchRowsPerSec runs one(op, i) b.N times, committing every 4096, and
// reports rows/s timed to the end of the background work the writes
// caused (Close waits for flushes and compactions).
func benchRowsPerSec(b *testing.B, op *Operator, one func(op *Operator, i int) error) {
	b.ReportAllocs()
	cpu0 := processCPU()
	b.ResetTimer()
	for i := range b.N {
		if err := one(op, i); err != nil {
			b.Fatal(err)
		}
		if i%4096 == 4095 {
			if err := op.Commit(false); err != nil {
				b.Fatal(err)
			}
		}
	}
	if err := op.Commit(false); err != nil {
		b.Fatal(err)
	}
	op.Close()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "rows/s")
	// CPU time of the whole process (the appends and the flushes and
	// compactions they cause) per row: steadier than rows/s on a shared
	// machine, whose other tenants take cores away.
	b.ReportMetric(float64((processCPU()-cpu0).Nanoseconds())/float64(b.N), "cpu-ns/row")
}

// processCPU is the user and system CPU time the process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
