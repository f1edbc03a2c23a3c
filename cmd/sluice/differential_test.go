package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-cdc/sluice/codec"
	"github.com/sluice-cdc/sluice/internal/testenv"
	"github.com/sluice-cdc/sluice/internal/workload"
	"github.com/sluice-cdc/sluice/position"
)

// The randomized differential test: a random workload (internal/workload
// Random) drawn from a seed runs on a real server while `sluice run`
// streams it into a file sink; the output must rebuild every table as
// SELECT reads it, hold every committed transaction once by GTID and no
// rolled back one, or, for statement-logged DML, stop with the documented
// error (on_statement_change: stop; what it delivered before are
// transactions before that one, each once; restarted with skip, it goes on
// from its checkpoint and both runs' output is exact) or warn and count
// each statement and stay exact for everything else (skip). The check is
// shown to catch a transaction left out and one delivered twice.
//
// make test runs diffSeeds' default seeds; make soak runs SLUICE_DIFF_SEEDS
// of them from SLUICE_DIFF_SEED_BASE (default: from the clock); a failing
// seed is replayed with SLUICE_DIFF_SEED=N.

// diffSeeds returns the seeds to run: SLUICE_DIFF_SEED alone, else
// SLUICE_DIFF_SEEDS seeds from SLUICE_DIFF_SEED_BASE (or the clock), else
// three that cover each statement mode.
func diffSeeds(t *testing.T) []int64 {
	if s := os.Getenv("SLUICE_DIFF_SEED"); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			t.Fatalf("SLUICE_DIFF_SEED=%q: want a number", s)
		}
		return []int64{n}
	}
	count := 0
	if s := os.Getenv("SLUICE_DIFF_SEEDS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			t.Fatalf("SLUICE_DIFF_SEEDS=%q: want a count of seeds", s)
		}
		count = n
	}
	if count == 0 {
		return []int64{1, 2, 3}
	}
	base := time.Now().UnixNano() % 1e9
	if s := os.Getenv("SLUICE_DIFF_SEED_BASE"); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			t.Fatalf("SLUICE_DIFF_SEED_BASE=%q: want a number", s)
		}
		base = n
	}
	t.Logf("seeds %d..%d (SLUICE_DIFF_SEED_BASE=%d)", base, base+int64(count)-1, base)
	seeds := make([]int64, count)
	for i := range seeds {
		seeds[i] = base + int64(i)
	}
	return seeds
}

// diffMode is what a seed does with statement-logged DML: none (no such
// session), skip or stop (source.on_statement_change).
func diffMode(seed int64) string {
	switch seed % 3 {
	case 1:
		return workload.StatementSkip
	case 2:
		return workload.StatementStop
	}
	return ""
}

func TestRunDifferential(t *testing.T) {
	bin := buildSluice(t)
	seeds := diffSeeds(t)
	testenv.ForEachFlavor(t, func(t *testing.T, flavor position.Flavor) {
		// One server for all seeds: each seed's workload makes its
		// database afresh and the pipeline starts after that.
		db := testenv.StartT(t, testenv.Options{Flavor: flavor})
		for _, seed := range seeds {
			t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
				start := time.Now()
				runDifferential(t, bin, db, seed)
				t.Logf("seed %d (%s) in %s", seed, flavor, time.Since(start).Round(time.Millisecond))
			})
		}
	})
}

var skippedMetric = regexp.MustCompile(`(?m)^sluice_statement_changes_skipped_total\{[^}]*\} (\d+)$`)

