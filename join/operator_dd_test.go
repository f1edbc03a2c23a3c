package join

import (
	"bytes"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"
	"github.com/cockroachdb/pebble/v2"

	"github.com/sluice-cdc/sluice/binlog"
)

// TestOperatorDataDriven drives the join's operator — its state, the
// watermark, eviction and the late path — from testdata/operator (rewrite
// the expected output with -rewrite). No server and no clock: the files
// give each row and each watermark; the state is a Pebble database in a
// temporary directory. Times are durations since the Unix epoch (10s,
// 1m30s, -5s); keys are integers, text or null.
//
//	new [type=inner|left|right|full] [before=0s] [after=0s] [lateness=0s]
//	    [updates=ignore|join] [deletes=ignore|retract] [snapshot=join|ignore]
//	left|right key=K ts=T [op=insert|update|delete|read] [id=ID] [name=NAME]
//	    a change event of the side's table; what it does is the sink's
//	    decision (Events.action): Add, Retract or nothing. A row is named
//	    L<n> or R<n> (n counts the rows of the file) unless name= is given;
//	    its id (the primary key, for deletes) is its name unless id= is.
//	rows                      several such lines as input, one after another
//	burst side=S keys=N [per-key=1] ts=T [step=0s] [key-from=0]
//	    N keys × per-key rows, key-major, times T, T+step, ... per key;
//	    prints a summary, not each row
//	advance w=T [summary]     the watermark moves to T: what comes out
//	state                     each side's rows, in (key, time, arrival)
//	                          order, checked against the time index and
//	                          the operator's row and byte counts
//	commit | reopen [before= after= lateness=]
//	                          commit the pending changes; reopen also
//	                          closes and opens the state again (with new
//	                          bounds, which apply from then on)
//
// The cases, by the section of docs/JOIN.md they come from:
//
//   - eviction (Watermarks: Eviction; State: Eviction): a left row at l
//     goes exactly when W - lateness - after passes l (a right row at r:
//     W - lateness - before), not one microsecond earlier; an inner
//     join's rows go silently; nothing is evicted twice; a watermark at
//     or below the current one does nothing (the watermark never moves
//     back); bounds changed on reopen apply from then on (Limits).
//   - outer (Join types): left, right and full joins emit each row that
//     never joined when it is evicted, left side first, each side by
//     (key, time, arrival); a matched row does not come out again; a NULL
//     key joins nothing and comes out at once on an outer side (Which
//     rows join); a negative bound puts a row past its side's horizon
//     when it arrives: it joins, then comes out at once if unmatched.
//   - order (Which rows join): the bounds l - before <= r <= l + after
//     are inclusive at both ends; partners come out in event-time order
//     (one time in arrival order); a row joins many; keys compare by value
//     (007 is 7) and text by its bytes ('a' is not 'A'). Many keys at one
//     timestamp come out by key at eviction (outer).
//   - late (Lateness and late rows): a row before W - lateness goes to the
//     late path (OnLate) and joins nothing; one exactly at it joins; on
//     either side; before the first watermark nothing is late.
//   - events (Which change events join): updates ignored or joined as a
//     new row (the old row stays; a changed key joins under both keys),
//     deletes ignored or retracting (a retracted row joins nothing later
//     and never comes out null-extended; one that already joined keeps its
//     records; a delete after eviction changes nothing; deletes are never
//     late), snapshot rows joined or ignored.
//   - burst (State: Eviction): a huge burst of rows on many keys at equal
//     times, then one advance that evicts them all (past the range
//     deletion threshold): every unmatched row comes out once, in order,
//     and the state is empty afterwards.
//
// Not here: rows without an event time (the dead-letter reason no_time)
// and the once-a-second watermark check without input are the Sink's
// (TestSinkEvents, TestSinkTickerEvicts; the check itself is Sink.tick,
// which the ticker goroutine only calls).
func TestOperatorDataDriven(t *testing.T) {
	datadriven.Walk(t, "testdata/operator", func(t *testing.T, path string) {
		h := &ddOperator{t: t}
		defer h.close()
		datadriven.RunTest(t, path, h.run)
	})
}

// ddOperator is the state of one testdata file.
type ddOperator struct {
	t      *testing.T
	dir    string
	cfg    OperatorConfig
	events Events
	op     *Operator
	n      int               // rows named so far
	keys   map[string]string // encoded key → how the file wrote it
	out    *strings.Builder  // where emitted outputs and late rows go
	emits  []ddEmit          // recorded instead, in a burst or a summary
	record bool
	late   bool // OnLate was called
}

