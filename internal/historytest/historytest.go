// Package historytest checks that a schema history store
// (binlog.HistoryStore) keeps what the pipeline needs of it: the tests of
// every store (checkpoint's file, coord's etcd) run the same story.
package historytest

import (
	"context"
	"testing"

	"github.com/sluice-cdc/sluice/binlog"
	"github.com/sluice-cdc/sluice/position"
)

// Entry is a DDL's history entry at offset off of mysql-bin.000002 on
// table app.<table>.
func Entry(off uint32, table, create string) binlog.HistoryEntry {
	return binlog.HistoryEntry{Pos: position.Position{File: "mysql-bin.000002", Offset: off}, DB: "app", Table: table, Create: create, Statement: "ALTER TABLE"}
}

// Check runs the same story on a store: a base, appends (one appended
// twice, as after a restart), a compaction. reopen returns the store as a
// restart would find it.
func Check(t *testing.T, s binlog.HistoryStore, reopen func() binlog.HistoryStore) {
	t.Helper()
	ctx := context.Background()
	if base, entries, err := s.LoadSchema(ctx); err != nil || base != nil || len(entries) != 0 {
		t.Fatalf("empty: %v %v %v", base, entries, err)
	}
	base := binlog.HistoryState{Pos: position.Position{File: "mysql-bin.000001", Offset: 500}, Databases: map[string]string{"app": "utf8mb4"},
		Tables: []binlog.HistoryEntry{{DB: "app", Table: "t", Create: "CREATE TABLE `t` (`id` int)"}}}
	if err := s.CompactSchema(ctx, base); err != nil {
		t.Fatal(err)
	}
	e1 := Entry(100, "t", "CREATE TABLE `t` (`id` int, `a` int)")
	e2 := Entry(200, "t", "")
	e2.Dropped = true
	e3 := Entry(200, "u", "CREATE TABLE `u` (`id` int, `a` int)")
	e4 := Entry(900, "u", "CREATE TABLE `u` (`id` int)")
	for _, batch := range [][]binlog.HistoryEntry{{e1}, {e2, e3}, {e1}, {e2, e3}, {e4}} {
		if err := s.AppendSchema(ctx, batch); err != nil {
			t.Fatal(err)
		}
	}
	s = reopen()
	if err := s.AppendSchema(ctx, []binlog.HistoryEntry{e2, e3}); err != nil { // a restart reads them again
		t.Fatal(err)
	}
	gotBase, entries, err := s.LoadSchema(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if gotBase == nil || gotBase.Pos != base.Pos || len(gotBase.Tables) != 1 || gotBase.Databases["app"] != "utf8mb4" {
		t.Fatalf("base %+v", gotBase)
	}
	if len(entries) != 4 || entries[0].Pos.Offset != 100 || entries[3].Pos.Offset != 900 {
		t.Fatalf("entries %+v", entries)
	}
	// Compacting up to 200 keeps the entry at 900 only.
	base.Pos = position.Position{File: "mysql-bin.000002", Offset: 200}
	if err := s.CompactSchema(ctx, base); err != nil {
		t.Fatal(err)
	}
	s = reopen()
	if _, entries, err = s.LoadSchema(ctx); err != nil || len(entries) != 1 || entries[0].Pos.Offset != 900 {
		t.Fatalf("after compaction: %+v %v", entries, err)
	}
}
