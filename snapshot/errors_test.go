package snapshot_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/go-mysql-org/go-mysql/client"

	"github.com/sluice-cdc/sluice/binlog"
	"github.com/sluice-cdc/sluice/internal/rawconn"
	"github.com/sluice-cdc/sluice/internal/testenv"
	"github.com/sluice-cdc/sluice/mysqlconn"
	"github.com/sluice-cdc/sluice/position"
	"github.com/sluice-cdc/sluice/snapshot"
)

func connectAs(t *testing.T, addr, user, password string) *mysqlconn.Conn {
	t.Helper()
	c, err := client.Connect(addr, user, password, "")
	if err != nil {
		t.Fatalf("connecting as %s: %v", user, err)
	}
	t.Cleanup(func() { c.Close() })
	return rawconn.Wrap(c)
}

func TestErrors(t *testing.T) {
	testenv.ForEachFlavor(t, func(t *testing.T, flavor position.Flavor) {
		db := server(t, flavor)
		ctx := context.Background()
		exec(t, db, "CREATE DATABASE errs",
			"CREATE TABLE errs.t (id INT PRIMARY KEY, secret VARCHAR(10))",
			"INSERT INTO errs.t VALUES (1, 'x')",
			"CREATE VIEW errs.v AS SELECT id FROM errs.t",
			"CREATE USER 'repl'@'%' IDENTIFIED BY 'pw'",
			"GRANT REPLICATION SLAVE, REPLICATION CLIENT ON *.* TO 'repl'@'%'",
			"CREATE USER 'partial'@'%' IDENTIFIED BY 'pw'",
			"GRANT SELECT (id) ON errs.t TO 'partial'@'%'",
		)
		root := conn(t, db)
		repl := connectAs(t, db.Addr(), "repl", "pw")
		partial := connectAs(t, db.Addr(), "partial", "pw")

		cases := []struct {
			name  string
			c     *mysqlconn.Conn
			table string
			is    error
			says  []string
		}{
			{"missing table", root, "nosuch", snapshot.ErrTableNotFound, []string{"`errs`.`nosuch` does not exist", "1146"}},
			{"missing database", root, "", snapshot.ErrTableNotFound, []string{"does not exist"}},
			{"no privilege", repl, "t", snapshot.ErrNoPrivilege, []string{"no SELECT privilege on `errs`.`t`", "1142", "GRANT SELECT ON `errs`.`t`"}},
			{"no privilege, missing table", repl, "nosuch", snapshot.ErrNoPrivilege, []string{"no SELECT privilege on `errs`.`nosuch`"}},
			{"column privileges only", partial, "t", snapshot.ErrNoPrivilege, []string{"no SELECT privilege on `errs`.`t`"}},
			{"view", root, "v", snapshot.ErrNotBaseTable, []string{"`errs`.`v` is a view"}},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				schema := "errs"
				if tc.table == "" {
					schema, tc.table = "nosuchdb", "t"
				}
				_, err := snapshot.Describe(ctx, tc.c, schema, tc.table)
				if !errors.Is(err, tc.is) {
					t.Fatalf("error %v, want %v", err, tc.is)
				}
				for _, s := range tc.says {
					if !strings.Contains(err.Error(), s) {
						t.Errorf("error %q does not say %q", err, s)
					}
				}
				t.Logf("%v", err)
			})
		}

		// Scan on a table the user may not read says so too.
		info := inspect(t, root, "errs", "t")
		q, args := snapshot.ChunkQuery(info.Table, info.Key, "", nil, nil, 10)
		err := snapshot.Scan(ctx, repl, info.Table, q, args, func(binlog.Row) error { return nil })
		if !errors.Is(err, snapshot.ErrNoPrivilege) {
			t.Errorf("Scan without privilege: %v", err)
		}
	})
}

func TestScanErrors(t *testing.T) {
	testenv.ForEachFlavor(t, func(t *testing.T, flavor position.Flavor) {
		db := server(t, flavor)
		ctx := context.Background()
		exec(t, db, "CREATE DATABASE scanerr", "USE scanerr",
			"CREATE TABLE scanerr.t (id INT PRIMARY KEY, v VARCHAR(10), d DATETIME)",
			"INSERT INTO scanerr.t SELECT seq, CONCAT('v', seq), '2020-01-01' FROM seq_1_to_5000")
		c := conn(t, db)
		info := inspect(t, c, "scanerr", "t")
		tbl := info.Table

		// Columns in the wrong order or number.
		for _, q := range []string{"SELECT v, id, d FROM scanerr.t", "SELECT id, v FROM scanerr.t", "SELECT id, v, d, id FROM scanerr.t"} {
			err := snapshot.Scan(ctx, c, tbl, q, nil, func(binlog.Row) error { return nil })
			if err == nil || !strings.Contains(err.Error(), "table order") {
				t.Errorf("%s: %v", q, err)
			}
		}

		// An error from fn stops the scan; the connection stays usable.
		stop := errors.New("enough")
		n := 0
		err := snapshot.Scan(ctx, c, tbl, "SELECT * FROM scanerr.t", nil, func(binlog.Row) error {
			if n++; n == 10 {
				return stop
			}
			return nil
		})
		if err != stop || n != 10 {
			t.Fatalf("Scan returned %v after %d rows, want the callback's error after 10", err, n)
		}
		if err := snapshot.Scan(ctx, c, tbl, "SELECT * FROM scanerr.t WHERE id = ?", []any{7}, func(r binlog.Row) error {
			if r[0].Int() != 7 {
				t.Errorf("row %v", r)
			}
			n++
			return nil
		}); err != nil {
			t.Fatalf("the connection is unusable after a callback error: %v", err)
		}

		// Cancelling stops promptly, breaking the connection.
		c2 := conn(t, db)
		cctx, cancel := context.WithCancel(ctx)
		start := time.Now()
		err = snapshot.Scan(cctx, c2, tbl, "SELECT id, v, d FROM scanerr.t", nil, func(binlog.Row) error {
			cancel()
			time.Sleep(time.Millisecond)
			return nil
		})
		if !errors.Is(err, context.Canceled) || time.Since(start) > 10*time.Second {
			t.Fatalf("cancelled Scan: %v after %v", err, time.Since(start))
		}
		if err := snapshot.Scan(ctx, c2, tbl, "SELECT * FROM scanerr.t", nil, func(binlog.Row) error { return nil }); err == nil {
			t.Error("the connection still works after a cancelled Scan")
		}
		// A context done before the start does nothing.
		if err := snapshot.Scan(cctx, c, tbl, "SELECT * FROM scanerr.t", nil, func(binlog.Row) error { return nil }); !errors.Is(err, context.Canceled) {
			t.Errorf("Scan with a done context: %v", err)
		}
	})
}
