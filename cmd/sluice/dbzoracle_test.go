//go:build linux

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-cdc/sluice/internal/dbzharness"
	"github.com/sluice-cdc/sluice/internal/testenv"
	"github.com/sluice-cdc/sluice/position"
)

// The Debezium oracle: Debezium itself (internal/dbzharness, one JVM per
// Debezium version for the package's tests: 3.6.1 with the MySQL
// connector, 3.5.0 with the MariaDB connector) reads the same server as
// `sluice tail --format debezium`, and the two are compared record by
// record.

type oracleJVM struct {
	once sync.Once
	h    *dbzharness.Harness
	err  error
}

var oracles = map[string]*oracleJVM{
	dbzharness.DebeziumVersion: {},
	dbzharness.MariaDBVersion:  {},
}

// debeziumT is the package's one Debezium JVM of version, started on
// first use and ended by TestMain.
func debeziumT(t *testing.T, version string) *dbzharness.Harness {
	t.Helper()
	o := oracles[version]
	o.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		o.h, o.err = dbzharness.Start(ctx, version)
		if o.err == nil {
			t.Logf("Debezium %s: JVM started in %v", version, o.h.Started.Round(time.Millisecond))
		}
	})
	if o.err != nil {
		t.Fatal(o.err)
	}
	return o.h
}

func closeDebezium() {
	for _, o := range oracles {
		if o.h != nil {
			o.h.Close()
		}
	}
}

// oracleCols is a table of every column type both servers have, with the
// edge values of binlog's differential test and the cases issue 25 named
// (FLOAT(M,D), TINYINT(1), years below 100, ENUM members with quotes and
// commas, control characters, numbers inside JSON).
var oracleCols = []string{
	"id INT NOT NULL PRIMARY KEY",
	"ti TINYINT", "tiu TINYINT UNSIGNED", "t1 TINYINT(1)", "si SMALLINT", "siu SMALLINT UNSIGNED",
	"mi MEDIUMINT", "miu MEDIUMINT UNSIGNED", "i INT", "iu INT UNSIGNED", "bi BIGINT", "biu BIGINT UNSIGNED",
	"dec1 DECIMAL(65,30)", "dec2 DECIMAL(10,2)", "dec3 DECIMAL(5,0)",
	"f FLOAT", "fmd FLOAT(7,2)", "d DOUBLE", "dmd DOUBLE(10,3)",
	"dt DATE", "dtm DATETIME", "dtm3 DATETIME(3)", "dtm6 DATETIME(6)",
	"ts6 TIMESTAMP(6) NULL", "ts0 TIMESTAMP NULL", "tm TIME", "tm6 TIME(6)", "y YEAR",
	"c CHAR(10)", "vc VARCHAR(255) CHARACTER SET utf8mb4", "l1 VARCHAR(50) CHARACTER SET latin1",
	"txt TEXT CHARACTER SET utf8mb4",
	"bn BINARY(4)", "vb VARBINARY(20)", "bl BLOB",
	"e ENUM('x','y','z')", "eq ENUM('it''s','a,b','plain')", "st SET('a','b','c','d')",
	"b1 BIT(1)", "b10 BIT(10)", "b64 BIT(64)",
	"j JSON", "g GEOMETRY", "pt POINT",
	"dflt INT NOT NULL DEFAULT 42", "sdflt VARCHAR(10) DEFAULT 'dv'",
}

