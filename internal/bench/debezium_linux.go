//go:build linux

package bench

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"syscall"

	"github.com/sluice-cdc/sluice/internal/dbzharness"
	"github.com/sluice-cdc/sluice/internal/testenv/throwaway"
	"github.com/sluice-cdc/sluice/position"
)

// debeziumCmd is the command of a Debezium mode (DebeziumModes) reading
// rg: Debezium Embedded 3.6.1 with its MySQL connector (on MariaDB 3.5.0
// with its MariaDB connector, the newest served), in a JVM of its own,
// starting at rg.From (an offset preset in its offset store), until it has
// delivered rg.Rows records, each value serialised by JsonConverter to
// /dev/null.
func debeziumCmd(ctx context.Context, db *throwaway.Server, rg Range, mode string, serverID uint32) (*exec.Cmd, func(), error) {
	dir, err := os.MkdirTemp("", "sluice-bench-dbz-")
	if err != nil {
		return nil, nil, err
	}
	gtids := rg.From.GTIDs
	if gtids == "" && db.Flavor == position.MariaDB {
		// Debezium's MariaDB connector resumes by GTID only (a file and
		// offset alone leave its binlog client without a GTID set): the
		// server's GTID state at the range's start.
		if gtids, err = gtidAt(ctx, db, rg.From); err != nil {
			os.RemoveAll(dir)
			return nil, nil, err
		}
	}
	props := dbzharness.PropsFor(db.Flavor, db.Host, db.Port, db.User, db.Password, `bench\..*`, serverID)
	for k, v := range dbzharness.StartAt("sluice-bench", "sluice", rg.From.File, rg.From.Offset, gtids) {
		props[k] = v
	}
	dbzExtraProps(props)
	cmd, err := dbzharness.BenchCommand(ctx, dbzharness.VersionFor(db.Flavor), dir, props, rg.Rows, mode == "dbz-embedded-schemas", os.DevNull)
	if err != nil {
		os.RemoveAll(dir)
		return nil, nil, err
	}
	return cmd, func() { os.RemoveAll(dir) }, nil
}

// dbzSnapshotCmd is the command of SnapshotDbzEmbedded: Debezium Embedded
// (the version and connector of debeziumCmd) taking its initial snapshot
// of tables (names in database bench) with snapshot.mode=initial_only, in
// its defaults otherwise (one snapshot thread; SLUICE_BENCH_DBZ_PROPS
// overrides), until it has delivered rows records, each value serialised
// by JsonConverter without schemas to output.
func dbzSnapshotCmd(ctx context.Context, db *throwaway.Server, tables []string, rows int64, output string) (*exec.Cmd, func(), error) {
	dir, err := os.MkdirTemp("", "sluice-bench-dbz-")
	if err != nil {
		return nil, nil, err
	}
	include := make([]string, len(tables))
	for i, t := range tables {
		include[i] = `bench\.` + t
	}
	props := dbzharness.PropsFor(db.Flavor, db.Host, db.Port, db.User, db.Password, strings.Join(include, ","), 77102)
	props["name"] = "sluice-bench-snapshot"
	props["snapshot.mode"] = "initial_only"
	dbzExtraProps(props)
	cmd, err := dbzharness.BenchCommand(ctx, dbzharness.VersionFor(db.Flavor), dir, props, rows, false, output)
	if err != nil {
		os.RemoveAll(dir)
		return nil, nil, err
	}
	return cmd, func() { os.RemoveAll(dir) }, nil
}

// dbzExtraProps applies SLUICE_BENCH_DBZ_PROPS (k=v,k=v) to props, to
// measure Debezium tuned as well as in its defaults.
func dbzExtraProps(props map[string]string) {
	if extra := os.Getenv("SLUICE_BENCH_DBZ_PROPS"); extra != "" {
		for _, kv := range strings.Split(extra, ",") {
			if k, v, ok := strings.Cut(kv, "="); ok {
				props[strings.TrimSpace(k)] = strings.TrimSpace(v)
			}
		}
	}
}

// startDebeziumConnect (RunKafkaLatency's Debezium) starts a Kafka Connect worker (standalone, a JVM
// with both compiler tiers and its default collector, 1 GiB of heap)
// running Debezium's connector for db's flavor on bench.lat from the
// current position (snapshot.mode=no_data) into <prefix>.bench.lat, the
// converters JsonConverter without schemas, every other option
// Debezium's and Connect's default; SLUICE_BENCH_DBZ_PROPS overrides the
// connector's.
func startDebeziumConnect(ctx context.Context, db *throwaway.Server, k *throwaway.Kafka, prefix string, serverID uint32) (latencyReader, error) {
	props := dbzharness.ConnectorProps(db.Flavor, prefix, prefix, k.Brokers(), db.Host, db.Port, db.User, db.Password, `bench\.lat`, serverID)
	props["snapshot.mode"] = "no_data"
	dbzExtraProps(props)
	c, err := throwaway.StartConnect(ctx, throwaway.ConnectOptions{
		Brokers: k.Brokers(),
		Plugins: []throwaway.ConnectPlugin{dbzharness.ConnectorPlugin(db.Flavor)},
		Worker: map[string]string{
			"key.converter.schemas.enable":   "false",
			"value.converter.schemas.enable": "false",
		},
		Version: dbzharness.ConnectVersionFor(db.Flavor),
		HeapMB:  1024,
		FullJIT: true,
	}, props)
	if err != nil {
		return latencyReader{}, err
	}
	return latencyReader{pid: c.Pid(), stop: c.Close}, nil
}

// dieWithParent has the kernel kill cmd's process when this one dies.
func dieWithParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
