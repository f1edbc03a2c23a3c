package binlog

import "testing"

// TestMariaDBNew: the transactions a promoted MariaDB server has that a
// saved GTID state lacks, from its gtid_binlog_state.
func TestMariaDBNew(t *testing.T) {
	for _, tc := range []struct{ saved, state, want string }{
		{"0-1-20", "0-1-20", ""},
		// written since the promotion, in the replicated domain
		{"0-1-20", "0-1-20,0-2-25", "server_id 2 in domain 0, up to 0-2-25"},
		// an errant transaction in a domain of its own
		{"0-1-20", "0-1-20,9-2-1", "domain 9 up to 9-2-1"},
		// more of the saved server's (not delivered yet)
		{"0-1-20", "0-1-23", "0-1-21 to 0-1-23"},
		// another server_id numbered before the saved GTID: shared history
		// of an earlier failover (or an errant transaction without strict
		// mode): not named
		{"0-1-20", "0-2-5,0-1-20", ""},
	} {
		if got := mariaDBNew(tc.saved, tc.state); got != tc.want {
			t.Errorf("mariaDBNew(%q, %q) = %q, want %q", tc.saved, tc.state, got, tc.want)
		}
	}
}
