// Package workload is the transactional write load of the pipeline's
// end-to-end tests, and the check that a sink's output holds every one of
// its transactions exactly once.
//
// Each transaction inserts the next row n into app.log and upserts or
// deletes a row of app.kv, so a sink's output can be checked for loss and
// duplication (every n once) and for order (app.kv rebuilt from the output
// equals the table).
package workload

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"sync"

	"github.com/sluice-cdc/sluice/codec"
	"github.com/sluice-cdc/sluice/internal/testenv/throwaway"
)

// Schema creates the tables.
var Schema = []string{
	"CREATE DATABASE IF NOT EXISTS app",
	"CREATE TABLE app.log (id INT AUTO_INCREMENT PRIMARY KEY, n INT NOT NULL, at DATETIME(6) NOT NULL DEFAULT NOW(6))",
	"CREATE TABLE app.kv (k INT PRIMARY KEY, v INT NOT NULL)",
	"CREATE TABLE app.bulk (id BIGINT PRIMARY KEY, pad VARCHAR(200) NOT NULL)",
}

// Writer runs the transactions.
type Writer struct {
	DB *throwaway.Server
	mu sync.Mutex
	n  int
}

// N returns how many transactions were committed.
func (w *Writer) N() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.n
}

// MoveTo makes the writer write to db from now on, as a client does after
// a failover, and numbers its next transaction after the last one db has
// (transactions the old server committed and db never received are lost,
// and their numbers are given again). It returns how many were lost.
func (w *Writer) MoveTo(ctx context.Context, db *throwaway.Server) (lost int, err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	rs, err := db.Query(ctx, "SELECT COALESCE(MAX(n), 0) FROM app.log")
	if err != nil {
		return 0, err
	}
	defer rs.Close()
	last, _ := rs.GetInt(0, 0)
	lost = w.n - int(last) // negative when db has one the writer saw fail
	w.DB, w.n = db, int(last)
	return lost, nil
}

// Txns commits count transactions.
func (w *Writer) Txns(ctx context.Context, count int) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	for range count {
		n := w.n + 1
		k := n % 7
		if err := w.DB.Exec(ctx,
			"BEGIN",
			fmt.Sprintf("INSERT INTO app.log (n) VALUES (%d)", n),
			fmt.Sprintf("INSERT INTO app.kv VALUES (%d, %d) ON DUPLICATE KEY UPDATE v = %d", k, n, n),
			fmt.Sprintf("DELETE FROM app.kv WHERE k = %d AND v %% 5 = 0", k),
			"COMMIT"); err != nil {
			return err
		}
		w.n = n
	}
	return nil
}

// BulkTxn commits one transaction that inserts the next app.log row and
// rows rows of app.bulk: a transaction large enough to span batches.
func (w *Writer) BulkTxn(ctx context.Context, rows int) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := w.n + 1
	// MariaDB's sequence table is in the current database; MySQL's
	// recursive CTE needs its setup in the same session.
	from, setup := w.DB.SeqFrom(1, rows)
	if err := w.DB.Exec(ctx, append(append([]string{"USE app"}, setup...),
		"BEGIN",
		fmt.Sprintf("INSERT INTO app.log (n) VALUES (%d)", n),
		fmt.Sprintf("INSERT INTO app.bulk SELECT %d * 1000000 + seq, REPEAT('b', 150) FROM %s", n, from),
		"COMMIT")...); err != nil {
		return err
	}
	w.n = n
	return nil
}

// Count returns how many distinct app.log rows evs hold.
func Count(evs []*codec.Event) int {
	seen := map[string]bool{}
	for _, ev := range evs {
		if ev.Source.Table == "log" && (ev.Op == "c" || ev.Op == "r") {
			seen[string(ev.After["n"])] = true
		}
	}
	return len(seen)
}

// Check verifies a sink's output: sorted by sequence number the messages
// are numbered 1, 2, 3, … with no gap and no repeat; app.log rows 1..n
// appear exactly once each; app.kv rebuilt from the output in sequence
// order equals the server's table. evs may come in any order (Kafka's
// partitions); they need the sluice block.
func Check(ctx context.Context, db *throwaway.Server, evs []*codec.Event, n int) error {
	return check(ctx, db, evs, n, true)
}

