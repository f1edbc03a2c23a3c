package nats

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/sluice-cdc/sluice/codec"
	"github.com/sluice-cdc/sluice/internal/confdef"
	"github.com/sluice-cdc/sluice/sink"
	"github.com/sluice-cdc/sluice/tlsconfig"
)

// Defaults of Config.
const (
	DefaultName            = "nats"
	DefaultSubject         = "sluice.{db}.{table}"
	DefaultDuplicateWindow = 2 * time.Minute
	DefaultReplicas        = 1
	DefaultConnectTimeout  = 5 * time.Second
	DefaultAckTimeout      = 10 * time.Second
	DefaultMaxPending      = 4096
	// MaxReplicas is JetStream's limit on a stream's replicas.
	MaxReplicas = 5
)

// DefaultStream returns the default stream name of a pipeline:
// "sluice-<pipeline>".
func DefaultStream(pipeline string) string { return "sluice-" + pipeline }

// Config of a NATS JetStream sink. The zero value of every field but URL
// means its default. The tags besides yaml are the nats block's
// definition (package internal/confdef): each key's default, which
// withDefaults applies and docs/CONFIG.md is checked against; the
// Default* constants are the same values for Go callers.
type Config struct {
	// Name is the sink's name in checkpoints, logs and metrics. Default
	// "nats"; give each sink of a pipeline its own.
	Name string `yaml:"name" default:"nats"`
	// URL is the server to connect to (required), e.g.
	// nats://127.0.0.1:4222; several, comma-separated, for a cluster.
	// Schemes: nats, tls, ws, wss.
	URL string `yaml:"url"`
	// Stream is the JetStream stream the sink writes to and owns: nothing
	// else may publish to it. Default "sluice-<pipeline>". It is created
	// when missing (file storage, Replicas, DuplicateWindow, subjects
	// "<prefix>.>" from Subject).
	Stream string `yaml:"stream" computed:"sluice-<pipeline>"`
	// Subject is the template of each table's subject. Placeholders:
	// {db}, {table}, {source}. It must start with a literal token (the
	// stream's subjects are that prefix followed by ".>"). Default
	// "sluice.{db}.{table}".
	Subject string `yaml:"subject" default:"sluice.{db}.{table}"`
	// SchemaChangeSubject is, in format debezium, the template of the
	// subject of DDL statements (Debezium's schema-change events), as the
	// Kafka sink's schema_change_topic: placeholders {source} and {db}.
	// Default: Subject's literal prefix followed by ".{source}"
	// ("sluice.{source}"), or Subject itself when it has no placeholders.
	// It must fall under the stream's subjects (the prefix followed by
	// ".>").
	SchemaChangeSubject string `yaml:"schema_change_subject" computed:"<subject's literal prefix>.{source} (sluice.{source}), or subject itself when it has no placeholders"`
	// Format is the format of the messages' data: sluice (default) or
	// debezium, Debezium's value. Set from the sink's format in the
	// config, not from its nats block.
	Format codec.Format `yaml:"-"`
	// DuplicateWindow is the stream's de-duplication window (Nats-Msg-Id),
	// used when the sink creates the stream. Default 2m.
	DuplicateWindow time.Duration `yaml:"duplicate_window" default:"2m"`
	// Replicas is the stream's replica count (1 to 5), used when the sink
	// creates the stream. Default 1.
	Replicas int `yaml:"replicas" default:"1"`
	// CredsFile authenticates with a NATS credentials file (JWT and NKey).
	CredsFile string `yaml:"creds_file"`
	// User and Password authenticate with a user name and password.
	User     string `yaml:"user"`
	Password string `yaml:"password"`
	// Token authenticates with a token.
	Token string `yaml:"token"`
	// TLS verifies the server against CAFile and, with CertFile and
	// KeyFile, authenticates the client. Setting any of its keys turns
	// TLS on; a tls:// URL does too (then verified against the system's
	// roots).
	TLS TLSConfig `yaml:"tls"`
	// ConnectTimeout bounds connecting to a server. Default 5s.
	ConnectTimeout time.Duration `yaml:"connect_timeout" default:"5s"`
	// AckTimeout bounds the wait for each message's acknowledgement and
	// each JetStream API request: a server that is down or stalled makes
	// Write fail after about this long. Default 10s.
	AckTimeout time.Duration `yaml:"ack_timeout" default:"10s"`
	// MaxPending is how many messages may await their acknowledgement at
	// once. Default 4096.
	MaxPending int `yaml:"max_pending" default:"4096"`
}

