package snapshot_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/sluice-cdc/sluice/binlog"
	"github.com/sluice-cdc/sluice/internal/testenv"
	"github.com/sluice-cdc/sluice/position"
	"github.com/sluice-cdc/sluice/snapshot"
)

// TestSnapshotFirstReachableAddress: a source listed as a primary (behind
// an address that is down) and its GTID replica. The snapshot reads from
// the first address that answers, the replica, every connection of it
// there, and its position names the replica. The primary's address comes
// back before streaming starts: the stream connects to the primary, finds
// the replica's position there by GTID (the replica's binlog files are not
// the primary's), and goes on exactly after the snapshot (no row twice,
// none missing).
func TestSnapshotFirstReachableAddress(t *testing.T) {
	testenv.ForEachFlavor(t, func(t *testing.T, f position.Flavor) {
		ctx := context.Background()
		primary := testenv.StartT(t, testenv.Options{Flavor: f, ServerID: 1})
		replica := testenv.StartT(t, testenv.Options{Flavor: f, ServerID: 2})
		if err := replica.ReplicateFrom(ctx, primary); err != nil {
			t.Fatal(err)
		}
		// The replica's binlog files are not the primary's: a position of
		// one names a file the other never wrote.
		if err := replica.Exec(ctx, "FLUSH BINARY LOGS", "FLUSH BINARY LOGS"); err != nil {
			t.Fatal(err)
		}
		stmts := []string{"CREATE DATABASE shop", "CREATE TABLE shop.t (id INT PRIMARY KEY, v INT)"}
		for id := 1; id <= 20; id++ {
			stmts = append(stmts, fmt.Sprintf("INSERT INTO shop.t VALUES (%d, %d)", id, id))
		}
		if err := primary.Exec(ctx, stmts...); err != nil {
			t.Fatal(err)
		}
		if err := replica.WaitCaughtUp(ctx, primary); err != nil {
			t.Fatal(err)
		}
		link := testenv.NewFaultProxy(t, primary.Addr())
		cfg, err := binlog.ParseSourceURL(fmt.Sprintf("mysql://%s:%s@%s,%s", primary.User, primary.Password, link.Addr(), replica.Addr()))
		if err != nil {
			t.Fatal(err)
		}
		cfg.Tables, _ = binlog.ParseFilter("shop.t")
		link.Cut()
		rows := map[int64]int{}
		res, err := snapshot.Run(ctx, snapshot.Config{Source: cfg, Tables: cfg.Tables, Parallel: 2}, func(txn *binlog.Txn) error {
			for _, ch := range txn.Changes {
				rows[ch.After[0].Int()]++
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		replicaID, _ := replica.ServerUUID(ctx)
		if res.Addr != replica.Addr() || res.Position.Server != replicaID || len(rows) != 20 {
			t.Fatalf("snapshot read %d rows from %s at %s (server %q); want 20 rows from the replica %s (server %q)", len(rows), res.Addr, res.Position, res.Position.Server, replica.Addr(), replicaID)
		}
		if err := link.Restore(); err != nil {
			t.Fatal(err)
		}
		for id := 21; id <= 30; id++ {
			if err := primary.Exec(ctx, fmt.Sprintf("INSERT INTO shop.t VALUES (%d, %d)", id, id)); err != nil {
				t.Fatal(err)
			}
		}
		rcfg := cfg
		rcfg.Start = res.Position
		r, err := binlog.NewReader(rcfg)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		nctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		for rows[30] == 0 {
			txn, err := r.Next(nctx)
			if err != nil {
				t.Fatalf("streaming after the snapshot: %v (rows so far %v)", err, rows)
			}
			for _, ch := range txn.Changes {
				id := ch.After[0].Int()
				if rows[id]++; rows[id] > 1 {
					t.Fatalf("row %d delivered twice (at %s)", id, txn.End)
				}
			}
		}
		if len(rows) != 30 {
			t.Fatalf("%d rows in all, want 30", len(rows))
		}
		if got := r.Source().Addr; got != link.Addr() {
			t.Errorf("the reader streams from %s, want the primary's address %s (first in the list)", got, link.Addr())
		}
	})
}
