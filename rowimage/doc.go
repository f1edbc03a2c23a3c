// Package rowimage completes partial row images (binlog_row_image MINIMAL
// or NOBLOB) from a local store of the last full image of every row of the
// captured tables, so that every format sees full before and after images
// as with binlog_row_image=FULL (source.row_image: fill).
//
// The store is a Pebble database, one per source. Its keys:
//
//	'r' table 0x00 primary key   the row's last full image (a table
//	                             fingerprint, then each column's value)
//	'u' seq (8 bytes)            the undo record of one chunk: its begin
//	                             position, whether it is a snapshot chunk,
//	                             and every key it wrote with the value the
//	                             key had before (or none)
//	'm' 'v'                      the version of the last checkpoint saved
//
// The primary key is encoded as the interval join encodes its keys
// (internal/keyenc, as the join's state keys): one order-preserving, self-delimiting element per
// key column.
//
// A walkthrough. The pipeline's builder calls Fill on every chunk, in the
// order the chunks are delivered, before it encodes them, with the
// sequence number of the chunk's first message:
//
//	for each change:
//	    before image with absent columns → taken from the stored image of
//	                                       its key (never seen: ErrMissing)
//	    after image of an update         → absent columns from the before
//	                                       image (they did not change)
//	    then: delete the old key, store the new full image, and record
//	    what the keys held in the chunk's undo record (one Pebble batch)
//
// The writer calls Sync before each batch is written to a sink, so that
// whatever a sink holds is durable in the store, and Trim after each
// checkpoint is saved, dropping undo records no restart can need. At
// start, Rewind undoes, newest first, the chunks the run will read again:
// after a kill -9 the store holds no change that the sinks' and the
// checkpoint's state does not also cover, and the replayed chunks are
// applied on exactly the rows they were first applied on.
package rowimage
