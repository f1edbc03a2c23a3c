package join

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/sluice-cdc/sluice/binlog"
	"github.com/sluice-cdc/sluice/pipeline"
	"github.com/sluice-cdc/sluice/position"
	"github.com/sluice-cdc/sluice/sink/file"
)

// The test tables: orders (left, time created_at DATETIME) and payments
// (right, key order_id, time paid_at TIMESTAMP).
var (
	ordersTable = &binlog.Table{Schema: "shop", Name: "orders", PrimaryKey: []int{0}, Columns: []binlog.Column{
		{Name: "id", Kind: binlog.KindInt}, {Name: "created_at", Kind: binlog.KindDateTime, Frac: 6},
		{Name: "note", Kind: binlog.KindString, Charset: "utf8mb4"}}}
	paymentsTable = &binlog.Table{Schema: "shop", Name: "payments", PrimaryKey: []int{0}, Columns: []binlog.Column{
		{Name: "id", Kind: binlog.KindInt}, {Name: "order_id", Kind: binlog.KindInt},
		{Name: "paid_at", Kind: binlog.KindTimestamp, Frac: 6}, {Name: "amount", Kind: binlog.KindDecimal, Frac: 2}}}
	otherTable = &binlog.Table{Schema: "shop", Name: "customers", PrimaryKey: []int{0}, Columns: []binlog.Column{{Name: "id", Kind: binlog.KindInt}}}
)

var epoch0 = time.Date(2026, 3, 4, 10, 0, 0, 0, time.UTC)

func dateTimeOf(t time.Time) binlog.Value {
	return binlog.DateTimeValue(binlog.DateTime{
		Date: binlog.Date{Year: uint16(t.Year()), Month: uint8(t.Month()), Day: uint8(t.Day())},
		Hour: uint8(t.Hour()), Minute: uint8(t.Minute()), Second: uint8(t.Second()), Micro: uint32(t.Nanosecond() / 1000)})
}

// testRow is one row event of the generated stream, for the reference.
type testRow struct {
	side Side
	seq  uint64 // the input message's seq
	key  int64
	t    time.Time
}

// genMessages makes a stream of source transactions on orders, payments
// and an unrelated table: inserts, updates (whose after images join with
// updates: join) and deletes; event-time columns trail the commit time by
// at most maxSkew, so that nothing is late with lateness > maxSkew.
// Messages are numbered from 1; the last of each transaction has End.
func genMessages(r *rand.Rand, txns int, maxSkew time.Duration, withDeletes bool) ([]pipeline.Message, []testRow) {
	var msgs []pipeline.Message
	var rows []testRow
	commit := epoch0
	nextOrder, nextPay := int64(1), int64(1)
	var off uint32 = 4
	for range txns {
		commit = commit.Add(time.Duration(r.IntN(2000)) * time.Millisecond)
		n := 1 + r.IntN(4)
		for range n {
			seq := uint64(len(msgs) + 1)
			m := pipeline.Message{Seq: seq, Source: "shop", DB: "shop", EventTime: commit}
			skew := time.Duration(r.Int64N(int64(maxSkew) + 1))
			ts := commit.Add(-skew).Truncate(time.Microsecond)
			off += 100
			ch := &binlog.Change{File: "bin.000001", Pos: off}
			switch x := r.IntN(20); {
			case x < 8:
				id := nextOrder
				nextOrder++
				ch.Op, ch.Table = binlog.OpInsert, ordersTable
				ch.After = binlog.Row{binlog.IntValue(id), dateTimeOf(ts), binlog.BytesValue(binlog.KindString, []byte(fmt.Sprintf("order \"%d\"", id)))}
				rows = append(rows, testRow{Left, seq, id, ts})
			case x < 16:
				id := nextPay
				nextPay++
				order := max(1, nextOrder-1-int64(r.IntN(12)))
				if r.IntN(10) == 0 {
					order = nextOrder + 1000 // no such order
				}
				ch.Op, ch.Table = binlog.OpInsert, paymentsTable
				ch.After = binlog.Row{binlog.IntValue(id), binlog.IntValue(order), binlog.TimestampValue(ts.Unix(), uint32(ts.Nanosecond()/1000)), binlog.BytesValue(binlog.KindDecimal, []byte("12.50"))}
				rows = append(rows, testRow{Right, seq, order, ts})
			case x < 18 && nextOrder > 1:
				id := max(1, nextOrder-1-int64(r.IntN(5)))
				ch.Op, ch.Table = binlog.OpUpdate, ordersTable
				ch.Before = binlog.Row{binlog.IntValue(id), dateTimeOf(ts), binlog.BytesValue(binlog.KindString, []byte("old"))}
				ch.After = binlog.Row{binlog.IntValue(id), dateTimeOf(ts), binlog.BytesValue(binlog.KindString, []byte("new"))}
				rows = append(rows, testRow{Left, seq, id, ts}) // joins with updates: join
			case x < 19 && withDeletes && nextOrder > 1:
				id := max(1, nextOrder-1-int64(r.IntN(5)))
				ch.Op, ch.Table = binlog.OpDelete, ordersTable
				ch.Before = binlog.Row{binlog.IntValue(id), dateTimeOf(ts), binlog.BytesValue(binlog.KindString, []byte("x"))}
			default:
				ch.Op, ch.Table = binlog.OpInsert, otherTable
				ch.After = binlog.Row{binlog.IntValue(int64(seq))}
			}
			m.Op, m.Table, m.Change = ch.Op, ch.Table.Name, ch
			msgs = append(msgs, m)
		}
		end := position.Position{File: "bin.000001", Offset: off + 50}
		msgs[len(msgs)-1].End = &end
	}
	return msgs, rows
}

