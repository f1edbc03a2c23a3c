package codec

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/go-mysql-org/go-mysql/mysql"

	"github.com/sluice-cdc/sluice/binlog"
	"github.com/sluice-cdc/sluice/position"
)

// A MariaDB source is written as Debezium 3.5.0's MariaDB connector
// writes it (TestDebeziumOracle on MariaDB): source.connector "mariadb",
// the schemas named io.debezium.connector.mariadb.*, UUID as its text
// (a streamed one from the binlog's bytes without their trailing zeros,
// padded in front), JSON as the LONGTEXT it is there, a streamed zero
// TIMESTAMP as the instant 0. The encoder takes the flavor from the
// transactions it writes.
func TestDebeziumMariaDB(t *testing.T) {
	tb := &binlog.Table{Schema: "shop", Name: "t", PrimaryKey: []int{0}, Columns: []binlog.Column{
		{Name: "id", Type: mysql.MYSQL_TYPE_LONG, Kind: binlog.KindInt},
		{Name: "u", Type: mysql.MYSQL_TYPE_STRING, Meta: 0xfe10, Kind: binlog.KindBytes, Charset: "binary", UUID: true, Nullable: true},
		{Name: "j", Type: mysql.MYSQL_TYPE_BLOB, Meta: 4, Kind: binlog.KindJSON, Charset: "utf8mb4", Nullable: true},
		{Name: "ts", Type: mysql.MYSQL_TYPE_TIMESTAMP2, Meta: 3, Frac: 3, Kind: binlog.KindTimestamp, Nullable: true},
	}}
	uuid := []byte{0x12, 0x3e, 0x45, 0x67, 0xe8, 0x9b, 0x12, 0xd3, 0xa4, 0x56, 0x42, 0x66, 0x14, 0x17, 0x40, 0x00}
	row := binlog.Row{binlog.IntValue(1), binlog.BytesValue(binlog.KindBytes, uuid),
		binlog.BytesValue(binlog.KindJSON, []byte("{ \"a\" : [1, 2.50],\n \"b\": null }")), binlog.TimestampValue(0, 0)}
	at := func(f position.Flavor) *binlog.Txn {
		return &binlog.Txn{GTID: "0-1-5", CommitTime: time.UnixMilli(1699999999000), Begin: position.Position{Flavor: f}}
	}
	for _, schemas := range []bool{false, true} {
		enc := NewEncoder(Source{Name: "srv", ServerID: 7, Version: "1.0"}, WithFormat(Format{Name: FormatDebezium, Schemas: schemas}), WithClock(dbzFixedClock))
		ins := binlog.Change{Op: binlog.OpInsert, Table: tb, After: row, File: "mysql-bin.000001", Pos: 4}
		out := enc.AppendChange(nil, at(position.MariaDB), &ins)
		if !json.Valid(out) {
			t.Fatalf("not JSON: %s", out)
		}
		for _, want := range []string{
			`"connector":"mariadb"`,
			`"u":"00123e45-67e8-9b12-d3a4-564266141740"`,
			`"j":"{ \"a\" : [1, 2.50],\n \"b\": null }"`,
			`"ts":"1970-01-01T00:00:00.000Z"`,
		} {
			if !bytes.Contains(out, []byte(want)) {
				t.Errorf("schemas=%v: no %s in %s", schemas, want, out)
			}
		}
		if schemas {
			for _, want := range []string{
				`"name":"io.debezium.connector.mariadb.Source"`,
				`{"type":"string","optional":true,"name":"io.debezium.data.Uuid","version":1,"field":"u"}`,
				`{"type":"string","optional":true,"field":"j"}`,
			} {
				if !bytes.Contains(out, []byte(want)) {
					t.Errorf("no %s in the schema of %s", want, out)
				}
			}
			if bytes.Contains(out, []byte("connector.mysql")) {
				t.Errorf("a MySQL connector's name in %s", out)
			}
		}
		// A snapshot row's UUID is read as text: its 16 bytes as they are.
		snap := binlog.Change{Op: binlog.OpRead, Table: tb, After: row, File: "mysql-bin.000001", Pos: 4}
		st := at(position.MariaDB)
		st.Snapshot = true
		if out := enc.AppendChange(nil, st, &snap); !bytes.Contains(out, []byte(`"u":"123e4567-e89b-12d3-a456-426614174000"`)) {
			t.Errorf("snapshot row %s: want the UUID's text", out)
		}
		ddl := binlog.Change{Op: binlog.OpDDL, Query: "ALTER TABLE t ADD x INT", Schema: "shop", File: "mysql-bin.000001", Pos: 9}
		dv := enc.AppendChange(nil, at(position.MariaDB), &ddl)
		dk := enc.AppendKey(nil, &ddl)
		if !bytes.Contains(dv, []byte(`"connector":"mariadb"`)) {
			t.Errorf("schema change %s: want connector mariadb", dv)
		}
		if schemas && (!bytes.Contains(dv, []byte(`"name":"io.debezium.connector.mariadb.SchemaChangeValue"`)) ||
			!bytes.Contains(dk, []byte(`"name":"io.debezium.connector.mariadb.SchemaChangeKey"`))) {
			t.Errorf("schema change key %s, value %s: want the MariaDB connector's schema names", dk, dv)
		}
		// The same encoder given a MySQL transaction writes MySQL's.
		if out := enc.AppendChange(nil, at(position.MySQL), &ins); !bytes.Contains(out, []byte(`"connector":"mysql"`)) ||
			schemas && !strings.Contains(string(out), "io.debezium.connector.mysql.Source") {
			t.Errorf("MySQL transaction: %s", out)
		}
	}
}
