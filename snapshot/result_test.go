package snapshot_test

import (
	"context"
	"fmt"
	"strconv"
	"testing"

	"github.com/sluice-cdc/sluice/binlog"
	"github.com/sluice-cdc/sluice/internal/testenv"
	"github.com/sluice-cdc/sluice/position"
	"github.com/sluice-cdc/sluice/snapshot"
)

// Results the snapshot reads off the socket itself: empty ones, rows in
// packets of 16 MiB and more, and many statements on one connection.
func TestScanResults(t *testing.T) {
	testenv.ForEachFlavor(t, func(t *testing.T, flavor position.Flavor) {
		db := server(t, flavor)
		ctx := context.Background()
		// A row of 16 MiB and more needs packets of that size.
		exec(t, db, "SET GLOBAL max_allowed_packet = 67108864",
			"CREATE DATABASE results", "CREATE TABLE results.t (id INT PRIMARY KEY, b LONGBLOB)")
		// The payload of a row is 10 bytes besides the blob: 0x00, the NULL
		// bitmap, the INT and the blob's 4-byte length. 16777205 bytes of blob
		// fill one packet exactly (2^24-1), which an empty packet then ends.
		sizes := map[int]int{1: 0, 2: 16777205, 3: 16777205 + 1000, 4: 3 << 20, 5: 40 << 20}
		for id, n := range sizes {
			exec(t, db, fmt.Sprintf("INSERT INTO results.t VALUES (%d, REPEAT(CHAR(65 + %d), %d))", id, id, n))
		}
		c := conn(t, db)
		tbl := inspect(t, c, "results", "t").Table

		seen := 0
		err := snapshot.Scan(ctx, c, tbl, "SELECT id, b FROM results.t ORDER BY id", nil, func(r binlog.Row) error {
			id := int(r[0].Int())
			b := r[1].Bytes()
			if len(b) != sizes[id] {
				t.Errorf("row %d: %d bytes, want %d", id, len(b), sizes[id])
			}
			for i, x := range b {
				if x != byte(65+id) {
					t.Errorf("row %d: byte %d is %q", id, i, x)
					break
				}
			}
			seen++
			return nil
		})
		if err != nil || seen != len(sizes) {
			t.Fatalf("read %d rows of %d: %v", seen, len(sizes), err)
		}

		// An empty result, then the connection still works.
		for i := 0; i < 2; i++ {
			err = snapshot.Scan(ctx, c, tbl, "SELECT id, b FROM results.t WHERE id > ?", []any{int64(100)}, func(r binlog.Row) error {
				t.Errorf("row from an empty result: %v", r)
				return nil
			})
			if err != nil {
				t.Fatalf("empty result: %v", err)
			}
		}
		// A server error before any row.
		err = snapshot.Scan(ctx, c, tbl, "SELECT id, b FROM results.t WHERE id = 1 AND b = (SELECT b FROM results.t)", nil, func(binlog.Row) error { return nil })
		if err == nil {
			t.Fatal("no error from a subquery returning several rows")
		}
		// More distinct statements than a connection keeps prepared.
		for i := 1; i <= 20; i++ {
			n := 0
			q := fmt.Sprintf("SELECT id, b FROM results.t WHERE id = %d", i%5+1)
			if i%2 == 0 {
				q += " AND id > ?"
			}
			var args []any
			if i%2 == 0 {
				args = []any{int64(0)}
			}
			if err := snapshot.Scan(ctx, c, tbl, q, args, func(binlog.Row) error { n++; return nil }); err != nil || n != 1 {
				t.Fatalf("%s: %d rows, %v", q, n, err)
			}
		}
	})
}

// A snapshot of more tables than a connection keeps statements prepared
// for, in chunks smaller than the tables, one of them keyless.
func TestRunManyTables(t *testing.T) {
	testenv.ForEachFlavor(t, func(t *testing.T, flavor position.Flavor) {
		db := server(t, flavor)
		ctx := context.Background()
		const tables, rows = 20, 25
		stmts := []string{"CREATE DATABASE many", "USE many"}
		for i := 0; i < tables; i++ {
			key := "PRIMARY KEY"
			if i == 7 {
				key = "" // read whole, in no particular order
			}
			stmts = append(stmts, fmt.Sprintf("CREATE TABLE many.t%02d (id INT NOT NULL %s, v VARCHAR(20))", i, key),
				fmt.Sprintf("INSERT INTO many.t%02d SELECT seq, CONCAT('t%d-', seq) FROM seq_1_to_%d", i, i, rows))
		}
		exec(t, db, stmts...)
		cfg, err := binlog.ParseSourceURL(db.URL())
		if err != nil {
			t.Fatal(err)
		}
		filter, err := binlog.ParseFilter("many.*")
		if err != nil {
			t.Fatal(err)
		}
		seen := map[string]bool{}
		res, err := snapshot.Run(ctx, snapshot.Config{Source: cfg, Tables: filter, Parallel: 2, ChunkRows: 10}, func(txn *binlog.Txn) error {
			if len(txn.Changes) > 10 {
				return fmt.Errorf("a chunk of %d rows", len(txn.Changes))
			}
			for _, ch := range txn.Changes {
				k := fmt.Sprintf("%s-%d", ch.Table.Name[1:], ch.After[0].Int())
				if seen[k] {
					return fmt.Errorf("row %s twice", k)
				}
				seen[k] = true
				if want := fmt.Sprintf("t%d-%d", atoi(ch.Table.Name[1:]), ch.After[0].Int()); string(ch.After[1].Bytes()) != want {
					return fmt.Errorf("row %s: v %q, want %q", k, ch.After[1].Bytes(), want)
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if res.Rows != tables*rows || len(seen) != tables*rows {
			t.Errorf("%d rows (%d distinct), want %d", res.Rows, len(seen), tables*rows)
		}
	})
}

func atoi(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}
