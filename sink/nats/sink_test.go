package nats

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	gonats "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sluice-cdc/sluice/binlog"
	"github.com/sluice-cdc/sluice/internal/testenv/certs"
	"github.com/sluice-cdc/sluice/internal/testenv/natsenv"
	"github.com/sluice-cdc/sluice/pipeline"
	"github.com/sluice-cdc/sluice/position"
)

const testPipeline = "p1"

func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func quietLog() *slog.Logger { return slog.New(slog.DiscardHandler) }

func newSink(t testing.TB, url string, cfg Config) *Sink {
	t.Helper()
	cfg.URL = url
	if cfg.AckTimeout == 0 {
		cfg.AckTimeout = 3 * time.Second
	}
	cfg.ConnectTimeout = time.Second
	s, err := New(cfg, testPipeline, quietLog())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func endAt(seq uint64) *position.Position {
	return &position.Position{File: "mysql-bin.000001", Offset: uint32(seq * 100), GTIDs: "0-1-" + strconv.FormatUint(seq, 10), Flavor: position.MariaDB}
}

// batch returns messages first..last of epoch, from source "src", on two
// tables; every third message and the last end a transaction.
func batch(epoch, first, last uint64) *pipeline.Batch {
	b := &pipeline.Batch{Epoch: epoch}
	for seq := first; seq <= last; seq++ {
		m := pipeline.Message{
			Seq:    seq,
			Source: "src",
			DB:     "shop",
			Table:  "orders",
			Op:     binlog.OpInsert,
			Key:    []byte(`{"id":` + strconv.FormatUint(seq, 10) + `}`),
		}
		if seq%2 == 0 {
			m.Table = "order.lines" // a dot: made safe in the subject
		}
		if seq%3 == 0 || seq == last {
			m.End = endAt(seq)
		}
		m.Value = value(m.Key, seq, epoch, m.End)
		b.Messages = append(b.Messages, m)
	}
	return b
}

// value is a change line of about 300 bytes.
func value(key []byte, seq, epoch uint64, end *position.Position) []byte {
	v := fmt.Sprintf(`{"before":null,"after":{"id":%s,"customer":"customer-%06d","note":"%s"},"source":{"name":"src","db":"shop","table":"orders"},"op":"c","ts_ms":1700000000000,"sluice":{"seq":%d,"epoch":%d`,
		key[6:len(key)-1], seq, strings.Repeat("x", 120), seq, epoch)
	if end != nil {
		v += `,"end":` + string(pipeline.AppendEnd(nil, end))
	}
	return []byte(v + "}}")
}

type stored struct {
	subject string
	sseq    uint64
	data    string
	header  gonats.Header
}

// readStream returns every message of the stream, with data and headers,
// read over a connection of its own (made with opts).
func readStream(t testing.TB, url, stream string, opts ...gonats.Option) []stored {
	t.Helper()
	ctx := testCtx(t)
	nc, err := gonats.Connect(url, opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	st, err := js.Stream(ctx, stream)
	if err != nil {
		t.Fatal(err)
	}
	state := st.CachedInfo().State
	if state.Msgs == 0 {
		return nil
	}
	cons, err := st.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	it, err := cons.Messages()
	if err != nil {
		t.Fatal(err)
	}
	defer it.Stop()
	var out []stored
	for {
		m, err := it.Next(jetstream.NextContext(ctx))
		if err != nil {
			t.Fatal(err)
		}
		md, err := m.Metadata()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, stored{m.Subject(), md.Sequence.Stream, string(m.Data()), m.Headers()})
		if md.Sequence.Stream >= state.LastSeq {
			return out
		}
	}
}

// seqs returns the sluice-seq header of each stored message (fence
// messages left out).
func seqs(t testing.TB, ms []stored) []uint64 {
	t.Helper()
	var out []uint64
	for _, m := range ms {
		if IsFence(m.header) {
			continue
		}
		n, err := strconv.ParseUint(m.header.Get(pipeline.HeaderSeq), 10, 64)
		if err != nil {
			t.Fatalf("stream seq %d: %v", m.sseq, err)
		}
		out = append(out, n)
	}
	return out
}

func seqRange(first, last uint64) []uint64 {
	var out []uint64
	for s := first; s <= last; s++ {
		out = append(out, s)
	}
	return out
}

func equalSeqs(a, b []uint64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func mustRecover(t testing.TB, s *Sink, epoch uint64, offset string) pipeline.Recovery {
	t.Helper()
	rec, err := s.Recover(testCtx(t), epoch, offset)
	if err != nil {
		t.Fatalf("Recover(%d, %q): %v", epoch, offset, err)
	}
	return rec
}

func mustWrite(t testing.TB, s *Sink, b *pipeline.Batch) string {
	t.Helper()
	off, err := s.Write(testCtx(t), b)
	if err != nil {
		t.Fatalf("Write(seq %d..%d): %v", b.FirstSeq(), b.LastSeq(), err)
	}
	return off
}

func TestRoundTrip(t *testing.T) {
	n := natsenv.StartNATS(t)
	s := newSink(t, n.URL(), Config{})
	rec := mustRecover(t, s, 1, "")
	// The recovery fenced the stream: one message, at stream sequence 1.
	if rec.MaxSeq != 0 || rec.Offset != "1" || len(rec.Ends) != 0 {
		t.Fatalf("Recover on a new stream = %+v, want nothing, at offset 1 (after the fence)", rec)
	}
	b1, b2 := batch(1, 1, 5), batch(1, 6, 10)
	if off := mustWrite(t, s, b1); off != "6" {
		t.Fatalf("offset after 5 messages = %q, want 6", off)
	}
	if off := mustWrite(t, s, b2); off != "11" {
		t.Fatalf("offset after 10 messages = %q, want 11", off)
	}
	if off := mustWrite(t, s, &pipeline.Batch{Epoch: 1}); off != "11" {
		t.Fatalf("offset after an empty batch = %q, want 11", off)
	}
	// Recovering again under the same epoch adds no second fence.
	if rec := mustRecover(t, s, 1, "11"); rec.Offset != "11" {
		t.Fatalf("a second Recover of epoch 1: offset %q, want 11", rec.Offset)
	}

	got := readStream(t, n.URL(), "sluice-"+testPipeline)
	want := append(b1.Messages, b2.Messages...)
	if len(got) != len(want)+1 {
		t.Fatalf("stream holds %d messages, want %d and the fence", len(got), len(want))
	}
	f := got[0]
	if f.subject != "sluice._._" || f.data != "" || !IsFence(f.header) || f.header.Get(HeaderFence) != "1" ||
		f.header.Get(pipeline.HeaderEpoch) != "1" || f.header.Get(pipeline.HeaderSeq) != "" {
		t.Fatalf("first message %+v, want the fence of epoch 1 (headers only, on sluice._._)", f)
	}
	got = got[1:]
	for i, m := range want {
		g := got[i]
		subj := "sluice.shop.orders"
		if m.Seq%2 == 0 {
			subj = "sluice.shop.order_lines"
		}
		if g.subject != subj {
			t.Errorf("message %d: subject %q, want %q", m.Seq, g.subject, subj)
		}
		if g.sseq != uint64(i+2) {
			t.Errorf("message %d: stream sequence %d, want %d", m.Seq, g.sseq, i+2)
		}
		if g.data != string(m.Value) {
			t.Errorf("message %d: data\n%s\nwant\n%s", m.Seq, g.data, m.Value)
		}
		wantHdr := map[string]string{
			jetstream.MsgIDHeader: fmt.Sprintf("%s:1:%d", testPipeline, m.Seq),
			pipeline.HeaderSeq:    strconv.FormatUint(m.Seq, 10),
			pipeline.HeaderEpoch:  "1",
			pipeline.HeaderSource: "src",
			pipeline.HeaderEnd:    "",
		}
		if m.End != nil {
			wantHdr[pipeline.HeaderEnd] = string(pipeline.AppendEnd(nil, m.End))
		}
		for k, v := range wantHdr {
			if g.header.Get(k) != v {
				t.Errorf("message %d: header %s = %q, want %q", m.Seq, k, g.header.Get(k), v)
			}
		}
		if m.End != nil {
			p, err := pipeline.ParseEnd([]byte(g.header.Get(pipeline.HeaderEnd)))
			if err != nil || *p != *m.End {
				t.Errorf("message %d: end %+v (%v), want %+v", m.Seq, p, err, m.End)
			}
		}
	}
}

func TestRecover(t *testing.T) {
	n := natsenv.StartNATS(t)
	s := newSink(t, n.URL(), Config{})
	mustRecover(t, s, 1, "")
	early := batch(1, 1, 5)
	for i := range early.Messages {
		early.Messages[i].Source = "early"
	}
	off5 := mustWrite(t, s, early)
	mustWrite(t, s, batch(1, 6, 10))
	mustWrite(t, s, batch(1, 11, 11)) // ends at 11, after the last 3-multiple (9)
	s.Close()

	// A new process, as after a restart.
	s2 := newSink(t, n.URL(), Config{})
	all := mustRecover(t, s2, 1, "")
	if all.MaxSeq != 11 || all.Offset != "12" {
		t.Fatalf("Recover from \"\": MaxSeq %d offset %q, want 11 and 12 (after the fence)", all.MaxSeq, all.Offset)
	}
	if e := all.Ends["src"]; e.Seq != 11 || e.Pos != *endAt(11) {
		t.Fatalf("Recover from \"\": end %+v, want seq 11 at %+v", e, endAt(11))
	}
	if e := all.Ends["early"]; e.Seq != 5 || e.Pos != *endAt(5) {
		t.Fatalf("Recover from \"\": end of source early %+v, want seq 5", e)
	}

	after := mustRecover(t, s2, 1, off5)
	if after.MaxSeq != 11 || after.Offset != "12" || after.Ends["src"].Seq != 11 {
		t.Fatalf("Recover from %s: %+v, want MaxSeq 11, offset 12, end at 11", off5, after)
	}
	if _, ok := after.Ends["early"]; ok || len(after.Ends) != 1 {
		t.Fatalf("Recover from %s reports ends %+v: only source src wrote after it", off5, after.Ends)
	}

	// Only what is after the offset counts: after stream sequence 12
	// (seq 11, the fence of epoch 1 being at 1) there is nothing.
	none := mustRecover(t, s2, 1, "12")
	if none.MaxSeq != 0 || len(none.Ends) != 0 || none.Offset != "12" {
		t.Fatalf("Recover from the end: %+v, want nothing at offset 12", none)
	}

	// Recover with a checkpoint that ends before a transaction's end
	// (stream sequence 10 holds seq 9).
	s3 := newSink(t, n.URL(), Config{})
	r := mustRecover(t, s3, 2, "10")
	if r.MaxSeq != 11 || r.Ends["src"].Seq != 11 || r.Ends["src"].Pos != *endAt(11) || r.Offset != "13" {
		t.Fatalf("Recover from 10: %+v, want MaxSeq 11, end at 11, offset 13 (after epoch 2's fence)", r)
	}
	// and it writes on under the new epoch
	if off := mustWrite(t, s3, batch(2, 12, 13)); off != "15" {
		t.Fatalf("offset %q, want 15", off)
	}

	if _, err := s3.Recover(testCtx(t), 2, "nine"); err == nil || !strings.Contains(err.Error(), "not a stream sequence number") {
		t.Fatalf("Recover with a bad offset: %v", err)
	}
}

func TestDedupeResentBatch(t *testing.T) {
	n := natsenv.StartNATS(t)
	s := newSink(t, n.URL(), Config{})
	mustRecover(t, s, 1, "")
	b := batch(1, 1, 5)
	if off := mustWrite(t, s, b); off != "6" {
		t.Fatalf("offset %q, want 6 (after the fence and 5 messages)", off)
	}
	// The same batch again: every message is a duplicate (Nats-Msg-Id).
	if off := mustWrite(t, s, b); off != "6" {
		t.Fatalf("offset after a re-sent batch %q, want 6", off)
	}
	// After a Recover, as the pipeline would retry: the batch overlaps
	// what is stored (3..5) and goes beyond it (6..7).
	mustRecover(t, s, 1, "")
	if off := mustWrite(t, s, batch(1, 3, 7)); off != "8" {
		t.Fatalf("offset after an overlapping batch %q, want 8", off)
	}
	got := seqs(t, readStream(t, n.URL(), s.Stream()))
	if !equalSeqs(got, seqRange(1, 7)) {
		t.Fatalf("stream holds seqs %v, want 1..7 once each", got)
	}
}

func TestZombieIsFenced(t *testing.T) {
	n := natsenv.StartNATS(t)
	old := newSink(t, n.URL(), Config{})
	mustRecover(t, old, 1, "")
	mustWrite(t, old, batch(1, 1, 3))

	// A new leader takes over, and writes.
	leader := newSink(t, n.URL(), Config{})
	rec := mustRecover(t, leader, 2, "")
	if rec.MaxSeq != 3 {
		t.Fatalf("new leader recovered MaxSeq %d, want 3", rec.MaxSeq)
	}
	mustWrite(t, leader, batch(2, 4, 5))

	// The old leader still believes it leads: its batch is longer than
	// what the new leader wrote, so later messages of it expect stream
	// sequences that exist now; none may be stored.
	_, err := old.Write(testCtx(t), batch(1, 4, 10))
	if !errors.Is(err, pipeline.ErrFenced) {
		t.Fatalf("zombie Write: %v, want ErrFenced", err)
	}
	got := readStream(t, n.URL(), old.Stream())
	if s := seqs(t, got); !equalSeqs(s, seqRange(1, 5)) {
		t.Fatalf("stream holds seqs %v, want 1..5", s)
	}
	for _, m := range got[4:] { // after the fence of epoch 1 and seqs 1..3
		if e := m.header.Get(pipeline.HeaderEpoch); e != "2" {
			t.Fatalf("stream sequence %d has epoch %s: the zombie wrote after the new leader", m.sseq, e)
		}
	}
	// Its Recover is refused too, from any offset.
	for _, off := range []string{"", "3", "5"} {
		if _, err := old.Recover(testCtx(t), 1, off); !errors.Is(err, pipeline.ErrFenced) {
			t.Fatalf("zombie Recover(1, %q): %v, want ErrFenced", off, err)
		}
	}
	// and the leader goes on.
	mustRecover(t, leader, 2, "5")
	if off := mustWrite(t, leader, batch(2, 6, 6)); off != "8" {
		t.Fatalf("leader offset %q, want 8 (two fences and 6 messages)", off)
	}
}

// A Write after the stream moved on under the same epoch (a late write of
// the same leader, or a second process of it) fails with a retryable
// error. The id chain keeps the stream consistent: a message of an epoch
// is stored only right after its predecessor (seq-1) of the same epoch,
// so the batch's tail may land after the other copy of seq 3, never a
// second copy of anything.
func TestWriteAfterSameEpochAppendIsRetryable(t *testing.T) {
	n := natsenv.StartNATS(t)
	a := newSink(t, n.URL(), Config{})
	mustRecover(t, a, 1, "")
	mustWrite(t, a, batch(1, 1, 2))

	b := newSink(t, n.URL(), Config{})
	mustRecover(t, b, 1, "")
	mustWrite(t, b, batch(1, 3, 3))

	_, err := a.Write(testCtx(t), batch(1, 3, 6))
	if err == nil || errors.Is(err, pipeline.ErrFenced) {
		t.Fatalf("Write after a same-epoch append: %v, want a retryable error", err)
	}
	if _, err := a.Write(testCtx(t), batch(1, 7, 7)); err == nil {
		t.Fatal("Write after a failed Write without Recover succeeded")
	}
	rec := mustRecover(t, a, 1, "2")
	mustWrite(t, a, batch(1, rec.MaxSeq+1, 8))
	if s := seqs(t, readStream(t, n.URL(), a.Stream())); !equalSeqs(s, seqRange(1, 8)) {
		t.Fatalf("stream holds seqs %v, want 1..8 once each", s)
	}
}

// An older leader's batch after a new leader's recovery and before its
// first write (a leader paused past its lease, woken up right then): the
// recovery's fence refuses it (pipeline.ErrFenced), so nothing of an
// older epoch lands after the new leader recovered (docs/HA.md).
func TestOlderEpochAfterRecoverIsFenced(t *testing.T) {
	n := natsenv.StartNATS(t)
	old := newSink(t, n.URL(), Config{})
	mustRecover(t, old, 1, "")
	mustWrite(t, old, batch(1, 1, 2))

	cur := newSink(t, n.URL(), Config{})
	if rec := mustRecover(t, cur, 2, ""); rec.MaxSeq != 2 {
		t.Fatalf("new leader recovered MaxSeq %d, want 2", rec.MaxSeq)
	}
	if _, err := old.Write(testCtx(t), batch(1, 3, 3)); !errors.Is(err, pipeline.ErrFenced) {
		t.Fatalf("older leader's Write after the new leader's Recover: %v, want ErrFenced", err)
	}
	mustWrite(t, cur, batch(2, 3, 6))
	got := readStream(t, n.URL(), cur.Stream())
	if s := seqs(t, got); !equalSeqs(s, seqRange(1, 6)) {
		t.Fatalf("stream holds seqs %v, want 1..6", s)
	}
	checkEpochOrder(t, got)
}

// An older leader's message that lands between the new leader's scan and
// its fence: the fence is refused, the scan is done again and reports it,
// and the older leader's next message is refused.
func TestOlderEpochDuringRecoverIsFound(t *testing.T) {
	n := natsenv.StartNATS(t)
	old := newSink(t, n.URL(), Config{})
	mustRecover(t, old, 1, "")
	mustWrite(t, old, batch(1, 1, 2))

	cur := newSink(t, n.URL(), Config{})
	landed := 0
	cur.beforeFence = func() {
		if landed == 0 {
			mustWrite(t, old, batch(1, 3, 3))
		}
		landed++
	}
	rec := mustRecover(t, cur, 2, "")
	if rec.MaxSeq != 3 || rec.Ends["src"].Seq != 3 || landed != 2 {
		t.Fatalf("new leader recovered %+v after %d scans, want MaxSeq 3 and its end, after 2 scans", rec, landed)
	}
	if _, err := old.Write(testCtx(t), batch(1, 4, 4)); !errors.Is(err, pipeline.ErrFenced) {
		t.Fatalf("older leader's next Write: %v, want ErrFenced", err)
	}
	mustWrite(t, cur, batch(2, 4, 6))
	got := readStream(t, n.URL(), cur.Stream())
	if s := seqs(t, got); !equalSeqs(s, seqRange(1, 6)) {
		t.Fatalf("stream holds seqs %v, want 1..6", s)
	}
	checkEpochOrder(t, got)
}

// checkEpochOrder fails if a message of an older epoch follows one of a
// newer epoch.
func checkEpochOrder(t *testing.T, ms []stored) {
	t.Helper()
	var top uint64
	for _, m := range ms {
		e, err := strconv.ParseUint(m.header.Get(pipeline.HeaderEpoch), 10, 64)
		if err != nil {
			t.Fatalf("stream sequence %d: %v", m.sseq, err)
		}
		if e < top {
			t.Fatalf("stream sequence %d has epoch %d after epoch %d: an older leader wrote after a newer one", m.sseq, e, top)
		}
		top = e
	}
}

// recoverUntil retries Recover (while the client reconnects) as the
// pipeline does.
func recoverUntil(t *testing.T, s *Sink, epoch uint64, offset string) pipeline.Recovery {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		rec, err := s.Recover(testCtx(t), epoch, offset)
		if err == nil {
			return rec
		}
		if errors.Is(err, pipeline.ErrFenced) || time.Now().After(deadline) {
			t.Fatalf("Recover after the restart: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func TestServerOutage(t *testing.T) {
	n := natsenv.StartNATS(t)
	s := newSink(t, n.URL(), Config{AckTimeout: 2 * time.Second})
	mustRecover(t, s, 1, "")
	off := mustWrite(t, s, batch(1, 1, 100))

	// Down before the Write.
	n.Shutdown()
	if _, err := s.Write(testCtx(t), batch(1, 101, 2000)); err == nil {
		t.Fatal("Write with the server down succeeded")
	} else {
		t.Logf("Write with the server down: %v", err)
	}
	if _, err := s.Recover(testCtx(t), 1, off); err == nil {
		t.Fatal("Recover with the server down succeeded")
	}
	n.Restart()
	rec := recoverUntil(t, s, 1, off)
	off = mustWrite(t, s, batch(1, max(rec.MaxSeq, 100)+1, 2000))
	if off != "2001" {
		t.Fatalf("offset after the outage %q, want 2001 (the fence and 2000 messages)", off)
	}

	// Down in the middle of a Write: part of the batch is stored (how
	// much depends on timing); recovery finds it and nothing is lost or
	// stored twice.
	watcher, err := gonats.Connect(n.URL())
	if err != nil {
		t.Fatal(err)
	}
	wjs, _ := jetstream.New(watcher)
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		defer watcher.Close()
		ctx := testCtx(t)
		for {
			info, err := wjs.Stream(ctx, s.Stream())
			if err != nil || info.CachedInfo().State.LastSeq > 2001 {
				break
			}
			time.Sleep(time.Millisecond)
		}
		n.Shutdown()
	}()
	_, werr := s.Write(testCtx(t), batch(1, 2001, 12000))
	<-stopped
	t.Logf("Write stopped mid-way: %v", werr)
	n.Restart()
	rec = recoverUntil(t, s, 1, off)
	t.Logf("after the restart the stream holds up to seq %d", rec.MaxSeq)
	mustWrite(t, s, batch(1, max(rec.MaxSeq, 2000)+1, 12000))
	if got := seqs(t, readStream(t, n.URL(), s.Stream())); !equalSeqs(got, seqRange(1, 12000)) {
		t.Fatalf("stream holds %d messages, want seqs 1..12000 once each", len(got))
	}
}

func TestStreamSubjectsChecked(t *testing.T) {
	n := natsenv.StartNATS(t)
	ctx := testCtx(t)
	nc, err := gonats.Connect(n.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "mine", Subjects: []string{"other.>"}}); err != nil {
		t.Fatal(err)
	}
	s := newSink(t, n.URL(), Config{Stream: "mine"})
	_, err = s.Recover(ctx, 1, "")
	if err == nil || !strings.Contains(err.Error(), `add "sluice.>" to the stream's subjects`) {
		t.Fatalf("Recover on a stream of other subjects: %v", err)
	}
	// A stream whose subjects cover the template's is fine.
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "wide", Subjects: []string{"cdc.*.>"}}); err != nil {
		t.Fatal(err)
	}
	s2 := newSink(t, n.URL(), Config{Stream: "wide", Subject: "cdc.{source}.{db}.{table}"})
	mustRecover(t, s2, 1, "")
	mustWrite(t, s2, batch(1, 1, 2))
	if got := readStream(t, n.URL(), "wide"); len(got) != 3 || got[0].subject != "cdc._._._" || got[1].subject != "cdc.src.shop.orders" {
		t.Fatalf("stream wide holds %+v", got)
	}
}

