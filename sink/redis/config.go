package redis

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/sluice-cdc/sluice/codec"
	"github.com/sluice-cdc/sluice/internal/confdef"
	"github.com/sluice-cdc/sluice/sink"
	"github.com/sluice-cdc/sluice/tlsconfig"
)

// Modes of the sink.
const (
	// ModeStream appends every message to a Redis stream per table.
	ModeStream = "stream"
	// ModeMaterialize keeps one hash per row equal to the source row.
	ModeMaterialize = "materialize"
)

// Defaults of Config.
const (
	DefaultName              = "redis"
	DefaultMode              = ModeStream
	DefaultKey               = "{db}.{table}"
	DefaultDialTimeout       = 5 * time.Second
	DefaultWriteTimeout      = 10 * time.Second
	DefaultMessagesPerScript = 1000
	// MaxMessagesPerScript bounds messages_per_script: a transaction is
	// held in the server's memory until EXEC and blocks the server while
	// it runs.
	MaxMessagesPerScript = 10000
)

// maxScriptBytes bounds the commands of one transaction: a chunk is cut
// early when its messages are large, so that no transaction comes near
// Redis's client query buffer limit (1 GiB) and none blocks the server for
// long.
const maxScriptBytes = 8 << 20

// Config of a Redis sink. The zero value of every field but Addr means its
// default. The tags besides yaml are the redis block's definition
// (package internal/confdef): each key's default and allowed values,
// which withDefaults and Validate apply and docs/CONFIG.md is checked
// against; the Default* constants are the same values for Go callers.
type Config struct {
	// Name is the sink's name in checkpoints, logs and metrics. Default
	// "redis"; give each sink of a pipeline its own.
	Name string `yaml:"name" default:"redis"`
	// Addr is the server's host:port (required), e.g. "127.0.0.1:6379".
	Addr string `yaml:"addr"`
	// Username and Password authenticate (AUTH; Username for Redis 6 ACL
	// users). Both optional.
	Username string `yaml:"username"`
	Password string `yaml:"password"`
	// DB is the database number (SELECT); default 0.
	DB int `yaml:"db" default:"0"`
	// TLS is the tls block every client takes (tlsconfig.Config: ca_file,
	// cert_file, key_file, insecure_skip_verify), or true for TLS
	// verified against the system's roots. A block or true turns TLS on.
	TLS tlsconfig.Toggle `yaml:"tls"`
	// CAFile is the older spelling of tls.ca_file (it turns TLS on too).
	CAFile string `yaml:"ca_file"`
	// Mode is "stream" (default: XADD every message to a stream per table)
	// or "materialize" (one hash per row, kept equal to the source row).
	Mode string `yaml:"mode" default:"stream" enum:"stream,materialize"`
	// Key names a table's stream, or the prefix of its rows' hashes (then
	// followed by ":" and the primary key JSON). Placeholders: {db},
	// {table}, {source}. Default "{db}.{table}".
	Key string `yaml:"key" default:"{db}.{table}"`
	// KeyPrefix is put before every key the sink writes, the high-water
	// hash included, e.g. "cdc:". Default none.
	KeyPrefix string `yaml:"key_prefix"`
	// MaxLen caps each stream at about this many entries (XTRIM MAXLEN ~
	// after each transaction's entries); 0 (default) keeps everything.
	// Stream mode only.
	MaxLen int64 `yaml:"max_len"`
	// Format is the format of the stream entries' key and value fields
	// (stream mode): sluice (default) or debezium, Debezium's key and
	// value. Set from the sink's format in the config, not from its
	// redis block. Mode materialize takes format sluice only (its hashes
	// are column values).
	Format codec.Format `yaml:"-"`
	// DialTimeout bounds connecting; default 5s.
	DialTimeout time.Duration `yaml:"dial_timeout" default:"5s"`
	// WriteTimeout bounds one command, from sending it to its reply
	// (socket read and write deadlines); default 10s. A server that is down
	// or stalled makes Write fail after at most about this long.
	WriteTimeout time.Duration `yaml:"write_timeout" default:"10s"`
	// MessagesPerScript is how many messages one atomic transaction
	// (MULTI/EXEC) applies; a larger batch takes several. Default 1000, at
	// most 10000. (The name is from when each was a Lua script call.)
	MessagesPerScript int `yaml:"messages_per_script" default:"1000"`
	// WaitReplicas, when above 0, makes Write wait (WAIT) until that many
	// replicas have received the batch, and fail if they do not within
	// WriteTimeout. Default 0: the primary's own durability only.
	WaitReplicas int `yaml:"wait_replicas" default:"0"`
}

