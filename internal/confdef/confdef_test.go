package confdef

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

// size decodes "1KiB" as the config's byte sizes do, to show that
// defaults are decoded through a type's own UnmarshalYAML.
type size int64

func (s *size) UnmarshalYAML(n *yaml.Node) error {
	v := strings.TrimSuffix(n.Value, "KiB")
	var k int64
	if err := yaml.Unmarshal([]byte(v), &k); err != nil {
		return err
	}
	if v != n.Value {
		k <<= 10
	}
	*s = size(k)
	return nil
}

type inner struct {
	Mode  string `yaml:"mode" default:"stream" enum:"stream,materialize"`
	Count int    `yaml:"count" default:"1000" min:"1"`
}

type shared struct {
	CAFile string `yaml:"ca_file"`
}

type block struct {
	Name     string        `yaml:"name" computed:"the pipeline's name"`
	Wait     time.Duration `yaml:"wait" default:"30s" min:"0"`
	Level    string        `yaml:"level" default:"info" enum:"debug,info,warn,error"`
	Stmt     string        `yaml:"stmt" enum:"stop,skip" want:"stop (the default) or skip"`
	Topic    string        `yaml:"topic" default:"{db}.{table}"`
	Create   *bool         `yaml:"create" default:"true"`
	Bytes    size          `yaml:"bytes" default:"1KiB"`
	Ratio    float64       `yaml:"ratio" min:"0"`
	Inner    inner         `yaml:"inner"`
	Opt      *inner        `yaml:"opt"`
	List     []inner       `yaml:"list"`
	Tags     []string      `yaml:"tags"`
	Raw      yaml.Node     `yaml:"raw"`
	shared   `yaml:",inline"`
	Internal string `yaml:"-" default:"never"`
}

func TestApplyDefaults(t *testing.T) {
	var b block
	b.List = []inner{{}, {Mode: "materialize", Count: 5}}
	ApplyDefaults(&b)
	if b.Wait != 30*time.Second || b.Level != "info" || b.Topic != "{db}.{table}" || b.Bytes != 1024 {
		t.Errorf("scalars: wait %s, level %q, topic %q, bytes %d", b.Wait, b.Level, b.Topic, b.Bytes)
	}
	if b.Create == nil || !*b.Create {
		t.Errorf("create = %v, want a pointer to true", b.Create)
	}
	if b.Name != "" || b.Stmt != "" || b.Internal != "" {
		t.Errorf("fields without a default tag (computed, yaml:\"-\") were set: %+v", b)
	}
	if b.Inner != (inner{Mode: "stream", Count: 1000}) {
		t.Errorf("nested block = %+v", b.Inner)
	}
	if b.Opt != nil {
		t.Errorf("a nil block was allocated: %+v", b.Opt)
	}
	if b.List[0] != (inner{Mode: "stream", Count: 1000}) || b.List[1] != (inner{Mode: "materialize", Count: 5}) {
		t.Errorf("list = %+v", b.List)
	}
	// A set value is kept, false included behind a pointer.
	f := false
	b = block{Wait: time.Second, Level: "warn", Create: &f, Opt: &inner{}}
	ApplyDefaults(&b)
	if b.Wait != time.Second || b.Level != "warn" || *b.Create || b.Opt.Mode != "stream" {
		t.Errorf("set values changed: %+v, opt %+v", b, b.Opt)
	}
}

func TestApplyDefaultsBadTag(t *testing.T) {
	type bad struct {
		D time.Duration `yaml:"d" default:"soon"`
	}
	defer func() {
		if r := recover(); r == nil || !strings.Contains(r.(string), `default "soon"`) {
			t.Errorf("recover() = %v, want a panic naming the default", r)
		}
	}()
	ApplyDefaults(&bad{})
}

