//go:build unix

package throwaway

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/sluice-cdc/sluice/position"
)

// AllFlavors are the servers every integration test runs on.
var AllFlavors = []position.Flavor{position.MariaDB, position.MySQL}

// Flavors returns the servers tests run on: both, unless
// SLUICE_TEST_FLAVORS (a comma-separated list of "mariadb" and "mysql")
// narrows them, for a quicker local run. CI never sets it.
func Flavors() []position.Flavor {
	env := strings.TrimSpace(os.Getenv("SLUICE_TEST_FLAVORS"))
	if env == "" {
		return AllFlavors
	}
	var out []position.Flavor
	for _, f := range strings.Split(env, ",") {
		f = strings.ToLower(strings.TrimSpace(f))
		for _, known := range AllFlavors {
			if string(known) == f {
				out = append(out, known)
			}
		}
	}
	return out
}

// Tool is a command-line program that comes with a server.
type Tool int

// The tools tests use as second opinions and peers.
const (
	ToolClient Tool = iota // mariadb / mysql
	ToolDump               // mariadb-dump / mysqldump
	ToolBinlog             // mariadb-binlog / mysqlbinlog
)

// Command returns the flavor's tool with args (MySQL's through its own
// loader and libraries), not yet started.
func (m *Server) Command(tool Tool, args ...string) (*exec.Cmd, error) {
	return ToolCommand(m.Flavor, tool, args...)
}

// ToolCommand returns flavor's tool with args, not yet started.
func ToolCommand(flavor position.Flavor, tool Tool, args ...string) (*exec.Cmd, error) {
	if flavor == position.MySQL {
		d, err := EnsureMySQL()
		if err != nil {
			return nil, err
		}
		return d.Command([...]string{"mysql", "mysqldump", "mysqlbinlog"}[tool], args...), nil
	}
	if err := EnsureMariaDB(); err != nil {
		return nil, err
	}
	names := [...][]string{
		{"mariadb", "/usr/bin/mariadb", "mysql"},
		{"mariadb-dump", "/usr/bin/mariadb-dump", "mysqldump"},
		{"mariadb-binlog", "/usr/bin/mariadb-binlog", "mysqlbinlog"},
	}[tool]
	path, ok := findBinary(names)
	if !ok {
		return nil, fmt.Errorf("testenv: none of %s found (install mariadb-client)", strings.Join(names, ", "))
	}
	return exec.Command(path, args...), nil
}

// Version is the server's SELECT VERSION(), or its flavor's name when the
// server cannot be asked (stopped).
func (m *Server) Version() string {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if r, err := m.Query(ctx, "SELECT VERSION()"); err == nil {
		if v, err := r.GetString(0, 0); err == nil {
			return FlavorName(m.Flavor) + " " + v
		}
	}
	return FlavorName(m.Flavor)
}
