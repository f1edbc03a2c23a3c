package snapshot_test

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/sluice-cdc/sluice/binlog"
	"github.com/sluice-cdc/sluice/codec"
	"github.com/sluice-cdc/sluice/internal/testenv"
	"github.com/sluice-cdc/sluice/mysqlconn"
	"github.com/sluice-cdc/sluice/position"
	"github.com/sluice-cdc/sluice/snapshot"
)

// rowText renders a row as the JSON of its columns, for comparisons.
func rowText(t *binlog.Table, row binlog.Row) string {
	var b []byte
	for i := range row {
		if i > 0 {
			b = append(b, ',')
		}
		b = codec.AppendValue(b, &t.Columns[i], row[i])
	}
	return string(b)
}

// readRange reads the rows of (after, upTo] chunk by chunk, each chunk
// resuming after the last row of the one before, and returns them in the
// order read.
func readRange(t *testing.T, c *mysqlconn.Conn, tbl *binlog.Table, key []int, where string, after, upTo binlog.Row, limit int) []string {
	t.Helper()
	ctx := context.Background()
	var out []string
	for chunks := 0; ; chunks++ {
		if chunks > 100000 {
			t.Fatal("too many chunks: the reader is not advancing")
		}
		q, args := snapshot.ChunkQuery(tbl, key, where, after, upTo, limit)
		n := 0
		err := snapshot.Scan(ctx, c, tbl, q, args, func(row binlog.Row) error {
			out = append(out, rowText(tbl, row))
			if n++; n == limit {
				after = snapshot.CloneKey(tbl, key, row)
			}
			return nil
		})
		if err != nil {
			t.Fatalf("chunk %d: %v\nquery: %s\nargs: %v", chunks, err, q, args)
		}
		if limit <= 0 || n < limit {
			return out
		}
	}
}

// checkChunking reads the table whole, in chunks, and in the ranges of
// SplitPoints, and requires every way to return every row once in key
// order.
func checkChunking(t *testing.T, c *mysqlconn.Conn, info *snapshot.TableInfo, where string, wantRows int) {
	t.Helper()
	tbl, key := info.Table, info.Key
	all := readRange(t, c, tbl, key, where, nil, nil, 0)
	if len(all) != wantRows {
		t.Fatalf("the whole read returned %d rows, want %d", len(all), wantRows)
	}
	seen := map[string]bool{}
	for _, r := range all {
		if seen[r] {
			t.Fatalf("row %s read twice", r)
		}
		seen[r] = true
	}
	for _, limit := range []int{1, 7, 100} {
		if limit == 1 && wantRows > 300 {
			continue
		}
		got := readRange(t, c, tbl, key, where, nil, nil, limit)
		if !reflect.DeepEqual(got, all) {
			t.Fatalf("chunks of %d: %d rows, differing from the whole read (%d rows)", limit, len(got), len(all))
		}
	}
	for _, n := range []int{2, 5, 16} {
		points, err := snapshot.SplitPoints(context.Background(), c, tbl, key, where, n)
		if err != nil {
			t.Fatalf("SplitPoints(%d): %v", n, err)
		}
		if len(points) > n-1 {
			t.Fatalf("SplitPoints(%d) returned %d points", n, len(points))
		}
		var got []string
		var sizes []int
		var prev binlog.Row
		for i := 0; i <= len(points); i++ {
			var upTo binlog.Row
			if i < len(points) {
				upTo = points[i]
			}
			part := readRange(t, c, tbl, key, where, prev, upTo, 10)
			sizes = append(sizes, len(part))
			got = append(got, part...)
			prev = upTo
		}
		if !reflect.DeepEqual(got, all) {
			t.Fatalf("SplitPoints(%d): the ranges hold %d rows, differing from the whole read (%d rows)", n, len(got), len(all))
		}
		t.Logf("SplitPoints(%d): %d ranges of %v rows", n, len(points)+1, sizes)
		if wantRows >= 100 && n <= wantRows/10 {
			for _, s := range sizes {
				if s > 3*wantRows/n+1 {
					t.Errorf("SplitPoints(%d): a range of %d rows out of %d: badly balanced", n, s, wantRows)
				}
			}
		}
	}
}

