package config

import (
	"os"
	"reflect"
	"strings"
	"testing"
	"time"
)

func env(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func TestParseFull(t *testing.T) {
	src := `
pipeline: shop
source:
  url: mysql://repl:${PASS}@127.0.0.1:${PORT:-3306}
  tables: [shop.*]
  server_id: ${SID}
  snapshot:
    mode: when_needed
    parallel: 4
    where:
      shop.items: id > 10
sinks:
  - name: out
    type: file
    file: {path: out/changes.jsonl, max_bytes: 64MiB}
  - type: kafka
    kafka:
      brokers: [127.0.0.1:9092]
checkpoint:
  path: /var/lib/sluice/shop.json
  interval: 250ms
admin: {addr: 127.0.0.1:7070}
buffer: {batch_bytes: 512KiB, max_bytes: 32MiB}
`
	c, err := Parse("x.yaml", []byte(src), env(map[string]string{"PASS": "s3cr:t", "SID": "4242"}))
	if err != nil {
		t.Fatal(err)
	}
	if c.Source.URL != "mysql://repl:s3cr:t@127.0.0.1:3306" {
		t.Errorf("url = %q", c.Source.URL)
	}
	if c.Source.ServerID != 4242 {
		t.Errorf("server_id = %d (an expanded number must decode as a number)", c.Source.ServerID)
	}
	if c.Source.Name != "shop" || c.Source.Snapshot.Parallel != 4 || c.Source.Snapshot.Where["shop.items"] != "id > 10" {
		t.Errorf("source = %+v", c.Source)
	}
	if c.Sinks[0].File.MaxBytes != 64<<20 || c.Sinks[1].Name != "kafka" || !c.Sinks[1].Kafka.IsSet() {
		t.Errorf("sinks = %+v", c.Sinks)
	}
	if c.Checkpoint.Interval != 250*time.Millisecond || c.Checkpoint.Type != "file" {
		t.Errorf("checkpoint = %+v", c.Checkpoint)
	}
	if c.Buffer.BatchBytes != 512<<10 || c.Buffer.MaxBytes != 32<<20 {
		t.Errorf("buffer = %+v", c.Buffer)
	}
}

func TestSources(t *testing.T) {
	src := `
pipeline: shards
sources:
  - name: eu
    url: mysql://u:p@eu:3306
    tables: [shop.*]
  - name: us
    url: mysql://u:p@us:3306
    heartbeat: 500ms
align: {max_skew: 2s, max_wait: 10s, on_stall: fail}
`
	c, err := Parse("x.yaml", []byte(src), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Sources) != 2 || c.Sources[0].Name != "eu" || c.Sources[1].Heartbeat != 500*time.Millisecond || c.Source.Name != "eu" {
		t.Fatalf("sources = %+v", c.Sources)
	}
	if c.Align.MaxSkew != 2*time.Second || c.Align.MaxWait != 10*time.Second || c.Align.OnStall != "fail" {
		t.Fatalf("align = %+v", c.Align)
	}
	one, err := Parse("x.yaml", []byte("pipeline: p\nsource: {url: mysql://u:p@h:1}\n"), env(nil))
	if err != nil || len(one.Sources) != 1 || one.Sources[0].Name != "p" {
		t.Fatalf("one source: %+v, %v", one.Sources, err)
	}
}

// row_image: fill keeps its store beside the checkpoint, one per source.
func TestRowImageDir(t *testing.T) {
	c, err := Parse("x.yaml", []byte("pipeline: p\nsources:\n  - {name: eu, url: mysql://u:p@h:1, row_image: fill}\n  - {name: us, url: mysql://u:p@h:2, row_image: fill, row_image_dir: /var/lib/us}\n  - {name: as, url: mysql://u:p@h:3}\n"), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if got := []string{c.Sources[0].RowImageDir, c.Sources[1].RowImageDir, c.Sources[2].RowImageDir}; got[0] != "p.checkpoint.json.rowimages.eu" || got[1] != "/var/lib/us" || got[2] != "" || c.Sources[2].RowImage != "full" {
		t.Fatalf("row image dirs %q, row_image %q", got, c.Sources[2].RowImage)
	}
}

func TestDefaults(t *testing.T) {
	c, err := Parse("x.yaml", []byte("pipeline: p\nsource: {url: mysql://u:p@h:1}\n"), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Sinks) != 1 || c.Sinks[0].Type != "stdout" || c.Checkpoint.Path != "p.checkpoint.json" {
		t.Fatalf("defaults: %+v", c)
	}
}

// Each bad file gives a message naming the file, line and key.
func TestErrors(t *testing.T) {
	cases := []struct{ name, src, want string }{
		{"unknown key", "pipeline: p\nsource:\n  url: mysql://u:p@h:1\n  tabels: [a.b]\n", `x.yaml:4: source.tabels: unknown key "tabels" (did you mean "tables"?)`},
		{"unknown top", "pipeline: p\nsrc: {}\n", `x.yaml:2: src: unknown key "src"`},
		{"wrong type", "pipeline: p\nsource:\n  url: mysql://u:p@h:1\n  server_id: lots\n", "line 4: cannot unmarshal !!str `lots` into uint32"},
		{"bad duration", "pipeline: p\nsource: {url: mysql://u:p@h:1}\ncheckpoint:\n  interval: soon\n", "line 4"},
		{"missing env", "pipeline: p\nsource:\n  url: mysql://u:${NOPE}@h:1\n", "x.yaml:3: source.url: environment variable NOPE is not set"},
		{"no url", "pipeline: p\n", "x.yaml:1: source.url: is required"},
		{"no pipeline", "source: {url: mysql://u:p@h:1}\n", "pipeline: is required"},
		{"bad mode", "pipeline: p\nsource:\n  url: mysql://u:p@h:1\n  snapshot:\n    mode: sometimes\n", `x.yaml:5: source.snapshot.mode: "sometimes": want initial`},
		{"sink type", "pipeline: p\nsource: {url: mysql://u:p@h:1}\nsinks:\n  - name: a\n    type: s3\n", `x.yaml:5: sinks[0].type: "s3": want stdout, file`},
		{"file path", "pipeline: p\nsource: {url: mysql://u:p@h:1}\nsinks:\n  - type: file\n", "sinks[0].file: a file sink needs"},
		{"dup sink", "pipeline: p\nsource: {url: mysql://u:p@h:1}\nsinks:\n  - type: stdout\n  - type: stdout\n", `sinks[1].name: "stdout" is used by two sinks`},
		{"bad size", "pipeline: p\nsource: {url: mysql://u:p@h:1}\nbuffer: {max_bytes: lots}\n", `"lots" is not a size`},
		{"syntax", "pipeline: p\n  source: [\n", "x.yaml: "},
		{"source and sources", "pipeline: p\nsource: {url: mysql://u:p@h:1}\nsources:\n  - {name: a, url: mysql://u:p@h:2}\n", "x.yaml:2: source: use either source: (one server) or sources: (several)"},
		{"unnamed source", "pipeline: p\nsources:\n  - name: a\n    url: mysql://u:p@h:1\n  - url: mysql://u:p@h:2\n", "x.yaml:5: sources[1].name: is required with several sources"},
		{"dup source", "pipeline: p\nsources:\n  - {name: a, url: mysql://u:p@h:1}\n  - {name: a, url: mysql://u:p@h:2}\n", `x.yaml:4: sources[1].name: "a" is used by two sources`},
		{"source typo", "pipeline: p\nsources:\n  - name: a\n    url: mysql://u:p@h:1\n    tabels: [x.y]\n", `x.yaml:5: sources[0].tabels: unknown key "tabels" (did you mean "tables"?)`},
		{"source no url", "pipeline: p\nsources:\n  - name: a\n", "x.yaml:3: sources[0].url: is required"},
		{"join sink", "pipeline: p\nsource: {url: mysql://u:p@h:1}\nsinks:\n  - {name: out, type: stdout}\njoins:\n  - name: j\n    left: {table: a.b, key: [id], time: commit}\n    right: {table: a.c, key: [bid], time: commit}\n    sink: nope\n    state_dir: /tmp/j\n", `x.yaml:9: joins[0].sink: "nope" is not the name of a sink`},
		{"join invalid", "pipeline: p\nsource: {url: mysql://u:p@h:1}\njoins:\n  - name: j\n    left: {table: a.b, key: [id], time: commit}\n    right: {table: a.c, key: [x, y], time: commit}\n", "joins[0]: joins[j].right.key: has 2 columns but left.key has 1"},
		{"join typo", "pipeline: p\nsource: {url: mysql://u:p@h:1}\njoins:\n  - name: j\n    lateness: 1s\n    latness: 2s\n", `x.yaml:6: joins[0].latness: unknown key "latness" (did you mean "lateness"?)`},
		{"on_stall", "pipeline: p\nsource: {url: mysql://u:p@h:1}\nalign:\n  max_skew: 2s\n  on_stall: wait\n", `x.yaml:5: align.on_stall: "wait": want proceed or fail`},
		{"empty", "", "the file is empty"},
		{"row_image", "pipeline: p\nsource:\n  url: mysql://u:p@h:1\n  row_image: minimal\n", `x.yaml:4: source.row_image: "minimal": want full (the default`},
		{"fill_missing", "pipeline: p\nsource: {url: mysql://u:p@h:1, row_image: fill, fill_missing: select}\n", `source.fill_missing: "select": want stop (the default`},
		{"fill_missing without fill", "pipeline: p\nsource: {url: mysql://u:p@h:1, fill_missing: reselect}\n", "source.fill_missing: reselect needs row_image: fill"},
		{"row_image etcd", "pipeline: p\nsource: {url: mysql://u:p@h:1, row_image: fill}\ncoordinator: {type: etcd, etcd: {endpoints: [h:2379]}}\n", "source.row_image: fill is not supported with coordinator: {type: etcd}"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse("x.yaml", []byte(c.src), env(nil))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want it to contain %q", err, c.want)
			}
		})
	}
}

