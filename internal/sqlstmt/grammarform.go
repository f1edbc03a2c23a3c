package sqlstmt

import (
	"slices"
	"strings"
)

// grammarForm rewrites what MySQL and MariaDB accept in a CREATE or
// ALTER TABLE and Vitess's grammar reads only in part into the same
// meaning in words the grammar reads; it reports whether it changed q.
// Grammar uses it only for a statement the grammar did not read whole,
// and only when the rewritten one is read whole:
//
//   - type synonyms (MySQL's "Using Data Types from Other Database
//     Engines" and its national character types): DEC and FIXED are
//     DECIMAL, DOUBLE PRECISION is DOUBLE, INT1-INT8 and MIDDLEINT the
//     integer types, LONG and LONG VARCHAR MEDIUMTEXT, LONG VARBINARY
//     MEDIUMBLOB, CHARACTER [VARYING] CHAR/VARCHAR, NCHAR, NATIONAL CHAR,
//     NVARCHAR, NCHAR VARCHAR, NATIONAL VARCHAR and their VARYING forms
//     CHAR/VARCHAR with CHARACTER SET utf8mb3, SERIAL BIGINT UNSIGNED NOT
//     NULL AUTO_INCREMENT UNIQUE and the attribute SERIAL DEFAULT VALUE NOT
//     NULL AUTO_INCREMENT UNIQUE. A word is read as a type only where a
//     type stands: after a column's name that follows "(", ",", ADD,
//     COLUMN or MODIFY, or CHANGE's two names;
//   - a CREATE TABLE whose keys or constraints come before some column
//     (CREATE TABLE t (PRIMARY KEY (id), id INT)): the columns first, in
//     their order, then the rest in theirs (the table is the same).
//
// A statement with a /*! */ comment, which the server may have executed,
// is left as it is.
func grammarForm(q string) (string, bool) {
	if strings.Contains(q, "/*!") {
		return q, false
	}
	r := applyEdits(q, typeSynonyms(newTokens(q)))
	r = applyEdits(r, columnsFirst(r, newTokens(r)))
	return r, r != q
}

// tokens are a statement's significant spans: its words, quoted texts and
// punctuation.
type tokens struct {
	q   string
	sig []span
}

func newTokens(q string) tokens {
	var sig []span
	for _, s := range lex(q) {
		if s.kind != ' ' && s.kind != 'c' {
			sig = append(sig, s)
		}
	}
	return tokens{q, sig}
}

// word is token k in upper case when it is a word, else "".
func (t tokens) word(k int) string {
	if k < 0 || k >= len(t.sig) || t.sig[k].kind != 'w' {
		return ""
	}
	return strings.ToUpper(t.q[t.sig[k].start:t.sig[k].end])
}

// punct reports whether token k is the punctuation c.
func (t tokens) punct(k int, c byte) bool {
	return k >= 0 && k < len(t.sig) && t.sig[k].kind == 'p' && t.q[t.sig[k].start] == c
}

// isName reports whether token k may be a name: quoted in backticks, or a
// word that is not a number.
func (t tokens) isName(k int) bool {
	if k < 0 || k >= len(t.sig) {
		return false
	}
	if t.sig[k].kind == '`' {
		return true
	}
	w := t.word(k)
	return w != "" && (w[0] < '0' || w[0] > '9')
}

// An edit replaces q[start:end] by text.
type edit struct {
	start, end int
	text       string
}

// applyEdits makes edits, which do not overlap, in q.
func applyEdits(q string, edits []edit) string {
	if len(edits) == 0 {
		return q
	}
	slices.SortStableFunc(edits, func(a, b edit) int { return a.start - b.start })
	var b strings.Builder
	at := 0
	for _, e := range edits {
		b.WriteString(q[at:e.start])
		b.WriteString(e.text)
		at = e.end
	}
	b.WriteString(q[at:])
	return b.String()
}

