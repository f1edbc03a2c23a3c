package codec

import (
	"strconv"
	"time"

	"github.com/sluice-cdc/sluice/binlog"
	"github.com/sluice-cdc/sluice/internal/jsonstr"
)

// DefaultVersion is the version written in source.version ("sluice-dev")
// when Source.Version is empty.
const DefaultVersion = "dev"

// Source is the static part of every event's "source" block: what does not
// change from one change to the next.
type Source struct {
	// Name is the logical name of the source server (Debezium's
	// topic.prefix), written as source.name.
	Name string
	// ServerID is written as source.server_id when the transaction does not
	// carry one (Txn.ServerID == 0, or no Txn, as for snapshot rows).
	ServerID uint32
	// Version is sluice's version, written as source.version with a
	// "sluice-" prefix; empty means DefaultVersion.
	Version string
}

// Snapshot is the value of source.snapshot.
type Snapshot uint8

// Snapshot markers. SnapshotAuto, what AppendChange uses, writes "true"
// for rows read by a snapshot (binlog.OpRead) and "false" for everything
// else; a snapshot writer marks its final row with SnapshotLast.
const (
	SnapshotAuto  Snapshot = iota // "true" if the change is an OpRead, else "false"
	SnapshotFalse                 // "false": a change streamed from the binlog
	SnapshotTrue                  // "true": a row of an initial snapshot
	SnapshotLast                  // "last": the final row of an initial snapshot
	// Debezium's other markers, in format debezium only (format sluice
	// writes "true" for them).
	SnapshotFirst        // "first": the first row of an initial snapshot
	SnapshotFirstInTable // "first_in_data_collection": a table's first row, but the snapshot's first
	SnapshotLastInTable  // "last_in_data_collection": a table's last row, but the snapshot's last
)

// SnapshotOf is the marker of change i of chunk t, from the chunk's
// snapshot flags, in Debezium's precedence: the snapshot's last row,
// its first, a table's last, a table's first; SnapshotTrue for the
// TRUNCATE of a snapshot chunk, SnapshotAuto for everything else.
func SnapshotOf(t *binlog.Txn, i int) Snapshot {
	if !t.Snapshot {
		return SnapshotAuto
	}
	n := len(t.Changes) - 1
	switch {
	case t.SnapshotLast && i == n:
		return SnapshotLast
	case t.Changes[i].Op == binlog.OpDDL:
		return SnapshotTrue // the TRUNCATE before a table without a key read whole
	case t.SnapshotFirst && i == 0:
		return SnapshotFirst
	case t.SnapshotTableLast && i == n:
		return SnapshotLastInTable
	case t.SnapshotTableFirst && i == 0:
		return SnapshotFirstInTable
	}
	return SnapshotAuto
}

// String returns the marker as format debezium writes it: "false",
// "true", "last", "first", "first_in_data_collection" or
// "last_in_data_collection" ("auto" for SnapshotAuto).
func (s Snapshot) String() string {
	switch s {
	case SnapshotFalse:
		return "false"
	case SnapshotTrue:
		return "true"
	case SnapshotLast:
		return "last"
	case SnapshotFirst:
		return "first"
	case SnapshotFirstInTable:
		return "first_in_data_collection"
	case SnapshotLastInTable:
		return "last_in_data_collection"
	}
	return "auto"
}

// Option configures an Encoder.
type Option func(*Encoder)

// WithClock sets the clock read for the envelope's ts_ms (the time the
// event is written), once per event. The default is the system clock,
// read as time.Now reads it but more cheaply (see Encoder); tests pass a
// fixed clock.
func WithClock(now func() time.Time) Option {
	return func(e *Encoder) { e.now = now }
}