// ddEmit is one output, kept for a summary.
type ddEmit struct {
	line string
	kind ddKind
	key  []byte
	time int64 // of the unmatched row
	n    int   // the unmatched row's arrival number
}

// ddKind is the kind of an output: an unmatched row of a side (its
// value is the side's), a joined pair, or a late row.
type ddKind uint8

const (
	ddLeftOnly  = ddKind(Left)
	ddRightOnly = ddKind(Right)
	ddJoined    = ddKind(2)
	ddLate      = ddKind(3)
)

func (h *ddOperator) close() {
	if h.op != nil {
		if err := h.op.Close(); err != nil {
			h.t.Error(err)
		}
		h.op = nil
	}
}

func (h *ddOperator) run(t *testing.T, d *datadriven.TestData) string {
	if h.op == nil && d.Cmd != "new" {
		d.Fatalf(t, "new first")
	}
	var out strings.Builder
	h.out = &out
	switch d.Cmd {
	case "new":
		h.close()
		h.dir, h.n, h.keys = t.TempDir(), 0, map[string]string{}
		h.cfg = OperatorConfig{Fingerprint: "dd", CacheBytes: 1 << 20, OnLate: h.onLate}
		var typ string
		if d.MaybeScanArgs(t, "type", &typ) {
			h.cfg.Type = Type(typ)
		}
		h.bounds(t, d)
		h.events = Events{Updates: UpdatesIgnore, Deletes: DeletesIgnore, Snapshot: SnapshotJoin}
		d.MaybeScanArgs(t, "updates", &h.events.Updates)
		d.MaybeScanArgs(t, "deletes", &h.events.Deletes)
		d.MaybeScanArgs(t, "snapshot", &h.events.Snapshot)
		if err := h.open(); err != nil {
			return "error: " + err.Error() + "\n"
		}
	case "left", "right":
		h.row(t, d, d.Cmd, d.CmdArgs)
	case "rows":
		for _, line := range strings.Split(d.Input, "\n") {
			if strings.TrimSpace(line) == "" {
				continue
			}
			cmd, args, err := datadriven.ParseLine(line)
			if err != nil || (cmd != "left" && cmd != "right") {
				d.Fatalf(t, "rows: %q is not a left or right row (%v)", line, err)
			}
			h.row(t, d, cmd, args)
		}
	case "burst":
		h.burst(t, d)
	case "advance":
		h.advance(t, d)
	case "state":
		h.state(t, d)
	case "commit":
		if err := h.op.Commit(false); err != nil {
			d.Fatalf(t, "%v", err)
		}
	case "reopen":
		if err := h.op.Commit(true); err != nil {
			d.Fatalf(t, "%v", err)
		}
		h.close()
		h.bounds(t, d)
		if err := h.open(); err != nil {
			return "error: " + err.Error() + "\n"
		}
		fmt.Fprintf(&out, "watermark %s; before %s after %s lateness %s\n",
			ddTime(h.op.Watermark()), h.cfg.Before, h.cfg.After, h.cfg.Lateness)
	default:
		d.Fatalf(t, "unknown command %s", d.Cmd)
	}
	return out.String()
}

func (h *ddOperator) bounds(t *testing.T, d *datadriven.TestData) {
	for _, b := range []struct {
		key string
		dst *time.Duration
	}{{"before", &h.cfg.Before}, {"after", &h.cfg.After}, {"lateness", &h.cfg.Lateness}} {
		if d.HasArg(b.key) {
			*b.dst = ddDuration(t, d, b.key)
		}
	}
}

func (h *ddOperator) open() error {
	op, err := OpenOperator(h.dir, h.cfg)
	if err != nil {
		return err
	}
	h.op = op
	return nil
}

func ddDuration(t *testing.T, d *datadriven.TestData, key string) time.Duration {
	var s string
	d.ScanArgs(t, key, &s)
	v, err := time.ParseDuration(s)
	if err != nil {
		d.Fatalf(t, "%s: %v", key, err)
	}
	return v
}

// ddTime writes an event time (µs) as a duration since the epoch.
func ddTime(us int64) string {
	switch us {
	case math.MinInt64:
		return "-inf"
	case math.MaxInt64:
		return "+inf"
	}
	return (time.Duration(us) * time.Microsecond).String()
}

// encodeKey encodes a key as the file writes it: an integer, text, or null.
func (h *ddOperator) encodeKey(s string) []byte {
	if s == "null" {
		return nil
	}
	var k []byte
	if i, err := strconv.ParseInt(s, 10, 64); err == nil {
		k, _ = AppendKeyValue(nil, nil, binlog.IntValue(i))
	} else {
		k, _ = AppendKeyValue(nil, nil, binlog.BytesValue(binlog.KindString, []byte(s)))
	}
	if _, ok := h.keys[string(k)]; !ok {
		h.keys[string(k)] = s // printed as first written
	}
	return k
}

