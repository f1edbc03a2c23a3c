package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluice-cdc/sluice/internal/testenv"
	"github.com/sluice-cdc/sluice/internal/testenv/kafkaenv"
	"github.com/sluice-cdc/sluice/position"
)

// kcatRecord is one record as `kcat -C -J` prints it.
type kcatRecord struct {
	Topic   string   `json:"topic"`
	Offset  int64    `json:"offset"`
	Headers []string `json:"headers"`
	Key     *string  `json:"key"`
	Payload *string  `json:"payload"`
}

func (r *kcatRecord) header(k string) (string, bool) {
	for i := 0; i+1 < len(r.Headers); i += 2 {
		if r.Headers[i] == k {
			return r.Headers[i+1], true
		}
	}
	return "", false
}

// kcatRead reads topic from its start to its end (read_committed) with
// kcat; nil if the topic is not there yet.
func kcatRead(t *testing.T, kcat, broker, topic string) []kcatRecord {
	t.Helper()
	out, err := exec.Command(kcat, "-C", "-b", broker, "-t", topic, "-o", "beginning", "-e", "-J", "-q", "-X", "isolation.level=read_committed").Output()
	if err != nil {
		return nil
	}
	var rs []kcatRecord
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		var r kcatRecord
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("kcat printed %q: %v", sc.Text(), err)
		}
		rs = append(rs, r)
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("kcat's output: %v", err)
	}
	return rs
}

// TestKcatReadsDebezium: `sluice run` from a real server into Kafka (a real broker)
// with a kafka sink in format debezium beside a file sink in format sluice;
// librdkafka's kcat reads the records with their keys and headers, and
// every record is the expected one: Debezium's value bytes (no sluice
// block, Debezium's value encoding), Debezium's key struct (null for a
// keyless table), a tombstone after each delete of a keyed row, sluice's
// seq headers equal to the file sink's seqs.
func TestKcatReadsDebezium(t *testing.T) {
	kcat, err := testenv.EnsureKcat()
	if err != nil {
		t.Fatal(err)
	}
	bin := buildSluice(t)
	testenv.ForEachFlavor(t, func(t *testing.T, flavor position.Flavor) { kcatReadsDebezium(t, bin, kcat, flavor) })
}

