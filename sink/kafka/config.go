package kafka

import (
	"errors"
	"fmt"
	"net"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sluice-cdc/sluice/codec"
	"github.com/sluice-cdc/sluice/internal/confdef"
	"github.com/sluice-cdc/sluice/sink"
	"github.com/sluice-cdc/sluice/tlsconfig"
)

// Defaults of Config.
const (
	DefaultName           = "kafka"
	DefaultTopic          = "{db}.{table}"
	DefaultClientID       = "sluice"
	DefaultCompression    = "lz4"
	DefaultMaxRecordBytes = 1000012 // Kafka's default max.message.bytes
	DefaultRequestTimeout = 30 * time.Second
	// DefaultSchemaChangeTopic is Debezium's schema-change topic: named
	// after topic.prefix, which is sluice's source name.
	DefaultSchemaChangeTopic = "{source}"
	// DefaultHeartbeatTopicsPrefix is Debezium's heartbeat.topics.prefix.
	DefaultHeartbeatTopicsPrefix = "__debezium-heartbeat"
	// MinMaxRecordBytes and MaxMaxRecordBytes bound max_record_bytes (the
	// client's limits on a record batch).
	MinMaxRecordBytes = 1024
	MaxMaxRecordBytes = 1 << 30
	// MaxTopicLen is Kafka's limit on a topic name.
	MaxTopicLen = 249
)

// DefaultTransactionTopic is Debezium's transaction topic,
// "<topic.prefix>.transaction", the source's name standing for
// topic.prefix.
const DefaultTransactionTopic = "{source}.transaction"

// Compressions are the accepted values of Config.Compression (its enum
// tag).
var Compressions = confdef.Enum(reflect.TypeOf(Config{}), "compression")

// SASLMechanisms are the accepted values of SASLConfig.Mechanism (its
// enum tag; any case).
var SASLMechanisms = confdef.Enum(reflect.TypeOf(Config{}), "sasl.mechanism")

// DefaultTransactionalID returns the transactional.id a sink uses when
// Config.TransactionalID is empty: "sluice-<pipeline>" for a sink named
// "kafka" (the default name), "sluice-<pipeline>-<name>" for any other, so
// that two Kafka sinks of one pipeline never fence each other.
func DefaultTransactionalID(pipeline, name string) string {
	if name == "" || name == DefaultName {
		return "sluice-" + pipeline
	}
	return "sluice-" + pipeline + "-" + name
}

