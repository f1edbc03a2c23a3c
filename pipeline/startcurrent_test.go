package pipeline_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-cdc/sluice/binlog"
	"github.com/sluice-cdc/sluice/checkpoint"
	"github.com/sluice-cdc/sluice/internal/testenv"
	"github.com/sluice-cdc/sluice/internal/workload"
	"github.com/sluice-cdc/sluice/pipeline"
	"github.com/sluice-cdc/sluice/position"
	"github.com/sluice-cdc/sluice/sink/file"
)

// heldStore is a checkpoint store whose second save (the first after a
// run's claim) waits until release is closed: the writer is busy meanwhile
// and the batches read queue up behind it, as under load.
type heldStore struct {
	checkpoint.FileStore
	saves   atomic.Int32
	release chan struct{}
}

func (s *heldStore) Save(ctx context.Context, cp checkpoint.Checkpoint, expected uint64) (uint64, error) {
	if s.saves.Add(1) == 2 {
		select {
		case <-s.release:
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
	return s.FileStore.Save(ctx, cp, expected)
}

// crashFirstWrite is a sink that, at its first Write, stores only the
// batch's first message and stops the run, as kill -9 in the middle of
// that write would: no checkpoint follows it.
type crashFirstWrite struct {
	pipeline.Sink
	stop    context.CancelFunc
	crashed atomic.Bool
}

func (c *crashFirstWrite) Write(ctx context.Context, b *pipeline.Batch) (string, error) {
	if !c.crashed.Swap(true) {
		if _, err := c.Sink.Write(ctx, &pipeline.Batch{Epoch: b.Epoch, Messages: b.Messages[:1]}); err != nil {
			return "", err
		}
		c.stop()
		return "", errors.New("crashed in the middle of the first write")
	}
	return c.Sink.Write(ctx, b)
}

// TestManySourcesStartCurrentCrash: two sources with start_at current;
// the second one's start is read while the writer is busy saving the
// first one's, and writes begin on both: the process dies in the middle of
// the first write to the sink, before its checkpoint. After the restart
// every row committed after the first start is in the sink once. Before
// commit c03dfa2 the second start went out merged with the transactions
// queued after it, was lost with that write, and the restart began that
// source at a newer current position: the rows between were lost.
func TestManySourcesStartCurrentCrash(t *testing.T) {
	testenv.ForEachFlavor(t, func(t *testing.T, f position.Flavor) {
		shards := startShards(t, 2, func(int) position.Flavor { return f })
		startCurrentCrash(t, shards)
	})
}

func startCurrentCrash(t *testing.T, shards []*shard) {
	ctx := context.Background()
	dir := t.TempDir()
	out := filepath.Join(dir, "out", "out.jsonl")
	var srcs []pipeline.SourceConfig
	for i, s := range shards {
		u := s.db.URL()
		if i == 1 {
			// The second source starts late (its connection is slow).
			u = s.proxy.URL(s.db.URL(), s.db.Addr())
		}
		src, err := binlog.ParseSourceURL(u)
		if err != nil {
			t.Fatal(err)
		}
		src.Heartbeat = 500 * time.Millisecond
		src.MaxBackoff = 500 * time.Millisecond
		if src.Tables, err = binlog.ParseFilter("app.*"); err != nil {
			t.Fatal(err)
		}
		src.StartAt = binlog.StartCurrent
		srcs = append(srcs, pipeline.SourceConfig{Name: s.name, Binlog: src, Snapshot: pipeline.SnapshotConfig{Mode: "never"}})
	}
	store := &heldStore{FileStore: checkpoint.FileStore{Path: filepath.Join(dir, "ckpt.json")}, release: make(chan struct{})}
	run := func(s pipeline.Sink, st checkpoint.Store) (*running, chan struct{}) {
		p, err := pipeline.New(pipeline.Config{
			Name:            "startcur",
			Sources:         srcs,
			Sinks:           []pipeline.Sink{s},
			Store:           st,
			CheckpointEvery: 50 * time.Millisecond,
			RetryMin:        10 * time.Millisecond,
		})
		if err != nil {
			t.Fatal(err)
		}
		rctx, cancel := context.WithCancel(ctx)
		if c, ok := s.(*crashFirstWrite); ok {
			c.stop = cancel
		}
		r := &running{p: p, done: make(chan error, 1), stop: cancel}
		finished := make(chan struct{})
		go func() {
			defer close(finished)
			r.done <- p.Run(rctx)
		}()
		t.Cleanup(func() {
			cancel()
			<-finished
		})
		return r, finished
	}
	streams := func(r *running, i int) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for !r.p.Status().Sources[i].Streaming {
			select {
			case err := <-r.done:
				t.Fatalf("pipeline stopped: %v", err)
			default:
			}
			if time.Now().After(deadline) {
				t.Fatalf("source %d not streaming after 30 s", i)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	// Transactions of three rows, one every 20 ms, on a shard.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	rows := make([]atomic.Int64, len(shards))
	loadErr := make(chan error, len(shards))
	load := func(i int) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				case <-time.After(20 * time.Millisecond):
				}
				if err := shards[i].db.Exec(ctx, "INSERT INTO app.t (v) VALUES (1),(1),(1)"); err != nil {
					loadErr <- err
					return
				}
				rows[i].Add(3)
			}
		}()
	}
	defer func() {
		select {
		case <-stop:
		default:
			close(stop)
		}
		wg.Wait()
	}()

	if err := shards[1].proxy.SetLatency(200 * time.Millisecond); err != nil {
		t.Fatal(err)
	}
	fs, err := file.New("out", file.Config{Path: out}, nil)
	if err != nil {
		t.Fatal(err)
	}
	crash := &crashFirstWrite{Sink: fs}
	first, finished := run(crash, store)
	// The first source's start is being saved (held); the second's is
	// read meanwhile and queues up behind it, and so does every row
	// written from now on (after both starts).
	streams(first, 0)
	streams(first, 1)
	load(0)
	load(1)
	time.Sleep(700 * time.Millisecond)
	close(store.release)
	select {
	case <-finished:
	case <-time.After(30 * time.Second):
		t.Fatal("the first run did not stop at its first write")
	}
	if !crash.crashed.Load() {
		t.Fatalf("the first run stopped before its first write: %v", <-first.done)
	}
	fs.Close()

	// The restart (writes go on meanwhile), with a new sink (a new
	// process) and the checkpoint as the first run left it.
	time.Sleep(300 * time.Millisecond)
	if err := shards[1].proxy.SetLatency(0); err != nil {
		t.Fatal(err)
	}
	fs2, err := file.New("out", file.Config{Path: out}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fs2.Close() }) // after the run's cleanup has stopped it
	second, _ := run(fs2, &store.FileStore)
	second.waitStreaming(t)
	time.Sleep(300 * time.Millisecond)
	close(stop)
	wg.Wait()
	select {
	case err := <-loadErr:
		t.Fatal(err)
	default:
	}
	want := map[string]int{}
	for i, s := range shards {
		want[s.name] = int(rows[i].Load())
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		got, err := fileRows(filepath.Join(dir, "out", "out.*.jsonl"))
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(got) == fmt.Sprint(want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the sink holds rows %v of app.t, want %v", got, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// fileRows counts the rows of app.t per source in the file sink, with an
// error for a row repeated, lost or out of order (ids are 1, 2, ... per
// source).
func fileRows(glob string) (map[string]int, error) {
	evs, err := workload.ReadFileSink(glob)
	if err != nil {
		return nil, err
	}
	got := map[string]int{}
	for _, ev := range evs {
		if ev.IsDDL() || ev.Source.Table != "t" || ev.Sluice == nil {
			continue
		}
		src := ev.Sluice.Source
		id, _ := strconv.Atoi(string(ev.After["id"]))
		if id != got[src]+1 {
			return nil, fmt.Errorf("%s: row %d after row %d (seq %d, epoch %d): lost, repeated or reordered", src, id, got[src], ev.Sluice.Seq, ev.Sluice.Epoch)
		}
		got[src] = id
	}
	return got, nil
}
