package main

import (
	"context"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

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
