package snapshot

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/sluice-cdc/sluice/binlog"
)

func TestBinaryTemporal(t *testing.T) {
	dt, ok := binaryDateTime([]byte{0xe4, 0x07, 2, 29, 23, 59, 58, 0x3f, 0x42, 0x0f, 0})
	if want := (binlog.DateTime{Date: binlog.Date{Year: 2020, Month: 2, Day: 29}, Hour: 23, Minute: 59, Second: 58, Micro: 999999}); !ok || dt != want {
		t.Errorf("datetime %+v %v", dt, ok)
	}
	if dt, ok := binaryDateTime(nil); !ok || dt != (binlog.DateTime{}) {
		t.Errorf("zero datetime %+v %v", dt, ok)
	}
	if dt, ok := binaryDateTime([]byte{0xe4, 0x07, 0, 15}); !ok || dt.Month != 0 || dt.Day != 15 {
		t.Errorf("partial date %+v %v", dt, ok)
	}
	for _, bad := range [][]byte{{1}, {1, 2, 3, 4, 5}, {0xe4, 0x07, 1, 1, 0, 0, 0, 0x40, 0x42, 0x0f, 0}} {
		if _, ok := binaryDateTime(bad); ok {
			t.Errorf("accepted % x", bad)
		}
	}
	for _, tc := range []struct {
		b  []byte
		us int64
	}{
		{nil, 0},
		{[]byte{1, 34, 0, 0, 0, 22, 59, 59}, -(838*3600 + 59*60 + 59) * 1000000},
		{[]byte{0, 34, 0, 0, 0, 22, 59, 59, 0x3f, 0x42, 0x0f, 0}, (838*3600+59*60+59)*1000000 + 999999},
		{[]byte{1, 0, 0, 0, 0, 0, 0, 1, 0x20, 0xa1, 0x07, 0}, -1500000},
	} {
		us, ok := binaryTime(tc.b)
		if !ok || us != tc.us {
			t.Errorf("time % x: %d %v, want %d", tc.b, us, ok, tc.us)
		}
	}
}

func TestKeyArgText(t *testing.T) {
	for _, tc := range []struct {
		v    binlog.Value
		want string
	}{
		{binlog.TimeValue(-838*3600*1000000 - 59*60*1000000 - 59*1000000), "-838:59:59.000000"},
		{binlog.TimeValue(1), "00:00:00.000001"},
		{binlog.DateValue(binlog.Date{Year: 1, Month: 2, Day: 3}), "0001-02-03"},
		{binlog.TimestampValue(1, 0), "1970-01-01 00:00:01.000000"},
	} {
		if got := keyArg(tc.v); got != tc.want {
			t.Errorf("%v: %q, want %q", tc.v, got, tc.want)
		}
	}
}

func TestCompactJSON(t *testing.T) {
	for in, want := range map[string]string{
		`{"a": [1, 2.5, "x y", null], "b": {"c": "\"q\": ,"}}`: `{"a":[1,2.5,"x y",null],"b":{"c":"\"q\": ,"}}`,
		`["\\", " ", "\\\" ,"]`:                                `["\\"," ","\\\" ,"]`,
		`"just a string"`:                                      `"just a string"`,
		`12`:                                                   `12`,
		``:                                                     ``,
	} {
		if got := string(compactJSON([]byte(in))); got != want {
			t.Errorf("compactJSON(%s) = %s, want %s", in, got, want)
		}
	}
}

// FuzzCompactJSON: compactJSON never panics, and on valid JSON it gives
// what encoding/json's Compact gives.
func FuzzCompactJSON(f *testing.F) {
	f.Add([]byte(`{"a": [1, 2.5, "x y", null], "b": {"c": "\"q\": ,"}}`))
	f.Add([]byte(`["\\", " ", "\\\" ,"]`))
	f.Add([]byte(`"unterminated \`))
	f.Fuzz(func(t *testing.T, p []byte) {
		valid := json.Valid(p)
		var want bytes.Buffer
		if valid {
			if err := json.Compact(&want, p); err != nil {
				t.Fatal(err)
			}
		}
		got := compactJSON(append([]byte(nil), p...))
		if valid && !bytes.Equal(got, want.Bytes()) {
			t.Errorf("compactJSON(%q) = %q, encoding/json %q", p, got, want.Bytes())
		}
	})
}
