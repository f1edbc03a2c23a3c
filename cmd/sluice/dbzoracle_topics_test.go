//go:build linux

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluice-cdc/sluice/internal/dbzharness"
	"github.com/sluice-cdc/sluice/internal/kafkatest"
	"github.com/sluice-cdc/sluice/internal/testenv"
	"github.com/sluice-cdc/sluice/internal/testenv/kafkaenv"
	"github.com/sluice-cdc/sluice/position"
)

// oracleTopicWrites are the statements of TestDebeziumOracleTopics: data
// changes in transactions of one and of two tables, a key change, deletes
// (tombstones), a keyless table, TRUNCATE, and DDL of every kind a
// schema-change topic carries: CREATE, ALTER with each column change,
// RENAME, DROP.
var oracleTopicWrites = []string{
	`INSERT INTO oracle2.a VALUES (1, 'one', 1.5), (2, 'two', NULL)`,
	`BEGIN`,
	`INSERT INTO oracle2.a VALUES (3, 'three', 3)`,
	`INSERT INTO oracle2.k VALUES (10, 'ten')`,
	`UPDATE oracle2.a SET v = 'uno' WHERE id = 1`,
	`COMMIT`,
	`UPDATE oracle2.a SET id = 20 WHERE id = 2`,
	`DELETE FROM oracle2.a WHERE id = 3`,
	`DELETE FROM oracle2.k WHERE n = 10`,
	`CREATE TABLE oracle2.c (id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY, s VARCHAR(10) NOT NULL DEFAULT 'x' COMMENT 'a comment') COMMENT 'table c'`,
	`INSERT INTO oracle2.c (s) VALUES ('c1'), (DEFAULT)`,
	`ALTER TABLE oracle2.a ADD COLUMN n INT NOT NULL DEFAULT 7 AFTER id`,
	`ALTER TABLE oracle2.a MODIFY COLUMN v VARCHAR(40) CHARACTER SET latin1`,
	`ALTER TABLE oracle2.a CHANGE COLUMN d dd DECIMAL(8,3)`,
	`INSERT INTO oracle2.a VALUES (4, 8, 'four', 4.25)`,
	`ALTER TABLE oracle2.a DROP COLUMN dd`,
	`UPDATE oracle2.a SET v = 'four!' WHERE id = 4`,
	`RENAME TABLE oracle2.c TO oracle2.c2`,
	`INSERT INTO oracle2.c2 (s) VALUES ('c3')`,
	`DROP TABLE oracle2.c2`,
	`TRUNCATE TABLE oracle2.k`,
	`INSERT INTO oracle2.k VALUES (11, 'eleven')`,
	`TRUNCATE TABLE oracle2.a`,
	// A TRUNCATE of a table no row of which was read: its schema is the
	// schema history's (History.Table).
	`CREATE TABLE oracle2.e (id INT PRIMARY KEY, v VARCHAR(5))`,
	`TRUNCATE TABLE oracle2.e`,
	`CREATE TABLE oracle2.d1 (id INT PRIMARY KEY)`,
	`CREATE TABLE oracle2.d2 (id INT PRIMARY KEY)`,
	`DROP TABLE oracle2.d1, oracle2.d2`,
	// DDL of a database neither captures: Debezium writes it on the
	// schema-change topic all the same (its history keeps every table's).
	`CREATE DATABASE oracle_other`,
	`CREATE TABLE oracle_other.x (id INT PRIMARY KEY)`,
	`INSERT INTO oracle_other.x VALUES (1)`,
	`DROP DATABASE oracle_other`,
}

// corpusRefused are the scripts of Debezium's corpus that a server refuses
// a statement of, with the reason.
var corpusRefused = map[position.Flavor]map[string]string{
	position.MySQL: {
		"geometry_test_5":   "written for MySQL 5.x: MySQL 8 has no spatial reference system with SRID 1234 (geometry_test_8 is the script's MySQL 8 version)",
		"maria_vector_test": "MariaDB 11.7's VECTOR functions (Vec_FromText)",
	},
	position.MariaDB: {
		"default_value_generated": "MariaDB takes no NOT NULL on a generated column",
		"json_test":               "MariaDB has no CAST(... AS JSON)",
		"maria_vector_test":       "VECTOR is MariaDB 11.7's, the test server is 10.11",
		"vector_test":             "VECTOR is MySQL 9's and MariaDB 11.7's, the test server is 10.11",
	},
}

