package binlog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/go-mysql-org/go-mysql/replication"
)

// ErrUnsupportedEvent means the binlog holds an event the reader cannot
// pass over without possibly losing changes: an event type it does not
// know (and not marked ignorable), one of the pre-5.0 LOAD DATA or
// pre-GA row events, an incident the source logged, a binlog of format
// version 1 or 3, or an encrypted binlog file (MariaDB encrypt_binlog's
// START_ENCRYPTION event, MySQL binlog_encryption's file header). The
// error names the event type, the file and the offset.
var ErrUnsupportedEvent = errors.New("binlog: unsupported binlog event")

// Every binlog event type is decided: decoded, passed over knowingly, or
// a stop with an error naming it. The type codes are those of MySQL
// 8.0-9.x (libs/mysql/binlog/event/binlog_event.h, Log_event_type) and
// MariaDB 10.x-11.x (sql/log_event.h); a code neither defines stops,
// unless its event carries LOG_EVENT_IGNORABLE_F, the flag both servers
// set on events a replica that does not know them may skip.
type eventAction uint8

const (
	// eventDecoded: the reader decodes the event (changes, transaction
	// boundaries, GTIDs, positions, heartbeats).
	eventDecoded eventAction = iota + 1
	// eventPassed: the event carries nothing sluice delivers and nothing
	// it must act on; it is passed over.
	eventPassed
	// eventStops: the reader stops with ErrUnsupportedEvent.
	eventStops
)

func (a eventAction) String() string {
	switch a {
	case eventDecoded:
		return "decoded"
	case eventPassed:
		return "passed"
	case eventStops:
		return "stops"
	}
	return "undecided"
}

// eventKind is what the reader knows about one event type code.
type eventKind struct {
	name string // the servers' name for the type
	// live is the action on a replication stream, file the action when
	// reading a binlog file from disk (they differ for START_ENCRYPTION:
	// the server decrypts what it sends).
	live, file eventAction
	// why says why a stop is a stop (or why a pass loses nothing).
	why string
}

func decoded(name string) eventKind { return eventKind{name, eventDecoded, eventDecoded, ""} }
func passed(name, why string) eventKind {
	return eventKind{name, eventPassed, eventPassed, why}
}
func stops(name, why string) eventKind { return eventKind{name, eventStops, eventStops, why} }

const (
	whyLoadV3     = "it is the LOAD DATA logging of MySQL before 5.0.3, which no supported server writes; the rows it loads cannot be read"
	whyPreGARows  = "it is a row event of MySQL 5.1.0-5.1.15, which no supported server writes; its rows cannot be read"
	whyStatement  = "it belongs to a statement-logged change; the statement's query event decides what happens to it"
	whyRowsV2Comp = "MariaDB defines it but does not write it; sluice cannot decode its rows"
)

