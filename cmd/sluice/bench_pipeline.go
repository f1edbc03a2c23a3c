package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluice-cdc/sluice/internal/bench"
	"github.com/sluice-cdc/sluice/pipeline"
	"github.com/sluice-cdc/sluice/position"
	"github.com/sluice-cdc/sluice/sink/file"
)

// sinkKinds are the sinks the pipeline benchmark can measure.
func sinkKinds() []bench.SinkKind {
	kinds := []bench.SinkKind{{
		Name: "file",
		New: func(ctx context.Context, dir string) (pipeline.Sink, func(), error) {
			s, err := file.New("file", file.Config{Path: filepath.Join(dir, "out", "changes.jsonl")}, nil)
			if err != nil {
				return nil, nil, err
			}
			return s, func() { s.Close() }, nil
		},
	}}
	return append(kinds, netSinkKinds()...)
}

func benchPipelineCmd() *cobra.Command {
	var (
		rows, rate int
		sinks      []string
		latFor     time.Duration
	)
	cmd := &cobra.Command{
		Use:   "pipeline",
		Short: "End to end: binlog → Debezium JSON → sink, durable and checkpointed; and commit-to-sink latency",
		Long: `Starts a throwaway MariaDB, writes the libslave short_insert and long_insert
ranges, and runs sluice run's pipeline over each range into each sink (file,
Kafka on an in-process kfake cluster, a Redis stream on a throwaway
redis-server), timing until the last message is durable and checkpointed.
Then writes a steady load of single-row transactions and reports the
commit-to-sink latency percentiles per sink.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			fmt.Fprintf(os.Stderr, "starting MariaDB and writing %d rows per table...\n", rows)
			db, ranges, err := bench.PrepareRanges(ctx, position.MariaDB, rows, []string{"short_insert", "long_insert"}, os.Stderr)
			if err != nil {
				return err
			}
			defer db.Close()
			var kinds []bench.SinkKind
			for _, k := range sinkKinds() {
				if len(sinks) == 0 || slices.Contains(sinks, k.Name) {
					kinds = append(kinds, k)
				}
			}
			if len(kinds) == 0 {
				return fmt.Errorf("--sinks %s: known sinks are %s", strings.Join(sinks, ","), kindNames())
			}
			var tp []bench.PipelineResult
			for _, rg := range ranges {
				for _, k := range kinds {
					r, err := bench.PipelineThroughput(ctx, db, rg, k)
					if err != nil {
						return err
					}
					fmt.Fprintf(os.Stderr, "%-13s -> %-6s %8d msgs %7.2fs %10.0f msg/s\n", rg.Name, k.Name, r.Messages, r.Seconds, r.MsgsPerSec())
					tp = append(tp, r)
				}
			}
			var lat []bench.LatencyResult
			if latFor > 0 {
				for _, k := range kinds {
					r, err := bench.PipelineLatency(ctx, db, k, rate, latFor)
					if err != nil {
						return err
					}
					fmt.Fprintf(os.Stderr, "latency -> %-6s %.0f txn/s p50 %v p99 %v\n", k.Name, r.TxnsPerSec, r.P50, r.P99)
					lat = append(lat, r)
				}
			}
			bench.ReportPipeline(os.Stdout, tp, lat)
			return nil
		},
	}
	cmd.Flags().IntVar(&rows, "rows", 1_000_000, "rows per range")
	cmd.Flags().StringSliceVar(&sinks, "sinks", nil, "sinks to measure (default all): "+kindNames())
	cmd.Flags().IntVar(&rate, "rate", 2000, "transactions per second of the latency load")
	cmd.Flags().DurationVar(&latFor, "latency-for", 10*time.Second, "how long the latency load runs (0: skip)")
	return cmd
}

func kindNames() string {
	var names []string
	for _, k := range sinkKinds() {
		names = append(names, k.Name)
	}
	return strings.Join(names, ", ")
}