func (h *ddOperator) keyName(k []byte) string {
	if k == nil {
		return "null"
	}
	if s, ok := h.keys[string(k)]; ok {
		return s
	}
	return fmt.Sprintf("%x", k)
}

// rowName is a row's payload: its name, then its arrival number.
func ddRowName(e *Entry) string {
	name, _, _ := strings.Cut(string(e.Data), "#")
	return name
}

func ddArrival(e *Entry) int {
	_, n, _ := strings.Cut(string(e.Data), "#")
	i, _ := strconv.Atoi(n)
	return i
}

func (h *ddOperator) emit(o *Output) error {
	e := ddEmit{key: slices.Clone(o.Key)} // o's slices are valid only during the call
	switch {
	case o.Left != nil && o.Right != nil:
		e.line = fmt.Sprintf("joined key=%s %s@%s %s@%s", h.keyName(o.Key),
			ddRowName(o.Left), ddTime(o.Left.Time), ddRowName(o.Right), ddTime(o.Right.Time))
		e.kind = ddJoined
	case o.Left != nil:
		e.line = fmt.Sprintf("left-only key=%s %s@%s", h.keyName(o.Key), ddRowName(o.Left), ddTime(o.Left.Time))
		e.kind, e.time, e.n = ddLeftOnly, o.Left.Time, ddArrival(o.Left)
	case o.Right != nil:
		e.line = fmt.Sprintf("right-only key=%s %s@%s", h.keyName(o.Key), ddRowName(o.Right), ddTime(o.Right.Time))
		e.kind, e.time, e.n = ddRightOnly, o.Right.Time, ddArrival(o.Right)
	default:
		return fmt.Errorf("an output with neither side")
	}
	if h.record {
		h.emits = append(h.emits, e)
		return nil
	}
	fmt.Fprintln(h.out, " ", e.line)
	return nil
}

func (h *ddOperator) onLate(s Side, r *Row) error {
	h.late = true
	line := fmt.Sprintf("late %s key=%s %s@%s: before %s (watermark %s - lateness %s)", s, h.keyName(r.Key),
		ddRowName(&Entry{Data: r.Data}), ddTime(r.Time), ddTime(h.op.accept()), ddTime(h.op.Watermark()), h.cfg.Lateness)
	if h.record {
		h.emits = append(h.emits, ddEmit{line: line, kind: ddLate})
		return nil
	}
	fmt.Fprintln(h.out, " ", line)
	return nil
}

// row applies one change event of a side's table.
func (h *ddOperator) row(t *testing.T, d *datadriven.TestData, cmd string, args []datadriven.CmdArg) {
	side := Left
	if cmd == "right" {
		side = Right
	}
	vals := map[string]string{"op": "insert"}
	for _, a := range args {
		if len(a.Vals) != 1 {
			d.Fatalf(t, "%s: %s needs one value", cmd, a.Key)
		}
		vals[a.Key] = a.Vals[0]
	}
	if _, ok := vals["key"]; !ok {
		d.Fatalf(t, "%s: key= missing", cmd)
	}
	ops := map[string]binlog.Op{"insert": binlog.OpInsert, "update": binlog.OpUpdate, "delete": binlog.OpDelete, "read": binlog.OpRead}
	op, ok := ops[vals["op"]]
	if !ok {
		d.Fatalf(t, "%s: op=%s is not insert, update, delete or read", cmd, vals["op"])
	}
	key := h.encodeKey(vals["key"])
	switch h.events.action(op) {
	case eventSkip:
		fmt.Fprintf(h.out, "%s %s key=%s id=%s: skipped\n", vals["op"], side, vals["key"], vals["id"])
	case eventRetract:
		id, ok := vals["id"]
		if !ok {
			d.Fatalf(t, "%s: a delete needs id=", cmd)
		}
		n, err := h.op.Retract(side, key, []byte(id))
		if err != nil {
			d.Fatalf(t, "%v", err)
		}
		fmt.Fprintf(h.out, "delete %s key=%s id=%s: %d row(s) retracted\n", side, vals["key"], id, n)
	case eventAdd:
		ts, ok := vals["ts"]
		if !ok {
			d.Fatalf(t, "%s: ts= missing", cmd)
		}
		v, err := time.ParseDuration(ts)
		if err != nil {
			d.Fatalf(t, "%s: ts: %v", cmd, err)
		}
		h.n++
		name := vals["name"]
		if name == "" {
			name = fmt.Sprintf("%s%d", strings.ToUpper(side.String()[:1]), h.n)
		}
		id := vals["id"]
		if id == "" {
			id = name
		}
		r := &Row{Key: key, Time: v.Microseconds(), ID: []byte(id), Data: fmt.Appendf(nil, "%s#%d", name, h.n)}
		before := h.op.cur.Rows[side]
		outer := h.out
		var lines strings.Builder
		h.out, h.late = &lines, false
		if err := h.op.Add(side, r, h.emit); err != nil {
			d.Fatalf(t, "%v", err)
		}
		h.out = outer
		status := "held"
		switch {
		case h.late:
			status = "late"
		case key == nil:
			status = "not held (NULL key)"
		case h.op.cur.Rows[side] == before:
			status = fmt.Sprintf("not held (before the %s side's horizon %s)", side, ddTime(h.op.cur.Horizon[side]))
		}
		fmt.Fprintf(h.out, "%s %s %s key=%s @%s: %s\n", vals["op"], side, name, vals["key"], ts, status)
		h.out.WriteString(lines.String())
	}
}

