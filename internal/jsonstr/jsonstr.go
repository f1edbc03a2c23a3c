// Package jsonstr writes JSON strings: the one quoter of sluice's
// outputs (codec.AppendString and the encoder's strings, the binlog
// reader's JSON documents, the sluice block, the join's records). It
// escapes what JSON requires (the quote, the backslash, control
// characters: the short escapes \" \\ \b \f \n \r \t, else \u00XX),
// writes every other character as it is (so <, >, & and U+2028 are not
// escaped, unlike encoding/json), and replaces each byte that is not part
// of a valid UTF-8 sequence by \ufffd. strconv's quoting is Go syntax, not
// JSON: it writes \x01 for a control byte. All functions append to dst
// and allocate nothing beyond growing dst.
package jsonstr

import "unicode/utf8"

const (
	hexDigits      = "0123456789abcdef"
	upperHexDigits = "0123456789ABCDEF"
)

// Replacement is what an undecodable byte or code unit becomes: the JSON
// escape of U+FFFD REPLACEMENT CHARACTER (as encoding/json writes it).
const Replacement = `\ufffd`

// special marks the bytes that leave the fast path of the string writers:
// ASCII control characters, '"' and '\\' (which must be escaped), and every
// byte >= 0x80 (which starts a multi-byte sequence to validate or convert).
var special = func() (t [256]bool) {
	for c := range 0x20 {
		t[c] = true
	}
	t['"'] = true
	t['\\'] = true
	for c := 0x80; c < 0x100; c++ {
		t[c] = true
	}
	return t
}()

// Special reports whether byte c leaves the fast path of the string
// writers: an ASCII byte to escape, or the first byte of a multi-byte
// sequence (to validate, or to convert from another character set).
func Special(c byte) bool { return special[c] }

// AppendEscapedASCII appends the JSON escape of an ASCII byte c that is
// special: the short escapes \" \\ \b \f \n \r \t, else \u00XX.
func AppendEscapedASCII(dst []byte, c byte) []byte {
	switch c {
	case '"':
		return append(dst, '\\', '"')
	case '\\':
		return append(dst, '\\', '\\')
	case '\n':
		return append(dst, '\\', 'n')
	case '\r':
		return append(dst, '\\', 'r')
	case '\t':
		return append(dst, '\\', 't')
	case '\b':
		return append(dst, '\\', 'b')
	case '\f':
		return append(dst, '\\', 'f')
	}
	return append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
}

// ValidLen returns the length of the valid UTF-8 sequence starting at
// s[i] (a byte >= 0x80), or 0 if there is none. It accepts exactly what
// unicode/utf8 accepts: no overlong forms, no surrogates, nothing above
// U+10FFFF.
func ValidLen[S ~string | ~[]byte](s S, i int) int {
	c := s[i]
	n := len(s) - i
	switch {
	case c < 0xC2:
		return 0
	case c < 0xE0:
		if n < 2 || s[i+1]&0xC0 != 0x80 {
			return 0
		}
		return 2
	case c < 0xF0:
		if n < 3 {
			return 0
		}
		lo, hi := byte(0x80), byte(0xBF)
		if c == 0xE0 {
			lo = 0xA0
		} else if c == 0xED {
			hi = 0x9F
		}
		if c1 := s[i+1]; c1 < lo || c1 > hi || s[i+2]&0xC0 != 0x80 {
			return 0
		}
		return 3
	case c < 0xF5:
		if n < 4 {
			return 0
		}
		lo, hi := byte(0x80), byte(0xBF)
		if c == 0xF0 {
			lo = 0x90
		} else if c == 0xF4 {
			hi = 0x8F
		}
		if c1 := s[i+1]; c1 < lo || c1 > hi || s[i+2]&0xC0 != 0x80 || s[i+3]&0xC0 != 0x80 {
			return 0
		}
		return 4
	}
	return 0
}

// Append appends s, which should be UTF-8, as a JSON string: quoted,
// escaped, and with each byte that is not part of a valid UTF-8 sequence
// replaced by \ufffd.
func Append[S ~string | ~[]byte](dst []byte, s S) []byte {
	dst = append(dst, '"')
	dst = AppendEscaped(dst, s)
	return append(dst, '"')
}

// plain8 reports whether none of the 8 bytes packed in x is special: all
// are ASCII, none is a control character, '"' or '\\'. (The tests are the
// exact "has a byte less than n" and "has a zero byte" bit tricks.)
func plain8(x uint64) bool {
	const lo, hi = 0x0101010101010101, 0x8080808080808080
	q := x ^ ('"' * lo)
	b := x ^ ('\\' * lo)
	return (x|(x-0x20*lo)&^x|(q-lo)&^q|(b-lo)&^b)&hi == 0
}

