package snapshot_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-mysql-org/go-mysql/mysql"

	"github.com/sluice-cdc/sluice/binlog"
	"github.com/sluice-cdc/sluice/codec"
	"github.com/sluice-cdc/sluice/internal/testenv"
	"github.com/sluice-cdc/sluice/position"
	"github.com/sluice-cdc/sluice/snapshot"
)

// table is a table rebuilt from what a Stream hands out. It also checks,
// as each snapshot row arrives, the watermark method's promise that no
// chunk row is older than a change already delivered: a chunk row for a
// key some change has set (or deleted) must be that key's current value,
// since the changes before the chunk's window are visible to its read
// and a change inside the window drops the row. A violation is caught
// when it happens, so that a later write to the same row cannot hide it.
type table struct {
	state   map[string]string
	changed map[string]bool // keys some change has set or deleted
	stale   []string        // chunk rows older than a change delivered before them
}

func newTable() *table {
	return &table{state: map[string]string{}, changed: map[string]bool{}}
}

func (tb *table) apply(ch *binlog.Change, snap bool) {
	key := func(r binlog.Row) string { return ch.Table.Name + " " + string(codec.AppendKey(nil, ch.Table, r)) }
	if ch.Before != nil {
		k := key(ch.Before)
		delete(tb.state, k)
		tb.changed[k] = true
	}
	if ch.After != nil {
		k, v := key(ch.After), string(codec.AppendRow(nil, ch.Table, ch.After))
		if !snap {
			tb.changed[k] = true
		} else if cur, ok := tb.state[k]; tb.changed[k] && (!ok || cur != v) {
			if !ok {
				cur = "(deleted)"
			}
			tb.stale = append(tb.stale, fmt.Sprintf("chunk row %s %q after a change made it %s", k, v, cur))
		}
		tb.state[k] = v
	}
}

// serverState reads the tables as they are, formatted like the output.
func serverState(t *testing.T, db *testenv.Server, names ...string) map[string]string {
	t.Helper()
	ctx := context.Background()
	c, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	want := map[string]string{}
	for _, name := range names {
		tbl, err := snapshot.Describe(ctx, c, "app", name)
		if err != nil {
			t.Fatal(err)
		}
		err = snapshot.Scan(ctx, c, tbl, "SELECT "+snapshot.SelectList(tbl)+" FROM app."+name, nil, func(row binlog.Row) error {
			want[tbl.Name+" "+string(codec.AppendKey(nil, tbl, row))] = string(codec.AppendRow(nil, tbl, row))
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return want
}

func compareStates(t *testing.T, got, want map[string]string) {
	t.Helper()
	if diffs := diffStates(got, want); len(diffs) > 0 {
		for i, d := range diffs {
			if i == 10 {
				break
			}
			t.Error(d)
		}
		t.Fatalf("%d rows differ (server %d, rebuilt %d)", len(diffs), len(want), len(got))
	}
}

// diffStates lists the rows in which the rebuilt state got differs from
// the server's want.
func diffStates(got, want map[string]string) []string {
	var diffs []string
	for k, w := range want {
		if g := got[k]; g != w {
			diffs = append(diffs, fmt.Sprintf("row %s: rebuilt %q, server %q", k, g, w))
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			diffs = append(diffs, fmt.Sprintf("row %s rebuilt but not on the server", k))
		}
	}
	return diffs
}

// startWriters starts n writers changing app.t (rows rows) until stop,
// which returns the number of writes.
func startWriters(db *testenv.Server, rows, n int) (stop func() int64) {
	var done atomic.Bool
	var wg sync.WaitGroup
	var writes atomic.Int64
	for w := 0; w < n; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 11))
			next := rows + 1 + w*1_000_000
			c, err := db.Conn(context.Background()) // one connection: as many writes as the server takes
			if err != nil {
				return
			}
			defer func() { c.Close() }()
			for !done.Load() {
				id := rng.IntN(rows) + 1
				var q string
				switch rng.IntN(5) {
				case 0:
					q = fmt.Sprintf("INSERT INTO app.t VALUES (%d, 1, 'new', 1.5, NOW(3))", next)
					next++
				case 1:
					q = fmt.Sprintf("UPDATE app.t SET v = CONCAT(v, '+'), d = d + 1 WHERE id = %d", id)
				case 2:
					q = fmt.Sprintf("DELETE FROM app.t WHERE id = %d", id)
				case 3:
					q = fmt.Sprintf("UPDATE IGNORE app.t SET id = id + 5000000 WHERE id = %d", id)
				default: // rows spread over every chunk at once
					q = fmt.Sprintf("UPDATE app.t SET k = k + 1 WHERE id %% 97 = %d", rng.IntN(97))
				}
				if _, err := c.Execute(q); err == nil {
					writes.Add(1)
				} else if !errors.As(err, new(*mysql.MyError)) { // the connection broke
					c.Close()
					if c, err = db.Conn(context.Background()); err != nil {
						return
					}
				}
			}
		}(w)
	}
	return func() int64 { done.Store(true); wg.Wait(); return writes.Load() }
}

