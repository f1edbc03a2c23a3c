package codec

import (
	"encoding/json"
	"os"
	"runtime"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/sluice-cdc/sluice/binlog"
)

var shortTable = &binlog.Table{
	Schema: "bench",
	Name:   "short_table",
	Columns: []binlog.Column{
		{Name: "id", Kind: binlog.KindInt},
		{Name: "a", Kind: binlog.KindInt},
		{Name: "b", Kind: binlog.KindInt},
	},
	PrimaryKey: []int{0},
}

func shortChange() binlog.Change {
	return binlog.Change{
		Op:    binlog.OpInsert,
		Table: shortTable,
		After: binlog.Row{binlog.IntValue(1234567), binlog.IntValue(42), binlog.IntValue(-7)},
		File:  "mysql-bin.000042", Pos: 123456789, Row: 17,
	}
}

// longTable is a 26-column row as in the throughput benchmark's long_table.
var longTable = func() *binlog.Table {
	t := &binlog.Table{Schema: "bench", Name: "long_table", PrimaryKey: []int{0}}
	add := func(c binlog.Column) { t.Columns = append(t.Columns, c) }
	text := func(name string) binlog.Column {
		return binlog.Column{Name: name, Kind: binlog.KindString, Charset: "utf8mb4", Nullable: true}
	}
	add(binlog.Column{Name: "id", Kind: binlog.KindInt})
	add(binlog.Column{Name: "created_at", Kind: binlog.KindTimestamp})
	add(binlog.Column{Name: "updated_at", Kind: binlog.KindTimestamp, Frac: 6})
	add(binlog.Column{Name: "status", Kind: binlog.KindEnum, Enum: []string{"active", "inactive", "deleted"}})
	add(binlog.Column{Name: "kind", Kind: binlog.KindEnum, Enum: []string{"alpha", "beta", "gamma", "delta"}})
	add(text("short_str"))
	for _, n := range []string{"int_1", "int_2", "int_3", "int_4", "int_5", "int_6"} {
		add(binlog.Column{Name: n, Kind: binlog.KindInt})
	}
	add(text("long_text"))
	add(binlog.Column{Name: "tags", Kind: binlog.KindSet, Set: []string{"red", "green", "blue", "yellow"}})
	add(binlog.Column{Name: "counter", Kind: binlog.KindUint, Unsigned: true})
	for _, n := range []string{"double_1", "double_2", "double_3", "double_4"} {
		add(binlog.Column{Name: n, Kind: binlog.KindDouble})
	}
	for _, n := range []string{"text_1", "text_2", "text_3", "text_4"} {
		add(text(n))
	}
	add(text("another_str"))
	add(binlog.Column{Name: "int_7", Kind: binlog.KindInt})
	add(binlog.Column{Name: "int_8", Kind: binlog.KindInt})
	return t
}()

func longChange() binlog.Change {
	s := func(v string) binlog.Value { return binlog.BytesValue(binlog.KindString, []byte(v)) }
	d := func(f float64) binlog.Value { return binlog.FloatValue(binlog.KindDouble, f) }
	row := binlog.Row{
		binlog.IntValue(1234567),
		binlog.TimestampValue(1714979288, 0),
		binlog.TimestampValue(1714979289, 123456),
		binlog.NumValue(binlog.KindEnum, 1),
		binlog.NumValue(binlog.KindEnum, 3),
		s("short_string"),
		binlog.IntValue(1), binlog.IntValue(-22), binlog.IntValue(333), binlog.IntValue(4444),
		binlog.IntValue(55555), binlog.IntValue(-666666),
		s(""),
		binlog.NumValue(binlog.KindSet, 0b101),
		binlog.UintValue(4000000000),
		d(3.14159), d(-2.5e-7), d(123456.789), d(0),
		s("lorem ipsum dolor sit amet"), s("consectetur adipiscing elit"),
		s("sed do eiusmod tempor"), s("incididunt ut labore"),
		s("another_short_string"),
		binlog.IntValue(7), binlog.IntValue(8),
	}
	if len(row) != len(longTable.Columns) || len(row) != 26 {
		panic("long row does not match long_table")
	}
	return binlog.Change{Op: binlog.OpInsert, Table: longTable, After: row, File: "mysql-bin.000042", Pos: 123456789, Row: 17}
}

func benchChange(b *testing.B, ch binlog.Change) {
	benchEncoder(b, testEncoder(), ch)
}

func benchEncoder(b *testing.B, enc *Encoder, ch binlog.Change) {
	buf := enc.AppendChange(nil, testTxn, &ch)
	if !json.Valid(buf) {
		b.Fatalf("invalid: %s", buf)
	}
	b.SetBytes(int64(len(buf)))
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		buf = enc.AppendChange(buf[:0], testTxn, &ch)
	}
}

