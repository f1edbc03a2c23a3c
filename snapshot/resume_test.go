package snapshot_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-cdc/sluice/binlog"
	"github.com/sluice-cdc/sluice/codec"
	"github.com/sluice-cdc/sluice/internal/testenv"
	"github.com/sluice-cdc/sluice/position"
	"github.com/sluice-cdc/sluice/snapshot"
)

// newStream is a Stream on a reader of app.* from the server's current
// position.
func newStream(t *testing.T, db *testenv.Server, chunk int) *snapshot.Stream {
	t.Helper()
	cfg, _ := binlog.ParseSourceURL(db.URL())
	cfg.Tables, _ = binlog.ParseFilter("app.*")
	cfg.StartAt = binlog.StartCurrent
	r, err := binlog.NewReader(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	s := snapshot.NewStream(r, snapshot.StreamConfig{Source: cfg, ChunkRows: chunk})
	t.Cleanup(func() { s.Close() })
	return s
}

// drain reads s until nothing is queued and returns the snapshot chunks.
func drain(t *testing.T, s *snapshot.Stream, apply func(*binlog.Txn)) (chunks []*binlog.Txn) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for len(s.Remaining()) > 0 {
		if time.Now().After(deadline) {
			t.Fatal("the snapshot did not finish in 2 minutes")
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		txn, err := s.Next(ctx)
		cancel()
		if errors.Is(err, context.DeadlineExceeded) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if txn.Snapshot {
			chunks = append(chunks, txn)
		}
		if apply != nil {
			apply(txn)
		}
	}
	return chunks
}

// lastMarks counts the rows a consumer sees marked "last": the last change
// of a chunk with SnapshotLast (as the pipeline and tail write it).
func lastMarks(chunks []*binlog.Txn) (marks, empty int) {
	for _, c := range chunks {
		if c.SnapshotLast {
			if len(c.Changes) > 0 {
				marks++
			} else {
				empty++
			}
		}
	}
	return marks, empty
}

// TestStreamLastMarkOnce: the watermark method marks exactly one row
// "last" when the last table read is empty, and when a table's row count
// is a multiple of the chunk size (before, the mark went on an empty
// chunk, which no consumer sees).
func TestStreamLastMarkOnce(t *testing.T) {
	testenv.ForEachFlavor(t, func(t *testing.T, flavor position.Flavor) {
		db := testenv.StartT(t, testenv.Options{Flavor: flavor})
		exec(t, db, "CREATE DATABASE app", "USE app",
			"CREATE TABLE app.a (id INT PRIMARY KEY, v INT)",
			"INSERT INTO app.a SELECT seq, seq FROM seq_1_to_300",
			"CREATE TABLE app.b (id INT PRIMARY KEY, v INT)",
			"CREATE TABLE app.c (id INT PRIMARY KEY, v INT)",
			"INSERT INTO app.c SELECT seq, seq FROM seq_1_to_7")
		for _, tc := range []struct {
			name   string
			tables []string
			rows   int
			resume *snapshot.State
		}{
			{name: "multiple of the chunk size", tables: []string{"a"}, rows: 300},
			{name: "empty last table", tables: []string{"a", "b"}, rows: 300},
			{name: "empty first table", tables: []string{"b", "c"}, rows: 7},
			{name: "only empty tables", tables: []string{"b"}},
			// A resumed snapshot whose only table left is empty: a row of a
			// table read before the interruption carries the mark.
			{name: "resumed, empty last table", rows: 1, resume: &snapshot.State{
				Ranges: []snapshot.SavedRange{{Schema: "app", Table: "b"}}, Tables: []string{"app.a", "app.b"}}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				s := newStream(t, db, 100)
				for _, name := range tc.tables {
					if err := s.AddTable(context.Background(), "app", name, ""); err != nil {
						t.Fatal(err)
					}
				}
				if tc.resume != nil {
					if err := snapshot.Resume(context.Background(), s, *tc.resume); err != nil {
						t.Fatal(err)
					}
				}
				chunks := drain(t, s, nil)
				rows := 0
				for _, c := range chunks {
					rows += len(c.Changes)
				}
				marks, empty := lastMarks(chunks)
				want := 1
				if tc.rows == 0 {
					want = 0 // no row to mark
				}
				if marks != want || rows < tc.rows {
					t.Fatalf("%d rows in %d chunks, %d marked last (and %d empty chunks marked): want %d rows or more, %d marked", rows, len(chunks), marks, empty, tc.rows, want)
				}
				if m := chunks[len(chunks)-1]; want == 1 && !m.SnapshotLast {
					t.Fatal("the mark is not on the final chunk")
				}
			})
		}
	})
}

// bag is a table without a key as a consumer holds it: a multiset of rows.
type bag map[string]int

// apply applies a change of the keyless table (a TRUNCATE empties it).
func (b bag) apply(ch *binlog.Change) {
	if ch.Op == binlog.OpDDL {
		if strings.HasPrefix(ch.Query, "TRUNCATE TABLE") {
			clear(b)
		}
		return
	}
	if ch.Before != nil {
		k := string(codec.AppendRow(nil, ch.Table, ch.Before))
		if b[k]--; b[k] <= 0 {
			delete(b, k)
		}
	}
	if ch.After != nil {
		b[string(codec.AppendRow(nil, ch.Table, ch.After))]++
	}
}

