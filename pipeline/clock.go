package pipeline

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/sluice-cdc/sluice/binlog"
	"github.com/sluice-cdc/sluice/mysqlconn"
)

// clockEstimate is a source's clock offset (server minus sluice), taken
// from the sample with the shortest round trip among the recent ones, as
// NTP does: the shorter the round trip, the less a one-sided delay can
// skew the estimate.
type clockEstimate struct {
	offset atomic.Int64 // ns
	rtt    atomic.Int64 // ns, of the sample the offset came from
	// window of recent samples (sampler goroutine only)
	win  [16]clockSample
	n, i int
	ok   atomic.Int64 // Unix ns of the last successful sample
	// last is the round trip of the latest sample (rtt is the shortest
	// of the window's: a link that slowed down shows in last first), and
	// inflight the Unix ns when the sample under way began (0: none).
	last, inflight atomic.Int64
}

// roundTrip is a bound on the link's current round trip as the samples
// show it at now (Unix ns): the longest of the shortest recent sample's,
// the latest sample's, and the time the sample under way has taken.
func (c *clockEstimate) roundTrip(now int64) int64 {
	rtt := max(c.rtt.Load(), c.last.Load())
	if s := c.inflight.Load(); s > 0 {
		rtt = max(rtt, now-s)
	}
	return rtt
}

type clockSample struct{ offset, rtt int64 }

// add records one sample and returns the offset in use.
func (c *clockEstimate) add(offset, rtt int64) int64 {
	c.win[c.i] = clockSample{offset, rtt}
	c.i = (c.i + 1) % len(c.win)
	c.n = min(c.n+1, len(c.win))
	best := c.win[0]
	for _, s := range c.win[1:c.n] {
		if s.rtt < best.rtt {
			best = s
		}
	}
	c.offset.Store(best.offset)
	c.rtt.Store(best.rtt)
	return best.offset
}

// sampleClock samples the source's clock and binlog position every
// interval on its own connection until ctx ends. The clock gives the
// offset that event times are corrected by; the position, once the stream
// has read past it, tells that the source has sent everything up to the
// sample's time, which moves an idle or slow source's progress on. A
// standalone source (SourceConfig.Standalone) is not sampled.
func (in *input) sampleClock(ctx context.Context, every time.Duration) {
	if in.src.cfg.Standalone {
		return
	}
	cfg := in.src.cfg.Binlog
	var (
		c    *mysqlconn.Conn
		stop = func() bool { return false }
	)
	defer func() {
		stop()
		if c != nil {
			c.Close()
		}
	}()
	t := time.NewTicker(every)
	defer t.Stop()
	failures := 0
	for {
		if c == nil {
			dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			conn, err := binlog.Dial(dctx, cfg)
			cancel()
			if err == nil {
				// Ending the pipeline cuts a sample's queries, which a
				// stalled link would hold for ever.
				c, stop = conn, binlog.CutOnDone(ctx, conn)
			} else if ctx.Err() == nil {
				failures++
				if failures == 1 || failures%100 == 0 {
					in.m.p.log.Warn("cannot sample the source's clock; event times are not corrected and an idle source is followed by its heartbeats only", "source", in.name, "err", err.Error())
				}
			}
		}
		if c != nil {
			if err := in.sampleOnce(c); err != nil {
				stop()
				c.Close()
				c = nil
				if ctx.Err() == nil {
					failures++
					if failures == 1 || failures%100 == 0 {
						in.m.p.log.Warn("sampling the source's clock failed; reconnecting", "source", in.name, "err", binlog.Brief(err).Error())
					}
				}
			} else {
				failures = 0
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// sampleOnce reads the server's time, then its binlog position: every
// transaction committed before that time is at or before the position.
func (in *input) sampleOnce(c *mysqlconn.Conn) error {
	now := in.m.p.cfg.Now
	t0 := now()
	in.clock.inflight.Store(t0.UnixNano())
	defer in.clock.inflight.Store(0)
	rs, err := c.Execute("SELECT UNIX_TIMESTAMP(NOW(6))")
	t1 := now()
	if err != nil {
		return err
	}
	raw, err := rs.GetString(0, 0)
	raw = strings.Clone(raw) // GetString points into a buffer reused once rs is closed
	rs.Close()
	if err != nil {
		return err
	}
	secs, err := strconv.ParseFloat(raw, 64)
	if err != nil || math.IsNaN(secs) {
		return fmt.Errorf("the server's clock %q is not a number", raw)
	}
	server := int64(secs*1e6) * 1000 // µs precision, as NOW(6)
	rtt := t1.Sub(t0)
	in.clock.last.Store(int64(rtt))
	mid := t0.UnixNano() + int64(rtt)/2
	offset := in.clock.add(server-mid, int64(rtt))
	pos, err := binlog.BinlogPosition(c)
	if err != nil {
		return err
	}
	in.clock.ok.Store(t1.UnixNano())
	in.addSample(sample{at: server - offset, pos: pos})
	return nil
}
