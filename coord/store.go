package coord

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/sluice-cdc/sluice/checkpoint"
)

// EtcdStore keeps the checkpoint as JSON in one etcd key, for pipelines
// that run as several replicas with one leader (see package coord).
//
// The version of a checkpoint is the key's ModRevision, which etcd raises
// on every write, so a Save conditioned on it is a compare-and-swap: it
// fails with checkpoint.ErrConflict when anyone else wrote the key since the caller
// loaded it.
//
// The guard fences a leader that lost its leadership without knowing it
// yet (a zombie): a store made by Etcd.CheckpointStore with a Leadership
// requires, in the same transaction as each Save, that the leader key
// still has the CreateRevision of this leadership. Once a new leader is
// elected that comparison is false, and no save of the old one can land,
// however late it reaches etcd.
type EtcdStore struct {
	client *clientv3.Client
	// key is the etcd key of the checkpoint.
	key string
	// guard, when set, returns a comparison that must hold for Save to
	// write. It is called on every Save.
	guard func() clientv3.Cmp
}

// newEtcdStore is the store of the checkpoint at key, fenced by guard
// (nil: unfenced).
func newEtcdStore(cli *clientv3.Client, key string, guard func() clientv3.Cmp) *EtcdStore {
	return &EtcdStore{client: cli, key: key, guard: guard}
}

var _ checkpoint.Store = (*EtcdStore)(nil)

// Load reads the key; a missing key is an empty checkpoint (Version 0).
// Version is the key's ModRevision, whatever the stored JSON says.
func (s *EtcdStore) Load(ctx context.Context) (checkpoint.Checkpoint, error) {
	resp, err := s.client.Get(ctx, s.key)
	if err != nil {
		return checkpoint.Checkpoint{}, fmt.Errorf("checkpoint: reading etcd key %s: %w", s.key, err)
	}
	if len(resp.Kvs) == 0 {
		return checkpoint.Checkpoint{}, nil
	}
	kv := resp.Kvs[0]
	cp, err := checkpoint.Decode(kv.Value)
	if err != nil {
		return checkpoint.Checkpoint{}, fmt.Errorf("%w: etcd key %s: %v (delete the key to start over, or put back a good one)", checkpoint.ErrCorrupt, s.key, err)
	}
	cp.Version = uint64(kv.ModRevision)
	return cp, nil
}

// Save writes cp if the key's ModRevision is still expected (0: the key
// does not exist) and the guard, if any, holds; it returns the revision of
// the write, the new version. A failed condition is an error wrapping
// checkpoint.ErrConflict that says which: another writer saved, or the guard failed
// (leadership lost). Any other error (a timeout, a lost connection)
// leaves it unknown whether the write landed: Load to find out.
func (s *EtcdStore) Save(ctx context.Context, cp checkpoint.Checkpoint, expected uint64) (uint64, error) {
	// The stored version is meaningless (the revision is known only after
	// the write); Load replaces it with the ModRevision.
	cp.Version = 0
	if cp.SavedAt.IsZero() {
		cp.SavedAt = time.Now().UTC()
	}
	data, err := json.Marshal(cp)
	if err != nil {
		return 0, err
	}
	cmps := []clientv3.Cmp{clientv3.Compare(clientv3.ModRevision(s.key), "=", int64(expected))}
	orElse := []clientv3.Op{clientv3.OpGet(s.key)}
	var guard clientv3.Cmp
	if s.guard != nil {
		guard = s.guard()
		cmps = append(cmps, guard)
		orElse = append(orElse, clientv3.OpGet(string(guard.KeyBytes())))
	}
	resp, err := s.client.Txn(ctx).If(cmps...).Then(clientv3.OpPut(s.key, string(data))).Else(orElse...).Commit()
	if err != nil {
		return 0, fmt.Errorf("checkpoint: saving etcd key %s: %w", s.key, err)
	}
	if resp.Succeeded {
		return uint64(resp.Header.Revision), nil
	}
	var now int64
	if kvs := resp.Responses[0].GetResponseRange().Kvs; len(kvs) > 0 {
		now = kvs[0].ModRevision
	}
	if now != int64(expected) {
		return 0, fmt.Errorf("%w: etcd key %s is at version %d, expected %d", checkpoint.ErrConflict, s.key, now, expected)
	}
	return 0, fmt.Errorf("%w: etcd key %s not saved: %s", checkpoint.ErrConflict, s.key, describeFailedGuard(guard, resp.Responses[1].GetResponseRange().Kvs))
}

// describeFailedGuard says what the guard's key held when the guard
// failed.
func describeFailedGuard(guard clientv3.Cmp, kvs []*mvccpb.KeyValue) string {
	if len(kvs) == 0 {
		return fmt.Sprintf("the guard failed (leadership lost): %s no longer exists", guard.KeyBytes())
	}
	kv := kvs[0]
	return fmt.Sprintf("the guard failed (leadership lost): %s now has create revision %d, mod revision %d", guard.KeyBytes(), kv.CreateRevision, kv.ModRevision)
}
