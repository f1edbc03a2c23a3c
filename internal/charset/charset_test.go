package charset

import (
	"testing"
)

// TestKnownCharacters checks characters whose conversion every reference
// agrees on, and the places where MySQL differs from the usual tables.
func TestKnownCharacters(t *testing.T) {
	for _, tc := range []struct {
		set, in, want string
		bad           int
	}{
		{"gbk", "\xc3\xc0\xcd\xc5\xb5\xe3\xc6\xc0", "美团点评", 0},
		{"gb2312", "\xc3\xc0\xcd\xc5", "美团", 0},
		{"gb18030", "\x81\x30\x81\x30\x90\x30\x81\x30\x95\x32\x82\x36", "\u0080\U00010000\U00020000", 0},
		{"big5", "\xa4\xa4\xa4\xe5", "中文", 0},
		{"sjis", "\x93\xfa\x96\x7b\x81\x5f", "日本\\", 0}, // MySQL's sjis: 0x815F is U+005C
		{"cp932", "\x93\xfa\x96\x7b\x81\x5f", "日本＼", 0},
		{"ujis", "\xc6\xfc\xcb\xdc", "日本", 0},
		{"eucjpms", "\x8f\xb0\xa1", "丂", 0},
		{"euckr", "\xc7\xd1\xb1\xb9", "한국", 0},
		{"cp1251", "\xcf\xf0\xe8\xe2\xe5\xf2", "Привет", 0},
		{"koi8r", "\xf0\xd2\xc9\xd7\xc5\xd4", "Привет", 0},
		{"greek", "\xe1\xe2\xe3", "αβγ", 0},
		{"hebrew", "\xf9\xec\xe5\xed", "שלום", 0},
		{"cp1256", "\xe3\xd1\xcd\xc8\xc7", "مرحبا", 0},
		{"tis620", "\xca\xc7\xd1\xca\xb4\xd5", "สวัสดี", 0},
		{"latin2", "\xb1\xe6\xea", "ąćę", 0},
		{"latin1", "\x80\x81\xe9", "€\u0081é", 0},
		{"armscii8", "\xb2\xb3", "Աա", 0},
		{"geostd8", "\xc0\xc1", "აბ", 0},
		{"swe7", "\x40\x5b", "ÉÄ", 0},
		{"cp1250", "a\x81b", "a?b", 1},                 // 0x81 has no character in cp1250
		{"gbk", "\xb0\xa1\x81", "啊?", 1},               // a truncated two-byte character
		{"gbk", "\xa1\x40", "?", 1},                    // a GBK sequence MySQL maps to nothing
		{"ascii", "ok\x80", "ok?", 1},                  // not ASCII
		{"ucs2", "\x00a\xd8\x3d", "a?", 1},             // a surrogate
		{"utf16", "\xd8\x3d\xde\x00", "\U0001F600", 0}, // a pair
		{"utf16le", "a\x00", "a", 0},
		{"utf32", "\x00\x01\xf6\x00", "\U0001F600", 0},
		{"utf8mb4", "h\xc3\xa9", "hé", 0},
	} {
		c := Lookup(tc.set)
		if c == nil {
			t.Fatalf("Lookup(%q) = nil", tc.set)
		}
		got, bad := c.AppendUTF8(nil, []byte(tc.in))
		if string(got) != tc.want || bad != tc.bad {
			t.Errorf("%s %q: %q (%d replaced), want %q (%d)", tc.set, tc.in, got, bad, tc.want, tc.bad)
		}
		if n := c.Invalid([]byte(tc.in)); n != tc.bad {
			t.Errorf("%s %q: Invalid = %d, want %d", tc.set, tc.in, n, tc.bad)
		}
	}
}

// TestEverySet checks that every set either server has is known, by any
// case of its name.
func TestEverySet(t *testing.T) {
	for _, n := range []string{"armscii8", "ascii", "big5", "cp1250", "cp1251", "cp1256", "cp1257", "cp850", "cp852", "cp866",
		"cp932", "dec8", "eucjpms", "euckr", "gb18030", "gb2312", "gbk", "geostd8", "greek", "hebrew", "hp8", "keybcs2", "koi8r",
		"koi8u", "latin1", "latin2", "latin5", "latin7", "macce", "macroman", "sjis", "swe7", "tis620", "ucs2", "ujis", "utf16",
		"utf16le", "utf32", "utf8mb3", "utf8mb4"} {
		c := Lookup(n)
		if c == nil || c.Name() != n {
			t.Errorf("Lookup(%q) = %v", n, c)
		}
		if Lookup(upper(n)) != c {
			t.Errorf("Lookup(%q) differs from Lookup(%q)", upper(n), n)
		}
	}
	if Lookup("utf8") != Lookup("utf8mb3") || Lookup("binary") != nil || Lookup("klingon") != nil {
		t.Error("utf8, binary or an unknown name looked up wrong")
	}
	if Lookup("latin1").ASCIICompatible() != true || Lookup("swe7").ASCIICompatible() || Lookup("ucs2").ASCIICompatible() {
		t.Error("ASCIICompatible wrong")
	}
}

func upper(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'a' <= c && c <= 'z' {
			b[i] = c - 'a' + 'A'
		}
	}
	return string(b)
}

func BenchmarkAppendUTF8(b *testing.B) {
	for _, tc := range []struct{ set, text string }{
		{"utf8mb4", "美团点评 meituan dianping 2024 美团点评"},
		{"latin2", "Za\xbf\xf3\xb3\xe6 g\xea\xb6l\xb1 ja\xbc\xf1, Zaz\xf3 2024 ok"},
		{"gbk", "\xc3\xc0\xcd\xc5\xb5\xe3\xc6\xc0 meituan dianping 2024 \xc3\xc0\xcd\xc5\xb5\xe3\xc6\xc0"},
	} {
		c := Lookup(tc.set)
		in := []byte(tc.text)
		b.Run(tc.set, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(in)))
			var dst []byte
			for b.Loop() {
				dst, _ = c.AppendUTF8(dst[:0], in)
			}
		})
	}
}
