package join

import (
	"path/filepath"
	"testing"

	"github.com/sluice-cdc/sluice/internal/sinktest"
	"github.com/sluice-cdc/sluice/pipeline"
	"github.com/sluice-cdc/sluice/sink/file"
)

// TestConformance runs the sink conformance suite on a join sink (its
// input side: what it consumed, as its recovery reports it), its state in
// Pebble and its output in a file sink. A Write is one commit of the
// state, so a crash cuts at batch boundaries, and batches end anywhere
// inside a source transaction.
func TestConformance(t *testing.T) {
	root := t.TempDir()
	sinktest.Run(t, sinktest.Target{
		Open: func(t *testing.T, ns string) pipeline.Sink {
			dir := filepath.Join(root, ns)
			out, err := file.New("joined", file.Config{Path: filepath.Join(dir, "out", "j.jsonl")}, nil)
			if err != nil {
				t.Fatal(err)
			}
			s, err := NewSink(testConfig(dir, Inner), SinkOptions{Out: out, Tick: -1})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			return s
		},
		Absolute:  true,
		NoFencing: "a join's state directory is held by one process at a time; TestSinkFencing fences it through its downstream sink",
	})
}
