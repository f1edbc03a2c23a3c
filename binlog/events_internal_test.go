package binlog

import (
	"errors"
	"strings"
	"testing"

	"github.com/go-mysql-org/go-mysql/replication"
)

// wantEventAction is the decision for every event type code MySQL 8/9 and
// MariaDB 10/11 define (from their Log_event_type enums): live on a
// replication stream, file when reading a binlog file. Any other code
// stops unless its event is marked ignorable. A type added to eventKinds
// (or to go-mysql) without a row here fails the test.
var wantEventAction = map[replication.EventType][2]eventAction{
	0:   {eventStops, eventStops},     // UNKNOWN_EVENT
	1:   {eventStops, eventStops},     // START_EVENT_V3 (binlog v1/v3)
	2:   {eventDecoded, eventDecoded}, // QUERY_EVENT
	3:   {eventPassed, eventPassed},   // STOP_EVENT
	4:   {eventDecoded, eventDecoded}, // ROTATE_EVENT
	5:   {eventPassed, eventPassed},   // INTVAR_EVENT
	6:   {eventStops, eventStops},     // LOAD_EVENT
	7:   {eventStops, eventStops},     // SLAVE_EVENT
	8:   {eventStops, eventStops},     // CREATE_FILE_EVENT
	9:   {eventPassed, eventPassed},   // APPEND_BLOCK_EVENT
	10:  {eventStops, eventStops},     // EXEC_LOAD_EVENT
	11:  {eventPassed, eventPassed},   // DELETE_FILE_EVENT
	12:  {eventStops, eventStops},     // NEW_LOAD_EVENT
	13:  {eventPassed, eventPassed},   // RAND_EVENT
	14:  {eventPassed, eventPassed},   // USER_VAR_EVENT
	15:  {eventDecoded, eventDecoded}, // FORMAT_DESCRIPTION_EVENT
	16:  {eventDecoded, eventDecoded}, // XID_EVENT
	17:  {eventPassed, eventPassed},   // BEGIN_LOAD_QUERY_EVENT
	18:  {eventDecoded, eventDecoded}, // EXECUTE_LOAD_QUERY_EVENT
	19:  {eventDecoded, eventDecoded}, // TABLE_MAP_EVENT
	20:  {eventStops, eventStops},     // PRE_GA_WRITE_ROWS_EVENT
	21:  {eventStops, eventStops},     // PRE_GA_UPDATE_ROWS_EVENT
	22:  {eventStops, eventStops},     // PRE_GA_DELETE_ROWS_EVENT
	23:  {eventDecoded, eventDecoded}, // WRITE_ROWS_EVENT_V1
	24:  {eventDecoded, eventDecoded}, // UPDATE_ROWS_EVENT_V1
	25:  {eventDecoded, eventDecoded}, // DELETE_ROWS_EVENT_V1
	26:  {eventStops, eventStops},     // INCIDENT_EVENT
	27:  {eventDecoded, eventDecoded}, // HEARTBEAT_LOG_EVENT
	28:  {eventPassed, eventPassed},   // IGNORABLE_LOG_EVENT
	29:  {eventPassed, eventPassed},   // ROWS_QUERY_LOG_EVENT
	30:  {eventDecoded, eventDecoded}, // WRITE_ROWS_EVENT
	31:  {eventDecoded, eventDecoded}, // UPDATE_ROWS_EVENT
	32:  {eventDecoded, eventDecoded}, // DELETE_ROWS_EVENT
	33:  {eventDecoded, eventDecoded}, // GTID_LOG_EVENT
	34:  {eventDecoded, eventDecoded}, // ANONYMOUS_GTID_LOG_EVENT
	35:  {eventDecoded, eventDecoded}, // PREVIOUS_GTIDS_LOG_EVENT
	36:  {eventPassed, eventPassed},   // TRANSACTION_CONTEXT_EVENT
	37:  {eventPassed, eventPassed},   // VIEW_CHANGE_EVENT
	38:  {eventDecoded, eventDecoded}, // XA_PREPARE_LOG_EVENT
	39:  {eventDecoded, eventDecoded}, // PARTIAL_UPDATE_ROWS_EVENT
	40:  {eventDecoded, eventDecoded}, // TRANSACTION_PAYLOAD_EVENT
	41:  {eventDecoded, eventDecoded}, // HEARTBEAT_LOG_EVENT_V2
	42:  {eventDecoded, eventDecoded}, // GTID_TAGGED_LOG_EVENT
	160: {eventPassed, eventPassed},   // ANNOTATE_ROWS_EVENT
	161: {eventDecoded, eventDecoded}, // BINLOG_CHECKPOINT_EVENT
	162: {eventDecoded, eventDecoded}, // GTID_EVENT (MariaDB)
	163: {eventDecoded, eventDecoded}, // GTID_LIST_EVENT
	164: {eventPassed, eventStops},    // START_ENCRYPTION_EVENT: the server decrypts what it sends
	165: {eventDecoded, eventDecoded}, // QUERY_COMPRESSED_EVENT
	166: {eventDecoded, eventDecoded}, // WRITE_ROWS_COMPRESSED_EVENT_V1
	167: {eventDecoded, eventDecoded}, // UPDATE_ROWS_COMPRESSED_EVENT_V1
	168: {eventDecoded, eventDecoded}, // DELETE_ROWS_COMPRESSED_EVENT_V1
	169: {eventStops, eventStops},     // WRITE_ROWS_COMPRESSED_EVENT
	170: {eventStops, eventStops},     // UPDATE_ROWS_COMPRESSED_EVENT
	171: {eventStops, eventStops},     // DELETE_ROWS_COMPRESSED_EVENT
}

