package snapshot_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-cdc/sluice/binlog"
	"github.com/sluice-cdc/sluice/internal/testenv"
	"github.com/sluice-cdc/sluice/position"
	"github.com/sluice-cdc/sluice/snapshot"
)

func needMySQL(t *testing.T) {
	t.Helper()
	if !slices.Contains(testenv.Flavors(), position.MySQL) {
		t.Skip("MySQL only (SLUICE_TEST_FLAVORS)")
	}
}

// timedWriter updates app.t row 1 in a loop on its own connection until
// stop, which returns the longest a write took.
func timedWriter(t *testing.T, db *testenv.Server) (stop func() time.Duration) {
	c := conn(t, db)
	var done atomic.Bool
	var slowest atomic.Int64
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for !done.Load() {
			began := time.Now()
			c.Execute("UPDATE app.t SET n = n + 1 WHERE id = 1")
			if d := int64(time.Since(began)); d > slowest.Load() {
				slowest.Store(d)
			}
			time.Sleep(time.Millisecond)
		}
	}()
	return func() time.Duration { done.Store(true); wg.Wait(); return time.Duration(slowest.Load()) }
}

// A consistent snapshot of MySQL whose lock cannot be had in time gives
// up after the lock timeout, with an error saying what to do, and holds
// writers back no longer: LOCK TABLES … READ (a user without RELOAD)
// behind an open transaction that wrote the table; FLUSH TABLES WITH READ
// LOCK is not even asked for while a long query runs, since its flush
// would make every writer wait for that query to end: LOCK TABLES … READ,
// which does not wait for reading queries, is taken instead, or the
// snapshot gives up (a user without LOCK TABLES). FLUSH TABLES WITH READ
// LOCK does not wait for an open transaction. Once the blocker is gone,
// the snapshot succeeds.
func TestConsistentLockTimeout(t *testing.T) {
	needMySQL(t)
	db := testenv.StartT(t, testenv.Options{Flavor: position.MySQL})
	ctx := context.Background()
	exec(t, db, "CREATE DATABASE app", "USE app",
		"CREATE TABLE app.t (id INT PRIMARY KEY, n INT NOT NULL)",
		"INSERT INTO app.t SELECT seq, 0 FROM seq_1_to_1000",
		"CREATE USER 'reload'@'%' IDENTIFIED BY 'pw'",
		"GRANT SELECT, RELOAD, PROCESS, REPLICATION SLAVE, REPLICATION CLIENT ON *.* TO 'reload'@'%'",
		"CREATE USER 'norel'@'%' IDENTIFIED BY 'pw'",
		"GRANT SELECT, LOCK TABLES, REPLICATION SLAVE, REPLICATION CLIENT ON *.* TO 'norel'@'%'")
	openTxn := func(t *testing.T) func() {
		c := conn(t, db)
		for _, q := range []string{"BEGIN", "UPDATE app.t SET n = n + 1 WHERE id = 2"} {
			if _, err := c.Execute(q); err != nil {
				t.Fatal(err)
			}
		}
		return func() { c.Execute("COMMIT") }
	}
	longQuery := func(t *testing.T) func() {
		c := conn(t, db)
		done := make(chan struct{})
		go func() {
			defer close(done)
			c.Execute("SELECT SLEEP(5) FROM app.t LIMIT 1")
		}()
		return func() { <-done }
	}
	for _, tc := range []struct {
		name, user, method string
		// block holds what the snapshot's lock would wait for, until
		// release.
		block  func(t *testing.T) (release func())
		blocks bool
	}{
		{"lock-tables behind an open transaction", "norel", "lock-tables", openTxn, true},
		{"global-read-lock beside an open transaction", "root", "global-read-lock", openTxn, false},
		{"lock-tables beside a long query", "root", "lock-tables", longQuery, false},
		{"global-read-lock behind a long query", "reload", "global-read-lock", longQuery, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, _ := binlog.ParseSourceURL(db.URL())
			if tc.user != "root" {
				cfg.User, cfg.Password = tc.user, "pw"
			}
			tables, _ := binlog.ParseFilter("app.t")
			scfg := snapshot.Config{Source: cfg, Tables: tables, Parallel: 2, LockTimeout: time.Second}
			release := tc.block(t)
			time.Sleep(1200 * time.Millisecond) // the blocker runs, long enough to be seen
			stop := timedWriter(t, db)
			began := time.Now()
			res, err := snapshot.Run(ctx, scfg, func(*binlog.Txn) error { return nil })
			took := time.Since(began)
			time.Sleep(300 * time.Millisecond)
			slowest := stop()
			t.Logf("%+v after %v (the slowest write %v): %v", res, took, slowest, err)
			if took > 5*time.Second || slowest > 3*time.Second {
				t.Errorf("took %v, a write waited %v: the lock timeout of 1s did not bound them", took, slowest)
			}
			if !tc.blocks {
				release()
				if err != nil || res.Method != tc.method || res.Rows != 1000 {
					t.Fatalf("snapshot: %+v %v", res, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), "watermark method") || !strings.Contains(err.Error(), "1s") || !errors.Is(err, snapshot.ErrLockTimeout) {
				t.Fatalf("Run behind a blocker: %v (want snapshot.ErrLockTimeout)", err)
			}
			release()
			if res, err = snapshot.Run(ctx, scfg, func(*binlog.Txn) error { return nil }); err != nil || res.Method != tc.method || res.Rows != 1000 {
				t.Fatalf("after the blocker: %+v %v", res, err)
			}
		})
	}
}

