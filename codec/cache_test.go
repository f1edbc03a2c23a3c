package codec

import (
	"testing"
	"time"

	"github.com/sluice-cdc/sluice/binlog"
)

// The source block is reused between rows of one event; any difference in
// what it depends on must rebuild it.
func TestSourceCacheNeverStale(t *testing.T) {
	clock := func() time.Time { return time.UnixMilli(1700000000123) }
	tA := &binlog.Table{Schema: "db", Name: "a", Columns: []binlog.Column{{Name: "id", Kind: binlog.KindInt}}}
	tB := &binlog.Table{Schema: "db2", Name: "b", Columns: []binlog.Column{{Name: "id", Kind: binlog.KindInt}}}
	row := binlog.Row{binlog.IntValue(1)}
	t1 := &binlog.Txn{GTID: "0-1-1", ServerID: 1, CommitTime: time.Unix(1700000000, 0)}
	t2 := &binlog.Txn{GTID: "0-1-2", ServerID: 1, CommitTime: time.Unix(1700000000, 0)}
	t3 := &binlog.Txn{GTID: "0-1-2", ServerID: 2, CommitTime: time.Unix(1700000001, 0)}
	type call struct {
		txn  *binlog.Txn
		ch   binlog.Change
		snap Snapshot
	}
	calls := []call{
		{t1, binlog.Change{Op: binlog.OpInsert, Table: tA, After: row, File: "f.1", Pos: 10, Row: 0}, SnapshotAuto},
		{t1, binlog.Change{Op: binlog.OpInsert, Table: tA, After: row, File: "f.1", Pos: 10, Row: 1}, SnapshotAuto},
		{t1, binlog.Change{Op: binlog.OpInsert, Table: tA, After: row, File: "f.1", Pos: 20, Row: 0}, SnapshotAuto},
		{t1, binlog.Change{Op: binlog.OpInsert, Table: tB, After: row, File: "f.1", Pos: 20, Row: 1}, SnapshotAuto},
		{t2, binlog.Change{Op: binlog.OpInsert, Table: tB, After: row, File: "f.1", Pos: 20, Row: 1}, SnapshotAuto},
		{t3, binlog.Change{Op: binlog.OpInsert, Table: tB, After: row, File: "f.1", Pos: 20, Row: 1}, SnapshotAuto},
		{t3, binlog.Change{Op: binlog.OpInsert, Table: tB, After: row, File: "f.2", Pos: 20, Row: 1}, SnapshotAuto},
		{t3, binlog.Change{Op: binlog.OpRead, Table: tB, After: row, File: "f.2", Pos: 20, Row: 1}, SnapshotAuto},
		{t3, binlog.Change{Op: binlog.OpRead, Table: tB, After: row, File: "f.2", Pos: 20, Row: 2}, SnapshotLast},
		{nil, binlog.Change{Op: binlog.OpRead, Table: tB, After: row, File: "f.2", Pos: 20, Row: 3}, SnapshotAuto},
		{t1, binlog.Change{Op: binlog.OpDDL, Schema: "db", Query: "CREATE TABLE x (i INT)", File: "f.2", Pos: 30}, SnapshotAuto},
	}
	shared := NewEncoder(Source{Name: "s"}, WithClock(clock))
	for i, c := range calls {
		got := string(shared.AppendSnapshotChange(nil, c.txn, &c.ch, c.snap))
		want := string(NewEncoder(Source{Name: "s"}, WithClock(clock)).AppendSnapshotChange(nil, c.txn, &c.ch, c.snap))
		if got != want {
			t.Errorf("call %d:\n got %s\nwant %s", i, got, want)
		}
	}
}
