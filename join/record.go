package join

import (
	"encoding/binary"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/sluice-cdc/sluice/binlog"
	"github.com/sluice-cdc/sluice/codec"
	"github.com/sluice-cdc/sluice/sink"
)

// A row's payload, as the sink stores it in the join state:
//
//	uvarint len(key JSON)  key JSON    the join key as a JSON array: [7] or [7,"eu"]
//	uvarint len(db)        db          the row's database (for the record's DB)
//	side JSON                          the row with where it came from (below)
//
// The side JSON is what a joined record shows for that side:
//
//	{"source":"shop","db":"shop","table":"orders","op":"c","seq":17,
//	 "binlog":{"file":"mysql-bin.000003","pos":4711,"row":0},
//	 "time":"2026-03-04T10:00:00.000000Z","row":{"id":7,"total":"12.50"}}
type payload struct {
	KeyJSON []byte
	DB      []byte
	Side    []byte
}

func appendPayload(dst []byte, p *payload) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(p.KeyJSON)))
	dst = append(dst, p.KeyJSON...)
	dst = binary.AppendUvarint(dst, uint64(len(p.DB)))
	dst = append(dst, p.DB...)
	return append(dst, p.Side...)
}

// decodePayload splits a stored payload; the parts point into b.
func decodePayload(b []byte) (payload, error) {
	var p payload
	key, rest, err := readBytes(b, "row payload key")
	if err != nil {
		return p, err
	}
	db, rest, err := readBytes(rest, "row payload db")
	if err != nil {
		return p, err
	}
	if len(key) < 2 || key[0] != '[' || key[len(key)-1] != ']' {
		return p, corrupt("row payload key %q is not a JSON array", key)
	}
	if len(rest) < 2 || rest[0] != '{' || rest[len(rest)-1] != '}' {
		return p, corrupt("row payload %q is not a JSON object", rest)
	}
	p.KeyJSON, p.DB, p.Side = key, db, rest
	return p, nil
}

// formatMicros writes an event time as RFC 3339 with microseconds, UTC.
func appendMicros(dst []byte, t int64) []byte {
	return time.UnixMicro(t).UTC().AppendFormat(dst, "2006-01-02T15:04:05.000000Z07:00")
}

// appendSide writes the side JSON of a change's row.
func appendSide(dst []byte, m *sink.Message, ch *binlog.Change, row binlog.Row, t int64) []byte {
	dst = append(dst, `{"source":`...)
	dst = codec.AppendString(dst, m.Source)
	dst = append(dst, `,"db":`...)
	dst = codec.AppendString(dst, ch.Table.Schema)
	dst = append(dst, `,"table":`...)
	dst = codec.AppendString(dst, ch.Table.Name)
	dst = append(dst, `,"op":"`...)
	dst = append(dst, ch.Op.Code()...)
	dst = append(dst, `","seq":`...)
	dst = strconv.AppendUint(dst, m.Seq, 10)
	if ch.File != "" {
		dst = append(dst, `,"binlog":{"file":`...)
		dst = codec.AppendString(dst, ch.File)
		dst = append(dst, `,"pos":`...)
		dst = strconv.AppendUint(dst, uint64(ch.Pos), 10)
		dst = append(dst, `,"row":`...)
		dst = strconv.AppendInt(dst, int64(ch.Row), 10)
		dst = append(dst, '}')
	}
	dst = append(dst, `,"time":"`...)
	dst = appendMicros(dst, t)
	dst = append(dst, `","row":`...)
	dst = codec.AppendRow(dst, ch.Table, row)
	return append(dst, '}')
}

// appendJoinedBody writes a joined record without its closing brace (the
// "sluice" block is added on delivery):
//
//	{"join":"orders_payments","key":[7],"left":{...},"right":null
func appendJoinedBody(dst []byte, name []byte, key []byte, left, right []byte) []byte {
	dst = append(dst, `{"join":`...)
	dst = append(dst, name...)
	dst = append(dst, `,"key":`...)
	dst = append(dst, key...)
	dst = append(dst, `,"left":`...)
	if left == nil {
		dst = append(dst, "null"...)
	} else {
		dst = append(dst, left...)
	}
	dst = append(dst, `,"right":`...)
	if right == nil {
		return append(dst, "null"...)
	}
	return append(dst, right...)
}

