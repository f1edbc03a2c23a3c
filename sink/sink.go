// Package sink is the contract between sluice's pipeline and its sinks:
// what a sink receives (Batch, Message), what it reports after a restart
// (Recovery), the errors that stop the pipeline (ErrFenced, ErrPermanent),
// the optional abilities found by type assertion (Formatted), and the
// helpers sinks share to store and read back what recovery needs (Meta,
// the Header names, AppendEnd, ParseEnd, ParseMeta, SnapshotRow, Template).
//
// It is a leaf: a sink imports it, not package pipeline, so that a sink
// links neither the pipeline's source driver nor the snapshot reader.
// Package pipeline re-exports every name here (pipeline.Sink is
// sink.Sink), so code written against pipeline's names keeps working.
//
// A sink's life, as the pipeline drives it:
//
//	rec, err := s.Recover(ctx, epoch, offset) // what s holds after offset
//	for each batch b, in order:
//		offset, err = s.Write(ctx, b)     // durable when it returns
//		(on an error other than ErrFenced or ErrPermanent: Recover, then Write b again)
//	s.Close()
package sink

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/sluice-cdc/sluice/binlog"
	"github.com/sluice-cdc/sluice/codec"
	"github.com/sluice-cdc/sluice/position"
)

// Message is one change as a sink receives it, in the sink's format (see
// Formatted).
//
// In format sluice (codec.FormatSluice, the default) Value is the change as
// one line of JSON (docs/FORMAT.md) without the final newline; it ends with
// the "sluice" block that carries Seq, Epoch and, on the last message of a
// source transaction, End. In format debezium Value is exactly what
// Debezium writes (no "sluice" block): a sink that needs the block in its
// payload writes it itself (AppendMetaMember). Sinks that have headers
// (Kafka, NATS) or fields (Redis streams) carry Seq, Epoch and End there so
// that recovery need not parse the value.
type Message struct {
	// Seq is the pipeline-wide sequence number: it grows by one for each
	// message and keeps growing across restarts and failovers.
	Seq uint64
	// Source names the source the change came from.
	Source string
	// DB and Table name the changed table (DB alone for some DDL).
	DB, Table string
	Op        binlog.Op
	// Role is what the message is to a sink that routes by it (the Kafka
	// sink maps roles to topics).
	Role Role
	// Key is the message key in the sink's format (codec.Encoder.AppendKey):
	// in format sluice the row's primary key as a JSON object ({"id":1}),
	// null for DDL; in format debezium Debezium's key struct.
	Key []byte
	// Value is the encoded change (no trailing newline).
	Value []byte
	// End is set on the last message of a source transaction: the source
	// position just after it, from which the pipeline resumes when this
	// message is the last one a sink holds. Snapshot rows carry none (a
	// snapshot's progress is in the checkpoint; rows delivered after it
	// are read again, see docs/DELIVERY.md).
	End *position.Position
	// Snapshot marks a row read by a snapshot.
	Snapshot bool
	// EventTime is the source transaction's commit time, corrected for the
	// difference between the source's clock and sluice's (see
	// docs/SOURCES.md); zero for snapshot rows.
	EventTime time.Time

	// KeyChange is set, in format debezium, on an update that changed the
	// row's primary key (Key is then the new key): Debezium writes such an
	// update as a delete of the old key, its tombstone and a create of the
	// new key, which a sink with keys (Kafka) writes in its place. Other
	// sinks write Value, the update.
	KeyChange *KeyChange
	// Split is set, in format debezium, on a statement Debezium writes as
	// several schema-change events (a DROP TABLE of several tables: one
	// per table, codec.Encoder.AppendDebeziumSplit), each without a
	// trailing newline: a sink with records (Kafka) writes them in place
	// of Value, under Key, the end on the last. Other sinks write Value,
	// one event with a table change per table.
	Split [][]byte
	// Truncate is set, in format debezium with TRUNCATE events
	// (skipped.operations: none), on a TRUNCATE TABLE: Value is then
	// Debezium's op "t" event, for the table's topic, with no key, and
	// Role is RoleData. Op stays binlog.OpDDL.
	Truncate bool
	// Txn is set, in format debezium with provide.transaction.metadata,
	// on the first and the last message of a source transaction that has
	// data events: what a sink with a transaction topic (Kafka) writes as
	// the transaction's BEGIN record before the message and its END record
	// after it.
	Txn *TxnMark

	// Held marks the sinks that already hold the message (bit i: the
	// pipeline's sink i), after a recovery with several sources. The
	// pipeline sets it and leaves such a message out of the batches of the
	// sinks that hold it; sinks ignore it.
	Held uint64
	// Change is the decoded change, for sinks that keep rows (Redis
	// materialize). It is valid until the Write call for the batch returns.
	Change *binlog.Change
}

