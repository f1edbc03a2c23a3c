package codec

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// Event is one decoded output line: a row change or a DDL statement. It is
// meant for tests and for consumers written in Go; it uses encoding/json
// and is not tuned for speed.
type Event struct {
	// Before and After are the row images, column name to the column's
	// JSON value exactly as written. A nil map is a null image; an absent
	// column (MINIMAL row image) has no key at all, while a NULL column
	// maps to the JSON text null.
	Before map[string]json.RawMessage `json:"before"`
	After  map[string]json.RawMessage `json:"after"`
	// Present lists the columns each image holds; nil when both hold
	// every column (it is written only when an image lacks some).
	Present *Present `json:"present,omitempty"`
	// Reselected lists the columns whose values were read from the
	// source's current row (source.fill_missing: reselect), later than
	// the change; nil for none.
	Reselected []string   `json:"reselected,omitempty"`
	Source     SourceInfo `json:"source"`
	// Op is "c", "u", "d" or "r" for a row change, "" for DDL.
	Op string `json:"op"`
	// TsMs is the time sluice wrote the event, in Unix milliseconds.
	TsMs int64 `json:"ts_ms"`
	// DatabaseName and DDL are set for a DDL event.
	DatabaseName string `json:"databaseName,omitempty"`
	DDL          string `json:"ddl,omitempty"`
	// TableChanges is a DDL event's tableChanges, as written.
	TableChanges json.RawMessage `json:"tableChanges,omitempty"`
	// Sluice is the block `sluice run` adds to every message (nil in the
	// output of `sluice tail`).
	Sluice *Sluice `json:"sluice,omitempty"`
}

// Present is format sluice's "present": the names of the columns each
// image holds, in table order (nil for a null image).
type Present struct {
	Before []string `json:"before"`
	After  []string `json:"after"`
}

// Sluice is the "sluice" block of a pipeline message: its sequence number,
// the epoch that wrote it, its source, and on the last message of a source
// transaction the position after it.
type Sluice struct {
	Seq    uint64          `json:"seq"`
	Epoch  uint64          `json:"epoch"`
	Source string          `json:"source"`
	End    json.RawMessage `json:"end,omitempty"`
}

// SourceInfo is the "source" block of an event.
type SourceInfo struct {
	Version   string `json:"version"`   // "sluice-<version>"
	Connector string `json:"connector"` // "mysql"
	Name      string `json:"name"`      // Source.Name
	TsMs      int64  `json:"ts_ms"`     // commit time, Unix milliseconds
	Snapshot  string `json:"snapshot"`  // "false", "true" or "last"
	DB        string `json:"db"`
	Table     string `json:"table"` // "" when null (a DDL with no table)
	ServerID  uint32 `json:"server_id"`
	GTID      string `json:"gtid"` // "" when null
	XID       string `json:"xid"`  // an XA transaction's XID; "" for others (no member)
	File      string `json:"file"`
	Pos       uint32 `json:"pos"`
	Row       int    `json:"row"`
}

// IsDDL reports whether the event is a schema change.
func (ev *Event) IsDDL() bool { return ev.Op == "" }

// Row returns the image a change leaves behind: After, or Before for a
// delete. It is nil for DDL.
func (ev *Event) Row() map[string]json.RawMessage {
	if ev.Op == "d" {
		return ev.Before
	}
	return ev.After
}

// ErrBadEvent is wrapped by the errors DecodeLine returns for a line that
// is JSON but not an event.
var ErrBadEvent = errors.New("codec: not a change event")

// DecodeLine decodes one line written by an Encoder (with or without its
// trailing newline). It checks the envelope: a row change must have a
// known op and its images must fit the op; a DDL event must have a ddl
// member.
func DecodeLine(line []byte) (*Event, error) {
	line = bytes.TrimRight(line, "\r\n")
	var raw struct {
		Event
		DDL *string `json:"ddl"`
		Op  *string `json:"op"`
	}
	if err := json.Unmarshal(line, &raw); err != nil {
		return nil, fmt.Errorf("codec: decode event: %w", err)
	}
	ev := raw.Event
	switch {
	case raw.Op == nil && raw.DDL != nil:
		ev.DDL = *raw.DDL
		if ev.Before != nil || ev.After != nil {
			return nil, fmt.Errorf("%w: DDL event with row images", ErrBadEvent)
		}
		return &ev, nil
	case raw.Op == nil:
		return nil, fmt.Errorf("%w: no op and no ddl", ErrBadEvent)
	case raw.DDL != nil:
		return nil, fmt.Errorf("%w: both op and ddl", ErrBadEvent)
	}
	ev.Op = *raw.Op
	var ok bool
	switch ev.Op {
	case "c", "r":
		ok = ev.Before == nil && ev.After != nil
	case "u":
		ok = ev.Before != nil && ev.After != nil
	case "d":
		ok = ev.Before != nil && ev.After == nil
	default:
		return nil, fmt.Errorf("%w: unknown op %q", ErrBadEvent, ev.Op)
	}
	if !ok {
		return nil, fmt.Errorf("%w: op %q with before=%v after=%v", ErrBadEvent, ev.Op, ev.Before != nil, ev.After != nil)
	}
	return &ev, nil
}
