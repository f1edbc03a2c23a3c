package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-cdc/sluice/internal/testenv"
	"github.com/sluice-cdc/sluice/internal/workload"
	"github.com/sluice-cdc/sluice/position"
)

// TestRowImageFillKill9 (issue 32): `sluice run` with row_image: fill,
// killed with -9 at random moments and restarted while a random workload
// runs alike on databases written with binlog_row_image FULL, MINIMAL and
// NOBLOB: every sink, in format sluice and format debezium, holds for the
// MINIMAL and NOBLOB databases exactly the images of the FULL one. (The
// bulk of the cases is pipeline's TestRowImageFill and rowimage's
// TestFillMatchesModel; this is the real crash.)
func TestRowImageFillKill9(t *testing.T) {
	bin := buildSluice(t)
	testenv.ForEachFlavor(t, func(t *testing.T, flavor position.Flavor) {
		ctx := context.Background()
		db := testenv.StartT(t, testenv.Options{Flavor: flavor})
		w := workload.NewRowImages(uint64(len(flavor)) + 100)
		if err := w.Prepare(ctx, db, 30); err != nil {
			t.Fatal(err)
		}
		dir := t.TempDir()
		sinkPath := func(f string) string { return filepath.Join(dir, f, "changes.jsonl") }
		cfg := fmt.Sprintf(`pipeline: fill
source:
  url: %s
  server_id: 903
  tables: [ri_*.*]
  row_image: fill
sinks:
  - {name: sluice, type: file, file: {path: %s, max_bytes: 64KiB}}
  - {name: debezium, type: file, format: debezium, file: {path: %s, max_bytes: 64KiB}}
checkpoint:
  path: %s
  interval: 200ms
buffer: {batch_bytes: 8KiB}
`, db.URL(), sinkPath("sluice"), sinkPath("debezium"), filepath.Join(dir, "ckpt.json"))
		e := &runEnv{db: db, dir: dir, bin: bin, config: filepath.Join(dir, "sluice.yaml")}
		if err := os.WriteFile(e.config, []byte(cfg), 0o644); err != nil {
			t.Fatal(err)
		}
		var log bytes.Buffer
		events := func(f string) []workload.ImageEvent {
			evs, err := workload.ReadImageEvents(filepath.Join(dir, f, "changes.*.jsonl"))
			if err != nil {
				t.Fatal(err)
			}
			return evs
		}
		wait := func(what string, ok func([]workload.ImageEvent) bool) {
			t.Helper()
			deadline := time.Now().Add(60 * time.Second)
			for _, f := range []string{"sluice", "debezium"} {
				for !ok(events(f)) {
					if time.Now().After(deadline) {
						l := log.String()
						t.Fatalf("sink %s: %s did not arrive in 60 s\n%s", f, what, l[max(0, len(l)-6000):])
					}
					time.Sleep(100 * time.Millisecond)
				}
			}
		}
		cmd := e.start(t, &log)
		// The snapshot first: a kill inside it resumes it while streaming,
		// where a row changed before its chunk is read again is one the
		// store has not seen (that stops with ErrMissing; see
		// docs/ARCHITECTURE.md).
		wait("the snapshot", func(evs []workload.ImageEvent) bool { return workload.Snapshotted(evs, workload.SnapshotRows(30)) })
		time.Sleep(500 * time.Millisecond) // its checkpoint
		done := make(chan error, 1)
		var txns atomic.Int64
		go func() {
			for range 150 {
				if err := workload.RunOn(ctx, db, w.Txn()); err != nil {
					done <- err
					return
				}
				txns.Add(1)
				time.Sleep(10 * time.Millisecond)
			}
			done <- nil
		}()
		cmd = e.killRestart(t, cmd, &log, func() string { return fmt.Sprintf("%d transactions", txns.Load()) })
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if err := workload.Finish(ctx, db); err != nil {
			t.Fatal(err)
		}
		wait("the last row", workload.Finished)
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
		for _, f := range []string{"sluice", "debezium"} {
			if err := workload.CompareRowImages(events(f)); err != nil {
				t.Errorf("sink %s: %v", f, err)
			}
		}
	})
}
