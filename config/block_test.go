package config

import (
	"fmt"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/sluice-cdc/sluice/coord"
	"github.com/sluice-cdc/sluice/sink/kafka"
)

// A Block keeps a sink's or the coordinator's block as written: its line,
// whether the key is there (an empty value counts), and what DecodeSink
// then makes of it, with the file's lines and key paths in its messages.
func TestBlocks(t *testing.T) {
	src := `pipeline: p
source: {url: mysql://u:p@h:1}
sinks:
  - name: a
    type: kafka
    kafka: &k
      brokers: [h:9092]
      topc: t
  - name: b
    type: kafka
    kafka:
  - name: c
    type: kafka
    kafka: h:9092
  - name: d
    type: kafka
    kafka: *k
  - name: e
    type: stdout
coordinator:
  type: etcd
  etcd: {endpoints: [h:2379]}
`
	c, err := Parse("x.yaml", []byte(src), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []struct {
		set  bool
		line int
		err  string // of DecodeSink into kafka.Config; "" for none
	}{
		{true, 6, `x.yaml:8: sinks[0].kafka.topc: unknown key "topc" (did you mean "topic"?)`},
		{true, 11, ""}, // empty: a zero kafka.Config, refused by kafka.New
		{true, 14, "x.yaml:14: sinks[2].kafka: want a block of keys here"},
		{true, 17, "x.yaml:17: sinks[3].kafka: want a block of keys here"}, // an alias is not followed
		{false, 0, "x.yaml: sinks[4].kafka: want a block of keys here"},    // absent: Parse refuses a kafka sink without one
	} {
		b := &c.Sinks[i].Kafka
		if b.IsSet() != want.set || b.Line() != want.line {
			t.Errorf("sinks[%d].kafka: IsSet %v, Line %d; want %v, %d", i, b.IsSet(), b.Line(), want.set, want.line)
		}
		var k kafka.Config
		err := DecodeSink("x.yaml", b, fmt.Sprintf("sinks[%d].kafka", i), &k)
		if got := errString(err); got != want.err {
			t.Errorf("sinks[%d].kafka: DecodeSink: %q, want %q", i, got, want.err)
		}
	}
	var co coord.Config
	if err := DecodeSink("x.yaml", &c.Coordinator.Etcd, "coordinator.etcd", &co); err != nil || c.Coordinator.Etcd.Line() != 22 || len(co.Endpoints) != 1 || co.Endpoints[0] != "h:2379" {
		t.Errorf("coordinator.etcd: %+v (line %d), %v", co, c.Coordinator.Etcd.Line(), err)
	}

	// Without a block the sink is refused by Parse, at the sink's line.
	_, err = Parse("x.yaml", []byte("pipeline: p\nsource: {url: mysql://u:p@h:1}\nsinks:\n  - type: kafka\n"), env(nil))
	if want := "x.yaml:4: sinks[0].kafka: a kafka sink needs a kafka: block"; err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("no kafka block: %v, want %q", err, want)
	}

	// Decoded by the YAML decoder itself, a Block keeps its value too.
	var s Sink
	if err := yaml.Unmarshal([]byte("type: kafka\nkafka:\n  brokers: [h:9092]\n"), &s); err != nil || !s.Kafka.IsSet() || s.Kafka.Line() != 3 {
		t.Fatalf("decoded sink: kafka set %v at line %d, %v", s.Kafka.IsSet(), s.Kafka.Line(), err)
	}
	var k kafka.Config
	if err := DecodeSink("x.yaml", &s.Kafka, "kafka", &k); err != nil || len(k.Brokers) != 1 {
		t.Errorf("decoded sink's block: %+v, %v", k, err)
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
