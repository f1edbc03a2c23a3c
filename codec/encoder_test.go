package codec

import (
	"bytes"
	"encoding/json"
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluice-cdc/sluice/binlog"
)

func unixUTC(sec int64, micro uint32) time.Time {
	return time.Unix(sec, int64(micro)*1000).UTC()
}

// fixedClock is the clock of the test encoders: 2024-05-06T07:08:09.123Z.
func fixedClock() time.Time { return time.UnixMilli(1714979289123) }

func testEncoder() *Encoder {
	return NewEncoder(Source{Name: "shop", ServerID: 7, Version: "1.0.0"}, WithClock(fixedClock))
}

var itemsTable = &binlog.Table{
	Schema: "shop",
	Name:   "items",
	Columns: []binlog.Column{
		{Name: "id", Kind: binlog.KindInt},
		{Name: "name", Kind: binlog.KindString, Charset: "utf8mb4", Nullable: true},
		{Name: "price", Kind: binlog.KindDecimal, Precision: 10, Frac: 2},
		{Name: "we\"ird\tname", Kind: binlog.KindInt},
	},
	PrimaryKey: []int{0},
}

func itemRow(id int64, name string, price string, w int64) binlog.Row {
	n := binlog.NullValue()
	if name != "" {
		n = str(binlog.KindString, name)
	}
	return binlog.Row{binlog.IntValue(id), n, str(binlog.KindDecimal, price), binlog.IntValue(w)}
}

var testTxn = &binlog.Txn{
	GTID:       "3e11fa47-71ca-11e1-9e33-c80aa9429562:23",
	ServerID:   1,
	CommitTime: time.UnixMicro(1714979288999999),
	Last:       true,
}

const srcHead = `"source":{"version":"sluice-1.0.0","connector":"mysql","name":"shop",`

