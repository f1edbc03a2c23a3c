package binlog_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-cdc/sluice/binlog"
	"github.com/sluice-cdc/sluice/internal/testenv"
	"github.com/sluice-cdc/sluice/position"
)

// topology is a primary with one GTID replica, and a proxy that stands for
// the address clients use (a DNS name or virtual IP that a failover moves).
type topology struct {
	primary, replica *testenv.Server
	addr             *testenv.FaultProxy
}

func startTopology(t *testing.T, f position.Flavor) topology {
	t.Helper()
	primary := startServer(t, f, testenv.Options{ServerID: 1})
	replica := startServer(t, f, testenv.Options{ServerID: 2})
	if err := replica.ReplicateFrom(context.Background(), primary); err != nil {
		t.Fatal(err)
	}
	exec(t, primary, "CREATE DATABASE shop", "CREATE TABLE shop.t (id INT PRIMARY KEY, v INT)")
	return topology{primary: primary, replica: replica, addr: testenv.NewFaultProxy(t, primary.Addr())}
}

// insert writes the rows first..last, one transaction each.
func insert(t *testing.T, db *testenv.Server, first, last int) {
	t.Helper()
	for id := first; id <= last; id++ {
		exec(t, db, fmt.Sprintf("INSERT INTO shop.t VALUES (%d, %d)", id, id))
	}
}

// readIDs reads transactions until the row last; each id must come once.
func readIDs(t *testing.T, r *binlog.Reader, seen map[int64]int, last int64) *binlog.Txn {
	t.Helper()
	for {
		txn := next(t, r)
		for _, ch := range txn.Changes {
			id := ch.After[0].Int()
			if seen[id]++; seen[id] > 1 {
				t.Fatalf("row %d delivered twice (at %s)", id, txn.End)
			}
			if id == last {
				return txn
			}
		}
	}
}

// failover kills the primary and promotes the replica; with move, the
// address moves to the replica too.
func (tp topology) failover(t *testing.T, move bool) {
	t.Helper()
	if err := tp.primary.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := tp.replica.Promote(context.Background()); err != nil {
		t.Fatal(err)
	}
	if move {
		if err := tp.addr.MoveTo(tp.replica.Addr()); err != nil {
			t.Fatal(err)
		}
	}
}

func (tp topology) reader(t *testing.T, mod func(*binlog.Config)) *binlog.Reader {
	start := binlogEnd(t, tp.primary)
	tables, _ := binlog.ParseFilter("shop.t")
	return newReader(t, tp.primary, func(c *binlog.Config) {
		c.Addr, c.Start, c.Tables = tp.addr.Addr(), start, tables
		if mod != nil {
			mod(c)
		}
	})
}

// TestSourceFailover: the address moves from a primary that died to its
// promoted replica; the reader notices the other server, resumes there by
// GTID, and delivers every transaction exactly once, the new server's
// positions naming it.
func TestSourceFailover(t *testing.T) {
	testenv.ForEachFlavor(t, func(t *testing.T, f position.Flavor) {
		ctx := context.Background()
		tp := startTopology(t, f)
		r := tp.reader(t, nil)
		insert(t, tp.primary, 1, 30)
		seen := map[int64]int{}
		before := readIDs(t, r, seen, 30)
		if err := tp.replica.WaitCaughtUp(ctx, tp.primary); err != nil {
			t.Fatal(err)
		}
		oldID, _ := tp.primary.ServerUUID(ctx)
		newID, _ := tp.replica.ServerUUID(ctx)
		if before.End.Server != oldID {
			t.Fatalf("a position of the primary names server %q, want %q", before.End.Server, oldID)
		}
		tp.failover(t, true)
		insert(t, tp.replica, 31, 60)
		after := readIDs(t, r, seen, 60)
		if len(seen) != 60 {
			t.Fatalf("%d rows delivered, want 60", len(seen))
		}
		if after.End.Server != newID {
			t.Errorf("a position of the promoted replica names server %q, want %q", after.End.Server, newID)
		}
		if before.End.Compare(after.End) >= 0 {
			t.Errorf("positions across the failover: %s is not before %s", before.End, after.End)
		}
		if st := r.Stats(); st.Failovers != 1 {
			t.Errorf("Failovers = %d, want 1", st.Failovers)
		}
	})
}

