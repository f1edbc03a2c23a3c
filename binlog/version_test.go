package binlog

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/sluice-cdc/sluice/position"
)

// The releases sluice meets, as their servers report them (handshake or
// @@version), and the statements and privileges each one needs. Only
// MariaDB 10.11 and MySQL 9.7 run in the tests; the others are here.
func TestServerVersions(t *testing.T) {
	type want struct {
		name, status, replicas, monitor, replicasPriv string
		persist, formatDeprecated, logStatus          bool
		native                                        string // part of the mysql_native_password advice
	}
	mysql80 := func(name string, replicas string, deprecated bool) want {
		return want{name, "SHOW MASTER STATUS", replicas, "REPLICATION CLIENT", "REPLICATION SLAVE", true, deprecated, true, "is not loaded"}
	}
	cases := []struct {
		in string
		want
	}{
		{"8.0.36", mysql80("MySQL 8.0.36", "SHOW REPLICAS", true)},
		{"8.0.33-log", mysql80("MySQL 8.0.33", "SHOW REPLICAS", false)},
		{"8.0.21", mysql80("MySQL 8.0.21", "SHOW SLAVE HOSTS", false)},
		{"8.0.22", mysql80("MySQL 8.0.22", "SHOW REPLICAS", false)},
		{"8.0.36-28", mysql80("MySQL 8.0.36", "SHOW REPLICAS", true)},                       // Percona Server
		{"8.0.35-0ubuntu0.22.04.1", mysql80("MySQL 8.0.35", "SHOW REPLICAS", true)},         // Ubuntu
		{"8.0.21-azure", mysql80("MySQL 8.0.21", "SHOW SLAVE HOSTS", false)},                // Azure Database for MySQL
		{"8.0.mysql_aurora.3.05.2", mysql80("Aurora MySQL 8.0.23", "SHOW REPLICAS", false)}, // Aurora's engine version
		{"8.0.32", mysql80("MySQL 8.0.32", "SHOW REPLICAS", false)},                         // Aurora 3.05's @@version, RDS MySQL
		{"8.1.0", want{"MySQL 8.1.0", "SHOW MASTER STATUS", "SHOW REPLICAS", "REPLICATION CLIENT", "REPLICATION SLAVE", true, true, true, "is not loaded"}},
		{"8.2.0", want{"MySQL 8.2.0", "SHOW BINARY LOG STATUS", "SHOW REPLICAS", "REPLICATION CLIENT", "REPLICATION SLAVE", true, true, true, "is not loaded"}},
		{"8.4.3", want{"MySQL 8.4.3", "SHOW BINARY LOG STATUS", "SHOW REPLICAS", "REPLICATION CLIENT", "REPLICATION SLAVE", true, true, true, "disables by default"}},
		{"8.4.6-log", want{"MySQL 8.4.6", "SHOW BINARY LOG STATUS", "SHOW REPLICAS", "REPLICATION CLIENT", "REPLICATION SLAVE", true, true, true, "--mysql-native-password=ON"}},
		{"9.7.4-2", want{"MySQL 9.7.4", "SHOW BINARY LOG STATUS", "SHOW REPLICAS", "REPLICATION CLIENT", "REPLICATION SLAVE", true, true, true, "removed in MySQL 9.0"}},
		{"9.1.0", want{"MySQL 9.1.0", "SHOW BINARY LOG STATUS", "SHOW REPLICAS", "REPLICATION CLIENT", "REPLICATION SLAVE", true, true, true, "removed in MySQL 9.0"}},
		{"5.7.44-log", want{"MySQL 5.7.44", "SHOW MASTER STATUS", "SHOW SLAVE HOSTS", "REPLICATION CLIENT", "REPLICATION SLAVE", false, false, false, "is not loaded"}},
		{"5.7.mysql_aurora.2.11.2", want{"Aurora MySQL 5.7.12", "SHOW MASTER STATUS", "SHOW SLAVE HOSTS", "REPLICATION CLIENT", "REPLICATION SLAVE", false, false, false, "is not loaded"}},
		{"5.5.5-10.11.19-MariaDB-0+deb12u1-log", want{"MariaDB 10.11.19", "SHOW MASTER STATUS", "SHOW REPLICA HOSTS", "BINLOG MONITOR", "REPLICATION MASTER ADMIN", false, false, false, ""}},
		{"10.11.6-MariaDB-1:10.11.6+maria~ubu2204-log", want{"MariaDB 10.11.6", "SHOW MASTER STATUS", "SHOW REPLICA HOSTS", "BINLOG MONITOR", "REPLICATION MASTER ADMIN", false, false, false, ""}},
		{"10.11.10-MariaDB-log", want{"MariaDB 10.11.10", "SHOW MASTER STATUS", "SHOW REPLICA HOSTS", "BINLOG MONITOR", "REPLICATION MASTER ADMIN", false, false, false, ""}}, // RDS for MariaDB
		{"10.4.32-MariaDB", want{"MariaDB 10.4.32", "SHOW MASTER STATUS", "SHOW SLAVE HOSTS", "REPLICATION CLIENT", "REPLICATION SLAVE", false, false, false, ""}},
		{"10.5.1-MariaDB", want{"MariaDB 10.5.1", "SHOW MASTER STATUS", "SHOW REPLICA HOSTS", "REPLICATION CLIENT", "REPLICATION SLAVE", false, false, false, ""}},
		{"11.4.2-MariaDB-ubu2404", want{"MariaDB 11.4.2", "SHOW MASTER STATUS", "SHOW REPLICA HOSTS", "BINLOG MONITOR", "REPLICATION MASTER ADMIN", false, false, false, ""}},
		{"11.8.2-MariaDB-log", want{"MariaDB 11.8.2", "SHOW MASTER STATUS", "SHOW REPLICA HOSTS", "BINLOG MONITOR", "REPLICATION MASTER ADMIN", false, false, false, ""}},
	}
	for _, c := range cases {
		v, err := ParseServerVersion(c.in)
		if err != nil {
			t.Errorf("%q: %v", c.in, err)
			continue
		}
		if got := v.String(); got != c.name {
			t.Errorf("%q: %s, want %s", c.in, got, c.name)
		}
		if got := v.BinlogStatusStatement(); got != c.status {
			t.Errorf("%s: status statement %q, want %q", c.name, got, c.status)
		}
		if got := v.ReplicasStatement(); got != c.replicas {
			t.Errorf("%s: replicas statement %q, want %q", c.name, got, c.replicas)
		}
		if got := v.monitorPrivilege(); got != c.monitor {
			t.Errorf("%s: monitor privilege %q, want %q", c.name, got, c.monitor)
		}
		if got := v.replicasPrivilege(); got != c.replicasPriv {
			t.Errorf("%s: replicas privilege %q, want %q", c.name, got, c.replicasPriv)
		}
		if got := strings.HasPrefix(v.setGlobal("binlog_format", "ROW"), "SET PERSIST binlog_format = 'ROW'"); got != c.persist {
			t.Errorf("%s: %q", c.name, v.setGlobal("binlog_format", "ROW"))
		}
		if got := v.binlogFormatDeprecated(); got != c.formatDeprecated {
			t.Errorf("%s: binlog_format deprecated %v, want %v", c.name, got, c.formatDeprecated)
		}
		if got := v.hasLogStatus(); got != c.logStatus {
			t.Errorf("%s: log_status %v, want %v", c.name, got, c.logStatus)
		}
		if advice := v.nativePasswordAdvice("repl"); c.native == "" && advice != "" || !strings.Contains(advice, c.native) {
			t.Errorf("%s: mysql_native_password advice %q, want it to say %q", c.name, advice, c.native)
		}
		if grant := v.replicationGrant("'u'@'%'"); !strings.Contains(grant, "REPLICATION SLAVE, "+c.monitor+", SELECT ON *.* TO 'u'@'%'") {
			t.Errorf("%s: %s", c.name, grant)
		}
		wantFlavor := position.MySQL
		if strings.Contains(c.in, "MariaDB") {
			wantFlavor = position.MariaDB
		}
		if v.Flavor != wantFlavor || v.Text != c.in {
			t.Errorf("%q: flavor %s text %q", c.in, v.Flavor, v.Text)
		}
	}
	for _, bad := range []string{"", "abc", "8", "8.x.1", "1.2.3.4"} {
		if _, err := ParseServerVersion(bad); err == nil || !strings.Contains(err.Error(), "not one of MySQL or MariaDB") {
			t.Errorf("%q: %v", bad, err)
		}
	}
	if _, err := ParseServerVersion("8.0.11-TiDB-v7.5.0"); !errors.Is(err, ErrServerConfig) || !strings.Contains(err.Error(), "TiCDC") {
		t.Errorf("TiDB: %v", err)
	}
}

