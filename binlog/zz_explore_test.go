package binlog_test

import (
	"context"
	"path/filepath"
	"testing"
	"fmt"

	"github.com/sluice-cdc/sluice/binlog"
	"github.com/sluice-cdc/sluice/codec"
	"github.com/sluice-cdc/sluice/internal/testenv"
	"github.com/sluice-cdc/sluice/position"
)

func TestZZExploreCTASStatement(t *testing.T) {
	testenv.ForEachFlavor(t, func(t *testing.T, f position.Flavor) {
		db := startServer(t, f, testenv.Options{})
		exec(t, db, "CREATE DATABASE shop", "CREATE TABLE shop.t (id INT PRIMARY KEY, v VARCHAR(40))", "INSERT INTO shop.t VALUES (1,'a'),(2,'b')")
		start := binlogEnd(t, db)
		for _, stmts := range [][]string{
			{"SET SESSION binlog_format = 'STATEMENT'", "CREATE TABLE shop.c1 SELECT * FROM shop.t"},
			{"SET SESSION binlog_format = 'MIXED'", "CREATE TABLE shop.c2 (PRIMARY KEY (id)) SELECT * FROM shop.t"},
			{"SET SESSION binlog_format = 'STATEMENT'", "CREATE TEMPORARY TABLE shop.tmp (id INT)", "INSERT INTO shop.tmp VALUES (1)", "DROP TEMPORARY TABLE shop.tmp"},
			{"INSERT INTO shop.t VALUES (99,'last')"},
		} {
			if err := db.Exec(context.Background(), stmts...); err != nil {
				t.Logf("%v: %v", stmts, err)
			}
		}
		file := filepath.Join(db.DataDir(), start.File)
		cmd, _ := db.Command(testenv.ToolBinlog, "--base64-output=DECODE-ROWS", "--start-position", fmt.Sprint(start.Offset), file)
		out, err := cmd.CombinedOutput()
		t.Logf("mysqlbinlog %v\n%s", err, out)
		tables, _ := binlog.ParseFilter("shop.*")
		enc := codec.NewEncoder(codec.Source{Name: "x"})
		var lines []byte
		err = binlog.ReadFiles(context.Background(), []string{file}, binlog.FileConfig{Tables: tables, OnStatementChange: "skip"}, func(txn *binlog.Txn) error {
			for i := range txn.Changes {
				lines = enc.AppendChange(lines, txn, &txn.Changes[i])
			}
			return nil
		})
		t.Logf("read: %v\n%s", err, lines)
	})
}
