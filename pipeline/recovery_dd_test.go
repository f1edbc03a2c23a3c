package pipeline

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"

	"github.com/sluice-cdc/sluice/binlog"
	"github.com/sluice-cdc/sluice/checkpoint"
	"github.com/sluice-cdc/sluice/position"
	"github.com/sluice-cdc/sluice/snapshot"
)

// TestRecoveryPlan drives the recovery planner from testdata/recovery
// (rewrite the expected output with -rewrite). No server: the checkpoint
// and what each sink's Recover returned are written out in the files.
//
//	recover sources=(a,b) sinks=(k,f) [given=(a)]
//	checkpoint version=3 last-seq=10 a=b.1:100 snapshot.a=b.1:50/db.t lastmark.a=12 open=a:b.1:300:11
//	sink k max-seq=14 offset=o14 end.a=b.1:300@12 partial.a=2 [uncounted]
//	----
//	the log lines, then the plan (or the error)
//
//	epoch stored=3 [leader=5]
//	----
//	the run's epoch (or the error)
//
//	replay
//	a b.1:300-b.1:400 n=3 [more]
//	a snapshot n=2 [last-row]
//	----
//	which messages each sink is sent (the rest it holds already)
//
// replay feeds the source transactions read again after the last recover
// through the builder's and writer's skip decisions.
func TestRecoveryPlan(t *testing.T) {
	datadriven.Walk(t, "testdata/recovery", func(t *testing.T, path string) {
		var (
			r    planner
			pl   plan
			logs bytes.Buffer
		)
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			switch d.Cmd {
			case "recover":
				logs.Reset()
				r = planner{log: testLogger(&logs), pipeline: "shop"}
				var given []string
				for _, a := range d.CmdArgs {
					switch a.Key {
					case "sources":
						for _, n := range a.Vals {
							r.sources = append(r.sources, plannerSource{name: n})
						}
					case "sinks":
						r.sinks = a.Vals
					case "given":
						given = a.Vals
					default:
						d.Fatalf(t, "recover: unknown argument %s", a.Key)
					}
				}
				for i := range r.sources {
					r.sources[i].startGiven = slices.Contains(given, r.sources[i].name)
				}
				cp, recs := parseRecoveryInput(t, d, r.sinks)
				var err error
				pl, err = r.start(&cp)
				if err == nil {
					pl, err = r.plan(&cp, recs, pl)
				}
				out := logs.String()
				if err != nil {
					return out + "error: " + err.Error() + "\n"
				}
				return out + formatPlan(r, pl, &cp)
			case "replay":
				return replay(t, d, r, pl)
			case "epoch":
				var stored, leader uint64
				d.ScanArgs(t, "stored", &stored)
				coordinated := d.HasArg("leader")
				if coordinated {
					d.ScanArgs(t, "leader", &leader)
				}
				e, err := runEpoch(stored, leader, coordinated)
				if err != nil {
					return "error: " + err.Error() + "\n"
				}
				return fmt.Sprintf("epoch %d\n", e)
			}
			d.Fatalf(t, "unknown command %s", d.Cmd)
			return ""
		})
	})
}

// testLogger writes log lines without their time.
func testLogger(w *bytes.Buffer) *slog.Logger {
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{
		ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			if len(groups) == 0 && a.Key == slog.TimeKey {
				return slog.Attr{}
			}
			return a
		},
	}))
}

// parsePos reads "FILE:OFF", "FILE:OFF@SERVER" or
// "FILE:OFF@SERVER+GTIDS" (a MariaDB GTID state: positions of two servers
// are ordered by their GTID states, see position.Position.Compare).
func parsePos(t *testing.T, d *datadriven.TestData, s string) position.Position {
	srv, gtids := "", ""
	if i := strings.IndexByte(s, '@'); i >= 0 {
		s, srv = s[:i], s[i+1:]
		if j := strings.IndexByte(srv, '+'); j >= 0 {
			srv, gtids = srv[:j], srv[j+1:]
		}
	}
	p, err := position.ParseFilePos(s)
	if err != nil {
		d.Fatalf(t, "%v", err)
	}
	p.Server = srv
	if gtids != "" {
		p.GTIDs, p.Flavor = gtids, position.MariaDB
	}
	return p
}

func parseUint(t *testing.T, d *datadriven.TestData, s string) uint64 {
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		d.Fatalf(t, "%q is not a number", s)
	}
	return n
}

