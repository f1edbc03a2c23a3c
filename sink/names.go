package sink

import (
	"fmt"

	"github.com/sluice-cdc/sluice/internal/sqlstmt"
)

// Names is a sink's record of which table each name it rendered from a
// Template stands for (a Kafka topic, a NATS subject, a Redis key), so
// that two tables never share a name by accident. A sink's rules for names
// can map different tables to one name (Kafka's '_' for a space and for
// '_' itself; a Redis key "{db}.{table}" for db "a.b", table "c" and for
// db "a", table "b.c"); Claim refuses the second. Tables that differ only
// in what the template leaves out share its name on purpose ("{table}" for
// the shards of one table, a template without placeholders for every
// table) and are not refused. Not safe for concurrent use: a sink claims
// from its one writing goroutine.
type Names struct {
	tmpl  Template
	what  string // "topic", "subject", "key"
	owner map[string]nameOwner
	uses  [4]bool // by Field: which fields the template names
}

// nameOwner is the table a name was first rendered for: all of it, and
// key, what of it the template names.
type nameOwner struct{ full, key tableRef }

type tableRef struct{ source, db, table string }

// NewNames returns an empty record for names rendered from t; what names
// them in errors ("topic").
func NewNames(t Template, what string) *Names {
	n := &Names{tmpl: t, what: what, owner: map[string]nameOwner{}}
	for _, p := range t {
		n.uses[p.Field] = true
	}
	return n
}

// Claim records that name was rendered for (source, db, table). It
// returns an error wrapping ErrPermanent when name was rendered before for
// another table that the template tells apart from this one.
func (n *Names) Claim(name, source, db, table string) error {
	o := nameOwner{full: tableRef{source, db, table}, key: tableRef{source, db, table}}
	if !n.uses[FieldSource] {
		o.key.source = ""
	}
	if !n.uses[FieldDB] {
		o.key.db = ""
	}
	if !n.uses[FieldTable] {
		o.key.table = ""
	}
	prev, ok := n.owner[name]
	if !ok {
		n.owner[name] = o
		return nil
	}
	if prev.key == o.key {
		return nil
	}
	return fmt.Errorf("the tables %s and %s both map to the %s %q, and two tables may share a %s only when the template leaves out what tells them apart: "+
		"give them %ss of their own with a template that keeps them apart (e.g. one with {source}, {db} and {table}), rename one of the tables, or leave one out of source.tables: %w",
		n.describe(prev.full), n.describe(o.full), n.what, name, n.what, n.what, ErrPermanent)
}

// describe names the table of o, with its source when the template
// names sources.
func (n *Names) describe(o tableRef) string {
	s := sqlstmt.QuoteName(o.db, o.table)
	if n.uses[FieldSource] {
		s += " of source " + o.source
	}
	return s
}
