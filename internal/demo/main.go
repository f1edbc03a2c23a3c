// Command demo starts a throwaway MariaDB with a small shop workload and
// runs sluice's main job, `sluice run`, against it on the embedded
// defaults: a snapshot of the rows already there, then every change as it
// commits, to stdout and to a file sink, with a checkpoint file. It ends by
// itself after -duration, or on Ctrl-C, and leaves nothing running.
//
//	make demo            # builds bin/sluice, then: go run ./internal/demo
package main

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/sluice-cdc/sluice/internal/testenv/throwaway"
)

func main() {
	duration := flag.Duration("duration", 15*time.Second, "how long to run the workload")
	bin := flag.String("sluice", "bin/sluice", "path of the sluice binary")
	flag.Parse()
	if err := run(*duration, *bin); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

func run(duration time.Duration, bin string) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	abs, err := filepath.Abs(bin)
	if err != nil {
		return err
	}
	if _, err := os.Stat(abs); err != nil {
		return fmt.Errorf("%s not found: run `make build` first (or `make demo`)", bin)
	}
	fmt.Fprintln(os.Stderr, "demo: starting a throwaway MariaDB (ROW binlog, GTIDs)...")
	db, err := throwaway.Start(ctx, throwaway.Options{})
	if err != nil {
		return err
	}
	defer func() {
		db.Close()
		fmt.Fprintln(os.Stderr, "demo: MariaDB stopped and removed")
	}()
	err = db.Exec(ctx,
		"CREATE DATABASE shop",
		"CREATE TABLE shop.customers (id INT PRIMARY KEY AUTO_INCREMENT, name VARCHAR(100) NOT NULL, email VARCHAR(200), created_at DATETIME(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3))",
		"CREATE TABLE shop.orders (id BIGINT UNSIGNED PRIMARY KEY AUTO_INCREMENT, customer_id INT NOT NULL, total DECIMAL(12,2) NOT NULL, status ENUM('new','paid','shipped','cancelled') NOT NULL DEFAULT 'new', tags SET('gift','express','fragile') NOT NULL DEFAULT '', meta JSON, updated_at TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6) ON UPDATE CURRENT_TIMESTAMP(6))",
	)
	if err != nil {
		return err
	}
	for i := 0; i < 3; i++ { // rows for the initial snapshot
		if err := db.Exec(ctx, fmt.Sprintf("INSERT INTO shop.customers (name, email) VALUES ('first%d', 'first%d@example.com')", i, i)); err != nil {
			return err
		}
	}
	dir, err := os.MkdirTemp("", "sluice-demo-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	config := filepath.Join(dir, "sluice.yaml")
	yaml := fmt.Sprintf(`pipeline: demo
source:
  url: %s
  tables: [shop.*]
sinks:
  - type: stdout
  - type: file
    file: {path: %s}
checkpoint:
  path: %s
admin:
  addr: 127.0.0.1:0
`, db.URL(), filepath.Join(dir, "out", "changes.jsonl"), filepath.Join(dir, "demo.checkpoint.json"))
	if err := os.WriteFile(config, []byte(yaml), 0o600); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "demo: %s run --config %s\n--- %s\n%s---\n", bin, config, config, yaml)
	tail := exec.Command(abs, "run", "--config", config)
	tail.Stdout, tail.Stderr = os.Stdout, os.Stderr
	tail.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := tail.Start(); err != nil {
		return err
	}
	done := make(chan error, 1)
	go func() { done <- tail.Wait() }()
	time.Sleep(time.Second) // let the snapshot run and the stream start

	wctx, cancel := context.WithTimeout(ctx, duration)
	defer cancel()
	workload(wctx, db)
	time.Sleep(time.Second) // let the last changes print
	tail.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-done:
		if err != nil {
			return fmt.Errorf("sluice run: %w", err)
		}
	case <-time.After(5 * time.Second):
		tail.Process.Kill()
		<-done
	}
	segs, _ := filepath.Glob(filepath.Join(dir, "out", "changes.*.jsonl"))
	lines := 0
	for _, seg := range segs {
		data, _ := os.ReadFile(seg)
		lines += strings.Count(string(data), "\n")
	}
	ckpt, _ := os.ReadFile(filepath.Join(dir, "demo.checkpoint.json"))
	fmt.Fprintf(os.Stderr, "demo: the file sink holds %d messages; the checkpoint says:\n%s", lines, ckpt)
	return nil
}

// workload writes a mix of transactions until ctx ends.
func workload(ctx context.Context, db *throwaway.Server) {
	names := []string{"Ada", "Grace", "Linus", "Barbara", "Ken", "Margaret", "Dennis", "Frances"}
	statuses := []string{"paid", "shipped", "cancelled"}
	for i := 1; ctx.Err() == nil; i++ {
		var stmts []string
		switch {
		case i%5 == 1:
			n := names[rand.IntN(len(names))]
			stmts = []string{fmt.Sprintf("INSERT INTO shop.customers (name, email) VALUES ('%s', '%s@example.com')", n, n)}
		case i%7 == 0:
			stmts = []string{"BEGIN",
				fmt.Sprintf("UPDATE shop.orders SET status='%s', tags='gift,express' WHERE id=%d", statuses[rand.IntN(3)], rand.IntN(i)+1),
				fmt.Sprintf("DELETE FROM shop.orders WHERE id=%d AND status='cancelled'", rand.IntN(i)+1),
				"COMMIT"}
		default:
			stmts = []string{fmt.Sprintf(`INSERT INTO shop.orders (customer_id, total, meta) SELECT id, %d.%02d, '{"source":"demo","n":%d}' FROM shop.customers ORDER BY RAND() LIMIT 1`, rand.IntN(500), rand.IntN(100), i)}
		}
		if err := db.Exec(ctx, stmts...); err != nil && ctx.Err() == nil {
			fmt.Fprintln(os.Stderr, "demo: workload:", err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(300 * time.Millisecond):
		}
	}
}
