package codec

import "github.com/sluice-cdc/sluice/internal/jsonstr"

// This file embeds JSON column values. The decoder hands over JSON text;
// it is copied into the output compacted (insignificant whitespace
// removed, so a pretty-printed MariaDB document cannot break the
// one-event-per-line framing) and checked on the way: a byte inside a
// string that is not valid UTF-8 is replaced by \ufffd, and text that is
// not JSON at all is written as a JSON string instead.

// maxJSONDepth is the deepest nesting accepted, the same as encoding/json.
const maxJSONDepth = 10000

// appendJSONValue appends the JSON column value doc: null if it is empty
// (or only whitespace), the compacted document if it is valid JSON, else
// the text as a JSON string.
func appendJSONValue(dst, doc []byte) []byte {
	p := jsonScanner{src: doc}
	p.skipSpace()
	if p.i == len(doc) {
		return append(dst, "null"...)
	}
	n := len(dst)
	out, ok := p.value(dst, 0)
	if ok {
		p.skipSpace()
		if p.i == len(doc) {
			return out
		}
	}
	return jsonstr.Append(out[:n], doc)
}

// jsonScanner is a recursive-descent JSON validator that copies what it
// accepts.
type jsonScanner struct {
	src []byte
	i   int
}

func (p *jsonScanner) skipSpace() {
	for p.i < len(p.src) {
		switch p.src[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

// value copies one JSON value starting at p.i (no leading space) to dst.
// depth is the number of containers around it.
func (p *jsonScanner) value(dst []byte, depth int) ([]byte, bool) {
	if p.i >= len(p.src) {
		return dst, false
	}
	switch c := p.src[p.i]; c {
	case '{', '[':
		if depth+1 > maxJSONDepth {
			return dst, false
		}
		end := byte('}')
		if c == '[' {
			end = ']'
		}
		dst = append(dst, c)
		p.i++
		p.skipSpace()
		if p.i < len(p.src) && p.src[p.i] == end {
			p.i++
			return append(dst, end), true
		}
		for {
			var ok bool
			if c == '{' {
				if p.i >= len(p.src) || p.src[p.i] != '"' {
					return dst, false
				}
				if dst, ok = p.str(dst); !ok {
					return dst, false
				}
				p.skipSpace()
				if p.i >= len(p.src) || p.src[p.i] != ':' {
					return dst, false
				}
				dst = append(dst, ':')
				p.i++
				p.skipSpace()
			}
			if dst, ok = p.value(dst, depth+1); !ok {
				return dst, false
			}
			p.skipSpace()
			if p.i >= len(p.src) {
				return dst, false
			}
			switch p.src[p.i] {
			case ',':
				dst = append(dst, ',')
				p.i++
				p.skipSpace()
			case end:
				p.i++
				return append(dst, end), true
			default:
				return dst, false
			}
		}
	case '"':
		return p.str(dst)
	case 't':
		return p.literal(dst, "true")
	case 'f':
		return p.literal(dst, "false")
	case 'n':
		return p.literal(dst, "null")
	}
	return p.number(dst)
}

func (p *jsonScanner) literal(dst []byte, lit string) ([]byte, bool) {
	if len(p.src)-p.i < len(lit) || string(p.src[p.i:p.i+len(lit)]) != lit {
		return dst, false
	}
	p.i += len(lit)
	return append(dst, lit...), true
}

// number copies a number: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func (p *jsonScanner) number(dst []byte) ([]byte, bool) {
	s, start := p.src, p.i
	i := start
	if i < len(s) && s[i] == '-' {
		i++
	}
	switch {
	case i < len(s) && s[i] == '0':
		i++
	case i < len(s) && s[i] >= '1' && s[i] <= '9':
		for i < len(s) && isDigit(s[i]) {
			i++
		}
	default:
		return dst, false
	}
	if i < len(s) && s[i] == '.' {
		i++
		if i >= len(s) || !isDigit(s[i]) {
			return dst, false
		}
		for i < len(s) && isDigit(s[i]) {
			i++
		}
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		if i >= len(s) || !isDigit(s[i]) {
			return dst, false
		}
		for i < len(s) && isDigit(s[i]) {
			i++
		}
	}
	p.i = i
	return append(dst, s[start:i]...), true
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func isHex(c byte) bool {
	return isDigit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')
}

// str copies a string starting at its opening quote. Escapes are copied as
// they are; bytes that are not valid UTF-8 become \ufffd.
func (p *jsonScanner) str(dst []byte) ([]byte, bool) {
	s := p.src
	start := p.i
	i := start + 1
	for i < len(s) {
		c := s[i]
		switch {
		case c == '"':
			i++
			p.i = i
			return append(dst, s[start:i]...), true
		case c == '\\':
			if i+1 >= len(s) {
				return dst, false
			}
			switch s[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if i+5 >= len(s) || !isHex(s[i+2]) || !isHex(s[i+3]) || !isHex(s[i+4]) || !isHex(s[i+5]) {
					return dst, false
				}
				i += 6
			default:
				return dst, false
			}
		case c < 0x20:
			return dst, false
		case c < 0x80:
			i++
		default:
			if n := jsonstr.ValidLen(s, i); n > 0 {
				i += n
				continue
			}
			dst = append(dst, s[start:i]...)
			dst = append(dst, jsonstr.Replacement...)
			i++
			start = i
		}
	}
	return dst, false
}
