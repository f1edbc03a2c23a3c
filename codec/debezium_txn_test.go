package codec

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/sluice-cdc/sluice/binlog"
	"github.com/sluice-cdc/sluice/position"
)

func TestSkippedOperations(t *testing.T) {
	for _, tc := range []struct {
		v        string
		err      string // "" valid
		truncate bool   // TruncateEvents when valid
	}{
		{v: "", truncate: false},
		{v: "t", truncate: false},
		{v: " t ", truncate: false},
		{v: "t,t", truncate: false},
		{v: "none", truncate: true},
		{v: "c", err: `names "c": sluice does not skip data changes`},
		{v: "t,u", err: `names "u": sluice does not skip data changes`},
		{v: "d", err: `names "d"`},
		{v: "none,t", err: `"none" stands alone`},
		{v: "x", err: `"x" is not an operation`},
	} {
		f := Format{Name: FormatDebezium, SkippedOperations: tc.v}
		err := f.Validate()
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("skipped.operations %q: %v", tc.v, err)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("skipped.operations %q: error %v, want one saying %s", tc.v, err, tc.err)
		case tc.err == "" && f.TruncateEvents() != tc.truncate:
			t.Errorf("skipped.operations %q: TruncateEvents %v, want %v", tc.v, f.TruncateEvents(), tc.truncate)
		}
	}
	for _, f := range []Format{{TransactionMetadata: true}, {Name: FormatSluice, SkippedOperations: "none"}} {
		if err := f.Validate(); err == nil || !strings.Contains(err.Error(), "belong to format debezium") {
			t.Errorf("%+v: error %v, want one saying the options belong to format debezium", f, err)
		}
		if f.TruncateEvents() {
			t.Errorf("%+v: TruncateEvents in format sluice", f)
		}
	}
	if err := (Format{Name: FormatDebezium, TransactionMetadata: true, SkippedOperations: "none", Schemas: true}).Validate(); err != nil {
		t.Error(err)
	}
}

func TestTxnID(t *testing.T) {
	for _, tc := range []struct {
		txn  binlog.Txn
		want string
	}{
		{binlog.Txn{GTID: "3e11fa47-71ca-11e1-9e33-c80aa9429562:23", Begin: position.Position{File: "b.000001", Offset: 4}}, "3e11fa47-71ca-11e1-9e33-c80aa9429562:23"},
		{binlog.Txn{GTID: "0-1-42"}, "0-1-42"}, // MariaDB: domain-server-sequence
		{binlog.Txn{Begin: position.Position{File: "mysql-bin.000003", Offset: 4711}}, "file=mysql-bin.000003,pos=4711"},
	} {
		if got := TxnID(&tc.txn); got != tc.want {
			t.Errorf("TxnID(%+v) = %q, want %q", tc.txn, got, tc.want)
		}
	}
}

func TestTxnRecords(t *testing.T) {
	const (
		keySchema = `{"type":"struct","fields":[{"type":"string","optional":false,"field":"id"}],"optional":false,"name":"io.debezium.connector.common.TransactionMetadataKey","version":1}`
		valSchema = `{"type":"struct","fields":[{"type":"string","optional":false,"field":"status"},{"type":"string","optional":false,"field":"id"},` +
			`{"type":"int64","optional":true,"field":"event_count"},` +
			`{"type":"array","items":{"type":"struct","fields":[{"type":"string","optional":false,"field":"data_collection"},{"type":"int64","optional":false,"field":"event_count"}],"optional":true,"name":"event.collection","version":1},"optional":true,"field":"data_collections"},` +
			`{"type":"int64","optional":false,"field":"ts_ms"}],"optional":false,"name":"io.debezium.connector.common.TransactionMetadataValue","version":1}`
	)
	tables := []TxnCount{{"shop.orders", 2}, {"shop.lines", 5}}
	for _, tc := range []struct {
		what, got, want string
	}{
		{"key", string(AppendTxnKey(nil, "0-1-42", false)), `{"id":"0-1-42"}`},
		{"key with schema", string(AppendTxnKey(nil, "0-1-42", true)), `{"schema":` + keySchema + `,"payload":{"id":"0-1-42"}}`},
		{"begin", string(AppendTxnBegin(nil, "0-1-42", 1714979288999, false)),
			`{"status":"BEGIN","id":"0-1-42","event_count":null,"data_collections":null,"ts_ms":1714979288999}`},
		{"end", string(AppendTxnEnd(nil, "0-1-42", 1714979288999, 7, tables, false)),
			`{"status":"END","id":"0-1-42","event_count":7,"data_collections":[{"data_collection":"shop.orders","event_count":2},{"data_collection":"shop.lines","event_count":5}],"ts_ms":1714979288999}`},
		{"begin with schema", string(AppendTxnBegin(nil, "u:1", 5, true)),
			`{"schema":` + valSchema + `,"payload":{"status":"BEGIN","id":"u:1","event_count":null,"data_collections":null,"ts_ms":5}}`},
		{"end with schema", string(AppendTxnEnd(nil, "u:1", 5, 1, tables[:1], true)),
			`{"schema":` + valSchema + `,"payload":{"status":"END","id":"u:1","event_count":1,"data_collections":[{"data_collection":"shop.orders","event_count":2}],"ts_ms":5}}`},
		{"quoted id", string(AppendTxnKey(nil, `a"b`, false)), `{"id":"a\"b"}`},
	} {
		if tc.got != tc.want {
			t.Errorf("%s:\n got %s\nwant %s", tc.what, tc.got, tc.want)
		}
		if !json.Valid([]byte(tc.got)) {
			t.Errorf("%s: not JSON: %s", tc.what, tc.got)
		}
	}
}

func TestIsTruncate(t *testing.T) {
	tb := &binlog.Table{Schema: "shop", Name: "t"}
	for _, tc := range []struct {
		q     string
		table *binlog.Table
		want  bool
	}{
		{"TRUNCATE TABLE t", tb, true},
		{"truncate t", tb, true},
		{"  /* x */ TRUNCATE `t`", tb, true},
		{"TRUNCATE\tTABLE t", tb, true},
		{"TRUNCATE TABLE t", nil, false},
		{"DROP TABLE t", tb, false},
		{"TRUNCATED_thing", tb, false},
		{"/* unterminated TRUNCATE t", tb, false},
	} {
		ch := binlog.Change{Op: binlog.OpDDL, Table: tc.table, Query: tc.q}
		if got := IsTruncate(&ch); got != tc.want {
			t.Errorf("IsTruncate(%q, table %v) = %v, want %v", tc.q, tc.table != nil, got, tc.want)
		}
	}
	ins := binlog.Change{Op: binlog.OpInsert, Table: tb, Query: "TRUNCATE t"}
	if IsTruncate(&ins) {
		t.Error("an insert is not a TRUNCATE")
	}
}
