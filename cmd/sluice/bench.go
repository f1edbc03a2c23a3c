package main

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/sluice-cdc/sluice/internal/bench"
	"github.com/sluice-cdc/sluice/position"
)

// parseFlavors checks --flavors values.
func parseFlavors(names []string) ([]position.Flavor, error) {
	var out []position.Flavor
	for _, n := range names {
		switch f := position.Flavor(strings.ToLower(strings.TrimSpace(n))); f {
		case position.MariaDB, position.MySQL:
			out = append(out, f)
		default:
			return nil, fmt.Errorf("--flavors: %q is not a server flavor; use mariadb, mysql or both (mariadb,mysql)", n)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("--flavors: name at least one of mariadb, mysql")
	}
	return out, nil
}

func benchCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Benchmarks that measure sluice beside its peers in one run",
	}
	var (
		rows, runs int
		profile    string
		modes      []string
		flavors    []string
	)
	lib := &cobra.Command{
		Use:   "libslave",
		Short: "The libslave article's benchmark: 1M-row inserts and updates of short_table and long_table",
		Long: `Starts a throwaway MariaDB, then a throwaway MySQL, writes four binlog ranges on
each (inserts into and updates of short_table and long_table), and reads each
range with sluice (typed decoding), go-mysql's default decoder, a raw transfer
without decoding (the floor), and sluice's output in each format (sluice's
own, debezium, debezium with schemas) to /dev/null (tail counts the bytes). Each
reader runs in its own process, so its peak memory is its own. Prints rows/s,
ratios, peak memory and bytes per row per server.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			self, err := os.Executable()
			if err != nil {
				return err
			}
			fl, err := parseFlavors(flavors)
			if err != nil {
				return err
			}
			if profile != "" {
				if err := os.MkdirAll(profile, 0o755); err != nil {
					return err
				}
			}
			ctx := cmd.Context()
			for _, f := range fl {
				fmt.Fprintf(os.Stderr, "starting %s and writing %d rows per table...\n", f, rows)
				db, ranges, err := bench.Prepare(ctx, f, rows, os.Stderr)
				if err != nil {
					return err
				}
				dir := ""
				if profile != "" {
					dir = filepath.Join(profile, string(f))
					if err := os.MkdirAll(dir, 0o755); err != nil {
						db.Close()
						return err
					}
				}
				version := db.Version()
				results, err := bench.Run(ctx, db, ranges, bench.Options{Runs: runs, Self: self, Out: os.Stdout, Log: os.Stderr, ProfileDir: dir, Modes: modes})
				db.Close()
				if err != nil {
					return fmt.Errorf("%s: %w", f, err)
				}
				fmt.Fprintf(os.Stdout, "\n%s\n\n", version)
				bench.Report(os.Stdout, results)
			}
			return nil
		},
	}
	lib.Flags().StringSliceVar(&flavors, "flavors", []string{"mariadb", "mysql"}, "servers to measure on, in turn (mariadb, mysql)")
	lib.Flags().IntVar(&rows, "rows", 1_000_000, "rows per table")
	lib.Flags().IntVar(&runs, "runs", 1, "runs per reader and range; the fastest is reported")
	lib.Flags().StringVar(&profile, "profile", "", "directory to write a CPU profile of every sluice run into")
	lib.Flags().StringSliceVar(&modes, "modes", nil, "readers to measure (default sluice,go-mysql,raw,sluice-json,debezium,debezium-schemas)")
	child := &cobra.Command{
		Use:    "child MODE URL FROM TO",
		Hidden: true,
		Args:   cobra.ExactArgs(4),
		RunE: func(cmd *cobra.Command, a []string) error {
			slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
			line, err := bench.Child(cmd.Context(), a[0], a[1], a[2], a[3])
			if err != nil {
				return err
			}
			fmt.Println(line)
			return nil
		},
	}
	cmd.AddCommand(lib, child)
	cmd.AddCommand(benchSnapshotCmd(), benchPipelineCmd(), benchSourcesCmd())
	return cmd
}
