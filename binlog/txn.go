package binlog

import (
	"time"
	"unsafe"

	"github.com/sluice-cdc/sluice/position"
)

// Op is the kind of a change.
type Op uint8

// Change operations.
const (
	OpInsert Op = iota + 1
	OpUpdate
	OpDelete
	OpDDL  // a schema change; Change.Query holds the statement
	OpRead // a row read by a snapshot
)

var opCodes = [...]string{OpInsert: "c", OpUpdate: "u", OpDelete: "d", OpDDL: "ddl", OpRead: "r"}

// Code returns the Debezium op code: "c", "u", "d", "r", or "ddl".
func (o Op) Code() string {
	if int(o) < len(opCodes) {
		return opCodes[o]
	}
	return "?"
}

func (o Op) String() string {
	switch o {
	case OpInsert:
		return "insert"
	case OpUpdate:
		return "update"
	case OpDelete:
		return "delete"
	case OpDDL:
		return "ddl"
	case OpRead:
		return "read"
	}
	return "unknown"
}

// Change is one row change (or one DDL statement) inside a transaction.
type Change struct {
	Op Op
	// ANSIQuotes says a DDL change's statement ran with sql_mode
	// ANSI_QUOTES: a double-quoted text in Query is a name, not a string.
	ANSIQuotes bool
	Table      *Table
	// Before is the row before an update or delete; After the row after an
	// insert or update. Both are aligned with Table.Columns.
	Before, After Row
	// File and Pos locate the binlog event holding the change (the event's
	// start offset), Row is the index of the row within that event.
	File string
	Pos  uint32
	Row  int
	// Query is the statement of a DDL change; Schema the database it
	// touches (the database of its table, of the database it creates,
	// alters or drops, or of its routine or event; the default database it
	// ran in when it could not be read). A DDL change that touches one
	// table has Table set to a Table naming it, without columns; a
	// TRUNCATE's is the definition the table's rows were last read with,
	// when the reader has read one since it started, else the schema
	// history's (History.Table), when it knows the table.
	Query  string
	Schema string
	// TableChanges are, for a DDL change read with a schema history
	// (Config.History), the captured tables it created, altered or
	// dropped, each with its columns before and after the statement.
	TableChanges []TableChange
	// Reselected lists, in increasing order, the columns (indexes into
	// Table.Columns) whose values in a completed partial image were read
	// from the source's current row rather than carried by the binlog or
	// the row image store (source.fill_missing: reselect): the row's value
	// when it was read, which may be later than the change.
	Reselected []int
}

// Txn is one committed source transaction, or one chunk of a large one.
//
// A transaction bigger than the reader's chunk budget is delivered as
// several Txn values with the same GTID and Begin, numbered by Chunk from
// 0, the final one with Last set. Chunks of one transaction are never
// interleaved with another transaction. Only the Last chunk's End is a
// position to resume from.
type Txn struct {
	// GTID of the transaction ("uuid:N" on MySQL, "D-S-N" on MariaDB);
	// empty when the server does not use GTIDs.
	GTID string
	// ServerID of the server that originally committed the transaction.
	ServerID uint32
	// Thread is the connection id of the session that wrote the
	// transaction, from its BEGIN query event (Debezium's source.thread);
	// 0 when unknown: on MariaDB, whose GTID event stands for the BEGIN,
	// and for snapshot rows.
	Thread uint32
	// CommitTime is the commit time the server recorded (seconds on MariaDB
	// and MySQL 5.7, microseconds on MySQL 8 when it logs them).
	CommitTime time.Time
	// Begin is the position just before the transaction; End the position
	// just after it (GTID state included). End is set on the Last chunk.
	Begin, End position.Position
	Chunk      int
	Last       bool
	Changes    []Change
	// Bytes is the size of the binlog events this chunk was decoded from.
	Bytes int
	// Snapshot marks a chunk of rows read by a snapshot (Op OpRead); its
	// Begin and End are the binlog position the snapshot is consistent
	// with. SnapshotLast marks the chunk holding the snapshot's final row,
	// SnapshotFirst the one holding its first row; SnapshotTableFirst and
	// SnapshotTableLast the chunks holding a table's first and last rows
	// (Debezium's first_in_data_collection and last_in_data_collection).
	// The table marks are set by the initial consistent snapshot, not by
	// the chunks read while streaming.
	Snapshot           bool
	SnapshotLast       bool
	SnapshotFirst      bool
	SnapshotTableFirst bool
	SnapshotTableLast  bool
	// Heartbeat marks an empty Txn standing for a server heartbeat: the
	// server had sent everything up to End and was idle.
	Heartbeat bool
	// XID is set on an XA transaction (X'gtrid',X'bqual',formatID, as the
	// server writes it): it is delivered when it commits, with the
	// commit's GTID in GTID and the prepared part's in PrepareGTID (empty
	// for MySQL's one-phase XA COMMIT, which has one GTID).
	XID, PrepareGTID string

	arena *chunkArena
	free  chan *chunkArena
}

// Release hands the chunk's memory back to the reader for later chunks.
// Calling it is optional (without it the memory is garbage collected) and
// saves much of the reader's allocation work; after it, neither the Txn
// nor any Row or byte slice taken from it may be used.
func (t *Txn) Release() {
	if t.arena == nil || t.free == nil {
		return
	}
	t.arena.changes = t.Changes[:0]
	select {
	case t.free <- t.arena:
	default:
	}
	t.arena, t.free, t.Changes = nil, nil, nil
}

// Footprint estimates the memory the chunk holds (its changes and the
// values and bytes they point into), for consumers that bound the memory
// of chunks they keep.
func (t *Txn) Footprint() int {
	n := cap(t.Changes) * int(unsafe.Sizeof(Change{}))
	if t.arena != nil {
		for _, v := range t.arena.vals {
			n += cap(v) * int(unsafe.Sizeof(Value{}))
		}
		for _, b := range t.arena.bufs {
			n += cap(b)
		}
	}
	return n
}
