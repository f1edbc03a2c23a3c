package binlog_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/sluice-cdc/sluice/binlog"
	"github.com/sluice-cdc/sluice/codec"
	"github.com/sluice-cdc/sluice/internal/sqlstmt"
	"github.com/sluice-cdc/sluice/internal/testenv"
	"github.com/sluice-cdc/sluice/mysqlconn"
	"github.com/sluice-cdc/sluice/position"
)

// ddlSeen is one DDL change as delivered: its database, its table (""
// for none) and the start of its statement.
type ddlSeen struct{ db, table, query string }

func (d ddlSeen) String() string { return fmt.Sprintf("%s.%s %q", d.db, d.table, d.query) }

// readDDL reads until a DDL change whose statement contains marker, and
// returns every DDL change delivered (the marker's too) and, encoded as
// sluice writes them, every change.
func readDDL(t *testing.T, r *binlog.Reader, marker string) (ddl []ddlSeen, out []byte) {
	t.Helper()
	enc := codec.NewEncoder(codec.Source{Name: "test"})
	for {
		txn := next(t, r)
		done := false
		for i := range txn.Changes {
			ch := &txn.Changes[i]
			out = enc.AppendChange(out, txn, ch)
			if ch.Op != binlog.OpDDL {
				continue
			}
			d := ddlSeen{db: ch.Schema, query: ch.Query}
			if ch.Table != nil {
				d.table = ch.Table.Name
				if ch.Table.Schema != ch.Schema {
					t.Errorf("DDL %q: table schema %q, change schema %q", ch.Query, ch.Table.Schema, ch.Schema)
				}
			}
			ddl = append(ddl, d)
			done = done || strings.Contains(ch.Query, marker)
		}
		if done {
			return ddl, out
		}
	}
}

