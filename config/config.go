// Package config reads the YAML file of `sluice run`: every field is
// documented in docs/CONFIG.md (a test keeps the two in step), unknown keys
// and wrong types are errors that name the key and its line, and ${VAR} or
// ${VAR:-default} in any value is replaced from the environment (for
// secrets).
//
// Each block is defined once, by its struct: besides yaml, the tags of
// its fields give a key's default (default:"30s"; computed:"..." for one
// that code works out below), its allowed values (enum:"proceed,fail")
// and its lower bound (min:"0"), read by package internal/confdef. Parse
// applies the defaults and checks the values from them; the rules between
// keys are code in validate; docs/CONFIG.md is tested against the tags.
package config

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/sluice-cdc/sluice/codec"
	"github.com/sluice-cdc/sluice/internal/confdef"
	"github.com/sluice-cdc/sluice/internal/sqlstmt"
	joinpkg "github.com/sluice-cdc/sluice/join"
)

// Config is the whole file.
type Config struct {
	// Pipeline names the pipeline (checkpoints, sinks, metrics).
	Pipeline string `yaml:"pipeline"`
	// Source is the one server to read; Sources lists several (use one or
	// the other). After Load, Sources holds every source, Source included.
	Source  Source   `yaml:"source"`
	Sources []Source `yaml:"sources"`
	// Align keeps several sources together in event time.
	Align Align  `yaml:"align"`
	Sinks []Sink `yaml:"sinks"`
	// Joins are event-time interval joins (docs/JOIN.md); each writes its
	// records to a sink of Sinks that only it uses.
	Joins      []joinpkg.Config `yaml:"joins"`
	Checkpoint Checkpoint       `yaml:"checkpoint"`
	// Coordinator elects one leader among the pipeline's processes.
	Coordinator Coordinator `yaml:"coordinator"`
	Admin       Admin       `yaml:"admin"`
	Buffer      Buffer      `yaml:"buffer"`
	Log         Log         `yaml:"log"`
}

// Source is the server to read.
type Source struct {
	Name string `yaml:"name" computed:"the pipeline's name"`
	// URL is mysql://USER:PASSWORD@HOST:PORT[?tls=true&ca=FILE&server_id=N].
	// Servers of one replication topology are listed as
	// HOST:PORT,HOST:PORT in one URL, or as a YAML list of URLs that
	// differ only in their address.
	URL      SourceURL `yaml:"url"`
	Tables   []string  `yaml:"tables"`
	ServerID uint32    `yaml:"server_id" computed:"from the URL, else derived"`
	// CatchUpWait bounds the wait, after the source failed over, for a
	// server that lacks transactions already delivered (default 30s).
	CatchUpWait time.Duration `yaml:"catch_up_wait" default:"30s"`
	// Start is where to begin when there is no checkpoint: current,
	// earliest, FILE:POS or gtid:SET.
	Start       string   `yaml:"start" default:"current"`
	Snapshot    Snapshot `yaml:"snapshot"`
	SignalTable string   `yaml:"signal_table"`
	// Heartbeat is how often the server sends a heartbeat when it has
	// nothing to send (default 1s).
	Heartbeat time.Duration `yaml:"heartbeat" default:"1s" min:"0"`
	// OnStatementChange is what happens to a change to a captured table
	// that the server logged as an SQL statement (a session with
	// binlog_format STATEMENT or MIXED): stop (default) or skip (a warning
	// and the sluice_statement_changes_skipped_total metric).
	OnStatementChange string `yaml:"on_statement_change" default:"stop" enum:"stop,skip" want:"stop (the default: a change logged as a statement stops the source) or skip (warn and go on without it)"`
	// RowImage is what becomes of row images that lack columns (a server
	// or session with binlog_row_image MINIMAL or NOBLOB): full (the
	// default: they are written as the binlog carries them; format
	// debezium refuses them) or fill (completed from a local store of
	// every row's last full image, so every format sees full images).
	RowImage string `yaml:"row_image" default:"full" enum:"full,fill" want:"full (the default: row images as the binlog carries them) or fill (complete partial images from a local store)"`
	// RowImageDir is the directory of the row image store (row_image:
	// fill), one per source.
	RowImageDir string `yaml:"row_image_dir" computed:"<checkpoint.path>.rowimages.<source name>"`
	// FillMissing is what becomes, with row_image: fill, of a partial
	// image of a row the store has never seen whole: stop (the default:
	// the source stops with an error naming the table, the key and the
	// fixes) or reselect (the row is read from the source by primary key
	// and its current values complete the image; the message lists those
	// columns).
	FillMissing string `yaml:"fill_missing" default:"stop" enum:"stop,reselect" want:"stop (the default: a row the store never saw whole stops the source) or reselect (read it from the source by primary key; the message lists the columns so read)"`
}

