package pipeline_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	gonats "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	goredis "github.com/redis/go-redis/v9"

	"github.com/sluice-cdc/sluice/binlog"
	"github.com/sluice-cdc/sluice/checkpoint"
	"github.com/sluice-cdc/sluice/codec"
	"github.com/sluice-cdc/sluice/internal/kafkatest"
	"github.com/sluice-cdc/sluice/internal/testenv"
	"github.com/sluice-cdc/sluice/internal/testenv/kafkaenv"
	"github.com/sluice-cdc/sluice/internal/testenv/natsenv"
	"github.com/sluice-cdc/sluice/internal/workload"
	"github.com/sluice-cdc/sluice/pipeline"
	"github.com/sluice-cdc/sluice/position"
	"github.com/sluice-cdc/sluice/sink/file"
	"github.com/sluice-cdc/sluice/sink/kafka"
	"github.com/sluice-cdc/sluice/sink/nats"
	"github.com/sluice-cdc/sluice/sink/redis"
)

// cutSink is a sink that, at the first batch where cut finds a place,
// writes the batch only up to there (as a sink cut inside a batch leaves
// it: NATS publishing message by message, Redis transactions of
// max_batch commands, a file write killed half-way with complete lines)
// and stops the pipeline, as a crash would.
type cutSink struct {
	pipeline.Sink
	cut  func(ms []pipeline.Message) int // 0: not this batch
	stop context.CancelFunc
	done atomic.Bool
	held atomic.Int64 // messages of the cut transaction written
}

func (c *cutSink) Write(ctx context.Context, b *pipeline.Batch) (string, error) {
	if c.cut != nil && !c.done.Load() {
		if k := c.cut(b.Messages); k > 0 {
			c.done.Store(true)
			if _, err := c.Sink.Write(ctx, &pipeline.Batch{Epoch: b.Epoch, Messages: b.Messages[:k]}); err != nil {
				return "", err
			}
			n := int64(0)
			for i := k - 1; i >= 0 && b.Messages[i].End == nil && b.Messages[i].Source == b.Messages[k-1].Source; i-- {
				n++
			}
			c.held.Store(n)
			c.stop()
			return "", errors.New("crashed inside the batch")
		}
	}
	return c.Sink.Write(ctx, b)
}

// cutInsideTxn returns where to cut a batch: inside a transaction of
// source src that begins and ends in the batch (not the one the batch ends
// in, which an older sluice recorded before writing), after half its
// messages; 0 if the batch has none.
func cutInsideTxn(src string, mine func(*pipeline.Message) bool) func([]pipeline.Message) int {
	return func(ms []pipeline.Message) int {
		begin := -1 // the first message of src after one of its ends
		ended := false
		for i := range ms {
			if ms[i].Source != src {
				continue
			}
			if !mine(&ms[i]) {
				// A transaction of an earlier subtest, read again from the
				// binlog's start.
				begin, ended = -1, ms[i].End != nil
				continue
			}
			if ended {
				begin, ended = i, false
			}
			if ms[i].End != nil {
				if begin >= 0 && i-begin >= 3 {
					return begin + (i-begin+1)/2
				}
				ended = true
			}
		}
		return 0
	}
}

// sinkKind is a sink to cut and a way to read back what it holds.
type sinkKind struct {
	name string
	open func(t *testing.T, tag string) pipeline.Sink
	read func(t *testing.T, tag string) []*codec.Event
}

