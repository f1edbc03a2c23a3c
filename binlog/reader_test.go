package binlog_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
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

func TestTransactionsAndPositions(t *testing.T) {
	db := testenv.StartT(t, testenv.Options{})
	exec(t, db, "CREATE DATABASE app", "CREATE TABLE app.t (id INT PRIMARY KEY, v VARCHAR(20))", "CREATE TABLE app.skip (id INT PRIMARY KEY)")
	r := newReader(t, db, func(c *binlog.Config) {
		c.StartAt = binlog.StartCurrent
		c.Tables, _ = binlog.ParseFilter("app.t")
	})
	// Start the reader before writing so "current" is before the writes.
	if err := r.Ready(timeout(t)); err != nil { // connected, "current" fixed before the writes
		t.Fatal(err)
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
	if !strings.HasPrefix(txn.GTID, "0-1-") || txn.End.GTIDs == "" || txn.End.File == "" || txn.End.Offset == 0 {
		t.Fatalf("txn identity: gtid %q end %v", txn.GTID, txn.End)
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
}

func TestLargeTransactionChunks(t *testing.T) {
	db := testenv.StartT(t, testenv.Options{})
	exec(t, db, "CREATE DATABASE app", "CREATE TABLE app.big (id INT PRIMARY KEY, pad VARCHAR(200))")
	r := newReader(t, db, func(c *binlog.Config) { c.ChunkBytes = 64 << 10 })
	if err := r.Ready(timeout(t)); err != nil {
		t.Fatal(err)
	}
	exec(t, db, "USE app", "INSERT INTO app.big SELECT seq, REPEAT('x', 150) FROM seq_1_to_20000", "INSERT INTO app.big VALUES (0, 'after')")
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
	db := testenv.StartT(t, testenv.Options{})
	exec(t, db,
		"SET GLOBAL binlog_format = 'STATEMENT'",
		"CREATE USER 'weak'@'%' IDENTIFIED BY 'pw'", "GRANT SELECT ON *.* TO 'weak'@'%'",
	)
	r := newReader(t, db, nil)
	_, err := r.Next(timeout(t))
	if !errors.Is(err, binlog.ErrServerConfig) || !strings.Contains(err.Error(), "SET GLOBAL binlog_format = 'ROW'") {
		t.Fatalf("statement format: %v", err)
	}
	exec(t, db, "SET GLOBAL binlog_format = 'ROW'")
	r = newReader(t, db, func(c *binlog.Config) { c.User, c.Password = "weak", "pw" })
	_, err = r.Next(timeout(t))
	if !errors.Is(err, binlog.ErrPrivilege) || !strings.Contains(err.Error(), "REPLICATION SLAVE") {
		t.Fatalf("privileges: %v", err)
	}
}

func TestPurgedPosition(t *testing.T) {
	db := testenv.StartT(t, testenv.Options{})
	exec(t, db, "CREATE DATABASE app", "FLUSH BINARY LOGS", "FLUSH BINARY LOGS")
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
			break
		}
		if i == 50 {
			t.Fatal("the server does not purge its old binlogs")
		}
		time.Sleep(100 * time.Millisecond)
	}
	r := newReader(t, db, func(c *binlog.Config) { c.Start = position.Position{File: "mysql-bin.000001", Offset: 4} })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
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
}

// TestRestartExactlyOnce kills the replication connection and restarts the
// server under write load; every transaction must come out exactly once.
func TestRestartExactlyOnce(t *testing.T) {
	db := testenv.StartT(t, testenv.Options{})
	exec(t, db, "CREATE DATABASE app", "CREATE TABLE app.t (id INT PRIMARY KEY AUTO_INCREMENT, writer INT, n INT, pad VARCHAR(100), k INT, UNIQUE KEY (writer, n, k))")
	r := newReader(t, db, func(c *binlog.Config) { c.ChunkBytes = 8 << 10 })
	if err := r.Ready(timeout(t)); err != nil {
		t.Fatal(err)
	}

	const perWriter = 300
	var committed atomic.Int64
	var wg sync.WaitGroup
	stop := make(chan struct{})
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
				err := db.Exec(context.Background(), "BEGIN",
					"USE app", fmt.Sprintf("INSERT INTO app.t (writer, n, pad, k) SELECT %d, %d, REPEAT('p', 90), seq FROM seq_1_to_40", w, n),
					"COMMIT")
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
			rs, err := db.Query(context.Background(), "SELECT ID FROM information_schema.PROCESSLIST WHERE COMMAND LIKE 'Binlog Dump%'")
			if err != nil || rs.RowNumber() != 1 {
				t.Fatalf("finding the dump thread: %v", err)
			}
			id, _ := rs.GetUint(0, 0)
			exec(t, db, fmt.Sprintf("KILL %d", id))
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
}

func TestCancelIsPrompt(t *testing.T) {
	db := testenv.StartT(t, testenv.Options{})
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
}

