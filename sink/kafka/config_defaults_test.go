package kafka

import (
	"slices"
	"testing"
)

// TestConfigDefaultTags: the default tags that withDefaults applies are
// the Default* constants Go callers see, and the enum tags are the
// accepted values.
func TestConfigDefaultTags(t *testing.T) {
	d := Config{}.withDefaults()
	if d.Name != DefaultName || d.Topic != DefaultTopic || d.ClientID != DefaultClientID || d.Compression != DefaultCompression ||
		d.MaxRecordBytes != DefaultMaxRecordBytes || d.RequestTimeout != DefaultRequestTimeout || d.TransactionTopic != DefaultTransactionTopic ||
		d.SchemaChangeTopic != DefaultSchemaChangeTopic || d.HeartbeatTopicsPrefix != DefaultHeartbeatTopicsPrefix {
		t.Errorf("defaults from the tags differ from the constants: %+v", d)
	}
	if d.CreateTopics == nil || !*d.CreateTopics || d.IncludeSchemaChanges == nil || !*d.IncludeSchemaChanges || d.Tombstones == nil || *d.Tombstones {
		t.Errorf("create_topics %v, include.schema.changes %v, tombstones %v: want true, true, false", d.CreateTopics, d.IncludeSchemaChanges, d.Tombstones)
	}
	if d.TransactionalID != "" {
		t.Errorf("transactional_id %q: it is the pipeline's, set by New", d.TransactionalID)
	}
	if !slices.Equal(Compressions, []string{"none", "gzip", "snappy", "lz4", "zstd"}) || !slices.Equal(SASLMechanisms, []string{"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"}) {
		t.Errorf("enums: compressions %v, SASL mechanisms %v", Compressions, SASLMechanisms)
	}
	for _, c := range Compressions {
		if err := (&Config{Brokers: []string{"k:9092"}, Compression: c}).Validate(); err != nil {
			t.Errorf("compression %s: %v", c, err)
		}
	}
}
