package sqlstmt

import (
	"strings"
	"testing"

	"vitess.io/vitess/go/vt/sqlparser"
)

func TestGrammarForm(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"CREATE TABLE t (a DEC(5,2), b FIXED, c DOUBLE PRECISION, d INT1, e INT8 UNSIGNED, f MIDDLEINT)",
			"CREATE TABLE t (a DECIMAL(5,2), b DECIMAL, c DOUBLE, d TINYINT, e BIGINT UNSIGNED, f MEDIUMINT)"},
		{"CREATE TABLE t (a NCHAR(10) NULL DEFAULT '10', b NVARCHAR(10), c nchar default null, d NATIONAL CHARACTER VARYING(3), e NCHAR VARCHAR(4) COLLATE utf8mb3_bin, f NATIONAL CHAR(2))",
			"CREATE TABLE t (a CHAR(10) CHARACTER SET utf8mb3 NULL DEFAULT '10', b VARCHAR(10) CHARACTER SET utf8mb3, c CHAR CHARACTER SET utf8mb3 default null, d VARCHAR(3) CHARACTER SET utf8mb3, e VARCHAR(4) CHARACTER SET utf8mb3 COLLATE utf8mb3_bin, f CHAR(2) CHARACTER SET utf8mb3)"},
		{"CREATE TABLE t (id SERIAL, n INT SERIAL DEFAULT VALUE, l LONG, lv LONG VARCHAR, lb LONG VARBINARY, cv CHARACTER VARYING(3), ch CHARACTER(2))",
			"CREATE TABLE t (id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT UNIQUE, n INT NOT NULL AUTO_INCREMENT UNIQUE, l MEDIUMTEXT, lv MEDIUMTEXT, lb MEDIUMBLOB, cv VARCHAR(3), ch CHAR(2))"},
		{"ALTER TABLE t ADD COLUMN a NCHAR(3), MODIFY b DEC(4,1), CHANGE c d FIXED(2,1), ADD e SERIAL",
			"ALTER TABLE t ADD COLUMN a CHAR(3) CHARACTER SET utf8mb3, MODIFY b DECIMAL(4,1), CHANGE c d DECIMAL(2,1), ADD e BIGINT UNSIGNED NOT NULL AUTO_INCREMENT UNIQUE"},
		{"CREATE TABLE Products (\n  PRIMARY KEY (id),\n  id INTEGER NOT NULL AUTO_INCREMENT,\n  name VARCHAR(255) NOT NULL, KEY k (name, id)\n)",
			"CREATE TABLE Products (\n  id INTEGER NOT NULL AUTO_INCREMENT, name VARCHAR(255) NOT NULL, PRIMARY KEY (id), KEY k (name, id)\n)"},
		// Names, strings and options that look like synonyms stay.
		{"CREATE TABLE t (`nchar` INT, serial INT, fixed INT, c VARCHAR(3) DEFAULT 'DEC') ROW_FORMAT=FIXED COMMENT 'NCHAR(3)'", ""},
		{"CREATE TABLE t (a INT, PRIMARY KEY (a))", ""},
		{"/*!40101 CREATE TABLE t (a DEC) */", ""},
	} {
		got, ok := grammarForm(c.in)
		if c.want == "" {
			if ok {
				t.Errorf("%q rewritten: %q", c.in, got)
			}
			continue
		}
		if got != c.want {
			t.Errorf("%q:\n got  %q\n want %q", c.in, got, c.want)
		}
		st, err := Grammar(c.in)
		if err != nil || !fullyParsed(st) {
			t.Errorf("%q: the grammar still does not read it whole (%v)", c.in, err)
		}
		direct, err := parser.Parse(c.in)
		if err == nil && fullyParsed(direct) {
			t.Errorf("%q: read whole without the rewrite; the case tests nothing", c.in)
		}
	}
}

// FuzzGrammarForm: any statement is rewritten without a panic, and a
// rewrite keeps every quoted text of the statement (a comment between a
// CREATE TABLE's columns and keys may go).
func FuzzGrammarForm(f *testing.F) {
	f.Add("CREATE TABLE t (PRIMARY KEY (id), id NCHAR(3) COMMENT 'x')")
	f.Add("ALTER TABLE t ADD a DEC, CHANGE b c SERIAL DEFAULT VALUE")
	f.Fuzz(func(t *testing.T, q string) {
		r, ok := grammarForm(q)
		if !ok {
			if r != q {
				t.Fatalf("not rewritten, but changed: %q", r)
			}
			return
		}
		quoted := func(s string) map[string]int {
			m := map[string]int{}
			for _, sp := range lex(s) {
				if sp.kind == '\'' || sp.kind == '"' || sp.kind == '`' {
					m[s[sp.start:sp.end]]++
				}
			}
			return m
		}
		a, b := quoted(q), quoted(r)
		for k, n := range a {
			if b[k] != n {
				t.Fatalf("%q -> %q: %q appears %d times, was %d", q, r, k, b[k], n)
			}
		}
	})
}

// TestGrammarQuotedCharset: a character set and collation written as
// strings are names in the tree, utf8 utf8mb3.
func TestGrammarQuotedCharset(t *testing.T) {
	st, err := Grammar("ALTER TABLE t MODIFY COLUMN c ENUM('a','b''c') CHARACTER SET 'utf8' COLLATE \"utf8_unicode_ci\" NOT NULL")
	if err != nil {
		t.Fatal(err)
	}
	got := sqlparser.String(st)
	if !strings.Contains(got, "character set utf8mb3 collate utf8mb3_unicode_ci") {
		t.Errorf("%s", got)
	}
}
