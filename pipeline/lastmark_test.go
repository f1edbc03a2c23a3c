package pipeline_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-cdc/sluice/binlog"
	"github.com/sluice-cdc/sluice/codec"
	"github.com/sluice-cdc/sluice/internal/testenv"
	"github.com/sluice-cdc/sluice/internal/workload"
	"github.com/sluice-cdc/sluice/pipeline"
	"github.com/sluice-cdc/sluice/position"
	"github.com/sluice-cdc/sluice/sink/file"
)

// crashAfterLast is a sink that stops the run right after it has stored
// the batch holding the snapshot's `last` row, before the pipeline saves
// that batch's checkpoint: kill -9 in that window.
type crashAfterLast struct {
	pipeline.Sink
	stop    context.CancelFunc
	crashed atomic.Bool
}

func (c *crashAfterLast) Write(ctx context.Context, b *pipeline.Batch) (string, error) {
	off, err := c.Sink.Write(ctx, b)
	if err != nil || c.crashed.Load() {
		return off, err
	}
	for i := range b.Messages {
		if ev, derr := codec.DecodeLine(b.Messages[i].Value); derr == nil && ev.Source.Snapshot == "last" {
			c.crashed.Store(true)
			c.stop()
			return "", errors.New("crashed after the write of the last snapshot row")
		}
	}
	return off, nil
}

// TestSnapshotLastMarkOnceAfterCrash: the process dies after the sink took
// the batch holding the snapshot's `last` row and before that batch's
// checkpoint; the restart reads the rows of that batch again (snapshot
// rows are delivered at least once) but marks none of them `last`: the
// sink holds one `last` row. Before, the re-read row was marked again.
func TestSnapshotLastMarkOnceAfterCrash(t *testing.T) {
	testenv.ForEachFlavor(t, func(t *testing.T, flavor position.Flavor) {
		for _, method := range []string{"consistent", "watermark"} {
			t.Run(method, func(t *testing.T) { snapshotLastMarkOnceAfterCrash(t, flavor, method) })
		}
	})
}

func snapshotLastMarkOnceAfterCrash(t *testing.T, flavor position.Flavor, method string) {
	e, _ := setup(t, flavor)
	from, seq := e.db.SeqFrom(1, 500)
	if err := e.db.Exec(context.Background(), append(append([]string{"USE app", "CREATE TABLE app.big (id INT PRIMARY KEY, pad VARCHAR(100) NOT NULL)"}, seq...),
		"INSERT INTO app.big SELECT seq, REPEAT('x', 80) FROM "+from)...); err != nil {
		t.Fatal(err)
	}
	src, err := binlog.ParseSourceURL(e.db.URL())
	if err != nil {
		t.Fatal(err)
	}
	src.Tables, _ = binlog.ParseFilter("app.big")
	out := filepath.Join(e.dir, "out.jsonl")
	run := func(s pipeline.Sink) (chan error, context.CancelFunc) {
		p, err := pipeline.New(pipeline.Config{
			Name:            "test",
			Source:          pipeline.SourceConfig{Name: "db1", Binlog: src, Snapshot: pipeline.SnapshotConfig{Mode: "initial", Method: method, ChunkRows: 50}},
			Sinks:           []pipeline.Sink{s},
			Store:           e.store,
			BatchBytes:      4 << 10,
			CheckpointEvery: 50 * time.Millisecond,
			RetryMin:        10 * time.Millisecond,
		})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		if c, ok := s.(*crashAfterLast); ok {
			c.stop = cancel
		}
		done := make(chan error, 1)
		finished := make(chan struct{})
		go func() {
			defer close(finished)
			done <- p.Run(ctx)
		}()
		t.Cleanup(func() {
			cancel()
			<-finished
		})
		return done, cancel
	}
	fs, err := file.New("out", file.Config{Path: out}, nil)
	if err != nil {
		t.Fatal(err)
	}
	crash := &crashAfterLast{Sink: fs}
	done, _ := run(crash)
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		t.Fatal("the first run did not reach the last snapshot row")
	}
	fs.Close()
	if !crash.crashed.Load() {
		t.Fatal("the first run stopped before the last snapshot row")
	}
	fs2, err := file.New("out", file.Config{Path: out}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fs2.Close() }) // after the run's cleanup has stopped it
	_, cancel := run(fs2)
	defer cancel()
	settled := false
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		evs, err := workload.ReadFileSink(filepath.Join(e.dir, "out.*.jsonl"))
		if err != nil {
			t.Fatal(err)
		}
		ids, last := map[string]bool{}, 0
		for _, ev := range evs {
			if ev.Source.Table != "big" || ev.Op != "r" {
				continue
			}
			ids[string(ev.After["id"])] = true
			if ev.Source.Snapshot == "last" {
				last++
			}
		}
		if last > 1 {
			t.Fatalf("%d rows marked last, want 1", last)
		}
		// Every row, the last one marked, and the restart's snapshot done.
		if len(ids) == 500 && last == 1 && !snapshotPending(e) {
			if settled {
				return
			}
			settled = true // once more, after anything repeated had time to come
			time.Sleep(300 * time.Millisecond)
			continue
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the restart the sink holds %d of 500 rows, %d marked last", len(ids), last)
		}
	}
}

// snapshotPending reports whether the checkpoint holds an unfinished
// snapshot.
func snapshotPending(e *env) bool {
	b, _ := os.ReadFile(e.store.Path)
	return bytes.Contains(b, []byte(`"snapshots"`))
}