// TestSourceFailoverLaggingReplica: the address moves to a replica that
// has not applied every transaction already delivered; the reader waits
// for it, then goes on exactly once.
func TestSourceFailoverLaggingReplica(t *testing.T) {
	testenv.ForEachFlavor(t, func(t *testing.T, f position.Flavor) {
		ctx := context.Background()
		tp := startTopology(t, f)
		r := tp.reader(t, nil)
		insert(t, tp.primary, 1, 10)
		if err := tp.replica.WaitCaughtUp(ctx, tp.primary); err != nil {
			t.Fatal(err)
		}
		if err := tp.replica.StopReplication(ctx, true); err != nil {
			t.Fatal(err)
		}
		insert(t, tp.primary, 11, 20)
		seen := map[int64]int{}
		readIDs(t, r, seen, 20)
		if err := tp.addr.MoveTo(tp.replica.Addr()); err != nil {
			t.Fatal(err)
		}
		go func() {
			time.Sleep(1500 * time.Millisecond)
			tp.replica.StartReplication(ctx)
		}()
		insert(t, tp.primary, 21, 25) // reaches the reader through the replica
		readIDs(t, r, seen, 25)
		if len(seen) != 25 {
			t.Fatalf("%d rows delivered, want 25", len(seen))
		}
		if st := r.Stats(); st.Failovers != 1 || st.CatchUpWait < 500*time.Millisecond {
			t.Errorf("Failovers %d, CatchUpWait %s: want 1 and the time the replica lagged", st.Failovers, st.CatchUpWait)
		}
	})
}

// TestSourceFailoverMissingTransactions: the promoted replica never
// received transactions already delivered: the reader stops with
// ErrDiverged naming them, rather than deliver another history.
func TestSourceFailoverMissingTransactions(t *testing.T) {
	testenv.ForEachFlavor(t, func(t *testing.T, f position.Flavor) {
		ctx := context.Background()
		tp := startTopology(t, f)
		r := tp.reader(t, func(c *binlog.Config) { c.CatchUpWait = time.Second })
		insert(t, tp.primary, 1, 10)
		if err := tp.replica.WaitCaughtUp(ctx, tp.primary); err != nil {
			t.Fatal(err)
		}
		if err := tp.replica.StopReplication(ctx, false); err != nil {
			t.Fatal(err)
		}
		insert(t, tp.primary, 11, 20)
		seen := map[int64]int{}
		last := readIDs(t, r, seen, 20)
		tp.failover(t, true)
		insert(t, tp.replica, 100, 100)
		nctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		for {
			txn, err := r.Next(nctx)
			if err == nil {
				if len(txn.Changes) > 0 {
					t.Fatalf("delivered row %d from a server that lacks delivered transactions", txn.Changes[0].After[0].Int())
				}
				continue
			}
			if !errors.Is(err, binlog.ErrDiverged) {
				t.Fatalf("err = %v, want ErrDiverged", err)
			}
			// The missing transactions are named: on MySQL the primary's
			// UUID and the range; on MariaDB the domain and sequences.
			want := "0-1-13 to 0-1-22"
			if f == position.MySQL {
				want, _ = tp.primaryUUID(t, last)
			}
			if !strings.Contains(err.Error(), want) {
				t.Fatalf("err = %v; want it to name the missing transactions (%s)", err, want)
			}
			return
		}
	})
}