var oracleRows = []string{
	`INSERT INTO oracle.types VALUES (1, -128, 0, 0, -32768, 0, -8388608, 0, -2147483648, 0, -9223372036854775808, 0,
	  '-99999999999999999999999999999999999.999999999999999999999999999999', -12345678.90, -99999,
	  -3.40282e38, -99999.99, -1.7976931348623157e308, -9999999.999, '1000-01-01', '1000-01-01 00:00:00', '1000-01-01 00:00:00.001', '1000-01-01 00:00:00.000001',
	  '1970-01-01 00:00:01.000000', '1970-01-01 00:00:01', '-838:59:59', '-838:59:59.000000', 1901,
	  '', '', '', '', x'00000000', x'', x'', 'x', 'it''s', '', 0, b'0', 0, '[]', ST_GeomFromText('POINT(0 0)'), ST_GeomFromText('POINT(1 2)'), 1, NULL)`,
	`INSERT INTO oracle.types VALUES (2, 127, 255, 1, 32767, 65535, 8388607, 16777215, 2147483647, 4294967295, 9223372036854775807, 18446744073709551615,
	  '99999999999999999999999999999999999.999999999999999999999999999999', 99999999.99, 99999,
	  3.40282e38, 99999.99, 1.7976931348623157e308, 9999999.999, '9999-12-31', '9999-12-31 23:59:59', '9999-12-31 23:59:59.999', '9999-12-31 23:59:59.999999',
	  '2038-01-19 03:14:07.999999', '2038-01-19 03:14:07', '838:59:59', '838:59:58.999999', 2155,
	  'abcdefghij', 'héllo wörld 😀 中文', 'café ÿ ©', REPEAT('long text ', 500), x'ffffffff', x'00ff00ff', x'deadbeef00',
	  'z', 'a,b', 'a,b,c,d', 1, b'1111111111', 18446744073709551615,
	  '{"a":[1,2.5,"x",null,true],"b":{"c":"\\u00e9\\"q"},"n":-12345678901234,"f":1e300,"g":0.1,"z":-0.0}',
	  ST_GeomFromText('POLYGON((0 0,1 0,1 1,0 0))'), ST_GeomFromText('POINT(-1.5 2.25)'), -7, 'x')`,
	`INSERT INTO oracle.types (id) VALUES (3)`,
	`INSERT INTO oracle.types VALUES (4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, '0.000000000000000000000000000001', 0.01, 0,
	  1.5, 1.25, 0.1, 0.125, '0000-00-00', '0000-00-00 00:00:00', '2024-02-29 12:34:56.5', '2024-02-29 12:34:56.000123',
	  '0000-00-00 00:00:00', '2024-06-01 12:00:00', '00:00:00', '-00:00:01.5', 0,
	  'a', 'tab\there "q" \\\\ back \Z esc:\Z', 'Ünïcödé', CONCAT('line1\nline2', CHAR(27), CHAR(1), CHAR(127)), x'0a0b', x'00', x'00',
	  'y', 'plain', 'b,d', 0, b'1', 1, '"just a string \\u001b"', ST_GeomFromText('LINESTRING(0 0,1 1,2 2)'), ST_GeomFromText('POINT(0 0)'), 0, '')`,
	`INSERT INTO oracle.types (id, dt, dtm, i) VALUES (5, '2020-00-15', '2020-05-00 10:00:00', 5)`,
	`INSERT INTO oracle.types (id, dt, dtm, dtm6, ts6, y, f, d, dec1, fmd, j) VALUES (6, '0050-03-04', '0099-12-31 23:59:59', '0001-01-01 00:00:00.5', '2001-02-03 04:05:06.5', 1970, 0.1, 123456789.123456789, '-0.5', 3.14159, '{"k":[1.5e-7,100000000000000000000,3.0]}')`,
	`INSERT INTO oracle.keyless (a, b) VALUES (1, 'one'), (2, NULL)`,
}

var oracleWrites = []string{
	`UPDATE oracle.types SET vc = 'updated', i = 5, j = '{"updated":true}', dec2 = -0.5, fmd = 12.5 WHERE id IN (1, 2)`,
	`UPDATE oracle.types SET id = 40 WHERE id = 4`,
	`DELETE FROM oracle.types WHERE id = 3`,
	`INSERT INTO oracle.types (id, f, d, dec1, t1, y, dt) VALUES (7, 0.1, 1e-7, '-0.5', 1, 69, '0001-01-01')`,
	`UPDATE oracle.keyless SET b = 'two' WHERE a = 2`,
	`DELETE FROM oracle.keyless WHERE a = 1`,
	`BEGIN`,
	`INSERT INTO oracle.types (id, tm, tm6) VALUES (8, '-00:00:00.000001', '123:45:06.7')`,
	`UPDATE oracle.types SET sdflt = NULL, ts0 = '2001-02-03 04:05:06' WHERE id = 8`,
	`COMMIT`,
}

