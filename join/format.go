package join

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"github.com/sluice-cdc/sluice/internal/keyenc"
)

// ErrCorrupt marks state that cannot be decoded: bytes changed on disk, a
// state directory written by an incompatible version, or a bug. The state
// directory has to be restored or removed (the join then starts empty).
var ErrCorrupt = errors.New("join: corrupt state")

func corrupt(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrCorrupt, fmt.Sprintf(format, args...))
}

// Key layout of the Pebble database (one database per join):
//
//	'a' side  join key  event time     → entries: the rows of that key at that time
//	'b' side  event time  join key     → count, size of the entries value (time index)
//	'm' 'o'                            → the operator's meta (JSON)
//	'm' 's'                            → the sink's meta (JSON)
//	'o' outlet  output seq             → an outbox record awaiting delivery
//
// side is 0 (left) or 1 (right); event times are 8 bytes, big-endian, with
// the sign bit flipped so that they sort as signed integers; output seqs are
// 8 bytes big-endian.
const (
	nsEntries = 'a'
	nsIndex   = 'b'
	nsMeta    = 'm'
	nsOutbox  = 'o'

	entriesVersion = 1
	outboxVersion  = 1

	flagMatched = 1 << 0
	knownFlags  = flagMatched
)

var (
	keyOperatorMeta = []byte{nsMeta, 'o'}
	keySinkMeta     = []byte{nsMeta, 's'}
)

func appendTime(dst []byte, t int64) []byte {
	return binary.BigEndian.AppendUint64(dst, uint64(t)^(1<<63))
}

func readTime(b []byte) int64 { return int64(binary.BigEndian.Uint64(b) ^ (1 << 63)) }

// entriesKey is the key of the rows of (key, t) on side s.
func entriesKey(dst []byte, s Side, key []byte, t int64) []byte {
	dst = append(dst, nsEntries, byte(s))
	dst = append(dst, key...)
	return appendTime(dst, t)
}

// indexKey is the time-index key of (t, key) on side s.
func indexKey(dst []byte, s Side, t int64, key []byte) []byte {
	dst = append(dst, nsIndex, byte(s))
	dst = appendTime(dst, t)
	return append(dst, key...)
}

// splitIndexKey returns the event time and join key of a time-index key.
func splitIndexKey(k []byte) (t int64, key []byte, err error) {
	if len(k) < 2+8+1 || k[0] != nsIndex || k[1] > 1 {
		return 0, nil, corrupt("time index key %x is malformed", k)
	}
	key = k[10:]
	if !keyenc.Valid(key) {
		return 0, nil, corrupt("time index key %x holds a malformed join key", k)
	}
	return readTime(k[2:10]), key, nil
}

// splitEntriesKey returns the join key and event time of an entries key.
func splitEntriesKey(k []byte) (key []byte, t int64, err error) {
	if len(k) < 2+1+8 || k[0] != nsEntries || k[1] > 1 {
		return nil, 0, corrupt("entries key %x is malformed", k)
	}
	key = k[2 : len(k)-8]
	if !keyenc.Valid(key) {
		return nil, 0, corrupt("entries key %x holds a malformed join key", k)
	}
	return key, readTime(k[len(k)-8:]), nil
}

func outboxKey(dst []byte, outlet byte, seq uint64) []byte {
	dst = append(dst, nsOutbox, outlet)
	return binary.BigEndian.AppendUint64(dst, seq)
}

// Entry is one stored row: what Add was given, and whether it has joined.
// Its byte slices point into state memory that is valid only during the
// callback that receives it.
type Entry struct {
	// Time is the row's event time in microseconds since the Unix epoch.
	Time int64
	// ID identifies the row for retraction (the sink uses the primary key).
	ID []byte
	// Data is the payload given to Add.
	Data []byte
	// Matched is set once the row has joined with a row of the other side.
	Matched bool
}

// appendEntry appends one entry (without the version byte).
func appendEntry(dst []byte, matched bool, id, data []byte) []byte {
	var f byte
	if matched {
		f |= flagMatched
	}
	dst = append(dst, f)
	dst = binary.AppendUvarint(dst, uint64(len(id)))
	dst = append(dst, id...)
	dst = binary.AppendUvarint(dst, uint64(len(data)))
	return append(dst, data...)
}

