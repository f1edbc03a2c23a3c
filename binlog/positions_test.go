package binlog_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-mysql-org/go-mysql/client"

	"github.com/sluice-cdc/sluice/binlog"
	"github.com/sluice-cdc/sluice/internal/rawconn"
	"github.com/sluice-cdc/sluice/internal/testenv"
	"github.com/sluice-cdc/sluice/mysqlconn"
	"github.com/sluice-cdc/sluice/position"
)

// checkpointed is a position and the server's GTID state there, both
// read while nothing was written.
type checkpointed struct {
	what string
	pos  position.Position
	gset position.GTIDSet
}

func conn(t *testing.T, db *testenv.Server) *mysqlconn.Conn {
	t.Helper()
	c, err := db.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// TestGTIDAtMatchesServer: the GTID state GTIDAt computes at a file
// position is the one the server had when it wrote that position, through
// rotations, multi-statement and XA transactions, DDL, tagged GTIDs and
// compressed transactions (MySQL), with SHOW BINLOG EVENTS read in pages
// of three events.
func TestGTIDAtMatchesServer(t *testing.T) {
	defer binlog.SetShowEventsPage(3)()
	testenv.ForEachFlavor(t, func(t *testing.T, flavor position.Flavor) {
		for _, compressed := range []bool{false, true} {
			t.Run(fmt.Sprintf("compressed=%v", compressed), func(t *testing.T) {
				db := startServer(t, flavor, testenv.Options{Compressed: compressed})
				var points []checkpointed
				mark := func(what string) {
					points = append(points, checkpointed{what, binlogEnd(t, db), serverGTIDs(t, db)})
				}
				mark("empty server")
				exec(t, db, "CREATE USER 'acct'@'%' IDENTIFIED BY 'pw'", "CREATE DATABASE app", "CREATE TABLE app.t (id INT PRIMARY KEY, v INT)")
				mark("after DDL")
				exec(t, db, "BEGIN", "INSERT INTO app.t VALUES (1, 1)", "INSERT INTO app.t VALUES (2, 2)", "UPDATE app.t SET v = 3 WHERE id = 1", "COMMIT")
				mark("after a transaction of three statements")
				exec(t, db, "XA START 'x1'", "INSERT INTO app.t VALUES (3, 3)", "XA END 'x1'", "XA PREPARE 'x1'")
				mark("after XA PREPARE")
				xaFinish(t, db, "XA COMMIT 'x1'")
				mark("after XA COMMIT")
				if flavor == position.MySQL {
					exec(t, db, "SET gtid_next = 'AUTOMATIC:batch'", "INSERT INTO app.t VALUES (4, 4)", "SET gtid_next = 'AUTOMATIC'")
					mark("after a tagged GTID")
				}
				exec(t, db, "FLUSH BINARY LOGS")
				mark("at the start of the second file")
				insertSeq(t, db, "app.t", "seq + 100, seq", 500)
				mark("after a large transaction")
				exec(t, db, "FLUSH BINARY LOGS", "INSERT INTO app.t VALUES (5, 5)")
				mark("in the third file")

				c := conn(t, db)
				for _, p := range points {
					got, err := binlog.GTIDAt(c, p.pos)
					if err != nil {
						t.Fatalf("%s (%s): %v", p.what, p.pos, err)
					}
					if g, _ := position.ParseGTIDSet(flavor, got); !g.Equal(p.gset) {
						t.Errorf("%s (%s): GTIDAt %q, the server had %q", p.what, p.pos, got, p.gset)
					}
				}
				// A file's first position has the state its file started with.
				second, atStart := points[len(points)-2].pos.File, points[len(points)-3].gset
				if got, err := binlog.GTIDAt(c, position.Position{File: second, Offset: 4}); err != nil || !sameSet(flavor, got, atStart) {
					t.Errorf("the start of %s: %q, %v; want %s", second, got, err, atStart)
				}

				// Positions the server never had.
				last := points[len(points)-1].pos
				bad := []position.Position{
					{File: last.File, Offset: last.Offset + 1000}, // past the end
					{File: "mysql-bin.000099", Offset: 4},         // no such file
				}
				if flavor == position.MySQL {
					bad = append(bad,
						position.Position{File: last.File, Offset: 5},                              // inside the format description event
						position.Position{File: last.File, Offset: gtidEventEnd(t, db, last.File)}) // between a GTID event and its transaction
				}
				for _, p := range bad {
					if got, err := binlog.GTIDAt(c, p); !errors.Is(err, binlog.ErrPositionUnknown) {
						t.Errorf("GTIDAt(%s) = %q, %v; want ErrPositionUnknown", p, got, err)
					} else {
						t.Logf("GTIDAt(%s): %v", p, err)
					}
				}
				// The connection is still usable, also inside a transaction.
				if _, err := c.Execute("START TRANSACTION WITH CONSISTENT SNAPSHOT"); err != nil {
					t.Fatal(err)
				}
				if _, err := binlog.GTIDAt(c, last); err != nil {
					t.Fatal(err)
				}
				if _, err := c.Execute("COMMIT"); err != nil {
					t.Fatalf("the connection after GTIDAt: %v", err)
				}
			})
		}
	})
}

func sameSet(flavor position.Flavor, s string, g position.GTIDSet) bool {
	p, err := position.ParseGTIDSet(flavor, s)
	return err == nil && p.Equal(g)
}

// gtidEventEnd is the offset right after the first GTID event of file
// (MySQL; an anonymous one with gtid_mode=OFF): inside its transaction.
func gtidEventEnd(t *testing.T, db *testenv.Server, file string) uint32 {
	t.Helper()
	rs, err := db.Query(context.Background(), "SHOW BINLOG EVENTS IN '"+file+"'")
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < rs.RowNumber(); i++ {
		if typ, _ := rs.GetString(i, 2); strings.Contains(typ, "Gtid") { // Gtid, Gtid_tagged_log_event, Anonymous_Gtid
			end, _ := rs.GetUint(i, 4)
			return uint32(end)
		}
	}
	t.Fatalf("no GTID event in %s", file)
	return 0
}

// TestCurrentPositionIsConsistent: under concurrent commits, the GTID
// state CurrentPosition returns is the state at its offset (GTIDAt says
// the same afterwards), both through performance_schema.log_status (root
// has BACKUP_ADMIN) and, on MySQL, computed for a user without it.
func TestCurrentPositionIsConsistent(t *testing.T) {
	testenv.ForEachFlavor(t, func(t *testing.T, flavor position.Flavor) {
		db := startServer(t, flavor, testenv.Options{})
		exec(t, db, "CREATE DATABASE app", "CREATE TABLE app.t (id INT PRIMARY KEY AUTO_INCREMENT, v INT)",
			"CREATE USER 'plain'@'%' IDENTIFIED BY 'pw'", "GRANT REPLICATION SLAVE, REPLICATION CLIENT, SELECT ON *.* TO 'plain'@'%'")
		stop := make(chan struct{})
		var wg sync.WaitGroup
		for w := 0; w < 2; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					select {
					case <-stop:
						return
					default:
					}
					if err := db.Exec(context.Background(), "INSERT INTO app.t (v) VALUES (1)"); err != nil {
						t.Error(err)
						return
					}
				}
			}()
		}
		root := conn(t, db)
		plain, err := client.Connect(db.Addr(), "plain", "pw", "")
		if err != nil {
			t.Fatal(err)
		}
		defer plain.Close()
		var got []position.Position
		for i := 0; i < 20; i++ {
			for _, c := range []*mysqlconn.Conn{root, rawconn.Wrap(plain)} {
				p, err := binlog.CurrentPosition(c)
				if err != nil {
					t.Fatal(err)
				}
				if p.Flavor != flavor || p.File == "" || p.GTIDs == "" {
					t.Fatalf("CurrentPosition: %+v", p)
				}
				got = append(got, p)
			}
			time.Sleep(5 * time.Millisecond)
		}
		close(stop)
		wg.Wait()
		for _, p := range got {
			at, err := binlog.GTIDAt(root, p)
			if err != nil {
				t.Fatal(err)
			}
			if !sameSet(flavor, at, mustSet(t, flavor, p.GTIDs)) {
				t.Errorf("CurrentPosition %s: the GTID state at that offset is %s", p, at)
			}
		}
	})
}

