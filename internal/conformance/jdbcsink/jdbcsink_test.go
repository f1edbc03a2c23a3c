//go:build linux

package jdbcsink

import (
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-cdc/sluice/internal/testenv"
	"github.com/sluice-cdc/sluice/internal/testenv/kafkaenv"
	"github.com/sluice-cdc/sluice/internal/testenv/throwaway"
	"github.com/sluice-cdc/sluice/position"
)

// pom is Debezium's JDBC sink connector as a Connect plugin.
//
//go:embed pom.xml
var pom []byte

func TestMain(m *testing.M) { kafkaenv.Main(m) }

// column is one column of a compared table: an expression over it in
// MySQL and one in PostgreSQL that give the same text when the value is
// the same (the documented mapping of the types, in docs/FORMAT.md).
type column struct {
	name, mysql, pg string
	json            bool // compare as JSON documents (the texts may differ in spaces and key order)
}

// plain is a column both servers print alike.
func plain(name string) column { return column{name: name, mysql: name, pg: name} }

// castText is a number or date column: MySQL's CAST(x AS CHAR), PostgreSQL's x::text.
func castText(name string) column {
	return column{name: name, mysql: "CAST(" + name + " AS CHAR)", pg: name + "::text"}
}

// The tables of the workload and how each column is compared.
var tables = map[string][]column{
	"t": {
		castText("id"), plain("name"),
		castText("price"), // DECIMAL(10,2) → numeric(10,2): "1.50" in both
		castText("qty"),   // BIGINT → bigint
		castText("ratio"), // DOUBLE → double precision: the shortest exact text in both
		castText("born"),  // DATE → date: YYYY-MM-DD
		// DATETIME(3) → timestamp(3): the wall clock, to the microsecond.
		{"seen", "DATE_FORMAT(seen, '%Y-%m-%d %H:%i:%s.%f')", "to_char(seen, 'YYYY-MM-DD HH24:MI:SS.US')", false},
		castText("flag"), // TINYINT → smallint
		plain("note"),    // TEXT → text
		// VARBINARY → bytea: hex.
		{"data", "HEX(data)", "upper(encode(data, 'hex'))", false},
		castText("extra"), // added by ALTER TABLE mid-stream
	},
	"v": {
		castText("id"),
		castText("mi"), // MEDIUMINT UNSIGNED → integer
		castText("bu"), // BIGINT UNSIGNED (below 2^63) → bigint
		castText("f"),  // FLOAT → real
		castText("y"),  // YEAR → integer
		// TIME(6) → time(6): the clock to the microsecond.
		{"tm", "TIME_FORMAT(tm, '%H:%i:%s.%f')", "to_char(DATE '2000-01-01' + tm, 'HH24:MI:SS.US')", false},
		plain("c"),  // CHAR(3) → text
		plain("e"),  // ENUM → text, the member's name
		plain("st"), // SET → text, the members joined by commas
		// JSON → json: the same document (MariaDB keeps the text as
		// written, MySQL and sluice do not).
		{"j", "CAST(j AS CHAR)", "j::text", true},
		{"b1", "CAST(b1 AS UNSIGNED)", "b1::int::text", false}, // BIT(1) → boolean
		{"bl", "HEX(bl)", "upper(encode(bl, 'hex'))", false},   // BLOB → bytea
	},
	"u": {
		plain("k"), castText("v"),
		// TIMESTAMP(6) → timestamp with time zone: the instant, in UTC.
		{"at", "DATE_FORMAT(CONVERT_TZ(at, @@session.time_zone, '+00:00'), '%Y-%m-%d %H:%i:%s.%f')", "to_char(at AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS.US')", false},
	},
}

var keyOf = map[string]string{"t": "id", "u": "k", "v": "id"}

