package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-cdc/sluice/codec"
	"github.com/sluice-cdc/sluice/internal/testenv"
	"github.com/sluice-cdc/sluice/internal/workload"
	"github.com/sluice-cdc/sluice/position"
)

// snapshotKills is how many times TestRunKill9Snapshot kills sluice
// during each snapshot: SLUICE_SNAPSHOT_KILLS, else SLUICE_KILLS (make
// chaos), else 3.
func snapshotKills() int {
	for _, v := range []string{"SLUICE_SNAPSHOT_KILLS", "SLUICE_KILLS"} {
		if n, err := strconv.Atoi(os.Getenv(v)); err == nil && n > 0 {
			return n
		}
	}
	return 3
}

// TestRunKill9Snapshot: `sluice run` killed with -9 at random moments
// during the snapshot of a keyed table, a table without a key and an empty
// table, under concurrent writes, with both snapshot methods, and
// restarted each time. Afterwards the tables rebuilt from the output equal
// the server's (the table without a key as a multiset of rows, emptied at
// each TRUNCATE TABLE event), no streamed change is in the output twice,
// and exactly one row is marked "snapshot":"last".
func TestRunKill9Snapshot(t *testing.T) {
	testenv.ForEachFlavor(t, func(t *testing.T, flavor position.Flavor) {
		for _, method := range []string{"consistent", "watermark"} {
			t.Run(method, func(t *testing.T) { runKill9Snapshot(t, flavor, method) })
		}
	})
}

