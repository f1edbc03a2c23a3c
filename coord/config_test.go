package coord

import (
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

func TestConfigValidate(t *testing.T) {
	ok := []string{"http://127.0.0.1:2379"}
	for _, tc := range []struct {
		name string
		cfg  Config
		want string // part of the error; "" for none
	}{
		{"minimal", Config{Endpoints: ok}, ""},
		{"bare host:port", Config{Endpoints: []string{"etcd-0:2379", "etcd-1:2379"}}, ""},
		{"https with tls", Config{Endpoints: []string{"https://etcd:2379"}, TLS: TLSConfig{CAFile: "ca.pem"}}, ""},
		{"full", Config{Endpoints: ok, Prefix: "/x/", LeaseTTL: 3 * time.Second, DialTimeout: time.Second, Username: "u", Password: "p", ID: "r1"}, ""},
		{"no endpoints", Config{}, "endpoints is required"},
		{"empty endpoint", Config{Endpoints: []string{""}}, "is empty"},
		{"no port", Config{Endpoints: []string{"etcd"}}, "endpoints"},
		{"url without port", Config{Endpoints: []string{"http://etcd"}}, "has no port"},
		{"bad scheme", Config{Endpoints: []string{"grpc://etcd:2379"}}, `scheme "grpc"`},
		{"http with tls", Config{Endpoints: ok, TLS: TLSConfig{CAFile: "ca.pem"}}, "write https://"},
		{"short ttl", Config{Endpoints: ok, LeaseTTL: time.Second}, "lease_ttl 1s: must be at least 2s"},
		{"fractional ttl", Config{Endpoints: ok, LeaseTTL: 2500 * time.Millisecond}, "whole number of seconds"},
		{"negative ttl", Config{Endpoints: ok, LeaseTTL: -time.Second}, "lease_ttl -1s: must be positive"},
		{"negative dial", Config{Endpoints: ok, DialTimeout: -time.Second}, "dial_timeout"},
		{"cert without key", Config{Endpoints: []string{"https://e:1"}, TLS: TLSConfig{CertFile: "c.pem"}}, "cert_file and key_file"},
		{"password alone", Config{Endpoints: ok, Password: "p"}, "username is not"},
		{"prefix space", Config{Endpoints: ok, Prefix: "/a b/"}, "prefix"},
		{"id two lines", Config{Endpoints: ok, ID: "a\nb"}, "id"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.Validate()
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tc.want != "" && err == nil:
				t.Fatalf("no error, want one saying %q", tc.want)
			case tc.want != "" && !strings.Contains(err.Error(), tc.want):
				t.Fatalf("error %q does not say %q", err, tc.want)
			}
		})
	}
}

func TestConfigDefaultsAndYAML(t *testing.T) {
	var cfg Config
	src := `
endpoints: [http://10.0.0.1:2379, http://10.0.0.2:2379]
prefix: /prod
lease_ttl: 15s
dial_timeout: 2s
tls: {ca_file: ca.pem, cert_file: c.pem, key_file: k.pem}
username: sluice
password: secret
id: replica-1
`
	if err := yaml.Unmarshal([]byte(src), &cfg); err != nil {
		t.Fatal(err)
	}
	want := Config{
		Endpoints: []string{"http://10.0.0.1:2379", "http://10.0.0.2:2379"}, Prefix: "/prod",
		LeaseTTL: 15 * time.Second, DialTimeout: 2 * time.Second,
		TLS:      TLSConfig{CAFile: "ca.pem", CertFile: "c.pem", KeyFile: "k.pem"},
		Username: "sluice", Password: "secret", ID: "replica-1",
	}
	if cfg.Prefix != want.Prefix || cfg.LeaseTTL != want.LeaseTTL || cfg.DialTimeout != want.DialTimeout ||
		cfg.TLS != want.TLS || cfg.Username != want.Username || cfg.Password != want.Password || cfg.ID != want.ID ||
		strings.Join(cfg.Endpoints, ",") != strings.Join(want.Endpoints, ",") {
		t.Fatalf("parsed %+v, want %+v", cfg, want)
	}
	if d := cfg.withDefaults(); d.Prefix != "/prod/" {
		t.Fatalf("prefix %q, want the final / added", d.Prefix)
	}

	d := Config{Endpoints: []string{"e:1"}}.withDefaults()
	if d.Prefix != DefaultPrefix || d.LeaseTTL != DefaultLeaseTTL || d.DialTimeout != DefaultDialTimeout || !strings.Contains(d.ID, ":") {
		t.Fatalf("defaults %+v", d)
	}
}

func TestKeys(t *testing.T) {
	e := &Etcd{cfg: Config{Prefix: "/sluice/"}, pipeline: "orders"}
	if got := e.ElectionPrefix(); got != "/sluice/orders/leader" {
		t.Errorf("election prefix %q", got)
	}
	if got := e.CheckpointKey(); got != "/sluice/orders/checkpoint" {
		t.Errorf("checkpoint key %q", got)
	}
	if _, err := New(Config{Endpoints: []string{"e:1"}}, "a/b", nil); err == nil || !strings.Contains(err.Error(), "pipeline name") {
		t.Errorf("pipeline a/b: %v", err)
	}
}

func TestNewRefusesBadTLSFiles(t *testing.T) {
	cfg := Config{Endpoints: []string{"https://127.0.0.1:1"}, TLS: TLSConfig{CAFile: t.TempDir() + "/missing-ca.pem"}}
	if _, err := New(cfg, "p1", nil); err == nil || !strings.Contains(err.Error(), "tls") {
		t.Fatalf("New with a missing CA file: %v, want a tls error", err)
	}
}
