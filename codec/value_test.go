package codec

import (
	"encoding/json"
	"math"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/sluice-cdc/sluice/binlog"
	"github.com/sluice-cdc/sluice/internal/charset"
)

type valueCase struct {
	name string
	col  binlog.Column
	v    binlog.Value
	want string
}

func str(k binlog.Kind, s string) binlog.Value { return binlog.BytesValue(k, []byte(s)) }

func dt(y uint16, mo, d, h, mi, s uint8, us uint32) binlog.Value {
	return binlog.DateTimeValue(binlog.DateTime{Date: binlog.Date{Year: y, Month: mo, Day: d}, Hour: h, Minute: mi, Second: s, Micro: us})
}

func frac(n int) binlog.Column     { return binlog.Column{Frac: n} }
func cs(name string) binlog.Column { return binlog.Column{Charset: name} }

const (
	us  = int64(1)
	sec = 1000000 * us
	hr  = 3600 * sec
)

var valueCases = []valueCase{
	// Integers.
	{"int zero", binlog.Column{}, binlog.IntValue(0), `0`},
	{"int neg", binlog.Column{}, binlog.IntValue(-42), `-42`},
	{"int64 min", binlog.Column{}, binlog.IntValue(math.MinInt64), `-9223372036854775808`},
	{"int64 max", binlog.Column{}, binlog.IntValue(math.MaxInt64), `9223372036854775807`},
	{"bigint unsigned max", binlog.Column{}, binlog.UintValue(math.MaxUint64), `18446744073709551615`},
	{"uint zero", binlog.Column{}, binlog.UintValue(0), `0`},
	{"year", binlog.Column{}, binlog.NumValue(binlog.KindYear, 2024), `2024`},
	{"year zero", binlog.Column{}, binlog.NumValue(binlog.KindYear, 0), `0`},
	{"bit", binlog.Column{BitLen: 64}, binlog.NumValue(binlog.KindBit, math.MaxUint64), `18446744073709551615`},
	{"bit 5", binlog.Column{BitLen: 8}, binlog.NumValue(binlog.KindBit, 5), `5`},

	// Decimals.
	{"decimal", binlog.Column{}, str(binlog.KindDecimal, "-12.3400"), `"-12.3400"`},
	{"decimal 65,30", binlog.Column{Precision: 65, Frac: 30},
		str(binlog.KindDecimal, "-99999999999999999999999999999999999.999999999999999999999999999999"),
		`"-99999999999999999999999999999999999.999999999999999999999999999999"`},
	{"decimal 65,30 small", binlog.Column{Precision: 65, Frac: 30},
		str(binlog.KindDecimal, "0.000000000000000000000000000001"), `"0.000000000000000000000000000001"`},
	{"decimal zero", binlog.Column{}, str(binlog.KindDecimal, "0"), `"0"`},

	// Floats.
	{"float 0.1", binlog.Column{}, binlog.FloatValue(binlog.KindFloat, float64(float32(0.1))), `0.1`},
	{"float 1.5", binlog.Column{}, binlog.FloatValue(binlog.KindFloat, 1.5), `1.5`},
	{"float max", binlog.Column{}, binlog.FloatValue(binlog.KindFloat, math.MaxFloat32), `3.4028235e+38`},
	{"float tiny", binlog.Column{}, binlog.FloatValue(binlog.KindFloat, 1e-7), `1e-07`},
	{"float neg zero", binlog.Column{}, binlog.FloatValue(binlog.KindFloat, math.Copysign(0, -1)), `-0`},
	{"float overflow", binlog.Column{}, binlog.FloatValue(binlog.KindFloat, 1e300), `null`},
	{"float nan", binlog.Column{}, binlog.FloatValue(binlog.KindFloat, math.NaN()), `null`},
	{"double 0.1", binlog.Column{}, binlog.FloatValue(binlog.KindDouble, 0.1), `0.1`},
	{"double pi", binlog.Column{}, binlog.FloatValue(binlog.KindDouble, math.Pi), `3.141592653589793`},
	{"double max", binlog.Column{}, binlog.FloatValue(binlog.KindDouble, math.MaxFloat64), `1.7976931348623157e+308`},
	{"double min", binlog.Column{}, binlog.FloatValue(binlog.KindDouble, -math.SmallestNonzeroFloat64), `-5e-324`},
	{"double int", binlog.Column{}, binlog.FloatValue(binlog.KindDouble, 12345), `12345`},
	{"double big", binlog.Column{}, binlog.FloatValue(binlog.KindDouble, 1e21), `1e+21`},
	{"double +inf", binlog.Column{}, binlog.FloatValue(binlog.KindDouble, math.Inf(1)), `null`},
	{"double -inf", binlog.Column{}, binlog.FloatValue(binlog.KindDouble, math.Inf(-1)), `null`},
	{"double nan", binlog.Column{}, binlog.FloatValue(binlog.KindDouble, math.NaN()), `null`},

	// DATE.
	{"date", binlog.Column{}, binlog.DateValue(binlog.Date{Year: 2024, Month: 1, Day: 2}), `"2024-01-02"`},
	{"date zero", binlog.Column{}, binlog.DateValue(binlog.Date{}), `"0000-00-00"`},
	{"date zero month", binlog.Column{}, binlog.DateValue(binlog.Date{Year: 2020, Day: 15}), `"2020-00-15"`},
	{"date zero day", binlog.Column{}, binlog.DateValue(binlog.Date{Year: 2020, Month: 2}), `"2020-02-00"`},
	{"date zero year", binlog.Column{}, binlog.DateValue(binlog.Date{Month: 12, Day: 31}), `"0000-12-31"`},
	{"date min", binlog.Column{}, binlog.DateValue(binlog.Date{Year: 1000, Month: 1, Day: 1}), `"1000-01-01"`},
	{"date max", binlog.Column{}, binlog.DateValue(binlog.Date{Year: 9999, Month: 12, Day: 31}), `"9999-12-31"`},
	{"date year 5", binlog.Column{}, binlog.DateValue(binlog.Date{Year: 5, Month: 1, Day: 1}), `"0005-01-01"`},

	// DATETIME, frac 0..6.
	{"datetime", frac(0), dt(2024, 1, 2, 3, 4, 5, 0), `"2024-01-02T03:04:05"`},
	{"datetime frac0 drops micro", frac(0), dt(2024, 1, 2, 3, 4, 5, 123456), `"2024-01-02T03:04:05"`},
	{"datetime frac1", frac(1), dt(2024, 1, 2, 3, 4, 5, 100000), `"2024-01-02T03:04:05.1"`},
	{"datetime frac2", frac(2), dt(2024, 1, 2, 3, 4, 5, 120000), `"2024-01-02T03:04:05.12"`},
	{"datetime frac3", frac(3), dt(2024, 1, 2, 3, 4, 5, 123000), `"2024-01-02T03:04:05.123"`},
	{"datetime frac4", frac(4), dt(2024, 1, 2, 3, 4, 5, 123400), `"2024-01-02T03:04:05.1234"`},
	{"datetime frac5", frac(5), dt(2024, 1, 2, 3, 4, 5, 123450), `"2024-01-02T03:04:05.12345"`},
	{"datetime frac6", frac(6), dt(2024, 1, 2, 3, 4, 5, 123456), `"2024-01-02T03:04:05.123456"`},
	{"datetime frac6 leading zeros", frac(6), dt(2024, 1, 2, 3, 4, 5, 7), `"2024-01-02T03:04:05.000007"`},
	{"datetime frac3 zero", frac(3), dt(2024, 1, 2, 3, 4, 5, 0), `"2024-01-02T03:04:05.000"`},
	{"datetime zero", frac(0), dt(0, 0, 0, 0, 0, 0, 0), `"0000-00-00T00:00:00"`},
	{"datetime zero frac6", frac(6), dt(0, 0, 0, 0, 0, 0, 0), `"0000-00-00T00:00:00.000000"`},
	{"datetime partial zero", frac(0), dt(2020, 0, 15, 10, 0, 0, 0), `"2020-00-15T10:00:00"`},
	{"datetime max", frac(6), dt(9999, 12, 31, 23, 59, 59, 999999), `"9999-12-31T23:59:59.999999"`},
	{"datetime frac > 6 clamps", frac(9), dt(2024, 1, 2, 3, 4, 5, 123456), `"2024-01-02T03:04:05.123456"`},

	// TIMESTAMP.
	{"timestamp", frac(0), binlog.TimestampValue(1704164645, 0), `"2024-01-02T03:04:05Z"`},
	{"timestamp frac6", frac(6), binlog.TimestampValue(1704164645, 123456), `"2024-01-02T03:04:05.123456Z"`},
	{"timestamp frac3", frac(3), binlog.TimestampValue(1704164645, 123000), `"2024-01-02T03:04:05.123Z"`},
	{"timestamp frac1", frac(1), binlog.TimestampValue(1704164645, 500000), `"2024-01-02T03:04:05.5Z"`},
	{"timestamp zero", frac(0), binlog.TimestampValue(0, 0), `"0000-00-00T00:00:00Z"`},
	{"timestamp zero frac3", frac(3), binlog.TimestampValue(0, 0), `"0000-00-00T00:00:00.000Z"`},
	{"timestamp min", frac(0), binlog.TimestampValue(1, 0), `"1970-01-01T00:00:01Z"`},
	{"timestamp epoch micro", frac(6), binlog.TimestampValue(0, 1), `"1970-01-01T00:00:00.000001Z"`},
	{"timestamp max", frac(6), binlog.TimestampValue(2147483647, 999999), `"2038-01-19T03:14:07.999999Z"`},
	{"timestamp leap day", frac(0), binlog.TimestampValue(951782400, 0), `"2000-02-29T00:00:00Z"`},
	{"timestamp end of 2100", frac(0), binlog.TimestampValue(4133980799, 0), `"2100-12-31T23:59:59Z"`},

	// TIME.
	{"time", frac(0), binlog.TimeValue(3*hr + 4*60*sec + 5*sec), `"03:04:05"`},
	{"time zero", frac(0), binlog.TimeValue(0), `"00:00:00"`},
	{"time max", frac(0), binlog.TimeValue(838*hr + 59*60*sec + 59*sec), `"838:59:59"`},
	{"time min frac6", frac(6), binlog.TimeValue(-(838*hr + 59*60*sec + 59*sec)), `"-838:59:59.000000"`},
	{"time neg frac", frac(6), binlog.TimeValue(-(1*sec + 500000*us)), `"-00:00:01.500000"`},
	{"time neg sub-second", frac(3), binlog.TimeValue(-500000 * us), `"-00:00:00.500"`},
	{"time 100h", frac(2), binlog.TimeValue(100*hr + 120000*us), `"100:00:00.12"`},
	{"time int64 min", frac(6), binlog.TimeValue(math.MinInt64), `"-2562047788:00:54.775808"`},

	// Strings and charsets.
	{"string", cs("utf8mb4"), str(binlog.KindString, "hello"), `"hello"`},
	{"string empty", cs("utf8mb4"), str(binlog.KindString, ""), `""`},
	{"string escapes", cs("utf8mb4"), str(binlog.KindString, "a\"b\\c/d"), `"a\"b\\c/d"`},
	{"string short escapes", cs("utf8mb4"), str(binlog.KindString, "\n\r\t\b\f"), `"\n\r\t\b\f"`},
	{"string controls", cs("utf8mb4"), str(binlog.KindString, "\x00\x01\x1f\x7f"), `"\u0000\u0001\u001f` + "\x7f" + `"`},
	{"string not html", cs("utf8mb4"), str(binlog.KindString, "<a href='x'>&amp;</a>"), `"<a href='x'>&amp;</a>"`},
	{"string 2-byte", cs("utf8mb4"), str(binlog.KindString, "héllo"), `"héllo"`},
	{"string 3-byte", cs("utf8mb3"), str(binlog.KindString, "€ 日本"), `"€ 日本"`},
	{"string 4-byte", cs("utf8mb4"), str(binlog.KindString, "😀 𝄞"), `"😀 𝄞"`},
	{"string line separators", cs("utf8mb4"), str(binlog.KindString, "\u2028\u2029"), "\"\u2028\u2029\""},
	{"string invalid byte", cs("utf8mb4"), str(binlog.KindString, "a\xffb"), `"a\ufffdb"`},
	{"string truncated seq", cs("utf8mb4"), str(binlog.KindString, "a\xe2\x82"), `"a\ufffd\ufffd"`},
	{"string overlong", cs("utf8mb4"), str(binlog.KindString, "\xc0\xaf"), `"\ufffd\ufffd"`},
	{"string surrogate", cs("utf8mb4"), str(binlog.KindString, "\xed\xa0\x80"), `"\ufffd\ufffd\ufffd"`},
	{"string above max", cs("utf8mb4"), str(binlog.KindString, "\xf4\x90\x80\x80"), `"\ufffd\ufffd\ufffd\ufffd"`},
	{"string utf8 alias", cs("utf8"), str(binlog.KindString, "ü"), `"ü"`},
	{"string ascii", cs("ascii"), str(binlog.KindString, "abc\x80"), `"abc?"`},
	{"string unknown charset", cs("klingon"), str(binlog.KindString, "ok\xff"), `"ok\ufffd"`},
	{"string no charset", cs(""), str(binlog.KindString, "ok"), `"ok"`},
	{"latin1 ascii", cs("latin1"), str(binlog.KindString, "a\"\n"), `"a\"\n"`},
	{"latin1 high", cs("latin1"), str(binlog.KindString, "caf\xe9 \xe4\xf6\xfc\xdf \xff"), `"café äöüß ÿ"`},
	{"latin1 cp1252", cs("latin1"), str(binlog.KindString, "\x80\x85\x93\x94\x99\x9f"), `"€…“”™Ÿ"`},
	{"latin1 undefined", cs("latin1"), str(binlog.KindString, "\x81\x8d\x8f\x90\x9d"), "\"\u0081\u008d\u008f\u0090\u009d\""},
	{"latin1 nbsp", cs("latin1"), str(binlog.KindString, "\xa0"), "\"\u00a0\""},
	{"latin1 upper case name", cs("LATIN1"), str(binlog.KindString, "\xe9"), `"é"`},
	{"ucs2", cs("ucs2"), str(binlog.KindString, "\x00a\x00\xe9\x20\xac"), `"aé€"`},
	{"ucs2 surrogate", cs("ucs2"), str(binlog.KindString, "\xd8\x3d\xde\x00"), `"??"`},
	{"ucs2 odd", cs("ucs2"), str(binlog.KindString, "\x00a\x00"), `"a?"`},
	{"ucs2 control", cs("ucs2"), str(binlog.KindString, "\x00\n\x00\""), `"\n\""`},
	{"utf16", cs("utf16"), str(binlog.KindString, "\x00a\xd8\x3d\xde\x00"), `"a😀"`},
	{"utf16 lone high", cs("utf16"), str(binlog.KindString, "\xd8\x3d\x00a"), `"?a"`},
	{"utf16 lone low", cs("utf16"), str(binlog.KindString, "\xde\x00\x00a"), `"?a"`},
	{"utf16 high at end", cs("utf16"), str(binlog.KindString, "\xd8\x3d"), `"?"`},
	{"utf16le", cs("utf16le"), str(binlog.KindString, "a\x00\x3d\xd8\x00\xde"), `"a😀"`},
	{"utf32", cs("utf32"), str(binlog.KindString, "\x00\x00\x00a\x00\x01\xf6\x00"), `"a😀"`},
	{"utf32 invalid", cs("utf32"), str(binlog.KindString, "\x00\x11\x00\x00\x00\x00\xd8\x00\x00\x00"), `"???"`},

	// Binary.
	{"bytes", binlog.Column{}, str(binlog.KindBytes, "\x00\x01\xfe\xff"), `"AAH+/w=="`},
	{"bytes empty", binlog.Column{}, str(binlog.KindBytes, ""), `""`},
	{"bytes pad1", binlog.Column{}, str(binlog.KindBytes, "ab"), `"YWI="`},
	{"bytes nopad", binlog.Column{}, str(binlog.KindBytes, "abc"), `"YWJj"`},
	{"geometry", binlog.Column{}, binlog.BytesValue(binlog.KindGeometry,
		[]byte{0, 0, 0, 0, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xf0, 0x3f, 0, 0, 0, 0, 0, 0, 0, 0x40}),
		`"AAAAAAEBAAAAAAAAAAAA8D8AAAAAAAAAQA=="`},

	// VECTOR: float32s, little-endian, written like FLOAT values.
	{"vector", binlog.Column{}, binlog.BytesValue(binlog.KindVector,
		[]byte{0, 0, 0xc0, 0x3f, 0xcd, 0xcc, 0xcc, 0x3d, 0, 0, 0, 0x80, 0xff, 0xff, 0x7f, 0x7f, 0, 0x24, 0x74, 0x49}),
		`[1.5,0.1,-0,3.4028235e+38,1e+06]`},
	{"vector empty", binlog.Column{}, binlog.BytesValue(binlog.KindVector, []byte{}), `[]`},
	{"vector nan inf", binlog.Column{}, binlog.BytesValue(binlog.KindVector, []byte{0, 0, 0xc0, 0x7f, 0, 0, 0x80, 0xff, 1, 0, 0, 0}),
		`[null,null,1e-45]`},
	{"vector ragged", binlog.Column{}, binlog.BytesValue(binlog.KindVector, []byte{0, 0, 0x80, 0x3f, 9, 9}), `[1]`},

	// ENUM.
	{"enum", binlog.Column{Enum: []string{"small", "medium", "large"}}, binlog.NumValue(binlog.KindEnum, 2), `"medium"`},
	{"enum last", binlog.Column{Enum: []string{"small", "medium", "large"}}, binlog.NumValue(binlog.KindEnum, 3), `"large"`},
	{"enum zero", binlog.Column{Enum: []string{"small"}}, binlog.NumValue(binlog.KindEnum, 0), `""`},
	{"enum zero unknown", binlog.Column{}, binlog.NumValue(binlog.KindEnum, 0), `""`},
	{"enum names unknown", binlog.Column{}, binlog.NumValue(binlog.KindEnum, 7), `7`},
	{"enum out of range", binlog.Column{Enum: []string{"a"}}, binlog.NumValue(binlog.KindEnum, 2), `2`},
	{"enum escaped name", binlog.Column{Enum: []string{`say "hi"`}}, binlog.NumValue(binlog.KindEnum, 1), `"say \"hi\""`},

	// SET.
	{"set", binlog.Column{Set: []string{"a", "b", "c"}}, binlog.NumValue(binlog.KindSet, 0b101), `["a","c"]`},
	{"set empty", binlog.Column{Set: []string{"a", "b"}}, binlog.NumValue(binlog.KindSet, 0), `[]`},
	{"set all", binlog.Column{Set: []string{"a", "b"}}, binlog.NumValue(binlog.KindSet, 3), `["a","b"]`},
	{"set names unknown", binlog.Column{}, binlog.NumValue(binlog.KindSet, 5), `5`},
	{"set stray bit", binlog.Column{Set: []string{"a", "b"}}, binlog.NumValue(binlog.KindSet, 0b101), `5`},
	{"set 64 members", binlog.Column{Set: set64()}, binlog.NumValue(binlog.KindSet, 1<<63|1), `["m0","m63"]`},

	// JSON.
	{"json object", binlog.Column{}, str(binlog.KindJSON, `{"a":1,"b":[true,false,null],"c":"x"}`), `{"a":1,"b":[true,false,null],"c":"x"}`},
	{"json compacted", binlog.Column{}, str(binlog.KindJSON, "{\"a\": 1,\n \"b\": [1, 2.5e-3]\r\n}\n"), `{"a":1,"b":[1,2.5e-3]}`},
	{"json scalar", binlog.Column{}, str(binlog.KindJSON, `"str"`), `"str"`},
	{"json number", binlog.Column{}, str(binlog.KindJSON, `18446744073709551615`), `18446744073709551615`},
	{"json null", binlog.Column{}, str(binlog.KindJSON, `null`), `null`},
	{"json empty", binlog.Column{}, str(binlog.KindJSON, ``), `null`},
	{"json spaces", binlog.Column{}, str(binlog.KindJSON, "  \n"), `null`},
	{"json escapes kept", binlog.Column{}, str(binlog.KindJSON, `["\u00e9\n\"\/"]`), `["\u00e9\n\"\/"]`},
	{"json string spaces kept", binlog.Column{}, str(binlog.KindJSON, `{"k y": " v "}`), `{"k y":" v "}`},
	{"json unicode", binlog.Column{}, str(binlog.KindJSON, `{"é":"😀"}`), `{"é":"😀"}`},
	{"json invalid utf8 repaired", binlog.Column{}, str(binlog.KindJSON, "[\"a\xffb\"]"), `["a\ufffdb"]`},
	{"json invalid as string", binlog.Column{}, str(binlog.KindJSON, `{"a":}`), `"{\"a\":}"`},
	{"json trailing garbage", binlog.Column{}, str(binlog.KindJSON, `[1] x`), `"[1] x"`},
	{"json raw newline in string", binlog.Column{}, str(binlog.KindJSON, "\"a\nb\""), `"\"a\nb\""`},
	{"json bad number", binlog.Column{}, str(binlog.KindJSON, `01`), `"01"`},

	// NULL, absent, unknown kinds.
	{"null", binlog.Column{}, binlog.NullValue(), `null`},
	{"absent", binlog.Column{}, binlog.Value{}, `null`},
	{"unknown kind", binlog.Column{}, binlog.NumValue(binlog.Kind(200), 1), `null`},
}

