package codec

// This file writes format debezium: what Debezium's MySQL connector (3.6)
// with Kafka Connect's JsonConverter writes as a record's value and key,
// and for a MariaDB source what Debezium's MariaDB connector (3.5) writes
// (dbzConnector). debezium_value.go encodes the column values,
// debezium_schema.go the schema half (schemas.enable=true).

import (
	"bytes"
	"fmt"
	"strconv"

	"github.com/sluice-cdc/sluice/binlog"
	"github.com/sluice-cdc/sluice/internal/jsonstr"
	"github.com/sluice-cdc/sluice/position"
)

// Debezium option values (Format's *Handling fields), as Debezium spells
// them. The empty string means the first, Debezium's default.
const (
	DecimalPrecise = "precise" // decimal.handling.mode: base64 of the unscaled integer, Kafka Connect Decimal
	DecimalString  = "string"  // decimal.handling.mode: the exact digits as a string
	DecimalDouble  = "double"  // decimal.handling.mode: a double

	TimeAdaptiveMicros = "adaptive_time_microseconds" // time.precision.mode: io.debezium.time.*
	TimeConnect        = "connect"                    // time.precision.mode: Kafka Connect's Date, Time, Timestamp

	BigintLong    = "long"    // bigint.unsigned.handling.mode: int64, wrapping above 2^63-1
	BigintPrecise = "precise" // bigint.unsigned.handling.mode: Decimal(20,0)

	BinaryBytes  = "bytes"  // binary.handling.mode: bytes (base64 in JSON)
	BinaryBase64 = "base64" // binary.handling.mode: a base64 string
	BinaryHex    = "hex"    // binary.handling.mode: a lowercase hex string
)

// dbzOpts is a valid Format's Debezium options, resolved.
type dbzOpts struct {
	decimal byte // 'p', 's', 'd'
	connect bool // time.precision.mode=connect
	precise bool // bigint.unsigned.handling.mode=precise
	binary  byte // 'b' (bytes), '6' (base64), 'x' (hex)
	schemas bool
	// keepNull is replace.null.with.default=false.
	keepNull bool
	// comments is include.schema.comments.
	comments bool
}

// validateDebezium checks the Debezium options of f.
func (f Format) validateDebezium() error {
	check := func(opt, val string, allowed ...string) error {
		if val == "" {
			return nil
		}
		for _, a := range allowed {
			if val == a {
				return nil
			}
		}
		q := make([]string, len(allowed))
		for i, a := range allowed {
			q[i] = strconv.Quote(a)
		}
		return fmt.Errorf("format %s: %s is %q: want one of %v (Debezium's values; empty means %s)", FormatDebezium, opt, val, q, allowed[0])
	}
	if err := check("decimal.handling.mode", f.DecimalHandling, DecimalPrecise, DecimalString, DecimalDouble); err != nil {
		return err
	}
	if err := check("time.precision.mode", f.TimePrecision, TimeAdaptiveMicros, TimeConnect); err != nil {
		if f.TimePrecision == "adaptive" || f.TimePrecision == "isostring" || f.TimePrecision == "microseconds" || f.TimePrecision == "nanoseconds" {
			return fmt.Errorf("%w (sluice does not build Debezium's time.precision.mode %s)", err, f.TimePrecision)
		}
		return err
	}
	if err := check("bigint.unsigned.handling.mode", f.BigintUnsigned, BigintLong, BigintPrecise); err != nil {
		return err
	}
	if err := check("binary.handling.mode", f.BinaryHandling, BinaryBytes, BinaryBase64, BinaryHex); err != nil {
		return err
	}
	if err := check("replace.null.with.default", f.ReplaceNullWithDefault, "true", "false"); err != nil {
		return err
	}
	return validateSkipped(f.SkippedOperations)
}