// primaryUUID is the primary's UUID as the GTIDs of txn name it.
func (tp topology) primaryUUID(t *testing.T, txn *binlog.Txn) (string, bool) {
	uuid, _, ok := strings.Cut(txn.GTID, ":")
	return uuid, ok
}

// TestResetBinaryLogs: the position's own server had its binary logs and
// GTIDs reset: the reader says so instead of streaming another history.
func TestResetBinaryLogs(t *testing.T) {
	testenv.ForEachFlavor(t, func(t *testing.T, f position.Flavor) {
		db := startServer(t, f, testenv.Options{})
		exec(t, db, "CREATE DATABASE shop", "CREATE TABLE shop.t (id INT PRIMARY KEY, v INT)")
		tables, _ := binlog.ParseFilter("shop.t")
		start := binlogEnd(t, db)
		r := newReader(t, db, func(c *binlog.Config) { c.Start, c.Tables = start, tables })
		insert(t, db, 1, 5)
		last := readIDs(t, r, map[int64]int{}, 5)
		r.Close()
		reset := "RESET BINARY LOGS AND GTIDS"
		if f == position.MariaDB {
			reset = "RESET MASTER"
		}
		exec(t, db, reset)
		r2 := newReader(t, db, func(c *binlog.Config) { c.Start, c.Tables = last.End, tables })
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		_, err := r2.Next(ctx)
		if !errors.Is(err, binlog.ErrPositionUnknown) || !strings.Contains(err.Error(), "reset") {
			t.Fatalf("err = %v; want ErrPositionUnknown saying the server was reset", err)
		}
	})
}

// TestFailoverWithoutGTIDs: a position of one server given to another,
// with gtid_mode OFF, is refused: a file and offset mean nothing there.
func TestFailoverWithoutGTIDs(t *testing.T) {
	testenv.ForEachFlavor(t, func(t *testing.T, f position.Flavor) {
		if f == position.MariaDB {
			t.Skip("MariaDB always has GTIDs")
		}
		a := startServer(t, f, testenv.Options{NoGTID: true, ServerID: 1})
		b := startServer(t, f, testenv.Options{NoGTID: true, ServerID: 2})
		for _, db := range []*testenv.Server{a, b} {
			exec(t, db, "CREATE DATABASE shop", "CREATE TABLE shop.t (id INT PRIMARY KEY, v INT)")
		}
		tables, _ := binlog.ParseFilter("shop.t")
		start := binlogEnd(t, a)
		r := newReader(t, a, func(c *binlog.Config) { c.Start, c.Tables = start, tables })
		insert(t, a, 1, 1)
		last := readIDs(t, r, map[int64]int{}, 1)
		r.Close()
		r2 := newReader(t, b, func(c *binlog.Config) { c.Start, c.Tables = last.End, tables })
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if _, err := r2.Next(ctx); !errors.Is(err, binlog.ErrNoFailover) {
			t.Fatalf("err = %v, want ErrNoFailover", err)
		}
	})
}

