package binlog

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"github.com/go-mysql-org/go-mysql/mysql"
)

// jv is a JSON value to encode in MySQL's binary format (a test-side
// encoder written from the format description in json_binary.h).
type jv struct {
	t     byte // jsonb type of scalars; containers use obj/arr
	obj   bool
	arr   bool
	large bool // use the large container format
	keys  []string
	vals  []jv
	lit   byte
	i     int64
	u     uint64
	f     float64
	s     string
	ot    byte   // opaque field type
	ob    []byte // opaque payload
}

func jObj(large bool, kv ...any) jv {
	v := jv{obj: true, large: large}
	for i := 0; i < len(kv); i += 2 {
		v.keys = append(v.keys, kv[i].(string))
		v.vals = append(v.vals, kv[i+1].(jv))
	}
	return v
}
func jArr(large bool, vs ...jv) jv       { return jv{arr: true, large: large, vals: vs} }
func jLit(l byte) jv                     { return jv{t: jsonbLiteral, lit: l} }
func jInt(t byte, i int64) jv            { return jv{t: t, i: i} }
func jUint(t byte, u uint64) jv          { return jv{t: t, u: u} }
func jDouble(f float64) jv               { return jv{t: jsonbDouble, f: f} }
func jStr(s string) jv                   { return jv{t: jsonbString, s: s} }
func jOpaque(ft byte, payload []byte) jv { return jv{t: jsonbOpaque, ot: ft, ob: payload} }

// encodeJSONB returns a whole binary JSON document.
func encodeJSONB(v jv) []byte {
	t, b := encodeJV(v)
	return append([]byte{t}, b...)
}

func appendVarLen(dst []byte, n int) []byte {
	for {
		c := byte(n & 0x7f)
		n >>= 7
		if n == 0 {
			return append(dst, c)
		}
		dst = append(dst, c|0x80)
	}
}

// encodeJV returns the type and the stored bytes of v.
func encodeJV(v jv) (byte, []byte) {
	if v.obj || v.arr {
		return encodeContainer(v)
	}
	var b []byte
	switch v.t {
	case jsonbLiteral:
		b = []byte{v.lit}
	case jsonbInt16, jsonbUint16:
		b = binary.LittleEndian.AppendUint16(nil, uint16(v.i)|uint16(v.u))
	case jsonbInt32, jsonbUint32:
		b = binary.LittleEndian.AppendUint32(nil, uint32(v.i)|uint32(v.u))
	case jsonbInt64, jsonbUint64:
		b = binary.LittleEndian.AppendUint64(nil, uint64(v.i)|v.u)
	case jsonbDouble:
		b = binary.LittleEndian.AppendUint64(nil, math.Float64bits(v.f))
	case jsonbString:
		b = append(appendVarLen(nil, len(v.s)), v.s...)
	case jsonbOpaque:
		b = append(appendVarLen([]byte{v.ot}, len(v.ob)), v.ob...)
	default:
		panic("bad jv")
	}
	return v.t, b
}

func encodeContainer(v jv) (byte, []byte) {
	large := v.large
	osz := 2
	if large {
		osz = 4
	}
	n := len(v.vals)
	hdr := 2*osz + n*(1+osz)
	if v.obj {
		hdr += n * (2 + osz)
	}
	buf := make([]byte, hdr)
	put := func(at int, x int) {
		if large {
			binary.LittleEndian.PutUint32(buf[at:], uint32(x))
		} else {
			binary.LittleEndian.PutUint16(buf[at:], uint16(x))
		}
	}
	put(0, n)
	valEntries := 2 * osz
	if v.obj {
		valEntries += n * (2 + osz)
		for i, k := range v.keys {
			e := 2*osz + i*(2+osz)
			put(e, len(buf))
			binary.LittleEndian.PutUint16(buf[e+osz:], uint16(len(k)))
			buf = append(buf, k...)
		}
	}
	for i, val := range v.vals {
		t, b := encodeJV(val)
		e := valEntries + i*(1+osz)
		buf[e] = t
		if inlined(t, large) {
			copy(buf[e+1:e+1+osz], b)
			continue
		}
		put(e+1, len(buf))
		buf = append(buf, b...)
	}
	if !large && len(buf) > math.MaxUint16 {
		v.large = true
		return encodeContainer(v)
	}
	put(osz, len(buf))
	t := byte(jsonbSmallArray)
	if v.obj {
		t = jsonbSmallObject
	}
	if large {
		t++
	}
	return t, buf
}

