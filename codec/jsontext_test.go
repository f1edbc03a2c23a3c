package codec

import "testing"

// MySQL's text of a JSON value has ", " and ": " between tokens, none in
// strings.
func TestMySQLJSONSpacing(t *testing.T) {
	for _, c := range [][2]string{
		{`{"a":[1,2.5,"x,y:z",null,true],"b":{"c":"é\"q,"}}`, `{"a": [1, 2.5, "x,y:z", null, true], "b": {"c": "é\"q,"}}`},
		{`[]`, `[]`},
		{`"s\\"`, `"s\\"`},
		{`[{},[],"\\\":,"]`, `[{}, [], "\\\":,"]`},
	} {
		if got := string(appendMySQLJSONSpacing(nil, []byte(c[0]))); got != c[1] {
			t.Errorf("appendMySQLJSONSpacing(%s) = %s, want %s", c[0], got, c[1])
		}
	}
}

// A streamed document as Debezium's binlog library writes it: doubles as
// Java's Double.toString, or exact in plain notation where that has an
// exponent; DECIMALs and integers kept; upper-case hex in escapes.
func TestDbzJSONText(t *testing.T) {
	e300 := "1000000000000000052504760255204420248704468581108159154915854115511802457988908195786371375080447864043704443832883878176942523235360430575644792184786706982848387200926575803737830233794788090059368953234970799945081119038967640880074652742780142494579258788820056842838115669472196386865459400540160"
	for _, c := range [][2]string{
		{`{"a":[1,2.5,"x",null,true],"b":{"c":"é\"q"},"f":1e300,"g":0.1,"n":-12345678901234,"z":-0.0}`,
			`{"a":[1,2.5,"x",null,true],"b":{"c":"é\"q"},"f":` + e300 + `,"g":0.1,"n":-12345678901234,"z":-0.0}`},
		{`"just a string \u001b"`, `"just a string \u001B"`},
		// The exact values as Python's decimal.Decimal(float) writes them.
		{`[1700000000.0,19.90,0.00000015,3.0,-1e-16]`, `[1700000000,19.90,0.00000014999999999999999321221677388293880284209080855362117290496826171875,3.0,-0.00000000000000009999999999999999790977867240346035618411149408467364363417573258630000054836273193359375]`},
		{`["1e300 \\u00e9",12345678901234567890.5]`, `["1e300 \\u00e9",12345678901234567890.5]`},
	} {
		got := string(appendDbzJSONText(nil, []byte(c[0])))
		if got != c[1] {
			t.Errorf("appendDbzJSONText(%s) = %s, want %s", c[0], got, c[1])
		}
	}
}
