// Command sluice reads MySQL and MariaDB binary logs as a replica and
// delivers every committed row change, in order, with exact types.
//
//	sluice tail --source mysql://USER:PASS@HOST:PORT --tables 'db.*'
//	sluice read mysql-bin.000001 mysql-bin.000002
//
// The benchmarks are a command of their own, cmd/sluice-bench (make bench).
package main

import (
	"github.com/spf13/cobra"

	"github.com/sluice-cdc/sluice/internal/cmdmain"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() {
	root := &cobra.Command{
		Use:           "sluice",
		Short:         "Change data capture from MySQL and MariaDB binary logs",
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       version,
	}
	root.AddCommand(runCmd(), statusCmd(), tailCmd(), readCmd(), snapshotCmd(), schemaCmd())
	cmdmain.Run(root)
}