func TestAppendChange(t *testing.T) {
	enc := testEncoder()
	absentName := itemRow(1, "x", "2.50", 0)
	absentName[1] = binlog.Value{}
	absentName[3] = binlog.Value{}
	for _, tc := range []struct {
		name string
		txn  *binlog.Txn
		ch   binlog.Change
		snap Snapshot
		want string
	}{
		{
			name: "insert",
			txn:  testTxn,
			ch:   binlog.Change{Op: binlog.OpInsert, Table: itemsTable, After: itemRow(1, "Café", "9.99", 3), File: "mysql-bin.000003", Pos: 4711, Row: 2},
			want: `{"before":null,"after":{"id":1,"name":"Café","price":"9.99","we\"ird\tname":3},` + srcHead +
				`"ts_ms":1714979288999,"snapshot":"false","db":"shop","table":"items","server_id":1,` +
				`"gtid":"3e11fa47-71ca-11e1-9e33-c80aa9429562:23","file":"mysql-bin.000003","pos":4711,"row":2},"op":"c","ts_ms":1714979289123}`,
		},
		{
			name: "XA transaction: the XID after the GTID",
			txn:  &binlog.Txn{GTID: "0-1-42", ServerID: 1, CommitTime: time.UnixMicro(1714979288999999), XID: "X'6131',X'',1", PrepareGTID: "0-1-40", Last: true},
			ch:   binlog.Change{Op: binlog.OpInsert, Table: itemsTable, After: itemRow(1, "x", "1.00", 0), File: "f.1", Pos: 4},
			want: `{"before":null,"after":{"id":1,"name":"x","price":"1.00","we\"ird\tname":0},` + srcHead +
				`"ts_ms":1714979288999,"snapshot":"false","db":"shop","table":"items","server_id":1,` +
				`"gtid":"0-1-42","xid":"X'6131',X'',1","file":"f.1","pos":4,"row":0},"op":"c","ts_ms":1714979289123}`,
		},
		{
			name: "update with NULL",
			txn:  testTxn,
			ch:   binlog.Change{Op: binlog.OpUpdate, Table: itemsTable, Before: itemRow(1, "a", "1.00", 0), After: itemRow(1, "", "1.00", 0), File: "f.1", Pos: 4},
			want: `{"before":{"id":1,"name":"a","price":"1.00","we\"ird\tname":0},"after":{"id":1,"name":null,"price":"1.00","we\"ird\tname":0},` + srcHead +
				`"ts_ms":1714979288999,"snapshot":"false","db":"shop","table":"items","server_id":1,` +
				`"gtid":"3e11fa47-71ca-11e1-9e33-c80aa9429562:23","file":"f.1","pos":4,"row":0},"op":"u","ts_ms":1714979289123}`,
		},
		{
			name: "update minimal image",
			txn:  testTxn,
			ch:   binlog.Change{Op: binlog.OpUpdate, Table: itemsTable, Before: binlog.Row{binlog.IntValue(1), {}, {}, {}}, After: absentName, File: "f.1", Pos: 4},
			want: `{"before":{"id":1},"after":{"id":1,"price":"2.50"},"present":{"before":["id"],"after":["id","price"]},` + srcHead +
				`"ts_ms":1714979288999,"snapshot":"false","db":"shop","table":"items","server_id":1,` +
				`"gtid":"3e11fa47-71ca-11e1-9e33-c80aa9429562:23","file":"f.1","pos":4,"row":0},"op":"u","ts_ms":1714979289123}`,
		},
		{
			name: "delete, no gtid, no commit time",
			txn:  &binlog.Txn{},
			ch:   binlog.Change{Op: binlog.OpDelete, Table: itemsTable, Before: itemRow(2, "b", "0.00", -1), After: itemRow(9, "ignored", "0", 0), File: "f.2", Pos: 123456789, Row: 1},
			want: `{"before":{"id":2,"name":"b","price":"0.00","we\"ird\tname":-1},"after":null,` + srcHead +
				`"ts_ms":0,"snapshot":"false","db":"shop","table":"items","server_id":7,` +
				`"gtid":null,"file":"f.2","pos":123456789,"row":1},"op":"d","ts_ms":1714979289123}`,
		},
		{
			name: "snapshot read, nil txn",
			txn:  nil,
			ch:   binlog.Change{Op: binlog.OpRead, Table: itemsTable, After: itemRow(3, "c", "3.00", 0), File: "f.9", Pos: 154},
			want: `{"before":null,"after":{"id":3,"name":"c","price":"3.00","we\"ird\tname":0},` + srcHead +
				`"ts_ms":0,"snapshot":"true","db":"shop","table":"items","server_id":7,` +
				`"gtid":null,"file":"f.9","pos":154,"row":0},"op":"r","ts_ms":1714979289123}`,
		},
		{
			name: "snapshot last",
			txn:  &binlog.Txn{CommitTime: time.UnixMilli(1000)},
			ch:   binlog.Change{Op: binlog.OpRead, Table: itemsTable, After: itemRow(4, "d", "4.00", 0), File: "f.9", Pos: 154},
			snap: SnapshotLast,
			want: `{"before":null,"after":{"id":4,"name":"d","price":"4.00","we\"ird\tname":0},` + srcHead +
				`"ts_ms":1000,"snapshot":"last","db":"shop","table":"items","server_id":7,` +
				`"gtid":null,"file":"f.9","pos":154,"row":0},"op":"r","ts_ms":1714979289123}`,
		},
		{
			name: "ddl",
			txn:  testTxn,
			ch:   binlog.Change{Op: binlog.OpDDL, Query: "ALTER TABLE items ADD note TEXT COMMENT \"n\"\n", Schema: "shop", File: "f.3", Pos: 999},
			want: `{` + srcHead +
				`"ts_ms":1714979288999,"snapshot":"false","db":"shop","table":null,"server_id":1,` +
				`"gtid":"3e11fa47-71ca-11e1-9e33-c80aa9429562:23","file":"f.3","pos":999,"row":0},` +
				`"databaseName":"shop","ddl":"ALTER TABLE items ADD note TEXT COMMENT \"n\"\n","ts_ms":1714979289123}`,
		},
		{
			name: "ddl with table",
			txn:  testTxn,
			ch:   binlog.Change{Op: binlog.OpDDL, Query: "DROP TABLE other.t", Schema: "shop", Table: &binlog.Table{Schema: "other", Name: "t"}, File: "f.3", Pos: 999},
			want: `{` + srcHead +
				`"ts_ms":1714979288999,"snapshot":"false","db":"other","table":"t","server_id":1,` +
				`"gtid":"3e11fa47-71ca-11e1-9e33-c80aa9429562:23","file":"f.3","pos":999,"row":0},` +
				`"databaseName":"other","ddl":"DROP TABLE other.t","ts_ms":1714979289123}`,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := enc.AppendSnapshotChange([]byte("x"), tc.txn, &tc.ch, tc.snap)
			if got[0] != 'x' {
				t.Fatal("dst prefix lost")
			}
			got = got[1:]
			if !bytes.HasSuffix(got, []byte("\n")) || bytes.Count(got, []byte("\n")) != 1 {
				t.Fatalf("not one line: %q", got)
			}
			line := got[:len(got)-1]
			if string(line) != tc.want {
				t.Errorf("got\n%s\nwant\n%s", line, tc.want)
			}
			if !json.Valid(line) {
				t.Errorf("invalid JSON")
			}
			if tc.snap == SnapshotAuto {
				if again := enc.AppendChange(nil, tc.txn, &tc.ch); !bytes.Equal(again, got) {
					t.Errorf("AppendChange differs from AppendSnapshotChange(SnapshotAuto)")
				}
			}
			ev, err := DecodeLine(got)
			if err != nil {
				t.Fatalf("DecodeLine: %v", err)
			}
			if tc.txn != nil && ev.Source.XID != tc.txn.XID {
				t.Errorf("decoded XID %q, want %q", ev.Source.XID, tc.txn.XID)
			}
			if ev.IsDDL() != (tc.ch.Op == binlog.OpDDL) {
				t.Errorf("IsDDL = %v", ev.IsDDL())
			}
			if ev.TsMs != 1714979289123 || ev.Source.Name != "shop" || ev.Source.Connector != "mysql" ||
				ev.Source.Version != "sluice-1.0.0" || ev.Source.File != tc.ch.File || ev.Source.Pos != tc.ch.Pos ||
				ev.Source.Row != tc.ch.Row {
				t.Errorf("decoded envelope %+v", ev)
			}
			if ev.IsDDL() {
				if ev.DDL != tc.ch.Query {
					t.Errorf("DDL = %q", ev.DDL)
				}
			} else if ev.Op != tc.ch.Op.Code() {
				t.Errorf("Op = %q", ev.Op)
			}
		})
	}
}

