package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluice-cdc/sluice/internal/testenv"
	"github.com/sluice-cdc/sluice/internal/workload"
	"github.com/sluice-cdc/sluice/position"
)

// TestReadTailXA: `sluice read` (the server's binlog files from disk) and
// `sluice tail` (the server, live) print a committed XA transaction once,
// at its commit, with the commit's GTID and its XID in source.xid
// (committed on its connection, from another connection after other
// transactions, and one phase: MySQL logs its XID, MariaDB logs an
// ordinary transaction); rolled back ones never.
func TestReadTailXA(t *testing.T) {
	bin := buildSluice(t)
	testenv.ForEachFlavor(t, func(t *testing.T, flavor position.Flavor) {
		db := testenv.StartT(t, testenv.Options{Flavor: flavor})
		ctx := context.Background()
		if err := db.Exec(ctx, "CREATE DATABASE shop", "CREATE TABLE shop.t (id INT PRIMARY KEY, v VARCHAR(20))"); err != nil {
			t.Fatal(err)
		}
		from := masterPos(t, db)
		if err := db.Exec(ctx,
			"XA START 'a1'", "INSERT INTO shop.t VALUES (1, 'a1'), (2, 'a1')", "XA END 'a1'", "XA PREPARE 'a1'", "XA COMMIT 'a1'",
			"XA START 'a2'", "INSERT INTO shop.t VALUES (3, 'rolled back')", "XA END 'a2'", "XA PREPARE 'a2'", "XA ROLLBACK 'a2'",
			"XA START 'a3'", "INSERT INTO shop.t VALUES (4, 'a3')", "XA END 'a3'", "XA PREPARE 'a3'"); err != nil { // left prepared: the connection closes
			t.Fatal(err)
		}
		if err := db.Exec(ctx, "INSERT INTO shop.t VALUES (5, 'between')", "XA START 'a4'", "UPDATE shop.t SET v = 'a4' WHERE id = 5", "XA END 'a4'", "XA COMMIT 'a4' ONE PHASE"); err != nil {
			t.Fatal(err)
		}
		c, err := db.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := workload.XAFinish(ctx, c, "XA COMMIT 'a3'"); err != nil {
			t.Fatal(err)
		}
		c.Close()
		to := masterPos(t, db)

		// op id xid, per line; one transaction per GTID.
		want := "c 1 X'6131',X'',1|c 2 X'6131',X'',1|c 5 |u 5 X'6134',X'',1|c 4 X'6133',X'',1"
		if flavor == position.MariaDB {
			// MariaDB logs XA COMMIT ... ONE PHASE as an ordinary
			// transaction: no XID in the binlog.
			want = strings.Replace(want, "u 5 X'6134',X'',1", "u 5 ", 1)
		}
		check := func(how, out string) {
			t.Helper()
			var lines []string
			gtidOf := map[string]string{} // xid or id -> GTID
			for _, ev := range rowEvents(events(t, out)) {
				id := string(ev.Row()["id"])
				lines = append(lines, ev.Op+" "+id+" "+ev.Source.XID)
				if ev.Source.GTID == "" {
					t.Errorf("%s: a line without GTID: %+v", how, ev.Source)
				}
				k := ev.Source.XID
				if k == "" {
					k = ev.Op + id
				}
				if g, ok := gtidOf[k]; ok && g != ev.Source.GTID {
					t.Errorf("%s: transaction %s has GTIDs %s and %s", how, k, g, ev.Source.GTID)
				}
				gtidOf[k] = ev.Source.GTID
			}
			if got := strings.Join(lines, "|"); got != want {
				t.Errorf("%s printed\n%s\nwant\n%s\n%s", how, got, want, out)
			}
		}
		file, _, _ := strings.Cut(from, ":")
		out, _ := run(t, bin, "read", "--tables", "shop.t", filepath.Join(db.DataDir(), file))
		check("sluice read", out)
		out, _ = run(t, bin, "tail", "--source", db.URL(), "--tables", "shop.t", "--from", from, "--to", to)
		check("sluice tail", out)
	})
}
