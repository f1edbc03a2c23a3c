package binlog_test

import (
	"fmt"
	"strings"
)

// members returns n ENUM or SET member literals: 'm0','m1',...
func members(n int) string {
	var m []string
	for i := range n {
		m = append(m, fmt.Sprintf("'m%d'", i))
	}
	return strings.Join(m, ",")
}

// insertSQL writes an INSERT of one row from column, expression pairs.
func insertSQL(table string, pairs ...string) string {
	var cols, vals []string
	for i := 0; i < len(pairs); i += 2 {
		cols = append(cols, pairs[i])
		vals = append(vals, pairs[i+1])
	}
	return "INSERT INTO app." + table + " (" + strings.Join(cols, ", ") + ") VALUES (" + strings.Join(vals, ", ") + ")"
}

// mysqlDiffCols are MySQL 9.7's column types: every integer width signed
// and unsigned, DECIMAL edges, every temporal type with several fsp,
// strings in utf8mb4, latin1, utf16, utf16le, utf32 and ucs2, every BLOB and
// TEXT size, ENUM and SET (one- and two-byte ENUMs, a 64-member SET), BIT,
// JSON with opaque values, spatial types with and without an SRID, VECTOR
// followed by character columns (whose charsets MySQL numbers counting the
// VECTOR as a character column), generated columns (VIRTUAL and STORED)
// and an INVISIBLE column.
var mysqlDiffCols = []diffCol{
	{"id", "INT NOT NULL PRIMARY KEY", "", "exact"},
	{"ti", "TINYINT", "", "exact"}, {"tiu", "TINYINT UNSIGNED", "", "exact"},
	{"si", "SMALLINT", "", "exact"}, {"siu", "SMALLINT UNSIGNED", "", "exact"},
	{"mi", "MEDIUMINT", "", "exact"}, {"miu", "MEDIUMINT UNSIGNED", "", "exact"},
	{"i", "INT", "", "exact"}, {"iu", "INT UNSIGNED", "", "exact"},
	{"bi", "BIGINT", "", "exact"}, {"biu", "BIGINT UNSIGNED", "", "exact"},
	{"dec1", "DECIMAL(65,30)", "", "decimal"}, {"dec2", "DECIMAL(10,2)", "", "decimal"}, {"dec3", "DECIMAL(5,0)", "", "decimal"},
	{"dec4", "DECIMAL(65,0)", "", "decimal"}, {"dec5", "DECIMAL(30,30)", "", "decimal"}, {"dec6", "DECIMAL(18,9)", "", "decimal"},
	{"f", "FLOAT", "", "float32"}, {"d", "DOUBLE", "", "float64"},
	{"dt", "DATE", "", "string"}, {"dtm", "DATETIME", "", "datetime"}, {"dtm1", "DATETIME(1)", "", "datetime"},
	{"dtm3", "DATETIME(3)", "", "datetime"}, {"dtm6", "DATETIME(6)", "", "datetime"},
	{"ts0", "TIMESTAMP NULL", "", "timestamp"}, {"ts2", "TIMESTAMP(2) NULL", "", "timestamp"}, {"ts6", "TIMESTAMP(6) NULL", "", "timestamp"},
	{"tm", "TIME", "", "string"}, {"tm1", "TIME(1)", "", "string"}, {"tm4", "TIME(4)", "", "string"}, {"tm6", "TIME(6)", "", "string"},
	{"y", "YEAR", "CAST(y+0 AS CHAR)", "exact"},
	{"c", "CHAR(10)", "", "string"}, {"vc", "VARCHAR(255) CHARACTER SET utf8mb4", "", "string"},
	{"l1", "VARCHAR(50) CHARACTER SET latin1", "", "string"}, {"c3", "CHAR(10) CHARACTER SET utf8mb3", "", "string"},
	{"u16", "VARCHAR(20) CHARACTER SET utf16", "", "string"}, {"u16le", "VARCHAR(20) CHARACTER SET utf16le", "", "string"},
	{"u32", "VARCHAR(20) CHARACTER SET utf32", "", "string"}, {"ucs", "VARCHAR(20) CHARACTER SET ucs2", "", "string"},
	{"c32", "CHAR(5) CHARACTER SET utf32", "", "string"}, {"t16", "TEXT CHARACTER SET utf16", "", "string"},
	{"tt", "TINYTEXT", "", "string"}, {"txt", "TEXT", "", "string"}, {"mt", "MEDIUMTEXT", "", "string"}, {"lt", "LONGTEXT", "", "string"},
	{"bn", "BINARY(4)", "HEX(bn)", "hex"}, {"vb", "VARBINARY(300)", "HEX(vb)", "hex"},
	{"tb", "TINYBLOB", "HEX(tb)", "hex"}, {"bl", "BLOB", "HEX(bl)", "hex"}, {"mb", "MEDIUMBLOB", "HEX(mb)", "hex"}, {"lb", "LONGBLOB", "HEX(lb)", "hex"},
	{"e", "ENUM('x','y','z')", "", "string"}, {"e2", "ENUM(" + members(300) + ")", "", "string"},
	{"st", "SET('a','b','c','d')", "", "set"}, {"st64", "SET(" + members(64) + ")", "", "set"},
	{"el1", "ENUM('é','ü','€') CHARACTER SET latin1", "", "string"},
	{"b1", "BIT(1)", "CAST(b1+0 AS CHAR)", "exact"}, {"b7", "BIT(7)", "CAST(b7+0 AS CHAR)", "exact"}, {"b64", "BIT(64)", "CAST(b64+0 AS CHAR)", "exact"},
	{"j", "JSON", "", "json"},
	{"g", "GEOMETRY", "HEX(g)", "hex"}, {"pt", "POINT SRID 4326", "HEX(pt)", "hex"}, {"poly", "POLYGON SRID 3857", "HEX(poly)", "hex"},
	{"gcol", "GEOMETRYCOLLECTION", "HEX(gcol)", "hex"},
	{"v", "VECTOR(5)", "HEX(v)", "vector"},
	{"av16", "VARCHAR(10) CHARACTER SET utf16", "", "string"}, {"avl1", "VARCHAR(10) CHARACTER SET latin1", "", "string"},
	{"v2", "VECTOR(1)", "HEX(v2)", "vector"},
	{"avu32", "TEXT CHARACTER SET utf32", "", "string"}, {"ae", "ENUM('ä','ö') CHARACTER SET latin1", "", "string"},
	{"gv", "BIGINT AS (i + 1) VIRTUAL", "", "exact"}, {"gs", "VARCHAR(300) AS (CONCAT(vc, '!')) STORED", "", "string"},
	{"gj", "JSON AS (JSON_OBJECT('id', id, 'l1', l1)) VIRTUAL", "", "json"},
	{"inv", "INT INVISIBLE", "", "exact"}, {"invs", "VARCHAR(10) CHARACTER SET utf16 INVISIBLE", "", "string"},
}

