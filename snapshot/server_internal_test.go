package snapshot

import (
	"testing"

	"github.com/sluice-cdc/sluice/position"
)

// MySQL 8.0 has only SHOW MASTER STATUS; 8.2 added SHOW BINARY LOG STATUS
// and 8.4 LTS removed the old name, as 9.x has. MariaDB keeps SHOW MASTER
// STATUS. Only 9.7 runs in the tests: the others are checked here.
func TestStatusStatement(t *testing.T) {
	for _, tc := range []struct {
		version string
		flavor  position.Flavor
		want    serverVersion
		stmt    string
	}{
		{"8.0.36", position.MySQL, serverVersion{8, 0, 36}, "SHOW MASTER STATUS"},
		{"8.0.40-log", position.MySQL, serverVersion{8, 0, 40}, "SHOW MASTER STATUS"},
		{"8.1.0", position.MySQL, serverVersion{8, 1, 0}, "SHOW MASTER STATUS"},
		{"8.2.0", position.MySQL, serverVersion{8, 2, 0}, "SHOW BINARY LOG STATUS"},
		{"8.4.3-commercial", position.MySQL, serverVersion{8, 4, 3}, "SHOW BINARY LOG STATUS"},
		{"9.7.4-2", position.MySQL, serverVersion{9, 7, 4}, "SHOW BINARY LOG STATUS"},
		{"5.7.44-log", position.MySQL, serverVersion{5, 7, 44}, "SHOW MASTER STATUS"},
		{"10.11.6-MariaDB-0+deb12u1-log", position.MariaDB, serverVersion{10, 11, 6}, "SHOW MASTER STATUS"},
		{"5.5.5-10.11.6-MariaDB", position.MariaDB, serverVersion{10, 11, 6}, "SHOW MASTER STATUS"},
		{"11.4.2-MariaDB", position.MariaDB, serverVersion{11, 4, 2}, "SHOW MASTER STATUS"},
		{"garbage", position.MySQL, serverVersion{}, "SHOW MASTER STATUS"},
	} {
		v := parseVersion(tc.version)
		if v != tc.want {
			t.Errorf("parseVersion(%q) = %v, want %v", tc.version, v, tc.want)
		}
		if got := (server{flavor: tc.flavor, version: v}).statusStatement(); got != tc.stmt {
			t.Errorf("%s %s: %s, want %s", tc.flavor, tc.version, got, tc.stmt)
		}
	}
}

func TestNormalizeGTIDs(t *testing.T) {
	in := "3e11fa47-71ca-11e1-9e33-c80aa9429562:1-5,\n4e11fa47-71ca-11e1-9e33-c80aa9429562:1-3:7"
	if got, want := normalizeGTIDs(in), "3e11fa47-71ca-11e1-9e33-c80aa9429562:1-5,4e11fa47-71ca-11e1-9e33-c80aa9429562:1-3:7"; got != want {
		t.Errorf("normalizeGTIDs: %q", got)
	}
}
