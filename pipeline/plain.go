package pipeline

import (
	"context"
	"errors"

	"github.com/sluice-cdc/sluice/binlog"
	"github.com/sluice-cdc/sluice/codec"
)

// PlainSink is a sink that prints changes rather than stores them, as
// `sluice tail` prints them to stdout. Its messages are runs of changes:
// a message holds consecutive changes of one chunk of a source
// transaction (a chunk's changes span several messages only where a batch
// is cut inside it), and its Value is their lines as the encoder writes
// them (codec.Encoder.AppendSnapshotChange in the sink's format), each
// ending in a newline, with no "sluice" block. Seq numbers messages; End is
// set on the message that ends a source transaction and Snapshot on those
// of a snapshot; Key, KeyChange, Txn, Truncate, DB, Table and Change are
// not set. With Plain().None nothing is encoded and no message is made:
// the sink counts what is read in Chunk.
//
// A plain sink holds nothing a recovery could find (its Recover reports
// nothing past the checkpoint): the checkpoint alone says where a run
// resumes. It must be the pipeline's only sink, and the pipeline has one
// source.
type PlainSink interface {
	Sink
	// Plain says how the changes are encoded.
	Plain() Plain
	// Chunk is called with each chunk of the source once its changes are
	// encoded, on the goroutine that builds batches (not the one that
	// writes them): what a sink reports about what it read (rows,
	// transactions, binlog bytes) it counts here. t is valid only during
	// the call.
	Chunk(t *binlog.Txn)
}

// Plain is how a PlainSink's values are encoded.
type Plain struct {
	// None encodes nothing: the changes are numbered, but no message is
	// made (decode only).
	None bool
	// Name is the source name written in each value's source block
	// (default: the source's name, which the checkpoint keeps it under).
	Name string
	// Keys starts each line with the change's record key as a Kafka sink
	// sends it (codec.Encoder.AppendKey; "null" for none) and a tab.
	Keys bool
}

// plainOut is the builder's state for a PlainSink.
type plainOut struct {
	sink PlainSink
	none bool
	keys bool
	enc  *codec.Encoder
	// read is the memory of the chunks read into the current batch
	// (format none cuts batches by it: it encodes no bytes to cut by).
	read int
}

// checkPlain refuses a PlainSink beside other sinks or sources.
func checkPlain(cfg *Config) error {
	for _, s := range cfg.Sinks {
		if _, ok := s.(PlainSink); ok && (len(cfg.Sinks) > 1 || len(cfg.Sources) > 1) {
			return errors.New("pipeline: sink " + s.Name() + " prints its changes (a plain sink): it must be the pipeline's only sink, with one source")
		}
	}
	return nil
}

// plainSink reports whether p's sink is a PlainSink. Its batches are not
// gathered into larger writes (group commit): printing has nothing to
// sync, and a batch written alone goes back to the builder for reuse while
// its buffer is still in the CPU's cache.
func plainSink(p *Pipeline) bool {
	if len(p.cfg.Sinks) != 1 {
		return false
	}
	_, ok := p.cfg.Sinks[0].(PlainSink)
	return ok
}

// newPlainOut returns the plain output of p, nil when its sink is not a
// PlainSink.
func newPlainOut(p *Pipeline) *plainOut {
	if len(p.cfg.Sinks) != 1 || len(p.srcs) != 1 {
		return nil
	}
	s, ok := p.cfg.Sinks[0].(PlainSink)
	if !ok {
		return nil
	}
	pl := s.Plain()
	name := pl.Name
	if name == "" {
		name = p.srcs[0].cfg.Name
	}
	return &plainOut{sink: s, none: pl.None, keys: pl.Keys, enc: codec.NewEncoder(codec.Source{Name: name}, codec.WithFormat(p.formats[0]))}
}

