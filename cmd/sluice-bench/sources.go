package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluice-cdc/sluice/internal/bench"
	"github.com/sluice-cdc/sluice/internal/testenv/throwaway"
	"github.com/sluice-cdc/sluice/position"
)

func sourcesCmd() *cobra.Command {
	var (
		shards, txnRows, rounds, rate int
		writeFor, latFor              time.Duration
		flavors                       []string
	)
	cmd := &cobra.Command{
		Use:   "sources",
		Short: "Many sources in one pipeline: throughput and latency with and without skew alignment",
		Long: `Starts several throwaway servers (MariaDB, then MySQL, as --flavors says) and writes to all at once for a
while (balanced load, overlapping event times). Then runs the pipeline with
every server as a source over those binlog ranges into a file sink, with
alignment off and with max_skew 2s, alternating, several rounds. Then a
steady load of single-row transactions on every server, delivered by two
pipelines at once (alignment off and on), and the commit-to-sink latency
of each.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			fl, err := parseFlavors(flavors)
			if err != nil {
				return err
			}
			for _, f := range fl {
				if err := runSources(ctx, f, shards, txnRows, rounds, rate, writeFor, latFor); err != nil {
					return err
				}
			}
			return nil
		},
	}
	cmd.Flags().StringSliceVar(&flavors, "flavors", []string{"mariadb", "mysql"}, "servers to measure on, in turn (mariadb, mysql)")
	cmd.Flags().IntVar(&shards, "shards", 4, "servers (sources)")
	cmd.Flags().IntVar(&txnRows, "txn-rows", 1000, "rows per transaction of the written load")
	cmd.Flags().DurationVar(&writeFor, "write-for", 8*time.Second, "how long the load is written to every server")
	cmd.Flags().IntVar(&rounds, "rounds", 3, "throughput rounds (each runs alignment off and on)")
	cmd.Flags().IntVar(&rate, "rate", 500, "transactions per second per server of the latency load")
	cmd.Flags().DurationVar(&latFor, "latency-for", 10*time.Second, "how long the latency load runs (0: skip)")
	return cmd
}

// runSources measures shards servers of flavor f.
func runSources(ctx context.Context, f position.Flavor, shards, txnRows, rounds, rate int, writeFor, latFor time.Duration) error {
	fmt.Fprintf(os.Stderr, "starting %d %s servers and writing for %v...\n", shards, f, writeFor)
	s, err := bench.PrepareShards(ctx, f, shards, txnRows, writeFor, os.Stderr)
	if err != nil {
		return err
	}
	defer s.Close()
	var tp []bench.SourcesResult
	for round := range rounds {
		for _, align := range []bool{round%2 == 1, round%2 == 0} {
			r, err := bench.SourcesThroughput(ctx, s, align)
			if err != nil {
				return err
			}
			fmt.Fprintf(os.Stderr, "round %d align=%-5v %8d msgs %6.2fs %9.0f msg/s held %d\n", round+1, align, r.Messages, r.Seconds, r.MsgsPerSec(), r.Held)
			tp = append(tp, r)
		}
	}
	var off, on bench.LatencyResult
	if latFor > 0 {
		if off, on, err = bench.SourcesLatency(ctx, s, rate, latFor); err != nil {
			return err
		}
	}
	fmt.Fprintf(os.Stdout, "\n%s, %d servers\n", throwaway.FlavorName(f), shards)
	bench.ReportSources(os.Stdout, tp, off, on)
	return nil
}