// eventKinds maps every type code MySQL 8/9 and MariaDB 10/11 define.
var eventKinds = map[replication.EventType]eventKind{
	0:  stops("UNKNOWN_EVENT", "no server writes type code 0: the file is damaged or not a binlog"),
	1:  stops("START_EVENT_V3", "it starts a binlog of format version 1 or 3 (MySQL before 5.0), which sluice does not read; only version 4 binlogs (MySQL 5.0 and later, every MariaDB) are supported"),
	2:  decoded("QUERY_EVENT"),
	3:  passed("STOP_EVENT", "the server stopped; the binlog goes on in the next file"),
	4:  decoded("ROTATE_EVENT"),
	5:  passed("INTVAR_EVENT", whyStatement),
	6:  stops("LOAD_EVENT", whyLoadV3),
	7:  stops("SLAVE_EVENT", "no server writes it"),
	8:  stops("CREATE_FILE_EVENT", whyLoadV3),
	9:  passed("APPEND_BLOCK_EVENT", "it carries part of a LOAD DATA file; its EXECUTE_LOAD_QUERY event decides what happens"),
	10: stops("EXEC_LOAD_EVENT", whyLoadV3),
	11: passed("DELETE_FILE_EVENT", "it drops the file of a LOAD DATA that failed; nothing was loaded"),
	12: stops("NEW_LOAD_EVENT", whyLoadV3),
	13: passed("RAND_EVENT", whyStatement),
	14: passed("USER_VAR_EVENT", whyStatement),
	15: decoded("FORMAT_DESCRIPTION_EVENT"),
	16: decoded("XID_EVENT"),
	17: passed("BEGIN_LOAD_QUERY_EVENT", "it carries the start of a LOAD DATA file; its EXECUTE_LOAD_QUERY event decides what happens"),
	18: decoded("EXECUTE_LOAD_QUERY_EVENT"),
	19: decoded("TABLE_MAP_EVENT"),
	20: stops("PRE_GA_WRITE_ROWS_EVENT", whyPreGARows),
	21: stops("PRE_GA_UPDATE_ROWS_EVENT", whyPreGARows),
	22: stops("PRE_GA_DELETE_ROWS_EVENT", whyPreGARows),
	23: decoded("WRITE_ROWS_EVENT_V1"),
	24: decoded("UPDATE_ROWS_EVENT_V1"),
	25: decoded("DELETE_ROWS_EVENT_V1"),
	26: stops("INCIDENT_EVENT", "the source logged an incident: changes may be missing from the binlog after this point (a replica stops here too); check the source's error log, then take a new snapshot"),
	27: decoded("HEARTBEAT_LOG_EVENT"),
	28: passed("IGNORABLE_LOG_EVENT", "the servers mark it as safe to ignore"),
	29: passed("ROWS_QUERY_LOG_EVENT", "it holds the text of the statement whose row events follow (binlog_rows_query_log_events); the rows are decoded"),
	30: decoded("WRITE_ROWS_EVENT"),
	31: decoded("UPDATE_ROWS_EVENT"),
	32: decoded("DELETE_ROWS_EVENT"),
	33: decoded("GTID_LOG_EVENT"),
	34: decoded("ANONYMOUS_GTID_LOG_EVENT"),
	35: decoded("PREVIOUS_GTIDS_LOG_EVENT"),
	36: passed("TRANSACTION_CONTEXT_EVENT", "Group Replication's certification data; it holds no changes"),
	37: passed("VIEW_CHANGE_EVENT", "Group Replication's membership change; it holds no changes"),
	38: decoded("XA_PREPARE_LOG_EVENT"),
	39: decoded("PARTIAL_UPDATE_ROWS_EVENT"),
	40: decoded("TRANSACTION_PAYLOAD_EVENT"),
	41: decoded("HEARTBEAT_LOG_EVENT_V2"),
	42: decoded("GTID_TAGGED_LOG_EVENT"),

	160: passed("ANNOTATE_ROWS_EVENT", "it holds the text of the statement whose row events follow; the rows are decoded"),
	161: decoded("BINLOG_CHECKPOINT_EVENT"),
	162: decoded("GTID_EVENT"),
	163: decoded("GTID_LIST_EVENT"),
	164: {name: "START_ENCRYPTION_EVENT", live: eventPassed, file: eventStops,
		why: "the file is encrypted (MariaDB encrypt_binlog) from here on and cannot be read without the server's key; read it through the server instead (sluice tail or run: the server decrypts what it sends to a replica)"},
	165: decoded("QUERY_COMPRESSED_EVENT"),
	166: decoded("WRITE_ROWS_COMPRESSED_EVENT_V1"),
	167: decoded("UPDATE_ROWS_COMPRESSED_EVENT_V1"),
	168: decoded("DELETE_ROWS_COMPRESSED_EVENT_V1"),
	169: stops("WRITE_ROWS_COMPRESSED_EVENT", whyRowsV2Comp),
	170: stops("UPDATE_ROWS_COMPRESSED_EVENT", whyRowsV2Comp),
	171: stops("DELETE_ROWS_COMPRESSED_EVENT", whyRowsV2Comp),
}

// eventByCode is eventKinds indexed by type code, for the lookup made
// for every event (an array index, not a map lookup).
var eventByCode = func() (t [256]*eventKind) {
	for typ, k := range eventKinds {
		t[typ] = &k
	}
	return t
}()

