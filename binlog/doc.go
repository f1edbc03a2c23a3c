// Package binlog reads MySQL and MariaDB binary logs as a replica and
// yields committed transactions with typed row changes.
//
// # Walkthrough
//
// A Reader connects to one server, checks that it is fit for row-based
// change capture (binary logging on, binlog_format=ROW, the replication
// grants), registers as a replica and streams the binlog from a start
// position:
//
//	cfg, _ := binlog.ParseSourceURL("mysql://repl:secret@127.0.0.1:3306")
//	cfg.Tables, _ = binlog.ParseFilter("shop.*")
//	cfg.StartAt = binlog.StartCurrent // or cfg.Start = a saved position.Position
//	r, _ := binlog.NewReader(cfg)
//	defer r.Close()
//	for {
//		txn, err := r.Next(ctx)
//		if err != nil { ... }
//		for _, ch := range txn.Changes { ... ch.Op, ch.Table, ch.Before, ch.After ... }
//		if txn.Last { save(txn.End) } // resume point: after this whole transaction
//	}
//
// Or register handlers and call Run:
//
//	r.OnRow("shop", "orders", func(txn *binlog.Txn, ch *binlog.Change) error { ... })
//	err := r.Run(ctx)
//
// # Servers, positions and TLS
//
// MySQL (8.0, 8.4, 9.x; also Aurora, RDS, Percona) and MariaDB (10.x,
// 11.x) are both served; the statements and privileges that differ
// between releases are chosen from the server's version, parsed once
// (ServerVersion). A position.Position is the point after a whole
// transaction: file, offset and the server's whole GTID state there. A
// start given as a file position only gets its GTID state from the server
// (GTIDAt: BINLOG_GTID_POS on MariaDB; on MySQL the file's Previous_gtids
// plus the GTIDs before the offset, and an offset inside a transaction is
// refused), so that later resumes by GTID ask for nothing before it.
// Resuming prefers the GTID state (MariaDB, MySQL with gtid_mode=ON), which
// survives a purged file; CurrentPosition reads the current end with a
// consistent GTID state; PositionPurged tells a purged position from a
// resumable one and from one the server never had (ErrPositionUnknown).
//
// The source URL's tls= takes MySQL's client modes (TLSMode: disabled,
// preferred, required, verify-ca, verify-identity); verify-ca is the one
// for MySQL's auto-generated certificates, which name no host.
//
// # Transactions and chunks
//
// Changes arrive grouped by source transaction, in commit order. A DDL
// statement is a transaction of its own (one Change with Op OpDDL),
// except CREATE TABLE ... SELECT, which both servers log in ROW format as
// one transaction: its OpDDL change first, then the rows it copies. A
// transaction larger than Config.ChunkBytes arrives as several Txn chunks
// (Chunk 0, 1, ..., the final one with Last set), so memory stays bounded
// whatever the transaction's size. Only a Last chunk carries End, the
// position to resume from. A Txn with no changes may arrive now and then:
// it reports progress past transactions that touched no selected table.
//
// # DDL
//
// A DDL statement (CREATE/ALTER/DROP/RENAME/TRUNCATE of tables, indexes,
// views, triggers, sequences, routines, events and databases) is read by
// internal/sqlstmt, resolved against the query event's default database.
// It is delivered, as one OpDDL change, only when it touches a selected
// table, or a database with selected tables (a database, routine, event or
// dropped trigger); Change.Schema is then the database it touches (the
// first selected table's) and Change.Table, when it touches exactly one
// table, a Table naming it (without columns). Account management (CREATE,
// ALTER, DROP, RENAME USER, roles, GRANT, REVOKE, SET PASSWORD, SET
// DEFAULT ROLE, CREATE SERVER) is told by its leading keywords and never
// delivered, and its text is never logged: it may carry password hashes.
// A DDL statement that cannot be read is a warning with its first words
// and a count (Stats.UnparsedDDL), and is delivered when its default
// database has selected tables, or it has none, or it names such a
// database. The cached table definitions the reader keeps (and those of a
// SchemaSource) are forgotten for the tables a DDL statement touches, for
// every table of a database it creates, alters or drops, and for all
// tables after one that cannot be read.
//
// # XA transactions
//
// An XA transaction (XA START ... XA END, XA PREPARE, later XA COMMIT)
// is delivered when it commits, in commit order, as one transaction: its
// changes, GTID the commit's, PrepareGTID the prepared part's, XID its
// XID (X'gtrid',X'bqual',formatID), End after the XA COMMIT. A rolled back
// one is never delivered. The prepared part is not held in memory: it is
// passed over on the stream (positions move past it like past a
// transaction without selected changes) and read again from the binlog
// at its commit, in chunks like any transaction; a commit whose prepared
// part came before the reader's start (a restart, a position saved
// between PREPARE and COMMIT) finds it with SHOW BINLOG EVENTS. MySQL's
// XA COMMIT ... ONE PHASE is delivered at once. ReadFiles delivers XA
// transactions the same way, reading the prepared part again from the
// file given that holds it; it stops with an error at a commit whose XA
// PREPARE is in none of the files given, and ReadStream (which cannot
// read its input again) at any XA commit of selected changes.
//
// # Changes logged as statements
//
// A session with binlog_format STATEMENT or MIXED writes INSERT, UPDATE,
// DELETE, REPLACE and LOAD DATA as SQL text, without rows. Such a
// statement on a selected table (parsed by internal/sqlstmt; one the
// grammar cannot read counts when its default database is selected)
// stops the reader with ErrStatementChange, naming the table, the
// position, the statement's first words (never its values) and the fix;
// with Config.OnStatementChange "skip" it is a warning and a count
// (Stats.StatementChanges) instead.
//
// # Values
//
// Row values are binlog.Value structs, typed by the column: signed and
// unsigned integers, exact decimals (as text), FLOAT and DOUBLE, dates
// and times with their microseconds (zero dates kept as they are), strings
// in their column's charset, bytes, ENUM indexes and SET masks (with the
// member names in Column.Enum and Column.Set), BIT, JSON text, geometry,
// VECTOR floats.
// A MySQL server with binlog_row_value_options=PARTIAL_JSON logs an
// UPDATE through JSON_SET, JSON_REPLACE or JSON_REMOVE as a diff of the
// document (PARTIAL_UPDATE_ROWS_EVENT); the reader applies it to the
// before image's document, so After holds the whole new document, as for
// any other update. That needs the document in the before image: with
// binlog_row_image=MINIMAL the reader stops with ErrServerConfig.
// Decoding a row allocates nothing per cell: the reader uses its own row
// decoder instead of go-mysql's default one, and the bytes of a chunk's
// values share one buffer that belongs to the chunk.
//
// # Table definitions
//
// With binlog_row_metadata=FULL (MySQL 8.0.1+, MariaDB 10.5+) the binlog
// names every column and the reader needs nothing else. Otherwise names
// come from information_schema, re-read after every DDL; a row that does
// not fit the definition stops the reader with ErrSchemaMismatch naming
// the table, position and mismatch, never decoding into the wrong columns.
//
// # Failures
//
// A lost connection or a restarted server is retried with backoff and the
// stream resumes after the last whole transaction, skipping the part of a
// chunked transaction that was already delivered: no transaction is
// missing or repeated. Errors that reconnecting cannot fix stop the reader:
// ErrPurged (naming the oldest position the server still has),
// ErrPositionUnknown (a position the server never had), ErrReplaced (a
// newer process of the same consumer took the binlog dump over), ErrCorrupt
// (checksum mismatch, truncated or undecodable event, with file and
// position), ErrServerConfig and ErrPrivilege (with the statement that
// fixes them), ErrSchemaMismatch, ErrUnsupportedEvent.
//
// # Event types
//
// Every event type code is decided (events.go, one table): decoded
// (changes, transaction boundaries, GTIDs, positions, heartbeats, XA
// PREPARE, transaction payloads), passed over knowingly (events that hold
// nothing to deliver: STOP, INTVAR/RAND/USER_VAR and the LOAD DATA file
// blocks of statement-logged changes, whose query event decides,
// ROWS_QUERY and ANNOTATE_ROWS, IGNORABLE, Group Replication's
// TRANSACTION_CONTEXT and VIEW_CHANGE, and any unknown code marked
// LOG_EVENT_IGNORABLE_F), or a stop with ErrUnsupportedEvent naming the
// type, the file and the offset (the pre-5.0 LOAD DATA and pre-GA row
// events, INCIDENT with its message, MariaDB's unused v2 compressed row
// events, any unknown code without the ignorable flag). MariaDB's
// START_ENCRYPTION is passed over on a stream (the server decrypts what
// it sends) and stops ReadFiles: the rest of the file is encrypted.
//
// ReadFiles decodes binlog files from disk the same way. A file that is
// not a binlog, a binlog of format version 1 or 3 (START_EVENT_V3, or a
// FORMAT_DESCRIPTION of another version), a MySQL file written with
// binlog_encryption, and a damaged file (a checksum, a cut, bytes that do
// not fit their event type) stop with the file, the offset and what is
// wrong in words.
package binlog
