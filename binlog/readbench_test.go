package binlog_test

import (
	"bytes"
	"context"
	"math"
	"testing"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/go-mysql-org/go-mysql/replication"

	"github.com/sluice-cdc/sluice/binlog"
)

// The reader-path benchmarks: a whole binlog (one transaction of
// readBenchRows rows of the libslave long_table, in rows events of about
// 8 KiB as the server writes them) read by ReadStream, so that event
// framing and checksums, go-mysql's event parsing, the table-map cache,
// Reader.rows, chunking and chunk recycling are timed with the row
// decoder (BenchmarkDecodeImageLong times the decoder alone).

const (
	readBenchRows     = 20_000
	readBenchEventMax = 8 << 10 // binlog_row_event_max_size's default
)

// my8LongTable is the libslave benchmark's 26-column long_table as
// MySQL logs it with binlog_row_metadata=FULL.
func my8LongTable(id uint64) my8Table {
	intc := my8Col{typ: mysql.MYSQL_TYPE_LONG, numeric: true}
	ts := my8Col{typ: mysql.MYSQL_TYPE_TIMESTAMP2, meta: []byte{0}}
	enum := my8Col{typ: mysql.MYSQL_TYPE_STRING, meta: []byte{mysql.MYSQL_TYPE_ENUM, 1}, enum: []string{"a", "b", "c"}}
	vc := my8Col{typ: mysql.MYSQL_TYPE_VARCHAR, meta: my8LE(2, 1020), text: true}
	txt := my8Col{typ: mysql.MYSQL_TYPE_BLOB, meta: []byte{2}, text: true}
	set := my8Col{typ: mysql.MYSQL_TYPE_STRING, meta: []byte{mysql.MYSQL_TYPE_SET, 1}}
	dbl := my8Col{typ: mysql.MYSQL_TYPE_DOUBLE, meta: []byte{8}, numeric: true}
	uns := intc
	uns.unsigned = true
	cols := []my8Col{intc, ts, ts, enum, enum, vc, intc, intc, txt, set, uns, dbl, dbl, intc, intc, intc, txt, vc, vc, enum, intc, dbl, dbl, dbl, dbl, txt}
	names := []string{"id"}
	for i := 1; i < len(cols); i++ {
		names = append(names, "field"+string(rune('0'+i/10))+string(rune('0'+i%10)))
	}
	for i := range cols {
		cols[i].name = names[i]
	}
	return my8Table{id: id, db: "bench", name: "long_table", pk: []int{0}, cols: cols}
}

// my8LongRow is row id of long_table as the benchmark's INSERT … SELECT
// writes it (field6 given, to make the update's after image).
func my8LongRow(id uint32, field6 uint32) []byte {
	i := func(v uint32) []byte { return my8U32(v) }
	f := func(v float64) []byte { return my8LE(8, math.Float64bits(v)) }
	s := func(v string) []byte { return append(my8LE(2, uint64(len(v))), v...) }
	ts := func(sec uint32) []byte { return my8BE(4, uint64(sec)) }
	return my8Image(i(id), ts(0), ts(1_700_000_000), []byte{1}, []byte{1}, s("short_string"), i(field6), i(0), s(""),
		[]byte{1}, i(2), f(1), f(1), i(0), i(0), i(0), s(""), s(""), s(""), []byte{1}, i(0), f(1), f(1), f(1), f(1),
		s("another_short_string"))
}

// my8LongFile is a binlog holding one transaction of n rows of
// long_table: inserts, or updates of field6 (before and after images).
func my8LongFile(n int, update bool) []byte {
	w := newMy8Writer(uint32(my8T0.Unix()), nil)
	t := my8LongTable(70)
	typ := replication.WRITE_ROWS_EVENTv2
	if update {
		typ = replication.UPDATE_ROWS_EVENTv2
	}
	evs := []my8Ev{my8Begin()}
	var imgs [][]byte
	size := 0
	flush := func(last bool) {
		flags := uint16(0)
		if last {
			flags = my8StmtEnd
		}
		evs = append(evs, t.tableMap(), t.rows(typ, flags, imgs...))
		imgs, size = nil, 0
	}
	for id := 1; id <= n; id++ {
		row := [][]byte{my8LongRow(uint32(id), 0)}
		if update {
			row = append(row, my8LongRow(uint32(id), 12))
		}
		for _, img := range row {
			size += len(img)
		}
		imgs = append(imgs, row...)
		if size >= readBenchEventMax || id == n {
			flush(id == n)
		}
	}
	evs = append(evs, my8XID(1))
	w.txn(my8GTID{uuid: my8UUIDA, gno: 1, seq: 1, immediate: my8At(1, 0), original: my8At(1, 0)}, evs...)
	return w.bytes()
}

func benchReadStream(b *testing.B, data []byte, n int) {
	b.ReportAllocs()
	b.SetBytes(int64(len(data)))
	ctx := context.Background()
	for b.Loop() {
		rows := 0
		err := binlog.ReadStream(ctx, my8File1, bytes.NewReader(data), binlog.FileConfig{}, func(txn *binlog.Txn) error {
			rows += len(txn.Changes)
			txn.Release() // as sluice tail does once a chunk is printed
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
		if rows != n {
			b.Fatalf("read %d rows, want %d", rows, n)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/row")
}

func BenchmarkReadStreamLongInsert(b *testing.B) {
	benchReadStream(b, my8LongFile(readBenchRows, false), readBenchRows)
}

func BenchmarkReadStreamLongUpdate(b *testing.B) {
	benchReadStream(b, my8LongFile(readBenchRows, true), readBenchRows)
}

// TestReadStreamLongFile checks that the benchmark's file decodes to the
// rows it was written with.
func TestReadStreamLongFile(t *testing.T) {
	for _, update := range []bool{false, true} {
		txns, err := my8Read(t, my8File1, my8LongFile(500, update), binlog.FileConfig{})
		if err != nil {
			t.Fatal(err)
		}
		var changes []binlog.Change
		for _, txn := range txns {
			changes = append(changes, txn.Changes...)
		}
		if len(changes) != 500 {
			t.Fatalf("update=%v: %d changes, want 500", update, len(changes))
		}
		last := changes[499]
		row := last.After
		if got := len(row); got != 26 {
			t.Fatalf("update=%v: %d columns, want 26", update, got)
		}
		want6 := int64(0)
		if update {
			want6 = 12
			if last.Op != binlog.OpUpdate || last.Before[6].Int() != 0 {
				t.Errorf("update: op %v, before field6 %v", last.Op, last.Before[6])
			}
		}
		if row[0].Int() != 500 || row[6].Int() != want6 || string(row[5].Bytes()) != "short_string" ||
			string(row[25].Bytes()) != "another_short_string" || row[11].Float() != 1 || row[10].Uint() != 2 ||
			row[3].Kind() != binlog.KindEnum || row[3].Uint() != 1 || row[2].Kind() != binlog.KindTimestamp {
			t.Errorf("update=%v: last row %v", update, row)
		}
	}
}
