package pipeline

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"

	"github.com/sluice-cdc/sluice/binlog"
)

// TestAligner drives the merger's decisions (the aligner) from
// testdata/align, with a clock the file steps (rewrite the expected
// output with -rewrite). Times are durations since the clock's zero.
//
//	init sources=(a,b) [max-skew=2s] [max-wait=30s] [on-stall=fail] [limit=BYTES] [sample-every=250ms]
//	pin SOURCE [after=FILE:OFF]          a transaction to take first (recovery)
//	tick DURATION                        the clock moves on
//	stream SOURCE                        the source streams (its snapshot is done)
//	txn SOURCE [et=10s] [size=N] [more] [snapshot] [begin=FILE:OFF] [end=FILE:OFF] [n=CHANGES]
//	                                     (read, then queued unless the queue is full: send it again)
//	heartbeat SOURCE end=FILE:OFF [rtt=D] [sampled=T]
//	sample SOURCE at=T pos=FILE:OFF      a clock sample: the server was at pos at T
//	state SOURCE | stream-from SOURCE pos=FILE:OFF   control items
//	done SOURCE [err=TEXT]               the source returned
//	next [max=N]                         steps until nothing goes out (at most N)
//	show                                 each source's state
func TestAligner(t *testing.T) {
	datadriven.Walk(t, "testdata/align", func(t *testing.T, path string) {
		var (
			a      *aligner
			now    int64
			chunks map[int]int
		)
		dur := func(d *datadriven.TestData, key string) (int64, bool) {
			if !d.HasArg(key) {
				return 0, false
			}
			var s string
			d.ScanArgs(t, key, &s)
			v, err := time.ParseDuration(s)
			if err != nil {
				d.Fatalf(t, "%s: %v", key, err)
			}
			return int64(v), true
		}
		src := func(d *datadriven.TestData) int {
			if len(d.CmdArgs) == 0 {
				d.Fatalf(t, "%s: name the source", d.Cmd)
			}
			i := slices.IndexFunc(a.srcs, func(s alignSource) bool { return s.name == d.CmdArgs[0].Key })
			if i < 0 {
				d.Fatalf(t, "no source %s", d.CmdArgs[0].Key)
			}
			return i
		}
		push := func(si int, it item) string {
			if a.full(si, it.size) {
				a.waiting(si, now)
				return fmt.Sprintf("%s waits: its queue holds %d bytes, the budget is %d\n", a.srcs[si].name, a.srcs[si].bytes, a.limit)
			}
			a.push(si, it, now)
			return ""
		}
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			if a == nil && d.Cmd != "init" {
				d.Fatalf(t, "init first")
			}
			switch d.Cmd {
			case "init":
				var names []string
				d.ScanArgs(t, "sources", &names)
				cfg := AlignConfig{}
				if v, ok := dur(d, "max-skew"); ok {
					cfg.MaxSkew = time.Duration(v)
				}
				if v, ok := dur(d, "max-wait"); ok {
					cfg.MaxWait = time.Duration(v)
				}
				if v, ok := dur(d, "sample-every"); ok {
					cfg.SampleEvery = time.Duration(v)
				}
				if d.HasArg("on-stall") {
					d.ScanArgs(t, "on-stall", &cfg.OnStall)
				}
				cfg.defaults()
				if err := cfg.validate(); err != nil {
					return "error: " + err.Error() + "\n"
				}
				limit := 4 << 20
				if d.HasArg("limit") {
					d.ScanArgs(t, "limit", &limit)
				}
				a, now, chunks = newAligner(names, cfg, limit), 0, map[int]int{}
				return ""
			case "pin":
				p := pin{src: src(d)}
				if d.HasArg("after") {
					var s string
					d.ScanArgs(t, "after", &s)
					p.after = parsePos(t, d, s)
				}
				a.pins = append(a.pins, p)
				return ""
			case "tick":
				if len(d.CmdArgs) != 1 {
					d.Fatalf(t, "tick DURATION")
				}
				v, err := time.ParseDuration(d.CmdArgs[0].Key)
				if err != nil {
					d.Fatalf(t, "%v", err)
				}
				now += int64(v)
				return fmt.Sprintf("now %s\n", time.Duration(now))
			case "stream":
				a.streamStarted(src(d), now)
				return ""
			case "txn", "heartbeat":
				si := src(d)
				txn := &binlog.Txn{Last: !d.HasArg("more"), Snapshot: d.HasArg("snapshot"), Heartbeat: d.Cmd == "heartbeat"}
				for _, k := range []string{"begin", "end"} {
					if d.HasArg(k) {
						var s string
						d.ScanArgs(t, k, &s)
						p := parsePos(t, d, s)
						if k == "begin" {
							txn.Begin = p
						} else {
							txn.End = p
						}
					}
				}
				if txn.Heartbeat {
					txn.Begin = txn.End
				}
				n := 1
				if d.HasArg("n") {
					d.ScanArgs(t, "n", &n)
				}
				if !txn.Heartbeat {
					txn.Changes = make([]binlog.Change, n)
					txn.Chunk = chunks[si]
				}
				et, _ := dur(d, "et")
				var l link
				if txn.Heartbeat {
					l.now = now
					l.rtt, _ = dur(d, "rtt")
					l.sampled, _ = dur(d, "sampled")
				}
				it := item{kind: itemTxn, txn: txn, size: 100}
				if d.HasArg("size") {
					d.ScanArgs(t, "size", &it.size)
				}
				it.et = a.read(si, txn, et, l)
				out := ""
				if it.et != et {
					out = fmt.Sprintf("event time %s raised to %s by a sample\n", time.Duration(et), time.Duration(it.et))
				}
				w := push(si, it)
				if w == "" && !txn.Heartbeat && !txn.Snapshot {
					if txn.Last {
						delete(chunks, si)
					} else {
						chunks[si]++
					}
				}
				return out + w
			case "sample":
				si := src(d)
				at, _ := dur(d, "at")
				var s string
				d.ScanArgs(t, "pos", &s)
				a.addSample(si, sample{at: at, pos: parsePos(t, d, s)})
				return ""
			case "state":
				return push(src(d), item{kind: itemState})
			case "stream-from":
				si := src(d)
				var s string
				d.ScanArgs(t, "pos", &s)
				return push(si, item{kind: itemStreamFrom, pos: parsePos(t, d, s)})
			case "done":
				si := src(d)
				var err error
				if d.HasArg("err") {
					var s string
					d.ScanArgs(t, "err", &s)
					err = errors.New(s)
				}
				a.sourceDone(si, err)
				return ""
			case "next":
				limit := 1000
				if d.HasArg("max") {
					d.ScanArgs(t, "max", &limit)
				}
				var b strings.Builder
				for range limit {
					st := a.next(now)
					for _, c := range st.stalls {
						if c.stalled {
							fmt.Fprintf(&b, "%s stalled (quiet %s)\n", a.srcs[c.src].name, time.Duration(c.quiet))
						} else {
							fmt.Fprintf(&b, "%s is back\n", a.srcs[c.src].name)
						}
					}
					if st.err != nil {
						fmt.Fprintf(&b, "error: %v\n", st.err)
						break
					}
					if st.src < 0 {
						if st.finished {
							b.WriteString("finished\n")
						} else {
							b.WriteString("nothing out")
							if st.live {
								fmt.Fprintf(&b, "; watermark %s skew %s", time.Duration(st.wm), time.Duration(st.skew))
							}
							b.WriteByte('\n')
						}
						break
					}
					fmt.Fprintf(&b, "%s %s", a.srcs[st.src].name, describeItem(st.it))
					if st.waited {
						b.WriteString(" waited")
						if st.held > 0 {
							fmt.Fprintf(&b, " %s", time.Duration(st.held))
						}
					}
					if st.it.kind == itemTxn {
						fmt.Fprintf(&b, " | stamped %s", time.Duration(st.emitted))
					}
					if st.live {
						fmt.Fprintf(&b, " | watermark %s", time.Duration(st.wm))
					}
					b.WriteByte('\n')
				}
				return b.String()
			case "show":
				var b strings.Builder
				for i := range a.srcs {
					s := &a.srcs[i]
					fmt.Fprintf(&b, "%s:", s.name)
					switch {
					case s.done && s.err != nil:
						fmt.Fprintf(&b, " failed (%v)", s.err)
					case s.done:
						b.WriteString(" done")
					case s.stalled:
						b.WriteString(" stalled")
					case s.streaming:
						b.WriteString(" streaming")
					default:
						b.WriteString(" not streaming")
					}
					fmt.Fprintf(&b, " queued=%d/%dB progress=%s", s.queued(), s.bytes, time.Duration(s.progress()))
					if s.holds > 0 {
						fmt.Fprintf(&b, " held=%d", s.holds)
					}
					if len(s.samples) > 0 {
						fmt.Fprintf(&b, " samples-waiting=%d", len(s.samples))
					}
					b.WriteByte('\n')
				}
				if a.locked >= 0 {
					fmt.Fprintf(&b, "locked on %s\n", a.srcs[a.locked].name)
				}
				for _, p := range a.pins {
					fmt.Fprintf(&b, "pin %s after %s\n", a.srcs[p.src].name, pinAfter(p))
				}
				fmt.Fprintf(&b, "emitted watermark %s\n", time.Duration(a.emitted))
				return b.String()
			}
			d.Fatalf(t, "unknown command %s", d.Cmd)
			return ""
		})
	})
}

func describeItem(it item) string {
	switch it.kind {
	case itemState:
		return "snapshot state"
	case itemStreamFrom:
		return "stream from " + it.pos.String()
	}
	t := it.txn
	var b strings.Builder
	switch {
	case t.Heartbeat:
		b.WriteString("heartbeat")
	case t.Snapshot:
		fmt.Fprintf(&b, "snapshot rows")
	default:
		b.WriteString("txn")
		if !t.Begin.IsZero() {
			fmt.Fprintf(&b, " %s", t.Begin)
		}
		if !t.Last {
			fmt.Fprintf(&b, " (chunk %d, more)", t.Chunk)
		} else if t.Chunk > 0 {
			fmt.Fprintf(&b, " (chunk %d, last)", t.Chunk)
		}
	}
	if it.et > 0 {
		fmt.Fprintf(&b, " et=%s", time.Duration(it.et))
	}
	return b.String()
}
