package binlog_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"math"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/sluice-cdc/sluice/binlog"
	"github.com/sluice-cdc/sluice/codec"
	"github.com/sluice-cdc/sluice/internal/testenv"
	"github.com/sluice-cdc/sluice/position"
)

// A column of the differential table: its definition, how to SELECT it as
// text, and how to compare that text with sluice's JSON value.
type diffCol struct {
	name, def string
	sel       string // SELECT expression; default CAST(name AS CHAR)
	cmp       string // exact, float32, float64, decimal, datetime, timestamp, string, hex, set, json
}

var diffCols = []diffCol{
	{"id", "INT NOT NULL PRIMARY KEY", "", "exact"},
	{"ti", "TINYINT", "", "exact"}, {"tiu", "TINYINT UNSIGNED", "", "exact"},
	{"si", "SMALLINT", "", "exact"}, {"siu", "SMALLINT UNSIGNED", "", "exact"},
	{"mi", "MEDIUMINT", "", "exact"}, {"miu", "MEDIUMINT UNSIGNED", "", "exact"},
	{"i", "INT", "", "exact"}, {"iu", "INT UNSIGNED", "", "exact"},
	{"bi", "BIGINT", "", "exact"}, {"biu", "BIGINT UNSIGNED", "", "exact"},
	{"dec1", "DECIMAL(65,30)", "", "decimal"}, {"dec2", "DECIMAL(10,2)", "", "decimal"}, {"dec3", "DECIMAL(5,0)", "", "decimal"},
	{"f", "FLOAT", "", "float32"}, {"d", "DOUBLE", "", "float64"},
	{"dt", "DATE", "", "string"}, {"dtm", "DATETIME", "", "datetime"}, {"dtm3", "DATETIME(3)", "", "datetime"},
	{"dtm6", "DATETIME(6)", "", "datetime"}, {"ts6", "TIMESTAMP(6) NULL", "", "timestamp"}, {"ts0", "TIMESTAMP NULL", "", "timestamp"},
	{"tm", "TIME", "", "string"}, {"tm6", "TIME(6)", "", "string"}, {"y", "YEAR", "CAST(y+0 AS CHAR)", "exact"},
	{"c", "CHAR(10)", "", "string"}, {"vc", "VARCHAR(255) CHARACTER SET utf8mb4", "", "string"},
	{"l1", "VARCHAR(50) CHARACTER SET latin1", "", "string"}, {"txt", "TEXT CHARACTER SET utf8mb4", "", "string"},
	{"bn", "BINARY(4)", "HEX(bn)", "hex"}, {"vb", "VARBINARY(20)", "HEX(vb)", "hex"}, {"bl", "BLOB", "HEX(bl)", "hex"},
	{"e", "ENUM('x','y','z')", "", "string"}, {"st", "SET('a','b','c','d')", "", "set"},
	{"b1", "BIT(1)", "CAST(b1+0 AS CHAR)", "exact"}, {"b64", "BIT(64)", "CAST(b64+0 AS CHAR)", "exact"},
	{"j", "JSON", "", "json"}, {"g", "GEOMETRY", "HEX(g)", "hex"},
}

