package redis

import "testing"

// TestConfigDefaultTags: the default tags that withDefaults applies are
// the Default* constants Go callers see, and Validate takes exactly the
// modes of the enum tag.
func TestConfigDefaultTags(t *testing.T) {
	d := Config{}.withDefaults()
	if d.Name != DefaultName || d.Mode != DefaultMode || d.Key != DefaultKey || d.DialTimeout != DefaultDialTimeout ||
		d.WriteTimeout != DefaultWriteTimeout || d.MessagesPerScript != DefaultMessagesPerScript || d.DB != 0 || d.WaitReplicas != 0 {
		t.Errorf("defaults from the tags differ from the constants: %+v", d)
	}
	for _, m := range []string{ModeStream, ModeMaterialize} {
		if err := (&Config{Addr: "h:1", Mode: m}).Validate(); err != nil {
			t.Errorf("mode %s: %v", m, err)
		}
	}
	if err := (&Config{Addr: "h:1", Mode: "hash"}).Validate(); err == nil || err.Error() != `mode "hash": must be "stream" or "materialize"` {
		t.Errorf("mode hash: %v", err)
	}
}
