// Command sluice reads MySQL and MariaDB binary logs as a replica and
// delivers every committed row change, in order, with exact types.
//
//	sluice tail --source mysql://USER:PASS@HOST:PORT --tables 'db.*'
//	sluice read mysql-bin.000001 mysql-bin.000002
//
// The benchmarks are a command of their own, cmd/sluice-bench (make bench).
package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"syscall"

	"github.com/spf13/cobra"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	root := &cobra.Command{
		Use:           "sluice",
		Short:         "Change data capture from MySQL and MariaDB binary logs",
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       version,
	}
	var verbose bool
	root.PersistentFlags().BoolVarP(&verbose, "verbose", "v", false, "log debug messages")
	root.PersistentPreRun = func(*cobra.Command, []string) {
		level := slog.LevelInfo
		if verbose {
			level = slog.LevelDebug
		}
		slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level})))
	}
	root.AddCommand(runCmd(), statusCmd(), tailCmd(), readCmd(), snapshotCmd(), schemaCmd())
	// SLUICE_CPUPROFILE=file writes a CPU profile of the whole run (for BENCHMARKS.md).
	if path := os.Getenv("SLUICE_CPUPROFILE"); path != "" {
		if f, err := os.Create(path); err == nil {
			if err := pprof.StartCPUProfile(f); err == nil {
				defer pprof.StopCPUProfile()
			}
		}
	}
	// SLUICE_MEMPROFILE=file writes a heap profile (allocations included) at exit.
	if path := os.Getenv("SLUICE_MEMPROFILE"); path != "" {
		runtime.MemProfileRate = 64 << 10
		defer func() {
			if f, err := os.Create(path); err == nil {
				_ = pprof.Lookup("allocs").WriteTo(f, 0)
				f.Close()
			}
		}()
	}
	if err := root.ExecuteContext(ctx); err != nil {
		pprof.StopCPUProfile()
		if errors.Is(err, context.Canceled) {
			os.Exit(130)
		}
		fmt.Fprintln(os.Stderr, "sluice:", err)
		os.Exit(1)
	}
}
