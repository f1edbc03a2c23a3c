package main

import (
	"bytes"
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

	"github.com/sluice-cdc/sluice/codec"
	"github.com/sluice-cdc/sluice/internal/testenv"
	"github.com/sluice-cdc/sluice/internal/testenv/kafkaenv"
	"github.com/sluice-cdc/sluice/internal/workload"
	"github.com/sluice-cdc/sluice/position"
)

// shardsEnv is two servers feeding one pipeline (`sources:`, named db1
// and db2) into a file, a Kafka and a Redis-streams sink. The servers may
// be of different flavors (shards on MariaDB and on MySQL).
type shardsEnv struct {
	*runEnv
	dbs     []*testenv.Server
	writers []*workload.Writer
	kafka   string
	redis   string
	// urls overrides the URL of source i when set (an address list).
	urls map[int]string
	// onWriteError, when set, is asked about a failed write of source i:
	// nil means go on writing (after a database failover), an error ends
	// the load with it.
	onWriteError func(i int, err error) error
	// pace, when set, is the pause between a source's transactions (0:
	// 0-3 ms, as fast as the servers take them).
	pace time.Duration
}

// newShardsEnv starts the servers, one of each of flavors (db1, db2),
// with 20 transactions each for the snapshots, and the sinks' servers;
// bin is the sluice binary.
func newShardsEnv(t *testing.T, bin string, flavors []position.Flavor) *shardsEnv {
	t.Helper()
	ctx := context.Background()
	s := &shardsEnv{}
	for i, flavor := range flavors {
		db := testenv.StartT(t, testenv.Options{Flavor: flavor, ServerID: uint32(i + 1)})
		if err := db.Exec(ctx, workload.Schema...); err != nil {
			t.Fatal(err)
		}
		w := &workload.Writer{DB: db}
		if err := w.Txns(ctx, 20); err != nil {
			t.Fatal(err)
		}
		s.dbs, s.writers = append(s.dbs, db), append(s.writers, w)
	}
	e := &runEnv{db: s.dbs[0], dir: t.TempDir(), bin: bin}
	fileGlob := filepath.Join(e.dir, "out", "changes.*.jsonl")
	e.readers = map[string]func() ([]*codec.Event, error){
		"file": func() ([]*codec.Event, error) { return workload.ReadFileSink(fileGlob) },
	}
	kc := kafkaenv.Start(t, nil) // its own: the topics are the tables' names
	createTopics(t, kc.Brokers(), 3, "app.log", "app.kv", "app.bulk")
	s.kafka = kc.Brokers()[0]
	kr := newKafkaReader(t, kc.Brokers(), "app.log", "app.kv", "app.bulk")
	e.readers["kafka"] = func() ([]*codec.Event, error) {
		// As many messages as the file sink holds lines are expected
		// (counted, not decoded: decoding tens of thousands of lines
		// on every poll of a wait loop is slow under -race).
		return kr.read(fileLines(fileGlob))
	}
	r := testenv.StartRedis(t)
	s.redis = r.Addr()
	e.readers["redis"] = func() ([]*codec.Event, error) {
		return readRedisStreams(r.Addr(), "s:app.log", "s:app.kv", "s:app.bulk")
	}
	s.runEnv = e
	return s
}

