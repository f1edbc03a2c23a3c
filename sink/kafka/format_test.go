package kafka

import (
	"fmt"
	"maps"
	"testing"
	"time"

	"github.com/sluice-cdc/sluice/binlog"
	"github.com/sluice-cdc/sluice/codec"
	"github.com/sluice-cdc/sluice/internal/sinktest"
	"github.com/sluice-cdc/sluice/pipeline"
	"github.com/sluice-cdc/sluice/position"
)

// TestConformanceDebezium: the suite with records in format debezium
// (values without the sluice block; snapshot rows marked by a header),
// with and without schemas.
func TestConformanceDebezium(t *testing.T) {
	c := newCluster(t)
	for _, f := range []codec.Format{{Name: codec.FormatDebezium}, {Name: codec.FormatDebezium, Schemas: true}} {
		t.Run(fmt.Sprintf("schemas=%v", f.Schemas), func(t *testing.T) {
			sinktest.Run(t, sinktest.Target{
				Format: f,
				Open: func(t *testing.T, ns string) pipeline.Sink {
					return newSink(t, c, Config{Topic: "d" + ns + ".{db}.{table}", SchemaChangeTopic: "d" + ns + ".{source}", TransactionalID: "txd-" + ns, Format: f})
				},
			})
		})
	}
}

// TestTombstones: in format debezium a delete is followed by a tombstone
// (the delete's key, a null value, the delete's seq header and no end
// header); a keyless table's delete has a null key and no tombstone;
// tombstones: false turns them off; format sluice has none by default.
// Recovery over tombstones reports what the deletes alone would.
func TestTombstones(t *testing.T) {
	c := newCluster(t)
	keyed := &binlog.Table{Schema: "shop", Name: "items", Columns: []binlog.Column{{Name: "id", Kind: binlog.KindInt}, {Name: "n", Kind: binlog.KindInt}}, PrimaryKey: []int{0}}
	keyless := &binlog.Table{Schema: "shop", Name: "log", Columns: []binlog.Column{{Name: "n", Kind: binlog.KindInt}}}
	changes := []*binlog.Change{
		{Op: binlog.OpInsert, Table: keyed, After: binlog.Row{binlog.IntValue(1), binlog.IntValue(10)}},
		{Op: binlog.OpDelete, Table: keyed, Before: binlog.Row{binlog.IntValue(1), binlog.IntValue(10)}},
		{Op: binlog.OpDelete, Table: keyless, Before: binlog.Row{binlog.IntValue(7)}},
		{Op: binlog.OpDelete, Table: keyed, Before: binlog.Row{binlog.IntValue(2), binlog.IntValue(20)}}, // the transaction's last
	}
	off := false
	for _, tc := range []struct {
		name       string
		f          codec.Format
		tombstones *bool
		want       int // tombstones expected
	}{
		{"debezium", codec.Format{Name: codec.FormatDebezium}, nil, 2},
		{"debezium-schemas", codec.Format{Name: codec.FormatDebezium, Schemas: true}, nil, 2},
		{"debezium-off", codec.Format{Name: codec.FormatDebezium}, &off, 0},
		{"sluice", codec.Format{}, nil, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			enc := codec.NewEncoder(codec.Source{Name: "s1"}, codec.WithFormat(tc.f))
			end := &position.Position{File: "bin.000001", Offset: 900, Flavor: position.MariaDB}
			txn := &binlog.Txn{End: *end, Last: true, CommitTime: time.Unix(1700000000, 0)}
			var ms []pipeline.Message
			for i, ch := range changes {
				v := enc.AppendChange(nil, txn, ch)
				if tc.f.IsDebezium() {
					v = v[:len(v)-1]
				} else {
					v = v[:len(v)-2]
				}
				m := pipeline.Message{Seq: uint64(i + 1), Source: "s1", DB: ch.Table.Schema, Table: ch.Table.Name, Op: ch.Op, Change: ch, Key: enc.AppendKey(nil, ch), Value: v}
				if i == len(changes)-1 {
					m.End = end
				}
				ms = append(ms, m)
			}
			prefix := "tomb-" + tc.name
			s := newSink(t, c, Config{Topic: prefix + ".{db}.{table}", TransactionalID: "tx-" + prefix, Format: tc.f, Tombstones: tc.tombstones})
			mustRecover(t, s, 1, "")
			mustWrite(t, s, &pipeline.Batch{Epoch: 1, Messages: sinktest.Stamp(ms, 1)})
			rs := readAll(t, c, prefix+".shop.items", prefix+".shop.log")
			tombs, deletes := 0, map[string]string{} // key -> seq of the delete
			for _, r := range rs {
				seq, _ := header(r, pipeline.HeaderSeq)
				if r.Topic == prefix+".shop.log" {
					if tc.f.IsDebezium() && r.Key != nil {
						t.Errorf("keyless table: key %q, want null", r.Key)
					}
					if r.Value == nil {
						t.Errorf("keyless table: a tombstone")
					}
					continue
				}
				if r.Value != nil {
					if m := ms[seqIndex(seq)]; m.Op == binlog.OpDelete {
						deletes[string(r.Key)] = seq
					}
					continue
				}
				tombs++
				if deletes[string(r.Key)] != seq {
					t.Errorf("tombstone with key %s and seq %s does not follow its delete (deletes %v)", r.Key, seq, deletes)
				}
				if _, ok := header(r, pipeline.HeaderEnd); ok {
					t.Errorf("tombstone seq %s has an end header", seq)
				}
			}
			if tombs != tc.want {
				t.Fatalf("%d tombstones, want %d", tombs, tc.want)
			}
			if tc.f.IsDebezium() && !tc.f.Schemas {
				if want := `{"id":1}`; deletes[want] == "" {
					t.Errorf("no delete keyed %s (Debezium's key struct): %v", want, deletes)
				}
			}
			// Recovery from scratch: what the deletes say, the tombstones
			// adding nothing.
			s2 := newSink(t, c, Config{Topic: prefix + ".{db}.{table}", TransactionalID: "tx-" + prefix, Format: tc.f, Tombstones: tc.tombstones})
			rec := mustRecover(t, s2, 2, "")
			want := sinktest.Expect(ms)
			if rec.MaxSeq != want.MaxSeq || !maps.Equal(rec.Ends, want.Ends) || len(rec.Partial) != 0 {
				t.Fatalf("recovery: %+v, want %+v", rec, want)
			}
		})
	}
}

