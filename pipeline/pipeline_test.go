package pipeline_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sluice-cdc/sluice/binlog"
	"github.com/sluice-cdc/sluice/checkpoint"
	"github.com/sluice-cdc/sluice/codec"
	"github.com/sluice-cdc/sluice/internal/testenv"
	"github.com/sluice-cdc/sluice/internal/workload"
	"github.com/sluice-cdc/sluice/pipeline"
	"github.com/sluice-cdc/sluice/position"
	"github.com/sluice-cdc/sluice/sink/file"
)

func readSink(t *testing.T, dir string) []*codec.Event {
	t.Helper()
	evs, err := workload.ReadFileSink(filepath.Join(dir, "out.*.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	return evs
}

type env struct {
	db    *testenv.Server
	dir   string
	store *checkpoint.FileStore
}

func (e *env) pipeline(t *testing.T, mode string) (*pipeline.Pipeline, *file.Sink) {
	t.Helper()
	src, err := binlog.ParseSourceURL(e.db.URL())
	if err != nil {
		t.Fatal(err)
	}
	src.ServerID = 777
	if src.Tables, err = binlog.ParseFilter("app.*"); err != nil {
		t.Fatal(err)
	}
	sink, err := file.New("out", file.Config{Path: filepath.Join(e.dir, "out.jsonl"), MaxBytes: 64 << 10}, nil)
	if err != nil {
		t.Fatal(err)
	}
	p, err := pipeline.New(pipeline.Config{
		Name: "test",
		Source: pipeline.SourceConfig{Name: "db1", Binlog: src,
			Snapshot: pipeline.SnapshotConfig{Mode: "initial", ChunkRows: 50}},
		Sinks:           []pipeline.Sink{sink},
		Store:           e.store,
		BatchBytes:      4 << 10,
		CheckpointEvery: 50 * time.Millisecond,
		RetryMin:        10 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	return p, sink
}

// start runs a pipeline in the background; stop cancels it and returns
// its error.
func (e *env) start(t *testing.T) (stop func() error) {
	p, sink := e.pipeline(t, "initial")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	return func() error {
		cancel()
		err := <-done
		sink.Close()
		return err
	}
}

// waitFor waits until the sink holds n insert events into app.log.
func waitFor(t *testing.T, dir string, n int) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		got := workload.Count(readSink(t, dir))
		if got >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the sink holds %d of %d log rows after 60 s", got, n)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func check(t *testing.T, e *env, n int) {
	t.Helper()
	if err := workload.Check(context.Background(), e.db, readSink(t, e.dir), n); err != nil {
		t.Fatal(err)
	}
}

type writer struct{ w *workload.Writer }

func (w *writer) txns(t *testing.T, count int) {
	t.Helper()
	if err := w.w.Txns(context.Background(), count); err != nil {
		t.Fatal(err)
	}
}

// setup starts a server of flavor with the workload's tables.
func setup(t *testing.T, flavor position.Flavor) (*env, *writer) {
	return setupOn(t, testenv.Options{Flavor: flavor})
}

// setupOn is setup on a server started with opts.
func setupOn(t *testing.T, opts testenv.Options) (*env, *writer) {
	db := testenv.StartT(t, opts)
	if err := db.Exec(context.Background(), workload.Schema...); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	return &env{db: db, dir: dir, store: &checkpoint.FileStore{Path: filepath.Join(dir, "ckpt.json")}}, &writer{w: &workload.Writer{DB: db}}
}

// TestSnapshotThenStreamExactlyOnce: rows before the start come from the
// snapshot, the rest from the binlog, each once, across a clean restart.
func TestSnapshotThenStreamExactlyOnce(t *testing.T) {
	testenv.ForEachFlavor(t, func(t *testing.T, flavor position.Flavor) { snapshotThenStreamExactlyOnce(t, flavor) })
}

func snapshotThenStreamExactlyOnce(t *testing.T, flavor position.Flavor) {
	e, w := setup(t, flavor)
	w.txns(t, 120)
	stop := e.start(t)
	w.txns(t, 80)
	waitFor(t, e.dir, 200)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	w.txns(t, 50)
	stop = e.start(t)
	waitFor(t, e.dir, 250)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	check(t, e, 250)
}

// TestRecoveryFromSinkAfterLostCheckpoint: the checkpoint is rolled back
// to an old version (as if the process died after the sink took batches
// and before it saved): the restart scans the sink and neither repeats
// nor loses a transaction.
func TestRecoveryFromSinkAfterLostCheckpoint(t *testing.T) {
	testenv.ForEachFlavor(t, func(t *testing.T, flavor position.Flavor) { recoveryFromSinkAfterLostCheckpoint(t, flavor) })
}

func recoveryFromSinkAfterLostCheckpoint(t *testing.T, flavor position.Flavor) {
	e, w := setup(t, flavor)
	w.txns(t, 10)
	stop := e.start(t)
	waitFor(t, e.dir, 10)
	w.txns(t, 30)
	waitFor(t, e.dir, 40)
	// Wait for a checkpoint past the snapshot, then keep a copy of it.
	deadline := time.Now().Add(30 * time.Second)
	for {
		cp, err := e.store.Load(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if len(cp.Snapshot) == 0 && cp.LastSeq > 0 && !cp.Sources["db1"].IsZero() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no stream checkpoint: %+v", cp)
		}
		time.Sleep(20 * time.Millisecond)
	}
	old, err := os.ReadFile(e.store.Path)
	if err != nil {
		t.Fatal(err)
	}
	w.txns(t, 60)
	waitFor(t, e.dir, 100)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	// Roll back the checkpoint, keeping the version so the save succeeds.
	if err := os.WriteFile(e.store.Path, old, 0o644); err != nil {
		t.Fatal(err)
	}
	w.txns(t, 40)
	stop = e.start(t)
	waitFor(t, e.dir, 140)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	check(t, e, 140)
}

// TestCheckpointConflictFences: a second process that saves over the
// pipeline's checkpoint makes the first stop with ErrFenced.
func TestCheckpointConflictFences(t *testing.T) {
	testenv.ForEachFlavor(t, func(t *testing.T, flavor position.Flavor) { checkpointConflictFences(t, flavor) })
}

func checkpointConflictFences(t *testing.T, flavor position.Flavor) {
	e, w := setup(t, flavor)
	p, sink := e.pipeline(t, "initial")
	defer sink.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	w.txns(t, 5)
	waitFor(t, e.dir, 5)
	// Save as another writer would; the pipeline may save in between our
	// load and save, so retry on a conflict.
	for {
		cp, err := e.store.Load(ctx)
		if err != nil {
			t.Fatal(err)
		}
		cp.Epoch++
		_, err = e.store.Save(ctx, cp, cp.Version)
		if err == nil {
			break
		}
		if !errors.Is(err, checkpoint.ErrConflict) {
			t.Fatal(err)
		}
	}
	w.txns(t, 5)
	select {
	case err := <-done:
		if err == nil || !errorsIs(err, pipeline.ErrFenced) {
			t.Fatalf("Run returned %v, want ErrFenced", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the pipeline kept running after another writer saved its checkpoint")
	}
}

func errorsIs(err, target error) bool { return errors.Is(err, target) }

// TestStartCurrentSavedBeforeFirstTransaction: a pipeline that starts at
// the server's current position and stops before any transaction resumes
// from that position, not from a new "current": what was committed while
// it was down is delivered.
func TestStartCurrentSavedBeforeFirstTransaction(t *testing.T) {
	testenv.ForEachFlavor(t, func(t *testing.T, flavor position.Flavor) { startCurrentSavedBeforeFirstTransaction(t, flavor) })
}

func startCurrentSavedBeforeFirstTransaction(t *testing.T, flavor position.Flavor) {
	e, w := setup(t, flavor)
	w.txns(t, 3) // before the start: not wanted
	src, err := binlog.ParseSourceURL(e.db.URL())
	if err != nil {
		t.Fatal(err)
	}
	if src.Tables, err = binlog.ParseFilter("app.*"); err != nil {
		t.Fatal(err)
	}
	src.StartAt = binlog.StartCurrent
	// No heartbeat for a minute: heartbeats carry positions too, and would
	// save one before the first transaction after a while anyway.
	src.Heartbeat = time.Minute
	run := func(until func() bool) {
		t.Helper()
		sink, err := file.New("out", file.Config{Path: filepath.Join(e.dir, "out.jsonl")}, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer sink.Close()
		p, err := pipeline.New(pipeline.Config{
			Name:            "current",
			Source:          pipeline.SourceConfig{Name: "db1", Binlog: src, Snapshot: pipeline.SnapshotConfig{Mode: "never"}},
			Sinks:           []pipeline.Sink{sink},
			Store:           e.store,
			CheckpointEvery: 50 * time.Millisecond,
		})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- p.Run(ctx) }()
		deadline := time.Now().Add(15 * time.Second)
		for !until() {
			if time.Now().After(deadline) {
				cancel()
				<-done
				t.Fatalf("timed out; status %+v", p.Status())
			}
			time.Sleep(20 * time.Millisecond)
		}
		cancel()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			t.Fatal(err)
		}
	}
	// First run: stop as soon as the start position is in the checkpoint.
	run(func() bool {
		cp, err := e.store.Load(context.Background())
		return err == nil && !cp.Sources["db1"].IsZero()
	})
	w.txns(t, 5) // while it is down
	run(func() bool { return workload.Count(readSink(t, e.dir)) >= 5 })
	evs := readSink(t, e.dir)
	if got := workload.Count(evs); got != 5 {
		t.Fatalf("the sink holds %d log rows, want the 5 written while the pipeline was down", got)
	}
	for _, ev := range evs {
		if ev.Source.Table == "log" && string(ev.After["n"]) <= "3" && len(ev.After["n"]) == 1 {
			t.Fatalf("row n=%s was written before the first start", ev.After["n"])
		}
	}
}

// TestRecoveryCheckpointWithoutPosition: the process died after the sink
// took the snapshot and streamed transactions, and before any checkpoint
// named a position or a snapshot state (the checkpoint is rolled back to
// one without them, as the first ones are). The restart resumes after the
// last transaction end the sink holds: the snapshot is not read again
// (it was, whole, and an interval join fed by it emitted its pairs again)
// and no transaction is lost or repeated.
func TestRecoveryCheckpointWithoutPosition(t *testing.T) {
	testenv.ForEachFlavor(t, func(t *testing.T, flavor position.Flavor) {
		e, w := setup(t, flavor)
		w.txns(t, 30)
		stop := e.start(t)
		waitFor(t, e.dir, 30)
		w.txns(t, 20)
		waitFor(t, e.dir, 50)
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		cp, err := e.store.Load(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		bare := checkpoint.Checkpoint{Pipeline: cp.Pipeline, Version: cp.Version, Epoch: cp.Epoch, SavedAt: cp.SavedAt}
		b, err := json.Marshal(bare)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(e.store.Path, b, 0o644); err != nil {
			t.Fatal(err)
		}
		w.txns(t, 20)
		stop = e.start(t)
		waitFor(t, e.dir, 70)
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		check(t, e, 70)
	})
}

// TestHistoryDDLDuringSnapshotStart: with binlog_row_metadata=MINIMAL, a
// column renamed after the schema history captured the definitions and
// before the snapshot took its point is in neither the capture nor the
// stream; the history reads the binlog between the two, so the rows
// streamed after the snapshot carry the new name.
func TestHistoryDDLDuringSnapshotStart(t *testing.T) {
	testenv.ForEachFlavor(t, func(t *testing.T, flavor position.Flavor) {
		e, _ := setupOn(t, testenv.Options{Flavor: flavor, RowMetadata: "MINIMAL"})
		ctx := context.Background()
		if err := e.db.Exec(ctx, "CREATE TABLE app.h (id INT PRIMARY KEY, a INT)", "INSERT INTO app.h VALUES (1, 1)"); err != nil {
			t.Fatal(err)
		}
		pipeline.SetAfterCapture(func() {
			if err := e.db.Exec(ctx, "ALTER TABLE app.h RENAME COLUMN a TO b", "INSERT INTO app.h VALUES (2, 2)"); err != nil {
				t.Error(err)
			}
		})
		defer pipeline.SetAfterCapture(nil)
		src, err := binlog.ParseSourceURL(e.db.URL())
		if err != nil {
			t.Fatal(err)
		}
		src.ServerID = 779
		src.Tables, _ = binlog.ParseFilter("app.h")
		sink, err := file.New("out", file.Config{Path: filepath.Join(e.dir, "out.jsonl")}, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer sink.Close()
		p, err := pipeline.New(pipeline.Config{
			Name: "test",
			Source: pipeline.SourceConfig{Name: "db1", Binlog: src, Snapshot: pipeline.SnapshotConfig{Mode: "initial"},
				Schema: &checkpoint.FileSchemaStore{Path: checkpoint.SchemaPath(e.store.Path, "db1")}},
			Sinks:           []pipeline.Sink{sink},
			Store:           e.store,
			CheckpointEvery: 50 * time.Millisecond,
		})
		if err != nil {
			t.Fatal(err)
		}
		runCtx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- p.Run(runCtx) }()
		defer func() {
			cancel()
			if err := <-done; err != nil {
				t.Error(err)
			}
		}()
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			if cp, err := e.store.Load(ctx); err == nil && !cp.Sources["db1"].IsZero() && len(cp.Snapshots) == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("the snapshot did not finish")
			}
		}
		if err := e.db.Exec(ctx, "INSERT INTO app.h VALUES (3, 3)"); err != nil {
			t.Fatal(err)
		}
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			evs, _ := workload.ReadFileSink(filepath.Join(e.dir, "out.*.jsonl"))
			for _, ev := range evs {
				if ev.Op == "c" && string(ev.After["id"]) == "3" {
					if string(ev.After["b"]) != "3" || ev.After["a"] != nil {
						t.Fatalf("the streamed row has columns %v: want b=3 (the column was renamed before the snapshot's point)", ev.After)
					}
					return
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("row 3 not delivered: %d messages", len(evs))
			}
		}
	})
}
