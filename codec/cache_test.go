package codec

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/sluice-cdc/sluice/binlog"
)

// The source block is reused between rows of one event, and the quoted
// column names between events of one table; any difference in what they
// depend on must rebuild them.
func TestSourceCacheNeverStale(t *testing.T) {
	clock := func() time.Time { return time.UnixMilli(1700000000123) }
	tA := &binlog.Table{Schema: "db", Name: "a", Columns: []binlog.Column{{Name: "id", Kind: binlog.KindInt}}}
	tB := &binlog.Table{Schema: "db2", Name: "b", Columns: []binlog.Column{{Name: "k", Kind: binlog.KindInt}}}
	tC := &binlog.Table{Schema: "db2", Name: "c", Columns: []binlog.Column{{Name: "id", Kind: binlog.KindInt}}}
	tC2 := *tC // a copy of tC with other columns
	tC2.Columns = []binlog.Column{{Name: "renamed", Kind: binlog.KindInt}}
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
		{t1, binlog.Change{Op: binlog.OpInsert, Table: tC, After: row, File: "f.2", Pos: 40}, SnapshotAuto},
		{t1, binlog.Change{Op: binlog.OpInsert, Table: &tC2, After: row, File: "f.2", Pos: 40}, SnapshotAuto},
		{t1, binlog.Change{Op: binlog.OpInsert, Table: tA, After: row, File: "f.2", Pos: 40}, SnapshotAuto},
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

// The default clock writes the time of the call, as time.Now would.
func TestSystemClock(t *testing.T) {
	enc := NewEncoder(Source{Name: "s"})
	tb := &binlog.Table{Schema: "db", Name: "a", Columns: []binlog.Column{{Name: "id", Kind: binlog.KindInt}}}
	ch := binlog.Change{Op: binlog.OpInsert, Table: tb, After: binlog.Row{binlog.IntValue(1)}, File: "f.1", Pos: 4}
	for i := 0; i < 3; i++ {
		before := time.Now().UnixMilli()
		line := enc.AppendChange(nil, nil, &ch)
		after := time.Now().UnixMilli()
		var ev struct {
			TsMs int64 `json:"ts_ms"`
		}
		if err := json.Unmarshal(line, &ev); err != nil {
			t.Fatalf("%s: %v", line, err)
		}
		if ev.TsMs < before || ev.TsMs > after {
			t.Errorf("ts_ms %d, want between %d and %d", ev.TsMs, before, after)
		}
		time.Sleep(3 * time.Millisecond)
	}
}

func TestAppendStringArray(t *testing.T) {
	for _, c := range []struct {
		in   []string
		want string
	}{
		{nil, `[]`},
		{[]string{"a"}, `["a"]`},
		{[]string{"x,y", `q"uote`, "ü"}, `["x,y","q\"uote","ü"]`},
	} {
		if got := string(appendStringArray([]byte("p"), c.in)); got != "p"+c.want {
			t.Errorf("appendStringArray(%q) = %s, want p%s", c.in, got, c.want)
		}
	}
}
