package snapshot

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"math"
	"testing"

	"github.com/go-mysql-org/go-mysql/mysql"

	"github.com/sluice-cdc/sluice/binlog"
)

// fuzzTable has a column of every layout the binary protocol has.
var fuzzTable = &binlog.Table{Schema: "f", Name: "t", Columns: []binlog.Column{
	{Name: "i", Kind: binlog.KindInt},
	{Name: "u", Kind: binlog.KindUint, Unsigned: true},
	{Name: "y", Kind: binlog.KindYear},
	{Name: "f", Kind: binlog.KindFloat},
	{Name: "d", Kind: binlog.KindDouble},
	{Name: "s", Kind: binlog.KindString, Charset: "utf8mb4"},
	{Name: "dt", Kind: binlog.KindDateTime},
	{Name: "ts", Kind: binlog.KindTimestamp},
	{Name: "tm", Kind: binlog.KindTime},
	{Name: "b", Kind: binlog.KindBit},
	{Name: "e", Kind: binlog.KindEnum, Enum: []string{"a", "b"}},
}}

var fuzzColumns = []column{
	{name: "i", typ: mysql.MYSQL_TYPE_TINY},
	{name: "u", typ: mysql.MYSQL_TYPE_LONGLONG, flags: mysql.UNSIGNED_FLAG},
	{name: "y", typ: mysql.MYSQL_TYPE_YEAR, flags: mysql.UNSIGNED_FLAG},
	{name: "f", typ: mysql.MYSQL_TYPE_FLOAT},
	{name: "d", typ: mysql.MYSQL_TYPE_DOUBLE},
	{name: "s", typ: mysql.MYSQL_TYPE_VAR_STRING},
	{name: "dt", typ: mysql.MYSQL_TYPE_DATETIME},
	{name: "ts", typ: mysql.MYSQL_TYPE_TIMESTAMP},
	{name: "tm", typ: mysql.MYSQL_TYPE_TIME},
	{name: "b", typ: mysql.MYSQL_TYPE_BIT},
	{name: "e", typ: mysql.MYSQL_TYPE_STRING},
}

func fuzzScanner(t testing.TB) *scanner {
	s := &scanner{t: fuzzTable, ctx: context.Background(), row: make(binlog.Row, len(fuzzTable.Columns))}
	if err := s.onColumns(fuzzColumns); err != nil {
		t.Fatal(s.err)
	}
	return s
}

// fuzzRow is a valid row of fuzzTable, with column null (if >= 0) NULL.
func fuzzRow(null int) []byte {
	p := []byte{0, 0, 0}
	if null >= 0 {
		p[1+(null+2)/8] |= 1 << ((null + 2) % 8)
	}
	add := func(i int, b ...byte) {
		if i != null {
			p = append(p, b...)
		}
	}
	add(0, 0xfe) // -2
	add(1, binary.LittleEndian.AppendUint64(nil, math.MaxUint64)...)
	add(2, 0xe8, 0x07)
	add(3, binary.LittleEndian.AppendUint32(nil, math.Float32bits(1.5))...)
	add(4, binary.LittleEndian.AppendUint64(nil, math.Float64bits(-0.25))...)
	add(5, 3, 'a', 'b', 'c')
	add(6, 7, 0xe4, 0x07, 2, 29, 23, 59, 58)
	add(7, 4, 0xb2, 0x07, 1, 1)
	add(8, 8, 1, 1, 0, 0, 0, 2, 3, 4)
	add(9, 2, 1, 0)
	add(10, 1, 'b')
	return p
}