func kcatReadsDebezium(t *testing.T, bin, kcat string, flavor position.Flavor) {
	db := testenv.StartT(t, testenv.Options{Flavor: flavor})
	ctx := context.Background()
	if err := db.Exec(ctx, "CREATE DATABASE app", "CREATE TABLE app.t (id INT PRIMARY KEY, d DECIMAL(6,2), ts DATETIME(3))", "CREATE TABLE app.k (n INT)",
		"INSERT INTO app.t VALUES (1, 1.50, '2024-01-02 03:04:05.678'), (2, -0.01, NULL)", "INSERT INTO app.k VALUES (7)"); err != nil {
		t.Fatal(err)
	}
	broker := kafkaenv.Start(t, nil).Brokers()[0] // its own: the topics are Debezium's names
	dir := t.TempDir()
	cfg := fmt.Sprintf(`pipeline: kc
source:
  url: %s
  server_id: 903
  tables: [app.*]
sinks:
  - name: file
    type: file
    file: {path: %s}
  - name: kafka
    type: kafka
    format: debezium
    kafka: {brokers: [%q], partitions: 1, request_timeout: 3s}
checkpoint: {path: %s, interval: 100ms}
`, db.URL(), filepath.Join(dir, "out", "changes.jsonl"), broker, filepath.Join(dir, "ckpt.json"))
	log, stop := startRun(t, bin, dir, cfg)

	read := func(topic string) []kcatRecord { return kcatRead(t, kcat, broker, topic) }
	wait := func(topic string, n int) []kcatRecord {
		deadline := time.Now().Add(60 * time.Second)
		for {
			rs := read(topic)
			if len(rs) >= n {
				return rs
			}
			if time.Now().After(deadline) {
				t.Fatalf("kcat reads %d records of %s, want %d\n%s", len(rs), topic, n, log.String())
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	wait("app.t", 2) // the snapshot's rows
	if err := db.Exec(ctx, "INSERT INTO app.t VALUES (3, 9999.99, '1970-01-01 00:00:00.001')", "UPDATE app.t SET d = 2.25 WHERE id = 1",
		"DELETE FROM app.t WHERE id = 2", "DELETE FROM app.k", "UPDATE app.t SET id = 5 WHERE id = 3", "ALTER TABLE app.t ADD note INT",
		"CREATE TABLE app.x1 (a INT)", "CREATE TABLE app.x2 (a INT)", "DROP TABLE app.x1, app.x2"); err != nil {
		t.Fatal(err)
	}
	ts := wait("app.t", 9)
	ks := wait("app.k", 2)
	// The DDL goes to the database's schema-change topic: the table's
	// topic holds Debezium's data events only.
	if ddl := wait("kc", 1); ddl[0].Payload == nil || !strings.Contains(*ddl[0].Payload, `"ddl":"ALTER TABLE app.t ADD note INT"`) {
		t.Fatalf("schema-change topic kc: %+v, want the ALTER", ddl[0])
	}
	// A DROP TABLE of two tables is Debezium's two events, each its own
	// statement, with the statement's seq; the end on the second only.
	ddl := wait("kc", 5)
	for i, tb := range []string{"x1", "x2"} {
		r := ddl[3+i]
		if r.Payload == nil || !strings.Contains(*r.Payload, `"ddl":"DROP TABLE `+"`app`.`"+tb+"`"+`"`) ||
			!strings.Contains(*r.Payload, `"tableChanges":[{"type":"DROP","id":"\"app\".\"`+tb+`\"","table":null}]`) {
			t.Fatalf("schema-change record %d: %+v, want the DROP of app.%s alone", 3+i, r, tb)
		}
		if _, end := r.header("sluice-end"); end != (i == 1) {
			t.Fatalf("schema-change record %d: sluice-end %v, want it on the last of the statement's records", 3+i, end)
		}
	}
	a, _ := ddl[3].header("sluice-seq")
	if b, _ := ddl[4].header("sluice-seq"); a == "" || a != b {
		t.Fatalf("the DROP's two records have seqs %v and %v, want the statement's one", ddl[3].Headers, ddl[4].Headers)
	}
	if err := stop(); err != nil {
		t.Fatalf("sluice run: %v\n%s", err, log.String())
	}

	// The file sink's seqs, by table and op, in order.
	fileSeqs := map[string][]string{}
	segs, _ := filepath.Glob(filepath.Join(dir, "out", "changes.*.jsonl"))
	for _, seg := range segs {
		b, err := os.ReadFile(seg)
		if err != nil {
			t.Fatal(err)
		}
		for l := range bytes.Lines(b) {
			var ev struct {
				Source struct{ Table string }
				Op     string
				Sluice struct{ Seq uint64 }
			}
			if err := json.Unmarshal(l, &ev); err != nil {
				t.Fatal(err)
			}
			if ev.Op == "" {
				continue // the DDL
			}
			fileSeqs[ev.Source.Table] = append(fileSeqs[ev.Source.Table], ev.Op+":"+strconv.FormatUint(ev.Sluice.Seq, 10))
		}
	}

	type want struct {
		key     string // "" for null
		op      string // "" for a tombstone
		id      int
		d       string
		ts      string // the DATETIME(3) as Debezium writes it: epoch ms, or null
		snapHdr bool
		// hdr is a Debezium header the record carries (key=value);
		// fileOp the op of the file sink's line of the same seq ("-": the
		// record repeats the next one's seq: a key change's delete).
		hdr, fileOp string
	}
	check := func(topic string, rs []kcatRecord, ws []want) {
		if len(rs) != len(ws) {
			t.Fatalf("%s: %d records, want %d", topic, len(rs), len(ws))
		}
		var seqs []string
		for i, r := range rs {
			w := ws[i]
			if (r.Key == nil) != (w.key == "") || r.Key != nil && *r.Key != w.key {
				t.Fatalf("%s record %d: key %v, want %q", topic, i, r.Key, w.key)
			}
			seq, ok := r.header("sluice-seq")
			if !ok {
				t.Fatalf("%s record %d: no sluice-seq header: %v", topic, i, r.Headers)
			}
			if _, ok := r.header("sluice-pipeline"); !ok {
				t.Fatalf("%s record %d: no sluice-pipeline header", topic, i)
			}
			if _, snap := r.header("sluice-snapshot"); snap != w.snapHdr {
				t.Fatalf("%s record %d: sluice-snapshot header %v, want %v", topic, i, snap, w.snapHdr)
			}
			if w.hdr != "" {
				k, v, _ := strings.Cut(w.hdr, "=")
				if got, ok := r.header(k); !ok || got != v {
					t.Fatalf("%s record %d: header %s = %q, want %q (headers %v)", topic, i, k, got, v, r.Headers)
				}
			}
			if w.op == "" {
				if r.Payload != nil {
					t.Fatalf("%s record %d: want a tombstone, got %s", topic, i, *r.Payload)
				}
				if _, end := r.header("sluice-end"); end {
					t.Fatalf("%s record %d: a tombstone with sluice-end", topic, i)
				}
				if prev, _ := rs[i-1].header("sluice-seq"); prev != seq {
					t.Fatalf("%s record %d: tombstone seq %s, its delete's %s", topic, i, seq, prev)
				}
				continue
			}
			if r.Payload == nil {
				t.Fatalf("%s record %d: null value", topic, i)
			}
			var ev map[string]json.RawMessage
			if err := json.Unmarshal([]byte(*r.Payload), &ev); err != nil {
				t.Fatalf("%s record %d: %v: %s", topic, i, err, *r.Payload)
			}
			for _, k := range []string{"before", "after", "source", "transaction", "op", "ts_ms", "ts_us", "ts_ns"} {
				if _, ok := ev[k]; !ok {
					t.Fatalf("%s record %d: no %q in %s", topic, i, k, *r.Payload)
				}
			}
			if len(ev) != 8 {
				t.Fatalf("%s record %d: members beyond Debezium's envelope (a sluice block?): %s", topic, i, *r.Payload)
			}
			if string(ev["op"]) != strconv.Quote(w.op) {
				t.Fatalf("%s record %d: op %s, want %s", topic, i, ev["op"], w.op)
			}
			row := ev["after"]
			if w.op == "d" {
				row = ev["before"]
			}
			if topic == "app.t" {
				var got struct {
					ID int
					D  json.RawMessage
					TS json.RawMessage
				}
				if err := json.Unmarshal(row, &got); err != nil {
					t.Fatal(err)
				}
				if got.ID != w.id || string(got.D) != w.d || string(got.TS) != w.ts {
					t.Fatalf("%s record %d: row %s, want id %d d %s ts %s", topic, i, row, w.id, w.d, w.ts)
				}
			}
			switch w.fileOp {
			case "-":
			case "":
				seqs = append(seqs, w.op+":"+seq)
			default:
				seqs = append(seqs, w.fileOp+":"+seq)
			}
		}
		if strings.Join(seqs, " ") != strings.Join(fileSeqs[strings.TrimPrefix(topic, "app.")], " ") {
			t.Fatalf("%s: seqs %v, the file sink's %v", topic, seqs, fileSeqs[strings.TrimPrefix(topic, "app.")])
		}
	}
	check("app.t", ts, []want{
		{key: `{"id":1}`, op: "r", id: 1, d: `"AJY="`, ts: "1704164645678", snapHdr: true},
		{key: `{"id":2}`, op: "r", id: 2, d: `"/w=="`, ts: "null", snapHdr: true},
		{key: `{"id":3}`, op: "c", id: 3, d: `"D0I/"`, ts: "1"},
		{key: `{"id":1}`, op: "u", id: 1, d: `"AOE="`, ts: "1704164645678"},
		{key: `{"id":2}`, op: "d", id: 2, d: `"/w=="`, ts: "null"},
		{key: `{"id":2}`}, // the tombstone
		// The key change 3 -> 5: delete, tombstone, create (one update
		// in the sluice file sink).
		{key: `{"id":3}`, op: "d", id: 3, d: `"D0I/"`, ts: "1", hdr: `__debezium.newkey={"id":5}`, fileOp: "-"},
		{key: `{"id":3}`},
		{key: `{"id":5}`, op: "c", id: 5, d: `"D0I/"`, ts: "1", hdr: `__debezium.oldkey={"id":3}`, fileOp: "u"},
	})
	check("app.k", ks, []want{{op: "r", snapHdr: true}, {op: "d"}}) // a null key, no tombstone
}