// burst adds many rows at once and prints what they did in sum.
func (h *ddOperator) burst(t *testing.T, d *datadriven.TestData) {
	var sideName string
	var keys, perKey, keyFrom int
	d.ScanArgs(t, "side", &sideName)
	d.ScanArgs(t, "keys", &keys)
	perKey = 1
	d.MaybeScanArgs(t, "per-key", &perKey)
	d.MaybeScanArgs(t, "key-from", &keyFrom)
	side := Left
	if sideName == "right" {
		side = Right
	}
	ts := ddDuration(t, d, "ts")
	var step time.Duration
	if d.HasArg("step") {
		step = ddDuration(t, d, "step")
	}
	before := h.op.cur.Rows[side]
	h.record, h.emits = true, h.emits[:0]
	defer func() { h.record = false }()
	letter := strings.ToUpper(side.String()[:1])
	for k := keyFrom; k < keyFrom+keys; k++ {
		key := h.encodeKey(strconv.Itoa(k))
		for j := range perKey {
			h.n++
			name := fmt.Sprintf("%s%d", letter, h.n)
			r := &Row{Key: key, Time: (ts + time.Duration(j)*step).Microseconds(), ID: []byte(name), Data: fmt.Appendf(nil, "%s#%d", name, h.n)}
			if err := h.op.Add(side, r, h.emit); err != nil {
				d.Fatalf(t, "%v", err)
			}
		}
	}
	joined, late := 0, 0
	for _, e := range h.emits {
		switch e.kind {
		case ddJoined:
			joined++
		case ddLate:
			late++
		}
	}
	fmt.Fprintf(h.out, "burst %s: %d rows on %d keys, %s to %s: %d held, %d joined, %d late, %d other outputs\n",
		side, keys*perKey, keys, ts, ts+time.Duration(perKey-1)*step, h.op.cur.Rows[side]-before, joined, late, len(h.emits)-joined-late)
}

// advance moves the watermark and prints what came out.
func (h *ddOperator) advance(t *testing.T, d *datadriven.TestData) {
	w := ddDuration(t, d, "w").Microseconds()
	summary := d.HasArg("summary")
	prev := h.op.Watermark()
	h.record, h.emits = true, h.emits[:0]
	defer func() { h.record = false }()
	n, err := h.op.Advance(w, h.emit)
	if err != nil {
		d.Fatalf(t, "%v", err)
	}
	if w <= prev {
		fmt.Fprintf(h.out, "watermark stays %s (%s is not past it): %d evicted, %d outputs\n", ddTime(h.op.Watermark()), ddTime(w), n, len(h.emits))
		return
	}
	a := h.op.accept()
	fmt.Fprintf(h.out, "watermark %s, accept from %s; evicted before: left %s, right %s; %d evicted\n",
		ddTime(w), ddTime(a), ddTime(h.op.cur.Horizon[Left]), ddTime(h.op.cur.Horizon[Right]), n)
	if !summary {
		for _, e := range h.emits {
			fmt.Fprintln(h.out, " ", e.line)
		}
		return
	}
	var count [2]int
	for _, e := range h.emits {
		if e.kind != ddLeftOnly && e.kind != ddRightOnly {
			d.Fatalf(t, "advance emitted %q, which is not an unmatched row", e.line)
		}
		count[e.kind]++
	}
	sorted := slices.IsSortedFunc(h.emits, func(a, b ddEmit) int {
		if a.kind != b.kind {
			return int(a.kind) - int(b.kind)
		}
		if c := bytes.Compare(a.key, b.key); c != 0 {
			return c
		}
		if c := cmpInt(a.time, b.time); c != 0 {
			return c
		}
		return a.n - b.n
	})
	seen := map[int]bool{}
	for _, e := range h.emits {
		seen[e.n] = true
	}
	fmt.Fprintf(h.out, "left-only %d, right-only %d (%d distinct rows); left first, each by (key, time, arrival): %t\n",
		count[Left], count[Right], len(seen), sorted)
	for i, e := range h.emits {
		if i < 3 || i >= len(h.emits)-3 {
			fmt.Fprintln(h.out, " ", e.line)
		} else if i == 3 {
			fmt.Fprintln(h.out, "  ...")
		}
	}
}

