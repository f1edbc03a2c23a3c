// Package natsenv starts throwaway in-process NATS servers with JetStream for
// tests. It is apart from testenv so that programs importing
// testenv/throwaway (the demo, the benchmarks) do not link the NATS server.
package natsenv

import (
	"crypto/tls"
	"fmt"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/sluice-cdc/sluice/internal/testenv/certs"
)

// Throwaway NATS servers with JetStream.
//
// A NATS runs in-process (github.com/nats-io/nats-server/v2/server): no
// binary to install and nothing left running when the test binary dies. It
// listens on its own TCP port on 127.0.0.1, keeps JetStream's file store in
// a temporary directory, and is shut down and its directory removed when the
// test ends.
//
//	n := natsenv.StartNATS(t)
//	nc, err := nats.Connect(n.URL())
//	n.Shutdown()  // an outage: clients see the connection drop
//	n.Restart()   // same port, same store directory: streams are back
type NATS struct {
	t        testing.TB
	port     int
	storeDir string
	// tls and users are StartSecure's.
	tls   *tls.Config
	users map[string]string

	mu  sync.Mutex
	srv *server.Server // nil while shut down
}

const natsStartTimeout = 10 * time.Second

// StartNATS starts a JetStream-enabled NATS server for the test and stops it
// at the end of the test. It fails the test if the server does not start.
func StartNATS(t testing.TB) *NATS {
	t.Helper()
	return StartSecure(t, nil, nil, false)
}

// StartSecure is StartNATS with what managed services require: users
// (name: password), each with every permission, and, with p, TLS with
// p's server certificate on the client port, which every client must then
// use; with clientAuth, clients need a certificate signed by p's CA.
func StartSecure(t testing.TB, users map[string]string, p *certs.PKI, clientAuth bool) *NATS {
	t.Helper()
	n := &NATS{t: t, port: server.RANDOM_PORT, storeDir: t.TempDir(), users: users}
	if p != nil {
		n.tls = p.ServerTLS(clientAuth)
	}
	// Registered after TempDir's own cleanup, so it runs first: the server
	// closes its files before the directory is removed.
	t.Cleanup(n.Shutdown)
	if err := n.start(); err != nil {
		t.Fatalf("testenv: %v", err)
	}
	return n
}

// URL is the client URL, nats://127.0.0.1:PORT. It stays the same across
// Restart.
func (n *NATS) URL() string {
	return "nats://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(n.port))
}

// StoreDir is the directory of JetStream's file store.
func (n *NATS) StoreDir() string { return n.storeDir }

// Server is the running server, or nil while it is shut down.
func (n *NATS) Server() *server.Server {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.srv
}

// Shutdown stops the server and waits until it has closed its listener,
// connections and store. Clients see an outage until Restart. Calling it
// on a stopped server does nothing.
func (n *NATS) Shutdown() {
	n.mu.Lock()
	srv := n.srv
	n.srv = nil
	n.mu.Unlock()
	if srv == nil {
		return
	}
	srv.Shutdown()
	srv.WaitForShutdown()
}

// Restart starts the server again on the same port with the same store
// directory (shutting it down first if it is running), so streams and
// their messages are back. It fails the test if the server does not start.
func (n *NATS) Restart() {
	n.t.Helper()
	n.Shutdown()
	if err := n.start(); err != nil {
		n.t.Fatalf("testenv: restarting NATS: %v", err)
	}
}

func (n *NATS) start() error {
	opts := &server.Options{
		ServerName: "sluice-test",
		Host:       "127.0.0.1",
		Port:       n.port,
		JetStream:  true,
		StoreDir:   n.storeDir,
		// Bounds, not allocations: enough for benchmarks, small enough
		// not to trip over a small disk.
		JetStreamMaxMemory: 256 << 20,
		JetStreamMaxStore:  8 << 30,
		NoLog:              true,
		NoSigs:             true,
	}
	if n.tls != nil {
		opts.TLS, opts.TLSConfig = true, n.tls
		opts.TLSVerify = n.tls.ClientAuth == tls.RequireAndVerifyClientCert
		opts.TLSTimeout = 2
	}
	for user, pw := range n.users {
		opts.Users = append(opts.Users, &server.User{Username: user, Password: pw})
	}
	srv, err := server.NewServer(opts)
	if err != nil {
		return fmt.Errorf("configuring NATS server: %w", err)
	}
	go srv.Start()
	if !srv.ReadyForConnections(natsStartTimeout) {
		srv.Shutdown()
		srv.WaitForShutdown()
		return fmt.Errorf("NATS server on port %d (store %s) not ready after %s; is the port taken?", n.port, n.storeDir, natsStartTimeout)
	}
	if !srv.JetStreamEnabled() {
		srv.Shutdown()
		srv.WaitForShutdown()
		return fmt.Errorf("NATS server started without JetStream (store %s): is the directory writable?", n.storeDir)
	}
	if n.port == server.RANDOM_PORT {
		addr, ok := srv.Addr().(*net.TCPAddr)
		if !ok {
			srv.Shutdown()
			srv.WaitForShutdown()
			return fmt.Errorf("NATS server has no TCP address (%v)", srv.Addr())
		}
		n.port = addr.Port
	}
	n.mu.Lock()
	n.srv = srv
	n.mu.Unlock()
	return nil
}
