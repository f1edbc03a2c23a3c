package charset

import (
	"testing"
	"unicode/utf8"
)

// FuzzConvert checks every set on arbitrary bytes: the output is valid
// UTF-8, Next always advances within the input, and Invalid counts what
// AppendUTF8 replaced.
func FuzzConvert(f *testing.F) {
	for _, s := range []string{"", "abc", "\xc3\xc0\xcd\xc5", "\x81\x30\x81\x30", "\x8f\xb0\xa1", "\xff\xfe\x00", "\xd8\x3d\xde\x00"} {
		f.Add([]byte(s))
	}
	names := Names()
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, n := range names {
			c := Lookup(n)
			out, bad := c.AppendUTF8(nil, b)
			if !utf8.Valid(out) && !c.IsUTF8() {
				t.Fatalf("%s %q: invalid UTF-8 out %q", n, b, out)
			}
			if inv := c.Invalid(b); inv != bad {
				t.Fatalf("%s %q: Invalid %d, AppendUTF8 replaced %d", n, b, inv, bad)
			}
			for i := 0; i < len(b); {
				_, k, _ := c.Next(b[i:])
				if k < 1 || i+k > len(b) {
					t.Fatalf("%s %q at %d: Next read %d bytes", n, b, i, k)
				}
				i += k
			}
		}
	})
}