// referenceRecords is the nested-loop reference of what a join without
// late rows and retractions emits: "L<seq> R<seq>" for each pair within the
// bounds, "L<seq> -" / "- R<seq>" for unmatched rows of outer sides.
func referenceRecords(cfg Config, rows []testRow) []string {
	var out []string
	matched := make([]bool, len(rows))
	byKey := map[int64][]int{} // row indexes per key, to keep the loops short
	for i, rw := range rows {
		byKey[rw.key] = append(byKey[rw.key], i)
	}
	for _, idx := range byKey {
		for _, i := range idx {
			l := rows[i]
			if l.side != Left {
				continue
			}
			for _, j := range idx {
				r := rows[j]
				if r.side != Right {
					continue
				}
				if d := r.t.Sub(l.t); d >= -cfg.Before && d <= cfg.After {
					out = append(out, fmt.Sprintf("L%d R%d", l.seq, r.seq))
					matched[i], matched[j] = true, true
				}
			}
		}
	}
	for i, rw := range rows {
		if matched[i] || !cfg.Type.outer(rw.side) {
			continue
		}
		if rw.side == Left {
			out = append(out, fmt.Sprintf("L%d -", rw.seq))
		} else {
			out = append(out, fmt.Sprintf("- R%d", rw.seq))
		}
	}
	sort.Strings(out)
	return out
}

type joinedLine struct {
	Join  string          `json:"join"`
	Key   json.RawMessage `json:"key"`
	Left  *sideLine       `json:"left"`
	Right *sideLine       `json:"right"`
	Meta  pipeline.Meta   `json:"sluice"`
}

type sideLine struct {
	Source string                     `json:"source"`
	DB     string                     `json:"db"`
	Table  string                     `json:"table"`
	Op     string                     `json:"op"`
	Seq    uint64                     `json:"seq"`
	Time   string                     `json:"time"`
	Binlog *struct{ File string }     `json:"binlog"`
	Row    map[string]json.RawMessage `json:"row"`
}

