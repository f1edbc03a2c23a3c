//go:build unix

package throwaway

import (
	"os/exec"
	"sync"
)

var (
	kcatOnce sync.Once
	kcatErr  error
)

// EnsureKcat makes sure librdkafka's kcat is on PATH, installing Debian's
// package kcat with apt when it is missing (as EnsureMariaDB does), and
// returns its path.
func EnsureKcat() (string, error) {
	found := func() bool { _, err := exec.LookPath("kcat"); return err == nil }
	kcatOnce.Do(func() { kcatErr = aptInstall(found, "kcat", "kcat") })
	if kcatErr != nil {
		return "", kcatErr
	}
	return exec.LookPath("kcat")
}