// SourceURL is a source's url: one URL, or a YAML list of URLs of the
// servers of one replication topology, which becomes one URL with their
// addresses joined (mysql://u:p@h1:3306,h2:3306).
type SourceURL string

// UnmarshalYAML takes a string or a list of strings.
func (u *SourceURL) UnmarshalYAML(unmarshal func(any) error) error {
	n, err := confdef.Node(unmarshal)
	if err != nil {
		return err
	}
	switch n.Kind {
	case yaml.ScalarNode:
		*u = SourceURL(n.Value)
		return nil
	case yaml.SequenceNode:
		var list []string
		for _, c := range n.Content {
			if c.Kind != yaml.ScalarNode {
				return fmt.Errorf("line %d: url: want a URL or a list of URLs", c.Line)
			}
			list = append(list, c.Value)
		}
		joined, err := joinURLs(list)
		if err != nil {
			return fmt.Errorf("line %d: url: %w", n.Line, err)
		}
		*u = SourceURL(joined)
		return nil
	}
	return fmt.Errorf("line %d: url: want a URL or a list of URLs", n.Line)
}

// joinURLs makes one URL of several that differ only in their address.
func joinURLs(list []string) (string, error) {
	if len(list) == 0 {
		return "", errors.New("the list of URLs is empty")
	}
	first, err := url.Parse(list[0])
	if err != nil {
		return "", errors.New("the first URL does not parse: want mysql://USER:PASSWORD@HOST:PORT")
	}
	hosts := []string{first.Host}
	for i, s := range list[1:] {
		u, err := url.Parse(s)
		if err != nil {
			return "", fmt.Errorf("URL %d does not parse: want mysql://USER:PASSWORD@HOST:PORT", i+2)
		}
		if u.Scheme != first.Scheme || u.User.String() != first.User.String() || u.RawQuery != first.RawQuery || u.Path != first.Path {
			return "", fmt.Errorf("URL %d differs from the first in more than its address: the servers of one source share user, password and options", i+2)
		}
		hosts = append(hosts, u.Host)
	}
	first.Host = strings.Join(hosts, ",")
	return first.String(), nil
}

// Align configures skew alignment between sources (docs/SOURCES.md).
type Align struct {
	// MaxSkew turns alignment on: how far in event time a source may lead
	// the slowest live one.
	MaxSkew time.Duration `yaml:"max_skew" min:"0"`
	// MaxWait is how long a source may send nothing before it counts as
	// stalled (default 30s).
	MaxWait time.Duration `yaml:"max_wait" default:"30s" min:"0"`
	// OnStall: proceed (default) or fail.
	OnStall string `yaml:"on_stall" default:"proceed" enum:"proceed,fail"`
	// SampleEvery is how often each source's clock and position are
	// sampled (default 250ms).
	SampleEvery time.Duration `yaml:"sample_every" default:"250ms" min:"0"`
}

// Snapshot configures the initial load.
type Snapshot struct {
	Mode      string            `yaml:"mode" default:"initial" enum:"initial,never,when_needed,always,only"`
	Method    string            `yaml:"method" default:"consistent" enum:"consistent,watermark"`
	Parallel  int               `yaml:"parallel" default:"2"`
	ChunkRows int               `yaml:"chunk_rows" computed:"16384 (4096 for tables read while streaming)"`
	Where     map[string]string `yaml:"where"`
	// LockTimeout bounds the lock a consistent snapshot of MySQL takes
	// while its connections start (default 10s).
	LockTimeout time.Duration `yaml:"lock_timeout" default:"10s" min:"0"`
}