// Encoder writes change events as Debezium-style JSON lines. Create one with
// NewEncoder.
//
// An Encoder keeps what consecutive events share, to write it once: the
// source block of the last event up to "row" (the rows of one binlog event
// or snapshot chunk share it), the quoted column names of the last table,
// and the digits of the last ts_ms. So it is not safe for concurrent use:
// give each goroutine its own.
//
// The default clock reads the monotonic clock only (one cheap call) and
// adds the time elapsed to a reading of the wall clock taken at most a
// second before: ts_ms follows the wall clock as time.Now does, except
// that a step of the wall clock shows within a second rather than at once.
type Encoder struct {
	src    Source
	format Format
	dbz    *dbzState        // format debezium's state; nil for format sluice
	now    func() time.Time // nil: the system clock, read as described above
	// prefix is `"source":{"version":"sluice-V","connector":"mysql","name":"N","ts_ms":`.
	prefix []byte
	// cache holds the last source block up to "row" and what it depends on.
	cache struct {
		key   sourceKey
		valid bool
		bytes []byte
	}
	// names holds `"name":` for each column of the last table written.
	names struct {
		table *binlog.Table
		cols  []binlog.Column // table.Columns when they were written
		text  [][]byte
	}
	// clock is the state of the default clock and the last ts_ms written.
	clock struct {
		base     time.Time // a time.Now reading, with its monotonic part
		baseNano int64     // base as Unix nanoseconds
		ms       int64
		text     []byte // ms in decimal; empty until the first event
	}
}

// NewEncoder returns an Encoder for the given source.
func NewEncoder(src Source, opts ...Option) *Encoder {
	e := &Encoder{src: src}
	for _, o := range opts {
		o(e)
	}
	v := src.Version
	if v == "" {
		v = DefaultVersion
	}
	p := append([]byte(nil), `"source":{"version":`...)
	p = jsonstr.Append(p, "sluice-"+v)
	p = append(p, `,"connector":"mysql","name":`...)
	p = jsonstr.Append(p, src.Name)
	p = append(p, `,"ts_ms":`...)
	e.prefix = p
	if e.format.IsDebezium() {
		e.initDebezium(v)
	}
	return e
}

// Source returns the static source information the encoder was created with.
func (e *Encoder) Source() Source { return e.src }

// AppendChange appends one event for ch, a change of transaction txn, to
// dst as a single line of JSON ending in '\n', and returns the extended
// slice. A row change is written as
//
//	{"before":{...}|null,"after":{...}|null,"source":{...},"op":"c|u|d|r","ts_ms":N}
//
// and a DDL change (binlog.OpDDL) as
//
//	{"source":{...},"databaseName":"...","ddl":"...","ts_ms":N}
//
// where ts_ms is the encoder clock's time in Unix milliseconds. See
// docs/FORMAT.md for every field. source.snapshot is "true" for rows read
// by a snapshot (binlog.OpRead) and "false" otherwise; use
// AppendSnapshotChange to write "last".
//
// txn may be nil (for snapshot rows that belong to no transaction): the
// commit time is then 0, the GTID null and the server id Source.ServerID.
// AppendChange allocates nothing when dst has room for the line.
func (e *Encoder) AppendChange(dst []byte, txn *binlog.Txn, ch *binlog.Change) []byte {
	return e.AppendSnapshotChange(dst, txn, ch, SnapshotAuto)
}

// AppendSnapshotChange is AppendChange with an explicit source.snapshot
// marker.
//
// With format debezium (WithFormat) both write Debezium's event instead:
// AppendDebeziumChange without a transaction block.
func (e *Encoder) AppendSnapshotChange(dst []byte, txn *binlog.Txn, ch *binlog.Change, snap Snapshot) []byte {
	if e.dbz != nil {
		return e.AppendDebeziumChange(dst, txn, ch, snap, nil)
	}
	return e.appendSluice(dst, txn, ch, snap)
}