// Without the privileges for either lock, a consistent snapshot of MySQL
// reads every table while streaming instead (the watermark method, which
// needs no lock), and says why; a table without a key, which cannot be
// read that way, makes it an error naming the privileges.
func TestConsistentWithoutLocks(t *testing.T) {
	needMySQL(t)
	db := testenv.StartT(t, testenv.Options{Flavor: position.MySQL})
	ctx := context.Background()
	exec(t, db, "CREATE DATABASE app", "USE app",
		"CREATE TABLE app.t (id INT PRIMARY KEY, n INT NOT NULL)",
		"INSERT INTO app.t SELECT seq, 0 FROM seq_1_to_100",
		"CREATE TABLE app.nokey (a INT, b INT)",
		"CREATE USER 'plain'@'%' IDENTIFIED BY 'pw'",
		"GRANT SELECT, REPLICATION SLAVE, REPLICATION CLIENT ON *.* TO 'plain'@'%'")
	cfg, _ := binlog.ParseSourceURL(db.URL())
	cfg.User, cfg.Password = "plain", "pw"
	tables, _ := binlog.ParseFilter("app.t")
	res, err := snapshot.Run(ctx, snapshot.Config{Source: cfg, Tables: tables}, func(*binlog.Txn) error {
		return errors.New("nothing is read at one point")
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.Method != "watermark" || len(res.Deferred) != 1 || res.Deferred[0].Table != "t" || res.Position.GTIDs == "" || res.Blocked != 0 {
		t.Fatalf("result %+v", res)
	}
	tables, _ = binlog.ParseFilter("app.*")
	_, err = snapshot.Run(ctx, snapshot.Config{Source: cfg, Tables: tables}, func(*binlog.Txn) error { return nil })
	if err == nil || !strings.Contains(err.Error(), "RELOAD") || !strings.Contains(err.Error(), "LOCK TABLES") || !strings.Contains(err.Error(), "app.nokey") {
		t.Fatalf("a keyless table without locks: %v", err)
	}
	t.Log(err)
}

// On MySQL without GTIDs the watermark method writes its watermarks to a
// signal table: without one it is refused, naming the option; with one
// the stream must read, and binlog_order_commits must be ON.
func TestWatermarkWithoutGTIDsNeedsSignalTable(t *testing.T) {
	needMySQL(t)
	db := testenv.StartT(t, testenv.Options{Flavor: position.MySQL, NoGTID: true})
	ctx := context.Background()
	exec(t, db, "CREATE DATABASE app", "USE app",
		"CREATE TABLE app.t (id INT PRIMARY KEY, n INT NOT NULL)",
		"CREATE TABLE app.sig (id INT AUTO_INCREMENT PRIMARY KEY, type VARCHAR(20), data VARCHAR(200))",
		"CREATE DATABASE other", "CREATE TABLE other.x (id INT PRIMARY KEY)")
	cfg, _ := binlog.ParseSourceURL(db.URL())
	cfg.Tables, _ = binlog.ParseFilter("app.*")
	for _, tc := range []struct {
		signal, setting string
		says            []string
	}{
		{"", "", []string{"--signal-table", "signal_table", "gtid_mode"}},
		{"other.x", "", []string{"not among the tables the stream reads"}},
		{"app.sig", "SET GLOBAL binlog_order_commits = OFF", []string{"binlog_order_commits is OFF"}},
	} {
		if tc.setting != "" {
			exec(t, db, tc.setting)
		}
		_, err := snapshot.Run(ctx, snapshot.Config{Source: cfg, Tables: cfg.Tables, Method: "watermark", SignalTable: tc.signal}, func(*binlog.Txn) error { return nil })
		for _, s := range tc.says {
			if err == nil || !strings.Contains(err.Error(), s) {
				t.Errorf("signal table %q: error %v, want one saying %q", tc.signal, err, s)
			}
		}
		t.Log(err)
	}
	exec(t, db, "SET GLOBAL binlog_order_commits = ON")
	res, err := snapshot.Run(ctx, snapshot.Config{Source: cfg, Tables: cfg.Tables, Method: "watermark", SignalTable: "app.sig"}, func(*binlog.Txn) error { return nil })
	// The signal table's rows are not read: they are signals.
	if err != nil || res.Method != "watermark" || len(res.Deferred) != 1 || res.Deferred[0].Table != "t" || res.Position.GTIDs != "" || res.Position.File == "" {
		t.Fatalf("with a signal table: %+v %v", res, err)
	}
}
