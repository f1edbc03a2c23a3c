package sqlstmt

import (
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestParse(t *testing.T) {
	cases := []struct {
		q, db  string
		kind   Kind
		parsed bool
		tables []string
	}{
		{"INSERT INTO t (a,b) VALUES (1,'x'),(2,'y')", "shop", DML, true, []string{"shop.t"}},
		{"/* app=foo */ INSERT INTO shop.orders SET id=1, v='a'", "", DML, true, []string{"shop.orders"}},
		{"insert ignore into t values (1) on duplicate key update a=values(a)", "d", DML, true, []string{"d.t"}},
		{"INSERT INTO t VALUES (1) AS new ON DUPLICATE KEY UPDATE a=new.a", "d", DML, true, []string{"d.t"}},
		{"REPLACE INTO `we ird`.`ta``b` VALUES (1)", "", DML, true, []string{"we ird.ta`b"}},
		{"UPDATE t SET a=a+1 WHERE id=3", "d", DML, true, []string{"d.t"}},
		{"UPDATE t1 JOIN other.t2 ON t1.id=t2.id SET t1.a=t2.b", "d", DML, true, []string{"d.t1"}},
		{"UPDATE t1 AS x, o.t2 y SET x.a=1, y.b=2 WHERE x.id=y.id", "d", DML, true, []string{"d.t1", "o.t2"}},
		{"UPDATE t1, t2 SET a=1 WHERE t1.id=t2.id", "d", DML, true, []string{"d.t1", "d.t2"}},
		{"DELETE FROM t WHERE id=1", "d", DML, true, []string{"d.t"}},
		{"DELETE t1, x FROM t1 INNER JOIN o.t2 AS x INNER JOIN t3 WHERE t1.id=x.id", "d", DML, true, []string{"d.t1", "o.t2"}},
		{"DELETE FROM t1 USING t1 JOIN t2 ON t1.a=t2.a", "d", DML, true, []string{"d.t1"}},
		{"INSERT INTO a.t SELECT * FROM b.s WHERE x > 1", "d", DML, true, []string{"a.t"}},
		{"WITH c AS (SELECT 1 AS a) UPDATE t, c SET t.a=c.a", "d", DML, true, []string{"d.t"}},
		{"LOAD DATA INFILE '/tmp/x.csv' INTO TABLE t FIELDS TERMINATED BY ','", "d", DML, true, []string{"d.t"}},
		{"LOAD DATA LOCAL INFILE '/tmp/x' IGNORE INTO TABLE `db`.`t`", "", DML, true, []string{"db.t"}},
		{"UPDATE t SET j = JSON_SET(j, '$.a', 1) WHERE id = 1", "", DML, true, []string{".t"}},
		{"INSERT INTO t VALUES (1)\n# comment\n", "d", DML, true, []string{"d.t"}},
		{"# leading\nDELETE FROM t", "d", DML, true, []string{"d.t"}},
		// Valid MySQL the grammar does not read: classified, not parsed.
		{"UPDATE LOW_PRIORITY IGNORE t SET a=1", "d", DML, false, nil},
		{"DELETE QUICK IGNORE FROM t", "d", DML, false, nil},
		{"INSERT INTO t VALUES (1) RETURNING id", "d", DML, false, nil}, // MariaDB
		{"CREATE TABLE t (a int)", "d", DDL, false, nil},
		{"TRUNCATE TABLE t", "d", DDL, false, nil},
		{"XA COMMIT X'6131',X'',1", "", Transaction, false, nil},
		{"SAVEPOINT s1", "", Transaction, false, nil},
		{"BEGIN", "", Transaction, false, nil},
		{"SET @a = 1", "", Other, false, nil},
		{"", "", Other, false, nil},
	}
	for _, c := range cases {
		st := Parse(c.q, c.db)
		var got []string
		for _, tb := range st.Tables {
			got = append(got, tb.String())
		}
		if st.Kind != c.kind || st.Parsed != c.parsed || !slices.Equal(got, c.tables) {
			t.Errorf("Parse(%q, %q) = kind %v parsed %v tables %q; want %v %v %q", c.q, c.db, st.Kind, st.Parsed, got, c.kind, c.parsed, c.tables)
		}
	}
}

func TestPreview(t *testing.T) {
	cases := []struct{ q, want string }{
		{"INSERT INTO users (name, pw) VALUES ('alice', 'secret')", "INSERT INTO users (name, pw) VALUES ( ..."},
		{"/* c */ UPDATE shop.t SET v='b'", "UPDATE shop.t SET v = ..."},
		{"DELETE FROM t", "DELETE FROM t"},
		{"UPDATE t SET pw=0x414243", "UPDATE t SET pw = ..."},
		{"INSERT INTO `a b`.t VALUES (1)", "INSERT INTO `a b`.t VALUES ( ..."},
	}
	for _, c := range cases {
		if got := Preview(c.q, 80); got != c.want {
			t.Errorf("Preview(%q) = %q; want %q", c.q, got, c.want)
		}
	}
	if got := Preview("UPDATE "+strings.Repeat("a", 200)+" SET x=1", 40); len(got) > 44 || !strings.HasSuffix(got, "...") {
		t.Errorf("long Preview = %q", got)
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"INSERT INTO t VALUES (1,'x')", "UPDATE t1, t2 SET t1.a=1", "DELETE t1 FROM t1 JOIN t2",
		"LOAD DATA INFILE 'x' INTO TABLE d.t", "WITH c AS (SELECT 1) DELETE FROM t", "/* x */ REPLACE INTO t SELECT 1",
		"# c\nINSERT INTO `a``b`.t SET a=0x41", "XA COMMIT X'31',X'',1",
	} {
		f.Add(s, "db")
	}
	f.Fuzz(func(t *testing.T, q, db string) {
		st := Parse(q, db)
		if !st.Parsed && len(st.Tables) > 0 {
			t.Fatalf("unparsed statement with tables: %+v", st)
		}
		p := Preview(q, 60)
		if len(p) > 64 {
			t.Fatalf("Preview too long: %q", p)
		}
		if utf8.ValidString(q) && !utf8.ValidString(p) {
			t.Fatalf("Preview of valid UTF-8 is not: %q", p)
		}
	})
}

var benchStmts = []string{
	"INSERT INTO t (a,b) VALUES (1,'x'),(2,'y')",
	"/* app=foo */ INSERT INTO shop.orders SET id=1, v='a'",
	"UPDATE t SET a=a+1 WHERE id=3",
	"UPDATE t1 JOIN other.t2 ON t1.id=t2.id SET t1.a=t2.b",
	"DELETE FROM t WHERE id=1",
	"DELETE t1, t2 FROM t1 INNER JOIN t2 INNER JOIN t3 WHERE t1.id=t2.id AND t2.id=t3.id",
	"INSERT INTO a.t SELECT * FROM b.s WHERE x > 1",
	"REPLACE INTO t VALUES (1)",
}

// BenchmarkParse reports the cost of one DML statement (the mix above).
func BenchmarkParse(b *testing.B) {
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		Parse(benchStmts[i%len(benchStmts)], "shop")
	}
}

func BenchmarkPreview(b *testing.B) {
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		Preview(benchStmts[i%len(benchStmts)], 80)
	}
}
