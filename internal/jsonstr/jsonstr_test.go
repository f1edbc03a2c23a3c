package jsonstr

import (
	"bytes"
	"encoding/json"
	"testing"
	"unicode/utf8"
)

// The quoter writes what encoding/json writes, but for the characters
// encoding/json escapes for HTML (<, >, &, U+2028, U+2029), which it
// writes as they are: both decode to the same string.
func TestAgainstEncodingJSON(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"", `""`},
		{"plain ascii, longer than eight bytes", `"plain ascii, longer than eight bytes"`},
		{"quote \" backslash \\ slash /", `"quote \" backslash \\ slash /"`},
		{"\b\f\n\r\t\x00\x01\x1f", `"\b\f\n\r\t\u0000\u0001\u001f"`},
		{"<a & b>\u2028\u2029", "\"<a & b>\u2028\u2029\""},
		{"héllo, 世界, 🦆", `"héllo, 世界, 🦆"`},
		{"bad \xff byte, cut \xe4\xb8 sequence", `"bad \ufffd byte, cut \ufffd\ufffd sequence"`},
		{"\xed\xa0\x80 surrogate, \xc0\xaf overlong", `"\ufffd\ufffd\ufffd surrogate, \ufffd\ufffd overlong"`},
	} {
		if got := string(Append(nil, tc.in)); got != tc.want {
			t.Errorf("Append(%q) = %s, want %s", tc.in, got, tc.want)
		}
		if got := string(Append(nil, []byte(tc.in))); got != tc.want {
			t.Errorf("Append([]byte(%q)) = %s, want %s", tc.in, got, tc.want)
		}
	}
}

func FuzzAppend(f *testing.F) {
	for _, s := range []string{"", "a\"b\\c\n", "<&>\u2028", "\xff\xe4\xb8", "0123456789abcdef\x7f\x80", "\x1a😀\U0010FFFF"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var ours, theirs string
		if err := json.Unmarshal(Append(nil, s), &ours); err != nil {
			t.Fatalf("Append(%q) = %s is not JSON: %v", s, Append(nil, s), err)
		}
		want, _ := json.Marshal(s)
		if err := json.Unmarshal(want, &theirs); err != nil {
			t.Fatal(err)
		}
		if ours != theirs {
			t.Fatalf("Append(%q) decodes to %q, encoding/json's quoting to %q", s, ours, theirs)
		}
		var java string
		if err := json.Unmarshal(AppendJava(nil, s), &java); err != nil {
			t.Fatalf("AppendJava(%q) = %s is not JSON: %v", s, AppendJava(nil, s), err)
		}
		if java != theirs {
			t.Fatalf("AppendJava(%q) decodes to %q, encoding/json's quoting to %q", s, java, theirs)
		}
	})
}

// AppendValid writes what Append writes for valid UTF-8 and reports
// false for anything else.
func TestAppendValid(t *testing.T) {
	for _, s := range []string{"", "plain", "tab\there \"q\" \\", "naïve ☃ 😀 long enough to pass eight", "\x01\x1f", "ab\xffcd", "\xc3(", "\xed\xa0\x80", "trailing \xe2\x82", "0123456789\xf4\x90\x80\x80"} {
		got, ok := AppendValid([]byte("x"), s)
		if ok != utf8.ValidString(s) {
			t.Errorf("%q: ok = %v, want %v", s, ok, !ok)
		}
		if want := Append([]byte("x"), s); ok && !bytes.Equal(got, want) {
			t.Errorf("%q: %s, want %s", s, got, want)
		}
	}
}

// AppendJava writes what Jackson writes for the same Java string: upper-case
// hex in control escapes, surrogate pairs for characters beyond the BMP, a
// raw U+FFFD for a broken byte; it is the same JSON string as Append's.
func TestAppendJava(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"plain", `"plain"`},
		{"a\x1ab\x00\x7f", `"a\u001Ab\u0000` + "\x7f" + `"`},
		{"q\"\\\n\r\t\b\f", `"q\"\\\n\r\t\b\f"`},
		{"é€😀", `"é€\uD83D\uDE00"`},
		{"\U0010FFFF", `"\uDBFF\uDFFF"`},
		{"x\xffy", "\"x\uFFFDy\""},
	} {
		got := string(AppendJava(nil, c.in))
		if got != c.want {
			t.Errorf("AppendJava(%q) = %s, want %s", c.in, got, c.want)
		}
		var a, b string
		if err := json.Unmarshal([]byte(got), &a); err != nil {
			t.Fatalf("%s: %v", got, err)
		}
		json.Unmarshal(Append(nil, c.in), &b)
		if a != b {
			t.Errorf("AppendJava(%q) reads as %q, Append's as %q", c.in, a, b)
		}
	}
}
