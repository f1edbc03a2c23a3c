package main

import (
	"strings"
	"testing"
)

// TestSnapshotWhereNames: --where names its table as db.table, a name with
// a '.' or '=' in backticks; the key is the table's text form
// (sqlstmt.TableText), the condition all after the first '=' outside
// backticks.
func TestSnapshotWhereNames(t *testing.T) {
	o := snapshotOpts{mode: "initial", where: []string{
		"shop.orders=id > 10",
		"oh.Ünï cöde-tbl=`a b` = 'x'",
		"`my.db`.`a=b`=note = '`'",
		"`名前 db`.`select`=`select` >= 2",
	}}
	cfg, err := o.config()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"shop.orders":     "id > 10",
		"oh.Ünï cöde-tbl": "`a b` = 'x'",
		"`my.db`.a=b":     "note = '`'",
		"名前 db.select":    "`select` >= 2",
	}
	for k, v := range want {
		if cfg.Where[k] != v {
			t.Errorf("--where of %s: %q, want %q (all: %q)", k, cfg.Where[k], v, cfg.Where)
		}
	}
	for _, bad := range []string{"shop=id > 1", "shop.orders=", "`my.db.orders=x"} {
		o := snapshotOpts{mode: "initial", where: []string{bad}}
		if _, err := o.config(); err == nil || !strings.Contains(err.Error(), "--where") {
			t.Errorf("--where %q: %v, want an error", bad, err)
		}
	}
}
