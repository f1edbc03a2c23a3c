package kafka

import (
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

func TestConfigYAML(t *testing.T) {
	var c Config
	err := yaml.Unmarshal([]byte(`
name: events
brokers: [k1:9092, k2:9092]
topic: cdc.{source}.{db}.{table}
transactional_id: my-txn
client_id: me
create_topics: false
partitions: 6
replication_factor: 3
compression: zstd
max_record_bytes: 2000000
request_timeout: 45s
tls: {ca_file: ca.pem, cert_file: c.pem, key_file: k.pem, insecure_skip_verify: true}
sasl: {mechanism: SCRAM-SHA-512, user: u, password: p}
`), &c)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if c.Name != "events" || len(c.Brokers) != 2 || c.Topic != "cdc.{source}.{db}.{table}" || c.TransactionalID != "my-txn" || c.ClientID != "me" ||
		c.CreateTopics == nil || *c.CreateTopics || c.Partitions != 6 || c.ReplicationFactor != 3 || c.Compression != "zstd" ||
		c.MaxRecordBytes != 2000000 || c.RequestTimeout != 45*time.Second ||
		c.TLS == nil || c.TLS.CAFile != "ca.pem" || !c.TLS.InsecureSkipVerify || c.SASL == nil || c.SASL.User != "u" {
		t.Fatalf("decoded %+v", c)
	}

	d := Config{Brokers: []string{"k:9092"}}.withDefaults()
	if d.Name != "kafka" || d.Topic != "{db}.{table}" || !*d.CreateTopics || d.Compression != "lz4" || d.MaxRecordBytes != 1000012 ||
		d.RequestTimeout != 30*time.Second || d.ClientID != "sluice" || d.Partitions != 0 || d.ReplicationFactor != 0 {
		t.Fatalf("defaults %+v", d)
	}
	if id := DefaultTransactionalID("shop", "kafka"); id != "sluice-shop" {
		t.Fatalf("default transactional id %q", id)
	}
	if id := DefaultTransactionalID("shop", "audit"); id != "sluice-shop-audit" {
		t.Fatalf("transactional id of a second sink %q", id)
	}
}

func TestConfigValidate(t *testing.T) {
	ok := []string{"k:9092"}
	cases := []struct {
		name string
		cfg  Config
		want string // "" = valid
	}{
		{"minimal", Config{Brokers: ok}, ""},
		{"no brokers", Config{}, "brokers is required"},
		{"broker without port", Config{Brokers: []string{"localhost"}}, `brokers[0] "localhost": must be host:port`},
		{"bad port", Config{Brokers: []string{"k:0"}}, "port \"0\" must be a number"},
		{"unknown placeholder", Config{Brokers: ok, Topic: "{db}.{tabel}"}, "topic \"{db}.{tabel}\": unknown placeholder {tabel}"},
		{"bad character", Config{Brokers: ok, Topic: "cdc/{table}"}, `contains '/'`},
		{"unclosed brace", Config{Brokers: ok, Topic: "cdc.{table"}, "'{' without '}'"},
		{"stray brace", Config{Brokers: ok, Topic: "cdc}.{table}"}, "'}' without '{'"},
		{"dot topic", Config{Brokers: ok, Topic: ".."}, "not topic names"},
		{"too long", Config{Brokers: ok, Topic: strings.Repeat("a", 250)}, "longer than 249"},
		{"fixed topic", Config{Brokers: ok, Topic: "all-changes"}, ""},
		{"negative partitions", Config{Brokers: ok, Partitions: -1}, "partitions -1"},
		{"negative replication", Config{Brokers: ok, ReplicationFactor: -2}, "replication_factor -2"},
		{"compression", Config{Brokers: ok, Compression: "brotli"}, `compression "brotli": must be one of none, gzip, snappy, lz4, zstd`},
		{"max record bytes", Config{Brokers: ok, MaxRecordBytes: 10}, "max_record_bytes 10"},
		{"negative timeout", Config{Brokers: ok, RequestTimeout: -time.Second}, "request_timeout -1s"},
		{"tiny timeout", Config{Brokers: ok, RequestTimeout: time.Millisecond}, "request_timeout 1ms: too short"},
		{"cert without key", Config{Brokers: ok, TLS: &TLSConfig{CertFile: "c.pem"}}, "cert_file and key_file go together"},
		{"sasl mechanism", Config{Brokers: ok, SASL: &SASLConfig{Mechanism: "GSSAPI", User: "u", Password: "p"}}, `sasl.mechanism "GSSAPI"`},
		{"sasl lower case", Config{Brokers: ok, SASL: &SASLConfig{Mechanism: "plain", User: "u", Password: "p"}}, ""},
		{"sasl user", Config{Brokers: ok, SASL: &SASLConfig{Mechanism: "PLAIN", Password: "p"}}, "sasl.user is required"},
		{"sasl password", Config{Brokers: ok, SASL: &SASLConfig{Mechanism: "PLAIN", User: "u"}}, "sasl.password is required"},
		{"txn id spaces", Config{Brokers: ok, TransactionalID: " x"}, "transactional_id"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.Validate()
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("Validate: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("Validate: %v, want %q", err, tc.want)
			}
		})
	}
	if _, err := New(Config{}, "p", nil); err == nil || !strings.Contains(err.Error(), "sink kafka: brokers is required") {
		t.Fatalf("New without brokers: %v", err)
	}
	if _, err := New(Config{Brokers: ok}, "", nil); err == nil {
		t.Fatal("New without a pipeline name succeeded")
	}
	if _, err := New(Config{Brokers: ok, TLS: &TLSConfig{CAFile: "/nonexistent/ca.pem"}}, "p", nil); err == nil || !strings.Contains(err.Error(), "tls.ca_file") {
		t.Fatalf("New with a missing CA file: %v", err)
	}
}

