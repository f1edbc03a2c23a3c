package binlog_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/sluice-cdc/sluice/binlog"
	"github.com/sluice-cdc/sluice/internal/testenv"
	"github.com/sluice-cdc/sluice/position"
)

// TestSlowLinks: over a link that delays everything the server sends by
// 1, 4 or 10 s (more than the heartbeat), the reader connects, streams,
// stays connected while idle, and Close returns promptly. A 10 s link
// takes minutes to connect over (about 25 round trips of checks and
// setup): it runs with SLUICE_SLOWLINKS=1 (make slowlinks); make test has
// the stalled link (TestStalledLinkClose).
func TestSlowLinks(t *testing.T) {
	if os.Getenv("SLUICE_SLOWLINKS") == "" {
		t.Skip("slow (minutes): SLUICE_SLOWLINKS=1, or make slowlinks")
	}
	testenv.ForEachFlavor(t, func(t *testing.T, f position.Flavor) {
		for _, d := range []time.Duration{time.Second, 4 * time.Second, 10 * time.Second} {
			t.Run(d.String(), func(t *testing.T) {
				t.Parallel()
				slowLink(t, f, d)
			})
		}
	})
}

// slowLink streams rows over a link delaying the server's bytes by delay,
// idles longer than the heartbeat bound, streams again, and closes.
func slowLink(t *testing.T, f position.Flavor, delay time.Duration) {
	// The server drops a client whose handshake takes longer than its
	// connect_timeout (10 s by default): over a 10 s link, one that
	// answers its greeting 10 s after it was sent.
	db := startServer(t, f, testenv.Options{Extra: []string{"--connect-timeout=60"}})
	exec(t, db, "CREATE DATABASE shop", "CREATE TABLE shop.t (id INT PRIMARY KEY, v INT)")
	start := binlogEnd(t, db)
	link := testenv.NewFaultProxy(t, db.Addr())
	if err := link.SetLatency(delay); err != nil {
		t.Fatal(err)
	}
	tables, _ := binlog.ParseFilter("shop.t")
	r := newReader(t, db, func(c *binlog.Config) {
		c.Addr, c.Start, c.Tables, c.Heartbeat = link.Addr(), start, tables, 200*time.Millisecond
	})
	insert(t, db, 1, 3)
	began := time.Now()
	// About 25 round trips to check the server, a dozen to start the dump.
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute+60*delay)
	defer cancel()
	if err := r.Ready(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("%s one way: connected and checked in %s (round trip measured %s)", delay, time.Since(began).Round(time.Millisecond), r.RoundTrip().Round(time.Millisecond))
	seen := map[int64]int{}
	readSlow(ctx, t, r, seen, 3)
	t.Logf("%s one way: first rows after %s", delay, time.Since(began).Round(time.Millisecond))
	idle := max(4*time.Second, 2*delay) // heartbeats only, past the silence bound's fixed part
	time.Sleep(idle)
	wrote := time.Now()
	insert(t, db, 4, 4)
	readSlow(ctx, t, r, seen, 4)
	t.Logf("%s one way: a row written after %s idle arrived %s later", delay, idle, time.Since(wrote).Round(time.Millisecond))
	if st := r.Stats(); st.Reconnects != 0 {
		t.Errorf("%d reconnections over a slow but working link", st.Reconnects)
	}
	began = time.Now()
	r.Close()
	if d := time.Since(began); d > 5*time.Second {
		t.Errorf("Close took %s", d)
	}
	t.Logf("%s one way: Close took %s", delay, time.Since(began).Round(time.Millisecond))
}

// readSlow is readIDs with ctx's deadline instead of a fixed one per
// transaction.
func readSlow(ctx context.Context, t *testing.T, r *binlog.Reader, seen map[int64]int, last int64) {
	t.Helper()
	for {
		txn, err := r.Next(ctx)
		if err != nil {
			t.Fatalf("Next: %v", err)
		}
		for _, ch := range txn.Changes {
			id := ch.After[0].Int()
			if seen[id]++; seen[id] > 1 {
				t.Fatalf("row %d delivered twice (at %s)", id, txn.End)
			}
			if id == last {
				return
			}
		}
	}
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
