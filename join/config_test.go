package join

import (
	"os"
	"reflect"
	"strings"
	"testing"
	"time"
)

func validConfig() Config {
	return Config{
		Name:     "orders_payments",
		Left:     SideConfig{Table: "shop.orders", Key: []string{"id"}, Time: "created_at"},
		Right:    SideConfig{Table: "shop.payments", Key: []string{"order_id"}, Time: "commit"},
		After:    time.Hour,
		Sink:     "joined",
		StateDir: "/var/lib/sluice/joins/orders_payments",
	}
}

// TestConfigValidate: each mistake is named by its YAML key, with what to
// do about it.
func TestConfigValidate(t *testing.T) {
	ok := validConfig()
	if err := ok.Validate(); err != nil {
		t.Fatalf("valid config refused: %v", err)
	}
	for _, c := range []struct {
		change func(*Config)
		want   string
	}{
		{func(c *Config) { c.Name = "" }, "joins.name: is required"},
		{func(c *Config) { c.Name = "a.b" }, `joins[a.b].name: "a.b" may hold only letters`},
		{func(c *Config) { c.Left.Table = "" }, "joins[orders_payments].left.table: is required"},
		{func(c *Config) { c.Left.Table = "orders" }, "left.table: binlog: table pattern \"orders\" must be db.table"},
		{func(c *Config) { c.Right.Table = "shop.a,shop.b" }, "right.table: \"shop.a,shop.b\" names several patterns"},
		{func(c *Config) { c.Right.Key = nil }, "right.key: is required"},
		{func(c *Config) { c.Right.Key = []string{"a", " "} }, "right.key: column 2 is empty"},
		{func(c *Config) { c.Right.Key = []string{"a", "b"} }, "right.key: has 2 columns but left.key has 1: list the same number"},
		{func(c *Config) { c.Left.Time = "" }, `left.time: is required: a DATETIME, TIMESTAMP, DATE or integer (epoch milliseconds) column, or "commit"`},
		{func(c *Config) { c.Before, c.After = -2*time.Hour, time.Hour }, "before: before -2h0m0s and after 1h0m0s leave no time at all"},
		{func(c *Config) { c.Lateness = -time.Second }, "lateness: -1s is negative"},
		{func(c *Config) { c.Type = "outer" }, `type: "outer" is not a join type: use inner, left, right or full`},
		{func(c *Config) { c.Sink = "" }, "sink: is required"},
		{func(c *Config) { c.Late = "joined" }, `late: names the join's own sink "joined"`},
		{func(c *Config) { c.Events.Updates = "yes" }, `events.updates: "yes": use ignore`},
		{func(c *Config) { c.Events.Deletes = "delete" }, `events.deletes: "delete": use ignore, or retract`},
		{func(c *Config) { c.Events.Snapshot = "no" }, `events.snapshot: "no": use join`},
		{func(c *Config) { c.StateDir = "" }, "state_dir: is required: a directory on local disk"},
	} {
		cfg := validConfig()
		c.change(&cfg)
		err := cfg.Validate()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("error %v, want one containing %q", err, c.want)
		}
	}
	// A side names its table as a table pattern: names beyond ASCII, and
	// a name with a ',' or a '.' in backticks, are one pattern.
	for _, table := range []string{"名前 db.Ünï cöde-tbl", "`my.db`.`a,b`", "shop.`x``y`"} {
		cfg := validConfig()
		cfg.Left.Table, cfg.Left.Key = table, []string{"ça"}
		if err := cfg.Validate(); err != nil {
			t.Errorf("left.table %q refused: %v", table, err)
		}
	}
	// Negative bounds are fine while the interval is not empty.
	cfg := validConfig()
	cfg.Before, cfg.After = -5*time.Minute, 15*time.Minute
	if err := cfg.Validate(); err != nil {
		t.Errorf("before -5m, after 15m: %v", err)
	}
	// NewSink checks what Validate cannot: the sinks themselves.
	if _, err := NewSink(validConfig(), SinkOptions{}); err == nil || !strings.Contains(err.Error(), "no sink for the joined records") {
		t.Errorf("NewSink without Out: %v", err)
	}
}

// TestConfigDocumented: every YAML key of Config is in the key table of
// docs/JOIN.md, which the config layer of sluice run follows.
func TestConfigDocumented(t *testing.T) {
	doc, err := os.ReadFile("../docs/JOIN.md")
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	var walk func(prefix string, ty reflect.Type)
	walk = func(prefix string, ty reflect.Type) {
		for i := range ty.NumField() {
			f := ty.Field(i)
			name := strings.Split(f.Tag.Get("yaml"), ",")[0]
			if name == "" || name == "-" {
				t.Errorf("field %s has no yaml name", f.Name)
				continue
			}
			if f.Type.Kind() == reflect.Struct && f.Type != reflect.TypeOf(time.Duration(0)) {
				walk(prefix+name+".", f.Type)
				continue
			}
			keys = append(keys, prefix+name)
		}
	}
	walk("", reflect.TypeOf(Config{}))
	for _, k := range keys {
		// left.key and right.key share a row: "`left.key`, `right.key`".
		if !strings.Contains(string(doc), "`"+k+"`") {
			t.Errorf("key %s is not documented in docs/JOIN.md", k)
		}
	}
	if len(keys) < 15 {
		t.Fatalf("found only %d keys: %v", len(keys), keys)
	}
}