func TestAtLeast(t *testing.T) {
	v := ServerVersion{Major: 8, Minor: 0, Patch: 22}
	for _, c := range []struct {
		a, b, c int
		want    bool
	}{{8, 0, 22, true}, {8, 0, 23, false}, {8, 0, 21, true}, {7, 9, 99, true}, {8, 1, 0, false}, {9, 0, 0, false}} {
		if got := v.AtLeast(c.a, c.b, c.c); got != c.want {
			t.Errorf("8.0.22 AtLeast(%d.%d.%d) = %v", c.a, c.b, c.c, got)
		}
	}
}

func handshake(version string) []byte {
	body := append([]byte{10}, version...)
	body = append(body, 0, 1, 2, 3, 4)
	n := len(body)
	return append([]byte{byte(n), byte(n >> 8), byte(n >> 16), 0}, body...)
}

func TestReadHandshakeVersion(t *testing.T) {
	for _, v := range []string{"9.7.4-2", "5.5.5-10.11.19-MariaDB-0+deb12u1-log"} {
		got, err := readHandshakeVersion(bytes.NewReader(handshake(v)))
		if err != nil || got != v {
			t.Errorf("%q: %q, %v", v, got, err)
		}
	}
	for _, bad := range [][]byte{nil, {1, 0, 0, 0, 10}, {5, 0, 0, 0, 9, 'x', 0, 0, 0}, {3, 0, 0, 0, 10, 'a', 'b'}, {0xff, 0xff, 0xff, 0}} {
		if _, err := readHandshakeVersion(bytes.NewReader(bad)); err == nil {
			t.Errorf("%x: want an error", bad)
		}
	}
}

