package binlog_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/sluice-cdc/sluice/binlog"
	"github.com/sluice-cdc/sluice/internal/testenv"
	"github.com/sluice-cdc/sluice/position"
)

func asUser(user string) func(*binlog.Config) {
	return func(c *binlog.Config) { c.User, c.Password = user, "pw" }
}

// TestPreflightRoles: privileges given through a role count once the role
// is active, and the error says so while it is not.
func TestPreflightRoles(t *testing.T) {
	testenv.ForEachFlavor(t, func(t *testing.T, flavor position.Flavor) {
		db := startServer(t, flavor, testenv.Options{})
		exec(t, db, "CREATE ROLE 'cdc'", "GRANT REPLICATION SLAVE, REPLICATION CLIENT, SELECT ON *.* TO 'cdc'",
			"CREATE USER 'viarole'@'%' IDENTIFIED BY 'pw'", "GRANT 'cdc' TO 'viarole'@'%'")
		_, err := newReader(t, db, asUser("viarole")).Next(timeout(t))
		if !errors.Is(err, binlog.ErrPrivilege) || !strings.Contains(err.Error(), "cdc") || !strings.Contains(err.Error(), "SET DEFAULT ROLE") {
			t.Fatalf("a role not active: %v", err)
		}
		t.Logf("a role not active: %v", err)
		if flavor == position.MySQL {
			exec(t, db, "SET DEFAULT ROLE 'cdc' TO 'viarole'@'%'")
		} else {
			exec(t, db, "SET DEFAULT ROLE 'cdc' FOR 'viarole'@'%'")
		}
		if err := newReader(t, db, asUser("viarole")).Ready(timeout(t)); err != nil {
			t.Fatalf("with the role active: %v", err)
		}
	})
}

// TestSelectPrivilege: when the binlog carries no column names
// (binlog_row_metadata=MINIMAL) sluice reads them from information_schema,
// which hides, rather than refuses, the tables a user may not SELECT from.
// Without any SELECT the preflight says so; without SELECT on one table
// (or with a partial revoke on MySQL) its first row stops the reader with
// ErrPrivilege naming the table and the GRANT, instead of a "table not
// found" retried forever.
func TestSelectPrivilege(t *testing.T) {
	testenv.ForEachFlavor(t, func(t *testing.T, flavor position.Flavor) {
		db := startServer(t, flavor, testenv.Options{RowMetadata: "MINIMAL"})
		repl := "REPLICATION SLAVE, REPLICATION CLIENT"
		exec(t, db, "CREATE DATABASE app", "CREATE DATABASE other", "CREATE TABLE app.t (id INT PRIMARY KEY, v INT)",
			"CREATE USER 'nosel'@'%' IDENTIFIED BY 'pw'", "GRANT "+repl+" ON *.* TO 'nosel'@'%'",
			"CREATE USER 'othersel'@'%' IDENTIFIED BY 'pw'", "GRANT "+repl+" ON *.* TO 'othersel'@'%'", "GRANT SELECT ON other.* TO 'othersel'@'%'")
		users := []string{"othersel"}
		if flavor == position.MySQL {
			exec(t, db, "SET GLOBAL partial_revokes = ON",
				"CREATE USER 'revoked'@'%' IDENTIFIED BY 'pw'", "GRANT "+repl+", SELECT ON *.* TO 'revoked'@'%'", "REVOKE SELECT ON app.* FROM 'revoked'@'%'")
			users = append(users, "revoked")
		}
		_, err := newReader(t, db, asUser("nosel")).Next(timeout(t))
		if !errors.Is(err, binlog.ErrPrivilege) || !strings.Contains(err.Error(), "no SELECT privilege") || !strings.Contains(err.Error(), "binlog_row_metadata") {
			t.Fatalf("no SELECT at all: %v", err)
		}
		t.Logf("no SELECT at all: %v", err)
		start := binlogEnd(t, db)
		exec(t, db, "INSERT INTO app.t VALUES (1, 1)")
		for _, u := range users {
			r := newReader(t, db, func(c *binlog.Config) { asUser(u)(c); c.Start = start })
			_, err := r.Next(timeout(t))
			if !errors.Is(err, binlog.ErrPrivilege) || !strings.Contains(err.Error(), "app.t") || !strings.Contains(err.Error(), "GRANT SELECT ON `app`.`t` TO '"+u+"'@'%'") {
				t.Fatalf("%s: without SELECT on app.t: %v", u, err)
			}
			t.Logf("%s: %v", u, err)
			if n := r.Stats().Reconnects; n != 0 {
				t.Fatalf("%s: %d reconnections for a missing privilege", u, n)
			}
		}
	})
}
