//go:build unix

// Package testenv starts throwaway MariaDB, MySQL and Redis servers for
// tests: the *testing.T layer over internal/testenv/throwaway, which starts
// them with errors returned and does not import testing (so that programs,
// such as cmd/sluice-bench and the demo, can use it without linking the
// test harness). Its types, constants and error-returning functions are
// throwaway's under the same names; the helpers here take a testing.TB,
// register the server's Close with t.Cleanup and fail the test when a
// server cannot be started.
//
//	db := testenv.StartT(t, testenv.Options{Flavor: position.MySQL})
//	if err := db.Exec(ctx, "CREATE DATABASE d", "CREATE TABLE d.t (id INT PRIMARY KEY)"); err != nil { ... }
//	conn, err := db.Conn(ctx) // *mysqlconn.Conn over TCP as root/sluice
//
// Tests that run on both servers use ForEachFlavor. See throwaway for how
// the servers are installed, where they keep their data, and how a crashed
// test binary's servers die with it.
package testenv

import (
	"context"
	"os"
	"os/exec"
	"testing"

	"github.com/sluice-cdc/sluice/internal/testenv/certs"
	"github.com/sluice-cdc/sluice/internal/testenv/throwaway"
	"github.com/sluice-cdc/sluice/position"
)

// The servers and their settings (see throwaway).
type (
	// Server is a running (or stopped) throwaway MariaDB or MySQL.
	Server = throwaway.Server
	// Options configures a throwaway server.
	Options = throwaway.Options
	// Redis is a running (or stopped) throwaway redis-server.
	Redis = throwaway.Redis
	// RedisOptions configure StartRedisServer.
	RedisOptions = throwaway.RedisOptions
	// MySQLDist is an unpacked MySQL distribution.
	MySQLDist = throwaway.MySQLDist
	// Tool is a command-line program that comes with a server.
	Tool = throwaway.Tool
)

const (
	// DefaultUser is the account tests connect as.
	DefaultUser = throwaway.DefaultUser
	// DefaultPassword is the password of DefaultUser over TCP.
	DefaultPassword = throwaway.DefaultPassword

	ToolClient = throwaway.ToolClient // mariadb / mysql
	ToolDump   = throwaway.ToolDump   // mariadb-dump / mysqldump
	ToolBinlog = throwaway.ToolBinlog // mariadb-binlog / mysqlbinlog
)

// AllFlavors are the servers every integration test runs on.
var AllFlavors = throwaway.AllFlavors

// Start starts a server; the caller closes it (throwaway.Start).
func Start(ctx context.Context, opts Options) (*Server, error) { return throwaway.Start(ctx, opts) }

// StartMany starts one server per options at once, then runs setup on each
// (throwaway.StartMany).
func StartMany(ctx context.Context, opts []Options, setup ...string) ([]*Server, error) {
	return throwaway.StartMany(ctx, opts, setup...)
}

// StartRedisServer starts a redis-server; the caller closes it
// (throwaway.StartRedisServer).
func StartRedisServer(ctx context.Context, opts RedisOptions) (*Redis, error) {
	return throwaway.StartRedisServer(ctx, opts)
}

// Flavors returns the servers tests run on: both, unless
// SLUICE_TEST_FLAVORS narrows them (throwaway.Flavors).
func Flavors() []position.Flavor { return throwaway.Flavors() }

// ToolCommand returns flavor's tool with args, not yet started
// (throwaway.ToolCommand).
func ToolCommand(flavor position.Flavor, tool Tool, args ...string) (*exec.Cmd, error) {
	return throwaway.ToolCommand(flavor, tool, args...)
}

// EnsureMariaDB makes sure MariaDB is installed (throwaway.EnsureMariaDB).
func EnsureMariaDB() error { return throwaway.EnsureMariaDB() }

// EnsureMySQL makes sure MySQL is unpacked in the cache
// (throwaway.EnsureMySQL).
func EnsureMySQL() (MySQLDist, error) { return throwaway.EnsureMySQL() }

