package pipeline_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	gonats "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sluice-cdc/sluice/binlog"
	"github.com/sluice-cdc/sluice/checkpoint"
	"github.com/sluice-cdc/sluice/codec"
	"github.com/sluice-cdc/sluice/internal/testenv"
	"github.com/sluice-cdc/sluice/internal/testenv/natsenv"
	"github.com/sluice-cdc/sluice/pipeline"
	"github.com/sluice-cdc/sluice/position"
	"github.com/sluice-cdc/sluice/sink/nats"
)

// gateSink holds one Write of the sink it wraps until released, as a
// leader stopped (SIGSTOP) right before it publishes a batch is held.
type gateSink struct {
	pipeline.Sink
	mu    sync.Mutex
	state int // gateOpen, gateArmed, gateHolding, gateShut
	// shut: after the held Write, every later one waits for the run's end
	// (the paused leader's watchdog stops it right after it wakes up).
	shut    bool
	held    chan *pipeline.Batch // the held batch, when it is held
	release chan struct{}
	result  chan error // the held Write's outcome, once written
}

const (
	gateOpen = iota
	gateArmed
	gateHolding
	gateShut
)

func newGate(s pipeline.Sink, shut bool) *gateSink {
	return &gateSink{Sink: s, shut: shut, held: make(chan *pipeline.Batch, 1), release: make(chan struct{}), result: make(chan error, 1)}
}

func (g *gateSink) arm() {
	g.mu.Lock()
	g.state = gateArmed
	g.mu.Unlock()
}

func (g *gateSink) Write(ctx context.Context, b *pipeline.Batch) (string, error) {
	g.mu.Lock()
	state := g.state
	if state == gateArmed {
		g.state = gateHolding
	}
	g.mu.Unlock()
	switch state {
	case gateArmed:
		g.held <- b
		select {
		case <-g.release:
		case <-ctx.Done():
			return "", ctx.Err()
		}
		off, err := g.Sink.Write(ctx, b)
		g.mu.Lock()
		if g.shut {
			g.state = gateShut
		} else {
			g.state = gateOpen
		}
		g.mu.Unlock()
		g.result <- err
		return off, err
	case gateHolding, gateShut:
		<-ctx.Done()
		return "", ctx.Err()
	}
	return g.Sink.Write(ctx, b)
}

// TestManySourcesNATSZombieAfterRecovery: with two sources and a NATS
// sink, an old leader held right before it publishes a batch (of shard1)
// publishes it after the new leader's recovery and before the new
// leader's first publish (of shard2's transaction, numbered with the same
// sequence numbers). Before the recovery fenced the stream, the old
// batch landed; the new leader's publish was refused, its second recovery
// skipped its own batch by sequence number, and shard2's transaction was
// lost while shard1's came twice. Now the old batch is refused
// (pipeline.ErrFenced) and every row comes once, in epoch order.
func TestManySourcesNATSZombieAfterRecovery(t *testing.T) {
	testenv.ForEachFlavor(t, func(t *testing.T, f position.Flavor) {
		shards := startShards(t, 2, func(int) position.Flavor { return f })
		natsZombieAfterRecovery(t, shards)
	})
}

