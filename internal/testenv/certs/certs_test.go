package certs

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"os"
	"testing"
)

// The files hold what the servers read: a server certificate for
// 127.0.0.1 and localhost and a client certificate, both verified by the
// CA and not by the other CA, and a keystore of the key then the
// certificate.
func TestMake(t *testing.T) {
	p := New(t)
	other := x509.NewCertPool()
	b, err := os.ReadFile(p.OtherCAFile)
	if err != nil || !other.AppendCertsFromPEM(b) {
		t.Fatalf("other CA %s: %v", p.OtherCAFile, err)
	}
	srv, err := tls.LoadX509KeyPair(p.CertFile, p.KeyFile)
	if err != nil {
		t.Fatal(err)
	}
	cli, err := tls.LoadX509KeyPair(p.ClientCertFile, p.ClientKeyFile)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		cert  []byte
		name  string
		usage x509.ExtKeyUsage
	}{
		{srv.Certificate[0], "127.0.0.1", x509.ExtKeyUsageServerAuth},
		{srv.Certificate[0], "localhost", x509.ExtKeyUsageServerAuth},
		{cli.Certificate[0], "", x509.ExtKeyUsageClientAuth},
	} {
		cert, err := x509.ParseCertificate(c.cert)
		if err != nil {
			t.Fatal(err)
		}
		opts := x509.VerifyOptions{Roots: p.CAPool, DNSName: c.name, KeyUsages: []x509.ExtKeyUsage{c.usage}}
		if _, err := cert.Verify(opts); err != nil {
			t.Errorf("%s for %q: %v", cert.Subject.CommonName, c.name, err)
		}
		opts.Roots = other
		if _, err := cert.Verify(opts); err == nil {
			t.Errorf("%s: verified by the other CA", cert.Subject.CommonName)
		}
	}
	ks, err := os.ReadFile(p.KeystoreFile)
	if err != nil {
		t.Fatal(err)
	}
	key, rest := pem.Decode(ks)
	cert, _ := pem.Decode(rest)
	if key == nil || key.Type != "PRIVATE KEY" || cert == nil || cert.Type != "CERTIFICATE" {
		t.Fatalf("keystore %s: want a PRIVATE KEY then a CERTIFICATE", p.KeystoreFile)
	}

	named := NewFor(t, Options{DNSNames: []string{"db"}})
	leaf := named.ServerCert.Leaf
	if len(leaf.IPAddresses) != 0 || len(leaf.DNSNames) != 1 || leaf.DNSNames[0] != "db" {
		t.Errorf("NewFor(db): names %v %v", leaf.DNSNames, leaf.IPAddresses)
	}
}
