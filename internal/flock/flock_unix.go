//go:build unix

// Package flock takes exclusive advisory file locks (flock(2)), the one
// way sluice's processes exclude each other: checkpoint saves, the file
// sink's epoch check and append, and the test servers' installs shared by
// concurrent test binaries.
package flock

import (
	"context"
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"

	"github.com/sluice-cdc/sluice/internal/backoff"
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

// File is a lock file kept open, to be locked and unlocked many times (a
// sink locks it around every write). Like Lock's, its lock belongs to the
// open file: two Files on one path exclude each other, in one process or
// in two. The kernel releases it when the process dies.
type File struct {
	f    *os.File
	path string
}

// Open opens (creating) the lock file at path, unlocked.
func Open(path string) (*File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("opening lock file %s: %w", path, err)
	}
	return &File{f: f, path: path}, nil
}

// Path is the lock file's path.
func (l *File) Path() string { return l.path }

// Lock takes the exclusive lock, waiting while another holder has it,
// until ctx ends. waiting, when not nil, is called about once a second
// while it waits, with the time waited so far (for a log line naming what
// the caller waits for).
func (l *File) Lock(ctx context.Context, waiting func(time.Duration)) error {
	start := time.Now()
	bo := backoff.New(time.Millisecond, 20*time.Millisecond)
	next := time.Second
	for {
		err := syscall.Flock(int(l.f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		switch {
		case err == nil:
			return nil
		case errors.Is(err, syscall.EINTR):
			continue
		case !errors.Is(err, syscall.EWOULDBLOCK):
			return fmt.Errorf("locking %s: %w", l.path, err)
		}
		if waited := time.Since(start); waiting != nil && waited >= next {
			waiting(waited)
			next = waited + time.Second
		}
		if err := backoff.Sleep(ctx, bo.Next()); err != nil {
			return fmt.Errorf("waiting for the lock on %s: %w", l.path, err)
		}
	}
}

// Unlock releases the lock.
func (l *File) Unlock() error {
	if err := syscall.Flock(int(l.f.Fd()), syscall.LOCK_UN); err != nil {
		return fmt.Errorf("unlocking %s: %w", l.path, err)
	}
	return nil
}

// Close closes the file, releasing the lock if it is held.
func (l *File) Close() error { return l.f.Close() }
