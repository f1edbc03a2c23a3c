package coord_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/sluice-cdc/sluice/checkpoint"
	"github.com/sluice-cdc/sluice/coord"
	"github.com/sluice-cdc/sluice/internal/testenv/etcdenv"
	"github.com/sluice-cdc/sluice/position"
)

func newEtcdClient(t *testing.T, endpoint string) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   []string{endpoint},
		DialTimeout: 5 * time.Second,
		Logger:      zap.NewNop(),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestEtcdStoreVersions(t *testing.T) {
	e := etcdenv.Start(t)
	cli := newEtcdClient(t, e.Endpoint())
	ctx := testCtx(t)
	s := coord.NewEtcdStore(cli, "/sluice/p1/checkpoint", nil)

	cp, err := s.Load(ctx)
	if err != nil || cp.Version != 0 {
		t.Fatalf("empty load: %+v %v", cp, err)
	}
	cp.Pipeline = "p1"
	cp.Epoch = 7
	cp.Sources = map[string]position.Position{"main": {File: "mysql-bin.000001", Offset: 1234, GTIDs: "0-1-5", Flavor: position.MariaDB}}
	v1, err := s.Save(ctx, cp, 0)
	if err != nil {
		t.Fatal(err)
	}
	if v1 == 0 {
		t.Fatal("first save returned version 0")
	}
	got, err := s.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got.Version != v1 || got.Epoch != 7 || got.Sources["main"] != cp.Sources["main"] || got.SavedAt.IsZero() {
		t.Fatalf("loaded %+v, want version %d and what was saved", got, v1)
	}

	// Writes to other keys raise etcd's revision; versions still compare
	// by the checkpoint key's own ModRevision.
	if _, err := cli.Put(ctx, "/other", "x"); err != nil {
		t.Fatal(err)
	}
	cp.LastSeq = 42
	v2, err := s.Save(ctx, cp, v1)
	if err != nil {
		t.Fatal(err)
	}
	if v2 <= v1 {
		t.Fatalf("second version %d not above the first %d", v2, v1)
	}
	if got, _ := s.Load(ctx); got.Version != v2 || got.LastSeq != 42 {
		t.Fatalf("loaded %+v, want version %d, last_seq 42", got, v2)
	}
}

func TestEtcdStoreConflict(t *testing.T) {
	e := etcdenv.Start(t)
	ctx := testCtx(t)
	a := coord.NewEtcdStore(newEtcdClient(t, e.Endpoint()), "/cp", nil)
	b := coord.NewEtcdStore(newEtcdClient(t, e.Endpoint()), "/cp", nil)

	// Two writers both think there is no checkpoint: one wins.
	v, err := a.Save(ctx, checkpoint.Checkpoint{LastSeq: 1}, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, err = b.Save(ctx, checkpoint.Checkpoint{LastSeq: 2}, 0)
	if !errors.Is(err, checkpoint.ErrConflict) {
		t.Fatalf("second creator: %v, want checkpoint.ErrConflict", err)
	}
	if want := "expected 0"; !strings.Contains(err.Error(), want) {
		t.Fatalf("error %q does not say %q", err, want)
	}

	// A stale version loses to the newer one.
	v2, err := b.Save(ctx, checkpoint.Checkpoint{LastSeq: 3}, v)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Save(ctx, checkpoint.Checkpoint{LastSeq: 4}, v); !errors.Is(err, checkpoint.ErrConflict) {
		t.Fatalf("stale save: %v, want checkpoint.ErrConflict", err)
	}
	if got, _ := a.Load(ctx); got.Version != v2 || got.LastSeq != 3 {
		t.Fatalf("loaded %+v, want version %d, last_seq 3", got, v2)
	}
}

func TestEtcdStoreGuard(t *testing.T) {
	e := etcdenv.Start(t)
	cli := newEtcdClient(t, e.Endpoint())
	ctx := testCtx(t)

	// A leader key as coord makes it: its CreateRevision is the epoch.
	const leader = "/sluice/p1/leader/abc"
	put, err := cli.Put(ctx, leader, "me")
	if err != nil {
		t.Fatal(err)
	}
	epoch := put.Header.Revision
	s := coord.NewEtcdStore(cli, "/sluice/p1/checkpoint", func() clientv3.Cmp {
		return clientv3.Compare(clientv3.CreateRevision(leader), "=", epoch)
	})
	v, err := s.Save(ctx, checkpoint.Checkpoint{LastSeq: 1}, 0)
	if err != nil {
		t.Fatalf("save while leading: %v", err)
	}

	// Leadership moves on: the key is deleted and created again by another.
	if _, err := cli.Delete(ctx, leader); err != nil {
		t.Fatal(err)
	}
	_, err = s.Save(ctx, checkpoint.Checkpoint{LastSeq: 2}, v)
	if !errors.Is(err, checkpoint.ErrConflict) || !strings.Contains(err.Error(), "no longer exists") {
		t.Fatalf("save after the leader key went: %v, want checkpoint.ErrConflict saying it no longer exists", err)
	}
	if _, err := cli.Put(ctx, leader, "other"); err != nil {
		t.Fatal(err)
	}
	_, err = s.Save(ctx, checkpoint.Checkpoint{LastSeq: 2}, v)
	if !errors.Is(err, checkpoint.ErrConflict) || !strings.Contains(err.Error(), "leadership lost") {
		t.Fatalf("save after a new leader: %v, want checkpoint.ErrConflict saying leadership lost", err)
	}
	if got, _ := s.Load(ctx); got.Version != v || got.LastSeq != 1 {
		t.Fatalf("loaded %+v, want the leader's save (version %d) untouched", got, v)
	}
}

func TestEtcdStoreCorrupt(t *testing.T) {
	e := etcdenv.Start(t)
	cli := newEtcdClient(t, e.Endpoint())
	ctx := testCtx(t)
	if _, err := cli.Put(ctx, "/cp", "{not json"); err != nil {
		t.Fatal(err)
	}
	s := coord.NewEtcdStore(cli, "/cp", nil)
	if _, err := s.Load(ctx); !errors.Is(err, checkpoint.ErrCorrupt) {
		t.Fatalf("load of bad JSON: %v, want checkpoint.ErrCorrupt", err)
	}
}

func TestEtcdStoreHonoursDeadline(t *testing.T) {
	e := etcdenv.Start(t)
	p := etcdenv.NewProxy(t, e.Endpoint())
	s := coord.NewEtcdStore(newEtcdClient(t, p.Endpoint()), "/cp", nil)
	v, err := s.Save(testCtx(t), checkpoint.Checkpoint{LastSeq: 1}, 0)
	if err != nil {
		t.Fatal(err)
	}
	p.Cut()
	for _, op := range []struct {
		name string
		do   func(context.Context) error
	}{
		{"load", func(ctx context.Context) error { _, err := s.Load(ctx); return err }},
		{"save", func(ctx context.Context) error {
			_, err := s.Save(ctx, checkpoint.Checkpoint{LastSeq: 2}, v)
			return err
		}},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		start := time.Now()
		err := op.do(ctx)
		cancel()
		took := time.Since(start)
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("%s through a partition: %v, want a deadline error", op.name, err)
		}
		if took > 2*time.Second {
			t.Errorf("%s took %s past its 500ms deadline", op.name, took)
		}
	}
}
