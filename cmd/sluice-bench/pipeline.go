package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluice-cdc/sluice/codec"
	"github.com/sluice-cdc/sluice/internal/bench"
	"github.com/sluice-cdc/sluice/internal/testenv/throwaway"
	"github.com/sluice-cdc/sluice/pipeline"
	"github.com/sluice-cdc/sluice/sink/file"
	kafkasink "github.com/sluice-cdc/sluice/sink/kafka"
	redissink "github.com/sluice-cdc/sluice/sink/redis"
)

// sinkKinds are the sinks the pipeline benchmark can measure.
func sinkKinds() []bench.SinkKind {
	kinds := []bench.SinkKind{{
		Name: "file", Formats: true,
		New: func(ctx context.Context, dir string, f codec.Format) (pipeline.Sink, func(), error) {
			s, err := file.New("file", file.Config{Path: filepath.Join(dir, "out", "changes.jsonl"), Format: f}, nil)
			if err != nil {
				return nil, nil, err
			}
			return s, func() { s.Close() }, nil
		},
	}}
	return append(kinds, netSinkKinds()...)
}

// benchKafka is the benchmark's one Kafka broker (Apache Kafka
// throwaway.KafkaVersion, KRaft, a JVM of its own), started on first use
// and closed by closeBenchKafka; each sink of a run gets topics and a
// transactional id of its own on it.
var benchKafka struct {
	mu sync.Mutex
	k  *throwaway.Kafka
	n  int
}

func closeBenchKafka() {
	benchKafka.mu.Lock()
	defer benchKafka.mu.Unlock()
	if benchKafka.k != nil {
		benchKafka.k.Close()
		benchKafka.k = nil
	}
}

// netSinkKinds are the networked sinks of the pipeline benchmark.
func netSinkKinds() []bench.SinkKind {
	return []bench.SinkKind{{
		Name: "kafka", Formats: true,
		New: func(ctx context.Context, dir string, f codec.Format) (pipeline.Sink, func(), error) {
			benchKafka.mu.Lock()
			defer benchKafka.mu.Unlock()
			if benchKafka.k == nil {
				fmt.Fprintf(os.Stderr, "starting Apache Kafka %s (one broker)...\n", throwaway.KafkaVersion)
				k, err := throwaway.StartKafka(ctx, throwaway.KafkaOptions{HeapMB: 1024, FullJIT: true}) // as a deployment runs
				if err != nil {
					return nil, nil, err
				}
				benchKafka.k = k
			}
			benchKafka.n++
			p := fmt.Sprintf("b%d", benchKafka.n)
			cfg := kafkasink.Config{Name: "kafka", Brokers: benchKafka.k.Brokers(), Format: f, Topic: p + ".{db}.{table}", TransactionalID: "bench-" + p}
			if f.IsDebezium() {
				cfg.SchemaChangeTopic, cfg.TransactionTopic = p+".{source}", p+".{source}.transaction"
			}
			s, err := kafkasink.New(cfg, "bench", slog.Default())
			if err != nil {
				return nil, nil, err
			}
			return s, func() { s.Close() }, nil
		},
	}, {
		Name: "redis",
		New: func(ctx context.Context, dir string, _ codec.Format) (pipeline.Sink, func(), error) {
			srv, err := throwaway.StartRedisServer(ctx, throwaway.RedisOptions{Dir: dir})
			if err != nil {
				return nil, nil, err
			}
			s, err := redissink.New(redissink.Config{Name: "redis", Addr: srv.Addr(), Mode: "stream"}, "bench", slog.Default())
			if err != nil {
				srv.Close()
				return nil, nil, err
			}
			return s, func() { s.Close(); srv.Close() }, nil
		},
	}}
}

