package codec

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/go-mysql-org/go-mysql/mysql"

	"github.com/sluice-cdc/sluice/binlog"
)

func withDefault(c binlog.Column, def string) binlog.Column { c.Default = &def; return c }

// TestDebeziumDefaults: a column's default as Debezium's
// BinlogDefaultValueConverter converts it and its value converters write
// it (expectations from Debezium's BinlogDefaultValueIT cases: numbers as
// their type, DECIMAL set to the column's scale half up, BIT as bytes or a
// boolean, zero dates null in a nullable column and the epoch in a NOT
// NULL one, CURRENT_TIMESTAMP read as 1970-01-01 00:00:00). want "" is no
// default.
func TestDebeziumDefaults(t *testing.T) {
	dec := func(p, s int) binlog.Column {
		return binlog.Column{Type: mysql.MYSQL_TYPE_NEWDECIMAL, Kind: binlog.KindDecimal, Precision: p, Frac: s}
	}
	bit := func(n int) binlog.Column {
		return binlog.Column{Type: mysql.MYSQL_TYPE_BIT, Kind: binlog.KindBit, BitLen: n}
	}
	date := binlog.Column{Type: mysql.MYSQL_TYPE_DATE, Kind: binlog.KindDate}
	dt := func(frac int) binlog.Column {
		return binlog.Column{Type: mysql.MYSQL_TYPE_DATETIME2, Kind: binlog.KindDateTime, Frac: frac}
	}
	ts := binlog.Column{Type: mysql.MYSQL_TYPE_TIMESTAMP2, Kind: binlog.KindTimestamp}
	tm := binlog.Column{Type: mysql.MYSQL_TYPE_TIME2, Kind: binlog.KindTime}
	str := binlog.Column{Type: mysql.MYSQL_TYPE_VARCHAR, Kind: binlog.KindString, Charset: "utf8mb4"}
	bin := binlog.Column{Type: mysql.MYSQL_TYPE_VARCHAR, Kind: binlog.KindBytes, Charset: "binary"}
	enum := binlog.Column{Type: mysql.MYSQL_TYPE_ENUM, Kind: binlog.KindEnum, Enum: []string{"a", "b"}}
	cases := []struct {
		name string
		col  binlog.Column
		def  string
		mode string
		want string
	}{
		{"int", nullable(intCol(mysql.MYSQL_TYPE_LONG, false)), "5", "", "5"},
		{"int negative", nullable(intCol(mysql.MYSQL_TYPE_LONG, false)), "-5", "", "-5"},
		{"int true", nullable(intCol(mysql.MYSQL_TYPE_TINY, false)), "TRUE", "", "1"},
		{"bigint unsigned long", nn(intCol(mysql.MYSQL_TYPE_LONGLONG, true)), "18446744073709551615", "", "-1"},
		{"bigint unsigned precise", nn(intCol(mysql.MYSQL_TYPE_LONGLONG, true)), "1", "bigint=precise", `"AQ=="`},
		{"int unsigned", nn(intCol(mysql.MYSQL_TYPE_LONG, true)), "4294967295", "", "4294967295"},
		{"double", nullable(binlog.Column{Type: mysql.MYSQL_TYPE_DOUBLE, Kind: binlog.KindDouble}), "1.5e3", "", "1500.0"},
		{"float", nullable(binlog.Column{Type: mysql.MYSQL_TYPE_FLOAT, Kind: binlog.KindFloat}), "0.1", "", "0.1"},
		{"decimal precise", nullable(dec(5, 2)), "1.5", "", `"AJY="`},
		{"decimal half up", nullable(dec(5, 2)), "1.555", "decimal=string", `"1.56"`},
		{"decimal negative half up", nullable(dec(5, 2)), "-1.555", "decimal=string", `"-1.56"`},
		{"decimal double", nullable(dec(5, 2)), "1.5", "decimal=double", "1.5"},
		{"decimal true", nullable(dec(5, 2)), "true", "decimal=string", `"1.00"`},
		{"bit1", nullable(bit(1)), "0b1", "", "true"},
		{"bit1 zero", nullable(bit(1)), "b'0'", "", "false"},
		{"bit5", nullable(bit(5)), "0b101", "", `"BQ=="`},
		{"bit16 two bytes", nullable(bit(16)), "0b100000001", "", `"AQE="`},
		{"bit16 one byte unpadded", nullable(bit(16)), "0b101", "", `"BQ=="`},
		{"bit24 padded", nullable(bit(24)), "0b1000000010", "", `"AgIA"`},
		{"date", nullable(date), "2020-01-02", "", "18263"},
		{"date zero nullable", nullable(date), "0000-00-00", "", ""},
		{"date zero not null", nn(date), "0000-00-00", "", "0"},
		{"date connect", nullable(date), "2020-01-02", "time=connect", "18263"},
		{"datetime ms", nullable(dt(0)), "2020-01-02 03:04:05", "", "1577934245000"},
		{"datetime us", nullable(dt(6)), "2020-01-02 03:04:05.123456", "", "1577934245123456"},
		{"datetime current_timestamp", nullable(dt(0)), "1970-01-01 00:00:00", "", "0"},
		{"datetime zero nullable", nullable(dt(0)), "0000-00-00 00:00:00", "", ""},
		{"datetime zero not null", nn(dt(0)), "0000-00-00 00:00:00", "", "0"},
		{"timestamp", nullable(ts), "2020-01-02 03:04:05", "", `"2020-01-02T03:04:05Z"`},
		{"timestamp current nullable", nullable(ts), "1970-01-01 00:00:00", "", ""},
		{"timestamp current not null", nn(ts), "1970-01-01 00:00:00", "", `"1970-01-01T00:00:00Z"`},
		{"timestamp zero not null", nn(ts), "0000-00-00 00:00:00", "", `"1970-01-01T00:00:00Z"`},
		{"time", nullable(tm), "10:00:00", "", "36000000000"},
		{"time negative", nullable(tm), "-01:00:00.5", "", "-3600500000"},
		{"time connect", nullable(tm), "10:00:00", "time=connect", "36000000"},
		{"year", nullable(binlog.Column{Type: mysql.MYSQL_TYPE_YEAR, Kind: binlog.KindYear}), "2020", "", "2020"},
		{"two-digit year", nullable(binlog.Column{Type: mysql.MYSQL_TYPE_YEAR, Kind: binlog.KindYear}), "1", "", "2001"},
		{"two-digit year, 1900s", nullable(binlog.Column{Type: mysql.MYSQL_TYPE_YEAR, Kind: binlog.KindYear}), "70", "", "1970"},
		{"varchar", nullable(str), "a\"b", "", `"a\"b"`},
		{"varchar empty", nullable(str), "", "", `""`},
		{"enum", nullable(enum), "b", "", `"b"`},
		{"enum hex (MySQL, a 4-byte character)", nullable(enum), "0xF09F9880", "", `"\uD83D\uDE00"`},
		{"varbinary", nullable(bin), "ab", "", `"YWI="`},
		{"varbinary hex mode", nullable(bin), "ab", "binary=hex", `"6162"`},
		{"varbinary hex literal", nullable(bin), "0x6162", "", `"YWI="`},
		{"int not a number", nullable(intCol(mysql.MYSQL_TYPE_LONG, false)), "x", "", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			col := withDefault(c.col, c.def)
			f := dbzModes[c.mode]
			f.Schemas = true
			out := dbzEvent(t, f, col, binlog.NullValue())
			schema := member(t, out, "schema")
			var fields []json.RawMessage
			json.Unmarshal(member(t, schema, "fields"), &fields)
			fs := fieldSchema(t, fields[1], "c")
			wantTail := `}`
			if c.want != "" {
				wantTail = `,"default":` + c.want + `}`
			}
			if !strings.HasSuffix(fs, wantTail) || (c.want == "" && strings.Contains(fs, `"default"`)) {
				t.Fatalf("field schema %s; want it to end with %s", fs, wantTail)
			}
			// replace.null.with.default: a null is the default (null
			// without one), with and without schemas; off, null.
			wantVal := c.want
			if wantVal == "" {
				wantVal = "null"
			}
			if got := string(member(t, out, "payload", "after", "c")); got != wantVal {
				t.Fatalf("null value written %s; want %s", got, wantVal)
			}
			f.Schemas = false
			if got := string(member(t, dbzEvent(t, f, col, binlog.NullValue()), "after", "c")); got != wantVal {
				t.Fatalf("schemas off: null value written %s; want %s", got, wantVal)
			}
			f.ReplaceNullWithDefault = "false"
			if got := string(member(t, dbzEvent(t, f, col, binlog.NullValue()), "after", "c")); got != "null" {
				t.Fatalf("replace.null.with.default false: null value written %s; want null", got)
			}
		})
	}
}

