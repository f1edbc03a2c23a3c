//go:build unix

package testenv

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
)

var (
	ensureOnce sync.Once
	ensureErr  error
)

// mariadbdCandidates and installDBCandidates list where the server binary and
// the data-directory bootstrap script live on Debian and similar systems.
// /usr/sbin is frequently not on PATH for non-root users, so absolute paths
// are tried as well.
var (
	mariadbdCandidates  = []string{"mariadbd", "/usr/sbin/mariadbd", "/usr/libexec/mariadbd", "/usr/local/mysql/bin/mariadbd"}
	installDBCandidates = []string{"mariadb-install-db", "/usr/bin/mariadb-install-db", "/usr/local/mysql/scripts/mariadb-install-db", "mysql_install_db"}
)

// findBinary returns the first candidate that resolves to an executable.
func findBinary(candidates []string) (string, bool) {
	for _, c := range candidates {
		if strings.ContainsRune(c, '/') {
			if fi, err := os.Stat(c); err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
				return c, true
			}
			continue
		}
		if p, err := exec.LookPath(c); err == nil {
			return p, true
		}
	}
	return "", false
}

func mariadbInstalled() bool {
	_, ok1 := findBinary(mariadbdCandidates)
	_, ok2 := findBinary(installDBCandidates)
	return ok1 && ok2
}

// EnsureMariaDB makes sure mariadbd and mariadb-install-db are available,
// installing the Debian packages mariadb-server and mariadb-client with apt
// when they are missing. It is safe to call from many goroutines and from
// many test binaries at once: the work is done once per process and
// serialised across processes with a file lock, so concurrent `go test`
// package binaries do not fight over the dpkg lock.
//
// While apt runs, a temporary /usr/sbin/policy-rc.d (exit 101) is installed
// if none exists, so the package's system service is not started: tests only
// use private throwaway servers and a system mariadbd on :3306 would be left
// running.
func EnsureMariaDB() error {
	ensureOnce.Do(func() { ensureErr = ensureMariaDB() })
	return ensureErr
}

func ensureMariaDB() error {
	if mariadbInstalled() {
		return nil
	}

	lockPath := filepath.Join(os.TempDir(), "sluice-testenv-apt.lock")
	lf, err := os.OpenFile(lockPath, os.O_CREATE|os.O_RDWR, 0o666)
	if err != nil {
		return fmt.Errorf("testenv: open apt lock %s: %w", lockPath, err)
	}
	defer lf.Close()
	for {
		err = syscall.Flock(int(lf.Fd()), syscall.LOCK_EX)
		if err != syscall.EINTR {
			break
		}
	}
	if err != nil {
		return fmt.Errorf("testenv: lock %s: %w", lockPath, err)
	}
	defer syscall.Flock(int(lf.Fd()), syscall.LOCK_UN) //nolint:errcheck

	// Another process may have installed it while we waited for the lock.
	if mariadbInstalled() {
		return nil
	}

	if os.Geteuid() != 0 {
		return errors.New("testenv: mariadbd / mariadb-install-db not found and not running as root; " +
			"install them with: apt-get install -y mariadb-server mariadb-client (or run `make deps` as root)")
	}
	aptGet, err := exec.LookPath("apt-get")
	if err != nil {
		return errors.New("testenv: mariadbd not found and apt-get is not available; install MariaDB (mariadb-server, mariadb-client) manually")
	}

	const policyRCD = "/usr/sbin/policy-rc.d"
	if _, err := os.Stat(policyRCD); errors.Is(err, os.ErrNotExist) {
		if werr := os.WriteFile(policyRCD, []byte("#!/bin/sh\n# temporary, written by sluice internal/testenv\nexit 101\n"), 0o755); werr == nil {
			defer os.Remove(policyRCD)
		}
	}

	env := append(os.Environ(), "DEBIAN_FRONTEND=noninteractive", "NEEDRESTART_MODE=a")
	run := func(args ...string) error {
		cmd := exec.Command(aptGet, args...)
		cmd.Env = env
		cmd.Stdin = nil
		var out bytes.Buffer
		cmd.Stdout = &out
		cmd.Stderr = &out
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("testenv: apt-get %s failed: %w\n%s", strings.Join(args, " "), err, tail(out.String(), 40))
		}
		return nil
	}
	if err := run("update"); err != nil {
		return err
	}
	if err := run("install", "-y", "-o", "Dpkg::Options::=--force-confdef", "-o", "Dpkg::Options::=--force-confold",
		"mariadb-server", "mariadb-client"); err != nil {
		return err
	}
	if !mariadbInstalled() {
		return errors.New("testenv: apt-get install mariadb-server mariadb-client succeeded but mariadbd / mariadb-install-db are still not found")
	}
	return nil
}

// tail returns the last n lines of s.
func tail(s string, n int) string {
	s = strings.TrimRight(s, "\n")
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