// state prints each side's rows as the state holds them, and checks the
// time index and the operator's counts against them.
func (h *ddOperator) state(t *testing.T, d *datadriven.TestData) {
	o := h.op
	if err := o.readable(); err != nil {
		d.Fatalf(t, "%v", err)
	}
	iter := func(prefix []byte, f func(k, v []byte)) {
		it, err := o.b.NewIter(&pebble.IterOptions{LowerBound: prefix, UpperBound: prefixEnd(slices.Clone(prefix))})
		if err != nil {
			d.Fatalf(t, "%v", err)
		}
		defer it.Close()
		for ok := it.First(); ok; ok = it.Next() {
			v, err := it.ValueAndErr()
			if err != nil {
				d.Fatalf(t, "%v", err)
			}
			f(it.Key(), v)
		}
	}
	for _, s := range []Side{Left, Right} {
		var lines []string
		counts := map[string]int{} // entries key → rows
		var size int64             // the bytes the rows held count for
		iter([]byte{nsEntries, byte(s)}, func(k, v []byte) {
			key, ts, err := splitEntriesKey(k)
			if err != nil {
				d.Fatalf(t, "%v", err)
			}
			ents, err := decodeEntries(nil, ts, v)
			if err != nil {
				d.Fatalf(t, "%v", err)
			}
			counts[string(k)] = len(ents)
			for i := range ents {
				e := &ents[i]
				size += rowBytes(len(k)) + int64(len(appendEntry(nil, e.Matched, e.ID, e.Data)))
				l := fmt.Sprintf("key=%s @%s %s", h.keyName(key), ddTime(ts), ddRowName(e))
				if string(e.ID) != ddRowName(e) {
					l += " id=" + string(e.ID)
				}
				if e.Matched {
					l += " matched"
				}
				if ts < o.cur.Horizon[s] {
					l += " BEFORE THE HORIZON"
				}
				lines = append(lines, l)
			}
		})
		var problems []string
		indexed := 0
		iter([]byte{nsIndex, byte(s)}, func(k, v []byte) {
			ts, key, err := splitIndexKey(k)
			if err != nil {
				d.Fatalf(t, "%v", err)
			}
			n, _, err := decodeIndexValue(v)
			if err != nil {
				d.Fatalf(t, "%v", err)
			}
			indexed += n
			ek := string(entriesKey(nil, s, key, ts))
			if counts[ek] != n {
				problems = append(problems, fmt.Sprintf("the time index counts %d rows at key=%s @%s, the entries hold %d", n, h.keyName(key), ddTime(ts), counts[ek]))
			}
		})
		if indexed != len(lines) {
			problems = append(problems, fmt.Sprintf("the time index counts %d rows, the entries hold %d", indexed, len(lines)))
		}
		if o.cur.Rows[s] != int64(len(lines)) {
			problems = append(problems, fmt.Sprintf("the operator counts %d rows, the entries hold %d", o.cur.Rows[s], len(lines)))
		}
		if o.cur.Bytes[s] != size {
			problems = append(problems, fmt.Sprintf("the operator counts %d bytes, the rows held %d", o.cur.Bytes[s], size))
		}
		fmt.Fprintf(h.out, "%s: rows %d, horizon %s\n", s, len(lines), ddTime(o.cur.Horizon[s]))
		for i, l := range lines {
			if len(lines) <= 30 || i < 5 || i >= len(lines)-5 {
				fmt.Fprintln(h.out, " ", l)
			} else if i == 5 {
				fmt.Fprintln(h.out, "  ...")
			}
		}
		for _, p := range problems {
			fmt.Fprintln(h.out, "  INCONSISTENT:", p)
		}
	}
}