// TestDebeziumZeroDateDefault: a zero date in a NOT NULL column is the
// column's default (Debezium's converters' fallback), else the epoch.
func TestDebeziumZeroDateDefault(t *testing.T) {
	col := nn(binlog.Column{Type: mysql.MYSQL_TYPE_DATETIME2, Kind: binlog.KindDateTime})
	zero := dtv(0, 0, 0, 0, 0, 0, 0)
	f := Format{Name: FormatDebezium, ReplaceNullWithDefault: "false"}
	if got := string(member(t, dbzEvent(t, f, col, zero), "after", "c")); got != "0" {
		t.Fatalf("without a default: %s; want the epoch, 0", got)
	}
	col = withDefault(col, "2020-01-02 03:04:05")
	if got := string(member(t, dbzEvent(t, f, col, zero), "after", "c")); got != "1577934245000" {
		t.Fatalf("with a default: %s; want the default, 1577934245000", got)
	}
	if got := string(member(t, dbzEvent(t, f, col, dtv(2021, 1, 1, 0, 0, 0, 0)), "after", "c")); got != "1609459200000" {
		t.Fatalf("a value: %s; want 1609459200000", got)
	}
	// A column before it with a default: its default is not this one's.
	tb := &binlog.Table{Schema: "shop", Name: "t", PrimaryKey: []int{0}, Columns: []binlog.Column{
		withDefault(binlog.Column{Name: "id", Type: mysql.MYSQL_TYPE_LONG, Kind: binlog.KindInt}, "7"),
		nn(binlog.Column{Name: "c", Type: mysql.MYSQL_TYPE_DATETIME2, Kind: binlog.KindDateTime})}}
	enc := NewEncoder(Source{Name: "srv", ServerID: 7, Version: "1.0"}, WithFormat(f), WithClock(dbzFixedClock))
	ch := binlog.Change{Op: binlog.OpInsert, Table: tb, After: binlog.Row{binlog.IntValue(1), zero}, File: "binlog.000001", Pos: 4}
	out := enc.AppendChange(nil, &binlog.Txn{GTID: "g:1"}, &ch)
	if got := string(member(t, out, "after", "c")); got != "0" {
		t.Fatalf("after a column with a default: %s; want the epoch, 0", got)
	}
	bad := Format{Name: FormatDebezium, ReplaceNullWithDefault: "yes"}
	if err := bad.Validate(); err == nil || !strings.Contains(err.Error(), "replace.null.with.default") {
		t.Fatalf("Validate of replace.null.with.default yes: %v", err)
	}
	if err := (Format{ReplaceNullWithDefault: "true"}).Validate(); err == nil {
		t.Fatal("format sluice took replace.null.with.default")
	}
}