func natsZombieAfterRecovery(t *testing.T, shards []*shard) {
	ctx := context.Background()
	ns := natsenv.StartNATS(t)
	t0 := time.Now()
	phase := func(what string) { t.Logf("%6.2fs %s", time.Since(t0).Seconds(), what) }
	log := slog.New(slog.DiscardHandler)
	const stream = "st-zombie"
	store := &checkpoint.FileStore{Path: filepath.Join(t.TempDir(), "ckpt.json")}
	sources := func(viaProxy bool) []pipeline.SourceConfig {
		var srcs []pipeline.SourceConfig
		for i, s := range shards {
			u := s.db.URL()
			if viaProxy && i == 0 {
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
		return srcs
	}
	start := func(srcs []pipeline.SourceConfig, g *gateSink) (*running, context.CancelFunc) {
		p, err := pipeline.New(pipeline.Config{
			Name:            "zombie",
			Sources:         srcs,
			Sinks:           []pipeline.Sink{g},
			Store:           store,
			CheckpointEvery: 100 * time.Millisecond,
			RetryMin:        10 * time.Millisecond,
			Logger:          log,
		})
		if err != nil {
			t.Fatal(err)
		}
		rctx, cancel := context.WithCancel(ctx)
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
		return r, cancel
	}
	openSink := func() pipeline.Sink {
		s, err := nats.New(nats.Config{Name: "nats", URL: ns.URL(), Stream: stream, Subject: "z.{source}.{db}.{table}", AckTimeout: 5 * time.Second}, "zombie", log)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	insert := func(s *shard, rows int) {
		t.Helper()
		q := "INSERT INTO app.t (v) VALUES (1)"
		for i := 1; i < rows; i++ {
			q += ",(1)"
		}
		if err := s.db.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	want := map[string]int{}
	write := func(si, rows int) {
		insert(shards[si], rows)
		want[shards[si].name] += rows
	}

	// The old leader delivers a transaction of each shard.
	oldGate := newGate(openSink(), true)
	old, stopOld := start(sources(false), oldGate)
	old.waitStreaming(t)
	write(0, 1)
	write(1, 1)
	waitStream(t, ns.URL(), stream, want)

	phase("old leader delivered")
	// It is paused right before it publishes shard1's next transaction.
	oldGate.arm()
	write(0, 3)
	var zombie *pipeline.Batch
	select {
	case zombie = <-oldGate.held:
	case <-time.After(30 * time.Second):
		t.Fatal("the old leader did not write shard1's transaction")
	}

	// The new leader recovers (the same checkpoint, the next epoch). Its
	// shard1 connection is slowed, so that its first batch is shard2's
	// transaction alone: numbered from where the old batch is numbered.
	if err := shards[0].proxy.SetLatency(300 * time.Millisecond); err != nil {
		t.Fatal(err)
	}
	curGate := newGate(openSink(), false)
	curGate.arm()
	cur, _ := start(sources(true), curGate)
	write(1, 3)
	var first *pipeline.Batch
	select {
	case first = <-curGate.held:
	case err := <-cur.done:
		t.Fatalf("the new leader stopped: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("the new leader did not write")
	}
	if first.Messages[0].Source != shards[1].name || first.FirstSeq() != zombie.FirstSeq() {
		t.Fatalf("the new leader's first batch begins with seq %d of %s; the test needs seq %d of %s (the old batch's first)",
			first.FirstSeq(), first.Messages[0].Source, zombie.FirstSeq(), shards[1].name)
	}

	phase("new leader holds its first batch")
	// The old leader wakes up and publishes; then its watchdog stops it.
	close(oldGate.release)
	var zerr error
	select {
	case zerr = <-oldGate.result:
	case <-time.After(30 * time.Second):
		t.Fatal("the old leader's publish did not return")
	}
	t.Logf("the old leader's publish after the new leader's recovery: %v", zerr)
	stopOld()
	select {
	case err := <-old.done:
		t.Logf("the old leader stopped: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("the old leader did not stop")
	}
	if !errors.Is(zerr, pipeline.ErrFenced) {
		t.Errorf("the old leader's publish after the new leader's recovery: %v, want pipeline.ErrFenced", zerr)
	}

	phase("old leader stopped")
	// The new leader publishes, and goes on.
	if err := shards[0].proxy.SetLatency(0); err != nil {
		t.Fatal(err)
	}
	close(curGate.release)
	write(0, 2)
	write(1, 2)
	waitStream(t, ns.URL(), stream, want)
	phase("new leader delivered")
	// A moment for anything repeated to arrive too.
	time.Sleep(500 * time.Millisecond)
	waitStream(t, ns.URL(), stream, want)
	select {
	case err := <-cur.done:
		t.Fatalf("the new leader stopped: %v", err)
	default:
	}
}

// waitStream waits until the stream holds want[source] rows of app.t,
// each once, ids 1..n in order per source, and no message of an older
// epoch after one of a newer epoch; it fails at once on a row twice, out
// of order, or an epoch going back.
func waitStream(t *testing.T, url, stream string, want map[string]int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		got, err := checkStream(url, stream)
		if err != nil {
			t.Fatal(err)
		}
		done := true
		for src, n := range want {
			if got[src] > n {
				t.Fatalf("stream %s holds %d rows of %s, want %d", stream, got[src], src, n)
			}
			done = done && got[src] == n
		}
		if done {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("stream %s holds rows %v, want %v (lost)", stream, got, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// checkStream reads the whole stream and counts the rows of app.t per
// source, with an error for a row repeated or out of order, or an epoch
// going back.
func checkStream(url, stream string) (map[string]int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	nc, err := gonats.Connect(url)
	if err != nil {
		return nil, err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	st, err := js.Stream(ctx, stream)
	if err != nil {
		return nil, err
	}
	state := st.CachedInfo().State
	got := map[string]int{}
	var epoch uint64
	for seq := state.FirstSeq; seq <= state.LastSeq && seq > 0; seq++ {
		m, err := st.GetMsg(ctx, seq)
		if err != nil {
			return nil, err
		}
		e, err := strconv.ParseUint(m.Header.Get(pipeline.HeaderEpoch), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("stream sequence %d: %w", seq, err)
		}
		if e < epoch {
			return nil, fmt.Errorf("stream sequence %d is of epoch %d, after epoch %d: a zombie write", seq, e, epoch)
		}
		epoch = e
		if nats.IsFence(m.Header) {
			continue
		}
		ev, err := codec.DecodeLine(m.Data)
		if err != nil {
			return nil, err
		}
		if ev.IsDDL() || ev.Source.Table != "t" {
			continue
		}
		src := m.Header.Get(pipeline.HeaderSource)
		id, _ := strconv.Atoi(string(ev.After["id"]))
		if id != got[src]+1 {
			return nil, fmt.Errorf("stream sequence %d: %s row %d after row %d (seq %d, epoch %d): repeated or lost", seq, src, id, got[src], ev.Sluice.Seq, e)
		}
		got[src] = id
	}
	return got, nil
}
