package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluice-cdc/sluice/binlog"
	"github.com/sluice-cdc/sluice/checkpoint"
	"github.com/sluice-cdc/sluice/pipeline"
	"github.com/sluice-cdc/sluice/position"
)

// failWriter fails every write.
type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

// The sink prints each message's run of lines as it is, counts the bytes
// printed and the chunks read, and stops the run on a write error with
// tail's own message.
func TestTailSinkWrite(t *testing.T) {
	var out bytes.Buffer
	s := &tailSink{p: newPrinter(&out, outputOpts{format: "sluice", name: "n"}), name: "n"}
	if pl := s.Plain(); pl.None || pl.Name != "n" {
		t.Fatalf("Plain() = %+v", pl)
	}
	if rec, err := s.Recover(context.Background(), 1, ""); err != nil || rec.MaxSeq != 0 || rec.Ends != nil {
		t.Fatalf("Recover: %+v %v", rec, err)
	}
	big := bytes.Repeat([]byte("x"), 300<<10) // larger than the printer's buffer
	b := &pipeline.Batch{Messages: []pipeline.Message{
		{Seq: 1, Value: []byte("{\"a\":1}\n{\"a\":2}\n")},
		{Seq: 2, Value: append(big, '\n')},
		{Seq: 3, Value: []byte("{\"a\":3}\n")},
	}}
	if _, err := s.Write(context.Background(), b); err != nil {
		t.Fatal(err)
	}
	want := "{\"a\":1}\n{\"a\":2}\n" + string(big) + "\n{\"a\":3}\n"
	if out.String() != want || s.p.out != int64(len(want)) {
		t.Fatalf("printed %d bytes (counted %d), want %d", out.Len(), s.p.out, len(want))
	}
	s.Chunk(&binlog.Txn{Changes: []binlog.Change{{Op: binlog.OpInsert}, {Op: binlog.OpDDL}}, Last: true, Bytes: 7})
	if !strings.Contains(s.p.summary(), "rows=1 txns=1 bytes=7 ") {
		t.Fatalf("summary: %s", s.p.summary())
	}

	f := &tailSink{p: newPrinter(failWriter{}, outputOpts{format: "sluice"})}
	_, err := f.Write(context.Background(), &pipeline.Batch{Messages: []pipeline.Message{{Seq: 1, Value: []byte("{}\n")}}})
	if !errors.Is(err, pipeline.ErrPermanent) || f.err == nil || f.err.Error() != "writing output: disk full" {
		t.Fatalf("a failed write: %v (tail reports %v)", err, f.err)
	}
}

// tailStore keeps the one source's unfinished snapshot in the checkpoint's
// snapshot field (where an older tail wrote it, and where
// TestSnapshotKill9Resume looks), without touching the caller's map; a
// file written by an older tail loads with its position.
func TestTailStore(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "tail.ckpt")
	s := &tailStore{checkpoint.FileStore{Path: path}}
	pos := position.Position{File: "mysql-bin.000003", Offset: 1234}
	snaps := map[string]json.RawMessage{tailSource: json.RawMessage(`{"position":{"file":"mysql-bin.000003","pos":1234},"ranges":[{"schema":"app","table":"t"}]}`)}
	cp := checkpoint.Checkpoint{Pipeline: tailSource, Epoch: 1, Sources: map[string]position.Position{tailSource: pos}, Snapshots: snaps, Sinks: map[string]string{"stdout": ""}}
	v, err := s.Save(ctx, cp, 0)
	if err != nil || v != 1 {
		t.Fatalf("Save: %d %v", v, err)
	}
	if len(snaps) != 1 {
		t.Fatal("Save changed the pipeline's map")
	}
	raw, _ := os.ReadFile(path)
	if !bytes.Contains(raw, []byte(`"snapshot": {`)) || bytes.Contains(raw, []byte(`"snapshots"`)) {
		t.Fatalf("saved: %s", raw)
	}
	got, err := s.Load(ctx)
	if err != nil || got.Sources[tailSource] != pos || len(got.Snapshot) == 0 || got.Pipeline != tailSource {
		t.Fatalf("Load: %+v %v", got, err)
	}
	st, err := pipeline.ResumeState(got.Snapshot)
	if err != nil || st == nil || st.Ranges[0].Table != "t" {
		t.Fatalf("the saved snapshot state: %+v %v", st, err)
	}

	// An older tail's file.
	old := `{
  "version": 4,
  "sources": {
    "tail": {
      "file": "mysql-bin.000003",
      "pos": 1234
    }
  },
  "saved_at": "2026-01-02T03:04:05Z"
}
`
	if err := os.WriteFile(path, []byte(old), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err = s.Load(ctx)
	if err != nil || got.Version != 4 || got.Sources[tailSource] != pos {
		t.Fatalf("an older tail's checkpoint: %+v %v", got, err)
	}
	if _, err := s.Save(ctx, got, 3); !errors.Is(err, checkpoint.ErrConflict) {
		t.Fatalf("a save expecting another version: %v", err)
	}
}

// memStore is versioned like the file store.
func TestMemStore(t *testing.T) {
	ctx := context.Background()
	var s memStore
	if cp, err := s.Load(ctx); err != nil || cp.Version != 0 {
		t.Fatalf("empty: %+v %v", cp, err)
	}
	if v, err := s.Save(ctx, checkpoint.Checkpoint{LastSeq: 5}, 0); err != nil || v != 1 {
		t.Fatalf("Save: %d %v", v, err)
	}
	if _, err := s.Save(ctx, checkpoint.Checkpoint{}, 0); !errors.Is(err, checkpoint.ErrConflict) {
		t.Fatalf("a stale save: %v", err)
	}
	if cp, _ := s.Load(ctx); cp.Version != 1 || cp.LastSeq != 5 {
		t.Fatalf("loaded %+v", cp)
	}
}
