package main

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-cdc/sluice/codec"
	"github.com/sluice-cdc/sluice/internal/testenv"
	"github.com/sluice-cdc/sluice/internal/workload"
)

// runEnv is a source server and a directory for a pipeline's files.
type runEnv struct {
	db     *testenv.MariaDB
	dir    string
	bin    string
	config string
	w      *workload.Writer
	// sinks are extra sink blocks (YAML list items) and readers of what
	// they hold, keyed by name.
	sinks   []string
	readers map[string]func() ([]*codec.Event, error)
}

func newRunEnv(t *testing.T) *runEnv {
	t.Helper()
	db := testenv.StartT(t, testenv.MariaDBOptions{})
	if err := db.Exec(context.Background(), workload.Schema...); err != nil {
		t.Fatal(err)
	}
	e := &runEnv{db: db, dir: t.TempDir(), bin: buildSluice(t), w: &workload.Writer{DB: db}}
	e.readers = map[string]func() ([]*codec.Event, error){
		"file": func() ([]*codec.Event, error) {
			return workload.ReadFileSink(filepath.Join(e.dir, "out", "changes.*.jsonl"))
		},
	}
	return e
}

// writeConfig writes the pipeline's YAML: the file sink plus e.sinks.
func (e *runEnv) writeConfig(t *testing.T, extra string) {
	t.Helper()
	cfg := fmt.Sprintf(`pipeline: crash
source:
  url: %s
  server_id: 901
  tables: [app.*]
  snapshot: {chunk_rows: 100}
sinks:
  - name: file
    type: file
    file: {path: %s, max_bytes: 256KiB}
%s
checkpoint:
  path: %s
  interval: 200ms
buffer: {batch_bytes: 16KiB}
%s
`, e.db.URL(), filepath.Join(e.dir, "out", "changes.jsonl"), strings.Join(e.sinks, "\n"), filepath.Join(e.dir, "ckpt.json"), extra)
	e.config = filepath.Join(e.dir, "sluice.yaml")
	if err := os.WriteFile(e.config, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
}

// start runs `sluice run` in the background; its stderr goes to log.
func (e *runEnv) start(t *testing.T, log *bytes.Buffer) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(e.bin, "run", "--config", e.config)
	cmd.Stderr = log
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return cmd
}

// waitAll waits until every sink holds n log rows.
func (e *runEnv) waitAll(t *testing.T, n int, log *bytes.Buffer) {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for name, read := range e.readers {
		for {
			evs, err := read()
			if err == nil && workload.Count(evs) >= n {
				break
			}
			if time.Now().After(deadline) {
				got := -1
				if err == nil {
					got = workload.Count(evs)
				}
				l := log.String()
				t.Fatalf("sink %s holds %d of %d rows after 90 s (err %v)\n%s", name, got, n, err, l[max(0, len(l)-6000):])
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
}

func (e *runEnv) checkAll(t *testing.T, n int) {
	t.Helper()
	for name, read := range e.readers {
		evs, err := read()
		if err != nil {
			t.Fatalf("sink %s: %v", name, err)
		}
		if err := workload.Check(context.Background(), e.db, evs, n); err != nil {
			t.Fatalf("sink %s: %v", name, err)
		}
		t.Logf("sink %s: %d messages, %d transactions, each exactly once", name, len(evs), n)
	}
}

// kills is how many times the crash test kills sluice: SLUICE_KILLS, or 6
// (make chaos runs 20).
func kills() int {
	if n, err := strconv.Atoi(os.Getenv("SLUICE_KILLS")); err == nil && n > 0 {
		return n
	}
	return 6
}

// TestRunKill9ExactlyOnce: under continuous writes, kill -9 `sluice run`
// at random moments and restart it; every sink then holds every source
// transaction exactly once, in order.
func TestRunKill9ExactlyOnce(t *testing.T) {
	e := newRunEnv(t)
	ctx := context.Background()
	if err := e.w.Txns(ctx, 50); err != nil { // rows for the snapshot
		t.Fatal(err)
	}
	e.writeConfig(t, "")
	var log bytes.Buffer
	// The first run takes the snapshot; the kills hit the stream.
	cmd := e.start(t, &log)
	e.waitAll(t, 50, &log)

	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	var werr error
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if werr = e.w.Txns(ctx, 1+rand.IntN(3)); werr != nil {
				return
			}
			time.Sleep(time.Duration(rand.IntN(3)) * time.Millisecond)
		}
	}()
	n := kills()
	for i := range n {
		time.Sleep(time.Duration(200+rand.IntN(800)) * time.Millisecond)
		if err := cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		_ = cmd.Wait()
		t.Logf("kill %d/%d after %d transactions", i+1, n, e.w.N())
		cmd = e.start(t, &log)
	}
	close(stop)
	wg.Wait()
	if werr != nil {
		t.Fatal(werr)
	}
	total := e.w.N()
	e.waitAll(t, total, &log)
	_ = cmd.Process.Signal(syscall.SIGTERM)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("sluice run after SIGTERM: %v\n%s", err, log.String())
	}
	e.checkAll(t, total)
}

// TestRunConfigErrors: a bad config stops `sluice run` at once with the
// file, line and key.
func TestRunConfigErrors(t *testing.T) {
	bin := buildSluice(t)
	dir := t.TempDir()
	cases := []struct{ yaml, want string }{
		{"pipeline: p\nsource:\n  url: mysql://u:p@127.0.0.1:1\n  tabels: [a.b]\n", `sluice.yaml:4: source.tabels: unknown key "tabels" (did you mean "tables"?)`},
		{"pipeline: p\nsource:\n  url: mysql://u:${SLUICE_TEST_UNSET}@127.0.0.1:1\n", "environment variable SLUICE_TEST_UNSET is not set"},
		{"pipeline: p\nsource: {url: 'mysql://u:p@127.0.0.1:1'}\nsinks:\n  - type: file\n    file: {path: x.jsonl, max_bytes: huge}\n", `"huge" is not a size`},
		{"pipeline: p\nsource: {url: 'postgres://u:p@127.0.0.1:1'}\n", "source.url"},
	}
	for _, c := range cases {
		path := filepath.Join(dir, "sluice.yaml")
		if err := os.WriteFile(path, []byte(c.yaml), 0o644); err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command(bin, "run", "--config", path).CombinedOutput()
		if err == nil || !strings.Contains(string(out), c.want) {
			t.Errorf("config %q: err %v, output %q, want it to contain %q", c.yaml, err, out, c.want)
		}
	}
	out, err := exec.Command(bin, "run").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "--config") {
		t.Errorf("no config: %v %s", err, out)
	}
}
