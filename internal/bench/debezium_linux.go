//go:build linux

package bench

import (
	"context"
	"os"
	"os/exec"
	"strings"

	"github.com/sluice-cdc/sluice/internal/dbzharness"
	"github.com/sluice-cdc/sluice/internal/testenv/throwaway"
	"github.com/sluice-cdc/sluice/position"
)

// debeziumCmd is the command of a Debezium mode (DebeziumModes) reading
// rg: Debezium Embedded 3.6.1 with its MySQL connector, in a JVM of its
// own, starting at rg.From (an offset preset in its offset store), until
// it has delivered rg.Rows records, each value serialised by JsonConverter
// to /dev/null.
func debeziumCmd(ctx context.Context, db *throwaway.Server, rg Range, mode string, serverID uint32) (*exec.Cmd, func(), error) {
	if db.Flavor != position.MySQL {
		return nil, nil, errDebeziumMariaDB
	}
	dir, err := os.MkdirTemp("", "sluice-bench-dbz-")
	if err != nil {
		return nil, nil, err
	}
	props := dbzharness.MySQLProps(db.Host, db.Port, db.User, db.Password, `bench\..*`, serverID)
	for k, v := range dbzharness.StartAt("sluice-bench", "sluice", rg.From.File, rg.From.Offset, rg.From.GTIDs) {
		props[k] = v
	}
	// SLUICE_BENCH_DBZ_PROPS (k=v,k=v) overrides Debezium's options, to
	// measure it tuned as well as in its defaults.
	if extra := os.Getenv("SLUICE_BENCH_DBZ_PROPS"); extra != "" {
		for _, kv := range strings.Split(extra, ",") {
			if k, v, ok := strings.Cut(kv, "="); ok {
				props[strings.TrimSpace(k)] = strings.TrimSpace(v)
			}
		}
	}
	cmd, err := dbzharness.BenchCommand(ctx, dir, props, rg.Rows, mode == "dbz-embedded-schemas", os.DevNull)
	if err != nil {
		os.RemoveAll(dir)
		return nil, nil, err
	}
	return cmd, func() { os.RemoveAll(dir) }, nil
}