// withDefaults returns c with every zero field set to its default (the
// fields' default tags).
func (c Config) withDefaults() Config {
	confdef.ApplyDefaults(&c)
	return c
}

// Validate names the field that is wrong and says what would be right.
// Zero values are fine (they mean the defaults), except for Addr.
func (c *Config) Validate() error {
	if c.Addr == "" {
		return errors.New("addr is required: the Redis server's host:port, e.g. addr: 127.0.0.1:6379")
	}
	if err := c.TLS.Validate(); err != nil {
		return err
	}
	if c.CAFile != "" && c.TLS.CAFile != "" {
		return errors.New("ca_file and tls.ca_file are both set: keep tls.ca_file (ca_file is its older spelling)")
	}
	host, port, err := net.SplitHostPort(c.Addr)
	if err != nil {
		return fmt.Errorf("addr %q: must be host:port, e.g. 127.0.0.1:6379 (%v)", c.Addr, err)
	}
	if host == "" {
		return fmt.Errorf("addr %q: the host is missing, e.g. 127.0.0.1:6379", c.Addr)
	}
	if p, err := strconv.ParseUint(port, 10, 16); err != nil || p == 0 {
		return fmt.Errorf("addr %q: port %q must be a number from 1 to 65535", c.Addr, port)
	}
	if c.DB < 0 {
		return fmt.Errorf("db %d: must be 0 or more", c.DB)
	}
	if v := confdef.Check(c, "mode"); v != nil {
		return fmt.Errorf("mode %q: must be %q or %q", c.Mode, v.Allowed[0], v.Allowed[1])
	}
	if c.Key != "" {
		if _, err := sink.ParseTemplate(c.Key); err != nil {
			return fmt.Errorf("key %q: %w", c.Key, err)
		}
	}
	if strings.ContainsAny(c.KeyPrefix, "\r\n") {
		return fmt.Errorf("key_prefix %q: must not contain line breaks", c.KeyPrefix)
	}
	if c.MaxLen < 0 {
		return fmt.Errorf("max_len %d: must be 0 (keep everything) or more", c.MaxLen)
	}
	if c.MaxLen > 0 && c.Mode == ModeMaterialize {
		return errors.New("max_len applies to mode stream only; remove it or set mode: stream")
	}
	if err := c.Format.Validate(); err != nil {
		return err
	}
	if c.Format.IsDebezium() && c.Mode == ModeMaterialize {
		return fmt.Errorf("format %s is for mode stream (entries of Debezium's key and value); mode materialize keeps hashes of column values, which have no format: remove the format, or set mode: stream", codec.FormatDebezium)
	}
	if c.DialTimeout < 0 {
		return fmt.Errorf("dial_timeout %s: must be positive, e.g. 5s", c.DialTimeout)
	}
	if c.WriteTimeout < 0 {
		return fmt.Errorf("write_timeout %s: must be positive, e.g. 10s", c.WriteTimeout)
	}
	if c.MessagesPerScript < 0 || c.MessagesPerScript > MaxMessagesPerScript {
		return fmt.Errorf("messages_per_script %d: must be from 1 to %d (0 means the default, %d)",
			c.MessagesPerScript, MaxMessagesPerScript, DefaultMessagesPerScript)
	}
	if c.WaitReplicas < 0 {
		return fmt.Errorf("wait_replicas %d: must be 0 (do not wait) or more", c.WaitReplicas)
	}
	return nil
}