// joinedPair names a joined record by its rows' input seqs, as the
// reference does: "L<seq> R<seq>", with "-" for a null side.
func joinedPair(t *testing.T, line []byte) string {
	t.Helper()
	var l joinedLine
	if err := json.Unmarshal(line, &l); err != nil {
		t.Fatalf("%v in %s", err, line)
	}
	if l.Join != "orders_payments" || l.Left == nil && l.Right == nil {
		t.Fatalf("record %s", line)
	}
	ls, rs := "-", "-"
	if l.Left != nil {
		ls = fmt.Sprintf("L%d", l.Left.Seq)
	}
	if l.Right != nil {
		rs = fmt.Sprintf("R%d", l.Right.Seq)
	}
	return ls + " " + rs
}

// readJoined reads every line of the file sink's segments; it checks that
// the records are numbered 1..n without gap or repeat and returns them in
// the reference's form, sorted.
func readJoined(t *testing.T, glob string) []string {
	t.Helper()
	files, _ := filepath.Glob(glob)
	sort.Strings(files)
	var out []string
	var seqs []uint64
	for _, f := range files {
		fh, err := os.Open(f)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(fh)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			meta, err := pipeline.ParseMeta(sc.Bytes())
			if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			seqs = append(seqs, meta.Seq)
			out = append(out, joinedPair(t, sc.Bytes()))
		}
		fh.Close()
	}
	for i, s := range seqs {
		if s != uint64(i+1) {
			t.Fatalf("record %d has seq %d: the joined records are not numbered 1..n exactly once (seqs %v...)", i+1, s, seqs[max(0, i-3):min(len(seqs), i+3)])
		}
	}
	sort.Strings(out)
	return out
}

func testConfig(dir string, typ Type) Config {
	return Config{
		Name:     "orders_payments",
		Left:     SideConfig{Table: "shop.orders", Key: []string{"id"}, Time: "created_at"},
		Right:    SideConfig{Table: "shop.payments", Key: []string{"order_id"}, Time: "paid_at"},
		Before:   5 * time.Second,
		After:    30 * time.Second,
		Type:     typ,
		Lateness: 20 * time.Second,
		Sink:     "joined",
		Events:   Events{Updates: UpdatesJoin},
		StateDir: filepath.Join(dir, "state"),
	}
}

var errCrash = errors.New("simulated crash")

// runner plays the pipeline's part for a join sink: it recovers it, sends
// it batches from the checkpoint on (cut at random), saves checkpoints now
// and then, and, when the sink "crashes", drops it without Close and starts
// over with a higher epoch, as a restarted process would.
type runner struct {
	t        *testing.T
	r        *rand.Rand
	dir      string
	cfg      Config
	msgs     []pipeline.Message
	epoch    uint64
	ckptOff  string
	ckptSeq  uint64 // seq of the last transaction end in the checkpoint
	wm       atomic.Int64
	crashP   float64
	crashes  int
	sink     *Sink
	noSkip   bool // send messages the join already holds (it must skip them)
	deadPath string
	// newOut makes the downstream sink (default: a file sink in dir/out).
	newOut func() pipeline.Sink
}

func (rn *runner) outPath() string { return filepath.Join(rn.dir, "out", "joined.jsonl") }