func TestSnapshotMarkers(t *testing.T) {
	enc := testEncoder()
	for _, tc := range []struct {
		op   binlog.Op
		snap Snapshot
		want string
	}{
		{binlog.OpInsert, SnapshotAuto, "false"},
		{binlog.OpRead, SnapshotAuto, "true"},
		{binlog.OpRead, SnapshotTrue, "true"},
		{binlog.OpRead, SnapshotLast, "last"},
		{binlog.OpInsert, SnapshotTrue, "true"},
		{binlog.OpRead, SnapshotFalse, "false"},
		{binlog.OpDDL, SnapshotAuto, "false"},
		{binlog.OpDDL, SnapshotTrue, "true"},
		{binlog.OpInsert, Snapshot(99), "false"},
		// Debezium's other markers are "true" in format sluice.
		{binlog.OpRead, SnapshotFirst, "true"},
		{binlog.OpRead, SnapshotFirstInTable, "true"},
		{binlog.OpRead, SnapshotLastInTable, "true"},
	} {
		ch := binlog.Change{Op: tc.op, Table: itemsTable, After: itemRow(1, "a", "1", 1), Query: "CREATE TABLE x (a int)"}
		ev, err := DecodeLine(enc.AppendSnapshotChange(nil, testTxn, &ch, tc.snap))
		if err != nil {
			t.Fatal(err)
		}
		if ev.Source.Snapshot != tc.want {
			t.Errorf("%v %v: snapshot %q, want %q", tc.op, tc.snap, ev.Source.Snapshot, tc.want)
		}
	}
	if SnapshotLast.String() != "last" || SnapshotAuto.String() != "auto" || SnapshotLastInTable.String() != "last_in_data_collection" {
		t.Error("Snapshot.String")
	}
}