// load8 returns s[i:i+8] as a little-endian word.
func load8[S ~string | ~[]byte](s S, i int) uint64 {
	s = s[i : i+8]
	return uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
		uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
}

// AppendEscaped is Append without the quotes.
func AppendEscaped[S ~string | ~[]byte](dst []byte, s S) []byte {
	dst, _ = appendEscaped(dst, s, false, false)
	return dst
}

// AppendJava appends s as Jackson (the JSON writer of Kafka Connect's
// JsonConverter, so of Debezium's records) writes the Java string that
// holds it: as Append, except that a control character's escape has
// upper-case hex (\u001A), a character outside the Basic Multilingual
// Plane is its UTF-16 surrogate pair, escaped (\uD83D\uDE00), and a byte
// that is not part of a valid UTF-8 sequence is U+FFFD written as itself
// (the Java string holds the replacement character, which Jackson does
// not escape). The two are equal as JSON; format debezium writes this one
// so that its bytes are Debezium's.
func AppendJava[S ~string | ~[]byte](dst []byte, s S) []byte {
	dst = append(dst, '"')
	dst = AppendEscapedJava(dst, s)
	return append(dst, '"')
}

// AppendEscapedJava is AppendJava without the quotes.
func AppendEscapedJava[S ~string | ~[]byte](dst []byte, s S) []byte {
	dst, _ = appendEscaped(dst, s, false, true)
	return dst
}

// AppendEscapedASCIIJava is AppendEscapedASCII with Jackson's upper-case
// hex: \u001A.
func AppendEscapedASCIIJava(dst []byte, c byte) []byte {
	if c >= 0x20 || c == '\n' || c == '\r' || c == '\t' || c == '\b' || c == '\f' {
		return AppendEscapedASCII(dst, c)
	}
	return append(dst, '\\', 'u', '0', '0', upperHexDigits[c>>4], upperHexDigits[c&0xF])
}

// AppendSurrogates appends the escaped UTF-16 surrogate pair of r, a
// character above U+FFFF, in upper-case hex as Jackson writes it.
func AppendSurrogates(dst []byte, r rune) []byte {
	r -= 0x10000
	for _, u := range [2]rune{0xD800 + r>>10, 0xDC00 + r&0x3FF} {
		dst = append(dst, '\\', 'u', upperHexDigits[u>>12&0xF], upperHexDigits[u>>8&0xF], upperHexDigits[u>>4&0xF], upperHexDigits[u&0xF])
	}
	return dst
}

// AppendValid is Append for text that must be valid UTF-8: it reports
// false, having appended part of s, at the first byte that is not part of
// a valid UTF-8 sequence, where Append would write \ufffd. It validates
// and escapes in one pass.
func AppendValid[S ~string | ~[]byte](dst []byte, s S) ([]byte, bool) {
	dst = append(dst, '"')
	dst, ok := appendEscaped(dst, s, true, false)
	return append(dst, '"'), ok
}

// appendEscaped escapes s into dst; an invalid byte becomes \ufffd, or,
// with strict, ends it with false. java escapes as AppendJava.
func appendEscaped[S ~string | ~[]byte](dst []byte, s S, strict, java bool) ([]byte, bool) {
	start := 0
	for i := 0; i < len(s); {
		if i+8 <= len(s) && plain8(load8(s, i)) {
			i += 8
			continue
		}
		c := s[i]
		if !special[c] {
			i++
			continue
		}
		if c < utf8.RuneSelf {
			dst = append(dst, s[start:i]...)
			if java {
				dst = AppendEscapedASCIIJava(dst, c)
			} else {
				dst = AppendEscapedASCII(dst, c)
			}
			i++
			start = i
			continue
		}
		if n := ValidLen(s, i); n > 0 {
			if java && n == 4 {
				dst = append(dst, s[start:i]...)
				r := rune(s[i]&0x07)<<18 | rune(s[i+1]&0x3F)<<12 | rune(s[i+2]&0x3F)<<6 | rune(s[i+3]&0x3F)
				dst = AppendSurrogates(dst, r)
				start = i + n
			}
			i += n
			continue
		}
		dst = append(dst, s[start:i]...)
		if strict {
			return dst, false
		}
		if java {
			dst = append(dst, "\uFFFD"...)
		} else {
			dst = append(dst, Replacement...)
		}
		i++
		start = i
	}
	return append(dst, s[start:]...), true
}