// Sink is one destination; Type selects which of the typed blocks applies.
type Sink struct {
	Name string `yaml:"name" computed:"the type"`
	// Type: stdout, file, kafka, redis or nats (required).
	Type string    `yaml:"type" enum:"stdout,file,kafka,redis,nats"`
	File *FileSink `yaml:"file"`
	// Kafka, Redis and NATS are the blocks of those sinks, each read by
	// its package (DecodeSink).
	Kafka Block `yaml:"kafka"`
	Redis Block `yaml:"redis"`
	NATS  Block `yaml:"nats"`
	// Format is how the sink writes each change (and its Kafka key):
	// sluice (default) or debezium, given as a name (format: debezium) or
	// as a block with Debezium's option names (format: {name: debezium,
	// schemas: true, decimal.handling.mode: string}).
	Format Format `yaml:"format" default:"sluice"`
	// Line is where the sink is defined, for messages.
	Line int `yaml:"-"`
	// Join names the join whose records (or dead letters) the sink
	// receives; empty for the pipeline's own sinks. Set by Load.
	Join string `yaml:"-"`
}

// Format is a sink's output format: codec.Format, read from a name or a
// block of its keys.
type Format codec.Format

var formatType = reflect.TypeOf(Format{})

// UnmarshalYAML takes a format's name or a block of its keys.
func (f *Format) UnmarshalYAML(unmarshal func(any) error) error {
	n, err := confdef.Node(unmarshal)
	if err != nil {
		return err
	}
	if n.Kind == yaml.ScalarNode {
		*f = Format{Name: n.Value}
		return nil
	}
	var c codec.Format
	if err := n.Decode(&c); err != nil {
		return err
	}
	*f = Format(c)
	return nil
}

// Block is a block of the file that config keeps, as written, for the
// package that defines its keys: a sink's kafka:, redis: or nats: block
// (packages sink/kafka, sink/redis, sink/nats) and the coordinator's
// etcd: block (package coord). DecodeSink reads it into that package's
// Config. The zero Block is a block the file does not have.
type Block struct {
	node yaml.Node // Kind 0: absent
}

// IsSet reports whether the file has the block's key, whatever its value
// (an empty one included).
func (b Block) IsSet() bool { return b.node.Kind != 0 }

// Line is the line of the block's value in the file; 0 when it is absent.
func (b Block) Line() int { return b.node.Line }

// UnmarshalYAML keeps the value as written, for DecodeSink. (Parse then
// sets each block from the document itself, so that an empty value, which
// the decoder passes over, counts as set, and an alias is kept as one.)
func (b *Block) UnmarshalYAML(unmarshal func(any) error) error {
	n, err := confdef.Node(unmarshal)
	if err != nil {
		return err
	}
	b.node = *n
	return nil
}

var blockType = reflect.TypeOf(Block{})

// Codec returns f as codec.Format.
func (f Format) Codec() codec.Format { return codec.Format(f) }

// FileSink configures the file sink.
type FileSink struct {
	Path     string   `yaml:"path"`
	MaxBytes ByteSize `yaml:"max_bytes" default:"256MiB"`
	NoSync   bool     `yaml:"no_sync" default:"false"`
}

// Checkpoint says where progress is stored.
type Checkpoint struct {
	// Type: file (default) or etcd (the default with an etcd
	// coordinator).
	Type     string        `yaml:"type" enum:"file,etcd" computed:"file; etcd with an etcd coordinator"`
	Path     string        `yaml:"path" computed:"<pipeline>.checkpoint.json"`
	Interval time.Duration `yaml:"interval" default:"1s" min:"0"`
}

// Coordinator chooses how processes of one pipeline agree on a leader.
type Coordinator struct {
	// Type: none (default: one process) or etcd.
	Type string `yaml:"type" default:"none" enum:"none,etcd"`
	// Etcd is the etcd block (coord.Config), decoded by the command
	// (DecodeSink).
	Etcd Block `yaml:"etcd"`
}