// TestSnapshotOf: a chunk's flags give Debezium's markers, in its
// precedence (last, first, a table's last, a table's first).
func TestSnapshotOf(t *testing.T) {
	rows := func(n int) []binlog.Change {
		chs := make([]binlog.Change, n)
		for i := range chs {
			chs[i] = binlog.Change{Op: binlog.OpRead}
		}
		return chs
	}
	for _, tc := range []struct {
		name string
		txn  binlog.Txn
		want string // the markers of the chunk's changes
	}{
		{"stream", binlog.Txn{Changes: rows(2), SnapshotLast: true}, "auto auto"},
		{"plain", binlog.Txn{Snapshot: true, Changes: rows(3)}, "auto auto auto"},
		{"one table, one chunk", binlog.Txn{Snapshot: true, Changes: rows(3), SnapshotFirst: true, SnapshotTableFirst: true, SnapshotTableLast: true, SnapshotLast: true}, "first auto last"},
		{"one row, everything", binlog.Txn{Snapshot: true, Changes: rows(1), SnapshotFirst: true, SnapshotTableFirst: true, SnapshotTableLast: true, SnapshotLast: true}, "last"},
		{"first table's only chunk", binlog.Txn{Snapshot: true, Changes: rows(2), SnapshotFirst: true, SnapshotTableFirst: true, SnapshotTableLast: true}, "first last_in_data_collection"},
		{"a table's only row", binlog.Txn{Snapshot: true, Changes: rows(1), SnapshotTableFirst: true, SnapshotTableLast: true}, "last_in_data_collection"},
		{"second table", binlog.Txn{Snapshot: true, Changes: rows(2), SnapshotTableFirst: true}, "first_in_data_collection auto"},
		{"truncate", binlog.Txn{Snapshot: true, Changes: append([]binlog.Change{{Op: binlog.OpDDL}}, rows(1)...), SnapshotTableFirst: true}, "true auto"},
	} {
		var got []string
		for i := range tc.txn.Changes {
			got = append(got, SnapshotOf(&tc.txn, i).String())
		}
		if strings.Join(got, " ") != tc.want {
			t.Errorf("%s: %v, want %s", tc.name, got, tc.want)
		}
	}
}

func TestEncoderDefaults(t *testing.T) {
	enc := NewEncoder(Source{Name: `a"b`}, WithClock(nil))
	line := enc.AppendChange(nil, nil, &binlog.Change{Op: binlog.OpInsert, Table: itemsTable, After: itemRow(1, "", "1", 1)})
	ev, err := DecodeLine(line)
	if err != nil {
		t.Fatalf("%v: %s", err, line)
	}
	if ev.Source.Version != "sluice-dev" || ev.Source.Name != `a"b` {
		t.Errorf("source %+v", ev.Source)
	}
	if d := time.Since(time.UnixMilli(ev.TsMs)); d < 0 || d > time.Minute {
		t.Errorf("ts_ms %d is not now", ev.TsMs)
	}
	if enc.Source().Name != `a"b` {
		t.Error("Source()")
	}
}

