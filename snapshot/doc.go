// Package snapshot is the table-scanning layer of sluice's consistent
// initial load: it reads tables with SELECT and hands their rows over as
// the same typed values (binlog.Row) the binlog reader produces, so that a
// row written by codec looks the same whether it came from the snapshot or
// from the binlog.
//
// The pieces:
//
//   - Describe (and Inspect) learn a table's definition from
//     information_schema, as a binlog.Table whose columns match, field for
//     field, what the binlog reader builds from binlog_row_metadata=FULL, and
//     choose the key the table can be read by in order: its primary key, or
//     else its first unique index over NOT NULL columns.
//   - Scan runs a SELECT over the binary protocol and streams its rows,
//     converting every value exactly as the binlog decoder would have
//     decoded it. go-mysql connects and prepares; the result itself is
//     read off the socket into one reused buffer and decoded in place
//     (see result.go), which on short rows costs a fraction of go-mysql's
//     row-by-row reading.
//   - Run reads tables at one consistent point over several connections,
//     each key range with one SELECT cut into chunks as it streams; Stream
//     reads them chunk by chunk while the binlog streams (the watermark
//     method). On MariaDB the point is a transaction's
//     binlog_snapshot_position, several connections started under BACKUP
//     STAGE BLOCK_COMMIT; on MySQL, which has no such position, the
//     connections start under FLUSH TABLES WITH READ LOCK or LOCK TABLES …
//     READ, held for milliseconds (Result.Blocked), and the Stream's
//     watermarks are gtid_executed or, without GTIDs, rows written to a
//     signal table (see Stream).
//     A table without a key is read by the Stream whole, at one exact
//     point, after a TRUNCATE TABLE event for it (consumers replace the
//     table); Resume so finishes a consistent snapshot that a crash
//     interrupted. The final row of a snapshot is marked last, exactly
//     once (see Stream).
//   - ChunkQuery, KeyArgs, CloneKey and SplitPoints read a table in key
//     order by keyset pagination, in ranges that parallel readers can
//     share and that resume after the last key read.
//
// A typical reader, on a connection (a mysqlconn.Conn from binlog.Dial)
// inside START TRANSACTION WITH CONSISTENT SNAPSHOT:
//
//	info, err := snapshot.Inspect(ctx, conn, "shop", "items")
//	...
//	t, key := info.Table, info.Key
//	var after binlog.Row
//	for {
//		q, args := snapshot.ChunkQuery(t, key, "", after, nil, 10000)
//		n := 0
//		err := snapshot.Scan(ctx, conn, t, q, args, func(row binlog.Row) error {
//			if n++; n == 10000 { // the last row of a full chunk: resume after it
//				after = snapshot.CloneKey(t, key, row) // row is reused once fn returns
//			}
//			return emit(row)
//		})
//		...
//		if n < 10000 {
//			break // a short chunk is the last one
//		}
//	}
//
// Scan sets session variables on the connection it is given (see Scan);
// give the snapshot its own connections.
package snapshot