// TestDDLAccountStatementsNeverDelivered: account management statements,
// with passwords in clear and as hashes, are never delivered and never
// logged, whatever their default database.
func TestDDLAccountStatementsNeverDelivered(t *testing.T) {
	testenv.ForEachFlavor(t, func(t *testing.T, f position.Flavor) {
		db := startServer(t, f, testenv.Options{})
		exec(t, db, "CREATE DATABASE shop", "CREATE TABLE shop.t (id INT PRIMARY KEY)")
		start := binlogEnd(t, db)
		tables, _ := binlog.ParseFilter("shop.*")
		var logs bytes.Buffer
		r := newReader(t, db, func(c *binlog.Config) {
			c.Start, c.Tables = start, tables
			c.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
		})

		exec(t, db, "USE shop", "CREATE USER 'alice'@'%' IDENTIFIED BY 'hunter2-secret'")
		// The same account again from its hash (IDENTIFIED ... AS '<hash>'
		// on MySQL, IDENTIFIED BY PASSWORD '<hash>' on MariaDB).
		show := "SHOW CREATE USER 'alice'@'%'"
		var pre []string
		if f == position.MySQL {
			pre = []string{"SET SESSION print_identified_with_as_hex = ON"}
		}
		c, err := db.Conn(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range pre {
			if _, err := c.Execute(s); err != nil {
				t.Fatal(err)
			}
		}
		rs, err := c.Execute(show)
		if err != nil {
			t.Fatal(err)
		}
		created, _ := rs.GetString(0, 0)
		c.Close()
		hash := ""
		for _, mark := range []string{" AS ", "PASSWORD '"} {
			if _, after, ok := strings.Cut(created, mark); ok {
				hash = strings.Trim(strings.Fields(after)[0], "'")
				break
			}
		}
		if len(hash) < 16 {
			t.Fatalf("no hash in %q", created)
		}
		bob := strings.Replace(created, "`alice`", "`bob`", 1)
		bob = strings.Replace(bob, "'alice'", "'bob'", 1)
		setPassword := "SET PASSWORD FOR 'carol'@'%' = 'hunter2-third'"
		grantRole := "GRANT r_shop TO 'carol'@'%'"
		defaultRole := "SET DEFAULT ROLE r_shop TO 'carol'@'%'"
		if f == position.MariaDB {
			setPassword = "SET PASSWORD FOR 'carol'@'%' = PASSWORD('hunter2-third')"
			defaultRole = "SET DEFAULT ROLE r_shop FOR 'carol'@'%'"
		}
		stmts := []string{
			bob,
			"ALTER USER 'alice'@'%' IDENTIFIED BY 'hunter2-other'",
			"RENAME USER 'alice'@'%' TO 'carol'@'%'",
			"GRANT SELECT ON shop.* TO 'carol'@'%'",
			"REVOKE SELECT ON shop.* FROM 'carol'@'%'",
			"CREATE ROLE r_shop",
			"GRANT SELECT ON shop.t TO r_shop",
			grantRole, defaultRole, setPassword,
			"DROP ROLE r_shop",
			"DROP USER 'carol'@'%', 'bob'@'%'",
		}
		if f == position.MariaDB {
			stmts = append(stmts, "CREATE OR REPLACE USER 'dave'@'%' IDENTIFIED BY 'hunter2-fourth'", "DROP USER 'dave'@'%'")
		}
		exec(t, db, append([]string{"USE shop"}, stmts...)...)
		exec(t, db, "CREATE USER 'erin'@'%' IDENTIFIED BY 'hunter2-fifth'", "DROP USER 'erin'@'%'") // no default database
		exec(t, db, "CREATE TABLE shop.marker (id INT PRIMARY KEY)")

		ddl, out := readDDL(t, r, "marker")
		if len(ddl) != 1 || ddl[0].table != "marker" {
			t.Fatalf("delivered DDL %v; want only the marker", ddl)
		}
		for _, secret := range []string{"hunter2", hash, "alice", "bob", "carol", "IDENTIFIED", "r_shop"} {
			if strings.Contains(string(out), secret) || strings.Contains(logs.String(), secret) {
				t.Errorf("%q is in the output or the log:\n%s\n%s", secret, out, logs.String())
			}
		}
		if n := r.Stats().UnparsedDDL; n != 0 {
			t.Errorf("UnparsedDDL = %d", n)
		}
	})
}

// TestDDLFilteredAndNamed: DDL is delivered when it touches a captured
// table or database, however it names it and whatever the default
// database; each change names its database and, when it touches one
// table, the table.
func TestDDLFilteredAndNamed(t *testing.T) {
	testenv.ForEachFlavor(t, func(t *testing.T, f position.Flavor) {
		db := startServer(t, f, testenv.Options{})
		start := binlogEnd(t, db)
		tables, _ := binlog.ParseFilter("shop.*")
		var logs bytes.Buffer
		r := newReader(t, db, func(c *binlog.Config) {
			c.Start, c.Tables = start, tables
			c.Logger = slog.New(slog.NewTextHandler(&logs, nil))
		})
		// No default database: only the shop statements pass.
		exec(t, db, "CREATE DATABASE other", "CREATE TABLE other.x (id INT PRIMARY KEY)", "ALTER TABLE other.x ADD c INT",
			"CREATE DATABASE shop", "CREATE TABLE shop.a (id INT PRIMARY KEY, c INT)")
		// Another default database, shop named.
		exec(t, db, "USE other", "ALTER TABLE shop.a ADD d INT", "CREATE TABLE y (id INT PRIMARY KEY)", "DROP TABLE other.x")
		// shop the default database, other named.
		exec(t, db, "USE shop", "CREATE TABLE other.z (id INT PRIMARY KEY)", "RENAME TABLE other.z TO other.z2",
			"RENAME TABLE a TO b", "CREATE INDEX i ON b (c)", "CREATE VIEW v AS SELECT id FROM b", "DROP VIEW v",
			"CREATE TRIGGER trg BEFORE INSERT ON b FOR EACH ROW SET NEW.c = 1", "DROP TRIGGER trg",
			"TRUNCATE TABLE b", "DROP TABLE b", "CREATE TABLE other.t (id INT PRIMARY KEY)", "RENAME TABLE other.t TO shop.t")
		want := []ddlSeen{
			{"shop", "", "CREATE DATABASE shop"},
			{"shop", "a", "CREATE TABLE shop.a (id INT PRIMARY KEY, c INT)"},
			{"shop", "a", "ALTER TABLE shop.a ADD d INT"},
			{"shop", "", "RENAME TABLE a TO b"},
			{"shop", "b", "CREATE INDEX i ON b (c)"},
			{"shop", "v", "CREATE "},
			{"shop", "v", "DROP VIEW"},
			{"shop", "b", "CREATE "},
			{"shop", "", "DROP TRIGGER"},
			{"shop", "b", "TRUNCATE TABLE b"},
			{"shop", "b", "DROP TABLE"},
			{"shop", "", "RENAME TABLE other.t TO shop.t"},
		}
		if f == position.MariaDB {
			exec(t, db, "USE shop", "CREATE OR REPLACE TABLE c (id INT PRIMARY KEY)", "CREATE SEQUENCE s", "DROP SEQUENCE s",
				"CREATE OR REPLACE TABLE other.w (id INT)")
			want = append(want, ddlSeen{"shop", "c", "CREATE OR REPLACE TABLE c"}, ddlSeen{"shop", "s", "CREATE SEQUENCE s"}, ddlSeen{"shop", "s", "DROP SEQUENCE"})
		}
		exec(t, db, "DROP DATABASE other", "CREATE TABLE shop.marker (id INT PRIMARY KEY)")
		want = append(want, ddlSeen{"shop", "marker", "CREATE TABLE shop.marker"})

		got, out := readDDL(t, r, "marker")
		ok := len(got) == len(want)
		for i := 0; ok && i < len(got); i++ {
			ok = got[i].db == want[i].db && got[i].table == want[i].table && strings.HasPrefix(got[i].query, want[i].query)
		}
		if !ok {
			t.Fatalf("delivered DDL:\n%v\nwant:\n%v", got, want)
		}
		for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			if strings.Contains(line, `"ddl":"CREATE INDEX`) && !strings.Contains(line, `"db":"shop","table":"b"`) {
				t.Errorf("DDL line without its table: %s", line)
			}
			if strings.Contains(line, `"ddl":"RENAME TABLE a TO b"`) && !strings.Contains(line, `"table":null`) {
				t.Errorf("two-table DDL line with a table: %s", line)
			}
		}
		if n := r.Stats().UnparsedDDL; n != 0 || strings.Contains(logs.String(), "could not be parsed") {
			t.Errorf("UnparsedDDL = %d:\n%s", n, logs.String())
		}
	})
}