// TestRowEdges covers rows that do not match their table.
func TestRowEdges(t *testing.T) {
	for _, tc := range []struct {
		t    *binlog.Table
		row  binlog.Row
		want string
	}{
		{itemsTable, nil, `null`},
		{itemsTable, binlog.Row{}, `{}`},
		{itemsTable, binlog.Row{{}, {}, {}, {}}, `{}`},
		{itemsTable, binlog.Row{binlog.IntValue(1)}, `{"id":1}`},
		{itemsTable, append(itemRow(1, "", "2", 3), binlog.IntValue(4)), `{"id":1,"name":null,"price":"2","we\"ird\tname":3}`},
		{nil, binlog.Row{binlog.IntValue(1)}, `{}`},
		{&binlog.Table{Columns: []binlog.Column{{Name: "\xff\x00"}}}, binlog.Row{binlog.IntValue(1)}, `{"\ufffd\u0000":1}`},
	} {
		if got := string(AppendRow(nil, tc.t, tc.row)); got != tc.want {
			t.Errorf("AppendRow(%v) = %s, want %s", tc.row, got, tc.want)
		}
	}
}

func TestAppendKey(t *testing.T) {
	composite := &binlog.Table{
		Schema: "s", Name: "t",
		Columns: []binlog.Column{
			{Name: "a", Kind: binlog.KindInt},
			{Name: "b", Kind: binlog.KindString, Charset: "latin1"},
			{Name: "c", Kind: binlog.KindInt},
		},
		PrimaryKey: []int{2, 1},
	}
	noPK := &binlog.Table{Schema: "s", Name: "t", Columns: composite.Columns}
	row := binlog.Row{binlog.IntValue(1), str(binlog.KindString, "\xe9"), binlog.IntValue(3)}
	for _, tc := range []struct {
		t    *binlog.Table
		row  binlog.Row
		want string
	}{
		{itemsTable, itemRow(42, "x", "1", 0), `{"id":42}`},
		{composite, row, `{"c":3,"b":"é"}`},
		{noPK, row, `{"a":1,"b":"é","c":3}`},
		{composite, binlog.Row{binlog.IntValue(1)}, `{}`},
		{&binlog.Table{Columns: composite.Columns, PrimaryKey: []int{7, -1, 0}}, row, `{"a":1}`},
		{nil, row, `{}`},
	} {
		if got := string(AppendKey(nil, tc.t, tc.row)); got != tc.want {
			t.Errorf("AppendKey = %s, want %s", got, tc.want)
		}
	}

	before := itemRow(1, "a", "1", 0)
	after := itemRow(2, "b", "1", 0)
	minimal := binlog.Row{{}, str(binlog.KindString, "c"), {}, {}}
	for _, tc := range []struct {
		ch   binlog.Change
		want string
	}{
		{binlog.Change{Op: binlog.OpInsert, Table: itemsTable, After: after}, `{"id":2}`},
		{binlog.Change{Op: binlog.OpRead, Table: itemsTable, After: after}, `{"id":2}`},
		{binlog.Change{Op: binlog.OpDelete, Table: itemsTable, Before: before}, `{"id":1}`},
		{binlog.Change{Op: binlog.OpUpdate, Table: itemsTable, Before: before, After: after}, `{"id":2}`},
		{binlog.Change{Op: binlog.OpUpdate, Table: itemsTable, Before: before, After: minimal}, `{"id":1}`},
	} {
		if got := string(AppendChangeKey(nil, &tc.ch)); got != tc.want {
			t.Errorf("AppendChangeKey(%v) = %s, want %s", tc.ch.Op, got, tc.want)
		}
	}
}

func TestDecodeLineErrors(t *testing.T) {
	src := `"source":{"db":"d"}`
	for _, line := range []string{
		``,
		`[]`,
		`{"before":null,"after":{},` + src + `}`,
		`{"before":null,"after":{},` + src + `,"op":"x"}`,
		`{"before":null,"after":null,` + src + `,"op":"c"}`,
		`{"before":{},"after":null,` + src + `,"op":"u"}`,
		`{"before":null,"after":{},` + src + `,"op":"d"}`,
		`{` + src + `,"op":"c","ddl":"x"}`,
		`{"before":{},` + src + `,"ddl":"x"}`,
		`{"before":null,"after":{},` + src + `,"op":"c"} x`,
	} {
		if ev, err := DecodeLine([]byte(line)); err == nil {
			t.Errorf("DecodeLine(%s) = %+v, want error", line, ev)
		}
	}
	_, err := DecodeLine([]byte(`{"op":"zz"}`))
	if !errors.Is(err, ErrBadEvent) {
		t.Errorf("err = %v, want ErrBadEvent", err)
	}
}

