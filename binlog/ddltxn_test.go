package binlog_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluice-cdc/sluice/binlog"
	"github.com/sluice-cdc/sluice/internal/testenv"
	"github.com/sluice-cdc/sluice/position"
)

// txnSummary is a delivered transaction as the DDL-in-a-transaction test
// compares it: its GTID and its changes in order, each "ddl TABLE" or
// "OP TABLE ID".
type txnSummary struct {
	gtid    string
	changes []string
}

// summarize appends txn's changes to the transaction being built in cur
// (chunks of one transaction share it) and returns true on its last chunk.
func summarize(cur *txnSummary, txn *binlog.Txn) bool {
	cur.gtid = txn.GTID
	for _, ch := range txn.Changes {
		name := ""
		if ch.Table != nil {
			name = ch.Table.Schema + "." + ch.Table.Name
		}
		if ch.Op == binlog.OpDDL {
			cur.changes = append(cur.changes, "ddl "+name)
			continue
		}
		row := ch.After
		if ch.Op == binlog.OpDelete {
			row = ch.Before
		}
		cur.changes = append(cur.changes, fmt.Sprintf("%s %s %d", ch.Op.Code(), name, row[0].Int()))
	}
	return txn.Last
}

// TestDDLInsideTransaction: DDL the server logs inside a transaction is
// delivered in it, before its rows, never dropped. CREATE TABLE ... SELECT
// in ROW format is one transaction on both servers: the CREATE as a query
// event (MySQL with GTIDs: "CREATE TABLE ... START TRANSACTION", atomic),
// then the rows. A DDL statement inside BEGIN ... COMMIT commits the work
// before it (an implicit commit): three transactions. CREATE TEMPORARY
// TABLE is not logged in ROW format; rows copied from a temporary table
// into a captured one are. Read from the server and from the files alike.
func TestDDLInsideTransaction(t *testing.T) {
	testenv.ForEachFlavor(t, func(t *testing.T, f position.Flavor) {
		db := startServer(t, f, testenv.Options{})
		exec(t, db, "CREATE DATABASE shop", "CREATE DATABASE other",
			"CREATE TABLE shop.t (id INT PRIMARY KEY, v VARCHAR(40))", "INSERT INTO shop.t VALUES (1,'a'),(2,'b')")
		start := binlogEnd(t, db)
		for _, stmts := range [][]string{
			{"CREATE TABLE shop.c1 SELECT * FROM shop.t"},
			{"CREATE TABLE shop.c2 (id INT PRIMARY KEY, n INT) SELECT id, id * 10 AS n FROM shop.t"},
			{"CREATE TABLE other.x SELECT * FROM shop.t"}, // not captured: neither DDL nor rows
			{"BEGIN", "INSERT INTO shop.t VALUES (3,'c')", "CREATE TABLE shop.c3 (id INT PRIMARY KEY)", "INSERT INTO shop.t VALUES (4,'d')", "COMMIT"},
			{"BEGIN", "CREATE TEMPORARY TABLE shop.tmp (id INT)", "INSERT INTO shop.tmp VALUES (11)", "INSERT INTO shop.t SELECT id, 'tmp' FROM shop.tmp", "COMMIT"},
			{"BEGIN", "INSERT INTO shop.t VALUES (5,'e')", "CREATE TABLE shop.c4 SELECT * FROM shop.t WHERE id = 5", "COMMIT"},
			{"INSERT INTO shop.t VALUES (99,'last')"},
		} {
			exec(t, db, stmts...)
		}
		want := []string{
			"ddl shop.c1|c shop.c1 1|c shop.c1 2",
			"ddl shop.c2|c shop.c2 1|c shop.c2 2",
			"c shop.t 3", "ddl shop.c3", "c shop.t 4",
			"c shop.t 11",
			"c shop.t 5", "ddl shop.c4|c shop.c4 5",
			"c shop.t 99",
		}
		tables, _ := binlog.ParseFilter("shop.*")
		check := func(how string, got []txnSummary, logs string) {
			t.Helper()
			var texts []string
			gtids := map[string]bool{}
			for _, s := range got {
				texts = append(texts, strings.Join(s.changes, "|"))
				if s.gtid == "" || gtids[s.gtid] {
					t.Errorf("%s: transaction %v has GTID %q (empty or seen before)", how, s.changes, s.gtid)
				}
				gtids[s.gtid] = true
			}
			if strings.Join(texts, "\n") != strings.Join(want, "\n") {
				t.Errorf("%s delivered:\n%s\nwant:\n%s", how, strings.Join(texts, "\n"), strings.Join(want, "\n"))
			}
			if strings.Contains(logs, "could not be parsed") {
				t.Errorf("%s: a DDL statement was not parsed: %s", how, logs)
			}
		}

		var logs bytes.Buffer
		logger := slog.New(slog.NewTextHandler(&logs, nil))
		r := newReader(t, db, func(c *binlog.Config) { c.Start, c.Tables, c.Logger = start, tables, logger })
		var live []txnSummary
		for cur := (txnSummary{}); ; {
			if !summarize(&cur, next(t, r)) {
				continue
			}
			live = append(live, cur)
			if strings.HasSuffix(cur.changes[len(cur.changes)-1], " 99") {
				break
			}
			cur = txnSummary{}
		}
		check("the reader", live, logs.String())

		logs.Reset()
		var files []txnSummary
		cur := txnSummary{}
		err := binlog.ReadFiles(context.Background(), []string{filepath.Join(db.DataDir(), start.File)}, binlog.FileConfig{Tables: tables, Logger: logger}, func(txn *binlog.Txn) error {
			if summarize(&cur, txn) && len(cur.changes) > 0 {
				files = append(files, cur)
			}
			if txn.Last {
				cur = txnSummary{}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		// The file holds the setup too.
		for len(files) > 0 && !strings.HasPrefix(strings.Join(files[0].changes, "|"), "ddl shop.c1") {
			files = files[1:]
		}
		check("ReadFiles", files, logs.String())
	})
}

// TestCreateSelectLoggedAsStatement: a session with binlog_format
// STATEMENT or MIXED logs CREATE TABLE ... SELECT as that statement alone,
// without the rows it copies. On a captured table that stops the stream
// with ErrStatementChange (it was delivered as DDL and the rows were
// lost without a word); with on_statement_change skip the DDL is
// delivered, with a warning and a count. Not captured: it passes.
func TestCreateSelectLoggedAsStatement(t *testing.T) {
	testenv.ForEachFlavor(t, func(t *testing.T, f position.Flavor) {
		db := startServer(t, f, testenv.Options{})
		exec(t, db, "CREATE DATABASE shop", "CREATE DATABASE other",
			"CREATE TABLE shop.t (id INT PRIMARY KEY, v VARCHAR(40))", "INSERT INTO shop.t VALUES (1,'a'),(2,'b')")
		start := binlogEnd(t, db)
		exec(t, db, "SET SESSION binlog_format = 'STATEMENT'", "CREATE TABLE other.x SELECT * FROM shop.t")
		exec(t, db, "INSERT INTO shop.t VALUES (3,'c')")
		exec(t, db, "SET SESSION binlog_format = 'STATEMENT'", "CREATE TABLE shop.c1 SELECT * FROM shop.t")
		exec(t, db, "SET SESSION binlog_format = 'MIXED'", "CREATE TABLE shop.c2 (PRIMARY KEY (id)) SELECT * FROM shop.t")
		exec(t, db, "INSERT INTO shop.t VALUES (99,'last')")
		tables, _ := binlog.ParseFilter("shop.*")

		r := newReader(t, db, func(c *binlog.Config) { c.Start, c.Tables = start, tables })
		var err error
		var got []string
		for {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			txn, e := r.Next(ctx)
			cancel()
			if e != nil {
				err = e
				break
			}
			cur := txnSummary{}
			summarize(&cur, txn)
			got = append(got, cur.changes...)
		}
		if !errors.Is(err, binlog.ErrStatementChange) || !strings.Contains(err.Error(), "CREATE shop.c1 at mysql-bin.") || !strings.Contains(err.Error(), "CREATE TABLE shop.c1 SELECT") {
			t.Fatalf("Next = %v; want ErrStatementChange naming CREATE shop.c1", err)
		}
		if strings.Join(got, "|") != "c shop.t 3" {
			t.Errorf("delivered before stopping: %v; want the insert of 3 only", got)
		}

		var logs bytes.Buffer
		r = newReader(t, db, func(c *binlog.Config) {
			c.Start, c.Tables, c.OnStatementChange = start, tables, binlog.StatementSkip
			c.Logger = slog.New(slog.NewTextHandler(&logs, nil))
		})
		got = got[:0]
		for len(got) == 0 || got[len(got)-1] != "c shop.t 99" {
			cur := txnSummary{}
			summarize(&cur, next(t, r))
			got = append(got, cur.changes...)
		}
		if want := "c shop.t 3|ddl shop.c1|ddl shop.c2|c shop.t 99"; strings.Join(got, "|") != want {
			t.Errorf("with skip delivered %s; want %s", strings.Join(got, "|"), want)
		}
		if n, w := r.Stats().StatementChanges, strings.Count(logs.String(), "skipped a change logged as a statement"); n != 2 || w != 2 {
			t.Errorf("with skip: StatementChanges %d, %d warnings; want 2 and 2\n%s", n, w, logs.String())
		}
	})
}