func cutSinkKinds(t *testing.T, dir string) []sinkKind {
	log := slog.New(slog.DiscardHandler)
	r := testenv.StartRedis(t)
	rc := goredis.NewClient(&goredis.Options{Addr: r.Addr(), Protocol: 2, DisableIdentity: true})
	t.Cleanup(func() { rc.Close() })
	ns := natsenv.StartNATS(t)
	kc := kafkaenv.Shared(t)
	kp := kafkaenv.Name(t, "") // the test's topics and transactional ids on the shared broker
	return []sinkKind{
		{
			name: "file",
			open: func(t *testing.T, tag string) pipeline.Sink {
				s, err := file.New("x", file.Config{Path: filepath.Join(dir, tag, "out.jsonl")}, log)
				if err != nil {
					t.Fatal(err)
				}
				return s
			},
			read: func(t *testing.T, tag string) []*codec.Event {
				evs, err := workload.ReadFileSink(filepath.Join(dir, tag, "out.*.jsonl"))
				if err != nil {
					t.Fatal(err)
				}
				return evs
			},
		},
		{
			name: "redis",
			open: func(t *testing.T, tag string) pipeline.Sink {
				s, err := redis.New(redis.Config{Name: "x", Addr: r.Addr(), KeyPrefix: tag + ":", MessagesPerScript: 16}, "cut", log)
				if err != nil {
					t.Fatal(err)
				}
				return s
			},
			read: func(t *testing.T, tag string) []*codec.Event {
				ctx := context.Background()
				keys, err := rc.Keys(ctx, tag+":*").Result()
				if err != nil {
					t.Fatal(err)
				}
				var evs []*codec.Event
				for _, k := range keys {
					if k == redis.HighWaterKey(tag+":", "cut") {
						continue
					}
					xs, err := rc.XRange(ctx, k, "-", "+").Result()
					if err != nil {
						t.Fatal(err)
					}
					for _, x := range xs {
						evs = append(evs, decode(t, x.Values[redis.FieldValue].(string)))
					}
				}
				return evs
			},
		},
		{
			name: "nats",
			open: func(t *testing.T, tag string) pipeline.Sink {
				s, err := nats.New(nats.Config{Name: "x", URL: ns.URL(), Stream: "st-" + tag, Subject: "s-" + tag + ".{db}.{table}", AckTimeout: 5 * time.Second}, "cut", log)
				if err != nil {
					t.Fatal(err)
				}
				return s
			},
			read: func(t *testing.T, tag string) []*codec.Event {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				nc, err := gonats.Connect(ns.URL())
				if err != nil {
					t.Fatal(err)
				}
				defer nc.Close()
				js, err := jetstream.New(nc)
				if err != nil {
					t.Fatal(err)
				}
				st, err := js.Stream(ctx, "st-"+tag)
				if err != nil {
					t.Fatal(err)
				}
				last := st.CachedInfo().State.LastSeq
				var evs []*codec.Event
				for seq := st.CachedInfo().State.FirstSeq; seq <= last && seq > 0; seq++ {
					m, err := st.GetMsg(ctx, seq)
					if err != nil {
						t.Fatal(err)
					}
					if nats.IsFence(m.Header) {
						continue // a leader's recovery fenced the stream
					}
					evs = append(evs, decode(t, string(m.Data)))
				}
				return evs
			},
		},
		{
			name: "kafka",
			open: func(t *testing.T, tag string) pipeline.Sink {
				s, err := kafka.New(kafka.Config{Name: "x", Brokers: kc.Brokers(), Topic: kp + ".t-" + tag, TransactionalID: kp + ".tx-" + tag, Partitions: 3}, "cut", log)
				if err != nil {
					t.Fatal(err)
				}
				return s
			},
			read: func(t *testing.T, tag string) []*codec.Event {
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				recs, err := kafkatest.ReadAll(ctx, kc.Brokers(), kp+".t-"+tag)
				if err != nil {
					t.Fatal(err)
				}
				var evs []*codec.Event
				for _, r := range recs {
					evs = append(evs, decode(t, string(r.Value)))
				}
				return evs
			},
		},
	}
}

func decode(t *testing.T, v string) *codec.Event {
	t.Helper()
	ev, err := codec.DecodeLine([]byte(v))
	if err != nil {
		t.Fatalf("%v: %q", err, v)
	}
	return ev
}

// TestManySourcesCutInsideBatch: with two sources, every kind of sink is
// cut inside a batch, in the middle of a transaction that the batch also
// ends (NATS publishing one by one, Redis over max_batch commands, a file
// write killed half-way): after a restart the sink holds every row once.
// Before each sink's recovery counted what it holds of a transaction, the
// first half of that transaction reached the sink twice.
func TestManySourcesCutInsideBatch(t *testing.T) {
	testenv.ForEachFlavor(t, func(t *testing.T, f position.Flavor) {
		shards := startShards(t, 2, func(int) position.Flavor { return f })
		dir := t.TempDir()
		for i, kind := range cutSinkKinds(t, dir) {
			t.Run(kind.name, func(t *testing.T) {
				manySourcesCutInsideBatch(t, shards, kind, fmt.Sprintf("%s-%d", f, i), int64(i+1)*1_000_000)
			})
		}
	})
}