// TestDDLUnparsed: a DDL statement no parser reads is a warning with its
// first words (never its values), a count, and is delivered by the
// database rule.
func TestDDLUnparsed(t *testing.T) {
	testenv.ForEachFlavor(t, func(t *testing.T, f position.Flavor) {
		db := startServer(t, f, testenv.Options{})
		exec(t, db, "CREATE DATABASE shop", "CREATE DATABASE other")
		start := binlogEnd(t, db)
		tables, _ := binlog.ParseFilter("shop.*")
		var logs bytes.Buffer
		r := newReader(t, db, func(c *binlog.Config) {
			c.Start, c.Tables = start, tables
			c.Logger = slog.New(slog.NewTextHandler(&logs, nil))
		})
		// A name in double quotes under sql_mode ANSI_QUOTES is valid SQL
		// that the grammar and the tokenizer read as a string. (Unquoted
		// names beyond ASCII, the example before, are read now:
		// sqlstmt's quoteBareNames.)
		unreadable := func(dbName string) string {
			return `CREATE TABLE "tq_` + dbName + `" (id INT) COMMENT 'hunter2'`
		}
		const ansi = "SET SESSION sql_mode = 'ANSI_QUOTES'"
		exec(t, db, "USE other", ansi, unreadable("other"))
		exec(t, db, "USE shop", ansi, unreadable("shop"), "CREATE TABLE shop.marker (id INT PRIMARY KEY)")
		got, _ := readDDL(t, r, "marker")
		if len(got) != 2 || !strings.Contains(got[0].query, "shop") || got[0].db != "shop" || got[1].table != "marker" {
			t.Fatalf("delivered %v; want the shop statement and the marker", got)
		}
		if n := r.Stats().UnparsedDDL; n != 2 {
			t.Fatalf("UnparsedDDL = %d; want 2\n%s", n, logs.String())
		}
		if w := strings.Count(logs.String(), "a DDL statement could not be parsed"); w != 2 || strings.Contains(logs.String(), "hunter2") {
			t.Fatalf("%d warnings (want 2, without values):\n%s", w, logs.String())
		}
	})
}

