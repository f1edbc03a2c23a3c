package codec

import (
	"bytes"
	"math/big"
	"strconv"
	"strings"

	"github.com/sluice-cdc/sluice/internal/jsonstr"
)

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

// appendMySQLJSONSpacing appends compact JSON text doc with a space after
// each ',' and ':' between tokens, as MySQL writes a JSON value as text
// (`{"a": [1, 2.5]}`): what a snapshot's SELECT returned before the
// snapshot compacted it (snapshot.compactJSON).
func appendMySQLJSONSpacing(dst, doc []byte) []byte {
	inString, escaped := false, false
	for _, c := range doc {
		dst = append(dst, c)
		switch {
		case inString && escaped:
			escaped = false
		case inString && c == '\\':
			escaped = true
		case c == '"':
			inString = !inString
		case !inString && (c == ',' || c == ':'):
			dst = append(dst, ' ')
		}
	}
	return dst
}

// appendDbzJSONText appends doc, the compact text the binlog reader makes
// of a MySQL binary JSON document, as Debezium's binlog library
// (mysql-binlog-connector-java's JsonStringFormatter) formats the same
// document in a streamed row: a double as Java's Double.toString writes
// it, or, where that has an exponent, as the exact decimal value of the
// double in plain notation (BigDecimal(double).toPlainString: 1e300 is its
// 301 digits, 1700000000.0 is 1700000000), and a control character's
// escape in upper-case hex (\u001B). A number with a fraction that ends
// in a zero (19.90) or more than 17 significant digits is a DECIMAL, not
// a double (MySQL writes a double with its shortest digits), and is kept.
func appendDbzJSONText(dst, doc []byte) []byte {
	inString, escaped := false, false
	for i := 0; i < len(doc); i++ {
		c := doc[i]
		if inString {
			switch {
			case escaped:
				escaped = false
				if c == 'u' && i+4 < len(doc) {
					dst = append(dst, 'u')
					for _, h := range doc[i+1 : i+5] {
						if 'a' <= h && h <= 'f' {
							h -= 'a' - 'A'
						}
						dst = append(dst, h)
					}
					i += 4
					continue
				}
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
			dst = append(dst, c)
			continue
		}
		if c == '"' {
			inString = true
		}
		if c != '-' && (c < '0' || c > '9') {
			dst = append(dst, c)
			continue
		}
		j := i
		for j < len(doc) && strings.IndexByte("0123456789+-.eE", doc[j]) >= 0 {
			j++
		}
		dst = appendDbzJSONNumber(dst, doc[i:j])
		i = j - 1
	}
	return dst
}

// appendDbzJSONNumber appends a number of a JSON document's text as
// appendDbzJSONText does.
func appendDbzJSONNumber(dst, tok []byte) []byte {
	if bytes.IndexAny(tok, ".eE") < 0 {
		return append(dst, tok...) // an integer
	}
	if e := bytes.IndexAny(tok, "eE"); e < 0 {
		if frac := tok[bytes.IndexByte(tok, '.')+1:]; len(frac) > 1 && frac[len(frac)-1] == '0' {
			return append(dst, tok...) // a DECIMAL: 19.90
		}
	}
	digits := 0
	for _, c := range tok {
		if c == 'e' || c == 'E' {
			break
		}
		if c >= '0' && c <= '9' && (digits > 0 || c != '0') {
			digits++
		}
	}
	f, err := strconv.ParseFloat(string(tok), 64)
	if digits > 17 || err != nil {
		return append(dst, tok...)
	}
	n := len(dst)
	dst = appendJavaFloat(dst, f, 64)
	if bytes.IndexByte(dst[n:], 'E') < 0 {
		return dst
	}
	// BigDecimal(f).toPlainString(): the double's exact decimal value.
	exact := new(big.Float).SetFloat64(f).Text('f', 1074)
	if strings.IndexByte(exact, '.') >= 0 {
		exact = strings.TrimSuffix(strings.TrimRight(exact, "0"), ".")
	}
	return append(dst[:n], exact...)
}