func TestServerIDClash(t *testing.T) {
	db := testenv.StartT(t, testenv.Options{})
	first := newReader(t, db, func(c *binlog.Config) { c.ServerID = 4242; c.ReplicaHost = "sluice-p1" })
	if err := first.Ready(timeout(t)); err != nil {
		t.Fatal(err)
	}
	for i := 0; ; i++ { // wait until it is registered as a replica
		rs, err := db.Query(context.Background(), "SHOW SLAVE HOSTS")
		if err == nil && rs.RowNumber() > 0 {
			break
		}
		if i == 300 {
			t.Fatal("the first reader never registered as a replica")
		}
		time.Sleep(100 * time.Millisecond)
	}
	second := newReader(t, db, func(c *binlog.Config) { c.ServerID = 4242 })
	_, err := second.Next(timeout(t))
	if !errors.Is(err, binlog.ErrServerConfig) || !strings.Contains(err.Error(), "server_id 4242 is already used") {
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
}

// With binlog_row_image=MINIMAL, unchanged columns are absent, not NULL.
func TestMinimalRowImage(t *testing.T) {
	db := testenv.StartT(t, testenv.Options{RowImage: "MINIMAL"})
	exec(t, db, "CREATE DATABASE app", "CREATE TABLE app.t (id INT PRIMARY KEY, a INT, b VARCHAR(10))", "INSERT INTO app.t VALUES (1, 10, 'x')")
	start := masterStatus(t, db)
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
}

// Without column metadata in the binlog, a row written before a DDL that
// changed the table's shape must stop the reader, not be decoded into the
// wrong columns.
func TestSchemaMismatchStops(t *testing.T) {
	db := testenv.StartT(t, testenv.Options{RowMetadata: "MINIMAL"})
	exec(t, db, "CREATE DATABASE app", "CREATE TABLE app.t (id INT PRIMARY KEY, a INT)")
	start := masterStatus(t, db)
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
}

// A connection lost in the middle of a large transaction, after some of
// its chunks were delivered: the transaction is read again from its start
// and the part already delivered is dropped, so every row arrives once,
// in order, with chunk numbers continuing.
func TestReconnectMidTransaction(t *testing.T) {
	db := testenv.StartT(t, testenv.Options{})
	exec(t, db, "CREATE DATABASE app", "CREATE TABLE app.big (id INT PRIMARY KEY, pad VARCHAR(200))")
	start := masterStatus(t, db)
	const rows = 100000
	exec(t, db, "USE app", fmt.Sprintf("INSERT INTO app.big SELECT seq, REPEAT('y', 180) FROM seq_1_to_%d", rows))
	r := newReader(t, db, func(c *binlog.Config) { c.Start = start; c.ChunkBytes = 64 << 10 })
	first := next(t, r)
	// The reader is now held back by this consumer; cut its connection.
	rs, err := db.Query(context.Background(), "SELECT ID FROM information_schema.PROCESSLIST WHERE COMMAND LIKE 'Binlog Dump%'")
	if err != nil || rs.RowNumber() != 1 {
		t.Fatalf("finding the dump thread: %v", err)
	}
	id, _ := rs.GetUint(0, 0)
	exec(t, db, fmt.Sprintf("KILL %d", id))
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
	if want != rows+1 {
		t.Fatalf("%d rows delivered, want %d", want-1, rows)
	}
	st := r.Stats()
	if st.Reconnects < 1 || st.Replayed == 0 {
		t.Fatalf("stats %+v: the reconnection should have replayed and dropped delivered rows", st)
	}
	t.Logf("chunks %d, %+v", chunk, st)
}

// timeout bounds a test's wait for the reader, so a bug fails the test
// instead of hanging the suite.
func timeout(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// Two replicas of one pipeline connect with the same server_id: MariaDB
// keeps only the newer binlog dump and drops the older connection. This is
// what high availability relies on for "one dump per source".
func TestSameServerIDServerDropsOlderDump(t *testing.T) {
	db := testenv.StartT(t, testenv.Options{})
	same := func(c *binlog.Config) {
		c.ServerID = 5151
		c.ReplicaHost = "sluice-ha"
		c.Heartbeat = 200 * time.Millisecond
	}
	first := newReader(t, db, same)
	if err := first.Ready(timeout(t)); err != nil {
		t.Fatal(err)
	}
	dumps := func() int {
		rs, err := db.Query(context.Background(), "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE COMMAND LIKE 'Binlog Dump%'")
		if err != nil {
			t.Fatal(err)
		}
		n, _ := rs.GetInt(0, 0)
		return int(n)
	}
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
}

// With DeliverHeartbeats an idle server's heartbeats reach Next in order
// with the transactions, each at the position after everything sent.
func TestHeartbeatsDelivered(t *testing.T) {
	db := testenv.StartT(t, testenv.Options{})
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
		if len(txn.Changes) != 0 || !txn.Last || txn.End.Compare(ins) < 0 {
			t.Fatalf("heartbeat %+v: want an empty last Txn at or after %s", txn, ins)
		}
		beats++
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("3 heartbeats at 200ms took %v", d)
	}
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
	db := testenv.StartT(t, testenv.Options{})
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
}