func manySourcesCutInsideBatch(t *testing.T, shards []*shard, kind sinkKind, tag string, base int64) {
	ctx := context.Background()
	dir := t.TempDir()
	var srcs []pipeline.SourceConfig
	for _, s := range shards {
		src, err := binlog.ParseSourceURL(s.db.URL())
		if err != nil {
			t.Fatal(err)
		}
		if src.Tables, err = binlog.ParseFilter("app.*"); err != nil {
			t.Fatal(err)
		}
		// From the start of the binlog: a restart before the first
		// checkpoint that holds a source's position starts it there again
		// (the rows of earlier subtests are told apart by base).
		src.StartAt = binlog.StartEarliest
		srcs = append(srcs, pipeline.SourceConfig{Name: s.name, Binlog: src, Snapshot: pipeline.SnapshotConfig{Mode: "never"}})
	}
	plain, err := file.New("a", file.Config{Path: filepath.Join(dir, "a", "out.jsonl")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	x := &cutSink{Sink: kind.open(t, tag), cut: cutInsideTxn("shard1", func(m *pipeline.Message) bool {
		if m.Change == nil || m.Table != "big" || len(m.Change.After) == 0 {
			return false
		}
		id := m.Change.After[0].Int()
		return id >= base && id < base+1_000_000
	})}
	cfg := pipeline.Config{
		Name:            "cut",
		Sources:         srcs,
		Sinks:           []pipeline.Sink{plain, x},
		Store:           &checkpoint.FileStore{Path: filepath.Join(dir, "ckpt.json")},
		CheckpointEvery: 50 * time.Millisecond,
		BatchBytes:      16 << 10,
		RetryMin:        10 * time.Millisecond,
	}
	run := func() (chan error, context.CancelFunc) {
		p, err := pipeline.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		rctx, cancel := context.WithCancel(ctx)
		x.stop = cancel // before the run: its writer reads it
		done := make(chan error, 1)
		go func() { done <- p.Run(rctx) }()
		(&running{p: p, done: done}).waitStreaming(t)
		return done, cancel
	}
	done, cancel := run()
	// Transactions of 12 rows on shard1 (about 3 KiB), a row on shard2,
	// several to a batch, until the cut has come.
	const rows = 12
	from, fill := shards[0].db.SeqFrom(1, rows)
	txns := 0
	until := time.Now().Add(60 * time.Second)
	for !x.done.Load() && time.Now().Before(until) {
		txns++
		if err := shards[0].db.Exec(ctx, append(fill, "USE app", fmt.Sprintf("INSERT INTO app.big SELECT %d + %d * 100 + seq, REPEAT('x', 40) FROM ", base, txns)+from)...); err != nil {
			t.Fatal(err)
		}
		if err := shards[1].db.Exec(ctx, fmt.Sprintf("INSERT INTO app.t (v) VALUES (%d)", base/1_000_000)); err != nil {
			t.Fatal(err)
		}
		if txns%8 == 0 {
			time.Sleep(20 * time.Millisecond)
		}
	}
	if !x.done.Load() {
		cancel()
		<-done
		t.Fatalf("no batch had a transaction to cut in %d transactions", txns)
	}
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the pipeline did not stop after the cut")
	}
	cancel()
	t.Logf("cut with %d transactions written, %d messages of the cut transaction in the sink", txns, x.held.Load())
	if err := x.Close(); err != nil {
		t.Logf("closing the cut sink: %v", err)
	}
	plain.Close()
	// The restart, with new sink instances (a new process).
	x.Sink, x.cut = kind.open(t, tag), nil
	defer x.Close()
	plain, err = file.New("a", file.Config{Path: filepath.Join(dir, "a", "out.jsonl")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	cfg.Sinks = []pipeline.Sink{plain, x}
	done, cancel = run()
	defer func() {
		cancel()
		<-done
	}()
	check := func(name string, read func() []*codec.Event) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			big, small, err := countRows(read(), base)
			if err != nil {
				t.Fatalf("sink %s: %v", name, err)
			}
			if big == txns*rows && small == txns {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("sink %s: %d big rows and %d small after the restart, want %d and %d", name, big, small, txns*rows, txns)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	check("a (file)", func() []*codec.Event {
		evs, err := workload.ReadFileSink(filepath.Join(dir, "a", "out.*.jsonl"))
		if err != nil {
			t.Fatal(err)
		}
		return evs
	})
	check(kind.name+" (cut)", func() []*codec.Event { return kind.read(t, tag) })
}

// countRows counts the rows of app.big (ids from base to base+999999)
// and app.t (v = base/1000000) in evs, failing on a row seen twice.
func countRows(evs []*codec.Event, base int64) (big, small int, err error) {
	seenBig, seenSmall := map[int64]bool{}, map[int64]bool{}
	for _, ev := range evs {
		if ev.IsDDL() {
			continue
		}
		id, _ := strconv.ParseInt(string(ev.After["id"]), 10, 64)
		switch ev.Source.Table {
		case "big":
			if id < base || id >= base+1_000_000 {
				continue
			}
			if seenBig[id] {
				return 0, 0, fmt.Errorf("app.big row %d twice (seq %d, epoch %d)", id, ev.Sluice.Seq, ev.Sluice.Epoch)
			}
			seenBig[id] = true
		case "t":
			if string(ev.After["v"]) != strconv.FormatInt(base/1_000_000, 10) {
				continue
			}
			if seenSmall[id] {
				return 0, 0, fmt.Errorf("app.t row %d twice (seq %d, epoch %d)", id, ev.Sluice.Seq, ev.Sluice.Epoch)
			}
			seenSmall[id] = true
		}
	}
	return len(seenBig), len(seenSmall), nil
}

// TestManySourcesOldCheckpointOpens: a checkpoint of an older sluice that
// recorded an open transaction (opens), with a Redis high-water hash of
// that sluice (no open:<source> counts): the run that stopped had written
// a batch ending inside a transaction. The restart reads the recorded
// transaction and sends the Redis sink only the rest of it.
func TestManySourcesOldCheckpointOpens(t *testing.T) {
	testenv.ForEachFlavor(t, func(t *testing.T, f position.Flavor) {
		shards := startShards(t, 2, func(int) position.Flavor { return f })
		r := testenv.StartRedis(t)
		rc := goredis.NewClient(&goredis.Options{Addr: r.Addr(), Protocol: 2, DisableIdentity: true})
		defer rc.Close()
		oldCheckpointOpens(t, shards, r.Addr(), rc)
	})
}

func oldCheckpointOpens(t *testing.T, shards []*shard, addr string, rc *goredis.Client) {
	ctx := context.Background()
	dir := t.TempDir()
	var srcs []pipeline.SourceConfig
	for _, s := range shards {
		src, err := binlog.ParseSourceURL(s.db.URL())
		if err != nil {
			t.Fatal(err)
		}
		if src.Tables, err = binlog.ParseFilter("app.*"); err != nil {
			t.Fatal(err)
		}
		// From the start of the binlog: a restart before the first
		// checkpoint that holds a source's position starts it there again
		// (the rows of earlier subtests are told apart by base).
		src.StartAt = binlog.StartEarliest
		srcs = append(srcs, pipeline.SourceConfig{Name: s.name, Binlog: src, Snapshot: pipeline.SnapshotConfig{Mode: "never"}})
	}
	log := slog.New(slog.DiscardHandler)
	newRedis := func() pipeline.Sink {
		s, err := redis.New(redis.Config{Name: "x", Addr: addr, KeyPrefix: "old:"}, "old", log)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	newFile := func() pipeline.Sink {
		s, err := file.New("a", file.Config{Path: filepath.Join(dir, "a", "out.jsonl")}, log)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	// The batch to stop at ends inside a transaction of shard1 that begins
	// in it: the older sluice recorded that transaction before writing.
	var open checkpoint.Open
	x := &cutSink{Sink: newRedis(), cut: func(ms []pipeline.Message) int {
		last := len(ms) - 1
		if last < 0 || ms[last].Source != "shard1" || ms[last].End != nil {
			return 0
		}
		for i := last - 1; i >= 0; i-- {
			if ms[i].Source == "shard1" && ms[i].End != nil {
				if last-i < 2 {
					return 0
				}
				j := i + 1
				for ms[j].Source != "shard1" {
					j++ // another source's transaction between the two
				}
				open = checkpoint.Open{Source: "shard1", Begin: *ms[i].End, FirstSeq: ms[j].Seq}
				return len(ms)
			}
		}
		return 0
	}}
	store := &checkpoint.FileStore{Path: filepath.Join(dir, "ckpt.json")}
	cfg := pipeline.Config{
		Name:            "old",
		Sources:         srcs,
		Sinks:           []pipeline.Sink{newFile(), x},
		Store:           store,
		CheckpointEvery: 50 * time.Millisecond,
		BatchBytes:      16 << 10,
		RetryMin:        10 * time.Millisecond,
	}
	run := func() (chan error, context.CancelFunc) {
		p, err := pipeline.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		rctx, cancel := context.WithCancel(ctx)
		x.stop = cancel // before the run: its writer reads it
		done := make(chan error, 1)
		go func() { done <- p.Run(rctx) }()
		(&running{p: p, done: done}).waitStreaming(t)
		return done, cancel
	}
	done, cancel := run()
	const rows, base = 200, 9_000_000
	from, fill := shards[0].db.SeqFrom(1, rows)
	txns := 0
	until := time.Now().Add(60 * time.Second)
	for !x.done.Load() && time.Now().Before(until) {
		txns++
		if err := shards[0].db.Exec(ctx, append(fill, "USE app", fmt.Sprintf("INSERT INTO app.big SELECT %d + %d * 1000 + seq, REPEAT('x', 40) FROM ", base, txns)+from)...); err != nil {
			t.Fatal(err)
		}
		if err := shards[1].db.Exec(ctx, fmt.Sprintf("INSERT INTO app.t (v) VALUES (%d)", base/1_000_000)); err != nil {
			t.Fatal(err)
		}
		if txns%8 == 0 {
			time.Sleep(20 * time.Millisecond)
		}
	}
	if !x.done.Load() {
		cancel()
		<-done
		t.Fatalf("no batch ended inside a transaction in %d transactions", txns)
	}
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the pipeline did not stop")
	}
	cancel()
	cfg.Sinks[0].Close()
	x.Close()
	// Make it the state of the older sluice: the open transaction in the
	// checkpoint, no counts in the high-water hash.
	cp, err := store.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cp.Opens = append(cp.Opens, open)
	if _, err := store.Save(ctx, cp, cp.Version); err != nil {
		t.Fatal(err)
	}
	hw := redis.HighWaterKey("old:", "old")
	fields, err := rc.HKeys(ctx, hw).Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fields {
		if f == "counted" || strings.HasPrefix(f, "open:") {
			if err := rc.HDel(ctx, hw, f).Err(); err != nil {
				t.Fatal(err)
			}
		}
	}
	t.Logf("stopped after %d transactions; recorded open %+v", txns, open)
	x.Sink, x.cut = newRedis(), nil
	defer x.Close()
	cfg.Sinks = []pipeline.Sink{newFile(), x}
	defer cfg.Sinks[0].Close()
	done, cancel = run()
	defer func() {
		cancel()
		<-done
	}()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var evs []*codec.Event
		keys, err := rc.Keys(ctx, "old:*").Result()
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range keys {
			if k == hw {
				continue
			}
			xs, err := rc.XRange(ctx, k, "-", "+").Result()
			if err != nil {
				t.Fatal(err)
			}
			for _, x := range xs {
				evs = append(evs, decode(t, x.Values[redis.FieldValue].(string)))
			}
		}
		big, small, err := countRows(evs, base)
		if err != nil {
			t.Fatal(err)
		}
		if big == txns*rows && small == txns {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d big rows and %d small after the restart, want %d and %d", big, small, txns*rows, txns)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
