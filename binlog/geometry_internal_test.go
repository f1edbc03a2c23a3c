package binlog

import (
	"context"
	"testing"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/go-mysql-org/go-mysql/replication"
)

// TestGeometryTypeMetadata: a TABLE_MAP event's GEOMETRY_TYPE metadata
// (binlog_row_metadata=FULL) marks its POINT columns, and it wins over a
// definition from elsewhere that says otherwise.
func TestGeometryTypeMetadata(t *testing.T) {
	tm := &replication.TableMapEvent{
		TableID: 7, Schema: []byte("d"), Table: []byte("t"), ColumnCount: 4,
		ColumnType: []byte{mysql.MYSQL_TYPE_LONG, mysql.MYSQL_TYPE_GEOMETRY, mysql.MYSQL_TYPE_GEOMETRY, mysql.MYSQL_TYPE_GEOMETRY},
		ColumnMeta: []uint16{0, 4, 4, 4},
		NullBitmap: []byte{0x0e},
		ColumnName: [][]byte{[]byte("id"), []byte("pt"), []byte("g"), []byte("ls")},
		// GEOMETRY_TYPE lists the spatial columns in order: POINT, GEOMETRY, LINESTRING.
		GeometryType: []uint64{1, 0, 2},
	}
	for _, tc := range []struct {
		name string
		src  SchemaSource
	}{
		{"binlog only", nil},
		{"information_schema says otherwise", staticSource{&Table{Schema: "d", Name: "t", Columns: []Column{
			{Name: "id", Type: mysql.MYSQL_TYPE_LONG}, {Name: "pt", Type: mysql.MYSQL_TYPE_GEOMETRY},
			{Name: "g", Type: mysql.MYSQL_TYPE_GEOMETRY, Point: true}, {Name: "ls", Type: mysql.MYSQL_TYPE_GEOMETRY}}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newSchemaCache(tc.src)
			c.mariaDB = true // asks the source too, as for MariaDB's JSON
			tb, err := c.build(context.Background(), tm, eventPos{})
			if err != nil {
				t.Fatal(err)
			}
			for i, want := range []bool{false, true, false, false} {
				if col := tb.Columns[i]; col.Point != want || col.Kind != []Kind{KindInt, KindGeometry, KindGeometry, KindGeometry}[i] {
					t.Errorf("column %s: Point %v kind %s, want Point %v", col.Name, col.Point, col.Kind, want)
				}
			}
		})
	}
}

type staticSource struct{ t *Table }

func (s staticSource) Columns(context.Context, string, string) (*Table, error) { return s.t, nil }

func (staticSource) Invalidate(string, string) {}