func TestEveryEventTypeDecided(t *testing.T) {
	for code := 0; code < 256; code++ {
		typ := replication.EventType(code)
		k := kindOf(typ, 0)
		want, known := wantEventAction[typ]
		if !known {
			// Not a type either server defines: it stops, unless ignorable.
			if k.live != eventStops || k.file != eventStops {
				t.Errorf("code %d (%s): %s/%s, want a stop", code, k.name, k.live, k.file)
			}
			if ig := kindOf(typ, replication.LOG_EVENT_IGNORABLE_F); ig.live != eventPassed || ig.file != eventPassed {
				t.Errorf("code %d with LOG_EVENT_IGNORABLE_F: %s/%s, want passed", code, ig.live, ig.file)
			}
			// go-mysql knows every type sluice must decide.
			if s := typ.String(); s != "UnknownEvent" {
				t.Errorf("code %d: go-mysql knows it as %s, but it has no decision in eventKinds", code, s)
			}
			continue
		}
		if _, ok := eventKinds[typ]; !ok {
			t.Errorf("code %d: no entry in eventKinds", code)
		}
		if k.live != want[0] || k.file != want[1] {
			t.Errorf("code %d (%s): live %s, file %s; want %s, %s", code, k.name, k.live, k.file, want[0], want[1])
		}
		if (k.live == eventStops || k.file == eventStops) && k.why == "" {
			t.Errorf("code %d (%s) stops without saying why", code, k.name)
		}
		// A known code keeps its decision whatever its flags.
		if ig := kindOf(typ, replication.LOG_EVENT_IGNORABLE_F); ig != k {
			t.Errorf("code %d: the ignorable flag changed the decision of a known type", code)
		}
	}
	for typ := range eventKinds {
		if _, ok := wantEventAction[typ]; !ok {
			t.Errorf("eventKinds decides code %d (%s), which the test's table lacks", typ, eventKinds[typ].name)
		}
	}
}

func TestIncidentText(t *testing.T) {
	for _, c := range []struct {
		body []byte
		want string
	}{
		{nil, ""},
		{[]byte{1}, ""},
		{[]byte{1, 0}, "LOST_EVENTS"},
		{append([]byte{1, 0, 11}, "error write"...), `LOST_EVENTS ("error write")`},
		{append([]byte{2, 0, 200}, "short"...), `LOST_EVENTS_TRANSACTION ("short")`},
		{[]byte{9, 0, 3, 0xff, '\n', 'x'}, `incident 9 ("? x")`},
	} {
		if got := incidentText(c.body); got != c.want {
			t.Errorf("incidentText(%q) = %q, want %q", c.body, got, c.want)
		}
	}
}