func set64() []string {
	s := make([]string, 64)
	for i := range s {
		s[i] = "m" + itoa(i)
	}
	return s
}

func itoa(i int) string { return string(AppendValue(nil, nil, binlog.IntValue(int64(i)))) }

func TestAppendValue(t *testing.T) {
	for _, tc := range valueCases {
		t.Run(tc.name, func(t *testing.T) {
			col := tc.col
			got := string(AppendValue([]byte("prefix:"), &col, tc.v))
			if !strings.HasPrefix(got, "prefix:") {
				t.Fatalf("dst prefix lost: %q", got)
			}
			got = strings.TrimPrefix(got, "prefix:")
			if got != tc.want {
				t.Errorf("AppendValue(%v) = %s, want %s", tc.v.Kind(), got, tc.want)
			}
			if !json.Valid([]byte(got)) {
				t.Errorf("not valid JSON: %s", got)
			}
			if !utf8.ValidString(got) {
				t.Errorf("not valid UTF-8: %q", got)
			}
		})
	}
}

// TestAppendValueDecodes checks what a JSON consumer sees for values whose
// text differs from their meaning.
func TestAppendValueDecodes(t *testing.T) {
	for _, tc := range []struct {
		col  binlog.Column
		v    binlog.Value
		want any
	}{
		{cs("utf8mb4"), str(binlog.KindString, "a\x00\x01\"\\\n😀"), "a\x00\x01\"\\\n😀"},
		{cs("utf8mb4"), str(binlog.KindString, "a\xffb"), "a\uFFFDb"},
		{cs("latin1"), str(binlog.KindString, "\x80\xe9"), "€é"},
		{binlog.Column{}, str(binlog.KindBytes, "\x00\xff"), "AP8="},
	} {
		var got any
		if err := json.Unmarshal(AppendValue(nil, &tc.col, tc.v), &got); err != nil {
			t.Fatal(err)
		}
		if got != tc.want {
			t.Errorf("%v decodes to %q, want %q", tc.v, got, tc.want)
		}
	}
}

