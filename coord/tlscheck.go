package coord

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"time"
)

// checkTLS makes a TLS connection to each endpoint with tc, as the etcd
// client will, until the server at one accepts it. The etcd client
// reports a certificate that is not trusted, or a client certificate the
// member refuses, only as requests that time out ("context deadline
// exceeded") and retries them for ever; so New looks first, and fails
// with the endpoint and what to set in tls when no member accepted the
// TLS settings and at least one refused them over a certificate. An
// endpoint that cannot be reached is no verdict: etcd may be down for a
// while, which campaigning waits out.
func (c *Config) checkTLS(ctx context.Context, tc *tls.Config) error {
	var refused error
	for _, ep := range c.Endpoints {
		host := ep
		if strings.Contains(ep, "://") {
			u, err := url.Parse(ep)
			if err != nil || u.Scheme != "https" {
				continue // unix sockets; Validate has checked the rest
			}
			host = u.Host
		}
		err := handshake(ctx, host, tc)
		if err == nil {
			return nil
		}
		if hint := c.TLS.Hint("tls.", err); hint != "" && refused == nil {
			refused = fmt.Errorf("etcd at %s: %w; %s", ep, err, hint)
		}
	}
	return refused
}

// handshake connects to addr with TLS and waits briefly for the server's
// first bytes: with TLS 1.3 a server that refuses the client's
// certificate says so only after the client has finished its handshake.
func handshake(ctx context.Context, addr string, tc *tls.Config) error {
	tc = tc.Clone()
	tc.NextProtos = []string{"h2"} // gRPC's
	if tc.ServerName == "" {
		host, _, err := net.SplitHostPort(addr)
		if err != nil {
			return err
		}
		tc.ServerName = host
	}
	d := tls.Dialer{Config: tc}
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	defer conn.Close()
	// An HTTP/2 server sends its SETTINGS at once.
	_ = conn.SetReadDeadline(time.Now().Add(time.Second))
	_, err = conn.Read(make([]byte, 1))
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return nil
	}
	return err
}
