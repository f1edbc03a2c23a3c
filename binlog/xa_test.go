package binlog_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluice-cdc/sluice/binlog"
	"github.com/sluice-cdc/sluice/internal/testenv"
	"github.com/sluice-cdc/sluice/internal/workload"
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
		start, want := xaWorkload(t, db)
		tables, _ := binlog.ParseFilter("shop.t")
		r := newReader(t, db, func(c *binlog.Config) { c.Start = start; c.Tables = tables; c.ChunkBytes = 16 << 10 })
		got := collectXA(t, r, 99)
		r.Close()
		checkXAWorkload(t, got, want)
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

// xaWorkload writes the XA transactions of the XA tests into shop.t (and
// shop.u, not selected), across a server restart (so across binlog
// files), and returns the position before them and the ids of the
// transactions to deliver, in order (see firstIDs).
func xaWorkload(t *testing.T, db *testenv.Server) (position.Position, [][]int64) {
	t.Helper()
	exec(t, db, "CREATE DATABASE shop", "CREATE TABLE shop.t (id INT PRIMARY KEY, v VARCHAR(40))", "CREATE TABLE shop.u (id INT PRIMARY KEY)")
	start := binlogEnd(t, db)
	prepare := func(xid string, stmts ...string) {
		all := append([]string{"XA START '" + xid + "'"}, stmts...)
		exec(t, db, append(all, "XA END '"+xid+"'", "XA PREPARE '"+xid+"'")...)
	}
	prepare("a1", "INSERT INTO shop.t VALUES (1, 'a1')", "INSERT INTO shop.t VALUES (2, 'a1')")
	exec(t, db, "INSERT INTO shop.t VALUES (10, 'between')")
	prepare("a2", "INSERT INTO shop.t VALUES (20, 'rolled back')")
	prepare("a3", "INSERT INTO shop.u VALUES (1)") // no selected table
	xaFinish(t, db, "XA COMMIT 'a1'")              // another connection
	xaFinish(t, db, "XA ROLLBACK 'a2'")
	xaFinish(t, db, "XA COMMIT 'a3'")
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

	return start, [][]int64{{10}, {1, 2}, {30}, {40}, {50}, {1001, 4000, 3000}, {99}}
}

// checkXAWorkload checks what a reader delivered of xaWorkload.
func checkXAWorkload(t *testing.T, got []xaTxn, want [][]int64) {
	t.Helper()
	if !slices.EqualFunc(firstIDs(got), want, slices.Equal[[]int64]) {
		t.Fatalf("delivered %v; want %v", firstIDs(got), want)
	}
	if got[1].xid != "X'6131',X'',1" || got[1].gtid == "" || got[1].prepared == "" || got[1].prepared == got[1].gtid {
		t.Errorf("XA a1 delivered as %+v: want XID X'6131',X'',1, the commit's GTID and the prepared part's", got[1])
	}
	if got[0].xid != "" {
		t.Errorf("an ordinary transaction has XID %q", got[0].xid)
	}
	gtids := map[string]bool{}
	for _, g := range got {
		if g.gtid == "" || gtids[g.gtid] {
			t.Errorf("transaction %v has GTID %q: empty or delivered before", firstIDs([]xaTxn{g}), g.gtid)
		}
		gtids[g.gtid] = true
	}
}

