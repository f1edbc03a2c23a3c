package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
)

// startRun writes cfg to dir/sluice.yaml and starts `sluice run` on it,
// killed with the test process. It returns the run's log (its stderr)
// and stop, which ends the run (SIGTERM) and returns how it exited; the
// test's end calls it too.
func startRun(t *testing.T, bin, dir, cfg string) (log *syncBuffer, stop func() error) {
	t.Helper()
	path := filepath.Join(dir, "sluice.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	log = &syncBuffer{}
	cmd := exec.Command(bin, "run", "--config", path)
	cmd.Stderr = log
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	var err error
	stop = func() error {
		once.Do(func() {
			_ = cmd.Process.Signal(syscall.SIGTERM)
			err = cmd.Wait()
		})
		return err
	}
	t.Cleanup(func() { _ = stop() })
	return log, stop
}
