package binlog_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-cdc/sluice/binlog"
	"github.com/sluice-cdc/sluice/internal/testenv"
	"github.com/sluice-cdc/sluice/position"
)

func newReader(t *testing.T, db *testenv.Server, mod func(*binlog.Config)) *binlog.Reader {
	t.Helper()
	cfg, err := binlog.ParseSourceURL(db.URL())
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxBackoff = 500 * time.Millisecond
	if mod != nil {
		mod(&cfg)
	}
	r, err := binlog.NewReader(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

func next(t *testing.T, r *binlog.Reader) *binlog.Txn {
	t.Helper()
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		txn, err := r.Next(ctx)
		cancel()
		if err != nil {
			t.Fatalf("Next: %v", err)
		}
		if len(txn.Changes) > 0 || txn.Chunk > 0 {
			return txn
		}
	}
}

func exec(t *testing.T, db *testenv.Server, sql ...string) {
	t.Helper()
	if err := db.Exec(context.Background(), sql...); err != nil {
		t.Fatal(err)
	}
}

// startServer starts a server of flavor with opts.
func startServer(t *testing.T, flavor position.Flavor, opts testenv.Options) *testenv.Server {
	t.Helper()
	opts.Flavor = flavor
	return testenv.StartT(t, opts)
}

// seqRows is a FROM clause of n rows with the column seq (1..n): MariaDB's
// sequence engine, a recursive CTE on MySQL. The statements in setup come
// first on the same connection.
func seqRows(db *testenv.Server, n int) (setup []string, from string) {
	if db.Flavor == position.MySQL {
		return []string{fmt.Sprintf("SET SESSION cte_max_recursion_depth = %d", n+1)},
			fmt.Sprintf("(WITH RECURSIVE s (seq) AS (SELECT 1 UNION ALL SELECT seq + 1 FROM s WHERE seq < %d) SELECT seq FROM s) AS q", n)
	}
	return []string{"USE mysql"}, fmt.Sprintf("seq_1_to_%d", n)
}

// insertSeq runs "INSERT INTO table SELECT <cols> FROM <n rows>", the
// columns written in terms of seq.
func insertSeq(t *testing.T, db *testenv.Server, table, cols string, n int, around ...string) {
	t.Helper()
	setup, from := seqRows(db, n)
	stmts := append(setup, around...)
	stmts = append(stmts, fmt.Sprintf("INSERT INTO %s SELECT %s FROM %s", table, cols, from))
	if len(around) > 0 && strings.EqualFold(around[0], "BEGIN") {
		stmts = append(stmts, "COMMIT")
	}
	exec(t, db, stmts...)
}

// binlogEnd is the server's current binlog file and offset (no GTIDs).
func binlogEnd(t *testing.T, db *testenv.Server) position.Position {
	t.Helper()
	c, err := db.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	p, err := binlog.BinlogPosition(c)
	if err != nil {
		t.Fatal(err)
	}
	return position.Position{File: p.File, Offset: p.Offset}
}

// serverGTIDs is the server's GTID state: gtid_executed on MySQL,
// gtid_binlog_pos on MariaDB.
func serverGTIDs(t *testing.T, db *testenv.Server) position.GTIDSet {
	t.Helper()
	q := "SELECT @@GLOBAL.gtid_binlog_pos"
	if db.Flavor == position.MySQL {
		q = "SELECT @@GLOBAL.gtid_executed"
	}
	rs, err := db.Query(context.Background(), q)
	if err != nil {
		t.Fatal(err)
	}
	s, _ := rs.GetString(0, 0)
	g, err := position.ParseGTIDSet(db.Flavor, strings.ReplaceAll(s, "\n", ""))
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// serverVersion parses the server's version.
func serverVersion(t *testing.T, db *testenv.Server) binlog.ServerVersion {
	t.Helper()
	c, err := db.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	v, err := binlog.ParseServerVersion(c.GetServerVersion())
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// dumpThreads counts the server's binlog dump connections.
func dumpThreads(t *testing.T, db *testenv.Server) []uint64 {
	t.Helper()
	rs, err := db.Query(context.Background(), "SELECT ID FROM information_schema.PROCESSLIST WHERE COMMAND LIKE 'Binlog Dump%'")
	if err != nil {
		t.Fatal(err)
	}
	ids := make([]uint64, rs.RowNumber())
	for i := range ids {
		ids[i], _ = rs.GetUint(i, 0)
	}
	return ids
}

// killDump kills the one binlog dump connection of the server.
func killDump(t *testing.T, db *testenv.Server) {
	t.Helper()
	ids := dumpThreads(t, db)
	if len(ids) != 1 {
		t.Fatalf("%d binlog dump connections, want 1", len(ids))
	}
	exec(t, db, fmt.Sprintf("KILL %d", ids[0]))
}

func TestTransactionsAndPositions(t *testing.T) {
	testenv.ForEachFlavor(t, func(t *testing.T, flavor position.Flavor) {
		db := startServer(t, flavor, testenv.Options{})
		exec(t, db, "CREATE DATABASE app", "CREATE TABLE app.t (id INT PRIMARY KEY, v VARCHAR(20))", "CREATE TABLE app.skip (id INT PRIMARY KEY)")
		r := newReader(t, db, func(c *binlog.Config) {
			c.StartAt = binlog.StartCurrent
			c.Tables, _ = binlog.ParseFilter("app.t")
		})
		// Start the reader before writing so "current" is before the writes.
		if err := r.Ready(timeout(t)); err != nil { // connected, "current" fixed before the writes
			t.Fatal(err)
		}
		// "current" carries the server's whole GTID state, not only a file position.
		if got, want := r.Delivered().GTIDs, serverGTIDs(t, db).String(); got != want {
			t.Fatalf("start at current: GTID state %q, the server's is %q", got, want)
		}
		exec(t, db,
			"BEGIN", "INSERT INTO app.t VALUES (1,'a'),(2,'b')", "INSERT INTO app.skip VALUES (1)", "UPDATE app.t SET v='B' WHERE id=2", "COMMIT",
			"DELETE FROM app.t WHERE id=1",
			"ALTER TABLE app.t ADD COLUMN w INT",
			"INSERT INTO app.t VALUES (3,'c',33)",
		)
		txn := next(t, r)
		if len(txn.Changes) != 3 || !txn.Last || txn.Chunk != 0 {
			t.Fatalf("first txn: %d changes, last=%v chunk=%d", len(txn.Changes), txn.Last, txn.Chunk)
		}
		if ch := txn.Changes[0]; ch.Op != binlog.OpInsert || ch.Table.Name != "t" || ch.After[0].Int() != 1 || string(ch.After[1].Bytes()) != "a" || ch.Before != nil {
			t.Fatalf("insert: %+v", ch)
		}
		if ch := txn.Changes[2]; ch.Op != binlog.OpUpdate || string(ch.Before[1].Bytes()) != "b" || string(ch.After[1].Bytes()) != "B" {
			t.Fatalf("update: %+v", ch)
		}
		gtidForm := map[position.Flavor]string{position.MariaDB: "0-1-", position.MySQL: ":"}[flavor]
		if !strings.Contains(txn.GTID, gtidForm) || txn.End.GTIDs == "" || txn.End.File == "" || txn.End.Offset == 0 || txn.End.Flavor != flavor {
			t.Fatalf("txn identity: gtid %q end %+v", txn.GTID, txn.End)
		}
		if txn.CommitTime.IsZero() || time.Since(txn.CommitTime) > time.Minute {
			t.Fatalf("commit time %v", txn.CommitTime)
		}
		first := txn.End
		txn = next(t, r)
		if len(txn.Changes) != 1 || txn.Changes[0].Op != binlog.OpDelete || txn.Changes[0].Before[0].Int() != 1 {
			t.Fatalf("delete txn: %+v", txn.Changes)
		}
		txn = next(t, r)
		if len(txn.Changes) != 1 || txn.Changes[0].Op != binlog.OpDDL || !strings.Contains(txn.Changes[0].Query, "ADD COLUMN w") {
			t.Fatalf("ddl txn: %+v", txn.Changes)
		}
		txn = next(t, r)
		if ch := txn.Changes[0]; len(ch.Table.Columns) != 3 || ch.Table.Columns[2].Name != "w" || ch.After[2].Int() != 33 {
			t.Fatalf("after DDL: %+v", ch)
		}
		last := txn.End
		// The End of the last transaction is the server's whole state.
		if want := serverGTIDs(t, db); last.GTIDs != want.String() {
			t.Fatalf("after the last transaction: GTID state %q, the server's is %q", last.GTIDs, want)
		}

		// Resume from the first transaction's end by GTID and by file position:
		// the next transaction is the delete, nothing repeated.
		for _, start := range []position.Position{{GTIDs: first.GTIDs}, {File: first.File, Offset: first.Offset}} {
			r2 := newReader(t, db, func(c *binlog.Config) {
				c.Start = start
				c.Stop = last
				c.Tables, _ = binlog.ParseFilter("app.t")
			})
			txn := next(t, r2)
			if txn.Changes[0].Op != binlog.OpDelete {
				t.Fatalf("resume from %v: first change %v", start, txn.Changes[0].Op)
			}
			if start.GTIDs == "" && txn.End.GTIDs == "" {
				t.Fatalf("resume from %v: the position after it has no GTID state", start)
			}
			var n int
			for {
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				txn, err := r2.Next(ctx)
				cancel()
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				n += len(txn.Changes)
			}
			if n != 2 {
				t.Fatalf("resume from %v: %d changes after the delete, want 2 (ddl, insert)", start, n)
			}
		}
		if flavor == position.MySQL {
			// A tagged GTID (MySQL 8.3 and later: uuid:tag:N).
			exec(t, db, "SET gtid_next = 'AUTOMATIC:batch'", "INSERT INTO app.t VALUES (4, 'd', 44)", "SET gtid_next = 'AUTOMATIC'")
			txn := next(t, r)
			if !strings.Contains(txn.GTID, ":batch:") || txn.Changes[0].After[0].Int() != 4 {
				t.Fatalf("tagged GTID transaction: gtid %q, %+v", txn.GTID, txn.Changes[0])
			}
			if want := serverGTIDs(t, db); txn.End.GTIDs != want.String() {
				t.Fatalf("after a tagged GTID: GTID state %q, the server's is %q", txn.End.GTIDs, want)
			}
		}
	})
}

func TestLargeTransactionChunks(t *testing.T) {
	testenv.ForEachFlavor(t, func(t *testing.T, flavor position.Flavor) {
		db := startServer(t, flavor, testenv.Options{})
		exec(t, db, "CREATE DATABASE app", "CREATE TABLE app.big (id INT PRIMARY KEY, pad VARCHAR(200))")
		r := newReader(t, db, func(c *binlog.Config) { c.ChunkBytes = 64 << 10 })
		if err := r.Ready(timeout(t)); err != nil {
			t.Fatal(err)
		}
		insertSeq(t, db, "app.big", "seq, REPEAT('x', 150)", 20000)
		exec(t, db, "INSERT INTO app.big VALUES (0, 'after')")
		var rows, chunks int
		for {
			txn := next(t, r)
			if txn.Chunk != chunks {
				t.Fatalf("chunk %d arrived as number %d", txn.Chunk, chunks)
			}
			chunks++
			rows += len(txn.Changes)
			for _, ch := range txn.Changes {
				if int(ch.After[0].Int()) != rows-len(txn.Changes)+1+indexOf(txn.Changes, ch) {
					t.Fatalf("row order broken at id %d", ch.After[0].Int())
				}
				if pad := string(ch.After[1].Bytes()); pad != strings.Repeat("x", 150) {
					t.Fatalf("id %d: pad %q", ch.After[0].Int(), pad)
				}
			}
			if txn.Last {
				break
			}
			if !txn.End.IsZero() {
				t.Fatal("an unfinished chunk carries an End position")
			}
			txn.Release() // later chunks reuse its memory: their values must still be right
		}
		if rows != 20000 || chunks < 10 {
			t.Fatalf("rows %d in %d chunks; want 20000 rows in many chunks", rows, chunks)
		}
		txn := next(t, r)
		if txn.Changes[0].After[0].Int() != 0 || txn.Chunk != 0 {
			t.Fatalf("next transaction: %+v", txn.Changes[0])
		}
	})
}

func indexOf(chs []binlog.Change, ch binlog.Change) int {
	for i := range chs {
		if chs[i].Pos == ch.Pos && chs[i].Row == ch.Row {
			return i
		}
	}
	return -1
}

func TestPreflightErrors(t *testing.T) {
	testenv.ForEachFlavor(t, func(t *testing.T, flavor position.Flavor) {
		db := startServer(t, flavor, testenv.Options{})
		exec(t, db,
			"SET GLOBAL binlog_format = 'STATEMENT'",
			"CREATE USER 'weak'@'%' IDENTIFIED BY 'pw'", "GRANT SELECT ON *.* TO 'weak'@'%'",
		)
		fix := map[position.Flavor]string{position.MariaDB: "SET GLOBAL binlog_format = 'ROW'", position.MySQL: "SET PERSIST binlog_format = 'ROW'"}[flavor]
		r := newReader(t, db, nil)
		_, err := r.Next(timeout(t))
		if !errors.Is(err, binlog.ErrServerConfig) || !strings.Contains(err.Error(), fix) {
			t.Fatalf("statement format: want ErrServerConfig with %q, got %v", fix, err)
		}
		if flavor == position.MySQL && !strings.Contains(err.Error(), "deprecated since MySQL 8.0.34") {
			t.Fatalf("statement format on MySQL 9: want the deprecation named, got %v", err)
		}
		exec(t, db, "SET GLOBAL binlog_format = 'ROW'")
		r = newReader(t, db, func(c *binlog.Config) { c.User, c.Password = "weak", "pw" })
		_, err = r.Next(timeout(t))
		if !errors.Is(err, binlog.ErrPrivilege) || !strings.Contains(err.Error(), "REPLICATION SLAVE") || !strings.Contains(err.Error(), "GRANT REPLICATION SLAVE") || !strings.Contains(err.Error(), "'weak'@'%'") {
			t.Fatalf("privileges: %v", err)
		}
		monitor := map[position.Flavor]string{position.MariaDB: "BINLOG MONITOR", position.MySQL: "REPLICATION CLIENT"}[flavor]
		exec(t, db, "GRANT REPLICATION SLAVE ON *.* TO 'weak'@'%'")
		r = newReader(t, db, func(c *binlog.Config) { c.User, c.Password = "weak", "pw" })
		_, err = r.Next(timeout(t))
		if !errors.Is(err, binlog.ErrPrivilege) || !strings.Contains(err.Error(), "needs "+monitor) {
			t.Fatalf("without %s: %v", monitor, err)
		}
	})
}

func TestPurgedPosition(t *testing.T) {
	testenv.ForEachFlavor(t, func(t *testing.T, flavor position.Flavor) {
		db := startServer(t, flavor, testenv.Options{})
		exec(t, db, "CREATE DATABASE app", "FLUSH BINARY LOGS", "FLUSH BINARY LOGS")
		lastFile := purgeAllButLast(t, db)
		r := newReader(t, db, func(c *binlog.Config) { c.Start = position.Position{File: "mysql-bin.000001", Offset: 4} })
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		var err error
		for err == nil {
			var txn *binlog.Txn
			txn, err = r.Next(ctx)
			if err == nil && len(txn.Changes) > 0 {
				t.Fatalf("a transaction from a purged position: %+v", txn)
			}
		}
		if !errors.Is(err, binlog.ErrPurged) || !strings.Contains(err.Error(), lastFile) {
			t.Fatalf("purged: want ErrPurged naming %s, got %v", lastFile, err)
		}
	})
}

// purgeAllButLast purges every binlog but the newest and returns its name.
func purgeAllButLast(t *testing.T, db *testenv.Server) string {
	t.Helper()
	rs, err := db.Query(context.Background(), "SHOW BINARY LOGS")
	if err != nil {
		t.Fatal(err)
	}
	lastFile, _ := rs.GetString(rs.RowNumber()-1, 0)
	lastFile = strings.Clone(lastFile)
	// MariaDB keeps a binlog until its binlog checkpoint has passed: retry.
	for i := 0; ; i++ {
		exec(t, db, "PURGE BINARY LOGS TO '"+lastFile+"'")
		rs, err := db.Query(context.Background(), "SHOW BINARY LOGS")
		if err != nil {
			t.Fatal(err)
		}
		if first, _ := rs.GetString(0, 0); first == lastFile {
			return lastFile
		}
		if i == 50 {
			t.Fatal("the server does not purge its old binlogs")
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestRestartExactlyOnce kills the replication connection and restarts the
// server under write load; every transaction must come out exactly once.
func TestRestartExactlyOnce(t *testing.T) {
	testenv.ForEachFlavor(t, func(t *testing.T, flavor position.Flavor) {
		db := startServer(t, flavor, testenv.Options{})
		exec(t, db, "CREATE DATABASE app", "CREATE TABLE app.t (id INT PRIMARY KEY AUTO_INCREMENT, writer INT, n INT, pad VARCHAR(100), k INT, UNIQUE KEY (writer, n, k))")
		r := newReader(t, db, func(c *binlog.Config) { c.ChunkBytes = 8 << 10 })
		if err := r.Ready(timeout(t)); err != nil {
			t.Fatal(err)
		}

		const perWriter = 300
		var committed atomic.Int64
		var wg sync.WaitGroup
		stop := make(chan struct{})
		setup, from := seqRows(db, 40)
		for w := 0; w < 2; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for n := 0; n < perWriter; {
					select {
					case <-stop:
						return
					default:
					}
					// Each transaction: several rows, a few of them big enough to chunk.
					err := db.Exec(context.Background(), append(setup, "BEGIN",
						fmt.Sprintf("INSERT INTO app.t (writer, n, pad, k) SELECT %d, %d, REPEAT('p', 90), seq FROM %s", w, n, from),
						"COMMIT")...)
					if err != nil && !strings.Contains(err.Error(), "Duplicate entry") { // a duplicate: committed before the restart
						time.Sleep(100 * time.Millisecond) // server restarting: retry the same n
						continue
					}
					committed.Add(1)
					n++
				}
			}()
		}
		seen := map[[2]int64]int{}
		var rows int
		disrupted := 0
		deadline := time.Now().Add(3 * time.Minute)
		for rows < 2*perWriter*40 && time.Now().Before(deadline) {
			txn := next(t, r)
			for _, ch := range txn.Changes {
				seen[[2]int64{ch.After[1].Int(), ch.After[2].Int()}]++
				rows++
			}
			switch {
			case disrupted == 0 && rows > 2000:
				disrupted++
				killDump(t, db)
			case disrupted == 1 && rows > 8000:
				disrupted++
				if err := db.Restart(context.Background()); err != nil {
					t.Fatal(err)
				}
			}
		}
		close(stop)
		wg.Wait()
		if disrupted != 2 || r.Stats().Reconnects < 2 {
			t.Fatalf("%d disruptions, %d reconnections", disrupted, r.Stats().Reconnects)
		}
		t.Logf("reconnections %d, changes replayed and dropped %d", r.Stats().Reconnects, r.Stats().Replayed)
		for k, n := range seen {
			if n != 40 {
				t.Errorf("transaction writer=%d n=%d: %d rows delivered, want 40 (exactly once)", k[0], k[1], n)
			}
		}
		if rows != 2*perWriter*40 || len(seen) != 2*perWriter {
			t.Fatalf("delivered %d rows of %d transactions; want %d rows of %d", rows, len(seen), 2*perWriter*40, 2*perWriter)
		}
	})
}

func TestCancelIsPrompt(t *testing.T) {
	testenv.ForEachFlavor(t, func(t *testing.T, flavor position.Flavor) {
		db := startServer(t, flavor, testenv.Options{})
		r := newReader(t, db, nil)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_, err := r.Next(ctx)
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Next on idle server: %v", err)
		}
		start := time.Now()
		r.Close()
		if d := time.Since(start); d > 2*time.Second {
			t.Fatalf("Close took %v", d)
		}
	})
}

// waitRegistered waits until a replica with serverID is registered
// (SHOW REPLICAS / SHOW SLAVE HOSTS, as the release names it).
func waitRegistered(t *testing.T, db *testenv.Server, serverID uint32) {
	t.Helper()
	stmt := serverVersion(t, db).ReplicasStatement()
	for i := 0; ; i++ {
		rs, err := db.Query(context.Background(), stmt)
		if err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
		for row := 0; row < rs.RowNumber(); row++ {
			if id, _ := rs.GetUint(row, 0); uint32(id) == serverID {
				return
			}
		}
		if i == 300 {
			t.Fatalf("no replica with server_id %d registered (%s)", serverID, stmt)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func TestServerIDClash(t *testing.T) {
	testenv.ForEachFlavor(t, func(t *testing.T, flavor position.Flavor) {
		db := startServer(t, flavor, testenv.Options{})
		first := newReader(t, db, func(c *binlog.Config) { c.ServerID = 4242; c.ReplicaHost = "sluice-p1" })
		if err := first.Ready(timeout(t)); err != nil {
			t.Fatal(err)
		}
		waitRegistered(t, db, 4242)
		second := newReader(t, db, func(c *binlog.Config) { c.ServerID = 4242 })
		_, err := second.Next(timeout(t))
		if !errors.Is(err, binlog.ErrServerConfig) || !strings.Contains(err.Error(), "server_id 4242 is already used") || !strings.Contains(err.Error(), "sluice-p1") {
			t.Fatalf("second replica with the same server_id: %v", err)
		}
		if _, err := newReader(t, db, func(c *binlog.Config) { c.ServerID = 1 }).Next(timeout(t)); err == nil || !strings.Contains(err.Error(), "server's own server_id") {
			t.Fatalf("the server's own id: %v", err)
		}
		// The same consumer again (same registered host, e.g. after kill -9
		// before the server noticed): it takes the id over.
		again := newReader(t, db, func(c *binlog.Config) { c.ServerID = 4242; c.ReplicaHost = "sluice-p1" })
		if err := again.Ready(timeout(t)); err != nil {
			t.Fatalf("the same consumer could not take its server_id over: %v", err)
		}
	})
}

// With binlog_row_image=MINIMAL, unchanged columns are absent, not NULL.
func TestMinimalRowImage(t *testing.T) {
	testenv.ForEachFlavor(t, func(t *testing.T, flavor position.Flavor) {
		db := startServer(t, flavor, testenv.Options{RowImage: "MINIMAL"})
		exec(t, db, "CREATE DATABASE app", "CREATE TABLE app.t (id INT PRIMARY KEY, a INT, b VARCHAR(10))", "INSERT INTO app.t VALUES (1, 10, 'x')")
		start := binlogEnd(t, db)
		exec(t, db, "UPDATE app.t SET a = 11 WHERE id = 1", "DELETE FROM app.t WHERE id = 1")
		r := newReader(t, db, func(c *binlog.Config) { c.Start = start })
		txn := next(t, r)
		ch := txn.Changes[0]
		if ch.Op != binlog.OpUpdate || ch.Before[0].Int() != 1 || !ch.Before[1].IsAbsent() || !ch.After[0].IsAbsent() || ch.After[1].Int() != 11 || !ch.After[2].IsAbsent() {
			t.Fatalf("minimal update: before %v after %v", ch.Before, ch.After)
		}
		txn = next(t, r)
		if ch := txn.Changes[0]; ch.Op != binlog.OpDelete || ch.Before[0].Int() != 1 || !ch.Before[2].IsAbsent() {
			t.Fatalf("minimal delete: %v", ch.Before)
		}
	})
}

// Without column metadata in the binlog, a row written before a DDL that
// changed the table's shape must stop the reader, not be decoded into the
// wrong columns.
func TestSchemaMismatchStops(t *testing.T) {
	testenv.ForEachFlavor(t, func(t *testing.T, flavor position.Flavor) {
		db := startServer(t, flavor, testenv.Options{RowMetadata: "MINIMAL"})
		exec(t, db, "CREATE DATABASE app", "CREATE TABLE app.t (id INT PRIMARY KEY, a INT)")
		start := binlogEnd(t, db)
		exec(t, db, "INSERT INTO app.t VALUES (1, 10)", "ALTER TABLE app.t MODIFY a VARCHAR(10)", "INSERT INTO app.t VALUES (2, 'x')")
		r := newReader(t, db, func(c *binlog.Config) { c.Start = start })
		var err error
		for err == nil {
			_, err = r.Next(timeout(t))
		}
		if !errors.Is(err, binlog.ErrSchemaMismatch) || !strings.Contains(err.Error(), "app.t") || !strings.Contains(err.Error(), "mysql-bin.000001:") {
			t.Fatalf("want ErrSchemaMismatch naming table and position, got %v", err)
		}

		// Read live (before the DDL reaches information_schema), the same
		// statements decode correctly: the definition is re-read after DDL.
		exec(t, db, "CREATE TABLE app.u (id INT PRIMARY KEY, a INT)")
		r2 := newReader(t, db, nil)
		if err := r2.Ready(timeout(t)); err != nil {
			t.Fatal(err)
		}
		exec(t, db, "INSERT INTO app.u VALUES (1, 10)")
		if ch := next(t, r2).Changes[0]; ch.Table.Columns[1].Name != "a" || ch.After[1].Int() != 10 {
			t.Fatalf("before DDL: %+v", ch)
		}
		exec(t, db, "ALTER TABLE app.u ADD COLUMN b VARCHAR(5) AFTER id")
		next(t, r2) // the DDL
		exec(t, db, "INSERT INTO app.u VALUES (2, 'bb', 20)")
		if ch := next(t, r2).Changes[0]; ch.Table.Columns[1].Name != "b" || string(ch.After[1].Bytes()) != "bb" || ch.After[2].Int() != 20 {
			t.Fatalf("after DDL: %+v", ch)
		}
	})
}

// A connection lost in the middle of a large transaction, after some of
// its chunks were delivered: the transaction is read again from its start
// and the part already delivered is dropped, so every row arrives once,
// in order, with chunk numbers continuing. Also with compressed binlogs
// (MySQL: the whole transaction is one compressed payload event).
func TestReconnectMidTransaction(t *testing.T) {
	testenv.ForEachFlavor(t, func(t *testing.T, flavor position.Flavor) {
		for _, compressed := range []bool{false, true} {
			t.Run(fmt.Sprintf("compressed=%v", compressed), func(t *testing.T) {
				db := startServer(t, flavor, testenv.Options{Compressed: compressed})
				exec(t, db, "CREATE DATABASE app", "CREATE TABLE app.big (id INT PRIMARY KEY, pad VARCHAR(200))")
				start := binlogEnd(t, db)
				rows := 100000
				if compressed {
					rows = 300000 // more than the socket buffers hold, compressed
				}
				// Hex digests, which compress to half: the compressed binlog of the
				// transaction still outgrows what the reader buffers.
				insertSeq(t, db, "app.big", "seq, CONCAT(SHA2(seq, 256), SHA2(seq + 1, 256), LEFT(SHA2(seq + 2, 256), 52))", rows)
				r := newReader(t, db, func(c *binlog.Config) { c.Start = start; c.ChunkBytes = 64 << 10 })
				first := next(t, r)
				// The reader is now held back by this consumer; cut its connection.
				killDump(t, db)
				want := int64(1)
				chunk := 0
				for txn := first; ; txn = next(t, r) {
					if txn.Chunk != chunk {
						t.Fatalf("chunk %d arrived as number %d", chunk, txn.Chunk)
					}
					chunk++
					for _, ch := range txn.Changes {
						if got := ch.After[0].Int(); got != want {
							t.Fatalf("row %d arrived where %d was due", got, want)
						}
						want++
					}
					if txn.Last {
						break
					}
				}
				if want != int64(rows)+1 {
					t.Fatalf("%d rows delivered, want %d", want-1, rows)
				}
				for i := 0; r.Stats().Reconnects == 0 && i < 100; i++ {
					time.Sleep(100 * time.Millisecond) // the reader notices the cut when it reads on
				}
				st := r.Stats()
				// MySQL logs a compressed transaction as one event: it was
				// received whole before its first chunk was delivered, so the
				// cut connection did not cut it and nothing is replayed.
				whole := compressed && flavor == position.MySQL
				if st.Reconnects < 1 || st.Replayed == 0 && !whole {
					t.Fatalf("stats %+v: the reconnection should have replayed and dropped delivered rows", st)
				}
				t.Logf("chunks %d, %+v", chunk, st)
			})
		}
	})
}

// timeout bounds a test's wait for the reader, so a bug fails the test
// instead of hanging the suite.
func timeout(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// Two replicas of one pipeline connect with the same server_id: only the
// newer binlog dump is kept and the older reader stops with ErrReplaced.
// MariaDB does it by itself; on MySQL the reader's fence does it. This is
// what high availability relies on for "one dump per source".
func TestSameServerIDServerDropsOlderDump(t *testing.T) {
	testenv.ForEachFlavor(t, func(t *testing.T, flavor position.Flavor) {
		db := startServer(t, flavor, testenv.Options{})
		same := func(c *binlog.Config) {
			c.ServerID = 5151
			c.ReplicaHost = "sluice-ha"
			c.Heartbeat = 200 * time.Millisecond
		}
		first := newReader(t, db, same)
		if err := first.Ready(timeout(t)); err != nil {
			t.Fatal(err)
		}
		dumps := func() int { return len(dumpThreads(t, db)) }
		waitFor := func(what string, ok func() bool) {
			t.Helper()
			for i := 0; !ok(); i++ {
				if i == 200 {
					t.Fatalf("timed out waiting for %s", what)
				}
				time.Sleep(50 * time.Millisecond)
			}
		}
		waitFor("the first dump", func() bool { return dumps() == 1 })
		second := newReader(t, db, same)
		if err := second.Ready(timeout(t)); err != nil {
			t.Fatal(err)
		}
		// The older reader stops with ErrReplaced rather than reconnecting
		// (which would in turn drop the newer one).
		nctx, ncancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer ncancel()
		for {
			_, err := first.Next(nctx)
			if err == nil {
				continue
			}
			if !errors.Is(err, binlog.ErrReplaced) || !strings.Contains(err.Error(), "server_id 5151") {
				t.Fatalf("the older reader: %v, want ErrReplaced", err)
			}
			break
		}
		if first.Stats().Reconnects != 0 {
			t.Fatalf("the older reader reconnected %d times", first.Stats().Reconnects)
		}
		first.Close()
		waitFor("a single dump", func() bool { return dumps() == 1 })
		// The survivor streams.
		exec(t, db, "CREATE DATABASE ha", "CREATE TABLE ha.t (id INT PRIMARY KEY)", "INSERT INTO ha.t VALUES (1)")
		for {
			txn := next(t, second)
			if len(txn.Changes) > 0 && txn.Changes[0].Table != nil && txn.Changes[0].Table.Name == "t" {
				break
			}
		}
	})
}

// With DeliverHeartbeats an idle server's heartbeats reach Next in order
// with the transactions, each at the position after everything sent
// (MySQL 8.0.23 and later sends HEARTBEAT_LOG_EVENT_V2).
func TestHeartbeatsDelivered(t *testing.T) {
	testenv.ForEachFlavor(t, func(t *testing.T, flavor position.Flavor) {
		db := startServer(t, flavor, testenv.Options{})
		ctx := timeout(t)
		if err := db.Exec(ctx, "CREATE DATABASE hb", "CREATE TABLE hb.t (id INT PRIMARY KEY)"); err != nil {
			t.Fatal(err)
		}
		r := newReader(t, db, func(c *binlog.Config) {
			c.Heartbeat = 200 * time.Millisecond
			c.DeliverHeartbeats = true
		})
		if err := r.Ready(ctx); err != nil {
			t.Fatal(err)
		}
		if err := db.Exec(ctx, "INSERT INTO hb.t VALUES (1)"); err != nil {
			t.Fatal(err)
		}
		var ins position.Position
		for ins.IsZero() {
			txn, err := r.Next(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if len(txn.Changes) == 1 && !txn.Heartbeat {
				ins = txn.End
			}
		}
		start := time.Now()
		for beats := 0; beats < 3; {
			txn, err := r.Next(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if !txn.Heartbeat {
				continue
			}
			if len(txn.Changes) != 0 || !txn.Last || txn.End.Compare(ins) < 0 || txn.End.GTIDs != ins.GTIDs {
				t.Fatalf("heartbeat %+v: want an empty last Txn at or after %s", txn, ins)
			}
			beats++
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Fatalf("3 heartbeats at 200ms took %v", d)
		}
		// An idle stream is not a dead one: no reconnection while idle.
		if n := r.Stats().Reconnects; n != 0 {
			t.Fatalf("%d reconnections on an idle stream with heartbeats", n)
		}
	})
}

// dropProxy forwards TCP to a server and, when armed, drops the next chunk
// the server sends: bytes lost on the way, with every checksum intact.
type dropProxy struct {
	ln    net.Listener
	up    string
	armed atomic.Bool
	drops atomic.Int32
}

func newDropProxy(t *testing.T, upstream string) *dropProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &dropProxy{ln: ln, up: upstream}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("tcp", upstream)
			if err != nil {
				c.Close()
				continue
			}
			go func() { _, _ = io.Copy(s, c); s.Close() }()
			go func() {
				defer c.Close()
				buf := make([]byte, 64<<10)
				for {
					n, err := s.Read(buf)
					if n > 0 {
						if p.armed.CompareAndSwap(true, false) {
							p.drops.Add(1)
							continue
						}
						if _, werr := c.Write(buf[:n]); werr != nil {
							return
						}
					}
					if err != nil {
						return
					}
				}
			}()
		}
	}()
	return p
}

// Bytes lost between the server and sluice (a whole transaction's events,
// each with a good checksum) are noticed by their positions: the reader
// reconnects and every transaction arrives exactly once.
func TestStreamGapIsResumed(t *testing.T) {
	testenv.ForEachFlavor(t, func(t *testing.T, flavor position.Flavor) {
		db := startServer(t, flavor, testenv.Options{})
		ctx := timeout(t)
		if err := db.Exec(ctx, "CREATE DATABASE g", "CREATE TABLE g.t (id INT PRIMARY KEY)"); err != nil {
			t.Fatal(err)
		}
		proxy := newDropProxy(t, db.Addr())
		r := newReader(t, db, func(c *binlog.Config) { c.Addr = proxy.ln.Addr().String() })
		if err := r.Ready(ctx); err != nil {
			t.Fatal(err)
		}
		seen := map[int64]int{}
		const n = 30
		for i := 1; i <= n; i++ {
			if i%10 == 5 {
				proxy.armed.Store(true)
			}
			if err := db.Exec(ctx, fmt.Sprintf("INSERT INTO g.t VALUES (%d)", i)); err != nil {
				t.Fatal(err)
			}
			time.Sleep(20 * time.Millisecond)
		}
		for len(seen) < n {
			txn, err := r.Next(ctx)
			if err != nil {
				t.Fatalf("after %d rows: %v", len(seen), err)
			}
			for _, ch := range txn.Changes {
				seen[ch.After[0].Int()]++
			}
		}
		for id, k := range seen {
			if k != 1 {
				t.Errorf("row %d delivered %d times", id, k)
			}
		}
		if proxy.drops.Load() == 0 || r.Stats().Reconnects == 0 {
			t.Fatalf("%d chunks dropped, %d reconnections: the test did not lose bytes", proxy.drops.Load(), r.Stats().Reconnects)
		}
		t.Logf("%d chunks dropped, %d reconnections, every row once", proxy.drops.Load(), r.Stats().Reconnects)
	})
}

// MySQL with gtid_mode=OFF (MariaDB always has GTIDs): positions are files
// and offsets only, a start inside a transaction is still refused, and a
// lost connection resumes by file position, every row once.
func TestMySQLWithoutGTIDs(t *testing.T) {
	if !slices.Contains(testenv.Flavors(), position.MySQL) {
		t.Skip("MySQL only (gtid_mode=OFF); SLUICE_TEST_FLAVORS leaves it out")
	}
	db := startServer(t, position.MySQL, testenv.Options{NoGTID: true})
	exec(t, db, "CREATE DATABASE app", "CREATE TABLE app.t (id INT PRIMARY KEY, pad VARCHAR(100))")
	start := binlogEnd(t, db)
	const rows = 100000
	insertSeq(t, db, "app.t", "seq, REPEAT('n', 90)", rows)
	exec(t, db, "INSERT INTO app.t VALUES (0, 'last')")
	if err := startErr(t, db, position.Position{File: start.File, Offset: gtidEventEnd(t, db, start.File)}); !errors.Is(err, binlog.ErrPositionUnknown) {
		t.Fatalf("start inside a transaction: %v", err)
	}
	r := newReader(t, db, func(c *binlog.Config) { c.Start = start; c.ChunkBytes = 16 << 10 })
	first := next(t, r)
	killDump(t, db)
	seen := map[int64]bool{}
	for txn := first; ; txn = next(t, r) {
		for _, ch := range txn.Changes {
			id := ch.After[0].Int()
			if seen[id] {
				t.Fatalf("row %d twice", id)
			}
			seen[id] = true
		}
		if txn.Last && txn.End.GTIDs != "" {
			t.Fatalf("a position with GTIDs on a server without: %s", txn.End)
		}
		if seen[0] {
			break
		}
	}
	for i := 0; r.Stats().Reconnects == 0 && i < 100; i++ {
		time.Sleep(100 * time.Millisecond)
	}
	if len(seen) != rows+1 || r.Stats().Reconnects == 0 || r.Stats().Replayed == 0 {
		t.Fatalf("%d rows, %+v; want %d rows, replayed after a reconnection", len(seen), r.Stats(), rows+1)
	}
}