func runDifferential(t *testing.T, bin string, db *testenv.Server, seed int64) {
	ctx := context.Background()
	mode := diffMode(seed)
	replay := fmt.Sprintf("replay with: SLUICE_DIFF_SEED=%d go test -run 'TestRunDifferential/%s' ./cmd/sluice", seed, db.Flavor)
	dir := t.TempDir()
	admin := freePort(t)
	log := &syncBuffer{}
	var cmd *exec.Cmd
	exited := make(chan error, 1)
	defer func() {
		if cmd != nil && cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			<-exited
		}
	}()
	from := ""
	startRun := func(onStmt string) error {
		if from == "" {
			from = masterPos(t, db)
		}
		cfg := fmt.Sprintf(`pipeline: diff
source:
  url: %s
  server_id: %d
  tables: [%s.*]
  start: %s
  snapshot: {mode: never}
  on_statement_change: %s
sinks:
  - name: file
    type: file
    file: {path: %s, max_bytes: 1MiB}
checkpoint:
  path: %s
  interval: 200ms
buffer: {batch_bytes: 64KiB}
admin: {addr: %s}
`, db.URL(), 2000+seed%1000, workload.RandomDB, from, onStmt, filepath.Join(dir, "out", "changes.jsonl"), filepath.Join(dir, "ckpt.json"), admin)
		config := filepath.Join(dir, "sluice.yaml")
		if err := os.WriteFile(config, []byte(cfg), 0o644); err != nil {
			return err
		}
		cmd = exec.Command(bin, "run", "--config", config)
		cmd.Stderr = log
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err := cmd.Start(); err != nil {
			return err
		}
		go func() { exited <- cmd.Wait() }()
		return nil
	}
	onStmt := mode
	if onStmt == "" {
		onStmt = workload.StatementStop // the default
	}
	exp, err := workload.Random(ctx, db, seed, workload.RandomOptions{Statement: mode != ""}, func() error { return startRun(onStmt) })
	if err != nil {
		t.Fatalf("seed %d: the workload: %v\n%s", seed, err, replay)
	}
	failf := func(format string, args ...any) {
		t.Helper()
		l := log.String()
		t.Fatalf("seed %d on %s (statement mode %q): %s\n%s\nsteps:\n%s\nsluice's log (end):\n%s", seed, db.Flavor, mode, fmt.Sprintf(format, args...), replay,
			strings.Join(exp.Log, "\n"), l[max(0, len(l)-5000):])
	}
	read := func() ([]*codec.Event, error) {
		return workload.ReadFileSink(filepath.Join(dir, "out", "changes.*.jsonl"))
	}

	stops := mode == workload.StatementStop && exp.FirstStatement != ""
	if stops {
		// The source must stop at the first statement-logged transaction.
		select {
		case err := <-exited:
			if err == nil {
				failf("sluice run exited 0; want an error at the statement-logged transaction %s", exp.FirstStatement)
			}
		case <-time.After(90 * time.Second):
			failf("sluice run still running 90 s after a statement-logged transaction (%s): want it stopped", exp.FirstStatement)
		}
		l := log.String()
		for _, want := range []string{"was logged as a statement", "GTID " + exp.FirstStatement, "SET SESSION binlog_format = 'ROW'", "on_statement_change: skip"} {
			if !strings.Contains(l, want) {
				failf("the error lacks %q", want)
			}
		}
		if !regexp.MustCompile(`(INSERT|CREATE) ` + workload.RandomDB + `\.sbr\d* at mysql-bin\.\d+:\d+`).MatchString(l) {
			failf("the error names no statement, table and binlog position")
		}
		// What it delivered before stopping: transactions before that
		// one only, each once.
		evs, err := read()
		if err != nil {
			failf("reading the file sink: %v", err)
		}
		if err := workload.CheckRandomStopped(evs, exp); err != nil {
			failf("the output of the run that stopped: %v", err)
		}
		t.Logf("seed %d: stopped at %s with %d messages delivered", seed, exp.FirstStatement, len(evs))
		// The documented way on: on_statement_change: skip, restart. The
		// run resumes from its checkpoint; everything must come out once.
		if err := startRun(workload.StatementSkip); err != nil {
			t.Fatal(err)
		}
		mode = workload.StatementSkip
	}
	{
		last := exp.LastMarker()
		deadline := time.Now().Add(120 * time.Second)
		for {
			evs, err := read()
			if err == nil && hasMarker(evs, last) {
				break
			}
			select {
			case err := <-exited:
				failf("sluice run exited (%v) before delivering the last transaction (marker %d)", err, last)
			default:
			}
			if time.Now().After(deadline) {
				failf("the last transaction (marker %d) not delivered after 120 s (read: %v)", last, err)
			}
			time.Sleep(200 * time.Millisecond)
		}
		if mode == workload.StatementSkip {
			m := skippedMetric.FindStringSubmatch(httpGet(t, "http://"+admin+"/metrics"))
			if m == nil || m[1] != strconv.Itoa(exp.StatementSteps) {
				failf("sluice_statement_changes_skipped_total: %v, want %d", m, exp.StatementSteps)
			}
			if n := strings.Count(log.String(), "skipped a change logged as a statement"); n != exp.StatementSteps {
				failf("%d warnings of a skipped statement, want %d", n, exp.StatementSteps)
			}
		}
		_ = cmd.Process.Signal(syscall.SIGTERM)
		if err := <-exited; err != nil {
			failf("sluice run after SIGTERM: %v", err)
		}
	}
	evs, err := read()
	if err != nil {
		failf("reading the file sink: %v", err)
	}
	c, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Execute("SET NAMES utf8mb4"); err != nil {
		t.Fatal(err)
	}
	server, err := workload.SelectAll(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	if err := workload.CheckRandom(evs, exp, server); err != nil {
		failf("%v", err)
	}
	// The check itself must see a lost and a doubled transaction.
	if err := workload.CheckRandom(mutate(evs, "drop"), exp, server); err == nil {
		failf("CheckRandom accepts the output with a transaction left out")
	}
	if err := workload.CheckRandom(mutate(evs, "double"), exp, server); err == nil {
		failf("CheckRandom accepts the output with a transaction delivered twice")
	}
	t.Logf("seed %d: %d steps, %d transactions delivered, %d messages, %d statement-logged changes (mode %q)", seed, len(exp.Log), len(exp.Deliver), len(evs), exp.StatementSteps, mode)
}

// hasMarker reports whether evs hold the random workload's marker m.
func hasMarker(evs []*codec.Event, m int) bool {
	want := strconv.Itoa(m)
	for _, ev := range evs {
		if ev.Source.Table == "txlog" && ev.Op == "c" && string(ev.After["n"]) == want {
			return true
		}
	}
	return false
}

// mutate returns evs with the messages of the last transaction that
// carries a row change left out ("drop") or repeated at the end with new
// sequence numbers ("double").
func mutate(evs []*codec.Event, how string) []*codec.Event {
	evs = slices.Clone(evs)
	sort.SliceStable(evs, func(i, j int) bool { return evs[i].Sluice.Seq < evs[j].Sluice.Seq })
	g := ""
	for i := len(evs) - 1; i >= 0 && g == ""; i-- {
		if !evs[i].IsDDL() {
			g = evs[i].Source.GTID
		}
	}
	var out, txn []*codec.Event
	for _, ev := range evs {
		if ev.Source.GTID == g {
			txn = append(txn, ev)
			if how == "drop" {
				continue
			}
		}
		out = append(out, ev)
	}
	if how == "double" {
		seq := evs[len(evs)-1].Sluice.Seq
		for _, ev := range txn {
			c := *ev
			sl := *ev.Sluice
			seq++
			sl.Seq = seq
			c.Sluice = &sl
			out = append(out, &c)
		}
	}
	return out
}
