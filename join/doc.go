// Package join is sluice's event-time interval join over change streams:
// rows of a left and a right table that share a key and whose event times
// are close are combined into one record,
//
//	right.time BETWEEN left.time - before AND left.time + after
//
// with inner, left, right and full joins, allowed lateness, and state in
// Pebble indexed by time, so that cleaning up after the watermark costs
// only what it removes. docs/JOIN.md describes the semantics, the state
// layout, watermarks and guarantees for users.
//
// # Walkthrough
//
// The Operator is the join itself: rows in, joined pairs out, a watermark
// to forget what can no longer join.
//
//	op, err := join.OpenOperator(dir, join.OperatorConfig{
//		Type: join.LeftJoin, Before: 0, After: time.Hour, Lateness: time.Minute,
//		Fingerprint: "orders/payments",
//	})
//	key, _ := join.AppendKeyValue(nil, nil, binlog.IntValue(7))
//	err = op.Add(join.Left, &join.Row{Key: key, Time: t.UnixMicro(), ID: id, Data: payload}, emit)
//	n, err := op.Advance(watermark.UnixMicro(), emit) // evicts; unmatched left rows come out
//	err = op.Commit(true)
//
// Add joins a row with the other side's rows of its key within the bounds
// and keeps it; Advance evicts the rows the watermark has passed and, for
// outer sides, hands those that never joined to emit with nil for the
// other side; Commit makes both durable at once (Discard drops them).
//
// Sink wraps an Operator as a pipeline.Sink: the pipeline's batches come
// in, rows of the two configured tables are joined, and the joined records
// go to another pipeline.Sink (a file, Kafka...) exactly once, through an
// outbox committed with the state:
//
//	s, err := join.NewSink(cfg, join.SinkOptions{Out: fileSink, Watermark: p.Watermark})
//	// then the pipeline calls s.Recover, s.Write, ..., s.Close.
//
// # State layout
//
// One Pebble database per join; per side two keyspaces:
//
//	'a' side key time  → entries: each row's flags (matched), identity, payload
//	'b' side time key  → count and size of the entries (the time index)
//
// Join keys are encoded by AppendKeyValue (order-preserving, prefix-free;
// numbers of any column type compare by value). Event times are
// microseconds, big-endian with the sign bit flipped. Appends are merge
// operands (no read); the probe is one bounded range read; eviction walks
// the time index from the side's horizon, persisted in the meta with the
// watermark and the gauges, to the new one. Format details are in
// format.go; every decoder of stored bytes has a fuzz target.
//
// # Tests
//
// operator_test.go compares the operator with a nested-loop reference on
// random streams for the four join types; sink_test.go and kill9_test.go
// crash the sink (in process, and a child process killed with SIGKILL)
// with a real file sink downstream and check the records exactly once;
// bench_test.go is the 1M-row state benchmark against the older layout.
package join
