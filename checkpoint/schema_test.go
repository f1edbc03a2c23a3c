package checkpoint

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/sluice-cdc/sluice/binlog"
	"github.com/sluice-cdc/sluice/internal/testenv/etcdenv"
	"github.com/sluice-cdc/sluice/position"
)

func schemaEntry(off uint32, table, create string) binlog.HistoryEntry {
	return binlog.HistoryEntry{Pos: position.Position{File: "mysql-bin.000002", Offset: off}, DB: "app", Table: table, Create: create, Statement: "ALTER TABLE"}
}

// checkSchemaStore runs the same story on a store: a base, appends (one
// appended twice, as after a restart), a compaction.
func checkSchemaStore(t *testing.T, s binlog.HistoryStore, reopen func() binlog.HistoryStore) {
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
	e1 := schemaEntry(100, "t", "CREATE TABLE `t` (`id` int, `a` int)")
	e2 := schemaEntry(200, "t", "")
	e2.Dropped = true
	e3 := schemaEntry(200, "u", "CREATE TABLE `u` (`id` int, `a` int)")
	e4 := schemaEntry(900, "u", "CREATE TABLE `u` (`id` int)")
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

func TestFileSchemaStore(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ckpt.json.schema.main")
	checkSchemaStore(t, &FileSchemaStore{Path: path}, func() binlog.HistoryStore { return &FileSchemaStore{Path: path} })
	// A line cut short by a crash is dropped; the rest loads.
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(`{"entry":{"pos":{"file":"mysql-bin.0000`)
	f.Close()
	s := &FileSchemaStore{Path: path}
	if _, entries, err := s.LoadSchema(context.Background()); err != nil || len(entries) != 1 {
		t.Fatalf("torn line: %+v %v", entries, err)
	}
	os.WriteFile(path, []byte("{not json\n"), 0o644)
	if _, _, err := s.LoadSchema(context.Background()); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("garbage: %v", err)
	}
}

func TestEtcdSchemaStore(t *testing.T) {
	e := etcdenv.Start(t)
	cli := newEtcdClient(t, e.Endpoint())
	mk := func() binlog.HistoryStore {
		return &EtcdSchemaStore{Client: cli, Prefix: "/sluice/p1/checkpoint/schema/main/"}
	}
	checkSchemaStore(t, mk(), mk)
	// A zombie (its guard fails) writes nothing.
	z := &EtcdSchemaStore{Client: cli, Prefix: "/sluice/p1/checkpoint/schema/main/", Guard: func() clientv3.Cmp {
		return clientv3.Compare(clientv3.CreateRevision("/sluice/p1/leader-gone"), ">", 0)
	}}
	if err := z.AppendSchema(testCtx(t), []binlog.HistoryEntry{schemaEntry(1000, "v", "CREATE TABLE `v` (`id` int)")}); !errors.Is(err, ErrConflict) {
		t.Fatalf("zombie append: %v", err)
	}
	if _, entries, _ := mk().LoadSchema(testCtx(t)); len(entries) != 1 {
		t.Fatalf("after the zombie: %+v", entries)
	}
}

// TestSchemaStoresAcrossFailover: after a failover the new server's DDL
// can sit at the same file and offset as an old one's; both are kept, in
// stream order (by GTID state across servers), and compaction drops by
// position, not by file name.
func TestSchemaStoresAcrossFailover(t *testing.T) {
	const a, b = "3e11fa47-71ca-11e1-9e33-c80aa9429562", "4f22fa47-71ca-11e1-9e33-c80aa9429563"
	at := func(server, file string, off uint32, gtids string) position.Position {
		return position.Position{Flavor: position.MySQL, Server: server, File: file, Offset: off, GTIDs: gtids}
	}
	// The old primary's DDL at mysql-bin.000009 (a later file name), the
	// promoted replica's at mysql-bin.000002, after it.
	old := binlog.HistoryEntry{Pos: at(a, "mysql-bin.000009", 500, a+":1-10"), DB: "app", Table: "t", Create: "CREATE TABLE `t` (`id` int)", Statement: "ALTER TABLE"}
	newer := binlog.HistoryEntry{Pos: at(b, "mysql-bin.000002", 500, a+":1-10,"+b+":1"), DB: "app", Table: "t", Create: "CREATE TABLE `t` (`id` int, `v` int)", Statement: "ALTER TABLE"}
	same := binlog.HistoryEntry{Pos: at(b, "mysql-bin.000009", 500, a+":1-10,"+b+":1-2"), DB: "app", Table: "t", Create: "CREATE TABLE `t` (`id` int, `v` int, `w` int)", Statement: "ALTER TABLE"}
	e := etcdenv.Start(t)
	cli := newEtcdClient(t, e.Endpoint())
	s := &EtcdSchemaStore{Client: cli, Prefix: "/sluice/p1/checkpoint/schema/fo/"}
	ctx := testCtx(t)
	for _, en := range []binlog.HistoryEntry{old, newer, same} {
		if err := s.AppendSchema(ctx, []binlog.HistoryEntry{en}); err != nil {
			t.Fatal(err)
		}
	}
	_, entries, err := s.LoadSchema(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 3 || entries[0].Create != old.Create || entries[1].Create != newer.Create || entries[2].Create != same.Create {
		t.Fatalf("entries after a failover: %+v", entries)
	}
	if err := s.CompactSchema(ctx, binlog.HistoryState{Pos: newer.Pos}); err != nil {
		t.Fatal(err)
	}
	if _, entries, err = s.LoadSchema(ctx); err != nil || len(entries) != 1 || entries[0].Create != same.Create {
		t.Fatalf("after compacting up to the new server's first DDL: %+v (%v)", entries, err)
	}
}
