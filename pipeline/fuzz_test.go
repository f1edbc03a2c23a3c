package pipeline

import (
	"bytes"
	"testing"

	"github.com/sluice-cdc/sluice/position"
	"github.com/sluice-cdc/sluice/sink"
)

// Header and field values come back from sinks at recovery: any bytes give
// a value or an error, and what AppendEnd writes parses back to itself.
func FuzzParseEnd(f *testing.F) {
	f.Add([]byte(`{"file":"mysql-bin.000001","pos":4,"gtids":"0-1-5","flavor":"mariadb"}`), "mysql-bin.000002", uint32(77), "0-1-9")
	f.Add([]byte(`{`), "", uint32(0), "")
	f.Fuzz(func(t *testing.T, raw []byte, file string, pos uint32, gtids string) {
		_, _ = ParseEnd(raw)
		_, _ = ParseMeta(raw)
		p := position.Position{File: file, Offset: pos, GTIDs: gtids, Flavor: position.MariaDB}
		got, err := ParseEnd(AppendEnd(nil, &p))
		if err != nil {
			return // strconv.AppendQuote writes Go escapes JSON does not take for odd bytes
		}
		if *got != p {
			t.Fatalf("round trip: %+v -> %+v", p, *got)
		}
		// A Kafka header's form (pos a string) parses to the same.
		got, err = ParseEnd(sink.AppendEndHeader(nil, &p))
		if err != nil || *got != p {
			t.Fatalf("round trip of the header form: %+v -> %+v, %v", p, got, err)
		}
	})
}

// SnapshotRow reads values found in sinks: any bytes give an answer, and a
// value it calls a snapshot row ends its top level with "op":"r".
func FuzzSnapshotRow(f *testing.F) {
	f.Add([]byte(`{"before":null,"after":{"id":1},"source":{},"op":"r","ts_ms":17,"sluice":{"seq":1,"epoch":1}}`))
	f.Add([]byte(`{"op":"c","ts_ms":,"sluice":{`))
	f.Fuzz(func(t *testing.T, v []byte) {
		if SnapshotRow(v) && !bytes.Contains(v, []byte(`,"op":"r","ts_ms":`)) && !bytes.HasPrefix(v, []byte(`{"source":{`)) {
			t.Fatalf("snapshot row without its op: %q", v)
		}
	})
}
