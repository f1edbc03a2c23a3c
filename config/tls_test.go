package config

import (
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/sluice-cdc/sluice/sink/kafka"
	"github.com/sluice-cdc/sluice/sink/redis"
	"github.com/sluice-cdc/sluice/tlsconfig"
)

// Every client's tls block has the same keys, checked the same way; a
// Redis sink's tls also takes true (its older form) and its ca_file.
func TestTLSBlocks(t *testing.T) {
	decode := func(src string, v any) error {
		var doc yaml.Node
		if err := yaml.Unmarshal([]byte(src), &doc); err != nil {
			t.Fatal(err)
		}
		return DecodeSink("x.yaml", &Block{node: *doc.Content[0]}, "sinks[0].redis", v)
	}
	full := tlsconfig.Config{CAFile: "/ca.pem", CertFile: "/c.pem", KeyFile: "/k.pem", InsecureSkipVerify: true}
	block := "tls: {ca_file: /ca.pem, cert_file: /c.pem, key_file: /k.pem, insecure_skip_verify: true}"
	var r redis.Config
	if err := decode("addr: h:1\n"+block, &r); err != nil || !r.TLS.On || r.TLS.Config != full {
		t.Fatalf("redis tls block: %+v, %v", r.TLS, err)
	}
	var k kafka.Config
	if err := decode("brokers: [h:1]\n"+block, &k); err != nil || k.TLS == nil || *k.TLS != full {
		t.Fatalf("kafka tls block: %+v, %v", k.TLS, err)
	}
	r = redis.Config{}
	if err := decode("addr: h:1\ntls: true\nca_file: /old.pem", &r); err != nil || !r.TLS.On || r.TLS.Config != (tlsconfig.Config{}) || r.CAFile != "/old.pem" {
		t.Fatalf("redis tls: true and ca_file: %+v %q, %v", r.TLS, r.CAFile, err)
	}
	for _, c := range []struct{ src, want string }{
		{"addr: h:1\ntls: {ca_fil: /ca.pem}", `x.yaml:2: sinks[0].redis.tls.ca_fil: unknown key "ca_fil" (did you mean "ca_file"?)`},
		{"addr: h:1\ntls: maybe", `tls: "maybe" is not true, false or a block`},
		{"addr: h:1\ntls: [a]", "sinks[0].redis.tls"},
	} {
		r = redis.Config{}
		if err := decode(c.src, &r); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want an error containing %q", c.src, err, c.want)
		}
	}
	r = redis.Config{Addr: "h:1", CAFile: "/a.pem", TLS: tlsconfig.Toggle{On: true, Config: tlsconfig.Config{CAFile: "/b.pem"}}}
	if err := r.Validate(); err == nil || !strings.Contains(err.Error(), "ca_file and tls.ca_file are both set") {
		t.Errorf("redis with ca_file and tls.ca_file: %v", err)
	}
	r = redis.Config{Addr: "h:1", TLS: tlsconfig.Toggle{On: true, Config: tlsconfig.Config{CertFile: "/c.pem"}}}
	if err := r.Validate(); err == nil || !strings.Contains(err.Error(), "cert_file and key_file go together") {
		t.Errorf("redis with a certificate and no key: %v", err)
	}
}