// Role is the part a message plays in a sink's output.
type Role uint8

const (
	// RoleData is a change of a table's rows: its table's topic.
	RoleData Role = iota
	// RoleSchemaChange is a DDL statement (binlog.OpDDL): in format
	// debezium it belongs in the schema-change topic, not a table's.
	RoleSchemaChange
)

// KeyChange is an update that changed the primary key, as Debezium writes
// it: Delete, the delete event of the row under OldKey, and Create, the
// create event of the row under the new key (Message.Key); both in the
// message's format, without a trailing newline.
type KeyChange struct {
	OldKey, Delete, Create []byte
}

// TxnMark is a source transaction's boundary, as Debezium's transaction
// metadata has it (codec.AppendTxnBegin, codec.AppendTxnEnd).
type TxnMark struct {
	// ID is the transaction's id (codec.TxnID); Time its commit time.
	ID   string
	Time time.Time
	// Begin: the transaction's BEGIN record goes before the message.
	Begin bool
	// End: its END record goes after the message, with Events (the
	// transaction's data events) and Tables (its events per table, in
	// the order the tables first appear).
	End    bool
	Events int64
	Tables []codec.TxnCount
}

// Batch is the unit a sink writes: messages of one or more source
// transactions, in order. A batch may end in the middle of a large
// transaction (which arrives in chunks); Seqs are consecutive.
type Batch struct {
	// Epoch is the fencing token of the pipeline's current leadership: a
	// sink refuses to write for a lower epoch than one it has seen.
	Epoch    uint64
	Messages []Message
}

// Formatted is implemented by a sink that receives its messages in a
// format other than sluice's: Format returns it (valid by
// codec.Format.Validate). A sink without it receives format sluice. The
// pipeline encodes each change once per distinct format its sinks use, so
// sinks that share a format share the encoding.
type Formatted interface {
	Format() codec.Format
}

// FormatOf returns the format sink s receives: its Format, or
// codec.FormatSluice.
func FormatOf(s Sink) codec.Format {
	if f, ok := s.(Formatted); ok {
		if ff := f.Format(); ff.Name != "" {
			return ff
		}
	}
	return codec.Format{Name: codec.FormatSluice}
}

// FirstSeq and LastSeq return the batch's sequence range (0 when empty).
func (b *Batch) FirstSeq() uint64 {
	if len(b.Messages) == 0 {
		return 0
	}
	return b.Messages[0].Seq
}

// LastSeq returns the sequence number of the batch's last message.
func (b *Batch) LastSeq() uint64 {
	if len(b.Messages) == 0 {
		return 0
	}
	return b.Messages[len(b.Messages)-1].Seq
}

// ErrFenced is returned by a sink that refused a write because a newer
// epoch (another leader) has written to it. The pipeline stops at once.
var ErrFenced = errors.New("fenced: a newer leader (higher epoch) has written to this sink")

// ErrPermanent marks a sink error that retrying cannot fix (a join whose
// key column is not in the table, say): the pipeline stops with it instead
// of retrying. Wrap it: fmt.Errorf("...: %w", ErrPermanent) or with
// errors.Join.
var ErrPermanent = errors.New("permanent (retrying cannot fix it; fix the config and restart)")

// Sink is a destination of the pipeline.
//
// The pipeline calls Recover once, before any Write, then Write for each
// batch in order from one goroutine. Write returns only when the batch is
// durable in the sink (or an error); the offset it returns is saved in the
// checkpoint and handed back to Recover after a restart. A sink that
// returns an error other than ErrFenced or ErrPermanent is retried with the same batch,
// after Recover has been called again; it must therefore tolerate a batch
// that was partly written before the error (recovery reports what it holds
// and the pipeline skips what is already there).
type Sink interface {
	// Name is the sink's name in the config, checkpoints and metrics.
	Name() string
	// Recover prepares the sink for writing under epoch and reports what
	// it durably holds after offset (the offset of the last checkpoint, ""
	// when there is none).
	Recover(ctx context.Context, epoch uint64, offset string) (Recovery, error)
	// Write makes b durable and returns the sink's offset after it.
	Write(ctx context.Context, b *Batch) (offset string, err error)
	// Close releases the sink's connections.
	Close() error
}

