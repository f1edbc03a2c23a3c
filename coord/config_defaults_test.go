package coord

import (
	"strings"
	"testing"
)

// TestConfigDefaultTags: the default tags that withDefaults applies are
// the Default* constants Go callers see.
func TestConfigDefaultTags(t *testing.T) {
	d := Config{}.withDefaults()
	if d.Prefix != DefaultPrefix || d.LeaseTTL != DefaultLeaseTTL || d.DialTimeout != DefaultDialTimeout {
		t.Errorf("defaults from the tags differ from the constants: %+v", d)
	}
	if !strings.Contains(d.ID, ":") {
		t.Errorf("id %q: want the computed HOSTNAME:PID", d.ID)
	}
}
