//go:build !unix

// Package flock takes exclusive advisory file locks (flock(2)), the one
// way sluice's processes exclude each other: checkpoint saves, and the
// test servers' installs shared by concurrent test binaries.
package flock

// Lock is a no-op where flock is missing: callers' own checks (the
// checkpoint's version) are the only guard there.
func Lock(string) (unlock func(), err error) { return func() {}, nil }
