package coord_test

import (
	"errors"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/sluice-cdc/sluice/binlog"
	"github.com/sluice-cdc/sluice/checkpoint"
	"github.com/sluice-cdc/sluice/coord"
	"github.com/sluice-cdc/sluice/internal/historytest"
	"github.com/sluice-cdc/sluice/internal/testenv/etcdenv"
	"github.com/sluice-cdc/sluice/position"
)

func TestEtcdSchemaStore(t *testing.T) {
	e := etcdenv.Start(t)
	cli := newEtcdClient(t, e.Endpoint())
	mk := func() binlog.HistoryStore {
		return coord.NewEtcdSchemaStore(cli, "/sluice/p1/checkpoint/schema/main/", nil)
	}
	historytest.Check(t, mk(), mk)
	// A zombie (its guard fails) writes nothing.
	z := coord.NewEtcdSchemaStore(cli, "/sluice/p1/checkpoint/schema/main/", func() clientv3.Cmp {
		return clientv3.Compare(clientv3.CreateRevision("/sluice/p1/leader-gone"), ">", 0)
	})
	if err := z.AppendSchema(testCtx(t), []binlog.HistoryEntry{historytest.Entry(1000, "v", "CREATE TABLE `v` (`id` int)")}); !errors.Is(err, checkpoint.ErrConflict) {
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
	s := coord.NewEtcdSchemaStore(cli, "/sluice/p1/checkpoint/schema/fo/", nil)
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