// TestSourceFailoverAddressList: a source given as a list of addresses
// (the primary, then its replica) moves to the replica when the primary
// dies, and goes on exactly once.
func TestSourceFailoverAddressList(t *testing.T) {
	testenv.ForEachFlavor(t, func(t *testing.T, f position.Flavor) {
		ctx := context.Background()
		tp := startTopology(t, f)
		url := strings.Replace(tp.primary.URL(), tp.primary.Addr(), tp.primary.Addr()+","+tp.replica.Addr(), 1)
		cfg, err := binlog.ParseSourceURL(url)
		if err != nil {
			t.Fatal(err)
		}
		if cfg.Addr != tp.primary.Addr() || len(cfg.Addrs) != 2 || cfg.Addrs[1] != tp.replica.Addr() {
			t.Fatalf("ParseSourceURL(%s): Addr %s, Addrs %v", url, cfg.Addr, cfg.Addrs)
		}
		start := binlogEnd(t, tp.primary)
		tables, _ := binlog.ParseFilter("shop.t")
		r := newReader(t, tp.primary, func(c *binlog.Config) {
			c.Addr, c.Addrs, c.Start, c.Tables = cfg.Addr, cfg.Addrs, start, tables
		})
		insert(t, tp.primary, 1, 20)
		seen := map[int64]int{}
		readIDs(t, r, seen, 20)
		if err := tp.replica.WaitCaughtUp(ctx, tp.primary); err != nil {
			t.Fatal(err)
		}
		died := time.Now()
		tp.failover(t, false)
		promoted := time.Now()
		insert(t, tp.replica, 21, 40)
		readIDs(t, r, seen, 21)
		// BENCHMARKS.md quotes this line.
		t.Logf("failover: first change from the promoted replica %s after the primary died (%s after its promotion)", time.Since(died).Round(time.Millisecond), time.Since(promoted).Round(time.Millisecond))
		last := readIDs(t, r, seen, 40)
		newID, _ := tp.replica.ServerUUID(ctx)
		if len(seen) != 40 || last.End.Server != newID {
			t.Fatalf("%d rows, last at %s (server %q); want 40 rows, the last from server %q", len(seen), last.End, last.End.Server, newID)
		}
	})
}

// TestSourceFailoverErrantTransaction: the promoted replica has a
// transaction of its own, written on it while it was a replica (on
// MariaDB in a domain of its own, as gtid_strict_mode requires), between
// transactions replicated from the primary and already delivered. The
// reader resumes on it, says which transactions the old server never had,
// and delivers the errant one, once, as new data after the saved position.
func TestSourceFailoverErrantTransaction(t *testing.T) {
	testenv.ForEachFlavor(t, func(t *testing.T, f position.Flavor) {
		ctx := context.Background()
		tp := startTopology(t, f)
		logs := &lockedBuffer{}
		r := tp.reader(t, func(c *binlog.Config) { c.Logger = slog.New(slog.NewTextHandler(logs, nil)) })
		insert(t, tp.primary, 1, 10)
		if err := tp.replica.WaitCaughtUp(ctx, tp.primary); err != nil {
			t.Fatal(err)
		}
		errant := []string{"INSERT INTO shop.t VALUES (1000, 1000)"}
		if f == position.MariaDB {
			errant = append([]string{"SET SESSION gtid_domain_id = 9"}, errant...)
		}
		if err := tp.replica.Exec(ctx, errant...); err != nil {
			t.Fatal(err)
		}
		want := "9-2-1"
		if f == position.MySQL {
			uuid, _ := tp.replica.ServerUUID(ctx)
			want = uuid + ":1"
		}
		insert(t, tp.primary, 11, 20)
		seen := map[int64]int{}
		readIDs(t, r, seen, 20)
		if err := tp.replica.WaitCaughtUp(ctx, tp.primary); err != nil {
			t.Fatal(err)
		}
		tp.failover(t, true)
		insert(t, tp.replica, 21, 25)
		var errantAt *binlog.Txn
		for seen[25] == 0 {
			txn := next(t, r)
			for _, ch := range txn.Changes {
				id := ch.After[0].Int()
				if seen[id]++; seen[id] > 1 {
					t.Fatalf("row %d delivered twice (at %s)", id, txn.End)
				}
				if id == 1000 {
					errantAt = txn
				}
			}
		}
		if len(seen) != 26 || errantAt == nil {
			t.Fatalf("%d rows delivered (errant row: %v), want 1-25 and the errant 1000", len(seen), errantAt != nil)
		}
		if errantAt.GTID != want {
			t.Errorf("the errant transaction came with GTID %s, want %s", errantAt.GTID, want)
		}
		if l := logs.String(); !strings.Contains(l, "never had") || !strings.Contains(l, want) {
			t.Errorf("the log does not name the errant transaction %s:\n%s", want, l)
		}
	})
}

// lockedBuffer is a log destination the test reads while the reader writes.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