// Recovery is what a sink holds beyond a checkpoint's offset.
type Recovery struct {
	// MaxSeq is the highest sequence number found after the offset; 0
	// when the sink holds nothing after it.
	MaxSeq uint64
	// Ends holds, per source, the last transaction end found after the
	// offset (a message with End set) and that message's sequence number.
	Ends map[string]End
	// Partial holds, per source, how many of its messages the sink holds
	// after that source's last transaction end (the one in Ends, else the
	// checkpoint's position): the first messages of the source's next
	// transaction, which a crash cut. Snapshot rows do not count. Sinks
	// that scan their messages get it from Observe; others (Redis) count
	// as they write and set it.
	Partial map[string]int
	// Uncounted is set by a sink that cannot count Partial (a Redis
	// high-water hash written by an older sluice): recovery then relies on
	// the transactions an older checkpoint recorded as open.
	Uncounted bool
	// Offset is the sink's offset at the end of what it holds.
	Offset string

	tails map[string]*tail
}

// End is a source position with the sequence number of the message that
// carried it.
type End struct {
	Pos position.Position
	Seq uint64
}

// Observe adds one message found by a sink's recovery scan: its sequence
// number and source, its transaction end (nil unless it is the last message
// of a source transaction), and whether it is a snapshot row (see
// SnapshotRow). Messages may come in any order (a Kafka scan reads
// partition after partition): what counts is their sequence numbers, which
// only grow in a sink.
func (r *Recovery) Observe(seq uint64, source string, end *position.Position, snapshot bool) {
	if seq > r.MaxSeq {
		r.MaxSeq = seq
	}
	if end == nil && snapshot {
		return
	}
	if r.tails == nil {
		r.tails = map[string]*tail{}
	}
	t := r.tails[source]
	if t == nil {
		t = &tail{}
		r.tails[source] = t
	}
	if end != nil {
		if r.Ends == nil {
			r.Ends = map[string]End{}
		}
		if e, ok := r.Ends[source]; !ok || seq > e.Seq {
			r.Ends[source] = End{Pos: *end, Seq: seq}
		}
		t.end(seq)
	} else {
		t.add(seq)
	}
	if r.Partial == nil {
		r.Partial = map[string]int{}
	}
	if t.n == 0 {
		delete(r.Partial, source)
	} else {
		r.Partial[source] = t.n
	}
}

// tail is what a recovery scan found of one source after its last
// transaction end: the sequence numbers of the messages without an end,
// as sorted runs of consecutive numbers (a few runs: one per run of the
// pipeline that wrote them, more while a Kafka scan is half-way).
type tail struct {
	endSeq uint64
	runs   []seqRun
	n      int
}

type seqRun struct{ lo, hi uint64 }

func (t *tail) add(seq uint64) {
	if seq <= t.endSeq {
		return
	}
	k := len(t.runs)
	if k == 0 || seq > t.runs[k-1].hi {
		// In order: the common case.
		if k > 0 && seq == t.runs[k-1].hi+1 {
			t.runs[k-1].hi = seq
		} else {
			t.runs = append(t.runs, seqRun{seq, seq})
		}
		t.n++
		return
	}
	i, _ := slices.BinarySearchFunc(t.runs, seq, func(r seqRun, s uint64) int {
		switch {
		case r.hi < s:
			return -1
		case r.lo > s:
			return 1
		}
		return 0
	})
	if i < len(t.runs) && t.runs[i].lo <= seq {
		return // seen already
	}
	t.n++
	joinPrev := i > 0 && t.runs[i-1].hi+1 == seq
	joinNext := i < len(t.runs) && t.runs[i].lo == seq+1
	switch {
	case joinPrev && joinNext:
		t.runs[i-1].hi = t.runs[i].hi
		t.runs = slices.Delete(t.runs, i, i+1)
	case joinPrev:
		t.runs[i-1].hi = seq
	case joinNext:
		t.runs[i].lo = seq
	default:
		t.runs = slices.Insert(t.runs, i, seqRun{seq, seq})
	}
}

