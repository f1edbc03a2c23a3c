// Package pipeline is sluice's main job: it reads one source (snapshot,
// then binlog), numbers every change with a sequence number that only
// grows, delivers batches to one or more sinks, and records checkpoints
// once the sinks hold a batch durably. On start it asks each sink what it
// holds beyond the last checkpoint and resumes the source exactly after
// the last transaction the sinks hold, so that nothing is lost or doubled
// whatever instant a crash hit. See docs/DELIVERY.md.
//
// # Walkthrough
//
// A pipeline is built from a Config and run until its context ends:
//
//	p, err := pipeline.New(pipeline.Config{
//		Name:   "orders",                      // names the checkpoint and the sinks' records
//		Source: pipeline.SourceConfig{Name: "db1", Binlog: src},
//		Sinks:  []pipeline.Sink{kafkaSink, fileSink},
//		Store:  &checkpoint.FileStore{Path: "orders.ckpt"},
//	})
//	err = p.Run(ctx)
//
// src is a binlog.Config, usually from binlog.ParseSourceURL with a table
// filter (binlog.ParseFilter). Several sources (Config.Sources) merge into
// one stream: each source's transactions keep their order and
// transactions of different sources interleave whole; with
// Config.Align.MaxSkew the merger also keeps the sources together in
// event time (docs/SOURCES.md).
//
// Run goes through these steps:
//
//  1. Recovery. It loads the checkpoint from the Store (a file, etcd
//     through coord) and takes a fencing epoch above the stored one (one
//     above it, or the leader election's, Config.Epoch), which it claims
//     in the checkpoint before writing.
//     Each sink's Recover reports what it holds beyond the checkpoint's
//     offset: the highest sequence number, per source the last
//     transaction end, and how many messages of a transaction a crash cut
//     in two. From these the pipeline decides where each source resumes
//     and which messages each sink already has (they are skipped for that
//     sink alone), so every sink ends up holding every change once.
//  2. Snapshot. A source without a saved position loads its tables first
//     (SnapshotConfig.Mode "initial"), consistently, in chunks, and
//     streams from the position the snapshot was taken at. A snapshot
//     interrupted by a crash resumes from its last delivered chunk.
//  3. Streaming. Transactions from the binlog are encoded once per format
//     the sinks use (Formatted; format sluice by default, format debezium
//     for Debezium consumers), numbered, and cut into batches bounded in
//     bytes. A batch goes to every sink in parallel; a failed write is
//     retried with backoff, a fenced write (ErrFenced: a newer leader
//     wrote) or a permanent one (ErrPermanent) stops the pipeline.
//  4. Checkpoints. Every CheckpointEvery, once every sink has written up
//     to a batch, the sinks' offsets and each source's position after the
//     last whole transaction are saved with the epoch, as a new version
//     of the checkpoint (a compare-and-swap on the version).
//
// # Writing a sink
//
// A Sink has a name, Recover, Write and Close. Write makes a batch durable
// and returns the sink's offset after it (the checkpoint stores it);
// Recover scans what the sink holds after an offset. A sink that keeps
// nothing across restarts (see the package Example) returns an empty
// Recovery: the pipeline then resumes from the checkpoint. A sink that
// receives another format than format sluice implements Formatted. The
// sinks under sink/ (file, kafka, nats, redis) are the full examples,
// and internal/sinktest is the conformance suite a sink is tested with.
package pipeline
