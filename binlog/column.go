package binlog

import (
	"errors"
	"fmt"

	"github.com/go-mysql-org/go-mysql/mysql"
)

// ErrUnsupportedColumn is wrapped by the errors of Column.Resolve: the
// column's binlog type code is unknown, or its TABLE_MAP metadata is not
// valid for the type.
var ErrUnsupportedColumn = errors.New("binlog: unsupported column type")

// Resolve derives the decoding attributes of a column from what the
// TABLE_MAP event says about it: Type, Kind, Frac, Precision and BitLen are
// set from BinlogType, Meta, Unsigned and the character set.
//
// Meta follows the layout go-mysql's TableMapEvent.ColumnMeta uses:
//
//	STRING        real type (first metadata byte) << 8 | length low byte
//	NEWDECIMAL    precision << 8 | scale
//	VARCHAR       maximum length in bytes
//	BIT           whole bytes << 8 | remaining bits
//	BLOB, JSON,   length of the length prefix (1-4)
//	GEOMETRY,
//	VECTOR
//	TIME2,        fractional-second precision (0-6)
//	DATETIME2,
//	TIMESTAMP2
//
// A character column whose Charset is empty gets it from Collation when
// the collation id is known (see CharsetOfCollation). Character columns of
// charset "binary" decode to KindBytes, other character columns (including
// those whose charset is unknown) to KindString. A caller that knows better
// may change Kind after Resolve: for instance MariaDB logs a JSON column as
// a LONGTEXT blob, and setting Kind to KindJSON makes the decoder label its
// text as JSON.
//
// Resolve may be called again after the inputs change; it recomputes every
// derived field.
func (c *Column) Resolve() error {
	c.Type = c.BinlogType
	c.Kind = KindAbsent
	c.Frac, c.Precision, c.BitLen = 0, 0, 0

	switch c.BinlogType {
	case mysql.MYSQL_TYPE_TINY, mysql.MYSQL_TYPE_SHORT, mysql.MYSQL_TYPE_INT24,
		mysql.MYSQL_TYPE_LONG, mysql.MYSQL_TYPE_LONGLONG:
		c.Kind = KindInt
		if c.Unsigned {
			c.Kind = KindUint
		}
	case mysql.MYSQL_TYPE_FLOAT:
		c.Kind = KindFloat
	case mysql.MYSQL_TYPE_DOUBLE:
		c.Kind = KindDouble
	case mysql.MYSQL_TYPE_NEWDECIMAL:
		prec, scale := int(c.Meta>>8), int(c.Meta&0xFF)
		if !validDecimal(prec, scale) {
			return c.badMeta(fmt.Sprintf("DECIMAL(%d,%d) out of range", prec, scale))
		}
		c.Kind, c.Precision, c.Frac = KindDecimal, prec, scale
	case mysql.MYSQL_TYPE_DATE, mysql.MYSQL_TYPE_NEWDATE:
		c.Kind = KindDate
	case mysql.MYSQL_TYPE_DATETIME:
		c.Kind = KindDateTime
	case mysql.MYSQL_TYPE_TIMESTAMP:
		c.Kind = KindTimestamp
	case mysql.MYSQL_TYPE_TIME:
		c.Kind = KindTime
	case mysql.MYSQL_TYPE_DATETIME2, mysql.MYSQL_TYPE_TIMESTAMP2, mysql.MYSQL_TYPE_TIME2:
		if c.Meta > 6 {
			return c.badMeta(fmt.Sprintf("fractional-second precision %d > 6", c.Meta))
		}
		c.Frac = int(c.Meta)
		switch c.BinlogType {
		case mysql.MYSQL_TYPE_DATETIME2:
			c.Kind = KindDateTime
		case mysql.MYSQL_TYPE_TIMESTAMP2:
			c.Kind = KindTimestamp
		default:
			c.Kind = KindTime
		}
	case mysql.MYSQL_TYPE_YEAR:
		c.Kind = KindYear
	case mysql.MYSQL_TYPE_VARCHAR, mysql.MYSQL_TYPE_VAR_STRING:
		c.Kind = c.textKind()
	case mysql.MYSQL_TYPE_STRING:
		real, _ := stringMeta(c.Meta)
		switch real {
		case mysql.MYSQL_TYPE_STRING, mysql.MYSQL_TYPE_VAR_STRING:
			c.Kind = c.textKind()
		case mysql.MYSQL_TYPE_ENUM, mysql.MYSQL_TYPE_SET:
			c.Type = real
			return c.resolveEnumSet()
		default:
			return c.badMeta(fmt.Sprintf("CHAR column with real type %d", real))
		}
	case mysql.MYSQL_TYPE_ENUM, mysql.MYSQL_TYPE_SET:
		return c.resolveEnumSet()
	case mysql.MYSQL_TYPE_BLOB:
		if c.Meta < 1 || c.Meta > 4 {
			return c.badMeta(fmt.Sprintf("length prefix of %d bytes", c.Meta))
		}
		c.Kind = c.textKind()
	case mysql.MYSQL_TYPE_BIT:
		n := int(c.Meta>>8)*8 + int(c.Meta&0xFF)
		if n < 1 || n > 64 {
			return c.badMeta(fmt.Sprintf("BIT(%d)", n))
		}
		c.Kind, c.BitLen = KindBit, n
	case mysql.MYSQL_TYPE_JSON, mysql.MYSQL_TYPE_GEOMETRY, mysql.MYSQL_TYPE_VECTOR:
		if c.Meta < 1 || c.Meta > 4 {
			return c.badMeta(fmt.Sprintf("length prefix of %d bytes", c.Meta))
		}
		switch c.BinlogType {
		case mysql.MYSQL_TYPE_JSON:
			c.Kind = KindJSON
		case mysql.MYSQL_TYPE_GEOMETRY:
			c.Kind = KindGeometry
		default:
			c.Kind = KindVector
		}
	case mysql.MYSQL_TYPE_NULL:
		c.Kind = KindNull
	default:
		return fmt.Errorf("%w: column %q has type code %d (%s), which row events do not carry or sluice does not know",
			ErrUnsupportedColumn, c.Name, c.BinlogType, colTypeName(c.BinlogType))
	}
	return nil
}