func (rn *runner) open() {
	t := rn.t
	rn.epoch++
	var out pipeline.Sink
	var err error
	if rn.newOut != nil {
		out = rn.newOut()
	} else if out, err = file.New("joined", file.Config{Path: rn.outPath()}, nil); err != nil {
		t.Fatal(err)
	}
	opts := SinkOptions{Out: out, Tick: -1, Watermark: func() time.Time {
		w := rn.wm.Load()
		if w == 0 {
			return time.Time{}
		}
		return time.UnixMicro(w)
	}}
	if rn.deadPath != "" {
		if opts.DeadLetter, err = file.New("dead", file.Config{Path: rn.deadPath}, nil); err != nil {
			t.Fatal(err)
		}
	}
	s, err := NewSink(rn.cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	s.crash = func(point string) error {
		if rn.r.Float64() < rn.crashP {
			return fmt.Errorf("%w at %s", errCrash, point)
		}
		return nil
	}
	rn.sink = s
}

// abandon drops the sink as a crash would: nothing is committed or closed
// in order; only the Pebble lock is released so that the state reopens.
func (rn *runner) abandon() {
	s := rn.sink
	s.cancel()
	s.tickWG.Wait()
	s.mu.op.db.Close()
	rn.sink = nil
	rn.crashes++
}

// run feeds every message, crashing at random, and returns once the join
// has taken them all.
func (rn *runner) run(ctx context.Context) {
	t := rn.t
	for {
		rn.open()
		rec, err := rn.sink.Recover(ctx, rn.epoch, rn.ckptOff)
		if errors.Is(err, errCrash) {
			rn.abandon()
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		// The pipeline resumes after the checkpoint's last transaction
		// (or a later one the join holds) and skips what the join holds.
		pos := rn.ckptSeq
		if e, ok := rec.Ends["shop"]; ok && e.Seq > pos {
			pos = e.Seq
		}
		if !rn.noSkip {
			pos = max(pos, rec.MaxSeq)
		}
		crashed := false
		for pos < uint64(len(rn.msgs)) {
			n := 1 + rn.r.IntN(40)
			end := min(pos+uint64(n), uint64(len(rn.msgs)))
			batch := &pipeline.Batch{Epoch: rn.epoch, Messages: rn.msgs[pos:end]}
			rn.wm.Store(rn.msgs[end-1].EventTime.UnixMicro()) // commit times grow
			off, err := rn.sink.Write(ctx, batch)
			if errors.Is(err, errCrash) {
				crashed = true
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			pos = end
			if rn.r.IntN(3) == 0 {
				// A checkpoint: the last transaction end delivered.
				for i := end; i > 0; i-- {
					if rn.msgs[i-1].End != nil {
						rn.ckptSeq = rn.msgs[i-1].Seq
						break
					}
				}
				rn.ckptOff = off
			}
		}
		if crashed {
			rn.abandon()
			continue
		}
		return
	}
}

// finish advances the watermark past everything, so outer rows come out,
// and closes the sink.
func (rn *runner) finish(ctx context.Context) {
	rn.crashP = 0
	rn.wm.Store(epoch0.Add(1000 * time.Hour).UnixMicro())
	rn.sink.tick(ctx)
	if err := rn.sink.Close(); err != nil {
		rn.t.Fatal(err)
	}
}

// TestSinkExactlyOnceWithCrashes drives a join sink with a real file sink
// downstream, crashing it at random points (before and after the state
// commit, between chunks of delivery, between Write and the checkpoint) and
// replaying the input from the last checkpoint, for each join type. The
// file must hold every joined record of the nested-loop reference exactly
// once, numbered 1..n.
func TestSinkExactlyOnceWithCrashes(t *testing.T) {
	for _, typ := range []Type{Inner, LeftJoin, RightJoin, FullJoin} {
		t.Run(string(typ), func(t *testing.T) {
			t.Parallel()
			for seed := range 3 {
				r := rand.New(rand.NewPCG(uint64(seed), 99))
				dir := t.TempDir()
				cfg := testConfig(dir, typ)
				msgs, rows := genMessages(r, 300, 10*time.Second, false)
				rn := &runner{t: t, r: r, dir: dir, cfg: cfg, msgs: msgs, crashP: 0.04, noSkip: seed%2 == 0}
				ctx := context.Background()
				rn.run(ctx)
				rn.finish(ctx)
				got := readJoined(t, filepath.Join(dir, "out", "joined.*.jsonl"))
				want := referenceRecords(cfg, rows)
				if !slices.Equal(got, want) {
					t.Fatalf("seed %d (%d crashes): joined records differ from the reference (%d records, want %d)\n%s",
						seed, rn.crashes, len(got), len(want), diffLines(want, got))
				}
				if rn.crashes == 0 {
					t.Fatalf("seed %d: no crash happened; the test proves nothing", seed)
				}
				t.Logf("seed %d: %d records, %d crashes", seed, len(got), rn.crashes)
			}
		})
	}
}

// TestSinkRecordFormat checks one joined record byte for byte, and what
// the file sink's recovery reads back from it.
func TestSinkRecordFormat(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(dir, LeftJoin)
	out, err := file.New("joined", file.Config{Path: filepath.Join(dir, "out", "j.jsonl")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	s, err := NewSink(cfg, SinkOptions{Out: out, Tick: -1})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := s.Recover(ctx, 3, ""); err != nil {
		t.Fatal(err)
	}
	ts := epoch0.Add(1500 * time.Microsecond)
	end := position.Position{File: "bin.000002", Offset: 900}
	msgs := []pipeline.Message{
		{Seq: 10, Source: "shop", DB: "shop", Table: "orders", Op: binlog.OpInsert, EventTime: ts, Change: &binlog.Change{
			Op: binlog.OpInsert, Table: ordersTable, File: "bin.000002", Pos: 400,
			After: binlog.Row{binlog.IntValue(7), dateTimeOf(ts), binlog.BytesValue(binlog.KindString, []byte("a \"quoted\" note"))}}},
		{Seq: 11, Source: "shop", DB: "shop", Table: "payments", Op: binlog.OpInsert, EventTime: ts, End: &end, Change: &binlog.Change{
			Op: binlog.OpInsert, Table: paymentsTable, File: "bin.000002", Pos: 600, Row: 1,
			After: binlog.Row{binlog.IntValue(1), binlog.UintValue(7), binlog.TimestampValue(ts.Unix()+2, 0), binlog.BytesValue(binlog.KindDecimal, []byte("9.99"))}}},
	}
	off, err := s.Write(ctx, &pipeline.Batch{Epoch: 3, Messages: msgs})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(off, ":11") {
		t.Fatalf("offset %q does not end in the consumed seq", off)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(dir, "out", "j.000001.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	want := `{"join":"orders_payments","key":[7],` +
		`"left":{"source":"shop","db":"shop","table":"orders","op":"c","seq":10,"binlog":{"file":"bin.000002","pos":400,"row":0},"time":"2026-03-04T10:00:00.001500Z","row":{"id":7,"created_at":"2026-03-04T10:00:00.001500","note":"a \"quoted\" note"}},` +
		`"right":{"source":"shop","db":"shop","table":"payments","op":"c","seq":11,"binlog":{"file":"bin.000002","pos":600,"row":1},"time":"2026-03-04T10:00:02.000000Z","row":{"id":1,"order_id":7,"paid_at":"2026-03-04T10:00:02.000000Z","amount":"9.99"}},` +
		`"sluice":{"seq":1,"epoch":3,"source":"orders_payments"}}` + "\n"
	if string(got) != want {
		t.Fatalf("record\n got %s\nwant %s", got, want)
	}
	meta, err := pipeline.ParseMeta(got[:len(got)-1])
	if err != nil || meta.Seq != 1 || meta.Epoch != 3 || meta.Source != "orders_payments" {
		t.Fatalf("ParseMeta: %+v %v", meta, err)
	}

	// Reopened, the join reports what it consumed and its last end.
	out2, _ := file.New("joined", file.Config{Path: filepath.Join(dir, "out", "j.jsonl")}, nil)
	s2, err := NewSink(cfg, SinkOptions{Out: out2, Tick: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	rec, err := s2.Recover(ctx, 4, off)
	if err != nil {
		t.Fatal(err)
	}
	if rec.MaxSeq != 11 || rec.Ends["shop"].Seq != 11 || rec.Ends["shop"].Pos != end || rec.Offset != off {
		t.Fatalf("recovery %+v", rec)
	}
	st := s2.Stats()
	if st.Rows != [2]int64{1, 1} || st.Consumed != 11 {
		t.Fatalf("stats after reopening %+v", st)
	}
}

// TestSinkRecoverChecks: a state directory that was replaced, emptied or
// restored from an older copy is refused with a message saying what to do.
func TestSinkRecoverChecks(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	cfg := testConfig(dir, Inner)
	newSink := func() *Sink {
		out, err := file.New("joined", file.Config{Path: filepath.Join(dir, "out", "j.jsonl")}, nil)
		if err != nil {
			t.Fatal(err)
		}
		s, err := NewSink(cfg, SinkOptions{Out: out, Tick: -1})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	s := newSink()
	if _, err := s.Recover(ctx, 1, ""); err != nil {
		t.Fatal(err)
	}
	msgs, _ := genMessages(rand.New(rand.NewPCG(1, 1)), 100, time.Second, false)
	off, err := s.Write(ctx, &pipeline.Batch{Epoch: 1, Messages: msgs})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	id, _, _ := strings.Cut(off, ":")
	for _, c := range []struct{ offset, want string }{
		{"bogus", "not STATE-ID:SEQ"},
		{"0123456789abcdef:3", "not the one the checkpoint was saved with"},
		{id + ":99999", "behind the checkpoint"},
	} {
		s := newSink()
		_, err := s.Recover(ctx, 2, c.offset)
		s.Close()
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "checkpoint") {
			t.Errorf("offset %q: error %v, want one saying %q", c.offset, err, c.want)
		}
	}
	if err := os.RemoveAll(cfg.StateDir); err != nil {
		t.Fatal(err)
	}
	s = newSink()
	_, err = s.Recover(ctx, 2, off)
	s.Close()
	if err == nil || !strings.Contains(err.Error(), "is empty") {
		t.Errorf("emptied state: error %v", err)
	}
	// The downstream holds records the (new, empty) state never made.
	s = newSink()
	_, err = s.Recover(ctx, 2, "")
	s.Close()
	if err == nil || !strings.Contains(err.Error(), "has produced only 0") {
		t.Errorf("sink ahead of the state: error %v", err)
	}
}

// TestSinkFencing: a batch of a lower epoch is refused, and the downstream
// file sink refuses the join once a newer epoch has written to it.
func TestSinkFencing(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	cfg := testConfig(dir, Inner)
	out, _ := file.New("joined", file.Config{Path: filepath.Join(dir, "out", "j.jsonl")}, nil)
	s, err := NewSink(cfg, SinkOptions{Out: out, Tick: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Recover(ctx, 5, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Write(ctx, &pipeline.Batch{Epoch: 4}); !errors.Is(err, pipeline.ErrFenced) {
		t.Fatalf("lower epoch: %v", err)
	}
	// Another writer of epoch 6 takes the downstream sink.
	other, _ := file.New("joined", file.Config{Path: filepath.Join(dir, "out", "j.jsonl")}, nil)
	if _, err := other.Recover(ctx, 6, ""); err != nil {
		t.Fatal(err)
	}
	other.Close()
	msgs, _ := genMessages(rand.New(rand.NewPCG(2, 2)), 200, time.Second, false)
	_, err = s.Write(ctx, &pipeline.Batch{Epoch: 5, Messages: msgs})
	if !errors.Is(err, pipeline.ErrFenced) {
		t.Fatalf("downstream fenced by epoch 6: %v", err)
	}
}

// TestSinkTickerEvicts: with no input, the ticker advances the watermark
// and the outer join's unmatched rows come out.
func TestSinkTickerEvicts(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	cfg := testConfig(dir, FullJoin)
	var wm atomic.Int64
	out, _ := file.New("joined", file.Config{Path: filepath.Join(dir, "out", "j.jsonl")}, nil)
	s, err := NewSink(cfg, SinkOptions{Out: out, Tick: 5 * time.Millisecond, Watermark: func() time.Time {
		if w := wm.Load(); w != 0 {
			return time.UnixMicro(w)
		}
		return time.Time{}
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Recover(ctx, 1, ""); err != nil {
		t.Fatal(err)
	}
	msgs, rows := genMessages(rand.New(rand.NewPCG(3, 3)), 50, time.Second, false)
	if _, err := s.Write(ctx, &pipeline.Batch{Epoch: 1, Messages: msgs}); err != nil {
		t.Fatal(err)
	}
	want := referenceRecords(cfg, rows)
	if st := s.Stats(); st.Rows[Left]+st.Rows[Right] == 0 {
		t.Fatal("nothing in the state before the watermark")
	}
	wm.Store(epoch0.Add(time.Hour).UnixMicro())
	deadline := time.Now().Add(10 * time.Second)
	for s.Stats().Outputs < uint64(len(want)) {
		if time.Now().After(deadline) {
			t.Fatalf("the ticker delivered %d of %d records", s.Stats().Outputs, len(want))
		}
		time.Sleep(5 * time.Millisecond)
	}
	got := readJoined(t, filepath.Join(dir, "out", "j.*.jsonl"))
	if !slices.Equal(got, want) {
		t.Fatalf("records differ\n%s", diffLines(want, got))
	}
	if st := s.Stats(); st.Rows != [2]int64{} || st.EvictedRows == 0 {
		t.Fatalf("stats %+v", st)
	}
}

// TestSinkEvents: updates, deletes and snapshot rows follow the events
// options; late and untimed rows go to the dead-letter sink.
func TestSinkEvents(t *testing.T) {
	ctx := context.Background()
	ord := func(seq uint64, op binlog.Op, id int64, at time.Time, commit time.Time) pipeline.Message {
		row := binlog.Row{binlog.IntValue(id), dateTimeOf(at), binlog.BytesValue(binlog.KindString, []byte("n"))}
		ch := &binlog.Change{Op: op, Table: ordersTable}
		switch op {
		case binlog.OpDelete:
			ch.Before = row
		case binlog.OpUpdate:
			ch.Before, ch.After = row, row
		default:
			ch.After = row
		}
		return pipeline.Message{Seq: seq, Source: "shop", DB: "shop", Table: "orders", Op: op, EventTime: commit, Change: ch, Snapshot: op == binlog.OpRead}
	}
	t0 := epoch0
	noTime := ord(0, binlog.OpInsert, 9, t0, t0)
	noTime.Change.After[1] = binlog.NullValue()
	stream := []pipeline.Message{
		ord(1, binlog.OpInsert, 1, t0, t0),
		ord(2, binlog.OpRead, 2, t0, time.Time{}),
		ord(3, binlog.OpUpdate, 3, t0, t0),
		ord(4, binlog.OpInsert, 4, t0, t0),
		ord(5, binlog.OpDelete, 4, t0, t0), // retracts order 4 (unmatched) with deletes: retract
		ord(6, binlog.OpInsert, 5, t0.Add(time.Hour), t0.Add(time.Hour)),
		ord(7, binlog.OpInsert, 6, t0, t0.Add(time.Hour)), // late: an hour behind, lateness 20 s
		noTime,
	}
	stream[7].Seq = 8
	for _, c := range []struct {
		events Events
		want   []string // left rows that come out (null-extended)
	}{
		// Rows are named by their input seq: L1 is order 1, L3 the update
		// of order 3.
		{Events{}, []string{"L1 -", "L2 -", "L4 -"}},
		{Events{Updates: UpdatesJoin, Deletes: DeletesRetract, Snapshot: SnapshotIgnore}, []string{"L1 -", "L3 -"}},
	} {
		dir := t.TempDir()
		cfg := testConfig(dir, LeftJoin)
		cfg.Events, cfg.Late = c.events, "dead"
		out, _ := file.New("joined", file.Config{Path: filepath.Join(dir, "out", "j.jsonl")}, nil)
		dead, _ := file.New("dead", file.Config{Path: filepath.Join(dir, "out", "dead.jsonl")}, nil)
		s, err := NewSink(cfg, SinkOptions{Out: out, DeadLetter: dead, Tick: -1})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Recover(ctx, 1, ""); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Write(ctx, &pipeline.Batch{Epoch: 1, Messages: stream[:6]}); err != nil {
			t.Fatal(err)
		}
		// Row 6 is an hour old now: the watermark moved to 11:00.
		if _, err := s.Write(ctx, &pipeline.Batch{Epoch: 1, Messages: stream[6:]}); err != nil {
			t.Fatal(err)
		}
		st := s.Stats()
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		got := readJoined(t, filepath.Join(dir, "out", "j.*.jsonl"))
		if !slices.Equal(got, c.want) {
			t.Errorf("events %+v: records %v, want %v", c.events, got, c.want)
		}
		raw, err := os.ReadFile(filepath.Join(dir, "out", "dead.000001.jsonl"))
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSpace(string(raw)), "\n")
		if len(lines) != 2 || !strings.Contains(lines[0], `"reason":"late","side":"left","watermark":"2026-03-04T11:00:00.000000Z","key":[6]`) ||
			!strings.Contains(lines[1], `"reason":"no_time"`) || !strings.HasSuffix(lines[1], `"sluice":{"seq":2,"epoch":1,"source":"orders_payments"}}`) {
			t.Errorf("dead letters:\n%s", raw)
		}
		if st.LateRows != 1 || st.UntimedRows != 1 || st.DeadLetters != 2 {
			t.Errorf("stats %+v", st)
		}
	}
}

// TestSinkCorruptMeta: a damaged sink meta stops Recover with ErrCorrupt,
// every time it is tried, rather than starting over with an empty one.
func TestSinkCorruptMeta(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	cfg := testConfig(dir, Inner)
	out, _ := file.New("joined", file.Config{Path: filepath.Join(dir, "out", "j.jsonl")}, nil)
	s, err := NewSink(cfg, SinkOptions{Out: out, Tick: -1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Recover(ctx, 1, ""); err != nil {
		t.Fatal(err)
	}
	s.Close()
	db, err := pebble.Open(cfg.StateDir, stateOptions(discardLogger, 1<<20))
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Set(keySinkMeta, []byte(`{"version":1,"state_id":"x","next":[0,1]}`), pebble.Sync); err != nil {
		t.Fatal(err)
	}
	db.Close()
	out2, _ := file.New("joined", file.Config{Path: filepath.Join(dir, "out", "j.jsonl")}, nil)
	s2, err := NewSink(cfg, SinkOptions{Out: out2, Tick: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	for range 2 {
		if _, err := s2.Recover(ctx, 2, ""); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("Recover over a damaged meta: %v", err)
		}
	}
	if _, err := s2.Write(ctx, &pipeline.Batch{Epoch: 2}); err == nil {
		t.Fatal("Write after a failed Recover succeeded")
	}
}

// TestSinkRestartBeforeFirstRecord: a join restarted before it has
// delivered anything recovers (the file sink has no segment yet).
func TestSinkRestartBeforeFirstRecord(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	cfg := testConfig(dir, Inner)
	var off string
	for epoch := uint64(1); epoch <= 3; epoch++ {
		out, _ := file.New("joined", file.Config{Path: filepath.Join(dir, "out", "j.jsonl")}, nil)
		s, err := NewSink(cfg, SinkOptions{Out: out, Tick: -1})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Recover(ctx, epoch, off); err != nil {
			t.Fatalf("restart %d: %v", epoch, err)
		}
		// Input that joins nothing.
		m := pipeline.Message{Seq: epoch, Source: "shop", DB: "shop", Table: "customers", Op: binlog.OpInsert, EventTime: epoch0,
			Change: &binlog.Change{Op: binlog.OpInsert, Table: otherTable, After: binlog.Row{binlog.IntValue(1)}}}
		if off, err = s.Write(ctx, &pipeline.Batch{Epoch: epoch, Messages: []pipeline.Message{m}}); err != nil {
			t.Fatal(err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
