package file_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/sluice-cdc/sluice/pipeline"
	"github.com/sluice-cdc/sluice/sink/file"
)

// An empty sink reports the start of a segment it has not created yet; a
// checkpoint saved with that offset (before anything was written) must
// recover again, holding nothing, and the sink then writes there.
func TestRecoverAtUnwrittenSegment(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	open := func() *file.Sink {
		s, err := file.New("out", file.Config{Path: filepath.Join(dir, "changes.jsonl")}, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	s := open()
	rec, err := s.Recover(ctx, 1, "")
	if err != nil || rec.MaxSeq != 0 {
		t.Fatalf("first Recover: %+v, %v", rec, err)
	}
	s.Close()
	s = open()
	again, err := s.Recover(ctx, 2, rec.Offset)
	if err != nil || again.MaxSeq != 0 || again.Offset != rec.Offset {
		t.Fatalf("Recover(%q) of an empty sink: %+v, %v; want nothing held, same offset", rec.Offset, again, err)
	}
	line := []byte(`{"op":"c","sluice":{"seq":1,"epoch":2,"source":"db"}}`)
	if _, err := s.Write(ctx, &pipeline.Batch{Epoch: 2, Messages: []pipeline.Message{{Seq: 1, Source: "db", Value: line}}}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s = open()
	after, err := s.Recover(ctx, 3, rec.Offset)
	if err != nil || after.MaxSeq != 1 {
		t.Fatalf("Recover(%q) after a write: %+v, %v; want seq 1 found", rec.Offset, after, err)
	}
}