func (f Format) dbzOpts() dbzOpts {
	o := dbzOpts{decimal: 'p', binary: 'b', schemas: f.Schemas}
	switch f.DecimalHandling {
	case DecimalString:
		o.decimal = 's'
	case DecimalDouble:
		o.decimal = 'd'
	}
	o.keepNull = f.ReplaceNullWithDefault == "false"
	o.comments = f.SchemaComments
	o.connect = f.TimePrecision == TimeConnect
	o.precise = f.BigintUnsigned == BigintPrecise
	switch f.BinaryHandling {
	case BinaryBase64:
		o.binary = '6'
	case BinaryHex:
		o.binary = 'x'
	}
	return o
}

// TxnOrder is the "transaction" block of a Debezium event (Debezium's
// provide.transaction.metadata): the transaction's id, the event's place
// among all events of the transaction (TotalOrder, from 1) and among the
// transaction's events of the same table (DataCollectionOrder, from 1).
// The wiring that counts a transaction's events passes it to
// AppendDebeziumChange; without it the block is null.
type TxnOrder struct {
	ID                  string
	TotalOrder          int64
	DataCollectionOrder int64
}

// dbzConnector is what differs between the Debezium connectors format
// debezium writes as: Debezium's MySQL connector for a MySQL source, its
// MariaDB connector (io.debezium.connector.mariadb.MariaDbConnector, the
// one Debezium 3 runs on MariaDB) for a MariaDB source. Their events
// differ in source.connector and in the names of the source block's and
// the schema-change topic's schemas (Debezium 3.5.0, TestDebeziumOracle).
type dbzConnector struct {
	mariaDB bool
	// name is source.connector: "mysql" or "mariadb".
	name string
	// envelopeTail, changeKeySchema and changeValueSchema are the
	// schemas named after the connector (debezium_schema.go,
	// debezium_ddl.go).
	envelopeTail, changeKeySchema, changeValueSchema string
}

func newDbzConnector(name string) *dbzConnector {
	return &dbzConnector{mariaDB: name == "mariadb", name: name, envelopeTail: dbzEnvelopeTail(name),
		changeKeySchema: dbzSchemaChangeKeySchema(name), changeValueSchema: dbzSchemaChangeValueSchema(name)}
}

var dbzMySQL, dbzMariaDB = newDbzConnector("mysql"), newDbzConnector("mariadb")

// dbzState is the Encoder's state for format debezium.
type dbzState struct {
	opts dbzOpts
	// conn is the connector written as: the flavor of the last
	// transaction written (useFlavor), MySQL's before the first.
	conn *dbzConnector
	// prefix is `,"source":{"version":"sluice-V","connector":"mysql","name":"N","ts_ms":`
	// (conn.name for "mysql"), and version the part up to the connector.
	prefix, version []byte
	// cache holds the last source block from "snapshot" up to
	// "sequence", and the key it was built for.
	cache struct {
		key   sourceKey
		valid bool
		bytes []byte
	}
	// src holds the rest of the last source block: from "table" up to
	// "row" (tail), and the commit time's members (times).
	src struct {
		tail      []byte
		commitNs  int64
		times     []byte
		timesText msText
	}
	nowText msText
	// head is the whole source block up to "row", with its leading
	// comma (`,"source":{...,"row":`), for cache.key and the commit time
	// headNs; headOK says it is built.
	head   []byte
	headNs int64
	headOK bool
	// now holds the end of an event for the last millisecond written
	// (see appendClose); op and the µs and ns digits (at us and ns) are
	// rewritten in place for each event.
	now struct {
		ms     int64
		text   []byte
		us, ns int
	}
	tables map[*binlog.Table]*dbzTable
	// name is the source's name (Source.Name).
	name     string
	last     *dbzTable
	scratch  []byte
	scratch2 []byte // a second scratch: a JSON document as Debezium writes it
	// def is the encoded default of the column appendField is writing.
	def []byte
	// snap: the rows being written are snapshot rows (op "r"), which
	// Debezium reads through JDBC rather than from the binlog: a few
	// values differ (appendValue).
	snap bool
}

// initDebezium prepares e for format debezium.
func (e *Encoder) initDebezium(version string) {
	d := &dbzState{opts: e.format.dbzOpts(), tables: map[*binlog.Table]*dbzTable{}}
	d.version = append([]byte(`,"source":{"version":`), jsonstr.AppendJava(nil, "sluice-"+version)...)
	d.name = e.src.Name
	d.setConnector(dbzMySQL)
	e.dbz = d
}