func TestCreatedStreamConfig(t *testing.T) {
	n := natsenv.StartNATS(t)
	s := newSink(t, n.URL(), Config{DuplicateWindow: 30 * time.Second, Subject: "x.y.{table}"})
	mustRecover(t, s, 1, "")
	nc, err := gonats.Connect(n.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	st, err := js.Stream(testCtx(t), "sluice-p1")
	if err != nil {
		t.Fatal(err)
	}
	c := st.CachedInfo().Config
	if c.Storage != jetstream.FileStorage || c.Duplicates != 30*time.Second || len(c.Subjects) != 1 || c.Subjects[0] != "x.y.>" || c.Replicas != 1 {
		t.Fatalf("created stream config: storage %v duplicates %v subjects %v replicas %d", c.Storage, c.Duplicates, c.Subjects, c.Replicas)
	}
}

// Close leaves no goroutine of the NATS client behind.
func TestCloseReleases(t *testing.T) {
	n := natsenv.StartNATS(t)
	s := newSink(t, n.URL(), Config{})
	mustRecover(t, s, 1, "")
	mustWrite(t, s, batch(1, 1, 10))
	mustRecover(t, s, 1, "")
	s.Close()
	deadline := time.Now().Add(5 * time.Second)
	for {
		buf := make([]byte, 1<<20)
		stacks := string(buf[:runtime.Stack(buf, true)])
		var left []string
		for _, g := range strings.Split(stacks, "\n\n") {
			if strings.Contains(g, "nats-io/nats.go") {
				left = append(left, g)
			}
		}
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines of the NATS client left after Close:\n%s", len(left), strings.Join(left, "\n\n"))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// What managed NATS services require, on a real nats-server: TLS
// verified against the CA the test made, with a client certificate the
// server verifies, and a user with a password. The right settings write
// exactly once; a wrong CA, a wrong password or a missing client
// certificate is refused with an error that names the server and the
// cause, and never the password.
func TestTLSAndUser(t *testing.T) {
	const password = "s3cret-Pw"
	p := certs.New(t)
	n := natsenv.StartSecure(t, map[string]string{"sluice": password}, p, true)
	good := Config{User: "sluice", Password: password, TLS: TLSConfig{CAFile: p.CAFile, CertFile: p.ClientCertFile, KeyFile: p.ClientKeyFile}}
	s := newSink(t, n.URL(), good)
	mustRecover(t, s, 1, "")
	mustWrite(t, s, batch(1, 1, 5))
	mustWrite(t, s, batch(1, 6, 8))
	tc, err := good.TLS.Client("tls.", "")
	if err != nil {
		t.Fatal(err)
	}
	if got := seqs(t, readStream(t, n.URL(), "sluice-"+testPipeline, gonats.UserInfo("sluice", password), gonats.Secure(tc))); !equalSeqs(got, seqRange(1, 8)) {
		t.Fatalf("stream holds seqs %v, want 1..8 once each", got)
	}
	if rec := mustRecover(t, newSink(t, n.URL(), good), 2, ""); rec.MaxSeq != 8 {
		t.Fatalf("Recover found seq %d, want 8", rec.MaxSeq)
	}

	wrongCA, noCert, wrongPW, noTLS := good, good, good, good
	wrongCA.TLS.CAFile = p.OtherCAFile
	noCert.TLS.CertFile, noCert.TLS.KeyFile = "", ""
	wrongPW.Password = "wrong-pw"
	noTLS.TLS = TLSConfig{}
	for _, c := range []struct {
		name string
		cfg  Config
		want []string
	}{
		{"wrong CA", wrongCA, []string{"certificate signed by unknown authority", "tls.ca_file"}},
		{"no client certificate", noCert, []string{"tls.cert_file"}},
		{"wrong password", wrongPW, []string{"Authorization Violation", "user and password"}},
		{"no TLS", noTLS, []string{"tls"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			c.cfg.URL, c.cfg.ConnectTimeout = n.URL(), time.Second
			_, err := New(c.cfg, testPipeline, quietLog())
			certs.Refused(t, err, []string{password, "wrong-pw"}, append(c.want, n.URL())...)
		})
	}
}