func mustSet(t *testing.T, flavor position.Flavor, s string) position.GTIDSet {
	t.Helper()
	g, err := position.ParseGTIDSet(flavor, s)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// startErr returns the error a reader starting at p stops with.
func startErr(t *testing.T, db *testenv.Server, p position.Position) error {
	t.Helper()
	r := newReader(t, db, func(c *binlog.Config) { c.Start = p })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		txn, err := r.Next(ctx)
		if err != nil {
			return err
		}
		if len(txn.Changes) > 0 {
			t.Fatalf("start at %s: a transaction was delivered: %+v", p, txn.Changes[0])
		}
	}
}

// TestResumableOrNot: PositionPurged and the reader tell a position whose
// file was purged but whose GTID state is complete (resumed by GTID), a
// purged one, one ahead of the server, one in a file the server never
// wrote, one past a file's end, and one inside a transaction, each with
// its own error.
func TestResumableOrNot(t *testing.T) {
	testenv.ForEachFlavor(t, func(t *testing.T, flavor position.Flavor) {
		db := startServer(t, flavor, testenv.Options{})
		cfg, err := binlog.ParseSourceURL(db.URL())
		if err != nil {
			t.Fatal(err)
		}
		exec(t, db, "CREATE DATABASE app", "CREATE TABLE app.t (id INT PRIMARY KEY)", "INSERT INTO app.t VALUES (1)")
		early := binlogEnd(t, db)
		early.GTIDs = serverGTIDs(t, db).String()
		exec(t, db, "INSERT INTO app.t VALUES (2)")
		endOfFirst := binlogEnd(t, db)
		endOfFirst.GTIDs = serverGTIDs(t, db).String()
		exec(t, db, "FLUSH BINARY LOGS", "INSERT INTO app.t VALUES (3)", "INSERT INTO app.t VALUES (4)")
		newest := purgeAllButLast(t, db)
		ctx := timeout(t)

		// The file of endOfFirst is gone, but the server still has every
		// transaction after it: not purged, and the reader resumes by GTID.
		if purged, oldest, err := binlog.PositionPurged(ctx, cfg, endOfFirst); err != nil || purged {
			t.Fatalf("PositionPurged(%s) = %v, %q, %v; want resumable by GTID", endOfFirst, purged, oldest, err)
		}
		r := newReader(t, db, func(c *binlog.Config) { c.Start = endOfFirst })
		if txn := next(t, r); txn.Changes[0].After[0].Int() != 3 {
			t.Fatalf("resumed after a purged file: first row %d, want 3", txn.Changes[0].After[0].Int())
		}

		// early lacks a transaction (id 2) that was in the purged file.
		if purged, oldest, err := binlog.PositionPurged(ctx, cfg, early); err != nil || !purged || oldest != newest+":4" {
			t.Fatalf("PositionPurged(%s) = %v, %q, %v; want purged, oldest %s:4", early, purged, oldest, err, newest)
		}
		if err := startErr(t, db, early); !errors.Is(err, binlog.ErrPurged) || !strings.Contains(err.Error(), newest) {
			t.Fatalf("start at a purged GTID state: %v", err)
		}

		// Ahead of the server: transactions it never executed.
		var ahead []position.Position
		if flavor == position.MySQL {
			own := strings.Split(serverGTIDs(t, db).String(), ":")[0]
			ahead = append(ahead,
				position.Position{GTIDs: own + ":1-1000"},
				position.Position{GTIDs: serverGTIDs(t, db).String() + ",aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee:1-5"})
		} else {
			ahead = append(ahead, position.Position{GTIDs: "0-1-1000"}, position.Position{GTIDs: serverGTIDs(t, db).String() + ",7-7-7"})
		}
		// Never written: a later file, another server's file name, an
		// offset past the end of a file.
		unknown := append(ahead,
			position.Position{File: "mysql-bin.000099", Offset: 4},
			position.Position{File: "other-bin.000001", Offset: 4},
			position.Position{File: newest, Offset: 1 << 20})
		for _, p := range unknown {
			purged, _, err := binlog.PositionPurged(ctx, cfg, p)
			if purged || !errors.Is(err, binlog.ErrPositionUnknown) || errors.Is(err, binlog.ErrPurged) {
				t.Errorf("PositionPurged(%s) = %v, %v; want ErrPositionUnknown", p, purged, err)
			}
			if err := startErr(t, db, p); !errors.Is(err, binlog.ErrPositionUnknown) || errors.Is(err, binlog.ErrPurged) {
				t.Errorf("start at %s: %v; want ErrPositionUnknown", p, err)
			} else {
				t.Logf("start at %s: %v", p, err)
			}
		}
		// A position of the other flavor.
		other := position.Position{File: newest, Offset: 4, GTIDs: "0-1-5", Flavor: position.MariaDB}
		if flavor == position.MariaDB {
			other = position.Position{File: newest, Offset: 4, GTIDs: "3e11fa47-71ca-11e1-9e33-c80aa9429562:1-5", Flavor: position.MySQL}
		}
		if err := startErr(t, db, other); !errors.Is(err, binlog.ErrPositionUnknown) {
			t.Errorf("start at a %s position: %v", other.Flavor, err)
		}
		if flavor == position.MySQL {
			// Inside a transaction: after its GTID event.
			p := position.Position{File: newest, Offset: gtidEventEnd(t, db, newest)}
			if err := startErr(t, db, p); !errors.Is(err, binlog.ErrPositionUnknown) || !strings.Contains(err.Error(), "inside a transaction") {
				t.Errorf("start inside a transaction: %v", err)
			}
		}
	})
}