func inspect(t *testing.T, c *mysqlconn.Conn, db, table string) *snapshot.TableInfo {
	t.Helper()
	info, err := snapshot.Inspect(context.Background(), c, db, table)
	if err != nil {
		t.Fatal(err)
	}
	return info
}

// enumOf returns an ENUM type of n members whose names do not sort in
// index order.
func enumOf(n int) string {
	var m []string
	for i := 0; i < n; i++ {
		m = append(m, fmt.Sprintf("'%c%d'", 'z'-i%26, i))
	}
	return "ENUM(" + strings.Join(m, ",") + ")"
}

func TestChunkKeys(t *testing.T) {
	testenv.ForEachFlavor(t, func(t *testing.T, flavor position.Flavor) {
		db := server(t, flavor)
		c := conn(t, db)
		exec(t, db, "CREATE DATABASE chunks")
		cases := []struct {
			name  string
			ddl   string
			fill  []string
			rows  int
			key   []string
			where string
		}{
			{name: "int", ddl: "id INT NOT NULL PRIMARY KEY, v VARCHAR(20)",
				fill: []string{"INSERT INTO chunks.int SELECT CAST(seq AS SIGNED) - 600, CONCAT('v', seq) FROM seq_1_to_1000"},
				rows: 1000, key: []string{"id"}},
			{name: "int_where", ddl: "id INT NOT NULL PRIMARY KEY, v INT",
				fill: []string{"INSERT INTO chunks.int_where SELECT seq * 3, seq FROM seq_1_to_1000"},
				rows: 500, key: []string{"id"}, where: "v % 2 = 0"},
			{name: "bigint_unsigned", ddl: "id BIGINT UNSIGNED NOT NULL PRIMARY KEY, v INT",
				fill: []string{
					"INSERT INTO chunks.bigint_unsigned SELECT 18446744073709551615 - seq * 1000003, seq FROM seq_0_to_399",
					"INSERT INTO chunks.bigint_unsigned VALUES (0, 0), (1, 1), (9223372036854775807, 2), (9223372036854775808, 3), (18446744073709551614, 4)",
				},
				rows: 405, key: []string{"id"}},
			{name: "bigint_unsigned_dense", ddl: "id BIGINT UNSIGNED NOT NULL PRIMARY KEY",
				fill: []string{"INSERT INTO chunks.bigint_unsigned_dense SELECT 18446744073709551615 - seq FROM seq_0_to_499"},
				rows: 500, key: []string{"id"}},
			{name: "bigint_full_range", ddl: "id BIGINT NOT NULL PRIMARY KEY",
				fill: []string{"INSERT INTO chunks.bigint_full_range VALUES (-9223372036854775808), (-1), (0), (1), (9223372036854775807)"},
				rows: 5, key: []string{"id"}},
			{name: "varchar_int", ddl: "a VARCHAR(20) CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci NOT NULL, b INT NOT NULL, PRIMARY KEY (a, b)",
				fill: []string{"INSERT INTO chunks.varchar_int SELECT ELT(1 + seq % 8, 'a', 'A ', 'b', 'é', 'E', '😀', 'z''q', 'x`y'), seq FROM seq_1_to_800"},
				rows: 800, key: []string{"a", "b"}},
			{name: "latin1_int", ddl: "a VARCHAR(20) CHARACTER SET latin1 COLLATE latin1_german1_ci NOT NULL, b INT NOT NULL, PRIMARY KEY (a, b)",
				fill: []string{"INSERT INTO chunks.latin1_int SELECT ELT(1 + seq % 6, _latin1 x'E4', 'a', _latin1 x'80', 'ss', _latin1 x'DF', 'Z'), seq FROM seq_1_to_600"},
				rows: 600, key: []string{"a", "b"}},
			{name: "datetime6", ddl: "t DATETIME(6) NOT NULL PRIMARY KEY, v INT",
				fill: []string{
					"SET SESSION sql_mode = ''",
					"INSERT INTO chunks.datetime6 VALUES ('0000-00-00 00:00:00', 1), ('2020-00-15 00:00:00', 2), ('2020-05-00 10:00:00', 3), ('0000-01-01 00:00:00.000001', 4)",
					"INSERT INTO chunks.datetime6 SELECT TIMESTAMP'2021-01-01 00:00:00' + INTERVAL seq * 1234567 MICROSECOND, seq FROM seq_1_to_700",
				},
				rows: 704, key: []string{"t"}},
			{name: "three", ddl: "a INT NOT NULL, b VARBINARY(8) NOT NULL, c DATE NOT NULL, PRIMARY KEY (a, b, c)",
				fill: []string{"INSERT INTO chunks.three SELECT seq % 3, UNHEX(LPAD(HEX(seq % 5 * 60), 4, '0')), DATE'2000-01-01' + INTERVAL seq DAY FROM seq_1_to_300"},
				rows: 300, key: []string{"a", "b", "c"}},
		}
		misc := []struct{ typ, expr string }{
			{"DECIMAL(65,30)", "CAST(seq AS DECIMAL(65,30)) / 7 - 20"},
			{"DECIMAL(10,2) UNSIGNED", "seq / 4"},
			{"VARBINARY(16)", "UNHEX(CONCAT(LPAD(HEX(seq * 2654435761 % 4294967296), 8, '0'), LPAD(HEX(seq * 40503 % 65536), 4, '0')))"},
			{"BINARY(4)", "UNHEX(LPAD(HEX(seq * 131), 4, '0'))"},
			{"DOUBLE", "seq / 3e0 - 50"},
			{"FLOAT", "seq / 7e0"},
			{"TIME(6)", "SEC_TO_TIME(seq * 3.700001 - 400)"},
			{"TIMESTAMP(3)", "FROM_UNIXTIME(1000000000 + seq * 1.001)"},
			{"YEAR", "1901 + seq"},
			{"BIT(10)", "seq * 3"},
			{enumOf(40), "1 + seq % 40"},
			{"SET('a','b','c','d')", "seq % 16"},
			{"CHAR(5) CHARACTER SET utf16", "CONCAT(CHAR(0x263A + seq % 7 USING utf16), seq)"},
			{"DATE", "DATE'1999-12-31' + INTERVAL seq DAY"},
			{"BIGINT", "CAST(seq AS SIGNED) * 1000003 - 50000000"},
			{"MEDIUMINT UNSIGNED", "seq * 40000"},
		}
		for i, m := range misc {
			name := fmt.Sprintf("misc%d", i)
			cases = append(cases, struct {
				name  string
				ddl   string
				fill  []string
				rows  int
				key   []string
				where string
			}{name: name, ddl: "k " + m.typ + " NOT NULL PRIMARY KEY, v INT",
				fill: []string{"INSERT IGNORE INTO chunks." + name + " SELECT " + m.expr + ", seq FROM seq_1_to_250"},
				rows: -1, key: []string{"k"}})
		}
		for _, tc := range cases {
			typ := tc.ddl
			t.Run(tc.name+" "+strings.SplitN(typ, " NOT NULL", 2)[0], func(t *testing.T) {
				exec(t, db, append([]string{"USE chunks", "CREATE TABLE chunks." + tc.name + " (" + tc.ddl + ")"}, tc.fill...)...)
				info := inspect(t, c, "chunks", tc.name)
				var keyNames []string
				for _, k := range info.Key {
					keyNames = append(keyNames, info.Table.Columns[k].Name)
				}
				if info.KeyName != "PRIMARY" || !reflect.DeepEqual(keyNames, tc.key) {
					t.Fatalf("key %s %v, want PRIMARY %v", info.KeyName, keyNames, tc.key)
				}
				rows := tc.rows
				if rows < 0 {
					rs, err := db.Query(context.Background(), "SELECT COUNT(*) FROM chunks."+tc.name)
					if err != nil {
						t.Fatal(err)
					}
					n, _ := rs.GetInt(0, 0)
					rows = int(n)
					if rows < 16 {
						t.Fatalf("only %d rows", rows)
					}
				}
				checkChunking(t, c, info, tc.where, rows)
			})
		}
	})
}

