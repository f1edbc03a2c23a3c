package snapshot_test

import (
	"context"
	"os"
	"regexp"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/sluice-cdc/sluice/internal/testenv"
	"github.com/sluice-cdc/sluice/mysqlconn"
	"github.com/sluice-cdc/sluice/position"
)

// One server per flavor (binlog_row_metadata=FULL, the default) serves
// every test of the package that needs no server of its own: each test
// works in databases of its own.
var (
	sharedMu sync.Mutex
	shared   = map[position.Flavor]*sharedServer{}
)

type sharedServer struct {
	once sync.Once
	db   *testenv.Server
	err  error
}

func server(t testing.TB, flavor position.Flavor) *testenv.Server {
	t.Helper()
	sharedMu.Lock()
	s := shared[flavor]
	if s == nil {
		s = &sharedServer{}
		shared[flavor] = s
	}
	sharedMu.Unlock()
	s.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		s.db, s.err = testenv.Start(ctx, testenv.Options{
			Flavor: flavor,
			Extra:  []string{"--innodb-buffer-pool-size=512M"},
		})
	})
	if s.err != nil {
		t.Fatalf("starting %s: %v", flavor, s.err)
	}
	return s.db
}

func TestMain(m *testing.M) {
	code := m.Run()
	for _, s := range shared {
		if s.db != nil {
			s.db.Close()
		}
	}
	os.Exit(code)
}

// exec runs the statements on one connection, MariaDB's SEQUENCE tables
// in them made to work on MySQL too (see seqs).
func exec(t testing.TB, db *testenv.Server, sql ...string) {
	t.Helper()
	if err := db.Exec(context.Background(), seqs(db, sql...)...); err != nil {
		t.Fatal(err)
	}
}

// seqs makes statements written with MariaDB's SEQUENCE tables
// (seq_A_to_B) run on db's flavor: on MySQL each becomes the FROM clause
// testenv.Server.SeqFrom gives, in a session set up for it. Run the
// statements on one connection (Server.Exec does).
func seqs(db *testenv.Server, stmts ...string) []string {
	if db.Flavor != position.MySQL {
		return stmts
	}
	var out []string
	for _, q := range stmts {
		q = seqTable.ReplaceAllStringFunc(q, func(m string) string {
			f := seqTable.FindStringSubmatch(m)
			first, _ := strconv.Atoi(f[1])
			last, _ := strconv.Atoi(f[2])
			from, setup := db.SeqFrom(first, last)
			out = append(out, setup...)
			return from
		})
		out = append(out, q)
	}
	return out
}

var seqTable = regexp.MustCompile(`seq_([0-9]+)_to_([0-9]+)`)

func conn(t testing.TB, db *testenv.Server) *mysqlconn.Conn {
	t.Helper()
	c, err := db.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// masterStatus is the server's binlog position now.
func masterStatus(t testing.TB, db *testenv.Server) (p position.Position) {
	t.Helper()
	q := "SHOW MASTER STATUS"
	if db.Flavor == position.MySQL {
		q = "SHOW BINARY LOG STATUS" // MySQL 9.7
	}
	rs, err := db.Query(context.Background(), q)
	if err != nil {
		t.Fatal(err)
	}
	f, _ := rs.GetString(0, 0)
	off, _ := rs.GetUint(0, 1)
	p.File, p.Offset = string([]byte(f)), uint32(off)
	return p
}