// packDatetime returns MySQL's packed (longlong) representation of a
// DATETIME, the format of temporal values inside JSON documents.
func packDatetime(y, mo, d, h, mi, s, us int64) int64 {
	ymd := (y*13+mo)<<5 | d
	hms := h<<12 | mi<<6 | s
	return (ymd<<17|hms)<<24 + us
}

func packTime(neg bool, h, mi, s, us int64) int64 {
	p := (h<<12|mi<<6|s)<<24 + us
	if neg {
		p = -p
	}
	return p
}

func le64(x int64) []byte { return binary.LittleEndian.AppendUint64(nil, uint64(x)) }

func TestJSONBScalars(t *testing.T) {
	cases := []struct {
		name string
		v    jv
		want string
	}{
		{"null", jLit(jsonbNull), `null`},
		{"true", jLit(jsonbTrue), `true`},
		{"false", jLit(jsonbFalse), `false`},
		{"int16 min", jInt(jsonbInt16, math.MinInt16), `-32768`},
		{"int16 max", jInt(jsonbInt16, math.MaxInt16), `32767`},
		{"uint16 max", jUint(jsonbUint16, math.MaxUint16), `65535`},
		{"int32 min", jInt(jsonbInt32, math.MinInt32), `-2147483648`},
		{"uint32 max", jUint(jsonbUint32, math.MaxUint32), `4294967295`},
		{"int64 min", jInt(jsonbInt64, math.MinInt64), `-9223372036854775808`},
		{"int64 max", jInt(jsonbInt64, math.MaxInt64), `9223372036854775807`},
		{"uint64 max", jUint(jsonbUint64, math.MaxUint64), `18446744073709551615`},
		{"double", jDouble(3.14), `3.14`},
		{"double integral", jDouble(2), `2.0`},
		{"double negative zero", jDouble(math.Copysign(0, -1)), `-0.0`},
		{"double zero", jDouble(0), `0.0`},
		{"double big", jDouble(1e21), `1e21`},
		{"double 21 digits", jDouble(123456789012345678901), `1.2345678901234568e20`},
		{"double tiny", jDouble(1.5e-7), `0.00000015`},
		{"double 1e-15", jDouble(1e-15), `0.000000000000001`},
		{"double 1e-16", jDouble(1e-16), `1e-16`},
		{"double 1e14", jDouble(1e14), `100000000000000.0`},
		{"double 1e15", jDouble(1e15), `1e15`},
		{"double 16 digits before the point", jDouble(1234567890123456.7), `1234567890123456.8`},
		{"double 18 digits", jDouble(123456789012345678), `1.2345678901234568e17`},
		{"double negative tiny", jDouble(-1.5e-7), `-0.00000015`},
		{"double 1e-6", jDouble(1e-6), `0.000001`},
		{"double max", jDouble(math.MaxFloat64), `1.7976931348623157e308`},
		{"double min", jDouble(-5e-324), `-5e-324`},
		{"double third", jDouble(1.0 / 3), `0.3333333333333333`},
		{"string", jStr("hello"), `"hello"`},
		{"empty string", jStr(""), `""`},
		{"string escapes", jStr("a\"b\\c\n\r\t\b\f\x00\x1f\x7f/"), `"a\"b\\c\n\r\t\b\f\u0000\u001f` + "\x7f" + `/"`},
		{"string utf8mb4", jStr("żółw 🐢 €"), `"żółw 🐢 €"`},
		{"long string", jStr(strings.Repeat("x", 300)), `"` + strings.Repeat("x", 300) + `"`},
		{"decimal", jOpaque(mysql.MYSQL_TYPE_NEWDECIMAL, append([]byte{5, 2}, encodeDecimalText("-12.34", 5, 2)...)), `-12.34`},
		{"decimal scale zeros", jOpaque(mysql.MYSQL_TYPE_NEWDECIMAL, append([]byte{4, 2}, encodeDecimalText("1.50", 4, 2)...)), `1.50`},
		{"decimal 65,30", jOpaque(mysql.MYSQL_TYPE_NEWDECIMAL, append([]byte{65, 30}, encodeDecimalText(strings.Repeat("9", 35)+"."+strings.Repeat("9", 30), 65, 30)...)),
			strings.Repeat("9", 35) + "." + strings.Repeat("9", 30)},
		{"date", jOpaque(mysql.MYSQL_TYPE_DATE, le64(packDatetime(2024, 2, 29, 0, 0, 0, 0))), `"2024-02-29"`},
		{"zero date", jOpaque(mysql.MYSQL_TYPE_DATE, le64(0)), `"0000-00-00"`},
		{"datetime", jOpaque(mysql.MYSQL_TYPE_DATETIME, le64(packDatetime(1999, 12, 31, 23, 59, 58, 123456))), `"1999-12-31 23:59:58.123456"`},
		{"timestamp", jOpaque(mysql.MYSQL_TYPE_TIMESTAMP, le64(packDatetime(2038, 1, 19, 3, 14, 7, 0))), `"2038-01-19 03:14:07.000000"`},
		{"time", jOpaque(mysql.MYSQL_TYPE_TIME, le64(packTime(false, 12, 34, 56, 7))), `"12:34:56.000007"`},
		{"negative time", jOpaque(mysql.MYSQL_TYPE_TIME, le64(packTime(true, 838, 59, 59, 0))), `"-838:59:59.000000"`},
		{"zero time", jOpaque(mysql.MYSQL_TYPE_TIME, le64(0)), `"00:00:00.000000"`},
		{"opaque blob", jOpaque(mysql.MYSQL_TYPE_BLOB, []byte{0, 1, 0xfe, 0xff}), `"base64:type252:AAH+/w=="`},
		{"opaque bit empty", jOpaque(mysql.MYSQL_TYPE_BIT, nil), `"base64:type16:"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			doc := encodeJSONB(c.v)
			got, err := appendJSONB([]byte("prefix:"), doc)
			if err != nil {
				t.Fatalf("appendJSONB(%x): %v", doc, err)
			}
			if string(got) != "prefix:"+c.want {
				t.Fatalf("appendJSONB = %s, want %s", got[7:], c.want)
			}
			// The same value inside a small and a large array.
			for _, large := range []bool{false, true} {
				got, err := appendJSONB(nil, encodeJSONB(jArr(large, c.v, c.v)))
				if err != nil || string(got) != "["+c.want+","+c.want+"]" {
					t.Fatalf("in array (large=%v): %s, %v", large, got, err)
				}
			}
		})
	}
}

func TestJSONBContainers(t *testing.T) {
	nested := jObj(false,
		"a", jInt(jsonbInt16, 1),
		"bb", jArr(false, jLit(jsonbTrue), jLit(jsonbFalse), jLit(jsonbNull), jInt(jsonbInt32, -70000), jUint(jsonbUint32, 70000)),
		"ccc", jObj(true, "x", jStr("y"), "zz", jArr(true, jInt(jsonbInt32, 5), jUint(jsonbUint16, 6), jDouble(0.5))),
		"", jObj(false),
		"k\"\n", jArr(false),
	)
	const nestedText = `{"a":1,"bb":[true,false,null,-70000,70000],"ccc":{"x":"y","zz":[5,6,0.5]},"":{},"k\"\n":[]}`
	cases := []struct {
		name string
		v    jv
		want string
	}{
		{"empty object", jObj(false), `{}`},
		{"empty large object", jObj(true), `{}`},
		{"empty array", jArr(false), `[]`},
		{"empty large array", jArr(true), `[]`},
		{"nested", nested, nestedText},
		{"array of nested", jArr(true, nested, nested), `[` + nestedText + `,` + nestedText + `]`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := appendJSONB(nil, encodeJSONB(c.v))
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != c.want {
				t.Fatalf("got  %s\nwant %s", got, c.want)
			}
		})
	}

	// A small array that outgrows 64 KiB is stored in the large format.
	var big []jv
	for i := range 5000 {
		big = append(big, jStr(fmt.Sprintf("%020d", i)))
	}
	got, err := appendJSONB(nil, encodeJSONB(jArr(false, big...)))
	if err != nil {
		t.Fatal(err)
	}
	var back []string
	if err := json.Unmarshal(got, &back); err != nil || len(back) != 5000 || back[4999] != fmt.Sprintf("%020d", 4999) {
		t.Fatalf("large array: %v, %d elements", err, len(back))
	}
}

func TestJSONBEmptyDocument(t *testing.T) {
	got, err := appendJSONB(nil, nil)
	if err != nil || string(got) != "null" {
		t.Fatalf("empty document: %q, %v", got, err)
	}
}

func TestJSONBDepth(t *testing.T) {
	nest := func(n int) []byte {
		v := jArr(false)
		for range n - 1 {
			v = jArr(false, v)
		}
		return encodeJSONB(v)
	}
	got, err := appendJSONB(nil, nest(100))
	if err != nil {
		t.Fatalf("100 levels: %v", err)
	}
	if want := strings.Repeat("[", 100) + strings.Repeat("]", 100); string(got) != want {
		t.Fatalf("100 levels: %s", got)
	}
	if _, err := appendJSONB(nil, nest(101)); !errors.Is(err, ErrCorruptJSON) {
		t.Fatalf("101 levels: err = %v, want ErrCorruptJSON", err)
	}
}

func TestJSONBCorrupt(t *testing.T) {
	valid := encodeJSONB(jObj(false, "key", jStr("value"), "n", jInt(jsonbInt64, 7), "d", jOpaque(mysql.MYSQL_TYPE_DATE, le64(0))))
	// Every truncation of a valid document fails cleanly.
	for n := 1; n < len(valid); n++ {
		if out, err := appendJSONB(nil, valid[:n]); err == nil {
			t.Errorf("truncated to %d bytes: no error, got %s", n, out)
		}
	}
	cases := map[string][]byte{
		"unknown type":           {0x0d},
		"bad literal":            {jsonbLiteral, 0x03},
		"short int64":            {jsonbInt64, 1, 2, 3},
		"string too long":        {jsonbString, 0x05, 'a'},
		"varlen unterminated":    {jsonbString, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01},
		"varlen too big":         {jsonbString, 0xff, 0xff, 0xff, 0xff, 0x7f},
		"nan":                    append([]byte{jsonbDouble}, le64(int64(math.Float64bits(math.NaN())))...),
		"inf":                    append([]byte{jsonbDouble}, le64(int64(math.Float64bits(math.Inf(1))))...),
		"size beyond data":       {jsonbSmallArray, 0, 0, 0xff, 0},
		"count beyond size":      {jsonbSmallArray, 9, 0, 4, 0},
		"value offset in header": {jsonbSmallArray, 1, 0, 7, 0, jsonbString, 0, 0},
		"value offset past end":  {jsonbSmallArray, 1, 0, 7, 0, jsonbString, 7, 0},
		"key past end":           {jsonbSmallObject, 1, 0, 11, 0, 11, 0, 5, 0, jsonbLiteral, 0, 0},
		"bad decimal prec":       append([]byte{jsonbOpaque, mysql.MYSQL_TYPE_NEWDECIMAL, 3, 70, 2}, 0),
		"bad decimal digits":     {jsonbOpaque, mysql.MYSQL_TYPE_NEWDECIMAL, 3, 2, 0, 0x80 | 0x7f},
		"short datetime":         {jsonbOpaque, mysql.MYSQL_TYPE_DATETIME, 2, 0, 0},
		"bad time micros":        append([]byte{jsonbOpaque, mysql.MYSQL_TYPE_TIME, 8}, le64(2000000)...),
	}
	for name, doc := range cases {
		if out, err := appendJSONB(nil, doc); !errors.Is(err, ErrCorruptJSON) {
			t.Errorf("%s: got %q, %v; want ErrCorruptJSON", name, out, err)
		}
	}
}

// TestJSONBSharedValues checks that a corrupt document whose entries all
// point at the same nested value cannot make the output explode.
func TestJSONBSharedValues(t *testing.T) {
	// Each level is a small array of 4 entries pointing at the same child,
	// which follows the header: 2^(2*levels) leaves if followed naively.
	const levels = 40
	var typ byte = jsonbSmallArray
	body := []byte{0, 0, 4, 0} // the innermost: empty array
	for range levels {
		hdr := 4 + 4*3
		b := make([]byte, hdr, hdr+len(body))
		binary.LittleEndian.PutUint16(b, 4)
		binary.LittleEndian.PutUint16(b[2:], uint16(hdr+len(body)))
		for i := range 4 {
			b[4+3*i] = typ
			binary.LittleEndian.PutUint16(b[5+3*i:], uint16(hdr))
		}
		body = append(b, body...)
	}
	out, err := appendJSONB(nil, append([]byte{typ}, body...))
	if !errors.Is(err, ErrCorruptJSON) {
		t.Fatalf("shared values: err = %v (output %d bytes)", err, len(out))
	}
}

// randJV returns a random JSON value; depth bounds nesting.
func randJV(r *rand.Rand, depth int) jv {
	k := r.IntN(16)
	if depth <= 0 && k < 2 {
		k = 2 + r.IntN(14)
	}
	switch k {
	case 0:
		n := r.IntN(6)
		v := jObj(r.IntN(4) == 0)
		seen := map[string]bool{}
		for range n {
			key := randJSONString(r, 8)
			if seen[key] {
				continue
			}
			seen[key] = true
			v.keys = append(v.keys, key)
			v.vals = append(v.vals, randJV(r, depth-1))
		}
		return v
	case 1:
		n := r.IntN(6)
		v := jArr(r.IntN(4) == 0)
		for range n {
			v.vals = append(v.vals, randJV(r, depth-1))
		}
		return v
	case 2:
		return jLit(byte(r.IntN(3)))
	case 3:
		return jInt(jsonbInt16, int64(int16(r.Uint32())))
	case 4:
		return jUint(jsonbUint16, uint64(uint16(r.Uint32())))
	case 5:
		return jInt(jsonbInt32, int64(int32(r.Uint32())))
	case 6:
		return jUint(jsonbUint32, uint64(r.Uint32()))
	case 7:
		return jInt(jsonbInt64, int64(r.Uint64()))
	case 8:
		return jUint(jsonbUint64, r.Uint64())
	case 9:
		return jDouble(randDouble(r))
	case 10, 11:
		return jStr(randJSONString(r, 40))
	case 12:
		prec := 1 + r.IntN(65)
		scale := r.IntN(min(prec, 30) + 1)
		text := randDecimalText(r, prec, scale)
		return jOpaque(mysql.MYSQL_TYPE_NEWDECIMAL, append([]byte{byte(prec), byte(scale)}, encodeDecimalText(text, prec, scale)...))
	case 13:
		ft := []byte{mysql.MYSQL_TYPE_DATE, mysql.MYSQL_TYPE_DATETIME, mysql.MYSQL_TYPE_TIMESTAMP}[r.IntN(3)]
		p := packDatetime(int64(r.IntN(10000)), int64(r.IntN(13)), int64(r.IntN(32)), int64(r.IntN(24)), int64(r.IntN(60)), int64(r.IntN(60)), int64(r.IntN(1000000)))
		if ft == mysql.MYSQL_TYPE_DATE {
			p &^= 1<<41 - 1 // no time of day
		}
		return jOpaque(ft, le64(p))
	case 14:
		// Not the zero TIME: go-mysql prints it without fraction.
		return jOpaque(mysql.MYSQL_TYPE_TIME, le64(packTime(r.IntN(2) == 0, int64(r.IntN(839)), int64(r.IntN(60)), int64(1+r.IntN(59)), int64(r.IntN(1000000)))))
	default:
		b := make([]byte, r.IntN(20))
		for i := range b {
			b[i] = byte(r.Uint32())
		}
		return jOpaque([]byte{mysql.MYSQL_TYPE_BLOB, mysql.MYSQL_TYPE_BIT, mysql.MYSQL_TYPE_VARCHAR, mysql.MYSQL_TYPE_GEOMETRY}[r.IntN(4)], b)
	}
}

func randDouble(r *rand.Rand) float64 {
	switch r.IntN(4) {
	case 0:
		return float64(r.IntN(2000000) - 1000000)
	case 1:
		return (r.Float64() - 0.5) * math.Pow(10, float64(r.IntN(40)-20))
	case 2:
		return []float64{0, math.MaxFloat64, -math.MaxFloat64, math.SmallestNonzeroFloat64, 1e21, 1e-7, 0.1, 1e300}[r.IntN(8)]
	}
	for {
		f := math.Float64frombits(r.Uint64())
		if !math.IsNaN(f) && !math.IsInf(f, 0) {
			return f
		}
	}
}

// randJSONString returns valid UTF-8 with characters JSON must escape.
func randJSONString(r *rand.Rand, maxLen int) string {
	pieces := []string{"a", "Z", "0", " ", "\"", "\\", "/", "\n", "\t", "\x00", "\x1f", "\x7f", "é", "€", "🐢", "𝄞", "<", "&", "\u2028"}
	var sb strings.Builder
	for range r.IntN(maxLen + 1) {
		sb.WriteString(pieces[r.IntN(len(pieces))])
	}
	return sb.String()
}

// checkJSONText parses text (which must be valid JSON) and compares it with
// v: structure, key order, strings exactly, numbers by value.
func checkJSONText(text []byte, v jv) error {
	dec := json.NewDecoder(bytes.NewReader(text))
	dec.UseNumber()
	if err := checkJV(dec, v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("trailing data")
	}
	return nil
}

func checkJV(dec *json.Decoder, v jv) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	switch {
	case v.obj:
		if tok != json.Delim('{') {
			return fmt.Errorf("got %v, want object", tok)
		}
		for i, k := range v.keys {
			kt, err := dec.Token()
			if err != nil {
				return err
			}
			if kt != k {
				return fmt.Errorf("key %d = %q, want %q", i, kt, k)
			}
			if err := checkJV(dec, v.vals[i]); err != nil {
				return fmt.Errorf("%q: %w", k, err)
			}
		}
		if tok, err := dec.Token(); err != nil || tok != json.Delim('}') {
			return fmt.Errorf("object end: %v %v", tok, err)
		}
		return nil
	case v.arr:
		if tok != json.Delim('[') {
			return fmt.Errorf("got %v, want array", tok)
		}
		for i, e := range v.vals {
			if err := checkJV(dec, e); err != nil {
				return fmt.Errorf("[%d]: %w", i, err)
			}
		}
		if tok, err := dec.Token(); err != nil || tok != json.Delim(']') {
			return fmt.Errorf("array end: %v %v", tok, err)
		}
		return nil
	}
	var want any
	switch v.t {
	case jsonbLiteral:
		want = []any{nil, true, false}[v.lit]
	case jsonbInt16, jsonbInt32, jsonbInt64:
		want = json.Number(strconv.FormatInt(v.i, 10))
	case jsonbUint16, jsonbUint32, jsonbUint64:
		want = json.Number(strconv.FormatUint(v.u, 10))
	case jsonbDouble:
		n, ok := tok.(json.Number)
		if !ok {
			return fmt.Errorf("got %v, want double %v", tok, v.f)
		}
		f, err := strconv.ParseFloat(string(n), 64)
		if err != nil || f != v.f || math.Signbit(f) != math.Signbit(v.f) {
			return fmt.Errorf("got %v, want double %v", n, v.f)
		}
		return nil
	case jsonbString:
		want = v.s
	case jsonbOpaque:
		switch v.ot {
		case mysql.MYSQL_TYPE_NEWDECIMAL:
			s, _ := appendDecimal(nil, v.ob[2:], int(v.ob[0]), int(v.ob[1]))
			want = json.Number(s)
		case mysql.MYSQL_TYPE_DATE, mysql.MYSQL_TYPE_DATETIME, mysql.MYSQL_TYPE_TIMESTAMP, mysql.MYSQL_TYPE_TIME:
			if _, ok := tok.(string); !ok {
				return fmt.Errorf("got %v, want a temporal string", tok)
			}
			return nil
		default:
			want = "base64:type" + strconv.Itoa(int(v.ot)) + ":" + base64Std(v.ob)
		}
	}
	if tok != want {
		return fmt.Errorf("got %#v, want %#v", tok, want)
	}
	return nil
}

func TestJSONBRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 3000 {
		v := randJV(r, 6)
		doc := encodeJSONB(v)
		got, err := appendJSONB(nil, doc)
		if err != nil {
			t.Fatalf("doc %d: %v\n%x", i, err, doc)
		}
		if !json.Valid(got) {
			t.Fatalf("doc %d: invalid JSON %s", i, got)
		}
		if err := checkJSONText(got, v); err != nil {
			t.Fatalf("doc %d: %v\n%s", i, err, got)
		}
	}
}

func BenchmarkJSONB(b *testing.B) {
	doc := encodeJSONB(jObj(false,
		"id", jInt(jsonbInt32, 123456),
		"name", jStr("a reasonably short name"),
		"tags", jArr(false, jStr("x"), jStr("y"), jStr("z")),
		"price", jDouble(19.99),
		"nested", jObj(false, "ok", jLit(jsonbTrue), "n", jLit(jsonbNull)),
	))
	buf := make([]byte, 0, 1024)
	b.ReportAllocs()
	b.SetBytes(int64(len(doc)))
	for b.Loop() {
		var err error
		if buf, err = appendJSONB(buf[:0], doc); err != nil {
			b.Fatal(err)
		}
	}
}

// A string or key that is not valid UTF-8 is a corrupt document: MySQL
// stores JSON as utf8mb4, so such bytes mean a damaged event, and
// replacing them would change the value in silence.
func TestJSONBInvalidUTF8(t *testing.T) {
	for name, doc := range map[string]jv{
		"string":        jStr("ab\xffcd"),
		"nested string": jArr(false, jInt(jsonbInt16, 1), jObj(false, "k", jStr("\xc3("))),
		"key":           jObj(false, "k\xe2\x82", jLit(jsonbNull)),
		"surrogate":     jStr("\xed\xa0\x80"),
	} {
		out, err := appendJSONB(nil, encodeJSONB(doc))
		if !errors.Is(err, ErrCorruptJSON) || !strings.Contains(err.Error(), "not valid UTF-8") {
			t.Errorf("%s: got %q, %v; want an ErrCorruptJSON saying the bytes are not valid UTF-8", name, out, err)
		}
	}
	// Valid multi-byte text passes as it is.
	out, err := appendJSONB(nil, encodeJSONB(jObj(false, "clé", jStr("naïve ☃ 😀"))))
	if err != nil || string(out) != `{"clé":"naïve ☃ 😀"}` {
		t.Fatalf("got %q, %v", out, err)
	}
}
