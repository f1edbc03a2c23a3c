package binlog_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"strconv"
	"strings"
	"testing"

	"github.com/sluice-cdc/sluice/binlog"
	"github.com/sluice-cdc/sluice/codec"
	"github.com/sluice-cdc/sluice/internal/testenv"
	"github.com/sluice-cdc/sluice/position"
	"github.com/sluice-cdc/sluice/snapshot"
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

// diffTable is a table of the differential test: its columns, the column
// that identifies a row, and the statements that fill it.
type diffTable struct {
	name   string
	cols   []diffCol
	key    string
	create []string // statements that create it, on one connection; default from cols
}

func (dt diffTable) createSQL() []string {
	if dt.create != nil {
		return dt.create
	}
	var defs []string
	for _, c := range dt.cols {
		defs = append(defs, c.name+" "+c.def)
	}
	return []string{"CREATE TABLE app." + dt.name + " (" + strings.Join(defs, ", ") + ")"}
}

// diffCase is what the differential test checks on one flavor.
type diffCase struct {
	tables []diffTable
	setup  []string // global settings, before the tables are created
	writes []string
}

func diffCaseFor(f position.Flavor) diffCase {
	if f == position.MySQL {
		return mysqlDiffCase()
	}
	return diffCase{
		tables: []diffTable{{name: "types", cols: diffCols, key: "id"}},
		writes: diffWrites,
	}
}

func TestDifferentialAllTypes(t *testing.T) {
	testenv.ForEachFlavor(t, func(t *testing.T, f position.Flavor) {
		for _, tc := range []struct {
			name string
			opts testenv.Options
		}{
			{"metadata=FULL", testenv.Options{RowMetadata: "FULL"}},
			{"metadata=MINIMAL", testenv.Options{RowMetadata: "MINIMAL"}},
			{"metadata=FULL,compressed", testenv.Options{RowMetadata: "FULL", Compressed: true}},
			{"image=MINIMAL,metadata=FULL", testenv.Options{RowImage: "MINIMAL", RowMetadata: "FULL"}},
			{"image=MINIMAL,metadata=MINIMAL", testenv.Options{RowImage: "MINIMAL", RowMetadata: "MINIMAL"}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				tc.opts.Flavor = f
				differential(t, tc.opts, diffCaseFor(f))
			})
		}
	})
}