func mustGTIDs(t *testing.T, f position.Flavor, s string) position.GTIDSet {
	t.Helper()
	g, err := position.ParseGTIDSet(f, s)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// TestXAFetchReconnect: a connection lost while a committed XA
// transaction's prepared part is read again (after its first chunks were
// delivered) resumes it: every row once, in chunks numbered on.
func TestXAFetchReconnect(t *testing.T) {
	testenv.ForEachFlavor(t, func(t *testing.T, f position.Flavor) {
		db := startServer(t, f, testenv.Options{})
		const n = 30000 // more than the socket buffers hold
		exec(t, db, "CREATE DATABASE shop", "CREATE TABLE shop.t (id INT PRIMARY KEY, v VARCHAR(255))")
		start := binlogEnd(t, db)
		setup, from := seqRows(db, n)
		exec(t, db, append(setup, "XA START 'big'", "INSERT INTO shop.t SELECT seq, REPEAT('x', 250) FROM "+from, "XA END 'big'", "XA PREPARE 'big'")...)
		exec(t, db, "INSERT INTO shop.t VALUES (50000, 'between')")
		xaFinish(t, db, "XA COMMIT 'big'")
		exec(t, db, "INSERT INTO shop.t VALUES (50001, 'last')")
		r := newReader(t, db, func(c *binlog.Config) { c.Start = start; c.ChunkBytes = 16 << 10 })
		if txn := next(t, r); txn.Changes[0].After[0].Int() != 50000 {
			t.Fatalf("first delivered %d, want 50000", txn.Changes[0].After[0].Int())
		}
		first := next(t, r)
		if first.XID == "" || first.Last || first.Chunk != 0 {
			t.Fatalf("want the first of several chunks of the XA transaction, got chunk %d last %v XID %q", first.Chunk, first.Last, first.XID)
		}
		// The reader is held back by the unread chunks: its connection is
		// inside the prepared part. Cut it.
		killDump(t, db)
		seen := map[int64]int{}
		count := func(txn *binlog.Txn) {
			for _, ch := range txn.Changes {
				seen[ch.After[0].Int()]++
			}
		}
		count(first)
		chunk := first.Chunk
		for {
			txn := next(t, r)
			if txn.XID == "" {
				t.Fatalf("chunk %d: not part of the XA transaction", txn.Chunk)
			}
			if txn.Chunk != chunk+1 {
				t.Fatalf("chunk %d after chunk %d", txn.Chunk, chunk)
			}
			chunk = txn.Chunk
			count(txn)
			if txn.Last {
				break
			}
		}
		if last := next(t, r); last.Changes[0].After[0].Int() != 50001 {
			t.Fatalf("after the XA transaction: %d, want 50001", last.Changes[0].After[0].Int())
		}
		for id := int64(1); id <= n; id++ {
			if seen[id] != 1 {
				t.Fatalf("row %d delivered %d times", id, seen[id])
			}
		}
		if len(seen) != n || r.Stats().Reconnects == 0 {
			t.Fatalf("%d rows, %d reconnects; want %d rows and a reconnection", len(seen), r.Stats().Reconnects, n)
		}
	})
}

// xaFinish runs an XA COMMIT or ROLLBACK of a transaction prepared on a
// connection just closed. MariaDB detaches a prepared transaction from its
// connection only once the server has handled the disconnect, which
// happens after the client has gone; until then the XID is unknown to
// other connections (ERROR 1397, XAER_NOTA), so that error is retried for
// a few seconds.
func xaFinish(t *testing.T, db *testenv.Server, stmt string) {
	t.Helper()
	c, err := db.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := workload.XAFinish(context.Background(), c, stmt); err != nil {
		t.Fatal(err)
	}
}

// TestXAReadFiles: reading binlog files from disk (sluice read), a
// committed XA transaction is delivered once, at its commit, with its
// XID and the commit's GTID, its prepared part read again from the file
// that holds it (an earlier file too: prepared before a restart,
// committed after); rolled back ones never; a large one in chunks.
// Without the file of its XA PREPARE, or from a stream that cannot be
// read again, the XA COMMIT stops the read with an error in words.
func TestXAReadFiles(t *testing.T) {
	testenv.ForEachFlavor(t, func(t *testing.T, f position.Flavor) {
		db := startServer(t, f, testenv.Options{})
		start, want := xaWorkload(t, db)
		tables, _ := binlog.ParseFilter("shop.t")
		var files []string
		for _, p := range binlogFiles(t, db) {
			if filepath.Base(p) >= start.File {
				files = append(files, p)
			}
		}
		if len(files) < 2 {
			t.Fatalf("the workload's restart should start a new binlog file: %v", files)
		}
		read := func(files []string) ([]xaTxn, error) {
			var out []xaTxn
			var cur *xaTxn
			err := binlog.ReadFiles(context.Background(), files, binlog.FileConfig{Tables: tables, ChunkBytes: 16 << 10}, func(txn *binlog.Txn) error {
				if cur == nil {
					cur = &xaTxn{gtid: txn.GTID, xid: txn.XID, prepared: txn.PrepareGTID}
				}
				if txn.XID != cur.xid || txn.GTID != cur.gtid {
					return fmt.Errorf("chunk %d of %s has XID %q GTID %s", txn.Chunk, cur.gtid, txn.XID, txn.GTID)
				}
				for _, ch := range txn.Changes {
					if ch.Op == binlog.OpInsert {
						cur.ids = append(cur.ids, ch.After[0].Int())
					}
				}
				if txn.Last {
					cur.end = txn.End
					if len(cur.ids) > 0 {
						out = append(out, *cur)
					}
					cur = nil
				}
				return nil
			})
			return out, err
		}
		got, err := read(files)
		if err != nil {
			t.Fatal(err)
		}
		checkXAWorkload(t, got, want)
		// The live reader delivers the same transactions, GTIDs and XIDs.
		r := newReader(t, db, func(c *binlog.Config) { c.Start = start; c.Tables = tables })
		live := collectXA(t, r, 99)
		r.Close()
		if len(live) != len(got) {
			t.Fatalf("files: %d transactions, the server: %d", len(got), len(live))
		}
		for i := range got {
			if got[i].gtid != live[i].gtid || got[i].xid != live[i].xid || got[i].prepared != live[i].prepared {
				t.Errorf("transaction %d: files GTID %s XID %q prepared %s; server GTID %s XID %q prepared %s",
					i, got[i].gtid, got[i].xid, got[i].prepared, live[i].gtid, live[i].xid, live[i].prepared)
			}
		}

		// The file before the restart alone: b1 and big are prepared,
		// not committed, in it: not delivered, and said so.
		var logs bytes.Buffer
		err = binlog.ReadFiles(context.Background(), files[:1], binlog.FileConfig{Tables: tables, Logger: slog.New(slog.NewTextHandler(&logs, nil))}, func(*binlog.Txn) error { return nil })
		if err != nil {
			t.Fatal(err)
		}
		if n := strings.Count(logs.String(), "neither committed nor rolled back"); n != 2 || !strings.Contains(logs.String(), `xid=X'6231',X'',1`) || !strings.Contains(logs.String(), `xid=X'626967',X'',1`) {
			t.Errorf("reading the file before the restart: %d warnings of prepared transactions (want b1 and big):\n%s", n, logs.String())
		}
		// The file after the restart alone: b1 and big were prepared
		// before it.
		_, err = read(files[1:])
		if err == nil || !strings.Contains(err.Error(), "prepared before the files given") || !strings.Contains(err.Error(), "XA COMMIT") {
			t.Errorf("reading without the file of the XA PREPARE: %v", err)
		}
		noGoText(t, err)
		// A stream cannot be read again.
		in, err := os.Open(files[0])
		if err != nil {
			t.Fatal(err)
		}
		defer in.Close()
		err = binlog.ReadStream(context.Background(), filepath.Base(files[0]), bufio.NewReader(in), binlog.FileConfig{Tables: tables}, func(*binlog.Txn) error { return nil })
		if err == nil || !strings.Contains(err.Error(), "cannot be read again from a stream") {
			t.Errorf("an XA transaction in a stream: %v", err)
		}
		noGoText(t, err)
	})
}