// setup is the source's state before sluice starts: the snapshot's rows.
var setup = []string{
	"CREATE DATABASE app",
	"CREATE TABLE app.t (id INT PRIMARY KEY, name VARCHAR(40) NOT NULL, price DECIMAL(10,2), qty BIGINT, ratio DOUBLE," +
		" born DATE, seen DATETIME(3), flag TINYINT, note TEXT, data VARBINARY(16))",
	"INSERT INTO app.t VALUES (1, 'one', 1.50, 10, 0.5, '2024-01-02', '2024-01-02 03:04:05.678', 1, 'Café ☕', X'00ff10')," +
		" (2, 'two', -0.01, -5, -2.25, '1999-12-31', '1999-12-31 23:59:59.999', 0, NULL, NULL)," +
		" (3, 'three', NULL, NULL, NULL, NULL, NULL, NULL, 'x', X'')",
	"CREATE TABLE app.v (id INT PRIMARY KEY, mi MEDIUMINT UNSIGNED, bu BIGINT UNSIGNED, f FLOAT, y YEAR, tm TIME(6)," +
		" c CHAR(3), e ENUM('small','big'), st SET('a','b','c'), j JSON, b1 BIT(1), bl BLOB)",
	"INSERT INTO app.v VALUES (1, 16777215, 9223372036854775807, 1.5, 2024, '23:59:59.999999', 'abc', 'big', 'a,c'," +
		" '{\"k\": [1, 2.5, \"x\"], \"a\": null}', b'1', X'0001FF')," +
		" (2, 0, 0, -0.25, 1901, '00:00:00', '', 'small', '', '[]', b'0', X'')," +
		" (3, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL)",
}

// stream is the workload sluice streams: inserts, updates (one of the
// primary key), deletes, a column added, a table created, and a
// transaction over both tables.
var stream = []string{
	"INSERT INTO app.t VALUES (4, 'four', 99999999.99, 9223372036854775807, 3.25, '2000-02-29', '2000-02-29 12:00:00.001', -128, 'line1\\nline2\\ttab \"q\" ''s''', X'DEADBEEF')",
	"UPDATE app.t SET name = 'uno', price = 2.25, note = NULL WHERE id = 1",
	"UPDATE app.t SET id = 20 WHERE id = 2",
	"DELETE FROM app.t WHERE id = 3",
	"ALTER TABLE app.t ADD COLUMN extra INT",
	"INSERT INTO app.t (id, name, extra) VALUES (6, 'six', 66)",
	"UPDATE app.t SET extra = 7 WHERE id = 1",
	"CREATE TABLE app.u (k VARCHAR(10) PRIMARY KEY, v INT, at TIMESTAMP(6) NULL)",
	"INSERT INTO app.u VALUES ('a', 1, '2024-05-06 07:08:09.123456'), ('b', 2, NULL), ('c', 3, '1970-01-02 00:00:00')",
	"BEGIN",
	"UPDATE app.u SET v = v + 10",
	"DELETE FROM app.u WHERE k = 'b'",
	"INSERT INTO app.t (id, name, born) VALUES (7, 'seven', '1970-01-01')",
	"COMMIT",
	"DELETE FROM app.t WHERE id = 4",
	"UPDATE app.v SET mi = 1, f = 3.5, y = 2155, tm = '12:34:56.5', e = 'small', st = 'b', j = '{\"n\": {\"m\": true}}', b1 = b'0', bl = X'FF' WHERE id = 1",
	"INSERT INTO app.v (id, j) VALUES (4, '\"text\"')",
	"DELETE FROM app.v WHERE id = 2",
}

// TestJDBCSink: Debezium's JDBC sink connector, in a real Kafka Connect
// worker, configured as Debezium's documentation says for consuming a
// Debezium MySQL connector's topics (upsert, the record key as primary
// key, deletes, basic schema evolution, JsonConverter with schemas),
// reads the topics `sluice run` writes in format debezium with schemas to
// a real Kafka broker and writes PostgreSQL 15's tables; after a snapshot
// and a stream of inserts, updates (one of the key), deletes, a column
// added and a table created, every PostgreSQL table equals its source
// table, row by row and column by column, on MariaDB and on MySQL. Table
// t takes the key change and the added column, v holds more column types,
// u is created mid-stream.
func TestJDBCSink(t *testing.T) {
	if testing.Short() {
		t.Skip("starts Kafka, Kafka Connect and PostgreSQL")
	}
	ctx := context.Background()
	bin := buildSluice(t)
	k := kafkaenv.Shared(t)
	pg, err := throwaway.StartPostgres(ctx, throwaway.PostgresOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pg.Close() })
	if err := pg.Exec(ctx, "postgres", "CREATE DATABASE sink"); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	connect, err := throwaway.StartConnect(ctx, throwaway.ConnectOptions{
		Brokers: k.Brokers(),
		Plugins: []throwaway.ConnectPlugin{{Name: "debezium-connector-jdbc", POM: pom}},
		Worker: map[string]string{
			// New topics (the table created mid-stream) are found within
			// a second, not the consumer's default 5 minutes.
			"consumer.metadata.max.age.ms": "1000",
		},
		LogLevel: os.Getenv("SLUICE_CONNECT_LOG"),
	}, sinkConnector(pg))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { connect.Close() })
	t.Logf("Kafka Connect with Debezium's JDBC sink running in %v", time.Since(start).Round(time.Millisecond))
	testenv.ForEachFlavor(t, func(t *testing.T, flavor position.Flavor) {
		jdbcSink(t, bin, k, pg, connect, flavor)
	})
}