func (c *Column) resolveEnumSet() error {
	n := int(c.Meta & 0xFF)
	if c.Type == mysql.MYSQL_TYPE_ENUM {
		if n != 1 && n != 2 {
			return c.badMeta(fmt.Sprintf("ENUM stored in %d bytes", n))
		}
		c.Kind = KindEnum
		return nil
	}
	if n < 1 || n > 8 {
		return c.badMeta(fmt.Sprintf("SET stored in %d bytes", n))
	}
	c.Kind = KindSet
	return nil
}

func (c *Column) badMeta(what string) error {
	return fmt.Errorf("%w: column %q of type %s has invalid metadata 0x%04x: %s",
		ErrUnsupportedColumn, c.Name, colTypeName(c.BinlogType), c.Meta, what)
}

// textKind returns KindBytes for the binary charset, KindString otherwise,
// filling Charset from Collation when it is empty.
func (c *Column) textKind() Kind {
	if c.Charset == "" && c.Collation != 0 {
		c.Charset = CharsetOfCollation(c.Collation)
	}
	if c.Charset == "binary" || c.Collation == collationBinary {
		return KindBytes
	}
	return KindString
}

// validDecimal reports whether DECIMAL(prec, scale) is within what MySQL
// (precision 65, scale 30) and MariaDB (scale 38) accept.
func validDecimal(prec, scale int) bool {
	return prec >= 1 && prec <= 65 && scale >= 0 && scale <= 38 && scale <= prec
}

// maxJSONDecimalDigits is the most digits a MySQL decimal value holds
// (DECIMAL_BUFF_LENGTH groups of nine): what a computed decimal stored in
// a JSON document may carry.
const maxJSONDecimalDigits = 81

// validJSONDecimal reports whether a decimal stored in a JSON document has
// a precision and scale a MySQL decimal value can have.
func validJSONDecimal(prec, scale int) bool {
	return prec >= 1 && prec <= maxJSONDecimalDigits && scale >= 0 && scale <= 38 && scale <= prec
}