func (b bag) String() string {
	var out []string
	for k, n := range b {
		out = append(out, fmt.Sprintf("%dx%s", n, k))
	}
	sort.Strings(out)
	return strings.Join(out, " ")
}

// TestResumeKeylessTable: an interrupted consistent snapshot left a table
// without a key unfinished (Run saves it whole: no key says where it got
// to). Resume reads it again whole at one point, after a TRUNCATE TABLE
// event, while writers change it: the consumer's rows (what it held
// before, the stream's changes, the TRUNCATE, the rows read) equal the
// table. Before, Resume refused the table: "it cannot be read while
// streaming".
func TestResumeKeylessTable(t *testing.T) {
	testenv.ForEachFlavor(t, func(t *testing.T, flavor position.Flavor) {
		db := testenv.StartT(t, testenv.Options{Flavor: flavor})
		exec(t, db, "CREATE DATABASE app", "USE app",
			"CREATE TABLE app.nokey (a INT NOT NULL, b INT)",
			"INSERT INTO app.nokey SELECT seq % 50, seq FROM seq_1_to_2000",
			"CREATE TABLE app.k (id INT PRIMARY KEY, v INT)",
			"INSERT INTO app.k SELECT seq, seq FROM seq_1_to_500")
		// What the interrupted run had delivered: part of the table.
		held := bag{}
		c := conn(t, db)
		tbl, err := snapshot.Describe(context.Background(), c, "app", "nokey")
		if err != nil {
			t.Fatal(err)
		}
		if err := snapshot.Scan(context.Background(), c, tbl, "SELECT "+snapshot.SelectList(tbl)+" FROM app.nokey LIMIT 700", nil, func(row binlog.Row) error {
			held[string(codec.AppendRow(nil, tbl, row))]++
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		s := newStream(t, db, 300)
		var stop atomic.Bool
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(5, 6))
			wc, err := db.Conn(context.Background())
			if err != nil {
				return
			}
			defer wc.Close()
			for i := 0; !stop.Load(); i++ {
				a := rng.IntN(50)
				switch rng.IntN(4) {
				case 0:
					wc.Execute(fmt.Sprintf("INSERT INTO app.nokey VALUES (%d, %d)", a, 100000+i))
				case 1:
					wc.Execute(fmt.Sprintf("DELETE FROM app.nokey WHERE a = %d LIMIT 1", a))
				case 2:
					wc.Execute(fmt.Sprintf("UPDATE app.nokey SET b = b + 1 WHERE a = %d LIMIT 2", a))
				default:
					wc.Execute(fmt.Sprintf("UPDATE app.k SET v = v + 1 WHERE id = %d", 1+rng.IntN(500)))
				}
			}
		}()
		time.Sleep(200 * time.Millisecond)
		st := snapshot.State{Ranges: []snapshot.SavedRange{{Schema: "app", Table: "nokey"}, {Schema: "app", Table: "k", After: snapshot.EncodeKey(binlog.Row{binlog.IntValue(250), {}})}}}
		if err := snapshot.Resume(context.Background(), s, st); err != nil {
			stop.Store(true)
			wg.Wait()
			t.Fatal(err)
		}
		truncates := 0
		chunks := drain(t, s, func(txn *binlog.Txn) {
			for i := range txn.Changes {
				ch := &txn.Changes[i]
				if ch.Table != nil && ch.Table.Name == "nokey" {
					if ch.Op == binlog.OpDDL {
						truncates++
						if !txn.Snapshot {
							t.Errorf("a TRUNCATE from the stream: %s", ch.Query)
						}
					}
					held.apply(ch)
				}
			}
		})
		stop.Store(true)
		wg.Wait()
		// Catch up with the stream after the writers stopped: until it has
		// been quiet for 2 s.
		for {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			txn, err := s.Next(ctx)
			cancel()
			if errors.Is(err, context.DeadlineExceeded) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			for i := range txn.Changes {
				if ch := &txn.Changes[i]; ch.Table != nil && ch.Table.Name == "nokey" {
					held.apply(ch)
				}
			}
		}
		want := bag{}
		if err := snapshot.Scan(context.Background(), c, tbl, "SELECT "+snapshot.SelectList(tbl)+" FROM app.nokey", nil, func(row binlog.Row) error {
			want[string(codec.AppendRow(nil, tbl, row))]++
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if truncates != 1 {
			t.Errorf("%d TRUNCATE events, want 1", truncates)
		}
		if marks, _ := lastMarks(chunks); marks != 1 {
			t.Errorf("%d rows marked last, want 1", marks)
		}
		if held.String() != want.String() {
			t.Fatalf("the keyless table rebuilt differs from the server:\n got %s\nwant %s", held, want)
		}
		t.Logf("%d chunks; %d distinct rows", len(chunks), len(want))
	})
}
