package binlog

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/sluice-cdc/sluice/position"
)

// ServerVersion is a server's product and release, parsed once from the
// version string it reports. Statements and privileges that differ between
// releases are chosen by its methods, never by trying one statement after
// another.
type ServerVersion struct {
	Flavor              position.Flavor
	Major, Minor, Patch int
	// Aurora is set for Amazon Aurora MySQL's engine version strings
	// ("8.0.mysql_aurora.3.05.2"); Patch is then the lowest MySQL patch
	// release the Aurora major version is built on.
	Aurora bool
	// Text is the version string as the server reported it.
	Text string
}

// ParseServerVersion parses the version a server reports in its handshake
// or in @@version: "8.0.36", "8.4.3-log", "9.7.4-2", "8.0.36-28" (Percona),
// "5.5.5-10.11.6-MariaDB-0+deb12u1-log" (MariaDB's replication-compatible
// handshake), "11.4.2-MariaDB", "8.0.mysql_aurora.3.05.2" (Aurora).
func ParseServerVersion(s string) (ServerVersion, error) {
	v := ServerVersion{Text: s, Flavor: position.MySQL}
	t := strings.TrimSpace(s)
	lower := strings.ToLower(t)
	switch {
	case strings.Contains(lower, "mariadb"):
		v.Flavor = position.MariaDB
		// MariaDB before 11.x prefixes "5.5.5-" for old replication clients.
		t = strings.TrimPrefix(t, "5.5.5-")
	case strings.Contains(lower, "tidb"):
		return v, fmt.Errorf("%w: the server is TiDB (%s), which has no MySQL binary log to replicate from; use TiCDC", ErrServerConfig, s)
	}
	if i := strings.Index(lower, ".mysql_aurora."); i > 0 {
		// Aurora's engine version: MySQL major.minor, then Aurora's own.
		// Aurora MySQL 3 is built on 8.0.23 or later, Aurora 2 on 5.7.12.
		v.Aurora = true
		t = t[:i]
	}
	end := 0
	for end < len(t) && (t[end] >= '0' && t[end] <= '9' || t[end] == '.') {
		end++
	}
	parts := strings.Split(strings.Trim(t[:end], "."), ".")
	if len(parts) < 2 || len(parts) > 3 {
		return v, fmt.Errorf("binlog: server version %q is not one of MySQL or MariaDB (want e.g. 8.0.36 or 10.11.6-MariaDB)", s)
	}
	nums := [3]int{}
	for i, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil {
			return v, fmt.Errorf("binlog: server version %q is not one of MySQL or MariaDB (want e.g. 8.0.36 or 10.11.6-MariaDB)", s)
		}
		nums[i] = n
	}
	v.Major, v.Minor, v.Patch = nums[0], nums[1], nums[2]
	if v.Aurora {
		switch {
		case v.Major == 8:
			v.Patch = 23
		case v.Major == 5 && v.Minor == 7:
			v.Patch = 12
		}
	}
	return v, nil
}

// String names the server: "MySQL 8.0.36", "MariaDB 10.11.6".
func (v ServerVersion) String() string {
	name := "MySQL"
	if v.Flavor == position.MariaDB {
		name = "MariaDB"
	} else if v.Aurora {
		name = "Aurora MySQL"
	}
	return fmt.Sprintf("%s %d.%d.%d", name, v.Major, v.Minor, v.Patch)
}

// AtLeast reports whether the release is major.minor.patch or later.
func (v ServerVersion) AtLeast(major, minor, patch int) bool {
	if v.Major != major {
		return v.Major > major
	}
	if v.Minor != minor {
		return v.Minor > minor
	}
	return v.Patch >= patch
}

func (v ServerVersion) mysql() bool { return v.Flavor != position.MariaDB }

// BinlogStatusStatement is the statement that shows the current binlog
// file and position: SHOW BINARY LOG STATUS on MySQL 8.2 and later (SHOW
// MASTER STATUS was deprecated in 8.2 and removed in 8.4), SHOW MASTER
// STATUS on older MySQL and on MariaDB.
func (v ServerVersion) BinlogStatusStatement() string {
	if v.mysql() && v.AtLeast(8, 2, 0) {
		return "SHOW BINARY LOG STATUS"
	}
	return "SHOW MASTER STATUS"
}

// ReplicasStatement lists the replicas registered with the server: SHOW
// REPLICAS on MySQL 8.0.22 and later (SHOW SLAVE HOSTS is removed in 8.4),
// SHOW REPLICA HOSTS on MariaDB 10.5.1 and later, SHOW SLAVE HOSTS before.
func (v ServerVersion) ReplicasStatement() string {
	switch {
	case v.mysql() && v.AtLeast(8, 0, 22):
		return "SHOW REPLICAS"
	case !v.mysql() && v.AtLeast(10, 5, 1):
		return "SHOW REPLICA HOSTS"
	}
	return "SHOW SLAVE HOSTS"
}

