package file_test

import (
	"bytes"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/sluice-cdc/sluice/codec"
	"github.com/sluice-cdc/sluice/internal/sinktest"
	"github.com/sluice-cdc/sluice/pipeline"
	"github.com/sluice-cdc/sluice/sink/file"
)

func openIn(t *testing.T, dir string) *file.Sink {
	t.Helper()
	return openSync(t, dir, false)
}

// openSync opens a sink; noSync leaves fsync out (the torn-line test makes
// thousands of files: what it checks happens without a machine crash).
func openSync(t *testing.T, dir string, noSync bool) *file.Sink {
	t.Helper()
	s, err := file.New("out", file.Config{Path: filepath.Join(dir, "out.jsonl"), NoSync: noSync}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// heldSeqs reads the sequence numbers of the lines in dir's segments.
func heldSeqs(t *testing.T, dir string) []uint64 {
	t.Helper()
	segs, _ := filepath.Glob(filepath.Join(dir, "out.*.jsonl"))
	slices.Sort(segs)
	var seqs []uint64
	for _, seg := range segs {
		b, err := os.ReadFile(seg)
		if err != nil {
			t.Fatal(err)
		}
		for line := range bytes.Lines(b) {
			m, err := pipeline.ParseMeta(line)
			if err != nil {
				t.Fatalf("%s: %v", seg, err)
			}
			seqs = append(seqs, m.Seq)
		}
	}
	return seqs
}

func TestConformance(t *testing.T) {
	root := t.TempDir()
	sinktest.Run(t, sinktest.Target{
		Open: func(t *testing.T, ns string) pipeline.Sink { return openIn(t, filepath.Join(root, ns)) },
		Held: func(t *testing.T, ns string) []uint64 { return heldSeqs(t, filepath.Join(root, ns)) },
	})
}

// TestConformanceDebezium: the suite with lines in format debezium (with
// and without schemas): Debezium's value with the sluice block as its last
// member, which recovery reads (snapshot rows marked in it).
func TestConformanceDebezium(t *testing.T) {
	for _, f := range []codec.Format{{Name: codec.FormatDebezium}, {Name: codec.FormatDebezium, Schemas: true}} {
		t.Run(fmt.Sprintf("schemas=%v", f.Schemas), func(t *testing.T) {
			root := t.TempDir()
			sinktest.Run(t, sinktest.Target{
				Format: f,
				Open: func(t *testing.T, ns string) pipeline.Sink {
					s, err := file.New("out", file.Config{Path: filepath.Join(root, ns, "out.jsonl"), Format: f}, slog.New(slog.DiscardHandler))
					if err != nil {
						t.Fatal(err)
					}
					t.Cleanup(func() { s.Close() })
					return s
				},
				Held: func(t *testing.T, ns string) []uint64 { return heldSeqs(t, filepath.Join(root, ns)) },
			})
		})
	}
}

// A debezium line is Debezium's value exactly, with the sluice block added
// as its last member.
func TestDebeziumLine(t *testing.T) {
	f := codec.Format{Name: codec.FormatDebezium}
	dir := t.TempDir()
	s, err := file.New("out", file.Config{Path: filepath.Join(dir, "out.jsonl"), Format: f}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.Format() != f {
		t.Fatalf("Format() = %+v", s.Format())
	}
	b0, b1, _ := sinktest.BatchesIn(1, f)
	if _, err := s.Recover(t.Context(), 1, ""); err != nil {
		t.Fatal(err)
	}
	ms := append(b0, b1...)
	if _, err := s.Write(t.Context(), &pipeline.Batch{Epoch: 3, Messages: ms}); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "out.000001.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	i := 0
	for line := range bytes.Lines(b) {
		m := ms[i]
		i++
		line = bytes.TrimSuffix(line, []byte("\n"))
		want := string(m.Value[:len(m.Value)-1]) + fmt.Sprintf(`,"sluice":{"seq":%d,"epoch":3,"source":"s1"`, m.Seq)
		if m.Snapshot {
			want += `,"snapshot":true`
		}
		if m.End != nil {
			want += `,"end":` + string(pipeline.AppendEnd(nil, m.End))
		}
		want += "}}"
		if string(line) != want {
			t.Fatalf("line %d:\n%s\nwant\n%s", i, line, want)
		}
		meta, err := pipeline.ParseMeta(line)
		if err != nil || meta.Seq != m.Seq || meta.Epoch != 3 || meta.Snapshot != m.Snapshot {
			t.Fatalf("line %d: ParseMeta = %+v, %v", i, meta, err)
		}
	}
	if i != len(ms) {
		t.Fatalf("%d lines, want %d", i, len(ms))
	}
}

// TestConformanceTornAtEveryByte: a write killed at any byte of its batch
// (the file truncated there) leaves complete lines and maybe a torn one;
// recovery cuts the torn line and reports exactly the complete ones, with
// one source and with two; writing the rest leaves every message once.
func TestConformanceTornAtEveryByte(t *testing.T) {
	for _, nsrc := range []int{1, 2} {
		b0, b1, b2 := sinktest.Batches(nsrc)
		ref := t.TempDir()
		s := openIn(t, ref)
		if _, err := s.Recover(t.Context(), 1, ""); err != nil {
			t.Fatal(err)
		}
		off, err := s.Write(t.Context(), &pipeline.Batch{Epoch: 1, Messages: sinktest.Stamp(b0, 1)})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Write(t.Context(), &pipeline.Batch{Epoch: 1, Messages: sinktest.Stamp(b1, 1)}); err != nil {
			t.Fatal(err)
		}
		s.Close()
		full, err := os.ReadFile(filepath.Join(ref, "out.000001.jsonl"))
		if err != nil {
			t.Fatal(err)
		}
		_, n, _ := strings.Cut(off, ":")
		start, err := strconv.Atoi(n)
		if err != nil {
			t.Fatal(err)
		}
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "out.epoch"), []byte("1\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		seg := filepath.Join(dir, "out.000001.jsonl")
		if err := os.WriteFile(seg, full, 0o644); err != nil {
			t.Fatal(err)
		}
		for cut := start; cut <= len(full); cut++ {
			// The file is full[:cut]: what the sink leaves of it (cut
			// back to a line, or with the rest written after it) always
			// begins with full. Truncating and extending in place, not
			// rewriting: ext4 flushes a file truncated to zero on close.
			if err := setPrefix(seg, full, cut); err != nil {
				t.Fatal(err)
			}
			s := openSync(t, dir, true)
			rec, err := s.Recover(t.Context(), 1, off)
			if err != nil {
				t.Fatalf("cut at byte %d: %v", cut, err)
			}
			// The complete lines of b1 before the cut.
			lines := bytes.Count(full[start:cut], []byte{'\n'})
			sinktest.Check(t, fmt.Sprintf("nsrc %d, a file cut at byte %d", nsrc, cut), rec, sinktest.Expect(b1[:lines]))
			if want := fmt.Sprintf("out.000001.jsonl:%d", bytes.LastIndexByte(full[:cut], '\n')+1); rec.Offset != want {
				t.Fatalf("cut at byte %d: offset %q after the torn line was cut, want %q", cut, rec.Offset, want)
			}
			if cut > start && full[cut-1] != '\n' && full[cut-2] != '\n' {
				// Writing the rest is checked at each line's first two
				// cuts: whole lines, and a torn one.
				s.Close()
				continue
			}
			rest := slices.Concat(b1[lines:], b2)
			if _, err := s.Write(t.Context(), &pipeline.Batch{Epoch: 1, Messages: sinktest.Stamp(rest, 1)}); err != nil {
				t.Fatal(err)
			}
			s.Close()
			var want []uint64
			for _, m := range slices.Concat(b0, b1, b2) {
				want = append(want, m.Seq)
			}
			if got := heldSeqs(t, dir); !slices.Equal(got, want) {
				t.Fatalf("cut at byte %d: after the rest the file holds seqs %v, want %v", cut, got, want)
			}
		}
	}
}

// setPrefix makes the file at path hold full[:n], given that it holds a
// prefix of full, or full and more.
func setPrefix(path string, full []byte, n int) error {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	size := int(min(fi.Size(), int64(len(full))))
	if size < n {
		if _, err := f.WriteAt(full[size:n], int64(size)); err != nil {
			return err
		}
	}
	return f.Truncate(int64(n))
}
