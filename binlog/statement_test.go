package binlog_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluice-cdc/sluice/binlog"
	"github.com/sluice-cdc/sluice/internal/testenv"
	"github.com/sluice-cdc/sluice/position"
)

// statementWorkload writes, with a session in binlog_format=STATEMENT,
// one DML statement of each form on shop.t (captured) between row-logged
// inserts, and statements on other.x (not captured) that must pass.
func statementWorkload(t *testing.T, db *testenv.Server) (stmts []string) {
	t.Helper()
	exec(t, db, "CREATE DATABASE shop", "CREATE DATABASE other",
		"CREATE TABLE shop.t (id INT PRIMARY KEY, v VARCHAR(40))", "CREATE TABLE other.x (id INT PRIMARY KEY, v VARCHAR(40))")
	csv := filepath.Join(db.TmpDir(), "rows.csv")
	if err := os.WriteFile(csv, []byte("50,l1\n51,l2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	stmts = []string{
		"INSERT INTO t VALUES (2, 'hunter2-secret')",
		"/* app */ UPDATE shop.t SET v = 'hunter2-secret' WHERE id = 1",
		"UPDATE other.x JOIN shop.t ON x.id = t.id SET t.v = 'hunter2-secret'",
		"DELETE FROM t WHERE v = 'hunter2-secret'",
		"REPLACE INTO shop.t SELECT id + 10, v FROM other.x",
		"LOAD DATA INFILE '" + csv + "' INTO TABLE t FIELDS TERMINATED BY ','",
	}
	for i, s := range stmts {
		exec(t, db, "INSERT INTO shop.t VALUES ("+itoa(100+i)+", 'row')")
		exec(t, db, "USE other", "SET SESSION binlog_format = 'STATEMENT'",
			"INSERT INTO x VALUES ("+itoa(200+i)+", 'not captured')", "UPDATE x SET v = 'other' WHERE id = "+itoa(200+i))
		exec(t, db, "USE shop", "SET SESSION binlog_format = 'STATEMENT'", "INSERT INTO other.x VALUES ("+itoa(300+i)+", 'y')", "BEGIN", s, "COMMIT")
	}
	exec(t, db, "INSERT INTO shop.t VALUES (999, 'last')")
	return stmts
}

func itoa(i int) string { return strconv.Itoa(i) }

// TestStatementChangeStops: a change to a captured table logged as a
// statement stops the stream with ErrStatementChange naming the table,
// the position and the start of the statement, never its values;
// statements on tables not captured pass.
func TestStatementChangeStops(t *testing.T) {
	testenv.ForEachFlavor(t, func(t *testing.T, f position.Flavor) {
		db := startServer(t, f, testenv.Options{})
		start := binlogEnd(t, db)
		statementWorkload(t, db)
		tables, _ := binlog.ParseFilter("shop.*")
		r := newReader(t, db, func(c *binlog.Config) { c.Start = start; c.Tables = tables })
		var got []int64
		var err error
		for {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			txn, e := r.Next(ctx)
			cancel()
			if e != nil {
				err = e
				break
			}
			for _, ch := range txn.Changes {
				if ch.Op == binlog.OpInsert {
					got = append(got, ch.After[0].Int())
				}
			}
		}
		if !errors.Is(err, binlog.ErrStatementChange) {
			t.Fatalf("Next = %v; want ErrStatementChange", err)
		}
		msg := err.Error()
		for _, want := range []string{"INSERT shop.t at mysql-bin.000001:", "\"INSERT INTO t VALUES ( ...\"", "SET SESSION binlog_format = 'ROW'", "on_statement_change: skip"} {
			if !strings.Contains(msg, want) {
				t.Errorf("the error lacks %q: %s", want, msg)
			}
		}
		if strings.Contains(msg, "hunter2") {
			t.Errorf("the error shows a value of the statement: %s", msg)
		}
		if !equalInts(got, []int64{100}) {
			t.Fatalf("delivered %v before stopping; want [100]", got)
		}
	})
}

// TestStatementChangeSkip: with on_statement_change skip, each such
// statement is a warning and a count, and the stream goes on; ReadFiles
// (sluice read) stops and skips the same way.
func TestStatementChangeSkip(t *testing.T) {
	testenv.ForEachFlavor(t, func(t *testing.T, f position.Flavor) {
		db := startServer(t, f, testenv.Options{})
		start := binlogEnd(t, db)
		stmts := statementWorkload(t, db)
		tables, _ := binlog.ParseFilter("shop.*")
		var logs bytes.Buffer
		r := newReader(t, db, func(c *binlog.Config) {
			c.Start = start
			c.Tables = tables
			c.OnStatementChange = binlog.StatementSkip
			c.Logger = slog.New(slog.NewTextHandler(&logs, nil))
		})
		var got []int64
		for len(got) == 0 || got[len(got)-1] != 999 {
			for _, ch := range next(t, r).Changes {
				if ch.Op == binlog.OpInsert {
					got = append(got, ch.After[0].Int())
				}
			}
		}
		if n := r.Stats().StatementChanges; n != int64(len(stmts)) {
			t.Fatalf("StatementChanges = %d; want %d", n, len(stmts))
		}
		if w := strings.Count(logs.String(), "skipped a change logged as a statement"); w != len(stmts) || strings.Contains(logs.String(), "hunter2") {
			t.Fatalf("%d warnings (want %d, no values):\n%s", w, len(stmts), logs.String())
		}
		for _, want := range []string{`statement="INSERT INTO t VALUES ( ..."`, `statement="UPDATE shop.t SET v = ..."`, `statement="UPDATE other.x JOIN shop.t ON x.id = t.id SET t.v = ..."`,
			`statement="DELETE FROM t WHERE v = ..."`, `statement="REPLACE INTO shop.t SELECT id + ..."`, `statement="LOAD DATA INFILE ..."`} {
			if !strings.Contains(logs.String(), want) {
				t.Errorf("no warning with %s:\n%s", want, logs.String())
			}
		}
		if want := []int64{100, 101, 102, 103, 104, 105, 999}; !equalInts(got, want) {
			t.Fatalf("delivered %v; want %v", got, want)
		}

		// The same files from disk.
		files := binlogFiles(t, db)
		err := binlog.ReadFiles(context.Background(), files, binlog.FileConfig{Tables: tables}, func(*binlog.Txn) error { return nil })
		if !errors.Is(err, binlog.ErrStatementChange) || !strings.Contains(err.Error(), "shop.t") || strings.Contains(err.Error(), "hunter2") {
			t.Fatalf("ReadFiles = %v; want ErrStatementChange naming shop.t", err)
		}
		got = got[:0]
		logs.Reset()
		err = binlog.ReadFiles(context.Background(), files, binlog.FileConfig{Tables: tables, OnStatementChange: binlog.StatementSkip, Logger: slog.New(slog.NewTextHandler(&logs, nil))}, func(txn *binlog.Txn) error {
			for _, ch := range txn.Changes {
				if ch.Op == binlog.OpInsert {
					got = append(got, ch.After[0].Int())
				}
			}
			return nil
		})
		if err != nil || !equalInts(got, []int64{100, 101, 102, 103, 104, 105, 999}) {
			t.Fatalf("ReadFiles skip = %v, delivered %v", err, got)
		}
		if w := strings.Count(logs.String(), "skipped a change logged as a statement"); w != len(stmts) {
			t.Fatalf("ReadFiles: %d warnings, want %d", w, len(stmts))
		}
	})
}

func equalInts(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// binlogFiles are the paths of the server's binlog files.
func binlogFiles(t *testing.T, db *testenv.Server) []string {
	t.Helper()
	rs, err := db.Query(context.Background(), "SHOW BINARY LOGS")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for i := 0; i < rs.RowNumber(); i++ {
		name, _ := rs.GetString(i, 0)
		out = append(out, filepath.Join(db.DataDir(), name))
	}
	return out
}
