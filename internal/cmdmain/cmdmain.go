// Package cmdmain is what the sluice and sluice-bench commands do around
// their cobra root: the --verbose flag and the slog handler, the profiles
// that SLUICE_CPUPROFILE and SLUICE_MEMPROFILE ask for, interrupts, and
// the exit code (130 after an interrupt, 1 with the error on stderr).
package cmdmain

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

// Run executes root until it returns or an interrupt (SIGINT, SIGTERM)
// ends its context, and exits the process when it fails.
//
// SLUICE_CPUPROFILE=file writes a CPU profile of the whole run, and
// SLUICE_MEMPROFILE=file a heap profile (allocations included) at exit,
// for BENCHMARKS.md.
func Run(root *cobra.Command) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var verbose bool
	root.PersistentFlags().BoolVarP(&verbose, "verbose", "v", false, "log debug messages")
	root.PersistentPreRun = func(*cobra.Command, []string) {
		level := slog.LevelInfo
		if verbose {
			level = slog.LevelDebug
		}
		slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level})))
	}
	if path := os.Getenv("SLUICE_CPUPROFILE"); path != "" {
		if f, err := os.Create(path); err == nil {
			if err := pprof.StartCPUProfile(f); err == nil {
				defer pprof.StopCPUProfile()
			}
		}
	}
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
		stop()
		if errors.Is(err, context.Canceled) {
			os.Exit(130)
		}
		fmt.Fprintf(os.Stderr, "%s: %v\n", root.Name(), err)
		os.Exit(1)
	}
}
