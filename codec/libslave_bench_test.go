package codec

import (
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/go-mysql-org/go-mysql/mysql"

	"github.com/sluice-cdc/sluice/binlog"
	"github.com/sluice-cdc/sluice/internal/bench/libslavedb"
)

// The tables and rows of `sluice-bench libslave` (internal/bench's
// short_table and long_table, as INSERT … SELECT and the UPDATEs write
// them with sql_mode '', the long table's column defaults included), for
// comparing the formats on the rows the end-to-end benchmark decodes.

var libShortTable = &binlog.Table{
	Schema: "bench",
	Name:   "short_table",
	Columns: []binlog.Column{
		{Name: "id", Kind: binlog.KindInt, Type: mysql.MYSQL_TYPE_LONG},
		{Name: "field1", Kind: binlog.KindInt, Type: mysql.MYSQL_TYPE_LONG},
		{Name: "field2", Kind: binlog.KindInt, Type: mysql.MYSQL_TYPE_LONG},
	},
	PrimaryKey: []int{0},
}

var libLongTable = func() *binlog.Table {
	t := &binlog.Table{Schema: "bench", Name: "long_table", PrimaryKey: []int{0}}
	abc := []string{"a", "b", "c"}
	kinds := []struct {
		kind binlog.Kind
		typ  byte
	}{
		{binlog.KindInt, mysql.MYSQL_TYPE_LONG},             // id
		{binlog.KindTimestamp, mysql.MYSQL_TYPE_TIMESTAMP2}, // field1
		{binlog.KindTimestamp, mysql.MYSQL_TYPE_TIMESTAMP2}, // field2
		{binlog.KindEnum, mysql.MYSQL_TYPE_STRING},          // field3
		{binlog.KindEnum, mysql.MYSQL_TYPE_STRING},          // field4
		{binlog.KindString, mysql.MYSQL_TYPE_VARCHAR},       // field5
		{binlog.KindInt, mysql.MYSQL_TYPE_LONG},             // field6
		{binlog.KindInt, mysql.MYSQL_TYPE_LONG},             // field7
		{binlog.KindString, mysql.MYSQL_TYPE_BLOB},          // field8 text
		{binlog.KindSet, mysql.MYSQL_TYPE_STRING},           // field9
		{binlog.KindUint, mysql.MYSQL_TYPE_LONG},            // field10 int unsigned
		{binlog.KindDouble, mysql.MYSQL_TYPE_DOUBLE},        // field11
		{binlog.KindDouble, mysql.MYSQL_TYPE_DOUBLE},        // field12
		{binlog.KindInt, mysql.MYSQL_TYPE_LONG},             // field13
		{binlog.KindInt, mysql.MYSQL_TYPE_LONG},             // field14
		{binlog.KindInt, mysql.MYSQL_TYPE_LONG},             // field15
		{binlog.KindString, mysql.MYSQL_TYPE_BLOB},          // field16 text
		{binlog.KindString, mysql.MYSQL_TYPE_VARCHAR},       // field17
		{binlog.KindString, mysql.MYSQL_TYPE_VARCHAR},       // field18
		{binlog.KindEnum, mysql.MYSQL_TYPE_STRING},          // field19
		{binlog.KindInt, mysql.MYSQL_TYPE_LONG},             // field20
		{binlog.KindDouble, mysql.MYSQL_TYPE_DOUBLE},        // field21
		{binlog.KindDouble, mysql.MYSQL_TYPE_DOUBLE},        // field22
		{binlog.KindDouble, mysql.MYSQL_TYPE_DOUBLE},        // field23
		{binlog.KindDouble, mysql.MYSQL_TYPE_DOUBLE},        // field24
		{binlog.KindString, mysql.MYSQL_TYPE_BLOB},          // field25 text
	}
	for i, k := range kinds {
		c := binlog.Column{Name: "id", Kind: k.kind, Type: k.typ}
		if i > 0 {
			c.Name = fmt.Sprintf("field%d", i)
		}
		switch k.kind {
		case binlog.KindString:
			c.Charset = "utf8mb4"
		case binlog.KindEnum:
			c.Enum = abc
		case binlog.KindSet:
			c.Set = abc
		case binlog.KindUint:
			c.Unsigned = true
		}
		t.Columns = append(t.Columns, c)
	}
	// The defaults, as the reader takes them from SHOW CREATE TABLE.
	def, err := binlog.ParseCreateTable(libslavedb.LongTable, false)
	if err != nil {
		panic(err)
	}
	binlog.ApplyCreateTable(t, def)
	return t
}()

// libRow is row id of the table as the benchmark's statements leave it
// (update: after the UPDATE).
func libRow(t *binlog.Table, id int64, update bool) binlog.Row {
	if t == libShortTable {
		f1 := id
		if update {
			f1 = 12
		}
		return binlog.Row{binlog.IntValue(id), binlog.IntValue(f1), binlog.IntValue(id)}
	}
	s := func(v string) binlog.Value { return binlog.BytesValue(binlog.KindString, []byte(v)) }
	d := func(f float64) binlog.Value { return binlog.FloatValue(binlog.KindDouble, f) }
	i := binlog.IntValue
	f6 := int64(0)
	if update {
		f6 = 12
	}
	return binlog.Row{
		i(id),
		binlog.TimestampValue(0, 0),          // field1 DEFAULT 0
		binlog.TimestampValue(1764646000, 0), // field2 CURRENT_TIMESTAMP
		binlog.NumValue(binlog.KindEnum, 1), binlog.NumValue(binlog.KindEnum, 1),
		s("short_string"),
		i(f6), i(0),
		s(""),
		binlog.NumValue(binlog.KindSet, 1),
		binlog.UintValue(2),
		d(1), d(0),
		i(0), i(0), i(0),
		s(""), s(""), s(""),
		binlog.NumValue(binlog.KindEnum, 1),
		i(10),
		d(0), d(1), d(1), d(1),
		s("another_short_string"),
	}
}

