package binlog_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluice-cdc/sluice/internal/testenv"
	"github.com/sluice-cdc/sluice/position"
)

// testdataFile is a binlog file captured from a real server by
// TestRegenerateTestdata (run with SLUICE_REGEN_TESTDATA=1, or a file name
// prefix such as SLUICE_REGEN_TESTDATA=mysql9 to rewrite only those). The
// files seed the fuzz targets and drive the file-reading tests and
// examples.
type testdataFile struct {
	opts    testenv.Options
	changes int // row changes and DDL statements in the workload
}

var testdataFiles = map[string]testdataFile{
	// 2 DDL + 2 inserts + 1 update + 1 delete + 50 bulk inserts
	"mariadb-full.bin":       {testenv.Options{RowMetadata: "FULL"}, 56},
	"mariadb-minimal.bin":    {testenv.Options{RowMetadata: "MINIMAL"}, 56},
	"mariadb-compressed.bin": {testenv.Options{RowMetadata: "FULL", Compressed: true}, 56},
	// MySQL 9.7, with partial JSON updates logged: one more update (a
	// PARTIAL_UPDATE_ROWS_EVENT; inside a TRANSACTION_PAYLOAD_EVENT in the
	// compressed file).
	"mysql9-full.bin":       {testenv.Options{Flavor: position.MySQL, RowMetadata: "FULL", Extra: mysqlPartialJSON}, 57},
	"mysql9-minimal.bin":    {testenv.Options{Flavor: position.MySQL, RowMetadata: "MINIMAL", Extra: mysqlPartialJSON}, 57},
	"mysql9-compressed.bin": {testenv.Options{Flavor: position.MySQL, RowMetadata: "FULL", Compressed: true, Extra: mysqlPartialJSON}, 57},
}

var mysqlPartialJSON = []string{"--binlog-row-value-options=PARTIAL_JSON"}

var testdataWorkload = []string{
	"SET TIMESTAMP = 1700000000",
	"CREATE DATABASE shop",
	"CREATE TABLE shop.items (id INT UNSIGNED PRIMARY KEY, name VARCHAR(40) NOT NULL, price DECIMAL(8,2), added DATETIME(3), tags SET('new','sale'), kind ENUM('book','toy'), note TEXT, raw VARBINARY(8))",
	"BEGIN",
	"INSERT INTO shop.items VALUES (1, 'Dune', 9.99, '2023-11-14 22:13:20.125', 'new', 'book', 'a classic', x'00ff'), (2, 'Yo-yo', 2.50, '2023-11-14 22:13:21', 'new,sale', 'toy', NULL, NULL)",
	"COMMIT",
	"SET TIMESTAMP = 1700000060",
	"UPDATE shop.items SET price = 7.49, tags = 'sale' WHERE id = 1",
	"SET TIMESTAMP = 1700000120",
	"DELETE FROM shop.items WHERE id = 2",
	"SET TIMESTAMP = 1700000180",
	"INSERT INTO shop.items (id, name, note) SELECT seq + 100, CONCAT('bulk-', seq), REPEAT('long note text ', 20) FROM shop.seq_1_to_50",
}

// testdataWorkloadMySQL is the same workload on MySQL (no sequence
// engine), with MySQL's own column types and a partial JSON update.
var testdataWorkloadMySQL = []string{
	"SET TIMESTAMP = 1700000000",
	"CREATE DATABASE shop",
	"CREATE TABLE shop.items (id INT UNSIGNED PRIMARY KEY, name VARCHAR(40) NOT NULL, price DECIMAL(8,2), added DATETIME(3), tags SET('new','sale'), kind ENUM('book','toy'), note TEXT, raw VARBINARY(8), doc JSON, emb VECTOR(3), label VARCHAR(10) CHARACTER SET utf16)",
	"BEGIN",
	`INSERT INTO shop.items VALUES (1, 'Dune', 9.99, '2023-11-14 22:13:20.125', 'new', 'book', 'a classic', x'00ff', JSON_OBJECT('pages', 412, 'tags', JSON_ARRAY('sf', 'classic'), 'blurb', REPEAT('spice ', 30)), STRING_TO_VECTOR('[0.5,-1,2]'), 'dün€'),
	 (2, 'Yo-yo', 2.50, '2023-11-14 22:13:21', 'new,sale', 'toy', NULL, NULL, NULL, NULL, NULL)`,
	"COMMIT",
	"SET TIMESTAMP = 1700000060",
	"UPDATE shop.items SET price = 7.49, tags = 'sale' WHERE id = 1",
	`UPDATE shop.items SET doc = JSON_SET(doc, '$.tags[1]', 'epic', '$.stock', 3) WHERE id = 1`,
	"SET TIMESTAMP = 1700000120",
	"DELETE FROM shop.items WHERE id = 2",
	"SET TIMESTAMP = 1700000180",
	`INSERT INTO shop.items (id, name, note) WITH RECURSIVE seq(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM seq WHERE n < 50)
	 SELECT n + 100, CONCAT('bulk-', n), REPEAT('long note text ', 20) FROM seq`,
}

// testdataPartialDoc is the document the MySQL files' partial update
// leaves behind.
const testdataPartialDoc = `{"tags":["sf","epic"],"blurb":"` + "spice spice spice spice spice spice spice spice spice spice spice spice spice spice spice spice spice spice spice spice spice spice spice spice spice spice spice spice spice spice " + `","pages":412,"stock":3}`

func TestRegenerateTestdata(t *testing.T) {
	only := os.Getenv("SLUICE_REGEN_TESTDATA")
	if only == "" {
		t.Skip("set SLUICE_REGEN_TESTDATA=1 (or a file name prefix) to capture binlog/testdata/*.bin from fresh servers")
	}
	for name, f := range testdataFiles {
		if only != "1" && !strings.HasPrefix(name, only) {
			continue
		}
		db := testenv.StartT(t, f.opts)
		workload := testdataWorkload
		if f.opts.Flavor == position.MySQL {
			workload = testdataWorkloadMySQL
		}
		exec(t, db, "FLUSH BINARY LOGS") // the capture holds the workload alone
		file := masterStatus(t, db).File
		exec(t, db, workload...)
		exec(t, db, "FLUSH BINARY LOGS")
		data, err := os.ReadFile(filepath.Join(db.DataDir(), file))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join("testdata", name), data, 0o644); err != nil {
			t.Fatal(err)
		}
		db.Close()
	}
}
