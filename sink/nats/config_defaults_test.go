package nats

import "testing"

// TestConfigDefaultTags: the default tags that withDefaults applies are
// the Default* constants Go callers see; the stream and the schema-change
// subject, computed, are left to New.
func TestConfigDefaultTags(t *testing.T) {
	d := Config{}.withDefaults()
	if d.Name != DefaultName || d.Subject != DefaultSubject || d.DuplicateWindow != DefaultDuplicateWindow || d.Replicas != DefaultReplicas ||
		d.ConnectTimeout != DefaultConnectTimeout || d.AckTimeout != DefaultAckTimeout || d.MaxPending != DefaultMaxPending {
		t.Errorf("defaults from the tags differ from the constants: %+v", d)
	}
	if d.Stream != "" || d.SchemaChangeSubject != "" {
		t.Errorf("computed defaults were set: stream %q, schema_change_subject %q", d.Stream, d.SchemaChangeSubject)
	}
}
