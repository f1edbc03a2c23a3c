package binlog

import (
	"testing"

	"vitess.io/vitess/go/vt/schemadiff"
)

// TestParseCreateTableDefaults: the defaults as Debezium's parser gives
// its defaultValueExpression, from both servers' SHOW CREATE TABLE
// spellings (MySQL quotes numbers, MariaDB does not and writes
// current_timestamp()), and ApplyCreateTable's members.
func TestParseCreateTableDefaults(t *testing.T) {
	create := "CREATE TABLE `t` (`id` int NOT NULL, `a` int DEFAULT '5', `b` int DEFAULT 5, `c` varchar(3) DEFAULT _utf8mb4'x', " +
		"`d` timestamp NOT NULL DEFAULT CURRENT_TIMESTAMP, `e` datetime DEFAULT current_timestamp(), `f` int DEFAULT NULL, `g` int, " +
		"`h` int DEFAULT (1+2), `i` varchar(3) DEFAULT '', `j` bit(3) DEFAULT b'101', `k` int DEFAULT -5, `l` enum('x','ü') DEFAULT 'ü', PRIMARY KEY (`id`))"
	def, err := ParseCreateTable(create, false)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"a": "5", "b": "5", "c": "x", "d": "1970-01-01 00:00:00", "e": "1970-01-01 00:00:00", "i": "", "j": "0b101", "k": "-5", "l": "ü"}
	for _, c := range def.Columns {
		w, ok := want[c.Name]
		switch {
		case !ok && c.Default != nil:
			t.Errorf("column %s: default %q, want none", c.Name, *c.Default)
		case ok && (c.Default == nil || *c.Default != w):
			t.Errorf("column %s: default %v, want %q", c.Name, c.Default, w)
		}
	}
	tb := &Table{Columns: []Column{{Name: "L", Enum: []string{"x", "?"}}, {Name: "a"}, {Name: "zz"}}}
	ApplyCreateTable(tb, def)
	if tb.Columns[0].Enum[1] != "ü" || tb.Columns[1].Default == nil || *tb.Columns[1].Default != "5" || tb.Columns[2].Default != nil {
		t.Fatalf("ApplyCreateTable: %+v", tb.Columns)
	}
	if _, err := ParseCreateTable("CREATE TABLE (", false); err == nil {
		t.Fatal("a broken statement parsed")
	}
}

// TestTableDefAsDebezium: the tableChanges attributes Debezium's parser
// gives, as TestDebeziumOracleTopics found them: a BIT default's digits,
// AUTO_INCREMENT and ON UPDATE CURRENT_TIMESTAMP autoIncremented and
// generated, a generated (AS) column neither, comments kept.
func TestTableDefAsDebezium(t *testing.T) {
	ent, err := schemadiff.NewCreateTableEntityFromSQL(histEnv, "CREATE TABLE t (id INT NOT NULL AUTO_INCREMENT PRIMARY KEY COMMENT 'pk', "+
		"b BIT(3) DEFAULT b'101', m DATETIME DEFAULT CURRENT_TIMESTAMP ON UPDATE CURRENT_TIMESTAMP, g INT AS (id * 2)) COMMENT 'tc'")
	if err != nil {
		t.Fatal(err)
	}
	d := tableDef(ent, "utf8mb4")
	type attrs struct {
		ai, gen bool
		def     string
	}
	want := map[string]attrs{"id": {true, true, ""}, "b": {false, false, "101"}, "m": {true, true, "1970-01-01 00:00:00"}, "g": {false, false, ""}}
	for _, c := range d.Columns {
		got := attrs{c.AutoIncrement, c.Generated, ""}
		if c.Default != nil {
			got.def = *c.Default
		}
		if got != want[c.Name] {
			t.Errorf("column %s: %+v, want %+v", c.Name, got, want[c.Name])
		}
	}
	if d.Comment == nil || *d.Comment != "tc" || d.Columns[0].Comment == nil || *d.Columns[0].Comment != "pk" {
		t.Errorf("comments: %v, %v", d.Comment, d.Columns[0].Comment)
	}
}