func seqIndex(seq string) int {
	var n int
	fmt.Sscan(seq, &n)
	return n - 1
}

// TestSchemaChangesNotWritten: with include.schema.changes false a sink in
// format debezium writes no DDL statement and counts each one it left
// out (sluice_schema_changes_not_written_total); the data is written.
func TestSchemaChangesNotWritten(t *testing.T) {
	c := newCluster(t)
	tbl := &binlog.Table{Schema: "shop", Name: "items", Columns: []binlog.Column{{Name: "id", Kind: binlog.KindInt}}, PrimaryKey: []int{0}}
	f := codec.Format{Name: codec.FormatDebezium}
	enc := codec.NewEncoder(codec.Source{Name: "s1"}, codec.WithFormat(f))
	end := &position.Position{File: "bin.000001", Offset: 900, Flavor: position.MariaDB}
	txn := &binlog.Txn{End: *end, Last: true, CommitTime: time.Unix(1700000000, 0)}
	row := func(seq uint64, id int64) pipeline.Message {
		ch := &binlog.Change{Op: binlog.OpInsert, Table: tbl, After: binlog.Row{binlog.IntValue(id)}}
		v := enc.AppendChange(nil, txn, ch)
		return pipeline.Message{Seq: seq, Source: "s1", DB: "shop", Table: "items", Op: ch.Op, Change: ch, Key: enc.AppendKey(nil, ch), Value: v[:len(v)-1]}
	}
	ddl := func(seq uint64) pipeline.Message {
		return pipeline.Message{Seq: seq, Source: "s1", DB: "shop", Table: "items", Op: binlog.OpDDL, Role: pipeline.RoleSchemaChange, Key: []byte(`{"databaseName":"shop"}`), Value: []byte(`{"ddl":"ALTER TABLE items ADD n INT"}`)}
	}
	ms := []pipeline.Message{row(1, 1), ddl(2), row(3, 2), ddl(4)}
	ms[3].End = end
	off := false
	s := newSink(t, c, Config{Topic: "nosc.{db}.{table}", TransactionalID: "tx-nosc", Format: f, IncludeSchemaChanges: &off})
	mustRecover(t, s, 1, "")
	if n := s.SchemaChangesNotWritten(); n != 0 {
		t.Fatalf("before writing: %d schema changes not written, want 0", n)
	}
	mustWrite(t, s, &pipeline.Batch{Epoch: 1, Messages: sinktest.Stamp(ms, 1)})
	if n := s.SchemaChangesNotWritten(); n != 2 {
		t.Errorf("%d schema changes not written, want 2", n)
	}
	rs := readAll(t, c, "nosc.shop.items") // no topic s1 was made
	var seqs []string
	for _, r := range rs {
		seq, _ := header(r, pipeline.HeaderSeq)
		seqs = append(seqs, seq)
	}
	if fmt.Sprint(seqs) != "[1 3]" {
		t.Errorf("records of seqs %v, want [1 3] (the rows, no DDL)", seqs)
	}
	mustWrite(t, s, &pipeline.Batch{Epoch: 1, Messages: sinktest.Stamp([]pipeline.Message{ddl(5)}, 1)})
	if n := s.SchemaChangesNotWritten(); n != 3 {
		t.Errorf("after a batch of DDL alone: %d schema changes not written, want 3", n)
	}
}
