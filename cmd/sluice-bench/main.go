// Command sluice-bench runs the benchmarks that measure sluice beside its
// peers in one run, on throwaway servers it starts itself
// (internal/testenv/throwaway):
//
//	sluice-bench libslave    the libslave article's benchmark: sluice tail, go-mysql, a raw transfer
//	sluice-bench snapshot    sluice's snapshot beside mariadb-dump and mysqldump
//	sluice-bench pipeline    end to end into each sink, and commit-to-sink latency
//	sluice-bench sources     many sources with and without skew alignment
//
// It is apart from cmd/sluice so that the shipped binary links no
// benchmark harness (the throwaway servers and their installer). The readers sluice-bench
// measures in their own processes run the real sluice binary, by default
// the one beside sluice-bench (bin/sluice after make build; --sluice names
// another); the peer readers run in sluice-bench itself (its hidden child
// command). `make bench` builds both and runs it.
package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/sluice-cdc/sluice/internal/cmdmain"
	"github.com/sluice-cdc/sluice/position"
)

func main() {
	root := &cobra.Command{
		Use:           "sluice-bench",
		Short:         "Benchmarks that measure sluice beside its peers in one run",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(libslaveCmd(), childCmd(), snapshotCmd(), pipelineCmd(), sourcesCmd(), kafkaLatencyCmd())
	cmdmain.Run(root)
}

// sluiceFlag is the --sluice flag of the benchmarks that run sluice in a
// process of its own.
const sluiceFlag = "sluice"

// sluiceFlagUsage is its help text.
const sluiceFlagUsage = "the sluice binary to measure (default: sluice beside sluice-bench, bin/sluice after make build)"

// sluiceBinary is the sluice binary to run: path when given, else sluice
// in sluice-bench's own directory. It must exist: the benchmarks measure
// the binary that ships, not one built on the fly.
func sluiceBinary(path string) (string, error) {
	if path == "" {
		self, err := os.Executable()
		if err != nil {
			return "", fmt.Errorf("finding sluice-bench's own path (name the sluice binary with --%s): %w", sluiceFlag, err)
		}
		path = filepath.Join(filepath.Dir(self), "sluice")
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", err
	}
	st, err := os.Stat(abs)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return "", fmt.Errorf("the sluice binary %s does not exist: build it with make build (bin/sluice), or name it with --%s", abs, sluiceFlag)
	case err != nil:
		return "", fmt.Errorf("the sluice binary: %w", err)
	case st.IsDir() || st.Mode().Perm()&0o111 == 0:
		return "", fmt.Errorf("the sluice binary %s is not an executable file: build it with make build (bin/sluice), or name it with --%s", abs, sluiceFlag)
	}
	return abs, nil
}

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
