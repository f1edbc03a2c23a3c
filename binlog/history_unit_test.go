package binlog

import (
	"context"
	"strings"
	"testing"

	"github.com/sluice-cdc/sluice/position"
)

// TestHistoryApply applies DDL statements to definitions without a server
// and checks the columns the reader would decode with.
func TestHistoryApply(t *testing.T) {
	h := NewHistory(position.MySQL, nil, nil, nil)
	h.base = HistoryState{Pos: position.Position{File: "b.000001", Offset: 4}, Databases: map[string]string{"d": "latin1", "e": "utf8mb4"}}
	h.cur = h.replay(h.base, nil, position.Position{})
	off := uint32(100)
	apply := func(db, q string) []TableChange {
		t.Helper()
		off += 100
		ch, err := h.ApplyDDL(context.Background(), position.Position{File: "b.000001", Offset: off}, db, q)
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		return ch
	}
	cols := func(db, table string) string {
		t.Helper()
		def, err := h.Columns(context.Background(), db, table)
		if err != nil {
			t.Fatalf("%s.%s: %v", db, table, err)
		}
		var b []string
		for _, c := range def.Columns {
			s := c.Name + ":" + typeName(c.Type)
			if c.Unsigned {
				s += "+u"
			}
			if c.Charset != "" {
				s += "/" + c.Charset
			}
			if len(c.Enum) > 0 {
				s += "{" + strings.Join(c.Enum, ",") + "}"
			}
			if len(c.Set) > 0 {
				s += "[" + strings.Join(c.Set, ",") + "]"
			}
			b = append(b, s)
		}
		return strings.Join(b, " ")
	}
	want := func(db, table, w string) {
		t.Helper()
		if got := cols(db, table); got != w {
			t.Fatalf("%s.%s:\n got %s\nwant %s", db, table, got, w)
		}
	}
	ch := apply("d", "CREATE TABLE t (id INT UNSIGNED PRIMARY KEY, a VARCHAR(10), e ENUM('x','y''z'))")
	if len(ch) != 1 || ch[0].Kind != "CREATE" || ch[0].After == nil || ch[0].Before != nil {
		t.Fatalf("create: %+v", ch)
	}
	want("d", "t", "id:INT+u a:VARCHAR/latin1 e:ENUM/latin1{x,y'z}")
	apply("d", "ALTER TABLE t ADD COLUMN b BIGINT FIRST, ADD c TEXT CHARACTER SET utf8mb4 AFTER id")
	want("d", "t", "b:BIGINT id:INT+u c:BLOB/utf8mb4 a:VARCHAR/latin1 e:ENUM/latin1{x,y'z}")
	ch = apply("d", "ALTER TABLE t CHANGE COLUMN a a2 INT NOT NULL AFTER b, DROP COLUMN c, MODIFY e SET('p','q') FIRST, ALGORITHM=INPLACE, LOCK=NONE")
	if len(ch) != 1 || ch[0].Kind != "ALTER" || len(ch[0].Before.Columns) != 5 || len(ch[0].After.Columns) != 4 {
		t.Fatalf("alter: %+v", ch)
	}
	want("d", "t", "e:SET/latin1[p,q] b:BIGINT a2:INT id:INT+u")
	apply("d", "ALTER TABLE t RENAME COLUMN a2 TO a3, ADD v VARCHAR(5)")
	apply("d", "ALTER TABLE t CONVERT TO CHARACTER SET utf8mb4")
	want("d", "t", "e:SET/utf8mb4[p,q] b:BIGINT a3:INT id:INT+u v:VARCHAR/utf8mb4")
	apply("d", "ALTER TABLE t DEFAULT CHARSET=latin1, ADD w CHAR(3)")
	want("d", "t", "e:SET/utf8mb4[p,q] b:BIGINT a3:INT id:INT+u v:VARCHAR/utf8mb4 w:CHAR/latin1")
	apply("d", "RENAME TABLE t TO e.t2")
	if _, ok := h.cur.tables[histKey("d", "t")]; ok {
		t.Fatal("d.t still known after RENAME")
	}
	want("e", "t2", "e:SET/utf8mb4[p,q] b:BIGINT a3:INT id:INT+u v:VARCHAR/utf8mb4 w:CHAR/latin1")
	apply("e", "CREATE TABLE t3 LIKE t2")
	apply("e", "ALTER TABLE t3 RENAME TO t4, DROP COLUMN w")
	want("e", "t4", "e:SET/utf8mb4[p,q] b:BIGINT a3:INT id:INT+u v:VARCHAR/utf8mb4")
	apply("e", "CREATE TABLE p (id INT, x VARCHAR(3), PRIMARY KEY (id)) PARTITION BY RANGE (id) (PARTITION p0 VALUES LESS THAN (10), PARTITION p1 VALUES LESS THAN (20))")
	apply("e", "ALTER TABLE p ADD PARTITION (PARTITION p2 VALUES LESS THAN (30))")
	apply("e", "ALTER TABLE p REORGANIZE PARTITION p2 INTO (PARTITION p2a VALUES LESS THAN (25), PARTITION p2b VALUES LESS THAN (30))")
	apply("e", "ALTER TABLE p ADD COLUMN y INT")
	want("e", "p", "id:INT x:VARCHAR/utf8mb4 y:INT")
	apply("", "CREATE DATABASE f CHARACTER SET latin1")
	apply("f", "CREATE TABLE u (s VARCHAR(3))")
	want("f", "u", "s:VARCHAR/latin1")
	apply("", "ALTER DATABASE f CHARACTER SET utf8mb4")
	apply("f", "CREATE TABLE u2 (s VARCHAR(3))")
	want("f", "u2", "s:VARCHAR/utf8mb4")
	want("f", "u", "s:VARCHAR/latin1")
	ch = apply("e", "DROP TABLE t4, p")
	if len(ch) != 2 || ch[0].Kind != "DROP" {
		t.Fatalf("drop: %+v", ch)
	}
	// A statement the history cannot apply: the table is unknown.
	apply("e", "ALTER ONLINE TABLE t2 ADD z INT")
	if h.Stats().Unknown != 1 {
		t.Fatalf("unknown = %d, want 1", h.Stats().Unknown)
	}
	if _, err := h.Columns(context.Background(), "e", "t2"); err == nil {
		t.Fatal("an unknown table was described without a fallback")
	}
	// Replaying: as of an old position.
	at := h.TablesAt(position.Position{File: "b.000001", Offset: 300})
	if len(at) != 1 || at[0].Name != "t" || len(at[0].Table.Columns) != 5 {
		t.Fatalf("as of 300: %+v", at)
	}
	// A statement read again after a reconnection is not applied twice.
	if ch, _ := h.ApplyDDL(context.Background(), position.Position{File: "b.000001", Offset: 300}, "d", "ALTER TABLE t ADD q INT"); ch != nil {
		t.Fatal("an old statement was applied again")
	}
}

// TestHistoryPoint: the history marks a column declared POINT, and no
// other spatial column, as information_schema and the binlog do.
func TestHistoryPoint(t *testing.T) {
	h := NewHistory(position.MySQL, nil, nil, nil)
	h.base = HistoryState{Pos: position.Position{File: "b.000001", Offset: 4}, Databases: map[string]string{"d": "utf8mb4"}}
	h.cur = h.replay(h.base, nil, position.Position{})
	if _, err := h.ApplyDDL(context.Background(), position.Position{File: "b.000001", Offset: 100}, "d",
		"CREATE TABLE t (id INT PRIMARY KEY, pt POINT NOT NULL SRID 4326, g GEOMETRY, ls LINESTRING, mp MULTIPOINT, p2 point)"); err != nil {
		t.Fatal(err)
	}
	def, err := h.Columns(context.Background(), "d", "t")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{"id": false, "pt": true, "g": false, "ls": false, "mp": false, "p2": true}
	if len(def.Columns) != len(want) {
		t.Fatalf("%d columns, want %d", len(def.Columns), len(want))
	}
	for _, c := range def.Columns {
		if c.Point != want[c.Name] {
			t.Errorf("column %s: Point %v, want %v", c.Name, c.Point, want[c.Name])
		}
	}
}