// Config of a Kafka sink. The zero value of every field but Brokers means
// its default. The tags besides yaml are the kafka block's definition
// (package internal/confdef): each key's default and allowed values,
// which withDefaults applies and docs/CONFIG.md is checked against; the
// Default* constants are the same values for Go callers.
type Config struct {
	// Name is the sink's name in checkpoints, logs and metrics. Default
	// "kafka"; give each sink of a pipeline its own.
	Name string `yaml:"name" default:"kafka"`
	// Brokers are the seed brokers, host:port each (required).
	Brokers []string `yaml:"brokers"`
	// Topic is the template of each table's topic. Placeholders: {db},
	// {table}, {source}; a template without placeholders is one fixed
	// topic for every table. In names put in place of a placeholder,
	// any other ASCII character than letters, digits, '_' and '-' becomes
	// '_' (so '.' separates the template's parts only), a character beyond
	// ASCII "_u" and four hex digits, and an empty name "_"; a topic over
	// 249 characters is cut and ends with a hash (docs/SINKS-kafka.md,
	// "Topic names"). Two tables on one topic that the template tells
	// apart stop the sink. Default "{db}.{table}".
	Topic string `yaml:"topic" default:"{db}.{table}"`
	// TransactionalID is the producer's transactional.id: a producer that
	// starts with it fences every earlier producer with it. Default
	// "sluice-<pipeline>" (see DefaultTransactionalID). Never give two
	// pipelines, or two sinks, the same one.
	TransactionalID string `yaml:"transactional_id" computed:"sluice-<pipeline> (sluice-<pipeline>-<name> for a sink not named kafka)"`
	// ClientID is the client.id the brokers see (logs, quotas). Default
	// "sluice".
	ClientID string `yaml:"client_id" default:"sluice"`
	// CreateTopics creates a missing topic before the first write to it,
	// with Partitions and ReplicationFactor. Default true; with false, a
	// write to a missing topic fails (and is retried) until the topic is
	// created by other means.
	CreateTopics *bool `yaml:"create_topics" default:"true"`
	// Partitions of a topic the sink creates. Default 0: the broker's
	// num.partitions.
	Partitions int32 `yaml:"partitions" computed:"broker default"`
	// ReplicationFactor of a topic the sink creates. Default 0: the
	// broker's default.replication.factor.
	ReplicationFactor int16 `yaml:"replication_factor" computed:"broker default"`
	// Compression of record batches: none, gzip, snappy, lz4 or zstd.
	// Default lz4.
	Compression string `yaml:"compression" default:"lz4" enum:"none,gzip,snappy,lz4,zstd"`
	// MaxRecordBytes bounds a record batch, hence a record (key, value and
	// headers): a larger message fails the write. It must not exceed the
	// topics' max.message.bytes. Default 1000012 (Kafka's default).
	MaxRecordBytes int `yaml:"max_record_bytes" default:"1000012"`
	// RequestTimeout bounds each step of a write (sending every record of
	// a batch; committing the transaction) and each request of recovery:
	// a cluster that is down or stalled makes Write fail after about this
	// long (at most twice it) and the pipeline retries. Default 30s.
	RequestTimeout time.Duration `yaml:"request_timeout" default:"30s"`
	// TLS, when set, connects with TLS.
	TLS *TLSConfig `yaml:"tls"`
	// SASL, when set, authenticates with SASL.
	SASL *SASLConfig `yaml:"sasl"`
	// Tombstones writes, after each delete, a record with the delete's
	// key and a null value (Debezium's tombstones.on.delete), so that a
	// compacted topic forgets the row. Default true in format debezium,
	// false in format sluice. A table without a primary key (a null key)
	// gets none: there is nothing for compaction to forget.
	Tombstones *bool `yaml:"tombstones" computed:"true with format: debezium, else false"`
	// TransactionTopic is the template of the topic of Debezium's
	// transaction BEGIN and END records (format debezium with
	// provide.transaction.metadata); its one placeholder is {source}.
	// Default "{source}.transaction", Debezium's. Two Kafka sinks of one
	// pipeline on one cluster need their own, as they need their own
	// topic.
	TransactionTopic string `yaml:"transaction_topic" default:"{source}.transaction"`
	// SchemaChangeTopic is, in format debezium, the template of the topic
	// of DDL statements (Debezium's schema-change topic). Placeholders as
	// in Topic. Default "{source}" (Debezium's topic.prefix).
	SchemaChangeTopic string `yaml:"schema_change_topic" default:"{source}"`
	// IncludeSchemaChanges is Debezium's include.schema.changes: in format
	// debezium DDL statements are written to SchemaChangeTopic. Default
	// true; with false they are not written to Kafka at all.
	IncludeSchemaChanges *bool `yaml:"include.schema.changes" default:"true"`
	// HeartbeatIntervalMs is Debezium's heartbeat.interval.ms: in format
	// debezium a heartbeat record is written to
	// "<HeartbeatTopicsPrefix>.<source>" for each source every this many
	// milliseconds, also while the sources are idle. Default 0: none.
	HeartbeatIntervalMs int `yaml:"heartbeat.interval.ms" default:"0"`
	// HeartbeatTopicsPrefix is Debezium's heartbeat.topics.prefix.
	// Default "__debezium-heartbeat".
	HeartbeatTopicsPrefix string `yaml:"heartbeat.topics.prefix" default:"__debezium-heartbeat"`
	// Sources names the pipeline's sources (set by the caller, not in the
	// kafka block), for the heartbeats; a source not named here gets
	// heartbeats once the sink has written one of its messages.
	Sources []string `yaml:"-"`
	// Format is the records' format, the sink's format in the config
	// (sinks[].format, not in the kafka block). Zero: sluice.
	Format codec.Format `yaml:"-"`
}

// TLSConfig is the tls block of Config, the one every client takes
// (tlsconfig.Config). An empty block (tls: {}) turns TLS on with the
// system's roots.
type TLSConfig = tlsconfig.Config

// SASLConfig is the sasl block of Config.
type SASLConfig struct {
	// Mechanism: PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 (required).
	Mechanism string `yaml:"mechanism" enum:"PLAIN,SCRAM-SHA-256,SCRAM-SHA-512"`
	// User and Password are the credentials (required).
	User     string `yaml:"user"`
	Password string `yaml:"password"`
}

// withDefaults returns c with every zero field but TransactionalID set to
// its default (TransactionalID's depends on the pipeline's name): the
// static ones from the fields' default tags, the others here.
func (c Config) withDefaults() Config {
	confdef.ApplyDefaults(&c)
	if c.SASL != nil {
		c.SASL.Mechanism = strings.ToUpper(c.SASL.Mechanism)
	}
	if c.Format.Name == "" {
		c.Format.Name = codec.FormatSluice
	}
	if c.Tombstones == nil {
		t := c.Format.IsDebezium()
		c.Tombstones = &t
	}
	return c
}

