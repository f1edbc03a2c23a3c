package main

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/sluice-cdc/sluice/internal/bench"
)

func libslaveCmd() *cobra.Command {
	var (
		rows, runs int
		profile    string
		modes      []string
		flavors    []string
		sluice     string
		charsets   []string
	)
	lib := &cobra.Command{
		Use:   "libslave",
		Short: "The libslave article's benchmark: 1M-row inserts and updates of short_table and long_table",
		Long: `Starts a throwaway MariaDB, then a throwaway MySQL, writes four binlog ranges on
each (inserts into and updates of short_table and long_table), and reads each
range with sluice (typed decoding), go-mysql's default decoder, a raw transfer
without decoding (the floor), and sluice's output in each format (sluice's
own, debezium, debezium with schemas) to /dev/null (tail counts the bytes). Each
reader runs in its own process, so its peak memory is its own: sluice's are
sluice tail of the sluice binary (--sluice, by default the one beside
sluice-bench), the peers' are sluice-bench child. Prints rows/s, ratios,
peak memory and bytes per row per server.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			bin, err := sluiceBinary(sluice)
			if err != nil {
				return err
			}
			self, err := os.Executable()
			if err != nil {
				return fmt.Errorf("finding sluice-bench's own path, to run the peer readers: %w", err)
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
			sets := charsets
			if len(sets) == 0 {
				sets = []string{""}
			}
			for _, f := range fl {
				for _, cs := range sets {
					fmt.Fprintf(os.Stderr, "starting %s and writing %d rows per table...\n", f, rows)
					db, ranges, err := bench.PrepareText(ctx, f, rows, nil, cs, os.Stderr)
					if err != nil {
						return err
					}
					dir := ""
					if profile != "" {
						dir = filepath.Join(profile, string(f)+cs)
						if err := os.MkdirAll(dir, 0o755); err != nil {
							db.Close()
							return err
						}
					}
					version := db.Version()
					results, err := bench.Run(ctx, db, ranges, bench.Options{Runs: runs, Self: bin, Peer: self, Out: os.Stdout, Log: os.Stderr, ProfileDir: dir, Modes: modes})
					db.Close()
					if err != nil {
						return fmt.Errorf("%s: %w", f, err)
					}
					if cs != "" {
						version += fmt.Sprintf(", text in %s (%q)", cs, bench.TextSample(cs))
					}
					fmt.Fprintf(os.Stdout, "\n%s\n\n", version)
					bench.Report(os.Stdout, results)
				}
			}
			return nil
		},
	}
	lib.Flags().StringSliceVar(&flavors, "flavors", []string{"mariadb", "mysql"}, "servers to measure on, in turn (mariadb, mysql)")
	lib.Flags().IntVar(&rows, "rows", 1_000_000, "rows per table")
	lib.Flags().IntVar(&runs, "runs", 1, "runs per reader and range; the fastest is reported")
	lib.Flags().StringVar(&profile, "profile", "", "directory to write a CPU profile of every sluice run into")
	lib.Flags().StringSliceVar(&modes, "modes", nil, "readers to measure (default sluice,go-mysql,raw,sluice-json,debezium,debezium-schemas)")
	lib.Flags().StringVar(&sluice, sluiceFlag, "", sluiceFlagUsage)
	lib.Flags().StringSliceVar(&charsets, "charsets", nil, "measure with the tables' text in each of these character sets in turn (e.g. utf8mb4,gbk,latin2): short_table gains a text column; each changed row carries non-ASCII text to convert (default: the article's tables)")
	return lib
}

// childCmd reads one range with a peer reader (go-mysql or raw) for
// libslave, in a process of its own, and prints its summary line.
func childCmd() *cobra.Command {
	return &cobra.Command{
		Use:    "child MODE URL FROM TO",
		Short:  "One peer reader's run of the libslave benchmark (run by it)",
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
}
