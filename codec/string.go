package codec

import (
	"github.com/sluice-cdc/sluice/binlog"
	"github.com/sluice-cdc/sluice/internal/jsonstr"

	"strings"
	"unicode/utf8"
)

// This file holds the conversion of MySQL character sets to UTF-8 JSON
// strings, on internal/jsonstr's escaping and UTF-8 validation. All of
// them append to dst and allocate nothing beyond growing dst.

// appendRune appends the JSON form of code point r: escaped if it is an
// ASCII special, U+FFFD's escape if it is not a valid scalar value, else
// its UTF-8 encoding.
func appendRune(dst []byte, r rune) []byte {
	switch {
	case r < 0:
		return append(dst, jsonstr.Replacement...)
	case r < utf8.RuneSelf:
		if jsonstr.Special(byte(r)) {
			return jsonstr.AppendEscapedASCII(dst, byte(r))
		}
		return append(dst, byte(r))
	case r > utf8.MaxRune, 0xD800 <= r && r <= 0xDFFF:
		return append(dst, jsonstr.Replacement...)
	}
	return utf8.AppendRune(dst, r)
}

// AppendString appends s as a JSON string: quoted, escaped, each byte
// that is not part of a valid UTF-8 sequence replaced by \ufffd. It is the
// one JSON string quoter of sluice's outputs (internal/jsonstr, which the
// binlog reader's JSON documents share; strconv's quoting is Go syntax,
// not JSON: it writes \x01 for a control byte).
func AppendString(dst []byte, s string) []byte { return jsonstr.Append(dst, s) }

// latin1Rune returns the code point of MySQL latin1 byte c.
func latin1Rune(c byte) rune { return binlog.Latin1Rune(c) }

// appendLatin1 appends MySQL latin1 (Windows-1252) text converted to UTF-8.
// Every byte maps to a code point, so nothing is ever replaced.
func appendLatin1(dst, s []byte) []byte {
	start := 0
	for i, c := range s {
		if !jsonstr.Special(c) {
			continue
		}
		dst = append(dst, s[start:i]...)
		start = i + 1
		if c < utf8.RuneSelf {
			dst = jsonstr.AppendEscapedASCII(dst, c)
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
			dst = append(dst, jsonstr.Replacement...)
			continue
		}
		dst = appendRune(dst, r)
	}
	if i < len(s) {
		dst = append(dst, jsonstr.Replacement...)
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
			dst = append(dst, jsonstr.Replacement...)
			continue
		}
		dst = appendRune(dst, rune(u))
	}
	if i < len(s) {
		dst = append(dst, jsonstr.Replacement...)
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
		dst = jsonstr.AppendEscaped(dst, s)
	}
	return append(dst, '"')
}
