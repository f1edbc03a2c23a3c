package testenv

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/Shopify/toxiproxy/v2/collectors"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
)

// FaultProxy is a TCP proxy in front of a server (Shopify's toxiproxy, run
// in the test's process) that can delay or cut what passes through it.
type FaultProxy struct {
	p  *toxiproxy.Proxy
	mu sync.Mutex
	up bool
}

// NewFaultProxy starts a proxy to upstream (host:port) on a free loopback
// port; it is stopped when the test ends.
func NewFaultProxy(t testing.TB, upstream string) *FaultProxy {
	t.Helper()
	srv := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(prometheus.NewRegistry()), zerolog.Nop())
	srv.Metrics.ProxyMetrics = collectors.NewProxyMetricCollectors()
	p := toxiproxy.NewProxy(srv, "sluice-test", "127.0.0.1:0", upstream)
	if err := p.Start(); err != nil {
		t.Fatalf("testenv: starting a proxy to %s: %v", upstream, err)
	}
	f := &FaultProxy{p: p, up: true}
	t.Cleanup(f.stop)
	return f
}

// Addr is the proxy's host:port.
func (f *FaultProxy) Addr() string { return f.p.Listen }

// URL rewrites a mysql:// URL of the upstream server to go through the
// proxy.
func (f *FaultProxy) URL(upstreamURL, upstreamAddr string) string {
	return strings.Replace(upstreamURL, upstreamAddr, f.Addr(), 1)
}

// SetLatency delays everything the server sends by d (0 removes the
// delay); it applies to open connections too.
func (f *FaultProxy) SetLatency(d time.Duration) error {
	_ = f.p.Toxics.RemoveToxic(context.Background(), "latency")
	if d == 0 {
		return nil
	}
	body := fmt.Sprintf(`{"name":"latency","type":"latency","stream":"downstream","attributes":{"latency":%d}}`, d.Milliseconds())
	_, err := f.p.Toxics.AddToxicJson(strings.NewReader(body))
	return err
}

// Stall stops all data in both directions without closing anything, as a
// link that dies silently does (toxiproxy's timeout toxic with no
// timeout). It lasts until the proxy is stopped.
func (f *FaultProxy) Stall() error {
	for _, dir := range []string{"downstream", "upstream"} {
		body := fmt.Sprintf(`{"name":"stall-%s","type":"timeout","stream":"%s","attributes":{"timeout":0}}`, dir, dir)
		if _, err := f.p.Toxics.AddToxicJson(strings.NewReader(body)); err != nil {
			return err
		}
	}
	return nil
}

// Cut closes every connection and refuses new ones until Restore.
func (f *FaultProxy) Cut() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.up {
		f.p.Stop()
		f.up = false
	}
}

// Restore accepts connections again (on the same address).
func (f *FaultProxy) Restore() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.up {
		return nil
	}
	if err := f.p.Start(); err != nil {
		return err
	}
	f.up = true
	return nil
}

// MoveTo points the proxy at another upstream, as a DNS name or a virtual
// IP moves to a promoted replica: open connections are closed, new ones
// reach upstream.
func (f *FaultProxy) MoveTo(upstream string) error {
	f.Cut()
	f.mu.Lock()
	f.p.Upstream = upstream
	f.mu.Unlock()
	return f.Restore()
}

// CutAfter closes each open connection once the client has sent n more
// bytes through it (toxiproxy's limit_data toxic, upstream): a write cut
// at that byte. New connections are cut after n bytes too, until
// RemoveCut.
func (f *FaultProxy) CutAfter(n int64) error {
	_ = f.p.Toxics.RemoveToxic(context.Background(), "cut_after")
	body := fmt.Sprintf(`{"name":"cut_after","type":"limit_data","stream":"upstream","attributes":{"bytes":%d}}`, n)
	_, err := f.p.Toxics.AddToxicJson(strings.NewReader(body))
	return err
}

// RemoveCut lets connections through again after CutAfter.
func (f *FaultProxy) RemoveCut() {
	_ = f.p.Toxics.RemoveToxic(context.Background(), "cut_after")
}

// stop closes the proxy and its connections. Its toxics are left as they
// are: toxiproxy deadlocks when a toxic is removed while a connection
// through it is closing (the collection's lock is held while the toxic
// waits for the link, whose teardown waits for the lock), which is what
// removing them here did after a test closed its clients.
func (f *FaultProxy) stop() {
	f.Cut()
}