// TestLatin1Table checks every latin1 byte: ASCII maps to itself, the
// cp1252 block to its characters, 0xA0-0xFF to the same code point, and
// every output is one valid rune.
func TestLatin1Table(t *testing.T) {
	col := cs("latin1")
	for c := 0x20; c < 0x100; c++ {
		if c == '"' || c == '\\' {
			continue
		}
		out := AppendValue(nil, &col, binlog.BytesValue(binlog.KindString, []byte{byte(c)}))
		var s string
		if err := json.Unmarshal(out, &s); err != nil {
			t.Fatalf("byte %#x: %s: %v", c, out, err)
		}
		r, n := utf8.DecodeRuneInString(s)
		if n != len(s) || r == utf8.RuneError {
			t.Fatalf("byte %#x: %q is not one rune", c, s)
		}
		want, _, _ := charset.Lookup("latin1").Next([]byte{byte(c)})
		if r != want {
			t.Errorf("byte %#x -> %U, want %U", c, r, want)
		}
	}
	// Spot checks against Windows-1252.
	for c, want := range map[byte]rune{0x80: '€', 0x8A: 'Š', 0x9C: 'œ', 0x9F: 'Ÿ', 0x96: '–', 0x97: '—'} {
		if got, _, _ := charset.Lookup("latin1").Next([]byte{c}); got != want {
			t.Errorf("latin1 %#x = %U, want %U", c, got, want)
		}
	}
}

