//go:build unix

package throwaway

import (
	"os"
	"os/exec"
	"strings"
	"sync"
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
	return aptInstall(mariadbInstalled, "mariadbd / mariadb-install-db", "mariadb-server", "mariadb-client")
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