func differential(t *testing.T, opts testenv.Options, dc diffCase) {
	db := testenv.StartT(t, opts)
	ctx := context.Background()
	exec(t, db, "SET GLOBAL sql_mode = ''", "SET GLOBAL time_zone = '+00:00'")
	exec(t, db, dc.setup...)
	exec(t, db, "CREATE DATABASE app")
	for _, dt := range dc.tables {
		exec(t, db, dt.createSQL()...)
	}
	start := masterStatus(t, db)
	exec(t, db, dc.writes...)
	stop := masterStatus(t, db)

	// The rows rebuilt from sluice's output, by table and key; and each
	// change's message key.
	state := map[string]map[string]map[string]json.RawMessage{}
	for _, dt := range dc.tables {
		state[dt.name] = map[string]map[string]json.RawMessage{}
	}
	keyFromBefore := 0 // updates whose after image lacks the key
	keyOf := map[string]string{}
	for _, dt := range dc.tables {
		keyOf[dt.name] = dt.key
	}
	tables := map[string]*binlog.Table{} // the reader's definitions
	for _, ch := range readChanges(t, db, start, stop, nil) {
		tables[ch.table] = ch.tbl
		rows, key := state[ch.table], keyOf[ch.table]
		if rows == nil {
			t.Fatalf("change of unknown table %s", ch.table)
		}
		var old map[string]json.RawMessage
		if ch.before != nil {
			old = rows[string(ch.before[key])]
			delete(rows, string(ch.before[key]))
		}
		if ch.after != nil {
			// With binlog_row_image=MINIMAL an update's after image holds
			// only the columns it changed: the others keep their values.
			row := map[string]json.RawMessage{}
			if ch.op == "u" {
				maps.Copy(row, old)
			}
			maps.Copy(row, ch.after)
			rows[string(row[key])] = row
		}
		// The message key is the row's key: the after image's, the before
		// image's for a delete, and for an update whose after image lacks
		// the key (MINIMAL), the before image's.
		k, ok := ch.after[key]
		if !ok {
			k = ch.before[key]
			if ch.op == "u" {
				keyFromBefore++
			}
		}
		if want := fmt.Sprintf("{%q:%s}", key, k); len(k) == 0 || ch.key != want {
			t.Errorf("%s change %s of %s: message key %s, want %s", ch.op, k, ch.table, ch.key, want)
		}
	}

	if opts.RowImage == "MINIMAL" && keyFromBefore == 0 {
		t.Error("with binlog_row_image=MINIMAL no update's after image lacked its key: the key's fallback to the before image went untested")
	}

	// What the server holds, as text.
	c, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Execute("SET NAMES utf8mb4"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Execute("SET time_zone = '+00:00'"); err != nil {
		t.Fatal(err)
	}
	// The snapshot reads every value as the binlog has it: codec writes
	// each column of the snapshot's row exactly as the binlog's.
	for _, dt := range dc.tables {
		tbl := tables[dt.name]
		if tbl == nil || !tbl.FromBinlog {
			continue // names from information_schema: the same, but Scan needs FULL metadata's here
		}
		rows := state[dt.name]
		ki := tbl.ColumnIndex(dt.key)
		sc, err := db.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		// snapshot.SelectList's `e`+0 is a DOUBLE on MySQL, which Scan
		// does not take for an ENUM (yet), and which cannot hold every
		// 64-member SET: select the numbers as integers.
		var sel []string
		for _, col := range tbl.Columns {
			if col.Kind == binlog.KindEnum || col.Kind == binlog.KindSet {
				sel = append(sel, "CAST("+col.Name+" AS UNSIGNED) AS "+col.Name)
			} else {
				sel = append(sel, col.Name)
			}
		}
		err = snapshot.Scan(ctx, sc, tbl, "SELECT "+strings.Join(sel, ", ")+" FROM app."+dt.name, nil, func(row binlog.Row) error {
			n++
			id := string(codec.AppendValue(nil, &tbl.Columns[ki], row[ki]))
			for i := range tbl.Columns {
				col := &tbl.Columns[i]
				got := codec.AppendValue(nil, col, row[i])
				if want, ok := rows[id][col.Name]; ok && string(got) != string(want) {
					t.Errorf("%s %s=%s column %s: snapshot %s, binlog %s", dt.name, dt.key, id, col.Name, abbrevText(string(got)), abbrevText(string(want)))
				}
			}
			return nil
		})
		sc.Close()
		if err != nil {
			t.Fatalf("snapshot.Scan of %s: %v", dt.name, err)
		}
		if n != len(rows) {
			t.Errorf("%s: the snapshot reads %d rows, the binlog rebuilds %d", dt.name, n, len(rows))
		}
	}

	for _, dt := range dc.tables {
		var sels []string
		keyIdx := -1
		for i, col := range dt.cols {
			sel := col.sel
			if sel == "" {
				sel = "CAST(" + col.name + " AS CHAR)"
			}
			sels = append(sels, sel)
			if col.name == dt.key {
				keyIdx = i
			}
		}
		rs, err := c.Execute("SELECT " + strings.Join(sels, ", ") + " FROM app." + dt.name + " ORDER BY " + dt.key)
		if err != nil {
			t.Fatal(err)
		}
		rows := state[dt.name]
		if rs.RowNumber() != len(rows) {
			t.Fatalf("%s: server has %d rows, sluice's output rebuilds %d", dt.name, rs.RowNumber(), len(rows))
		}
		for row := 0; row < rs.RowNumber(); row++ {
			id, _ := rs.GetString(row, keyIdx)
			got, ok := rows[id]
			if !ok {
				t.Errorf("%s row %s=%s missing from sluice's output", dt.name, dt.key, id)
				continue
			}
			for ci, col := range dt.cols {
				isNull, _ := rs.IsNull(row, ci)
				want, _ := rs.GetString(row, ci)
				g, ok := got[col.name]
				if !ok && isNull && opts.RowImage == "MINIMAL" {
					continue // an INSERT with MINIMAL image logs only the columns it names; the others hold their default, NULL
				}
				if !ok {
					t.Errorf("%s %s=%s column %s absent from output", dt.name, dt.key, id, col.name)
					continue
				}
				if err := compareCell(col.cmp, isNull, want, g); err != nil {
					t.Errorf("%s %s=%s column %s (%s): server %s, sluice %s: %v", dt.name, dt.key, id, col.name, col.def, abbrevText(want), abbrevText(string(g)), err)
				}
			}
		}
		rs.Close()
	}
}

// abbrevText shortens long values in failure messages.
func abbrevText(s string) string {
	if len(s) > 300 {
		return strconv.Quote(s[:150]) + fmt.Sprintf("...(%d bytes)...", len(s)) + strconv.Quote(s[len(s)-100:])
	}
	return strconv.Quote(s)
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
		// Byte for byte: MySQL's text without insignificant spaces, which
		// is also what the snapshot writes for the document.
		var w bytes.Buffer
		if err := json.Compact(&w, []byte(want)); err != nil {
			return err
		}
		if w.String() != string(got) {
			return fail
		}
	case "vector":
		raw, err := hex.DecodeString(want)
		if err != nil {
			return err
		}
		var nums []json.Number
		d := json.NewDecoder(bytes.NewReader(got))
		d.UseNumber()
		if err := d.Decode(&nums); err != nil {
			return fmt.Errorf("not an array of numbers: %v", err)
		}
		if len(nums) != len(raw)/4 {
			return fmt.Errorf("%d numbers for %d floats", len(nums), len(raw)/4)
		}
		for k, n := range nums {
			f, err := strconv.ParseFloat(string(n), 32)
			if err != nil {
				return err
			}
			if math.Float32bits(float32(f)) != binary.LittleEndian.Uint32(raw[4*k:]) {
				return fmt.Errorf("element %d: %s, server %v", k, n, math.Float32frombits(binary.LittleEndian.Uint32(raw[4*k:])))
			}
		}
	default:
		return errors.New("unknown comparison " + kind)
	}
	return nil
}
