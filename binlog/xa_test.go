package binlog_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/sluice-cdc/sluice/binlog"
	"github.com/sluice-cdc/sluice/internal/testenv"
	"github.com/sluice-cdc/sluice/position"
)

// xaTxn is a delivered transaction as the XA tests compare it.
type xaTxn struct {
	ids      []int64
	gtid     string
	xid      string
	prepared string
	end      position.Position
}

// collectXA reads whole transactions (chunks joined) until one holds the
// id last.
func collectXA(t *testing.T, r *binlog.Reader, last int64) []xaTxn {
	t.Helper()
	var out []xaTxn
	var cur *xaTxn
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		txn, err := r.Next(ctx)
		cancel()
		if err != nil {
			t.Fatalf("Next: %v (so far %+v)", err, out)
		}
		if cur == nil {
			cur = &xaTxn{gtid: txn.GTID, xid: txn.XID, prepared: txn.PrepareGTID}
		}
		for _, ch := range txn.Changes {
			if ch.Op == binlog.OpInsert {
				cur.ids = append(cur.ids, ch.After[0].Int())
			}
		}
		if !txn.Last {
			continue
		}
		cur.end = txn.End
		if len(cur.ids) > 0 {
			out = append(out, *cur)
			if slices.Contains(cur.ids, last) {
				return out
			}
		}
		cur = nil
	}
}

func firstIDs(ts []xaTxn) [][]int64 {
	var out [][]int64
	for _, t := range ts {
		ids := t.ids
		if len(ids) > 3 {
			ids = []int64{ids[0], ids[len(ids)-1], int64(len(ids))}
		}
		out = append(out, ids)
	}
	return out
}

// TestXATransactions: a prepared XA transaction is delivered when it
// commits (by another connection, with other transactions between, after
// a server restart), in commit order, with the commit's GTID; a rolled
// back one never; a large one in chunks; MySQL's one-phase XA COMMIT too.
// A position saved between PREPARE and COMMIT resumes with the prepared
// part read again, once.
func TestXATransactions(t *testing.T) {
	testenv.ForEachFlavor(t, func(t *testing.T, f position.Flavor) {
		db := startServer(t, f, testenv.Options{})
		exec(t, db, "CREATE DATABASE shop", "CREATE TABLE shop.t (id INT PRIMARY KEY, v VARCHAR(40))", "CREATE TABLE shop.u (id INT PRIMARY KEY)")
		start := binlogEnd(t, db)
		tables, _ := binlog.ParseFilter("shop.t")
		prepare := func(xid string, stmts ...string) {
			all := append([]string{"XA START '" + xid + "'"}, stmts...)
			exec(t, db, append(all, "XA END '"+xid+"'", "XA PREPARE '"+xid+"'")...)
		}
		prepare("a1", "INSERT INTO shop.t VALUES (1, 'a1')", "INSERT INTO shop.t VALUES (2, 'a1')")
		exec(t, db, "INSERT INTO shop.t VALUES (10, 'between')")
		prepare("a2", "INSERT INTO shop.t VALUES (20, 'rolled back')")
		prepare("a3", "INSERT INTO shop.u VALUES (1)") // no selected table
		exec(t, db, "XA COMMIT 'a1'")                  // another connection
		exec(t, db, "XA ROLLBACK 'a2'")
		exec(t, db, "XA COMMIT 'a3'")
		exec(t, db, "XA START 'a4'", "INSERT INTO shop.t VALUES (30, 'one phase')", "XA END 'a4'", "XA COMMIT 'a4' ONE PHASE")
		setup, from := seqRows(db, 3000)
		exec(t, db, append(setup, "XA START 'big'", "INSERT INTO shop.t SELECT seq + 1000, REPEAT('x', 30) FROM "+from, "XA END 'big'", "XA PREPARE 'big'")...)
		prepare("b1", "INSERT INTO shop.t VALUES (50, 'across a restart')")
		exec(t, db, "INSERT INTO shop.t VALUES (40, 'between')")
		if err := db.Restart(context.Background()); err != nil {
			t.Fatal(err)
		}
		exec(t, db, "XA COMMIT 'b1'")
		exec(t, db, "XA COMMIT 'big'")
		exec(t, db, "INSERT INTO shop.t VALUES (99, 'last')")

		want := [][]int64{{10}, {1, 2}, {30}, {40}, {50}, {1001, 4000, 3000}, {99}}
		r := newReader(t, db, func(c *binlog.Config) { c.Start = start; c.Tables = tables; c.ChunkBytes = 16 << 10 })
		got := collectXA(t, r, 99)
		r.Close()
		if !slices.EqualFunc(firstIDs(got), want, slices.Equal[[]int64]) {
			t.Fatalf("delivered %v; want %v", firstIDs(got), want)
		}
		if got[1].xid != "X'6131',X'',1" || got[1].gtid == "" || got[1].prepared == "" || got[1].prepared == got[1].gtid {
			t.Errorf("XA a1 delivered as %+v: want XID X'6131',X'',1, the commit's GTID and the prepared part's", got[1])
		}
		if got[0].xid != "" {
			t.Errorf("an ordinary transaction has XID %q", got[0].xid)
		}
		if !serverGTIDs(t, db).Contains(mustGTIDs(t, f, got[len(got)-1].end.GTIDs)) {
			t.Errorf("the last End %s is not within the server's GTID state", got[len(got)-1].end)
		}
		// Resume from each position between a PREPARE and its COMMIT:
		// after 10 (a1 prepared) and after 40 (big and b1 prepared).
		for _, i := range []int{0, 3} {
			r := newReader(t, db, func(c *binlog.Config) { c.Start = got[i].end; c.Tables = tables; c.ChunkBytes = 16 << 10 })
			again := collectXA(t, r, 99)
			r.Close()
			if w := want[i+1:]; !slices.EqualFunc(firstIDs(again), w, slices.Equal[[]int64]) {
				t.Fatalf("resumed after %v at %s: delivered %v; want %v", got[i].ids, got[i].end, firstIDs(again), w)
			}
			for j := range again {
				if again[j].end.GTIDs != got[i+1+j].end.GTIDs {
					t.Errorf("resumed: transaction %v ends at %s, first read at %s", again[j].ids, again[j].end, got[i+1+j].end)
				}
			}
		}
	})
}

func mustGTIDs(t *testing.T, f position.Flavor, s string) position.GTIDSet {
	t.Helper()
	g, err := position.ParseGTIDSet(f, s)
	if err != nil {
		t.Fatal(err)
	}
	return g
}
