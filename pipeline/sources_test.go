package pipeline_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime/metrics"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-cdc/sluice/binlog"
	"github.com/sluice-cdc/sluice/checkpoint"
	"github.com/sluice-cdc/sluice/internal/testenv"
	"github.com/sluice-cdc/sluice/internal/workload"
	"github.com/sluice-cdc/sluice/pipeline"
	"github.com/sluice-cdc/sluice/position"
	"github.com/sluice-cdc/sluice/sink/file"
)

// shard is one server of a sharded database, reached through a fault
// proxy.
type shard struct {
	name  string
	db    *testenv.Server
	proxy *testenv.FaultProxy
}

// startShards starts n servers at once, server i of flavorOf(i) (see
// testenv.ForEachFlavorMix) with opts[i], each with the tables app.t (the
// write load), app.moves (rows moving between shards) and app.big (large
// transactions).
func startShards(t *testing.T, n int, flavorOf func(i int) position.Flavor, opts ...testenv.Options) []*shard {
	t.Helper()
	all := make([]testenv.Options, n)
	for i := range all {
		if i < len(opts) {
			all[i] = opts[i]
		}
		all[i].Flavor = flavorOf(i)
		all[i].ServerID = uint32(i + 1)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dbs, err := testenv.StartMany(ctx, all, "CREATE DATABASE app",
		"CREATE TABLE app.t (id BIGINT AUTO_INCREMENT PRIMARY KEY, v INT NOT NULL)",
		"CREATE TABLE app.moves (id INT PRIMARY KEY, v INT NOT NULL)",
		"CREATE TABLE app.big (id INT PRIMARY KEY, pad CHAR(40) NOT NULL)")
	if err != nil {
		t.Fatal(err)
	}
	out := make([]*shard, n)
	for i, db := range dbs {
		t.Cleanup(func() { db.Close() })
		out[i] = &shard{name: fmt.Sprintf("shard%d", i+1), db: db, proxy: testenv.NewFaultProxy(t, db.Addr())}
	}
	return out
}

// load inserts one row per transaction into app.t at about rate per
// second until stop is closed, and counts them.
type load struct {
	s    *shard
	n    atomic.Int64
	done chan error
}

func startLoad(t *testing.T, s *shard, rate int, stop <-chan struct{}) *load {
	t.Helper()
	c, err := s.db.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	l := &load{s: s, done: make(chan error, 1)}
	go func() {
		defer c.Close()
		tick := time.NewTicker(time.Second / time.Duration(rate))
		defer tick.Stop()
		for {
			select {
			case <-stop:
				l.done <- nil
				return
			case <-tick.C:
			}
			if _, err := c.Execute("INSERT INTO app.t (v) VALUES (1)"); err != nil {
				l.done <- err
				return
			}
			l.n.Add(1)
		}
	}()
	return l
}

func (l *load) wait(t *testing.T) int {
	t.Helper()
	if err := <-l.done; err != nil {
		t.Fatal(err)
	}
	return int(l.n.Load())
}

// emitted is one message as the recorder saw it.
type emitted struct {
	seq    uint64
	source string
	table  string
	op     binlog.Op
	id     int64
	et     time.Time
	at     time.Time // when the sink received it
}

// recorder is a sink that keeps what it receives in memory (a Go program
// consuming the pipeline): the order, event times and arrival times.
type recorder struct {
	name string
	mu   sync.Mutex
	msgs []emitted
	// keep, when set, says which messages to keep (the others are only
	// counted by source).
	keep    func(*pipeline.Message) bool
	counts  map[string]int
	max     uint64
	onWrite func(now time.Time, ms []pipeline.Message)
}

func (r *recorder) Name() string { return r.name }

func (r *recorder) Recover(ctx context.Context, epoch uint64, offset string) (pipeline.Recovery, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return pipeline.Recovery{MaxSeq: r.max}, nil
}

func (r *recorder) Write(ctx context.Context, b *pipeline.Batch) (string, error) {
	now := time.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.counts == nil {
		r.counts = map[string]int{}
	}
	for i := range b.Messages {
		m := &b.Messages[i]
		r.counts[m.Source]++
		r.max = m.Seq
		if r.keep != nil && !r.keep(m) {
			continue
		}
		e := emitted{seq: m.Seq, source: m.Source, table: m.Table, op: m.Op, et: m.EventTime, at: now}
		row := m.Change.After
		if m.Op == binlog.OpDelete {
			row = m.Change.Before
		}
		if len(row) > 0 {
			e.id = row[0].Int()
		}
		r.msgs = append(r.msgs, e)
	}
	if r.onWrite != nil {
		r.onWrite(now, b.Messages)
	}
	return "", nil
}

func (r *recorder) Close() error { return nil }

func (r *recorder) snapshot() ([]emitted, map[string]int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	counts := map[string]int{}
	for k, v := range r.counts {
		counts[k] = v
	}
	return append([]emitted(nil), r.msgs...), counts
}

// skewMeter measures the output skew as the stream goes: for each message
// with an event time, how far it leads the source that is furthest behind
// among those that emitted anything (the last event time each emitted).
type skewMeter struct {
	mu      sync.Mutex
	last    map[string]time.Time
	sources []string
	max     time.Duration
	from    time.Time // measure only messages received after this
}

func (s *skewMeter) observe(now time.Time, ms []pipeline.Message) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.last == nil {
		s.last = map[string]time.Time{}
	}
	for i := range ms {
		m := &ms[i]
		if m.EventTime.IsZero() || m.Table != "t" {
			continue
		}
		if m.EventTime.After(s.last[m.Source]) {
			s.last[m.Source] = m.EventTime
		}
		if s.from.IsZero() || now.Before(s.from) || len(s.last) < len(s.sources) {
			continue
		}
		lo := m.EventTime
		for _, name := range s.sources {
			if l := s.last[name]; l.Before(lo) {
				lo = l
			}
		}
		if d := m.EventTime.Sub(lo); d > s.max {
			s.max = d
		}
	}
}