// setConnector makes d write as connector c, dropping what it built for
// another.
func (d *dbzState) setConnector(c *dbzConnector) {
	d.conn = c
	p := append(d.prefix[:0], d.version...)
	p = append(p, `,"connector":`...)
	p = jsonstr.AppendJava(p, c.name)
	p = append(p, `,"name":`...)
	p = jsonstr.AppendJava(p, d.name)
	d.prefix = append(p, `,"ts_ms":`...)
	d.headOK = false
	clear(d.tables)
	d.last = nil
}

// useFlavor makes d write as the connector Debezium runs on txn's server
// (its positions' flavor), when txn says. An encoder serves one source,
// so this changes at most once, at its first transaction; a schema-change
// key written before any transaction (AppendKey) is MySQL's.
func (d *dbzState) useFlavor(txn *binlog.Txn) {
	if txn == nil {
		return
	}
	f := txn.Begin.Flavor
	if f == "" {
		f = txn.End.Flavor
	}
	if f == "" || (f == position.MariaDB) == d.conn.mariaDB {
		return
	}
	if f == position.MariaDB {
		d.setConnector(dbzMariaDB)
	} else {
		d.setConnector(dbzMySQL)
	}
}

// AppendDebeziumChange appends the event of ch in format debezium with an
// explicit source.snapshot marker and, if tx is not nil, the
// "transaction" block. The encoder must have been created with
// WithFormat(Format{Name: FormatDebezium, ...}); with format sluice it is
// AppendSnapshotChange and tx is ignored.
//
// The event is Debezium's envelope as JsonConverter writes it (wrapped in
// {"schema":...,"payload":...} when Format.Schemas is set), as one line
// ending in '\n' (the '\n' is not part of a Kafka record value):
//
//	{"before":{...}|null,"after":{...}|null,"source":{"version":"sluice-V",
//	 "connector":"mysql","name":N,"ts_ms":T,"snapshot":"true|last|false",
//	 "db":D,"sequence":null,"ts_us":T,"ts_ns":T,"table":TB,"server_id":S,
//	 "gtid":G|null,"file":F,"pos":P,"row":R,"thread":N|null,"query":null},
//	 "transaction":null|{"id":I,"total_order":N,"data_collection_order":N},
//	 "op":"c|u|d|r","ts_ms":T,"ts_us":T,"ts_ns":T}
//
// source.ts_ms/ts_us/ts_ns are the commit time (for rows without a
// commit time, snapshot rows, the time of writing, as Debezium does); the
// outer ts_* the time of writing. A DDL change (binlog.OpDDL) is written
// as Debezium's schema-change event (see appendDbzSchemaChange), which
// belongs in the schema-change topic, not in a table's topic: the caller
// routes it (AppendTruncate writes a TRUNCATE as Debezium's op "t" event).
func (e *Encoder) AppendDebeziumChange(dst []byte, txn *binlog.Txn, ch *binlog.Change, snap Snapshot, tx *TxnOrder) []byte {
	if e.dbz == nil {
		return e.appendSluice(dst, txn, ch, snap)
	}
	e.dbz.useFlavor(txn)
	if ch.Op == binlog.OpDDL {
		return e.appendDbzSchemaChange(dst, txn, ch)
	}
	if snap == SnapshotAuto {
		snap = SnapshotFalse
		if ch.Op == binlog.OpRead {
			snap = SnapshotTrue
		}
	}
	var before, after binlog.Row
	var op byte
	switch ch.Op {
	case binlog.OpUpdate:
		before, after, op = ch.Before, ch.After, 'u'
	case binlog.OpDelete:
		before, op = ch.Before, 'd'
	case binlog.OpRead:
		after, op = ch.After, 'r'
	default:
		after, op = ch.After, 'c'
	}
	return e.appendDbzEvent(dst, txn, ch, snap, tx, before, after, op)
}

