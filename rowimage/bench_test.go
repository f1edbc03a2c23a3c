package rowimage

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/sluice-cdc/sluice/binlog"
	"github.com/sluice-cdc/sluice/codec"
	"github.com/sluice-cdc/sluice/position"
)

// benchTable is a typical table: a key, numbers, short and long text.
var benchTable = &binlog.Table{
	Schema: "shop", Name: "orders", PrimaryKey: []int{0},
	Columns: []binlog.Column{
		{Name: "id", Kind: binlog.KindInt},
		{Name: "customer", Kind: binlog.KindInt},
		{Name: "status", Kind: binlog.KindString, Charset: "utf8mb4"},
		{Name: "amount", Kind: binlog.KindDecimal, Precision: 10, Frac: 2},
		{Name: "qty", Kind: binlog.KindInt},
		{Name: "note", Kind: binlog.KindString, Charset: "utf8mb4"},
		{Name: "created", Kind: binlog.KindDateTime},
		{Name: "updated", Kind: binlog.KindDateTime},
	},
}

const benchRows = 100_000

func benchRow(id int64, rng *rand.Rand) binlog.Row {
	dt := binlog.DateTimeValue(binlog.DateTime{Date: binlog.Date{Year: 2026, Month: 1 + uint8(rng.IntN(12)), Day: 1 + uint8(rng.IntN(28))}, Hour: uint8(rng.IntN(24))})
	return binlog.Row{
		binlog.IntValue(id), binlog.IntValue(rng.Int64N(1e6)),
		binlog.BytesValue(binlog.KindString, []byte("shipped")),
		binlog.BytesValue(binlog.KindDecimal, []byte(fmt.Sprintf("%d.%02d", rng.IntN(10000), rng.IntN(100)))),
		binlog.IntValue(rng.Int64N(10)),
		binlog.BytesValue(binlog.KindString, []byte(fmt.Sprintf("note %d: leave at the door, ring twice, thanks", rng.Int64()))),
		dt, dt,
	}
}

// seeded opens a store holding benchRows rows, as a snapshot leaves it.
func seeded(b *testing.B) (*Store, *rand.Rand) {
	s, err := Open(b.TempDir(), nil)
	if err != nil {
		b.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	seq := uint64(1)
	for id := int64(0); id < benchRows; id += 1000 {
		t := &binlog.Txn{Snapshot: true}
		for j := id; j < id+1000; j++ {
			t.Changes = append(t.Changes, binlog.Change{Op: binlog.OpRead, Table: benchTable, After: benchRow(j, rng)})
		}
		if err := s.Fill(t, seq); err != nil {
			b.Fatal(err)
		}
		seq += 1000
	}
	return s, rng
}

// BenchmarkFill is the cost per change of an update of two columns in
// chunks of 100 changes: encoded in format debezium from FULL images
// without a store (full), and completed from the store from MINIMAL
// images, then encoded (fill). The store's size on disk per row after the
// seed (checkpointed and compacted) is reported as disk-B/row; the image
// and its key are 133 bytes (raw-B/row).
func BenchmarkFill(b *testing.B) {
	enc := codec.NewEncoder(codec.Source{Name: "db1"}, codec.WithFormat(codec.Format{Name: codec.FormatDebezium}))
	const chunk = 100
	mk := func(rng *rand.Rand, minimalImages bool) *binlog.Txn {
		t := &binlog.Txn{Begin: position.Position{File: "f", Offset: 4}, Last: true}
		for range chunk {
			id := rng.Int64N(benchRows)
			before := benchRow(id, rng)
			after := append(binlog.Row(nil), before...)
			after[4] = binlog.IntValue(rng.Int64N(10))
			after[7] = binlog.DateTimeValue(binlog.DateTime{Date: binlog.Date{Year: 2026, Month: 6, Day: 1}})
			if minimalImages {
				before = minimal(before)
				after = minimal(after, 4, 7)
			}
			t.Changes = append(t.Changes, binlog.Change{Op: binlog.OpUpdate, Table: benchTable, Before: before, After: after, File: "f", Pos: 4})
		}
		return t
	}
	var buf []byte
	b.Run("full", func(b *testing.B) {
		rng := rand.New(rand.NewPCG(3, 4))
		b.ReportAllocs()
		for i := 0; i < b.N; i += chunk {
			b.StopTimer()
			t := mk(rng, false)
			b.StartTimer()
			for j := range t.Changes {
				buf = enc.AppendChange(buf[:0], t, &t.Changes[j])
			}
		}
	})
	b.Run("fill", func(b *testing.B) {
		s, rng := seeded(b)
		defer s.Close()
		// The snapshot checkpointed: its undo records go, as in a run.
		if err := s.Trim(position.Position{File: "f", Offset: 4}, benchRows, 1); err != nil {
			b.Fatal(err)
		}
		if err := s.db.Flush(); err != nil {
			b.Fatal(err)
		}
		if err := s.db.Compact(b.Context(), []byte{0}, []byte{0xff}, false); err != nil {
			b.Fatal(err)
		}
		disk := s.Stats().DiskBytes
		seq := uint64(benchRows + 1)
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i += chunk {
			b.StopTimer()
			t := mk(rng, true)
			b.StartTimer()
			if err := s.Fill(t, seq); err != nil {
				b.Fatal(err)
			}
			seq += chunk
			for j := range t.Changes {
				buf = enc.AppendChange(buf[:0], t, &t.Changes[j])
			}
		}
		b.StopTimer()
		if err := s.Sync(); err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(disk)/benchRows, "disk-B/row")
		k, _ := rowKey(nil, benchTable, benchRow(1, rng))
		b.ReportMetric(float64(len(k)+len(appendImage(nil, 0, benchRow(1, rng)))), "raw-B/row")
	})
}