// appendSluice writes ch in format sluice.
func (e *Encoder) appendSluice(dst []byte, txn *binlog.Txn, ch *binlog.Change, snap Snapshot) []byte {
	if snap == SnapshotAuto {
		snap = SnapshotFalse
		if ch.Op == binlog.OpRead {
			snap = SnapshotTrue
		}
	}
	if ch.Op == binlog.OpDDL {
		return e.appendDDL(dst, txn, ch, snap)
	}
	var before, after binlog.Row
	switch ch.Op {
	case binlog.OpUpdate:
		before, after = ch.Before, ch.After
	case binlog.OpDelete:
		before = ch.Before
	default: // insert, snapshot read
		after = ch.After
	}
	names := e.columnNames(ch.Table)
	dst = append(dst, `{"before":`...)
	dst = appendRow(dst, ch.Table, before, names)
	dst = append(dst, `,"after":`...)
	dst = appendRow(dst, ch.Table, after, names)
	if partialRow(before) || partialRow(after) {
		dst = append(dst, `,"present":{"before":`...)
		dst = appendPresent(dst, ch.Table, before)
		dst = append(dst, `,"after":`...)
		dst = appendPresent(dst, ch.Table, after)
		dst = append(dst, '}')
	}
	if len(ch.Reselected) > 0 {
		dst = append(dst, `,"reselected":`...)
		dst = AppendReselected(dst, ch)
	}
	dst = append(dst, ',')
	dst = e.appendSource(dst, txn, ch, snap)
	dst = append(dst, `,"op":`...)
	dst = jsonstr.Append(dst, ch.Op.Code())
	dst = append(dst, `,"ts_ms":`...)
	dst = e.appendNow(dst)
	return append(dst, '}', '\n')
}

// columnNames returns `"name":` for each column of t, kept for the next
// event of the same table (nil for a nil table).
func (e *Encoder) columnNames(t *binlog.Table) [][]byte {
	if t == nil {
		return nil
	}
	n := &e.names
	if n.table == t && len(n.cols) == len(t.Columns) && (len(n.cols) == 0 || &n.cols[0] == &t.Columns[0]) {
		return n.text
	}
	n.table, n.cols = t, t.Columns
	n.text = n.text[:0]
	for i := range t.Columns {
		q := jsonstr.Append(nil, t.Columns[i].Name)
		n.text = append(n.text, append(q, ':'))
	}
	return n.text
}

// nowNano reads the encoder's clock in Unix nanoseconds (see Encoder for
// the default clock).
func (e *Encoder) nowNano() int64 {
	if e.now != nil {
		return e.now().UnixNano()
	}
	c := &e.clock
	d := time.Since(c.base)
	if c.base.IsZero() || d < 0 || d >= time.Second {
		c.base = time.Now()
		c.baseNano, d = c.base.UnixNano(), 0
	}
	return c.baseNano + int64(d)
}

// appendNow appends the current time in Unix milliseconds.
func (e *Encoder) appendNow(dst []byte) []byte {
	c := &e.clock
	ms := e.nowNano() / 1e6
	if ms != c.ms || len(c.text) == 0 {
		c.ms, c.text = ms, strconv.AppendInt(c.text[:0], ms, 10)
	}
	return append(dst, c.text...)
}

// appendDDL writes a schema-change event.
func (e *Encoder) appendDDL(dst []byte, txn *binlog.Txn, ch *binlog.Change, snap Snapshot) []byte {
	dst = append(dst, '{')
	dst = e.appendSource(dst, txn, ch, snap)
	dst = append(dst, `,"databaseName":`...)
	dst = jsonstr.Append(dst, changeDB(ch))
	dst = append(dst, `,"ddl":`...)
	dst = jsonstr.Append(dst, ch.Query)
	if len(ch.TableChanges) > 0 {
		dst = appendTableChanges(dst, ch.TableChanges)
	}
	dst = append(dst, `,"ts_ms":`...)
	dst = e.appendNow(dst)
	return append(dst, '}', '\n')
}

// changeDB is the database of a change: its table's schema, else (for a
// DDL statement with no resolved table) the default database it ran in.
func changeDB(ch *binlog.Change) string {
	if ch.Table != nil && ch.Table.Schema != "" {
		return ch.Table.Schema
	}
	return ch.Schema
}

