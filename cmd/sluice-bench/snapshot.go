package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/sluice-cdc/sluice/internal/bench"
	"github.com/sluice-cdc/sluice/position"
)

func snapshotCmd() *cobra.Command {
	var (
		shortRows, longRows int64
		parallel, runs      int
		chunk               int
		profile             string
		flavors, modes      []string
		sluice              string
	)
	cmd := &cobra.Command{
		Use:   "snapshot",
		Short: "Snapshot of the libslave tables by sluice (to --format none and to a file) beside mariadb-dump and mysqldump",
		Long: `Starts a throwaway MariaDB, then a throwaway MySQL (--flavors), writes
bench.short_table (--short-rows) and bench.long_table (--long-rows), the
libslave article's tables, on each, and for each table alone and for both
together measures, each in its own process:

  dump          mariadb-dump / mysqldump --quick --single-transaction  (to /dev/null)
  sluice-none   sluice tail --snapshot only --format none      (to /dev/null)
  sluice-json   sluice tail --snapshot only --format sluice    (to a temporary file)

and with --modes, beside Debezium itself writing the same JSON:

  sluice-dbz    sluice tail --snapshot only --format debezium  (to a temporary file)
  dbz-embedded  Debezium Embedded (3.6.1 MySQL connector; on MariaDB 3.5.0,
                its MariaDB connector), snapshot.mode=initial_only, each
                value by JsonConverter without schemas (to a temporary
                file), in a JVM of its own; SLUICE_BENCH_DBZ_PROPS=k=v,...
                overrides its options

The dump is the server's own (MySQL's from the distribution the tests
unpack); every reader connects without TLS. Prints per server seconds (wall
time of the process), rows/s, MiB/s (the tables' InnoDB data size over the
wall time), peak memory (maxrss), how long sluice's consistent snapshot held
writers back, the CPU time of the reader and of the server, each sluice
reader's speed relative to the dump, and whether sluice is at least as fast
as the dump everywhere within 256 MiB, blocking writers at most 100 ms. The
rows sluice reports are checked against the table sizes. Each run waits (up
to 30 s) for the machine to have been 90% idle for a second, and the file
written is synced after the run, so that one run's leftovers do not slow
the next.`,
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
			fl, err := parseFlavors(flavors)
			if err != nil {
				return err
			}
			bin, err := sluiceBinary(sluice)
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			for _, f := range fl {
				dir := ""
				if profile != "" {
					dir = filepath.Join(profile, string(f))
					if err := os.MkdirAll(dir, 0o755); err != nil {
						return err
					}
				}
				if err := snapshotOn(ctx, f, shortRows, longRows, bench.SnapshotOptions{
					Modes: modes, Parallel: parallel, Chunk: chunk, Runs: runs, Self: bin, ProfileDir: dir, Log: os.Stderr,
				}); err != nil {
					return fmt.Errorf("%s: %w", f, err)
				}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringSliceVar(&flavors, "flavors", []string{"mariadb", "mysql"}, "servers to measure on, in turn (mariadb, mysql)")
	f.StringSliceVar(&modes, "modes", bench.SnapshotModes, "readers to measure, in turn ("+strings.Join(bench.SnapshotAllModes, ", ")+")")
	f.Int64Var(&shortRows, "short-rows", 10_000_000, "rows in short_table")
	f.Int64Var(&longRows, "long-rows", 2_000_000, "rows in long_table")
	f.IntVar(&parallel, "parallel", 2, "sluice's --snapshot-parallel: connections reading at once")
	f.IntVar(&chunk, "chunk", 0, "sluice's --snapshot-chunk: rows per SELECT (default: sluice's own)")
	f.IntVar(&runs, "runs", 1, "runs per reader and table set; the fastest is reported")
	f.StringVar(&profile, "profile", "", "directory to write a CPU profile of every sluice run into (one subdirectory per server)")
	f.StringVar(&sluice, sluiceFlag, "", sluiceFlagUsage)
	return cmd
}

// snapshotOn runs the snapshot benchmark on a new server of one flavor
// and prints its table and verdict.
func snapshotOn(ctx context.Context, f position.Flavor, shortRows, longRows int64, opts bench.SnapshotOptions) error {
	fmt.Fprintf(os.Stderr, "starting %s and writing %d rows into short_table and %d into long_table...\n", f, shortRows, longRows)
	db, sizes, err := bench.PrepareSnapshot(ctx, f, shortRows, longRows, os.Stderr)
	if err != nil {
		return err
	}
	defer db.Close()
	version := db.Version()
	dump, err := bench.DumpVersion(db)
	if err != nil {
		return err
	}
	results, err := bench.RunSnapshot(ctx, db, sizes, opts)
	if err != nil {
		return err
	}
	chunkNote := ""
	if opts.Chunk > 0 {
		chunkNote = fmt.Sprintf(" --snapshot-chunk %d", opts.Chunk)
	}
	fmt.Fprintf(os.Stdout, "\n%s; sluice --snapshot-parallel %d%s; %s; best of %d run(s)\n\n", version, opts.Parallel, chunkNote, dump, max(opts.Runs, 1))
	bench.ReportSnapshot(os.Stdout, f, results)
	lines, _ := bench.SnapshotVerdict(f, results)
	fmt.Fprintln(os.Stdout)
	for _, l := range lines {
		fmt.Fprintln(os.Stdout, l)
	}
	return nil
}
