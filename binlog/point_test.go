package binlog_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/sluice-cdc/sluice/binlog"
	"github.com/sluice-cdc/sluice/internal/testenv"
	"github.com/sluice-cdc/sluice/mysqlconn"
	"github.com/sluice-cdc/sluice/position"
)

// TestPointColumn: a column declared POINT is marked Column.Point, and no
// other spatial column is, whether the definition comes from the binlog's
// own metadata (binlog_row_metadata=FULL, GEOMETRY_TYPE), from
// information_schema (MINIMAL) or from the schema history (MINIMAL).
func TestPointColumn(t *testing.T) {
	testenv.ForEachFlavor(t, func(t *testing.T, f position.Flavor) {
		db := startServer(t, f, testenv.Options{RowMetadata: "FULL"})
		exec(t, db, "CREATE DATABASE geo",
			"CREATE TABLE geo.t (id INT PRIMARY KEY, pt POINT, g GEOMETRY, pn POINT NOT NULL, ls LINESTRING, mp MULTIPOINT)")
		tables, _ := binlog.ParseFilter("geo.*")
		hist, start := captureHistory(t, db, f, tables, nil)
		const row = "(%d, ST_GeomFromText('POINT(1 2)'), ST_GeomFromText('POINT(3 4)'), ST_GeomFromText('POINT(5 6)'), " +
			"ST_GeomFromText('LINESTRING(0 0,1 1)'), ST_GeomFromText('MULTIPOINT(1 1)'))"
		exec(t, db, "INSERT INTO geo.t VALUES "+fmt.Sprintf(row, 1))
		exec(t, db, "SET GLOBAL binlog_row_metadata = 'MINIMAL'")
		exec(t, db, "INSERT INTO geo.t VALUES "+fmt.Sprintf(row, 2))
		stop := binlogEnd(t, db)
		want := map[string]bool{"id": false, "pt": true, "g": false, "pn": true, "ls": false, "mp": false}
		check := func(t *testing.T, tb *binlog.Table, from string) {
			t.Helper()
			if len(tb.Columns) != len(want) {
				t.Fatalf("%s: %d columns, want %d", from, len(tb.Columns), len(want))
			}
			for _, c := range tb.Columns {
				if c.Point != want[c.Name] {
					t.Errorf("%s: column %s: Point %v, want %v", from, c.Name, c.Point, want[c.Name])
				}
			}
		}
		for _, tc := range []struct {
			name string
			mod  func(*binlog.Config)
		}{
			{"information_schema", func(c *binlog.Config) {
				src := binlog.NewInfoSchema(func(ctx context.Context) (*mysqlconn.Conn, error) { return db.Conn(ctx) })
				t.Cleanup(func() { src.Close() })
				c.Schema = src
			}},
			{"history", func(c *binlog.Config) { c.History = hist }},
		} {
			t.Run(tc.name, func(t *testing.T) {
				r := newReader(t, db, func(c *binlog.Config) {
					c.Start, c.Stop, c.Tables = start, stop, tables
					tc.mod(c)
				})
				var fromBinlog, fromSource int
				for {
					txn, err := r.Next(timeout(t))
					if errors.Is(err, io.EOF) {
						break
					}
					if err != nil {
						t.Fatal(err)
					}
					for i := range txn.Changes {
						ch := &txn.Changes[i]
						if ch.Op != binlog.OpInsert {
							continue
						}
						if ch.Table.FromBinlog {
							fromBinlog++
							check(t, ch.Table, "binlog metadata")
						} else {
							fromSource++
							check(t, ch.Table, tc.name)
						}
					}
					txn.Release()
				}
				if fromBinlog != 1 || fromSource != 1 {
					t.Fatalf("%d rows described by the binlog's metadata and %d by %s; want 1 and 1", fromBinlog, fromSource, tc.name)
				}
			})
		}
	})
}
