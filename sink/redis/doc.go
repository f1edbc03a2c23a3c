// Package redis is the pipeline's Redis sink. It has two modes.
//
// Stream mode (the default) appends every message to a Redis stream per
// table, named by the key template ("{db}.{table}" by default, after
// key_prefix), with the fields
//
//	sluice-seq     the message's sequence number
//	key            the primary key as JSON ({"id":1})
//	value          the change as one line of Debezium-style JSON; its
//	               "sluice" block holds seq, epoch, source and end too
//	sluice-end     on the last message of a source transaction only: the
//	               source position after it (pipeline.AppendEnd JSON)
//
// In format debezium (Config.Format) key and value are Debezium's key and
// value, without the "sluice" block; recovery reads the high-water mark
// only, never a value. Materialize mode takes format sluice only.
//
// Materialize mode keeps one hash per row equal to the source row: the key
// is key_prefix + "{db}.{table}" + ":" + the primary key JSON, the fields
// are the column names and each value is the column's value as JSON text
// (codec.AppendValue: 42, "text", "12.50", null...). Inserts, snapshot reads
// and updates replace the hash; an update that changes the primary key
// deletes the old hash; a delete deletes it. An update with a partial row
// image (binlog_row_image=MINIMAL) sets only the columns it has. DDL
// changes no hash.
//
// # Atomicity, fencing and recovery
//
// Besides the data, the sink keeps one hash per pipeline, the high-water
// mark, at key_prefix + "sluice:<pipeline>:hw": the highest sequence number
// applied (seq), the highest epoch that has written (epoch) and per source
// the last transaction end (end:<source>, endseq:<source>).
//
// Write applies a batch in chunks (messages_per_script, 1000 by default),
// each with one MULTI/EXEC transaction under optimistic locking: the sink
// WATCHes the high-water hash and reads it, refuses the chunk when the
// stored epoch is higher than the writer's (the error wraps
// pipeline.ErrFenced), leaves out the messages whose seq the mark already
// covers, and sends the others with the new mark in one transaction. If
// the hash changed after the WATCH (another writer, or a new leader's
// Recover), EXEC applies nothing and the sink reads the mark again. A
// transaction runs atomically (other clients cannot interleave with it)
// and reaches the append-only file as a whole. So a batch retried after an
// error is applied once, and the high-water mark is what the data holds.
// The keys the chunk writes to are checked with TYPE first: the chunk
// stops before a message whose key holds another type (WRONGTYPE), so
// that no command fails inside the transaction, where Redis would not undo
// the others.
//
// The sink speaks RESP2 itself on one connection (resp.go): a transaction
// of a thousand commands is built in one buffer and sent with one write,
// and the replies are skipped without building values. A general client
// spends more CPU per queued command than Redis spends running it.
//
// Recover records the writer's epoch in the high-water hash (with the same
// WATCH, read, MULTI/EXEC; refusing with ErrFenced when a higher one is
// there, so an older leader is fenced from then on) and reports the
// high-water mark: MaxSeq and each source's last end, if after the
// checkpoint's offset. The offset is the high-water seq as a decimal
// number.
//
// # Durability
//
// Write returns once Redis has answered the transactions. On a server
// with appendonly yes and appendfsync always, Redis answers only after the
// append-only file is fsynced, so an acknowledged batch survives a crash of
// the server or the machine. With appendfsync everysec (Redis's default)
// up to about a second of acknowledged writes can be lost in a crash;
// Recover then reports less than the checkpoint says and logs a warning,
// and the pipeline does not send those messages again. Recover checks the
// settings (CONFIG GET, where allowed) and warns when they are weaker.
// wait_replicas adds WAIT for that many replicas after every batch.
package redis
