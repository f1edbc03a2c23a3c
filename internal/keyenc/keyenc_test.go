package keyenc

import (
	"bytes"
	"math"
	"math/big"
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/sluice-cdc/sluice/binlog"
)

func enc(t *testing.T, col *binlog.Column, v binlog.Value) []byte {
	t.Helper()
	b, ok := AppendValue(nil, col, v)
	if !ok {
		t.Fatalf("%v: no key", v)
	}
	if !Valid(b) {
		t.Fatalf("%v: encoding %x is not a valid key", v, b)
	}
	return b
}

// TestKeyEqualAcrossTypes: values MySQL compares equal across column
// types encode to the same key.
func TestKeyEqualAcrossTypes(t *testing.T) {
	latin1 := &binlog.Column{Charset: "latin1"}
	utf8 := &binlog.Column{Charset: "utf8mb4"}
	enum := &binlog.Column{Enum: []string{"new", "paid"}}
	groups := [][]struct {
		col *binlog.Column
		v   binlog.Value
	}{
		{{nil, binlog.IntValue(7)}, {nil, binlog.UintValue(7)}, {nil, binlog.BytesValue(binlog.KindDecimal, []byte("7.000"))},
			{nil, binlog.FloatValue(binlog.KindDouble, 7)}, {nil, binlog.FloatValue(binlog.KindFloat, 7)}, {nil, binlog.NumValue(binlog.KindYear, 7)}},
		{{nil, binlog.IntValue(-120)}, {nil, binlog.BytesValue(binlog.KindDecimal, []byte("-120.0"))}, {nil, binlog.FloatValue(binlog.KindDouble, -120)}},
		{{nil, binlog.BytesValue(binlog.KindDecimal, []byte("0.50"))}, {nil, binlog.FloatValue(binlog.KindDouble, 0.5)}},
		{{nil, binlog.IntValue(0)}, {nil, binlog.BytesValue(binlog.KindDecimal, []byte("-0.000"))}, {nil, binlog.FloatValue(binlog.KindDouble, math.Copysign(0, -1))}},
		{{latin1, binlog.BytesValue(binlog.KindString, []byte("caf\xe9"))}, {utf8, binlog.BytesValue(binlog.KindString, []byte("café"))}, {nil, binlog.BytesValue(binlog.KindBytes, []byte("café"))}},
		{{enum, binlog.NumValue(binlog.KindEnum, 2)}, {utf8, binlog.BytesValue(binlog.KindString, []byte("paid"))}},
		{{nil, binlog.DateValue(binlog.Date{Year: 2026, Month: 3, Day: 4})},
			{nil, binlog.DateTimeValue(binlog.DateTime{Date: binlog.Date{Year: 2026, Month: 3, Day: 4}})},
			{nil, binlog.TimestampValue(binlog.DaysFromCivil(2026, 3, 4)*86400, 0)}},
	}
	for i, g := range groups {
		first := enc(t, g[0].col, g[0].v)
		for _, m := range g[1:] {
			if b := enc(t, m.col, m.v); !bytes.Equal(b, first) {
				t.Errorf("group %d: %v encodes to %x, %v to %x", i, g[0].v, first, m.v, b)
			}
		}
		for j, h := range groups {
			if j != i && bytes.Equal(enc(t, h[0].col, h[0].v), first) {
				t.Errorf("groups %d and %d encode alike", i, j)
			}
		}
	}
	if _, ok := AppendValue(nil, nil, binlog.NullValue()); ok {
		t.Error("NULL made a key")
	}
}

