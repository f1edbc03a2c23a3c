package file_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-cdc/sluice/internal/flock"
	"github.com/sluice-cdc/sluice/pipeline"
	"github.com/sluice-cdc/sluice/sink/file"
)

// An empty sink reports the start of a segment it has not created yet; a
// checkpoint saved with that offset (before anything was written) must
// recover again, holding nothing, and the sink then writes there.
func TestRecoverAtUnwrittenSegment(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	open := func() *file.Sink {
		s, err := file.New("out", file.Config{Path: filepath.Join(dir, "changes.jsonl")}, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	s := open()
	rec, err := s.Recover(ctx, 1, "")
	if err != nil || rec.MaxSeq != 0 {
		t.Fatalf("first Recover: %+v, %v", rec, err)
	}
	s.Close()
	s = open()
	again, err := s.Recover(ctx, 2, rec.Offset)
	if err != nil || again.MaxSeq != 0 || again.Offset != rec.Offset {
		t.Fatalf("Recover(%q) of an empty sink: %+v, %v; want nothing held, same offset", rec.Offset, again, err)
	}
	line := []byte(`{"op":"c","sluice":{"seq":1,"epoch":2,"source":"db"}}`)
	if _, err := s.Write(ctx, &pipeline.Batch{Epoch: 2, Messages: []pipeline.Message{{Seq: 1, Source: "db", Value: line}}}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s = open()
	after, err := s.Recover(ctx, 3, rec.Offset)
	if err != nil || after.MaxSeq != 1 {
		t.Fatalf("Recover(%q) after a write: %+v, %v; want seq 1 found", rec.Offset, after, err)
	}
}

// line is a message as the pipeline makes it: JSON with the sluice block
// last; pad makes it longer.
func line(seq, epoch uint64, pad int) pipeline.Message {
	v := fmt.Sprintf(`{"after":{"pad":%q},"op":"c","sluice":{"seq":%d,"epoch":%d,"source":"db","end":{"file":"b.000001","pos":%d}}}`,
		strings.Repeat("x", pad), seq, epoch, 4+seq)
	return pipeline.Message{Seq: seq, Source: "db", Value: []byte(v)}
}

func batch(epoch, first uint64, n, pad int) *pipeline.Batch {
	b := &pipeline.Batch{Epoch: epoch}
	for i := range n {
		b.Messages = append(b.Messages, line(first+uint64(i), epoch, pad))
	}
	return b
}

func openSink(t *testing.T, path string, log *slog.Logger) *file.Sink {
	t.Helper()
	s, err := file.New("out", file.Config{Path: path}, log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// fileLines reads every segment of the sink at dir as (seq, epoch) pairs,
// in file order.
func fileLines(t *testing.T, dir string) (seqs, epochs []uint64) {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(dir, "changes.*.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(paths)
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		for i, l := range bytes.Split(data, []byte("\n")) {
			if len(l) == 0 {
				continue
			}
			var v struct{ Sluice pipeline.Meta }
			if err := json.Unmarshal(l, &v); err != nil {
				t.Fatalf("%s line %d: %v", p, i+1, err)
			}
			seqs, epochs = append(seqs, v.Sluice.Seq), append(epochs, v.Sluice.Epoch)
		}
	}
	return seqs, epochs
}

// checkNoZombieLines fails if a line of an older epoch follows one of a
// newer epoch.
func checkNoZombieLines(t *testing.T, epochs []uint64) {
	t.Helper()
	var high uint64
	for i, e := range epochs {
		if e < high {
			t.Fatalf("line %d has epoch %d after a line of epoch %d: an old writer appended after its successor", i+1, e, high)
		}
		high = e
	}
}

// Two sinks on one path: once the second has recovered under a higher
// epoch, the first (a zombie leader) is refused, before and after the
// second has written, and cannot recover under its old epoch.
func TestStaleWriterFenced(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	path := filepath.Join(dir, "changes.jsonl")
	old, next := openSink(t, path, nil), openSink(t, path, nil)
	if _, err := old.Recover(ctx, 1, ""); err != nil {
		t.Fatal(err)
	}
	off, err := old.Write(ctx, batch(1, 1, 3, 10))
	if err != nil {
		t.Fatal(err)
	}
	rec, err := next.Recover(ctx, 2, off)
	if err != nil || rec.MaxSeq != 0 || rec.Offset != off {
		t.Fatalf("Recover(2, %q): %+v, %v; want nothing after the offset", off, rec, err)
	}
	if _, err := old.Write(ctx, batch(1, 4, 2, 10)); !errors.Is(err, pipeline.ErrFenced) {
		t.Fatalf("the old writer's Write after the takeover: %v, want ErrFenced", err)
	}
	if _, err := next.Write(ctx, batch(2, 4, 2, 10)); err != nil {
		t.Fatal(err)
	}
	if _, err := old.Write(ctx, batch(1, 6, 2, 10)); !errors.Is(err, pipeline.ErrFenced) {
		t.Fatalf("the old writer's Write after the new one wrote: %v, want ErrFenced", err)
	}
	if _, err := old.Recover(ctx, 1, off); !errors.Is(err, pipeline.ErrFenced) {
		t.Fatalf("the old writer's Recover: %v, want ErrFenced", err)
	}
	// A batch of a lower epoch than the sink recovered under is refused
	// by the sink itself.
	if _, err := next.Write(ctx, batch(1, 6, 1, 10)); !errors.Is(err, pipeline.ErrFenced) {
		t.Fatalf("Write of an epoch-1 batch to a sink recovered under 2: %v, want ErrFenced", err)
	}
	seqs, epochs := fileLines(t, dir)
	if fmt.Sprint(seqs) != "[1 2 3 4 5]" || fmt.Sprint(epochs) != "[1 1 1 2 2]" {
		t.Fatalf("the file holds seqs %v epochs %v; want 1..5 of epochs 1,1,1,2,2", seqs, epochs)
	}
}

// An old leader writes large batches as fast as it can while a new one
// takes over at a random moment: whatever the old one wrote is found by
// the new one's recovery, nothing of the old epoch follows it, and every
// write of the old one after the takeover is refused.
func TestWriteRacingTakeover(t *testing.T) {
	ctx := context.Background()
	for round := range 20 {
		dir := t.TempDir()
		path := filepath.Join(dir, "changes.jsonl")
		old, next := openSink(t, path, nil), openSink(t, path, nil)
		if _, err := old.Recover(ctx, 1, ""); err != nil {
			t.Fatal(err)
		}
		var (
			wg      sync.WaitGroup
			written atomic.Uint64 // the last seq the old writer had acknowledged
			fenced  atomic.Bool
			werr    error
		)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for seq := uint64(1); ; seq += 200 {
				// ~300 KiB per batch: the append and fsync take a while.
				if _, err := old.Write(ctx, batch(1, seq, 200, 1500)); err != nil {
					if errors.Is(err, pipeline.ErrFenced) {
						fenced.Store(true)
					} else {
						werr = err
					}
					return
				}
				written.Store(seq + 199)
			}
		}()
		time.Sleep(time.Duration(rand.IntN(30)) * time.Millisecond)
		rec, err := next.Recover(ctx, 2, "")
		if err != nil {
			t.Fatal(err)
		}
		before := written.Load()
		off, err := next.Write(ctx, batch(2, rec.MaxSeq+1, 5, 10))
		if err != nil {
			t.Fatal(err)
		}
		wg.Wait()
		if werr != nil || !fenced.Load() {
			t.Fatalf("round %d: the old writer stopped with %v (fenced %v), want ErrFenced", round, werr, fenced.Load())
		}
		seqs, epochs := fileLines(t, dir)
		checkNoZombieLines(t, epochs)
		var oldMax uint64
		for i, e := range epochs {
			if e == 1 {
				oldMax = seqs[i]
			}
		}
		// Every old line is accounted for by the recovery; an
		// acknowledged write may not be missing from it.
		if rec.MaxSeq != oldMax || rec.MaxSeq < before {
			t.Fatalf("round %d: recovery found max seq %d; the file's old lines end at %d, the old writer had acknowledged %d", round, rec.MaxSeq, oldMax, before)
		}
		if wantOff := fmt.Sprintf("changes.000001.jsonl:%d", fileSize(t, dir)); off != wantOff {
			t.Fatalf("round %d: the new writer's offset %s, want %s (the end of the file)", round, off, wantOff)
		}
		t.Logf("round %d: the old writer had written %d messages when the new one took over", round, rec.MaxSeq)
	}
}

func fileSize(t *testing.T, dir string) int64 {
	t.Helper()
	fi, err := os.Stat(filepath.Join(dir, "changes.000001.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

// A writer paused while it holds the lock (between its epoch check and
// its append) makes the new leader's recovery wait, saying so in the log;
// what it then writes is found by the recovery.
func TestRecoverWaitsForWriterHoldingTheLock(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	path := filepath.Join(dir, "changes.jsonl")
	old := openSink(t, path, nil)
	if _, err := old.Recover(ctx, 1, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := old.Write(ctx, batch(1, 1, 2, 10)); err != nil {
		t.Fatal(err)
	}
	// The zombie's Write, frozen just after its epoch check: the lock
	// taken as Write takes it, the epoch file read and found 1.
	zombie, err := flock.Open(filepath.Join(dir, "changes.lock"))
	if err != nil {
		t.Fatal(err)
	}
	defer zombie.Close()
	if err := zombie.Lock(ctx, nil); err != nil {
		t.Fatal(err)
	}
	var logs syncBuffer
	next := openSink(t, path, slog.New(slog.NewTextHandler(&logs, nil)))
	type result struct {
		rec pipeline.Recovery
		err error
	}
	done := make(chan result, 1)
	go func() {
		rec, err := next.Recover(ctx, 2, "")
		done <- result{rec, err}
	}()
	select {
	case r := <-done:
		t.Fatalf("Recover returned while another writer held the lock: %+v, %v", r.rec, r.err)
	case <-time.After(1500 * time.Millisecond):
	}
	if !strings.Contains(logs.String(), "waiting for the file sink's lock") {
		t.Errorf("no log line while waiting for the lock:\n%s", logs.String())
	}
	// The zombie resumes and appends its batch, then lets go.
	f, err := os.OpenFile(filepath.Join(dir, "changes.000001.jsonl"), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range batch(1, 3, 3, 10).Messages {
		f.Write(append(m.Value, '\n'))
	}
	f.Close()
	if err := zombie.Unlock(); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.err != nil || r.rec.MaxSeq != 5 {
		t.Fatalf("Recover after the zombie let go: %+v, %v; want max seq 5", r.rec, r.err)
	}
	// A context that ends while waiting ends the wait.
	if err := zombie.Lock(ctx, nil); err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	if _, err := next.Write(cctx, batch(2, 6, 1, 10)); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Write while the lock is held, with a context that ends: %v", err)
	}
	zombie.Unlock()
}

// A crash in the middle of a write leaves a torn last line: recovery cuts
// it, reports the whole lines before it, and the next write starts on a
// line boundary.
func TestTornLastLineCut(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	path := filepath.Join(dir, "changes.jsonl")
	s := openSink(t, path, nil)
	if _, err := s.Recover(ctx, 1, ""); err != nil {
		t.Fatal(err)
	}
	off, err := s.Write(ctx, batch(1, 1, 3, 10))
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	seg := filepath.Join(dir, "changes.000001.jsonl")
	whole := fileSize(t, dir)
	f, _ := os.OpenFile(seg, os.O_WRONLY|os.O_APPEND, 0)
	f.Write(line(4, 1, 10).Value[:30])
	f.Close()
	var logs syncBuffer
	s = openSink(t, path, slog.New(slog.NewTextHandler(&logs, nil)))
	rec, err := s.Recover(ctx, 2, "")
	if err != nil || rec.MaxSeq != 3 || rec.Offset != off || rec.Ends["db"].Seq != 3 {
		t.Fatalf("Recover: %+v, %v; want max seq 3, offset %s", rec, err, off)
	}
	if fileSize(t, dir) != whole || !strings.Contains(logs.String(), "cutting a partial line") {
		t.Fatalf("the torn line was not cut (size %d, want %d); log:\n%s", fileSize(t, dir), whole, logs.String())
	}
	if _, err := s.Write(ctx, batch(2, 4, 2, 10)); err != nil {
		t.Fatal(err)
	}
	seqs, _ := fileLines(t, dir)
	if fmt.Sprint(seqs) != "[1 2 3 4 5]" {
		t.Fatalf("seqs %v after the repair and a write", seqs)
	}
}

// A checkpoint offset inside a line (saved by a sluice whose offset could
// miss bytes an old leader had appended) is read from that line's start;
// an offset past the end, or a line that is not sluice's, stops recovery
// with ErrPermanent in words instead of being retried for ever.
func TestOffsetInsideLine(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	path := filepath.Join(dir, "changes.jsonl")
	s := openSink(t, path, nil)
	if _, err := s.Recover(ctx, 1, ""); err != nil {
		t.Fatal(err)
	}
	off2, err := s.Write(ctx, batch(1, 1, 2, 10))
	if err != nil {
		t.Fatal(err)
	}
	end, err := s.Write(ctx, batch(1, 3, 3, 10))
	if err != nil {
		t.Fatal(err)
	}
	_, n2, _ := strings.Cut(off2, ":")
	at, _ := strconv.Atoi(n2)
	for _, inside := range []int{at - 7, at + 9} {
		var logs syncBuffer
		r := openSink(t, path, slog.New(slog.NewTextHandler(&logs, nil)))
		rec, err := r.Recover(ctx, 1, fmt.Sprintf("changes.000001.jsonl:%d", inside))
		want := uint64(5)
		if err != nil || rec.MaxSeq != want || rec.Offset != end {
			t.Fatalf("Recover from byte %d: %+v, %v; want max seq %d, offset %s", inside, rec, err, want, end)
		}
		if !strings.Contains(logs.String(), "inside a line") {
			t.Errorf("Recover from byte %d: no warning about the offset:\n%s", inside, logs.String())
		}
		r.Close()
	}
	_, e, _ := strings.Cut(end, ":")
	past, _ := strconv.Atoi(e)
	if _, err := s.Recover(ctx, 1, fmt.Sprintf("changes.000001.jsonl:%d", past+100)); !errors.Is(err, pipeline.ErrPermanent) || !strings.Contains(err.Error(), "shorter than the checkpoint's offset") {
		t.Fatalf("Recover from past the end: %v, want ErrPermanent in words", err)
	}
	// A line without a sluice block in the middle of the file.
	seg := filepath.Join(dir, "changes.000001.jsonl")
	data, _ := os.ReadFile(seg)
	bad := append(append(append([]byte(nil), data[:at]...), "not a sluice line\n"...), data[at:]...)
	if err := os.WriteFile(seg, bad, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = s.Recover(ctx, 1, "")
	if !errors.Is(err, pipeline.ErrPermanent) || !strings.Contains(err.Error(), fmt.Sprintf("the line at byte %d", at)) {
		t.Fatalf("Recover over a foreign line: %v, want ErrPermanent naming byte %d", err, at)
	}
}

// Lines of an older epoch after lines of a newer one (written by an old
// leader of a sluice before this fencing) are not taken as held; a line
// of a higher epoch than the recovering writer's fences it.
func TestOlderEpochLinesIgnored(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	path := filepath.Join(dir, "changes.jsonl")
	var buf []byte
	for _, m := range append(batch(3, 1, 3, 10).Messages, batch(2, 4, 4, 10).Messages...) {
		buf = append(append(buf, m.Value...), '\n')
	}
	if err := os.WriteFile(filepath.Join(dir, "changes.000001.jsonl"), buf, 0o644); err != nil {
		t.Fatal(err)
	}
	var logs syncBuffer
	s := openSink(t, path, slog.New(slog.NewTextHandler(&logs, nil)))
	rec, err := s.Recover(ctx, 4, "")
	if err != nil || rec.MaxSeq != 3 || rec.Ends["db"].Seq != 3 {
		t.Fatalf("Recover: %+v, %v; want max seq 3 (the epoch-2 lines after epoch 3 ignored)", rec, err)
	}
	if !strings.Contains(logs.String(), "lines of an older epoch after lines of a newer one") || !strings.Contains(logs.String(), "lines=4") {
		t.Errorf("no warning naming the 4 stale lines:\n%s", logs.String())
	}
	s.Close()
	os.Remove(filepath.Join(dir, "changes.epoch"))
	if _, err := openSink(t, path, nil).Recover(ctx, 2, ""); !errors.Is(err, pipeline.ErrFenced) {
		t.Fatalf("Recover under epoch 2 of a file holding epoch 3: %v, want ErrFenced", err)
	}
}

// Bytes appended behind the writer's back make its next Write fail
// (retryable) rather than return an offset inside a line; the recovery
// that follows accounts for them.
func TestForeignAppendDetected(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	path := filepath.Join(dir, "changes.jsonl")
	s := openSink(t, path, nil)
	if _, err := s.Recover(ctx, 1, ""); err != nil {
		t.Fatal(err)
	}
	off, err := s.Write(ctx, batch(1, 1, 2, 10))
	if err != nil {
		t.Fatal(err)
	}
	f, _ := os.OpenFile(filepath.Join(dir, "changes.000001.jsonl"), os.O_WRONLY|os.O_APPEND, 0)
	f.Write(append(line(3, 1, 10).Value, '\n'))
	f.Close()
	if _, err := s.Write(ctx, batch(1, 3, 1, 10)); err == nil || errors.Is(err, pipeline.ErrFenced) || !strings.Contains(err.Error(), "something else wrote to it") {
		t.Fatalf("Write after a foreign append: %v", err)
	}
	rec, err := s.Recover(ctx, 1, off)
	if err != nil || rec.MaxSeq != 3 {
		t.Fatalf("Recover: %+v, %v; want max seq 3", rec, err)
	}
	if _, err := s.Write(ctx, batch(1, 4, 1, 10)); err != nil {
		t.Fatal(err)
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