// BenchmarkAppendChangeShort encodes an insert of a 3-int-column row.
func BenchmarkAppendChangeShort(b *testing.B) { benchChange(b, shortChange()) }

// BenchmarkAppendChangeShortSystemClock is BenchmarkAppendChangeShort
// with the default clock, read for every event's ts_ms.
func BenchmarkAppendChangeShortSystemClock(b *testing.B) {
	benchEncoder(b, NewEncoder(Source{Name: "shop", ServerID: 7, Version: "1.0.0"}), shortChange())
}

// BenchmarkAppendChangeLong encodes an insert of the 26-column long_table row.
func BenchmarkAppendChangeLong(b *testing.B) { benchChange(b, longChange()) }

// BenchmarkAppendChangeLongUpdate encodes an update (both images) of the long row.
func BenchmarkAppendChangeLongUpdate(b *testing.B) {
	ch := longChange()
	ch.Op, ch.Before = binlog.OpUpdate, ch.After
	benchChange(b, ch)
}

// BenchmarkFormat compares the formats on the same rows: sluice,
// debezium without schemas and debezium with schemas (JsonConverter's
// schemas.enable=true; the schema half is cached per table version).
// bytes/event is the size of one event.
func BenchmarkFormat(b *testing.B) {
	update := longChange()
	update.Op, update.Before = binlog.OpUpdate, update.After
	rows := []struct {
		name string
		ch   binlog.Change
	}{{"short", shortChange()}, {"long", longChange()}, {"long_update", update}}
	formats := []struct {
		name string
		f    Format
	}{
		{"sluice", Format{}},
		{"debezium", Format{Name: FormatDebezium}},
		{"debezium_schemas", Format{Name: FormatDebezium, Schemas: true}},
	}
	for _, r := range rows {
		for _, f := range formats {
			b.Run(r.name+"/"+f.name, func(b *testing.B) {
				enc := NewEncoder(Source{Name: "shop", ServerID: 7, Version: "1.0.0"}, WithClock(fixedClock), WithFormat(f.f))
				ch := r.ch
				buf := enc.AppendChange(nil, testTxn, &ch)
				if !json.Valid(buf) {
					b.Fatalf("invalid: %s", buf)
				}
				b.SetBytes(int64(len(buf)))
				b.ReportAllocs()
				b.ResetTimer()
				for b.Loop() {
					buf = enc.AppendChange(buf[:0], testTxn, &ch)
				}
				b.ReportMetric(float64(len(buf)), "bytes/event")
			})
		}
	}
}

// TestFormatCost measures what BenchmarkFormat measures in thread CPU
// time rather than wall time, interleaving the formats, so that the
// ratios hold on a machine shared with other work. It runs only with
// SLUICE_FORMAT_COST=1 and prints ns/event, the ratio to sluice and
// bytes/event for each row and format.
func TestFormatCost(t *testing.T) {
	if os.Getenv("SLUICE_FORMAT_COST") == "" {
		t.Skip("set SLUICE_FORMAT_COST=1 to measure")
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	cpu := func() time.Duration {
		var ts syscall.Timespec
		const clockThreadCPUTime = 3 // CLOCK_THREAD_CPUTIME_ID
		if _, _, e := syscall.Syscall(syscall.SYS_CLOCK_GETTIME, clockThreadCPUTime, uintptr(unsafe.Pointer(&ts)), 0); e != 0 {
			t.Skipf("clock_gettime(CLOCK_THREAD_CPUTIME_ID): %v", e)
		}
		return time.Duration(ts.Nano())
	}
	update := longChange()
	update.Op, update.Before = binlog.OpUpdate, update.After
	rows := []struct {
		name string
		ch   binlog.Change
	}{{"short", shortChange()}, {"long", longChange()}, {"long_update", update}}
	formats := []Format{{}, {Name: FormatDebezium}, {Name: FormatDebezium, Schemas: true}}
	names := []string{"sluice", "debezium", "debezium_schemas"}
	const n, rounds = 50000, 15
	for _, r := range rows {
		best := make([]time.Duration, len(formats))
		size := make([]int, len(formats))
		for round := 0; round < rounds; round++ {
			for i, f := range formats {
				enc := NewEncoder(Source{Name: "shop", ServerID: 7, Version: "1.0.0"}, WithClock(fixedClock), WithFormat(f))
				ch := r.ch
				buf := enc.AppendChange(nil, testTxn, &ch)
				size[i] = len(buf)
				start := cpu()
				for range n {
					buf = enc.AppendChange(buf[:0], testTxn, &ch)
				}
				if d := cpu() - start; round == 0 || d < best[i] {
					best[i] = d
				}
			}
		}
		for i := range formats {
			ns := float64(best[i].Nanoseconds()) / n
			t.Logf("%-12s %-17s %8.0f ns/event  %.2fx sluice  %5d bytes/event", r.name, names[i], ns, float64(best[i])/float64(best[0]), size[i])
		}
	}
}
