package nats

import (
	"fmt"
	"strings"
	"testing"

	"github.com/sluice-cdc/sluice/codec"
	"github.com/sluice-cdc/sluice/internal/sinktest"
	"github.com/sluice-cdc/sluice/internal/testenv"
	"github.com/sluice-cdc/sluice/internal/testenv/natsenv"
	"github.com/sluice-cdc/sluice/pipeline"
)

// TestConformance runs the sink conformance suite on an embedded NATS
// server, through a TCP proxy that cuts connections for the outage cases
// (messages are published one by one: a cut leaves any prefix of a batch).
func TestConformance(t *testing.T) {
	n := natsenv.StartNATS(t)
	proxy := testenv.NewFaultProxy(t, strings.TrimPrefix(n.URL(), "nats://"))
	url := "nats://" + proxy.Addr()
	stream := func(ns string) string { return "st-" + ns }
	sinktest.Run(t, sinktest.Target{
		Open: func(t *testing.T, ns string) pipeline.Sink {
			return newSink(t, url, Config{Stream: stream(ns), Subject: "s" + ns + ".{db}.{table}"})
		},
		Held: func(t *testing.T, ns string) []uint64 { return seqs(t, readStream(t, n.URL(), stream(ns))) },
		Cut: func(t *testing.T, n int64) {
			if err := proxy.CutAfter(n); err != nil {
				t.Fatal(err)
			}
		},
		Restore: func(t *testing.T) { proxy.RemoveCut() },
	})
}

// TestConformanceDebezium: the suite in format debezium (data without the
// sluice block, snapshot rows marked by the sluice-snapshot header, which
// recovery reads instead of the body), with and without schemas.
func TestConformanceDebezium(t *testing.T) {
	n := natsenv.StartNATS(t)
	proxy := testenv.NewFaultProxy(t, strings.TrimPrefix(n.URL(), "nats://"))
	url := "nats://" + proxy.Addr()
	stream := func(ns string) string { return "dz-" + ns }
	for _, f := range []codec.Format{{Name: codec.FormatDebezium}, {Name: codec.FormatDebezium, Schemas: true}} {
		t.Run(fmt.Sprintf("schemas=%v", f.Schemas), func(t *testing.T) {
			sinktest.Run(t, sinktest.Target{
				Format: f,
				Open: func(t *testing.T, ns string) pipeline.Sink {
					return newSink(t, url, Config{Stream: stream(ns), Subject: "d" + ns + ".{db}.{table}", Format: f})
				},
				Held: func(t *testing.T, ns string) []uint64 { return seqs(t, readStream(t, n.URL(), stream(ns))) },
				Cut: func(t *testing.T, n int64) {
					if err := proxy.CutAfter(n); err != nil {
						t.Fatal(err)
					}
				},
				Restore: func(t *testing.T) { proxy.RemoveCut() },
			})
		})
	}
}