// Validate names the field that is wrong and says what would be right.
// Zero values are fine (they mean the defaults), except for Brokers.
func (c *Config) Validate() error {
	if len(c.Brokers) == 0 {
		return errors.New("brokers is required: the seed brokers to connect to, e.g. brokers: [127.0.0.1:9092]")
	}
	for i, b := range c.Brokers {
		host, port, err := net.SplitHostPort(strings.TrimSpace(b))
		if err != nil || host == "" {
			return fmt.Errorf("brokers[%d] %q: must be host:port, e.g. 127.0.0.1:9092", i, b)
		}
		if n, err := strconv.Atoi(port); err != nil || n <= 0 || n > 65535 {
			return fmt.Errorf("brokers[%d] %q: port %q must be a number from 1 to 65535", i, b, port)
		}
	}
	if c.Topic != "" {
		if _, err := parseTopic(c.Topic); err != nil {
			return fmt.Errorf("topic %q: %w", c.Topic, err)
		}
	}
	if c.TransactionTopic != "" {
		tt, err := parseTopic(c.TransactionTopic)
		if err != nil {
			return fmt.Errorf("transaction_topic %q: %w", c.TransactionTopic, err)
		}
		for _, p := range tt.parts {
			if p.Field == sink.FieldDB || p.Field == sink.FieldTable {
				return fmt.Errorf("transaction_topic %q: a transaction spans tables: its one placeholder is {source}", c.TransactionTopic)
			}
		}
	}
	if c.TransactionalID != "" && strings.TrimSpace(c.TransactionalID) != c.TransactionalID {
		return fmt.Errorf("transactional_id %q: must not start or end with white space", c.TransactionalID)
	}
	if c.Partitions < 0 {
		return fmt.Errorf("partitions %d: must be positive (or 0 for the broker's num.partitions)", c.Partitions)
	}
	if c.ReplicationFactor < 0 {
		return fmt.Errorf("replication_factor %d: must be positive (or 0 for the broker's default.replication.factor)", c.ReplicationFactor)
	}
	if c.Compression != "" && !slices.Contains(Compressions, c.Compression) {
		return fmt.Errorf("compression %q: must be one of %s", c.Compression, strings.Join(Compressions, ", "))
	}
	if c.MaxRecordBytes != 0 && (c.MaxRecordBytes < MinMaxRecordBytes || c.MaxRecordBytes > MaxMaxRecordBytes) {
		return fmt.Errorf("max_record_bytes %d: must be from %d to %d (default %d)", c.MaxRecordBytes, MinMaxRecordBytes, MaxMaxRecordBytes, DefaultMaxRecordBytes)
	}
	if c.RequestTimeout < 0 {
		return fmt.Errorf("request_timeout %s: must be positive, e.g. 30s", c.RequestTimeout)
	}
	if c.RequestTimeout > 0 && c.RequestTimeout < 100*time.Millisecond {
		return fmt.Errorf("request_timeout %s: too short to reach a broker; use at least 100ms (default %s)", c.RequestTimeout, DefaultRequestTimeout)
	}
	if t := c.TLS; t != nil {
		if err := t.Validate(); err != nil {
			return err
		}
	}
	if err := c.Format.Validate(); err != nil {
		return err
	}
	if !c.Format.IsDebezium() {
		for _, o := range []struct {
			name string
			set  bool
		}{{"schema_change_topic", c.SchemaChangeTopic != ""}, {"include.schema.changes", c.IncludeSchemaChanges != nil},
			{"heartbeat.interval.ms", c.HeartbeatIntervalMs != 0}, {"heartbeat.topics.prefix", c.HeartbeatTopicsPrefix != ""}} {
			if o.set {
				return fmt.Errorf("%s belongs to format debezium (the sink's format is sluice, whose DDL goes to its table's topic and which has no heartbeats)", o.name)
			}
		}
	}
	if c.SchemaChangeTopic != "" {
		if _, err := parseTopic(c.SchemaChangeTopic); err != nil {
			return fmt.Errorf("schema_change_topic %q: %w", c.SchemaChangeTopic, err)
		}
	}
	if c.HeartbeatIntervalMs < 0 {
		return fmt.Errorf("heartbeat.interval.ms %d: must be positive, or 0 for no heartbeats", c.HeartbeatIntervalMs)
	}
	if p := c.HeartbeatTopicsPrefix; p != "" {
		if j := strings.IndexFunc(p, func(r rune) bool { return !topicChar(r) }); j >= 0 {
			return fmt.Errorf("heartbeat.topics.prefix %q: contains %q: topic names take ASCII letters, digits, '.', '_' and '-' only", p, p[j:j+1])
		}
	}
	if s := c.SASL; s != nil {
		if !slices.Contains(SASLMechanisms, strings.ToUpper(s.Mechanism)) {
			return fmt.Errorf("sasl.mechanism %q: must be one of %s", s.Mechanism, strings.Join(SASLMechanisms, ", "))
		}
		if s.User == "" {
			return errors.New("sasl.user is required with sasl")
		}
		if s.Password == "" {
			return errors.New("sasl.password is required with sasl")
		}
	}
	return nil
}
