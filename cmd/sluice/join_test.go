package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-cdc/sluice/internal/testenv"
	"github.com/sluice-cdc/sluice/pipeline"
	"github.com/sluice-cdc/sluice/position"
)

// TestRunJoinKill9ExactlyOnce: `sluice run` with an interval join of
// orders and payments (joins: in the config, the join's records to a file
// sink of its own) under continuous writes, killed with -9 at random
// moments and restarted. The joined records are then exactly the pairs a
// SQL join with the same time condition finds on the server, each once,
// numbered 1..n.
func TestRunJoinKill9ExactlyOnce(t *testing.T) {
	testenv.ForEachFlavor(t, runJoinKill9ExactlyOnce)
}

func runJoinKill9ExactlyOnce(t *testing.T, flavor position.Flavor) {
	ctx := context.Background()
	db := testenv.StartT(t, testenv.Options{Flavor: flavor})
	if err := db.Exec(ctx, "CREATE DATABASE shop",
		"CREATE TABLE shop.orders (id INT PRIMARY KEY, created_at DATETIME(3) NOT NULL, note VARCHAR(40) NOT NULL)",
		"CREATE TABLE shop.payments (id INT AUTO_INCREMENT PRIMARY KEY, order_id INT NOT NULL, paid_at DATETIME(3) NOT NULL, amount DECIMAL(10,2) NOT NULL)"); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	bin := buildSluice(t)
	cfg := fmt.Sprintf(`pipeline: shop
source:
  url: %s
  server_id: 933
  tables: [shop.*]
sinks:
  - name: out
    type: file
    file: {path: %s}
  - name: joined
    type: file
    file: {path: %s, max_bytes: 64KiB}
joins:
  - name: orders_payments
    left: {table: shop.orders, key: [id], time: created_at}
    right: {table: shop.payments, key: [order_id], time: paid_at}
    before: 0s
    after: 10m
    lateness: 5m
    sink: joined
    state_dir: %s
checkpoint:
  path: %s
  interval: 200ms
buffer: {batch_bytes: 16KiB}
`, db.URL(), filepath.Join(dir, "out", "changes.jsonl"), filepath.Join(dir, "joined", "records.jsonl"), filepath.Join(dir, "state"), filepath.Join(dir, "ckpt.json"))
	config := filepath.Join(dir, "sluice.yaml")
	if err := os.WriteFile(config, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	e := &runEnv{db: db, dir: dir, bin: bin, config: config}
	log := &syncBuffer{}
	cmd := e.start(t, log)

	// Orders, then payments of recent orders: some within the 10 minutes
	// after the order (they join), some 20 minutes after (they do not).
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var werr error
	var orders atomic.Int64
	wg.Add(1)
	go func() {
		defer wg.Done()
		c, err := db.Conn(ctx)
		if err != nil {
			werr = err
			return
		}
		defer c.Close()
		for {
			select {
			case <-stop:
				return
			default:
			}
			id := int(orders.Add(1))
			stmts := []string{"BEGIN", fmt.Sprintf("INSERT INTO shop.orders VALUES (%d, NOW(3), 'order %d')", id, id)}
			for range rand.IntN(3) {
				o := max(1, id-rand.IntN(5))
				late := []int{0, 1, 9, 20}[rand.IntN(4)]
				stmts = append(stmts, fmt.Sprintf("INSERT INTO shop.payments (order_id, paid_at, amount) SELECT id, created_at + INTERVAL %d MINUTE + INTERVAL 1 SECOND, 9.99 FROM shop.orders WHERE id = %d", late, o))
			}
			stmts = append(stmts, "COMMIT")
			for _, s := range stmts {
				if _, err := c.Execute(s); err != nil {
					werr = err
					return
				}
			}
			time.Sleep(time.Duration(rand.IntN(4)) * time.Millisecond)
		}
	}()
	cmd = e.killRestart(t, cmd, log, func() string { return fmt.Sprintf("%d orders", orders.Load()) })
	close(stop)
	wg.Wait()
	if werr != nil {
		t.Fatal(werr)
	}

	// The reference: the same time condition in SQL.
	rs, err := db.Query(ctx, `SELECT o.id, p.id FROM shop.orders o JOIN shop.payments p ON p.order_id = o.id
		AND p.paid_at BETWEEN o.created_at AND o.created_at + INTERVAL 10 MINUTE`)
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for i := 0; i < rs.RowNumber(); i++ {
		o, _ := rs.GetInt(i, 0)
		p, _ := rs.GetInt(i, 1)
		want = append(want, fmt.Sprintf("%d/%d", o, p))
	}
	sort.Strings(want)
	deadline := time.Now().Add(90 * time.Second)
	var got []string
	for {
		got = readJoinedPairs(t, filepath.Join(dir, "joined", "records.*.jsonl"))
		if len(got) >= len(want) || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("sluice run after SIGTERM: %v\n%s", err, log.String())
	}
	got = readJoinedPairs(t, filepath.Join(dir, "joined", "records.*.jsonl"))
	if strings.Join(got, " ") != strings.Join(want, " ") {
		l := log.String()
		t.Fatalf("joined records differ from the SQL join: %d records, %d pairs expected\n got %v\nwant %v\n%s", len(got), len(want), head(got), head(want), l[max(0, len(l)-4000):])
	}
	t.Logf("%d orders; %d joined records, each exactly once, numbered 1..%d, after %d kills", orders.Load(), len(got), len(got), kills())
	if len(want) < 50 {
		t.Fatalf("only %d pairs: the test joined too little to mean anything", len(want))
	}
}

func head(s []string) []string { return s[:min(len(s), 20)] }

// readJoinedPairs reads the join's records as "order/payment" pairs,
// sorted, checking that they are numbered 1..n without gap or repeat.
func readJoinedPairs(t *testing.T, glob string) []string {
	t.Helper()
	files, _ := filepath.Glob(glob)
	sort.Strings(files)
	var out []string
	var next uint64 = 1
	for _, f := range files {
		fh, err := os.Open(f)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(fh)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			meta, err := pipeline.ParseMeta(sc.Bytes())
			if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			if meta.Seq != next {
				t.Fatalf("%s: record seq %d, want %d: not numbered 1..n exactly once", f, meta.Seq, next)
			}
			next++
			var rec struct {
				Left, Right *struct {
					Row map[string]json.RawMessage `json:"row"`
				}
			}
			if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
				t.Fatal(err)
			}
			if rec.Left == nil || rec.Right == nil {
				t.Fatalf("an inner join gave an unmatched record: %s", sc.Bytes())
			}
			out = append(out, fmt.Sprintf("%s/%s", rec.Left.Row["id"], rec.Right.Row["id"]))
		}
		fh.Close()
	}
	sort.Strings(out)
	return out
}