// EnsureRedis makes sure redis-server is installed (throwaway.EnsureRedis).
func EnsureRedis() error { return throwaway.EnsureRedis() }

// EnsureKcat makes sure kcat is on PATH and returns its path
// (throwaway.EnsureKcat).
func EnsureKcat() (string, error) { return throwaway.EnsureKcat() }

// StartT starts a server for t and registers t.Cleanup(Close). It calls
// t.Fatal if the server cannot be started; it never skips.
func StartT(t testing.TB, opts Options) *Server {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), throwaway.StartTimeout)
	defer cancel()
	m, err := Start(ctx, opts)
	if err != nil {
		t.Fatalf("testenv: starting %s: %v", throwaway.FlavorName(opts.Flavor), err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("testenv: %s (dir %s) error log tail:\n%s", m.Name(), m.Dir, m.ErrorLogTail(30))
		}
		if err := m.Close(); err != nil {
			t.Errorf("testenv: closing %s: %v", m.Name(), err)
		}
	})
	return m
}

// StartRedis starts a server for t and closes it (removing its data) at
// t's cleanup. It calls t.Fatal if the server cannot be started.
func StartRedis(t testing.TB) *Redis {
	t.Helper()
	return startRedis(t, RedisOptions{})
}

// StartRedisSecure is StartRedis with what managed services require:
// ACL users (name: password) and, with p, a tls-port (TLSAddr) presenting
// p's server certificate, which with clientAuth requires a client
// certificate signed by p's CA.
func StartRedisSecure(t testing.TB, users map[string]string, p *certs.PKI, clientAuth bool) *Redis {
	t.Helper()
	return startRedis(t, RedisOptions{Users: users, TLS: p, ClientAuth: clientAuth})
}

func startRedis(t testing.TB, opts RedisOptions) *Redis {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), throwaway.StartTimeout)
	defer cancel()
	r, err := StartRedisServer(ctx, opts)
	if err != nil {
		t.Fatalf("testenv: starting Redis: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("testenv: Redis %s (dir %s) log tail:\n%s", r.Addr(), r.Dir, r.LogTail(20))
		}
		if err := r.Close(); err != nil {
			t.Errorf("testenv: closing Redis %s: %v", r.Addr(), err)
		}
	})
	return r
}

// ForEachFlavor runs fn as a subtest per server flavor, named after it
// ("mariadb", "mysql"), so that one test body covers both servers:
//
//	testenv.ForEachFlavor(t, func(t *testing.T, flavor position.Flavor) {
//		db := testenv.StartT(t, testenv.Options{Flavor: flavor})
//		...
//	})
func ForEachFlavor(t *testing.T, fn func(t *testing.T, flavor position.Flavor)) {
	t.Helper()
	flavors := Flavors()
	if len(flavors) == 0 {
		t.Fatalf("testenv: SLUICE_TEST_FLAVORS=%q names no known flavor (mariadb, mysql)", os.Getenv("SLUICE_TEST_FLAVORS"))
	}
	for _, f := range flavors {
		t.Run(string(f), func(t *testing.T) { fn(t, f) })
	}
}

// ForEachFlavorMix is ForEachFlavor for tests over several servers (the
// shards of one pipeline): fn runs as subtests "mariadb" and "mysql", where
// every server is of that flavor, and "mixed", where server i is
// AllFlavors[i%2] (MariaDB, MySQL, MariaDB, ...), so that one pipeline
// reads both kinds at once. fn asks flavorOf(i) for server i's flavor.
// "mixed" runs only when both flavors are selected (SLUICE_TEST_FLAVORS).
func ForEachFlavorMix(t *testing.T, fn func(t *testing.T, flavorOf func(i int) position.Flavor)) {
	t.Helper()
	ForEachFlavor(t, func(t *testing.T, f position.Flavor) {
		fn(t, func(int) position.Flavor { return f })
	})
	if len(Flavors()) < len(AllFlavors) {
		return
	}
	t.Run("mixed", func(t *testing.T) {
		fn(t, func(i int) position.Flavor { return AllFlavors[i%len(AllFlavors)] })
	})
}
