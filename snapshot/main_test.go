package snapshot_test

import (
	"context"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-mysql-org/go-mysql/client"

	"github.com/sluice-cdc/sluice/internal/testenv"
	"github.com/sluice-cdc/sluice/position"
)

// One server (binlog_row_metadata=FULL, the default) serves every test of
// the package: each test works in databases of its own.
var shared struct {
	once sync.Once
	db   *testenv.Server
	err  error
}

func server(t testing.TB) *testenv.Server {
	t.Helper()
	shared.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		shared.db, shared.err = testenv.Start(ctx, testenv.Options{
			Extra: []string{"--innodb-buffer-pool-size=512M"},
		})
	})
	if shared.err != nil {
		t.Fatalf("starting MariaDB: %v", shared.err)
	}
	return shared.db
}

func TestMain(m *testing.M) {
	code := m.Run()
	if shared.db != nil {
		shared.db.Close()
	}
	os.Exit(code)
}

func exec(t testing.TB, db *testenv.Server, sql ...string) {
	t.Helper()
	if err := db.Exec(context.Background(), sql...); err != nil {
		t.Fatal(err)
	}
}

func conn(t testing.TB, db *testenv.Server) *client.Conn {
	t.Helper()
	c, err := db.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func masterStatus(t testing.TB, db *testenv.Server) (p position.Position) {
	t.Helper()
	rs, err := db.Query(context.Background(), "SHOW MASTER STATUS")
	if err != nil {
		t.Fatal(err)
	}
	f, _ := rs.GetString(0, 0)
	off, _ := rs.GetUint(0, 1)
	p.File, p.Offset = strings.Clone(f), uint32(off)
	return p
}