// snapshotRaw is a checkpoint's snapshot state: "FILE:OFF/db.t[,db.u]"
// (tables still to read), "done" (a state with no range left) or
// "garbage" (not JSON).
func snapshotRaw(t *testing.T, d *datadriven.TestData, s string) json.RawMessage {
	switch s {
	case "done":
		return json.RawMessage(`{"position":{},"ranges":[]}`)
	case "garbage":
		return json.RawMessage(`{"ranges":`)
	}
	at, tables, ok := strings.Cut(s, "/")
	if !ok {
		d.Fatalf(t, "snapshot %q: want FILE:OFF/db.table", s)
	}
	st := snapshot.State{Position: parsePos(t, d, at)}
	for _, tb := range strings.Split(tables, ",") {
		db, name, _ := strings.Cut(tb, ".")
		st.Ranges = append(st.Ranges, snapshot.SavedRange{Schema: db, Table: name})
	}
	raw, err := json.Marshal(st)
	if err != nil {
		d.Fatalf(t, "%v", err)
	}
	return raw
}

func parseRecoveryInput(t *testing.T, d *datadriven.TestData, sinks []string) (checkpoint.Checkpoint, []Recovery) {
	var cp checkpoint.Checkpoint
	recs := make([]Recovery, len(sinks))
	for _, line := range strings.Split(strings.TrimSpace(d.Input), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		switch f[0] {
		case "checkpoint":
			for _, kv := range f[1:] {
				k, v, _ := strings.Cut(kv, "=")
				switch {
				case k == "version":
					cp.Version = parseUint(t, d, v)
				case k == "last-seq":
					cp.LastSeq = parseUint(t, d, v)
				case k == "legacy-snapshot":
					cp.Snapshot = snapshotRaw(t, d, v)
				case k == "open":
					// SOURCE:FILE:OFF:FIRSTSEQ
					i := strings.LastIndexByte(v, ':')
					src, at, _ := strings.Cut(v[:i], ":")
					cp.Opens = append(cp.Opens, checkpoint.Open{Source: src, Begin: parsePos(t, d, at), FirstSeq: parseUint(t, d, v[i+1:])})
				case strings.HasPrefix(k, "snapshot."):
					if cp.Snapshots == nil {
						cp.Snapshots = map[string]json.RawMessage{}
					}
					cp.Snapshots[strings.TrimPrefix(k, "snapshot.")] = snapshotRaw(t, d, v)
				case strings.HasPrefix(k, "lastmark."):
					if cp.LastMarks == nil {
						cp.LastMarks = map[string]uint64{}
					}
					cp.LastMarks[strings.TrimPrefix(k, "lastmark.")] = parseUint(t, d, v)
				default:
					if cp.Sources == nil {
						cp.Sources = map[string]position.Position{}
					}
					cp.Sources[k] = parsePos(t, d, v)
				}
			}
		case "sink":
			if len(f) < 2 {
				d.Fatalf(t, "sink: name it")
			}
			i := slices.Index(sinks, f[1])
			if i < 0 {
				d.Fatalf(t, "sink %s is not among the sinks %v", f[1], sinks)
			}
			rec := &recs[i]
			for _, kv := range f[2:] {
				k, v, _ := strings.Cut(kv, "=")
				switch {
				case k == "max-seq":
					rec.MaxSeq = parseUint(t, d, v)
				case k == "offset":
					rec.Offset = v
				case k == "uncounted":
					rec.Uncounted = true
				case strings.HasPrefix(k, "end."):
					at, seq, ok := strings.Cut(v, "#")
					if !ok {
						d.Fatalf(t, "%s: want FILE:OFF#SEQ", kv)
					}
					if rec.Ends == nil {
						rec.Ends = map[string]End{}
					}
					rec.Ends[strings.TrimPrefix(k, "end.")] = End{Pos: parsePos(t, d, at), Seq: parseUint(t, d, seq)}
				case strings.HasPrefix(k, "partial."):
					if rec.Partial == nil {
						rec.Partial = map[string]int{}
					}
					rec.Partial[strings.TrimPrefix(k, "partial.")] = int(parseUint(t, d, v))
				default:
					d.Fatalf(t, "sink: unknown field %s", kv)
				}
			}
		default:
			d.Fatalf(t, "unknown line %q", line)
		}
	}
	return cp, recs
}