// CheckSource verifies the messages of one source of a pipeline with
// several: no sequence number repeats (after a crash a sink may skip
// numbers), app.log rows 1..n of that server appear exactly once each, and
// its app.kv rebuilt in sequence order equals the server's table.
func CheckSource(ctx context.Context, db *throwaway.Server, evs []*codec.Event, source string, n int) error {
	var mine []*codec.Event
	for _, ev := range evs {
		if ev.Sluice != nil && ev.Sluice.Source == source {
			mine = append(mine, ev)
		}
	}
	if err := check(ctx, db, mine, n, false); err != nil {
		return fmt.Errorf("source %s: %w", source, err)
	}
	return nil
}

func check(ctx context.Context, db *throwaway.Server, evs []*codec.Event, n int, gapless bool) error {
	evs = append([]*codec.Event(nil), evs...)
	for _, ev := range evs {
		if ev.Sluice == nil {
			return fmt.Errorf("a message has no sluice block: %+v", ev)
		}
	}
	sort.SliceStable(evs, func(i, j int) bool { return evs[i].Sluice.Seq < evs[j].Sluice.Seq })
	var last uint64
	seen := map[int]int{}
	kv := map[string]string{}
	bulk := map[string]bool{}
	for i, ev := range evs {
		if gapless && ev.Sluice.Seq != last+1 || ev.Sluice.Seq <= last {
			return fmt.Errorf("message %d of %d has seq %d after %d: sequence numbers must grow without repeat (and, with one source, without gap)", i, len(evs), ev.Sluice.Seq, last)
		}
		last = ev.Sluice.Seq
		switch ev.Source.Table {
		case "log":
			if ev.Op == "c" || ev.Op == "r" {
				v, _ := strconv.Atoi(string(ev.After["n"]))
				seen[v]++
			}
		case "bulk":
			if ev.Op == "c" || ev.Op == "r" {
				id := string(ev.After["id"])
				if bulk[id] {
					return fmt.Errorf("app.bulk row %s appears twice", id)
				}
				bulk[id] = true
			}
		case "kv":
			switch ev.Op {
			case "c", "r", "u":
				kv[string(ev.After["k"])] = string(ev.After["v"])
			case "d":
				delete(kv, string(ev.Before["k"]))
			}
		}
	}
	for i := 1; i <= n; i++ {
		if seen[i] != 1 {
			return fmt.Errorf("transaction %d (app.log n=%d) appears %d times, want exactly once", i, i, seen[i])
		}
	}
	if len(seen) != n {
		return fmt.Errorf("app.log: %d distinct rows, want %d", len(seen), n)
	}
	rs, err := db.Query(ctx, "SELECT COUNT(*) FROM app.bulk")
	if err != nil {
		return err
	}
	if nb, _ := rs.GetInt(0, 0); int(nb) != len(bulk) {
		return fmt.Errorf("app.bulk: %d rows in the output, %d on the server", len(bulk), nb)
	}
	want, err := KV(ctx, db)
	if err != nil {
		return err
	}
	if fmt.Sprint(want) != fmt.Sprint(kv) {
		return fmt.Errorf("app.kv rebuilt from the output differs from the server:\n got %v\nwant %v", kv, want)
	}
	return nil
}

// KV returns app.kv as decimal text.
func KV(ctx context.Context, db *throwaway.Server) (map[string]string, error) {
	rs, err := db.Query(ctx, "SELECT k, v FROM app.kv")
	if err != nil {
		return nil, err
	}
	want := map[string]string{}
	for i := range rs.RowNumber() {
		k, _ := rs.GetInt(i, 0)
		v, _ := rs.GetInt(i, 1)
		want[strconv.FormatInt(k, 10)] = strconv.FormatInt(v, 10)
	}
	return want, nil
}

// ReadFileSink decodes every line of a file sink's segments (glob, e.g.
// "dir/out.*.jsonl"), oldest segment first.
func ReadFileSink(glob string) ([]*codec.Event, error) {
	paths, err := filepath.Glob(glob)
	if err != nil {
		return nil, err
	}
	sort.Strings(paths)
	var evs []*codec.Event
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			return nil, err
		}
		for i, line := range bytes.Split(data, []byte("\n")) {
			if len(line) == 0 {
				continue
			}
			ev, err := codec.DecodeLine(line)
			if err != nil {
				return nil, fmt.Errorf("%s line %d: %w", p, i+1, err)
			}
			evs = append(evs, ev)
		}
	}
	return evs, nil
}
