package binlog_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/sluice-cdc/sluice/binlog"
	"github.com/sluice-cdc/sluice/codec"
	"github.com/sluice-cdc/sluice/internal/testenv"
	"github.com/sluice-cdc/sluice/position"
	"github.com/sluice-cdc/sluice/snapshot"
)

// captureHistory is a schema history of the selected tables captured from
// db now, at the current binlog end.
func captureHistory(t *testing.T, db *testenv.Server, f position.Flavor, tables *binlog.Filter, store binlog.HistoryStore) (*binlog.History, position.Position) {
	t.Helper()
	start := binlogEnd(t, db)
	var match func(string, string) bool
	if tables != nil {
		match = tables.Match
	}
	h := binlog.NewHistory(f, match, store, nil)
	c, err := db.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := h.Capture(context.Background(), c, start); err != nil {
		t.Fatal(err)
	}
	return h, start
}

// rowText renders a row change as "name=value ..." in column order.
func rowText(ch *binlog.Change) string {
	var b []string
	for i, c := range ch.Table.Columns {
		b = append(b, c.Name+"="+ch.After[i].String())
	}
	return strings.Join(b, " ")
}

// TestHistoryDoubleAlter is the libslave case: rows, ALTER, rows, ALTER,
// rows, all written before the reader starts, read from the first
// position with binlog_row_metadata=MINIMAL. information_schema knows
// only the last definition; the history decodes every row with the
// columns it was written with. A second reader started between the two
// ALTERs rewinds the same history to its start.
func TestHistoryDoubleAlter(t *testing.T) {
	testenv.ForEachFlavor(t, func(t *testing.T, f position.Flavor) {
		db := startServer(t, f, testenv.Options{RowMetadata: "MINIMAL"})
		exec(t, db, "CREATE DATABASE app", "CREATE TABLE app.t (id INT PRIMARY KEY, a INT, b VARCHAR(10))")
		tables, _ := binlog.ParseFilter("app.*")
		h, start := captureHistory(t, db, f, tables, nil)
		exec(t, db, "INSERT INTO app.t VALUES (1, 10, 'one')",
			"ALTER TABLE app.t ADD COLUMN c VARCHAR(5) AFTER id, DROP COLUMN a")
		exec(t, db, "INSERT INTO app.t VALUES (2, 'two', 'b2')")
		mid := binlogEnd(t, db)
		exec(t, db, "ALTER TABLE app.t MODIFY b VARCHAR(10) FIRST, CHANGE c cc VARCHAR(5), ADD n BIGINT UNSIGNED",
			"INSERT INTO app.t VALUES ('b3', 3, 'three', 18446744073709551615)")
		want := []string{
			"id=1 a=10 b=one",
			"id=2 c=two b=b2",
			"b=b3 id=3 cc=three n=18446744073709551615",
		}
		read := func(start position.Position, want []string) {
			t.Helper()
			r := newReader(t, db, func(c *binlog.Config) { c.Start, c.Tables, c.History = start, tables, h })
			var got []string
			enc := codec.NewEncoder(codec.Source{Name: "test"})
			for len(got) < len(want) {
				txn := next(t, r)
				for i := range txn.Changes {
					ch := &txn.Changes[i]
					if ch.Op != binlog.OpDDL {
						got = append(got, rowText(ch))
						continue
					}
					// The schema-change message carries the columns
					// before and after.
					line := string(enc.AppendChange(nil, txn, ch))
					if strings.Contains(ch.Query, "DROP COLUMN a") && !strings.Contains(line, `"tableChanges":[{"type":"ALTER","id":"\"app\".\"t\"","table":{"primaryKeyColumnNames":["id"],"columns":[{"name":"id","typeName":"INT","charsetName":null,"position":1,"optional":false},{"name":"c","typeName":"VARCHAR"`) ||
						!strings.Contains(line, `"before":{"primaryKeyColumnNames":["id"],"columns":[{"name":"id"`) {
						t.Errorf("DDL message without the right tableChanges: %s", line)
					}
				}
			}
			if strings.Join(got, "\n") != strings.Join(want, "\n") {
				t.Fatalf("from %s:\n got %q\nwant %q", start, got, want)
			}
		}
		read(start, want)
		read(mid, want[2:])
		if s := h.Stats(); s.Unknown != 0 {
			t.Fatalf("stats %+v", s)
		}
		// Without the history, the first row does not fit
		// information_schema's definition.
		r := newReader(t, db, func(c *binlog.Config) { c.Start, c.Tables = start, tables })
		if _, err := r.Next(timeout(t)); err == nil || !strings.Contains(err.Error(), "app.t") {
			t.Fatalf("without a history: %v", err)
		}
	})
}

