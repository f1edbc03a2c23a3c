package join

import (
	"context"
	"encoding/json"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-cdc/sluice/checkpoint"
	"github.com/sluice-cdc/sluice/pipeline"
	"github.com/sluice-cdc/sluice/sink/file"
)

// The kill -9 test runs the join in a child process (this test binary,
// running TestSinkKill9Child) that plays the pipeline: it recovers the
// join, feeds it the stream from its checkpoint on, and saves checkpoints
// now and then. The parent kills it with SIGKILL at random moments and
// starts it again, then lets it finish; the file sink must then hold every
// joined record of the reference exactly once.

const (
	kill9Env   = "SLUICE_JOIN_KILL9_DIR"
	kill9Seed  = 42
	kill9Txns  = 8000 // 2000 under the race detector
	kill9Typ   = FullJoin
	kill9Skew  = 10 * time.Second
	kill9Kills = 8
)

type kill9Checkpoint struct {
	Epoch  uint64 `json:"epoch"`
	Offset string `json:"offset"`
	Seq    uint64 `json:"seq"`
}

func TestSinkKill9ExactlyOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("starts and kills processes")
	}
	dir := t.TempDir()
	r := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1))
	kills := 0
	for run := 0; ; run++ {
		cmd := exec.Command(os.Args[0], "-test.run=^TestSinkKill9Child$", "-test.v")
		cmd.Env = append(os.Environ(), kill9Env+"="+dir)
		out, err := os.Create(filepath.Join(dir, "child.log"))
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stdout, cmd.Stderr = out, out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		limit := 2 * time.Minute // the last run is not killed
		if kills < kill9Kills {
			limit = time.Duration(100+r.IntN(500)) * time.Millisecond
		}
		select {
		case err := <-done:
			out.Close()
			if err != nil {
				t.Fatalf("run %d: %v\n%s", run, err, readLog(dir))
			}
		case <-time.After(limit):
			_ = cmd.Process.Signal(syscall.SIGKILL)
			<-done
			out.Close()
			if kills == kill9Kills {
				t.Fatalf("the final run did not finish\n%s", readLog(dir))
			}
			kills++
			continue
		}
		break
	}
	if kills < 3 {
		t.Fatalf("the child finished after %d kills: make the stream longer", kills)
	}
	if _, err := os.Stat(filepath.Join(dir, "done")); err != nil {
		t.Fatalf("the final run did not mark the end: %v\n%s", err, readLog(dir))
	}
	_, rows := genMessages(rand.New(rand.NewPCG(kill9Seed, 9)), kill9TxnCount(), kill9Skew, false)
	cfg := testConfig(dir, kill9Typ)
	want := referenceRecords(cfg, rows)
	got := readJoined(t, filepath.Join(dir, "out", "joined.*.jsonl"))
	if !slices.Equal(got, want) {
		t.Fatalf("after %d kills: joined records differ from the reference (%d, want %d)\n%s", kills, len(got), len(want), diffLines(want, got))
	}
	t.Logf("%d records exactly once after %d kills", len(got), kills)
}

func kill9TxnCount() int {
	if raceEnabled {
		return kill9Txns / 4
	}
	return kill9Txns
}

func readLog(dir string) string {
	b, _ := os.ReadFile(filepath.Join(dir, "child.log"))
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

// TestSinkKill9Child is the child of TestSinkKill9ExactlyOnce; it does
// nothing unless started by it.
func TestSinkKill9Child(t *testing.T) {
	dir := os.Getenv(kill9Env)
	if dir == "" {
		t.Skip("run by TestSinkKill9ExactlyOnce")
	}
	ctx := context.Background()
	ckptPath := filepath.Join(dir, "ckpt.json")
	var ck kill9Checkpoint
	if b, err := os.ReadFile(ckptPath); err == nil {
		if err := json.Unmarshal(b, &ck); err != nil {
			t.Fatal(err)
		}
	}
	save := func() {
		b, _ := json.Marshal(ck)
		if err := checkpoint.WriteFileAtomic(ckptPath, b); err != nil {
			t.Fatal(err)
		}
	}
	ck.Epoch++
	save()
	msgs, _ := genMessages(rand.New(rand.NewPCG(kill9Seed, 9)), kill9TxnCount(), kill9Skew, false)
	cfg := testConfig(dir, kill9Typ)
	var wm atomic.Int64
	out, err := file.New("joined", file.Config{Path: filepath.Join(dir, "out", "joined.jsonl"), MaxBytes: 256 << 10}, nil)
	if err != nil {
		t.Fatal(err)
	}
	s, err := NewSink(cfg, SinkOptions{Out: out, Tick: -1, Watermark: func() time.Time {
		if w := wm.Load(); w != 0 {
			return time.UnixMicro(w)
		}
		return time.Time{}
	}})
	if err != nil {
		t.Fatal(err)
	}
	rec, err := s.Recover(ctx, ck.Epoch, ck.Offset)
	if err != nil {
		t.Fatal(err)
	}
	pos := ck.Seq
	if e, ok := rec.Ends["shop"]; ok && e.Seq > pos {
		pos = e.Seq
	}
	r := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 2))
	for pos < uint64(len(msgs)) {
		end := min(pos+1+uint64(r.IntN(10)), uint64(len(msgs)))
		wm.Store(msgs[end-1].EventTime.UnixMicro())
		// The pipeline skips what the join holds; half the time the
		// join is left to skip it itself.
		batch := msgs[pos:end]
		if r.IntN(2) == 0 {
			for len(batch) > 0 && batch[0].Seq <= rec.MaxSeq {
				batch = batch[1:]
			}
		}
		off, err := s.Write(ctx, &pipeline.Batch{Epoch: ck.Epoch, Messages: batch})
		if err != nil {
			t.Fatal(err)
		}
		pos = end
		if r.IntN(4) == 0 {
			for i := end; i > ck.Seq; i-- {
				if msgs[i-1].End != nil {
					ck.Seq = msgs[i-1].Seq
					break
				}
			}
			ck.Offset = off
			save()
		}
	}
	wm.Store(epoch0.Add(1000 * time.Hour).UnixMicro())
	s.tick(ctx)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "done"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
}