func TestCheck(t *testing.T) {
	ok := block{Level: "debug", Stmt: "skip", Wait: 0, Inner: inner{Count: 1}}
	if v := Check(&ok); v != nil {
		t.Fatalf("valid block: %v", v)
	}
	for _, c := range []struct {
		name   string
		change func(*block)
		key    string
		msg    string
	}{
		{"enum", func(b *block) { b.Level = "loud" }, "level", `"loud": want debug, info, warn or error`},
		{"enum want", func(b *block) { b.Stmt = "halt" }, "stmt", `"halt": want stop (the default) or skip`},
		{"negative duration", func(b *block) { b.Wait = -time.Second }, "wait", "must not be negative"},
		{"negative float", func(b *block) { b.Ratio = -0.5 }, "ratio", "must not be negative"},
		{"min above 0", func(b *block) { b.Inner.Count = 0 }, "inner.count", "must be at least 1"},
		{"nested enum", func(b *block) { b.Inner.Mode = "hash" }, "inner.mode", `"hash": want stream or materialize`},
		{"pointer block", func(b *block) { b.Opt = &inner{Mode: "x", Count: 1} }, "opt.mode", `"x": want stream or materialize`},
		{"list", func(b *block) { b.List = []inner{{Count: 1}, {Count: -1}} }, "list[1].count", "must be at least 1"},
		{"first in field order", func(b *block) { b.Level, b.Inner.Mode = "x", "y" }, "level", `"x": want debug, info, warn or error`},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := ok
			c.change(&b)
			v := Check(&b)
			if v == nil || v.Key != c.key || v.Msg != c.msg {
				t.Fatalf("Check = %+v, want %s: %s", v, c.key, c.msg)
			}
			if v.Error() != c.key+": "+c.msg {
				t.Errorf("Error() = %q", v.Error())
			}
		})
	}
	b := ok
	b.Level = "loud"
	if v := Check(&b); v.Value != "loud" || v.Want != "debug, info, warn or error" || !reflect.DeepEqual(v.Allowed, []string{"debug", "info", "warn", "error"}) {
		t.Errorf("violation = %+v, want the value and the allowed values", v)
	}
	b = ok
	b.Stmt = "halt"
	if v := Check(&b); v.Want != "stop (the default) or skip" {
		t.Errorf("want tag: Want = %q", v.Want)
	}
	// With keys, only those are checked, in the order given.
	b = ok
	b.Level, b.Wait = "loud", -time.Second
	if v := Check(&b, "wait", "level"); v == nil || v.Key != "wait" {
		t.Errorf("Check(wait, level) = %v, want the wait first", v)
	}
	if v := Check(&b, "stmt"); v != nil {
		t.Errorf("Check(stmt) = %v, want nil (the others are not asked for)", v)
	}
}

func TestFields(t *testing.T) {
	var keys []string
	for _, f := range Fields(reflect.TypeOf(block{})) {
		keys = append(keys, f.Key)
		if f.Key == "wait" && f.Type != reflect.TypeOf(time.Duration(0)) {
			t.Errorf("wait: type %s", f.Type)
		}
	}
	want := []string{"name", "wait", "level", "stmt", "topic", "create", "bytes", "ratio", "inner", "opt", "list", "tags", "raw", "ca_file"}
	if !reflect.DeepEqual(keys, want) {
		t.Errorf("Fields = %v, want %v (inlined keys in, yaml:\"-\" out)", keys, want)
	}
}

func TestList(t *testing.T) {
	for in, want := range map[string]string{"": "", "a": "a", "a,b": "a or b", "a,b,c": "a, b or c"} {
		var vals []string
		if in != "" {
			vals = strings.Split(in, ",")
		}
		if got := List(vals); got != want {
			t.Errorf("List(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestDescribe(t *testing.T) {
	keys := Describe(reflect.TypeOf(&block{}))
	var paths []string
	byPath := map[string]Key{}
	for _, k := range keys {
		paths = append(paths, k.Path)
		byPath[k.Path] = k
	}
	want := []string{"name", "wait", "level", "stmt", "topic", "create", "bytes", "ratio",
		"inner", "inner.mode", "inner.count", "opt", "opt.mode", "opt.count",
		"list", "list.mode", "list.count", "tags", "raw", "ca_file"}
	if !reflect.DeepEqual(paths, want) {
		t.Fatalf("paths\n got %v\nwant %v", paths, want)
	}
	if k := byPath["wait"]; k.Default != "30s" || k.Computed || k.Min != "0" || k.Type != "time.Duration" {
		t.Errorf("wait = %+v", k)
	}
	if k := byPath["name"]; k.Default != "the pipeline's name" || !k.Computed {
		t.Errorf("name = %+v", k)
	}
	if k := byPath["level"]; !reflect.DeepEqual(k.Enum, []string{"debug", "info", "warn", "error"}) {
		t.Errorf("level = %+v", k)
	}
	if !byPath["inner"].Block || !byPath["list"].Block || byPath["tags"].Block || byPath["raw"].Block {
		t.Errorf("blocks: inner %v, list %v, tags %v, raw %v", byPath["inner"].Block, byPath["list"].Block, byPath["tags"].Block, byPath["raw"].Block)
	}
	if got := Enum(reflect.TypeOf(block{}), "list.mode"); !reflect.DeepEqual(got, []string{"stream", "materialize"}) {
		t.Errorf("Enum(list.mode) = %v", got)
	}
}
