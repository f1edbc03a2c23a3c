package snapshot_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-cdc/sluice/binlog"
	"github.com/sluice-cdc/sluice/codec"
	"github.com/sluice-cdc/sluice/internal/testenv"
	"github.com/sluice-cdc/sluice/snapshot"
)

type table struct {
	state map[string]string
}

func (tb *table) apply(ch *binlog.Change) {
	key := func(r binlog.Row) string { return ch.Table.Name + " " + string(codec.AppendKey(nil, ch.Table, r)) }
	if ch.Before != nil {
		delete(tb.state, key(ch.Before))
	}
	if ch.After != nil {
		tb.state[key(ch.After)] = string(codec.AppendRow(nil, ch.Table, ch.After))
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
	bad := 0
	for k, w := range want {
		if g := got[k]; g != w {
			if bad++; bad < 10 {
				t.Errorf("row %s: rebuilt %q, server %q", k, g, w)
			}
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			if bad++; bad < 10 {
				t.Errorf("row %s rebuilt but not on the server", k)
			}
		}
	}
	if bad > 0 {
		t.Fatalf("%d rows differ (server %d, rebuilt %d)", bad, len(want), len(got))
	}
}

func startWriters(db *testenv.Server, rows int) (stop func() int64) {
	var done atomic.Bool
	var wg sync.WaitGroup
	var writes atomic.Int64
	for w := 0; w < 2; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 11))
			next := rows + 1 + w*1_000_000
			for !done.Load() {
				id := rng.IntN(rows) + 1
				var q string
				switch rng.IntN(4) {
				case 0:
					q = fmt.Sprintf("INSERT INTO app.t VALUES (%d, 1, 'new', 1.5, NOW(3))", next)
					next++
				case 1:
					q = fmt.Sprintf("UPDATE app.t SET v = CONCAT(v, '+'), d = d + 1 WHERE id = %d", id)
				case 2:
					q = fmt.Sprintf("DELETE FROM app.t WHERE id = %d", id)
				default:
					q = fmt.Sprintf("UPDATE IGNORE app.t SET id = id + 5000000 WHERE id = %d", id)
				}
				if db.Exec(context.Background(), q) == nil {
					writes.Add(1)
				}
			}
		}(w)
	}
	return func() int64 { done.Store(true); wg.Wait(); return writes.Load() }
}

// TestStreamSnapshotUnderWrites reads a table with the watermark method
// while the binlog streams and writers change it: snapshot rows plus
// changes rebuild the table exactly, and no snapshot row overwrites a
// newer change.
func TestStreamSnapshotUnderWrites(t *testing.T) {
	db := testenv.StartT(t, testenv.Options{})
	ctx := context.Background()
	const rows = 20000
	if err := db.Exec(ctx, "CREATE DATABASE app", "USE app",
		"CREATE TABLE app.t (id INT PRIMARY KEY, k INT NOT NULL, v VARCHAR(40), d DECIMAL(10,2), ts TIMESTAMP(3) NULL)",
		fmt.Sprintf("INSERT INTO app.t SELECT seq, seq %% 97, CONCAT('v', seq), seq / 7, NULL FROM seq_1_to_%d", rows)); err != nil {
		t.Fatal(err)
	}
	cfg, _ := binlog.ParseSourceURL(db.URL())
	cfg.Tables, _ = binlog.ParseFilter("app.*")
	cfg.StartAt = binlog.StartCurrent
	r, err := binlog.NewReader(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	s := snapshot.NewStream(r, snapshot.StreamConfig{Source: cfg, ChunkRows: 700})
	defer s.Close()
	stop := startWriters(db, rows)
	if err := s.AddTable(ctx, "app", "t", ""); err != nil {
		t.Fatal(err)
	}
	tb := &table{state: map[string]string{}}
	var snapRows, changes int
	snapDone := false
	var writes int64
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		nctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		txn, err := s.Next(nctx)
		cancel()
		if errors.Is(err, context.DeadlineExceeded) && snapDone && writes > 0 {
			break // caught up after the writers stopped
		}
		if err != nil && !errors.Is(err, context.DeadlineExceeded) {
			t.Fatal(err)
		}
		if txn == nil {
			continue
		}
		for i := range txn.Changes {
			ch := &txn.Changes[i]
			if ch.Table == nil {
				continue
			}
			if txn.Snapshot {
				snapRows++
			} else {
				changes++
			}
			tb.apply(ch)
		}
		if txn.SnapshotLast {
			snapDone = true
			time.Sleep(200 * time.Millisecond)
			writes = stop()
		}
	}
	if !snapDone {
		t.Fatal("the snapshot did not finish")
	}
	t.Logf("snapshot rows %d, changes %d, writes %d", snapRows, changes, writes)
	compareStates(t, tb.state, serverState(t, db, "t"))
}

// A table without transactions (Aria) cannot be held still by a snapshot:
// Run leaves it to the Stream, which reads it between watermarks while
// streaming; the result is still exact. The same for method watermark on
// an InnoDB table.
func TestDeferredTablesUnderWrites(t *testing.T) {
	for _, tc := range []struct{ engine, method string }{{"Aria", "consistent"}, {"MyISAM", "consistent"}, {"InnoDB", "watermark"}} {
		t.Run(tc.engine+"/"+tc.method, func(t *testing.T) {
			db := testenv.StartT(t, testenv.Options{})
			ctx := context.Background()
			const rows = 20000
			if err := db.Exec(ctx, "CREATE DATABASE app", "USE app",
				"CREATE TABLE app.t (id INT PRIMARY KEY, k INT NOT NULL, v VARCHAR(40), d DECIMAL(10,2), ts TIMESTAMP(3) NULL) ENGINE="+tc.engine,
				fmt.Sprintf("INSERT INTO app.t SELECT seq, seq %% 97, CONCAT('v', seq), seq / 7, NULL FROM seq_1_to_%d", rows)); err != nil {
				t.Fatal(err)
			}
			stop := startWriters(db, rows)
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
			tb := &table{state: map[string]string{}}
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
						tb.apply(&txn.Changes[i])
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