func runKill9Snapshot(t *testing.T, flavor position.Flavor, method string) {
	t0 := time.Now()
	db := testenv.StartT(t, testenv.Options{Flavor: flavor})
	ctx := context.Background()
	// More kills need a longer snapshot: the tables grow with them.
	kills := snapshotKills()
	keyed, keyless := 40000*max(1, kills/3), 2000*max(1, kills/3)
	from, setup := db.SeqFrom(1, keyed)
	stmts := append([]string{"CREATE DATABASE snapdb", "USE snapdb",
		"CREATE TABLE snapdb.t_key (id INT PRIMARY KEY, v INT NOT NULL, pad VARCHAR(100) NOT NULL)",
		"CREATE TABLE snapdb.t_nokey (a INT NOT NULL, b INT NOT NULL)",
		"CREATE TABLE snapdb.t_zempty (id INT PRIMARY KEY, v INT NOT NULL)"}, setup...)
	stmts = append(stmts,
		"INSERT INTO snapdb.t_key SELECT seq, 0, REPEAT('p', 60) FROM "+from,
		fmt.Sprintf("INSERT INTO snapdb.t_nokey SELECT seq %% 100, seq FROM %s WHERE seq <= %d", from, keyless))
	if err := db.Exec(ctx, stmts...); err != nil {
		t.Fatal(err)
	}
	e := &runEnv{db: db, dir: t.TempDir(), bin: buildSluice(t)}
	out := filepath.Join(e.dir, "out", "changes.jsonl")
	cfg := fmt.Sprintf(`pipeline: snapkill
source:
  url: %s
  server_id: 902
  tables: [snapdb.*]
  snapshot: {method: %s, chunk_rows: 100, parallel: 2}
sinks:
  - name: file
    type: file
    file: {path: %s, max_bytes: 1MiB}
checkpoint:
  path: %s
  interval: 200ms
buffer: {batch_bytes: 16KiB}
`, db.URL(), method, out, filepath.Join(e.dir, "ckpt.json"))
	e.config = filepath.Join(e.dir, "sluice.yaml")
	if err := os.WriteFile(e.config, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	read := func() ([]*codec.Event, error) {
		return workload.ReadFileSink(filepath.Join(e.dir, "out", "changes.*.jsonl"))
	}

	// Writers: small transactions over both tables, all the time.
	var stop atomic.Bool
	var writes atomic.Int64
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))
		c, err := db.Conn(ctx)
		if err != nil {
			t.Error(err)
			return
		}
		defer func() { c.Close() }()
		next := keyed + 1
		for !stop.Load() {
			qs := []string{"BEGIN"}
			for range 1 + rng.IntN(4) {
				id, a := 1+rng.IntN(keyed), rng.IntN(100)
				switch rng.IntN(6) {
				case 0:
					qs = append(qs, fmt.Sprintf("INSERT INTO snapdb.t_key VALUES (%d, 1, 'new')", next))
					next++
				case 1:
					qs = append(qs, fmt.Sprintf("DELETE FROM snapdb.t_key WHERE id = %d", id))
				case 2:
					qs = append(qs, fmt.Sprintf("UPDATE snapdb.t_key SET v = v + 1 WHERE id = %d", id))
				case 3:
					qs = append(qs, fmt.Sprintf("INSERT INTO snapdb.t_nokey VALUES (%d, %d)", a, rng.IntN(1000)))
				case 4:
					qs = append(qs, fmt.Sprintf("DELETE FROM snapdb.t_nokey WHERE a = %d LIMIT 1", a))
				default:
					qs = append(qs, fmt.Sprintf("UPDATE snapdb.t_nokey SET b = b + 1 WHERE a = %d LIMIT 1", a))
				}
			}
			qs = append(qs, "COMMIT")
			for _, q := range qs {
				if _, err := c.Execute(q); err != nil {
					c.Close()
					if c, err = db.Conn(ctx); err != nil {
						t.Error(err)
						return
					}
					break
				}
			}
			writes.Add(1)
			time.Sleep(time.Duration(1+rng.IntN(3)) * time.Millisecond)
		}
	}()
	stopWriters := func() {
		if !stop.Swap(true) {
			wg.Wait()
		}
	}
	defer stopWriters()

	// holds reports whether the output holds text (raw: decoding every
	// line each time is slow under -race).
	holds := func(text string) bool {
		paths, _ := filepath.Glob(filepath.Join(e.dir, "out", "changes.*.jsonl"))
		for _, p := range paths {
			if b, _ := os.ReadFile(p); strings.Contains(string(b), text) {
				return true
			}
		}
		return false
	}
	snapshotDone := func() bool { return holds(`"snapshot":"last"`) }
	ckptHoldsSnapshot := func() bool {
		b, _ := os.ReadFile(filepath.Join(e.dir, "ckpt.json"))
		return strings.Contains(string(b), `"snapshots"`)
	}
	t.Logf("%.1fs: server and tables ready", time.Since(t0).Seconds())
	log := &syncBuffer{}
	// start runs sluice; exited is closed when it ends.
	var exited chan struct{}
	var runErr error
	start := func() *exec.Cmd {
		cmd := e.start(t, log)
		done := make(chan struct{})
		go func() { runErr = cmd.Wait(); close(done) }()
		exited = done
		return cmd
	}
	cmd := start()
	n, during := kills, 0
	for i := range n {
		// Mostly once a checkpoint holds the snapshot's progress (the
		// restart resumes it), sometimes before (the restart begins anew).
		// The delays are short: on a quiet machine a snapshot of these
		// tables takes about a second.
		if rand.IntN(3) > 0 {
			for deadline := time.Now().Add(30 * time.Second); !ckptHoldsSnapshot() && !snapshotDone() && time.Now().Before(deadline); {
				time.Sleep(2 * time.Millisecond)
			}
			time.Sleep(time.Duration(rand.IntN(150)) * time.Millisecond)
		} else {
			time.Sleep(time.Duration(rand.IntN(300)) * time.Millisecond)
		}
		if snapshotDone() {
			t.Logf("the snapshot finished after %d kills", i)
			break
		}
		select {
		case <-exited:
			l := log.String()
			t.Fatalf("sluice run exited by itself: %v\n%s", runErr, l[max(0, len(l)-6000):])
		default:
		}
		if err := cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		<-exited
		during++
		t.Logf("kill %d/%d after %d writes; checkpoint holds a snapshot: %v", i+1, n, writes.Load(), ckptHoldsSnapshot())
		cmd = start()
	}
	if during == 0 {
		t.Fatal("no kill hit the snapshot: it finished too fast for this test")
	}
	deadline := time.Now().Add(3 * time.Minute)
	for !snapshotDone() {
		select {
		case <-exited:
			l := log.String()
			t.Fatalf("sluice run exited by itself: %v\n%s", runErr, l[max(0, len(l)-6000):])
		default:
		}
		if time.Now().After(deadline) {
			l := log.String()
			t.Fatalf("the snapshot did not finish (no row marked last)\n%s", l[max(0, len(l)-6000):])
		}
		time.Sleep(200 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond)
	stopWriters()

	// The output catches up with the last write, a row written after the
	// writers stopped.
	if err := db.Exec(ctx, "INSERT INTO snapdb.t_zempty VALUES (999999, 1)"); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(90 * time.Second); !holds(`"id":999999`); time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			l := log.String()
			t.Fatalf("the last write is not in the output after 90 s\n%s", l[max(0, len(l)-6000):])
		}
	}
	t.Logf("%.1fs: the output has the last write", time.Since(t0).Seconds())
	var diffs []string
	var evs []*codec.Event
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(300 * time.Millisecond) {
		var err error
		if evs, err = read(); err != nil {
			t.Fatal(err)
		}
		if diffs = compareSnapdb(t, db, evs); len(diffs) == 0 || time.Now().After(deadline) {
			break
		}
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	<-exited
	if err := runErr; err != nil {
		l := log.String()
		t.Fatalf("sluice run after SIGTERM: %v\n%s", err, l[max(0, len(l)-6000):])
	}
	for i, d := range diffs {
		if i == 10 {
			break
		}
		t.Error(d)
	}
	if len(diffs) > 0 {
		l := log.String()
		t.Fatalf("%d rows differ between the output and the server\n%s", len(diffs), l[max(0, len(l)-6000):])
	}

	// No streamed change twice; sequence numbers grow; one "last".
	seen := map[string]uint64{}
	var lastSeq uint64
	lasts, truncates, reads := 0, 0, 0
	for _, ev := range evs {
		if ev.Sluice == nil || ev.Sluice.Seq <= lastSeq {
			t.Fatalf("seq %v after %d: sequence numbers must grow", ev.Sluice, lastSeq)
		}
		lastSeq = ev.Sluice.Seq
		switch {
		case ev.Source.Snapshot == "last":
			lasts++
		case ev.IsDDL() && strings.HasPrefix(ev.DDL, "TRUNCATE"):
			truncates++
		}
		if ev.Op == "r" {
			reads++
		}
		if ev.Op == "c" || ev.Op == "u" || ev.Op == "d" {
			k := fmt.Sprintf("%s:%d:%d", ev.Source.File, ev.Source.Pos, ev.Source.Row)
			if s, ok := seen[k]; ok {
				t.Fatalf("the streamed change at %s (gtid %s) is in the output twice: seq %d and %d", k, ev.Source.GTID, s, ev.Sluice.Seq)
			}
			seen[k] = ev.Sluice.Seq
		}
	}
	if lasts != 1 {
		t.Fatalf("%d rows marked \"snapshot\":\"last\", want exactly 1", lasts)
	}
	t.Logf("%.1fs: checked", time.Since(t0).Seconds())
	t.Logf("%d kills during the snapshot, %d writes; %d messages: %d snapshot rows, %d streamed changes, %d TRUNCATE events", during, writes.Load(), len(evs), reads, len(seen), truncates)
}