// TestRebuildState streams a sequence of changes through the encoder and
// rebuilds the table from the decoded lines alone, as a consumer would.
func TestRebuildState(t *testing.T) {
	enc := testEncoder()
	txn := &binlog.Txn{GTID: "0-1-5", ServerID: 1, CommitTime: time.Unix(1700000000, 0)}
	changes := []binlog.Change{
		{Op: binlog.OpRead, Table: itemsTable, After: itemRow(1, "one", "1.00", 0)},
		{Op: binlog.OpRead, Table: itemsTable, After: itemRow(2, "two", "2.00", 0)},
		{Op: binlog.OpInsert, Table: itemsTable, After: itemRow(3, "three", "3.00", 0)},
		{Op: binlog.OpUpdate, Table: itemsTable, Before: itemRow(1, "one", "1.00", 0), After: itemRow(1, "uno", "1.50", 0)},
		{Op: binlog.OpDelete, Table: itemsTable, Before: itemRow(2, "two", "2.00", 0)},
		{Op: binlog.OpDDL, Schema: "shop", Query: "ALTER TABLE items COMMENT 'x'"},
		{Op: binlog.OpUpdate, Table: itemsTable, Before: binlog.Row{binlog.IntValue(3), {}, {}, {}},
			After: binlog.Row{binlog.IntValue(3), binlog.NullValue(), {}, {}}},
	}
	var out []byte
	for i := range changes {
		out = enc.AppendChange(out, txn, &changes[i])
	}
	state := map[string]map[string]json.RawMessage{}
	lines := bytes.SplitAfter(out, []byte("\n"))
	if len(lines[len(lines)-1]) == 0 {
		lines = lines[:len(lines)-1]
	}
	if len(lines) != len(changes) {
		t.Fatalf("%d lines for %d changes", len(lines), len(changes))
	}
	ddls := 0
	for _, line := range lines {
		if !json.Valid(line) {
			t.Fatalf("invalid JSON: %s", line)
		}
		ev, err := DecodeLine(line)
		if err != nil {
			t.Fatal(err)
		}
		if ev.IsDDL() {
			ddls++
			continue
		}
		var key string
		if ev.Op == "d" {
			key = string(ev.Before["id"])
			delete(state, key)
			continue
		}
		key = string(ev.After["id"])
		row := maps.Clone(state[key])
		if row == nil {
			row = map[string]json.RawMessage{}
		}
		maps.Copy(row, ev.After) // absent columns keep their value
		state[key] = row
	}
	if ddls != 1 {
		t.Errorf("%d DDL events", ddls)
	}
	want := map[string]string{
		"1": `{"id":1,"name":"uno","price":"1.50","we\"ird\tname":0}`,
		"3": `{"id":3,"name":null,"price":"3.00","we\"ird\tname":0}`,
	}
	if len(state) != len(want) {
		t.Fatalf("state has %d rows: %v", len(state), state)
	}
	for k, w := range want {
		var wantRow map[string]json.RawMessage
		if err := json.Unmarshal([]byte(w), &wantRow); err != nil {
			t.Fatal(err)
		}
		if !maps.EqualFunc(state[k], wantRow, func(a, b json.RawMessage) bool { return bytes.Equal(a, b) }) {
			t.Errorf("row %s = %v, want %s", k, state[k], w)
		}
	}
}

