//go:build unix

package testenv

import "github.com/sluice-cdc/sluice/internal/testenv/throwaway"

// sweepStaleDirs is throwaway's, for TestCrashedTestBinaryLeavesNothing.
var sweepStaleDirs = throwaway.SweepStaleDirs