// writeConfig writes the pipeline's config (pipeline "shards", alignment
// on, small batches so that large transactions span them) to e.config,
// with extra appended.
func (s *shardsEnv) writeConfig(t *testing.T, extra string) {
	t.Helper()
	var srcs []string
	for i, db := range s.dbs {
		url := db.URL()
		if u, ok := s.urls[i]; ok {
			url = u
		}
		srcs = append(srcs, fmt.Sprintf("  - name: db%d\n    url: %s\n    server_id: %d\n    tables: [app.*]\n    snapshot: {chunk_rows: 10}\n    catch_up_wait: 5s", i+1, url, 911+i))
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
%s
`, strings.Join(srcs, "\n"), filepath.Join(s.dir, "out", "changes.jsonl"), s.kafka, s.redis, filepath.Join(s.dir, "ckpt.json"), extra)
	s.config = filepath.Join(s.dir, "sluice.yaml")
	if err := os.WriteFile(s.config, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
}

// waitSources waits until every sink holds n[i] app.log rows of source i.
func (s *shardsEnv) waitSources(t *testing.T, n []int, log fmt.Stringer) {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for name, read := range s.readers {
		for {
			evs, err := read()
			ok := err == nil
			for i := range s.dbs {
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

// load writes to both servers until the returned function is called,
// which returns each server's number of transactions. One transaction in
// twenty is large enough to span batches.
func (s *shardsEnv) load(t *testing.T) func() []int {
	ctx := context.Background()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	errs := make([]error, len(s.writers))
	for i, w := range s.writers {
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
					err = w.BulkTxn(ctx, 100+rand.IntN(200))
				} else {
					err = w.Txns(ctx, 1+rand.IntN(3))
				}
				if err != nil && s.onWriteError != nil {
					err = s.onWriteError(i, err)
				}
				if err != nil {
					errs[i] = err
					return
				}
				if s.pace > 0 {
					time.Sleep(s.pace)
				} else {
					time.Sleep(time.Duration(rand.IntN(4)) * time.Millisecond)
				}
			}
		}()
	}
	return func() []int {
		close(stop)
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
		return []int{s.writers[0].N(), s.writers[1].N()}
	}
}

func (s *shardsEnv) progress() string {
	return fmt.Sprintf("%d and %d transactions", s.writers[0].N(), s.writers[1].N())
}

// checkSources checks that every sink holds each source's totals[i]
// transactions exactly once, in order, and that each source's tables
// rebuilt from the output equal the server's.
func (s *shardsEnv) checkSources(t *testing.T, totals []int, log fmt.Stringer) {
	t.Helper()
	failed := false
	for name, read := range s.readers {
		evs, err := read()
		if err != nil {
			t.Errorf("sink %s: %v", name, err)
			failed = true
			continue
		}
		ok := true
		for i, db := range s.dbs {
			if err := workload.CheckSource(context.Background(), db, evs, fmt.Sprintf("db%d", i+1), totals[i]); err != nil {
				t.Errorf("sink %s: %v", name, err)
				ok, failed = false, true
			}
		}
		if ok {
			t.Logf("sink %s: %d messages; %d and %d transactions of the two sources, each exactly once", name, len(evs), totals[0], totals[1])
		}
	}
	if failed {
		t.Fatalf("sluice's log:\n%s", log.String())
	}
}

// TestRunKill9ManySources: two servers in one pipeline under continuous
// writes, with transactions large enough to span batches; kill -9 `sluice
// run` at random moments and restart it. Every sink (file, Kafka, Redis
// streams) then holds every transaction of each source exactly once, each
// source in its order, and each source's tables rebuilt from the output
// equal the server's.
func TestRunKill9ManySources(t *testing.T) { forEachShardMix(t, testRunKill9ManySources) }

func testRunKill9ManySources(t *testing.T, bin string, flavors []position.Flavor) {
	s := newShardsEnv(t, bin, flavors)
	s.writeConfig(t, "")
	log := &syncBuffer{}
	cmd := s.start(t, log)
	s.waitSources(t, []int{20, 20}, log)
	stop := s.load(t)
	cmd = s.killRestart(t, cmd, log, s.progress)
	totals := stop()
	s.waitSources(t, totals, log)
	_ = cmd.Process.Signal(syscall.SIGTERM)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("sluice run after SIGTERM: %v\n%s", err, log.String())
	}
	t.Logf("restarts where a sink held part of a transaction: %d", strings.Count(log.String(), "a sink holds part of a transaction"))
	s.checkSources(t, totals, log)
}

// TestHAFailoverManySources: the two-source pipeline run by two replicas
// with an etcd coordinator; under continuous writes the leader is killed
// -9 again and again and comes back as a follower. After every failover
// the other replica leads with a higher epoch and resumes each source
// from the checkpoint in etcd: every sink holds every transaction of each
// source exactly once.
func TestHAFailoverManySources(t *testing.T) {
	bin := buildSluice(t)
	testenv.ForEachFlavor(t, func(t *testing.T, f position.Flavor) {
		testHAFailoverManySources(t, bin, []position.Flavor{f, f})
	})
}

func testHAFailoverManySources(t *testing.T, bin string, flavors []position.Flavor) {
	s := newShardsEnv(t, bin, flavors)
	h := withReplicas(t, s.runEnv, "shards", 2, func(extra string) { s.writeConfig(t, extra) })
	for _, r := range h.reps {
		r.start(t, h.bin)
	}
	lead, epoch := h.leader(t, 30*time.Second)
	s.waitSources(t, []int{20, 20}, h.logs())
	stop := s.load(t)
	for round := range 3 {
		time.Sleep(time.Duration(500+rand.IntN(1000)) * time.Millisecond)
		lead.kill()
		next, e2 := h.leader(t, 15*time.Second)
		t.Logf("failover %d after %s: replica-%d (epoch %d) killed; replica-%d leads with epoch %d", round+1, s.progress(), lead.n, epoch, next.n, e2)
		if e2 <= epoch {
			t.Fatalf("the new epoch %d is not above the old %d", e2, epoch)
		}
		lead.start(t, h.bin) // back as a follower
		lead, epoch = next, e2
	}
	totals := stop()
	s.waitSources(t, totals, h.logs())
	for _, r := range h.reps {
		r.kill()
	}
	s.checkSources(t, totals, h.logs())
}

// forEachShardMix runs fn on two shards of each flavor, then on a MariaDB
// shard and a MySQL shard in one pipeline (testenv.ForEachFlavorMix).
func forEachShardMix(t *testing.T, fn func(t *testing.T, bin string, flavors []position.Flavor)) {
	testenv.ForEachFlavorMix(t, func(t *testing.T, flavorOf func(int) position.Flavor) {
		fn(t, buildSluice(t), []position.Flavor{flavorOf(0), flavorOf(1)})
	})
}

// fileLines counts the complete lines of the file sink's segments (glob).
func fileLines(glob string) int {
	paths, _ := filepath.Glob(glob)
	n := 0
	for _, p := range paths {
		if b, err := os.ReadFile(p); err == nil {
			n += bytes.Count(b, []byte("\n"))
		}
	}
	return n
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