// kindOf is the decision for an event of type code typ with header flags.
func kindOf(typ replication.EventType, flags uint16) eventKind {
	if k := eventByCode[typ]; k != nil {
		return *k
	}
	if flags&replication.LOG_EVENT_IGNORABLE_F != 0 {
		return passed(fmt.Sprintf("event type %d", typ), "unknown to sluice, but the server marks it as safe to ignore")
	}
	return stops(fmt.Sprintf("event type %d", typ), "no MySQL 8/9 or MariaDB 10/11 server defines it and it is not marked ignorable: the binlog is damaged, or written by a newer server than sluice knows")
}

// eventName is the servers' name for an event type code.
func eventName(typ replication.EventType) string {
	return kindOf(typ, 0).name
}

// eventOffset is where the event starts in its file (for a change inside
// a transaction payload, the payload's start).
func (r *Reader) eventOffset(hdr *replication.EventHeader) uint32 {
	if r.payloadPos != 0 {
		return r.payloadPos
	}
	if hdr.LogPos >= hdr.EventSize {
		return hdr.LogPos - hdr.EventSize
	}
	return 0
}

// other decides an event the typed cases of handle do not decode.
func (r *Reader) other(hdr *replication.EventHeader, body []byte) error {
	k := kindOf(hdr.EventType, hdr.Flags)
	action := k.live
	if r.emit != nil {
		action = k.file
	}
	switch action {
	case eventPassed:
		return nil
	case eventDecoded:
		// go-mysql did not give the typed event this code decodes to.
		return fmt.Errorf("%w: %s event at %s:%d could not be decoded", ErrCorrupt, k.name, r.file, r.eventOffset(hdr))
	}
	why := k.why
	if hdr.EventType == replication.INCIDENT_EVENT {
		if msg := incidentText(body); msg != "" {
			why = msg + ": " + why
		}
	}
	return fmt.Errorf("%w: %s (type code %d) at %s:%d: %s", ErrUnsupportedEvent, k.name, hdr.EventType, r.file, r.eventOffset(hdr), why)
}

// incidentNames are MySQL's incident codes (Incident_event::enum_incident).
var incidentNames = map[uint16]string{1: "LOST_EVENTS", 2: "LOST_EVENTS_TRANSACTION"}

// incidentText describes an INCIDENT_EVENT body: a 2-byte incident code,
// then a length-prefixed message. It returns "" when the body is too
// short; the message is cut at 200 bytes and kept to valid UTF-8.
func incidentText(body []byte) string {
	if len(body) < 2 {
		return ""
	}
	code := binary.LittleEndian.Uint16(body)
	name := incidentNames[code]
	if name == "" {
		name = fmt.Sprintf("incident %d", code)
	}
	if len(body) < 3 {
		return name
	}
	n := int(body[2])
	msg := body[3:]
	if n < len(msg) {
		msg = msg[:n]
	}
	if len(msg) > 200 {
		msg = msg[:200]
	}
	text := strings.ToValidUTF8(string(msg), "?")
	text = strings.Map(func(r rune) rune {
		if r < ' ' || r == utf8.RuneError {
			return ' '
		}
		return r
	}, text)
	if text = strings.TrimSpace(text); text == "" {
		return name
	}
	return fmt.Sprintf("%s (%q)", name, text)
}

// parseErrorText says in words why go-mysql could not parse an event of
// type typ (0 when not known): its EventError text is a dump of the
// header struct and the event's bytes.
func parseErrorText(typ replication.EventType, err error) string {
	var evErr *replication.EventError
	if errors.As(err, &evErr) && evErr.Header != nil {
		typ = evErr.Header.EventType
	}
	what := "an event"
	if typ != 0 {
		what = eventName(typ) + " event"
	}
	if evErr != nil {
		return fmt.Sprintf("%s cannot be decoded: %s", what, firstLine(evErr.Err))
	}
	msg := firstLine(err.Error())
	if errors.Is(err, replication.ErrChecksumMismatch) || strings.Contains(msg, "failed checksum") {
		return what + " failed its CRC32 checksum"
	}
	return msg
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}
