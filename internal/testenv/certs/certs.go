// Package certs makes the throwaway certificates of the tests: a CA, a
// server certificate it signed for 127.0.0.1 and localhost, a client
// certificate it signed, and a second CA that signed nothing (the wrong
// CA), written as PEM files that every server the tests start reads:
// Kafka (its keystore and truststore in PEM form, ssl.keystore.type=PEM),
// Redis (tls-cert-file, tls-key-file, tls-ca-cert-file), nats-server and
// etcd (Go's crypto/tls), MariaDB and MySQL (--ssl-ca, --ssl-cert,
// --ssl-key). It is the one place the tests make certificates; Refused
// is the one check of the error of a connection the server refused.
//
//	p := certs.New(t)                         // in a t.TempDir()
//	k := kafkaenv.StartSecure(t, users, p, true) // the broker's SSL listeners present p's certificate
//	cli := tlsconfig.Config{CAFile: p.CAFile} // sluice's tls block
//	bad := tlsconfig.Config{CAFile: p.OtherCAFile}
//
// Keys are ECDSA P-256 in PKCS #8 ("PRIVATE KEY"), which Java, OpenSSL and
// Go all read; certificates are valid from an hour ago for a day. The
// package imports no other package of sluice, nor testing, so any test
// can use it, and the throwaway servers take a *PKI.
package certs

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"
)

// Options choose the names the server certificate is for.
type Options struct {
	// DNSNames and IPs are the server certificate's names. Both empty:
	// "localhost" and 127.0.0.1. A certificate for names alone (no IP,
	// like MySQL's own) takes DNSNames only.
	DNSNames []string
	IPs      []net.IP
}

// PKI is a CA and the certificates it signed, as PEM files in Dir.
type PKI struct {
	Dir string
	// CAFile is the CA's certificate: what a client trusts (tls.ca_file)
	// and a server verifies client certificates against.
	CAFile string
	// CertFile and KeyFile are the server's certificate and key.
	CertFile, KeyFile string
	// KeystoreFile is the server's key and certificate in one PEM file, a
	// Java keystore in PEM form (Kafka's ssl.keystore.type=PEM).
	KeystoreFile string
	// ClientCertFile and ClientKeyFile are a client certificate (common
	// name "sluice") and its key, for servers that verify clients.
	ClientCertFile, ClientKeyFile string
	// OtherCAFile is a CA that signed none of these: the wrong CA.
	OtherCAFile string

	// CAPool holds the CA; ServerCert is the server's certificate and key,
	// for a server in the test's own process.
	CAPool     *x509.CertPool
	ServerCert tls.Certificate
}

// TB is the part of testing.TB that New uses (an interface of its own, so
// that the package does not import testing and programs that are not
// tests, such as the throwaway servers', may import it).
type TB interface {
	Helper()
	TempDir() string
	Fatalf(format string, args ...any)
	Errorf(format string, args ...any)
	Logf(format string, args ...any)
}

// New makes a PKI for 127.0.0.1 and localhost in a new t.TempDir(). It
// fails the test on an error.
func New(t TB) *PKI {
	t.Helper()
	return NewFor(t, Options{})
}

// NewFor makes a PKI whose server certificate is for opts' names, in a
// new t.TempDir().
func NewFor(t TB, opts Options) *PKI {
	t.Helper()
	p, err := Make(t.TempDir(), opts)
	if err != nil {
		t.Fatalf("certs: %v", err)
	}
	return p
}

