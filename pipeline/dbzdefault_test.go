package pipeline_test

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluice-cdc/sluice/binlog"
	"github.com/sluice-cdc/sluice/checkpoint"
	"github.com/sluice-cdc/sluice/codec"
	"github.com/sluice-cdc/sluice/internal/testenv"
	"github.com/sluice-cdc/sluice/pipeline"
	"github.com/sluice-cdc/sluice/position"
)

// TestDebeziumSchemaDefaults: columns with defaults of many types give
// their field schemas Debezium's "default", and a row read by the
// snapshot and the same row read from the binlog are written byte for
// byte alike (schema and values), with schemas on and off and
// replace.null.with.default on and off; a null of a column with a default
// is the default unless replace.null.with.default is false. An ENUM with
// a non-ASCII member has the same members in both.
func TestDebeziumSchemaDefaults(t *testing.T) {
	testenv.ForEachFlavor(t, func(t *testing.T, flavor position.Flavor) {
		// FULL: the binlog's own metadata, defaults from
		// information_schema's reader; MINIMAL: all from it; with a
		// schema history, from the history's definitions.
		for _, meta := range []string{"FULL", "MINIMAL"} {
			t.Run(meta, func(t *testing.T) { dbzDefaults(t, flavor, meta, false) })
			t.Run(meta+"/history", func(t *testing.T) { dbzDefaults(t, flavor, meta, true) })
		}
	})
}

