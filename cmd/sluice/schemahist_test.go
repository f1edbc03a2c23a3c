package main

import (
	"context"
	"encoding/json"
	"maps"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/sluice-cdc/sluice/internal/testenv"
	"github.com/sluice-cdc/sluice/internal/workload"
	"github.com/sluice-cdc/sluice/position"
)

// TestRunSchemaHistoryKill9: with binlog_row_metadata=MINIMAL, `sluice
// run` is killed with -9 between DDL statements, some of them run while it
// is down (so that it restarts behind them, with information_schema
// describing only the last definition), and at random moments while it
// streams. Every row arrives once, with the columns its table had when it
// was written: its schema history, kept beside the checkpoint, survives
// the kills.
func TestRunSchemaHistoryKill9(t *testing.T) {
	testenv.ForEachFlavor(t, func(t *testing.T, f position.Flavor) {
		e := newRunEnvOn(t, testenv.Options{Flavor: f, RowMetadata: "MINIMAL"})
		ctx := context.Background()
		exec := func(q ...string) {
			t.Helper()
			if err := e.db.Exec(ctx, q...); err != nil {
				t.Fatal(err)
			}
		}
		exec("CREATE TABLE app.h (id INT PRIMARY KEY, a INT, b VARCHAR(10))", "INSERT INTO app.h VALUES (1, 10, 'one')")
		e.writeConfig(t, "")
		log := &syncBuffer{}
		// waitRows waits until the file sink holds n rows of the table
		// and returns each id's images.
		waitRows := func(n int) map[string][]map[string]json.RawMessage {
			t.Helper()
			glob := filepath.Join(e.dir, "out", "changes.*.jsonl")
			deadline := time.Now().Add(30 * time.Second)
			for {
				evs, err := workload.ReadFileSink(glob)
				rows := map[string][]map[string]json.RawMessage{}
				for _, ev := range evs {
					if (ev.Source.Table == "h" || ev.Source.Table == "h2") && (ev.Op == "c" || ev.Op == "r") {
						id := string(ev.After["id"])
						rows[id] = append(rows[id], ev.After)
					}
				}
				if err == nil && len(rows) >= n {
					return rows
				}
				if time.Now().After(deadline) {
					l := log.String()
					t.Fatalf("%d of %d rows delivered after 30 s (err %v): %v\n%s", len(rows), n, err, slices.Collect(maps.Keys(rows)), l[max(0, len(l)-6000):])
				}
				time.Sleep(100 * time.Millisecond)
			}
		}
		cmd := e.start(t, log)
		waitRows(1) // the snapshot (of the first definition) is done

		// Each step: its DDL (none for the first), then a row with the
		// columns as they are after it.
		type step struct {
			ddl, insert string
			want        map[string]string // the row as delivered (NULL as "null")
		}
		steps := []step{
			{"", "", map[string]string{"id": "1", "a": "10", "b": `"one"`}},
			{"ALTER TABLE app.h ADD COLUMN c VARCHAR(5) AFTER id, DROP COLUMN a", "INSERT INTO app.h VALUES (2, 'two', 'b2')", map[string]string{"id": "2", "c": `"two"`, "b": `"b2"`}},
			{"ALTER TABLE app.h CHANGE b bb TEXT FIRST", "INSERT INTO app.h VALUES ('bb3', 3, 'c3')", map[string]string{"bb": `"bb3"`, "id": "3", "c": `"c3"`}},
			{"ALTER TABLE app.h RENAME COLUMN c TO cc, ADD n BIGINT UNSIGNED", "INSERT INTO app.h VALUES ('bb4', 4, 'c4', 18446744073709551615)", map[string]string{"bb": `"bb4"`, "id": "4", "cc": `"c4"`, "n": "18446744073709551615"}},
			{"ALTER TABLE app.h CONVERT TO CHARACTER SET latin1", "INSERT INTO app.h VALUES ('é5', 5, 'ü5', 5)", map[string]string{"bb": `"é5"`, "id": "5", "cc": `"ü5"`, "n": "5"}},
			{"RENAME TABLE app.h TO app.h2", "INSERT INTO app.h2 VALUES ('bb6', 6, 'c6', NULL)", map[string]string{"bb": `"bb6"`, "id": "6", "cc": `"c6"`, "n": "null"}},
			{"ALTER TABLE app.h2 ADD d INT FIRST, MODIFY n DECIMAL(20,0)", "INSERT INTO app.h2 VALUES (7, 'bb7', 7, 'c7', -7)", map[string]string{"d": "7", "bb": `"bb7"`, "id": "7", "cc": `"c7"`, "n": `"-7"`}},
			{"ALTER TABLE app.h2 DROP COLUMN bb, ADD e ENUM('x','y') AFTER d", "INSERT INTO app.h2 VALUES (8, 'y', 8, 'c8', 8)", map[string]string{"d": "8", "e": `"y"`, "id": "8", "cc": `"c8"`, "n": `"8"`}},
		}
		down := false
		var beforeLast string // the position before the last DDL
		for i, s := range steps {
			if s.ddl != "" {
				exec(s.ddl)
			}
			if s.insert != "" {
				exec(s.insert)
			}
			if i == len(steps)-2 {
				beforeLast = masterPos(t, e.db)
			}
			switch {
			case i%3 == 1 && !down: // stay down across the next DDL
				time.Sleep(time.Duration(rand.IntN(300)) * time.Millisecond)
				_ = cmd.Process.Kill()
				_ = cmd.Wait()
				down = true
			case down:
				cmd, down = e.start(t, log), false
				time.Sleep(time.Duration(100+rand.IntN(500)) * time.Millisecond)
			default:
				time.Sleep(time.Duration(rand.IntN(400)) * time.Millisecond)
				_ = cmd.Process.Kill()
				_ = cmd.Wait()
				cmd = e.start(t, log)
			}
		}
		if down {
			cmd = e.start(t, log)
		}
		rows := waitRows(len(steps))
		_ = cmd.Process.Kill() // a SIGTERM may come before its handler is set
		_ = cmd.Wait()
		render := func(m map[string]string) string {
			keys := make([]string, 0, len(m))
			for k := range m {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			var b []string
			for _, k := range keys {
				b = append(b, k+"="+m[k])
			}
			return strings.Join(b, " ")
		}
		for _, s := range steps {
			id := s.want["id"]
			if len(rows[id]) != 1 {
				t.Fatalf("row %s delivered %d times", id, len(rows[id]))
			}
			got := map[string]string{}
			for k, v := range rows[id][0] {
				got[k] = string(v)
			}
			if render(got) != render(s.want) {
				t.Fatalf("row %s (after %q):\n got %s\nwant %s", id, s.ddl, render(got), render(s.want))
			}
		}
		// sluice schema prints the definitions as of a position.
		out, _ := run(t, e.bin, "schema", "--config", e.config, "--at", beforeLast)
		if !strings.Contains(out, "-- app.h2\n") || !strings.Contains(out, "`bb` text") || strings.Contains(out, "`e` enum") {
			t.Fatalf("sluice schema --at %s:\n%s", beforeLast, out)
		}
		t.Logf("sluice schema --at %s:\n%s", beforeLast, out)
		out, _ = run(t, e.bin, "schema", "--config", e.config)
		if !strings.Contains(out, "`e` enum('x', 'y')") || strings.Contains(out, "`bb`") {
			t.Fatalf("sluice schema:\n%s", out)
		}
		if strings.Contains(log.String(), "could not be applied") {
			t.Fatalf("the history could not apply a statement:\n%s", log.String())
		}
	})
}