// AppendTruncate appends Debezium's event for a TRUNCATE TABLE statement
// (Debezium's op "t", written when its skipped.operations does not name
// "t"): before and after null, the table's source block, op "t". ch is the
// DDL change of the statement (binlog.OpDDL with Table naming the table);
// the event belongs in the table's topic, with a null key. With format
// sluice, or for a change without a table, it writes ch as AppendChange
// does.
func (e *Encoder) AppendTruncate(dst []byte, txn *binlog.Txn, ch *binlog.Change, tx *TxnOrder) []byte {
	if e.dbz == nil || ch.Table == nil {
		return e.appendSluice(dst, txn, ch, SnapshotAuto)
	}
	e.dbz.useFlavor(txn)
	return e.appendDbzEvent(dst, txn, ch, SnapshotFalse, tx, nil, nil, 't')
}

func (e *Encoder) appendDbzEvent(dst []byte, txn *binlog.Txn, ch *binlog.Change, snap Snapshot, tx *TxnOrder, before, after binlog.Row, op byte) []byte {
	d := e.dbz
	now := e.nowNano()
	t := d.table(e, ch.Table)
	// The event is written in few pieces, most of them built once: the
	// opening (with the schema half, per table), the rows, the source
	// block up to "row" (per rows event and commit time), the members
	// after "row" (per op), and the closing times (per millisecond).
	d.snap = op == 'r'
	if before == nil {
		dst = append(dst, t.openNull...)
	} else {
		dst = append(dst, t.open...)
		dst = d.appendRow(dst, t, before)
		dst = append(dst, `,"after":`...)
	}
	dst = d.appendRow(dst, t, after)
	d.snap = false
	dst = d.appendSourceHead(dst, e, txn, ch, snap, now)
	dst = strconv.AppendInt(dst, sourceRow(txn, ch), 10)
	thread := sourceThread(txn)
	if tx == nil && thread == 0 {
		return d.appendClose(dst, now, op, true)
	}
	dst = appendThreadQuery(dst, thread)
	if tx == nil {
		dst = append(dst, `,"transaction":null`...)
		return d.appendClose(dst, now, op, false)
	}
	dst = append(dst, `,"transaction":{"id":`...)
	dst = jsonstr.AppendJava(dst, tx.ID)
	dst = append(dst, `,"total_order":`...)
	dst = strconv.AppendInt(dst, tx.TotalOrder, 10)
	dst = append(dst, `,"data_collection_order":`...)
	dst = strconv.AppendInt(dst, tx.DataCollectionOrder, 10)
	dst = append(dst, '}')
	return d.appendClose(dst, now, op, false)
}

// dbzTxnNull is what follows "row"'s value in an event without a
// transaction block, up to op's value.
const dbzTxnNull = `,"thread":null,"query":null},"transaction":null`

// appendClose appends the end of an event: with nullTx the end of the
// source block and the null transaction block (dbzTxnNull); then op,
// the envelope's ts_ms, ts_us and ts_ns for the time of writing now,
// its closing brace (two with schemas: the payload's and the record's)
// and the newline.
func (d *dbzState) appendClose(dst []byte, now int64, op byte, nullTx bool) []byte {
	if now < 1e6 {
		if nullTx {
			dst = append(dst, dbzTxnNull...)
		}
		dst = append(dst, `,"op":"`...)
		dst = append(dst, op, '"')
		dst = appendTimes(dst, `,"ts_ms":`, now, &d.nowText)
		if d.opts.schemas {
			dst = append(dst, '}')
		}
		return append(dst, '}', '\n')
	}
	// c.text is dbzTxnNull `,"op":"?","ts_ms":MS,"ts_us":MS???,"ts_ns":MS??????}\n`
	// for the last millisecond; op and the digits of µs and ns are
	// written in place.
	c := &d.now
	ms, sub := now/1e6, uint64(now%1e6)
	if ms != c.ms || len(c.text) == 0 {
		b := append(c.text[:0], dbzTxnNull...)
		b = append(b, `,"op":"?","ts_ms":`...)
		n := len(b)
		b = strconv.AppendInt(b, ms, 10)
		digits := len(b) - n
		b = append(b, `,"ts_us":`...)
		b = append(b, b[n:n+digits]...)
		c.us = len(b)
		b = append(b, "000"...)
		b = append(b, `,"ts_ns":`...)
		b = append(b, b[n:n+digits]...)
		c.ns = len(b)
		b = append(b, "000000"...)
		if d.opts.schemas {
			b = append(b, '}')
		}
		c.ms, c.text = ms, append(b, '}', '\n')
	}
	const opAt = len(dbzTxnNull + `,"op":"`)
	c.text[opAt] = op
	put3(c.text[c.us:c.us+3], sub/1000)
	put6(c.text[c.ns:c.ns+6], sub)
	if nullTx {
		return append(dst, c.text...)
	}
	return append(dst, c.text[len(dbzTxnNull):]...)
}