// stringMeta splits the metadata of a MYSQL_TYPE_STRING column into the
// real type (STRING, ENUM or SET) and the maximum length in bytes. The
// server stores lengths above 255 by folding bits 8 and 9 of the length
// into bits 4 and 5 of the type byte, inverted.
func stringMeta(meta uint16) (real byte, length int) {
	if meta < 256 {
		return mysql.MYSQL_TYPE_STRING, int(meta)
	}
	b0, b1 := byte(meta>>8), byte(meta)
	if b0&0x30 != 0x30 {
		return b0 | 0x30, int(b1) | int((b0&0x30)^0x30)<<4
	}
	return b0, int(b1)
}

const collationBinary = 63

// CharsetOfCollation returns the character set of a MySQL or MariaDB
// collation id, or "" when the id is unknown. The table covers the ids
// MariaDB 10.11 and MySQL 8 define: the classic ids below 256 (shared by
// both), MySQL 8's utf8mb4_0900 family (255-323), MariaDB's extra ids
// (576-738), its NO PAD collations (1024 + the id of the PAD collation),
// and its UCA 14.0.0 collations of MariaDB 10.10+ (2048-3327, one block of
// 256 ids per character set).
func CharsetOfCollation(id uint64) string {
	switch {
	case id < uint64(len(lowCollations)):
		return lowCollations[id]
	case id >= 101 && id <= 124, id >= 672 && id <= 674:
		return "utf16"
	case id >= 128 && id <= 151, id == 159, id >= 640 && id <= 642:
		return "ucs2"
	case id >= 160 && id <= 183, id >= 736 && id <= 738:
		return "utf32"
	case id >= 192 && id <= 215, id == 223, id >= 576 && id <= 578:
		return "utf8mb3"
	case id >= 224 && id <= 247, id >= 255 && id <= 323, id >= 608 && id <= 610:
		return "utf8mb4"
	case id >= 248 && id <= 250:
		return "gb18030"
	case id >= 1024 && id < 1024+248:
		// MariaDB NO PAD collations: 1024 + the id of the PAD SPACE one,
		// defined only for some of them.
		if !mariadbNoPad[id-1024] {
			return ""
		}
		return CharsetOfCollation(id - 1024)
	case id >= 2048 && id < 2048+5*256:
		// MariaDB uca1400 collations: 2048 + 256*charset + variant.
		return [...]string{"utf8mb3", "utf8mb4", "ucs2", "utf16", "utf32"}[(id-2048)/256]
	}
	return ""
}

// lowCollations maps collation ids 0-99 to their character sets (checked
// against MariaDB 10.11's information_schema.COLLATIONS; 76 is MySQL 8's
// utf8mb3_tolower_ci).
var lowCollations = [100]string{
	1: "big5", 2: "latin2", 3: "dec8", 4: "cp850", 5: "latin1", 6: "hp8", 7: "koi8r", 8: "latin1",
	9: "latin2", 10: "swe7", 11: "ascii", 12: "ujis", 13: "sjis", 14: "cp1251", 15: "latin1",
	16: "hebrew", 18: "tis620", 19: "euckr", 20: "latin7", 21: "latin2", 22: "koi8u", 23: "cp1251",
	24: "gb2312", 25: "greek", 26: "cp1250", 27: "latin2", 28: "gbk", 29: "cp1257", 30: "latin5",
	31: "latin1", 32: "armscii8", 33: "utf8mb3", 34: "cp1250", 35: "ucs2", 36: "cp866",
	37: "keybcs2", 38: "macce", 39: "macroman", 40: "cp852", 41: "latin7", 42: "latin7", 43: "macce",
	44: "cp1250", 45: "utf8mb4", 46: "utf8mb4", 47: "latin1", 48: "latin1", 49: "latin1",
	50: "cp1251", 51: "cp1251", 52: "cp1251", 53: "macroman", 54: "utf16", 55: "utf16",
	56: "utf16le", 57: "cp1256", 58: "cp1257", 59: "cp1257", 60: "utf32", 61: "utf32",
	62: "utf16le", 63: "binary", 64: "armscii8", 65: "ascii", 66: "cp1250", 67: "cp1256",
	68: "cp866", 69: "dec8", 70: "greek", 71: "hebrew", 72: "hp8", 73: "keybcs2", 74: "koi8r",
	75: "koi8u", 76: "utf8mb3", 77: "latin2", 78: "latin5", 79: "latin7", 80: "cp850", 81: "cp852",
	82: "swe7", 83: "utf8mb3", 84: "big5", 85: "euckr", 86: "gb2312", 87: "gbk", 88: "sjis",
	89: "tis620", 90: "ucs2", 91: "ujis", 92: "geostd8", 93: "geostd8", 94: "latin1", 95: "cp932",
	96: "cp932", 97: "eucjpms", 98: "eucjpms", 99: "cp1250",
}