// measureFrom starts the measurement at t (messages received earlier only
// set each source's last event time).
func (s *skewMeter) measureFrom(t time.Time) {
	s.mu.Lock()
	s.from = t
	s.mu.Unlock()
}

func (s *skewMeter) result() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.max
}

// runSources runs a pipeline over the shards (through their proxies) into
// sinks, in the background.
type running struct {
	p    *pipeline.Pipeline
	done chan error // receives Run's result, once
	stop context.CancelFunc
}

func runSources(t *testing.T, name string, shards []*shard, align pipeline.AlignConfig, sinks ...pipeline.Sink) *running {
	t.Helper()
	var srcs []pipeline.SourceConfig
	for _, s := range shards {
		src, err := binlog.ParseSourceURL(s.proxy.URL(s.db.URL(), s.db.Addr()))
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
	p, err := pipeline.New(pipeline.Config{
		Name:            name,
		Sources:         srcs,
		Align:           align,
		Sinks:           sinks,
		Store:           &checkpoint.FileStore{Path: filepath.Join(t.TempDir(), "ckpt.json")},
		CheckpointEvery: 200 * time.Millisecond,
		RetryMin:        10 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{p: p, done: make(chan error, 1), stop: cancel}
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		r.done <- p.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-r.done:
		default:
		}
		<-finished
	})
	return r
}

