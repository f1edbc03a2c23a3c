package sqlstmt

import (
	"errors"
	"fmt"
	"strings"
)

// TableText writes db and table as the one line of text sluice's own
// settings, checkpoints and signals use for a table: "db.table", each
// name as it is unless it holds a '.', a ',' or a backtick, or starts or
// ends with white space; then that name is quoted (QuoteIdent). Names of
// letters, digits and most punctuation, in any script, stay plain, as they
// were always written (`shop.orders`, `oh.Ünï cöde-tbl`); `a.b` of db
// `my.db` is "`my.db`.`a.b`". ParseTableText reads it back.
func TableText(db, table string) string {
	return textName(db) + "." + textName(table)
}

func textName(s string) string {
	if s == "" || strings.ContainsAny(s, ".,`") || strings.TrimSpace(s) != s {
		return QuoteIdent(s)
	}
	return s
}

// ParseTableText reads what TableText writes: "db.table", either name
// plain or in backticks (a backtick in it doubled), white space around
// the whole trimmed.
func ParseTableText(s string) (db, table string, err error) {
	parts, err := SplitOutsideQuotes(strings.TrimSpace(s), '.')
	if err != nil {
		return "", "", fmt.Errorf("table %q: %w", s, err)
	}
	if len(parts) != 2 {
		return "", "", fmt.Errorf("table %q: want db.table (a name with a '.' in backticks: `my.db`.orders)", s)
	}
	var names [2]string
	for i, p := range parts {
		n, _, err := UnquoteIdent(p)
		if err != nil {
			return "", "", fmt.Errorf("table %q: %w", s, err)
		}
		if n == "" {
			return "", "", fmt.Errorf("table %q: want db.table, both names given", s)
		}
		names[i] = n
	}
	return names[0], names[1], nil
}

// SplitOutsideQuotes splits s at each sep that is not inside backticks.
func SplitOutsideQuotes(s string, sep byte) ([]string, error) {
	var out []string
	start, quoted := 0, false
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '`':
			quoted = !quoted // a doubled backtick closes and opens again
		case c == sep && !quoted:
			out = append(out, s[start:i])
			start = i + 1
		}
	}
	if quoted {
		return nil, errors.New("has a backtick that is not closed (a backtick in a name is doubled: `a``b`)")
	}
	return append(out, s[start:]), nil
}

// UnquoteIdent reads one name: in backticks, the name inside with each
// doubled backtick single (quoted true), else s as it is; white space
// around it is trimmed.
func UnquoteIdent(s string) (name string, quoted bool, err error) {
	s = strings.TrimSpace(s)
	if !strings.Contains(s, "`") {
		return s, false, nil
	}
	if len(s) < 2 || s[0] != '`' || s[len(s)-1] != '`' {
		return "", false, fmt.Errorf("%q mixes a name in backticks with text outside them: write the whole name in backticks", s)
	}
	inner := s[1 : len(s)-1]
	if strings.Contains(strings.ReplaceAll(inner, "``", ""), "`") {
		return "", false, fmt.Errorf("%q: a backtick in a name is doubled (`a``b`)", s)
	}
	return strings.ReplaceAll(inner, "``", "`"), true, nil
}

// quoteBareNames puts in backticks each name of q written without them
// that holds a character beyond ASCII (MySQL and MariaDB take U+0080 to
// U+FFFF in unquoted names: ALTER TABLE Ünï ADD c INT), which Vitess's
// tokenizer stops in. Outside strings, quoted names and comments such a
// character can only be part of a name, so the statement means the same.
// A query of ASCII only is returned as it is.
func quoteBareNames(q string) string {
	ascii := true
	for i := 0; i < len(q); i++ {
		if q[i] >= 0x80 {
			ascii = false
			break
		}
	}
	if ascii {
		return q
	}
	var b strings.Builder
	b.Grow(len(q) + 8)
	for _, sp := range lex(q) {
		w := q[sp.start:sp.end]
		if sp.kind == 'w' && strings.IndexFunc(w, func(r rune) bool { return r >= 0x80 }) >= 0 {
			b.WriteString(QuoteIdent(w))
		} else {
			b.WriteString(w)
		}
	}
	return b.String()
}