// FuzzParseServerVersion: any version string a server sends gives a
// version or an error in words, never a panic.
func FuzzParseServerVersion(f *testing.F) {
	for _, s := range []string{"8.0.36", "9.7.4-2", "5.5.5-10.11.19-MariaDB-0+deb12u1-log", "8.0.mysql_aurora.3.05.2", "11.4.2-MariaDB", "8.0.11-TiDB-v7.5.0", "", "..", "5.5.5-"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := ParseServerVersion(s)
		if err != nil {
			if !strings.Contains(err.Error(), "binlog:") {
				t.Fatalf("%q: error not in words: %v", s, err)
			}
			return
		}
		_ = v.String() + v.BinlogStatusStatement() + v.ReplicasStatement() + v.nativePasswordAdvice("u")
	})
}

// FuzzReadHandshakeVersion: the handshake packet is bytes from outside.
func FuzzReadHandshakeVersion(f *testing.F) {
	f.Add(handshake("9.7.4-2"))
	f.Add(handshake("5.5.5-10.11.19-MariaDB"))
	f.Add([]byte{0xff, 0xff, 0, 0, 10})
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := readHandshakeVersion(bytes.NewReader(b))
		if err == nil && strings.IndexByte(s, 0) >= 0 {
			t.Fatalf("version with a NUL: %q", s)
		}
	})
}