// TestAllKindsLine encodes a row holding every value case and checks the
// whole line is valid JSON holding each expected value.
func TestAllKindsLine(t *testing.T) {
	tbl := &binlog.Table{Schema: "db", Name: "all"}
	var row binlog.Row
	for _, tc := range valueCases {
		col := tc.col
		col.Name = tc.name
		tbl.Columns = append(tbl.Columns, col)
		row = append(row, tc.v)
	}
	enc := testEncoder()
	line := enc.AppendChange(nil, testTxn, &binlog.Change{Op: binlog.OpInsert, Table: tbl, After: row})
	ev, err := DecodeLine(line)
	if err != nil {
		t.Fatalf("%v\n%s", err, line)
	}
	for _, tc := range valueCases {
		got, ok := ev.After[tc.name]
		if tc.v.IsAbsent() {
			if ok {
				t.Errorf("%s: absent column present", tc.name)
			}
			continue
		}
		if !ok {
			t.Errorf("%s: missing", tc.name)
			continue
		}
		if string(got) != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
	}
	if strings.Count(string(line), "\n") != 1 {
		t.Error("line breaks inside the event")
	}
}

func TestAppendChangeNoAlloc(t *testing.T) {
	enc := testEncoder()
	for _, b := range []struct {
		name string
		ch   binlog.Change
	}{
		{"short", shortChange()},
		{"long", longChange()},
		{"ddl", binlog.Change{Op: binlog.OpDDL, Schema: "shop", Query: "DROP TABLE t"}},
	} {
		buf := make([]byte, 0, 4096)
		n := testing.AllocsPerRun(100, func() {
			buf = enc.AppendChange(buf[:0], testTxn, &b.ch)
			buf = AppendChangeKey(buf, &b.ch)
		})
		if n != 0 {
			t.Errorf("%s: %v allocs per change", b.name, n)
		}
	}
}

// TestPresentColumns: an image that lacks columns (MINIMAL) leaves them
// out and lists the present ones; a full image writes no "present".
func TestPresentColumns(t *testing.T) {
	tbl := &binlog.Table{Schema: "db", Name: "items", PrimaryKey: []int{0}, Columns: []binlog.Column{
		{Name: "id", Kind: binlog.KindInt}, {Name: "name", Kind: binlog.KindString, Charset: "utf8mb4", Nullable: true}, {Name: "price", Kind: binlog.KindDecimal, Nullable: true},
	}}
	enc := testEncoder()
	partial := enc.AppendChange(nil, testTxn, &binlog.Change{Op: binlog.OpUpdate, Table: tbl,
		Before: binlog.Row{binlog.IntValue(1), {}, {}},
		After:  binlog.Row{binlog.IntValue(1), {}, binlog.BytesValue(binlog.KindDecimal, []byte("2.50"))}})
	want := `{"before":{"id":1},"after":{"id":1,"price":"2.50"},"present":{"before":["id"],"after":["id","price"]},"source":`
	if !strings.HasPrefix(string(partial), want) {
		t.Fatalf("got %s\nwant it to start with %s", partial, want)
	}
	ev, err := DecodeLine(partial)
	if err != nil {
		t.Fatal(err)
	}
	if ev.Present == nil || !slices.Equal(ev.Present.Before, []string{"id"}) || !slices.Equal(ev.Present.After, []string{"id", "price"}) {
		t.Fatalf("decoded present %+v", ev.Present)
	}
	del := enc.AppendChange(nil, testTxn, &binlog.Change{Op: binlog.OpDelete, Table: tbl, Before: binlog.Row{binlog.IntValue(1), {}, {}}})
	if want := `"present":{"before":["id"],"after":null}`; !strings.Contains(string(del), want) {
		t.Fatalf("delete: %s lacks %s", del, want)
	}
	full := enc.AppendChange(nil, testTxn, &binlog.Change{Op: binlog.OpUpdate, Table: tbl,
		Before: binlog.Row{binlog.IntValue(1), binlog.NullValue(), binlog.NullValue()},
		After:  binlog.Row{binlog.IntValue(1), binlog.NullValue(), binlog.BytesValue(binlog.KindDecimal, []byte("2.50"))}})
	if strings.Contains(string(full), `"present"`) {
		t.Fatalf("full images: %s has present", full)
	}
}
