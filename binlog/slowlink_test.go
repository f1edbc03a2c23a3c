package binlog_test

import (
	"context"
	"testing"
	"time"

	"github.com/sluice-cdc/sluice/binlog"
	"github.com/sluice-cdc/sluice/internal/testenv"
	"github.com/sluice-cdc/sluice/position"
)

// TestSlowLink: over a link that delays everything the server sends by a
// second (more than the heartbeat), the reader connects, streams, stays
// connected while idle, and Close returns promptly.
func TestSlowLink(t *testing.T) {
	testenv.ForEachFlavor(t, func(t *testing.T, f position.Flavor) {
		db := startServer(t, f, testenv.Options{})
		exec(t, db, "CREATE DATABASE shop", "CREATE TABLE shop.t (id INT PRIMARY KEY, v INT)")
		start := binlogEnd(t, db)
		link := testenv.NewFaultProxy(t, db.Addr())
		if err := link.SetLatency(time.Second); err != nil {
			t.Fatal(err)
		}
		tables, _ := binlog.ParseFilter("shop.t")
		r := newReader(t, db, func(c *binlog.Config) {
			c.Addr, c.Start, c.Tables, c.Heartbeat = link.Addr(), start, tables, 200*time.Millisecond
		})
		insert(t, db, 1, 3)
		began := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		if err := r.Ready(ctx); err != nil {
			t.Fatal(err)
		}
		t.Logf("connected and checked in %s", time.Since(began).Round(time.Millisecond))
		seen := map[int64]int{}
		readIDs(t, r, seen, 3)
		t.Logf("first rows after %s", time.Since(began).Round(time.Millisecond))
		time.Sleep(4 * time.Second) // idle, heartbeats only
		insert(t, db, 4, 4)
		readIDs(t, r, seen, 4)
		if st := r.Stats(); st.Reconnects != 0 {
			t.Errorf("%d reconnections over a slow but working link", st.Reconnects)
		}
		began = time.Now()
		r.Close()
		if d := time.Since(began); d > 5*time.Second {
			t.Errorf("Close took %s", d)
		}
	})
}

// TestStalledLinkClose: over a link that stops passing data (nothing
// closed), Close ends the reader at once, whether it was checking the
// server or streaming.
func TestStalledLinkClose(t *testing.T) {
	testenv.ForEachFlavor(t, func(t *testing.T, f position.Flavor) {
		db := startServer(t, f, testenv.Options{})
		exec(t, db, "CREATE DATABASE shop", "CREATE TABLE shop.t (id INT PRIMARY KEY, v INT)")
		start := binlogEnd(t, db)
		tables, _ := binlog.ParseFilter("shop.t")
		for _, when := range []string{"connecting", "streaming"} {
			link := testenv.NewFaultProxy(t, db.Addr())
			r := newReader(t, db, func(c *binlog.Config) { c.Addr, c.Start, c.Tables = link.Addr(), start, tables })
			if when == "streaming" {
				insert(t, db, 1, 1)
				readIDs(t, r, map[int64]int{}, 1)
			} else {
				go r.Next(context.Background()) // starts connecting
				time.Sleep(100 * time.Millisecond)
			}
			if err := link.Stall(); err != nil {
				t.Fatal(err)
			}
			if when == "connecting" {
				time.Sleep(500 * time.Millisecond)
			}
			began := time.Now()
			r.Close()
			if d := time.Since(began); d > 3*time.Second {
				t.Errorf("%s: Close over a stalled link took %s", when, d)
			}
		}
	})
}