// snapshotText is source.snapshot in format sluice, dbzSnapshotText in
// format debezium.
var (
	snapshotText = [...]string{
		SnapshotAuto:         `"false"`,
		SnapshotFalse:        `"false"`,
		SnapshotTrue:         `"true"`,
		SnapshotLast:         `"last"`,
		SnapshotFirst:        `"true"`,
		SnapshotFirstInTable: `"true"`,
		SnapshotLastInTable:  `"true"`,
	}
	dbzSnapshotText = [...]string{
		SnapshotAuto:         `"false"`,
		SnapshotFalse:        `"false"`,
		SnapshotTrue:         `"true"`,
		SnapshotLast:         `"last"`,
		SnapshotFirst:        `"first"`,
		SnapshotFirstInTable: `"first_in_data_collection"`,
		SnapshotLastInTable:  `"last_in_data_collection"`,
	}
)

// appendSource writes the "source" member.
func (e *Encoder) appendSource(dst []byte, txn *binlog.Txn, ch *binlog.Change, snap Snapshot) []byte {
	var (
		commitMs int64
		gtid     string
		xid      string
		serverID = e.src.ServerID
	)
	if txn != nil {
		if !txn.CommitTime.IsZero() {
			commitMs = txn.CommitTime.UnixMilli()
		}
		gtid, xid = txn.GTID, txn.XID
		if txn.ServerID != 0 {
			serverID = txn.ServerID
		}
	}
	// Rows of one event (or one snapshot chunk) share everything in source
	// but "row": keep the bytes up to it and reuse them.
	key := sourceKey{commitMs: commitMs, gtid: gtid, xid: xid, serverID: serverID, table: ch.Table, schema: ch.Schema, file: ch.File, pos: ch.Pos, snap: snap}
	if e.cache.valid && e.cache.key == key {
		dst = append(dst, e.cache.bytes...)
		dst = strconv.AppendInt(dst, int64(ch.Row), 10)
		return append(dst, '}')
	}
	start := len(dst)
	dst = e.appendSourceHead(dst, ch, commitMs, gtid, xid, serverID, snap)
	e.cache.key, e.cache.valid = key, true
	e.cache.bytes = append(e.cache.bytes[:0], dst[start:]...)
	dst = strconv.AppendInt(dst, int64(ch.Row), 10)
	return append(dst, '}')
}

// sourceKey is what the source block depends on besides "row".
type sourceKey struct {
	commitMs int64
	gtid     string
	xid      string
	serverID uint32
	table    *binlog.Table
	schema   string
	file     string
	pos      uint32
	snap     Snapshot
}

// appendSourceHead writes the source block up to and including `"row":`.
// An XA transaction's XID comes after its GTID; other transactions have
// no "xid" member.
func (e *Encoder) appendSourceHead(dst []byte, ch *binlog.Change, commitMs int64, gtid, xid string, serverID uint32, snap Snapshot) []byte {
	dst = append(dst, e.prefix...)
	dst = strconv.AppendInt(dst, commitMs, 10)
	dst = append(dst, `,"snapshot":`...)
	if int(snap) < len(snapshotText) {
		dst = append(dst, snapshotText[snap]...)
	} else {
		dst = append(dst, `"false"`...)
	}
	dst = append(dst, `,"db":`...)
	dst = jsonstr.Append(dst, changeDB(ch))
	dst = append(dst, `,"table":`...)
	if ch.Table != nil {
		dst = jsonstr.Append(dst, ch.Table.Name)
	} else {
		dst = append(dst, "null"...)
	}
	dst = append(dst, `,"server_id":`...)
	dst = strconv.AppendUint(dst, uint64(serverID), 10)
	dst = append(dst, `,"gtid":`...)
	if gtid != "" {
		dst = jsonstr.Append(dst, gtid)
	} else {
		dst = append(dst, "null"...)
	}
	if xid != "" {
		dst = append(dst, `,"xid":`...)
		dst = jsonstr.Append(dst, xid)
	}
	dst = append(dst, `,"file":`...)
	dst = jsonstr.Append(dst, ch.File)
	dst = append(dst, `,"pos":`...)
	dst = strconv.AppendUint(dst, uint64(ch.Pos), 10)
	return append(dst, `,"row":`...)
}