// topicRenamed maps the topics whose names Debezium and sluice make
// differently to sluice's: Debezium makes each UTF-16 unit beyond ASCII
// '_' ("中文" is "__", as "ab" would be were it beyond ASCII: two tables can
// meet on one topic) and keeps a '.' in a name; sluice's mapping
// (docs/SINKS-kafka.md, "Topic names") keeps a name beyond ASCII apart
// ("_u4e2d_u6587") and keeps '.' for the template's separators.
var topicRenamed = map[string]string{
	"sluice.strategy_test.dbz5743__":               "sluice.strategy_test.dbz5743_u4e2d_u6587",
	"sluice.topic_name_sanitization_test.DBZ.1834": "sluice.topic_name_sanitization_test.DBZ_1834",
}

// sluiceTopic is the topic sluice writes for Debezium's topic tp.
func sluiceTopic(tp string) string {
	if s, ok := topicRenamed[tp]; ok {
		return s
	}
	return tp
}

// corpusDB is the database a corpus script runs in: its name, "-" made
// "_".
func corpusDB(script string) string { return strings.ReplaceAll(script, "-", "_") }

// TestDebeziumOracleTopics: `sluice run` into a real Kafka (format
// debezium, schemas off and on, Debezium's topic names, transaction
// metadata, TRUNCATE as op "t", tombstones) against Debezium itself
// (Debezium Embedded with include.schema.changes, provide.transaction.
// metadata, skipped.operations=none, tombstones.on.delete) reading the same
// binlog range, which holds oracleTopicWrites and then Debezium's own
// connector test scripts (dbzharness.Corpus): every topic Debezium writes
// (the tables', the schema-change topic, the transaction topic) holds the
// same records, in order, compared as TestDebeziumOracle compares them.
func TestDebeziumOracleTopics(t *testing.T) {
	bin := buildSluice(t)
	testenv.ForEachFlavor(t, func(t *testing.T, flavor position.Flavor) { debeziumOracleTopics(t, bin, flavor) })
}

