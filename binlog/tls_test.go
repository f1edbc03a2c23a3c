package binlog_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluice-cdc/sluice/binlog"
	"github.com/sluice-cdc/sluice/internal/testenv"
)

// writeCerts makes a CA and a server certificate for 127.0.0.1 in dir.
func writeCerts(t *testing.T, dir string) (ca, cert, key string) {
	t.Helper()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "sluice test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, _ := x509.ParseCertificate(caDER)
	srvKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	srvTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	srvDER, err := x509.CreateCertificate(rand.Reader, srvTmpl, caCert, &srvKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, _ := x509.MarshalECPrivateKey(srvKey)
	write := func(name, typ string, der []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	return write("ca.pem", "CERTIFICATE", caDER), write("server.pem", "CERTIFICATE", srvDER), write("server-key.pem", "EC PRIVATE KEY", keyDER)
}

func TestTLSVerifiedConnection(t *testing.T) {
	dir := t.TempDir()
	ca, cert, key := writeCerts(t, dir)
	db := testenv.StartT(t, testenv.Options{Extra: []string{"--ssl-ca=" + ca, "--ssl-cert=" + cert, "--ssl-key=" + key}})
	exec(t, db, "CREATE DATABASE app", "CREATE TABLE app.t (id INT PRIMARY KEY)",
		"CREATE USER 'secure'@'%' IDENTIFIED BY 'pw' REQUIRE SSL",
		"GRANT REPLICATION SLAVE, BINLOG MONITOR, SELECT ON *.* TO 'secure'@'%'")
	start := masterStatus(t, db)
	exec(t, db, "INSERT INTO app.t VALUES (1)")
	stop := masterStatus(t, db)

	url := "mysql://secure:pw@" + db.Addr() + "?tls=true&ca=" + ca
	cfg, err := binlog.ParseSourceURL(url)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Start, cfg.Stop = start, stop
	r, err := binlog.NewReader(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	txn := next(t, r)
	if txn.Changes[0].After[0].Int() != 1 {
		t.Fatalf("over TLS: %+v", txn.Changes[0])
	}

	// Another CA: the server's certificate must be refused.
	other, _, _ := writeCerts(t, t.TempDir())
	cfg, _ = binlog.ParseSourceURL("mysql://secure:pw@" + db.Addr() + "?tls=true&ca=" + other)
	cfg.Start = start
	r2, _ := binlog.NewReader(cfg)
	defer r2.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := r2.Next(ctx); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("untrusted server certificate: want a certificate error, got %v", err)
	}
	// Without TLS the user is refused by the server.
	cfg, _ = binlog.ParseSourceURL("mysql://secure:pw@" + db.Addr())
	r3, _ := binlog.NewReader(cfg)
	defer r3.Close()
	if _, err := r3.Next(ctx); err == nil || !strings.Contains(err.Error(), "Access denied") {
		t.Fatalf("plain connection for a REQUIRE SSL user: %v", err)
	}
}

func TestParseSourceURL(t *testing.T) {
	cfg, err := binlog.ParseSourceURL("mysql://u:p%40ss@db.example:3307?server_id=42")
	if err != nil || cfg.Addr != "db.example:3307" || cfg.User != "u" || cfg.Password != "p@ss" || cfg.ServerID != 42 || cfg.TLS != nil {
		t.Fatalf("%+v %v", cfg, err)
	}
	cfg, err = binlog.ParseSourceURL("mysql://u@db")
	if err != nil || cfg.Addr != "db:3306" {
		t.Fatalf("default port: %+v %v", cfg, err)
	}
	for _, bad := range []string{"postgres://u@h", "u:p@h:1", "mysql://u@h?tls=maybe", "mysql://u@h?tsl=true", "mysql://u@h?ca=/x", "mysql://u@h?server_id=0", "mysql://u@h?tls=true&ca=/does/not/exist"} {
		if _, err := binlog.ParseSourceURL(bad); err == nil {
			t.Errorf("%q: want an error", bad)
		}
	}
	if _, err := binlog.ParseSourceURL("mysql://u:secret@h:1?tls=maybe"); err == nil || strings.Contains(err.Error(), "secret") {
		t.Errorf("errors must not show the password: %v", err)
	}
}

// MariaDB's ed25519 authentication plugin, besides the native password one
// every other test uses.
func TestEd25519Authentication(t *testing.T) {
	db := testenv.StartT(t, testenv.Options{})
	exec(t, db, "INSTALL SONAME 'auth_ed25519'",
		"CREATE USER 'edu'@'%' IDENTIFIED VIA ed25519 USING PASSWORD('s3cret')",
		"GRANT REPLICATION SLAVE, BINLOG MONITOR, SELECT ON *.* TO 'edu'@'%'",
		"CREATE DATABASE app", "CREATE TABLE app.t (id INT PRIMARY KEY)")
	start := masterStatus(t, db)
	exec(t, db, "INSERT INTO app.t VALUES (7)")
	cfg, err := binlog.ParseSourceURL("mysql://edu:s3cret@" + db.Addr())
	if err != nil {
		t.Fatal(err)
	}
	cfg.Start = start
	r, err := binlog.NewReader(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if txn := next(t, r); txn.Changes[0].After[0].Int() != 7 {
		t.Fatalf("over ed25519 auth: %+v", txn.Changes[0])
	}
	cfg.Password = "wrong"
	r2, _ := binlog.NewReader(cfg)
	defer r2.Close()
	if _, err := r2.Next(timeout(t)); err == nil || !strings.Contains(err.Error(), "Access denied") {
		t.Fatalf("wrong password: %v", err)
	}
}
