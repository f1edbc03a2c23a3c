package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-cdc/sluice/internal/testenv"
	"github.com/sluice-cdc/sluice/position"
)

// A checkpoint file written by the tail of an older sluice (before tail
// ran the pipeline): {"version", "sources": {"tail": position},
// "snapshot": unfinished snapshot, "saved_at"} and nothing else. tail
// resumes from it exactly where it says, without repeating or skipping a
// transaction, and saves the pipeline's checkpoint in its place.
func TestTailOldCheckpoint(t *testing.T) {
	bin := buildSluice(t)
	testenv.ForEachFlavor(t, func(t *testing.T, flavor position.Flavor) { tailOldCheckpoint(t, bin, flavor) })
}

// oldCheckpoint is the file an older tail wrote (checkpoint.FileStore's
// indented JSON of those fields).
func oldCheckpoint(t *testing.T, path string, version int, pos json.RawMessage, snapshot string) {
	t.Helper()
	var b strings.Builder
	b.WriteString("{\n  \"version\": ")
	b.WriteString(strconv.Itoa(version))
	b.WriteString(",\n  \"sources\": {\n    \"tail\": ")
	b.Write(pos)
	b.WriteString("\n  },\n")
	if snapshot != "" {
		b.WriteString("  \"snapshot\": " + snapshot + ",\n")
	}
	b.WriteString("  \"saved_at\": \"2026-01-02T03:04:05.123456Z\"\n}\n")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}

// tailPosition runs tail from from to to with a checkpoint and returns
// the position it saved, as the JSON an older tail saved it in (the same
// position.Position).
func tailPosition(t *testing.T, bin string, db *testenv.Server, from, to string) json.RawMessage {
	t.Helper()
	ckpt := filepath.Join(t.TempDir(), "pos.ckpt")
	run(t, bin, "tail", "--source", db.URL(), "--tables", "shop.*", "--from", from, "--to", to, "--checkpoint", ckpt)
	raw, err := os.ReadFile(ckpt)
	if err != nil {
		t.Fatal(err)
	}
	var cp struct {
		Sources map[string]json.RawMessage `json:"sources"`
	}
	if err := json.Unmarshal(raw, &cp); err != nil || cp.Sources["tail"] == nil {
		t.Fatalf("checkpoint %s: %v", raw, err)
	}
	var p position.Position
	if err := json.Unmarshal(cp.Sources["tail"], &p); err != nil || p.File == "" {
		t.Fatalf("position %s: %v", cp.Sources["tail"], err)
	}
	return cp.Sources["tail"]
}

// newCheckpoint reads the checkpoint tail saved, in the pipeline's
// layout.
func newCheckpoint(t *testing.T, path string) (cp struct {
	Pipeline string                     `json:"pipeline"`
	Version  uint64                     `json:"version"`
	Epoch    uint64                     `json:"epoch"`
	Sources  map[string]json.RawMessage `json:"sources"`
	Sinks    map[string]string          `json:"sinks"`
	Snapshot json.RawMessage            `json:"snapshot"`
}) {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &cp); err != nil {
		t.Fatalf("checkpoint %s: %v", raw, err)
	}
	return cp
}

