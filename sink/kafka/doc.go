// Package kafka is the pipeline's Kafka sink: each table's changes go to a
// topic of their own (by a template), keyed by primary key, and each batch
// the pipeline hands over is written in one Kafka transaction, so a batch
// is either entirely visible to read_committed consumers or not at all.
//
// # Layout
//
// Topics come from a template, by default "{db}.{table}" ({source} is
// available too; a template without placeholders is one fixed topic).
// A record's key is the primary key JSON ({"id":1}), so the default
// partitioner (murmur2 of the key, as Java clients) keeps every change of
// a row in one partition, in order. Its value is the change's JSON
// (Message.Value), and its headers are
//
//	sluice-seq       the pipeline sequence number, in decimal
//	sluice-epoch     the epoch of the process that wrote it, in decimal
//	sluice-source    the source's name
//	sluice-pipeline  the pipeline's name
//	sluice-end       on a transaction's last message: where the source resumes
//
// # Writing
//
//	sink, err := kafka.New(kafka.Config{Brokers: []string{"127.0.0.1:9092"}}, "shop", log)
//	rec, err := sink.Recover(ctx, epoch, savedOffset) // before the first Write
//	off, err := sink.Write(ctx, batch)                // durable once it returns
//
// Write begins a transaction, produces every record (creating missing
// topics first, when create_topics allows), flushes, and commits. Its
// offset is, for every partition the sink has written, the offset after
// the last record it knows of there, as compact JSON:
// {"shop.orders":{"0":123,"1":97}}.
//
// A Write that fails drops its producer (whose transaction stays open,
// invisible to read_committed readers) and must be followed by Recover,
// which starts a new producer: that aborts the open transaction.
//
// # Fencing
//
// The producer's transactional.id is the pipeline's ("sluice-<pipeline>"
// by default). A producer that starts with it makes the broker refuse the
// earlier one, whose Write then fails with pipeline.ErrFenced. The epoch
// travels in a header as well: Recover refuses with pipeline.ErrFenced
// when it finds, after the offset, a record of a higher epoch. It reads up
// to the end before starting its producer, so that a process that is
// already out of date does not fence the newer one's producer on its way
// out.
//
// # Recovery
//
// Recover reads, with read_committed isolation (aborted and open
// transactions are invisible), every partition of the offset's topics
// from the saved offsets up to their last stable offsets, and every
// partition of every other topic whose name the template could have made
// (the template compiled into a pattern: {db}.{table} is
// ^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$) from its start: a table seen for the
// first time after the last checkpoint has a topic the offset does not
// name. With offset "" every such topic is read from its start. Records
// without a sluice-seq header, or of another pipeline, are skipped. It
// reads with plain Fetch requests decoded by kgo.ProcessFetchPartition,
// which tells how far each read got past transaction markers, so the read
// stops exactly at the ends it set out to reach.
package kafka
