package main

import (
	"fmt"
	"log/slog"

	"github.com/sluice-cdc/sluice/config"
	"github.com/sluice-cdc/sluice/coord"
)

// newCoordinator connects to etcd as the config's coordinator block says.
func newCoordinator(path string, cfg *config.Config) (*coord.Etcd, error) {
	var c coord.Config
	if err := config.DecodeSink(path, &cfg.Coordinator.Etcd, "coordinator.etcd", &c); err != nil {
		return nil, err
	}
	co, err := coord.New(c, cfg.Pipeline, slog.Default())
	if err != nil {
		return nil, fmt.Errorf("%s: coordinator.etcd: %w", path, err)
	}
	return co, nil
}