// The chunk query must read an index range, not the index from its start.
func TestChunkQueryUsesRange(t *testing.T) {
	testenv.ForEachFlavor(t, func(t *testing.T, flavor position.Flavor) {
		db := server(t, flavor)
		c := conn(t, db)
		exec(t, db, "CREATE DATABASE plan", "USE plan",
			"CREATE TABLE plan.t (a VARCHAR(20) CHARACTER SET latin1 NOT NULL, b INT NOT NULL, c DECIMAL(20,5) NOT NULL, d TEXT, PRIMARY KEY (a, b, c))",
			"INSERT INTO plan.t SELECT CONCAT('k', seq % 50), seq, seq / 3, 'x' FROM seq_1_to_20000",
			"ANALYZE TABLE plan.t")
		info := inspect(t, c, "plan", "t")
		after := make(binlog.Row, 4)
		after[0] = binlog.BytesValue(binlog.KindString, []byte("k25"))
		after[1] = binlog.IntValue(100)
		after[2] = binlog.BytesValue(binlog.KindDecimal, []byte("33.33333"))
		upTo := make(binlog.Row, 4)
		upTo[0] = binlog.BytesValue(binlog.KindString, []byte("k30"))
		upTo[1] = binlog.IntValue(7)
		upTo[2] = binlog.BytesValue(binlog.KindDecimal, []byte("2.33333"))
		for _, bounds := range [][2]binlog.Row{{after, nil}, {nil, upTo}, {after, upTo}} {
			q, args := snapshot.ChunkQuery(info.Table, info.Key, "", bounds[0], bounds[1], 1000)
			explain := "EXPLAIN "
			if flavor == position.MySQL {
				explain = "EXPLAIN FORMAT=TRADITIONAL " // MySQL 9 prints a tree by default
			}
			rs, err := c.Execute(explain+q, args...)
			if err != nil {
				t.Fatalf("%v\n%s", err, q)
			}
			typ, _ := rs.GetStringByName(0, "type")
			key, _ := rs.GetStringByName(0, "key")
			if typ != "range" || key != "PRIMARY" {
				t.Errorf("plan %s on %s, want a range of PRIMARY, for\n%s", typ, key, q)
			}
		}
		q, _ := snapshot.ChunkQuery(info.Table, info.Key, "", after, upTo, 1000)
		t.Logf("query: %s", q)
	})
}