// Admin is the HTTP endpoint for metrics, status and commands.
type Admin struct {
	// Addr is host:port; empty turns the endpoint off.
	Addr string `yaml:"addr"`
	// Token, when set, is required (Authorization: Bearer TOKEN) by every
	// command (any request other than GET or HEAD, e.g. POST /snapshot).
	// It is required when Addr is not a loopback address. Give it as
	// ${VAR}: it is a secret, and never logged or printed.
	Token string `yaml:"token"`
}

// Loopback reports whether host:port addr listens only on the loopback
// interface: an IP literal in 127.0.0.0/8 or ::1, or "localhost". An empty
// host (all interfaces) or any other name is not loopback (names are not
// resolved: the check is about what the file says).
func (a Admin) Loopback() bool {
	host, _, err := net.SplitHostPort(a.Addr)
	if err != nil {
		return false
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Buffer bounds batching and memory.
type Buffer struct {
	BatchBytes ByteSize `yaml:"batch_bytes" default:"1MiB"`
	MaxBytes   ByteSize `yaml:"max_bytes" default:"64MiB"`
}

// Log configures logging.
type Log struct {
	// Level: debug, info (default), warn, error.
	Level string `yaml:"level" default:"info" enum:"debug,info,warn,error"`
	// Format: text (default) or json.
	Format string `yaml:"format" default:"text" enum:"text,json"`
}

// ByteSize is a size in bytes written as 1048576, "1MiB", "64MB", "512KiB".
type ByteSize int64

// UnmarshalYAML parses a size.
func (b *ByteSize) UnmarshalYAML(unmarshal func(any) error) error {
	n, err := confdef.Node(unmarshal)
	if err != nil {
		return err
	}
	v, err := ParseByteSize(n.Value)
	if err != nil {
		return err
	}
	*b = ByteSize(v)
	return nil
}

// ParseByteSize parses "123", "4KiB", "4KB", "16MiB", "1GiB" (KB means
// 1000 bytes, KiB 1024).
func ParseByteSize(s string) (int64, error) {
	s = strings.TrimSpace(s)
	units := []struct {
		suffix string
		mult   int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"KB", 1000}, {"MB", 1000 * 1000}, {"GB", 1000 * 1000 * 1000}, {"B", 1}}
	mult := int64(1)
	for _, u := range units {
		if strings.HasSuffix(s, u.suffix) {
			s, mult = strings.TrimSpace(strings.TrimSuffix(s, u.suffix)), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%q is not a size (examples: 1048576, 64MiB, 512KiB)", s)
	}
	return n * mult, nil
}

// Error is a problem at a place in the file.
type Error struct {
	File string
	Line int
	Key  string
	Msg  string
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		fmt.Fprintf(&b, ":%d", e.Line)
	}
	if e.Key != "" {
		fmt.Fprintf(&b, ": %s", e.Key)
	}
	b.WriteString(": ")
	b.WriteString(e.Msg)
	return b.String()
}

// Load reads and checks a config file.
func Load(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	return Parse(path, data, os.LookupEnv)
}

// Parse reads a config from data; lookup resolves ${VAR}.
func Parse(name string, data []byte, lookup func(string) (string, bool)) (*Config, error) {
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return nil, &Error{File: name, Msg: strings.TrimPrefix(err.Error(), "yaml: ")}
	}
	if len(root.Content) == 0 {
		return nil, &Error{File: name, Msg: "the file is empty; see docs/CONFIG.md for an example"}
	}
	doc := root.Content[0]
	if err := expandEnv(doc, "", name, lookup); err != nil {
		return nil, err
	}
	if err := checkKeys(doc, reflect.TypeOf(Config{}), "", name); err != nil {
		return nil, err
	}
	var c Config
	if err := doc.Decode(&c); err != nil {
		return nil, &Error{File: name, Msg: strings.TrimPrefix(err.Error(), "yaml: ")}
	}
	// Lines of the sinks, for later messages, and their blocks as
	// written.
	if sinks := child(doc, "sinks"); sinks != nil {
		for i, n := range sinks.Content {
			if i < len(c.Sinks) {
				c.Sinks[i].Line = n.Line
				c.Sinks[i].Kafka.keep(child(n, "kafka"))
				c.Sinks[i].Redis.keep(child(n, "redis"))
				c.Sinks[i].NATS.keep(child(n, "nats"))
			}
		}
	}
	c.Coordinator.Etcd.keep(child(child(doc, "coordinator"), "etcd"))
	if err := c.validate(name, doc); err != nil {
		return nil, err
	}
	return &c, nil
}

