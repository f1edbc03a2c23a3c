package main

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/sluice-cdc/sluice/internal/testenv"
	"github.com/sluice-cdc/sluice/position"
)

// TestDebeziumRefusesPartialRowImages (issue 32): format debezium writes
// every column, so a row image without them (binlog_row_image MINIMAL or
// NOBLOB, of the server or of one session) would come out as NULLs. It is
// refused at start and in the stream, by tail and read, with the setting
// and the fix named; format sluice goes on and leaves the absent columns
// out.
func TestDebeziumRefusesPartialRowImages(t *testing.T) {
	bin := buildSluice(t)
	testenv.ForEachFlavor(t, func(t *testing.T, flavor position.Flavor) {
		fails := func(t *testing.T, want string, args ...string) {
			t.Helper()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			out, err := exec.CommandContext(ctx, bin, args...).CombinedOutput()
			if err == nil || ctx.Err() != nil || !strings.Contains(string(out), want) {
				t.Errorf("sluice %v: want an error containing %q at once, got %v: %s", args, want, err, out)
			}
		}
		ctx := context.Background()
		for _, image := range []string{"MINIMAL", "NOBLOB"} {
			t.Run("server "+image, func(t *testing.T) {
				db := testenv.StartT(t, testenv.Options{Flavor: flavor, RowImage: image})
				if err := db.Exec(ctx, "CREATE DATABASE app", "CREATE TABLE app.t (id INT PRIMARY KEY, a INT, b VARCHAR(10), c TEXT)"); err != nil {
					t.Fatal(err)
				}
				from := masterPos(t, db)
				if err := db.Exec(ctx, "INSERT INTO app.t VALUES (1, 1, 'x', 'long')", "UPDATE app.t SET a = 2 WHERE id = 1"); err != nil {
					t.Fatal(err)
				}
				to := masterPos(t, db)
				fails(t, "binlog_row_image is "+image, "tail", "--source", db.URL(), "--tables", "app.t", "--from", from, "--to", to, "--format", "debezium")
				out, _ := run(t, bin, "tail", "--source", db.URL(), "--tables", "app.t", "--from", from, "--to", to)
				if !strings.Contains(out, `"after":{"id":1,"a":2}`) && !strings.Contains(out, `"a":2`) {
					t.Errorf("format sluice: the update is not there:\n%s", out)
				}
			})
		}
		t.Run("session MINIMAL", func(t *testing.T) {
			db := testenv.StartT(t, testenv.Options{Flavor: flavor})
			if err := db.Exec(ctx, "CREATE DATABASE app", "CREATE TABLE app.t (id INT PRIMARY KEY, a INT, b VARCHAR(10))"); err != nil {
				t.Fatal(err)
			}
			from := masterPos(t, db)
			if err := db.Exec(ctx, "INSERT INTO app.t VALUES (1, 1, 'x')", "SET SESSION binlog_row_image = 'MINIMAL'", "UPDATE app.t SET a = 2 WHERE id = 1"); err != nil {
				t.Fatal(err)
			}
			to := masterPos(t, db)
			fails(t, "table app.t at mysql-bin.", "tail", "--source", db.URL(), "--tables", "app.t", "--from", from, "--to", to, "--format", "debezium")
			file, _, _ := strings.Cut(from, ":")
			fails(t, "a row image lacks columns", "read", "--tables", "app.t", "--format", "debezium", db.DataDir()+"/"+file)
			out, _ := run(t, bin, "tail", "--source", db.URL(), "--tables", "app.t", "--from", from, "--to", to, "--format", "sluice")
			if strings.Count(out, `"op":"`) != 2 {
				t.Errorf("format sluice: want the insert and the update:\n%s", out)
			}
		})
	})
}