// libChanges are n consecutive changes of one rows event of the range.
func libChanges(t *binlog.Table, update bool, n int) []binlog.Change {
	out := make([]binlog.Change, n)
	for k := range out {
		id := int64(500000 + k)
		ch := binlog.Change{Table: t, File: "mysql-bin.000001", Pos: 4096000, Row: k, Op: binlog.OpInsert}
		ch.After = libRow(t, id, update)
		if update {
			ch.Op, ch.Before = binlog.OpUpdate, libRow(t, id, false)
		}
		out[k] = ch
	}
	return out
}

var libTxn = &binlog.Txn{
	GTID:       "0-1-42",
	ServerID:   1,
	CommitTime: time.Unix(1764646000, 0),
}

// BenchmarkLibslave encodes the libslave benchmark's rows in format
// sluice, debezium and debezium with schemas, as `sluice tail` writes
// them (one line per change, the encoder's system clock). bytes/msg is
// the mean line length. Compare the formats' ns/op within one run (the
// ratios are what the budget is about).
func BenchmarkLibslave(b *testing.B) {
	ranges := []struct {
		name   string
		t      *binlog.Table
		update bool
	}{
		{"short_insert", libShortTable, false},
		{"long_insert", libLongTable, false},
		{"short_update", libShortTable, true},
		{"long_update", libLongTable, true},
	}
	formats := []struct {
		name string
		f    Format
	}{
		{"sluice", Format{}},
		{"debezium", Format{Name: FormatDebezium}},
		{"debezium_schemas", Format{Name: FormatDebezium, Schemas: true}},
	}
	const n = 256 // rows per binlog event, as the benchmark's events hold about
	for _, r := range ranges {
		chs := libChanges(r.t, r.update, n)
		for _, f := range formats {
			b.Run(r.name+"/"+f.name, func(b *testing.B) {
				enc := NewEncoder(Source{Name: "bench", ServerID: 31337, Version: "1.0.0"}, WithFormat(f.f))
				var buf []byte
				total := 0
				for k := range chs {
					start := len(buf)
					buf = enc.AppendChange(buf, libTxn, &chs[k])
					if !json.Valid(buf[start:]) {
						b.Fatalf("invalid: %s", buf[start:])
					}
					total += len(buf) - start
				}
				b.ReportAllocs()
				b.ResetTimer()
				k := 0
				for b.Loop() {
					buf = enc.AppendChange(buf[:0], libTxn, &chs[k])
					if k++; k == n {
						k = 0
					}
				}
				b.ReportMetric(float64(total)/n, "bytes/msg")
			})
		}
	}
}

// TestLibslaveCost measures what BenchmarkLibslave measures in thread CPU
// time, the formats interleaved, best of many rounds, so that the ratios
// hold on a shared machine. It runs only with SLUICE_FORMAT_COST=1 and
// prints ns/msg, the ratio to format sluice and bytes/msg per range and
// format.
func TestLibslaveCost(t *testing.T) {
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
	ranges := []struct {
		name   string
		t      *binlog.Table
		update bool
	}{
		{"short_insert", libShortTable, false},
		{"long_insert", libLongTable, false},
		{"short_update", libShortTable, true},
		{"long_update", libLongTable, true},
	}
	formats := []Format{{}, {Name: FormatDebezium}, {Name: FormatDebezium, Schemas: true}}
	names := []string{"sluice", "debezium", "debezium_schemas"}
	const n, reps, rounds = 256, 100, 25
	for _, r := range ranges {
		chs := libChanges(r.t, r.update, n)
		best := make([]time.Duration, len(formats))
		size := make([]int, len(formats))
		encs := make([]*Encoder, len(formats))
		for i, f := range formats {
			encs[i] = NewEncoder(Source{Name: "bench", ServerID: 31337, Version: "1.0.0"}, WithFormat(f))
		}
		buf := make([]byte, 0, 16<<10)
		for round := 0; round < rounds; round++ {
			for i, enc := range encs {
				size[i] = 0
				start := cpu()
				for range reps {
					for k := range chs {
						buf = enc.AppendChange(buf[:0], libTxn, &chs[k])
						size[i] += len(buf)
					}
				}
				if d := cpu() - start; round == 0 || d < best[i] {
					best[i] = d
				}
			}
		}
		for i := range formats {
			ns := float64(best[i].Nanoseconds()) / (n * reps)
			t.Logf("%-12s %-17s %7.0f ns/msg  %.2fx sluice  %6.0f bytes/msg", r.name, names[i], ns, float64(best[i])/float64(best[0]), float64(size[i])/(n*reps))
		}
	}
}