// plainTxn is txn for a PlainSink: the chunk's lines become one message
// (more where the batch is cut inside it), with the same transaction ends,
// snapshot marks and batch cuts as txn's; with Plain.None no message is
// made. The chunk goes back to the reader at once (the messages carry no
// Change), so that the reader reuses its memory.
func (b *builder) plainTxn(ctx context.Context, si int, t *binlog.Txn, et int64, size int) error {
	if b.cur == nil {
		b.plain.read = 0 // a new batch
	}
	b.plain.read += size
	bt, n, evt := b.chunkStart(t, et)
	v0 := len(bt.buf)
	for i := range t.Changes {
		ch := &t.Changes[i]
		snap := b.snapMark(bt, si, t, i, b.nextSeq)
		if b.plain.none {
			continue
		}
		bt.buf = b.plain.appendLine(bt.buf, t, ch, snap)
		if i == n-1 || b.w.sched.cut(len(bt.buf)) {
			m := Message{Seq: b.nextSeq, Source: b.srcs[si].name, Snapshot: t.Snapshot, EventTime: evt}
			b.nextSeq++
			if t.Last && !t.Snapshot && i == n-1 {
				end := t.End
				m.End = &end
			}
			bt.spans = append(bt.spans, span{int32(v0), int32(len(bt.buf)), int32(len(bt.buf)), int32(len(bt.buf))})
			bt.Messages = append(bt.Messages, m)
			if i < n-1 {
				// A big chunk spans batches (see txn).
				if err := b.flush(ctx); err != nil {
					return err
				}
				bt = b.batch()
				bt.inSnapshot = t.Snapshot
				v0 = len(bt.buf)
			}
		}
	}
	b.plain.sink.Chunk(t)
	if t.Last && !t.Snapshot && !t.End.IsZero() {
		bt.ends[si] = t.End
		bt.endSeq, bt.hasEnd = b.nextSeq-1, true
		if !t.CommitTime.IsZero() {
			bt.commit = t.CommitTime
		}
		if n > 0 || t.Chunk > 0 {
			b.p.stats.txns.Add(1)
		}
	}
	t.Release()
	if b.w.sched.cut(len(bt.buf)) || b.plain.none && b.w.sched.cut(b.plain.read) {
		return b.flush(ctx)
	}
	return nil
}

// appendLine appends ch's line (with Keys, its key and a tab first). In
// format debezium an update that changed the primary key is two lines, a
// delete under the old key and a create under the new, as Debezium writes
// it (and as the pipeline's other sinks get it, KeyChange), and a DROP
// TABLE of several tables one line per table (Split).
func (o *plainOut) appendLine(dst []byte, t *binlog.Txn, ch *binlog.Change, snap codec.Snapshot) []byte {
	if o.enc.Format().IsDebezium() && ch.Op == binlog.OpUpdate && ch.Table != nil && len(ch.Table.PrimaryKey) > 0 {
		newKey := o.enc.AppendKey(nil, ch)
		if kc := keyChange(o.enc, t, ch, newKey, nil, nil); kc != nil {
			if o.keys {
				dst = append(append(dst, kc.OldKey...), '\t')
			}
			dst = append(append(dst, kc.Delete...), '\n')
			if o.keys {
				dst = append(append(dst, newKey...), '\t')
			}
			return append(append(dst, kc.Create...), '\n')
		}
	}
	if split := o.enc.AppendDebeziumSplit(t, ch); split != nil {
		// A DROP TABLE of several tables: Debezium's event per table.
		for _, v := range split {
			if o.keys {
				dst = append(o.enc.AppendKey(dst, ch), '\t')
			}
			dst = append(append(dst, v...), '\n')
		}
		return dst
	}
	if o.keys && ch.Op == binlog.OpDDL {
		// The value first: format debezium names a schema-change key
		// after the connector of the value's transaction's server.
		v := o.enc.AppendSnapshotChange(nil, t, ch, snap)
		k := len(dst)
		if dst = o.enc.AppendKey(dst, ch); len(dst) == k {
			dst = append(dst, "null"...)
		}
		return append(append(dst, '\t'), v...)
	}
	if o.keys {
		k := len(dst)
		if dst = o.enc.AppendKey(dst, ch); len(dst) == k {
			dst = append(dst, "null"...)
		}
		dst = append(dst, '\t')
	}
	return o.enc.AppendSnapshotChange(dst, t, ch, snap)
}
