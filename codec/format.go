package codec

import (
	"fmt"

	"github.com/sluice-cdc/sluice/binlog"
)

// Format names and options. The option names and values are Debezium's
// MySQL connector's own (decimal.handling.mode and so on), so that a
// Debezium configuration maps one to one.
const (
	// FormatSluice is sluice's own exact format (docs/FORMAT.md): values as
	// they are in the database.
	FormatSluice = "sluice"
	// FormatDebezium is what Debezium's MySQL connector with Kafka
	// Connect's JsonConverter writes for the same change.
	FormatDebezium = "debezium"
)

// Format selects how events and keys are written. The zero value is
// FormatSluice. It is also the sinks' format block of the config file:
// the tags besides yaml define each key's default (computed: the
// debezium options' defaults apply in format debezium only, where the
// empty value means them) and its values (package internal/confdef);
// Validate checks them.
type Format struct {
	// Name is FormatSluice ("" too) or FormatDebezium.
	Name string `yaml:"name" default:"sluice" enum:"sluice,debezium"`
	// Schemas writes the schema half ({"schema":...,"payload":...}), as
	// JsonConverter does with schemas.enable=true (debezium only).
	Schemas bool `yaml:"schemas" default:"false"`
	// DecimalHandling is decimal.handling.mode: precise (default), string
	// or double.
	DecimalHandling string `yaml:"decimal.handling.mode" computed:"precise" enum:"precise,string,double"`
	// TimePrecision is time.precision.mode: adaptive_time_microseconds
	// (default) or connect.
	TimePrecision string `yaml:"time.precision.mode" computed:"adaptive_time_microseconds" enum:"adaptive_time_microseconds,connect"`
	// BigintUnsigned is bigint.unsigned.handling.mode: long (default) or
	// precise.
	BigintUnsigned string `yaml:"bigint.unsigned.handling.mode" computed:"long" enum:"long,precise"`
	// BinaryHandling is binary.handling.mode: bytes (default), base64 or
	// hex.
	BinaryHandling string `yaml:"binary.handling.mode" computed:"bytes" enum:"bytes,base64,hex"`
	// TransactionMetadata is provide.transaction.metadata: every data
	// event carries its "transaction" block (TxnOrder), and a sink that
	// has a transaction topic (Kafka: "<source>.transaction") writes a
	// BEGIN and an END record around each transaction's events. Default
	// false, as in Debezium.
	TransactionMetadata bool `yaml:"provide.transaction.metadata" default:"false"`
	// SkippedOperations is skipped.operations: "t" (the default, as in
	// Debezium) or "none". With "none" a TRUNCATE TABLE is Debezium's op
	// "t" event in the table's topic (AppendTruncate); with "t" it is not,
	// and sluice delivers the statement as it delivers other DDL (where
	// Debezium drops it). sluice skips no data change: c, u and d are
	// refused.
	SkippedOperations string `yaml:"skipped.operations" computed:"t" enum:"t,none"`
	// ReplaceNullWithDefault is JsonConverter's replace.null.with.default
	// (Kafka 3.7+): "true" (the default, "" too) writes a null value of a
	// column that has a default as the default, with or without schemas;
	// "false" writes null.
	ReplaceNullWithDefault string `yaml:"replace.null.with.default" computed:"true" enum:"true,false"`
	// SchemaComments is include.schema.comments: the schema-change
	// events' tableChanges carry the table's and the columns' comments,
	// and a column's comment is its field schema's "doc" (without it,
	// comments are null and there is no doc, as Debezium 3.6 writes them
	// by default).
	SchemaComments bool `yaml:"include.schema.comments" default:"false"`
}

// IsDebezium reports whether f is FormatDebezium.
func (f Format) IsDebezium() bool { return f.Name == FormatDebezium }

// Validate checks f and says what is wrong in words.
func (f Format) Validate() error {
	switch f.Name {
	case "", FormatSluice:
		if f.Schemas || f.DecimalHandling != "" || f.TimePrecision != "" || f.BigintUnsigned != "" || f.BinaryHandling != "" || f.TransactionMetadata || f.SkippedOperations != "" || f.ReplaceNullWithDefault != "" || f.SchemaComments {
			return fmt.Errorf("format %s has no options (schemas, the *.handling.mode options, provide.transaction.metadata, skipped.operations, replace.null.with.default and include.schema.comments belong to format debezium)", FormatSluice)
		}
		return nil
	case FormatDebezium:
		return f.validateDebezium()
	}
	return fmt.Errorf("format %q: want %s or %s", f.Name, FormatSluice, FormatDebezium)
}

// TruncateEvents reports whether a TRUNCATE TABLE is written as
// Debezium's op "t" event (format debezium with skipped.operations
// "none").
func (f Format) TruncateEvents() bool {
	return f.IsDebezium() && !skipsTruncate(f.SkippedOperations)
}

// WithFormat selects the format the Encoder writes (default FormatSluice).
// f must be valid (Format.Validate).
func WithFormat(f Format) Option {
	return func(e *Encoder) { e.format = f }
}

// Format returns the format the encoder writes.
func (e *Encoder) Format() Format { return e.format }

// AppendKey appends the message key of ch in the encoder's format: for
// FormatSluice AppendChangeKey's object ({"id":1}); for FormatDebezium the
// key struct Debezium writes, {"id":1} with the primary-key columns in key
// order, each value encoded as in the event (wrapped in
// {"schema":{... "name":"<source>.<db>.<table>.Key"},"payload":{...}} when
// Schemas is set). A table without a primary key has a null key in
// Debezium: AppendKey then appends nothing, and the caller sends the
// record without a key (JsonConverter writes no bytes for a null key,
// with or without schemas). The key of a DDL change in format debezium is
// its schema-change event's, {"databaseName":"db"} (schema
// io.debezium.connector.mysql.SchemaChangeKey).
func (e *Encoder) AppendKey(dst []byte, ch *binlog.Change) []byte {
	if e.dbz != nil {
		if ch.Op == binlog.OpDDL {
			return e.appendDbzSchemaChangeKey(dst, ch)
		}
		return e.appendDebeziumKey(dst, ch)
	}
	return AppendChangeKey(dst, ch)
}
