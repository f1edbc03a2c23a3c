//go:build unix

// Package flock takes exclusive advisory file locks (flock(2)), the one
// way sluice's processes exclude each other: checkpoint saves, and the
// test servers' installs shared by concurrent test binaries.
package flock

import (
	"fmt"
	"os"
	"syscall"
)

// Lock takes an exclusive lock on path, creating the file, waiting for
// other holders, and returns the function that releases it. flock locks
// belong to the open file, so two holders in one process exclude each
// other as two processes do.
func Lock(path string) (unlock func(), err error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("opening lock file %s: %w", path, err)
	}
	for {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX)
		if err != syscall.EINTR {
			break
		}
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("locking %s: %w", path, err)
	}
	return func() {
		syscall.Flock(int(f.Fd()), syscall.LOCK_UN) //nolint:errcheck
		f.Close()
	}, nil
}
