package nats

import (
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/sluice-cdc/sluice/codec"
)

func TestConfigYAML(t *testing.T) {
	const doc = `
name: events
url: nats://a:4222,nats://b:4222
stream: CDC
subject: cdc.{source}.{db}.{table}
duplicate_window: 5m
replicas: 3
user: sluice
password: secret
tls:
  ca_file: /etc/ca.pem
connect_timeout: 2s
ack_timeout: 30s
max_pending: 1000
`
	var c Config
	if err := yaml.Unmarshal([]byte(doc), &c); err != nil {
		t.Fatal(err)
	}
	want := Config{
		Name: "events", URL: "nats://a:4222,nats://b:4222", Stream: "CDC", Subject: "cdc.{source}.{db}.{table}",
		DuplicateWindow: 5 * time.Minute, Replicas: 3, User: "sluice", Password: "secret",
		TLS: TLSConfig{CAFile: "/etc/ca.pem"}, ConnectTimeout: 2 * time.Second, AckTimeout: 30 * time.Second, MaxPending: 1000,
	}
	if c != want {
		t.Fatalf("decoded %+v\nwant    %+v", c, want)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
}

func TestConfigDefaults(t *testing.T) {
	c := Config{URL: "nats://127.0.0.1:4222"}.withDefaults()
	if c.Name != "nats" || c.Subject != DefaultSubject || c.DuplicateWindow != 2*time.Minute || c.Replicas != 1 ||
		c.ConnectTimeout != 5*time.Second || c.AckTimeout != 10*time.Second || c.MaxPending != 4096 || c.Stream != "" {
		t.Fatalf("defaults: %+v", c)
	}
	if DefaultStream("orders") != "sluice-orders" {
		t.Fatal(DefaultStream("orders"))
	}
}

func TestConfigValidate(t *testing.T) {
	ok := Config{URL: "nats://127.0.0.1:4222"}
	dbz := codec.Format{Name: codec.FormatDebezium}
	for _, tc := range []struct {
		name  string
		edit  func(*Config)
		field string // the error names it; "" = valid
	}{
		{"minimal", func(*Config) {}, ""},
		{"tls url", func(c *Config) { c.URL = "tls://nats.example.com:4222" }, ""},
		{"no url", func(c *Config) { c.URL = "" }, "url is required"},
		{"bad scheme", func(c *Config) { c.URL = "http://x:4222" }, "url"},
		{"no host", func(c *Config) { c.URL = "127.0.0.1:4222" }, "url"},
		{"one bad of two", func(c *Config) { c.URL = "nats://a:1, b" }, "url"},
		{"stream with dot", func(c *Config) { c.Stream = "a.b" }, "stream"},
		{"stream with space", func(c *Config) { c.Stream = "a b" }, "stream"},
		{"subject starts with placeholder", func(c *Config) { c.Subject = "{db}.{table}" }, "subject"},
		{"subject wildcard", func(c *Config) { c.Subject = "cdc.*.{table}" }, "subject"},
		{"subject unknown placeholder", func(c *Config) { c.Subject = "cdc.{schema}" }, "subject"},
		{"subject unclosed", func(c *Config) { c.Subject = "cdc.{db" }, "subject"},
		{"subject empty token", func(c *Config) { c.Subject = "cdc..{db}" }, "subject"},
		{"subject literal", func(c *Config) { c.Subject = "cdc.all" }, ""},
		{"negative window", func(c *Config) { c.DuplicateWindow = -time.Second }, "duplicate_window"},
		{"replicas 7", func(c *Config) { c.Replicas = 7 }, "replicas"},
		{"two auths", func(c *Config) { c.Token = "t"; c.CredsFile = "f" }, "exclusive"},
		{"password alone", func(c *Config) { c.Password = "p" }, "password"},
		{"cert without key", func(c *Config) { c.TLS.CertFile = "c.pem" }, "cert_file"},
		{"negative ack timeout", func(c *Config) { c.AckTimeout = -1 }, "ack_timeout"},
		{"negative connect timeout", func(c *Config) { c.ConnectTimeout = -1 }, "connect_timeout"},
		{"negative max pending", func(c *Config) { c.MaxPending = -1 }, "max_pending"},
		{"debezium", func(c *Config) { c.Format = dbz }, ""},
		{"debezium, schema subject", func(c *Config) { c.Format = dbz; c.SchemaChangeSubject = "sluice.ddl.{source}.{db}" }, ""},
		{"schema subject in format sluice", func(c *Config) { c.SchemaChangeSubject = "sluice.ddl" }, "schema_change_subject is for format debezium"},
		{"schema subject outside the stream", func(c *Config) { c.Format = dbz; c.SchemaChangeSubject = "ddl.{source}" }, "do not take it"},
		{"schema subject with table", func(c *Config) { c.Format = dbz; c.SchemaChangeSubject = "sluice.{table}" }, "{table}"},
		{"bad format", func(c *Config) { c.Format = codec.Format{Name: "avro"} }, "format"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := ok
			tc.edit(&c)
			err := c.Validate()
			if tc.field == "" {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.field) {
				t.Fatalf("Validate: %v, want an error naming %q", err, tc.field)
			}
		})
	}
}

