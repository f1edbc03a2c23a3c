package binlog

import (
	"testing"

	"github.com/sluice-cdc/sluice/position"
)

// TestSyncSet: the set the binlog dump starts from is the reader's GTID
// state, transaction for transaction, for sets of many servers and
// domains, with gaps, and after Add; the zero state gives none.
func TestSyncSet(t *testing.T) {
	for _, tc := range []struct {
		flavor position.Flavor
		text   string
		add    string
	}{
		{position.MySQL, "", "3e11fa47-71ca-11e1-9e33-c80aa9429562:1"},
		{position.MySQL, "3e11fa47-71ca-11e1-9e33-c80aa9429562:1-5:7-9,4e11fa47-71ca-11e1-9e33-c80aa9429562:1-100", "3e11fa47-71ca-11e1-9e33-c80aa9429562:6"},
		{position.MariaDB, "", "0-1-1"},
		{position.MariaDB, "0-1-100,1-2-7,5-3-9", "1-2-8"},
	} {
		g, err := position.ParseGTIDSet(tc.flavor, tc.text)
		if err != nil {
			t.Fatal(err)
		}
		for range 2 {
			set, err := syncSet(g)
			if err != nil || set == nil {
				t.Fatalf("%s %q: %v, %v", tc.flavor, g, set, err)
			}
			if set.String() != g.String() {
				t.Errorf("%s: syncSet(%q) = %q", tc.flavor, g, set)
			}
			if err := g.Add(tc.add); err != nil {
				t.Fatal(err)
			}
		}
	}
	if set, err := syncSet(position.GTIDSet{}); set != nil || err != nil {
		t.Errorf("syncSet of the zero set: %v, %v", set, err)
	}
}
