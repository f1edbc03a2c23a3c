package codec

import (
	"bytes"
	"encoding/json"
	"math"
	"reflect"
	"strconv"
	"testing"
	"unicode/utf8"

	"github.com/sluice-cdc/sluice/binlog"
)

var fuzzCharsets = []string{"utf8mb4", "utf8mb3", "utf8", "ascii", "latin1", "ucs2", "utf16", "utf16le", "utf32", "binary", "", "Latin1"}

// FuzzAppendValue feeds random kinds, column settings and payloads to
// AppendValue, AppendRow and AppendChange and checks that the output is
// always valid JSON and valid UTF-8, and that a valid JSON document comes
// out meaning the same as it went in.
func FuzzAppendValue(f *testing.F) {
	f.Add(uint8(binlog.KindString), uint8(0), int8(0), uint64(0), []byte("hello"), "name")
	f.Add(uint8(binlog.KindString), uint8(4), int8(0), uint64(0), []byte("\x80\xff"), "n\"")
	f.Add(uint8(binlog.KindString), uint8(7), int8(0), uint64(0), []byte("\xd8\x3d\xde"), "n")
	f.Add(uint8(binlog.KindJSON), uint8(0), int8(0), uint64(0), []byte(`{"a": [1, 2.5, "x\u00e9"]}`), "j")
	f.Add(uint8(binlog.KindJSON), uint8(0), int8(0), uint64(0), []byte(`{"a":`), "j")
	f.Add(uint8(binlog.KindTimestamp), uint8(0), int8(6), uint64(1<<63), []byte(nil), "ts")
	f.Add(uint8(binlog.KindTime), uint8(0), int8(3), uint64(1<<63), []byte(nil), "t")
	f.Add(uint8(binlog.KindDateTime), uint8(0), int8(9), uint64(1<<64-1), []byte(nil), "dt")
	f.Add(uint8(binlog.KindDouble), uint8(0), int8(0), uint64(0x7FF8000000000001), []byte(nil), "d")
	f.Add(uint8(binlog.KindFloat), uint8(0), int8(0), uint64(0x47EFFFFFE0000000), []byte(nil), "f")
	f.Add(uint8(binlog.KindSet), uint8(0), int8(-1), uint64(0b1011), []byte("a,b\xff,c"), "s")
	f.Add(uint8(binlog.KindEnum), uint8(0), int8(0), uint64(2), []byte("x,y"), "e")
	f.Add(uint8(binlog.KindBytes), uint8(0), int8(0), uint64(0), []byte{0, 1, 2, 0xff}, "b")
	f.Add(uint8(binlog.KindDecimal), uint8(0), int8(0), uint64(0), []byte("-1.5\x00"), "dec")
	f.Add(uint8(binlog.KindVector), uint8(0), int8(0), uint64(0), []byte{0, 0, 0xc0, 0x3f, 0, 0, 0xc0, 0x7f, 1}, "v")
	f.Fuzz(func(t *testing.T, kind, charset uint8, frac int8, num uint64, data []byte, name string) {
		k := binlog.Kind(kind % 24) // a few kinds past the last known one
		col := binlog.Column{
			Name:    name,
			Kind:    k,
			Charset: fuzzCharsets[int(charset)%len(fuzzCharsets)],
			Frac:    int(frac),
		}
		if frac < 0 { // use the payload as member names
			names := bytes.Split(data, []byte(","))
			for _, n := range names[:min(len(names), 64)] {
				col.Enum = append(col.Enum, string(n))
				col.Set = append(col.Set, string(n))
			}
		}
		var v binlog.Value
		switch k {
		case binlog.KindDecimal, binlog.KindString, binlog.KindBytes, binlog.KindJSON, binlog.KindGeometry, binlog.KindVector:
			v = binlog.BytesValue(k, data)
		case binlog.KindNull:
			v = binlog.NullValue()
		case binlog.KindAbsent:
		default:
			v = binlog.NumValue(k, num)
		}

		out := AppendValue(nil, &col, v)
		check(t, "AppendValue", out)
		if k == binlog.KindJSON && json.Valid(data) && utf8.Valid(data) && len(bytes.TrimSpace(data)) > 0 {
			// Numbers as json.Number: valid JSON such as 1E1000 does not fit a float64.
			unmarshal := func(b []byte, v *any) error {
				d := json.NewDecoder(bytes.NewReader(b))
				d.UseNumber()
				return d.Decode(v)
			}
			var a, b any
			if err := unmarshal(data, &a); err != nil {
				t.Fatal(err)
			}
			if err := unmarshal(out, &b); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(a, b) {
				t.Fatalf("JSON %q came out as %q", data, out)
			}
		}

		tbl := &binlog.Table{Schema: name, Name: string(data), Columns: []binlog.Column{col, {Name: "id", Kind: binlog.KindInt}}, PrimaryKey: []int{1, 0}}
		row := binlog.Row{v, binlog.IntValue(int64(num))}
		check(t, "AppendRow", AppendRow(nil, tbl, row))
		check(t, "AppendKey", AppendKey(nil, tbl, row))

		enc := NewEncoder(Source{Name: name}, WithClock(fixedClock))
		txn := &binlog.Txn{GTID: string(data), ServerID: uint32(num)}
		for _, op := range []binlog.Op{binlog.OpInsert, binlog.OpUpdate, binlog.OpDelete, binlog.OpDDL, binlog.OpRead} {
			ch := binlog.Change{Op: op, Table: tbl, Before: row, After: row, File: name, Query: string(data), Schema: name}
			line := enc.AppendChange(nil, txn, &ch)
			if bytes.IndexByte(line, '\n') != len(line)-1 {
				t.Fatalf("%v: not one line: %q", op, line)
			}
			check(t, "AppendChange", line[:len(line)-1])
			if _, err := DecodeLine(line); err != nil {
				t.Fatalf("%v: DecodeLine: %v\n%s", op, err, line)
			}
		}
	})
}

func check(t *testing.T, what string, out []byte) {
	t.Helper()
	if !json.Valid(out) {
		t.Fatalf("%s: invalid JSON: %q", what, out)
	}
	if !utf8.Valid(out) {
		t.Fatalf("%s: invalid UTF-8: %q", what, out)
	}
}

// FuzzAppendFloat: appendFloat writes what strconv's shortest 'g' writes.
func FuzzAppendFloat(f *testing.F) {
	f.Add(uint64(0))
	f.Add(uint64(0x3ff0000000000000)) // 1
	f.Add(uint64(0x8000000000000000)) // -0
	f.Add(uint64(0x412e848000000000)) // 1e6
	f.Fuzz(func(t *testing.T, bits uint64) {
		g := math.Float64frombits(bits)
		if got, want := string(appendFloat(nil, g, 64)), strconv.FormatFloat(g, 'g', -1, 64); got != want {
			t.Errorf("%v: %s, want %s", g, got, want)
		}
		g32 := float64(math.Float32frombits(uint32(bits)))
		if got, want := string(appendFloat(nil, g32, 32)), strconv.FormatFloat(g32, 'g', -1, 32); got != want {
			t.Errorf("%v (32 bits): %s, want %s", g32, got, want)
		}
	})
}
