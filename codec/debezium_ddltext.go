package codec

import (
	"regexp"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"
)

// dbzNormalize returns DDL statement q as Debezium 3.6's MySQL connector
// writes it in a schema-change event's ddl: that connector rewrites each
// statement before its parser reads it (io.debezium.connector.mysql.antlr.
// DdlNormalizer), and the event carries the rewritten text. Outside
// comments (-- and # to the end of the line, /* */ but not /*! */),
// '...' strings and `...` names:
//
//   - a "..." string becomes '...' (a ' in it doubled, the rest, "" and
//     \" included, as it is), unless the statement ran with sql_mode
//     ANSI_QUOTES (ansi: "..." is a name). Debezium reads ANSI_QUOTES from
//     the sql_mode it last saw set; sluice from the statement's own
//     (binlog.Change.ANSIQuotes), which is the server's reading of it;
//   - a window function's name (RANK, LAG, ROW_NUMBER, ...) used as a
//     table name after CREATE/ALTER/DROP TABLE, FROM, JOIN or INTO, as a
//     column name before a type, or before ':' is backticked.
//
// Scanning follows Debezium's regular expression (a quoted text ends at
// its first lone closing quote; one that is never closed ends at its last
// doubled quote, or is no quoted text at all); the statement is one the
// server accepted, so its quotes are closed.
func dbzNormalize(q string, ansi bool) string {
	if !strings.ContainsAny(q, `"`) && !dbzWindowNames().MatchString(q) {
		return q
	}
	var b strings.Builder
	b.Grow(len(q) + 8)
	plain := 0 // start of the text not yet written
	for i := 0; i < len(q); {
		end, quoted := dbzLiteralEnd(q, i)
		if end < 0 {
			i++
			continue
		}
		b.WriteString(dbzBacktickNames(q[plain:i]))
		if quoted == '"' && !ansi {
			b.WriteByte('\'')
			b.WriteString(strings.ReplaceAll(q[i+1:end-1], "'", "''"))
			b.WriteByte('\'')
		} else {
			b.WriteString(q[i:end])
		}
		i, plain = end, end
	}
	b.WriteString(dbzBacktickNames(q[plain:]))
	return b.String()
}

// dbzLiteralEnd returns the end of the comment, string or quoted name
// that starts at q[i], and its quote (0 for a comment); -1 when none
// starts there.
func dbzLiteralEnd(q string, i int) (int, byte) {
	rest := q[i:]
	switch {
	case strings.HasPrefix(rest, "--"), rest[0] == '#':
		if n := strings.IndexByte(rest, '\n'); n >= 0 {
			return i + n, 0
		}
		return len(q), 0
	case strings.HasPrefix(rest, "/*"):
		if len(rest) > 2 && rest[2] == '!' {
			return -1, 0
		}
		if n := strings.Index(rest[2:], "*/"); n >= 0 {
			return i + 2 + n + 2, 0
		}
		return -1, 0
	case rest[0] == '\'', rest[0] == '"', rest[0] == '`':
		quote := rest[0]
		lastPair := -1
		for j := 1; j < len(rest); {
			switch c := rest[j]; {
			case c == '\\' && quote != '`':
				if j+1 >= len(rest) {
					j = len(rest)
					continue
				}
				j += 2
			case c == quote:
				if j+1 < len(rest) && rest[j+1] == quote {
					lastPair = j
					j += 2
					continue
				}
				return i + j + 1, quote
			default:
				j++
			}
		}
		if lastPair >= 0 {
			return i + lastPair + 1, quote
		}
		return -1, 0
	}
	return -1, 0
}

// dbzSpace is Java's \s (Go's has no \v).
const dbzSpace = `[\t\n\x0B\f\r ]`

const dbzWindowNameList = `CUME_DIST|DENSE_RANK|FIRST_VALUE|JSON_TABLE|LAG|LAST_VALUE|LEAD|NTH_VALUE|NTILE|PERCENT_RANK|RANK|ROW_NUMBER`

// The normalizer's expressions, compiled when a statement first needs
// them.
var (
	dbzWindowNames = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`(?i)\b(` + dbzWindowNameList + `)\b`)
	})
	dbzNameRules = sync.OnceValue(func() []struct {
		re   *regexp.Regexp
		repl string
	} {
		return []struct {
			re   *regexp.Regexp
			repl string
		}{
			{regexp.MustCompile(`(?i)\b(CREATE` + dbzSpace + `+TABLE|ALTER` + dbzSpace + `+TABLE|DROP` + dbzSpace + `+TABLE|FROM|JOIN|LEFT` + dbzSpace + `+JOIN|RIGHT` + dbzSpace + `+JOIN|INNER` + dbzSpace + `+JOIN|OUTER` + dbzSpace + `+JOIN|INTO)` + dbzSpace + `+(` + dbzWindowNameList + `)\b`), "${1} `${2}`"},
			{regexp.MustCompile(`(?i)\b(` + dbzWindowNameList + `)` + dbzSpace + `+((?:VAR)?CHAR|INT|BIGINT|DECIMAL|NUMERIC|FLOAT|DOUBLE|JSON|TEXT|BLOB|DATE|DATETIME|TIMESTAMP|TIME|YEAR|ENUM|SET|BINARY|VARBINARY|BIT|BOOL|BOOLEAN)\b`), "`${1}` ${2}"},
			{regexp.MustCompile(`(?i)\b(` + dbzWindowNameList + `)` + dbzSpace + `*:`), "`${1}`:"},
		}
	})
)

// dbzBacktickNames backticks the window functions' names used as names
// in s, a part of a statement outside its comments and quotes. Java's \b
// (Debezium's) takes any letter or digit for a word's, Go's only ASCII:
// the expressions run on a copy of s with the bytes of every other letter,
// digit and mark replaced by 'x', and the replacements are made in s.
func dbzBacktickNames(s string) string {
	if s == "" || !dbzWindowNames().MatchString(s) {
		return s
	}
	for _, r := range dbzNameRules() {
		masked := dbzMaskWords(s)
		ms := r.re.FindAllStringSubmatchIndex(masked, -1)
		if ms == nil {
			continue
		}
		out := make([]byte, 0, len(s)+2*len(ms))
		last := 0
		for _, m := range ms {
			out = append(out, s[last:m[0]]...)
			out = r.re.ExpandString(out, r.repl, s, m)
			last = m[1]
		}
		s = string(append(out, s[last:]...))
	}
	return s
}

// dbzMaskWords returns s with the bytes of each non-ASCII letter, digit
// or non-spacing mark replaced by 'x' (the same length, so that indexes
// into it are indexes into s).
func dbzMaskWords(s string) string {
	var b []byte
	for i, r := range s {
		if r < utf8.RuneSelf || !(unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.Is(unicode.Mn, r)) {
			continue
		}
		if b == nil {
			b = []byte(s)
		}
		for j := range utf8.RuneLen(r) {
			b[i+j] = 'x'
		}
	}
	if b == nil {
		return s
	}
	return string(b)
}