var diffWrites = []string{
	`INSERT INTO app.types VALUES (1, -128, 0, -32768, 0, -8388608, 0, -2147483648, 0, -9223372036854775808, 0,
	  '-99999999999999999999999999999999999.999999999999999999999999999999', -12345678.90, -99999,
	  -3.40282e38, -1.7976931348623157e308, '1000-01-01', '1000-01-01 00:00:00', '1000-01-01 00:00:00.001', '1000-01-01 00:00:00.000001',
	  '1970-01-01 00:00:01.000000', '1970-01-01 00:00:01', '-838:59:59', '-838:59:59.000000', 1901,
	  '', '', '', '', x'00000000', x'', x'', 'x', '', 0, 0, '[]', ST_GeomFromText('POINT(0 0)'))`,
	`INSERT INTO app.types VALUES (2, 127, 255, 32767, 65535, 8388607, 16777215, 2147483647, 4294967295, 9223372036854775807, 18446744073709551615,
	  '99999999999999999999999999999999999.999999999999999999999999999999', 99999999.99, 99999,
	  3.40282e38, 1.7976931348623157e308, '9999-12-31', '9999-12-31 23:59:59', '9999-12-31 23:59:59.999', '9999-12-31 23:59:59.999999',
	  '2038-01-19 03:14:07.999999', '2038-01-19 03:14:07', '838:59:59', '838:59:59.999999', 2155,
	  'abcdefghij', 'héllo wörld 😀 中文', 'café ÿ ©', REPEAT('long text ', 500), x'ffffffff', x'00ff00ff', x'deadbeef00',
	  'z', 'a,b,c,d', 1, 18446744073709551615, '{"a":[1,2.5,"x",null,true],"b":{"c":"\\u00e9\\"q"}}', ST_GeomFromText('POLYGON((0 0,1 0,1 1,0 0))'))`,
	`INSERT INTO app.types (id) VALUES (3)`,
	`INSERT INTO app.types VALUES (4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, '0.000000000000000000000000000001', 0.01, 0,
	  1.5, 0.1, '0000-00-00', '0000-00-00 00:00:00', '2024-02-29 12:34:56.5', '2024-02-29 12:34:56.000123',
	  '0000-00-00 00:00:00', '2024-06-01 12:00:00', '00:00:00', '-00:00:01.5', 0,
	  'a', 'tab\there "q" \\\\ back', 'Ünïcödé', 'line1\nline2', x'0a0b', x'00', x'00',
	  'y', 'b,d', 0, 1, '"just a string"', ST_GeomFromText('LINESTRING(0 0,1 1,2 2)'))`,
	`INSERT INTO app.types (id, dt, dtm, i) VALUES (5, '2020-00-15', '2020-05-00 10:00:00', 5)`,
	`UPDATE app.types SET vc = 'updated', i = i + 1, j = '{"updated":true}', dec2 = -0.5 WHERE id IN (1, 2)`,
	`UPDATE app.types SET id = 40 WHERE id = 4`,
	`DELETE FROM app.types WHERE id = 3`,
	`INSERT INTO app.types (id, f, d, dec1) VALUES (6, 0.1, 123456789.123456789, '-0.5')`,
}

func TestDifferentialAllTypes(t *testing.T) {
	for name, opts := range map[string]testenv.Options{
		"metadata=FULL":            {RowMetadata: "FULL"},
		"metadata=MINIMAL":         {RowMetadata: "MINIMAL"},
		"metadata=FULL,compressed": {RowMetadata: "FULL", Compressed: true},
	} {
		t.Run(name, func(t *testing.T) { differential(t, opts) })
	}
}

