package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/sluice-cdc/sluice/codec"
	"github.com/sluice-cdc/sluice/internal/testenv"
	"github.com/sluice-cdc/sluice/internal/workload"
)

// TestRunKill9ManySources: two servers in one pipeline (`sources:`) under
// continuous writes, with transactions large enough to span batches; kill
// -9 `sluice run` at random moments and restart it. Every sink (file, Kafka,
// Redis streams) then holds every transaction of each source exactly once,
// each source in its order, and each source's tables rebuilt from the
// output equal the server's.
func TestRunKill9ManySources(t *testing.T) {
	ctx := context.Background()
	dbs := make([]*testenv.MariaDB, 2)
	writers := make([]*workload.Writer, 2)
	for i := range dbs {
		dbs[i] = testenv.StartT(t, testenv.MariaDBOptions{ServerID: uint32(i + 1)})
		if err := dbs[i].Exec(ctx, workload.Schema...); err != nil {
			t.Fatal(err)
		}
		writers[i] = &workload.Writer{DB: dbs[i]}
		if err := writers[i].Txns(ctx, 20); err != nil { // rows for the snapshots
			t.Fatal(err)
		}
	}
	e := &runEnv{db: dbs[0], dir: t.TempDir(), bin: buildSluice(t)}
	e.readers = map[string]func() ([]*codec.Event, error){
		"file": func() ([]*codec.Event, error) {
			return workload.ReadFileSink(filepath.Join(e.dir, "out", "changes.*.jsonl"))
		},
	}
	kc, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(3, "app.log", "app.kv", "app.bulk"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(kc.Close)
	kr := newKafkaReader(t, kc.ListenAddrs(), "app.log", "app.kv", "app.bulk")
	e.readers["kafka"] = func() ([]*codec.Event, error) {
		want := 0
		if evs, err := e.readers["file"](); err == nil {
			want = len(evs)
		}
		return kr.read(want)
	}
	r := testenv.StartRedis(t)
	e.readers["redis"] = func() ([]*codec.Event, error) {
		return readRedisStreams(r.Addr(), "s:app.log", "s:app.kv", "s:app.bulk")
	}
	var srcs []string
	for i, db := range dbs {
		srcs = append(srcs, fmt.Sprintf("  - name: db%d\n    url: %s\n    server_id: %d\n    tables: [app.*]\n    snapshot: {chunk_rows: 10}", i+1, db.URL(), 911+i))
	}
	cfg := fmt.Sprintf(`pipeline: shards
sources:
%s
align: {max_skew: 2s}
sinks:
  - name: file
    type: file
    file: {path: %s, max_bytes: 256KiB}
  - name: kafka
    type: kafka
    kafka: {brokers: [%q], request_timeout: 3s}
  - name: redis
    type: redis
    redis: {addr: %q, mode: stream, key_prefix: 's:', write_timeout: 2s}
checkpoint:
  path: %s
  interval: 200ms
buffer: {batch_bytes: 16KiB}
`, strings.Join(srcs, "\n"), filepath.Join(e.dir, "out", "changes.jsonl"), kc.ListenAddrs()[0], r.Addr(), filepath.Join(e.dir, "ckpt.json"))
	e.config = filepath.Join(e.dir, "sluice.yaml")
	if err := os.WriteFile(e.config, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	log := &syncBuffer{}
	cmd := e.start(t, log)
	waitSources := func(n []int) {
		t.Helper()
		deadline := time.Now().Add(90 * time.Second)
		for name, read := range e.readers {
			for {
				evs, err := read()
				ok := err == nil
				for i := range dbs {
					if ok && countSource(evs, fmt.Sprintf("db%d", i+1)) < n[i] {
						ok = false
					}
				}
				if ok {
					break
				}
				if time.Now().After(deadline) {
					l := log.String()
					t.Fatalf("sink %s lacks rows after 90 s: %d messages, app.log rows per source %d and %d, want %v (err %v)\n%s",
						name, len(evs), countSource(evs, "db1"), countSource(evs, "db2"), n, err, l[max(0, len(l)-6000):])
				}
				time.Sleep(100 * time.Millisecond)
			}
		}
	}
	waitSources([]int{20, 20})

	stop := make(chan struct{})
	var wg sync.WaitGroup
	errs := make([]error, len(writers))
	for i, w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := 0; ; k++ {
				select {
				case <-stop:
					return
				default:
				}
				var err error
				if k%20 == 7 {
					err = w.BulkTxn(ctx, 100+rand.IntN(200)) // spans batches
				} else {
					err = w.Txns(ctx, 1+rand.IntN(3))
				}
				if err != nil {
					errs[i] = err
					return
				}
				time.Sleep(time.Duration(rand.IntN(4)) * time.Millisecond)
			}
		}()
	}
	cmd = e.killRestart(t, cmd, log, func() string {
		return fmt.Sprintf("%d and %d transactions", writers[0].N(), writers[1].N())
	})
	close(stop)
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	totals := []int{writers[0].N(), writers[1].N()}
	waitSources(totals)
	_ = cmd.Process.Signal(syscall.SIGTERM)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("sluice run after SIGTERM: %v\n%s", err, log.String())
	}
	t.Logf("restarts where a sink held part of a large transaction: %d", strings.Count(log.String(), "a sink holds part of a large transaction"))
	for name, read := range e.readers {
		evs, err := read()
		if err != nil {
			t.Fatalf("sink %s: %v", name, err)
		}
		for i, db := range dbs {
			if err := workload.CheckSource(ctx, db, evs, fmt.Sprintf("db%d", i+1), totals[i]); err != nil {
				t.Fatalf("sink %s: %v", name, err)
			}
		}
		t.Logf("sink %s: %d messages; %d and %d transactions of the two sources, each exactly once", name, len(evs), totals[0], totals[1])
	}
}

// countSource returns how many distinct app.log rows of source evs hold.
func countSource(evs []*codec.Event, source string) int {
	var mine []*codec.Event
	for _, ev := range evs {
		if ev.Sluice != nil && ev.Sluice.Source == source {
			mine = append(mine, ev)
		}
	}
	return workload.Count(mine)
}