// Make writes a PKI into dir (which must exist), for callers without a
// testing.TB.
func Make(dir string, opts Options) (*PKI, error) {
	if len(opts.DNSNames) == 0 && len(opts.IPs) == 0 {
		opts.DNSNames, opts.IPs = []string{"localhost"}, []net.IP{net.IPv4(127, 0, 0, 1)}
	}
	p := &PKI{Dir: dir, CAPool: x509.NewCertPool()}
	ca, caKey, err := newCA("sluice test CA")
	if err != nil {
		return nil, err
	}
	other, _, err := newCA("another CA")
	if err != nil {
		return nil, err
	}
	p.CAPool.AddCert(ca)
	srv, err := p.issue(ca, caKey, "server", x509.Certificate{
		Subject:     pkix.Name{CommonName: "sluice test server"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:    opts.DNSNames, IPAddresses: opts.IPs,
	})
	if err != nil {
		return nil, err
	}
	cli, err := p.issue(ca, caKey, "client", x509.Certificate{
		Subject:     pkix.Name{CommonName: "sluice"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
	if err != nil {
		return nil, err
	}
	p.ServerCert = srv.tls
	p.CertFile, p.KeyFile, p.ClientCertFile, p.ClientKeyFile = srv.certFile, srv.keyFile, cli.certFile, cli.keyFile
	for _, f := range []struct {
		path *string
		name string
		data []byte
	}{
		{&p.CAFile, "ca.pem", certPEM(ca.Raw)},
		{&p.OtherCAFile, "other-ca.pem", certPEM(other.Raw)},
		{&p.KeystoreFile, "server-keystore.pem", append(srv.keyPEM, srv.certPEM...)},
	} {
		if *f.path, err = p.write(f.name, f.data); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// issued is a certificate the CA signed, and its key, in PEM and in files.
type issued struct {
	tls               tls.Certificate
	certPEM, keyPEM   []byte
	certFile, keyFile string
}

// issue signs a certificate of tmpl with the CA and writes it and its
// key as name.pem and name-key.pem.
func (p *PKI) issue(ca *x509.Certificate, caKey *ecdsa.PrivateKey, name string, tmpl x509.Certificate) (issued, error) {
	cert, key, err := sign(ca, caKey, tmpl)
	if err != nil {
		return issued{}, err
	}
	out := issued{tls: tls.Certificate{Certificate: [][]byte{cert.Raw}, PrivateKey: key, Leaf: cert}, certPEM: certPEM(cert.Raw)}
	if out.keyPEM, err = keyPEM(key); err != nil {
		return issued{}, err
	}
	if out.certFile, err = p.write(name+".pem", out.certPEM); err != nil {
		return issued{}, err
	}
	if out.keyFile, err = p.write(name+"-key.pem", out.keyPEM); err != nil {
		return issued{}, err
	}
	return out, nil
}

// Refused checks the error of a connection that the tests' server must
// refuse (a wrong CA, a missing client certificate, a wrong password):
// that there is one, that it says each of want (the server's address, the
// setting to change), and that it shows none of secrets (the passwords).
func Refused(t TB, err error, secrets []string, want ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("connected; want a refusal saying %q", want)
	}
	t.Logf("refused: %v", err)
	for _, s := range secrets {
		if strings.Contains(err.Error(), s) {
			t.Errorf("the error shows the password: %v", err)
		}
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("the error does not say %q: %v", w, err)
		}
	}
}

// ServerTLS is a crypto/tls server configuration presenting the server
// certificate; with clientAuth it requires a client certificate signed by
// the CA.
func (p *PKI) ServerTLS(clientAuth bool) *tls.Config {
	c := &tls.Config{Certificates: []tls.Certificate{p.ServerCert}, MinVersion: tls.VersionTLS12}
	if clientAuth {
		c.ClientAuth, c.ClientCAs = tls.RequireAndVerifyClientCert, p.CAPool
	}
	return c
}

var serial atomic.Int64

func template(t x509.Certificate) *x509.Certificate {
	t.SerialNumber = big.NewInt(time.Now().UnixNano() + serial.Add(1))
	t.NotBefore, t.NotAfter = time.Now().Add(-time.Hour), time.Now().Add(24*time.Hour)
	return &t
}

// newCA makes a self-signed CA.
func newCA(cn string) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	return sign(nil, nil, x509.Certificate{
		Subject: pkix.Name{CommonName: cn},
		IsCA:    true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	})
}

// sign makes a key and a certificate of t for it, signed by ca (nil: by
// itself).
func sign(ca *x509.Certificate, caKey *ecdsa.PrivateKey, t x509.Certificate) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("certs: %w", err)
	}
	if t.KeyUsage == 0 {
		t.KeyUsage = x509.KeyUsageDigitalSignature
	}
	tmpl := template(t)
	if ca == nil {
		ca, caKey = tmpl, key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return nil, nil, fmt.Errorf("certs: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, nil, fmt.Errorf("certs: %w", err)
	}
	return cert, key, nil
}

func certPEM(der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

func keyPEM(key *ecdsa.PrivateKey) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("certs: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

func (p *PKI) write(name string, data []byte) (string, error) {
	path := filepath.Join(p.Dir, name)
	// Readable by the servers the tests start (as the same user).
	if err := os.WriteFile(path, data, 0o600); err != nil {
		return "", fmt.Errorf("certs: %w", err)
	}
	return path, nil
}