// oracleMariaDBCols are the column types MariaDB has and MySQL has not,
// or has differently (JSON is LONGTEXT with a JSON_VALID check on
// MariaDB, kept as typed), in tables of their own beside oracle.types on
// MariaDB, with a zero TIMESTAMP in a NOT NULL column with a default.
// UUID has a table of its own, oracle.uuids: sluice's parser of SHOW
// CREATE TABLE does not know the type, so a table with a UUID column has
// no defaults in sluice (docs/FORMAT.md). INET4 and INET6 are not run:
// Debezium 3.5.0's MariaDB DDL parser fails on both ("no viable
// alternative at input ... inet4"), and the connector stops at the
// table; nor a UUID with a DEFAULT, on which its snapshot stops
// ("Unexpected value for JDBC type 1111 and column ud UUID DEFAULT VALUE
// ...").
var oracleMariaDBTables = []string{
	"CREATE TABLE oracle.mariadb (id INT NOT NULL PRIMARY KEY, j JSON, jl LONGTEXT, tsz TIMESTAMP(3) NOT NULL DEFAULT '2001-02-03 04:05:06.789')",
	"CREATE TABLE oracle.uuids (id INT NOT NULL PRIMARY KEY, u UUID)",
}

// oracleMariaDBRows follow oracleRows on MariaDB. The first keeps the
// zero YEAR out of the snapshots: MariaDB's JDBC driver, which Debezium
// reads a snapshot with, fails on it (java.sql.Date.valueOf in
// YearColumn.getDefaultText), and Debezium stops. The stream has it
// (oracleMariaDBWrites).
var oracleMariaDBRows = []string{
	`UPDATE oracle.types SET y = 1999 WHERE id = 4`,
	`INSERT INTO oracle.mariadb VALUES (1, '{}', '', '0000-00-00 00:00:00')`,
	`INSERT INTO oracle.mariadb VALUES (2, '{ "a" : [1, 2.50, 1e3, -0.0],\n  "b": {"c": "\\u00e9\\"q 😀"}, "n": null }', 'x', '2038-01-19 03:14:07.999')`,
	`INSERT INTO oracle.mariadb VALUES (3, '[1, "two", true]', '{"not": "checked"}', DEFAULT)`,
	`INSERT INTO oracle.mariadb (id) VALUES (4)`,
	`INSERT INTO oracle.mariadb (id, j) VALUES (5, '"just a string"')`,
	// A UUID with trailing zero bytes (the binlog drops them) and a
	// time-based one (MariaDB stores its groups swapped).
	`INSERT INTO oracle.uuids VALUES (1, '00000000-0000-0000-0000-000000000000'), (2, 'ffffffff-ffff-ffff-ffff-ffffffffffff'),
	  (3, '123e4567-e89b-12d3-a456-426614174000'), (4, NULL), (5, '6ccd780c-baba-1026-9564-5b8c656024db')`,
}

// oracleMariaDBWrites follow oracleWrites on MariaDB: the zero YEAR in
// the stream, and taken out again for the snapshots of the modes.
var oracleMariaDBWrites = []string{
	`UPDATE oracle.types SET y = 0 WHERE id = 40`,
	`UPDATE oracle.types SET y = 1999 WHERE y = 0`,
	`UPDATE oracle.mariadb SET j = '{"updated": true}' WHERE id IN (1, 4)`,
	`UPDATE oracle.mariadb SET id = 30 WHERE id = 3`,
	`DELETE FROM oracle.mariadb WHERE id = 5`,
	`UPDATE oracle.mariadb SET tsz = '0000-00-00 00:00:00' WHERE id = 2`,
	`INSERT INTO oracle.mariadb (id, j) VALUES (6, '  [ ]  ')`,
	`UPDATE oracle.uuids SET u = '123e4567-e89b-12d3-a456-426614174001' WHERE id IN (1, 4)`,
	`UPDATE oracle.uuids SET id = 30 WHERE id = 3`,
	`DELETE FROM oracle.uuids WHERE id = 5`,
	`INSERT INTO oracle.uuids VALUES (6, 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a00'), (7, '00000000-0000-0000-0000-000000000100')`,
}

// allowedDiff names the fields that may differ from Debezium's, each with
// its reason (docs/FORMAT.md, "Verified against Debezium"). A path is the
// member names from the value's top (schemas: inside "payload"), "*" for
// any.
var allowedDiff = map[string]string{
	"ts_ms":          "the envelope's time is taken when the connector handles the event",
	"ts_us":          "as ts_ms",
	"ts_ns":          "as ts_ms",
	"source.version": "the connector's version string: Debezium's 3.6.1.Final (MariaDB: 3.5.0.Final), sluice's sluice-<version>",
}

// openDiff are differences from Debezium that the oracle found and that
// are not fixed yet: sluice bugs, each listed in docs/FORMAT.md ("Verified
// against Debezium"). They are logged, not failed on, so that any new
// difference fails the test; one that is fixed leaves this list and
// FORMAT.md's. "(bytes)" stands for values equal as JSON but not as bytes.
var openDiff = map[string]string{}

