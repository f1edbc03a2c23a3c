package codec

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"math"
	"math/big"
	"reflect"
	"regexp"
	"strconv"
	"strings"
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

		// Format debezium, in a mode picked by the input, with and
		// without schemas; the column's type code, BIT width and
		// metadata also come from the input.
		modes := []Format{{}, {DecimalHandling: DecimalString}, {DecimalHandling: DecimalDouble}, {TimePrecision: TimeConnect},
			{BigintUnsigned: BigintPrecise}, {BinaryHandling: BinaryBase64}, {BinaryHandling: BinaryHex}}
		f := modes[int(charset)%len(modes)]
		f.Name, f.Schemas = FormatDebezium, num&1 != 0
		dcol := col
		dcol.Type, dcol.BitLen, dcol.Meta, dcol.Nullable = byte(num>>8), int(num>>16)%70, uint16(num>>24), num&2 != 0
		dcol.Precision = int(num>>40) % 70
		dtbl := &binlog.Table{Schema: name, Name: string(data), Columns: []binlog.Column{dcol, {Name: "id", Kind: binlog.KindInt}}, PrimaryKey: []int{1, 0}}
		denc := NewEncoder(Source{Name: name}, WithFormat(f), WithClock(fixedClock))
		for _, op := range []binlog.Op{binlog.OpInsert, binlog.OpUpdate, binlog.OpDelete, binlog.OpDDL, binlog.OpRead} {
			ch := binlog.Change{Op: op, Table: dtbl, Before: row, After: row, File: name, Query: string(data), Schema: name}
			line := denc.AppendDebeziumChange(nil, txn, &ch, SnapshotAuto, &TxnOrder{ID: string(data), TotalOrder: int64(num)})
			if bytes.IndexByte(line, '\n') != len(line)-1 {
				t.Fatalf("debezium %v: not one line: %q", op, line)
			}
			check(t, "debezium AppendChange", line[:len(line)-1])
			check(t, "debezium AppendKey", denc.AppendKey(nil, &ch))
		}
		check(t, "debezium AppendTruncate", bytes.TrimSuffix(denc.AppendTruncate(nil, txn, &binlog.Change{Op: binlog.OpDDL, Table: dtbl}, nil), []byte("\n")))
	})
}

// FuzzAppendJavaFloat: appendJavaFloat writes Java's layout of a number
// that reads back as the same float64 or float32.
func FuzzAppendJavaFloat(f *testing.F) {
	f.Add(uint64(0))
	f.Add(uint64(0x3ff0000000000000)) // 1
	f.Add(uint64(0x8000000000000000)) // -0
	f.Add(uint64(1))                  // smallest subnormal
	f.Add(uint64(0x44b52d02c7e14af6)) // 1e23
	java := regexp.MustCompile(`^-?(\d+\.\d+|\d\.\d+E-?\d+)$`)
	f.Fuzz(func(t *testing.T, bits uint64) {
		for _, size := range []int{64, 32} {
			g := math.Float64frombits(bits)
			if size == 32 {
				g = float64(math.Float32frombits(uint32(bits)))
			}
			if math.IsNaN(g) || math.IsInf(g, 0) {
				continue
			}
			out := string(appendJavaFloat(nil, g, size))
			if !java.MatchString(out) {
				t.Fatalf("%v: %q is not Java's layout", g, out)
			}
			back, err := strconv.ParseFloat(out, size)
			if err != nil || back != g || math.Signbit(back) != math.Signbit(g) {
				t.Fatalf("%v (%d bits): %q reads back as %v, %v", g, size, out, back, err)
			}
			a := math.Abs(g)
			if plain := !strings.Contains(out, "E"); plain != (a == 0 || a >= 1e-3 && a < 1e7) {
				t.Fatalf("%v: %q: plain layout is for 1e-3 <= |f| < 1e7", g, out)
			}
		}
	})
}

// FuzzDecimalBytes: the precise decimal encoding is the two's complement
// of the unscaled value at the column's scale, minimal as Java's
// BigInteger.toByteArray.
func FuzzDecimalBytes(f *testing.F) {
	f.Add("-12.34", uint8(2))
	f.Add("0", uint8(0))
	f.Add("-99999999999999999999999999999999999.999999999999999999999999999999", uint8(30))
	f.Add("128", uint8(0))
	f.Add("-128.5", uint8(1))
	f.Fuzz(func(t *testing.T, text string, scale uint8) {
		sc := int(scale % 39)
		col := binlog.Column{Kind: binlog.KindDecimal, Precision: 65, Frac: sc}
		d := &dbzState{opts: Format{Name: FormatDebezium}.dbzOpts()}
		out := d.appendDecimal(nil, &col, []byte(text))
		check(t, "decimal", out)
		r, ok := new(big.Rat).SetString(text)
		if !ok || strings.ContainsAny(text, "eE/ _xXoObBpP") || text == "" || text[len(text)-1] == '.' || text[0] == '.' ||
			strings.HasPrefix(text, "-.") || strings.HasPrefix(text, "+.") || strings.HasPrefix(text, "+") {
			return // not MySQL's decimal text
		}
		var s string
		if err := json.Unmarshal(out, &s); err != nil {
			t.Fatalf("%q: %s: %v", text, out, err)
		}
		b, err := base64.StdEncoding.DecodeString(s)
		if err != nil || len(b) == 0 {
			t.Fatalf("%q: %s: %v", text, out, err)
		}
		got := new(big.Int).SetBytes(b)
		if b[0]&0x80 != 0 {
			got.Sub(got, new(big.Int).Lsh(big.NewInt(1), uint(8*len(b))))
		}
		// Minimal: the first byte is not a redundant sign byte.
		if len(b) > 1 && (b[0] == 0 && b[1]&0x80 == 0 || b[0] == 0xff && b[1]&0x80 != 0) {
			t.Fatalf("%q: % x is not minimal", text, b)
		}
		want := new(big.Int).Quo(new(big.Int).Mul(r.Num(), new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(sc)), nil)), r.Denom())
		if got.Cmp(want) != 0 {
			t.Fatalf("%q scale %d: unscaled %v, want %v", text, sc, got, want)
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