// partialRow reports whether a row image lacks columns (binlog_row_image
// MINIMAL or NOBLOB).
func partialRow(row binlog.Row) bool {
	for i := range row {
		if row[i].Kind() == binlog.KindAbsent {
			return true
		}
	}
	return false
}

// AppendReselected appends the names of ch's Reselected columns as a
// JSON array: format sluice's "reselected" and the Kafka sink's
// sluice-reselected header (source.fill_missing: reselect).
func AppendReselected(dst []byte, ch *binlog.Change) []byte {
	dst = append(dst, '[')
	for i, c := range ch.Reselected {
		if i > 0 {
			dst = append(dst, ',')
		}
		if ch.Table != nil && c < len(ch.Table.Columns) {
			dst = jsonstr.Append(dst, ch.Table.Columns[c].Name)
		} else {
			dst = append(dst, "null"...)
		}
	}
	return append(dst, ']')
}

// appendPresent appends the names of the columns row holds as a JSON
// array (null for a nil row): format sluice's "present", written when an
// image lacks columns, so that a consumer tells absent from NULL without
// knowing the table's columns.
func appendPresent(dst []byte, t *binlog.Table, row binlog.Row) []byte {
	if row == nil || t == nil {
		return append(dst, "null"...)
	}
	dst = append(dst, '[')
	sep := false
	for i := range min(len(t.Columns), len(row)) {
		if row[i].Kind() == binlog.KindAbsent {
			continue
		}
		if sep {
			dst = append(dst, ',')
		}
		sep = true
		dst = jsonstr.Append(dst, t.Columns[i].Name)
	}
	return append(dst, ']')
}

// AppendRow appends one row image as a JSON object: the columns of t in
// table order, each "name":value as AppendValue writes it. Columns whose
// value is binlog.KindAbsent (not logged, with binlog_row_image=MINIMAL)
// are left out. A nil row is written as null. If row and t.Columns differ
// in length, only the columns both have are written.
func AppendRow(dst []byte, t *binlog.Table, row binlog.Row) []byte {
	return appendRow(dst, t, row, nil)
}

// appendRow is AppendRow with names[i], if names is not nil, holding
// `"name":` of column i.
func appendRow(dst []byte, t *binlog.Table, row binlog.Row, names [][]byte) []byte {
	if row == nil {
		return append(dst, "null"...)
	}
	dst = append(dst, '{')
	if t != nil {
		cols := t.Columns
		n := min(len(cols), len(row))
		sep := false
		for i := range n {
			if row[i].Kind() == binlog.KindAbsent {
				continue
			}
			if sep {
				dst = append(dst, ',')
			}
			sep = true
			if names != nil {
				dst = append(dst, names[i]...)
			} else {
				dst = jsonstr.Append(dst, cols[i].Name)
				dst = append(dst, ':')
			}
			dst = appendValue(dst, &cols[i], &row[i])
		}
	}
	return append(dst, '}')
}

// AppendKey appends the primary key of row as a JSON object, for use as a
// message key: the primary-key columns of t in key order, or every column
// if the table has no primary key. Values are encoded as AppendValue does;
// absent columns are left out. Use Before for deletes and After otherwise,
// or AppendChangeKey, which picks for you.
func AppendKey(dst []byte, t *binlog.Table, row binlog.Row) []byte {
	return appendKey(dst, t, row, nil)
}

// AppendChangeKey appends the key of a row change: AppendKey of the row the
// change leaves behind (After; Before for a delete). With MINIMAL row images
// an update's after image may lack the key columns; each key column absent
// from After is then taken from Before.
func AppendChangeKey(dst []byte, ch *binlog.Change) []byte {
	switch ch.Op {
	case binlog.OpDelete:
		return appendKey(dst, ch.Table, ch.Before, nil)
	case binlog.OpUpdate:
		return appendKey(dst, ch.Table, ch.After, ch.Before)
	}
	return appendKey(dst, ch.Table, ch.After, nil)
}

