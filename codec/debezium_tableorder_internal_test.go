package codec

import (
	"strings"
	"testing"

	"github.com/sluice-cdc/sluice/binlog"
)

// TestDbzTableOrder: a statement's tables in the order Java 17's
// new HashSet<>(tables) iterates them, as Debezium's source block lists
// them; each want was printed by Java 17 for the same names.
func TestDbzTableOrder(t *testing.T) {
	if h := javaStringHash("oracle2.d1"); int32(h) != -2120318457 {
		t.Errorf("hash of oracle2.d1 = %d, Java's -2120318457", int32(h))
	}
	for _, c := range []struct{ ids, want string }{
		{"oracle2.d1,oracle2.d2", "d2,d1"},
		{"app.x1,app.x2", "x1,x2"},
		{"db.a,db.b,db.c,db.orders,db.t_ünï,db.😀x", "😀x,orders,t_ünï,b,c,a"},
		{"s.t1,s.t2,s.t3,s.t4,s.t5,s.t6,s.t7,s.t8,s.t9,s.t10,s.t11", "t11,t10,t9,t6,t5,t8,t7,t2,t1,t4,t3"},
		{"s.t1,s.t2,s.t3,s.t4,s.t5,s.t6,s.t7,s.t8,s.t9,s.t10,s.t11,s.t12,s.t13", "t6,t5,t8,t7,t2,t1,t4,t3,t13,t12,t11,t10,t9"},
	} {
		var tcs []binlog.TableChange
		for _, id := range strings.Split(c.ids, ",") {
			db, table, _ := strings.Cut(id, ".")
			tcs = append(tcs, binlog.TableChange{DB: db, Table: table, Kind: "DROP"})
		}
		if got := strings.Join(dbzTableOrder(tcs), ","); got != c.want {
			t.Errorf("%s: %s, Java's %s", c.ids, got, c.want)
		}
	}
}