// TLSConfig is the tls block of Config, the one every client takes
// (tlsconfig.Config).
type TLSConfig = tlsconfig.Config

// withDefaults returns c with every zero field but Stream and
// SchemaChangeSubject set to its default, from the fields' default tags
// (Stream's depends on the pipeline's name, SchemaChangeSubject's on
// Subject).
func (c Config) withDefaults() Config {
	confdef.ApplyDefaults(&c)
	return c
}

// Validate names the field that is wrong and says what would be right.
// Zero values are fine (they mean the defaults), except for URL.
func (c *Config) Validate() error {
	if strings.TrimSpace(c.URL) == "" {
		return errors.New("url is required: the NATS server to write to, e.g. url: nats://127.0.0.1:4222")
	}
	for _, u := range strings.Split(c.URL, ",") {
		u = strings.TrimSpace(u)
		p, err := url.Parse(u)
		if err != nil || p.Host == "" {
			return fmt.Errorf("url %q: %q is not a server URL like nats://127.0.0.1:4222", c.URL, u)
		}
		switch p.Scheme {
		case "nats", "tls", "ws", "wss":
		default:
			return fmt.Errorf("url %q: scheme %q must be nats, tls, ws or wss (e.g. nats://127.0.0.1:4222)", c.URL, p.Scheme)
		}
	}
	if c.Stream != "" {
		if err := checkStreamName(c.Stream); err != nil {
			return fmt.Errorf("stream %q: %w", c.Stream, err)
		}
	}
	if c.Subject != "" {
		if _, err := parseSubject(c.Subject); err != nil {
			return fmt.Errorf("subject %q: %w", c.Subject, err)
		}
	}
	if err := c.Format.Validate(); err != nil {
		return err
	}
	if c.SchemaChangeSubject != "" {
		if !c.Format.IsDebezium() {
			return fmt.Errorf("schema_change_subject is for format %s (in format %s a DDL statement goes to its table's subject): remove it, or set the sink's format: %s", codec.FormatDebezium, codec.FormatSluice, codec.FormatDebezium)
		}
		if _, err := c.schemaSubject(); err != nil {
			return err
		}
	}
	if c.DuplicateWindow < 0 {
		return fmt.Errorf("duplicate_window %s: must be positive, e.g. 2m", c.DuplicateWindow)
	}
	if c.Replicas < 0 || c.Replicas > MaxReplicas {
		return fmt.Errorf("replicas %d: must be from 1 to %d", c.Replicas, MaxReplicas)
	}
	auth := 0
	if c.CredsFile != "" {
		auth++
	}
	if c.User != "" || c.Password != "" {
		auth++
		if c.User == "" {
			return errors.New("password is set but user is not: set both, or neither")
		}
	}
	if c.Token != "" {
		auth++
	}
	if auth > 1 {
		return errors.New("creds_file, user/password and token are exclusive: set one way to authenticate")
	}
	if err := c.TLS.Validate(); err != nil {
		return err
	}
	if c.ConnectTimeout < 0 {
		return fmt.Errorf("connect_timeout %s: must be positive, e.g. 5s", c.ConnectTimeout)
	}
	if c.AckTimeout < 0 {
		return fmt.Errorf("ack_timeout %s: must be positive, e.g. 10s", c.AckTimeout)
	}
	if c.MaxPending < 0 {
		return fmt.Errorf("max_pending %d: must be positive, e.g. %d", c.MaxPending, DefaultMaxPending)
	}
	return nil
}

// checkStreamName says why name cannot name a JetStream stream.
func checkStreamName(name string) error {
	if name == "" {
		return errors.New("is empty")
	}
	if len(name) > 255 {
		return errors.New("is longer than 255 bytes")
	}
	if i := strings.IndexAny(name, ".*> \t\r\n/\\"); i >= 0 {
		return fmt.Errorf("contains %q: stream names may not contain '.', '*', '>', '/', '\\' or white space", name[i])
	}
	return nil
}