func debeziumOracleTopics(t *testing.T, bin string, flavor position.Flavor) {
	ctx := context.Background()
	dbz := debeziumT(t, dbzharness.VersionFor(flavor))
	db := testenv.StartT(t, testenv.Options{Flavor: flavor})
	if err := db.Exec(ctx, "CREATE DATABASE oracle2",
		"CREATE TABLE oracle2.a (id INT NOT NULL PRIMARY KEY, v VARCHAR(20), d DECIMAL(6,2))",
		"CREATE TABLE oracle2.k (n INT, s VARCHAR(10))"); err != nil {
		t.Fatal(err)
	}
	kc := kafkaenv.Start(t, nil) // its own: the topics are Debezium's names

	// Debezium's own connector test scripts, each in a database of its
	// name, after oracleTopicWrites.
	corpus, err := dbzharness.Corpus(ctx, dbzharness.VersionFor(flavor))
	if err != nil {
		t.Fatal(err)
	}
	dbs := []string{"oracle2"}
	for _, sc := range corpus {
		dbs = append(dbs, corpusDB(sc.Name))
	}
	// Debezium, from the current position on.
	props := dbzharness.PropsFor(flavor, db.Host, db.Port, db.User, db.Password, "", 5600)
	delete(props, "table.include.list")
	props["database.include.list"] = strings.Join(dbs, ",")
	props["snapshot.mode"] = "no_data"
	props["include.schema.changes"] = "true"
	props["provide.transaction.metadata"] = "true"
	props["skipped.operations"] = "none"
	props["tombstones.on.delete"] = "true"
	from := masterPos(t, db)
	done := make(chan captureResult, 1)
	go func() {
		// The idle end waits past the gap between the schema snapshot's
		// records and the first write.
		recs, took, err := dbz.Capture(ctx, props, 10000, 6*time.Second)
		done <- captureResult{recs, took, err}
	}()
	waitForBinlogDump(t, db, done)
	// sluice run, from the same position, into Kafka, started as
	// Debezium is, before the writes (its schema history is the tables'
	// definitions at its start): two sinks, schemas off under Debezium's
	// topic names and on under the same names prefixed "s.".
	dir := t.TempDir()
	var sinks strings.Builder
	for _, s := range []struct{ name, prefix, schemas string }{{"plain", "", "false"}, {"schemas", "s.", "true"}} {
		fmt.Fprintf(&sinks, `  - name: %s
    type: kafka
    format: {name: debezium, schemas: %s, provide.transaction.metadata: true, skipped.operations: none}
    kafka:
      brokers: [%q]
      partitions: 1
      request_timeout: 3s
      topic: "%s{source}.{db}.{table}"
      schema_change_topic: "%s{source}"
      transaction_topic: "%s{source}.transaction"
`, s.name, s.schemas, kc.Brokers()[0], s.prefix, s.prefix, s.prefix)
	}
	cfg := fmt.Sprintf(`pipeline: oracle
source:
  name: sluice
  url: %s
  server_id: 5601
  tables: [%s]
  start: %q
  snapshot: {mode: never}
sinks:
%scheckpoint: {path: %s, interval: 100ms}
`, db.URL(), strings.Join(dbs, ".*, ")+".*", from, sinks.String(), filepath.Join(dir, "ckpt.json"))
	log, _ := startRun(t, bin, dir, cfg)

	waitForBinlogDumps(t, db, 2)
	if err := db.Exec(ctx, oracleTopicWrites...); err != nil {
		t.Fatal(err)
	}
	// A script the server refuses a statement of stops there (what came
	// before is in the binlog, and compared); corpusRefused names each
	// with the reason.
	for _, sc := range corpus {
		name := corpusDB(sc.Name)
		// Zero dates allowed (MySQL's default sql_mode refuses them), as
		// Debezium's zero-date scripts need.
		pre := []string{"CREATE DATABASE `" + name + "`", "USE `" + name + "`",
			"SET SESSION sql_mode = REPLACE(REPLACE(@@sql_mode, 'NO_ZERO_IN_DATE', ''), 'NO_ZERO_DATE', '')"}
		err := db.Exec(ctx, append(pre, sc.Statements...)...)
		why, refused := corpusRefused[flavor][sc.Name]
		switch {
		case err != nil && !refused:
			t.Errorf("Debezium's script %s: %v", sc.Name, err)
		case err != nil:
			t.Logf("Debezium's script %s stops where the server refuses it (%s): %v", sc.Name, why, err)
		case refused:
			t.Errorf("Debezium's script %s runs whole, but corpusRefused says the server refuses it (%s)", sc.Name, why)
		}
	}
	r := <-done
	if r.err != nil {
		t.Fatal(r.err)
	}
	// no_data writes the schema of the captured tables first, as
	// schema-change records of the snapshot: sluice, started at a
	// position, has none.
	var theirs []dbzharness.Record
	schemaSnapshot := 0
	for _, rec := range r.recs {
		if rec.Topic == "sluice" && !bytes.Contains(rec.Value, []byte(`"snapshot":"false"`)) {
			schemaSnapshot++
			continue
		}
		theirs = append(theirs, rec)
	}
	t.Logf("Debezium: %d records (%d of them its schema snapshot's, left out) in %v", len(r.recs), schemaSnapshot, r.took.Round(time.Millisecond))

	// The topics Debezium wrote, in the order first written.
	var topics []string
	for _, rec := range theirs {
		if !slices.Contains(topics, rec.Topic) {
			topics = append(topics, rec.Topic)
		}
	}
	want := map[string][]dbzharness.Record{}
	for _, rec := range theirs {
		want[rec.Topic] = append(want[rec.Topic], rec)
	}
	// Every topic sluice made, read whole: kept by Debezium's name.
	debeziumName := map[string]string{}
	for _, tp := range topics {
		debeziumName[sluiceTopic(tp)] = tp
	}
	var readErr error
	read := func() (plain, schemas map[string][]dbzharness.Record, n int) {
		rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		names, err := kafkatest.Topics(rctx, kc.Brokers())
		if err != nil {
			readErr = err
			return nil, nil, 0
		}
		recs, err := kafkatest.ReadAll(rctx, kc.Brokers(), names...)
		if err != nil {
			readErr = err
			return nil, nil, 0
		}
		plain, schemas = map[string][]dbzharness.Record{}, map[string][]dbzharness.Record{}
		for _, rec := range recs {
			name := strings.TrimPrefix(rec.Topic, "s.")
			if dn, ok := debeziumName[name]; ok {
				name = dn
			}
			d := dbzharness.Record{Topic: name, Key: rec.Key, Value: rec.Value}
			if strings.HasPrefix(rec.Topic, "s.") {
				schemas[d.Topic] = append(schemas[d.Topic], d)
			} else {
				plain[d.Topic] = append(plain[d.Topic], d)
			}
			n++
		}
		return plain, schemas, n
	}
	// sluice has written all once its topics stop growing (it writes
	// fewer records than Debezium: debeziumLeftOut); the comparison
	// tells what is missing.
	deadline := time.Now().Add(90 * time.Second)
	var plain, schemas map[string][]dbzharness.Record
	last, since := -1, time.Now()
	for {
		var n int
		plain, schemas, n = read()
		if n != last {
			last, since = n, time.Now()
		} else if n > 0 && time.Since(since) > 5*time.Second {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("sluice's topics still grow after 90 s: %d records (last read error: %v), Debezium's %d (twice: schemas off and on)\n%s", n, readErr, len(theirs), log.String())
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if dir := os.Getenv("SLUICE_ORACLE_DUMP"); dir != "" {
		dumpTopics(t, filepath.Join(dir, string(flavor)), topics, want, plain)
	}
	for _, tp := range topics {
		t.Run(tp, func(t *testing.T) {
			open := topicOpen(flavor, tp)
			t.Run("schemas=false", func(t *testing.T) {
				theirs, mine := leaveOut(t, tp, "sluice", dbs, want[tp], plain[tp])
				compareWithDebezium(t, mine, theirs, false, false, open)
			})
			t.Run("schemas=true", func(t *testing.T) {
				theirs, mine := leaveOut(t, tp, "sluice", dbs, want[tp], schemas[tp])
				compareWithDebezium(t, mine, theirs, true, false, open)
			})
		})
	}
	// And nothing Debezium does not write: every topic sluice made is one
	// of Debezium's.
	made, err := kafkatest.Topics(ctx, kc.Brokers())
	if err != nil {
		t.Fatal(err)
	}
	for _, tp := range made {
		if name := strings.TrimPrefix(tp, "s."); debeziumName[name] == "" {
			t.Errorf("sluice wrote topic %s, which Debezium does not", tp)
		}
	}
	if t.Failed() {
		t.Logf("sluice's log:\n%s", log.String())
	}
}

// dumpTopics writes, for triage, each topic's records as Debezium and
// sluice (schemas off) wrote them, one JSON value a line, into dir as
// <topic>.debezium.jsonl and <topic>.sluice.jsonl (SLUICE_ORACLE_DUMP=dir).
func dumpTopics(t *testing.T, dir string, topics []string, theirs, ours map[string][]dbzharness.Record) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tp := range topics {
		for side, recs := range map[string][]dbzharness.Record{"debezium": theirs[tp], "sluice": ours[tp]} {
			var b bytes.Buffer
			for _, r := range recs {
				fmt.Fprintf(&b, "%s\t%s\n", r.Key, r.Value)
			}
			if err := os.WriteFile(filepath.Join(dir, tp+"."+side+".jsonl"), b.Bytes(), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// waitForBinlogDumps waits until n replicas read the binlog.
func waitForBinlogDumps(t *testing.T, db *testenv.Server, n int) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		rs, err := db.Query(context.Background(), "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE COMMAND LIKE 'Binlog Dump%'")
		if err != nil {
			t.Fatal(err)
		}
		if got, _ := rs.GetInt(0, 0); got >= int64(n) {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("%d replicas did not start reading the binlog in 2 minutes", n)
}

// debeziumLeftOut are records Debezium writes and sluice by design does
// not, each with the reason (docs/FORMAT.md, "Verified against
// Debezium"): keyed by a name the test logs with the count it left out.
var debeziumLeftOut = map[string]string{
	"keyless tombstone": "Debezium writes a tombstone with a null key after a delete from a table without a primary key; sluice writes none: there is no key to compact, and a compacted topic refuses a null key",
	"empty transaction": "Debezium writes a BEGIN and an END (event_count 0) for a transaction none of whose changes it captures; sluice writes transaction metadata for the transactions it delivers changes of",
	"unended BEGIN":     "Debezium 3.5.0's MariaDB connector writes a BEGIN for each DDL statement and TRUNCATE (MariaDB logs them in a GTID group of their own) and never its END; sluice writes BEGIN and END around data changes only",
	"uncaptured DDL":    "Debezium writes on the schema-change topic DDL of databases outside database.include.list (CREATE DATABASE, and the DDL of a database it does not capture); sluice writes the DDL of the databases it captures",
	"routine DDL":       "sluice writes every DDL statement of a captured database on the schema-change topic, a CREATE FUNCTION or PROCEDURE too; Debezium leaves routines out",
}

// leaveOut removes from Debezium's records of topic tp those that
// debeziumLeftOut names, and from sluice's the routine DDL, and logs how
// many.
// captured are the databases both capture; schemaTopic is the
// schema-change topic.
func leaveOut(t *testing.T, tp, schemaTopic string, captured []string, theirs, mine []dbzharness.Record) ([]dbzharness.Record, []dbzharness.Record) {
	t.Helper()
	left := map[string]int{}
	type info struct {
		Status     string `json:"status"`
		ID         string `json:"id"`
		EventCount *int   `json:"event_count"`
		DB         string `json:"databaseName"`
		DDL        string `json:"ddl"`
		Source     struct {
			File string `json:"file"`
			Pos  int64  `json:"pos"`
		} `json:"source"`
	}
	parse := func(r dbzharness.Record) info {
		var in info
		var env struct {
			Payload json.RawMessage `json:"payload"`
		}
		v := r.Value
		if json.Unmarshal(v, &env) == nil && env.Payload != nil {
			v = env.Payload
		}
		_ = json.Unmarshal(v, &in)
		return in
	}
	where := func(in info) string { return fmt.Sprintf("%s:%d", in.Source.File, in.Source.Pos) }
	var keptTheirs []dbzharness.Record
	switch {
	case tp == schemaTopic:
		minePos := map[string]bool{}
		for _, r := range mine {
			minePos[where(parse(r))] = true
		}
		for _, r := range theirs {
			in := parse(r)
			switch {
			case !slices.ContainsFunc(captured, func(db string) bool { return strings.EqualFold(db, in.DB) }):
				left["uncaptured DDL"]++
			case !minePos[where(in)] && strings.HasPrefix(strings.ToUpper(in.DDL), "CREATE DATABASE IF NOT EXISTS"):
				left["uncaptured DDL"]++ // a database that exists: sluice's history sees no change
			default:
				keptTheirs = append(keptTheirs, r)
			}
		}
		theirPos := map[string]bool{}
		for _, r := range keptTheirs {
			theirPos[where(parse(r))] = true
		}
		var keptMine []dbzharness.Record
		for _, r := range mine {
			if in := parse(r); !theirPos[where(in)] && routineDDL.MatchString(in.DDL) {
				left["routine DDL"]++
				continue
			}
			keptMine = append(keptMine, r)
		}
		mine = keptMine
	case strings.HasSuffix(tp, ".transaction"):
		ended := map[string]bool{}
		for _, r := range theirs {
			if in := parse(r); in.Status == "END" {
				ended[in.ID] = in.EventCount != nil && *in.EventCount > 0
			}
		}
		for _, r := range theirs {
			in := parse(r)
			nonEmpty, hasEnd := ended[in.ID]
			switch {
			case !hasEnd:
				left["unended BEGIN"]++
			case !nonEmpty:
				left["empty transaction"]++
			default:
				keptTheirs = append(keptTheirs, r)
			}
		}
	default:
		for _, r := range theirs {
			if len(r.Key) == 0 && len(r.Value) == 0 {
				left["keyless tombstone"]++
				continue
			}
			keptTheirs = append(keptTheirs, r)
		}
	}
	for what, n := range left {
		t.Logf("left out: %d records, %s (%s)", n, what, debeziumLeftOut[what])
	}
	return keptTheirs, mine
}

var routineDDL = regexp.MustCompile(`(?is)^\s*(CREATE|DROP|ALTER)\b.*\b(FUNCTION|PROCEDURE)\b`)

// Reasons of the open differences TestDebeziumOracleTopics finds; each is
// in docs/FORMAT.md ("Verified against Debezium").
const (
	whyDeclared = "Debezium's schema follows the column as the CREATE TABLE wrote it (BOOLEAN is boolean with default TRUE, FLOAT(24) keeps its length, CHARACTER SET utf8 is utf8, an ENUM member keeps its quoting 'c,\\'d'); sluice's schema history keeps it as the server stores it (TINYINT(1) with default 1, FLOAT, utf8mb3, 'c,''d'): open"
	whyMariaDB  = "Debezium 3.5.0's MariaDB connector writes comments (doc, tableChanges) without include.schema.comments, where 3.6.1's MySQL connector does not; sluice writes them as 3.6.1: allowed"
	whyOnUpdate = "Debezium 3.5.0's MariaDB connector marks a column with ON UPDATE CURRENT_TIMESTAMP neither autoIncremented nor generated, 3.6.1's MySQL connector both; sluice writes them as 3.6.1: allowed"
	whyTxnTrunc = "Debezium 3.5.0's MariaDB connector gives a TRUNCATE's op \"t\" event a transaction block (of the BEGIN it never ends); sluice, none: allowed"
	whyReal     = "Debezium's parser reads REAL as FLOAT (schema float); MySQL stores REAL as DOUBLE (without sql_mode REAL_AS_FLOAT) and sluice writes double, losing no digit: allowed"
	whyRow      = "Debezium's DDL event keeps the row index of the last rows event before it; sluice's is 0: allowed"
	whyJSONTime = "a DATETIME inside a MySQL JSON value: Debezium's stream writes no fraction when it is zero (its binlog library's own JSON formatter), where its snapshot, MySQL's JSON text and sluice (stream and snapshot alike) write six digits: allowed"
	whyJSONName = "a MariaDB JSON column created while Debezium streams is io.debezium.data.Json in its schema (the type the CREATE TABLE wrote), one created before it started a plain string (SHOW CREATE TABLE's LONGTEXT), as sluice writes both: open, as the declared types"
)

// topicOpen are the open and allowed differences of topic tp on flavor,
// for compareWithDebezium: a path ending in ".*" stands for every path
// under it.
func topicOpen(flavor position.Flavor, tp string) map[string]string {
	m := map[string]string{}
	add := func(why string, paths ...string) {
		for _, p := range paths {
			m[p] = why
		}
	}
	switch tp {
	case "sluice": // the schema-change topic
		add(whyRow, "source.row")
		add(whyDeclared, "tableChanges[].table.columns[].typeName", "tableChanges[].table.columns[].typeExpression",
			"tableChanges[].table.columns[].jdbcType", "tableChanges[].table.columns[].length", "tableChanges[].table.columns[].scale",
			"tableChanges[].table.columns[].charsetName", "tableChanges[].table.defaultCharsetName", "tableChanges[].table.columns[].defaultValueExpression",
			"tableChanges[].table.columns[].enumValues[]")
		if flavor == position.MariaDB {
			add(whyMariaDB, "tableChanges[].table.columns[].comment", "tableChanges[].table.comment")
			add(whyOnUpdate, "tableChanges[].table.columns[].autoIncremented", "tableChanges[].table.columns[].generated")
		}
	case "sluice.boolean_test.BOOLEAN_TEST", "sluice.default_value.BOOLEAN_TABLE", "sluice.tinyint_test.DBZ1773", "sluice.tinyint_test.DBZ2085":
		add(whyDeclared, "after.*", "schema.fields[].fields[].type", "schema.fields[].fields[].default")
	case "sluice.default_value.REAL_TABLE", "sluice.real_test.REAL_TEST":
		add(whyReal, "schema.fields[].fields[].type")
	case "sluice.oracle2.a", "sluice.oracle2.k", "sluice.oracle2.e":
		if flavor == position.MariaDB {
			add(whyTxnTrunc, "transaction")
		}
	case "sluice.json_test.dbz_126_jsontable":
		if flavor == position.MySQL {
			add(whyJSONTime, "after.json")
		} else {
			add(whyJSONName, "schema.fields[].fields[].name", "schema.fields[].fields[].version")
		}
	}
	if flavor == position.MariaDB {
		add(whyMariaDB, "schema.fields[].fields[].doc")
		if tp == "sluice.table_column_comment_test.dbz_4000_comment_test" {
			add(whyMariaDB, "(key)")
		}
	}
	return m
}