// typeSynonyms are the edits that spell the type synonyms of t the
// grammar's way (see grammarForm).
func typeSynonyms(t tokens) []edit {
	sig, word, punct, isName := t.sig, t.word, t.punct, t.isName
	typeAt := func(k int) bool { // sig[k] stands where a column's type does
		if !isName(k - 1) {
			return false
		}
		if punct(k-2, '(') || punct(k-2, ',') || slices.Contains([]string{"ADD", "COLUMN", "MODIFY"}, word(k-2)) {
			return true
		}
		return isName(k-2) && slices.Contains([]string{"CHANGE", "COLUMN"}, word(k-3))
	}
	lengthEnd := func(k int) int { // the span index after a type's "(...)" at k, if any
		if !punct(k, '(') {
			return k
		}
		for j := k + 1; j < len(sig); j++ {
			if punct(j, ')') {
				return j + 1
			}
		}
		return k
	}

	var edits []edit
	replace := func(from, to int, text string) { // sig[from..to) by text
		edits = append(edits, edit{sig[from].start, sig[to-1].end, text})
	}
	national := func(k, n int, typ string) { // k..k+n are the type's words
		replace(k, k+n, typ)
		if end := lengthEnd(k + n); end > 0 {
			edits = append(edits, edit{sig[end-1].end, sig[end-1].end, " CHARACTER SET utf8mb3"})
		}
	}
	synonyms := map[string]string{"DEC": "DECIMAL", "FIXED": "DECIMAL", "INT1": "TINYINT", "INT2": "SMALLINT",
		"INT3": "MEDIUMINT", "INT4": "INT", "INT8": "BIGINT", "MIDDLEINT": "MEDIUMINT"}
	for k := 0; k < len(sig); k++ {
		w := word(k)
		if w == "SERIAL" && word(k+1) == "DEFAULT" && word(k+2) == "VALUE" && k > 1 {
			replace(k, k+3, "NOT NULL AUTO_INCREMENT UNIQUE")
			k += 2
			continue
		}
		if w == "" || !typeAt(k) {
			continue
		}
		next, next2 := word(k+1), word(k+2)
		switch {
		case synonyms[w] != "":
			replace(k, k+1, synonyms[w])
		case w == "DOUBLE" && next == "PRECISION":
			replace(k, k+2, "DOUBLE")
		case w == "LONG" && next == "VARBINARY":
			replace(k, k+2, "MEDIUMBLOB")
		case w == "LONG" && next == "VARCHAR":
			replace(k, k+2, "MEDIUMTEXT")
		case w == "LONG":
			replace(k, k+1, "MEDIUMTEXT")
		case w == "SERIAL":
			replace(k, k+1, "BIGINT UNSIGNED NOT NULL AUTO_INCREMENT UNIQUE")
		case w == "CHARACTER" && next == "VARYING":
			replace(k, k+2, "VARCHAR")
		case w == "CHARACTER":
			replace(k, k+1, "CHAR")
		case w == "NATIONAL" && (next == "CHAR" || next == "CHARACTER") && next2 == "VARYING",
			w == "NCHAR" && (next == "VARCHAR" || next == "VARYING"),
			w == "NATIONAL" && next == "VARCHAR":
			n := 2
			if w == "NATIONAL" && next != "VARCHAR" {
				n = 3
			}
			national(k, n, "VARCHAR")
			k += n - 1
		case w == "NATIONAL" && (next == "CHAR" || next == "CHARACTER"):
			national(k, 2, "CHAR")
			k++
		case w == "NCHAR":
			national(k, 1, "CHAR")
		case w == "NVARCHAR":
			national(k, 1, "VARCHAR")
		}
	}
	return edits
}

// columnsFirst returns the edit that moves a CREATE TABLE's columns before
// its keys and constraints, when one of those comes before a column (else
// none): the text between the table's parentheses, rewritten.
func columnsFirst(q string, t tokens) []edit {
	sig, word, punct := t.sig, t.word, t.punct
	if word(0) != "CREATE" {
		return nil
	}
	open := -1
	for k := 1; k < len(sig) && open < 0; k++ {
		switch {
		case punct(k, '('):
			open = k
		case word(k) == "SELECT" || word(k) == "LIKE":
			return nil
		}
	}
	if open < 0 || !slices.ContainsFunc(sig[:open], func(s span) bool { return strings.EqualFold(q[s.start:s.end], "TABLE") }) {
		return nil
	}
	var elems [][2]int // first and last sig index of each element
	depth, first := 0, open+1
	closed := false
	for k := open + 1; k < len(sig) && !closed; k++ {
		switch {
		case punct(k, '('):
			depth++
		case punct(k, ')') && depth > 0:
			depth--
		case punct(k, ')'), punct(k, ',') && depth == 0:
			if k > first {
				elems = append(elems, [2]int{first, k - 1})
			}
			first = k + 1
			closed = punct(k, ')')
		}
	}
	if !closed || len(elems) < 2 {
		return nil
	}
	keyWords := []string{"PRIMARY", "KEY", "INDEX", "UNIQUE", "FULLTEXT", "SPATIAL", "CONSTRAINT", "FOREIGN", "CHECK", "PERIOD"}
	var cols, keys []string
	reorder := false
	for _, e := range elems {
		text := q[sig[e[0]].start:sig[e[1]].end]
		if sig[e[0]].kind == 'w' && slices.Contains(keyWords, word(e[0])) {
			keys = append(keys, text)
			continue
		}
		reorder = reorder || len(keys) > 0
		cols = append(cols, text)
	}
	if !reorder {
		return nil
	}
	start, end := sig[elems[0][0]].start, sig[elems[len(elems)-1][1]].end
	return []edit{{start, end, strings.Join(append(cols, keys...), ", ")}}
}
