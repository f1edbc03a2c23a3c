package coord

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/sluice-cdc/sluice/binlog"
	"github.com/sluice-cdc/sluice/checkpoint"
)

// EtcdSchemaStore keeps a schema history in etcd under a prefix: the
// base at prefix+"base", each entry at prefix+"e/"+its position and table
// (so keys sort in binlog order within a server's files, and an entry
// appended twice lands on its own key). Appends and compactions carry the
// leadership's guard, as EtcdStore's saves do: a leader that lost its
// leadership writes nothing. Etcd.SchemaStore makes one.
type EtcdSchemaStore struct {
	client *clientv3.Client
	prefix string
	guard  func() clientv3.Cmp // nil: unfenced
}

// newEtcdSchemaStore is the store of a schema history under prefix,
// fenced by guard (nil: unfenced).
func newEtcdSchemaStore(cli *clientv3.Client, prefix string, guard func() clientv3.Cmp) *EtcdSchemaStore {
	return &EtcdSchemaStore{client: cli, prefix: prefix, guard: guard}
}

var _ binlog.HistoryStore = (*EtcdSchemaStore)(nil)

// entryKey names an entry by its server, file, offset and table: two
// servers of a failed-over source can both have a DDL at one file and
// offset.
func (s *EtcdSchemaStore) entryKey(e binlog.HistoryEntry) string {
	return fmt.Sprintf("%se/%s/%s/%012d/%s/%s", s.prefix, e.Pos.Server, e.Pos.File, e.Pos.Offset, e.DB, e.Table)
}

// LoadSchema reads the base and the entries in key order.
func (s *EtcdSchemaStore) LoadSchema(ctx context.Context) (*binlog.HistoryState, []binlog.HistoryEntry, error) {
	resp, err := s.client.Get(ctx, s.prefix, clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByKey, clientv3.SortAscend))
	if err != nil {
		return nil, nil, fmt.Errorf("checkpoint: reading the schema history under etcd prefix %s: %w", s.prefix, err)
	}
	var base *binlog.HistoryState
	var entries []binlog.HistoryEntry
	for _, kv := range resp.Kvs {
		k := string(kv.Key)
		switch {
		case k == s.prefix+"base":
			base = new(binlog.HistoryState)
			if err := json.Unmarshal(kv.Value, base); err != nil {
				return nil, nil, fmt.Errorf("%w: etcd key %s: %v", checkpoint.ErrCorrupt, k, err)
			}
		case strings.HasPrefix(k, s.prefix+"e/"):
			var e binlog.HistoryEntry
			if err := json.Unmarshal(kv.Value, &e); err != nil {
				return nil, nil, fmt.Errorf("%w: etcd key %s: %v", checkpoint.ErrCorrupt, k, err)
			}
			entries = append(entries, e)
		}
	}
	// Keys sort by server, then file and offset: positions order them
	// (across servers by GTID state). Within a position, by table: one
	// statement's entries each touch another table, so their order does
	// not matter.
	sort.SliceStable(entries, func(i, j int) bool { return entries[i].Pos.Compare(entries[j].Pos) < 0 })
	if base != nil {
		kept := entries[:0]
		for _, e := range entries {
			if e.Pos.Compare(base.Pos) > 0 {
				kept = append(kept, e)
			}
		}
		entries = kept
	}
	return base, entries, nil
}

// AppendSchema writes each entry under its own key, unless the key
// exists (idempotent), in one transaction with the guard.
func (s *EtcdSchemaStore) AppendSchema(ctx context.Context, entries []binlog.HistoryEntry) error {
	var ops []clientv3.Op
	for _, e := range entries {
		b, err := json.Marshal(e)
		if err != nil {
			return err
		}
		k := s.entryKey(e)
		ops = append(ops, clientv3.OpTxn([]clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(k), "=", 0)}, []clientv3.Op{clientv3.OpPut(k, string(b))}, nil))
	}
	return s.commit(ctx, ops, "appending to")
}

// CompactSchema puts state as the base and deletes the entries up to
// state.Pos.
func (s *EtcdSchemaStore) CompactSchema(ctx context.Context, state binlog.HistoryState) error {
	b, err := json.Marshal(state)
	if err != nil {
		return err
	}
	ops := []clientv3.Op{clientv3.OpPut(s.prefix+"base", string(b))}
	resp, err := s.client.Get(ctx, s.prefix+"e/", clientv3.WithPrefix())
	if err != nil {
		return fmt.Errorf("checkpoint: reading the schema history under etcd prefix %s: %w", s.prefix, err)
	}
	for _, kv := range resp.Kvs {
		var e binlog.HistoryEntry
		if err := json.Unmarshal(kv.Value, &e); err != nil {
			return fmt.Errorf("%w: etcd key %s: %v", checkpoint.ErrCorrupt, kv.Key, err)
		}
		if e.Pos.Compare(state.Pos) <= 0 {
			ops = append(ops, clientv3.OpDelete(string(kv.Key)))
		}
	}
	return s.commit(ctx, ops, "compacting")
}

func (s *EtcdSchemaStore) commit(ctx context.Context, ops []clientv3.Op, what string) error {
	if len(ops) == 0 {
		return nil
	}
	txn := s.client.Txn(ctx)
	if s.guard != nil {
		txn = txn.If(s.guard())
	}
	resp, err := txn.Then(ops...).Commit()
	if err != nil {
		return fmt.Errorf("checkpoint: %s the schema history under etcd prefix %s: %w", what, s.prefix, err)
	}
	if !resp.Succeeded {
		return fmt.Errorf("%w: the schema history under etcd prefix %s not written: the guard failed (leadership lost)", checkpoint.ErrConflict, s.prefix)
	}
	return nil
}