// appendKey writes the key of row, taking absent values from fallback.
func appendKey(dst []byte, t *binlog.Table, row, fallback binlog.Row) []byte {
	dst = append(dst, '{')
	if t != nil {
		sep := false
		one := func(i int) {
			if i < 0 || i >= len(t.Columns) {
				return
			}
			var v binlog.Value // absent
			if i < len(row) {
				v = row[i]
			}
			if v.Kind() == binlog.KindAbsent && i < len(fallback) {
				v = fallback[i]
			}
			if v.Kind() == binlog.KindAbsent {
				return
			}
			if sep {
				dst = append(dst, ',')
			}
			sep = true
			dst = jsonstr.Append(dst, t.Columns[i].Name)
			dst = append(dst, ':')
			dst = appendValue(dst, &t.Columns[i], &v)
		}
		if len(t.PrimaryKey) > 0 {
			for _, i := range t.PrimaryKey {
				one(i)
			}
		} else {
			for i := range t.Columns {
				one(i)
			}
		}
	}
	return append(dst, '}')
}

// appendTableChanges writes a DDL event's "tableChanges" (Debezium's
// shape): per captured table the statement created, altered or dropped,
// its type, its id "db"."table", its definition after the statement
// ("table"; before it for a drop) and, a sluice addition, "before".
func appendTableChanges(dst []byte, tcs []binlog.TableChange) []byte {
	dst = append(dst, `,"tableChanges":[`...)
	for i := range tcs {
		tc := &tcs[i]
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, `{"type":`...)
		dst = jsonstr.Append(dst, tc.Kind)
		dst = append(dst, `,"id":`...)
		dst = jsonstr.Append(dst, dbzTableID(tc.DB, tc.Table))
		after := tc.After
		if tc.Kind == "DROP" {
			after = tc.Before
		}
		dst = append(dst, `,"table":`...)
		dst = appendTableDef(dst, after)
		dst = append(dst, `,"before":`...)
		dst = appendTableDef(dst, tc.Before)
		dst = append(dst, '}')
	}
	return append(dst, ']')
}

func appendTableDef(dst []byte, t *binlog.Table) []byte {
	if t == nil {
		return append(dst, "null"...)
	}
	dst = append(dst, `{"primaryKeyColumnNames":[`...)
	dst = appendKeyNames(dst, t)
	dst = append(dst, `],"columns":[`...)
	for i := range t.Columns {
		c := &t.Columns[i]
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, `{"name":`...)
		dst = jsonstr.Append(dst, c.Name)
		name := c.TypeName()
		if c.Unsigned {
			name += " UNSIGNED"
		}
		dst = append(dst, `,"typeName":`...)
		dst = jsonstr.Append(dst, name)
		dst = append(dst, `,"charsetName":`...)
		if c.Charset == "" {
			dst = append(dst, "null"...)
		} else {
			dst = jsonstr.Append(dst, c.Charset)
		}
		dst = append(dst, `,"position":`...)
		dst = strconv.AppendInt(dst, int64(i+1), 10)
		dst = append(dst, `,"optional":`...)
		dst = strconv.AppendBool(dst, c.Nullable)
		members := c.Enum
		if len(c.Set) > 0 {
			members = c.Set
		}
		if len(members) > 0 {
			dst = append(dst, `,"enumValues":`...)
			dst = appendStringArray(dst, members)
		}
		dst = append(dst, '}')
	}
	return append(dst, ']', '}')
}

// appendKeyNames appends t's primary-key column names as JSON strings,
// comma-separated, in key order.
func appendKeyNames(dst []byte, t *binlog.Table) []byte {
	for i, k := range t.PrimaryKey {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = jsonstr.Append(dst, t.Columns[k].Name)
	}
	return dst
}

// appendStringArray appends ss as a JSON array of strings.
func appendStringArray(dst []byte, ss []string) []byte {
	dst = append(dst, '[')
	for i, s := range ss {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = jsonstr.Append(dst, s)
	}
	return append(dst, ']')
}
