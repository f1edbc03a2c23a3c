package bench

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// TestLatencyRow reads the id and commit time of a bench.lat row from a
// change event as both readers write it (Debezium's JsonConverter without
// schemas; sluice's format debezium writes the same), and refuses what is
// not one with a reason.
func TestLatencyRow(t *testing.T) {
	ev := `{"before":null,"after":{"id":42,"at":"2026-12-07T16:04:46.123456Z","pad":"steady-load"},"source":{"version":"3.6.1.Final","connector":"mysql","name":"lat1debezium","ts_ms":1796659486123,"db":"bench","table":"lat"},"op":"c","ts_ms":1796659486130,"transaction":null}`
	id, at, err := latencyRow([]byte(ev))
	if err != nil || id != 42 || !at.Equal(time.Date(2026, 12, 7, 16, 4, 46, 123456000, time.UTC)) {
		t.Fatalf("latencyRow = %d, %v, %v", id, at, err)
	}
	for in, want := range map[string]string{
		`not json`: "not a change event",
		`{"before":{"id":1,"at":"2026-12-07T16:04:46Z"},"after":null,"op":"d"}`: "no after image",
		`{"after":{"id":1,"at":1796659486123456}}`:                              "not a change event", // a number where the string is
		`{"after":{"id":1,"at":"2026-12-07 16:04:46"}}`:                         "after.at",
	} {
		if _, _, err := latencyRow([]byte(in)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("latencyRow(%s) = %v, want an error with %q", in, err, want)
		}
	}
}

// TestReportKafkaLatency: one row per reader and rate, Debezium's figures
// over sluice's beside Debezium's row.
func TestReportKafkaLatency(t *testing.T) {
	var b bytes.Buffer
	ReportKafkaLatency(&b, []KafkaLatencyResult{
		{Reader: LatencySluice, Rate: 1000, RowsPerSec: 998, TxnRows: 10, Samples: 1000, P50: 2 * time.Millisecond, P99: 4 * time.Millisecond, Max: 9 * time.Millisecond, CPU: 0.1, Ready: time.Second},
		{Reader: LatencyDebezium, Rate: 1000, RowsPerSec: 997, TxnRows: 10, Samples: 1000, P50: 200 * time.Millisecond, P99: 480 * time.Millisecond, Max: time.Second, CPU: 1.5, Ready: 12 * time.Second},
	})
	out := b.String()
	for _, want := range []string{"| 1000 (998, 10)                  | sluice ", "| 1000 (997, 10)                  | debezium ", " 100000 ", " 1500000 ", " 100.00× ", " 120.00× ", " 15.00× "} {
		if !strings.Contains(out, want) {
			t.Errorf("the report lacks %q:\n%s", want, out)
		}
	}
}

// TestReportPrintsWhatRan: the libslave report prints the tables of the
// modes that ran only (--modes debezium,dbz-embedded prints no empty
// go-mysql or format tables).
func TestReportPrintsWhatRan(t *testing.T) {
	var b bytes.Buffer
	Report(&b, []Result{
		{Range: "short_insert", Mode: "debezium", Rows: 1000, Seconds: 0.01, SteadySeconds: 0.01, CPUSeconds: 0.01, OutBytes: 500000},
		{Range: "short_insert", Mode: "dbz-embedded", Rows: 1000, Seconds: 2, SteadySeconds: 0.1, CPUSeconds: 1, StartupSeconds: 1.9},
	})
	out := b.String()
	if strings.Contains(out, "go-mysql") || strings.Count(out, "| short_insert") != 2 || !strings.Contains(out, "rows/s sluice/Debezium") {
		t.Errorf("report:\n%s", out)
	}
}
