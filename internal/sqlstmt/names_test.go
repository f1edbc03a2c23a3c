package sqlstmt

import (
	"strings"
	"testing"
)

func TestTableText(t *testing.T) {
	cases := []struct{ db, table, text string }{
		{"shop", "orders", "shop.orders"},
		{"oh", "Ünï cöde-tbl", "oh.Ünï cöde-tbl"},
		{"名前 db", "select", "名前 db.select"},
		{"my.db", "a,b", "`my.db`.`a,b`"},
		{"x", "a`b", "x.`a``b`"},
		{" lead", "t", "` lead`.t"},
	}
	for _, tc := range cases {
		if got := TableText(tc.db, tc.table); got != tc.text {
			t.Errorf("TableText(%q, %q) = %q, want %q", tc.db, tc.table, got, tc.text)
		}
		db, table, err := ParseTableText(tc.text)
		if err != nil || db != tc.db || table != tc.table {
			t.Errorf("ParseTableText(%q) = %q, %q, %v", tc.text, db, table, err)
		}
		// Fully quoted reads the same.
		if db, table, err := ParseTableText(QuoteName(tc.db, tc.table)); err != nil || db != tc.db || table != tc.table {
			t.Errorf("ParseTableText(%q) = %q, %q, %v", QuoteName(tc.db, tc.table), db, table, err)
		}
	}
	for text, want := range map[string]string{
		"shop": "want db.table", "a.b.c": "want db.table", "shop.": "both names", "`a.b": "not closed", "`a`b.c": "mixes",
	} {
		if _, _, err := ParseTableText(text); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseTableText(%q) = %v, want an error with %q", text, err, want)
		}
	}
	parts, err := SplitOutsideQuotes("a.b, `c,d`.e", ',')
	if err != nil || len(parts) != 2 || parts[1] != " `c,d`.e" {
		t.Errorf("SplitOutsideQuotes: %q, %v", parts, err)
	}
}

func TestBareNamesBeyondASCII(t *testing.T) {
	for q, want := range map[string]string{
		"ALTER TABLE Ünï ADD c INT":                     "ALTER TABLE `Ünï` ADD c INT",
		"CREATE TABLE 名前.t1名 (ça INT, b VARCHAR(3))":    "CREATE TABLE `名前`.`t1名` (`ça` INT, b VARCHAR(3))",
		"INSERT INTO t VALUES ('Ünï', \"ö\", `ü`) -- ä": "INSERT INTO t VALUES ('Ünï', \"ö\", `ü`) -- ä",
		"UPDATE t SET a = 'it''s ü' /* ß */ WHERE ñ=1":  "UPDATE t SET a = 'it''s ü' /* ß */ WHERE `ñ`=1",
		"SELECT 1": "SELECT 1",
	} {
		if got := quoteBareNames(q); got != want {
			t.Errorf("quoteBareNames(%q) = %q, want %q", q, got, want)
		}
	}
	st := Parse("ALTER TABLE Ünï ADD c INT", "db")
	if !st.Parsed || len(st.Tables) != 1 || st.Tables[0].Name != "Ünï" || st.Tables[0].Schema != "db" {
		t.Errorf("Parse of an unquoted name beyond ASCII: %+v", st)
	}
	if _, err := Grammar("CREATE TABLE 名前 (ça INT)"); err != nil {
		t.Errorf("Grammar of unquoted names beyond ASCII: %v", err)
	}
}
