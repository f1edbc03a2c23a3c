//go:build !linux

package bench

import (
	"context"
	"errors"
	"os/exec"

	"github.com/sluice-cdc/sluice/internal/testenv/throwaway"
)

func debeziumCmd(ctx context.Context, db *throwaway.Server, rg Range, mode string, serverID uint32) (*exec.Cmd, func(), error) {
	return nil, nil, errors.New("bench: the Debezium peer runs on Linux only")
}
