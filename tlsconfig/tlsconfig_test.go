package tlsconfig

import (
	"crypto/tls"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/sluice-cdc/sluice/internal/testenv/certs"
)

// pki is the tests' certificates (internal/testenv/certs) and a file
// that is not PEM.
type pki struct {
	*certs.PKI
	notPEMFile string
}

func newPKI(t *testing.T) *pki {
	t.Helper()
	p := &pki{PKI: certs.New(t)}
	p.notPEMFile = filepath.Join(p.Dir, "not.pem")
	if err := os.WriteFile(p.notPEMFile, []byte("not a certificate\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// handshake dials a TLS server on loopback that presents the server
// certificate (and, with clientAuth, requires a client certificate signed
// by the CA) with tc, and returns the client's handshake error.
func (p *pki) handshake(t *testing.T, tc *tls.Config, clientAuth bool) error {
	t.Helper()
	ln, err := tls.Listen("tcp", "127.0.0.1:0", p.ServerTLS(clientAuth))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	acceptOnce(ln, func(c net.Conn) {
		_ = c.(*tls.Conn).Handshake()
		_, _ = c.Write([]byte("x")) // the client reads it: TLS 1.3 reports a refused client certificate only then
	})
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", ln.Addr().String(), tc)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err = c.Read(make([]byte, 1))
	return err
}

// acceptOnce serves one connection of ln with serve, in the background.
func acceptOnce(ln net.Listener, serve func(net.Conn)) {
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		serve(c)
	}()
}

func TestClientHandshakes(t *testing.T) {
	p := newPKI(t)
	cases := []struct {
		name       string
		cfg        Config
		serverName string
		clientAuth bool
		wantErr    string // "" for a handshake that succeeds
		wantHint   string // what Hint says of the error
	}{
		{"the CA verifies the server", Config{CAFile: p.CAFile}, "localhost", false, "", ""},
		{"the CA verifies the server's IP", Config{CAFile: p.CAFile}, "", false, "", ""},
		{"another CA does not", Config{CAFile: p.OtherCAFile}, "localhost", false, "certificate", "not signed by a CA in tls.ca_file " + p.OtherCAFile},
		{"the system's roots do not know the test CA", Config{}, "localhost", false, "certificate", "not signed by a CA this system trusts: set tls.ca_file"},
		{"a name the certificate lacks", Config{CAFile: p.CAFile}, "db.example", false, "db.example", "not for the name dialled"},
		{"insecure_skip_verify accepts it", Config{InsecureSkipVerify: true}, "localhost", false, "", ""},
		{"a client certificate where one is required", Config{CAFile: p.CAFile, CertFile: p.ClientCertFile, KeyFile: p.ClientKeyFile}, "localhost", true, "", ""},
		{"none where one is required", Config{CAFile: p.CAFile}, "localhost", true, "certificate", "set tls.cert_file and tls.key_file"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tc, err := c.cfg.Client("tls.", c.serverName)
			if err != nil {
				t.Fatal(err)
			}
			if tc.MinVersion != tls.VersionTLS12 {
				t.Errorf("MinVersion %x, want TLS 1.2", tc.MinVersion)
			}
			if c.serverName == "" {
				tc.ServerName = "127.0.0.1" // what a client library sets from the address
			}
			err = p.handshake(t, tc, c.clientAuth)
			switch {
			case c.wantErr == "" && err != nil:
				t.Fatalf("handshake: %v", err)
			case c.wantErr != "" && err == nil:
				t.Fatalf("handshake succeeded, want an error about %s", c.wantErr)
			case c.wantErr != "" && !strings.Contains(err.Error(), c.wantErr):
				t.Fatalf("handshake: %v, want an error about %s", err, c.wantErr)
			}
			if hint := c.cfg.Hint("tls.", err); !strings.Contains(hint, c.wantHint) || (c.wantHint == "") != (hint == "") {
				t.Errorf("Hint(%v) = %q, want %q", err, hint, c.wantHint)
			}
		})
	}
}

// A server that answers in plain text: Hint says it does not speak TLS.
func TestHintPlainServer(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	acceptOnce(ln, func(c net.Conn) { _, _ = c.Write([]byte("-ERR not TLS\r\n")) })
	tc, err := Config{}.Client("tls.", "localhost")
	if err != nil {
		t.Fatal(err)
	}
	_, err = tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", ln.Addr().String(), tc)
	if hint := (Config{}).Hint("tls.", err); !strings.Contains(hint, "does not speak TLS") {
		t.Errorf("Hint(%v) = %q", err, hint)
	}
}

func TestClientErrorsNameTheKey(t *testing.T) {
	p := newPKI(t)
	cases := []struct {
		cfg   Config
		block string
		want  string
	}{
		{Config{CAFile: filepath.Join(p.Dir, "missing.pem")}, "tls.", "tls.ca_file: open "},
		{Config{CAFile: p.notPEMFile}, "tls.", "tls.ca_file: " + p.notPEMFile + " holds no PEM certificate"},
		{Config{CAFile: p.notPEMFile}, "", "ca_file: " + p.notPEMFile + " holds no PEM certificate"},
		{Config{CertFile: p.ClientCertFile}, "tls.", "tls.cert_file and key_file go together"},
		{Config{CertFile: p.ClientCertFile, KeyFile: p.notPEMFile}, "tls.", "tls.cert_file and key_file: "},
	}
	for _, c := range cases {
		_, err := c.cfg.Client(c.block, "")
		if err == nil || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("%+v: %v, want an error starting %q", c.cfg, err, c.want)
		}
	}
	if err := (Config{KeyFile: "k.pem"}).Validate(); err == nil || !strings.Contains(err.Error(), "cert_file and key_file go together") {
		t.Errorf("Validate of a key without a certificate: %v", err)
	}
	if err := (Config{CertFile: "c.pem", KeyFile: "k.pem"}).Validate(); err != nil {
		t.Errorf("Validate of a certificate and key: %v", err)
	}
}

func TestToggleYAML(t *testing.T) {
	cases := []struct {
		doc  string
		want Toggle
		err  string
	}{
		{"tls: true", Toggle{On: true}, ""},
		{"tls: false", Toggle{}, ""},
		{"tls:", Toggle{}, ""},
		{"tls: {}", Toggle{On: true}, ""},
		{"tls: {ca_file: /etc/ca.pem, insecure_skip_verify: true}", Toggle{On: true, Config: Config{CAFile: "/etc/ca.pem", InsecureSkipVerify: true}}, ""},
		{"tls:\n  cert_file: c.pem\n  key_file: k.pem", Toggle{On: true, Config: Config{CertFile: "c.pem", KeyFile: "k.pem"}}, ""},
		{"tls: sometimes", Toggle{}, `line 1: tls: "sometimes" is not true, false or a block`},
	}
	for _, c := range cases {
		var v struct {
			TLS Toggle `yaml:"tls"`
		}
		err := yaml.Unmarshal([]byte(c.doc), &v)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%q: %v, want an error containing %q", c.doc, err, c.err)
			}
			continue
		}
		if err != nil || v.TLS != c.want {
			t.Errorf("%q: %+v, %v; want %+v", c.doc, v.TLS, err, c.want)
		}
	}
}
