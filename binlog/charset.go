package binlog

import "strings"

// latin1High maps bytes 0x80-0x9F of MySQL's latin1, which is Windows-1252
// except that the five bytes Windows-1252 leaves undefined (0x81, 0x8D,
// 0x8F, 0x90, 0x9D) map to the C1 control characters of the same value.
// Bytes 0xA0-0xFF are ISO 8859-1, that is the code point of the same value.
var latin1High = [32]rune{
	0x20AC, 0x0081, 0x201A, 0x0192, 0x201E, 0x2026, 0x2020, 0x2021, // 0x80
	0x02C6, 0x2030, 0x0160, 0x2039, 0x0152, 0x008D, 0x017D, 0x008F, // 0x88
	0x0090, 0x2018, 0x2019, 0x201C, 0x201D, 0x2022, 0x2013, 0x2014, // 0x90
	0x02DC, 0x2122, 0x0161, 0x203A, 0x0153, 0x009D, 0x017E, 0x0178, // 0x98
}

// Latin1Rune returns the code point of a byte of MySQL's latin1.
func Latin1Rune(c byte) rune {
	if c >= 0x80 && c < 0xA0 {
		return latin1High[c-0x80]
	}
	return rune(c)
}

// namesToUTF8 converts ENUM and SET member names, which TABLE_MAP carries
// in the column's character set, to UTF-8 (as information_schema and the
// snapshot give them). Only latin1 needs converting in practice.
func namesToUTF8(names []string, charset string) []string {
	if charset != "latin1" || len(names) == 0 {
		return names
	}
	out := make([]string, len(names))
	for i, n := range names {
		var b strings.Builder
		for j := 0; j < len(n); j++ {
			b.WriteRune(Latin1Rune(n[j]))
		}
		out[i] = b.String()
	}
	return out
}