// subjectTemplate is a parsed Config.Subject.
type subjectTemplate struct {
	parts sink.Template
	// filter is the stream subject that covers every rendered subject:
	// the literal tokens before the first placeholder followed by ".>",
	// or the template itself when it has no placeholders.
	filter string
	// pattern matches exactly the rendered subjects: the template with
	// each token that holds a placeholder replaced by "*". An existing
	// stream must take it.
	pattern string
}

// parseSubject parses a subject template such as "sluice.{db}.{table}".
func parseSubject(tmpl string) (subjectTemplate, error) {
	var t subjectTemplate
	var prefix, pattern []string
	placeholders := false
	for _, tok := range strings.Split(tmpl, ".") {
		if tok == "" {
			return t, errors.New("has an empty token (two dots in a row, or a dot at an end)")
		}
		if i := strings.IndexAny(tok, "*> \t\r\n"); i >= 0 {
			return t, fmt.Errorf("token %q contains %q: subject tokens may not contain wildcards or white space", tok, tok[i])
		}
		if !strings.Contains(tok, "{") && !strings.Contains(tok, "}") {
			if !placeholders {
				prefix = append(prefix, tok)
			}
			pattern = append(pattern, tok)
			continue
		}
		placeholders = true
		pattern = append(pattern, "*")
	}
	if len(prefix) == 0 {
		return t, errors.New("must start with a literal token, e.g. sluice.{db}.{table}: the stream's subjects are that prefix followed by .>")
	}
	parts, err := sink.ParseTemplate(tmpl)
	if err != nil {
		return t, err
	}
	t.parts = parts
	t.pattern = strings.Join(pattern, ".")
	if placeholders {
		t.filter = strings.Join(prefix, ".") + ".>"
	} else {
		t.filter = tmpl
	}
	return t, nil
}

// render returns the subject of a table. Names are made safe as subject
// tokens: '.', '*', '>' and white space become '_', and an empty name
// becomes "_".
func (t *subjectTemplate) render(dst []byte, source, db, table string) []byte {
	return t.parts.Append(dst, db, table, source, appendToken)
}

func appendToken(dst []byte, s string) []byte {
	if s == "" {
		return append(dst, '_')
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '.' || c == '*' || c == '>' || c <= ' ' || c == 0x7f:
			c = '_'
		}
		dst = append(dst, c)
	}
	return dst
}

// subjectCovers reports whether the stream subject filter f matches every
// subject that s matches (s may hold wildcards).
func subjectCovers(f, s string) bool {
	ft := strings.Split(f, ".")
	st := strings.Split(s, ".")
	for i, tok := range ft {
		if tok == ">" {
			return i < len(st)
		}
		if i >= len(st) {
			return false
		}
		switch {
		case tok == "*":
			if st[i] == ">" {
				return false
			}
		case tok != st[i]:
			return false
		}
	}
	return len(ft) == len(st)
}

// schemaSubject parses the schema-change subject (SchemaChangeSubject or
// its default) and checks that the stream's subjects, from Subject, take
// it.
func (c *Config) schemaSubject() (subjectTemplate, error) {
	subj := c.Subject
	if subj == "" {
		subj = DefaultSubject
	}
	t, err := parseSubject(subj)
	if err != nil {
		return t, fmt.Errorf("subject %q: %w", subj, err)
	}
	sc := c.SchemaChangeSubject
	if sc == "" {
		if sc = subj; t.filter != subj {
			sc = strings.TrimSuffix(t.filter, ">") + "{source}"
		}
	}
	st, err := parseSubject(sc)
	if err != nil {
		return st, fmt.Errorf("schema_change_subject %q: %w", sc, err)
	}
	if strings.Contains(sc, "{table}") {
		return st, fmt.Errorf("schema_change_subject %q: {table} is not a placeholder of it (a schema change is of a database or a source): use {source} or {db}", sc)
	}
	if !subjectCovers(t.filter, st.pattern) {
		return st, fmt.Errorf("schema_change_subject %q: the stream's subjects %q (from subject %q) do not take it: give it subject's prefix, e.g. %s{source}", sc, t.filter, subj, strings.TrimSuffix(t.filter, ">"))
	}
	return st, nil
}
