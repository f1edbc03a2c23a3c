package pipeline_test

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluice-cdc/sluice/binlog"
	"github.com/sluice-cdc/sluice/checkpoint"
	"github.com/sluice-cdc/sluice/codec"
	"github.com/sluice-cdc/sluice/internal/testenv"
	"github.com/sluice-cdc/sluice/internal/workload"
	"github.com/sluice-cdc/sluice/pipeline"
	"github.com/sluice-cdc/sluice/position"
	"github.com/sluice-cdc/sluice/rowimage"
)

// imageEvents reads the row events of the file sink of format f.
func imageEvents(t *testing.T, dir string, f int) []workload.ImageEvent {
	t.Helper()
	evs, err := workload.ReadImageEvents(filepath.Join(dir, strconv.Itoa(f), "out.*.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	return evs
}

// TestRowImageFill (issue 32): with row_image: fill, a random workload run
// alike on a database written with binlog_row_image FULL and on ones
// written with MINIMAL and NOBLOB (sessions of one server) yields, for
// each, exactly the images of the FULL one, in format sluice and format
// debezium, across restarts of the pipeline.
func TestRowImageFill(t *testing.T) {
	testenv.ForEachFlavor(t, func(t *testing.T, flavor position.Flavor) {
		ctx := context.Background()
		db := testenv.StartT(t, testenv.Options{Flavor: flavor})
		w := workload.NewRowImages(uint64(len(flavor)))
		if err := w.Prepare(ctx, db, 30); err != nil {
			t.Fatal(err)
		}
		dir := t.TempDir()
		formats := []codec.Format{{Name: codec.FormatSluice}, {Name: codec.FormatDebezium}}
		store := &checkpoint.FileStore{Path: filepath.Join(dir, "ckpt.json")}
		var done chan error
		var cur *pipeline.Pipeline
		start := func() func() {
			src, err := binlog.ParseSourceURL(db.URL())
			if err != nil {
				t.Fatal(err)
			}
			src.ServerID = 781
			if src.Tables, err = binlog.ParseFilter("ri_*.*"); err != nil {
				t.Fatal(err)
			}
			sinks := fileSinks(t, dir, formats)
			p, err := pipeline.New(pipeline.Config{
				Name: "fill",
				Source: pipeline.SourceConfig{Name: "db1", Binlog: src,
					Snapshot: pipeline.SnapshotConfig{Mode: "initial", ChunkRows: 7},
					RowImage: pipeline.RowImageConfig{Fill: true, Dir: filepath.Join(dir, "rowimages")}},
				Sinks:           sinks,
				Store:           store,
				BatchBytes:      2 << 10,
				CheckpointEvery: 20 * time.Millisecond,
				RetryMin:        10 * time.Millisecond,
			})
			if err != nil {
				t.Fatal(err)
			}
			cur = p
			cctx, cancel := context.WithCancel(ctx)
			done = make(chan error, 1)
			go func() { done <- p.Run(cctx) }()
			return func() {
				t.Helper()
				cancel()
				if err := <-done; err != nil {
					t.Fatal(err)
				}
				for _, s := range sinks {
					s.Close()
				}
			}
		}
		// wait waits for n row events in every sink (or the pipeline's end).
		wait := func(what string, ok func([]workload.ImageEvent) bool) {
			t.Helper()
			deadline := time.Now().Add(90 * time.Second)
			for f := range formats {
				for !ok(imageEvents(t, dir, f)) {
					select {
					case err := <-done:
						t.Fatalf("the pipeline stopped waiting for %s: %v", what, err)
					default:
					}
					if time.Now().After(deadline) {
						t.Fatalf("format %s: %s did not arrive in 90 s", formats[f].Name, what)
					}
					time.Sleep(50 * time.Millisecond)
				}
			}
		}
		stop := start()
		// The snapshot first (a restart inside it would resume it while
		// streaming, and rows changed before their chunk is read again
		// would be rows the store has not seen).
		wait("the snapshot", func(evs []workload.ImageEvent) bool { return workload.Snapshotted(evs, workload.SnapshotRows(30)) })
		time.Sleep(200 * time.Millisecond) // its checkpoint
		for i := range 120 {
			if err := workload.RunOn(ctx, db, w.Txn()); err != nil {
				t.Fatal(err)
			}
			if i%40 == 39 {
				stop()
				stop = start()
			}
		}
		if err := workload.Finish(ctx, db); err != nil {
			t.Fatal(err)
		}
		wait("the last row", workload.Finished)
		if st := cur.Status().Sources[0]; st.RowImagesCompleted == 0 || st.RowImageStoreBytes == 0 || st.RowImageStoreCleared != 0 {
			t.Errorf("status: %d images completed, store %d bytes, cleared %d times; want some, some, none", st.RowImagesCompleted, st.RowImageStoreBytes, st.RowImageStoreCleared)
		}
		stop()
		for f := range formats {
			evs := imageEvents(t, dir, f)
			if err := workload.CompareRowImages(evs); err != nil {
				t.Errorf("format %s: %v", formats[f].Name, err)
			}
			partial := 0
			for _, l := range fileLines(t, filepath.Join(dir, strconv.Itoa(f), "out.jsonl")) {
				if json.Valid(l) && len(l) > 0 && containsPresent(l) {
					partial++
				}
			}
			if partial != 0 {
				t.Errorf("format %s: %d messages still list present columns: images were not completed", formats[f].Name, partial)
			}
		}
	})
}

func containsPresent(l []byte) bool {
	var m map[string]json.RawMessage
	if json.Unmarshal(l, &m) != nil {
		return false
	}
	_, ok := m["present"]
	return ok
}

// TestRowImageFillMissing: a partial image of a row the store never saw
// whole (no snapshot), and an insert that leaves a column to its default
// (MINIMAL logs only the columns an INSERT names, on both servers), stop
// the pipeline with an error naming the table, the key, the position and
// the fix.
func TestRowImageFillMissing(t *testing.T) {
	testenv.ForEachFlavor(t, func(t *testing.T, flavor position.Flavor) {
		ctx := context.Background()
		db := testenv.StartT(t, testenv.Options{Flavor: flavor, RowImage: "MINIMAL"})
		if err := db.Exec(ctx, "CREATE DATABASE app", "CREATE TABLE app.t (id INT PRIMARY KEY, a INT DEFAULT 5, b TEXT)", "INSERT INTO app.t VALUES (7, 1, 'x')"); err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct{ name, stmt, key, reason string }{
			{"never seen", "UPDATE app.t SET a = 2 WHERE id = 7", "(id=7)", "never seen whole"},
			{"insert with defaults", "INSERT INTO app.t (id, b) VALUES (8, 'y')", "(id=8)", "took their defaults"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				_, done := streamFilled(t, db, t.TempDir(), 782, false, []codec.Format{{Name: codec.FormatDebezium}})
				if err := db.Exec(ctx, tc.stmt); err != nil {
					t.Fatal(err)
				}
				err := stopped(t, done)
				var me *rowimage.MissingError
				if !errors.Is(err, rowimage.ErrMissing) || !errors.As(err, &me) {
					t.Fatalf("got %v, want rowimage.ErrMissing", err)
				}
				if me.Table != "app.t" || me.Key != tc.key || me.File == "" || me.Pos == 0 || !strings.Contains(me.Reason, tc.reason) || !strings.Contains(me.Reason, "binlog_row_image=FULL") {
					t.Fatalf("the error does not name the change and the fix: %v", err)
				}
			})
		}
	})
}

// TestRowImageFillReselect: with fill_missing: reselect, a partial image
// of a row the store never saw whole (no snapshot), and an insert that
// leaves a column to its default, are completed from the source's current
// row, read by primary key, and list the columns so read ("reselected");
// a row the source no longer has still stops the pipeline.
func TestRowImageFillReselect(t *testing.T) {
	testenv.ForEachFlavor(t, func(t *testing.T, flavor position.Flavor) {
		ctx := context.Background()
		db := testenv.StartT(t, testenv.Options{Flavor: flavor, RowImage: "MINIMAL"})
		if err := db.Exec(ctx, "CREATE DATABASE app", "CREATE TABLE app.t (id INT PRIMARY KEY, a INT DEFAULT 5, b TEXT)",
			"INSERT INTO app.t VALUES (7, 1, 'x'), (9, 3, 'gone')"); err != nil {
			t.Fatal(err)
		}
		dir := t.TempDir()
		formats := []codec.Format{{Name: codec.FormatSluice}, {Name: codec.FormatDebezium}}
		p, done := streamFilled(t, db, dir, 783, true, formats)
		// Row 7 is read after its update: the reselected before image
		// holds its current values (a=2), as the mark says.
		if err := db.Exec(ctx, "UPDATE app.t SET a = 2 WHERE id = 7", "INSERT INTO app.t (id, b) VALUES (8, 'y')", "UPDATE app.t SET b = 'z' WHERE id = 8"); err != nil {
			t.Fatal(err)
		}
		for deadline := time.Now().Add(60 * time.Second); len(fileLines(t, filepath.Join(dir, "1", "out.jsonl"))) < 3; {
			select {
			case err := <-done:
				t.Fatalf("the pipeline stopped: %v", err)
			default:
			}
			if time.Now().After(deadline) {
				t.Fatal("3 events did not arrive in 60 s")
			}
			time.Sleep(20 * time.Millisecond)
		}
		if got := p.Status().Sources[0].RowImagesReselected; got != 2 {
			t.Errorf("RowImagesReselected = %d, want 2", got)
		}
		if err := db.Exec(ctx, "DELETE FROM app.t WHERE id = 9"); err != nil {
			t.Fatal(err)
		}
		err := stopped(t, done)
		var me *rowimage.MissingError
		if !errors.As(err, &me) || me.Key != "(id=9)" || !strings.Contains(me.Reason, "no longer has the row") {
			t.Fatalf("the delete of a row gone from the source: got %v, want rowimage.ErrMissing naming (id=9)", err)
		}
		want := []struct {
			op, before, after string
			reselected        []string
		}{
			{"u", `{"a":2,"b":"x","id":7}`, `{"a":2,"b":"x","id":7}`, []string{"a", "b"}},
			{"c", ``, `{"a":5,"b":"y","id":8}`, []string{"a"}},
			{"u", `{"a":5,"b":"y","id":8}`, `{"a":5,"b":"z","id":8}`, nil},
		}
		for f := range formats {
			var evs []*codec.Event
			for _, l := range fileLines(t, filepath.Join(dir, strconv.Itoa(f), "out.jsonl")) {
				ev, err := codec.DecodeLine(l)
				if err != nil {
					t.Fatalf("format %s: %v: %s", formats[f].Name, err, l)
				}
				if !ev.IsDDL() {
					evs = append(evs, ev)
				}
			}
			if len(evs) != len(want) {
				t.Fatalf("format %s: %d row events, want %d (the delete of row 9 is not written)", formats[f].Name, len(evs), len(want))
			}
			for i, w := range want {
				ev := evs[i]
				before, _ := json.Marshal(ev.Before)
				after, _ := json.Marshal(ev.After)
				if ev.Before == nil {
					before = nil
				}
				if ev.Op != w.op || string(before) != w.before || string(after) != w.after || ev.Present != nil {
					t.Errorf("format %s event %d: op %s before %s after %s present %v, want %s %s %s and no present", formats[f].Name, i, ev.Op, before, after, ev.Present, w.op, w.before, w.after)
				}
				wr := w.reselected
				if formats[f].Name == codec.FormatDebezium {
					wr = nil // no place in Debezium's envelope: a Kafka header
				}
				if strings.Join(ev.Reselected, ",") != strings.Join(wr, ",") {
					t.Errorf("format %s event %d: reselected %q, want %q", formats[f].Name, i, ev.Reselected, wr)
				}
			}
		}
	})
}

// streamFilled starts a pipeline with row_image: fill (reselect as
// given) on db's app.* from its current position, no snapshot, into one
// file sink per format in dir, and waits until its source streams; done
// receives Run's end. The sinks close with the test.
func streamFilled(t *testing.T, db *testenv.Server, dir string, serverID uint32, reselect bool, formats []codec.Format) (p *pipeline.Pipeline, done chan error) {
	t.Helper()
	src, err := binlog.ParseSourceURL(db.URL())
	if err != nil {
		t.Fatal(err)
	}
	src.ServerID = serverID
	if src.Tables, err = binlog.ParseFilter("app.*"); err != nil {
		t.Fatal(err)
	}
	sinks := fileSinks(t, dir, formats)
	t.Cleanup(func() {
		for _, s := range sinks {
			s.Close()
		}
	})
	p, err = pipeline.New(pipeline.Config{
		Name: "fill",
		Source: pipeline.SourceConfig{Name: "db1", Binlog: src, Snapshot: pipeline.SnapshotConfig{Mode: "never"},
			RowImage: pipeline.RowImageConfig{Fill: true, Dir: filepath.Join(dir, "rowimages"), Reselect: reselect}},
		Sinks:           sinks,
		Store:           &checkpoint.FileStore{Path: filepath.Join(dir, "ckpt.json")},
		CheckpointEvery: 20 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	done = make(chan error, 1)
	go func() { done <- p.Run(context.Background()) }()
	// Streaming from "current": wait until the source streams.
	for deadline := time.Now().Add(30 * time.Second); !p.Status().Sources[0].Streaming; {
		select {
		case err := <-done:
			t.Fatalf("the pipeline stopped: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("the source is not streaming after 30 s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	return p, done
}

// stopped waits for the pipeline's end.
func stopped(t *testing.T, done chan error) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(60 * time.Second):
		t.Fatal("the pipeline did not stop in 60 s")
	}
	return nil
}
