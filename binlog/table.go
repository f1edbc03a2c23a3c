package binlog

import (
	"fmt"
	"strings"

	"github.com/sluice-cdc/sluice/internal/sqlstmt"
)

// Column describes one column of a table as the binlog needs it to decode
// row images, plus what a consumer needs to render it.
type Column struct {
	Name string
	// Type is the column's real MySQL type code (mysql.MYSQL_TYPE_*): for
	// ENUM and SET stored as MYSQL_TYPE_STRING it is MYSQL_TYPE_ENUM or
	// MYSQL_TYPE_SET.
	Type byte
	// BinlogType is the type code as written in the TABLE_MAP event.
	BinlogType byte
	// Meta is the TABLE_MAP metadata of the column (length, precision,
	// fractional digits, pack length...).
	Meta     uint16
	Unsigned bool
	Nullable bool
	// Charset is the character set name ("utf8mb4", "latin1", "binary"...);
	// empty for non-character types.
	Charset string
	// Collation is the collation id, 0 when unknown.
	Collation uint64
	// Enum and Set hold the member names of ENUM and SET columns.
	Enum []string
	Set  []string
	// Kind is the kind of Value this column decodes to.
	Kind Kind
	// Frac is the number of fractional-second digits of a temporal column,
	// or the scale of a DECIMAL.
	Frac int
	// Precision is the precision of a DECIMAL.
	Precision int
	// BitLen is the number of bits of a BIT column.
	BitLen int
	// Point marks a spatial column declared POINT (the binlog's
	// GEOMETRY_TYPE metadata, information_schema's DATA_TYPE, the history's
	// declared type); false for every other spatial type and when unknown.
	Point bool
	// FloatMD marks a FLOAT declared with a scale, FLOAT(M,D)
	// (information_schema's COLUMN_TYPE, the history's declared type): its
	// values are rounded to D digits, and Debezium writes it as a double
	// (the float widened). False for a plain FLOAT and when unknown.
	FloatMD bool
	// Comment is the column's COMMENT (the history's definition, SHOW
	// CREATE TABLE); "" without one. Format debezium's
	// include.schema.comments writes it as the field schema's "doc".
	Comment string
	// UUID marks a MariaDB UUID column (information_schema's DATA_TYPE,
	// the history's declared type): logged as BINARY(16), its bytes in
	// the order the server stores them; Debezium's MariaDB connector
	// writes it as the UUID's text. False when unknown.
	UUID bool
	// Default is the column's default as Debezium's defaultValueExpression
	// (ColumnDef.Default): a literal's text, "1970-01-01 00:00:00" for
	// CURRENT_TIMESTAMP; nil without a default, for DEFAULT NULL or an
	// expression, and when the definition could not be read.
	Default *string

	// jsonText marks a MariaDB JSON column: logged as LONGTEXT, holding JSON.
	jsonText bool
}

// Table is one table's definition as seen by the reader: from the
// TABLE_MAP event's optional metadata when the server writes it, else from
// information_schema.
type Table struct {
	Schema  string
	Name    string
	Columns []Column
	// PrimaryKey holds the indexes in Columns of the primary key, in key order.
	PrimaryKey []int
	// ID is the server's table id in the binlog; it changes after DDL.
	ID uint64
	// FromBinlog is true when names and types came from the binlog's own
	// metadata (binlog_row_metadata=FULL), false when from information_schema.
	FromBinlog bool
}

// QualifiedName returns "schema.table" as sluice writes a table in its
// settings, checkpoints and messages (sqlstmt.TableText: a name with a
// '.', a ',' or a backtick in backticks).
func (t *Table) QualifiedName() string { return sqlstmt.TableText(t.Schema, t.Name) }

// ColumnIndex returns the index of the named column, or -1.
func (t *Table) ColumnIndex(name string) int {
	for i := range t.Columns {
		if strings.EqualFold(t.Columns[i].Name, name) {
			return i
		}
	}
	return -1
}

func (t *Table) String() string {
	return fmt.Sprintf("%s (%d columns)", t.QualifiedName(), len(t.Columns))
}
