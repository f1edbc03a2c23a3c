// Package sinktest is the conformance suite every pipeline sink passes:
// what its recovery reports after a crash at every point of a batch
// (nothing of it written, each prefix, all of it but the acknowledgement
// lost), with one source and with several, an empty sink, fencing of a
// stale epoch, and an outage in the middle of a write. Each sink's tests
// run it against a real server (or the real file system) through a Target.
//
// The contract checked is the one the pipeline relies on (sink.Sink):
// after a restart, Recover from the offset of the last checkpoint reports
// exactly what the sink holds past it: the highest sequence number, per
// source the last transaction end, and per source how many messages it
// holds after that end (sink.Recovery.Partial, the first part of a
// transaction a crash cut; snapshot rows do not count). Writing the rest
// as the pipeline does (skipping what the recovery reported) leaves every
// message in the sink once.
package sinktest

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/sluice-cdc/sluice/binlog"
	"github.com/sluice-cdc/sluice/codec"
	"github.com/sluice-cdc/sluice/position"
	"github.com/sluice-cdc/sluice/sink"
)

// Target is a sink under test.
type Target struct {
	// Open returns a sink on the storage named ns (a stream, key prefix,
	// topic prefix or directory): a new name gives an empty sink, the same
	// name again a restarted process's sink on what the first one wrote.
	Open func(t *testing.T, ns string) sink.Sink
	// Held, when set, returns the sequence numbers the sink holds in ns,
	// in its order (sorted, for a sink without one order: Redis streams),
	// the suite then checks that every message is there once. (A Redis
	// sink in materialize mode keeps rows, not messages.)
	Held func(t *testing.T, ns string) []uint64
	// Cut, when set, breaks the connections to the server once the sink
	// has sent n more bytes (0: at once), refusing new ones, until
	// Restore.
	Cut     func(t *testing.T, n int64)
	Restore func(t *testing.T)
	// NoFencing, when set, says why the fencing case does not apply (the
	// join keeps its state in a directory one process at a time holds; its
	// own tests fence it through its downstream sinks).
	NoFencing string
	// Absolute says the recovery reports everything the sink holds, not
	// only what is past the offset (the join reports its whole state; the
	// pipeline takes either).
	Absolute bool
	// Format is the format of the messages the sink receives
	// (sink.Formatted; zero: sluice). In format debezium a Value is
	// Debezium's bytes, without the sluice block.
	Format codec.Format
}

// expect is what tg's recovery reports holding held past the offset after
// before.
func (tg Target) expect(before, held []sink.Message) sink.Recovery {
	if tg.Absolute {
		return Expect(slices.Concat(before, held))
	}
	return Expect(held)
}

// Run runs the suite, with one source and with two.
func Run(t *testing.T, tg Target) {
	for _, nsrc := range []int{1, 2} {
		t.Run(fmt.Sprintf("sources=%d", nsrc), func(t *testing.T) {
			b0, b1, b2 := BatchesIn(nsrc, tg.Format)
			t.Run("empty", func(t *testing.T) { empty(t, tg, nsrc) })
			t.Run("cut", func(t *testing.T) {
				// A crash after k messages of b1 were durable: k = 0 is a
				// crash before the write, len(b1) one after the write and
				// before its acknowledgement (the offset it returned is
				// lost: recovery starts from the offset before it).
				for k := 0; k <= len(b1); k++ {
					ns := fmt.Sprintf("c%d-%d-%d", nsrc, k, time.Now().UnixNano()%1e6)
					s := tg.Open(t, ns)
					off := start(t, s, 1, b0)
					write(t, s, 1, b1[:k])
					s.Close()
					s = tg.Open(t, ns)
					rec := recoverAt(t, s, 2, off)
					Check(t, fmt.Sprintf("after a crash with %d of %d messages written", k, len(b1)), rec, tg.expect(b0, b1[:k]))
					resume(t, tg, s, ns, 2, off, rec, b0, b1, b2)
				}
			})
			t.Run("fenced", func(t *testing.T) {
				if tg.NoFencing != "" {
					t.Skip(tg.NoFencing)
				}
				fenced(t, tg, nsrc, b0, b1)
			})
			t.Run("fenced-at-recovery", func(t *testing.T) {
				if tg.NoFencing != "" {
					t.Skip(tg.NoFencing)
				}
				fencedAtRecovery(t, tg, nsrc, b0, b1)
			})
			if tg.Cut != nil {
				t.Run("outage", func(t *testing.T) { outage(t, tg, nsrc, b0, b1, b2) })
			}
		})
	}
}

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// start recovers an empty sink at epoch and writes b0; it returns the
// offset after it (the checkpoint's).
func start(t *testing.T, s sink.Sink, epoch uint64, b0 []sink.Message) string {
	t.Helper()
	rec := recoverAt(t, s, epoch, "")
	Check(t, "an empty sink", rec, sink.Recovery{})
	return write(t, s, epoch, b0)
}