// compareSnapdb rebuilds snapdb's tables from the output, in order, and
// lists where they differ from the server: t_key and t_zempty by key,
// t_nokey as a multiset of rows (a TRUNCATE TABLE event empties it).
func compareSnapdb(t *testing.T, db *testenv.Server, evs []*codec.Event) []string {
	t.Helper()
	keyedRows := map[string]string{}
	bag := map[string]int{}
	enc := func(m map[string]json.RawMessage) string {
		j, _ := json.Marshal(m) // keys sorted, values as written
		return string(j)
	}
	for _, ev := range evs {
		switch ev.Source.Table {
		case "t_key", "t_zempty":
			if ev.IsDDL() {
				continue
			}
			if ev.Before != nil {
				delete(keyedRows, ev.Source.Table+string(ev.Before["id"]))
			}
			if ev.After != nil {
				keyedRows[ev.Source.Table+string(ev.After["id"])] = enc(ev.After)
			}
		case "t_nokey":
			if ev.IsDDL() {
				if strings.HasPrefix(ev.DDL, "TRUNCATE") {
					clear(bag)
				}
				continue
			}
			if ev.Before != nil {
				k := enc(ev.Before)
				if bag[k]--; bag[k] <= 0 {
					delete(bag, k)
				}
			}
			if ev.After != nil {
				bag[enc(ev.After)]++
			}
		}
	}
	c, err := db.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	wantKeyed := map[string]string{}
	for _, tbl := range []string{"t_key", "t_zempty"} {
		cols := "id, v, pad"
		if tbl == "t_zempty" {
			cols = "id, v"
		}
		rs, err := c.Execute("SELECT " + cols + " FROM snapdb." + tbl)
		if err != nil {
			t.Fatal(err)
		}
		for i := range rs.RowNumber() {
			id, _ := rs.GetInt(i, 0)
			v, _ := rs.GetInt(i, 1)
			m := map[string]any{"id": id, "v": v}
			if tbl == "t_key" {
				pad, _ := rs.GetString(i, 2)
				m["pad"] = pad
			}
			j, _ := json.Marshal(m)
			wantKeyed[tbl+strconv.FormatInt(id, 10)] = string(j)
		}
	}
	wantBag := map[string]int{}
	rs, err := c.Execute("SELECT a, b FROM snapdb.t_nokey")
	if err != nil {
		t.Fatal(err)
	}
	for i := range rs.RowNumber() {
		a, _ := rs.GetInt(i, 0)
		b, _ := rs.GetInt(i, 1)
		j, _ := json.Marshal(map[string]any{"a": a, "b": b})
		wantBag[string(j)]++
	}
	var diffs []string
	for k, w := range wantKeyed {
		if keyedRows[k] != w {
			diffs = append(diffs, fmt.Sprintf("%s: rebuilt %q, server %q", k, keyedRows[k], w))
		}
	}
	for k := range keyedRows {
		if _, ok := wantKeyed[k]; !ok {
			diffs = append(diffs, fmt.Sprintf("%s: rebuilt, not on the server", k))
		}
	}
	for k, n := range wantBag {
		if bag[k] != n {
			diffs = append(diffs, fmt.Sprintf("t_nokey row %s: %d rebuilt, %d on the server", k, bag[k], n))
		}
	}
	for k, n := range bag {
		if _, ok := wantBag[k]; !ok {
			diffs = append(diffs, fmt.Sprintf("t_nokey row %s: %d rebuilt, none on the server", k, n))
		}
	}
	sort.Strings(diffs)
	return diffs
}