// TestHistoryCheckedAgainstFullMetadata: with binlog_row_metadata=FULL the
// binlog's own column names and types win; a history that differs (here
// an ALTER run with sql_log_bin=0, which the binlog never shows) is
// reported (Stats().Mismatches), and the rows decode by the binlog.
func TestHistoryCheckedAgainstFullMetadata(t *testing.T) {
	testenv.ForEachFlavor(t, func(t *testing.T, f position.Flavor) {
		db := startServer(t, f, testenv.Options{})
		exec(t, db, "CREATE DATABASE app", "CREATE TABLE app.t (id INT PRIMARY KEY, a INT)")
		tables, _ := binlog.ParseFilter("app.*")
		h, start := captureHistory(t, db, f, tables, nil)
		exec(t, db, "INSERT INTO app.t VALUES (1, 10)")
		exec(t, db, "SET SESSION sql_log_bin = 0", "ALTER TABLE app.t CHANGE a b INT", "SET SESSION sql_log_bin = 1")
		exec(t, db, "INSERT INTO app.t VALUES (2, 20)")
		r := newReader(t, db, func(c *binlog.Config) { c.Start, c.Tables, c.History = start, tables, h })
		var got []string
		for len(got) < 2 {
			txn := next(t, r)
			for i := range txn.Changes {
				got = append(got, rowText(&txn.Changes[i]))
			}
		}
		if want := "id=1 a=10\nid=2 b=20"; strings.Join(got, "\n") != want {
			t.Fatalf("got %q, want %q", got, want)
		}
		if s := h.Stats(); s.Mismatches != 1 {
			t.Fatalf("stats %+v, want one mismatch (the second row's table)", s)
		}
		if s := r.Stats().History; s.Mismatches != 1 {
			t.Fatalf("reader stats %+v, want the history's mismatch (sluice_schema_history_mismatches_total)", s)
		}
	})
}

// TestHistoryTableAsDescribed: the schema history's resolved definition
// of a table (History.Table, what a TRUNCATE of a table no row was read of
// carries) is the one the reader gives a row of the table, and the one
// the snapshot reads from information_schema, for every column type of the
// differential tests and the aliases a CREATE TABLE may declare, on both
// servers (a MariaDB JSON column, SHOW CREATE TABLE's LONGTEXT with a
// json_valid check, is JSON to each).
func TestHistoryTableAsDescribed(t *testing.T) {
	testenv.ForEachFlavor(t, func(t *testing.T, f position.Flavor) {
		db := startServer(t, f, testenv.Options{})
		exec(t, db, "CREATE DATABASE app")
		types := diffCaseFor(f).tables[0]
		exec(t, db, types.createSQL()...)
		exec(t, db, "CREATE TABLE app.aliases (id INTEGER PRIMARY KEY, b BOOLEAN, b2 BOOL DEFAULT TRUE, d DEC(8,3), fx FIXED, n NUMERIC, nc NCHAR(3), nv NVARCHAR(5), "+
			"f73 FLOAT(7,3) UNSIGNED, r REAL, dp DOUBLE PRECISION, bt BIT, dt2 DATETIME(2), ts4 TIMESTAMP(4) NULL, t1 TIME(1), "+
			"e ENUM('it''s','b') NOT NULL, s SET('x') DEFAULT 'x', u8 VARCHAR(3) CHARACTER SET utf8, z INT ZEROFILL) DEFAULT CHARSET latin1")
		names := []string{types.name, "aliases"}
		if f == position.MariaDB {
			// Vitess's grammar has no INET4, INET6 or UUID: the history
			// does not know such a table (a TRUNCATE of it has no schema
			// until a row was read).
			exec(t, db, "CREATE TABLE app.inet (id INT PRIMARY KEY, i4 INET4)")
		}
		tables, _ := binlog.ParseFilter("app.*")
		h, start := captureHistory(t, db, f, tables, nil)
		exec(t, db, "SET SESSION sql_mode = ''", "INSERT INTO app."+types.name+" (id) VALUES (1)", "INSERT INTO app.aliases (id) VALUES (1)")
		r := newReader(t, db, func(c *binlog.Config) { c.Start, c.Tables, c.History = start, tables, h })
		read := map[string]*binlog.Table{}
		for len(read) < len(names) {
			txn := next(t, r)
			for i := range txn.Changes {
				if tb := txn.Changes[i].Table; tb != nil && txn.Changes[i].Op != binlog.OpDDL {
					read[tb.Name] = tb
				}
			}
		}
		c, err := db.Conn(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		for _, name := range names {
			got := h.Table("app", name)
			if got == nil {
				t.Fatalf("%s: the history has no resolved definition", name)
			}
			described, err := snapshot.Describe(context.Background(), c, "app", name)
			if err != nil {
				t.Fatal(err)
			}
			for what, want := range map[string]*binlog.Table{"the reader's row": read[name], "information_schema": described} {
				if len(got.Columns) != len(want.Columns) {
					t.Fatalf("%s: %d columns, %s %d", name, len(got.Columns), what, len(want.Columns))
				}
				for i := range want.Columns {
					gc, wc := got.Columns[i], want.Columns[i]
					if g, w := columnTypeText(&gc), columnTypeText(&wc); g != w {
						t.Errorf("%s column %d:\n history %s\n %s %s", name, i+1, g, what, w)
					}
				}
				if fmt.Sprint(got.PrimaryKey) != fmt.Sprint(want.PrimaryKey) {
					t.Errorf("%s: key %v, %s %v", name, got.PrimaryKey, what, want.PrimaryKey)
				}
			}
		}
		if f == position.MariaDB && h.Table("app", "inet") != nil {
			t.Error("a table of a type Vitess's grammar does not read has a definition")
		}
		if h.Table("app", "nosuch") != nil {
			t.Error("a table the history does not know has a definition")
		}
	})
}

// columnTypeText is what a column's definition says of its type.
func columnTypeText(c *binlog.Column) string {
	def := "<none>"
	if c.Default != nil {
		def = *c.Default
	}
	return fmt.Sprintf("%s type=%d kind=%v unsigned=%v nullable=%v charset=%q frac=%d prec=%d bits=%d enum=%q set=%q floatMD=%v point=%v uuid=%v typeName=%s default=%q",
		c.Name, c.Type, c.Kind, c.Unsigned, c.Nullable, c.Charset, c.Frac, c.Precision, c.BitLen, c.Enum, c.Set, c.FloatMD, c.Point, c.UUID, c.TypeName(), def)
}