// TestAppendValueNilColumn checks that a nil column is a zero column.
func TestAppendValueNilColumn(t *testing.T) {
	if got := string(AppendValue(nil, nil, dt(2024, 1, 2, 3, 4, 5, 123456))); got != `"2024-01-02T03:04:05"` {
		t.Errorf("got %s", got)
	}
	if got := string(AppendValue(nil, nil, binlog.NumValue(binlog.KindEnum, 3))); got != `3` {
		t.Errorf("got %s", got)
	}
}

// TestCivil checks the date conversion against the time package over a
// wide range of days.
func TestCivil(t *testing.T) {
	col := frac(6)
	for s := int64(1); s < 1<<44; s = s*3 + 12345 {
		for _, sec := range []int64{s, s + 86399, s - 1} {
			if sec <= 0 {
				continue
			}
			got := string(AppendValue(nil, &col, binlog.TimestampValue(sec, 654321)))
			ts := unixUTC(sec, 654321)
			want := `"` + ts.Format("2006-01-02T15:04:05.000000") + `Z"`
			if ts.Year() > 9999 {
				want = `"` + itoa(ts.Year()) + ts.Format("-01-02T15:04:05.000000") + `Z"`
			}
			if got != want {
				t.Fatalf("sec %d: got %s, want %s", sec, got, want)
			}
		}
	}
}