func TestDecodeRow(t *testing.T) {
	s := fuzzScanner(t)
	if err := s.decode(fuzzRow(-1), s.row); err != nil {
		t.Fatal(err)
	}
	r := s.row
	if r[0].Int() != -2 || r[1].Uint() != math.MaxUint64 || r[2].Int() != 2024 || r[3].Float() != 1.5 || r[4].Float() != -0.25 ||
		string(r[5].Bytes()) != "abc" || r[6].DateTime().Second != 58 || r[9].Uint() != 256 || r[10].Uint() != 2 {
		t.Errorf("row %v", r)
	}
	if sec, _ := r[7].Timestamp(); sec != 0 {
		t.Errorf("timestamp 1970-01-01: %d", sec)
	}
	if us := r[8].Duration(); us != -((24+2)*3600+3*60+4)*1000000 {
		t.Errorf("time %d", us)
	}
	for i := range fuzzTable.Columns {
		if err := s.decode(fuzzRow(i), s.row); err != nil || !s.row[i].IsNull() {
			t.Errorf("column %d NULL: %v %v", i, err, s.row[i])
		}
	}
	full := fuzzRow(-1)
	for n := 0; n < len(full); n++ {
		if err := s.decode(full[:n], s.row); !errors.Is(err, errMalformed) {
			t.Errorf("%d of %d bytes: %v", n, len(full), err)
		}
	}
}

// FuzzDecodeRow: no packet makes the row decoder panic or read out of bounds.
func FuzzDecodeRow(f *testing.F) {
	f.Add(fuzzRow(-1))
	f.Add(fuzzRow(5))
	f.Add([]byte{0, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, p []byte) {
		s := fuzzScanner(t)
		_ = s.decode(p, s.row)
	})
}

// FuzzParseColumn: column definitions and length-encoded values of any
// bytes are rejected or parsed, never a panic.
func FuzzParseColumn(f *testing.F) {
	var def []byte
	for _, s := range []string{"def", "db", "t", "t", "name", "name"} {
		def = append(def, byte(len(s)))
		def = append(def, s...)
	}
	def = append(def, 0x0c, 0x21, 0, 10, 0, 0, 0, mysql.MYSQL_TYPE_LONG, 0x20, 0, 0, 0, 0)
	f.Add(def)
	f.Add([]byte{0xfe, 1, 2, 3})
	f.Add([]byte{0xfc, 0xff})
	f.Fuzz(func(t *testing.T, p []byte) {
		c, err := parseColumn(p)
		if err == nil && bytes.Equal(p, def) && (c.name != "name" || c.typ != mysql.MYSQL_TYPE_LONG || !c.unsigned()) {
			t.Errorf("parsed %+v", c)
		}
		_, _, _ = lenencBytes(p)
	})
}

// BenchmarkDecodeRow decodes a row of fuzzTable's eleven layouts.
func BenchmarkDecodeRow(b *testing.B) {
	s := fuzzScanner(b)
	p := fuzzRow(-1)
	b.SetBytes(int64(len(p)))
	b.ReportAllocs()
	for b.Loop() {
		if err := s.decode(p, s.row); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDecodeRowShort decodes a row of three INTs (short_table's).
func BenchmarkDecodeRowShort(b *testing.B) {
	tbl := &binlog.Table{Schema: "b", Name: "short_table", Columns: []binlog.Column{
		{Name: "id", Kind: binlog.KindInt}, {Name: "field1", Kind: binlog.KindInt}, {Name: "field2", Kind: binlog.KindInt}}}
	s := &scanner{t: tbl, ctx: context.Background(), row: make(binlog.Row, 3)}
	if err := s.onColumns([]column{{"id", mysql.MYSQL_TYPE_LONG, 0}, {"field1", mysql.MYSQL_TYPE_LONG, 0}, {"field2", mysql.MYSQL_TYPE_LONG, 0}}); err != nil {
		b.Fatal(s.err)
	}
	p := []byte{0, 0, 1, 2, 3, 0, 4, 5, 6, 0, 7, 8, 9, 0}
	b.ReportAllocs()
	for b.Loop() {
		if err := s.decode(p, s.row); err != nil {
			b.Fatal(err)
		}
	}
}
