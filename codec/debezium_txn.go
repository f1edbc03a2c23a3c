package codec

// Debezium's transaction metadata (provide.transaction.metadata) and
// skipped.operations: the transaction topic's records, the id of a
// transaction, and the option's checks.

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/sluice-cdc/sluice/binlog"
	"github.com/sluice-cdc/sluice/internal/jsonstr"
)

// SkipNone and SkipTruncate are the values of skipped.operations sluice
// takes: nothing skipped, or TRUNCATE skipped (Debezium's default; the
// empty string means it too).
const (
	SkipNone     = "none"
	SkipTruncate = "t"
)

// validateSkipped checks skipped.operations: a comma list of Debezium's
// operation codes, or "none". Only "t" may be skipped: skipping c, u or d
// would drop data changes without a trace, which sluice does not do.
func validateSkipped(v string) error {
	if strings.TrimSpace(v) == "" || strings.TrimSpace(v) == SkipNone {
		return nil
	}
	for _, op := range strings.Split(v, ",") {
		switch op = strings.TrimSpace(op); op {
		case SkipTruncate:
		case "c", "u", "d", "r":
			return fmt.Errorf("format %s: skipped.operations %q names %q: sluice does not skip data changes (they would be lost without a trace); take the events and drop them in the consumer, or filter the table out with the source's tables. Only %q (TRUNCATE) or %q can be given",
				FormatDebezium, v, op, SkipTruncate, SkipNone)
		case SkipNone:
			return fmt.Errorf("format %s: skipped.operations %q: %q stands alone, not in a list", FormatDebezium, v, SkipNone)
		default:
			return fmt.Errorf("format %s: skipped.operations %q: %q is not an operation: want %q (TRUNCATE) or %q (Debezium's codes; sluice skips no data change)",
				FormatDebezium, v, op, SkipTruncate, SkipNone)
		}
	}
	return nil
}

// skipsTruncate reports whether a valid skipped.operations skips "t".
func skipsTruncate(v string) bool {
	return strings.TrimSpace(v) != SkipNone
}

// TxnID returns the id Debezium's MySQL and MariaDB connectors give a
// transaction: its GTID ("uuid:N" on MySQL, "domain-server-seq" on
// MariaDB), else "file=<binlog file>,pos=<position>" of where it begins.
func TxnID(t *binlog.Txn) string {
	if t.GTID != "" {
		return t.GTID
	}
	return "file=" + t.Begin.File + ",pos=" + strconv.FormatUint(uint64(t.Begin.Offset), 10)
}

// TxnCount is an entry of a transaction END record's data_collections:
// the events of one table ("db.table") in the transaction.
type TxnCount struct {
	Table string
	Count int64
}

// The schemas of the transaction topic's records (Debezium's
// io.debezium.connector.common.TransactionMetadataKey and
// TransactionMetadataValue, version 1), as JsonConverter writes them.
const (
	dbzTxnKeySchema = `{"type":"struct","fields":[{"type":"string","optional":false,"field":"id"}],` +
		`"optional":false,"name":"io.debezium.connector.common.TransactionMetadataKey","version":1}`
	dbzTxnValueSchema = `{"type":"struct","fields":[` +
		`{"type":"string","optional":false,"field":"status"},` +
		`{"type":"string","optional":false,"field":"id"},` +
		`{"type":"int64","optional":true,"field":"event_count"},` +
		`{"type":"array","items":{"type":"struct","fields":[` +
		`{"type":"string","optional":false,"field":"data_collection"},` +
		`{"type":"int64","optional":false,"field":"event_count"}],` +
		`"optional":true,"name":"event.collection","version":1},"optional":true,"field":"data_collections"},` +
		`{"type":"int64","optional":false,"field":"ts_ms"}` +
		`],"optional":false,"name":"io.debezium.connector.common.TransactionMetadataValue","version":1}`
)

// AppendTxnKey appends the key of a transaction topic record,
// {"id":"<id>"} (with its schema when schemas is set).
func AppendTxnKey(dst []byte, id string, schemas bool) []byte {
	if schemas {
		dst = append(dst, `{"schema":`...)
		dst = append(dst, dbzTxnKeySchema...)
		dst = append(dst, `,"payload":`...)
	}
	dst = append(dst, `{"id":`...)
	dst = jsonstr.AppendJava(dst, id)
	dst = append(dst, '}')
	if schemas {
		dst = append(dst, '}')
	}
	return dst
}

// AppendTxnBegin appends the value of a transaction's BEGIN record:
// {"status":"BEGIN","id":I,"event_count":null,"data_collections":null,
// "ts_ms":T} (with its schema when schemas is set). tsMs is the
// transaction's time in Unix milliseconds.
func AppendTxnBegin(dst []byte, id string, tsMs int64, schemas bool) []byte {
	return appendTxnValue(dst, "BEGIN", id, tsMs, -1, nil, schemas)
}

// AppendTxnEnd appends the value of a transaction's END record:
// {"status":"END","id":I,"event_count":N,"data_collections":[
// {"data_collection":"db.table","event_count":n},...],"ts_ms":T}.
func AppendTxnEnd(dst []byte, id string, tsMs, events int64, tables []TxnCount, schemas bool) []byte {
	return appendTxnValue(dst, "END", id, tsMs, events, tables, schemas)
}

func appendTxnValue(dst []byte, status, id string, tsMs, events int64, tables []TxnCount, schemas bool) []byte {
	if schemas {
		dst = append(dst, `{"schema":`...)
		dst = append(dst, dbzTxnValueSchema...)
		dst = append(dst, `,"payload":`...)
	}
	dst = append(dst, `{"status":"`...)
	dst = append(dst, status...)
	dst = append(dst, `","id":`...)
	dst = jsonstr.AppendJava(dst, id)
	if events < 0 {
		dst = append(dst, `,"event_count":null,"data_collections":null`...)
	} else {
		dst = append(dst, `,"event_count":`...)
		dst = strconv.AppendInt(dst, events, 10)
		dst = append(dst, `,"data_collections":[`...)
		for i, t := range tables {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = append(dst, `{"data_collection":`...)
			dst = jsonstr.AppendJava(dst, t.Table)
			dst = append(dst, `,"event_count":`...)
			dst = strconv.AppendInt(dst, t.Count, 10)
			dst = append(dst, '}')
		}
		dst = append(dst, ']')
	}
	dst = append(dst, `,"ts_ms":`...)
	dst = strconv.AppendInt(dst, tsMs, 10)
	dst = append(dst, '}')
	if schemas {
		dst = append(dst, '}')
	}
	return dst
}

// IsTruncate reports whether ch is a TRUNCATE TABLE statement of one
// table: what AppendTruncate writes as Debezium's op "t" event.
func IsTruncate(ch *binlog.Change) bool {
	return ch.Op == binlog.OpDDL && ch.Table != nil && startsWith(ch.Query, "TRUNCATE")
}

// startsWith reports whether statement q begins with the keywords kws
// (upper case), its leading comments skipped.
func startsWith(q string, kws ...string) bool {
	for _, kw := range kws {
		q = skipSpaceAndComments(q)
		if len(q) < len(kw) || !strings.EqualFold(q[:len(kw)], kw) ||
			len(q) > len(kw) && !strings.ContainsRune(" \t\r\n`", rune(q[len(kw)])) {
			return false
		}
		q = q[len(kw):]
	}
	return true
}