func dbzDefaults(t *testing.T, flavor position.Flavor, meta string, history bool) {
	db := testenv.StartT(t, testenv.Options{Flavor: flavor, RowMetadata: meta})
	ctx := context.Background()
	create := "CREATE TABLE app.t (id INT PRIMARY KEY, i INT DEFAULT 5, n INT NOT NULL DEFAULT -7, u BIGINT UNSIGNED DEFAULT 18446744073709551615, " +
		"d DECIMAL(5,2) DEFAULT 1.5, f DOUBLE DEFAULT 2.5, v VARCHAR(10) DEFAULT 'a''b', e ENUM('x','ü') DEFAULT 'ü', s SET('p','q') DEFAULT 'p,q', " +
		"b BIT(5) DEFAULT b'101', b1 BIT(1) DEFAULT b'1', dt DATE DEFAULT '2020-01-02', tm DATETIME(3) DEFAULT '2020-01-02 03:04:05.678', " +
		"ts TIMESTAMP NULL DEFAULT '2020-01-02 03:04:05', tc TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP, tt TIME DEFAULT '10:00:00', y YEAR DEFAULT 2020, " +
		"vb VARBINARY(4) DEFAULT 'ab', nd INT DEFAULT NULL, nn INT)"
	if err := db.Exec(ctx, "CREATE DATABASE app CHARACTER SET utf8mb4", create,
		"INSERT INTO app.t (id, tc) VALUES (1, '2021-01-01 00:00:00')",
		"INSERT INTO app.t (id, tc, i, v, nn) VALUES (2, '2021-01-01 00:00:00', NULL, NULL, NULL)"); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	formats := []codec.Format{
		{Name: codec.FormatDebezium, Schemas: true},
		{Name: codec.FormatDebezium},
		{Name: codec.FormatDebezium, Schemas: true, ReplaceNullWithDefault: "false"},
		{Name: codec.FormatDebezium, ReplaceNullWithDefault: "false"},
	}
	src, err := binlog.ParseSourceURL(db.URL())
	if err != nil {
		t.Fatal(err)
	}
	src.ServerID = 779
	if src.Tables, err = binlog.ParseFilter("app.*"); err != nil {
		t.Fatal(err)
	}
	sinks := fileSinks(t, dir, formats)
	store := &checkpoint.FileStore{Path: filepath.Join(dir, "ckpt.json")}
	sc := pipeline.SourceConfig{Name: "db1", Binlog: src, Snapshot: pipeline.SnapshotConfig{Mode: "initial"}}
	if history {
		sc.Schema = &checkpoint.FileSchemaStore{Path: checkpoint.SchemaPath(store.Path, "db1")}
	}
	p, err := pipeline.New(pipeline.Config{
		Name:            "dbzdef",
		Source:          sc,
		Sinks:           sinks,
		Store:           store,
		CheckpointEvery: 20 * time.Millisecond,
		RetryMin:        10 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	stop := runUntilStopped(t, ctx, p, sinks)
	lines := func(i int) [][]byte {
		var out [][]byte
		for _, l := range fileLines(t, filepath.Join(dir, strconv.Itoa(i), "out.jsonl")) {
			if !bytes.Contains(l, []byte(`"ddl":`)) { // not the CREATE TABLE's schema-change event
				out = append(out, l)
			}
		}
		return out
	}
	wait := func(n int) {
		deadline := time.Now().Add(90 * time.Second)
		for {
			ok := true
			for i := range formats {
				ok = ok && len(lines(i)) >= n
			}
			if ok {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("after 90 s: %d lines in the first sink, want %d", len(lines(0)), n)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	wait(2)
	if err := db.Exec(ctx, "INSERT INTO app.t (id, tc) VALUES (3, '2021-01-01 00:00:00')",
		"INSERT INTO app.t (id, tc, i, v, nn) VALUES (4, '2021-01-01 00:00:00', NULL, NULL, NULL)"); err != nil {
		t.Fatal(err)
	}
	wait(4)
	// A table created while streaming: with a history, its definition is
	// the statement as typed (DEFAULT 1.5 for DECIMAL(5,2)), not the
	// server's SHOW CREATE TABLE.
	if err := db.Exec(ctx, strings.Replace(create, "app.t ", "app.t2 ", 1),
		"INSERT INTO app.t2 (id, tc) VALUES (5, '2021-01-01 00:00:00')",
		"INSERT INTO app.t2 (id, tc, i, v, nn) VALUES (6, '2021-01-01 00:00:00', NULL, NULL, NULL)"); err != nil {
		t.Fatal(err)
	}
	wait(6)
	stop()

	type event struct {
		Schema  json.RawMessage
		Payload *struct{ After map[string]json.RawMessage }
		After   map[string]json.RawMessage
	}
	for i, f := range formats {
		var ls [][]byte
		for _, l := range lines(i) {
			ls = append(ls, bytes.ReplaceAll(l, []byte(`"db1.app.t2.`), []byte(`"db1.app.t.`)))
		}
		if len(ls) != 6 {
			t.Fatalf("format %+v: %d lines, want 6", f, len(ls))
		}
		var evs [6]event
		for j, l := range ls {
			if err := json.Unmarshal(l, &evs[j]); err != nil {
				t.Fatalf("format %+v line %d: %v: %s", f, j, err, l)
			}
			if evs[j].Payload != nil {
				evs[j].After = evs[j].Payload.After
			}
		}
		// Snapshot (lines 0, 1) and stream (2, 3): the same schema, the
		// same values but id.
		for j := 0; j < 2; j++ {
			for _, k := range []int{j + 2, j + 4} {
				a, b := evs[j].After, evs[k].After
				if a == nil || b == nil {
					t.Fatalf("format %+v: no after image in %s / %s", f, ls[j], ls[k])
				}
				delete(a, "id")
				delete(b, "id")
				ja, _ := json.Marshal(a)
				jb, _ := json.Marshal(b)
				if !bytes.Equal(ja, jb) {
					t.Fatalf("format %+v row %d: snapshot and stream differ:\nsnapshot %s\nstream   %s", f, k+1, ja, jb)
				}
				if f.Schemas && !bytes.Equal(evs[j].Schema, evs[k].Schema) {
					t.Fatalf("format %+v: snapshot and stream schemas differ (row %d):\nsnapshot %s\nstream   %s", f, k+1, evs[j].Schema, evs[k].Schema)
				}
			}
		}
		row := evs[0].After
		want := map[string]string{"i": "5", "n": "-7", "u": "-1", "d": `"AJY="`, "f": "2.5", "v": `"a'b"`, "e": `"ü"`, "s": `"p,q"`,
			"b": `"BQ=="`, "b1": "true", "dt": "18263", "tm": "1577934245678", "ts": `"2020-01-02T03:04:05Z"`, "tt": "36000000000", "y": "2020",
			"vb": `"YWI="`, "nd": "null", "nn": "null"}
		for c, w := range want {
			var gv, wv any
			json.Unmarshal(row[c], &gv)
			json.Unmarshal([]byte(w), &wv)
			if g, _ := json.Marshal(gv); string(g) != func() string { b, _ := json.Marshal(wv); return string(b) }() {
				t.Errorf("format %+v: column %s is %s, want %s", f, c, row[c], w)
			}
		}
		nulls := evs[1].After
		for _, c := range []string{"i", "v"} {
			got := string(nulls[c])
			if f.ReplaceNullWithDefault == "false" {
				if got != "null" {
					t.Errorf("format %+v: null %s written %s, want null", f, c, got)
				}
			} else if got != string(row[c]) {
				t.Errorf("format %+v: null %s written %s, want the default %s", f, c, got, row[c])
			}
		}
		if string(nulls["nn"]) != "null" {
			t.Errorf("format %+v: null nn (no default) written %s", f, nulls["nn"])
		}
		if f.Schemas {
			s := string(evs[0].Schema)
			for _, frag := range []string{`"default":5,"field":"i"`, `"default":"AJY=","field":"d"`, `"parameters":{"allowed":"x,ü"},"default":"ü","field":"e"`,
				`"default":"1970-01-01T00:00:00Z","field":"tc"`, `"optional":true,"field":"nd"`, `"optional":true,"field":"nn"`} {
				if !strings.Contains(s, frag) {
					t.Errorf("format %+v: schema lacks %s: %s", f, frag, s)
				}
			}
		}
	}
}