// Every key of the file is documented in docs/CONFIG.md.
func TestEveryKeyDocumented(t *testing.T) {
	doc, err := os.ReadFile("../docs/CONFIG.md")
	if err != nil {
		t.Fatal(err)
	}
	var walk func(reflect.Type, string)
	walk = func(ty reflect.Type, path string) {
		for ty.Kind() == reflect.Pointer || ty.Kind() == reflect.Slice {
			ty = ty.Elem()
		}
		if ty.Kind() != reflect.Struct || ty == nodeType || ty == reflect.TypeOf(time.Duration(0)) {
			return
		}
		for i := 0; i < ty.NumField(); i++ {
			tag := strings.Split(ty.Field(i).Tag.Get("yaml"), ",")[0]
			if tag == "" || tag == "-" {
				continue
			}
			key := join(path, tag)
			if !strings.Contains(string(doc), "`"+key+"`") {
				t.Errorf("docs/CONFIG.md does not document `%s`", key)
			}
			if key == "sources" || key == "joins" {
				continue // sources: the same keys as source; joins: docs/JOIN.md (checked by package join)
			}
			walk(ty.Field(i).Type, key)
		}
	}
	walk(reflect.TypeOf(Config{}), "")
}

// A non-loopback admin address needs admin.token (given as ${VAR});
// loopback works without one.
func TestAdminToken(t *testing.T) {
	base := "pipeline: p\nsource: {url: mysql://u:p@h:1}\nadmin:\n"
	for _, c := range []struct {
		admin, want string
		token       string
	}{
		{"  addr: 127.0.0.1:7070\n", "", ""},
		{"  addr: 127.0.0.2:7070\n", "", ""},
		{"  addr: localhost:7070\n", "", ""},
		{"  addr: '[::1]:7070'\n", "", ""},
		{"  addr: 0.0.0.0:7070\n", "x.yaml:4: admin.token: is required when admin.addr (0.0.0.0:7070) is not a loopback address", ""},
		{"  addr: ':7070'\n", "admin.token: is required when admin.addr (:7070)", ""},
		{"  addr: 10.1.2.3:7070\n", "admin.token: is required", ""},
		{"  addr: db-admin.internal:7070\n", "admin.token: is required", ""},
		{"  addr: 10.1.2.3:7070\n  token: ${ADMIN_TOKEN}\n", "", "s3cr3t-t0ken"},
		{"  addr: 10.1.2.3:7070\n  token: ${ADMIN_TOKEN:-}\n", "admin.token: is required", ""},
		{"  addr: 127.0.0.1\n", `admin.addr: "127.0.0.1": want host:port`, ""},
	} {
		vars := map[string]string{}
		if c.token != "" {
			vars["ADMIN_TOKEN"] = c.token
		}
		cfg, err := Parse("x.yaml", []byte(base+c.admin), env(vars))
		if c.want == "" {
			if err != nil {
				t.Errorf("%q: %v", c.admin, err)
			} else if cfg.Admin.Token != c.token {
				t.Errorf("%q: token %q, want %q", c.admin, cfg.Admin.Token, c.token)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want %q", c.admin, err, c.want)
		}
	}
}

// TestSourceURLList: a source's url may list the servers of one
// replication topology; they become one URL with the addresses joined.
func TestSourceURLList(t *testing.T) {
	src := `
pipeline: shop
source:
  url:
    - mysql://repl:${PASS}@db1:3306?tls=required
    - mysql://repl:${PASS}@db2:3307?tls=required
  catch_up_wait: 5s
sinks: [{type: stdout}]
`
	c, err := Parse("x.yaml", []byte(src), env(map[string]string{"PASS": "pw"}))
	if err != nil {
		t.Fatal(err)
	}
	if c.Source.URL != "mysql://repl:pw@db1:3306,db2:3307?tls=required" || c.Source.CatchUpWait != 5*time.Second {
		t.Errorf("url = %q, catch_up_wait %s", c.Source.URL, c.Source.CatchUpWait)
	}
	bad := strings.Replace(src, "repl:${PASS}@db2", "other:${PASS}@db2", 1)
	if _, err := Parse("x.yaml", []byte(bad), env(map[string]string{"PASS": "pw"})); err == nil || !strings.Contains(err.Error(), "share user, password and options") || strings.Contains(err.Error(), "pw") {
		t.Errorf("URLs with two users: err = %v; want a refusal that names the rule and no password", err)
	}
}