// digitPairs holds the two decimal digits of 0..99.
const digitPairs = "00010203040506070809101112131415161718192021222324252627282930313233343536373839404142434445464748495051525354555657585960616263646566676869707172737475767778798081828384858687888990919293949596979899"

// put3 writes n < 1000 into b[:3] as three digits.
func put3(b []byte, n uint64) {
	_ = b[2]
	b[0] = byte('0' + n/100%10)
	p := (n % 100) * 2
	b[1], b[2] = digitPairs[p], digitPairs[p+1]
}

// put6 writes n < 1e6 into b[:6] as six digits.
func put6(b []byte, n uint64) {
	_ = b[5]
	hi, mid, lo := (n/10000%100)*2, (n/100%100)*2, (n%100)*2
	b[0], b[1] = digitPairs[hi], digitPairs[hi+1]
	b[2], b[3] = digitPairs[mid], digitPairs[mid+1]
	b[4], b[5] = digitPairs[lo], digitPairs[lo+1]
}

// appendTimes appends `<msName>ms,"ts_us":us,"ts_ns":ns` for Unix
// nanoseconds ns (floored to ms and µs). The digits of ms are kept in c
// for the next call; those of µs and ns are ms's followed by three and six
// more.
func appendTimes(dst []byte, msName string, ns int64, c *msText) []byte {
	dst = append(dst, msName...)
	if ns < 1e6 {
		dst = strconv.AppendInt(dst, floorDiv(ns, 1e6), 10)
		dst = append(dst, `,"ts_us":`...)
		dst = strconv.AppendInt(dst, floorDiv(ns, 1e3), 10)
		dst = append(dst, `,"ts_ns":`...)
		return strconv.AppendInt(dst, ns, 10)
	}
	ms, sub := ns/1e6, uint64(ns%1e6)
	if ms != c.ms || len(c.text) == 0 {
		c.ms, c.text = ms, strconv.AppendInt(c.text[:0], ms, 10)
	}
	dst = append(dst, c.text...)
	dst = append(dst, `,"ts_us":`...)
	dst = append(dst, c.text...)
	dst = appendPad(dst, sub/1000, 3)
	dst = append(dst, `,"ts_ns":`...)
	dst = append(dst, c.text...)
	return appendPad(dst, sub, 6)
}

// msText caches the decimal digits of a millisecond count.
type msText struct {
	ms   int64
	text []byte
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}

// appendDbzSource writes the "source" member of MySQL's Debezium source
// block.
func (e *Encoder) appendDbzSource(dst []byte, txn *binlog.Txn, ch *binlog.Change, snap Snapshot, now int64) []byte {
	n := len(dst)
	dst = e.dbz.appendSourceHead(dst, e, txn, ch, snap, now)
	copy(dst[n:], dst[n+1:]) // the head's leading comma
	dst = dst[:len(dst)-1]
	dst = strconv.AppendInt(dst, sourceRow(txn, ch), 10)
	return appendThreadQuery(dst, sourceThread(txn))
}

