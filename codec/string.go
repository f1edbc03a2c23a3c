package codec

import (
	"github.com/sluice-cdc/sluice/binlog"

	"strings"
	"unicode/utf8"
)

// This file holds the JSON string writers: escaping, UTF-8 validation and
// the conversion of MySQL character sets to UTF-8. All of them append to
// dst and allocate nothing beyond growing dst.

const hexDigits = "0123456789abcdef"

// replacement is what an undecodable byte or code unit becomes: the JSON
// escape of U+FFFD REPLACEMENT CHARACTER (as encoding/json writes it).
const replacement = `\ufffd`

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

// appendEscapedASCII appends the JSON escape of an ASCII byte c that is
// special: the short escapes \" \\ \b \f \n \r \t, else \u00XX.
func appendEscapedASCII(dst []byte, c byte) []byte {
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

// appendRune appends the JSON form of code point r: escaped if it is an
// ASCII special, U+FFFD's escape if it is not a valid scalar value, else
// its UTF-8 encoding.
func appendRune(dst []byte, r rune) []byte {
	switch {
	case r < 0:
		return append(dst, replacement...)
	case r < utf8.RuneSelf:
		if special[r] {
			return appendEscapedASCII(dst, byte(r))
		}
		return append(dst, byte(r))
	case r > utf8.MaxRune, 0xD800 <= r && r <= 0xDFFF:
		return append(dst, replacement...)
	}
	return utf8.AppendRune(dst, r)
}

// validLen returns the length of the valid UTF-8 sequence starting at
// s[i] (a byte >= 0x80), or 0 if there is none. It accepts exactly what
// unicode/utf8 accepts: no overlong forms, no surrogates, nothing above
// U+10FFFF.
func validLen[S ~string | ~[]byte](s S, i int) int {
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

// AppendString appends s as a JSON string: quoted, escaped, each byte
// that is not part of a valid UTF-8 sequence replaced by \ufffd. It is the
// one JSON string quoter of sluice's outputs (strconv's quoting is Go
// syntax, not JSON: it writes \x01 for a control byte).
func AppendString(dst []byte, s string) []byte { return appendQuoted(dst, s) }

// appendQuoted appends s, which should be UTF-8, as a JSON string: quoted,
// escaped, and with each byte that is not part of a valid UTF-8 sequence
// replaced by \ufffd.
func appendQuoted[S ~string | ~[]byte](dst []byte, s S) []byte {
	dst = append(dst, '"')
	dst = appendUTF8(dst, s)
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

// appendUTF8 is appendQuoted without the quotes.
func appendUTF8[S ~string | ~[]byte](dst []byte, s S) []byte {
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
			dst = appendEscapedASCII(dst, c)
			i++
			start = i
			continue
		}
		if n := validLen(s, i); n > 0 {
			i += n
			continue
		}
		dst = append(dst, s[start:i]...)
		dst = append(dst, replacement...)
		i++
		start = i
	}
	return append(dst, s[start:]...)
}

// latin1Rune returns the code point of MySQL latin1 byte c.
func latin1Rune(c byte) rune { return binlog.Latin1Rune(c) }

// appendLatin1 appends MySQL latin1 (Windows-1252) text converted to UTF-8.
// Every byte maps to a code point, so nothing is ever replaced.
func appendLatin1(dst, s []byte) []byte {
	start := 0
	for i, c := range s {
		if !special[c] {
			continue
		}
		dst = append(dst, s[start:i]...)
		start = i + 1
		if c < utf8.RuneSelf {
			dst = appendEscapedASCII(dst, c)
		} else {
			dst = utf8.AppendRune(dst, latin1Rune(c))
		}
	}
	return append(dst, s[start:]...)
}

// appendUTF16 appends UTF-16 text (big-endian unless le) converted to
// UTF-8. ucs2 is the same without surrogate pairs: a surrogate code unit
// is replaced. An unpaired surrogate and a trailing odd byte become \ufffd.
func appendUTF16(dst, s []byte, le, pairs bool) []byte {
	unit := func(i int) rune {
		if le {
			return rune(s[i]) | rune(s[i+1])<<8
		}
		return rune(s[i])<<8 | rune(s[i+1])
	}
	i := 0
	for ; i+1 < len(s); i += 2 {
		r := unit(i)
		if r >= 0xD800 && r <= 0xDFFF {
			if pairs && r < 0xDC00 && i+3 < len(s) {
				if r2 := unit(i + 2); r2 >= 0xDC00 && r2 <= 0xDFFF {
					dst = utf8.AppendRune(dst, 0x10000+(r-0xD800)<<10+(r2-0xDC00))
					i += 2
					continue
				}
			}
			dst = append(dst, replacement...)
			continue
		}
		dst = appendRune(dst, r)
	}
	if i < len(s) {
		dst = append(dst, replacement...)
	}
	return dst
}

// appendUTF32 appends big-endian UTF-32 text converted to UTF-8. A code
// unit that is not a Unicode scalar value, and a trailing partial unit,
// become \ufffd.
func appendUTF32(dst, s []byte) []byte {
	i := 0
	for ; i+3 < len(s); i += 4 {
		u := uint32(s[i])<<24 | uint32(s[i+1])<<16 | uint32(s[i+2])<<8 | uint32(s[i+3])
		if u > utf8.MaxRune {
			dst = append(dst, replacement...)
			continue
		}
		dst = appendRune(dst, rune(u))
	}
	if i < len(s) {
		dst = append(dst, replacement...)
	}
	return dst
}

// charset identifies a character-set conversion.
type charset uint8

const (
	csUTF8 charset = iota // utf8mb4, utf8mb3, utf8, ascii, unknown: validate
	csLatin1
	csUCS2
	csUTF16
	csUTF16LE
	csUTF32
)

// charsetOf maps a MySQL character set name to its conversion. The common
// names are matched exactly first, then case-blind; unknown names
// (and every UTF-8 flavour and ascii) are treated as UTF-8.
func charsetOf(name string) charset {
	switch name {
	case "utf8mb4", "utf8mb3", "utf8", "ascii", "":
		return csUTF8
	case "latin1":
		return csLatin1
	case "ucs2":
		return csUCS2
	case "utf16":
		return csUTF16
	case "utf16le":
		return csUTF16LE
	case "utf32":
		return csUTF32
	}
	for _, c := range charsetNames {
		if strings.EqualFold(name, c.name) {
			return c.cs
		}
	}
	return csUTF8
}

var charsetNames = [...]struct {
	name string
	cs   charset
}{
	{"latin1", csLatin1}, {"ucs2", csUCS2}, {"utf16", csUTF16}, {"utf16le", csUTF16LE}, {"utf32", csUTF32},
}

// appendText appends character data in the named MySQL character set as a
// JSON string, converted to UTF-8.
func appendText(dst, s []byte, charsetName string) []byte {
	dst = append(dst, '"')
	switch charsetOf(charsetName) {
	case csLatin1:
		dst = appendLatin1(dst, s)
	case csUCS2:
		dst = appendUTF16(dst, s, false, false)
	case csUTF16:
		dst = appendUTF16(dst, s, false, true)
	case csUTF16LE:
		dst = appendUTF16(dst, s, true, true)
	case csUTF32:
		dst = appendUTF32(dst, s)
	default:
		dst = appendUTF8(dst, s)
	}
	return append(dst, '"')
}