// streamServers are the servers the watermark method is tested on:
// MariaDB (binlog_snapshot_position), MySQL with GTIDs (gtid_executed),
// MySQL without GTIDs (watermark rows in a signal table). MySQL's group
// commit waits 20 ms between writing a group to the binlog (and sending it
// to replicas) and committing it in the engine (and adding its GTIDs to
// gtid_executed): the window in which a transaction is streamed but not
// visible, which each method must handle, is then wide open.
func streamServers(t *testing.T, fn func(t *testing.T, opts testenv.Options, signal string)) {
	testenv.ForEachFlavor(t, func(t *testing.T, flavor position.Flavor) {
		if flavor == position.MariaDB {
			fn(t, testenv.Options{Flavor: flavor}, "")
			return
		}
		delay := []string{"--binlog-group-commit-sync-delay=20000"}
		t.Run("gtid", func(t *testing.T) { fn(t, testenv.Options{Flavor: flavor, Extra: delay}, "") })
		t.Run("no-gtid", func(t *testing.T) {
			fn(t, testenv.Options{Flavor: flavor, NoGTID: true, Extra: delay}, "app.sluice_signal")
		})
	})
}

// TestStreamSnapshotUnderWrites reads a table with the watermark method
// while the binlog streams and writers change it: snapshot rows plus
// changes rebuild the table exactly, and no snapshot row overwrites a
// newer change.
func TestStreamSnapshotUnderWrites(t *testing.T) {
	streamServers(t, func(t *testing.T, opts testenv.Options, signal string) {
		// The whole table queued at once, and in pieces queued one after
		// the other while the stream goes on (as incremental snapshots
		// are): each piece's first chunk opens after transactions
		// the stream handed out.
		for _, pieces := range []int{1, 8} {
			t.Run(fmt.Sprintf("pieces=%d", pieces), func(t *testing.T) {
				db := testenv.StartT(t, opts)
				res := streamUnderWrites(t, db, signal, streamLoad{pieces: pieces, chunk: 700, writers: 4})
				t.Logf("snapshot rows %d in %d chunks, changes %d, writes %d", res.snapRows, res.chunks, res.changes, res.writes)
				if res.chunks < 10 || res.changes == 0 {
					t.Fatalf("%d chunks, %d changes: the test did not overlap writes with chunks", res.chunks, res.changes)
				}
				for i, s := range res.stale {
					if i == 10 {
						break
					}
					t.Error(s)
				}
				if len(res.stale) > 0 {
					t.Fatalf("%d chunk rows older than changes delivered before them", len(res.stale))
				}
				compareStates(t, res.got, res.want)
			})
		}
	})
}

// TestWatermarkRulesNeeded proves that each rule of MySQL's watermark
// methods is needed, by the same test failing without it: under the same
// writes, a Stream that opens a chunk's view without waiting for
// gtid_executed to hold every transaction streamed (GTIDs), or without
// writing its low watermark row first (no GTIDs), reads chunks missing
// changes the stream has delivered; one whose later transactions drop
// nothing lets chunk rows overwrite newer changes. Either way the rebuilt
// table differs from the server's.
func TestWatermarkRulesNeeded(t *testing.T) {
	if !slices.Contains(testenv.Flavors(), position.MySQL) {
		t.Skip("MySQL only (SLUICE_TEST_FLAVORS)")
	}
	delay := []string{"--binlog-group-commit-sync-delay=20000"}
	for _, srv := range []struct {
		name   string
		opts   testenv.Options
		signal string
	}{
		{"gtid", testenv.Options{Flavor: position.MySQL, Extra: delay}, ""},
		{"no-gtid", testenv.Options{Flavor: position.MySQL, NoGTID: true, Extra: delay}, "app.sluice_signal"},
	} {
		t.Run(srv.name, func(t *testing.T) {
			for _, knob := range []string{"no-visible-wait", "no-drop"} {
				t.Run(knob, func(t *testing.T) {
					defer snapshot.SetKnob(knob, true)()
					// The fault needs a write to fall into a chunk's
					// window, which the load makes likely, not certain:
					// up to three loads, each on a new server, must
					// show it once.
					const tries = 3
					for try := 1; ; try++ {
						db := testenv.StartT(t, srv.opts)
						res := streamUnderWrites(t, db, srv.signal, streamLoad{pieces: 20, chunk: 200, writers: 8})
						diffs := diffStates(res.got, res.want)
						t.Logf("without the rule, load %d: %d chunks, %d changes, %d chunk rows stale when read, %d rows differ at the end", try, res.chunks, res.changes, len(res.stale), len(diffs))
						if len(diffs) > 0 || len(res.stale) > 0 {
							return
						}
						if try == tries {
							t.Fatalf("the Stream without rule %s still rebuilt the table exactly in %d loads: the test cannot tell that the rule is needed", knob, tries)
						}
						db.Close()
					}
				})
			}
		})
	}
}