func TestKeyChoice(t *testing.T) {
	testenv.ForEachFlavor(t, func(t *testing.T, flavor position.Flavor) {
		db := server(t, flavor)
		c := conn(t, db)
		exec(t, db, "CREATE DATABASE keyc", "USE keyc",
			// Unique keys: a over a NULL column, a prefix one, and a usable one
			// after them.
			"CREATE TABLE keyc.uq (a INT NULL, b VARCHAR(10) NOT NULL, c INT NOT NULL, t TEXT NOT NULL, UNIQUE KEY ua (a), UNIQUE KEY upfx (t(5)), UNIQUE KEY ub (b, c))",
			"INSERT INTO keyc.uq SELECT IF(seq % 2, seq, NULL), CONCAT('b', seq % 10), seq, CONCAT(seq, 'xxxxx') FROM seq_1_to_200",
			"CREATE TABLE keyc.none (a INT, b INT, UNIQUE KEY (a))",
			"INSERT INTO keyc.none SELECT seq, seq FROM seq_1_to_50",
			"INSERT INTO keyc.none VALUES (NULL, 1), (NULL, 2)",
			"CREATE TABLE `keyc`.`we``ird` (`co``l` INT NOT NULL PRIMARY KEY)",
			"INSERT INTO `keyc`.`we``ird` VALUES (1), (2), (3)",
			"CREATE TABLE keyc.`tä€` (`ö` VARCHAR(10) NOT NULL PRIMARY KEY, `ü` INT)",
			"INSERT INTO keyc.`tä€` VALUES ('ä', 1), ('ö', 2), ('p', 3), ('ß', 4), ('z', 5)",
		)
		ctx := context.Background()

		info := inspect(t, c, "keyc", "uq")
		if info.KeyName != "ub" || !reflect.DeepEqual(info.Key, []int{1, 2}) || !reflect.DeepEqual(info.Table.PrimaryKey, []int{1, 2}) {
			t.Errorf("uq: key %q %v (PrimaryKey %v), want ub [1 2]", info.KeyName, info.Key, info.Table.PrimaryKey)
		}
		checkChunking(t, c, info, "", 200)

		info = inspect(t, c, "keyc", "none")
		if info.KeyName != "" || info.Key != nil || info.Table.PrimaryKey != nil {
			t.Errorf("none: key %q %v, want none", info.KeyName, info.Key)
		}
		q, args := snapshot.ChunkQuery(info.Table, nil, "", nil, nil, 10)
		n := 0
		if err := snapshot.Scan(ctx, c, info.Table, q, args, func(binlog.Row) error { n++; return nil }); err != nil {
			t.Fatal(err)
		}
		if n != 52 {
			t.Errorf("keyless table: read %d rows, want 52 (%s)", n, q)
		}
		if p, err := snapshot.SplitPoints(ctx, c, info.Table, nil, "", 4); err != nil || p != nil {
			t.Errorf("SplitPoints without a key: %v, %v", p, err)
		}

		// Non-ASCII names, on a connection that starts in latin1.
		if _, err := c.Execute("SET NAMES latin1"); err != nil {
			t.Fatal(err)
		}
		info = inspect(t, c, "keyc", "tä€")
		if info.Table.Columns[0].Name != "ö" || info.Table.Columns[1].Name != "ü" {
			t.Fatalf("columns %q, %q", info.Table.Columns[0].Name, info.Table.Columns[1].Name)
		}
		if _, err := c.Execute("SET NAMES latin1"); err != nil {
			t.Fatal(err)
		}
		checkChunking(t, c, info, "`ü` < 5 AND `ö` <> 'ä'", 3)

		info = inspect(t, c, "keyc", "we`ird")
		if info.Table.Columns[0].Name != "co`l" {
			t.Fatalf("column name %q", info.Table.Columns[0].Name)
		}
		checkChunking(t, c, info, "", 3)
	})
}

