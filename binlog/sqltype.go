package binlog

import (
	"fmt"
	"strings"

	"github.com/go-mysql-org/go-mysql/mysql"
)

// SetSQLType sets Type, Kind and the type's attributes of a column from
// its SQL type as information_schema.COLUMNS describes it: DATA_TYPE
// (lower case), COLUMN_TYPE, NUMERIC_PRECISION (BIT's width),
// NUMERIC_SCALE and DATETIME_PRECISION. c.Charset holds
// CHARACTER_SET_NAME. The snapshot describes its tables with it, and the
// schema history the tables it knows (History.Table).
// mariaDB says which server's binlog metadata to match: MariaDB's gives
// GEOMETRY the binary character set, MySQL's none; VECTOR has it on both.
func (col *Column) SetSQLType(mariaDB bool, dataType, colType string, prec, scale, dtPrec int) error {
	col.Unsigned = strings.Contains(strings.ToLower(colType), "unsigned")
	text := func(typ byte) {
		col.Type = typ
		if col.Charset == "" { // BINARY, VARBINARY and BLOB have no character set
			col.Charset, col.Collation = "binary", collationBinary
		}
		col.Kind = KindString
		if col.Charset == "binary" {
			col.Kind = KindBytes
		}
	}
	integer := func(typ byte) {
		col.Type, col.Kind = typ, KindInt
		if col.Unsigned {
			col.Kind = KindUint
		}
	}
	switch dataType {
	case "tinyint":
		integer(mysql.MYSQL_TYPE_TINY)
	case "smallint":
		integer(mysql.MYSQL_TYPE_SHORT)
	case "mediumint":
		integer(mysql.MYSQL_TYPE_INT24)
	case "int", "integer":
		integer(mysql.MYSQL_TYPE_LONG)
	case "bigint":
		integer(mysql.MYSQL_TYPE_LONGLONG)
	case "float":
		col.Type, col.Kind = mysql.MYSQL_TYPE_FLOAT, KindFloat
		col.FloatMD = strings.Contains(colType, ",")
	case "double", "real", "double precision":
		col.Type, col.Kind = mysql.MYSQL_TYPE_DOUBLE, KindDouble
	case "decimal", "numeric":
		col.Type, col.Kind = mysql.MYSQL_TYPE_NEWDECIMAL, KindDecimal
		col.Precision, col.Frac = prec, scale
	case "date":
		col.Type, col.Kind = mysql.MYSQL_TYPE_DATE, KindDate
	case "datetime":
		col.Type, col.Kind, col.Frac = mysql.MYSQL_TYPE_DATETIME2, KindDateTime, dtPrec
	case "timestamp":
		col.Type, col.Kind, col.Frac = mysql.MYSQL_TYPE_TIMESTAMP2, KindTimestamp, dtPrec
	case "time":
		col.Type, col.Kind, col.Frac = mysql.MYSQL_TYPE_TIME2, KindTime, dtPrec
	case "year":
		col.Type, col.Kind = mysql.MYSQL_TYPE_YEAR, KindYear
		col.Unsigned = true // YEAR is stored unsigned, and the binlog flags it so
	case "char", "binary":
		text(mysql.MYSQL_TYPE_STRING)
	case "varchar", "varbinary":
		text(mysql.MYSQL_TYPE_VARCHAR)
	case "tinytext", "text", "mediumtext", "longtext", "tinyblob", "blob", "mediumblob", "longblob":
		text(mysql.MYSQL_TYPE_BLOB)
	case "enum":
		col.Type, col.Kind = mysql.MYSQL_TYPE_ENUM, KindEnum
		col.Enum = ParseMembers(colType)
	case "set":
		col.Type, col.Kind = mysql.MYSQL_TYPE_SET, KindSet
		col.Set = ParseMembers(colType)
		if len(col.Set) > 64 {
			return fmt.Errorf("SET with %d members", len(col.Set))
		}
	case "bit":
		if prec < 1 || prec > 64 {
			return fmt.Errorf("BIT(%d)", prec)
		}
		col.Type, col.Kind, col.BitLen = mysql.MYSQL_TYPE_BIT, KindBit, prec
		col.Unsigned = false
	case "json": // MySQL's binary JSON (MariaDB's JSON is longtext)
		// MySQL logs no character set for it.
		col.Type, col.Kind = mysql.MYSQL_TYPE_JSON, KindJSON
	case "geometry", "point", "linestring", "polygon", "multipoint", "multilinestring",
		"multipolygon", "geometrycollection", "geomcollection":
		col.Type, col.Kind = mysql.MYSQL_TYPE_GEOMETRY, KindGeometry
		col.Point = dataType == "point"
		if mariaDB {
			col.Charset, col.Collation = "binary", collationBinary
		}
	case "vector":
		col.Type, col.Kind = mysql.MYSQL_TYPE_VECTOR, KindVector
		col.Charset, col.Collation = "binary", collationBinary
	case "inet4", "inet6", "uuid":
		// MariaDB's fixed-size binary types: the binlog logs them as
		// BINARY(4) or BINARY(16) of their binary form (the address in
		// network order, the UUID's bytes), which SelectList selects
		// with a cast (SELECT itself gives the text, '::1').
		col.Charset, col.Collation = "binary", collationBinary
		col.UUID = dataType == "uuid"
		text(mysql.MYSQL_TYPE_STRING)
	default:
		// Other plugin types reach the binlog in an internal binary form
		// that SELECT does not return.
		return fmt.Errorf("type %s is not supported", colType)
	}
	if col.Kind != KindString && col.Kind != KindBytes && col.Kind != KindEnum &&
		col.Kind != KindSet && col.Kind != KindGeometry && col.Kind != KindVector {
		col.Charset, col.Collation = "", 0
	}
	return nil
}

// MarkJSONText marks a MariaDB JSON column: a LONGTEXT holding JSON (the
// column has a json_valid check), read as KindJSON and named JSON.
func (col *Column) MarkJSONText() {
	col.jsonText = true
	col.Kind = KindJSON
}