// TestKeyOrder: numbers encode in numeric order, whatever their type, and
// no encoding is a prefix of another (so a key's range holds only it).
func TestKeyOrder(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	type num struct {
		v   binlog.Value
		val *big.Rat
	}
	var nums []num
	for range 3000 {
		var n num
		switch r.IntN(4) {
		case 0:
			i := r.Int64N(2_000_000) - 1_000_000
			if r.IntN(4) == 0 {
				i = int64(r.Uint64())
			}
			n.v, n.val = binlog.IntValue(i), new(big.Rat).SetInt64(i)
		case 1:
			u := r.Uint64() >> r.IntN(64)
			n.v, n.val = binlog.UintValue(u), new(big.Rat).SetUint64(u)
		case 2:
			s := strconv.FormatFloat((r.Float64()-0.5)*math.Pow(10, float64(r.IntN(12)-4)), 'f', r.IntN(8), 64)
			n.v = binlog.BytesValue(binlog.KindDecimal, []byte(s))
			n.val, _ = new(big.Rat).SetString(s)
		case 3:
			f := (r.Float64() - 0.5) * math.Pow(10, float64(r.IntN(40)-20))
			n.v = binlog.FloatValue(binlog.KindDouble, f)
			n.val = new(big.Rat).SetFloat64(f)
		}
		nums = append(nums, n)
	}
	for i := 0; i+1 < len(nums); i++ {
		a, b := nums[i], nums[i+1]
		ea, eb := enc(t, nil, a.v), enc(t, nil, b.v)
		if got, want := bytes.Compare(ea, eb), a.val.Cmp(b.val); got != want {
			t.Fatalf("%v (%s) vs %v (%s): bytes compare %d, values %d (%x, %x)", a.v, a.val.FloatString(10), b.v, b.val.FloatString(10), got, want, ea, eb)
		}
		if got := bytes.Compare(ea, eb); got != 0 && (bytes.HasPrefix(ea, eb) || bytes.HasPrefix(eb, ea)) {
			t.Fatalf("%x and %x: one is a prefix of the other", ea, eb)
		}
	}
	// Text: byte order, escaped zero bytes, prefix-free.
	texts := [][]byte{nil, {0}, {0, 0}, {0, 1}, {1}, []byte("a"), []byte("a\x00"), []byte("a\x00b"), []byte("ab"), {0xFF}, {0xFF, 0}}
	for _, a := range texts {
		for _, b := range texts {
			ea := enc(t, nil, binlog.BytesValue(binlog.KindBytes, a))
			eb := enc(t, nil, binlog.BytesValue(binlog.KindBytes, b))
			if bytes.Compare(ea, eb) != bytes.Compare(a, b) {
				t.Errorf("%q vs %q: encodings %x, %x out of order", a, b, ea, eb)
			}
			if !bytes.Equal(a, b) && bytes.HasPrefix(ea, eb) {
				t.Errorf("%x is a prefix of %x", eb, ea)
			}
		}
	}
	// Two-column keys stay prefix-free: ("a", 1) and ("a\x00", ...) differ.
	k1, _ := AppendValue(nil, nil, binlog.BytesValue(binlog.KindBytes, []byte("a")))
	k1, _ = AppendValue(k1, nil, binlog.IntValue(1))
	k2, _ := AppendValue(nil, nil, binlog.BytesValue(binlog.KindBytes, []byte("a\x00")))
	if bytes.HasPrefix(k1, k2) || bytes.HasPrefix(k2, k1) {
		t.Errorf("%x and %x: prefix", k1, k2)
	}
	// Dates and times order.
	d1 := enc(t, nil, binlog.DateTimeValue(binlog.DateTime{Date: binlog.Date{Year: 2025, Month: 12, Day: 31}, Hour: 23, Minute: 59, Second: 59, Micro: 999999}))
	d2 := enc(t, nil, binlog.DateValue(binlog.Date{Year: 2026, Month: 1, Day: 1}))
	if bytes.Compare(d1, d2) >= 0 {
		t.Error("2025-12-31 23:59:59.999999 does not sort before 2026-01-01")
	}
	t1 := enc(t, nil, binlog.TimeValue(-5))
	t2 := enc(t, nil, binlog.TimeValue(3))
	if bytes.Compare(t1, t2) >= 0 {
		t.Error("TIME -5µs does not sort before 3µs")
	}
}
