package pipeline_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/sluice-cdc/sluice/checkpoint"
	"github.com/sluice-cdc/sluice/internal/testenv"
	"github.com/sluice-cdc/sluice/internal/workload"
	"github.com/sluice-cdc/sluice/pipeline"
	"github.com/sluice-cdc/sluice/position"
	"github.com/sluice-cdc/sluice/sink/file"
)

// TestSourceRemovedLeavingOne: a pipeline of two sources stops with its
// sink holding, past the checkpoint, a transaction of the second source
// (the sink's highest sequence numbers are that source's); it restarts
// with the first source alone, which then writes. Every row of the first
// source reaches the sink, once. (The one source left used to be numbered
// from its own last end, below the removed source's numbers, and its next
// rows were skipped as if the sink held them.)
func TestSourceRemovedLeavingOne(t *testing.T) {
	testenv.ForEachFlavor(t, func(t *testing.T, f position.Flavor) {
		shards := startShards(t, 2, func(int) position.Flavor { return f })
		dir := t.TempDir()
		out, err := file.New("out", file.Config{Path: filepath.Join(dir, "out", "out.jsonl")}, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { out.Close() })
		store := &frozenStore{FileStore: checkpoint.FileStore{Path: filepath.Join(dir, "ckpt.json")}}
		run := func(srcs ...pipeline.SourceConfig) *running {
			return startRunning(t, pipeline.Config{
				Name: "removed", Sources: srcs, Sinks: []pipeline.Sink{out}, Store: store,
				CheckpointEvery: 50 * time.Millisecond, RetryMin: 10 * time.Millisecond,
			})
		}
		ctx := context.Background()
		// waitRows waits until the sink holds want1 rows of shard1 and
		// want2 of shard2, failing on a repeat or a number out of order.
		waitRows := func(want1, want2 int) {
			t.Helper()
			deadline := time.Now().Add(30 * time.Second)
			for {
				evs, err := workload.ReadFileSink(filepath.Join(dir, "out", "out.*.jsonl"))
				if err != nil {
					t.Fatal(err)
				}
				seen := map[string]bool{}
				got := map[string]int{}
				var last uint64
				for _, ev := range evs {
					if ev.Sluice.Seq <= last {
						t.Fatalf("seq %d after %d", ev.Sluice.Seq, last)
					}
					last = ev.Sluice.Seq
					if ev.IsDDL() || ev.Source.Table != "t" {
						continue
					}
					k := ev.Sluice.Source + ":" + string(ev.After["id"])
					if seen[k] {
						t.Fatalf("source %s row id %s twice (seq %d)", ev.Sluice.Source, ev.After["id"], ev.Sluice.Seq)
					}
					seen[k] = true
					got[ev.Sluice.Source]++
				}
				if got["shard1"] == want1 && got["shard2"] == want2 {
					return
				}
				if time.Now().After(deadline) {
					t.Fatalf("the sink holds %v, want %d rows of shard1 and %d of shard2", got, want1, want2)
				}
				time.Sleep(20 * time.Millisecond)
			}
		}

		// Run 1, both sources: their rows checkpointed, then one more
		// transaction of shard2 in the sink and not in the checkpoint.
		r := run(appTSource(t, shards[0]), appTSource(t, shards[1]))
		insertT(t, shards[0], 3)
		insertT(t, shards[1], 3)
		waitRows(3, 3)
		time.Sleep(200 * time.Millisecond) // a checkpoint covers them
		store.frozen.Store(true)
		if err := shards[1].db.Exec(ctx, "INSERT INTO app.t (v) VALUES (1), (1)"); err != nil {
			t.Fatal(err)
		}
		waitRows(3, 5)
		r.stop()
		<-r.done
		store.frozen.Store(false)

		// Run 2, shard1 alone: its new rows all arrive.
		r = run(appTSource(t, shards[0]))
		insertT(t, shards[0], 3)
		waitRows(6, 5)
		time.Sleep(200 * time.Millisecond)
		waitRows(6, 5)
		r.stop()
		if err := <-r.done; err != nil {
			t.Fatalf("run 2: %v", err)
		}
	})
}
