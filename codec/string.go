package codec

import (
	"unicode/utf8"

	"github.com/sluice-cdc/sluice/internal/charset"
	"github.com/sluice-cdc/sluice/internal/jsonstr"
)

// This file holds the conversion of MySQL character sets to UTF-8 JSON
// strings, on internal/jsonstr's escaping and UTF-8 validation. All of
// them append to dst and allocate nothing beyond growing dst.

// appendRune appends the JSON form of code point r: escaped if it is an
// ASCII special, U+FFFD's escape if it is not a valid scalar value, else
// its UTF-8 encoding.
func appendRune(dst []byte, r rune, java bool) []byte {
	switch {
	case r < 0, r > utf8.MaxRune, 0xD800 <= r && r <= 0xDFFF:
		if java {
			return utf8.AppendRune(dst, utf8.RuneError)
		}
		return append(dst, jsonstr.Replacement...)
	case r < utf8.RuneSelf:
		if jsonstr.Special(byte(r)) {
			if java {
				return jsonstr.AppendEscapedASCIIJava(dst, byte(r))
			}
			return jsonstr.AppendEscapedASCII(dst, byte(r))
		}
		return append(dst, byte(r))
	case r > 0xFFFF && java:
		return jsonstr.AppendSurrogates(dst, r)
	}
	return utf8.AppendRune(dst, r)
}

// AppendString appends s as a JSON string: quoted, escaped, each byte
// that is not part of a valid UTF-8 sequence replaced by \ufffd. It is the
// one JSON string quoter of sluice's outputs (internal/jsonstr, which the
// binlog reader's JSON documents share; strconv's quoting is Go syntax,
// not JSON: it writes \x01 for a control byte).
func AppendString(dst []byte, s string) []byte { return jsonstr.Append(dst, s) }

// appendText appends character data in the named MySQL character set as a
// JSON string, converted to UTF-8 as the server's CONVERT(... USING
// utf8mb4) does (internal/charset): a character that is invalid in its set
// or has no Unicode mapping becomes '?'. UTF-8 text is validated as it is
// escaped (an invalid byte becomes \ufffd); text of a set neither server
// has is taken as UTF-8.
func appendText(dst, s []byte, charsetName string) []byte {
	return appendTextAs(dst, s, charsetName, false)
}

// appendJavaText is appendText as Jackson writes the string
// (jsonstr.AppendJava): format debezium's.
func appendJavaText(dst, s []byte, charsetName string) []byte {
	return appendTextAs(dst, s, charsetName, true)
}

func appendTextAs(dst, s []byte, charsetName string, java bool) []byte {
	dst = append(dst, '"')
	cs := lookupCharset(charsetName)
	if cs == nil || cs.IsUTF8() {
		if java {
			dst = jsonstr.AppendEscapedJava(dst, s)
		} else {
			dst = jsonstr.AppendEscaped(dst, s)
		}
		return append(dst, '"')
	}
	if t := cs.Single(); t != nil {
		return append(appendSingle(dst, s, t, java), '"')
	}
	ascii := cs.ASCIICompatible()
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if ascii && !jsonstr.Special(c) {
			i++
			continue
		}
		dst = append(dst, s[start:i]...)
		if ascii && c < utf8.RuneSelf {
			dst = appendRune(dst, rune(c), java)
			i++
		} else {
			r, n, _ := cs.Next(s[i:])
			dst = appendRune(dst, r, java)
			i += n
		}
		start = i
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// appendSingle appends text of a one-byte set by its table t: ASCII bytes
// the set keeps as they are copied in runs, the others converted (a
// negative entry is '?').
func appendSingle(dst, s []byte, t *[256]rune, java bool) []byte {
	start := 0
	for i, c := range s {
		if c < utf8.RuneSelf && t[c] == rune(c) && !jsonstr.Special(c) {
			continue
		}
		dst = append(dst, s[start:i]...)
		start = i + 1
		r := t[c]
		if r < 0 {
			r = charset.Replacement
		}
		dst = appendRune(dst, r, java)
	}
	return append(dst, s[start:]...)
}

// lookupCharset is charset.Lookup with the commonest sets first.
func lookupCharset(name string) *charset.Charset {
	switch name {
	case "utf8mb4", "":
		return utf8mb4
	case "latin1":
		return latin1
	}
	return charset.Lookup(name)
}

var (
	utf8mb4 = charset.Lookup("utf8mb4")
	latin1  = charset.Lookup("latin1")
)