// TestRunJoinMissingColumnStops: a join whose key column is not in the
// table stops `sluice run` with a message naming the column, instead of
// retrying the write forever.
func TestRunJoinMissingColumnStops(t *testing.T) {
	testenv.ForEachFlavor(t, runJoinMissingColumnStops)
}

func runJoinMissingColumnStops(t *testing.T, flavor position.Flavor) {
	ctx := context.Background()
	db := testenv.StartT(t, testenv.Options{Flavor: flavor})
	if err := db.Exec(ctx, "CREATE DATABASE shop",
		"CREATE TABLE shop.orders (id INT PRIMARY KEY, created_at DATETIME(3) NOT NULL)",
		"CREATE TABLE shop.payments (id INT PRIMARY KEY, order_id INT NOT NULL, paid_at DATETIME(3) NOT NULL)",
		"INSERT INTO shop.orders VALUES (1, NOW(3))"); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cfg := fmt.Sprintf(`pipeline: shop
source: {url: %s, server_id: 934, tables: [shop.*]}
sinks:
  - {name: out, type: file, file: {path: %s}}
  - {name: joined, type: file, file: {path: %s}}
joins:
  - name: orders_payments
    left: {table: shop.orders, key: [order_no], time: created_at}
    right: {table: shop.payments, key: [order_id], time: paid_at}
    after: 10m
    sink: joined
    state_dir: %s
checkpoint: {path: %s}
`, db.URL(), filepath.Join(dir, "out", "c.jsonl"), filepath.Join(dir, "joined", "r.jsonl"), filepath.Join(dir, "state"), filepath.Join(dir, "ckpt.json"))
	path := filepath.Join(dir, "sluice.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	out, err := exec.CommandContext(rctx, buildSluice(t), "run", "--config", path).CombinedOutput()
	if err == nil || rctx.Err() != nil || !strings.Contains(string(out), `table shop.orders has no column "order_no" (left.key of join orders_payments)`) {
		t.Fatalf("sluice run: %v (timed out: %v)\n%s", err, rctx.Err() != nil, out)
	}
	if strings.Count(string(out), "sink write failed; retrying") > 0 {
		t.Fatalf("the permanent error was retried:\n%s", out)
	}
}
