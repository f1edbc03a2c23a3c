package pipeline

import (
	"github.com/sluice-cdc/sluice/codec"
	"github.com/sluice-cdc/sluice/position"
	"github.com/sluice-cdc/sluice/sink"
)

// The sink contract lives in package sink, a leaf that sinks import
// without linking the pipeline. The names below are the same types and
// values under the pipeline's names, for the pipeline's own code and for
// callers written against them: pipeline.Sink is sink.Sink.

// Message is one change as a sink receives it (sink.Message).
type Message = sink.Message

// Role is the part a message plays in a sink's output (sink.Role).
type Role = sink.Role

// The roles of a message (sink.RoleData, sink.RoleSchemaChange).
const (
	RoleData         = sink.RoleData
	RoleSchemaChange = sink.RoleSchemaChange
)

// KeyChange is an update that changed the primary key (sink.KeyChange).
type KeyChange = sink.KeyChange

// TxnMark is a source transaction's boundary (sink.TxnMark).
type TxnMark = sink.TxnMark

// Batch is the unit a sink writes (sink.Batch).
type Batch = sink.Batch

// Formatted is implemented by a sink that receives a format other than
// sluice's (sink.Formatted).
type Formatted = sink.Formatted

// SinkFormat returns the format sink s receives (sink.FormatOf).
func SinkFormat(s Sink) codec.Format { return sink.FormatOf(s) }

// The errors that stop the pipeline instead of a retry (sink.ErrFenced,
// sink.ErrPermanent): the same values, so errors.Is matches either name.
var (
	ErrFenced    = sink.ErrFenced
	ErrPermanent = sink.ErrPermanent
)

// Sink is a destination of the pipeline (sink.Sink).
type Sink = sink.Sink

// Recovery is what a sink holds beyond a checkpoint's offset
// (sink.Recovery).
type Recovery = sink.Recovery

// End is a source position with the sequence number of the message that
// carried it (sink.End).
type End = sink.End

// Meta is the "sluice" block of a message (sink.Meta).
type Meta = sink.Meta

// Header names used by sinks with headers and field names of Redis stream
// entries (sink.HeaderSeq, ...).
const (
	HeaderSeq      = sink.HeaderSeq
	HeaderEpoch    = sink.HeaderEpoch
	HeaderSource   = sink.HeaderSource
	HeaderEnd      = sink.HeaderEnd
	HeaderSnapshot = sink.HeaderSnapshot
)

// AppendMetaMember appends value with m's "sluice" block as its last
// member (sink.AppendMetaMember).
func AppendMetaMember(dst, value []byte, epoch uint64, m *Message) []byte {
	return sink.AppendMetaMember(dst, value, epoch, m)
}

// AppendEnd appends the JSON of an end position (sink.AppendEnd).
func AppendEnd(dst []byte, p *position.Position) []byte { return sink.AppendEnd(dst, p) }

// ParseEnd parses the value of HeaderEnd (sink.ParseEnd).
func ParseEnd(b []byte) (*position.Position, error) { return sink.ParseEnd(b) }

// SnapshotRow reports whether an encoded message was written by a
// snapshot (sink.SnapshotRow).
func SnapshotRow(v []byte) bool { return sink.SnapshotRow(v) }

// ParseMeta reads the "sluice" block of an encoded message
// (sink.ParseMeta).
func ParseMeta(line []byte) (Meta, error) { return sink.ParseMeta(line) }

// Field is what a part of a Template stands for (sink.Field).
type Field = sink.Field

// The fields of a template (sink.FieldLiteral, ...).
const (
	FieldLiteral = sink.FieldLiteral
	FieldDB      = sink.FieldDB
	FieldTable   = sink.FieldTable
	FieldSource  = sink.FieldSource
)

// Part is one piece of a Template (sink.Part).
type Part = sink.Part

// Template is a sink's name template (sink.Template).
type Template = sink.Template

// ParseTemplate splits s into literal text and placeholders
// (sink.ParseTemplate).
func ParseTemplate(s string) (Template, error) { return sink.ParseTemplate(s) }