// TestDDLSchemaCacheInvalidation: without column metadata, a DDL on one
// table makes the reader read that table's definition again, not the
// others'; a database DDL forgets that database's tables.
func TestDDLSchemaCacheInvalidation(t *testing.T) {
	testenv.ForEachFlavor(t, func(t *testing.T, f position.Flavor) {
		db := startServer(t, f, testenv.Options{RowMetadata: "MINIMAL"})
		exec(t, db, "CREATE DATABASE shop", "CREATE DATABASE other",
			"CREATE TABLE shop.t (id INT PRIMARY KEY, a INT)", "CREATE TABLE shop.u (id INT PRIMARY KEY, a INT)",
			"CREATE TABLE other.o (id INT PRIMARY KEY)")
		src := binlog.NewInfoSchema(func(ctx context.Context) (*mysqlconn.Conn, error) { return db.Conn(ctx) })
		t.Cleanup(func() { src.Close() })
		r := newReader(t, db, func(c *binlog.Config) { c.Schema = src })
		if err := r.Ready(timeout(t)); err != nil {
			t.Fatal(err)
		}
		insert := func(table string, id int) {
			t.Helper()
			exec(t, db, fmt.Sprintf("INSERT INTO %s (id) VALUES (%d)", table, id))
			if ch := next(t, r).Changes[0]; ch.Table.Schema+"."+ch.Table.Name != table || ch.After[0].Int() != int64(id) {
				t.Fatalf("insert into %s: %+v", table, ch)
			}
		}
		reads := func(want int, what string) {
			t.Helper()
			if n := src.Reads(); n != want {
				t.Fatalf("%s: %d information_schema reads; want %d", what, n, want)
			}
		}
		insert("shop.t", 1)
		insert("shop.u", 1)
		reads(2, "first rows")
		exec(t, db, "ALTER TABLE shop.u ADD b INT", "CREATE TABLE other.p (id INT)", "DROP TABLE other.p", "ALTER TABLE other.o ADD c INT")
		for range 4 {
			next(t, r) // the DDL
		}
		insert("shop.t", 2)
		reads(2, "after DDL of other tables") // shop.t not read again
		insert("shop.u", 2)
		reads(3, "after ALTER TABLE shop.u")
		exec(t, db, "ALTER DATABASE other CHARACTER SET utf8mb4")
		next(t, r)
		insert("shop.t", 3)
		reads(3, "after ALTER DATABASE other")
		exec(t, db, "ALTER DATABASE shop CHARACTER SET utf8mb4")
		next(t, r)
		insert("shop.t", 4)
		insert("shop.u", 4)
		reads(5, "after ALTER DATABASE shop")
	})
}