// decodeEntries decodes an entries value into dst (reused), whose ID and
// Data point into b.
func decodeEntries(dst []Entry, t int64, b []byte) ([]Entry, error) {
	dst = dst[:0]
	if len(b) == 0 {
		return dst, corrupt("empty entries value")
	}
	if b[0] != entriesVersion {
		return dst, corrupt("entries value has format %d; this sluice reads format %d", b[0], entriesVersion)
	}
	b = b[1:]
	for len(b) > 0 {
		f := b[0]
		if f&^knownFlags != 0 {
			return dst, corrupt("entry flags %#x has unknown bits", f)
		}
		b = b[1:]
		id, rest, err := readBytes(b, "entry id")
		if err != nil {
			return dst, err
		}
		data, rest, err := readBytes(rest, "entry data")
		if err != nil {
			return dst, err
		}
		b = rest
		dst = append(dst, Entry{Time: t, ID: id, Data: data, Matched: f&flagMatched != 0})
	}
	if len(dst) == 0 {
		return dst, corrupt("entries value holds no entry")
	}
	return dst, nil
}

// encodeEntries writes a whole entries value.
func encodeEntries(dst []byte, es []Entry) []byte {
	dst = append(dst, entriesVersion)
	for i := range es {
		dst = appendEntry(dst, es[i].Matched, es[i].ID, es[i].Data)
	}
	return dst
}

// uvarint reads a canonical (shortest) uvarint; k <= 0 when there is none.
func uvarint(b []byte) (n uint64, k int) {
	n, k = binary.Uvarint(b)
	if k > 1 && b[k-1] == 0 {
		return 0, -1 // an overlong encoding: not written by sluice
	}
	return n, k
}

func readBytes(b []byte, what string) (v, rest []byte, err error) {
	n, k := uvarint(b)
	if k <= 0 {
		return nil, nil, corrupt("%s: bad length", what)
	}
	b = b[k:]
	if n > uint64(len(b)) {
		return nil, nil, corrupt("%s: length %d beyond the %d bytes left", what, n, len(b))
	}
	return b[:n:n], b[n:], nil
}

// indexValue is the time-index value: the number of rows at (time, key)
// and the size of their entries value (for the state-size gauges, so that
// eviction of an inner join needs no read of the entries).
func appendIndexValue(dst []byte, count, size int) []byte {
	dst = binary.AppendUvarint(dst, uint64(count))
	return binary.AppendUvarint(dst, uint64(size))
}

func decodeIndexValue(b []byte) (count, size int, err error) {
	c, n := uvarint(b)
	if n <= 0 || c == 0 || c > math.MaxInt32 {
		return 0, 0, corrupt("time index value %x: bad count", b)
	}
	s, m := uvarint(b[n:])
	if m <= 0 || s > math.MaxInt32 || n+m != len(b) {
		return 0, 0, corrupt("time index value %x: bad size", b)
	}
	return int(c), int(s), nil
}

// outboxRecord is a joined (or dead-letter) record waiting for delivery.
// Body is the record's JSON without its closing brace: delivery appends
// the "sluice" block for the epoch that delivers it.
type outboxRecord struct {
	Key       []byte
	DB, Table string
	EventTime int64 // microseconds, 0 when unknown
	Body      []byte
}

func appendOutboxRecord(dst []byte, r *outboxRecord) []byte {
	dst = append(dst, outboxVersion)
	dst = binary.AppendUvarint(dst, uint64(len(r.Key)))
	dst = append(dst, r.Key...)
	dst = binary.AppendUvarint(dst, uint64(len(r.DB)))
	dst = append(dst, r.DB...)
	dst = binary.AppendUvarint(dst, uint64(len(r.Table)))
	dst = append(dst, r.Table...)
	dst = binary.AppendVarint(dst, r.EventTime)
	return append(dst, r.Body...)
}

// decodeOutboxRecord decodes an outbox value; the record's slices point
// into b.
func decodeOutboxRecord(b []byte) (outboxRecord, error) {
	var r outboxRecord
	if len(b) == 0 || b[0] != outboxVersion {
		if len(b) == 0 {
			return r, corrupt("empty outbox record")
		}
		return r, corrupt("outbox record has format %d; this sluice reads format %d", b[0], outboxVersion)
	}
	key, rest, err := readBytes(b[1:], "outbox key")
	if err != nil {
		return r, err
	}
	db, rest, err := readBytes(rest, "outbox db")
	if err != nil {
		return r, err
	}
	table, rest, err := readBytes(rest, "outbox table")
	if err != nil {
		return r, err
	}
	t, n := binary.Varint(rest)
	if n <= 0 || n > 1 && rest[n-1] == 0 {
		return r, corrupt("outbox record: bad event time")
	}
	body := rest[n:]
	if len(body) < 2 || body[0] != '{' {
		return r, corrupt("outbox record body %q is not the start of a JSON object", body)
	}
	r.Key, r.DB, r.Table, r.EventTime, r.Body = key, string(db), string(table), t, body
	return r, nil
}