// mysqlGIPKCols is a table created without a primary key while
// sql_generate_invisible_primary_key is ON: MySQL adds my_row_id.
var mysqlGIPKCols = []diffCol{
	{"my_row_id", "", "", "exact"},
	{"a", "INT", "", "exact"}, {"b", "VARCHAR(20) CHARACTER SET utf16", "", "string"}, {"j", "JSON", "", "json"},
}

const mysqlJSONOpaque = `JSON_OBJECT('dt', CAST('2024-02-29 12:34:56.123456' AS DATETIME(6)), 'dt0', CAST('1000-01-01 00:00:00' AS DATETIME),
	'd', CAST('9999-12-31' AS DATE), 't', CAST('-838:59:59' AS TIME), 't6', CAST('12:00:00.000001' AS TIME(6)),
	'ts', CAST(TIMESTAMP'2038-01-19 03:14:07.999999' AS DATETIME(6)),
	'dec', CAST('-12345.678900' AS DECIMAL(12,6)), 'dec0', CAST(0 AS DECIMAL(65,30)), 'bigdec', CAST('99999999999999999999999999999999999.999999999999999999999999999999' AS DECIMAL(65,30)),
	'bin', CAST(x'00ff10' AS BINARY), 'bits', b'101', 'geo', ST_AsBinary(POINT(1, 2)),
	'u64', 18446744073709551615, 'i64', -9223372036854775808, 'u32', 4294967295, 'i16', -32768,
	'dbl', 1.5e300, 'dbl2', 0.1, 'dbl3', CAST(100 AS DOUBLE), 'dbl4', -1e-7, 'dbl5', 1e21,
	's', 'é"\\/\n\t\0', 'empty', '', 'emoji', '😀', 'nested', JSON_ARRAY(JSON_OBJECT(), JSON_ARRAY(), NULL, TRUE, FALSE))`

