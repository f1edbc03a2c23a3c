package pipeline_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/sluice-cdc/sluice/binlog"
	"github.com/sluice-cdc/sluice/checkpoint"
	"github.com/sluice-cdc/sluice/codec"
	"github.com/sluice-cdc/sluice/internal/testenv"
	"github.com/sluice-cdc/sluice/pipeline"
	"github.com/sluice-cdc/sluice/position"
)

// TestSinkFormats: three sinks of one pipeline in three formats (sluice,
// debezium, debezium with schemas) each receive every change, snapshot
// and stream, across a restart, in their own format and with the same
// sequence numbers; a debezium line is Debezium's value with the sluice
// block as its last member.
func TestSinkFormats(t *testing.T) {
	testenv.ForEachFlavor(t, func(t *testing.T, flavor position.Flavor) { sinkFormats(t, flavor) })
}

func sinkFormats(t *testing.T, flavor position.Flavor) {
	db := testenv.StartT(t, testenv.Options{Flavor: flavor})
	ctx := context.Background()
	if err := db.Exec(ctx, "CREATE DATABASE app", "CREATE TABLE app.t (id INT PRIMARY KEY, d DECIMAL(6,2), ts DATETIME(3))",
		"INSERT INTO app.t VALUES (1, 1.50, '2024-01-02 03:04:05.678'), (2, -0.01, NULL)"); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	formats := []codec.Format{{Name: codec.FormatSluice}, {Name: codec.FormatDebezium}, {Name: codec.FormatDebezium, Schemas: true}}
	store := &checkpoint.FileStore{Path: filepath.Join(dir, "ckpt.json")}
	run := func() func() {
		src, err := binlog.ParseSourceURL(db.URL())
		if err != nil {
			t.Fatal(err)
		}
		src.ServerID = 778
		if src.Tables, err = binlog.ParseFilter("app.*"); err != nil {
			t.Fatal(err)
		}
		sinks := fileSinks(t, dir, formats)
		p, err := pipeline.New(pipeline.Config{
			Name:            "fmt",
			Source:          pipeline.SourceConfig{Name: "db1", Binlog: src, Snapshot: pipeline.SnapshotConfig{Mode: "initial"}},
			Sinks:           sinks,
			Store:           store,
			BatchBytes:      1 << 10,
			CheckpointEvery: 20 * time.Millisecond,
			RetryMin:        10 * time.Millisecond,
		})
		if err != nil {
			t.Fatal(err)
		}
		return runUntilStopped(t, ctx, p, sinks)
	}
	lines := func(i int) [][]byte { return fileLines(t, filepath.Join(dir, strconv.Itoa(i), "out.jsonl")) }
	waitLines := func(n int) {
		deadline := time.Now().Add(60 * time.Second)
		for {
			done := true
			for i := range formats {
				done = done && len(lines(i)) >= n
			}
			if done {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("after 60 s the sinks hold %d, %d, %d lines, want %d", len(lines(0)), len(lines(1)), len(lines(2)), n)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	stop := run()
	waitLines(2) // the snapshot's rows
	if err := db.Exec(ctx, "INSERT INTO app.t VALUES (3, 9999.99, '1970-01-01 00:00:00.001')", "UPDATE app.t SET d = 2.25 WHERE id = 1"); err != nil {
		t.Fatal(err)
	}
	waitLines(4)
	stop()
	if err := db.Exec(ctx, "DELETE FROM app.t WHERE id = 2", "INSERT INTO app.t VALUES (4, 0.00, NULL)"); err != nil {
		t.Fatal(err)
	}
	stop = run()
	waitLines(6)
	stop()

	type row struct {
		ID int              `json:"id"`
		D  json.RawMessage  `json:"d"`
		TS *json.RawMessage `json:"ts"`
	}
	type event struct {
		Before, After *row
		Op            string
		Sluice        *pipeline.Meta
		Schema        json.RawMessage
		Payload       *event
	}
	want := []struct {
		op            string
		id            int
		sluiceD, dbzD string
	}{
		{"r", 1, `"1.50"`, `"AJY="`}, {"r", 2, `"-0.01"`, `"/w=="`}, {"c", 3, `"9999.99"`, `"D0I/"`},
		{"u", 1, `"2.25"`, `"AOE="`}, {"d", 2, `"-0.01"`, `"/w=="`}, {"c", 4, `"0.00"`, `"AA=="`},
	}
	all := [][][]byte{lines(0), lines(1), lines(2)}
	for i, f := range formats {
		if len(all[i]) != len(want) {
			t.Fatalf("format %+v: %d lines, want %d (each change once)", f, len(all[i]), len(want))
		}
		for j, l := range all[i] {
			var ev event
			if err := json.Unmarshal(l, &ev); err != nil {
				t.Fatalf("format %+v line %d: %v: %s", f, j, err, l)
			}
			meta, err := pipeline.ParseMeta(l)
			if err != nil {
				t.Fatal(err)
			}
			if seq0, _ := pipeline.ParseMeta(all[0][j]); meta.Seq != seq0.Seq {
				t.Fatalf("format %+v line %d: seq %d, the sluice sink's is %d", f, j, meta.Seq, seq0.Seq)
			}
			if meta.Snapshot != (want[j].op == "r") && f.IsDebezium() {
				t.Fatalf("format %+v line %d: snapshot %v in %s", f, j, meta.Snapshot, l)
			}
			body := ev
			if f.Schemas {
				if ev.Payload == nil || len(ev.Schema) == 0 {
					t.Fatalf("schemas: line %d has no schema and payload: %s", j, l)
				}
				body = *ev.Payload
			}
			r, d := body.After, want[j].dbzD
			if want[j].op == "d" {
				r = body.Before
			}
			if !f.IsDebezium() {
				d = want[j].sluiceD
			}
			if body.Op != want[j].op || r == nil || r.ID != want[j].id || string(r.D) != d {
				t.Fatalf("format %+v line %d: op %s row %+v d %s, want %+v: %s", f, j, body.Op, r, r.D, want[j], l)
			}
			if f.IsDebezium() && j == 0 && string(*r.TS) != "1704164645678" {
				t.Fatalf("format %+v: DATETIME(3) %s, want epoch milliseconds 1704164645678", f, *r.TS)
			}
		}
	}
}
