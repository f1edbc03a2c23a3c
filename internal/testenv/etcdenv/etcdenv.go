// Package etcdenv starts throwaway in-process etcd servers for tests and a
// TCP proxy that can cut the network between a client and a server. It is
// apart from testenv so that programs importing testenv/throwaway (the
// demo, the benchmarks) do not link the etcd server.
//
// An etcd runs in-process (go.etcd.io/etcd/server/v3/embed): no binary to
// install and nothing left running when the test binary dies. It is a
// single member listening on free ports of 127.0.0.1, keeps its data in a
// temporary directory, logs nothing, and is stopped when the test ends.
//
//	e := etcdenv.Start(t)
//	p := etcdenv.NewProxy(t, e.Endpoint())
//	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{p.Addr()}})
//	p.Cut()     // a partition: the client hears nothing, and notices only by its timeouts
//	p.Restore() // the network is back
package etcdenv

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"sync"
	"testing"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"

	"github.com/sluice-cdc/sluice/internal/testenv/certs"
)

// startTimeout bounds the wait for a new server to be ready (to have
// elected itself leader of its one-member cluster).
const startTimeout = 20 * time.Second

// Etcd is a running single-member etcd server.
type Etcd struct {
	srv      *embed.Etcd
	endpoint string
	dir      string
	once     sync.Once
}

// Start starts an etcd server for the test, in a temporary directory, and
// stops it at the end of the test. It fails the test if the server does
// not start.
func Start(t testing.TB) *Etcd {
	t.Helper()
	return StartSecure(t, nil)
}

// StartSecure is Start with, for p, TLS on the client port (Endpoint is
// https://...) presenting p's server certificate and requiring a client
// certificate signed by p's CA (etcd's --client-cert-auth).
func StartSecure(t testing.TB, p *certs.PKI) *Etcd {
	t.Helper()
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	e, err := startServer(ctx, dir, p)
	if err != nil {
		t.Fatalf("etcdenv: %v", err)
	}
	// Registered after TempDir's own cleanup, so it runs first: the server
	// closes its files before the directory is removed.
	t.Cleanup(e.Close)
	return e
}

// StartServer starts an etcd server keeping its data in dir (which it
// creates if needed) and waits until it serves, or ctx ends. It is Start
// for callers without a testing.TB, such as benchmark commands; the caller
// must Close it.
func StartServer(ctx context.Context, dir string) (*Etcd, error) {
	return startServer(ctx, dir, nil)
}

func startServer(ctx context.Context, dir string, p *certs.PKI) (*Etcd, error) {
	cfg := embed.NewConfig()
	cfg.Name = "sluice-test"
	cfg.Dir = dir
	// Port 0: the kernel picks free ports as the listeners are opened, so
	// no two tests can race for the same port. The advertised peer URL
	// keeps port 0; a one-member cluster never dials it.
	local := url.URL{Scheme: "http", Host: "127.0.0.1:0"}
	client := local
	if p != nil {
		client.Scheme = "https"
		cfg.ClientTLSInfo = transport.TLSInfo{CertFile: p.CertFile, KeyFile: p.KeyFile, TrustedCAFile: p.CAFile, ClientCertAuth: true}
	}
	cfg.ListenClientUrls = []url.URL{client}
	cfg.AdvertiseClientUrls = []url.URL{client}
	cfg.ListenPeerUrls = []url.URL{local}
	cfg.AdvertisePeerUrls = []url.URL{local}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	cfg.EnableGRPCGateway = false
	// A test's data need not survive a crash of the machine.
	cfg.UnsafeNoFsync = true

	srv, err := embed.StartEtcd(cfg)
	if err != nil {
		return nil, fmt.Errorf("starting etcd in %s: %w", dir, err)
	}
	select {
	case <-srv.Server.ReadyNotify():
	case err := <-srv.Err():
		srv.Close()
		return nil, fmt.Errorf("etcd in %s failed while starting: %w", dir, err)
	case <-ctx.Done():
		srv.Close()
		return nil, fmt.Errorf("etcd in %s not ready: %w", dir, ctx.Err())
	}
	if len(srv.Clients) == 0 {
		srv.Close()
		return nil, errors.New("etcd started without a client listener")
	}
	return &Etcd{
		srv:      srv,
		endpoint: client.Scheme + "://" + srv.Clients[0].Addr().String(),
		dir:      dir,
	}, nil
}

// Endpoint is the client URL, http://127.0.0.1:PORT (https with
// StartSecure).
func (e *Etcd) Endpoint() string { return e.endpoint }

// Dir is the server's data directory.
func (e *Etcd) Dir() string { return e.dir }

// Server is the embedded server, for tests that need its internals.
func (e *Etcd) Server() *embed.Etcd { return e.srv }

// Close stops the server; clients see their connections drop. Calling it
// again does nothing.
func (e *Etcd) Close() {
	e.once.Do(e.srv.Close)
}