// sourceRow is source.row: the row's index in its rows event, 0 for
// snapshot rows (as Debezium 3.6.1 writes them).
func sourceRow(txn *binlog.Txn, ch *binlog.Change) int64 {
	if txn != nil && txn.Snapshot {
		return 0
	}
	return int64(ch.Row)
}

// sourceThread is source.thread: the connection id of the transaction's
// BEGIN event, as Debezium 3.6.1 fills it for streamed rows; 0 (null) when
// unknown and for snapshot rows.
func sourceThread(txn *binlog.Txn) uint32 {
	if txn == nil || txn.Snapshot {
		return 0
	}
	return txn.Thread
}

// appendThreadQuery ends the source block: `,"thread":N|null,"query":null}`.
func appendThreadQuery(dst []byte, thread uint32) []byte {
	dst = append(dst, `,"thread":`...)
	if thread != 0 {
		dst = strconv.AppendUint(dst, uint64(thread), 10)
	} else {
		dst = append(dst, "null"...)
	}
	return append(dst, `,"query":null}`...)
}

// appendSourceHead writes `,"source":{` and the source block up to and
// including `"row":`.
func (d *dbzState) appendSourceHead(dst []byte, e *Encoder, txn *binlog.Txn, ch *binlog.Change, snap Snapshot, now int64) []byte {
	var (
		commitNs int64
		gtid     string
		serverID = e.src.ServerID
	)
	if txn != nil {
		if !txn.CommitTime.IsZero() {
			commitNs = txn.CommitTime.UnixNano()
			if ch.Op == binlog.OpDDL && commitNs > 0 {
				// Debezium times a statement's events (schema changes,
				// TRUNCATE's op "t") in milliseconds: ts_us and ts_ns
				// are ts_ms's, zero-filled.
				commitNs -= commitNs % 1e6
			}
		}
		gtid = txn.GTID
		if txn.ServerID != 0 {
			serverID = txn.ServerID
		}
	}
	// The members other than the times and "row" depend on key only
	// (rows of one event share them), the times on the commit time only
	// (changes of one transaction share it).
	k := &d.cache.key
	same := d.cache.valid && k.pos == ch.Pos && k.table == ch.Table && k.snap == snap && k.serverID == serverID &&
		k.file == ch.File && k.gtid == gtid && k.schema == ch.Schema
	var key sourceKey
	if !same {
		key = sourceKey{gtid: gtid, serverID: serverID, table: ch.Table, schema: ch.Schema, file: ch.File, pos: ch.Pos, snap: snap}
	}
	if commitNs == 0 {
		// Debezium: a source without a timestamp has the time of
		// writing, new for every event: written in pieces, not kept.
		if !same {
			d.buildSource(key, ch)
		}
		return d.appendSourcePieces(dst, now)
	}
	if same && d.headOK && d.headNs == commitNs {
		return append(dst, d.head...)
	}
	if !same {
		d.buildSource(key, ch)
	}
	d.head = d.appendSourcePieces(d.head[:0], commitNs)
	d.headNs, d.headOK = commitNs, true
	return append(dst, d.head...)
}

// buildSource keeps the source block's members that depend on key: from
// "snapshot" to "sequence" (cache.bytes) and from "table" to "row"
// (src.tail).
func (d *dbzState) buildSource(key sourceKey, ch *binlog.Change) {
	b := d.cache.bytes[:0]
	b = append(b, `,"snapshot":`...)
	if int(key.snap) < len(dbzSnapshotText) {
		b = append(b, dbzSnapshotText[key.snap]...)
	} else {
		b = append(b, `"false"`...)
	}
	b = append(b, `,"db":`...)
	b = jsonstr.AppendJava(b, changeDB(ch))
	b = append(b, `,"sequence":null`...)
	d.cache.bytes = b
	t := d.src.tail[:0]
	t = append(t, `,"table":`...)
	if ch.Table != nil {
		t = jsonstr.AppendJava(t, ch.Table.Name)
	} else {
		t = append(t, "null"...)
	}
	t = append(t, `,"server_id":`...)
	t = strconv.AppendUint(t, uint64(key.serverID), 10)
	t = append(t, `,"gtid":`...)
	if key.gtid != "" {
		t = jsonstr.AppendJava(t, key.gtid)
	} else {
		t = append(t, "null"...)
	}
	t = append(t, `,"file":`...)
	t = jsonstr.AppendJava(t, ch.File)
	t = append(t, `,"pos":`...)
	t = strconv.AppendUint(t, uint64(ch.Pos), 10)
	d.src.tail = append(t, `,"row":`...)
	d.cache.key, d.cache.valid = key, true
	d.headOK = false
}

