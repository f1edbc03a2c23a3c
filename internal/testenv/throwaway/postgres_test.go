//go:build unix

package throwaway

import (
	"context"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestPostgres starts a real PostgreSQL 15, writes and reads rows (a NULL
// and text with a comma, a quote and a newline among them), restarts it
// with the data kept, and checks that Close stops it and removes its
// directory. As root the server runs as nobody.
func TestPostgres(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	pg, err := StartPostgres(ctx, PostgresOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer pg.Close()
	if !strings.HasPrefix(pg.DSN("postgres"), "postgres://postgres@127.0.0.1:") || !strings.HasPrefix(pg.JDBCURL("x"), "jdbc:postgresql://127.0.0.1:") {
		t.Fatalf("DSN %s, JDBC URL %s", pg.DSN("postgres"), pg.JDBCURL("x"))
	}
	if err := pg.Exec(ctx, "postgres", "CREATE DATABASE app"); err != nil {
		t.Fatal(err)
	}
	if err := pg.Exec(ctx, "app", "CREATE TABLE t (id int PRIMARY KEY, s text)",
		"INSERT INTO t VALUES (1, 'a,b \"q\"'||chr(10)||'z'), (2, NULL), (3, '')"); err != nil {
		t.Fatal(err)
	}
	check := func() {
		t.Helper()
		rows, err := pg.Query(ctx, "app", "SELECT id, s FROM t ORDER BY id")
		if err != nil {
			t.Fatal(err)
		}
		want := [][]string{{"1", "a,b \"q\"\nz"}, {"2", PostgresNull}, {"3", ""}}
		if len(rows) != len(want) {
			t.Fatalf("rows %q, want %q", rows, want)
		}
		for i := range want {
			if strings.Join(rows[i], "|") != strings.Join(want[i], "|") {
				t.Fatalf("row %d: %q, want %q", i, rows[i], want[i])
			}
		}
	}
	check()
	if os.Geteuid() == 0 {
		rows, err := pg.Query(ctx, "app", "SELECT current_setting('data_directory')")
		if err != nil {
			t.Fatal(err)
		}
		fi, err := os.Stat(rows[0][0])
		if err != nil {
			t.Fatal(err)
		}
		if uid := fi.Sys().(*syscall.Stat_t).Uid; uid == 0 {
			t.Fatalf("the data directory is root's; want nobody's")
		}
	}
	if err := pg.Exec(ctx, "app", "SELECT 1/0"); err == nil || !strings.Contains(err.Error(), "division by zero") {
		t.Fatalf("a failing statement: %v, want PostgreSQL's error", err)
	}
	if err := pg.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := pg.Start(ctx); err != nil {
		t.Fatal(err)
	}
	check()
	dir := pg.Dir
	if err := pg.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("Close left %s (%v)", dir, err)
	}
}
