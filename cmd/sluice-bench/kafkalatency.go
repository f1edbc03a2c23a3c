package main

import (
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluice-cdc/sluice/internal/bench"
	"github.com/sluice-cdc/sluice/internal/testenv/throwaway"
)

func kafkaLatencyCmd() *cobra.Command {
	var (
		flavors          []string
		rates            []int
		duration, warmup time.Duration
		sluice           string
	)
	cmd := &cobra.Command{
		Use:   "kafka-latency",
		Short: "Commit-to-consumer latency through a real Kafka broker: sluice run beside Debezium in Kafka Connect",
		Long: `Starts a throwaway MariaDB, then a throwaway MySQL (--flavors), and one Apache
Kafka broker (KRaft), and at each --rates (rows per second, one INSERT of
rate/100 rows every 10 ms) measures, in turn, each reader alone:

  sluice    sluice run: bench.lat into a Kafka topic, format debezium
            without schemas, every other option sluice's default (its Kafka
            sink's transactions included)
  debezium  Debezium's connector (3.6.1's MySQL connector; on MariaDB
            3.5.0's MariaDB connector) in a Kafka Connect worker
            (standalone, a JVM of its own, 1 GiB heap), JsonConverter
            without schemas, snapshot.mode=no_data, every other option
            Debezium's and Connect's default; SLUICE_BENCH_DBZ_PROPS=k=v,...
            overrides the connector's options

A consumer in this process (franz-go, read_committed) reads the reader's
topic; each row's latency runs from its commit (the row's TIMESTAMP(6),
the statement's NOW(6)) to the moment the consumer holds it. Each reader
is started, reads --warmup of the load (not counted), then --duration of
it (counted; every row must arrive). Prints per rate and reader the rows,
p50, p99 and max latency, the reader's CPU per row over the measured load,
the time from its start to its reading the binlog, and Debezium's figures
over sluice's.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			fl, err := parseFlavors(flavors)
			if err != nil {
				return err
			}
			for _, r := range rates {
				if r < 100 {
					return fmt.Errorf("--rates %d: the load commits every 10 ms, so at least 100 rows/s", r)
				}
			}
			bin, err := sluiceBinary(sluice)
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			fmt.Fprintf(os.Stderr, "starting Apache Kafka %s (one broker)...\n", throwaway.KafkaVersion)
			k, err := throwaway.StartKafka(ctx, throwaway.KafkaOptions{HeapMB: 1024, FullJIT: true}) // as a deployment runs
			if err != nil {
				return err
			}
			defer k.Close()
			for _, f := range fl {
				fmt.Fprintf(os.Stderr, "starting %s...\n", f)
				db, err := throwaway.Start(ctx, bench.ServerOptions(f))
				if err != nil {
					return err
				}
				res, err := bench.RunKafkaLatency(ctx, db, k, bench.KafkaLatencyOptions{
					Rates: rates, Duration: duration, Warmup: warmup, Self: bin, Log: os.Stderr,
				})
				version := db.Version()
				db.Close()
				if err != nil {
					return fmt.Errorf("%s: %w", f, err)
				}
				fmt.Fprintf(os.Stdout, "\n%s; Apache Kafka %s; %v measured after %v of warm-up\n\n", version, throwaway.KafkaVersion, duration, warmup)
				bench.ReportKafkaLatency(os.Stdout, res)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringSliceVar(&flavors, "flavors", []string{"mariadb", "mysql"}, "servers to measure on, in turn (mariadb, mysql)")
	f.IntSliceVar(&rates, "rates", []int{1000, 10000}, "rows per second of the load, in turn")
	f.DurationVar(&duration, "duration", 30*time.Second, "how long the measured load runs, per reader and rate")
	f.DurationVar(&warmup, "warmup", 15*time.Second, "how long the load runs before it is measured")
	f.StringVar(&sluice, sluiceFlag, "", sluiceFlagUsage)
	return cmd
}
