package binlog

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"strings"

	"github.com/sluice-cdc/sluice/tlsconfig"
)

// TLSMode says whether and how the connection to the server is encrypted,
// with the names MySQL's own clients give the modes (--ssl-mode).
type TLSMode string

// The TLS modes. The source URL option tls= takes them, and two older
// spellings: tls=true is verify-identity, tls=skip-verify is required
// (tls=false is disabled).
const (
	// TLSDisabled never encrypts.
	TLSDisabled TLSMode = "disabled"
	// TLSPreferred encrypts when the server offers TLS and falls back to
	// an unencrypted connection when it does not; the certificate is not
	// verified.
	TLSPreferred TLSMode = "preferred"
	// TLSRequired encrypts or fails; the certificate is not verified.
	TLSRequired TLSMode = "required"
	// TLSVerifyCA encrypts and verifies that the server's certificate is
	// signed by the CA (ca=, else the system's CAs), whatever host name it
	// names. MySQL's auto-generated certificates (ca.pem in its data
	// directory) name no host, so this is the mode for them.
	TLSVerifyCA TLSMode = "verify-ca"
	// TLSVerifyIdentity verifies the CA and that the certificate is for
	// the host name or IP address connected to.
	TLSVerifyIdentity TLSMode = "verify-identity"
)

// parseTLSMode reads the tls= option, with its older spellings.
func parseTLSMode(s string) (TLSMode, error) {
	switch strings.ToLower(s) {
	case "", "false", "disabled":
		return TLSDisabled, nil
	case "preferred":
		return TLSPreferred, nil
	case "required", "skip-verify":
		return TLSRequired, nil
	case "verify-ca":
		return TLSVerifyCA, nil
	case "true", "verify-identity":
		return TLSVerifyIdentity, nil
	}
	return "", fmt.Errorf("binlog: source option tls=%q: want disabled, preferred, required, verify-ca or verify-identity (true and skip-verify are older names of verify-identity and required)", s)
}

// tlsConfig builds the TLS configuration of a mode for host, verifying
// against the PEM certificates in caFile (or the system's CAs when empty).
func tlsConfig(mode TLSMode, host, caFile string) (*tls.Config, error) {
	if caFile != "" && mode != TLSVerifyCA && mode != TLSVerifyIdentity {
		return nil, fmt.Errorf("binlog: source option ca is used only to verify the server's certificate: add tls=verify-ca (or tls=verify-identity)")
	}
	switch mode {
	case TLSDisabled:
		return nil, nil
	case TLSPreferred, TLSRequired:
		return &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12, ServerName: sniName(host)}, nil //nolint:gosec // the mode asks for no verification
	}
	var roots *x509.CertPool // nil: the system's
	if caFile != "" {
		var err error
		if roots, err = tlsconfig.CertPool(caFile); err != nil {
			return nil, fmt.Errorf("binlog: source option ca: %w", err)
		}
	}
	v := verifier{roots: roots, caFile: caFile}
	if mode == TLSVerifyIdentity {
		v.host = host
	}
	// The chain (and the name) are verified by verifier, so that its
	// errors say what to change; Go's own verification would also demand
	// a host name, which verify-ca does not.
	return &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12, ServerName: sniName(host), VerifyConnection: v.verify}, nil //nolint:gosec // verified by VerifyConnection
}

// sniName is host when it is a name (TLS sends no IP addresses as SNI).
func sniName(host string) string {
	if net.ParseIP(host) != nil {
		return ""
	}
	return host
}

type verifier struct {
	roots  *x509.CertPool
	caFile string
	host   string // "" for verify-ca
}

func (v verifier) verify(cs tls.ConnectionState) error {
	if len(cs.PeerCertificates) == 0 {
		return errors.New("the server sent no certificate")
	}
	leaf := cs.PeerCertificates[0]
	opts := x509.VerifyOptions{Roots: v.roots, Intermediates: x509.NewCertPool()}
	for _, c := range cs.PeerCertificates[1:] {
		opts.Intermediates.AddCert(c)
	}
	if _, err := leaf.Verify(opts); err != nil {
		var ua x509.UnknownAuthorityError
		if errors.As(err, &ua) {
			if v.caFile != "" {
				return fmt.Errorf("the server's certificate (%s) is not signed by the CA in %s: give the CA that signed it (MySQL's auto-generated one is ca.pem in its data directory)", describeCert(leaf), v.caFile)
			}
			return fmt.Errorf("the server's certificate (%s) is not signed by a CA this system trusts: give its CA with the source option ca=/path/ca.pem (MySQL's auto-generated one is ca.pem in its data directory)", describeCert(leaf))
		}
		return fmt.Errorf("the server's certificate (%s) does not verify: %w", describeCert(leaf), err)
	}
	if v.host == "" {
		return nil
	}
	if err := leaf.VerifyHostname(v.host); err != nil {
		names := append(append([]string(nil), leaf.DNSNames...), ipStrings(leaf.IPAddresses)...)
		if len(names) == 0 {
			return fmt.Errorf("tls=verify-identity: the server's certificate (%s) names no host (MySQL's auto-generated certificates do not): use tls=verify-ca to verify its CA only, or give the server a certificate for %s", describeCert(leaf), v.host)
		}
		return fmt.Errorf("tls=verify-identity: the server's certificate is for %s, not %s: connect by one of those names, or use tls=verify-ca to verify its CA only", strings.Join(names, ", "), v.host)
	}
	return nil
}

func describeCert(c *x509.Certificate) string {
	if c.Subject.CommonName != "" {
		return "CN=" + c.Subject.CommonName
	}
	return c.Subject.String()
}

func ipStrings(ips []net.IP) []string {
	out := make([]string, len(ips))
	for i, ip := range ips {
		out[i] = ip.String()
	}
	return out
}

// errNoTLS is go-mysql's error for a server that does not offer TLS.
const errNoTLS = "does not support TLS"

// tlsAdvice rewords a connection error that comes from TLS.
func tlsAdvice(err error, mode TLSMode) error {
	if err != nil && strings.Contains(err.Error(), errNoTLS) {
		return fmt.Errorf("the server does not offer TLS (tls=%s): give it a certificate (ssl_cert and ssl_key; MySQL makes its own unless auto_generate_certs is off), or use tls=preferred to connect unencrypted to such a server", mode)
	}
	return err
}