// allowedSnapshotDiff are allowed in snapshot records only.
var allowedSnapshotDiff = map[string]string{
	"source.ts_ms": "a snapshot row's source time is the time of reading it",
	"source.ts_us": "as source.ts_ms",
	"source.ts_ns": "as source.ts_ms",
}

func TestDebeziumOracle(t *testing.T) {
	bin := buildSluice(t)
	testenv.ForEachFlavor(t, func(t *testing.T, flavor position.Flavor) { debeziumOracle(t, bin, flavor) })
}

// debeziumOracle runs the oracle on a server of flavor: MySQL read by
// Debezium 3.6.1's MySQL connector, MariaDB by Debezium 3.5.0's MariaDB
// connector (each Debezium's JVM started on first use).
func debeziumOracle(t *testing.T, bin string, flavor position.Flavor) {
	ctx := context.Background()
	dbz := debeziumT(t, dbzharness.VersionFor(flavor))
	db := testenv.StartT(t, testenv.Options{Flavor: flavor})
	ddl := []string{
		"CREATE DATABASE oracle",
		"CREATE TABLE oracle.types (" + strings.Join(oracleCols, ", ") + ")",
		"CREATE TABLE oracle.keyless (a INT, b VARCHAR(10))",
	}
	rows, writes := oracleRows, oracleWrites
	tables := `oracle\.(types|keyless)`
	if flavor == position.MariaDB {
		ddl = append(ddl, oracleMariaDBTables...)
		rows = append(append([]string(nil), rows...), oracleMariaDBRows...)
		writes = append(append([]string(nil), writes...), oracleMariaDBWrites...)
		tables = `oracle\.(types|keyless|mariadb|uuids)`
	}
	// Zero dates and dates with zero parts (MySQL's default sql_mode
	// refuses them).
	lax := "SET SESSION sql_mode = ''"
	if err := db.Exec(ctx, append(append([]string{lax}, ddl...), rows...)...); err != nil {
		t.Fatal(err)
	}
	serverID := uint32(5400)
	props := func(mode string) map[string]string {
		serverID++
		p := dbzharness.PropsFor(flavor, db.Host, db.Port, db.User, db.Password, tables, serverID)
		p["snapshot.mode"] = mode
		p["tombstones.on.delete"] = "false" // tail writes no tombstones (a Kafka sink does)
		return p
	}
	tail := func(t *testing.T, args ...string) (plain, schemas []dbzharness.Record) {
		args = append([]string{"tail", "--source", db.URL(), "--tables", "oracle.*", "--format", "debezium", "--keys"}, args...)
		out, _ := run(t, bin, args...)
		plain = tailRecords(t, out)
		out, _ = run(t, bin, append(args, "--schemas")...)
		return plain, tailRecords(t, out)
	}
	compare := func(t *testing.T, plain, schemas, theirs []dbzharness.Record, snapshot bool) {
		if snapshot {
			// Both read the tables in an order of their own (Debezium's
			// varies from run to run): compared table by table, each in
			// the order read. Which table's rows carry "first" and
			// "last" follows that order, so the markers are checked in
			// each one's order, then compared as the table's first and
			// last (snapshotMarkers).
			snapshotMarkers(t, "sluice", plain, false)
			snapshotMarkers(t, "sluice --schemas", schemas, true)
			snapshotMarkers(t, "Debezium", theirs, false)
			byTable(plain, false)
			byTable(schemas, true)
			byTable(theirs, false)
		}
		for i, r := range theirs {
			if want := "sluice.oracle."; !strings.HasPrefix(r.Topic, want) {
				t.Errorf("record %d: Debezium's topic %q", i, r.Topic)
			}
		}
		t.Run("schemas=false", func(t *testing.T) { compareWithDebezium(t, plain, theirs, false, snapshot, nil) })
		t.Run("schemas=true", func(t *testing.T) { compareWithDebezium(t, schemas, theirs, true, snapshot, nil) })
	}

	t.Run("snapshot", func(t *testing.T) {
		plain, schemas := tail(t, "--snapshot", "only")
		// initial_only leaves the engine running once the snapshot is
		// done: the capture ends 2 s after the last record (one more than
		// sluice's would show).
		recs, took, err := dbz.Capture(ctx, props("initial_only"), len(plain)+1, 2*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("Debezium snapshot: %d records in %v", len(recs), took.Round(time.Millisecond))
		if os.Getenv("SLUICE_ORACLE_DUMP") != "" {
			t.Logf("Debezium's log:\n%s", dbz.Log())
		}
		compare(t, plain, schemas, recs, true)
	})

	var from, fromGTIDs, end string
	t.Run("stream", func(t *testing.T) {
		// Debezium streams from where it starts (snapshot.mode=no_data):
		// the writes wait for its binlog dump connection.
		from = masterPos(t, db)
		fromGTIDs = gtidExecuted(t, db)
		done := make(chan captureResult, 1)
		go func() {
			recs, took, err := dbz.Capture(ctx, props("no_data"), 1000, 3*time.Second)
			done <- captureResult{recs, took, err}
		}()
		waitForBinlogDump(t, db, done)
		if err := db.Exec(ctx, append([]string{lax}, writes...)...); err != nil {
			t.Fatal(err)
		}
		end = masterPos(t, db)
		plain, schemas := tail(t, "--snapshot", "never", "--from", from, "--to", end)
		r := <-done
		if r.err != nil {
			t.Fatal(r.err)
		}
		t.Logf("Debezium stream: %d records in %v (3 s of it the idle wait at the end)", len(r.recs), r.took.Round(time.Millisecond))
		compare(t, plain, schemas, r.recs, false)
	})

	// Debezium's other modes that FORMAT.md claims, two combinations that
	// take each value once: the snapshot again, and the stream's range
	// again (Debezium started at its first position through an offset
	// preset in its offset store).
	for _, m := range oracleModes {
		t.Run(m.name, func(t *testing.T) {
			var opts []string
			withModes := func(p map[string]string) map[string]string {
				for k, v := range m.opts {
					p[k] = v
				}
				return p
			}
			for k, v := range m.opts {
				opts = append(opts, "--format-option", k+"="+v)
			}
			t.Run("snapshot", func(t *testing.T) {
				plain, schemas := tail(t, append([]string{"--snapshot", "only"}, opts...)...)
				recs, _, err := dbz.Capture(ctx, withModes(props("initial_only")), len(plain)+1, 2*time.Second)
				if err != nil {
					t.Fatal(err)
				}
				compare(t, plain, schemas, recs, true)
			})
			t.Run("stream", func(t *testing.T) {
				if end == "" {
					t.Skip("the default mode's stream did not run")
				}
				plain, schemas := tail(t, append([]string{"--snapshot", "never", "--from", from, "--to", end}, opts...)...)
				f, p, _ := strings.Cut(from, ":")
				pos, err := strconv.ParseUint(p, 10, 32)
				if err != nil {
					t.Fatal(err)
				}
				pr := withModes(props("recovery"))
				for k, v := range dbzharness.StartAt(fmt.Sprintf("sluice-oracle-at-%d", serverID), "sluice", f, uint32(pos), fromGTIDs) {
					pr[k] = v
				}
				recs, _, err := dbz.Capture(ctx, pr, len(plain), 3*time.Second)
				if err != nil {
					t.Fatal(err)
				}
				compare(t, plain, schemas, recs, false)
			})
		})
	}
}

// oracleModes are the combinations of Debezium's modes other than its
// defaults that the oracle runs: between them every value FORMAT.md
// claims for each option.
var oracleModes = []struct {
	name string
	opts map[string]string
}{
	{"decimal=string,time=connect,bigint=precise,binary=base64", map[string]string{
		"decimal.handling.mode": "string", "time.precision.mode": "connect", "bigint.unsigned.handling.mode": "precise", "binary.handling.mode": "base64"}},
	{"decimal=double,binary=hex", map[string]string{"decimal.handling.mode": "double", "binary.handling.mode": "hex"}},
}

// gtidExecuted is the server's GTID set: MySQL's @@gtid_executed,
// MariaDB's @@gtid_binlog_pos.
func gtidExecuted(t *testing.T, db *testenv.Server) string {
	t.Helper()
	q := "SELECT @@GLOBAL.gtid_executed"
	if db.Flavor == position.MariaDB {
		q = "SELECT @@GLOBAL.gtid_binlog_pos"
	}
	rs, err := db.Query(context.Background(), q)
	if err != nil {
		t.Fatal(err)
	}
	g, _ := rs.GetString(0, 0)
	return strings.ReplaceAll(g, "\n", "")
}

// snapshotMarkers checks the source.snapshot markers of a snapshot's
// records in the order written, as Debezium sets them: "first" on the
// first record, "last" on the last, each table's first and last records
// "first_in_data_collection" and "last_in_data_collection" (last, first,
// a table's last, a table's first, in that precedence), "true" on the
// rest. It then rewrites each record's marker (in both of a record's
// values) to the one it would carry were its table read alone and
// neither first nor last of the snapshot, so that records compared
// table by table compare the tables' own markers.
func snapshotMarkers(t *testing.T, who string, recs []dbzharness.Record, schemas bool) {
	t.Helper()
	type src struct {
		Table, Snapshot string
	}
	marker := func(r dbzharness.Record) src {
		var v struct {
			Source  src `json:"source"`
			Payload struct {
				Source src `json:"source"`
			} `json:"payload"`
		}
		if err := json.Unmarshal(r.Value, &v); err != nil {
			t.Fatalf("%s: a record's value is not JSON: %v: %s", who, err, r.Value)
		}
		if schemas {
			return v.Payload.Source
		}
		return v.Source
	}
	firstOf, lastOf := map[string]int{}, map[string]int{}
	for i, r := range recs {
		m := marker(r)
		if _, ok := firstOf[m.Table]; !ok {
			firstOf[m.Table] = i
		}
		lastOf[m.Table] = i
	}
	for i, r := range recs {
		m := marker(r)
		want := "true"
		switch {
		case i == len(recs)-1:
			want = "last"
		case i == 0:
			want = "first"
		case lastOf[m.Table] == i:
			want = "last_in_data_collection"
		case firstOf[m.Table] == i:
			want = "first_in_data_collection"
		}
		if m.Snapshot != want {
			t.Errorf("%s: record %d of %d (table %s): source.snapshot %q, want %q", who, i, len(recs), m.Table, m.Snapshot, want)
		}
	}
	for i := range recs {
		m := marker(recs[i])
		role := "true" // the record's marker were its table read alone
		switch i {
		case lastOf[m.Table]:
			role = "last_in_data_collection"
		case firstOf[m.Table]:
			role = "first_in_data_collection"
		}
		from, to := []byte(`"snapshot":"`+m.Snapshot+`"`), []byte(`"snapshot":"`+role+`"`)
		recs[i].Value = bytes.Replace(recs[i].Value, from, to, 1)
		recs[i].SchemaValue = bytes.Replace(recs[i].SchemaValue, from, to, 1)
	}
}

// byTable sorts records by their source.table, stably.
func byTable(recs []dbzharness.Record, schemas bool) {
	table := func(r dbzharness.Record) string {
		var v struct {
			Source  struct{ Table string } `json:"source"`
			Payload struct {
				Source struct{ Table string } `json:"source"`
			} `json:"payload"`
		}
		json.Unmarshal(r.Value, &v)
		if schemas {
			return v.Payload.Source.Table
		}
		return v.Source.Table
	}
	sort.SliceStable(recs, func(i, j int) bool { return table(recs[i]) < table(recs[j]) })
}

// captureResult is a Debezium capture run in the background.
type captureResult struct {
	recs []dbzharness.Record
	took time.Duration
	err  error
}

// waitForBinlogDump waits until a replica (Debezium) reads the binlog, and
// fails the test if the capture ends first.
func waitForBinlogDump(t *testing.T, db *testenv.Server, done <-chan captureResult) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		select {
		case r := <-done:
			t.Fatalf("Debezium stopped before it read the binlog (%d records): %v", len(r.recs), r.err)
		default:
		}
		rs, err := db.Query(context.Background(), "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE COMMAND LIKE 'Binlog Dump%'")
		if err != nil {
			t.Fatal(err)
		}
		if n, _ := rs.GetString(0, 0); n != "0" {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatal("Debezium did not start reading the binlog in 2 minutes")
}

// tailRecords parses tail --keys output, leaving out schema-change events
// (Debezium runs with include.schema.changes=false here).
func tailRecords(t *testing.T, out string) []dbzharness.Record {
	t.Helper()
	var recs []dbzharness.Record
	for _, l := range strings.Split(strings.TrimRight(out, "\n"), "\n") {
		if l == "" {
			continue
		}
		k, v, ok := strings.Cut(l, "\t")
		if !ok {
			t.Fatalf("tail --keys line without a tab: %.200s", l)
		}
		if strings.Contains(k, `"databaseName"`) {
			continue
		}
		r := dbzharness.Record{Value: json.RawMessage(v)}
		if k != "null" {
			r.Key = json.RawMessage(k)
		}
		recs = append(recs, r)
	}
	return recs
}

// compareWithDebezium compares sluice's records with Debezium's, one by
// one: keys and values as JSON, each member apart from the allowed ones,
// and then as bytes with the allowed members' values replaced. It reports
// every difference, grouped by field. open adds open differences of this
// comparison only: a field's path with every index written "[]"
// ("tableChanges[].table.columns[].typeName"), or "(key)", with the
// reason.
var indexRE = regexp.MustCompile(`\[\d+\]`)

func compareWithDebezium(t *testing.T, mine, theirs []dbzharness.Record, schemas, snapshot bool, open map[string]string) {
	t.Helper()
	if os.Getenv("SLUICE_ORACLE_DUMP") != "" {
		for i := range max(len(mine), len(theirs)) {
			if i < len(mine) {
				t.Logf("sluice   %d: %s\t%s", i, mine[i].Key, mine[i].Value)
			}
			if i < len(theirs) {
				k, v := theirs[i].Key, theirs[i].Value
				if schemas {
					k, v = theirs[i].SchemaKey, theirs[i].SchemaValue
				}
				t.Logf("debezium %d: %s\t%s", i, k, v)
			}
		}
	}
	if len(mine) != len(theirs) {
		t.Errorf("sluice wrote %d records, Debezium %d", len(mine), len(theirs))
	}
	type diff struct {
		n       int
		example string
	}
	diffs := map[string]*diff{}
	noted := 0
	note := func(path, ex string) {
		noted++
		d := diffs[path]
		if d == nil {
			d = &diff{example: ex}
			diffs[path] = d
		}
		d.n++
	}
	allowed := func(path string) bool {
		if schemas {
			path = strings.TrimPrefix(path, "payload.")
		}
		_, ok := allowedDiff[path]
		if !ok && snapshot {
			_, ok = allowedSnapshotDiff[path]
		}
		return ok
	}
	isOpen := func(path string) (string, bool) {
		if schemas {
			path = strings.TrimPrefix(path, "payload.")
		}
		if why, ok := openDiff[path]; ok {
			return why, ok
		}
		path = indexRE.ReplaceAllString(path, "[]")
		if why, ok := open[path]; ok {
			return why, ok
		}
		for p, why := range open {
			if under, ok := strings.CutSuffix(p, "*"); ok && strings.HasPrefix(path, under) {
				return why, true
			}
		}
		return "", false
	}
	byteDiffs, byteExample := 0, ""
	for i := range min(len(mine), len(theirs)) {
		m, d := mine[i], theirs[i]
		if schemas {
			d.Key, d.Value = d.SchemaKey, d.SchemaValue
		}
		if !jsonEqual(m.Key, d.Key) {
			note("(key)", fmt.Sprintf("sluice %s, Debezium %s", m.Key, d.Key))
		} else if !bytes.Equal(m.Key, d.Key) {
			note("(key bytes)", fmt.Sprintf("sluice %s, Debezium %s", m.Key, d.Key))
		}
		if m.Value == nil || d.Value == nil { // a tombstone
			if m.Value != nil || d.Value != nil {
				note("(value)", fmt.Sprintf("record %d: sluice %.300s, Debezium %.300s", i, m.Value, d.Value))
			}
			continue
		}
		mv, err := decodeJSON(m.Value)
		if err != nil {
			t.Fatalf("record %d: sluice's value is not JSON: %v", i, err)
		}
		dv, err := decodeJSON(d.Value)
		if err != nil {
			t.Fatalf("record %d: Debezium's value is not JSON: %v", i, err)
		}
		var walk func(path string, a, b any)
		walk = func(path string, a, b any) {
			am, aok := a.(map[string]any)
			bm, bok := b.(map[string]any)
			if aok && bok {
				keys := map[string]bool{}
				for k := range am {
					keys[k] = true
				}
				for k := range bm {
					keys[k] = true
				}
				for k := range keys {
					p := k
					if path != "" {
						p = path + "." + k
					}
					walk(p, am[k], bm[k])
				}
				return
			}
			as, aok := a.([]any)
			bs, bok := b.([]any)
			if aok && bok && len(as) == len(bs) {
				for j := range as {
					walk(fmt.Sprintf("%s[%d]", path, j), as[j], bs[j])
				}
				return
			}
			if !jsonEqual(mustJSON(a), mustJSON(b)) && !allowed(path) {
				note(path, fmt.Sprintf("record %d: sluice %.300s, Debezium %.300s", i, mustJSON(a), mustJSON(b)))
			}
		}
		before := noted
		walk("", mv, dv)
		// Bytes: a record equal to Debezium's as JSON (the allowed members
		// apart) must be equal as bytes once the allowed members hold
		// Debezium's values.
		if noted == before {
			if got := normalise(m.Value, d.Value, schemas, snapshot); !bytes.Equal(got, d.Value) {
				byteDiffs++
				if byteExample == "" {
					byteExample = fmt.Sprintf("record %d: %s", i, firstDifference(got, d.Value))
				}
			}
		}
	}
	paths := make([]string, 0, len(diffs))
	for p := range diffs {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		if why, ok := isOpen(p); ok {
			t.Logf("open difference at %s in %d records (%s), e.g. %s", p, diffs[p].n, why, diffs[p].example)
			continue
		}
		t.Errorf("differs from Debezium at %s in %d records, e.g. %s", p, diffs[p].n, diffs[p].example)
	}
	if byteDiffs > 0 {
		if why, ok := isOpen("(bytes)"); ok {
			t.Logf("open difference: %d values equal Debezium's as JSON differ as bytes (%s), e.g. %s", byteDiffs, why, byteExample)
		} else {
			t.Errorf("%d values equal Debezium's as JSON differ as bytes, e.g. %s", byteDiffs, byteExample)
		}
	}
	if len(theirs) == 0 {
		t.Error("Debezium wrote no record")
	}
}

// normalise is sluice's value with the allowed members replaced by
// Debezium's text, byte for byte elsewhere: the replacement is done on
// the bytes so that sluice's own member order and number formatting stay.
func normalise(mine, theirs json.RawMessage, schemas, snapshot bool) []byte {
	out := append([]byte(nil), mine...)
	payload := func(v []byte) []byte {
		if !schemas {
			return v
		}
		var w struct {
			Payload json.RawMessage `json:"payload"`
		}
		json.Unmarshal(v, &w)
		return w.Payload
	}
	mp, tp := payload(mine), payload(theirs)
	replace := func(member string, inSource bool) {
		get := func(v []byte) []byte {
			if inSource {
				var s struct {
					Source json.RawMessage `json:"source"`
				}
				json.Unmarshal(v, &s)
				v = s.Source
			}
			var m map[string]json.RawMessage
			json.Unmarshal(v, &m)
			return m[member]
		}
		a, b := get(mp), get(tp)
		if a == nil || b == nil {
			return
		}
		out = bytes.Replace(out, []byte(`"`+member+`":`+string(a)), []byte(`"`+member+`":`+string(b)), 1)
	}
	// source's members come first in the bytes, then the envelope's.
	replace("version", true)
	if snapshot {
		for _, m := range []string{"ts_ms", "ts_us", "ts_ns"} {
			replace(m, true)
		}
	}
	// The envelope's ts_* are the last members: replace from the end.
	for _, m := range []string{"ts_ms", "ts_us", "ts_ns"} {
		var em map[string]json.RawMessage
		json.Unmarshal(mp, &em)
		var tm map[string]json.RawMessage
		json.Unmarshal(tp, &tm)
		a, b := em[m], tm[m]
		if a == nil || b == nil {
			continue
		}
		old := []byte(`"` + m + `":` + string(a))
		if k := bytes.LastIndex(out, old); k >= 0 {
			out = append(out[:k:k], append([]byte(`"`+m+`":`+string(b)), out[k+len(old):]...)...)
		}
	}
	return out
}

// firstDifference shows where a and b part, with some context.
func firstDifference(a, b []byte) string {
	i := 0
	for i < len(a) && i < len(b) && a[i] == b[i] {
		i++
	}
	from := max(i-40, 0)
	return fmt.Sprintf("at byte %d: sluice …%s…, Debezium …%s…", i, a[from:min(i+40, len(a))], b[from:min(i+40, len(b))])
}

func mustJSON(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}

func jsonEqual(a, b []byte) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	x, err1 := decodeJSON(a)
	y, err2 := decodeJSON(b)
	if err1 != nil || err2 != nil {
		return bytes.Equal(a, b)
	}
	return bytes.Equal(mustJSON(x), mustJSON(y))
}

// decodeJSON decodes with numbers kept as their text, so that 1 and 1.0,
// or a large integer and its float, differ.
func decodeJSON(b []byte) (any, error) {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	err := d.Decode(&v)
	return v, err
}
