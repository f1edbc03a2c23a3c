package redis

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/sluice-cdc/sluice/binlog"
	"github.com/sluice-cdc/sluice/codec"
	"github.com/sluice-cdc/sluice/internal/testenv"
	"github.com/sluice-cdc/sluice/internal/testenv/certs"
	"github.com/sluice-cdc/sluice/pipeline"
	"github.com/sluice-cdc/sluice/position"
	"github.com/sluice-cdc/sluice/tlsconfig"
)

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func quietLog() *slog.Logger {
	return slog.New(slog.NewTextHandler(discard{}, &slog.HandlerOptions{Level: slog.LevelError}))
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

func newSink(t testing.TB, addr string, cfg Config) *Sink {
	t.Helper()
	cfg.Addr = addr
	cfg.WriteTimeout = 3 * time.Second
	cfg.DialTimeout = time.Second
	s, err := New(cfg, "p1", quietLog())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func newClient(t testing.TB, addr string) *goredis.Client {
	c := goredis.NewClient(&goredis.Options{Addr: addr, Protocol: 2, DisableIdentity: true, MaxRetries: -1})
	t.Cleanup(func() { c.Close() })
	return c
}

func endAt(n uint32) *position.Position {
	return &position.Position{File: "mysql-bin.000001", Offset: n, GTIDs: "0-1-" + strconv.Itoa(int(n)), Flavor: position.MariaDB}
}

// streamMsgs makes messages first..last of table d.t (and d.u for odd
// seqs), each third one ending a transaction of source "src".
func streamMsgs(first, last uint64) []pipeline.Message {
	var ms []pipeline.Message
	for seq := first; seq <= last; seq++ {
		tbl := "t"
		if seq%2 == 1 {
			tbl = "u"
		}
		m := pipeline.Message{
			Seq: seq, Source: "src", DB: "d", Table: tbl, Op: binlog.OpInsert,
			Key:   fmt.Appendf(nil, `{"id":%d}`, seq),
			Value: fmt.Appendf(nil, `{"after":{"id":%d},"op":"c","sluice":{"seq":%d,"epoch":1}}`, seq, seq),
		}
		if seq%3 == 0 {
			m.End = endAt(uint32(seq * 100))
		}
		ms = append(ms, m)
	}
	return ms
}

// readStreams returns every entry of streams d.t and d.u, by seq.
func readStreams(t *testing.T, c *goredis.Client, keys ...string) map[uint64]map[string]any {
	t.Helper()
	got := map[uint64]map[string]any{}
	for _, k := range keys {
		xs, err := c.XRange(context.Background(), k, "-", "+").Result()
		if err != nil {
			t.Fatal(err)
		}
		for _, x := range xs {
			seq, err := strconv.ParseUint(x.Values[pipeline.HeaderSeq].(string), 10, 64)
			if err != nil {
				t.Fatalf("entry %s of %s: %v", x.ID, k, err)
			}
			if _, dup := got[seq]; dup {
				t.Fatalf("seq %d is in the streams twice", seq)
			}
			x.Values["stream"] = k
			got[seq] = x.Values
		}
	}
	return got
}

// checkStreams checks that the streams hold exactly msgs, field by field.
func checkStreams(t *testing.T, c *goredis.Client, msgs []pipeline.Message) {
	t.Helper()
	got := readStreams(t, c, "d.t", "d.u")
	if len(got) != len(msgs) {
		t.Fatalf("streams hold %d entries, want %d", len(got), len(msgs))
	}
	for _, m := range msgs {
		want := map[string]any{
			pipeline.HeaderSeq: strconv.FormatUint(m.Seq, 10), FieldKey: string(m.Key), FieldValue: string(m.Value),
			"stream": m.DB + "." + m.Table,
		}
		if m.End != nil {
			want[pipeline.HeaderEnd] = string(pipeline.AppendEnd(nil, m.End))
		}
		if !maps.Equal(got[m.Seq], want) {
			t.Errorf("seq %d: entry\n%v\nwant\n%v", m.Seq, got[m.Seq], want)
		}
	}
}

func TestStreamRoundTrip(t *testing.T) {
	ctx := testCtx(t)
	r := testenv.StartRedis(t)
	s := newSink(t, r.Addr(), Config{})
	c := newClient(t, r.Addr())

	rec, err := s.Recover(ctx, 1, "")
	if err != nil {
		t.Fatal(err)
	}
	if rec.MaxSeq != 0 || len(rec.Ends) != 0 || rec.Offset != "0" {
		t.Fatalf("empty Redis: Recover = %+v, want nothing and offset 0", rec)
	}
	all := streamMsgs(1, 10)
	off1, err := s.Write(ctx, &pipeline.Batch{Epoch: 1, Messages: all[:7]})
	if err != nil {
		t.Fatal(err)
	}
	if off1 != "7" {
		t.Fatalf("offset after seq 7 = %q", off1)
	}
	off2, err := s.Write(ctx, &pipeline.Batch{Epoch: 1, Messages: all[7:]})
	if err != nil {
		t.Fatal(err)
	}
	if off2 != "10" {
		t.Fatalf("offset after seq 10 = %q", off2)
	}
	checkStreams(t, c, all)

	// A new sink (a restarted pipeline) recovers from nothing and from the
	// offset after the first batch.
	s2 := newSink(t, r.Addr(), Config{})
	rec, err = s2.Recover(ctx, 1, "")
	if err != nil {
		t.Fatal(err)
	}
	// Seq 10 is the first message of a transaction whose end is not there.
	want := pipeline.Recovery{MaxSeq: 10, Offset: "10", Ends: map[string]pipeline.End{"src": {Pos: *endAt(900), Seq: 9}}, Partial: map[string]int{"src": 1}}
	if fmt.Sprint(rec) != fmt.Sprint(want) {
		t.Fatalf("Recover(\"\") = %+v\nwant %+v", rec, want)
	}
	rec, err = s2.Recover(ctx, 1, off1)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(rec) != fmt.Sprint(want) {
		t.Fatalf("Recover(%q) = %+v\nwant %+v", off1, rec, want)
	}
	// After seq 9 (the last end), only MaxSeq is past the offset.
	rec, err = s2.Recover(ctx, 1, "9")
	if err != nil {
		t.Fatal(err)
	}
	if rec.MaxSeq != 10 || len(rec.Ends) != 0 || rec.Offset != "10" {
		t.Fatalf("Recover(\"9\") = %+v, want MaxSeq 10, no ends", rec)
	}
	rec, err = s2.Recover(ctx, 1, off2)
	if err != nil {
		t.Fatal(err)
	}
	if rec.MaxSeq != 0 || len(rec.Ends) != 0 || rec.Offset != "10" {
		t.Fatalf("Recover(%q) = %+v, want nothing past it", off2, rec)
	}
	if _, err := s2.Recover(ctx, 1, "3:17"); err == nil || !strings.Contains(err.Error(), "offset") {
		t.Fatalf("Recover with a foreign offset: %v", err)
	}
	// An empty batch changes nothing and returns the offset.
	if off, err := s2.Write(ctx, &pipeline.Batch{Epoch: 1}); err != nil || off != "10" {
		t.Fatalf("empty batch: %q, %v", off, err)
	}
}

func TestStreamKeysAndMaxLen(t *testing.T) {
	ctx := testCtx(t)
	r := testenv.StartRedis(t)
	s := newSink(t, r.Addr(), Config{Key: "{source}/{db}/{table}", KeyPrefix: "cdc:", MaxLen: 10})
	c := newClient(t, r.Addr())
	if _, err := s.Recover(ctx, 1, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Write(ctx, &pipeline.Batch{Epoch: 1, Messages: streamMsgs(1, 2000)}); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"cdc:src/d/t", "cdc:src/d/u"} {
		n, err := c.XLen(ctx, k).Result()
		if err != nil {
			t.Fatal(err)
		}
		// MAXLEN ~ trims whole macro nodes (100 entries by default).
		if n < 10 || n > 200 {
			t.Errorf("%s has %d entries, want about max_len 10", k, n)
		}
	}
	if n, _ := c.Exists(ctx, "cdc:sluice:p1:hw").Result(); n != 1 {
		t.Errorf("the high-water hash is not under key_prefix")
	}
}

func TestRewriteChangesNothing(t *testing.T) {
	ctx := testCtx(t)
	r := testenv.StartRedis(t)
	s := newSink(t, r.Addr(), Config{MessagesPerScript: 4})
	c := newClient(t, r.Addr())
	if _, err := s.Recover(ctx, 1, ""); err != nil {
		t.Fatal(err)
	}
	all := streamMsgs(1, 20)
	if _, err := s.Write(ctx, &pipeline.Batch{Epoch: 1, Messages: all[:12]}); err != nil {
		t.Fatal(err)
	}
	// The same batch again, and one overlapping it.
	if off, err := s.Write(ctx, &pipeline.Batch{Epoch: 1, Messages: all[:12]}); err != nil || off != "12" {
		t.Fatalf("rewrite: %q, %v", off, err)
	}
	if off, err := s.Write(ctx, &pipeline.Batch{Epoch: 1, Messages: all[5:]}); err != nil || off != "20" {
		t.Fatalf("overlapping batch: %q, %v", off, err)
	}
	checkStreams(t, c, all)
}

func TestFencing(t *testing.T) {
	ctx := testCtx(t)
	r := testenv.StartRedis(t)
	old := newSink(t, r.Addr(), Config{})
	if _, err := old.Recover(ctx, 1, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := old.Write(ctx, &pipeline.Batch{Epoch: 1, Messages: streamMsgs(1, 3)}); err != nil {
		t.Fatal(err)
	}
	// A new leader recovers with epoch 2: from then on epoch 1 is refused,
	// before it writes anything.
	leader := newSink(t, r.Addr(), Config{})
	if _, err := leader.Recover(ctx, 2, "3"); err != nil {
		t.Fatal(err)
	}
	_, err := old.Write(ctx, &pipeline.Batch{Epoch: 1, Messages: streamMsgs(4, 6)})
	if !errors.Is(err, pipeline.ErrFenced) {
		t.Fatalf("write with epoch 1 after epoch 2 recovered: %v, want ErrFenced", err)
	}
	if _, err := old.Recover(ctx, 1, "3"); !errors.Is(err, pipeline.ErrFenced) {
		t.Fatalf("Recover with epoch 1: %v, want ErrFenced", err)
	}
	if _, err := leader.Write(ctx, &pipeline.Batch{Epoch: 2, Messages: streamMsgs(4, 6)}); err != nil {
		t.Fatal(err)
	}
	// Epoch 3 writes without recovering first; then 2 is refused too.
	if _, err := old.Write(ctx, &pipeline.Batch{Epoch: 3, Messages: streamMsgs(7, 7)}); err != nil {
		t.Fatal(err)
	}
	if _, err := leader.Write(ctx, &pipeline.Batch{Epoch: 2, Messages: streamMsgs(8, 8)}); !errors.Is(err, pipeline.ErrFenced) {
		t.Fatalf("write with epoch 2 after epoch 3 wrote: %v, want ErrFenced", err)
	}
	c := newClient(t, r.Addr())
	got := readStreams(t, c, "d.t", "d.u")
	if len(got) != 7 {
		t.Fatalf("streams hold %d entries, want seqs 1-7", len(got))
	}
	if epoch, _ := c.HGet(ctx, "sluice:p1:hw", "epoch").Result(); epoch != "3" {
		t.Errorf("the high-water hash holds epoch %q, want 3", epoch)
	}
}

// TestOutage stops the server in the middle of a run: Write fails
// promptly; once the server is back, Recover and the rest of the batches
// lose and double nothing. The second round kills it instead (a crash).
func TestOutage(t *testing.T) {
	ctx := testCtx(t)
	r := testenv.StartRedis(t)
	s := newSink(t, r.Addr(), Config{MessagesPerScript: 7})
	c := newClient(t, r.Addr())
	all := streamMsgs(1, 300)
	rec, err := s.Recover(ctx, 1, "")
	if err != nil {
		t.Fatal(err)
	}
	off := rec.Offset
	skip := uint64(0)
	// write mimics the pipeline: skip what the sink holds, write, and on
	// error recover before trying again.
	write := func(b []pipeline.Message) error {
		for len(b) > 0 && b[0].Seq <= skip {
			b = b[1:]
		}
		if len(b) == 0 {
			return nil
		}
		o, err := s.Write(ctx, &pipeline.Batch{Epoch: 1, Messages: b})
		if err != nil {
			return err
		}
		off, skip = o, b[len(b)-1].Seq
		return nil
	}
	recoverAndWrite := func(b []pipeline.Message) {
		t.Helper()
		rec, err := s.Recover(ctx, 1, off)
		if err != nil {
			t.Fatalf("Recover after the server is back: %v", err)
		}
		if rec.MaxSeq > skip {
			skip = rec.MaxSeq
		}
		if err := write(b); err != nil {
			t.Fatalf("Write after Recover: %v", err)
		}
	}
	for i, outage := range []func() error{r.Stop, r.Kill} {
		base := i * 150
		if err := write(all[base : base+50]); err != nil {
			t.Fatal(err)
		}
		if err := outage(); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		err := write(all[base+50 : base+100])
		if err == nil {
			t.Fatal("Write succeeded with the server down")
		}
		// Not a timing test: a hang (no timeouts) would take until ctx ends.
		if d := time.Since(start); d > 10*time.Second {
			t.Errorf("Write took %v to fail, more than write_timeout + dial_timeout", d)
		}
		t.Logf("Write with the server down: %v", err)
		if _, err := s.Recover(ctx, 1, off); err == nil {
			t.Fatal("Recover succeeded with the server down")
		}
		if err := r.Start(ctx); err != nil {
			t.Fatal(err)
		}
		recoverAndWrite(all[base+50 : base+100])
		recoverAndWrite(all[base+100 : base+150])
	}
	checkStreams(t, c, all)
}

// TestFailurePartWay makes one stream a string: the type check stops the
// batch at the first message for it, after the messages before it were
// applied; the high-water mark says exactly that.
func TestFailurePartWay(t *testing.T) {
	ctx := testCtx(t)
	r := testenv.StartRedis(t)
	s := newSink(t, r.Addr(), Config{})
	c := newClient(t, r.Addr())
	if _, err := s.Recover(ctx, 1, ""); err != nil {
		t.Fatal(err)
	}
	all := streamMsgs(1, 10)
	all[6].Table = "blocked" // seq 7
	if err := c.Set(ctx, "d.blocked", "not a stream", 0).Err(); err != nil {
		t.Fatal(err)
	}
	_, err := s.Write(ctx, &pipeline.Batch{Epoch: 1, Messages: all})
	if err == nil || !strings.Contains(err.Error(), "WRONGTYPE") || !strings.Contains(err.Error(), "seq 7") {
		t.Fatalf("Write into a string key: %v, want a WRONGTYPE error naming seq 7", err)
	}
	rec, err := s.Recover(ctx, 1, "")
	if err != nil {
		t.Fatal(err)
	}
	if rec.MaxSeq != 6 || rec.Ends["src"].Seq != 6 {
		t.Fatalf("Recover = %+v, want MaxSeq 6 and the end of seq 6", rec)
	}
	if err := c.Del(ctx, "d.blocked").Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Write(ctx, &pipeline.Batch{Epoch: 1, Messages: all[6:]}); err != nil {
		t.Fatal(err)
	}
	got := readStreams(t, c, "d.t", "d.u", "d.blocked")
	if len(got) != 10 {
		t.Fatalf("%d entries, want 10", len(got))
	}
}

// TestConcurrentChange changes the high-water hash between the sink's
// WATCH and its EXEC: the transaction does nothing and the sink reads the
// mark again; a higher epoch there refuses the write, the same epoch (a
// retry) lets it go on after the new seq.
func TestConcurrentChange(t *testing.T) {
	ctx := testCtx(t)
	r := testenv.StartRedis(t)
	s := newSink(t, r.Addr(), Config{})
	c := newClient(t, r.Addr())
	if _, err := s.Recover(ctx, 1, ""); err != nil {
		t.Fatal(err)
	}
	all := streamMsgs(1, 10)
	if _, err := s.Write(ctx, &pipeline.Batch{Epoch: 1, Messages: all[:4]}); err != nil {
		t.Fatal(err)
	}
	// Another writer of the same epoch applies seqs 5 and 6 just before
	// this one's EXEC: the sink tries again and writes 7-10 only.
	other := newSink(t, r.Addr(), Config{})
	calls := 0
	s.beforeExec = func() {
		if calls++; calls == 1 {
			if _, err := other.Write(ctx, &pipeline.Batch{Epoch: 1, Messages: all[4:6]}); err != nil {
				t.Error(err)
			}
		}
	}
	off, err := s.Write(ctx, &pipeline.Batch{Epoch: 1, Messages: all[4:]})
	if err != nil || off != "10" {
		t.Fatalf("Write after a concurrent change: %q, %v", off, err)
	}
	if calls != 2 {
		t.Errorf("the transaction was sent %d times, want 2 (one aborted)", calls)
	}
	checkStreams(t, c, all)

	// A new leader recovers between WATCH and EXEC: nothing is written.
	s.beforeExec = func() {
		if _, err := other.Recover(ctx, 2, "10"); err != nil {
			t.Error(err)
		}
	}
	if _, err := s.Write(ctx, &pipeline.Batch{Epoch: 1, Messages: streamMsgs(11, 12)}); !errors.Is(err, pipeline.ErrFenced) {
		t.Fatalf("Write while epoch 2 recovers: %v, want ErrFenced", err)
	}
	checkStreams(t, c, all)

	// The mark changing every time ends in an error, not a loop.
	s.beforeExec = func() {
		if err := c.HSet(ctx, "sluice:p1:hw", "touched", calls).Err(); err != nil {
			t.Error(err)
		}
		calls++
	}
	if _, err := s.Write(ctx, &pipeline.Batch{Epoch: 2, Messages: streamMsgs(11, 12)}); err == nil || !strings.Contains(err.Error(), "changed under this writer") {
		t.Fatalf("Write with the mark changing every time: %v", err)
	}
	s.beforeExec = nil
	if _, err := s.Write(ctx, &pipeline.Batch{Epoch: 2, Messages: streamMsgs(11, 12)}); err != nil {
		t.Fatal(err)
	}
	checkStreams(t, c, append(all, streamMsgs(11, 12)...))
}

// TestCommandFailsInExec makes one XADD fail inside EXEC, which the type
// checks before it otherwise prevent (the test rewrites its key after the
// checks): Redis applies the others, so the sink sets the mark back to
// before the failed message; nothing is lost, the messages after it are
// written twice.
func TestCommandFailsInExec(t *testing.T) {
	ctx := testCtx(t)
	r := testenv.StartRedis(t)
	s := newSink(t, r.Addr(), Config{})
	c := newClient(t, r.Addr())
	if _, err := s.Recover(ctx, 1, ""); err != nil {
		t.Fatal(err)
	}
	if err := c.Set(ctx, "d.x", "not a stream", 0).Err(); err != nil {
		t.Fatal(err)
	}
	all := streamMsgs(1, 6)
	s.beforeExec = func() { // seq 2, the first of d.t, goes to d.x
		s.cn.out = bytes.Replace(s.cn.out, []byte("$3\r\nd.t\r\n"), []byte("$3\r\nd.x\r\n"), 1)
	}
	_, err := s.Write(ctx, &pipeline.Batch{Epoch: 1, Messages: all})
	if err == nil || !strings.Contains(err.Error(), "WRONGTYPE") || !strings.Contains(err.Error(), "seq 2") {
		t.Fatalf("Write: %v, want a WRONGTYPE error naming seq 2", err)
	}
	s.beforeExec = nil
	rec, err := s.Recover(ctx, 1, "")
	if err != nil {
		t.Fatal(err)
	}
	if rec.MaxSeq != 1 || len(rec.Ends) != 0 {
		t.Fatalf("Recover = %+v, want MaxSeq 1 and no end (seq 3 is after the failure)", rec)
	}
	if _, err := s.Write(ctx, &pipeline.Batch{Epoch: 1, Messages: all[1:]}); err != nil {
		t.Fatal(err)
	}
	count := map[string]int{}
	for _, k := range []string{"d.t", "d.u"} {
		xs, err := c.XRange(ctx, k, "-", "+").Result()
		if err != nil {
			t.Fatal(err)
		}
		for _, x := range xs {
			count[x.Values[pipeline.HeaderSeq].(string)]++
		}
	}
	want := map[string]int{"1": 1, "2": 1, "3": 2, "4": 2, "5": 2, "6": 2}
	if !maps.Equal(count, want) {
		t.Fatalf("entries per seq %v, want %v", count, want)
	}
	if rec, err := s.Recover(ctx, 1, ""); err != nil || rec.MaxSeq != 6 || rec.Ends["src"].Seq != 6 {
		t.Fatalf("Recover = %+v, %v; want MaxSeq 6, end of 6", rec, err)
	}
}

func TestCloseReleasesEverything(t *testing.T) {
	ctx := testCtx(t)
	r := testenv.StartRedis(t)
	before := runtime.NumGoroutine()
	for i := 0; i < 3; i++ {
		s, err := New(Config{Addr: r.Addr()}, "p1", quietLog())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Recover(ctx, 1, ""); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Write(ctx, &pipeline.Batch{Epoch: 1, Messages: streamMsgs(uint64(i*10+1), uint64(i*10+10))}); err != nil {
			t.Fatal(err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before {
		buf := make([]byte, 1<<16)
		t.Fatalf("%d goroutines before, %d after Close:\n%s", before, n, buf[:runtime.Stack(buf, true)])
	}
	// The server sees no connection of ours left (only the one asking).
	c := newClient(t, r.Addr())
	list, err := c.ClientList(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(strings.TrimSpace(list), "\n") + 1; n != 1 {
		t.Fatalf("the server still has %d connections:\n%s", n, list)
	}
}

func TestConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		cfg   Config
		field string // a word the error must contain; "" for a valid config
	}{
		{Config{Addr: "127.0.0.1:6379"}, ""},
		{Config{Addr: "redis:6379", Mode: ModeMaterialize, Key: "x:{source}:{db}.{table}", KeyPrefix: "p:", MessagesPerScript: 10000}, ""},
		{Config{}, "addr"},
		{Config{Addr: "localhost"}, "addr"},
		{Config{Addr: ":6379"}, "addr"},
		{Config{Addr: "h:99999"}, "addr"},
		{Config{Addr: "h:1", DB: -1}, "db"},
		{Config{Addr: "h:1", Mode: "hash"}, "mode"},
		{Config{Addr: "h:1", Key: "{db}.{tabel}"}, "key"},
		{Config{Addr: "h:1", Key: "{db"}, "key"},
		{Config{Addr: "h:1", MaxLen: -1}, "max_len"},
		{Config{Addr: "h:1", MaxLen: 5, Mode: ModeMaterialize}, "max_len"},
		{Config{Addr: "h:1", DialTimeout: -time.Second}, "dial_timeout"},
		{Config{Addr: "h:1", WriteTimeout: -time.Second}, "write_timeout"},
		{Config{Addr: "h:1", MessagesPerScript: 10001}, "messages_per_script"},
		{Config{Addr: "h:1", WaitReplicas: -1}, "wait_replicas"},
		{Config{Addr: "h:1", Format: codec.Format{Name: codec.FormatDebezium}}, ""},
		{Config{Addr: "h:1", Mode: ModeStream, Format: codec.Format{Name: codec.FormatDebezium, Schemas: true}}, ""},
		{Config{Addr: "h:1", Mode: ModeMaterialize, Format: codec.Format{Name: codec.FormatDebezium}}, "format debezium is for mode stream"},
		{Config{Addr: "h:1", Format: codec.Format{Name: "avro"}}, "format"},
	} {
		err := tc.cfg.Validate()
		switch {
		case tc.field == "" && err != nil:
			t.Errorf("%+v: %v", tc.cfg, err)
		case tc.field != "" && (err == nil || !strings.HasPrefix(err.Error(), tc.field)):
			t.Errorf("%+v: error %v, want one about %s", tc.cfg, err, tc.field)
		}
	}
	if _, err := New(Config{Addr: "h:1", CAFile: "/nonexistent/ca.pem"}, "p", nil); err == nil || !strings.Contains(err.Error(), "ca_file") {
		t.Errorf("missing ca_file: %v", err)
	}
	if _, err := New(Config{Addr: "h:1"}, "", nil); err == nil {
		t.Error("New accepted an empty pipeline name")
	}
}

// ---- materialize ----

var testTable = &binlog.Table{
	Schema: "shop", Name: "items",
	Columns: []binlog.Column{
		{Name: "id", Kind: binlog.KindInt},
		{Name: "name", Kind: binlog.KindString, Charset: "utf8mb4"},
		{Name: "price", Kind: binlog.KindDecimal},
		{Name: "note", Kind: binlog.KindString, Charset: "utf8mb4", Nullable: true},
	},
	PrimaryKey: []int{0},
}

func row(id int64, name, price string, note *string) binlog.Row {
	n := binlog.NullValue()
	if note != nil {
		n = binlog.BytesValue(binlog.KindString, []byte(*note))
	}
	return binlog.Row{binlog.IntValue(id), binlog.BytesValue(binlog.KindString, []byte(name)), binlog.BytesValue(binlog.KindDecimal, []byte(price)), n}
}

// rowMsg builds a message the way the pipeline does: Key from
// codec.AppendChangeKey.
func rowMsg(seq uint64, op binlog.Op, before, after binlog.Row) pipeline.Message {
	ch := &binlog.Change{Op: op, Table: testTable, Before: before, After: after}
	return pipeline.Message{
		Seq: seq, Source: "src", DB: "shop", Table: "items", Op: op,
		Key:    codec.AppendChangeKey(nil, ch),
		Value:  fmt.Appendf(nil, `{"op":%q,"sluice":{"seq":%d,"epoch":1}}`, op.Code(), seq),
		Change: ch,
	}
}

// hashes returns every row hash of shop.items.
func hashes(t *testing.T, c *goredis.Client) map[string]map[string]string {
	t.Helper()
	ctx := context.Background()
	keys, err := c.Keys(ctx, "shop.items:*").Result()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]map[string]string{}
	for _, k := range keys {
		h, err := c.HGetAll(ctx, k).Result()
		if err != nil {
			t.Fatal(err)
		}
		got[k] = h
	}
	return got
}

func checkHashes(t *testing.T, c *goredis.Client, want map[string]map[string]string) {
	t.Helper()
	got := hashes(t, c)
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("hashes:\n%v\nwant\n%v", got, want)
	}
}

func TestMaterialize(t *testing.T) {
	ctx := testCtx(t)
	r := testenv.StartRedis(t)
	s := newSink(t, r.Addr(), Config{Mode: ModeMaterialize, MessagesPerScript: 3})
	c := newClient(t, r.Addr())
	if _, err := s.Recover(ctx, 1, ""); err != nil {
		t.Fatal(err)
	}
	note := "fragile \"glass\""
	batch1 := []pipeline.Message{
		rowMsg(1, binlog.OpRead, nil, row(1, "cup", "2.50", nil)),
		rowMsg(2, binlog.OpInsert, nil, row(2, "plate", "4.00", &note)),
		rowMsg(3, binlog.OpInsert, nil, row(3, "bowl", "3.10", nil)),
		rowMsg(4, binlog.OpUpdate, row(1, "cup", "2.50", nil), row(1, "mug", "2.75", nil)),
		rowMsg(5, binlog.OpUpdate, row(3, "bowl", "3.10", nil), row(30, "bowl", "3.10", nil)), // key change
		rowMsg(6, binlog.OpDelete, row(2, "plate", "4.00", &note), nil),
		{Seq: 7, Source: "src", DB: "shop", Op: binlog.OpDDL, Key: []byte("null"), Value: []byte(`{"ddl":"CREATE TABLE x (i INT)"}`), End: endAt(700)},
	}
	batch1[5].End = endAt(600)
	off, err := s.Write(ctx, &pipeline.Batch{Epoch: 1, Messages: batch1})
	if err != nil {
		t.Fatal(err)
	}
	if off != "7" {
		t.Fatalf("offset %q, want 7", off)
	}
	want := map[string]map[string]string{
		`shop.items:{"id":1}`:  {"id": "1", "name": `"mug"`, "price": `"2.75"`, "note": "null"},
		`shop.items:{"id":30}`: {"id": "30", "name": `"bowl"`, "price": `"3.10"`, "note": "null"},
	}
	checkHashes(t, c, want)

	// Applying the batch again changes nothing (the row 3 → 30 key change
	// would otherwise leave a second copy behind).
	if _, err := s.Write(ctx, &pipeline.Batch{Epoch: 1, Messages: batch1}); err != nil {
		t.Fatal(err)
	}
	checkHashes(t, c, want)

	// MINIMAL row images: an update's after image has only the changed
	// columns (and the before image only the key); it updates those.
	absent := binlog.Value{}
	partial := func(seq uint64, beforeID int64, after binlog.Row) pipeline.Message {
		before := binlog.Row{binlog.IntValue(beforeID), absent, absent, absent}
		return rowMsg(seq, binlog.OpUpdate, before, after)
	}
	batch2 := []pipeline.Message{
		partial(8, 1, binlog.Row{absent, absent, binlog.BytesValue(binlog.KindDecimal, []byte("3.00")), absent}),
		partial(9, 30, binlog.Row{binlog.IntValue(31), absent, absent, binlog.BytesValue(binlog.KindString, []byte("blue"))}),
		rowMsg(10, binlog.OpInsert, nil, row(2, "plate", "4.00", nil)),
	}
	batch2[2].End = endAt(1000)
	if _, err := s.Write(ctx, &pipeline.Batch{Epoch: 1, Messages: batch2}); err != nil {
		t.Fatal(err)
	}
	want = map[string]map[string]string{
		`shop.items:{"id":1}`:  {"id": "1", "name": `"mug"`, "price": `"3.00"`, "note": "null"},
		`shop.items:{"id":31}`: {"id": "31", "name": `"bowl"`, "price": `"3.10"`, "note": `"blue"`},
		`shop.items:{"id":2}`:  {"id": "2", "name": `"plate"`, "price": `"4.00"`, "note": "null"},
	}
	checkHashes(t, c, want)

	rec, err := s.Recover(ctx, 1, "7")
	if err != nil {
		t.Fatal(err)
	}
	if rec.MaxSeq != 10 || rec.Ends["src"].Seq != 10 || rec.Ends["src"].Pos != *endAt(1000) {
		t.Fatalf("Recover = %+v", rec)
	}

	// A row change without its decoded row cannot be materialized.
	bad := rowMsg(11, binlog.OpInsert, nil, row(5, "x", "1", nil))
	bad.Change = nil
	if _, err := s.Write(ctx, &pipeline.Batch{Epoch: 1, Messages: []pipeline.Message{bad}}); err == nil {
		t.Fatal("Write without Change succeeded")
	}
	// Fenced like stream mode.
	if _, err := s.Recover(ctx, 2, "10"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Write(ctx, &pipeline.Batch{Epoch: 1, Messages: []pipeline.Message{rowMsg(11, binlog.OpDelete, row(1, "mug", "3.00", nil), nil)}}); !errors.Is(err, pipeline.ErrFenced) {
		t.Fatalf("epoch 1 after 2: %v", err)
	}
	checkHashes(t, c, want)
}

// TestMaterializeOutage: rows stay equal to the source across a server
// crash in the middle of the run.
func TestMaterializeOutage(t *testing.T) {
	ctx := testCtx(t)
	r := testenv.StartRedis(t)
	s := newSink(t, r.Addr(), Config{Mode: ModeMaterialize, MessagesPerScript: 5})
	c := newClient(t, r.Addr())
	if _, err := s.Recover(ctx, 1, ""); err != nil {
		t.Fatal(err)
	}
	var msgs []pipeline.Message
	want := map[string]map[string]string{}
	for i := int64(1); i <= 40; i++ {
		msgs = append(msgs, rowMsg(uint64(i), binlog.OpInsert, nil, row(i, "n"+strconv.Itoa(int(i)), "1.00", nil)))
		want[fmt.Sprintf(`shop.items:{"id":%d}`, i)] = map[string]string{"id": strconv.Itoa(int(i)), "name": fmt.Sprintf(`"n%d"`, i), "price": `"1.00"`, "note": "null"}
	}
	for i := int64(1); i <= 40; i += 4 {
		msgs = append(msgs, rowMsg(uint64(len(msgs)+1), binlog.OpDelete, row(i, "", "", nil), nil))
		delete(want, fmt.Sprintf(`shop.items:{"id":%d}`, i))
	}
	if _, err := s.Write(ctx, &pipeline.Batch{Epoch: 1, Messages: msgs[:25]}); err != nil {
		t.Fatal(err)
	}
	if err := r.Kill(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Write(ctx, &pipeline.Batch{Epoch: 1, Messages: msgs[25:]}); err == nil {
		t.Fatal("Write succeeded with the server down")
	}
	if err := r.Start(ctx); err != nil {
		t.Fatal(err)
	}
	rec, err := s.Recover(ctx, 1, "")
	if err != nil {
		t.Fatal(err)
	}
	if rec.MaxSeq != 25 {
		t.Fatalf("MaxSeq %d after the crash, want 25", rec.MaxSeq)
	}
	if _, err := s.Write(ctx, &pipeline.Batch{Epoch: 1, Messages: msgs[25:]}); err != nil {
		t.Fatal(err)
	}
	checkHashes(t, c, want)
}

func TestKeyTemplate(t *testing.T) {
	for _, tc := range []struct{ tmpl, want string }{
		{"{db}.{table}", "d.t"},
		{"cdc:{source}:{db}:{table}:x", "cdc:s:d:t:x"},
		{"all", "all"},
	} {
		k, err := pipeline.ParseTemplate(tc.tmpl)
		if err != nil {
			t.Fatal(err)
		}
		if got := string(k.Append(nil, "d", "t", "s", nil)); got != tc.want {
			t.Errorf("%q: %q, want %q", tc.tmpl, got, tc.want)
		}
	}
}

// TestWaitReplicas runs a second server as a replica: with wait_replicas 1
// a Write succeeds while it follows, and fails once it is stopped.
func TestWaitReplicas(t *testing.T) {
	ctx := testCtx(t)
	primary := testenv.StartRedis(t)
	replica := testenv.StartRedis(t)
	rc := newClient(t, replica.Addr())
	pc := newClient(t, primary.Addr())
	if err := rc.ReplicaOf(ctx, primary.Host, strconv.Itoa(primary.Port)).Err(); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; {
		// The primary counts it (WAIT does) once it is online there,
		// which can be a while after the replica says its link is up.
		info, err := pc.Info(ctx, "replication").Result()
		if err == nil && strings.Contains(info, "state=online") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the replica did not connect: %s %v", info, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// A generous bound: under load the replica's acknowledgement can take
	// longer than half a second (CI saw it).
	s, err := New(Config{Addr: primary.Addr(), WaitReplicas: 1, WriteTimeout: 3 * time.Second}, "p1", quietLog())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Recover(ctx, 1, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Write(ctx, &pipeline.Batch{Epoch: 1, Messages: streamMsgs(1, 5)}); err != nil {
		t.Fatalf("Write with a live replica: %v", err)
	}
	if err := replica.Stop(); err != nil {
		t.Fatal(err)
	}
	_, err = s.Write(ctx, &pipeline.Batch{Epoch: 1, Messages: streamMsgs(6, 10)})
	if err == nil || !strings.Contains(err.Error(), "wait_replicas") {
		t.Fatalf("Write with the replica down: %v, want a wait_replicas error", err)
	}
}

// TestWarnings: Recover warns when the server can lose acknowledged
// writes, and when it holds less than the checkpoint says.
func TestWarnings(t *testing.T) {
	ctx := testCtx(t)
	r := testenv.StartRedis(t)
	c := newClient(t, r.Addr())
	if err := c.ConfigSet(ctx, "appendfsync", "everysec").Err(); err != nil {
		t.Fatal(err)
	}
	var logs strings.Builder
	s, err := New(Config{Addr: r.Addr()}, "p1", slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	rec, err := s.Recover(ctx, 1, "42")
	if err != nil {
		t.Fatal(err)
	}
	if rec.MaxSeq != 0 || rec.Offset != "0" {
		t.Fatalf("Recover = %+v", rec)
	}
	for _, want := range []string{"appendfsync=everysec", "redis_seq=0 checkpoint_seq=42"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("logs lack %q:\n%s", want, logs.String())
		}
	}
}

// What managed Redis services require, on a real Redis 7: TLS on its
// tls-port (verified against the CA the test made, with a client
// certificate where the server asks for one) and an ACL user with a
// password. The right settings write and read back; a wrong CA, a wrong
// password or a missing client certificate is refused with an error that
// says which and never shows the password.
func TestTLSAndACL(t *testing.T) {
	const password = "s3cret-Pw"
	p := certs.New(t)
	r := testenv.StartRedisSecure(t, map[string]string{"sluice": password}, p, true)
	good := Config{
		Username: "sluice", Password: password,
		TLS: tlsconfig.Toggle{On: true, Config: tlsconfig.Config{CAFile: p.CAFile, CertFile: p.ClientCertFile, KeyFile: p.ClientKeyFile}},
	}
	ctx := testCtx(t)
	s := newSink(t, r.TLSAddr(), good)
	if _, err := s.Recover(ctx, 1, ""); err != nil {
		t.Fatal(err)
	}
	all := streamMsgs(1, 6)
	if _, err := s.Write(ctx, &pipeline.Batch{Epoch: 1, Messages: all}); err != nil {
		t.Fatal(err)
	}
	checkStreams(t, newClient(t, r.Addr()), all)
	if rec, err := newSink(t, r.TLSAddr(), good).Recover(ctx, 2, ""); err != nil || rec.MaxSeq != 6 {
		t.Fatalf("Recover over TLS: %+v, %v; want MaxSeq 6", rec, err)
	}

	wrongCA, noCert, wrongPW, noTLS := good, good, good, good
	wrongCA.TLS.CAFile = p.OtherCAFile
	noCert.TLS.CertFile, noCert.TLS.KeyFile = "", ""
	wrongPW.Password = "wrong-pw"
	noTLS.TLS = tlsconfig.Toggle{}
	for _, c := range []struct {
		name string
		addr string
		cfg  Config
		want []string
	}{
		{"wrong CA", r.TLSAddr(), wrongCA, []string{"certificate signed by unknown authority", "tls.ca_file"}},
		{"no client certificate", r.TLSAddr(), noCert, []string{"tls.cert_file"}},
		{"wrong password", r.TLSAddr(), wrongPW, []string{"WRONGPASS", "username and password"}},
		{"no TLS on the tls-port", r.TLSAddr(), noTLS, []string{"set tls"}},
		{"TLS on the plain port", r.Addr(), good, []string{"did not answer the TLS handshake", "tls-port"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := newSink(t, c.addr, c.cfg).Recover(testCtx(t), 1, "")
			certs.Refused(t, err, []string{password, "wrong-pw"}, append(c.want, c.addr)...)
		})
	}
}