// appendSourcePieces writes `,"source":{` up to `"row":` from the kept
// members and the times of commitNs (Debezium's order: ts_ms, snapshot,
// db, sequence, ts_us, ts_ns, table...).
func (d *dbzState) appendSourcePieces(dst []byte, commitNs int64) []byte {
	if commitNs != d.src.commitNs || len(d.src.times) == 0 {
		d.src.commitNs = commitNs
		d.src.times = appendTimes(d.src.times[:0], "", commitNs, &d.src.timesText)
	}
	times := d.src.times
	ms := bytes.IndexByte(times, ',') // times is ms,"ts_us":..,"ts_ns":..
	dst = append(dst, d.prefix...)
	dst = append(dst, times[:ms]...)
	dst = append(dst, d.cache.bytes...)
	dst = append(dst, times[ms:]...)
	return append(dst, d.src.tail...)
}

// appendDebeziumKey appends the Debezium key of ch: the key struct of
// the primary-key columns (with its schema when Schemas is set), or
// nothing for a table without a primary key (Debezium's null key).
func (e *Encoder) appendDebeziumKey(dst []byte, ch *binlog.Change) []byte {
	d := e.dbz
	tb := ch.Table
	if tb == nil || len(tb.PrimaryKey) == 0 {
		return dst
	}
	t := d.table(e, tb)
	row, fallback := ch.After, binlog.Row(nil)
	switch ch.Op {
	case binlog.OpDelete:
		row = ch.Before
	case binlog.OpUpdate:
		fallback = ch.Before
	}
	if d.opts.schemas {
		dst = append(dst, `{"schema":`...)
		dst = append(dst, t.keySchema...)
		dst = append(dst, `,"payload":`...)
	}
	dst = append(dst, '{')
	for n, i := range tb.PrimaryKey {
		if i < 0 || i >= len(tb.Columns) {
			continue
		}
		var v binlog.Value
		if i < len(row) {
			v = row[i]
		}
		if v.Kind() == binlog.KindAbsent && i < len(fallback) {
			v = fallback[i]
		}
		if n > 0 {
			dst = append(dst, ',')
		}
		name := t.names[i]
		if i > 0 {
			name = name[1:] // its leading comma
		}
		dst = append(dst, name...)
		dst = d.appendField(dst, &tb.Columns[i], &v, t.defs[i])
	}
	dst = append(dst, '}')
	if d.opts.schemas {
		dst = append(dst, '}')
	}
	return dst
}

// appendRow writes a row as Debezium's Value struct: every column, in
// table order; a column the row image does not hold (MINIMAL images) is
// null, as in Debezium.
func (d *dbzState) appendRow(dst []byte, t *dbzTable, row binlog.Row) []byte {
	if row == nil || t.tb == nil {
		return append(dst, "null"...)
	}
	cols := t.tb.Columns
	names := t.names[:len(cols)]
	dst = append(dst, '{')
	if len(row) >= len(cols) {
		row = row[:len(cols)]
		if !t.anyDef { // the common case, kept to one call per value
			for i := range row {
				dst = append(dst, names[i]...)
				dst = d.appendValue(dst, &cols[i], &row[i])
			}
			return append(dst, '}')
		}
		// appendField's work, inlined: a third of the calls of a row
		// of the libslave long table were its own.
		defs := t.defs[:len(row)]
		replace := !d.opts.keepNull
		for i := range row {
			dst = append(dst, names[i]...)
			def := defs[i]
			d.def = def // nil too: appendZero must not see the last column's
			if def == nil {
				dst = d.appendValue(dst, &cols[i], &row[i])
				continue
			}
			n := len(dst)
			dst = d.appendValue(dst, &cols[i], &row[i])
			if replace && string(dst[n:]) == "null" {
				dst = append(dst[:n], def...)
			}
		}
		d.def = nil
		return append(dst, '}')
	}
	for i := range cols {
		dst = append(dst, names[i]...)
		if i < len(row) {
			dst = d.appendField(dst, &cols[i], &row[i], t.defs[i])
		} else {
			dst = d.appendField(dst, &cols[i], &absent, t.defs[i])
		}
	}
	return append(dst, '}')
}