type streamResult struct {
	got, want                 map[string]string
	stale                     []string // see table
	snapRows, changes, chunks int
	writes                    int64
}

// streamLoad is how streamUnderWrites reads: the table queued in pieces
// key ranges, each once the one before is read and the stream has handed
// out a few transactions more, the last changing rows all over the table;
// in chunks of chunk rows; while writers write.
type streamLoad struct{ pieces, chunk, writers int }

// streamUnderWrites reads app.t (20,000 rows) through a Stream while
// writers change it, and returns the table rebuilt from the stream and as
// the server has it once the writes stopped.
func streamUnderWrites(t *testing.T, db *testenv.Server, signal string, load streamLoad) streamResult {
	pieces := load.pieces
	ctx := context.Background()
	const rows = 20000
	stmts := []string{"CREATE DATABASE app", "USE app",
		"CREATE TABLE app.t (id INT PRIMARY KEY, k INT NOT NULL, v VARCHAR(40), d DECIMAL(10,2), ts TIMESTAMP(3) NULL)",
		fmt.Sprintf("INSERT INTO app.t SELECT seq, seq %% 97, CONCAT('v', seq), seq / 7, NULL FROM seq_1_to_%d", rows)}
	if signal != "" {
		stmts = append(stmts, "CREATE TABLE "+signal+" (id INT AUTO_INCREMENT PRIMARY KEY, type VARCHAR(20) NOT NULL, data VARCHAR(200))")
	}
	exec(t, db, stmts...)
	cfg, _ := binlog.ParseSourceURL(db.URL())
	cfg.Tables, _ = binlog.ParseFilter("app.*")
	cfg.StartAt = binlog.StartCurrent
	r, err := binlog.NewReader(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	s := snapshot.NewStream(r, snapshot.StreamConfig{Source: cfg, ChunkRows: load.chunk, SignalTable: signal})
	defer s.Close()
	stop := startWriters(db, rows, load.writers)
	// The pieces' bounds: (0, b1], (b1, b2], ... (bn-1, end).
	bound := func(i int) binlog.Row {
		if i == 0 || i == pieces {
			return nil
		}
		return binlog.Row{binlog.IntValue(int64(rows / pieces * i)), {}, {}, {}, {}}
	}
	added, since := 0, 0 // pieces queued; transactions since the last one was read
	addPiece := func() {
		if err := s.AddRange(ctx, &snapshot.Range{Schema: "app", Table: "t", After: bound(added), UpTo: bound(added + 1)}); err != nil {
			stop()
			t.Fatal(err)
		}
		added++
		since = 0
	}
	addPiece()
	tb := newTable()
	res := streamResult{got: tb.state}
	snapDone := false
	deadline := time.Now().Add(3 * time.Minute)
	for time.Now().Before(deadline) {
		nctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		txn, err := s.Next(nctx)
		cancel()
		if errors.Is(err, context.DeadlineExceeded) && snapDone && res.writes > 0 {
			break // caught up after the writers stopped
		}
		if err != nil && !errors.Is(err, context.DeadlineExceeded) {
			stop()
			t.Fatal(err)
		}
		if txn == nil {
			continue
		}
		if txn.Snapshot {
			res.chunks++
		} else if len(s.Remaining()) == 0 && added < pieces {
			// The next piece right after a transaction that changed rows
			// all over the table, which may not be visible yet: the
			// worst moment for the piece's first chunk.
			if since++; since >= 5 && len(txn.Changes) >= 50 {
				addPiece()
			}
		}
		for i := range txn.Changes {
			ch := &txn.Changes[i]
			if ch.Table == nil {
				continue
			}
			if ch.Table.Name != "t" {
				stop()
				t.Fatalf("a change of %s reached the consumer: the Stream keeps its watermark rows", ch.Table.Name)
			}
			if txn.Snapshot {
				res.snapRows++
			} else {
				res.changes++
			}
			tb.apply(ch, txn.Snapshot)
		}
		if txn.SnapshotLast && added == pieces {
			snapDone = true
			time.Sleep(200 * time.Millisecond)
			res.writes = stop()
		}
	}
	if !snapDone {
		stop()
		t.Fatal("the snapshot did not finish")
	}
	if signal != "" {
		rs, err := db.Query(ctx, "SELECT COUNT(*) FROM "+signal)
		if err != nil {
			t.Fatal(err)
		}
		if n, _ := rs.GetInt(0, 0); n != 0 {
			t.Errorf("%d watermark rows left in the signal table", n)
		}
	}
	res.want = serverState(t, db, "t")
	res.stale = tb.stale
	return res
}

// A table without transactions (Aria) cannot be held still by a snapshot:
// Run leaves it to the Stream, which reads it between watermarks while
// streaming; the result is still exact. The same for method watermark on
// an InnoDB table.
func TestDeferredTablesUnderWrites(t *testing.T) {
	testenv.ForEachFlavor(t, func(t *testing.T, flavor position.Flavor) {
		deferredUnderWrites(t, flavor)
	})
}

func deferredUnderWrites(t *testing.T, flavor position.Flavor) {
	cases := []struct{ engine, method string }{{"Aria", "consistent"}, {"MyISAM", "consistent"}, {"InnoDB", "watermark"}}
	if flavor == position.MySQL {
		cases = cases[1:] // MySQL has no Aria
	}
	for _, tc := range cases {
		t.Run(tc.engine+"/"+tc.method, func(t *testing.T) {
			db := testenv.StartT(t, testenv.Options{Flavor: flavor})
			ctx := context.Background()
			const rows = 20000
			exec(t, db, "CREATE DATABASE app", "USE app",
				"CREATE TABLE app.t (id INT PRIMARY KEY, k INT NOT NULL, v VARCHAR(40), d DECIMAL(10,2), ts TIMESTAMP(3) NULL) ENGINE="+tc.engine,
				fmt.Sprintf("INSERT INTO app.t SELECT seq, seq %% 97, CONCAT('v', seq), seq / 7, NULL FROM seq_1_to_%d", rows))
			stop := startWriters(db, rows, 2)
			cfg, _ := binlog.ParseSourceURL(db.URL())
			cfg.Tables, _ = binlog.ParseFilter("app.*")
			res, err := snapshot.Run(ctx, snapshot.Config{Source: cfg, Tables: cfg.Tables, Method: tc.method, ChunkRows: 700},
				func(*binlog.Txn) error { return errors.New("nothing should be read at one point") })
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Deferred) != 1 || res.Deferred[0].Table != "t" {
				t.Fatalf("deferred %+v", res.Deferred)
			}
			cfg.Start = res.Position
			r, err := binlog.NewReader(cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			s := snapshot.NewStream(r, snapshot.StreamConfig{Source: cfg, ChunkRows: 700})
			defer s.Close()
			if err := s.AddTable(ctx, "app", "t", ""); err != nil {
				t.Fatal(err)
			}
			tb := newTable()
			snapDone := false
			var writes int64
			for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); {
				nctx, cancel := context.WithTimeout(ctx, 3*time.Second)
				txn, err := s.Next(nctx)
				cancel()
				if errors.Is(err, context.DeadlineExceeded) && snapDone {
					break
				}
				if err != nil && !errors.Is(err, context.DeadlineExceeded) {
					t.Fatal(err)
				}
				if txn == nil {
					continue
				}
				for i := range txn.Changes {
					if txn.Changes[i].Table != nil {
						// Not checked for stale chunk rows: a table without
						// transactions shows a change before its event,
						// so its chunk rows may be newer than the stream.
						tb.apply(&txn.Changes[i], txn.Snapshot)
					}
				}
				if txn.SnapshotLast {
					snapDone = true
					time.Sleep(200 * time.Millisecond)
					writes = stop()
				}
			}
			if !snapDone {
				stop()
				t.Fatal("the snapshot did not finish")
			}
			t.Logf("%d writes", writes)
			compareStates(t, tb.state, serverState(t, db, "t"))
		})
	}
}