// end records a transaction end at seq: what came before it is whole.
func (t *tail) end(seq uint64) {
	if seq <= t.endSeq {
		return
	}
	t.endSeq = seq
	k := 0
	for k < len(t.runs) && t.runs[k].hi <= seq {
		t.n -= int(t.runs[k].hi - t.runs[k].lo + 1)
		k++
	}
	t.runs = t.runs[k:]
	if len(t.runs) > 0 && t.runs[0].lo <= seq {
		t.n -= int(seq - t.runs[0].lo + 1)
		t.runs[0].lo = seq + 1
	}
}

// Meta is the "sluice" block of a message, as sinks store it in headers or
// fields: what recovery needs to know about a message.
type Meta struct {
	Seq    uint64 `json:"seq"`
	Epoch  uint64 `json:"epoch"`
	Source string `json:"source,omitempty"`
	// Snapshot is set in blocks that AppendMetaMember writes (format
	// debezium) on snapshot messages, which SnapshotRow cannot tell from
	// Debezium's bytes; blocks in format sluice leave it to SnapshotRow.
	Snapshot bool               `json:"snapshot,omitempty"`
	End      *position.Position `json:"end,omitempty"`
}

// AppendMetaMember appends value, a JSON object, with m's "sluice" block
// added as its last member: {...,"sluice":{"seq":S,"epoch":E,"source":N,
// "snapshot":true,"end":{...}}} ("snapshot" on snapshot messages, "end" on
// transaction ends). It is how a sink whose payload must carry the block
// (the file sink, read back by its recovery) writes a message in format
// debezium, whose Value lacks it. ParseMeta reads it back.
func AppendMetaMember(dst, value []byte, epoch uint64, m *Message) []byte {
	if len(value) < 2 || value[len(value)-1] != '}' {
		return append(dst, value...) // not an object; never from the encoder
	}
	dst = append(dst, value[:len(value)-1]...)
	dst = append(dst, `,"sluice":{"seq":`...)
	dst = strconv.AppendUint(dst, m.Seq, 10)
	dst = append(dst, `,"epoch":`...)
	dst = strconv.AppendUint(dst, epoch, 10)
	if m.Source != "" {
		dst = append(dst, `,"source":`...)
		dst = codec.AppendString(dst, m.Source)
	}
	if m.Snapshot {
		dst = append(dst, `,"snapshot":true`...)
	}
	if m.End != nil {
		dst = append(dst, `,"end":`...)
		dst = AppendEnd(dst, m.End)
	}
	return append(dst, '}', '}')
}

// Header names used by sinks with headers (Kafka, NATS) and field names of
// Redis stream entries.
const (
	HeaderSeq    = "sluice-seq"
	HeaderEpoch  = "sluice-epoch"
	HeaderSource = "sluice-source"
	HeaderEnd    = "sluice-end" // JSON of position.Position, on transaction ends
	// HeaderSnapshot ("true") marks, in format debezium, a message of a
	// snapshot (a row it read, or the TRUNCATE before a table read again
	// whole), which recovery leaves out of its count of a cut transaction:
	// Debezium's value has no sluice block to tell it (SnapshotRow).
	HeaderSnapshot = "sluice-snapshot"
)

// AppendEnd appends the JSON of an end position (for HeaderEnd).
func AppendEnd(dst []byte, p *position.Position) []byte { return appendEnd(dst, p, false) }

// AppendEndHeader appends an end position as a Kafka header's value: the
// JSON of AppendEnd with "pos" a string as well
// (`{"file":"mysql-bin.000001","pos":"4711",...}`). Kafka Connect's
// default header converter (SimpleHeaderConverter) reads a header that
// looks like a JSON object as a map, and a map whose values are not all of
// one type gets no schema; Debezium's JDBC sink connector copies every
// header of a record into a struct and fails on such a one ("No schema
// defined for value of map field: sluice-end"), so that it stopped at the
// first transaction's end. With every value a string the map is a
// map<string,string>. ParseEnd reads both forms.
func AppendEndHeader(dst []byte, p *position.Position) []byte { return appendEnd(dst, p, true) }