// TestDDLTableConnectionPasswordRedacted: a table's CONNECTION and
// PASSWORD options (FEDERATED, CONNECT and Spider tables keep a remote
// server's password there; any engine stores the options) reach neither
// the delivered DDL nor the schema history: not its captured CREATE TABLE,
// not the definitions after the statements.
func TestDDLTableConnectionPasswordRedacted(t *testing.T) {
	testenv.ForEachFlavor(t, func(t *testing.T, f position.Flavor) {
		db := startServer(t, f, testenv.Options{})
		exec(t, db, "CREATE DATABASE shop",
			"CREATE TABLE shop.old (id INT PRIMARY KEY) CONNECTION='mysql://fed:hunter2-one@remote:3306/db/old'")
		tables, _ := binlog.ParseFilter("shop.*")
		store := &memHistory{}
		h, start := captureHistory(t, db, f, tables, store)
		r := newReader(t, db, func(c *binlog.Config) { c.Start, c.Tables, c.History = start, tables, h })
		exec(t, db,
			"CREATE TABLE shop.fed (id INT PRIMARY KEY) CONNECTION='mysql://fed:hunter2-two@remote:3306/db/fed'",
			"ALTER TABLE shop.fed CONNECTION = 'DSN=remote;UID=fed;PWD=hunter2-three;'",
			"ALTER TABLE shop.old PASSWORD = 'hunter2-four'",
			"CREATE TABLE shop.marker (id INT PRIMARY KEY)")
		ddl, out := readDDL(t, r, "marker")
		if len(ddl) != 4 {
			t.Fatalf("delivered DDL %v; want 4 statements", ddl)
		}
		if !strings.Contains(ddl[0].query, "mysql://fed:"+sqlstmt.Redacted+"@remote:3306/db/fed") {
			t.Errorf("CREATE TABLE delivered as %q; want the URL kept without its password", ddl[0].query)
		}
		var stored strings.Builder
		for _, e := range h.Entries() {
			stored.WriteString(e.Create + "\n")
		}
		for _, ht := range h.TablesAt(position.Position{}) {
			stored.WriteString(fmt.Sprint(ht) + "\n")
		}
		stored.WriteString(store.dump())
		if !strings.Contains(stored.String(), "fed") {
			t.Fatalf("the history holds no definition of shop.fed:\n%s", stored.String())
		}
		for _, secret := range []string{"hunter2"} {
			if strings.Contains(string(out), secret) {
				t.Errorf("%q is in the output:\n%s", secret, out)
			}
			if strings.Contains(stored.String(), secret) {
				t.Errorf("%q is in the schema history:\n%s", secret, stored.String())
			}
		}
	})
}

// memHistory is a binlog.HistoryStore in memory that renders what it
// was given.
type memHistory struct {
	mu      sync.Mutex
	base    binlog.HistoryState
	entries []binlog.HistoryEntry
}

func (m *memHistory) LoadSchema(context.Context) (*binlog.HistoryState, []binlog.HistoryEntry, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	b := m.base
	return &b, slices.Clone(m.entries), nil
}

func (m *memHistory) AppendSchema(_ context.Context, entries []binlog.HistoryEntry) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.entries = append(m.entries, entries...)
	return nil
}

func (m *memHistory) CompactSchema(_ context.Context, st binlog.HistoryState) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.base, m.entries = st, nil
	return nil
}

func (m *memHistory) dump() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return fmt.Sprintf("%+v\n%+v\n", m.base, m.entries)
}

// TestTruncateCarriesTable: a TRUNCATE's change carries the definition
// its table's rows were last read with (format debezium's op "t" event
// has the table's schema), and a table naming it alone when none was read.
func TestTruncateCarriesTable(t *testing.T) {
	testenv.ForEachFlavor(t, func(t *testing.T, f position.Flavor) {
		db := startServer(t, f, testenv.Options{})
		start := binlogEnd(t, db)
		r := newReader(t, db, func(c *binlog.Config) { c.Start = start })
		exec(t, db, "CREATE DATABASE tr", "CREATE TABLE tr.a (id INT PRIMARY KEY, v VARCHAR(5))", "CREATE TABLE tr.b (id INT PRIMARY KEY)",
			"INSERT INTO tr.a VALUES (1, 'x')", "TRUNCATE TABLE tr.a", "TRUNCATE TABLE tr.b", "CREATE TABLE tr.marker (id INT PRIMARY KEY)")
		cols := map[string]int{}
		for done := false; !done; {
			txn := next(t, r)
			for _, ch := range txn.Changes {
				if ch.Op == binlog.OpDDL && strings.HasPrefix(ch.Query, "TRUNCATE") {
					cols[ch.Table.Name] = len(ch.Table.Columns)
				}
				done = done || strings.Contains(ch.Query, "marker")
			}
		}
		if cols["a"] != 2 || cols["b"] != 0 {
			t.Fatalf("TRUNCATE changes' columns: %v, want a: 2 (its rows' definition), b: 0 (none read)", cols)
		}
	})
}