func recoverAt(t *testing.T, s sink.Sink, epoch uint64, off string) sink.Recovery {
	t.Helper()
	rec, err := s.Recover(ctxFor(t), epoch, off)
	if err != nil {
		t.Fatalf("Recover(epoch %d, %q): %v", epoch, off, err)
	}
	return rec
}

// recoverRetrying recovers as the pipeline does after an outage: again and
// again until the sink answers.
func recoverRetrying(t *testing.T, s sink.Sink, epoch uint64, off string) sink.Recovery {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		rec, err := s.Recover(ctx, epoch, off)
		cancel()
		if err == nil {
			return rec
		}
		if errors.Is(err, sink.ErrFenced) || time.Now().After(deadline) {
			t.Fatalf("Recover(epoch %d, %q) after the outage: %v", epoch, off, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func write(t *testing.T, s sink.Sink, epoch uint64, ms []sink.Message) string {
	t.Helper()
	if len(ms) == 0 {
		return ""
	}
	off, err := s.Write(ctxFor(t), &sink.Batch{Epoch: epoch, Messages: Stamp(ms, epoch)})
	if err != nil {
		t.Fatalf("Write(seq %d-%d): %v", ms[0].Seq, ms[len(ms)-1].Seq, err)
	}
	return off
}

// resume writes what the sink lacks of b1 and b2 after rec, as the
// pipeline does, and checks the sink then holds everything once.
func resume(t *testing.T, tg Target, s sink.Sink, ns string, epoch uint64, off string, rec sink.Recovery, b0, b1, b2 []sink.Message) {
	t.Helper()
	rest := slices.Concat(b1, b2)
	i := 0
	for i < len(rest) && rest[i].Seq <= rec.MaxSeq {
		i++
	}
	write(t, s, epoch, rest[i:])
	got := recoverAt(t, s, epoch, off)
	Check(t, "after the rest was written", got, tg.expect(b0, rest))
	s.Close()
	if tg.Held != nil {
		var want []uint64
		for _, m := range slices.Concat(b0, rest) {
			want = append(want, m.Seq)
		}
		if held := tg.Held(t, ns); !slices.Equal(held, want) {
			t.Fatalf("the sink holds seqs %v, want %v (each once, in order)", held, want)
		}
	}
}

func empty(t *testing.T, tg Target, nsrc int) {
	ns := fmt.Sprintf("e%d-%d", nsrc, time.Now().UnixNano()%1e6)
	s := tg.Open(t, ns)
	defer s.Close()
	Check(t, "an empty sink", recoverAt(t, s, 1, ""), sink.Recovery{})
	// Recovering again (a retry) changes nothing.
	Check(t, "an empty sink recovered twice", recoverAt(t, s, 1, ""), sink.Recovery{})
}

// fenced: once a newer leader has recovered and written, a writer with the
// older epoch cannot write, and cannot recover with its old epoch; what
// the new leader wrote is intact.
func fenced(t *testing.T, tg Target, nsrc int, b0, b1 []sink.Message) {
	ns := fmt.Sprintf("f%d-%d", nsrc, time.Now().UnixNano()%1e6)
	old := tg.Open(t, ns)
	defer old.Close()
	off := start(t, old, 1, b0)
	leader := tg.Open(t, ns)
	defer leader.Close()
	Check(t, "the new leader's recovery", recoverAt(t, leader, 2, off), tg.expect(b0, nil))
	n := len(b1) / 2
	write(t, leader, 2, b1[:n])
	_, err := old.Write(ctxFor(t), &sink.Batch{Epoch: 1, Messages: Stamp(b1[n:], 1)})
	if !errors.Is(err, sink.ErrFenced) {
		t.Fatalf("a write of epoch 1 after epoch 2 wrote: %v, want sink.ErrFenced", err)
	}
	stale := tg.Open(t, ns)
	defer stale.Close()
	if _, err := stale.Recover(ctxFor(t), 1, off); !errors.Is(err, sink.ErrFenced) {
		t.Fatalf("Recover with epoch 1 after epoch 2 wrote: %v, want sink.ErrFenced", err)
	}
	// The new leader writes on; the stale write left nothing.
	write(t, leader, 2, b1[n:])
	Check(t, "after the new leader wrote", recoverAt(t, leader, 2, off), tg.expect(b0, b1))
}

// fencedAtRecovery: once a newer leader has recovered, before it writes
// anything, a write of the older epoch is refused (sink.ErrFenced) and
// leaves nothing (a leader paused past its lease, woken up between its
// successor's recovery and first write); the new leader's first write then
// lands right after what it recovered.
func fencedAtRecovery(t *testing.T, tg Target, nsrc int, b0, b1 []sink.Message) {
	ns := fmt.Sprintf("r%d-%d", nsrc, time.Now().UnixNano()%1e6)
	old := tg.Open(t, ns)
	defer old.Close()
	off := start(t, old, 1, b0)
	leader := tg.Open(t, ns)
	defer leader.Close()
	Check(t, "the new leader's recovery", recoverAt(t, leader, 2, off), tg.expect(b0, nil))
	_, err := old.Write(ctxFor(t), &sink.Batch{Epoch: 1, Messages: Stamp(b1, 1)})
	if !errors.Is(err, sink.ErrFenced) {
		t.Fatalf("a write of epoch 1 after epoch 2 recovered: %v, want sink.ErrFenced", err)
	}
	write(t, leader, 2, b1)
	Check(t, "after the new leader wrote", recoverAt(t, leader, 2, off), tg.expect(b0, b1))
	if tg.Held != nil {
		var want []uint64
		for _, m := range slices.Concat(b0, b1) {
			want = append(want, m.Seq)
		}
		if held := tg.Held(t, ns); !slices.Equal(held, want) {
			t.Fatalf("the sink holds seqs %v, want %v (each once, in order)", held, want)
		}
	}
}

// outage: the connection is cut at a byte of a batch's write (a sweep over
// the batch); after it is back, recovery reports the prefix that got
// through, and the rest written after it leaves every message once.
func outage(t *testing.T, tg Target, nsrc int, b0, b1, b2 []sink.Message) {
	size := 0
	for _, m := range b1 {
		size += len(m.Value) + len(m.Key)
	}
	steps := 6
	seen := map[int]bool{}
	for i := range steps + 1 {
		n := int64(size * i / steps)
		ns := fmt.Sprintf("o%d-%d-%d", nsrc, n, time.Now().UnixNano()%1e6)
		s := tg.Open(t, ns)
		off := start(t, s, 1, b0)
		tg.Cut(t, n)
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		_, werr := s.Write(ctx, &sink.Batch{Epoch: 1, Messages: Stamp(b1, 1)})
		cancel()
		tg.Restore(t)
		rec := recoverRetrying(t, s, 1, off)
		var held []sink.Message
		for _, m := range b1 {
			if m.Seq <= rec.MaxSeq {
				held = append(held, m)
			}
		}
		if werr == nil && len(held) != len(b1) {
			t.Fatalf("the write returned no error but recovery reports seq %d of %d", rec.MaxSeq, b1[len(b1)-1].Seq)
		}
		seen[len(held)] = true
		t.Logf("cut after %d bytes: %d of %d messages got through (write error: %v)", n, len(held), len(b1), werr)
		Check(t, fmt.Sprintf("after a cut at byte %d", n), rec, tg.expect(b0, held))
		resume(t, tg, s, ns, 1, off, rec, b0, b1, b2)
	}
	t.Logf("the cuts left %d different prefixes of the batch", len(seen))
}

// Expect is what a recovery must report for a sink that holds ms past its
// offset (ms in the sink's order), computed without sink.Recovery's
// own bookkeeping.
func Expect(ms []sink.Message) sink.Recovery {
	var r sink.Recovery
	for _, m := range ms {
		r.MaxSeq = max(r.MaxSeq, m.Seq)
		if m.End != nil {
			if r.Ends == nil {
				r.Ends = map[string]sink.End{}
			}
			r.Ends[m.Source] = sink.End{Pos: *m.End, Seq: m.Seq}
		}
	}
	for _, m := range ms {
		if m.Snapshot || m.End != nil {
			continue
		}
		if e, ok := r.Ends[m.Source]; ok && e.Seq > m.Seq {
			continue
		}
		if r.Partial == nil {
			r.Partial = map[string]int{}
		}
		r.Partial[m.Source]++
	}
	return r
}

// Check compares a recovery with what Expect says (the offset aside).
func Check(t *testing.T, what string, got, want sink.Recovery) {
	t.Helper()
	if got.MaxSeq != want.MaxSeq || !maps.Equal(got.Ends, want.Ends) || !maps.Equal(nonZero(got.Partial), nonZero(want.Partial)) || got.Uncounted {
		t.Fatalf("%s: recovery reports max_seq %d, ends %v, partial %v (uncounted %v); want max_seq %d, ends %v, partial %v",
			what, got.MaxSeq, got.Ends, got.Partial, got.Uncounted, want.MaxSeq, want.Ends, want.Partial)
	}
}

func nonZero(m map[string]int) map[string]int {
	out := map[string]int{}
	for k, v := range m {
		if v != 0 {
			out[k] = v
		}
	}
	return out
}

// Batches returns the suite's messages in three batches, numbered from 1,
// with nsrc sources ("s1", "s2"): b0 ends with a whole transaction; b1
// holds whole transactions of both sources, snapshot rows and a DDL, and
// ends inside a transaction that b2 ends. With one source every message
// is of "s1".
func Batches(nsrc int) (b0, b1, b2 []sink.Message) {
	return BatchesIn(nsrc, codec.Format{})
}

// BatchesIn is Batches with the messages in format f (values and keys as
// the pipeline encodes them for a sink of that format).
func BatchesIn(nsrc int, f codec.Format) (b0, b1, b2 []sink.Message) {
	g := &gen{nsrc: nsrc, encs: map[string]*codec.Encoder{}, format: f}
	b0 = slices.Concat(g.txn(0, 3), g.txn(1, 1))
	b1 = slices.Concat(g.txn(0, 4), g.snapshot(1, 2), g.ddl(1), g.txn(1, 2), g.snapshot(0, 1), g.txn(0, 3), g.txn(1, 1))
	big := g.txn(0, 5)
	b1 = append(b1, big[:3]...)
	b2 = slices.Concat(big[3:], g.txn(1, 2))
	return b0, b1, b2
}

// Table is the table of the suite's rows.
var Table = &binlog.Table{
	Schema: "shop", Name: "items",
	Columns: []binlog.Column{
		{Name: "id", Kind: binlog.KindInt},
		{Name: "name", Kind: binlog.KindString, Charset: "utf8mb4"},
	},
	PrimaryKey: []int{0},
}

type gen struct {
	nsrc     int
	seq, row uint64
	pos      [2]uint32
	encs     map[string]*codec.Encoder
	format   codec.Format
}

func (g *gen) source(i int) (string, int) {
	if g.nsrc == 1 {
		return "s1", 0
	}
	return "s" + strconv.Itoa(i+1), i
}

func (g *gen) enc(src string) *codec.Encoder {
	e := g.encs[src]
	if e == nil {
		e = codec.NewEncoder(codec.Source{Name: src}, codec.WithFormat(g.format))
		g.encs[src] = e
	}
	return e
}

// message encodes ch as the pipeline does (in format sluice its value ends
// with the sluice block, restamped with the epoch of each write; in format
// debezium it is Debezium's bytes).
func (g *gen) message(src string, txn *binlog.Txn, ch *binlog.Change, snap bool, end *position.Position) sink.Message {
	g.seq++
	e := g.enc(src)
	v := e.AppendChange(nil, txn, ch)
	if g.format.IsDebezium() {
		v = v[:len(v)-1] // a whole object: Stamp leaves it alone
	} else {
		v = v[:len(v)-2]
	}
	m := sink.Message{Seq: g.seq, Source: src, Op: ch.Op, Change: ch, Snapshot: snap, End: end,
		Key: e.AppendKey(nil, ch), Value: v}
	if ch.Op == binlog.OpDDL {
		m.Role = sink.RoleSchemaChange
	}
	if ch.Table != nil {
		m.DB, m.Table = ch.Table.Schema, ch.Table.Name
	} else {
		m.DB = ch.Schema
	}
	return m
}

func (g *gen) txn(si, n int) []sink.Message {
	src, pi := g.source(si)
	begin := position.Position{File: "bin.000001", Offset: g.pos[pi] + 4, Flavor: position.MariaDB}
	g.pos[pi] += 1000
	end := position.Position{File: "bin.000001", Offset: g.pos[pi] + 4, Flavor: position.MariaDB}
	txn := &binlog.Txn{Begin: begin, End: end, Last: true, CommitTime: time.Unix(1700000000, 0)}
	var ms []sink.Message
	for i := range n {
		g.row++
		ch := &binlog.Change{Op: binlog.OpInsert, Table: Table, After: binlog.Row{binlog.IntValue(int64(g.row)), binlog.BytesValue(binlog.KindString, []byte("row-"+strconv.FormatUint(g.row, 10)))}}
		var e *position.Position
		if i == n-1 {
			e = &end
		}
		ms = append(ms, g.message(src, txn, ch, false, e))
	}
	return ms
}

func (g *gen) snapshot(si, n int) []sink.Message {
	src, _ := g.source(si)
	var ms []sink.Message
	for range n {
		g.row++
		ch := &binlog.Change{Op: binlog.OpRead, Table: Table, After: binlog.Row{binlog.IntValue(int64(g.row)), binlog.BytesValue(binlog.KindString, []byte("snap"))}}
		ms = append(ms, g.message(src, nil, ch, true, nil))
	}
	return ms
}

func (g *gen) ddl(si int) []sink.Message {
	src, pi := g.source(si)
	g.pos[pi] += 1000
	end := position.Position{File: "bin.000001", Offset: g.pos[pi] + 4, Flavor: position.MariaDB}
	ch := &binlog.Change{Op: binlog.OpDDL, Schema: "shop", Query: "ALTER TABLE items ADD COLUMN x INT"}
	return []sink.Message{g.message(src, &binlog.Txn{End: end, Last: true}, ch, false, &end)}
}

// Stamp returns ms with the sluice block of each value written for
// epoch, as the pipeline writes it in format sluice. A value that is a
// whole JSON object already (format debezium, which has no block) is left
// as it is.
func Stamp(ms []sink.Message, epoch uint64) []sink.Message {
	out := make([]sink.Message, len(ms))
	for i, m := range ms {
		if n := len(m.Value); n > 0 && m.Value[n-1] == '}' {
			out[i] = m
			continue
		}
		v := append([]byte(nil), m.Value...)
		v = fmt.Appendf(v, `,"sluice":{"seq":%d,"epoch":%d,"source":%q`, m.Seq, epoch, m.Source)
		if m.End != nil {
			v = append(v, `,"end":`...)
			v = sink.AppendEnd(v, m.End)
		}
		m.Value = append(v, '}', '}')
		out[i] = m
	}
	return out
}
