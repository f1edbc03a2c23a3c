package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/sluice-cdc/sluice/internal/bench"
)

func benchSnapshotCmd() *cobra.Command {
	var (
		shortRows, longRows int64
		parallel, runs      int
		chunk               int
		profile             string
	)
	cmd := &cobra.Command{
		Use:   "snapshot",
		Short: "Snapshot of the libslave tables by sluice (to --format none and to a file) beside mariadb-dump",
		Long: `Starts a throwaway MariaDB, writes bench.short_table (--short-rows) and
bench.long_table (--long-rows), the libslave article's tables, and for each table
alone and for both together measures, each in its own process:

  sluice tail --snapshot only --format none        (output to /dev/null)
  sluice tail --snapshot only --format debezium    (output to a temporary file)
  mariadb-dump --quick --single-transaction        (output to /dev/null)

Prints seconds (wall time of the process), rows/s, peak memory (maxrss), the
CPU time of the reader and of the server, each sluice reader's speed relative
to mariadb-dump, and whether sluice is at least as fast as mariadb-dump
everywhere within 256 MiB. The rows sluice reports are checked against the
table sizes. Each run waits (up to 30 s) for the machine to have been 90%
idle for a second, and the file written is synced after the run, so that
one run's leftovers do not slow the next.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if shortRows < 1 || longRows < 1 {
				return fmt.Errorf("--short-rows and --long-rows must be at least 1")
			}
			if parallel < 1 {
				return fmt.Errorf("--parallel must be at least 1")
			}
			if chunk < 0 {
				return fmt.Errorf("--chunk must not be negative")
			}
			self, err := os.Executable()
			if err != nil {
				return err
			}
			dump, err := bench.FindDump()
			if err != nil {
				return err
			}
			if profile != "" {
				if err := os.MkdirAll(profile, 0o755); err != nil {
					return err
				}
			}
			ctx := cmd.Context()
			fmt.Fprintf(os.Stderr, "starting MariaDB and writing %d rows into short_table and %d into long_table...\n", shortRows, longRows)
			db, sizes, err := bench.PrepareSnapshot(ctx, shortRows, longRows, os.Stderr)
			if err != nil {
				return err
			}
			defer db.Close()
			results, err := bench.RunSnapshot(ctx, db, sizes, bench.SnapshotOptions{
				Parallel: parallel, Chunk: chunk, Runs: runs, Self: self, Dump: dump, ProfileDir: profile, Log: os.Stderr,
			})
			if err != nil {
				return err
			}
			chunkNote := ""
			if chunk > 0 {
				chunkNote = fmt.Sprintf(" --snapshot-chunk %d", chunk)
			}
			fmt.Fprintf(os.Stdout, "sluice --snapshot-parallel %d%s; mariadb-dump is %s; best of %d run(s)\n\n", parallel, chunkNote, dump, max(runs, 1))
			bench.ReportSnapshot(os.Stdout, results)
			lines, _ := bench.SnapshotVerdict(results)
			fmt.Fprintln(os.Stdout)
			for _, l := range lines {
				fmt.Fprintln(os.Stdout, l)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.Int64Var(&shortRows, "short-rows", 10_000_000, "rows in short_table")
	f.Int64Var(&longRows, "long-rows", 2_000_000, "rows in long_table")
	f.IntVar(&parallel, "parallel", 2, "sluice's --snapshot-parallel: connections reading at once")
	f.IntVar(&chunk, "chunk", 0, "sluice's --snapshot-chunk: rows per SELECT (default: sluice's own)")
	f.IntVar(&runs, "runs", 1, "runs per reader and table set; the fastest is reported")
	f.StringVar(&profile, "profile", "", "directory to write a CPU profile of every sluice run into")
	return cmd
}