func FuzzIncidentText(f *testing.F) {
	f.Add([]byte{1, 0, 4, 'l', 'o', 's', 't'})
	f.Add([]byte{2, 0})
	f.Add([]byte{0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		_ = incidentText(b)
	})
}

// On a replication stream a START_ENCRYPTION event is passed over (the
// server decrypts what it sends); the stops are errors a reconnect does
// not retry, naming the event, the file and the offset.
func TestLiveEventDecisions(t *testing.T) {
	r := &Reader{file: "mysql-bin.000007"}
	hdr := func(typ replication.EventType, flags uint16) *replication.EventHeader {
		return &replication.EventHeader{EventType: typ, Flags: flags, LogPos: 1100, EventSize: 100}
	}
	if err := r.other(hdr(replication.MARIADB_START_ENCRYPTION_EVENT, 0), nil); err != nil {
		t.Errorf("START_ENCRYPTION on the stream: %v", err)
	}
	for _, typ := range []replication.EventType{replication.ROWS_QUERY_EVENT, replication.MARIADB_ANNOTATE_ROWS_EVENT, replication.IGNORABLE_EVENT, replication.VIEW_CHANGE_EVENT} {
		if err := r.other(hdr(typ, 0), nil); err != nil {
			t.Errorf("%s on the stream: %v", eventName(typ), err)
		}
	}
	if err := r.other(hdr(99, replication.LOG_EVENT_IGNORABLE_F), nil); err != nil {
		t.Errorf("ignorable unknown event: %v", err)
	}
	for typ, want := range map[replication.EventType]string{
		replication.INCIDENT_EVENT: `INCIDENT_EVENT (type code 26) at mysql-bin.000007:1000: LOST_EVENTS ("x")`,
		99:                         "event type 99 (type code 99) at mysql-bin.000007:1000: no MySQL 8/9 or MariaDB 10/11 server defines it",
		replication.LOAD_EVENT:     "LOAD_EVENT (type code 6) at mysql-bin.000007:1000",
	} {
		err := r.other(hdr(typ, 0), []byte{1, 0, 1, 'x'})
		if !errors.Is(err, ErrUnsupportedEvent) || !strings.Contains(err.Error(), want) || retryable(err) {
			t.Errorf("type %d: %v, want a final ErrUnsupportedEvent with %q", typ, err, want)
		}
	}
	// go-mysql's parse errors come out in words, not as a struct dump.
	evErr := &replication.EventError{Header: hdr(replication.TABLE_MAP_EVENT, 0), Err: "invalid table id", Data: []byte{1, 2, 3}}
	err := r.classify(evErr)
	if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "TABLE_MAP_EVENT event cannot be decoded: invalid table id") || strings.Contains(err.Error(), "Header") {
		t.Errorf("classify(EventError): %v", err)
	}
}

// TestLostConnectionInWords: go-mysql's lost-connection errors read as
// such, keeping what wraps them and the network error.
func TestLostConnectionInWords(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"binlog: SHOW GRANTS: io.ReadFull(header) failed. err EOF: connection was bad", "binlog: SHOW GRANTS: the connection to the server was lost (EOF)"},
		{"io.ReadFull(header) failed. err read tcp 127.0.0.1:1->127.0.0.1:2: read: connection reset by peer: connection was bad", "the connection to the server was lost (read tcp 127.0.0.1:1->127.0.0.1:2: read: connection reset by peer)"},
		{"x: io.CopyN failed. err unexpected EOF, copied 3, expected 9: connection was bad", "x: the connection to the server was lost (unexpected EOF)"},
		{"Write failed. only 3 bytes written, while 9 expected: connection was bad", "the connection to the server was lost (closed)"},
		{"connection was bad", "connection was bad"},
	} {
		if got := wordLostConn(tc.in); got != tc.want {
			t.Errorf("wordLostConn(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