func tailOldCheckpoint(t *testing.T, bin string, flavor position.Flavor) {
	db := testenv.StartT(t, testenv.Options{Flavor: flavor})
	ctx := context.Background()
	if err := db.Exec(ctx, "CREATE DATABASE shop", "CREATE TABLE shop.items (id INT PRIMARY KEY, name VARCHAR(20))"); err != nil {
		t.Fatal(err)
	}
	from := masterPos(t, db)
	// Three transactions before the saved position, three after.
	if err := db.Exec(ctx, "INSERT INTO shop.items VALUES (1, 'a')", "INSERT INTO shop.items VALUES (2, 'b')", "UPDATE shop.items SET name = 'a2' WHERE id = 1"); err != nil {
		t.Fatal(err)
	}
	mid := masterPos(t, db)
	if err := db.Exec(ctx, "INSERT INTO shop.items VALUES (3, 'c'), (4, 'd')", "UPDATE shop.items SET name = 'b2' WHERE id = 2", "DELETE FROM shop.items WHERE id = 1"); err != nil {
		t.Fatal(err)
	}
	to := masterPos(t, db)
	pos := tailPosition(t, bin, db, from, mid)
	// What follows the saved position, in order: each once.
	want := []string{"c 3", "c 4", "u 2", "d 1"}
	lines := func(out string) []string {
		var got []string
		for _, ev := range events(t, out) {
			if ev.IsDDL() {
				continue
			}
			id := ev.After["id"]
			if ev.Op == "d" {
				id = ev.Before["id"]
			}
			got = append(got, ev.Op+" "+string(id))
		}
		return got
	}

	t.Run("position", func(t *testing.T) {
		ckpt := filepath.Join(t.TempDir(), "tail.ckpt")
		oldCheckpoint(t, ckpt, 5, pos, "")
		out, errOut := run(t, bin, "tail", "--source", db.URL(), "--tables", "shop.*", "--to", to, "--checkpoint", ckpt)
		if got := lines(out); !slices.Equal(got, want) {
			t.Fatalf("resumed from an older tail's checkpoint: got %v, want %v\n%s", got, want, errOut)
		}
		if !strings.Contains(errOut, "resuming from checkpoint") || !strings.Contains(errOut, "rows=4 txns=3 ") {
			t.Fatalf("stderr: %s", errOut)
		}
		cp := newCheckpoint(t, ckpt)
		if cp.Pipeline != "tail" || cp.Version <= 5 || cp.Epoch == 0 || cp.Sources["tail"] == nil || cp.Sinks == nil || len(cp.Snapshot) > 0 {
			t.Fatalf("the checkpoint saved after it: %+v", cp)
		}
		// And the checkpoint saved now resumes after the last one.
		if err := db.Exec(ctx, "INSERT INTO shop.items VALUES (5, 'e')"); err != nil {
			t.Fatal(err)
		}
		out, errOut = run(t, bin, "tail", "--source", db.URL(), "--tables", "shop.*", "--to", masterPos(t, db), "--checkpoint", ckpt)
		if got := lines(out); !slices.Equal(got, []string{"c 5"}) {
			t.Fatalf("second resume: got %v, want [c 5]\n%s", got, errOut)
		}
		if err := db.Exec(ctx, "DELETE FROM shop.items WHERE id = 5"); err != nil {
			t.Fatal(err)
		}
	})

	// An older tail killed while a snapshot was unfinished: the whole of
	// shop.items left to read, while streaming from the saved position.
	t.Run("snapshot", func(t *testing.T) {
		dir := t.TempDir()
		ckpt := filepath.Join(dir, "tail.ckpt")
		oldCheckpoint(t, ckpt, 9, pos, `{
    "position": `+string(pos)+`,
    "ranges": [
      {
        "schema": "shop",
        "table": "items"
      }
    ],
    "tables": [
      "shop.items"
    ]
  }`)
		// The stream goes on past to: the row the first subtest added and
		// deleted.
		wantStream := append(slices.Clone(want), "c 5", "d 5")
		outPath := filepath.Join(dir, "out.jsonl")
		f, err := os.Create(outPath)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		var stderr syncBuffer
		cmd := exec.Command(bin, "tail", "--source", db.URL(), "--tables", "shop.*", "--checkpoint", ckpt)
		cmd.Stdout, cmd.Stderr = f, &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		defer cmd.Process.Kill()
		for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			b, _ := os.ReadFile(outPath)
			if bytes.Contains(b, []byte(`"snapshot":"last"`)) && len(lines(string(b))) >= len(wantStream)+3 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the resumed snapshot did not finish:\n%s\n%s", b, stderr.String())
			}
		}
		time.Sleep(500 * time.Millisecond) // anything more it would print
		cmd.Process.Signal(syscall.SIGTERM)
		cmd.Wait()
		b, _ := os.ReadFile(outPath)
		var stream, reads []string
		for _, l := range lines(string(b)) {
			if strings.HasPrefix(l, "r ") {
				reads = append(reads, l)
			} else {
				stream = append(stream, l)
			}
		}
		slices.Sort(reads)
		// The stream from the saved position, each transaction once; the
		// snapshot reads the table's rows (2, 3, 4), wherever its chunks
		// fall among the stream's.
		if !slices.Equal(stream, wantStream) || !slices.Equal(reads, []string{"r 2", "r 3", "r 4"}) {
			t.Fatalf("resumed an older tail's unfinished snapshot: stream %v (want %v), snapshot rows %v\n%s\n%s", stream, wantStream, reads, b, stderr.String())
		}
		if !strings.Contains(stderr.String(), "resuming an interrupted snapshot while streaming") {
			t.Fatalf("stderr: %s", stderr.String())
		}
		cp := newCheckpoint(t, ckpt)
		if cp.Pipeline != "tail" || cp.Version <= 9 || len(cp.Snapshot) > 0 || cp.Sources["tail"] == nil {
			t.Fatalf("the checkpoint after the snapshot finished: %+v", cp)
		}
	})
}
