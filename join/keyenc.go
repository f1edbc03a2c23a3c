package join

import (
	"github.com/sluice-cdc/sluice/binlog"
	"github.com/sluice-cdc/sluice/internal/keyenc"
)

// AppendKeyValue appends the join-key encoding of one column value to dst:
// an order-preserving, self-delimiting byte string in which values MySQL
// compares equal across column types are one key (INT 7, DECIMAL 7.00
// and DOUBLE 7; a DATE and its midnight DATETIME), text compared as UTF-8
// bytes (package internal/keyenc, which the row image store shares). col
// supplies the character set of text and the member names of ENUM and SET
// columns; it may be nil. It reports false for SQL NULL and for a column
// missing from the row image: such a key joins nothing.
func AppendKeyValue(dst []byte, col *binlog.Column, v binlog.Value) ([]byte, bool) {
	return keyenc.AppendValue(dst, col, v)
}