func TestTopicTemplate(t *testing.T) {
	cases := []struct {
		tmpl, source, db, table string
		want                    string
	}{
		{"{db}.{table}", "src", "shop", "orders", "shop.orders"},
		{"{db}.{table}", "src", "shop", "order.lines", "shop.order_lines"},
		{"{db}.{table}", "src", "shop", "", "shop._"},
		{"{db}.{table}", "src", "café", "t t", "caf_u00e9.t_t"},
		{"{db}.{table}", "src", "oh", "Ünï cöde-tbl", "oh._u00dcn_u00ef_c_u00f6de-tbl"},
		{"{db}.{table}", "src", "订单", "a`b", "_u8ba2_u5355.a_b"},
		{"{db}.{table}", "src", "d", "select", "d.select"},
		{"{db}.{table}", "src", "d", "\U0001F600", "d._U0001f600"},
		{"cdc-{source}.{db}.{table}", "my src", "d", "t", "cdc-my_src.d.t"},
		{"all", "src", "shop", "orders", "all"},
		{"x{table}y", "s", "d", "T-1_2", "xT-1_2y"},
	}
	for _, tc := range cases {
		tt, err := parseTopic(tc.tmpl)
		if err != nil {
			t.Fatalf("parseTopic(%q): %v", tc.tmpl, err)
		}
		got, err := tt.render(tc.source, tc.db, tc.table)
		if err != nil || got != tc.want {
			t.Errorf("%q.render(%q, %q, %q) = %q, %v; want %q", tc.tmpl, tc.source, tc.db, tc.table, got, err, tc.want)
		}
		if !tt.matches(got) {
			t.Errorf("%q does not match its own topic %q", tc.tmpl, got)
		}
	}
	tt, _ := parseTopic("{db}.{table}")
	for topic, want := range map[string]bool{
		"shop.orders": true, "a.b": true, "a_b.c-d": true,
		"shop": false, "a.b.c": false, ".b": false, "a.": false, "__consumer_offsets": false,
	} {
		if got := tt.matches(topic); got != want {
			t.Errorf("{db}.{table} matches %q: %v, want %v", topic, got, want)
		}
	}
	fixed, _ := parseTopic("all")
	if f, ok := fixed.fixed(); !ok || f != "all" || fixed.matches("allx") {
		t.Errorf("fixed topic: %q %v", f, ok)
	}
	long, _ := parseTopic("{db}.{table}")
	for _, name := range []string{strings.Repeat("t", 250), strings.Repeat("ü", 64), strings.Repeat("ü", 63) + "x"} {
		got, err := long.render("s", "d", name)
		if err != nil || len(got) != MaxTopicLen || !long.matches(got) {
			t.Errorf("render of a long topic %q: %q (%d characters), %v", name, got, len(got), err)
		}
		if again, _ := long.render("s", "d", name); again != got {
			t.Errorf("render of %q is not deterministic: %q then %q", name, got, again)
		}
	}
	a, _ := long.render("s", "d", strings.Repeat("ü", 64))
	b, _ := long.render("s", "d", strings.Repeat("ü", 63)+"x")
	if a == b {
		t.Errorf("two long names share the topic %q", a)
	}
}

func TestOffsets(t *testing.T) {
	o := offsets{{"b", 10}: 7, {"a", 2}: 5, {"b", 2}: 0, {"a", 0}: 123}
	s := o.String()
	if s != `{"a":{"0":123,"2":5},"b":{"2":0,"10":7}}` {
		t.Fatalf("String() = %s", s)
	}
	back, err := parseOffsets(s)
	if err != nil || len(back) != len(o) {
		t.Fatalf("parseOffsets(%s) = %v, %v", s, back, err)
	}
	for tp, n := range o {
		if back[tp] != n {
			t.Fatalf("round trip of %v: %d, want %d", tp, back[tp], n)
		}
	}
	if (offsets{}).String() != "{}" {
		t.Fatal("empty offsets")
	}
	if o, err := parseOffsets(""); err != nil || len(o) != 0 {
		t.Fatalf(`parseOffsets("") = %v, %v`, o, err)
	}
	for _, bad := range []string{"12", "null", `{"a":{"x":1}}`, `{"a":{"-1":1}}`, `{"a":{"0":-1}}`, `{"":{"0":1}}`, `{"a":{"0":1}} x`, `{"a":[1]}`} {
		if _, err := parseOffsets(bad); err == nil {
			t.Errorf("parseOffsets(%s) succeeded", bad)
		}
	}
}

// FuzzParseOffsets: any string that parses prints back to a string that
// parses to the same offsets.
func FuzzParseOffsets(f *testing.F) {
	for _, s := range []string{"", "{}", `{"a":{"0":1}}`, `{"shop.orders":{"0":123,"1":97}}`, `{"a":{"2147483647":9223372036854775807}}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		o, err := parseOffsets(s)
		if err != nil {
			return
		}
		back, err := parseOffsets(o.String())
		if err != nil {
			t.Fatalf("%q: String() %s does not parse: %v", s, o.String(), err)
		}
		if len(back) != len(o) {
			t.Fatalf("%q: round trip lost partitions", s)
		}
		for tp, n := range o {
			if back[tp] != n {
				t.Fatalf("%q: %v: %d, want %d", s, tp, back[tp], n)
			}
		}
	})
}