// sinkConnector is Debezium's JDBC sink connector's configuration, as
// Debezium's documentation gives it for a Debezium MySQL connector's
// topics; every other option keeps its default.
func sinkConnector(pg *throwaway.Postgres) map[string]string {
	return map[string]string{
		"name":                           "jdbc-sink",
		"connector.class":                "io.debezium.connector.jdbc.JdbcSinkConnector",
		"tasks.max":                      "1",
		"topics.regex":                   `jdbc_(mariadb|mysql)\.app\..*`,
		"connection.url":                 pg.JDBCURL("sink"),
		"connection.username":            throwaway.PostgresUser,
		"connection.password":            "",
		"insert.mode":                    "upsert",
		"delete.enabled":                 "true",
		"primary.key.mode":               "record_key",
		"schema.evolution":               "basic",
		"use.time.zone":                  "UTC",
		"key.converter":                  "org.apache.kafka.connect.json.JsonConverter",
		"key.converter.schemas.enable":   "true",
		"value.converter":                "org.apache.kafka.connect.json.JsonConverter",
		"value.converter.schemas.enable": "true",
		"errors.tolerance":               "none",
	}
}

func jdbcSink(t *testing.T, bin string, k *kafkaenv.Kafka, pg *throwaway.Postgres, connect *throwaway.Connect, flavor position.Flavor) {
	ctx := context.Background()
	db := testenv.StartT(t, testenv.Options{Flavor: flavor})
	if err := db.Exec(ctx, setup...); err != nil {
		t.Fatal(err)
	}
	name := "jdbc_" + string(flavor)
	dir := t.TempDir()
	cfg := fmt.Sprintf(`pipeline: %s
source:
  url: %s
  server_id: 905
  tables: [app.*]
sinks:
  - name: kafka
    type: kafka
    format: {name: debezium, schemas: true}
    kafka: {brokers: [%q], topic: "{source}.{db}.{table}", partitions: 1, request_timeout: 5s}
checkpoint: {path: %s, interval: 100ms}
`, name, db.URL(), k.Brokers()[0], filepath.Join(dir, "ckpt.json"))
	path := filepath.Join(dir, "sluice.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(dir, "sluice.log")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	cmd := exec.Command(bin, "run", "--config", path)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
	}()
	failf := func(format string, args ...any) {
		t.Helper()
		st, err := connect.Status(ctx, "jdbc-sink")
		b, _ := os.ReadFile(logPath)
		t.Fatalf(format+"\nconnector: %+v %v\nConnect's log:\n%s\nsluice's log:\n%s", append(args, st, err, connect.LogTail(40), tailLines(string(b), 20))...)
	}
	pgTable := func(table string) string { return name + "_app_" + table }

	// The snapshot first, then the stream.
	// Before the ALTER, t has no column extra.
	if diff := converge(ctx, t, db, pg, connect, pgTable, map[string][]column{"t": tables["t"][:len(tables["t"])-1], "v": tables["v"]}); diff != "" {
		failf("after the snapshot, PostgreSQL differs from %s:\n%s", flavor, diff)
	}
	if err := db.Exec(ctx, stream...); err != nil {
		t.Fatal(err)
	}
	if diff := converge(ctx, t, db, pg, connect, pgTable, tables); diff != "" {
		failf("after the stream, PostgreSQL differs from %s:\n%s", flavor, diff)
	}
}