func appendEnd(dst []byte, p *position.Position, quotePos bool) []byte {
	dst = append(dst, `{"file":`...)
	dst = codec.AppendString(dst, p.File)
	dst = append(dst, `,"pos":`...)
	if quotePos {
		dst = append(dst, '"')
	}
	dst = strconv.AppendUint(dst, uint64(p.Offset), 10)
	if quotePos {
		dst = append(dst, '"')
	}
	if p.GTIDs != "" {
		dst = append(dst, `,"gtids":`...)
		dst = codec.AppendString(dst, p.GTIDs)
	}
	if p.Flavor != "" {
		dst = append(dst, `,"flavor":`...)
		dst = codec.AppendString(dst, string(p.Flavor))
	}
	if p.Server != "" {
		dst = append(dst, `,"server":`...)
		dst = codec.AppendString(dst, p.Server)
	}
	return append(dst, '}')
}

// ParseEnd parses the value of HeaderEnd, AppendEnd's or
// AppendEndHeader's ("pos" a number or a string of one).
func ParseEnd(b []byte) (*position.Position, error) {
	var raw struct {
		File   string          `json:"file"`
		Pos    json.RawMessage `json:"pos"`
		GTIDs  string          `json:"gtids"`
		Flavor position.Flavor `json:"flavor"`
		Server string          `json:"server"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return nil, fmt.Errorf("pipeline: bad %s value %q: %w", HeaderEnd, b, err)
	}
	p := position.Position{File: raw.File, GTIDs: raw.GTIDs, Flavor: raw.Flavor, Server: raw.Server}
	if pos := raw.Pos; len(pos) > 0 && string(pos) != "null" {
		if pos[0] == '"' {
			var s string
			if err := json.Unmarshal(pos, &s); err != nil {
				return nil, fmt.Errorf("pipeline: bad %s value %q: %w", HeaderEnd, b, err)
			}
			pos = json.RawMessage(s)
		}
		n, err := strconv.ParseUint(string(pos), 10, 32)
		if err != nil {
			return nil, fmt.Errorf("pipeline: bad %s value %q: pos %s is not a binlog offset", HeaderEnd, b, pos)
		}
		p.Offset = uint32(n)
	}
	return &p, nil
}

// SnapshotRow reports whether an encoded message (a Value, or a line of the
// file sink without its newline) was written by a snapshot: a row read by
// it ("op" is "r"), or the TRUNCATE TABLE event before a table read again
// whole (a DDL event whose source.snapshot is "true"). Recovery scans use it
// to leave such messages out of Partial. The encoder writes a row's "op"
// and then "ts_ms" right before the sluice block, so for rows the test
// looks only there (a row's values, before it, cannot fool it); a DDL
// event starts with its source block, whose first fields (version,
// connector, the quoted source name, ts_ms) come before "snapshot".
func SnapshotRow(v []byte) bool {
	i := bytes.LastIndex(v, metaMark)
	if i < 0 {
		return false
	}
	if rest, ok := bytes.CutPrefix(v, ddlMark); ok {
		j := bytes.Index(rest, snapMark)
		return j >= 0 && bytes.HasPrefix(rest[j+len(snapMark):], []byte(`"true"`))
	}
	head := bytes.TrimRight(v[:i], "0123456789")
	head, ok := bytes.CutSuffix(head, []byte(`,"ts_ms":`))
	return ok && bytes.HasSuffix(head, []byte(`,"op":"r"`))
}

var (
	ddlMark  = []byte(`{"source":{`)
	snapMark = []byte(`,"snapshot":`)
)

var metaMark = []byte(`,"sluice":{`)

// ParseMeta reads the "sluice" block of an encoded message (a line of the
// file sink, or a Value). It is used by recovery scans and by consumers.
func ParseMeta(line []byte) (Meta, error) {
	var v struct {
		Sluice *Meta `json:"sluice"`
	}
	if err := json.Unmarshal(line, &v); err != nil {
		return Meta{}, fmt.Errorf("pipeline: message is not JSON: %w", err)
	}
	if v.Sluice == nil {
		return Meta{}, errors.New(`pipeline: message has no "sluice" block (not written by sluice run?)`)
	}
	return *v.Sluice, nil
}