func TestKeyArgs(t *testing.T) {
	tbl := &binlog.Table{Schema: "d", Name: "t", Columns: []binlog.Column{
		{Name: "i", Kind: binlog.KindInt}, {Name: "u", Kind: binlog.KindUint, Unsigned: true},
		{Name: "dec", Kind: binlog.KindDecimal, Precision: 10, Frac: 2},
		{Name: "dt", Kind: binlog.KindDateTime, Frac: 6}, {Name: "ts", Kind: binlog.KindTimestamp},
		{Name: "tm", Kind: binlog.KindTime}, {Name: "d", Kind: binlog.KindDate},
		{Name: "s", Kind: binlog.KindString, Charset: "latin1"}, {Name: "b", Kind: binlog.KindBytes, Charset: "binary"},
		{Name: "e", Kind: binlog.KindEnum}, {Name: "f", Kind: binlog.KindDouble}, {Name: "z", Kind: binlog.KindTimestamp},
	}}
	buf := []byte("é\x00")
	row := binlog.Row{
		binlog.IntValue(-5), binlog.UintValue(18446744073709551615),
		binlog.BytesValue(binlog.KindDecimal, []byte("-0.50")),
		binlog.DateTimeValue(binlog.DateTime{Date: binlog.Date{Year: 2020, Month: 0, Day: 15}, Hour: 1, Minute: 2, Second: 3, Micro: 4}),
		binlog.TimestampValue(2147483647, 999999), binlog.TimeValue(-3020000001), binlog.DateValue(binlog.Date{}),
		binlog.BytesValue(binlog.KindString, buf[:1]), binlog.BytesValue(binlog.KindBytes, buf),
		binlog.NumValue(binlog.KindEnum, 2), binlog.FloatValue(binlog.KindDouble, 0.1), binlog.TimestampValue(0, 0),
	}
	key := []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}
	got := snapshot.KeyArgs(tbl, key, row)
	want := []any{int64(-5), uint64(18446744073709551615), "-0.50", "2020-00-15 01:02:03.000004",
		"2038-01-19 03:14:07.999999", "-00:50:20.000001", "0000-00-00", []byte("é")[:1], []byte("é\x00"), uint64(2), 0.1,
		"0000-00-00 00:00:00.000000"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("KeyArgs:\n got %#v\nwant %#v", got, want)
	}
	buf[0] = 'X' // the arguments are copies
	if got[8].([]byte)[0] == 'X' {
		t.Error("KeyArgs shares memory with the row")
	}
	q, args := snapshot.ChunkQuery(tbl, []int{7, 0}, "x > 1", row, row, 5)
	wantQ := "SELECT `i`, `u`, `dec`, `dt`, `ts`, `tm`, `d`, `s`, `b`, `e`|0 AS `e`, `f`, `z` FROM `d`.`t` WHERE (x > 1)" +
		" AND ((`d`.`t`.`s` > _latin1 x'58') OR (`d`.`t`.`s` = _latin1 x'58' AND `d`.`t`.`i` > ?))" +
		" AND ((`d`.`t`.`s` < _latin1 x'58') OR (`d`.`t`.`s` = _latin1 x'58' AND `d`.`t`.`i` <= ?))" +
		" ORDER BY `d`.`t`.`s`, `d`.`t`.`i` LIMIT 5"
	if q != wantQ || !reflect.DeepEqual(args, []any{int64(-5), int64(-5)}) {
		t.Errorf("ChunkQuery:\n got %s %v\nwant %s", q, args, wantQ)
	}
}

