package binlog

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/go-mysql-org/go-mysql/client"
	"github.com/go-mysql-org/go-mysql/mysql"

	"github.com/sluice-cdc/sluice/internal/sqlstmt"
)

// grants is what SHOW GRANTS says the current user may do.
//
// Both servers print one statement per line. MySQL (8.0 to 9.7):
//
//	GRANT SELECT, REPLICATION SLAVE, REPLICATION CLIENT ON *.* TO `u`@`%`
//	GRANT BACKUP_ADMIN,REPLICATION_SLAVE_ADMIN ON *.* TO `u`@`%`   (dynamic privileges)
//	GRANT `cdc`@`%` TO `u`@`%`                                      (a role; its privileges are merged into the lines above only while it is active)
//	REVOKE SELECT ON `app`.* FROM `u`@`%`                           (partial revokes)
//
// MariaDB (10.x, 11.x):
//
//	GRANT REPLICATION SLAVE, BINLOG MONITOR ON *.* TO `u`@`%` IDENTIFIED BY PASSWORD '*…'
//	GRANT `cdc` TO `u`@`%`
//	GRANT SELECT, REPLICATION SLAVE ON *.* TO `cdc`                 (the privileges of the active role, a line of their own)
//	SET DEFAULT ROLE `cdc` FOR `u`@`%`
type grants struct {
	global   map[string]bool // privileges on *.*
	anySel   bool            // SELECT on anything (a database, a table, a column)
	roles    []string        // roles granted to the user
	allGrant bool            // ALL PRIVILEGES ON *.*
}

// parseGrants reads the lines of SHOW GRANTS.
func parseGrants(lines []string) grants {
	g := grants{global: map[string]bool{}}
	for _, line := range lines {
		line = strings.TrimSpace(line)
		up := strings.ToUpper(line)
		revoke := strings.HasPrefix(up, "REVOKE ")
		if !revoke && !strings.HasPrefix(up, "GRANT ") {
			continue // SET DEFAULT ROLE ...
		}
		rest := up[strings.IndexByte(up, ' ')+1:]
		on := strings.Index(rest, " ON ")
		if on < 0 {
			// "GRANT `role`@`%` TO `u`@`%`": a role.
			if to := strings.Index(rest, " TO "); to > 0 && !revoke {
				role := rest[:to]
				if len(up) == len(line) { // as written, not upper-cased
					role = line[len("GRANT "):][:to]
				}
				g.roles = append(g.roles, strings.TrimSpace(role))
			}
			continue
		}
		privs := splitPrivileges(rest[:on])
		target := rest[on+4:]
		if i := strings.Index(target, " TO "); i >= 0 {
			target = target[:i]
		} else if i := strings.Index(target, " FROM "); i >= 0 {
			target = target[:i]
		}
		target = strings.TrimSpace(target)
		if revoke {
			// A partial revoke (MySQL, partial_revokes=ON) takes a privilege
			// away on one database; what it hides is found per table
			// (selectChecked).
			continue
		}
		for _, p := range privs {
			if p == "SELECT" || p == "ALL PRIVILEGES" || p == "ALL" {
				g.anySel = true
			}
			if target == "*.*" {
				g.global[p] = true
				if p == "ALL PRIVILEGES" || p == "ALL" {
					g.allGrant = true
				}
			}
		}
	}
	return g
}

// splitPrivileges splits "SELECT (`id`, `v`), REPLICATION SLAVE" into
// privilege names, dropping column lists.
func splitPrivileges(s string) []string {
	var out []string
	depth, start := 0, 0
	flush := func(end int) {
		p := strings.TrimSpace(s[start:end])
		if i := strings.IndexByte(p, '('); i >= 0 {
			p = strings.TrimSpace(p[:i])
		}
		if p != "" {
			out = append(out, strings.Join(strings.Fields(p), " "))
		}
	}
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '(':
			depth++
		case ')':
			depth--
		case ',':
			if depth == 0 {
				flush(i)
				start = i + 1
			}
		}
	}
	flush(len(s))
	return out
}

func (g grants) has(privs ...string) bool {
	if g.allGrant {
		return true
	}
	for _, p := range privs {
		if g.global[p] {
			return true
		}
	}
	return false
}

// roleAdvice explains privileges that may sit in a role that is not active.
func (g grants) roleAdvice(v ServerVersion) string {
	if len(g.roles) == 0 {
		return ""
	}
	roles := strings.Join(g.roles, ", ")
	if v.mysql() {
		return fmt.Sprintf(" (the user has the roles %s, whose privileges count only while active: SET DEFAULT ROLE ALL TO <user>, or set activate_all_roles_on_login = ON)", roles)
	}
	return fmt.Sprintf(" (the user has the roles %s, whose privileges count only while active: SET DEFAULT ROLE <role> FOR <user>)", roles)
}

