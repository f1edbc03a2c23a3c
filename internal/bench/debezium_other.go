//go:build !linux

package bench

import (
	"context"
	"errors"
	"os/exec"

	"github.com/sluice-cdc/sluice/internal/testenv/throwaway"
)

var errDebeziumLinux = errors.New("bench: the Debezium peer runs on Linux only")

func debeziumCmd(ctx context.Context, db *throwaway.Server, rg Range, mode string, serverID uint32) (*exec.Cmd, func(), error) {
	return nil, nil, errDebeziumLinux
}

func dbzSnapshotCmd(ctx context.Context, db *throwaway.Server, tables []string, rows int64, output string) (*exec.Cmd, func(), error) {
	return nil, nil, errDebeziumLinux
}

func startDebeziumConnect(ctx context.Context, db *throwaway.Server, k *throwaway.Kafka, prefix string, serverID uint32) (latencyReader, error) {
	return latencyReader{}, errDebeziumLinux
}

func dieWithParent(cmd *exec.Cmd) {}