func TestNewRejectsBadPipelineName(t *testing.T) {
	for _, name := range []string{"", "a:b", "a.b", "a b"} {
		if _, err := New(Config{URL: "nats://127.0.0.1:1"}, name, quietLog()); err == nil {
			t.Errorf("New with pipeline %q succeeded", name)
		}
	}
}

func TestSubjectTemplate(t *testing.T) {
	for _, tc := range []struct {
		tmpl, source, db, table  string
		subject, filter, pattern string
	}{
		{DefaultSubject, "src", "shop", "orders", "sluice.shop.orders", "sluice.>", "sluice.*.*"},
		{"cdc.{source}.{db}.{table}", "m1", "shop", "orders", "cdc.m1.shop.orders", "cdc.>", "cdc.*.*.*"},
		{"a.b.{db}_{table}.changes", "s", "d", "t", "a.b.d_t.changes", "a.b.>", "a.b.*.changes"},
		{"sluice.{db}.{table}", "s", "my.db", "a b*>", "sluice.my_db.a_b__", "sluice.>", "sluice.*.*"},
		{"sluice.{db}.{table}", "s", "shop", "", "sluice.shop._", "sluice.>", "sluice.*.*"},
		{"cdc.all", "s", "d", "t", "cdc.all", "cdc.all", "cdc.all"},
	} {
		st, err := parseSubject(tc.tmpl)
		if err != nil {
			t.Fatalf("%s: %v", tc.tmpl, err)
		}
		if got := string(st.render(nil, tc.source, tc.db, tc.table)); got != tc.subject {
			t.Errorf("%s with %s/%s/%s = %q, want %q", tc.tmpl, tc.source, tc.db, tc.table, got, tc.subject)
		}
		if st.filter != tc.filter || st.pattern != tc.pattern {
			t.Errorf("%s: filter %q pattern %q, want %q and %q", tc.tmpl, st.filter, st.pattern, tc.filter, tc.pattern)
		}
		if !subjectCovers(st.filter, st.pattern) {
			t.Errorf("%s: the created stream's subject %q does not cover %q", tc.tmpl, st.filter, st.pattern)
		}
	}
}

func TestSubjectCovers(t *testing.T) {
	for _, tc := range []struct {
		filter, subject string
		want            bool
	}{
		{">", "sluice.*.*", true},
		{"sluice.>", "sluice.*.*", true},
		{"sluice.>", "sluice.>", true},
		{"sluice.*.*", "sluice.*.*", true},
		{"sluice.*.>", "sluice.*.*", true},
		{"sluice.*", "sluice.*.*", false},
		{"sluice.shop.*", "sluice.*.*", false},
		{"sluice.*.*", "sluice.>", false},
		{"other.>", "sluice.*.*", false},
		{"sluice.>", "sluice", false},
		{"cdc.all", "cdc.all", true},
	} {
		if got := subjectCovers(tc.filter, tc.subject); got != tc.want {
			t.Errorf("subjectCovers(%q, %q) = %v, want %v", tc.filter, tc.subject, got, tc.want)
		}
	}
}

// TestSchemaSubjectDefault: in format debezium schema changes go to the
// subject's literal prefix followed by the source ("sluice.{source}"), or
// to the subject itself when it has no placeholders.
func TestSchemaSubjectDefault(t *testing.T) {
	for _, tc := range []struct{ subject, source, db, want string }{
		{"", "db1", "app", "sluice.db1"},
		{"cdc.x.{db}.{table}", "db1", "app", "cdc.x.db1"},
		{"cdc.all", "db1", "app", "cdc.all"},
	} {
		c := Config{URL: "nats://h:1", Subject: tc.subject, Format: codec.Format{Name: codec.FormatDebezium}}
		st, err := c.schemaSubject()
		if err != nil {
			t.Fatalf("%q: %v", tc.subject, err)
		}
		if got := string(st.render(nil, tc.source, tc.db, "")); got != tc.want {
			t.Errorf("subject %q: schema-change subject %q, want %q", tc.subject, got, tc.want)
		}
	}
}
