package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-cdc/sluice/codec"
	"github.com/sluice-cdc/sluice/internal/testenv"
	"github.com/sluice-cdc/sluice/internal/workload"
	"github.com/sluice-cdc/sluice/position"
)

// TestRunSourceFailover: `sluice run` on a source listed as a primary and
// its GTID replica. The primary dies while sluice is down too (kill -9);
// the replica is promoted and written to; sluice restarts, finds its
// checkpoint and its sinks' positions to be the old server's, resumes on
// the new one by GTID, and every sink (file, Kafka) holds every
// transaction exactly once.
func TestRunSourceFailover(t *testing.T) {
	testenv.ForEachFlavor(t, func(t *testing.T, flavor position.Flavor) {
		ctx := context.Background()
		primary := testenv.StartT(t, testenv.Options{Flavor: flavor, ServerID: 1})
		replica := testenv.StartT(t, testenv.Options{Flavor: flavor, ServerID: 2})
		if err := replica.ReplicateFrom(ctx, primary); err != nil {
			t.Fatal(err)
		}
		if err := primary.Exec(ctx, workload.Schema...); err != nil {
			t.Fatal(err)
		}
		e := &runEnv{db: primary, dir: t.TempDir(), bin: buildSluice(t), w: &workload.Writer{DB: primary}}
		e.readers = map[string]func() ([]*codec.Event, error){
			"file": func() ([]*codec.Event, error) {
				return workload.ReadFileSink(filepath.Join(e.dir, "out", "changes.*.jsonl"))
			},
		}
		e.withKafka(t)
		e.url = strings.Replace(primary.URL(), primary.Addr(), primary.Addr()+","+replica.Addr(), 1)
		if err := e.w.Txns(ctx, 20); err != nil { // rows for the snapshot
			t.Fatal(err)
		}
		e.writeConfig(t, "")
		log := &syncBuffer{}
		cmd := e.start(t, log)
		e.waitAll(t, 20, log)
		if err := e.w.Txns(ctx, 30); err != nil {
			t.Fatal(err)
		}
		e.waitAll(t, 50, log)
		if err := replica.WaitCaughtUp(ctx, primary); err != nil {
			t.Fatal(err)
		}
		// sluice and the primary die; the replica is promoted.
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if err := primary.Kill(); err != nil {
			t.Fatal(err)
		}
		if err := replica.Promote(ctx); err != nil {
			t.Fatal(err)
		}
		e.db, e.w.DB = replica, replica
		if err := e.w.Txns(ctx, 30); err != nil {
			t.Fatal(err)
		}
		cmd = e.start(t, log)
		e.waitAll(t, 80, log)
		if !strings.Contains(log.String(), "another server than the saved position's") {
			t.Errorf("the log does not say the source is another server:\n%s", log.String())
		}
		// Once more across positions of both servers.
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if err := e.w.Txns(ctx, 20); err != nil {
			t.Fatal(err)
		}
		cmd = e.start(t, log)
		e.waitAll(t, 100, log)
		_ = cmd.Process.Signal(syscall.SIGTERM)
		if err := cmd.Wait(); err != nil {
			t.Fatalf("sluice run after SIGTERM: %v\n%s", err, log.String())
		}
		e.checkAll(t, 100)
	})
}

// TestHAFailoverSourceFailover: a two-source pipeline run by two HA
// replicas, under continuous writes to both sources. The first source is
// a primary with a GTID replica, listed as `primary,replica`; sluice
// streams from the primary through a link 100 ms slower than the replica's,
// so that whatever sluice has read the replica has received. The primary
// is killed -9 under load and the replica promoted (after applying what
// it received); the writer goes on there, numbering after the last
// transaction the replica has (what it never received is lost by the
// database, as without semi-synchronous replication). The leading sluice
// goes on from the replica by GTID; then the leader is killed and its
// successor resumes from the checkpoint and the sinks, whose positions
// name either server. Every sink holds exactly the transactions of each
// source's surviving server, each once, in order.
func TestHAFailoverSourceFailover(t *testing.T) {
	bin := buildSluice(t)
	testenv.ForEachFlavor(t, func(t *testing.T, f position.Flavor) {
		ctx := context.Background()
		s := newShardsEnv(t, bin, []position.Flavor{f, f})
		primary := s.dbs[0]
		replica := testenv.StartT(t, testenv.Options{Flavor: f, ServerID: 10})
		if err := replica.ReplicateFrom(ctx, primary); err != nil {
			t.Fatal(err)
		}
		link := testenv.NewFaultProxy(t, primary.Addr())
		s.urls = map[int]string{0: strings.Replace(primary.URL(), primary.Addr(), link.Addr()+","+replica.Addr(), 1)}
		s.pace = 20 * time.Millisecond // the load stays below what sluice delivers under -race
		promoted := make(chan struct{})
		s.onWriteError = func(i int, err error) error {
			if i != 0 {
				return err
			}
			select {
			case <-promoted:
				return nil // the writer was moved to the replica
			case <-time.After(60 * time.Second):
				return fmt.Errorf("a write to the first source failed and no failover followed: %w", err)
			}
		}
		h := withReplicas(t, s.runEnv, "shards", 2, func(extra string) { s.writeConfig(t, extra) })
		for _, r := range h.reps {
			r.start(t, h.bin)
		}
		lead, epoch := h.leader(t, 30*time.Second)
		s.waitSources(t, []int{20, 20}, h.logs())
		// Slower than the replica's own link from now on.
		if err := link.SetLatency(100 * time.Millisecond); err != nil {
			t.Fatal(err)
		}
		stop := s.load(t)
		// Streaming from the primary (the file sink is the quickest to read;
		// reading every sink while the load goes on is slower than it).
		for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(100 * time.Millisecond) {
			evs, err := s.readers["file"]()
			if err == nil && countSource(evs, "db1") >= 60 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the file sink lacks the first source's streamed rows after 60 s:\n%s", tailLines(h.logs().String(), 40))
			}
		}

		time.Sleep(time.Duration(rand.IntN(1000)) * time.Millisecond)

		if err := primary.Kill(); err != nil {
			t.Fatal(err)
		}
		if err := replica.Promote(ctx); err != nil {
			t.Fatal(err)
		}
		lost, err := s.writers[0].MoveTo(ctx, replica)
		if err != nil {
			t.Fatal(err)
		}
		s.dbs[0] = replica
		close(promoted)
		t.Logf("primary killed after %s; the promoted replica lacks %d of the writer's transactions", s.progress(), lost)

		time.Sleep(time.Duration(1000+rand.IntN(1000)) * time.Millisecond)
		lead.kill()
		next, e2 := h.leader(t, 15*time.Second)
		if e2 <= epoch {
			t.Fatalf("the new epoch %d is not above the old %d", e2, epoch)
		}
		t.Logf("after %s: replica-%d killed, replica-%d leads with epoch %d", s.progress(), lead.n, next.n, e2)
		lead.start(t, h.bin)
		time.Sleep(time.Second)

		totals := stop()
		s.waitSources(t, totals, h.logs())
		for _, r := range h.reps {
			r.kill()
		}
		logs := h.logs().String()
		if !strings.Contains(logs, "another server than the saved position's") {
			t.Errorf("no replica logged that the first source is another server:\n%s", tailLines(logs, 60))
		}
		// The failover is the reader's to handle: no replica stops for it.
		if i := strings.Index(logs, "\nsluice: "); i >= 0 {
			line, _, _ := strings.Cut(logs[i+1:], "\n")
			t.Errorf("a replica stopped with an error: %s", line)
		}
		s.checkSources(t, totals, h.logs())
	})
}