func mysqlDiffCase() diffCase {
	ins := func(pairs ...string) string { return insertSQL("types", pairs...) }
	writes := []string{
		ins("id", "1", "ti", "-128", "tiu", "0", "si", "-32768", "siu", "0", "mi", "-8388608", "miu", "0", "i", "-2147483648", "iu", "0",
			"bi", "-9223372036854775808", "biu", "0",
			"dec1", "'-99999999999999999999999999999999999.999999999999999999999999999999'", "dec2", "-12345678.90", "dec3", "-99999",
			"dec4", "'-99999999999999999999999999999999999999999999999999999999999999999'", "dec5", "'-0.999999999999999999999999999999'", "dec6", "'-999999999.999999999'",
			"f", "-3.40282e38", "d", "-1.7976931348623157e308",
			"dt", "'1000-01-01'", "dtm", "'1000-01-01 00:00:00'", "dtm1", "'1000-01-01 00:00:00.1'", "dtm3", "'1000-01-01 00:00:00.001'", "dtm6", "'1000-01-01 00:00:00.000001'",
			"ts0", "'1970-01-01 00:00:01'", "ts2", "'1970-01-01 00:00:01.01'", "ts6", "'1970-01-01 00:00:01.000001'",
			"tm", "'-838:59:59'", "tm1", "'-838:59:58.9'", "tm4", "'-00:00:00.0001'", "tm6", "'-838:59:58.999999'", "y", "1901",
			"c", "''", "vc", "''", "l1", "''", "c3", "''", "u16", "''", "u16le", "''", "u32", "''", "ucs", "''", "c32", "''", "t16", "''",
			"tt", "''", "txt", "''", "mt", "''", "lt", "''", "bn", "x'00000000'", "vb", "x''", "tb", "x''", "bl", "x''", "mb", "x''", "lb", "x''",
			"e", "'x'", "e2", "'m0'", "st", "''", "st64", "''", "el1", "'é'", "b1", "0", "b7", "0", "b64", "0",
			"j", "'[]'", "g", "ST_GeomFromText('POINT(0 0)')", "pt", "ST_GeomFromText('POINT(0 0)', 4326)",
			"poly", "ST_GeomFromText('POLYGON((0 0,1 0,1 1,0 0))', 3857)", "gcol", "ST_GeomFromText('GEOMETRYCOLLECTION EMPTY')",
			"v", "STRING_TO_VECTOR('[1.5,-2.25,3.4028234e38,1.1754944e-38,0.1]')", "av16", "''", "avl1", "''",
			"v2", "STRING_TO_VECTOR('[-0.0]')", "avu32", "''", "ae", "'ä'", "inv", "-1", "invs", "''"),
		ins("id", "2", "ti", "127", "tiu", "255", "si", "32767", "siu", "65535", "mi", "8388607", "miu", "16777215", "i", "2147483647", "iu", "4294967295",
			"bi", "9223372036854775807", "biu", "18446744073709551615",
			"dec1", "'99999999999999999999999999999999999.999999999999999999999999999999'", "dec2", "99999999.99", "dec3", "99999",
			"dec4", "'99999999999999999999999999999999999999999999999999999999999999999'", "dec5", "'0.000000000000000000000000000001'", "dec6", "'0.000000001'",
			"f", "3.40282e38", "d", "1.7976931348623157e308",
			"dt", "'9999-12-31'", "dtm", "'9999-12-31 23:59:59'", "dtm1", "'9999-12-31 23:59:59.9'", "dtm3", "'9999-12-31 23:59:59.999'", "dtm6", "'9999-12-31 23:59:59.999999'",
			"ts0", "'2038-01-19 03:14:07'", "ts2", "'2038-01-19 03:14:07.99'", "ts6", "'2038-01-19 03:14:07.999999'",
			"tm", "'838:59:59'", "tm1", "'838:59:58.9'", "tm4", "'00:00:00.0001'", "tm6", "'838:59:58.999999'", "y", "2155",
			"c", "'abcdefghij'", "vc", "'héllo wörld 😀 中文'", "l1", "'café ÿ © € „“'", "c3", "'ŝ ŭ ĉ'",
			"u16", "'h€llo 😀 𝄞'", "u16le", "'h€llo 😀 𝄞'", "u32", "'h€llo 😀 𝄞'", "ucs", "'h€llo ĉ 中'", "c32", "'😀ab'", "t16", "REPEAT('€𝄞', 2000)",
			"tt", "REPEAT('t', 255)", "txt", "REPEAT('long text é ', 5000)", "mt", "REPEAT('medium ', 12000)", "lt", "REPEAT('long 😀 ', 20000)",
			"bn", "x'ffffffff'", "vb", "REPEAT(x'00ff', 150)", "tb", "REPEAT(x'ab', 255)", "bl", "REPEAT(x'00ff', 30000)",
			"mb", "REPEAT(x'deadbeef', 20000)", "lb", "REPEAT(x'0102030405', 30000)",
			"e", "'z'", "e2", "'m299'", "st", "'a,b,c,d'", "st64", "'m0,m31,m32,m63'", "el1", "'€'", "b1", "1", "b7", "127", "b64", "18446744073709551615",
			"j", mysqlJSONOpaque, "g", "ST_GeomFromText('POLYGON((0 0,1 0,1 1,0 0))')", "pt", "ST_GeomFromText('POINT(45.5 -120.25)', 4326)",
			"poly", "ST_GeomFromText('POLYGON((0 0,10 0,10 10,0 10,0 0),(1 1,2 1,2 2,1 1))', 3857)",
			"gcol", "ST_GeomFromText('GEOMETRYCOLLECTION(POINT(1 2),LINESTRING(0 0,1 1))')",
			"v", "STRING_TO_VECTOR('[1e-30,-3.4028234e38,123456.79,-0.0,7]')", "av16", "'ü€😀'", "avl1", "'ÿé€'",
			"v2", "STRING_TO_VECTOR('[2.5]')", "avu32", "'𝄞 utf32 😀'", "ae", "'ö'", "inv", "2147483647", "invs", "'inv😀'"),
		`INSERT INTO app.types (id) VALUES (3)`,
		ins("id", "4", "ti", "0", "tiu", "0", "i", "0", "dec1", "'0.000000000000000000000000000001'", "dec2", "0.01", "dec4", "0", "dec5", "0",
			"f", "1.5", "d", "0.1", "dt", "'0000-00-00'", "dtm", "'0000-00-00 00:00:00'", "dtm3", "'2024-02-29 12:34:56.5'", "dtm6", "'2024-02-29 12:34:56.000123'",
			"ts0", "'0000-00-00 00:00:00'", "ts6", "'2024-06-01 12:00:00'", "tm", "'00:00:00'", "tm6", "'-00:00:01.5'", "y", "0",
			"c", "'a'", "vc", `'tab\there "q" \\\\ back'`, "l1", "'Ünïcödé'", "u16", "'\\0nul'", "txt", "'line1\\nline2'", "bn", "x'0a0b'", "vb", "x'00'", "bl", "x'00'",
			"e", "'y'", "st", "'b,d'", "b1", "0", "b64", "1", "j", `'"just a string"'`, "g", "ST_GeomFromText('LINESTRING(0 0,1 1,2 2)')",
			"v", "STRING_TO_VECTOR('[0]')", "av16", "'a'", "avl1", "'b'", "ae", "''"),
		`INSERT INTO app.types (id, dt, dtm, i, e) VALUES (5, '2020-00-15', '2020-05-00 10:00:00', 5, 'bogus')`,
		ins("id", "6", "j", "'{\"a\":[1,2.5,\"x\",null,true],\"b\":{\"c\":\"\\\\u00e9\\\\\"q\"},\"k\":1e300,\"z\":-0.0}'", "f", "0.1", "d", "123456789.123456789", "dec1", "'-0.5'"),
		`UPDATE app.types SET vc = 'updated', i = i + 1, j = '{"updated":true}', dec2 = -0.5, v = STRING_TO_VECTOR('[9,8,7]'), u16 = 'ü', inv = 7 WHERE id IN (1, 2)`,
		`UPDATE app.types SET id = 40 WHERE id = 4`,
		`DELETE FROM app.types WHERE id = 3`,
		`INSERT INTO app.gipk (a, b, j) VALUES (1, 'one €', JSON_OBJECT('k', 1)), (2, 'two 😀', NULL), (3, NULL, '[1, 2]')`,
		`UPDATE app.gipk SET a = a * 10, b = CONCAT(b, '!') WHERE a >= 2`,
		`DELETE FROM app.gipk WHERE a = 1`,
	}
	return diffCase{
		tables: []diffTable{
			{name: "types", cols: mysqlDiffCols, key: "id"},
			{name: "gipk", cols: mysqlGIPKCols, key: "my_row_id", create: []string{
				"SET SESSION sql_generate_invisible_primary_key = ON",
				"CREATE TABLE app.gipk (a INT, b VARCHAR(20) CHARACTER SET utf16, j JSON)",
			}},
		},
		// information_schema hides a generated invisible primary key when
		// this is OFF; sluice's reader must still see it.
		setup:  []string{"SET GLOBAL show_gipk_in_create_table_and_information_schema = OFF"},
		writes: writes,
	}
}
