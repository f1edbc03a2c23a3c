// Package nats is the pipeline's NATS JetStream sink: every message is
// published to a subject per table, in one stream that belongs to the
// pipeline alone, and a batch counts as written once JetStream has
// acknowledged every message of it.
//
// # Layout
//
// Subjects come from a template, by default "sluice.{db}.{table}"
// ({source} is available too); the stream, by default "sluice-<pipeline>",
// takes "<literal prefix>.>" and is created on first use with file storage
// and a duplicate window. A message's data is the change's JSON
// (Message.Value); its headers are
//
//	Nats-Msg-Id     <pipeline>:<epoch>:<seq>  (de-duplication and fencing)
//	sluice-seq      the pipeline sequence number
//	sluice-epoch    the epoch of the leader that wrote it
//	sluice-source   the source's name
//	sluice-end      on a transaction's last message: where the source resumes
//	sluice-snapshot "true" on snapshot rows, in format debezium only
//
// In format debezium (Config.Format) the data is Debezium's value, without
// the "sluice" block; recovery reads the headers only. DDL statements
// (Debezium's schema-change events) go to the schema-change subject
// (schema_change_subject, by default "<literal prefix>.{source}"), as the
// Kafka sink's go to schema_change_topic; a TRUNCATE written as op "t" goes
// to its table's subject. There are no tombstones: a stream has no
// compaction to apply them.
//
// The offset kept in checkpoints is a stream sequence number, in decimal.
//
// # Fencing
//
// Write publishes asynchronously (up to max_pending messages awaiting
// their acknowledgement), in order, and chains the messages: the first
// carries Nats-Expected-Last-Sequence (the stream's last sequence as
// Recover or the previous Write left it), each later one
// Nats-Expected-Last-Msg-Id (its predecessor's Nats-Msg-Id, which names the
// epoch). The server stores a message only if the stream ends, right then,
// with that predecessor, so a batch is stored as one contiguous run right
// after the sink's own last message, or up to its first refused message
// and no further. A zombie leader whose stream has moved on writes
// nothing, and its Write fails with pipeline.ErrFenced when the stream's
// last message carries a higher epoch (with a retryable error otherwise).
// Recover moves the stream on itself: unless the stream already ends with
// a message of its epoch, it appends a fence message (HeaderFence: headers
// only, an empty body) expecting the last sequence its scan saw, and scans
// again if that is refused. So an older leader is fenced from the moment a
// newer one has recovered, not only once it has written.
//
// Expected-last-sequence alone would not do: once a message is refused,
// the later ones of the same pipelined batch expect sequences that the
// other writer's messages may well have reached, and would be stored
// after them. That is also why the epoch is part of Nats-Msg-Id.
//
// # Recovery
//
// Recover reads the headers (no data) of every message after the offset
// with an ordered consumer, reports them to the pipeline, and refuses with
// pipeline.ErrFenced if any, or the stream's last message, has a higher
// epoch than its own; then it fences the stream (above). The scan skips
// fence messages.
package nats