// mariadbNoPad marks the PAD SPACE collation ids whose NO PAD variant
// (id + 1024) MariaDB defines.
var mariadbNoPad = func() (m [248]bool) {
	for _, id := range [...]int{
		1, 3, 4, 6, 7, 8, 9, 10, 11, 12, 13, 16, 18, 19, 22, 24, 25, 26, 28, 30, 32, 33, 35, 36, 37,
		38, 39, 40, 41, 43, 45, 46, 47, 50, 51, 53, 54, 55, 56, 57, 58, 59, 60, 61, 62, 64, 65, 66,
		67, 68, 69, 70, 71, 72, 73, 74, 75, 77, 78, 79, 80, 81, 82, 83, 84, 85, 86, 87, 88, 89, 90,
		91, 92, 93, 95, 96, 97, 98, 101, 123, 128, 150, 160, 182, 192, 214, 224, 246,
	} {
		m[id] = true
	}
	return m
}()

// colTypeName names a MySQL column type code for error messages.
func colTypeName(t byte) string {
	switch t {
	case mysql.MYSQL_TYPE_DECIMAL:
		return "DECIMAL(old)"
	case mysql.MYSQL_TYPE_TINY:
		return "TINYINT"
	case mysql.MYSQL_TYPE_SHORT:
		return "SMALLINT"
	case mysql.MYSQL_TYPE_LONG:
		return "INT"
	case mysql.MYSQL_TYPE_FLOAT:
		return "FLOAT"
	case mysql.MYSQL_TYPE_DOUBLE:
		return "DOUBLE"
	case mysql.MYSQL_TYPE_NULL:
		return "NULL"
	case mysql.MYSQL_TYPE_TIMESTAMP:
		return "TIMESTAMP(old)"
	case mysql.MYSQL_TYPE_LONGLONG:
		return "BIGINT"
	case mysql.MYSQL_TYPE_INT24:
		return "MEDIUMINT"
	case mysql.MYSQL_TYPE_DATE:
		return "DATE"
	case mysql.MYSQL_TYPE_TIME:
		return "TIME(old)"
	case mysql.MYSQL_TYPE_DATETIME:
		return "DATETIME(old)"
	case mysql.MYSQL_TYPE_YEAR:
		return "YEAR"
	case mysql.MYSQL_TYPE_NEWDATE:
		return "NEWDATE"
	case mysql.MYSQL_TYPE_VARCHAR:
		return "VARCHAR"
	case mysql.MYSQL_TYPE_BIT:
		return "BIT"
	case mysql.MYSQL_TYPE_TIMESTAMP2:
		return "TIMESTAMP"
	case mysql.MYSQL_TYPE_DATETIME2:
		return "DATETIME"
	case mysql.MYSQL_TYPE_TIME2:
		return "TIME"
	case mysql.MYSQL_TYPE_VECTOR:
		return "VECTOR"
	case mysql.MYSQL_TYPE_JSON:
		return "JSON"
	case mysql.MYSQL_TYPE_NEWDECIMAL:
		return "DECIMAL"
	case mysql.MYSQL_TYPE_ENUM:
		return "ENUM"
	case mysql.MYSQL_TYPE_SET:
		return "SET"
	case mysql.MYSQL_TYPE_TINY_BLOB:
		return "TINYBLOB"
	case mysql.MYSQL_TYPE_MEDIUM_BLOB:
		return "MEDIUMBLOB"
	case mysql.MYSQL_TYPE_LONG_BLOB:
		return "LONGBLOB"
	case mysql.MYSQL_TYPE_BLOB:
		return "BLOB"
	case mysql.MYSQL_TYPE_VAR_STRING:
		return "VAR_STRING"
	case mysql.MYSQL_TYPE_STRING:
		return "CHAR"
	case mysql.MYSQL_TYPE_GEOMETRY:
		return "GEOMETRY"
	}
	return fmt.Sprintf("type(%d)", t)
}
