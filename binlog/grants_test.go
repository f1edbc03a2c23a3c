package binlog

import (
	"strings"
	"testing"
)

// SHOW GRANTS as MySQL 9.7.4 and MariaDB 10.11 print it (captured from the
// test servers), and what the check makes of it.
func TestParseGrants(t *testing.T) {
	cases := []struct {
		name          string
		lines         []string
		repl, monitor bool
		anySel        bool
		roles         string
	}{
		{"MySQL replication user", []string{
			"GRANT REPLICATION SLAVE, REPLICATION CLIENT ON *.* TO `r1`@`%`",
			"GRANT SELECT ON `app`.* TO `r1`@`%`",
		}, true, true, true, ""},
		{"MySQL column privilege only", []string{
			"GRANT USAGE ON *.* TO `r2`@`%`",
			"GRANT SELECT (`id`, `v`) ON `app`.`t` TO `r2`@`%`",
		}, false, false, true, ""},
		{"MySQL role not active", []string{
			"GRANT USAGE ON *.* TO `r3`@`%`",
			"GRANT `cdc`@`%` TO `r3`@`%`",
		}, false, false, false, "`cdc`@`%`"},
		{"MySQL active role (merged into the user's line)", []string{
			"GRANT SELECT, REPLICATION SLAVE, REPLICATION CLIENT ON *.* TO `r3`@`%`",
			"GRANT `cdc`@`%` TO `r3`@`%`",
		}, true, true, true, "`cdc`@`%`"},
		{"MySQL partial revoke", []string{
			"GRANT SELECT, REPLICATION SLAVE, REPLICATION CLIENT ON *.* TO `r4`@`%`",
			"REVOKE SELECT ON `app`.* FROM `r4`@`%`",
		}, true, true, true, ""},
		{"MySQL root", []string{
			"GRANT SELECT, INSERT, UPDATE, DELETE, CREATE, DROP, RELOAD, SHUTDOWN, PROCESS, FILE, REFERENCES, INDEX, ALTER, SHOW DATABASES, SUPER, CREATE TEMPORARY TABLES, LOCK TABLES, EXECUTE, REPLICATION SLAVE, REPLICATION CLIENT, CREATE VIEW, SHOW VIEW, CREATE ROUTINE, ALTER ROUTINE, CREATE USER, EVENT, TRIGGER, CREATE TABLESPACE, CREATE ROLE, DROP ROLE ON *.* TO `root`@`%` WITH GRANT OPTION",
			"GRANT ALLOW_NONEXISTENT_DEFINER,APPLICATION_PASSWORD_ADMIN,BACKUP_ADMIN,REPLICATION_SLAVE_ADMIN ON *.* TO `root`@`%` WITH GRANT OPTION",
		}, true, true, true, ""},
		{"MySQL only SUPER", []string{"GRANT SUPER ON *.* TO `s`@`%`"}, false, true, false, ""},
		{"MariaDB replication user", []string{
			"GRANT REPLICATION SLAVE, BINLOG MONITOR ON *.* TO `r1`@`%` IDENTIFIED BY PASSWORD '*D821809F681A40A6E379B50D0463EFAE20BDD122'",
			"GRANT SELECT ON `app`.* TO `r1`@`%`",
		}, true, true, true, ""},
		{"MariaDB role not active", []string{
			"GRANT `cdc` TO `r3`@`%`",
			"GRANT USAGE ON *.* TO `r3`@`%` IDENTIFIED BY PASSWORD '*D821809F681A40A6E379B50D0463EFAE20BDD122'",
		}, false, false, false, "`cdc`"},
		{"MariaDB default role (its grants on a line of their own)", []string{
			"GRANT `cdc` TO `r3`@`%`",
			"GRANT USAGE ON *.* TO `r3`@`%` IDENTIFIED BY PASSWORD '*D821809F681A40A6E379B50D0463EFAE20BDD122'",
			"GRANT SELECT, REPLICATION SLAVE, BINLOG MONITOR ON *.* TO `cdc`",
			"SET DEFAULT ROLE `cdc` FOR `r3`@`%`",
		}, true, true, true, "`cdc`"},
		{"MariaDB root", []string{"GRANT ALL PRIVILEGES ON *.* TO `root`@`%` IDENTIFIED BY PASSWORD '*E1A5' WITH GRANT OPTION"}, true, true, true, ""},
		{"MariaDB 10.5 spelling", []string{"GRANT REPLICATION REPLICA, REPLICATION CLIENT ON *.* TO `u`@`%`"}, true, true, false, ""},
		{"on a database only", []string{"GRANT REPLICATION SLAVE ON `app`.* TO `u`@`%`"}, false, false, false, ""},
	}
	for _, c := range cases {
		g := parseGrants(c.lines)
		if got := g.has("REPLICATION SLAVE", "REPLICATION REPLICA"); got != c.repl {
			t.Errorf("%s: replication %v, want %v", c.name, got, c.repl)
		}
		if got := g.has("REPLICATION CLIENT", "BINLOG MONITOR", "SUPER"); got != c.monitor {
			t.Errorf("%s: monitor %v, want %v", c.name, got, c.monitor)
		}
		if g.anySel != c.anySel {
			t.Errorf("%s: any SELECT %v, want %v", c.name, g.anySel, c.anySel)
		}
		if got := strings.Join(g.roles, ","); got != c.roles {
			t.Errorf("%s: roles %q, want %q", c.name, got, c.roles)
		}
	}
	mysql97, _ := ParseServerVersion("9.7.4")
	if a := parseGrants([]string{"GRANT `cdc`@`%` TO `r3`@`%`"}).roleAdvice(mysql97); !strings.Contains(a, "SET DEFAULT ROLE ALL TO") || !strings.Contains(a, "activate_all_roles_on_login") {
		t.Errorf("MySQL role advice: %q", a)
	}
}

func TestSplitPrivileges(t *testing.T) {
	got := splitPrivileges("SELECT (`id`, `v`), INSERT (`a`),  REPLICATION   SLAVE,BACKUP_ADMIN")
	want := []string{"SELECT", "INSERT", "REPLICATION SLAVE", "BACKUP_ADMIN"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("%q, want %q", got, want)
	}
}

// FuzzParseGrants: SHOW GRANTS output comes from the server.
func FuzzParseGrants(f *testing.F) {
	f.Add("GRANT SELECT (`id`) ON `app`.`t` TO `r2`@`%`\nGRANT `cdc`@`%` TO `r3`@`%`\nREVOKE SELECT ON `app`.* FROM `u`@`%`")
	f.Add("GRANT ON TO\nREVOKE\nGRANT (((")
	f.Fuzz(func(t *testing.T, s string) {
		g := parseGrants(strings.Split(s, "\n"))
		_ = g.has("SELECT")
	})
}