func differential(t *testing.T, opts testenv.Options) {
	db := testenv.StartT(t, opts)
	ctx := context.Background()
	var defs []string
	for _, c := range diffCols {
		defs = append(defs, c.name+" "+c.def)
	}
	exec(t, db, "SET GLOBAL sql_mode = ''", "SET GLOBAL time_zone = '+00:00'", "CREATE DATABASE app",
		"CREATE TABLE app.types ("+strings.Join(defs, ", ")+")")
	start := masterStatus(t, db)
	exec(t, db, diffWrites...)
	stop := masterStatus(t, db)

	r := newReader(t, db, func(c *binlog.Config) { c.Start, c.Stop = start, stop })
	enc := codec.NewEncoder(codec.Source{Name: "diff"})
	state := map[string]map[string]json.RawMessage{}
	var buf []byte
	for {
		txn, err := r.Next(ctx)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		for i := range txn.Changes {
			buf = enc.AppendChange(buf[:0], txn, &txn.Changes[i])
			if !json.Valid(bytes.TrimSpace(buf)) {
				t.Fatalf("invalid JSON line: %s", buf)
			}
			ev, err := codec.DecodeLine(buf)
			if err != nil {
				t.Fatalf("decoding %s: %v", buf, err)
			}
			if ev.IsDDL() {
				continue
			}
			if ev.Before != nil {
				delete(state, string(ev.Before["id"]))
			}
			if ev.After != nil {
				state[string(ev.After["id"])] = ev.After
			}
		}
		txn.Release() // encoded: later transactions reuse its memory
	}

	// What the server holds, as text.
	c, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var sels []string
	for _, col := range diffCols {
		sel := col.sel
		if sel == "" {
			sel = "CAST(" + col.name + " AS CHAR)"
		}
		sels = append(sels, sel)
	}
	if _, err := c.Execute("SET NAMES utf8mb4"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Execute("SET time_zone = '+00:00'"); err != nil {
		t.Fatal(err)
	}
	rs, err := c.Execute("SELECT " + strings.Join(sels, ", ") + " FROM app.types ORDER BY id")
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	if rs.RowNumber() != len(state) {
		t.Fatalf("server has %d rows, sluice's output rebuilds %d", rs.RowNumber(), len(state))
	}
	for row := 0; row < rs.RowNumber(); row++ {
		id, _ := rs.GetString(row, 0)
		got, ok := state[id]
		if !ok {
			t.Errorf("row id=%s missing from sluice's output", id)
			continue
		}
		for ci, col := range diffCols {
			isNull, _ := rs.IsNull(row, ci)
			want, _ := rs.GetString(row, ci)
			g, ok := got[col.name]
			if !ok {
				t.Errorf("id=%s column %s absent from output", id, col.name)
				continue
			}
			if err := compareCell(col.cmp, isNull, want, g); err != nil {
				t.Errorf("id=%s column %s (%s): server %q, sluice %s: %v", id, col.name, col.def, want, g, err)
			}
		}
	}
}

// masterStatus returns the server's current binlog position (SHOW MASTER
// STATUS, SHOW BINARY LOG STATUS on MySQL 8.4+), with MySQL's executed
// GTID set.
func masterStatus(t *testing.T, db *testenv.Server) position.Position {
	t.Helper()
	c, err := db.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	p, err := binlog.BinlogPosition(c)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func compareCell(kind string, isNull bool, want string, got json.RawMessage) error {
	if isNull {
		if string(got) != "null" {
			return errors.New("want null")
		}
		return nil
	}
	var gs string
	quoted := len(got) > 0 && got[0] == '"'
	if quoted {
		if err := json.Unmarshal(got, &gs); err != nil {
			return err
		}
	}
	fail := errors.New("values differ")
	switch kind {
	case "exact":
		if string(got) != want {
			return fail
		}
	case "decimal":
		if !quoted || gs != want {
			return errors.New("want the exact decimal as a JSON string")
		}
	case "float32", "float64":
		bits := 64
		if kind == "float32" {
			bits = 32
		}
		w, err1 := strconv.ParseFloat(want, bits)
		g, err2 := strconv.ParseFloat(string(got), bits)
		if err1 != nil || err2 != nil {
			return errors.Join(err1, err2)
		}
		// The server prints FLOAT with 6 significant digits: compare at that precision.
		if kind == "float32" {
			if math.Abs(w-g) > math.Abs(w)*1e-5 {
				return fail
			}
		} else if w != g {
			return fail
		}
	case "string":
		if !quoted || gs != want {
			return fail
		}
	case "datetime":
		if !quoted || gs != strings.Replace(want, " ", "T", 1) {
			return fail
		}
	case "timestamp":
		if !quoted || gs != strings.Replace(want, " ", "T", 1)+"Z" {
			return fail
		}
	case "hex":
		raw, err := hex.DecodeString(want)
		if err != nil {
			return err
		}
		if !quoted || gs != base64.StdEncoding.EncodeToString(raw) {
			return fail
		}
	case "set":
		var names []string
		if err := json.Unmarshal(got, &names); err != nil {
			return err
		}
		if strings.Join(names, ",") != want {
			return fail
		}
	case "json":
		var w, g any
		if err := json.Unmarshal([]byte(want), &w); err != nil {
			return err
		}
		if err := json.Unmarshal(got, &g); err != nil {
			return err
		}
		if !reflect.DeepEqual(w, g) {
			return fail
		}
	default:
		return errors.New("unknown comparison " + kind)
	}
	return nil
}
