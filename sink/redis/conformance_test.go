package redis

import (
	"context"
	"slices"
	"strconv"
	"testing"

	goredis "github.com/redis/go-redis/v9"

	"github.com/sluice-cdc/sluice/codec"
	"github.com/sluice-cdc/sluice/internal/sinktest"
	"github.com/sluice-cdc/sluice/internal/testenv"
	"github.com/sluice-cdc/sluice/pipeline"
)

// TestConformance runs the sink conformance suite on a real Redis server,
// through a TCP proxy that cuts connections for the outage cases, in
// stream and materialize mode, with messages_per_script 2 so that every
// batch is split into several transactions (a crash can fall between any
// two of them).
func TestConformance(t *testing.T) {
	r := testenv.StartRedis(t)
	proxy := testenv.NewFaultProxy(t, r.Addr())
	c := newClient(t, r.Addr())
	dbz := codec.Format{Name: codec.FormatDebezium}
	for _, mode := range []string{ModeStream, ModeMaterialize, "stream-debezium"} {
		t.Run(mode, func(t *testing.T) {
			cfg := Config{Mode: mode, MessagesPerScript: 2}
			if mode == "stream-debezium" {
				cfg.Mode, cfg.Format = ModeStream, dbz
			}
			tg := sinktest.Target{
				Format: cfg.Format,
				Open: func(t *testing.T, ns string) pipeline.Sink {
					c := cfg
					c.KeyPrefix = ns + ":"
					return newSink(t, proxy.Addr(), c)
				},
				Cut: func(t *testing.T, n int64) {
					if err := proxy.CutAfter(n); err != nil {
						t.Fatal(err)
					}
				},
				Restore: func(t *testing.T) { proxy.RemoveCut() },
			}
			if cfg.Mode == ModeStream {
				tg.Held = func(t *testing.T, ns string) []uint64 { return heldSeqs(t, c, ns) }
			}
			sinktest.Run(t, tg)
		})
	}
}

// heldSeqs reads the sluice-seq field of every entry of the streams under
// prefix ns, each stream in order; entries of different streams have no
// order between them, so they are returned sorted.
func heldSeqs(t *testing.T, c *goredis.Client, ns string) []uint64 {
	t.Helper()
	ctx := context.Background()
	keys, err := c.Keys(ctx, ns+":*").Result()
	if err != nil {
		t.Fatal(err)
	}
	var out []uint64
	for _, k := range keys {
		if k == HighWaterKey(ns+":", "p1") {
			continue
		}
		xs, err := c.XRange(ctx, k, "-", "+").Result()
		if err != nil {
			t.Fatalf("XRANGE %s: %v", k, err)
		}
		last := uint64(0)
		for _, x := range xs {
			seq, err := strconv.ParseUint(x.Values[pipeline.HeaderSeq].(string), 10, 64)
			if err != nil {
				t.Fatalf("%s %s: %v", k, x.ID, err)
			}
			if seq <= last {
				t.Fatalf("stream %s: seq %d after %d", k, seq, last)
			}
			last = seq
			out = append(out, seq)
		}
	}
	slices.Sort(out)
	return out
}
