package snapshot

import (
	"testing"
)

func TestNormalizeGTIDs(t *testing.T) {
	in := "3e11fa47-71ca-11e1-9e33-c80aa9429562:1-5,\n4e11fa47-71ca-11e1-9e33-c80aa9429562:1-3:7"
	if got, want := normalizeGTIDs(in), "3e11fa47-71ca-11e1-9e33-c80aa9429562:1-5,4e11fa47-71ca-11e1-9e33-c80aa9429562:1-3:7"; got != want {
		t.Errorf("normalizeGTIDs: %q", got)
	}
}