func pipelineCmd() *cobra.Command {
	var (
		rows, rate, runs int
		sinks, formats   []string
		flavors          []string
		latFor           time.Duration
	)
	cmd := &cobra.Command{
		Use:   "pipeline",
		Short: "End to end: binlog → JSON in a sink's format → sink, durable and checkpointed; and commit-to-sink latency",
		Long: `Starts a throwaway server (MariaDB unless --flavors says otherwise), writes the
libslave short_insert and long_insert ranges, and runs sluice run's pipeline
over each range into each sink (file, Kafka on a throwaway Apache Kafka broker, a
Redis stream on a throwaway redis-server) in each --format, timing until the
last message is durable and checkpointed. The formats of one range and sink
run one after the other in each of --runs rounds; the fastest round is
reported, with bytes per message (values and keys) and the ratio to format
sluice. Then writes a steady load of single-row transactions and reports the
commit-to-sink latency percentiles per sink and format.

Formats: sluice, debezium, debezium-schemas (debezium with schemas: true).
The Redis sink writes format sluice only; with other formats it is measured
in format sluice alone.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			defer closeBenchKafka()
			fl, err := parseFlavors(flavors)
			if err != nil {
				return err
			}
			fs, err := bench.ParseOutputFormats(formats)
			if err != nil {
				return err
			}
			if runs < 1 {
				return fmt.Errorf("--runs %d: want at least 1", runs)
			}
			var kinds []bench.SinkKind
			for _, k := range sinkKinds() {
				if len(sinks) == 0 || slices.Contains(sinks, k.Name) {
					kinds = append(kinds, k)
				}
			}
			if len(kinds) == 0 {
				return fmt.Errorf("--sinks %s: known sinks are %s", strings.Join(sinks, ","), kindNames())
			}
			// measured lists the formats each sink is measured in.
			measured := func(k bench.SinkKind) []bench.OutputFormat {
				if k.Formats {
					return fs
				}
				for _, f := range fs {
					if f.Name == "sluice" {
						return []bench.OutputFormat{f}
					}
				}
				return nil
			}
			for _, k := range kinds {
				if len(measured(k)) == 0 {
					if len(sinks) > 0 {
						return fmt.Errorf("--sinks %s: the %s sink writes format sluice only; add sluice to --format or drop %s from --sinks", strings.Join(sinks, ","), k.Name, k.Name)
					}
					fmt.Fprintf(os.Stderr, "skipping the %s sink: it writes format sluice only\n", k.Name)
				}
			}
			for _, flavor := range fl {
				fmt.Fprintf(os.Stderr, "starting %s and writing %d rows per table...\n", flavor, rows)
				db, ranges, err := bench.PrepareRanges(ctx, flavor, rows, []string{"short_insert", "long_insert"}, os.Stderr)
				if err != nil {
					return err
				}
				tp, lat, err := runPipelineBench(ctx, db, ranges, kinds, measured, runs, rate, latFor)
				version := db.Version()
				db.Close()
				if err != nil {
					return fmt.Errorf("%s: %w", flavor, err)
				}
				fmt.Fprintf(os.Stdout, "\n%s\n\n", version)
				bench.ReportPipeline(os.Stdout, tp, lat)
			}
			return nil
		},
	}
	cmd.Flags().StringSliceVar(&flavors, "flavors", []string{"mariadb"}, "servers to measure on, in turn (mariadb, mysql)")
	cmd.Flags().IntVar(&rows, "rows", 1_000_000, "rows per range")
	cmd.Flags().IntVar(&runs, "runs", 1, "rounds per range, sink and format; the fastest is reported")
	cmd.Flags().StringSliceVar(&sinks, "sinks", nil, "sinks to measure (default all): "+kindNames())
	cmd.Flags().StringSliceVar(&formats, "format", []string{"sluice"}, "sink formats to measure, in turn: sluice, debezium, debezium-schemas")
	cmd.Flags().IntVar(&rate, "rate", 2000, "transactions per second of the latency load")
	cmd.Flags().DurationVar(&latFor, "latency-for", 10*time.Second, "how long the latency load runs (0: skip)")
	return cmd
}

// runPipelineBench measures each range into each sink in each of its
// formats, runs rounds (keeping the fastest, and the least CPU), then the latency per sink
// and format.
func runPipelineBench(ctx context.Context, db *throwaway.Server, ranges []bench.Range, kinds []bench.SinkKind, measured func(bench.SinkKind) []bench.OutputFormat, runs, rate int, latFor time.Duration) ([]bench.PipelineResult, []bench.LatencyResult, error) {
	var tp []bench.PipelineResult
	for round := 0; round < runs; round++ {
		i := 0
		for _, rg := range ranges {
			for _, k := range kinds {
				for _, f := range measured(k) {
					r, err := bench.PipelineThroughput(ctx, db, rg, k, f)
					if err != nil {
						return nil, nil, err
					}
					fmt.Fprintf(os.Stderr, "%-13s -> %-6s %-16s %8d msgs %7.2fs %10.0f msg/s\n", rg.Name, k.Name, f.Name, r.Messages, r.Seconds, r.MsgsPerSec())
					if round == 0 {
						tp = append(tp, r)
					} else {
						// The fastest round's rate, the least CPU of any
						// round (the same messages each time).
						cpu := min(tp[i].CPUSeconds, r.CPUSeconds)
						if r.Seconds < tp[i].Seconds {
							tp[i] = r
						}
						tp[i].CPUSeconds = cpu
					}
					i++
				}
			}
		}
	}
	var lat []bench.LatencyResult
	if latFor > 0 {
		for _, k := range kinds {
			for _, f := range measured(k) {
				r, err := bench.PipelineLatency(ctx, db, k, f, rate, latFor)
				if err != nil {
					return nil, nil, err
				}
				fmt.Fprintf(os.Stderr, "latency -> %-6s %-16s %.0f txn/s p50 %v p99 %v\n", k.Name, f.Name, r.TxnsPerSec, r.P50, r.P99)
				lat = append(lat, r)
			}
		}
	}
	return tp, lat, nil
}

func kindNames() string {
	var names []string
	for _, k := range sinkKinds() {
		names = append(names, k.Name)
	}
	return strings.Join(names, ", ")
}
