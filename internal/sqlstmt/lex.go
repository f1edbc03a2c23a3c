package sqlstmt

import "strings"

// A span is one lexical piece of a statement, for the rewrites made before
// the grammar reads it (quoteBareNames, grammarForm): q[start:end] is a
// quoted string or name (kind is its quote: ', " or `), a comment ('c'),
// a word of name characters ('w': letters, digits, _, $ and every byte
// beyond ASCII), white space (' ') or any other single byte ('p').
type span struct {
	kind       byte
	start, end int
}

// nameByte reports whether c may be part of an unquoted name or number.
func nameByte(c byte) bool {
	return c >= 0x80 || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '$'
}

// lex splits q into spans, in order, covering all of it. A quote that is
// never closed runs to the end.
func lex(q string) []span {
	var out []span
	for i := 0; i < len(q); {
		c := q[i]
		s := span{kind: 'p', start: i, end: i + 1}
		switch {
		case c == '\'' || c == '"' || c == '`':
			j := i + 1
			for j < len(q) {
				if q[j] == '\\' && c != '`' && j+1 < len(q) {
					j += 2
					continue
				}
				if q[j] == c {
					if j+1 < len(q) && q[j+1] == c { // doubled: part of it
						j += 2
						continue
					}
					j++
					break
				}
				j++
			}
			s = span{c, i, j}
		case c == '#' || c == '-' && strings.HasPrefix(q[i:], "-- "):
			j := strings.IndexByte(q[i:], '\n')
			if j < 0 {
				j = len(q) - i
			}
			s = span{'c', i, i + j}
		case c == '/' && strings.HasPrefix(q[i:], "/*"):
			j := strings.Index(q[i+2:], "*/")
			if j < 0 {
				j = len(q) - i - 2
			} else {
				j += 2
			}
			s = span{'c', i, i + 2 + j}
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			j := i + 1
			for j < len(q) && (q[j] == ' ' || q[j] == '\t' || q[j] == '\n' || q[j] == '\r') {
				j++
			}
			s = span{' ', i, j}
		case nameByte(c):
			j := i + 1
			for j < len(q) && nameByte(q[j]) {
				j++
			}
			s = span{'w', i, j}
		}
		out = append(out, s)
		i = s.end
	}
	return out
}
