package config

import (
	"strings"
	"testing"

	"github.com/sluice-cdc/sluice/codec"
)

// A sink's format: the default, the name shorthand, the block with
// Debezium's option names, and errors that name the line and the key.
func TestSinkFormat(t *testing.T) {
	base := "pipeline: p\nsource: {url: mysql://u:p@h:1}\nsinks:\n  - type: stdout\n"
	c, err := Parse("x.yaml", []byte(base), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if c.Sinks[0].Format.Name != codec.FormatSluice {
		t.Errorf("default format = %+v, want sluice", c.Sinks[0].Format)
	}
	for _, src := range []string{"    format: sluice\n", "    format: {name: sluice}\n", "    format:\n      name: sluice\n"} {
		c, err := Parse("x.yaml", []byte(base+src), env(nil))
		if err != nil {
			t.Fatalf("%q: %v", src, err)
		}
		if c.Sinks[0].Format.Codec() != (codec.Format{Name: codec.FormatSluice}) {
			t.Errorf("%q: format = %+v", src, c.Sinks[0].Format)
		}
	}
	for _, c := range []struct{ src, want string }{
		{"    format: xml\n", `x.yaml:5: sinks[0].format: format "xml": want sluice or debezium`},
		{"    format: {name: sluice, schemas: true}\n", "x.yaml:5: sinks[0].format: format sluice has no options"},
		{"    format: {name: debezium, decimal.handling: string}\n", `x.yaml:5: sinks[0].format.decimal.handling: unknown key "decimal.handling" (known here: name, schemas, decimal.handling.mode,`},
		{"    format: [debezium]\n", "x.yaml:5: sinks[0].format: want a format's name (sluice or debezium) or a block of its keys"},
	} {
		_, err := Parse("x.yaml", []byte(base+c.src), env(nil))
		if err == nil || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("%q: err = %v, want %s...", c.src, err, c.want)
		}
	}
}

// format: debezium, as a name and as a block with Debezium's options.
func TestSinkFormatDebezium(t *testing.T) {
	if err := (codec.Format{Name: codec.FormatDebezium}).Validate(); err != nil {
		t.Skipf("codec does not take format debezium yet: %v", err)
	}
	base := "pipeline: p\nsource: {url: mysql://u:p@h:1}\nsinks:\n"
	c, err := Parse("x.yaml", []byte(base+`  - {type: file, file: {path: a.jsonl}, format: debezium}
  - name: k
    type: kafka
    kafka: {brokers: [b:1]}
    format:
      name: debezium
      schemas: true
      decimal.handling.mode: string
      time.precision.mode: connect
      bigint.unsigned.handling.mode: precise
      binary.handling.mode: base64
`), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if c.Sinks[0].Format.Codec() != (codec.Format{Name: codec.FormatDebezium}) {
		t.Errorf("shorthand = %+v", c.Sinks[0].Format)
	}
	want := codec.Format{Name: codec.FormatDebezium, Schemas: true, DecimalHandling: "string", TimePrecision: "connect", BigintUnsigned: "precise", BinaryHandling: "base64"}
	if c.Sinks[1].Format.Codec() != want {
		t.Errorf("block = %+v, want %+v", c.Sinks[1].Format, want)
	}
	// A NATS sink and a Redis sink in mode stream take format debezium.
	for _, src := range []string{
		"  - {type: nats, nats: {url: x}, format: debezium}\n",
		"  - {type: redis, redis: {addr: x}, format: debezium}\n",
		"  - {type: redis, redis: {addr: x, mode: stream}, format: {name: debezium, schemas: true}}\n",
	} {
		c, err := Parse("x.yaml", []byte(base+src), env(nil))
		if err != nil {
			t.Errorf("%q: %v", src, err)
		} else if !c.Sinks[0].Format.Codec().IsDebezium() {
			t.Errorf("%q: format %+v, want debezium", src, c.Sinks[0].Format)
		}
	}
	for _, c := range []struct{ src, want string }{
		{"  - {type: redis, redis: {addr: x, mode: materialize}, format: debezium}\n", "x.yaml:4: sinks[0].format: format debezium is for a redis sink's mode stream"},
		{"  - {type: redis, redis: {addr: x, mode: materialize}, format: {name: debezium, schemas: true}}\n", "x.yaml:4: sinks[0].format: format debezium is for a redis sink's mode stream"},
		{"  - {type: file, file: {path: a.jsonl}, format: {name: debezium, decimal.handling.mode: exact}}\n", "x.yaml:4: sinks[0].format: "},
	} {
		_, err := Parse("x.yaml", []byte(base+c.src), env(nil))
		if err == nil || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("%q: err = %v, want %s...", c.src, err, c.want)
		}
	}
}
