package binlog

import (
	"strings"

	"vitess.io/vitess/go/vt/schemadiff"
	"vitess.io/vitess/go/vt/sqlparser"
)

// TableDef is what a table's definition says beyond Table (which holds
// what decoding rows needs): the declared types, defaults, comments and
// the table's default character set, as the schema history holds the
// definition (the server's SHOW CREATE TABLE, normalised). It describes a
// table in a schema-change event (Debezium's tableChanges).
type TableDef struct {
	// Charset is the table's default character set.
	Charset string
	// Comment is the table's comment; nil without one.
	Comment *string
	// Columns are the columns in table order, as Table.Columns.
	Columns []ColumnDef
}

// ColumnDef is one column's definition.
type ColumnDef struct {
	Name string
	// Type is the declared type in upper case ("INT", "VARCHAR",
	// "ENUM"), with " UNSIGNED" / " UNSIGNED ZEROFILL" when declared so.
	Type string
	// Length and Scale are the declared length, precision or fractional
	// digits (VARCHAR(255), DECIMAL(10,2), DATETIME(3)); -1 when not
	// declared.
	Length, Scale int
	// AutoIncrement and Generated are Debezium's autoIncremented and
	// generated: both set for an AUTO_INCREMENT column and one with ON
	// UPDATE CURRENT_TIMESTAMP, neither for a generated (AS ...) column,
	// as Debezium's parser marks them.
	AutoIncrement bool
	Generated     bool
	// Comment is the column's comment; nil without one.
	Comment *string
	// Default is the default value's text (a literal without quotes, or
	// the expression); nil when the column has no default or DEFAULT NULL.
	Default *string
	// HasDefault is set when the definition has a DEFAULT clause.
	HasDefault bool
}

// tableDef reads the definition of a schemadiff entity (dbCharset: the
// database's default character set).
func tableDef(ent *schemadiff.CreateTableEntity, dbCharset string) *TableDef {
	spec := ent.CreateTable.TableSpec
	d := &TableDef{Charset: entityCharset(ent, dbCharset)}
	for _, o := range spec.Options {
		if strings.EqualFold(o.Name, "comment") && o.Value != nil {
			c := o.Value.Val
			d.Comment = &c
		}
	}
	for _, cd := range spec.Columns {
		c := ColumnDef{Name: cd.Name.String(), Type: strings.ToUpper(cd.Type.Type), Length: -1, Scale: -1}
		switch {
		case cd.Type.Zerofill:
			c.Type += " UNSIGNED ZEROFILL"
		case cd.Type.Unsigned:
			c.Type += " UNSIGNED"
		}
		if cd.Type.Length != nil {
			c.Length = *cd.Type.Length
		}
		if cd.Type.Scale != nil {
			c.Scale = *cd.Type.Scale
		}
		if o := cd.Type.Options; o != nil {
			// As Debezium's parser marks them: AUTO_INCREMENT and ON
			// UPDATE CURRENT_TIMESTAMP are both autoIncremented and
			// generated; a generated (AS ...) column is neither.
			c.AutoIncrement = o.Autoincrement || o.OnUpdate != nil
			c.Generated = c.AutoIncrement
			if o.Comment != nil {
				s := o.Comment.Val
				c.Comment = &s
			}
			c.Default, c.HasDefault = columnDefault(cd)
			// A BIT literal's digits, as Debezium writes b'101': "101".
			if l, ok := o.Default.(*sqlparser.Literal); ok && l.Type == sqlparser.BitNum && c.Default != nil {
				s := strings.TrimPrefix(*c.Default, "0b")
				c.Default = &s
			}
		}
		d.Columns = append(d.Columns, c)
	}
	return d
}

// columnDefault is a column definition's default as Debezium's parser
// gives its defaultValueExpression: a literal's text (a character set
// introducer dropped, as Debezium's default value converter drops it),
// "1970-01-01 00:00:00" for CURRENT_TIMESTAMP (as its parser writes it),
// nil for NULL, no default or an expression; has says there is a DEFAULT
// clause.
func columnDefault(cd *sqlparser.ColumnDefinition) (def *string, has bool) {
	o := cd.Type.Options
	if o == nil || o.Default == nil {
		return nil, false
	}
	e := o.Default
	if in, ok := e.(*sqlparser.IntroducerExpr); ok {
		e = in.Expr
	}
	var s string
	switch v := e.(type) {
	case *sqlparser.Literal:
		s = v.Val
	case *sqlparser.UnaryExpr:
		s = sqlparser.String(v)
	case *sqlparser.CurTimeFuncExpr:
		s = "1970-01-01 00:00:00"
	case sqlparser.BoolVal:
		s = "0"
		if v {
			s = "1"
		}
	}
	if s != "" || isEmptyLiteral(e) {
		return &s, true
	}
	return nil, true
}

func isEmptyLiteral(e sqlparser.Expr) bool {
	l, ok := e.(*sqlparser.Literal)
	return ok && l.Val == ""
}