// Reasons a row goes to the dead-letter sink.
const (
	reasonLate   = "late"    // older than the watermark minus the lateness
	reasonNoTime = "no_time" // no event time (NULL or zero time column)
)

// appendDeadLetterBody writes a dead-letter record without its closing
// brace:
//
//	{"join":"orders_payments","reason":"late","side":"left","watermark":"...","key":[7],"row":{side JSON}
func appendDeadLetterBody(dst, name []byte, reason string, s Side, watermark int64, key, side []byte) []byte {
	dst = append(dst, `{"join":`...)
	dst = append(dst, name...)
	dst = append(dst, `,"reason":"`...)
	dst = append(dst, reason...)
	dst = append(dst, `","side":"`...)
	dst = append(dst, s.String()...)
	dst = append(dst, `","watermark":`...)
	if watermark == math.MinInt64 {
		dst = append(dst, "null"...)
	} else {
		dst = append(dst, '"')
		dst = appendMicros(dst, watermark)
		dst = append(dst, '"')
	}
	dst = append(dst, `,"key":`...)
	if key == nil {
		dst = append(dst, "null"...)
	} else {
		dst = append(dst, key...)
	}
	dst = append(dst, `,"row":`...)
	return append(dst, side...)
}

// appendSluiceBlock ends a record with the "sluice" block, as the pipeline
// ends its messages.
func appendSluiceBlock(dst []byte, seq, epoch uint64, source []byte) []byte {
	dst = append(dst, `,"sluice":{"seq":`...)
	dst = strconv.AppendUint(dst, seq, 10)
	dst = append(dst, `,"epoch":`...)
	dst = strconv.AppendUint(dst, epoch, 10)
	dst = append(dst, `,"source":`...)
	dst = append(dst, source...)
	return append(dst, '}', '}')
}

// eventTimeOf converts a time column's value to microseconds since the
// Unix epoch: DATETIME and DATE as UTC, TIMESTAMP as it is, integers as
// Unix epoch milliseconds. ok is false for NULL, an absent column and zero
// dates; err for a column of another type.
func eventTimeOf(col *binlog.Column, v binlog.Value) (t int64, ok bool, err error) {
	civil := func(d binlog.Date, h, m, s uint8, us uint32) (int64, bool) {
		if d.Year == 0 || d.Month == 0 || d.Day == 0 || d.Month > 12 || d.Day > 31 {
			return 0, false
		}
		days := binlog.DaysFromCivil(int64(d.Year), int(d.Month), int(d.Day))
		return ((days*24+int64(h))*60+int64(m))*60*1e6 + int64(s)*1e6 + int64(us), true
	}
	switch v.Kind() {
	case binlog.KindNull, binlog.KindAbsent:
		return 0, false, nil
	case binlog.KindDateTime:
		dt := v.DateTime()
		t, ok := civil(dt.Date, dt.Hour, dt.Minute, dt.Second, dt.Micro)
		return t, ok, nil
	case binlog.KindDate:
		t, ok := civil(v.Date(), 0, 0, 0, 0)
		return t, ok, nil
	case binlog.KindTimestamp:
		sec, us := v.Timestamp()
		if sec == 0 && us == 0 {
			return 0, false, nil
		}
		return sec*1e6 + int64(us), true, nil
	case binlog.KindInt:
		ms := v.Int()
		if ms > math.MaxInt64/1000 || ms < math.MinInt64/1000 {
			return 0, false, nil
		}
		return ms * 1000, true, nil
	case binlog.KindUint:
		ms := v.Uint()
		if ms > math.MaxInt64/1000 {
			return 0, false, nil
		}
		return int64(ms) * 1000, true, nil
	}
	name := "?"
	if col != nil {
		name = col.Name
	}
	return 0, false, fmt.Errorf("time column %s holds %s values: use a DATETIME, TIMESTAMP, DATE or integer (Unix epoch milliseconds) column, or time: commit", name, v.Kind())
}