var absent binlog.Value // KindAbsent's zero value is written null

// appendField writes the value v of column col whose encoded default is
// def (nil: none). A zero date in a NOT NULL column is the default (else
// the epoch), as Debezium's converters give it; a null is the default
// when replace.null.with.default is on, as JsonConverter writes it.
func (d *dbzState) appendField(dst []byte, col *binlog.Column, v *binlog.Value, def []byte) []byte {
	if def == nil {
		return d.appendValue(dst, col, v)
	}
	d.def = def
	n := len(dst)
	dst = d.appendValue(dst, col, v)
	d.def = nil
	if !d.opts.keepNull && string(dst[n:]) == "null" {
		dst = append(dst[:n], def...)
	}
	return dst
}

// dbzTable is what format debezium keeps per table version.
type dbzTable struct {
	tb   *binlog.Table
	cols []binlog.Column // tb.Columns when the entry was built
	// names is `"name":` per column, with a leading comma but the first.
	names [][]byte
	// defs is each column's default as its value is written, nil for
	// a column without one.
	defs [][]byte
	// anyDef is set when a column has a default (else rows skip them).
	anyDef bool
	// open is the event up to the before image: `{"before":`, after
	// `{"schema":<envelope schema>,"payload":` with schemas; openNull is
	// open and `null,"after":` (no before image). open is a prefix of
	// openNull's bytes.
	open, openNull []byte
	// keySchema is the key's schema (Schemas only).
	keySchema []byte
}

// maxDbzTables bounds the per-table cache; past it, it starts over.
const maxDbzTables = 4096

// table returns the cache entry of t, building it when t is new or its
// columns changed.
func (d *dbzState) table(e *Encoder, t *binlog.Table) *dbzTable {
	if x := d.last; x != nil && x.tb == t && x.fresh() {
		return x
	}
	x := d.tables[t]
	if x == nil || !x.fresh() {
		if len(d.tables) >= maxDbzTables {
			clear(d.tables)
		}
		x = &dbzTable{tb: t}
		if t != nil {
			x.cols = t.Columns
			for i := range t.Columns {
				var q []byte
				if i > 0 {
					q = append(q, ',')
				}
				q = jsonstr.AppendJava(q, t.Columns[i].Name)
				x.names = append(x.names, append(q, ':'))
				def := d.defaultValue(&t.Columns[i])
				x.defs = append(x.defs, def)
				x.anyDef = x.anyDef || def != nil
			}
			if d.opts.schemas {
				x.openNull = append(x.openNull, `{"schema":`...)
				x.openNull = d.appendEnvelopeSchema(x.openNull, e.src.Name, t)
				x.openNull = append(x.openNull, `,"payload":`...)
				x.keySchema = d.appendKeySchema(nil, e.src.Name, t)
			}
		} else if d.opts.schemas {
			x.openNull = append(x.openNull, `{"schema":,"payload":`...)
		}
		x.openNull = append(x.openNull, `{"before":`...)
		x.open = x.openNull[:len(x.openNull):len(x.openNull)]
		x.openNull = append(x.openNull, `null,"after":`...)
		d.tables[t] = x
	}
	d.last = x
	return x
}

// fresh reports whether the entry still matches its table's columns.
func (x *dbzTable) fresh() bool {
	if x.tb == nil {
		return true
	}
	c := x.tb.Columns
	return len(c) == len(x.cols) && (len(c) == 0 || &c[0] == &x.cols[0])
}