// replicasPrivilege is what ReplicasStatement needs.
func (v ServerVersion) replicasPrivilege() string {
	if !v.mysql() && v.AtLeast(10, 5, 2) {
		return "REPLICATION MASTER ADMIN"
	}
	return "REPLICATION SLAVE"
}

// monitorPrivilege reads binlog positions and lists binlog files:
// REPLICATION CLIENT, which MariaDB 10.5.2 renamed BINLOG MONITOR.
func (v ServerVersion) monitorPrivilege() string {
	if !v.mysql() && v.AtLeast(10, 5, 2) {
		return "BINLOG MONITOR"
	}
	return "REPLICATION CLIENT"
}

// replicationGrant is the statement that gives user what the reader needs.
func (v ServerVersion) replicationGrant(user string) string {
	return fmt.Sprintf("GRANT REPLICATION SLAVE, %s, SELECT ON *.* TO %s", v.monitorPrivilege(), user)
}

// setGlobal is the statement that changes a server setting for good: SET
// PERSIST on MySQL 8.0 and later (it survives a restart), SET GLOBAL
// (plus the configuration file) elsewhere.
func (v ServerVersion) setGlobal(name, value string) string {
	if v.mysql() && v.AtLeast(8, 0, 0) {
		return fmt.Sprintf("SET PERSIST %s = '%s'", name, value)
	}
	return fmt.Sprintf("SET GLOBAL %s = '%s'; and set %s=%s in the server's configuration file", name, value, name, value)
}

// binlogFormatDeprecated reports MySQL 8.0.34 and later, where
// binlog_format is deprecated and ROW, its default, is meant to be the
// only format left.
func (v ServerVersion) binlogFormatDeprecated() bool {
	return v.mysql() && v.AtLeast(8, 0, 34)
}

// hasLogStatus reports MySQL 8.0.17 and later, whose
// performance_schema.log_status gives the binlog position and
// gtid_executed in one consistent read (with BACKUP_ADMIN).
func (v ServerVersion) hasLogStatus() bool { return v.mysql() && v.AtLeast(8, 0, 17) }

// nativePasswordAdvice explains an account that authenticates with
// mysql_native_password on a release that no longer loads it: MySQL 8.4
// disables the plugin by default, 9.0 removed it.
func (v ServerVersion) nativePasswordAdvice(user string) string {
	fix := "ALTER USER '" + strings.ReplaceAll(user, "'", "''") + "'@'<host>' IDENTIFIED WITH caching_sha2_password BY '<password>'"
	switch {
	case !v.mysql():
		return ""
	case v.AtLeast(9, 0, 0):
		return fmt.Sprintf("the account uses mysql_native_password, which %s no longer has (removed in MySQL 9.0): %s", v, fix)
	case v.AtLeast(8, 4, 0):
		return fmt.Sprintf("the account uses mysql_native_password, which %s disables by default: %s (or start the server with --mysql-native-password=ON)", v, fix)
	}
	return fmt.Sprintf("the account's authentication plugin mysql_native_password is not loaded on %s: %s", v, fix)
}

// probeServerVersion reads the version string from the server's initial
// handshake packet, which the server sends before authentication: it
// names the release even when logging in fails.
func probeServerVersion(ctx context.Context, addr string) (ServerVersion, error) {
	var d net.Dialer
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return ServerVersion{}, err
	}
	defer c.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = c.SetDeadline(dl)
	}
	text, err := readHandshakeVersion(c)
	if err != nil {
		return ServerVersion{}, err
	}
	return ParseServerVersion(text)
}

// readHandshakeVersion reads a MySQL protocol packet (3-byte length,
// sequence number) holding the initial handshake: protocol version 10
// and the NUL-terminated server version.
func readHandshakeVersion(r io.Reader) (string, error) {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return "", err
	}
	n := int(binary.LittleEndian.Uint32(append(hdr[:3:3], 0)))
	if n < 2 || n > 1<<16 {
		return "", fmt.Errorf("handshake packet of %d bytes", n)
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(r, body); err != nil {
		return "", err
	}
	if body[0] != 10 {
		return "", fmt.Errorf("handshake protocol %d, not 10", body[0])
	}
	end := strings.IndexByte(string(body[1:]), 0)
	if end < 0 {
		return "", fmt.Errorf("handshake without a version string")
	}
	return string(body[1 : 1+end]), nil
}
