package config

import (
	"fmt"
	"os"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/sluice-cdc/sluice/coord"
	"github.com/sluice-cdc/sluice/internal/confdef"
	joinpkg "github.com/sluice-cdc/sluice/join"
	"github.com/sluice-cdc/sluice/sink/kafka"
	"github.com/sluice-cdc/sluice/sink/nats"
	"github.com/sluice-cdc/sluice/sink/redis"
	"github.com/sluice-cdc/sluice/tlsconfig"
)

// docRow is one row of a key table (| Key | Default | Meaning |).
type docRow struct {
	line int
	keys []string // the backticked keys of the Key cell
	dflt string   // the Default cell
	text string   // the whole row
}

var backticked = regexp.MustCompile("`([^`]+)`")

// docTables reads the key tables of a Markdown file: each key named in a
// row's first cell, with its row.
func docTables(t *testing.T, file string) map[string]docRow {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]docRow{}
	for i, line := range strings.Split(string(data), "\n") {
		if !strings.HasPrefix(line, "| `") {
			continue
		}
		cells := strings.Split(strings.TrimSuffix(strings.TrimPrefix(line, "|"), "|"), "|")
		if len(cells) != 3 {
			continue // not a key table (| Key | Default | Meaning |)
		}
		r := docRow{line: i + 1, dflt: strings.TrimSpace(cells[1]), text: line}
		for _, m := range backticked.FindAllStringSubmatch(cells[0], -1) {
			r.keys = append(r.keys, m[1])
		}
		for _, k := range r.keys {
			if _, dup := rows[k]; !dup {
				rows[k] = r
			}
		}
	}
	return rows
}

// docBlock is a block checked against a doc: its definition, the prefix of
// its keys there, and keys left out (documented elsewhere).
type docBlock struct {
	file   string
	prefix string
	typ    reflect.Type
	skip   func(path string) bool
}

// isTLS reports whether a key is a tls block, whose keys are documented
// once, under tls.
func isTLS(k confdef.Key) bool {
	return strings.Contains(k.Type, "tlsconfig.") || strings.HasSuffix(k.Type, "TLSConfig")
}

// TestDocsFromDefinition checks docs/CONFIG.md (and docs/JOIN.md for the
// joins) against the blocks' definitions: every key has a row (or, for a
// key of a small nested block such as sasl, is named in its block's row),
// the Default column shows the default tag (`30s`) or the computed tag's
// text, a key without either shows no value in backticks as its default,
// each value of an enum tag is named in the key's row, and no row names a
// key that does not exist.
func TestDocsFromDefinition(t *testing.T) {
	config := "../docs/CONFIG.md"
	sinkBlock := func(path string) bool { return path == "name" } // ignored: the list entry's name names the sink
	blocks := []docBlock{
		{config, "", reflect.TypeOf(Config{}), func(p string) bool {
			return strings.HasPrefix(p, "sources.") || strings.HasPrefix(p, "joins.") // the keys of source; docs/JOIN.md
		}},
		{config, "sinks.kafka", reflect.TypeOf(kafka.Config{}), sinkBlock},
		{config, "sinks.redis", reflect.TypeOf(redis.Config{}), sinkBlock},
		{config, "sinks.nats", reflect.TypeOf(nats.Config{}), sinkBlock},
		{config, "coordinator.etcd", reflect.TypeOf(coord.Config{}), nil},
		{config, "tls", reflect.TypeOf(tlsconfig.Config{}), nil},
		{"../docs/JOIN.md", "", reflect.TypeOf(joinpkg.Config{}), nil},
	}
	known := map[string]map[string]bool{}
	checked := 0
	for _, b := range blocks {
		rows := docTables(t, b.file)
		if known[b.file] == nil {
			known[b.file] = map[string]bool{}
		}
		var tlsAt []string // keys that are tls blocks: theirs are under tls
		for _, k := range confdef.Describe(b.typ) {
			if b.skip != nil && b.skip(k.Path) {
				continue
			}
			if slicesHasPrefix(tlsAt, k.Path) {
				continue
			}
			if isTLS(k) {
				tlsAt = append(tlsAt, k.Path+".")
			}
			key := join(b.prefix, k.Path)
			known[b.file][key] = true
			checked++
			row, ok := rows[key]
			inParent := false
			if !ok && k.Block {
				continue // a block documented by its keys' rows (left.table, ...), checked in turn
			}
			if !ok {
				// A key of a small block may be named in the block's row.
				if i := strings.LastIndexByte(key, '.'); i > 0 {
					if parent, found := rows[key[:i]]; found && strings.Contains(parent.text, "`"+key[i+1:]+"`") {
						row, ok, inParent = parent, true, true
					}
				}
				if !ok {
					t.Errorf("%s does not document `%s`", b.file, key)
					continue
				}
			}
			where := fmt.Sprintf("%s:%d: `%s`", b.file, row.line, key)
			plain := strings.ReplaceAll(row.dflt, "`", "")
			switch {
			case inParent:
				// The row is the block's: its Default column is the block's.
			case k.Default != "" && !k.Computed:
				if !strings.Contains(row.dflt, "`"+k.Default+"`") {
					t.Errorf("%s: the Default column says %q; the definition's default is `%s`", where, row.dflt, k.Default)
				}
			case k.Computed:
				if !strings.Contains(plain, k.Default) {
					t.Errorf("%s: the Default column says %q; the definition says %q", where, row.dflt, k.Default)
				}
			default:
				if strings.HasPrefix(row.dflt, "`") {
					t.Errorf("%s: the Default column says %s, but the definition has no default tag", where, row.dflt)
				}
			}
			for _, v := range k.Enum {
				if !strings.Contains(row.text, "`"+v+"`") {
					t.Errorf("%s: the row does not name `%s`, one of its values (%s)", where, v, strings.Join(k.Enum, ", "))
				}
			}
		}
	}
	// Every row of CONFIG.md's tables names a key of some block.
	for key, row := range docTables(t, config) {
		if !known[config][key] {
			t.Errorf("%s:%d: `%s` is documented but no block defines it", config, row.line, key)
		}
	}
	if checked < 130 {
		t.Errorf("checked only %d keys: the walk is broken", checked)
	}
}

func slicesHasPrefix(prefixes []string, s string) bool {
	for _, p := range prefixes {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}

// TestFormatTags: codec.Validate, which checks a sink's format block,
// takes every value that the format's enum tags (the documented values)
// list, and the default each computed tag names (in format debezium, the
// one whose options they are).
func TestFormatTags(t *testing.T) {
	ft := reflect.TypeOf(Format{})
	n := 0
	for _, k := range confdef.Describe(ft) {
		for _, v := range append(k.Enum, k.Default) {
			if v == "" || k.Type != "string" {
				continue
			}
			f := Format{Name: "debezium"}
			for i := 0; i < ft.NumField(); i++ {
				if strings.Split(ft.Field(i).Tag.Get("yaml"), ",")[0] == k.Path {
					reflect.ValueOf(&f).Elem().Field(i).SetString(v)
				}
			}
			if err := f.Codec().Validate(); err != nil {
				t.Errorf("%s: %s is in the definition but refused: %v", k.Path, v, err)
			}
			n++
		}
	}
	if n < 15 {
		t.Errorf("checked only %d values", n)
	}
}
