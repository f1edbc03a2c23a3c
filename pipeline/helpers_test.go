package pipeline_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/sluice-cdc/sluice/codec"
	"github.com/sluice-cdc/sluice/pipeline"
	"github.com/sluice-cdc/sluice/sink/file"
)

// fileSinks makes one file sink per format, the i-th writing
// dir/<i>/out.jsonl.
func fileSinks(t *testing.T, dir string, formats []codec.Format) []pipeline.Sink {
	t.Helper()
	var sinks []pipeline.Sink
	for i, f := range formats {
		s, err := file.New("out"+strconv.Itoa(i), file.Config{Path: filepath.Join(dir, strconv.Itoa(i), "out.jsonl"), Format: f}, nil)
		if err != nil {
			t.Fatal(err)
		}
		sinks = append(sinks, s)
	}
	return sinks
}

// fileLines reads the lines a file sink wrote to path's segments (path
// "dir/out.jsonl": dir/out.*.jsonl), without their newlines.
func fileLines(t *testing.T, path string) [][]byte {
	t.Helper()
	var out [][]byte
	ext := filepath.Ext(path)
	segs, _ := filepath.Glob(path[:len(path)-len(ext)] + ".*" + ext)
	for _, seg := range segs {
		b, err := os.ReadFile(seg)
		if err != nil {
			t.Fatal(err)
		}
		for l := range bytes.Lines(b) {
			out = append(out, bytes.TrimSuffix(l, []byte("\n")))
		}
	}
	return out
}

// runUntilStopped runs p until the returned stop is called; stop checks
// that Run ended without an error and closes the sinks.
func runUntilStopped(t *testing.T, ctx context.Context, p *pipeline.Pipeline, sinks []pipeline.Sink) (stop func()) {
	cctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
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
