package binlog_test

import (
	"strings"
	"testing"

	"github.com/sluice-cdc/sluice/binlog"
)

// Both servers' current types are all readable, so a type the snapshot
// does not know (a future server's, or a plugin's) is refused by
// Column.SetSQLType (and snapshot.Describe wraps that in
// ErrUnsupportedType).
func TestSetSQLTypeRefusesUnknownType(t *testing.T) {
	for _, mariaDB := range []bool{true, false} {
		var col binlog.Column
		err := col.SetSQLType(mariaDB, "xmltype", "xmltype", 0, 0, 0)
		if err == nil || !strings.Contains(err.Error(), "xmltype is not supported") {
			t.Errorf("mariaDB=%v: SetSQLType of an unknown type: %v", mariaDB, err)
		}
	}
	var col binlog.Column
	if err := col.SetSQLType(true, "inet6", "inet6", 0, 0, 0); err != nil {
		t.Errorf("MariaDB INET6 is read by the snapshot: %v", err)
	}
}
