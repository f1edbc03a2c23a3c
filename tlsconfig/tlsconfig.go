// Package tlsconfig is the one tls block that every client sluice opens
// takes (Kafka brokers, NATS servers, Redis, etcd members): which
// certificate authorities to trust and which certificate to present,
// read from PEM files, and the one function that turns it into a
// crypto/tls configuration. The MySQL/MariaDB source keeps MySQL's own
// spelling in its URL (tls=MODE&ca=FILE) and reads its CA with CertPool.
package tlsconfig

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"

	"go.yaml.in/yaml/v3"

	"github.com/sluice-cdc/sluice/internal/confdef"
)

// Config is a client's tls block. The tags besides yaml document each
// key's default (package internal/confdef; docs/CONFIG.md is checked
// against them).
type Config struct {
	// CAFile is a PEM file of the certificate authorities to trust
	// instead of the system's.
	CAFile string `yaml:"ca_file" computed:"the system's CAs"`
	// CertFile and KeyFile are the client's certificate and key (PEM),
	// for servers that verify clients. They go together.
	CertFile string `yaml:"cert_file"`
	KeyFile  string `yaml:"key_file"`
	// InsecureSkipVerify accepts any server certificate. For tests only.
	InsecureSkipVerify bool `yaml:"insecure_skip_verify" default:"false"`
}

// Set reports whether any field of the block is set.
func (c Config) Set() bool {
	return c.CAFile != "" || c.CertFile != "" || c.KeyFile != "" || c.InsecureSkipVerify
}

// Validate says what is wrong with the block, without reading its files.
func (c Config) Validate() error {
	if (c.CertFile == "") != (c.KeyFile == "") {
		return errors.New("tls: cert_file and key_file go together: set both for a client certificate, or neither")
	}
	return nil
}

// Client returns the TLS configuration of a client of serverName ("" to
// let the client library take it from the address it dials): TLS 1.2 at
// least, the server's certificate verified against CAFile's authorities
// (the system's when CAFile is empty), the client certificate when given.
// Errors name the keys under block, the YAML path of the block ("tls."
// for a tls block, "" for keys at the top of a sink's block).
func (c Config) Client(block, serverName string) (*tls.Config, error) {
	tc := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: serverName, InsecureSkipVerify: c.InsecureSkipVerify} //nolint:gosec // only when the user asks for it
	if c.CAFile != "" {
		pool, err := CertPool(c.CAFile)
		if err != nil {
			return nil, fmt.Errorf("%sca_file: %w", block, err)
		}
		tc.RootCAs = pool
	}
	if c.CertFile != "" || c.KeyFile != "" {
		if c.CertFile == "" || c.KeyFile == "" {
			return nil, fmt.Errorf("%scert_file and key_file go together: set both for a client certificate, or neither", block)
		}
		cert, err := tls.LoadX509KeyPair(c.CertFile, c.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("%scert_file and key_file: %w", block, err)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	return tc, nil
}

// CertPool reads the PEM certificates in file.
func CertPool(file string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%s holds no PEM certificate", file)
	}
	return pool, nil
}

// Toggle is a tls block that may also be written as a switch, for a
// client whose tls key was once only that (Redis): `tls: true` is an
// empty block (TLS on, verified against the system's roots), `tls:
// false` or no key leaves TLS off, and a block turns it on.
type Toggle struct {
	On     bool `yaml:"-"`
	Config `yaml:",inline"`
}

// UnmarshalYAML takes true, false or a block of Config's keys. (It is the
// form of the method that YAML decoders call with a function decoding the
// value, which names no YAML type.)
func (t *Toggle) UnmarshalYAML(unmarshal func(any) error) error {
	n, err := confdef.Node(unmarshal)
	if err != nil {
		return err
	}
	switch {
	case n.Kind == yaml.ScalarNode && n.Tag == "!!null":
		*t = Toggle{}
	case n.Kind == yaml.ScalarNode:
		var on bool
		if err := n.Decode(&on); err != nil {
			return fmt.Errorf("line %d: tls: %q is not true, false or a block of ca_file, cert_file, key_file and insecure_skip_verify", n.Line, n.Value)
		}
		*t = Toggle{On: on}
	default:
		var c Config
		if err := n.Decode(&c); err != nil {
			return err
		}
		*t = Toggle{On: true, Config: c}
	}
	return nil
}

// Hint says what to change in the block (whose YAML path is block, as in
// Client) when a TLS connection made with it failed with err: a server
// certificate the client does not trust or that is not for the name
// dialled, a handshake the server refused (most often for want of a
// client certificate it trusts), or a server that does not speak TLS. It is "" for any other error. Callers
// put the server's address before it.
func (c Config) Hint(block string, err error) string {
	var (
		unknownCA x509.UnknownAuthorityError
		badName   x509.HostnameError
		invalid   x509.CertificateInvalidError
		notTLS    tls.RecordHeaderError
		netErr    *net.OpError
	)
	switch {
	case errors.As(err, &notTLS):
		return "it does not speak TLS on this port: use its TLS port, or leave tls off for a plain one"
	case errors.As(err, &unknownCA):
		if c.CAFile != "" {
			return fmt.Sprintf("its certificate is not signed by a CA in %sca_file %s: set %sca_file to the CA that signed the server's certificate (the service's CA bundle)", block, c.CAFile, block)
		}
		return fmt.Sprintf("its certificate is not signed by a CA this system trusts: set %sca_file to the CA that signed the server's certificate (the service's CA bundle)", block)
	case errors.As(err, &badName):
		return "its certificate is not for the name dialled: connect by a name the certificate holds"
	case errors.As(err, &invalid):
		return "its certificate is not valid (" + invalid.Error() + ")"
	case errors.As(err, &netErr) && netErr.Op == "remote error":
		// A TLS alert from the server.
		if c.CertFile == "" {
			return fmt.Sprintf("it refused the TLS handshake: if it requires client certificates, set %scert_file and %skey_file", block, block)
		}
		return fmt.Sprintf("it refused the TLS handshake: is %scert_file %s signed by a CA that the server trusts?", block, c.CertFile)
	}
	return ""
}
