//go:build !unix

// Package flock takes exclusive advisory file locks (flock(2)), the one
// way sluice's processes exclude each other: checkpoint saves, the file
// sink's epoch check and append, and the test servers' installs shared by
// concurrent test binaries.
package flock

import (
	"context"
	"time"
)

// Lock is a no-op where flock is missing: callers' own checks (the
// checkpoint's version) are the only guard there.
func Lock(string) (unlock func(), err error) { return func() {}, nil }

// File is a no-op lock where flock is missing: the file sink's epoch
// check is then the only guard (its check and append are two steps).
type File struct{ path string }

// Open returns the no-op lock.
func Open(path string) (*File, error) { return &File{path: path}, nil }

// Path is the lock file's path.
func (l *File) Path() string { return l.path }

// Lock returns at once (or ctx's error).
func (l *File) Lock(ctx context.Context, _ func(time.Duration)) error { return ctx.Err() }

// Unlock does nothing.
func (l *File) Unlock() error { return nil }

// Close does nothing.
func (l *File) Close() error { return nil }