// SplitPoints on tables big enough for the server's row estimate to be
// used: the ranges still cover the table exactly, and are about even.
func TestSplitLarge(t *testing.T) {
	testenv.ForEachFlavor(t, func(t *testing.T, flavor position.Flavor) {
		db := server(t, flavor)
		c := conn(t, db)
		const rows = 150000
		exec(t, db, "CREATE DATABASE big", "USE big",
			"CREATE TABLE big.dense (id INT NOT NULL PRIMARY KEY, v INT)",
			fmt.Sprintf("INSERT INTO big.dense SELECT seq, seq FROM seq_1_to_%d", rows),
			"CREATE TABLE big.comp (a VARCHAR(10) NOT NULL, b INT NOT NULL, PRIMARY KEY (a, b))",
			fmt.Sprintf("INSERT INTO big.comp SELECT CONCAT('k', seq %% 37), seq FROM seq_1_to_%d", rows),
			"ANALYZE TABLE big.dense, big.comp")
		for _, name := range []string{"dense", "comp"} {
			t.Run(name, func(t *testing.T) {
				info := inspect(t, c, "big", name)
				t.Logf("estimated rows: %d", info.Rows)
				all := readRange(t, c, info.Table, info.Key, "", nil, nil, 0)
				if len(all) != rows {
					t.Fatalf("%d rows", len(all))
				}
				const n = 8
				points, err := snapshot.SplitPoints(context.Background(), c, info.Table, info.Key, "", n)
				if err != nil {
					t.Fatal(err)
				}
				var got []string
				var sizes []int
				var prev binlog.Row
				for i := 0; i <= len(points); i++ {
					var upTo binlog.Row
					if i < len(points) {
						upTo = points[i]
					}
					part := readRange(t, c, info.Table, info.Key, "", prev, upTo, 5000)
					got = append(got, part...)
					sizes = append(sizes, len(part))
					prev = upTo
				}
				if !reflect.DeepEqual(got, all) {
					t.Fatalf("the ranges hold %d rows, differing from the whole read", len(got))
				}
				t.Logf("%d ranges of %v rows", len(sizes), sizes)
				if len(points) != n-1 {
					t.Errorf("%d points, want %d", len(points), n-1)
				}
				for _, s := range sizes {
					if s < rows/n/2 || s > rows/n*2 {
						t.Errorf("a range of %d rows: badly balanced", s)
					}
				}
			})
		}
	})
}
