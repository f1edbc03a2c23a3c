package etcdenv_test

import (
	"context"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/sluice-cdc/sluice/internal/testenv/etcdenv"
)

func newClient(t *testing.T, endpoint string) *clientv3.Client {
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

func TestStartServesAndCloses(t *testing.T) {
	a := etcdenv.Start(t)
	b := etcdenv.Start(t) // two at once: each has its own ports and directory
	if a.Endpoint() == b.Endpoint() {
		t.Fatalf("two servers on one endpoint %s", a.Endpoint())
	}
	cli := newClient(t, a.Endpoint())
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := cli.Put(ctx, "k", "v"); err != nil {
		t.Fatal(err)
	}
	resp, err := cli.Get(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != "v" {
		t.Fatalf("got %v, want k=v", resp.Kvs)
	}
	a.Close()
	a.Close() // twice is fine
	short, cancel2 := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel2()
	if _, err := cli.Get(short, "k"); err == nil {
		t.Fatal("Get succeeded after Close")
	}
}

func TestProxyCutIsSilentAndRestoreHeals(t *testing.T) {
	e := etcdenv.Start(t)
	p := etcdenv.NewProxy(t, e.Endpoint())
	cli := newClient(t, p.Endpoint())

	get := func(timeout time.Duration) error {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		_, err := cli.Get(ctx, "k")
		return err
	}
	if err := get(5 * time.Second); err != nil {
		t.Fatalf("through the proxy: %v", err)
	}

	p.Cut()
	start := time.Now()
	err := get(700 * time.Millisecond)
	if err == nil {
		t.Fatal("Get succeeded through a cut proxy")
	}
	// Silence, not a refusal: the call ends only at its deadline.
	if took := time.Since(start); took < 600*time.Millisecond {
		t.Fatalf("Get failed after %s with %v, want a timeout", took, err)
	}

	p.Restore()
	if err := get(10 * time.Second); err != nil {
		t.Fatalf("after Restore: %v", err)
	}
}
