package sqlstmt

import (
	"strings"
	"testing"
)

func TestRedact(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"CREATE TABLE t (id INT) ENGINE=FEDERATED CONNECTION='mysql://u:s3cret@h:3306/db/t'",
			"CREATE TABLE t (id INT) ENGINE=FEDERATED CONNECTION='mysql://u:<redacted>@h:3306/db/t'"},
		{"CREATE TABLE t (id INT) ENGINE=FEDERATED CONNECTION 'mysql://u@h/db/t'",
			"CREATE TABLE t (id INT) ENGINE=FEDERATED CONNECTION 'mysql://u@h/db/t'"},
		{"CREATE TABLE t (id INT) ENGINE=FEDERATED CONNECTION='srv1/t'",
			"CREATE TABLE t (id INT) ENGINE=FEDERATED CONNECTION='srv1/t'"},
		{"create table t (id int) engine=connect table_type=ODBC connection='DSN=x;UID=u;PWD=hunter2;'",
			"create table t (id int) engine=connect table_type=ODBC connection='DSN=x;UID=u;PWD=<redacted>;'"},
		{`CREATE TABLE t (id INT) ENGINE=SPIDER COMMENT='wrapper "mysql", host "h", user "u", password "p w", table "t"'`,
			`CREATE TABLE t (id INT) ENGINE=SPIDER COMMENT='wrapper "mysql", host "h", user "u", password <redacted>, table "t"'`},
		{"ALTER TABLE t PASSWORD = 'x'", "ALTER TABLE t PASSWORD = '<redacted>'"},
		{"ALTER TABLE t CONNECTION='weird pass\\'word'", "ALTER TABLE t CONNECTION='<redacted>'"},
		{"CREATE TABLE t (password VARCHAR(10) COMMENT 'the user''s password hash')",
			"CREATE TABLE t (password VARCHAR(10) COMMENT 'the user''s password hash')"},
		{"ALTER TABLE t ADD c INT", "ALTER TABLE t ADD c INT"},
	} {
		got := Redact(c.in)
		if got != c.want {
			t.Errorf("Redact(%q)\n got %q\nwant %q", c.in, got, c.want)
		}
		for _, secret := range []string{"s3cret", "hunter2", `"p w"`, "= 'x'"} {
			if strings.Contains(got, secret) {
				t.Errorf("Redact(%q) = %q still holds %q", c.in, got, secret)
			}
		}
		if _, err := Grammar(got); err != nil && !strings.Contains(c.in, "SPIDER") && !strings.Contains(c.in, "connect") {
			t.Errorf("Redact(%q) = %q no longer parses: %v", c.in, got, err)
		}
	}
}

func FuzzRedact(f *testing.F) {
	f.Add("CREATE TABLE t (id INT) CONNECTION='mysql://u:p@h/d/t'")
	f.Add("ALTER TABLE t PASSWORD='x' COMMENT='password \"y\"'")
	f.Fuzz(func(t *testing.T, q string) {
		out := Redact(q)
		if Redact(out) != out {
			t.Fatalf("Redact is not idempotent on %q: %q then %q", q, out, Redact(out))
		}
	})
}