// waitStreaming waits until every source of the pipeline streams.
func (r *running) waitStreaming(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		st := r.p.Status()
		n := 0
		for _, s := range st.Sources {
			if s.Streaming {
				n++
			}
		}
		if n == len(st.Sources) {
			return
		}
		select {
		case err := <-r.done:
			t.Fatalf("pipeline stopped: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("sources not streaming after 30 s: %+v", st.Sources)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitCounts waits until the recorder holds want[source] rows of app.t.
func waitCounts(t *testing.T, r *recorder, want map[string]int, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		msgs, _ := r.snapshot()
		got := map[string]int{}
		for _, m := range msgs {
			if m.table == "t" && m.op == binlog.OpInsert {
				got[m.source]++
			}
		}
		ok := true
		for k, v := range want {
			if got[k] < v {
				ok = false
			}
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			ids := map[string]map[int64]bool{}
			for _, m := range msgs {
				if m.table == "t" && m.op == binlog.OpInsert {
					if ids[m.source] == nil {
						ids[m.source] = map[int64]bool{}
					}
					ids[m.source][m.id] = true
				}
			}
			var missing []string
			for src, n := range want {
				for id := int64(1); id <= int64(n); id++ {
					if !ids[src][id] {
						missing = append(missing, fmt.Sprintf("%s:%d", src, id))
					}
				}
			}
			t.Fatalf("%s: rows received %v, want %v; missing %v", r.name, got, want, missing)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// checkExactlyOnce checks that every row id of app.t of every source came
// once, in increasing order per source (each source's order is kept).
func checkExactlyOnce(t *testing.T, r *recorder, want map[string]int) {
	t.Helper()
	msgs, _ := r.snapshot()
	last := map[string]int64{}
	got := map[string]int{}
	var prevSeq uint64
	for _, m := range msgs {
		if m.seq <= prevSeq {
			t.Fatalf("%s: seq %d after %d", r.name, m.seq, prevSeq)
		}
		prevSeq = m.seq
		if m.table != "t" || m.op != binlog.OpInsert {
			continue
		}
		if m.id != last[m.source]+1 {
			t.Fatalf("%s: source %s: row %d after row %d (lost, repeated or reordered)", r.name, m.source, m.id, last[m.source])
		}
		last[m.source] = m.id
		got[m.source]++
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: source %s: %d rows, want %d", r.name, k, got[k], v)
		}
	}
}

// Four shards under write load; the third is slowed by 5 s. Without
// alignment the output skew reaches about 5 s; with max_skew 2s it stays
// within the bound plus MariaDB's one-second timestamps (MySQL's GTID
// events carry microseconds), a row moved from a fast shard to the slow
// one comes out within that bound after its delete, and every row of
// every shard arrives once. The shards are all MariaDB, all MySQL, or
// both in one pipeline (testenv.ForEachFlavorMix), as in the tests below.
func TestAlignFourShardsOneSlow(t *testing.T) {
	if testing.Short() {
		t.Skip("starts several servers")
	}
	testenv.ForEachFlavorMix(t, func(t *testing.T, flavorOf func(int) position.Flavor) { alignFourShardsOneSlow(t, flavorOf) })
}

func alignFourShardsOneSlow(t *testing.T, flavorOf func(int) position.Flavor) {
	shards := startShards(t, 4, flavorOf)
	ctx := context.Background()
	if err := shards[0].db.Exec(ctx, "INSERT INTO app.moves VALUES (42, 1)"); err != nil {
		t.Fatal(err)
	}
	names := []string{"shard1", "shard2", "shard3", "shard4"}
	const maxSkew = 2 * time.Second
	keep := func(m *pipeline.Message) bool { return true }
	var off, on skewMeter
	off.sources, on.sources = names, names
	// behind is how far a message's event time was behind the delivered
	// watermark when it was written: the watermark promises that nothing
	// older is still to come (up to MariaDB's one-second commit times;
	// MySQL's are in microseconds).
	var (
		onP    atomic.Pointer[pipeline.Pipeline]
		behind atomic.Int64
	)
	recOff := &recorder{name: "off", keep: keep, onWrite: off.observe}
	recOn := &recorder{name: "on", keep: keep, onWrite: func(now time.Time, ms []pipeline.Message) {
		on.observe(now, ms)
		p := onP.Load()
		if p == nil {
			return
		}
		wm := p.DeliveredWatermark()
		// The clock offsets are known to within the round trip of the
		// sample they came from (half of it, each way); on a loaded
		// machine that is hundreds of milliseconds.
		var rtt time.Duration
		for _, ss := range p.Status().Sources {
			rtt = max(rtt, ss.ClockRTT)
		}
		for i := range ms {
			if et := ms[i].EventTime; !et.IsZero() && !wm.IsZero() && wm.Sub(et)-rtt > time.Duration(behind.Load()) {
				behind.Store(int64(wm.Sub(et) - rtt))
			}
		}
	}}
	pOff := runSources(t, "align-off", shards, pipeline.AlignConfig{}, recOff)
	pOn := runSources(t, "align-on", shards, pipeline.AlignConfig{MaxSkew: maxSkew}, recOn)
	onP.Store(pOn.p)
	pOff.waitStreaming(t)
	pOn.waitStreaming(t)

	stop := make(chan struct{})
	loads := make([]*load, len(shards))
	for i, s := range shards {
		loads[i] = startLoad(t, s, 80, stop)
	}
	time.Sleep(1500 * time.Millisecond)
	slow := shards[2]
	if err := slow.proxy.SetLatency(5 * time.Second); err != nil {
		t.Fatal(err)
	}
	from := time.Now().Add(6 * time.Second) // once the delay is in the stream
	off.measureFrom(from)
	on.measureFrom(from)
	time.Sleep(8 * time.Second)
	// A row moves from shard1 to the slow shard3 within one second.
	if err := shards[0].db.Exec(ctx, "DELETE FROM app.moves WHERE id = 42"); err != nil {
		t.Fatal(err)
	}
	if err := slow.db.Exec(ctx, "INSERT INTO app.moves VALUES (42, 1)"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(6 * time.Second)
	close(stop)
	want := map[string]int{}
	for i, l := range loads {
		want[names[i]] = l.wait(t)
	}
	if err := slow.proxy.SetLatency(0); err != nil {
		t.Fatal(err)
	}
	waitCounts(t, recOff, want, 60*time.Second)
	waitCounts(t, recOn, want, 60*time.Second)
	checkExactlyOnce(t, recOff, want)
	checkExactlyOnce(t, recOn, want)

	skewOff, skewOn := off.result(), on.result()
	moveOff, moveOn := moveGap(t, recOff), moveGap(t, recOn)
	c := pOn.p.Counters()
	t.Logf("output skew: %v without alignment, %v with max_skew %v; move gap (insert after delete): %v without, %v with; held %d transactions for %v in all",
		skewOff, skewOn, maxSkew, moveOff, moveOn, c.Held, c.HoldTime)
	if skewOff < 4*time.Second {
		t.Errorf("without alignment the output skew reached only %v; the 5 s delay should show", skewOff)
	}
	if bound := maxSkew + time.Second + 100*time.Millisecond; skewOn > bound {
		t.Errorf("with alignment the output skew reached %v, over the bound %v (max_skew plus one-second timestamps)", skewOn, bound)
	}
	if moveOff < 3*time.Second {
		t.Errorf("without alignment the moved row's insert came %v after its delete; want about 5 s", moveOff)
	}
	if bound := maxSkew + time.Second + 500*time.Millisecond; moveOn > bound {
		t.Errorf("with alignment the moved row's insert came %v after its delete, over %v", moveOn, bound)
	}
	if c.Held == 0 {
		t.Error("alignment held nothing back")
	}
	t.Logf("the delivered watermark was ahead of a later message's event time by at most %v beyond the clock samples' round trip", time.Duration(behind.Load()))
	// MariaDB's timestamps are whole seconds; the clock offsets are
	// sampled, with an error of some milliseconds (as in the skew bound).
	if b := time.Duration(behind.Load()); b > time.Second+100*time.Millisecond {
		t.Errorf("a message came %v behind the delivered watermark (more than one-second timestamps and the clock sampling allow)", b)
	}
	st := pOn.p.Status()
	if st.Watermark.IsZero() || time.Since(st.Watermark) > 10*time.Second {
		t.Errorf("watermark %v, want recent", st.Watermark)
	}
}

// moveGap returns how long after the delete of row 42 (app.moves) its
// insert on another shard reached the sink.
func moveGap(t *testing.T, r *recorder) time.Duration {
	t.Helper()
	msgs, _ := r.snapshot()
	var del, ins time.Time
	for _, m := range msgs {
		if m.table != "moves" || m.id != 42 {
			continue
		}
		switch m.op {
		case binlog.OpDelete:
			del = m.at
		case binlog.OpInsert:
			ins = m.at
		}
	}
	if del.IsZero() || ins.IsZero() {
		t.Fatalf("%s: the moved row: delete at %v, insert at %v", r.name, del, ins)
	}
	return ins.Sub(del)
}

// An idle shard (no writes at all) does not hold the others back: its
// heartbeats and clock samples keep its progress current. When a shard is
// cut off, after max_wait it is reported stalled and, by policy, released
// (the others go on) or the pipeline fails naming it.
func TestAlignIdleAndStalledShard(t *testing.T) {
	if testing.Short() {
		t.Skip("starts several servers")
	}
	testenv.ForEachFlavorMix(t, func(t *testing.T, flavorOf func(int) position.Flavor) { alignIdleAndStalledShard(t, flavorOf) })
}

func alignIdleAndStalledShard(t *testing.T, flavorOf func(int) position.Flavor) {
	shards := startShards(t, 3, flavorOf)
	idle := shards[2]
	names := []string{"shard1", "shard2"}
	align := pipeline.AlignConfig{MaxSkew: time.Second, MaxWait: 3 * time.Second}
	recProceed, meter, lat := timedRecorder("proceed", names)
	pProceed := runSources(t, "stall-proceed", shards, align, recProceed)
	failAlign := align
	failAlign.OnStall = pipeline.StallFail
	pFail := runSources(t, "stall-fail", shards, failAlign, &recorder{name: "fail"})
	pProceed.waitStreaming(t)
	pFail.waitStreaming(t)

	stop := make(chan struct{})
	l1, l2 := startLoad(t, shards[0], 50, stop), startLoad(t, shards[1], 50, stop)
	meter.measureFrom(time.Now().Add(time.Second))
	time.Sleep(4 * time.Second)
	// Were the idle shard's progress stuck, the others would wait for it
	// until max_wait (3 s) declared it stalled.
	c := pProceed.p.Counters()
	p99 := lat.p99()
	t.Logf("with an idle shard: p99 from commit second to sink %v; held %d transactions for %v", p99, c.Held, c.HoldTime)
	if p99 > align.MaxWait-500*time.Millisecond {
		t.Errorf("p99 from commit second to the sink with an idle shard: %v: the idle shard held the others back", p99)
	}

	cut := time.Now()
	idle.proxy.Cut()
	select {
	case err := <-pFail.done:
		if !errors.Is(err, pipeline.ErrSourceStalled) {
			t.Fatalf("on_stall fail: the pipeline ended with %v, want ErrSourceStalled", err)
		}
		d := time.Since(cut)
		t.Logf("on_stall fail: stopped %v after the cut: %v", d.Round(time.Millisecond), err)
		// max_wait counts from the last heartbeat (every 500ms) before the cut.
		if d < align.MaxWait-600*time.Millisecond {
			t.Errorf("failed %v after the cut, before max_wait %v", d, align.MaxWait)
		}
	case <-time.After(align.MaxWait + 5*time.Second):
		t.Fatal("on_stall fail: the pipeline did not fail after max_wait")
	}
	time.Sleep(align.MaxWait + 2*time.Second)
	st := pProceed.p.Status()
	if !st.Sources[2].Stalled {
		t.Errorf("the cut shard is not reported stalled: %+v", st.Sources[2])
	}
	// Rows written now are not held back by the stalled shard.
	before := l1.n.Load() + l2.n.Load()
	t0 := time.Now()
	time.Sleep(2 * time.Second)
	close(stop)
	want := map[string]int{"shard1": l1.wait(t), "shard2": l2.wait(t)}
	waitCounts(t, recProceed, want, 10*time.Second)
	if d := time.Since(t0); d > 4*time.Second {
		t.Errorf("rows written while the shard was stalled took %v to arrive", d)
	}
	t.Logf("%d rows written while shard3 was stalled arrived", int64(want["shard1"]+want["shard2"])-before)
	if err := idle.proxy.Restore(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for pProceed.p.Status().Sources[2].Stalled {
		if time.Now().After(deadline) {
			t.Fatal("the shard is still reported stalled 20 s after it came back")
		}
		time.Sleep(50 * time.Millisecond)
	}
	checkExactlyOnce(t, recProceed, want)
}

// TestAlignSlowLinkIdle: three sources with max_skew 2 s; one's link
// slows to 4 s one way while the pipeline runs (the round trip the reader
// measured when it connected is a loopback's). All are idle for a while,
// heartbeats only, then all write: no row is delivered more than the
// bound behind one delivered before it from another source, over the
// whole run, idle period and the first seconds of writes included (a
// heartbeat over the slow link used to count as "caught up to now", so the
// fast sources' rows went out up to 4 s ahead). With SLUICE_SLOWLINKS=1
// (make slowlinks).
func TestAlignSlowLinkIdle(t *testing.T) {
	if os.Getenv("SLUICE_SLOWLINKS") == "" {
		t.Skip("slow: SLUICE_SLOWLINKS=1, or make slowlinks")
	}
	testenv.ForEachFlavorMix(t, func(t *testing.T, flavorOf func(int) position.Flavor) { alignSlowLinkIdle(t, flavorOf) })
}

func alignSlowLinkIdle(t *testing.T, flavorOf func(int) position.Flavor) {
	shards := startShards(t, 3, flavorOf)
	const maxSkew = 2 * time.Second
	rec := &recorder{name: "slow-idle", keep: func(m *pipeline.Message) bool { return m.Table == "t" }}
	p := runSources(t, "slow-idle", shards, pipeline.AlignConfig{MaxSkew: maxSkew}, rec)
	p.waitStreaming(t)
	// A row from each source shows its binlog dump running before the
	// link slows down (a dump set up over the slow link takes longer than
	// max_wait, and that source would count as stalled).
	for _, s := range shards {
		if err := s.db.Exec(context.Background(), "INSERT INTO app.t (v) VALUES (0)"); err != nil {
			t.Fatal(err)
		}
	}
	waitCounts(t, rec, map[string]int{"shard1": 1, "shard2": 1, "shard3": 1}, 30*time.Second)
	slow := shards[2]
	if err := slow.proxy.SetLatency(4 * time.Second); err != nil {
		t.Fatal(err)
	}
	time.Sleep(12 * time.Second) // idle: heartbeats only
	stop := make(chan struct{})
	loads := make([]*load, len(shards))
	for i, s := range shards {
		loads[i] = startLoad(t, s, 50, stop)
	}
	time.Sleep(10 * time.Second)
	close(stop)
	want := map[string]int{}
	for i, l := range loads {
		want[shards[i].name] = l.wait(t) + 1
	}
	waitCounts(t, rec, want, 60*time.Second)
	checkExactlyOnce(t, rec, want)
	msgs, _ := rec.snapshot()
	behind, n := outputSkew(msgs, maxSkew)
	t.Logf("with one link at 4 s one way after an idle period: a row came at most %v behind one delivered before it from another source (max_skew %v); %d rows over the bound", behind, maxSkew, n)
	// MariaDB's commit times are whole seconds (as in the other tests' bound).
	if bound := maxSkew + time.Second + 100*time.Millisecond; behind > bound {
		t.Errorf("output skew %v, over the bound %v (max_skew plus one-second timestamps)", behind, bound)
	}
}

// outputSkew is, over messages in delivery order, how far at most a
// message's event time was behind one delivered before it from another
// source, and how many messages were more than bound behind: the skew
// alignment bounds, which holds with idle sources too (an idle source
// delivers nothing to compare with).
func outputSkew(msgs []emitted, bound time.Duration) (time.Duration, int) {
	latest := map[string]time.Time{} // per source: the newest event time delivered
	var worst time.Duration
	over := 0
	for _, m := range msgs {
		if m.et.IsZero() {
			continue
		}
		var ahead time.Time
		for src, et := range latest {
			if src != m.source && et.After(ahead) {
				ahead = et
			}
		}
		if d := ahead.Sub(m.et); !ahead.IsZero() && d > 0 {
			worst = max(worst, d)
			if d > bound {
				over++
			}
		}
		if m.et.After(latest[m.source]) {
			latest[m.source] = m.et
		}
	}
	return worst, over
}

// timedRecorder is a recorder of app.t rows that measures the output skew
// between sources and the latency from each row's event time.
func timedRecorder(name string, sources []string) (*recorder, *skewMeter, *latencies) {
	meter, lat := &skewMeter{sources: sources}, &latencies{}
	rec := &recorder{name: name, keep: func(m *pipeline.Message) bool { return m.Table == "t" },
		onWrite: func(now time.Time, ms []pipeline.Message) {
			meter.observe(now, ms)
			lat.observe(now, ms)
		}}
	return rec, meter, lat
}

// latencies measures, for rows of app.t, the time from the start of their
// commit second to the sink.
type latencies struct {
	mu sync.Mutex
	d  []time.Duration
}

func (l *latencies) observe(now time.Time, ms []pipeline.Message) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i := range ms {
		if ms[i].Table == "t" && !ms[i].EventTime.IsZero() {
			l.d = append(l.d, now.Sub(ms[i].EventTime))
		}
	}
}

func (l *latencies) p99() time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.d) == 0 {
		return 0
	}
	d := append([]time.Duration(nil), l.d...)
	sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
	return d[len(d)*99/100]
}

// A shard whose clock is 10 s ahead: its clock offset is measured and its
// event times corrected, so alignment neither holds it back 10 s nor lets
// the skew grow.
func TestAlignCorrectsClockSkew(t *testing.T) {
	if testing.Short() {
		t.Skip("starts several servers")
	}
	testenv.ForEachFlavorMix(t, func(t *testing.T, flavorOf func(int) position.Flavor) { alignCorrectsClockSkew(t, flavorOf) })
}

func alignCorrectsClockSkew(t *testing.T, flavorOf func(int) position.Flavor) {
	shards := startShards(t, 2, flavorOf, testenv.Options{}, testenv.Options{ClockOffset: 10 * time.Second})
	names := []string{"shard1", "shard2"}
	rec, meter, lat := timedRecorder("clock", names)
	p := runSources(t, "clock", shards, pipeline.AlignConfig{MaxSkew: 2 * time.Second}, rec)
	p.waitStreaming(t)
	stop := make(chan struct{})
	l1, l2 := startLoad(t, shards[0], 50, stop), startLoad(t, shards[1], 50, stop)
	meter.measureFrom(time.Now().Add(time.Second))
	time.Sleep(5 * time.Second)
	close(stop)
	want := map[string]int{"shard1": l1.wait(t), "shard2": l2.wait(t)}
	waitCounts(t, rec, want, 20*time.Second)
	checkExactlyOnce(t, rec, want)
	st := p.p.Status()
	off := st.Sources[1].ClockOffset
	t.Logf("clock offsets: %v and %v (round trips %v, %v); skew %v; p99 %v; held %d", st.Sources[0].ClockOffset, off, st.Sources[0].ClockRTT, st.Sources[1].ClockRTT, meter.result(), lat.p99(), p.p.Counters().Held)
	if off < 9500*time.Millisecond || off > 10500*time.Millisecond {
		t.Errorf("shard2's clock offset measured %v, want about 10 s", off)
	}
	if d := st.Sources[0].ClockOffset; d < -500*time.Millisecond || d > 500*time.Millisecond {
		t.Errorf("shard1's clock offset measured %v, want about 0", d)
	}
	if s := meter.result(); s > 3*time.Second+100*time.Millisecond {
		t.Errorf("output skew %v with corrected event times", s)
	}
	// Uncorrected, the shard 10 s ahead would wait about 8 s each time.
	if p99 := lat.p99(); p99 > 5*time.Second {
		t.Errorf("p99 from (corrected) commit second to sink %v: the skewed shard was held back", p99)
	}
}

// A 1,000,000-row transaction on one shard while the others are busy,
// with alignment on: it streams in chunks, contiguous in the output, the
// bound holds, memory stays bounded and nothing deadlocks.
func TestAlignHugeTransaction(t *testing.T) {
	if testing.Short() {
		t.Skip("starts several servers")
	}
	testenv.ForEachFlavorMix(t, func(t *testing.T, flavorOf func(int) position.Flavor) { alignHugeTransaction(t, flavorOf) })
}

func alignHugeTransaction(t *testing.T, flavorOf func(int) position.Flavor) {
	rows := 1_000_000
	if os.Getenv("SLUICE_HUGE_ROWS") != "" {
		fmt.Sscan(os.Getenv("SLUICE_HUGE_ROWS"), &rows)
	}
	shards := startShards(t, 4, flavorOf)
	names := []string{"shard1", "shard2", "shard3", "shard4"}
	var meter skewMeter
	meter.sources = names
	// Contiguity: once a big-table message arrives, every message up to the
	// transaction's last must be of it.
	var (
		bigSeen, bigDone int
		interleaved      int
		bigMu            sync.Mutex
	)
	rec := &recorder{name: "huge", keep: func(m *pipeline.Message) bool { return m.Table == "t" }, onWrite: func(now time.Time, ms []pipeline.Message) {
		meter.observe(now, ms)
		bigMu.Lock()
		defer bigMu.Unlock()
		for i := range ms {
			m := &ms[i]
			inBig := bigSeen > 0 && bigDone == 0
			if m.Table == "big" {
				bigSeen++
				if m.End != nil {
					bigDone = bigSeen
				}
			} else if inBig {
				interleaved++
			}
		}
	}}
	p := runSources(t, "huge", shards, pipeline.AlignConfig{MaxSkew: 2 * time.Second}, rec)
	p.waitStreaming(t)
	stop := make(chan struct{})
	var loads []*load
	for _, s := range shards {
		loads = append(loads, startLoad(t, s, 50, stop))
	}
	meter.measureFrom(time.Now().Add(time.Second))
	var peak atomic.Uint64
	memDone := make(chan struct{})
	go func() {
		var ms runtimeMem
		for {
			select {
			case <-memDone:
				return
			case <-time.After(20 * time.Millisecond):
			}
			if h := ms.heapInUse(); h > peak.Load() {
				peak.Store(h)
			}
		}
	}()
	time.Sleep(time.Second)
	start := time.Now()
	from, fill := shards[1].db.SeqFrom(1, rows)
	if shards[1].db.Flavor == position.MariaDB {
		fill = append(fill, "SET SESSION max_statement_time = 0")
	}
	if err := shards[1].db.Exec(context.Background(), append(fill, "USE app", "INSERT INTO app.big SELECT seq, REPEAT('x', 40) FROM "+from)...); err != nil {
		t.Fatal(err)
	}
	committed := time.Since(start)
	deadline := time.Now().Add(3 * time.Minute)
	for {
		bigMu.Lock()
		done := bigDone
		bigMu.Unlock()
		if done > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the big transaction did not arrive within 3 minutes (%d of %d rows)", bigSeen, rows)
		}
		time.Sleep(100 * time.Millisecond)
	}
	streamed := time.Since(start)
	time.Sleep(time.Second)
	close(stop)
	want := map[string]int{}
	for i, l := range loads {
		want[names[i]] = l.wait(t)
	}
	waitCounts(t, rec, want, 60*time.Second)
	close(memDone)
	checkExactlyOnce(t, rec, want)
	t.Logf("%d-row transaction: committed in %v, in the sink %v after the INSERT began; skew %v; peak heap in use %d MiB; held %d",
		rows, committed.Round(time.Millisecond), streamed.Round(time.Millisecond), meter.result(), peak.Load()>>20, p.p.Counters().Held)
	if bigDone != rows {
		t.Errorf("the big transaction arrived with %d rows, want %d", bigDone, rows)
	}
	if interleaved > 0 {
		t.Errorf("%d messages of other transactions came in the middle of the big one", interleaved)
	}
	if s := meter.result(); s > 3*time.Second+100*time.Millisecond {
		t.Errorf("output skew %v over the bound", s)
	}
	if peak.Load() > 256<<20 {
		t.Errorf("peak heap in use %d MiB, over 256 MiB", peak.Load()>>20)
	}
}

// runtimeMem reads the heap's live objects without stopping the world.
type runtimeMem struct{ s []metrics.Sample }

func (r *runtimeMem) heapInUse() uint64 {
	if r.s == nil {
		r.s = []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	}
	metrics.Read(r.s)
	return r.s[0].Value.Uint64()
}

// crashAfter is a sink that, at the first batch crash says yes to, waits
// until the other sink (first) has written that batch and then stops the
// pipeline without writing it: a crash that leaves the two sinks a batch
// apart.
type crashAfter struct {
	pipeline.Sink
	first   *countingSink
	crash   func(*pipeline.Batch) bool
	stop    context.CancelFunc
	crashed atomic.Bool
}

func (c *crashAfter) Write(ctx context.Context, b *pipeline.Batch) (string, error) {
	if c.crash != nil && !c.crashed.Load() && c.crash(b) {
		c.crashed.Store(true)
		deadline := time.Now().Add(10 * time.Second)
		for c.first.last.Load() < b.LastSeq() && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
		c.stop()
		return "", errors.New("crashed")
	}
	return c.Sink.Write(ctx, b)
}

// countingSink records the last sequence number written.
type countingSink struct {
	pipeline.Sink
	last atomic.Uint64
}

func (c *countingSink) Write(ctx context.Context, b *pipeline.Batch) (string, error) {
	off, err := c.Sink.Write(ctx, b)
	if err == nil {
		c.last.Store(b.LastSeq())
	}
	return off, err
}

// TestManySourcesSinksABatchApart: large transactions of one source span
// batches; the pipeline stops (as in a crash) when one sink has written a
// batch that ends one large transaction and begins the next, and the
// other has not: the first holds part of the second transaction, the
// other part of the first. After a restart each sink holds every row once.
func TestManySourcesSinksABatchApart(t *testing.T) {
	testenv.ForEachFlavorMix(t, func(t *testing.T, flavorOf func(int) position.Flavor) { manySourcesSinksABatchApart(t, flavorOf) })
}

func manySourcesSinksABatchApart(t *testing.T, flavorOf func(int) position.Flavor) {
	shards := startShards(t, 2, flavorOf)
	dir := t.TempDir()
	newSink := func(name string) pipeline.Sink {
		s, err := file.New(name, file.Config{Path: filepath.Join(dir, name, "out.jsonl")}, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	a := &countingSink{Sink: newSink("a")}
	b := &crashAfter{Sink: newSink("b"), first: a, crash: func(bt *pipeline.Batch) bool {
		// The batch goes on with a transaction begun in an earlier one,
		// ends it, and ends inside the next one.
		ms := bt.Messages
		// A batch from the earliest position begins with CREATE TABLE
		// app.big, which names the table and has no row.
		if len(ms) < 2 || ms[0].Source != "shard1" || ms[0].Table != "big" || ms[0].Change == nil || len(ms[0].Change.After) == 0 || ms[0].Change.After[0].Int()%1000 == 1 {
			return false
		}
		last := &ms[len(ms)-1]
		if last.Source != "shard1" || last.Table != "big" || last.End != nil {
			return false
		}
		for i := range ms[:len(ms)-1] {
			if ms[i].Source == "shard1" && ms[i].End != nil {
				return true
			}
		}
		return false
	}}
	var srcs []pipeline.SourceConfig
	for _, s := range shards {
		src, err := binlog.ParseSourceURL(s.db.URL())
		if err != nil {
			t.Fatal(err)
		}
		if src.Tables, err = binlog.ParseFilter("app.*"); err != nil {
			t.Fatal(err)
		}
		src.StartAt = binlog.StartEarliest // a restart before any saved position starts there again
		srcs = append(srcs, pipeline.SourceConfig{Name: s.name, Binlog: src, Snapshot: pipeline.SnapshotConfig{Mode: "never"}})
	}
	cfg := pipeline.Config{
		Name:            "apart",
		Sources:         srcs,
		Sinks:           []pipeline.Sink{a, b},
		Store:           &checkpoint.FileStore{Path: filepath.Join(dir, "ckpt.json")},
		CheckpointEvery: 50 * time.Millisecond,
		BatchBytes:      16 << 10,
		RetryMin:        10 * time.Millisecond,
	}
	run := func() (*pipeline.Pipeline, chan error, context.CancelFunc) {
		p, err := pipeline.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- p.Run(ctx) }()
		return p, done, cancel
	}
	p, done, cancel := run()
	b.stop = cancel
	(&running{p: p, done: done}).waitStreaming(t)
	ctx := context.Background()
	// Transactions of 300 rows (about 70 KiB each) on shard1, small ones
	// on shard2, until a batch has matched the crash condition (how batches
	// fall depends on timing; it takes a few).
	const rows = 300
	from, fill := shards[0].db.SeqFrom(1, rows)
	txns := 0
	for txns < 5 || (!b.crashed.Load() && txns < 40) {
		txns++
		if err := shards[0].db.Exec(ctx, append(fill, "USE app", fmt.Sprintf("INSERT INTO app.big SELECT %d * 1000 + seq, REPEAT('x', 40) FROM ", txns)+from)...); err != nil {
			t.Fatal(err)
		}
		if err := shards[1].db.Exec(ctx, "INSERT INTO app.t (v) VALUES (1)"); err != nil {
			t.Fatal(err)
		}
		if txns >= 5 && !b.crashed.Load() {
			time.Sleep(100 * time.Millisecond) // let the batches of these go out
		}
	}
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		cancel()
		<-done
		// Seen on MySQL in about one run of four: its batches then fall
		// at transaction ends. The recovery this test is for was not
		// exercised; say so rather than pass.
		t.Skipf("no batch matched the crash condition in %d transactions: the case this test is for did not arise", txns)
	}
	t.Logf("the crash came with %d transactions written", txns)
	cancel()
	if !b.crashed.Load() {
		t.Fatal("the pipeline stopped without the crash")
	}
	b.crash = nil
	_, done, cancel = run()
	defer func() {
		cancel()
		<-done
	}()
	for _, name := range []string{"a", "b"} {
		deadline := time.Now().Add(30 * time.Second)
		for {
			big, small, err := readApart(filepath.Join(dir, name))
			if err != nil {
				t.Fatalf("sink %s: %v", name, err)
			}
			if len(big) == txns*rows && small == txns {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("sink %s: %d big rows and %d small after the restart, want %d and %d", name, len(big), small, txns*rows, txns)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}

// readApart reads a file sink of TestManySourcesSinksABatchApart: the ids
// of app.big rows (failing on a repeat or a sequence number out of order)
// and the number of app.t rows.
func readApart(dir string) (map[int64]bool, int, error) {
	evs, err := workload.ReadFileSink(filepath.Join(dir, "out.*.jsonl"))
	if err != nil {
		return nil, 0, err
	}
	big := map[int64]bool{}
	small := 0
	var last uint64
	for _, ev := range evs {
		if ev.Sluice.Seq <= last {
			return nil, 0, fmt.Errorf("seq %d after %d", ev.Sluice.Seq, last)
		}
		last = ev.Sluice.Seq
		if ev.IsDDL() { // CREATE TABLE app.big names its table too
			continue
		}
		switch ev.Source.Table {
		case "big":
			id, _ := strconv.ParseInt(string(ev.After["id"]), 10, 64)
			if big[id] {
				return nil, 0, fmt.Errorf("app.big row %d twice (seq %d, epoch %d)", id, ev.Sluice.Seq, ev.Sluice.Epoch)
			}
			big[id] = true
		case "t":
			small++
		}
	}
	return big, small, nil
}

// appTSource reads shard s's app.t from the server's current position,
// without a snapshot.
func appTSource(t *testing.T, s *shard) pipeline.SourceConfig {
	t.Helper()
	src, err := binlog.ParseSourceURL(s.db.URL())
	if err != nil {
		t.Fatal(err)
	}
	if src.Tables, err = binlog.ParseFilter("app.t"); err != nil {
		t.Fatal(err)
	}
	src.StartAt = binlog.StartCurrent
	return pipeline.SourceConfig{Name: s.name, Binlog: src, Snapshot: pipeline.SnapshotConfig{Mode: "never"}}
}

// startRunning runs a pipeline of cfg until its stop is called, and
// returns once every source streams.
func startRunning(t *testing.T, cfg pipeline.Config) *running {
	t.Helper()
	p, err := pipeline.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{p: p, done: make(chan error, 1), stop: cancel}
	go func() { r.done <- p.Run(ctx) }()
	r.waitStreaming(t)
	return r
}

// insertT writes n one-row transactions into shard s's app.t.
func insertT(t *testing.T, s *shard, n int) {
	t.Helper()
	for range n {
		if err := s.db.Exec(context.Background(), "INSERT INTO app.t (v) VALUES (1)"); err != nil {
			t.Fatal(err)
		}
	}
}

// frozenStore is a checkpoint store that can be made to fail every save:
// the pipeline then stops as after a crash, its sinks holding more than
// the stored checkpoint says.
type frozenStore struct {
	checkpoint.FileStore
	frozen atomic.Bool
}

func (s *frozenStore) Save(ctx context.Context, cp checkpoint.Checkpoint, expected uint64) (uint64, error) {
	if s.frozen.Load() {
		return 0, errors.New("checkpoint store frozen by the test")
	}
	return s.FileStore.Save(ctx, cp, expected)
}

// TestManySourcesCheckpointCatchesUp: every sink holds a source's
// transactions past the stored checkpoint (the process died before saving
// them); the next run resumes that source after them and then streams only
// another source's transactions, saving checkpoints; a third run must not
// send the first source's transactions again. (The checkpoint used to keep
// the older position while the sinks' offsets moved on, so the third
// run's recovery found nothing past the offsets and resumed from the older
// position: a Kafka sink under `sluice run` held rows twice.)
func TestManySourcesCheckpointCatchesUp(t *testing.T) {
	testenv.ForEachFlavor(t, func(t *testing.T, f position.Flavor) {
		manySourcesCheckpointCatchesUp(t, func(int) position.Flavor { return f })
	})
}

func manySourcesCheckpointCatchesUp(t *testing.T, flavorOf func(int) position.Flavor) {
	shards := startShards(t, 2, flavorOf)
	dir := t.TempDir()
	var sinks []pipeline.Sink
	for _, name := range []string{"a", "b"} {
		s, err := file.New(name, file.Config{Path: filepath.Join(dir, name, "out.jsonl")}, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		sinks = append(sinks, s)
	}
	store := &frozenStore{FileStore: checkpoint.FileStore{Path: filepath.Join(dir, "ckpt.json")}}
	var srcs []pipeline.SourceConfig
	for _, s := range shards {
		srcs = append(srcs, appTSource(t, s))
	}
	cfg := pipeline.Config{
		Name: "catchup", Sources: srcs, Sinks: sinks, Store: store,
		CheckpointEvery: 50 * time.Millisecond, RetryMin: 10 * time.Millisecond,
	}
	run := func() *running { return startRunning(t, cfg) }
	ctx := context.Background()
	insert := func(s *shard, n int) {
		t.Helper()
		insertT(t, s, n)
	}
	// rows counts each sink's app.t rows per source, failing on a repeat.
	rows := func() map[string]map[string]int {
		t.Helper()
		out := map[string]map[string]int{}
		for _, name := range []string{"a", "b"} {
			evs, err := workload.ReadFileSink(filepath.Join(dir, name, "out.*.jsonl"))
			if err != nil {
				t.Fatal(err)
			}
			seen := map[string]bool{}
			out[name] = map[string]int{}
			for _, ev := range evs {
				if ev.IsDDL() || ev.Source.Table != "t" {
					continue
				}
				k := ev.Sluice.Source + ":" + string(ev.After["id"])
				if seen[k] {
					t.Fatalf("sink %s: source %s row id %s twice (seq %d, epoch %d)", name, ev.Sluice.Source, ev.After["id"], ev.Sluice.Seq, ev.Sluice.Epoch)
				}
				seen[k] = true
				out[name][ev.Sluice.Source]++
			}
		}
		return out
	}
	waitRows := func(want1, want2 int) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			got := rows()
			ok := true
			for _, name := range []string{"a", "b"} {
				ok = ok && got[name]["shard1"] == want1 && got[name]["shard2"] == want2
			}
			if ok {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("sinks hold %v, want %d rows of shard1 and %d of shard2 in each", got, want1, want2)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	stop := func(r *running) error {
		r.stop()
		return <-r.done
	}

	// Run 1: both sources saved; then shard2's next rows reach the sinks
	// but no checkpoint.
	r := run()
	insert(shards[0], 3)
	insert(shards[1], 3)
	waitRows(3, 3)
	time.Sleep(200 * time.Millisecond) // a checkpoint covers them
	store.frozen.Store(true)
	// One transaction: the save after its batch fails and stops the run.
	if err := shards[1].db.Exec(ctx, "INSERT INTO app.t (v) VALUES (1), (1)"); err != nil {
		t.Fatal(err)
	}
	waitRows(3, 5)
	if err := stop(r); err == nil {
		t.Log("run 1 stopped without a save error (its last save came before the freeze)")
	}
	store.frozen.Store(false)

	// Run 2: shard2 resumes after its rows in the sinks; only shard1 writes.
	r = run()
	insert(shards[0], 2)
	waitRows(5, 5)
	time.Sleep(200 * time.Millisecond) // checkpoints save the sinks' offsets
	if err := stop(r); err != nil {
		t.Fatalf("run 2: %v", err)
	}

	// Run 3: nothing is sent again.
	r = run()
	insert(shards[0], 1)
	insert(shards[1], 1)
	waitRows(6, 6)
	time.Sleep(200 * time.Millisecond)
	rows()
	if err := stop(r); err != nil {
		t.Fatalf("run 3: %v", err)
	}
}
