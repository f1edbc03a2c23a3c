package config

import "testing"

// The config file is outside input: any bytes give a config or an error,
// never a panic.
func FuzzParse(f *testing.F) {
	f.Add([]byte("pipeline: p\nsource: {url: mysql://u:p@h:1}\n"))
	f.Add([]byte("pipeline: p\nsource:\n  url: mysql://u:${P:-x}@h:1\n  tables: [a.*]\nsinks:\n  - {type: file, file: {path: x.jsonl, max_bytes: 1MiB}}\n"))
	f.Add([]byte("pipeline: p\nsource: {url: x}\ncoordinator: {type: etcd, etcd: {endpoints: [a]}}\n"))
	f.Add([]byte("- [\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Parse("f.yaml", data, func(string) (string, bool) { return "v", true })
		if err == nil && (c.Pipeline == "" || c.Source.URL == "" || len(c.Sinks) == 0) {
			t.Fatalf("accepted an incomplete config: %+v", c)
		}
	})
}