// keep sets b to n, the block's value in the document, if there is one.
func (b *Block) keep(n *yaml.Node) {
	if n != nil {
		b.node = *n
	}
}

func child(n *yaml.Node, key string) *yaml.Node {
	if n != nil && n.Kind == yaml.SequenceNode {
		if i, err := strconv.Atoi(key); err == nil && i >= 0 && i < len(n.Content) {
			return n.Content[i]
		}
		return nil
	}
	if n == nil || n.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return n.Content[i+1]
		}
	}
	return nil
}

// lineOf returns the line of the value at a dotted path (0 if absent).
func lineOf(doc *yaml.Node, path ...string) int {
	n := doc
	for _, p := range path {
		c := child(n, p)
		if c == nil {
			return n.Line
		}
		n = c
	}
	return n.Line
}

var envRef = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)(:-([^}]*))?\}`)

// expandEnv replaces ${VAR} and ${VAR:-default} in every scalar value.
func expandEnv(n *yaml.Node, path, file string, lookup func(string) (string, bool)) error {
	switch n.Kind {
	case yaml.ScalarNode:
		if !strings.Contains(n.Value, "${") {
			return nil
		}
		var missing string
		n.Value = envRef.ReplaceAllStringFunc(n.Value, func(m string) string {
			sub := envRef.FindStringSubmatch(m)
			if v, ok := lookup(sub[1]); ok {
				return v
			}
			if sub[2] != "" {
				return sub[3]
			}
			if missing == "" {
				missing = sub[1]
			}
			return m
		})
		if missing != "" {
			return &Error{File: file, Line: n.Line, Key: path, Msg: fmt.Sprintf("environment variable %s is not set (set it, or write ${%s:-default})", missing, missing)}
		}
		if n.Tag == "!!str" && n.Style == 0 {
			n.Tag = "" // let the expanded text resolve to its type
		}
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			if err := expandEnv(n.Content[i+1], join(path, n.Content[i].Value), file, lookup); err != nil {
				return err
			}
		}
	case yaml.SequenceNode:
		for i, c := range n.Content {
			if err := expandEnv(c, fmt.Sprintf("%s[%d]", path, i), file, lookup); err != nil {
				return err
			}
		}
	}
	return nil
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

var nodeType = reflect.TypeOf(yaml.Node{})

// checkKeys reports the first key of n that t does not have.
func checkKeys(n *yaml.Node, t reflect.Type, path, file string) error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nodeType || t == blockType {
		return nil // checked by the package that reads it
	}
	switch t.Kind() {
	case reflect.Struct:
		if t == formatType && n.Kind == yaml.ScalarNode {
			return nil // format: debezium
		}
		if t == formatType && n.Kind != yaml.MappingNode {
			return &Error{File: file, Line: n.Line, Key: path, Msg: "want a format's name (sluice or debezium) or a block of its keys, e.g. {name: debezium, schemas: true}"}
		}
		if n.Kind != yaml.MappingNode {
			if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
				return nil
			}
			if n.Kind == yaml.ScalarNode && confdef.Unmarshals(t) {
				return nil // a block that may be a scalar (tls: true) checks its own
			}
			if t == reflect.TypeOf(time.Duration(0)) {
				return nil
			}
			return &Error{File: file, Line: n.Line, Key: path, Msg: "want a block of keys here"}
		}
		fields := map[string]reflect.Type{}
		var names []string
		yamlFields(t, fields, &names)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i]
			ft, ok := fields[k.Value]
			if !ok {
				msg := fmt.Sprintf("unknown key %q", k.Value)
				if s := suggest(k.Value, names); s != "" {
					msg += fmt.Sprintf(" (did you mean %q?)", s)
				} else {
					msg += fmt.Sprintf(" (known here: %s)", strings.Join(names, ", "))
				}
				return &Error{File: file, Line: k.Line, Key: join(path, k.Value), Msg: msg}
			}
			if err := checkKeys(n.Content[i+1], ft, join(path, k.Value), file); err != nil {
				return err
			}
		}
	case reflect.Slice:
		if n.Kind == yaml.SequenceNode {
			for i, c := range n.Content {
				if err := checkKeys(c, t.Elem(), fmt.Sprintf("%s[%d]", path, i), file); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// yamlFields adds the YAML keys of struct t and their types, with those of
// its inlined structs (`yaml:",inline"`).
func yamlFields(t reflect.Type, fields map[string]reflect.Type, names *[]string) {
	for _, f := range confdef.Fields(t) {
		fields[f.Key] = f.Type
		*names = append(*names, f.Key)
	}
}

// suggest returns the known name closest to s, if close enough.
func suggest(s string, names []string) string {
	best, bestD := "", 3
	for _, n := range names {
		if d := distance(s, n); d < bestD {
			best, bestD = n, d
		}
	}
	return best
}

func distance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// validate checks values and fills defaults.
func (c *Config) validate(file string, doc *yaml.Node) error {
	bad := func(msg string, path ...string) error {
		return &Error{File: file, Line: lineOf(doc, path...), Key: keyPath(path), Msg: msg}
	}
	if c.Pipeline == "" {
		return bad("is required: a name for this pipeline (letters, digits, - and _), e.g. pipeline: shop", "pipeline")
	}
	if !regexp.MustCompile(`^[A-Za-z0-9_-]+$`).MatchString(c.Pipeline) {
		return bad(fmt.Sprintf("%q: use letters, digits, - and _ only", c.Pipeline), "pipeline")
	}
	if len(c.Sinks) == 0 {
		c.Sinks = []Sink{{Name: "stdout", Type: "stdout"}}
	}
	// The static defaults, from the blocks' default tags; the computed
	// ones (names, the checkpoint's type and path) follow below.
	confdef.ApplyDefaults(c)
	switch {
	case len(c.Sources) > 0 && child(doc, "source") != nil:
		return bad("use either source: (one server) or sources: (several), not both", "source")
	case len(c.Sources) == 0:
		if c.Source.Name == "" {
			c.Source.Name = c.Pipeline
		}
		if err := c.Source.validate(bad, "source"); err != nil {
			return err
		}
		c.Sources = []Source{c.Source}
	default:
		seen := map[string]bool{}
		for i := range c.Sources {
			s := &c.Sources[i]
			at := []string{"sources", strconv.Itoa(i)}
			if s.Name == "" {
				return bad("is required with several sources: a name for this server (it goes into every message and the checkpoint)", append(at, "name")...)
			}
			if seen[s.Name] {
				return bad(fmt.Sprintf("%q is used by two sources; give each its own name", s.Name), append(at, "name")...)
			}
			seen[s.Name] = true
			if err := s.validate(bad, at...); err != nil {
				return err
			}
		}
		c.Source = c.Sources[0]
	}
	if v := confdef.Check(&c.Align, "max_skew", "max_wait", "sample_every", "on_stall"); v != nil {
		if v.Min != "" {
			return bad("durations must not be negative", "align")
		}
		return bad(v.Msg, "align", v.Key)
	}
	names := map[string]bool{}
	for i := range c.Sinks {
		s := &c.Sinks[i]
		at := func(msg string, key string) error {
			line := s.Line
			if n := child(child(doc, "sinks").Content[i], key); n != nil {
				line = n.Line
			}
			return &Error{File: file, Line: line, Key: fmt.Sprintf("sinks[%d].%s", i, key), Msg: msg}
		}
		if s.Type == "" {
			return at("is required: stdout, file, kafka, redis or nats", "type")
		}
		if s.Name == "" {
			s.Name = s.Type
		}
		if names[s.Name] {
			return at(fmt.Sprintf("%q is used by two sinks; give each its own name", s.Name), "name")
		}
		names[s.Name] = true
		if err := s.Format.Codec().Validate(); err != nil {
			return at(err.Error()+"; see docs/CONFIG.md (sinks.format)", "format")
		}
		if s.Format.Codec().IsDebezium() && s.Type == "redis" {
			if m := child(&s.Redis.node, "mode"); m != nil && m.Value == "materialize" {
				return at(fmt.Sprintf("format %s is for a redis sink's mode stream (entries of Debezium's key and value); mode materialize keeps hashes of column values, which have no format: remove format:, or set redis.mode: stream", codec.FormatDebezium), "format")
			}
		}
		switch s.Type {
		case "stdout":
		case "file":
			if s.File == nil || s.File.Path == "" {
				return at("a file sink needs file: {path: out/changes.jsonl}", "file")
			}
		case "kafka":
			if !s.Kafka.IsSet() {
				return at("a kafka sink needs a kafka: block (brokers, topic)", "kafka")
			}
		case "redis":
			if !s.Redis.IsSet() {
				return at("a redis sink needs a redis: block (addr, mode)", "redis")
			}
		case "nats":
			if !s.NATS.IsSet() {
				return at("a nats sink needs a nats: block (url)", "nats")
			}
		default:
			return at(confdef.Check(s, "type").Msg, "type")
		}
	}
	if err := c.validateJoins(file, doc); err != nil {
		return err
	}
	if v := confdef.Check(&c.Coordinator); v != nil {
		return bad(v.Msg, "coordinator", v.Key)
	}
	if c.Coordinator.Type == "etcd" && !c.Coordinator.Etcd.IsSet() {
		return bad("coordinator type etcd needs an etcd: block, e.g. etcd: {endpoints: [127.0.0.1:2379]}", "coordinator", "etcd")
	}
	if v := confdef.Check(&c.Checkpoint, "type"); v != nil {
		return bad(v.Msg, "checkpoint", v.Key)
	}
	if c.Checkpoint.Type == "" {
		c.Checkpoint.Type = "file"
		if c.Coordinator.Type == "etcd" {
			c.Checkpoint.Type = "etcd" // the checkpoint moves with the leadership
		}
	}
	if c.Checkpoint.Type == "etcd" && c.Coordinator.Type != "etcd" {
		return bad("etcd needs coordinator: {type: etcd, etcd: {...}}: the checkpoint is saved only while this process leads", "checkpoint", "type")
	}
	if c.Checkpoint.Type == "file" && c.Checkpoint.Path == "" {
		c.Checkpoint.Path = c.Pipeline + ".checkpoint.json"
	}
	for i := range c.Sources {
		s := &c.Sources[i]
		key := []string{"source", "row_image"}
		if len(c.Sources) > 1 || child(doc, "sources") != nil {
			key = []string{"sources", strconv.Itoa(i), "row_image"}
		}
		if s.RowImage != "fill" {
			if s.FillMissing == "reselect" {
				key[len(key)-1] = "fill_missing"
				return bad("reselect needs row_image: fill: it completes the partial images the row image store cannot", key...)
			}
			continue
		}
		if c.Coordinator.Type == "etcd" {
			return bad("fill is not supported with coordinator: {type: etcd}: the row image store is local to one machine and does not move with the leadership, so another process taking over would complete images from stale rows. Use row_image: full with binlog_row_image=FULL on the server", key...)
		}
		if s.RowImageDir == "" {
			s.RowImageDir = c.Checkpoint.Path + ".rowimages." + s.Name
		}
	}
	c.Source = c.Sources[0]
	if v := confdef.Check(&c.Checkpoint, "interval"); v != nil {
		return bad(v.Msg, "checkpoint", v.Key)
	}
	if c.Admin.Addr != "" {
		if _, _, err := net.SplitHostPort(c.Admin.Addr); err != nil {
			return bad(fmt.Sprintf("%q: want host:port, e.g. 127.0.0.1:7070", c.Admin.Addr), "admin", "addr")
		}
		if !c.Admin.Loopback() && c.Admin.Token == "" {
			return bad(fmt.Sprintf("is required when admin.addr (%s) is not a loopback address: without it anyone who reaches the address can send commands (POST /snapshot). Set admin.token: ${SLUICE_ADMIN_TOKEN} (a long random string), or bind admin.addr to 127.0.0.1", c.Admin.Addr), "admin", "token")
		}
	}
	if v := confdef.Check(&c.Log); v != nil {
		return bad(v.Msg, "log", v.Key)
	}
	return nil
}

// validateJoins checks each join and that the sinks it names exist and
// serve it alone.
func (c *Config) validateJoins(file string, doc *yaml.Node) error {
	owner := map[string]string{} // sink name -> the join using it
	for i := range c.Joins {
		j := &c.Joins[i]
		at := func(msg string, key ...string) error {
			path := append([]string{"joins", strconv.Itoa(i)}, key...)
			return &Error{File: file, Line: lineOf(doc, path...), Key: keyPath(path), Msg: msg}
		}
		if err := j.Validate(); err != nil {
			return at(err.Error())
		}
		for _, ref := range []struct{ key, name string }{{"sink", j.Sink}, {"late", j.Late}} {
			if ref.name == "" || ref.key == "late" && ref.name == joinpkg.LateDrop {
				continue
			}
			found := false
			for _, s := range c.Sinks {
				found = found || s.Name == ref.name
			}
			if !found {
				return at(fmt.Sprintf("%q is not the name of a sink under sinks:; add one (e.g. {name: %s, type: file, file: {path: %s.jsonl}})", ref.name, ref.name, ref.name), ref.key)
			}
			if o, ok := owner[ref.name]; ok {
				return at(fmt.Sprintf("sink %q is already used by join %s; each join needs sinks of its own", ref.name, o), ref.key)
			}
			owner[ref.name] = j.Name
		}
	}
	for i := range c.Sinks {
		if j, ok := owner[c.Sinks[i].Name]; ok {
			c.Sinks[i].Join = j
			if c.Sinks[i].Format.Codec().IsDebezium() {
				path := []string{"sinks", strconv.Itoa(i), "format"}
				return &Error{File: file, Line: lineOf(doc, path...), Key: keyPath(path), Msg: fmt.Sprintf("sink %q takes join %s's records, which have their own layout (docs/JOIN.md): remove format: %s from it", c.Sinks[i].Name, j, codec.FormatDebezium)}
			}
		}
	}
	if len(owner) > 0 && len(owner) == len(c.Sinks) {
		return &Error{File: file, Line: lineOf(doc, "sinks"), Key: "sinks", Msg: "every sink is a join's: add a sink for the pipeline's own changes (e.g. {name: out, type: file, file: {path: out/changes.jsonl}})"}
	}
	return nil
}

// keyPath renders a path as a key: sources[1].url.
func keyPath(path []string) string {
	var b strings.Builder
	for i, p := range path {
		if _, err := strconv.Atoi(p); err == nil {
			b.WriteString("[" + p + "]")
			continue
		}
		if i > 0 {
			b.WriteByte('.')
		}
		b.WriteString(p)
	}
	return b.String()
}

// validate checks one source block found at path.
func (src *Source) validate(bad func(string, ...string) error, path ...string) error {
	at := func(key ...string) []string { return append(append([]string(nil), path...), key...) }
	if src.URL == "" {
		return bad("is required, e.g. url: mysql://repl:${SLUICE_PASSWORD}@127.0.0.1:3306", at("url")...)
	}
	if v := confdef.Check(src, "snapshot"); v != nil {
		return bad(v.Msg, at(strings.Split(v.Key, ".")...)...)
	}
	if src.SignalTable != "" {
		if _, _, err := sqlstmt.ParseTableText(src.SignalTable); err != nil {
			return bad(err.Error(), at("signal_table")...)
		}
	}
	if v := confdef.Check(src, "heartbeat", "on_statement_change", "row_image", "fill_missing"); v != nil {
		return bad(v.Msg, at(v.Key)...)
	}
	return nil
}

// DecodeSink decodes a typed block (a sink's, the coordinator's) into v
// (its package's Config), rejecting unknown keys with their line. file is
// the config file's name and path the block's key path
// (sinks[0].kafka), for messages.
func DecodeSink(file string, b *Block, path string, v any) error {
	n := &b.node
	if err := checkKeys(n, reflect.TypeOf(v), path, file); err != nil {
		return err
	}
	if err := n.Decode(v); err != nil {
		return &Error{File: file, Line: n.Line, Key: path, Msg: strings.TrimPrefix(err.Error(), "yaml: ")}
	}
	return nil
}

// ErrNoConfig is returned when no config file is given.
var ErrNoConfig = errors.New("config: no file given: use --config sluice.yaml (see docs/CONFIG.md)")
