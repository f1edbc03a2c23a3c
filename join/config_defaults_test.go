package join

import "testing"

// TestConfigDefaultTags: the default tags that withDefaults applies are
// the constants the join compares against, and Validate takes every value
// of the enum tags.
func TestConfigDefaultTags(t *testing.T) {
	d := Config{}.withDefaults()
	if d.Type != Inner || d.Late != LateDrop || d.Events != (Events{Updates: UpdatesIgnore, Deletes: DeletesIgnore, Snapshot: SnapshotJoin}) {
		t.Errorf("defaults: %+v", d)
	}
	for _, ty := range []Type{Inner, LeftJoin, RightJoin, FullJoin} {
		c := validConfig()
		c.Type = ty
		if err := c.Validate(); err != nil {
			t.Errorf("type %s: %v", ty, err)
		}
	}
	for _, ev := range []Events{{Updates: UpdatesJoin}, {Deletes: DeletesRetract}, {Snapshot: SnapshotIgnore}} {
		c := validConfig()
		c.Events = ev
		if err := c.Validate(); err != nil {
			t.Errorf("events %+v: %v", ev, err)
		}
	}
}