// converge waits (two minutes at most) until the PostgreSQL tables equal
// the source's, and returns "" or the last difference.
func converge(ctx context.Context, t *testing.T, db *testenv.Server, pg *throwaway.Postgres, connect *throwaway.Connect, pgTable func(string) string, cols map[string][]column) string {
	t.Helper()
	start := time.Now()
	deadline := start.Add(2 * time.Minute)
	for {
		diff := ""
		var names []string
		for _, n := range slices.Sorted(maps.Keys(cols)) {
			names = append(names, n)
			if diff = compare(ctx, db, pg, n, pgTable(n), cols[n]); diff != "" {
				break
			}
		}
		if diff == "" {
			t.Logf("PostgreSQL equals the source (%s) after %v", strings.Join(names, ", "), time.Since(start).Round(time.Millisecond))
			return ""
		}
		if time.Now().After(deadline) {
			return diff
		}
		// A failed task does not recover: stop waiting.
		if st, err := connect.Status(ctx, "jdbc-sink"); err == nil && st.Err() != nil && strings.Contains(st.Err().Error(), "FAILED") {
			return diff + "\nthe connector failed: " + st.Err().Error()
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// compare reads table app.<name> from the source and <pgName> from
// PostgreSQL, every column by its mapping, ordered by key (the table's
// column, qualified: PostgreSQL would order by the output column id::text
// of the same name), and returns ""
// when they are equal, else the first difference.
func compare(ctx context.Context, db *testenv.Server, pg *throwaway.Postgres, name, pgName string, cols []column) string {
	var my, ps []string
	for _, c := range cols {
		my = append(my, c.mysql)
		ps = append(ps, c.pg)
	}
	src, err := sourceRows(ctx, db, fmt.Sprintf("SELECT %s FROM app.%s ORDER BY app.%[2]s.%s", strings.Join(my, ", "), name, keyOf[name]))
	if err != nil {
		return err.Error()
	}
	dst, err := pg.Query(ctx, "sink", fmt.Sprintf("SELECT %s FROM %s ORDER BY %[2]s.%s", strings.Join(ps, ", "), pgName, keyOf[name]))
	if err != nil {
		return err.Error()
	}
	for i := 0; i < len(src) || i < len(dst); i++ {
		switch {
		case i >= len(dst):
			return fmt.Sprintf("%s: source row %q missing in PostgreSQL's %s", name, src[i], pgName)
		case i >= len(src):
			return fmt.Sprintf("%s: PostgreSQL's %s has row %q, not in the source", name, pgName, dst[i])
		}
		for j, c := range cols {
			if src[i][j] != dst[i][j] && !(c.json && jsonEqual(src[i][j], dst[i][j])) {
				return fmt.Sprintf("%s row %d (%s %s): column %s is %q in the source, %q in PostgreSQL", name, i, keyOf[name], src[i][0], c.name, src[i][j], dst[i][j])
			}
		}
	}
	return ""
}

// sourceRows runs query on the source, each value as text, NULL as
// throwaway.PostgresNull (as PostgreSQL's are read).
func sourceRows(ctx context.Context, db *testenv.Server, query string) ([][]string, error) {
	r, err := db.Query(ctx, query)
	if err != nil {
		return nil, err
	}
	var rows [][]string
	for i := range r.Values {
		row := make([]string, len(r.Values[i]))
		for j := range row {
			if null, _ := r.IsNull(i, j); null {
				row[j] = throwaway.PostgresNull
				continue
			}
			row[j], _ = r.GetString(i, j)
		}
		rows = append(rows, row)
	}
	return rows, nil
}

// jsonEqual reports whether a and b are the same JSON document.
func jsonEqual(a, b string) bool {
	var x, y any
	if json.Unmarshal([]byte(a), &x) != nil || json.Unmarshal([]byte(b), &y) != nil {
		return false
	}
	return reflect.DeepEqual(x, y)
}

func tailLines(s string, n int) string {
	l := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(l) > n {
		l = l[len(l)-n:]
	}
	return strings.Join(l, "\n")
}

// buildSluice builds the product's binary once for the package.
func buildSluice(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "sluice")
	out, err := exec.Command("go", "build", "-o", bin, "github.com/sluice-cdc/sluice/cmd/sluice").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}
