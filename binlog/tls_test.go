package binlog_test

import (
	"context"
	"crypto/sha1"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluice-cdc/sluice/binlog"
	"github.com/sluice-cdc/sluice/internal/testenv"
	"github.com/sluice-cdc/sluice/internal/testenv/certs"
	"github.com/sluice-cdc/sluice/position"
)

const securePassword = "s3cret-Pass-42"

// readOne connects with the source URL, reads from start and returns the
// first row's id, or the error.
func readOne(t *testing.T, url string, start position.Position) (int64, error) {
	t.Helper()
	cfg, err := binlog.ParseSourceURL(url)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Start = start
	r, err := binlog.NewReader(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for {
		txn, err := r.Next(ctx)
		if err != nil {
			if strings.Contains(err.Error(), securePassword) {
				t.Fatalf("the password appears in an error: %v", err)
			}
			return 0, err
		}
		if len(txn.Changes) > 0 {
			return txn.Changes[0].After[0].Int(), nil
		}
	}
}

// tlsServer starts a server with extra options, an account that must use
// TLS ('secure') and one that need not ('plain'), and a row to read.
func tlsServer(t *testing.T, flavor position.Flavor, extra ...string) (*testenv.Server, position.Position) {
	t.Helper()
	db := startServer(t, flavor, testenv.Options{Extra: extra})
	exec(t, db, "CREATE DATABASE app", "CREATE TABLE app.t (id INT PRIMARY KEY)",
		"CREATE USER 'secure'@'%' IDENTIFIED BY '"+securePassword+"' REQUIRE SSL",
		"GRANT REPLICATION SLAVE, REPLICATION CLIENT, SELECT ON *.* TO 'secure'@'%'",
		"CREATE USER 'plain'@'%' IDENTIFIED BY '"+securePassword+"'",
		"GRANT REPLICATION SLAVE, REPLICATION CLIENT, SELECT ON *.* TO 'plain'@'%'")
	start := binlogEnd(t, db)
	exec(t, db, "INSERT INTO app.t VALUES (1)")
	return db, start
}

// TestTLSModes: tls= as MySQL's clients know it, against both servers
// with a certificate that names the host "localhost" only (no IP address,
// like MySQL's auto-generated ones), against a server without TLS, and on
// MySQL against its auto-generated certificates (ca.pem in the data
// directory). Each failure says what to change; no error shows the
// password.
func TestTLSModes(t *testing.T) {
	testenv.ForEachFlavor(t, func(t *testing.T, flavor position.Flavor) {
		p := certs.NewFor(t, certs.Options{DNSNames: []string{"localhost"}})
		ca, cert, key, other := p.CAFile, p.CertFile, p.KeyFile, p.OtherCAFile
		db, start := tlsServer(t, flavor, "--ssl-ca="+ca, "--ssl-cert="+cert, "--ssl-key="+key)
		byIP := "mysql://secure:" + securePassword + "@" + db.Addr()
		byName := "mysql://secure:" + securePassword + "@localhost:" + strconv.Itoa(db.Port)
		ok := []string{
			byIP + "?tls=verify-ca&ca=" + ca,
			byName + "?tls=verify-identity&ca=" + ca,
			byName + "?tls=true&ca=" + ca, // the older name of verify-identity
			byIP + "?tls=required",
			byIP + "?tls=skip-verify", // the older name of required
			byIP + "?tls=preferred",   // the account requires TLS: preferred used it
		}
		for _, u := range ok {
			if id, err := readOne(t, u, start); err != nil || id != 1 {
				t.Errorf("%s: %d, %v", strings.Replace(u, securePassword, "***", 1), id, err)
			}
		}
		fail := []struct{ url, want string }{
			{byIP + "?tls=verify-identity&ca=" + ca, "is for localhost, not 127.0.0.1"},
			{byIP + "?tls=verify-identity&ca=" + ca, "tls=verify-ca"},
			{byIP + "?tls=verify-ca&ca=" + other, "not signed by the CA in " + other},
			{byIP + "?tls=verify-ca", "not signed by a CA this system trusts"},
			{byIP, "Access denied"}, // REQUIRE SSL without TLS
		}
		for _, f := range fail {
			if _, err := readOne(t, f.url, start); err == nil || !strings.Contains(err.Error(), f.want) {
				t.Errorf("%s: %v; want an error saying %q", strings.Replace(f.url, securePassword, "***", 1), err, f.want)
			} else {
				t.Logf("%v", err)
			}
		}

		// A server that offers no TLS: required fails, preferred connects unencrypted.
		noTLS := []string(nil)
		if flavor == position.MySQL {
			noTLS = []string{"--tls-version="}
		}
		plainDB, plainStart := tlsServer(t, flavor, noTLS...)
		plainURL := "mysql://plain:" + securePassword + "@" + plainDB.Addr()
		if _, err := readOne(t, plainURL+"?tls=required", plainStart); err == nil || !strings.Contains(err.Error(), "does not offer TLS (tls=required)") {
			t.Errorf("tls=required without TLS on the server: %v", err)
		} else {
			t.Logf("%v", err)
		}
		if id, err := readOne(t, plainURL+"?tls=preferred", plainStart); err != nil || id != 1 {
			t.Errorf("tls=preferred without TLS on the server: %d, %v", id, err)
		}

		if flavor == position.MySQL {
			// MySQL's own certificates: a self-signed CA and a server
			// certificate that names no host.
			auto, autoStart := tlsServer(t, flavor)
			autoCA := filepath.Join(auto.DataDir(), "ca.pem")
			u := "mysql://secure:" + securePassword + "@" + auto.Addr()
			if id, err := readOne(t, u+"?tls=verify-ca&ca="+autoCA, autoStart); err != nil || id != 1 {
				t.Errorf("verify-ca with MySQL's auto-generated certificates: %d, %v", id, err)
			}
			if id, err := readOne(t, u+"?tls=preferred", autoStart); err != nil || id != 1 {
				t.Errorf("preferred with MySQL's auto-generated certificates: %d, %v", id, err)
			}
			if _, err := readOne(t, u+"?tls=verify-identity&ca="+autoCA, autoStart); err == nil || !strings.Contains(err.Error(), "names no host") || !strings.Contains(err.Error(), "tls=verify-ca") {
				t.Errorf("verify-identity with MySQL's auto-generated certificates: %v", err)
			} else {
				t.Logf("%v", err)
			}
		}
	})
}

func TestParseSourceURL(t *testing.T) {
	cfg, err := binlog.ParseSourceURL("mysql://u:p%40ss@db.example:3307?server_id=42")
	if err != nil || cfg.Addr != "db.example:3307" || cfg.User != "u" || cfg.Password != "p@ss" || cfg.ServerID != 42 || cfg.TLS != nil || cfg.TLSMode != "" {
		t.Fatalf("%+v %v", cfg, err)
	}
	cfg, err = binlog.ParseSourceURL("mysql://u@db")
	if err != nil || cfg.Addr != "db:3306" {
		t.Fatalf("default port: %+v %v", cfg, err)
	}
	ca := certs.NewFor(t, certs.Options{DNSNames: []string{"db"}}).CAFile
	for _, c := range []struct {
		opts   string
		mode   binlog.TLSMode
		verify bool // the certificate is verified
	}{
		{"tls=disabled", "", false},
		{"tls=false", "", false},
		{"tls=preferred", binlog.TLSPreferred, false},
		{"tls=required", binlog.TLSRequired, false},
		{"tls=skip-verify", binlog.TLSRequired, false},
		{"tls=verify-ca", binlog.TLSVerifyCA, true},
		{"tls=verify-ca&ca=" + ca, binlog.TLSVerifyCA, true},
		{"tls=verify-identity", binlog.TLSVerifyIdentity, true},
		{"tls=true&ca=" + ca, binlog.TLSVerifyIdentity, true},
	} {
		cfg, err := binlog.ParseSourceURL("mysql://u:p@db:3306?" + c.opts)
		if err != nil {
			t.Errorf("%s: %v", c.opts, err)
			continue
		}
		if cfg.TLSMode != c.mode || (cfg.TLS == nil) != (c.mode == "") || cfg.TLS != nil && (cfg.TLS.VerifyConnection != nil) != c.verify {
			t.Errorf("%s: mode %q, TLS %+v", c.opts, cfg.TLSMode, cfg.TLS)
		}
	}
	for _, bad := range []string{"postgres://u@h", "u:p@h:1", "mysql://u@h?tls=maybe", "mysql://u@h?tsl=true", "mysql://u@h?ca=/x", "mysql://u@h?tls=required&ca=" + ca,
		"mysql://u@h?tls=preferred&ca=" + ca, "mysql://u@h?server_id=0", "mysql://u@h?tls=true&ca=/does/not/exist", "mysql://u@h?tls=verify-ca&ca=" + os.Args[0]} {
		if _, err := binlog.ParseSourceURL(bad); err == nil {
			t.Errorf("%q: want an error", bad)
		}
	}
	if _, err := binlog.ParseSourceURL("mysql://u:secret@h:1?tls=maybe"); err == nil || strings.Contains(err.Error(), "secret") {
		t.Errorf("errors must not show the password: %v", err)
	}
	if _, err := binlog.ParseSourceURL("mysql://u:secret@h:1?tls=verify-ca&ca=/does/not/exist"); err == nil || strings.Contains(err.Error(), "secret") {
		t.Errorf("errors must not show the password: %v", err)
	}
}

// Authentication plugins besides the default: MariaDB's ed25519; on
// MySQL, caching_sha2_password over plain TCP without TLS from a cold cache
// (the full authentication, with the server's RSA key), and an account
// left on mysql_native_password, which MySQL 9 no longer has: the error
// says what to run.
func TestAuthenticationPlugins(t *testing.T) {
	testenv.ForEachFlavor(t, func(t *testing.T, flavor position.Flavor) {
		db := startServer(t, flavor, testenv.Options{})
		grant := "GRANT REPLICATION SLAVE, REPLICATION CLIENT, SELECT ON *.* TO 'au'@'%'"
		if flavor == position.MariaDB {
			exec(t, db, "INSTALL SONAME 'auth_ed25519'", "CREATE USER 'au'@'%' IDENTIFIED VIA ed25519 USING PASSWORD('s3cret')", grant)
		} else {
			exec(t, db, "CREATE USER 'au'@'%' IDENTIFIED WITH caching_sha2_password BY 's3cret'", grant, "FLUSH PRIVILEGES")
		}
		exec(t, db, "CREATE DATABASE app", "CREATE TABLE app.t (id INT PRIMARY KEY)")
		start := binlogEnd(t, db)
		exec(t, db, "INSERT INTO app.t VALUES (7)")
		for i := 0; i < 2; i++ { // MySQL: full authentication, then from the server's cache
			if id, err := readOne(t, "mysql://au:s3cret@"+db.Addr(), start); err != nil || id != 7 {
				t.Fatalf("connection %d: %d, %v", i+1, id, err)
			}
		}
		if _, err := readOne(t, "mysql://au:wrong@"+db.Addr(), start); err == nil || !strings.Contains(err.Error(), "Access denied") {
			t.Fatalf("wrong password: %v", err)
		}
		if flavor == position.MySQL {
			// An account upgraded from MySQL 8.0 that still names
			// mysql_native_password (SHA1(SHA1('old')) as its hash).
			h1 := sha1.Sum([]byte("old"))
			h2 := sha1.Sum(h1[:])
			exec(t, db, "CREATE USER 'old'@'%' IDENTIFIED BY 'old'", "GRANT REPLICATION SLAVE, REPLICATION CLIENT ON *.* TO 'old'@'%'",
				"USE mysql", "UPDATE mysql.user SET plugin = 'mysql_native_password', authentication_string = '"+fmt.Sprintf("*%X", h2)+"' WHERE user = 'old'",
				"FLUSH PRIVILEGES")
			_, err := readOne(t, "mysql://old:old@"+db.Addr(), start)
			if err == nil || !strings.Contains(err.Error(), "removed in MySQL 9.0") || !strings.Contains(err.Error(), "IDENTIFIED WITH caching_sha2_password") {
				t.Fatalf("a mysql_native_password account on MySQL 9: %v", err)
			}
			t.Logf("%v", err)
		}
	})
}
