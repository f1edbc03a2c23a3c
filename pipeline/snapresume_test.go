package pipeline_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/sluice-cdc/sluice/binlog"
	"github.com/sluice-cdc/sluice/internal/testenv"
	"github.com/sluice-cdc/sluice/pipeline"
	"github.com/sluice-cdc/sluice/position"
	"github.com/sluice-cdc/sluice/sink/file"
)

// TestSnapshotRecoveryStreamsOnce: a restart inside a snapshot read while
// streaming (the watermark method here; a resumed consistent snapshot is
// the same) from a checkpoint behind what the sink holds (a crash between
// a write and its checkpoint, widened by rolling the checkpoint back)
// delivers no streamed transaction twice: the source resumes after the
// last transaction end the sink holds, not at the checkpoint's position.
// Before, it resumed at the checkpoint and every transaction after it came
// again (seen after kill -9 as GTID 0-1-191 delivered in epoch 2 and 3).
func TestSnapshotRecoveryStreamsOnce(t *testing.T) {
	testenv.ForEachFlavor(t, func(t *testing.T, flavor position.Flavor) { snapshotRecoveryStreamsOnce(t, flavor) })
}

func snapshotRecoveryStreamsOnce(t *testing.T, flavor position.Flavor) {
	e, w := setup(t, flavor)
	from, seq := e.db.SeqFrom(1, 6000)
	if err := e.db.Exec(context.Background(), append(append([]string{"USE app", "CREATE TABLE app.big (id INT PRIMARY KEY, pad VARCHAR(100) NOT NULL)"}, seq...),
		"INSERT INTO app.big SELECT seq, REPEAT('x', 80) FROM "+from)...); err != nil {
		t.Fatal(err)
	}
	start := func() (stop func() error) {
		src, err := binlog.ParseSourceURL(e.db.URL())
		if err != nil {
			t.Fatal(err)
		}
		src.ServerID = 778
		src.Tables, _ = binlog.ParseFilter("app.*")
		sink, err := file.New("out", file.Config{Path: filepath.Join(e.dir, "out.jsonl"), MaxBytes: 256 << 10}, nil)
		if err != nil {
			t.Fatal(err)
		}
		p, err := pipeline.New(pipeline.Config{
			Name: "test",
			Source: pipeline.SourceConfig{Name: "db1", Binlog: src, Snapshot: pipeline.SnapshotConfig{
				Mode: "initial", Method: "watermark", ChunkRows: 50,
				// app.log rows all come from the stream: each must be there once.
				Where: map[string]string{"app.log": "id < 0"}}},
			Sinks:           []pipeline.Sink{sink},
			Store:           e.store,
			BatchBytes:      4 << 10,
			CheckpointEvery: 50 * time.Millisecond,
			RetryMin:        10 * time.Millisecond,
		})
		if err != nil {
			t.Fatal(err)
		}
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
	stop := start()
	// Writes all along, from when the snapshot's start is saved (app.log
	// rows from then on are streamed).
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if b, _ := os.ReadFile(e.store.Path); bytes.Contains(b, []byte(`"snapshots"`)) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no checkpoint of the snapshot's start")
		}
	}
	stopW := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stopW:
				return
			default:
			}
			w.txns(t, 1)
			time.Sleep(2 * time.Millisecond)
		}
	}()
	// A checkpoint inside the snapshot, after some streamed transactions.
	var old []byte
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		b, _ := os.ReadFile(e.store.Path)
		if bytes.Contains(b, []byte(`"snapshots"`)) && bytes.Contains(b, []byte(`"big"`)) && w.w.N() >= 20 {
			old = b
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no checkpoint inside the snapshot with transactions streamed: %s", b)
		}
	}
	// The sink goes on past it: more streamed transactions.
	n0 := w.w.N()
	waitFor(t, e.dir, n0+20)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(e.store.Path, old, 0o644); err != nil {
		t.Fatal(err)
	}
	stop = start()
	time.Sleep(500 * time.Millisecond)
	close(stopW)
	wg.Wait()
	n := w.w.N()
	waitFor(t, e.dir, n)
	// The snapshot finishes (its last row marked once), then stop.
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		b, _ := os.ReadFile(e.store.Path)
		if !bytes.Contains(b, []byte(`"snapshots"`)) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the resumed snapshot did not finish")
		}
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	check(t, e, n)
}
