// Package codec writes change events as Debezium-compatible JSON, one event
// per line, and reads them back.
//
// The writer is built for throughput: everything appends to a []byte the
// caller reuses, nothing goes through encoding/json or reflection, and no
// memory is allocated per row or per cell once the buffer has grown to the
// size of the largest event.
//
// # Walkthrough
//
// Create one Encoder per source. Source holds what every event repeats:
//
//	enc := codec.NewEncoder(codec.Source{Name: "shop", ServerID: 1, Version: "1.2.0"})
//
// Then, for every change of every transaction the binlog reader delivers,
// append its line to a buffer and flush the buffer when it is big enough:
//
//	var buf []byte
//	for i := range txn.Changes {
//		buf = enc.AppendChange(buf, txn, &txn.Changes[i])
//		if len(buf) >= 64<<10 {
//			w.Write(buf)
//			buf = buf[:0]
//		}
//	}
//
// An insert of (1, 'a') into shop.items comes out as (wrapped here):
//
//	{"before":null,"after":{"id":1,"name":"a"},
//	 "source":{"version":"sluice-1.2.0","connector":"mysql","name":"shop",
//	  "ts_ms":1700000000000,"snapshot":"false","db":"shop","table":"items",
//	  "server_id":1,"gtid":"3e11fa47-71ca-11e1-9e33-c80aa9429562:23",
//	  "file":"mysql-bin.000003","pos":4711,"row":0},
//	 "op":"c","ts_ms":1700000000123}
//
// source.ts_ms is the commit time the server recorded; the outer ts_ms is
// when sluice wrote the line (WithClock replaces the clock, for tests).
// Updates have both images, deletes only "before". Rows read by an initial
// snapshot carry binlog.OpRead, are written with "op":"r" and
// "snapshot":"true"; the snapshot's final row is written with
// AppendSnapshotChange(buf, txn, ch, codec.SnapshotLast). A DDL statement
// (binlog.OpDDL) becomes a schema-change line:
//
//	{"source":{...},"databaseName":"shop","ddl":"ALTER TABLE items ADD price INT","ts_ms":1700000000123}
//
// where source.table is the table when the statement touches one table
// (the reader sets Change.Table to a definition without columns), else
// null, and databaseName that table's database, else Change.Schema.
//
// For a message key (a Kafka key, say), AppendChangeKey writes the primary
// key of the row a change leaves behind, {"id":1}; AppendKey does the same
// for any row, and AppendRow and AppendValue expose the row and value
// encodings on their own.
//
// # Values
//
// AppendValue defines how every binlog.Kind is written; docs/FORMAT.md is
// the reference, with examples. The points that surprise: BIGINT UNSIGNED
// stays exact (18446744073709551615 is written as is, not as a float);
// DECIMAL is a string holding the exact digits; zero dates are kept
// ("0000-00-00"); the zero TIMESTAMP is "0000-00-00T00:00:00Z"; text is
// converted from the column's character set to UTF-8; binary data is
// base64; and a column a MINIMAL row image does not log is left out of the
// object rather than written as null.
//
// # Format debezium
//
// WithFormat(Format{Name: FormatDebezium, ...}) makes the Encoder write
// what Debezium's MySQL connector (3.6) with Kafka Connect's JsonConverter
// writes instead: Debezium's value encoding in the handling mode chosen
// under Debezium's own option names (DECIMAL as base64 of the unscaled
// integer, DATE as days, DATETIME as epoch ms or µs, TIME as µs, zero
// dates null or the epoch, BIGINT UNSIGNED wrapped to int64 ...; see
// debezium_value.go), the MySQL source block with every member Debezium
// writes, "transaction" (AppendDebeziumChange with a TxnOrder), ts_us
// and ts_ns, and with Schemas the schema half, built once per table
// version. AppendKey writes Debezium's key struct, or nothing for a table
// without a primary key (a null key); AppendTruncate writes op "t". DDL
// changes stay sluice's schema-change line: Debezium routes DDL to its
// schema-change topic, which the caller encodes.
//
// # Reading
//
// DecodeLine parses a line back into an Event with encoding/json, keeping
// each column's value as raw JSON. It is for tests and Go consumers, not
// for speed:
//
//	ev, err := codec.DecodeLine(line)
//	if err != nil { ... }
//	if ev.IsDDL() { ... ev.DDL ... }
//	id := ev.Row()["id"] // json.RawMessage("1")
package codec