// TestAppendValueNoAlloc checks that no kind allocates into a big enough buffer.
func TestAppendValueNoAlloc(t *testing.T) {
	buf := make([]byte, 0, 1<<16)
	for _, tc := range valueCases {
		col := tc.col
		n := testing.AllocsPerRun(10, func() { buf = AppendValue(buf[:0], &col, tc.v) })
		if n != 0 {
			t.Errorf("%s: %v allocs", tc.name, n)
		}
	}
}

// appendFloat writes what strconv's shortest 'g' writes, fast path or not.
func TestAppendFloatAsStrconv(t *testing.T) {
	vals := []float64{0, math.Copysign(0, -1), 1, -1, 2, 10, 99, 100, 12345, 999999, -999999, 1e6, -1e6, 1e6 - 0.5,
		1e21, 0.5, -0.5, 1.5, 123456.75, 1e-7, math.MaxInt64, math.MinInt64, math.Inf(1), math.NaN(), 4294967296, 1 << 53}
	for i := -2000; i <= 2000; i++ {
		vals = append(vals, float64(i), float64(i)*1000+0.25, float64(i)*499.5)
	}
	for _, f := range vals {
		for _, bits := range []int{32, 64} {
			g := f
			if bits == 32 {
				g = float64(float32(f))
			}
			if got, want := string(appendFloat(nil, g, bits)), strconv.FormatFloat(g, 'g', -1, bits); got != want {
				t.Errorf("%v (%d bits): %s, want %s", g, bits, got, want)
			}
		}
	}
}
