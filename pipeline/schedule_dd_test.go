package pipeline

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"
)

// TestSchedule drives the writer's timing decisions (the schedule) from
// testdata/schedule, with a clock the file steps (rewrite the expected
// output with -rewrite). Times are durations since the writer started.
// The test plays the writer's shell: a queue of batches waiting for it,
// its timer, its checkpoint store.
//
//	init [batch=BYTES] [formats=N] [every=1s] [plain]
//	cut encoded=BYTES                  is a batch of that many encoded bytes cut?
//	arrive NAME size=BYTES [end] [snapshot] [state] [fixes-start]
//	                                   a batch queued for the writer: it ends a
//	                                   transaction (end), holds snapshot rows, a
//	                                   snapshot state, a start position the reader fixed
//	                                   (which ends it and carries a state)
//	write [takes=D]                    the writer takes the first waiting batch,
//	                                   gathers (group commit), writes (the sinks take
//	                                   D), then saves if the batch forces it or the
//	                                   interval has passed (a timer that fired during
//	                                   the write is seen at the next tick)
//	tick DURATION                      the clock moves on; the timer fires if due
//	fail-next-save                     the store refuses the next save
//	stop [cancelled]                   the input ended (or the run was cancelled):
//	                                   the final save
//	show                               the schedule's state
func TestSchedule(t *testing.T) {
	type arrived struct {
		name                             string
		size                             int
		end, snapshot, state, fixesStart bool
	}
	datadriven.Walk(t, "testdata/schedule", func(t *testing.T, path string) {
		var (
			s        *schedule
			start    = time.Unix(1_700_000_000, 0)
			now      time.Time
			timer    time.Time
			queue    []arrived
			failNext bool
			stopped  bool
			version  int
		)
		at := func(x time.Time) string { return x.Sub(start).String() }
		dur := func(d *datadriven.TestData, key string, def time.Duration) time.Duration {
			if !d.HasArg(key) {
				return def
			}
			var v string
			d.ScanArgs(t, key, &v)
			x, err := time.ParseDuration(v)
			if err != nil {
				d.Fatalf(t, "%s: %v", key, err)
			}
			return x
		}
		// save is writer.save: the store takes the checkpoint or fails.
		save := func(b *strings.Builder, force bool, why string) {
			if !s.due(now, force) {
				switch {
				case !s.dirty:
					fmt.Fprintf(b, "%s: no save, nothing changed\n", why)
				default:
					fmt.Fprintf(b, "%s: no save, last save at %s (due at %s)\n", why, at(s.lastSave), at(s.lastSave.Add(s.every)))
				}
				return
			}
			if failNext {
				failNext, stopped = false, true
				fmt.Fprintf(b, "%s: save at %s fails: the writer stops with the error\n", why, at(now))
				return
			}
			version++
			s.saved(now)
			fmt.Fprintf(b, "%s: save v%d at %s\n", why, version, at(now))
		}
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			if s == nil && d.Cmd != "init" {
				d.Fatalf(t, "init first")
			}
			if stopped && d.Cmd != "show" && d.Cmd != "init" {
				return "the writer has stopped\n"
			}
			var b strings.Builder
			switch d.Cmd {
			case "init":
				batch, formats := 1000, 1
				if d.HasArg("batch") {
					d.ScanArgs(t, "batch", &batch)
				}
				if d.HasArg("formats") {
					d.ScanArgs(t, "formats", &formats)
				}
				s = newSchedule(batch, formats, dur(d, "every", time.Second), d.HasArg("plain"), start)
				now, queue, failNext, stopped, version = start, nil, false, false, 0
				timer = s.wake(now)
				fmt.Fprintf(&b, "cut at %d bytes, gather below %d, timer at %s\n", s.cutAt, s.gatherBelow, at(timer))
			case "cut":
				var n int
				d.ScanArgs(t, "encoded", &n)
				if s.cut(n) {
					b.WriteString("cut: the batch goes to the writer\n")
				} else {
					b.WriteString("the batch stays open\n")
				}
			case "arrive":
				if len(d.CmdArgs) == 0 {
					d.Fatalf(t, "arrive: name the batch")
				}
				a := arrived{name: d.CmdArgs[0].Key, end: d.HasArg("end"), snapshot: d.HasArg("snapshot"), state: d.HasArg("state"), fixesStart: d.HasArg("fixes-start")}
				d.ScanArgs(t, "size", &a.size)
				if a.fixesStart {
					// builder.streamFrom: the batch ends at the position and
					// carries the source's snapshot state (its end).
					a.end, a.state = true, true
				}
				queue = append(queue, a)
			case "write":
				if len(queue) == 0 {
					return "nothing waits\n"
				}
				cur := queue[0]
				names := []string{cur.name}
				queue = queue[1:]
				for s.more(cur.size, cur.fixesStart) && len(queue) > 0 {
					nb := queue[0]
					queue = queue[1:]
					names = append(names, nb.name)
					cur.size += nb.size
					cur.end = cur.end || nb.end
					cur.snapshot = cur.snapshot || nb.snapshot
					cur.state = cur.state || nb.state
					cur.fixesStart = cur.fixesStart || nb.fixesStart
				}
				now = now.Add(dur(d, "takes", 0))
				fmt.Fprintf(&b, "write %s: %d bytes, done at %s", strings.Join(names, "+"), cur.size, at(now))
				if len(queue) > 0 {
					fmt.Fprintf(&b, "; %d still waiting", len(queue))
				}
				b.WriteString("\n")
				if cur.end || cur.state {
					s.changed()
				}
				save(&b, s.written(batchFacts{inSnapshot: cur.snapshot, snaps: cur.state, fixesStart: cur.fixesStart}), "written")
			case "tick":
				if len(d.CmdArgs) == 0 {
					d.Fatalf(t, "tick: how long")
				}
				x, err := time.ParseDuration(d.CmdArgs[0].Key)
				if err != nil {
					d.Fatalf(t, "tick: %v", err)
				}
				now = now.Add(x)
				fmt.Fprintf(&b, "now %s\n", at(now))
				if !now.Before(timer) {
					// One firing, however many ticks passed.
					fired := timer
					timer = s.wake(now)
					save(&b, false, "timer (due "+at(fired)+")")
					if !stopped {
						fmt.Fprintf(&b, "timer at %s\n", at(timer))
					}
				}
			case "fail-next-save":
				failNext = true
			case "stop":
				cancelled := d.HasArg("cancelled")
				if bound := s.stop(cancelled); bound > 0 {
					fmt.Fprintf(&b, "final save bounded by %s\n", bound)
				} else {
					b.WriteString("final save in the run's context\n")
				}
				save(&b, true, "stop")
				stopped = true
			case "show":
				fmt.Fprintf(&b, "now %s, changed=%t, last save ", at(now), s.dirty)
				if s.lastSave.IsZero() {
					b.WriteString("none")
				} else {
					fmt.Fprintf(&b, "v%d at %s", version, at(s.lastSave))
				}
				fmt.Fprintf(&b, ", timer at %s, %d waiting\n", at(timer), len(queue))
			default:
				d.Fatalf(t, "unknown command %s", d.Cmd)
			}
			return b.String()
		})
	})
}