func formatPlan(r planner, pl plan, cp *checkpoint.Checkpoint) string {
	var b strings.Builder
	fmt.Fprintf(&b, "next-seq=%d", pl.nextSeq)
	if pl.snapshot {
		b.WriteString(" inside-snapshot")
	}
	b.WriteByte('\n')
	for i, s := range r.sources {
		sp := pl.srcs[i]
		fmt.Fprintf(&b, "source %s: ", s.name)
		switch {
		case sp.pos.IsZero():
			b.WriteString("from the configured start")
		default:
			fmt.Fprintf(&b, "from %s", sp.pos)
		}
		if sp.startSaved() {
			b.WriteString(" (saved")
			if !sp.saved {
				b.WriteString(": start given")
			}
			b.WriteString(")")
		}
		if sp.resume != nil {
			fmt.Fprintf(&b, "; snapshot resumed at %s with %d range(s)", sp.resume.Position, len(sp.resume.Ranges))
		}
		if i < len(pl.noLast) && pl.noLast[i] {
			b.WriteString("; last row not marked again")
		}
		b.WriteByte('\n')
	}
	for i, name := range r.sinks {
		fmt.Fprintf(&b, "sink %s: skip<=%d offset=%q", name, pl.skip[i], pl.offsets[i])
		if pl.holds != nil {
			for si, h := range pl.holds[i] {
				if !h.until.IsZero() {
					fmt.Fprintf(&b, "; %s whole before %s", r.sources[si].name, h.until)
				}
				if h.openCount > 0 {
					fmt.Fprintf(&b, "; %s first %d of the txn at/after %s", r.sources[si].name, h.openCount, pinAfter(h.open))
				}
			}
		}
		b.WriteByte('\n')
	}
	for _, p := range pl.pins {
		fmt.Fprintf(&b, "pin: %s txn at/after %s first\n", r.sources[p.src].name, pinAfter(p))
	}
	var names []string
	for n := range cp.Sources {
		names = append(names, n)
	}
	slices.Sort(names)
	b.WriteString("checkpoint sources:")
	for _, n := range names {
		fmt.Fprintf(&b, " %s=%s", n, cp.Sources[n])
	}
	b.WriteByte('\n')
	if len(cp.Snapshots) > 0 {
		names = names[:0]
		for n := range cp.Snapshots {
			names = append(names, n)
		}
		slices.Sort(names)
		fmt.Fprintf(&b, "checkpoint snapshots: %s\n", strings.Join(names, " "))
	}
	return b.String()
}

func pinAfter(p pin) string {
	if p.after.IsZero() {
		return "the start"
	}
	return p.after.String()
}

// replay numbers the transactions read again as the builder does and
// says what each sink is sent: with holds (several sources, or inside a
// snapshot) by what the sink holds of each source, else by sequence
// number.
func replay(t *testing.T, d *datadriven.TestData, r planner, pl plan) string {
	holds := make([][]hold, len(pl.holds))
	for i := range pl.holds {
		holds[i] = slices.Clone(pl.holds[i])
	}
	noLast := slices.Clone(pl.noLast)
	seq := pl.nextSeq
	var b strings.Builder
	chunks := map[int]int{}
	for _, line := range strings.Split(strings.TrimSpace(d.Input), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			d.Fatalf(t, "replay: want SOURCE BEGIN-END n=N, or SOURCE snapshot n=N")
		}
		si := r.srcIndex(f[0])
		if si < 0 {
			d.Fatalf(t, "replay: no source %s", f[0])
		}
		txn := &binlog.Txn{Last: true}
		n := 0
		if f[1] == "snapshot" {
			txn.Snapshot = true
		} else {
			from, to, ok := strings.Cut(f[1], "-")
			if !ok {
				d.Fatalf(t, "replay: %s: want BEGIN-END", f[1])
			}
			txn.Begin, txn.End = parsePos(t, d, from), parsePos(t, d, to)
		}
		for _, kv := range f[2:] {
			k, v, _ := strings.Cut(kv, "=")
			switch k {
			case "n":
				n = int(parseUint(t, d, v))
			case "more":
				txn.Last = false
			case "last-row":
				txn.SnapshotLast = true
			default:
				d.Fatalf(t, "replay: unknown field %s", kv)
			}
		}
		txn.Chunk = chunks[si]
		if txn.Last || txn.Snapshot {
			chunks[si] = 0
		} else {
			chunks[si]++
		}
		txn.Changes = make([]binlog.Change, n)
		var whole uint64
		if holds != nil && !txn.Snapshot {
			whole = heldWhole(holds, si, txn)
		}
		fmt.Fprintf(&b, "%s:", line)
		for k := range n {
			held := whole
			if holds != nil && !txn.Snapshot {
				held |= heldNext(holds, si, txn, func(int) {})
			}
			mark := ""
			if txn.SnapshotLast && k == n-1 {
				if si < len(noLast) && noLast[si] {
					noLast[si] = false
				} else {
					mark = " marked last"
				}
			}
			var to []string
			for i, name := range r.sinks {
				if held&(1<<i) == 0 && seq > pl.skip[i] {
					to = append(to, name)
				}
			}
			dest := strings.Join(to, ",")
			if dest == "" {
				dest = "none"
			}
			fmt.Fprintf(&b, " %d%s->%s", seq, mark, dest)
			seq++
		}
		b.WriteByte('\n')
	}
	return b.String()
}