// checkGrants checks that the user may read the binlog and its positions,
// and, when the binlog carries no column names, read information_schema.
// A privilege SHOW GRANTS does not show is confirmed by trying what needs
// it, so that grants through roles or cloud providers' own privileges do
// not fail the check where the server would allow the work.
func checkGrants(c *client.Conn, v ServerVersion, needSelect bool) error {
	rs, err := c.Execute("SHOW GRANTS")
	if err != nil {
		return fmt.Errorf("binlog: SHOW GRANTS: %w", brief(err))
	}
	lines := make([]string, rs.RowNumber())
	for i := range lines {
		lines[i] = resultString(rs, i, 0)
	}
	rs.Close()
	g := parseGrants(lines)
	user := "<user>"
	if u := currentUser(c); u != "" {
		user = u
	}
	grant := v.replicationGrant(user)
	// On MySQL, listing the replicas needs REPLICATION SLAVE: a check that
	// holds however the privilege was given.
	if !g.has("REPLICATION SLAVE", "REPLICATION REPLICA") && (!v.mysql() || !allowed(c, v.ReplicasStatement())) {
		return fmt.Errorf("%w: the user needs REPLICATION SLAVE to read the binlog%s: %s", ErrPrivilege, g.roleAdvice(v), grant)
	}
	if !g.has("REPLICATION CLIENT", "BINLOG MONITOR", "SUPER") && !allowed(c, "SHOW BINARY LOGS") {
		return fmt.Errorf("%w: the user needs %s to read binlog positions and list binlog files%s: %s", ErrPrivilege, v.monitorPrivilege(), g.roleAdvice(v), grant)
	}
	if needSelect && !g.anySel {
		return fmt.Errorf("%w: binlog_row_metadata is not FULL, so the binlog carries no column names and sluice reads them from information_schema, which shows only the tables the user may SELECT from; the user has no SELECT privilege%s: GRANT SELECT ON <database>.* TO %s (or have the binlog carry them: %s)", ErrPrivilege, g.roleAdvice(v), user, v.setGlobal("binlog_row_metadata", "FULL"))
	}
	return nil
}

// allowed runs a statement that needs a privilege and reports whether the
// server allowed it.
func allowed(c *client.Conn, stmt string) bool {
	rs, err := c.Execute(stmt)
	if err != nil {
		return false
	}
	rs.Close()
	return true
}

// currentUser is the account the server matched, quoted for a GRANT
// statement: 'repl'@'%'.
func currentUser(c *client.Conn) string {
	rs, err := c.Execute("SELECT CURRENT_USER()")
	if err != nil {
		return ""
	}
	defer rs.Close()
	u := resultString(rs, 0, 0)
	name, host, ok := strings.Cut(u, "@")
	if !ok {
		return ""
	}
	return "'" + strings.ReplaceAll(name, "'", "''") + "'@'" + strings.ReplaceAll(host, "'", "''") + "'"
}

// selectChecked wraps the reader's information_schema source: where
// information_schema cannot describe a table, it finds out whether the
// user lacks SELECT on it (information_schema then hides the table
// instead of refusing), and says so with the GRANT to run, instead of a
// "table not found" that reconnecting cannot cure.
type selectChecked struct {
	SchemaSource
	dial func(ctx context.Context) (*client.Conn, error)

	mu   sync.Mutex
	conn *client.Conn
}

func (s *selectChecked) Columns(ctx context.Context, db, table string) (*Table, error) {
	t, err := s.SchemaSource.Columns(ctx, db, table)
	if err == nil {
		return t, nil
	}
	if perr := s.checkSelect(ctx, db, table); perr != nil {
		return nil, perr
	}
	return nil, err
}

// checkSelect returns ErrPrivilege when the user may not SELECT from
// db.table (or some of its columns).
func (s *selectChecked) checkSelect(ctx context.Context, db, table string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.conn == nil {
		c, err := s.dial(ctx)
		if err != nil {
			return nil // the source's own error says more
		}
		s.conn = c
	}
	name := sqlstmt.QuoteName(db, table)
	rs, err := s.conn.Execute("SELECT * FROM " + name + " LIMIT 0")
	if err == nil {
		rs.Close()
		return nil
	}
	var myErr *mysql.MyError
	if !errors.As(err, &myErr) {
		s.conn.Close()
		s.conn = nil
		return nil
	}
	switch myErr.Code {
	case mysql.ER_TABLEACCESS_DENIED_ERROR, mysql.ER_COLUMNACCESS_DENIED_ERROR, mysql.ER_DBACCESS_DENIED_ERROR:
		user := currentUser(s.conn)
		if user == "" {
			user = "<user>"
		}
		return fmt.Errorf("%w: the user may not SELECT from %s.%s, so information_schema hides its columns, which sluice needs because the binlog carries no column names (binlog_row_metadata is not FULL): GRANT SELECT ON %s TO %s (server: %s)", ErrPrivilege, db, table, name, user, myErr.Message)
	}
	return nil
}

// Close closes the probe connection and the wrapped source, if it has a Close.
func (s *selectChecked) Close() error {
	s.mu.Lock()
	if s.conn != nil {
		s.conn.Close()
		s.conn = nil
	}
	s.mu.Unlock()
	if c, ok := s.SchemaSource.(interface{ Close() error }); ok {
		return c.Close()
	}
	return nil
}

// quoteName quotes an identifier with backticks.
