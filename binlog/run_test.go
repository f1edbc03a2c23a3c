package binlog_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluice-cdc/sluice/binlog"
	"github.com/sluice-cdc/sluice/internal/testenv"
	"github.com/sluice-cdc/sluice/position"
)

// TestReaderRunHandlers: Run calls the OnTxn handlers once per
// transaction before its rows, then for each row the OnRow handlers whose
// database and table match (with "*" on either side), in the order they
// were registered; it returns nil at the Stop position, the handler's
// error when one fails (the reader then closed), and nil when ctx ends.
func TestReaderRunHandlers(t *testing.T) {
	testenv.ForEachFlavor(t, func(t *testing.T, flavor position.Flavor) {
		db := startServer(t, flavor, testenv.Options{})
		exec(t, db,
			"CREATE DATABASE shop", "CREATE DATABASE other",
			"CREATE TABLE shop.orders (id INT PRIMARY KEY, v VARCHAR(10))",
			"CREATE TABLE shop.items (id INT PRIMARY KEY)",
			"CREATE TABLE other.items (id INT PRIMARY KEY)",
			"CREATE TABLE other.skipped (id INT PRIMARY KEY)")
		start := binlogEnd(t, db)
		exec(t, db,
			"BEGIN",
			"INSERT INTO shop.orders VALUES (1, 'a')",
			"INSERT INTO shop.items VALUES (10)",
			"INSERT INTO other.items VALUES (20)",
			"INSERT INTO other.skipped VALUES (30)",
			"UPDATE shop.orders SET v = 'b' WHERE id = 1",
			"COMMIT",
			"DELETE FROM shop.orders WHERE id = 1",
			"INSERT INTO other.skipped VALUES (31)")
		stop := binlogEnd(t, db)

		// A range reader: the writes above, shop.* and other.items only.
		rangeReader := func() *binlog.Reader {
			return newReader(t, db, func(c *binlog.Config) {
				c.Start, c.Stop = start, stop
				c.Tables, _ = binlog.ParseFilter("shop.*,other.items")
			})
		}
		var got []string
		r := rangeReader()
		r.OnTxn(func(txn *binlog.Txn) error {
			if len(txn.Changes) > 0 {
				got = append(got, fmt.Sprintf("txn %d changes last=%v", len(txn.Changes), txn.Last))
			}
			return nil
		})
		row := func(name string) func(*binlog.Txn, *binlog.Change) error {
			return func(_ *binlog.Txn, ch *binlog.Change) error {
				img := ch.After
				if ch.Op == binlog.OpDelete {
					img = ch.Before
				}
				got = append(got, fmt.Sprintf("%s: %s %s id=%d", name, ch.Op, ch.Table.QualifiedName(), img[0].Int()))
				return nil
			}
		}
		r.OnRow("shop", "orders", row("orders"))
		r.OnRow("*", "items", row("any items"))
		r.OnRow("shop", "*", row("all of shop"))
		r.OnRow("other", "skipped", row("skipped")) // filtered out by Tables: never called
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := r.Run(ctx); err != nil {
			t.Fatalf("Run to the stop position: %v, want nil", err)
		}
		want := []string{
			"txn 4 changes last=true",
			"orders: insert shop.orders id=1",
			"all of shop: insert shop.orders id=1",
			"any items: insert shop.items id=10",
			"all of shop: insert shop.items id=10",
			"any items: insert other.items id=20",
			"orders: update shop.orders id=1",
			"all of shop: update shop.orders id=1",
			"txn 1 changes last=true",
			"orders: delete shop.orders id=1",
			"all of shop: delete shop.orders id=1",
		}
		if !slices.Equal(got, want) {
			t.Fatalf("handler calls:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
		}

		// A failing handler stops Run with its error, after the rows before
		// it; nothing after it is handed on.
		boom := errors.New("handler refused the update")
		r = rangeReader()
		var seen []binlog.Op
		r.OnRow("shop", "orders", func(_ *binlog.Txn, ch *binlog.Change) error {
			seen = append(seen, ch.Op)
			if ch.Op == binlog.OpUpdate {
				return boom
			}
			return nil
		})
		if err := r.Run(ctx); !errors.Is(err, boom) {
			t.Fatalf("Run with a failing handler: %v, want the handler's error", err)
		}
		if want := []binlog.Op{binlog.OpInsert, binlog.OpUpdate}; !slices.Equal(seen, want) {
			t.Fatalf("rows handed to the failing handler: %v, want %v", seen, want)
		}
		// An OnTxn error stops it before the transaction's rows.
		r = rangeReader()
		rows := 0
		r.OnTxn(func(*binlog.Txn) error { return boom })
		r.OnRow("*", "*", func(*binlog.Txn, *binlog.Change) error { rows++; return nil })
		if err := r.Run(ctx); !errors.Is(err, boom) || rows != 0 {
			t.Fatalf("Run with a failing OnTxn: %v after %d rows, want the handler's error before any row", err, rows)
		}

		// Without a stop position, Run returns nil when ctx ends.
		r = newReader(t, db, func(c *binlog.Config) { c.StartAt = binlog.StartCurrent })
		if err := r.Ready(timeout(t)); err != nil {
			t.Fatal(err)
		}
		live, stopLive := context.WithCancel(context.Background())
		done := make(chan error, 1)
		calls := make(chan int64, 1)
		r.OnRow("shop", "orders", func(_ *binlog.Txn, ch *binlog.Change) error {
			calls <- ch.After[0].Int()
			return nil
		})
		go func() { done <- r.Run(live) }()
		exec(t, db, "INSERT INTO shop.orders VALUES (2, 'live')")
		select {
		case id := <-calls:
			if id != 2 {
				t.Fatalf("live row id %d, want 2", id)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("the live insert reached no handler in 30 s")
		}
		stopLive()
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("Run after ctx ended: %v, want nil", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("Run did not return within 10 s of ctx ending")
		}
	})
}
