package binlog_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/sluice-cdc/sluice/internal/testenv"
)

// testdataFiles are binlog files captured from MariaDB by
// TestRegenerateTestdata (run with SLUICE_REGEN_TESTDATA=1). They seed the
// fuzz targets and drive the file-reading tests and examples.
var testdataFiles = map[string]testenv.Options{
	"mariadb-full.bin":       {RowMetadata: "FULL"},
	"mariadb-minimal.bin":    {RowMetadata: "MINIMAL"},
	"mariadb-compressed.bin": {RowMetadata: "FULL", Compressed: true},
}

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

func TestRegenerateTestdata(t *testing.T) {
	if os.Getenv("SLUICE_REGEN_TESTDATA") == "" {
		t.Skip("set SLUICE_REGEN_TESTDATA=1 to capture binlog/testdata/*.bin from a fresh MariaDB")
	}
	for name, opts := range testdataFiles {
		db := testenv.StartT(t, opts)
		exec(t, db, testdataWorkload...)
		exec(t, db, "FLUSH BINARY LOGS")
		data, err := os.ReadFile(filepath.Join(db.DataDir(), "mysql-bin.000001"))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join("testdata", name), data, 0o644); err != nil {
			t.Fatal(err)
		}
		db.Close()
		_ = context.Background()
	}
}
