// Package file is the pipeline's file sink: JSON lines appended to
// numbered segment files, rotated by size, fsynced before a batch counts
// as written, and fenced by an epoch file. It also has the stdout sink.
//
// Layout for path "out/changes.jsonl":
//
//	out/changes.000001.jsonl   segments, oldest first; the highest is written
//	out/changes.000002.jsonl
//	out/changes.epoch          the highest epoch that has written here
//
// The offset saved in checkpoints is "segment:byte offset". Recovery reads
// every line after it, truncates a torn last line (a crash mid-write: that
// batch was never acknowledged), and reports the sequence numbers and
// transaction ends it found.
package file

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/sluice-cdc/sluice/checkpoint"
	"github.com/sluice-cdc/sluice/pipeline"
)

// Config of a file sink.
type Config struct {
	// Path names the output: "dir/name.ext" becomes segments
	// dir/name.000001.ext, dir/name.000002.ext, ...
	Path string `yaml:"path"`
	// MaxBytes starts a new segment once the current one reaches this size
	// (default 256 MiB; checked between batches).
	MaxBytes int64 `yaml:"max_bytes"`
	// NoSync skips fsync: faster, but a machine crash (not a process
	// crash) can lose acknowledged batches. Default false.
	NoSync bool `yaml:"no_sync"`
}

// Validate names what is wrong.
func (c *Config) Validate() error {
	if c.Path == "" {
		return errors.New("path is required (e.g. path: out/changes.jsonl)")
	}
	if c.MaxBytes < 0 {
		return fmt.Errorf("max_bytes %d: must be positive", c.MaxBytes)
	}
	return nil
}

// Sink writes JSON lines to segment files.
type Sink struct {
	name  string
	cfg   Config
	dir   string
	stem  string
	ext   string
	log   *slog.Logger
	epoch uint64

	f    *os.File
	seg  int   // number of the open segment
	size int64 // its size
	buf  []byte
}

var _ pipeline.Sink = (*Sink)(nil)

// New returns a file sink named name.
func New(name string, cfg Config, log *slog.Logger) (*Sink, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("sink %s: %w", name, err)
	}
	if cfg.MaxBytes == 0 {
		cfg.MaxBytes = 256 << 20
	}
	if log == nil {
		log = slog.Default()
	}
	dir, base := filepath.Split(cfg.Path)
	if dir == "" {
		dir = "."
	}
	ext := filepath.Ext(base)
	stem := strings.TrimSuffix(base, ext)
	if stem == "" {
		return nil, fmt.Errorf("sink %s: path %q has no file name", name, cfg.Path)
	}
	return &Sink{name: name, cfg: cfg, dir: dir, stem: stem, ext: ext, log: log}, nil
}

// Name returns the sink's name.
func (s *Sink) Name() string { return s.name }

func (s *Sink) segmentName(n int) string {
	return fmt.Sprintf("%s.%06d%s", s.stem, n, s.ext)
}

func (s *Sink) epochPath() string { return filepath.Join(s.dir, s.stem+".epoch") }

// segments lists the segment numbers present, ascending.
func (s *Sink) segments() ([]int, error) {
	entries, err := os.ReadDir(s.dir)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, nil
		}
		return nil, err
	}
	var out []int
	for _, e := range entries {
		name := e.Name()
		if !strings.HasPrefix(name, s.stem+".") || !strings.HasSuffix(name, s.ext) {
			continue
		}
		mid := strings.TrimSuffix(strings.TrimPrefix(name, s.stem+"."), s.ext)
		if n, err := strconv.Atoi(mid); err == nil && len(mid) >= 6 {
			out = append(out, n)
		}
	}
	sort.Ints(out)
	return out, nil
}

// readEpoch returns the epoch stored in the epoch file (0 if none).
func (s *Sink) readEpoch() (uint64, error) {
	b, err := os.ReadFile(s.epochPath())
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	e, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("epoch file %s is corrupt (%q): %w", s.epochPath(), b, err)
	}
	return e, nil
}

// Recover fences lower epochs, repairs a torn last line and scans what the
// files hold after offset.
func (s *Sink) Recover(ctx context.Context, epoch uint64, offset string) (pipeline.Recovery, error) {
	var rec pipeline.Recovery
	if err := os.MkdirAll(s.dir, 0o755); err != nil {
		return rec, fmt.Errorf("sink %s: %w", s.name, err)
	}
	stored, err := s.readEpoch()
	if err != nil {
		return rec, err
	}
	if stored > epoch {
		return rec, fmt.Errorf("%w: %s holds epoch %d, this writer has %d", pipeline.ErrFenced, s.epochPath(), stored, epoch)
	}
	if stored < epoch {
		if err := checkpoint.WriteFileAtomic(s.epochPath(), []byte(strconv.FormatUint(epoch, 10)+"\n")); err != nil {
			return rec, fmt.Errorf("sink %s: writing epoch file: %w", s.name, err)
		}
	}
	s.epoch = epoch
	if s.f != nil {
		s.f.Close()
		s.f = nil
	}
	segs, err := s.segments()
	if err != nil {
		return rec, err
	}
	fromSeg, fromOff := 0, int64(0)
	if offset != "" {
		name, off, ok := strings.Cut(offset, ":")
		n, err1 := strconv.ParseInt(off, 10, 64)
		if !ok || err1 != nil {
			return rec, fmt.Errorf("sink %s: offset %q in the checkpoint is not SEGMENT:BYTES", s.name, offset)
		}
		for _, sg := range segs {
			if s.segmentName(sg) == name {
				fromSeg, fromOff = sg, n
			}
		}
		if fromSeg == 0 {
			return rec, fmt.Errorf("sink %s: segment %s named by the checkpoint is missing from %s; restore it, or remove the checkpoint to start over", s.name, name, s.dir)
		}
	}
	for i, sg := range segs {
		if sg < fromSeg {
			continue
		}
		start := int64(0)
		if sg == fromSeg {
			start = fromOff
		}
		size, err := s.scan(ctx, sg, start, i == len(segs)-1, &rec)
		if err != nil {
			return rec, err
		}
		s.seg, s.size = sg, size
	}
	if s.seg == 0 {
		// Nothing written yet: the offset is the start (""), not a segment
		// that does not exist.
		s.seg = 1
		return rec, nil
	}
	rec.Offset = s.segmentName(s.seg) + ":" + strconv.FormatInt(s.size, 10)
	return rec, nil
}

// scan reads segment sg from start, observing each line; a torn final line
// of the last segment is cut off. It returns the segment's (new) size.
func (s *Sink) scan(ctx context.Context, sg int, start int64, last bool, rec *pipeline.Recovery) (int64, error) {
	path := filepath.Join(s.dir, s.segmentName(sg))
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return 0, fmt.Errorf("sink %s: %w", s.name, err)
	}
	defer f.Close()
	if _, err := f.Seek(start, io.SeekStart); err != nil {
		return 0, err
	}
	r := bufio.NewReaderSize(f, 1<<20)
	off := start
	for n := 0; ; n++ {
		if n%4096 == 0 && ctx.Err() != nil {
			return 0, ctx.Err()
		}
		line, err := r.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			// A line longer than the buffer: gather it.
			long := append([]byte(nil), line...)
			for err == bufio.ErrBufferFull {
				line, err = r.ReadSlice('\n')
				long = append(long, line...)
			}
			line = long
		}
		if err == io.EOF {
			if len(line) > 0 {
				if !last {
					return 0, fmt.Errorf("sink %s: %s ends in a partial line at byte %d but is not the newest segment; the files were changed by hand", s.name, path, off)
				}
				s.log.Warn("cutting a partial line left by a crash (its batch was never acknowledged)", "sink", s.name, "file", path, "at", off, "bytes", len(line))
				if err := f.Truncate(off); err != nil {
					return 0, err
				}
				if s.cfg.NoSync {
					return off, nil
				}
				if err := f.Sync(); err != nil {
					return 0, err
				}
			}
			return off, nil
		}
		if err != nil {
			return 0, fmt.Errorf("sink %s: reading %s: %w", s.name, path, err)
		}
		meta, err := parseMeta(line[:len(line)-1])
		if err != nil {
			return 0, fmt.Errorf("sink %s: %s at byte %d: %w", s.name, path, off, err)
		}
		rec.Observe(meta.Seq, meta.Source, meta.End, pipeline.SnapshotRow(line[:len(line)-1]))
		off += int64(len(line))
	}
}

var metaMark = []byte(`,"sluice":{`)

// parseMeta reads the sluice block at the end of a line without decoding
// the whole line: the block is always last, so the last mark is it.
func parseMeta(line []byte) (pipeline.Meta, error) {
	i := bytes.LastIndex(line, metaMark)
	if i < 0 || len(line) < 2 || line[len(line)-1] != '}' {
		return pipeline.Meta{}, errors.New(`line has no "sluice" block: the file holds lines not written by sluice run`)
	}
	var m pipeline.Meta
	if err := json.Unmarshal(line[i+len(metaMark)-1:len(line)-1], &m); err != nil {
		return m, fmt.Errorf("bad sluice block: %w", err)
	}
	return m, nil
}

// Write appends the batch, rotating first if the segment is full, and
// syncs it to disk.
func (s *Sink) Write(ctx context.Context, b *pipeline.Batch) (string, error) {
	stored, err := s.readEpoch()
	if err != nil {
		return "", err
	}
	if stored > s.epoch || b.Epoch < s.epoch {
		return "", fmt.Errorf("%w: %s holds epoch %d, this writer has %d", pipeline.ErrFenced, s.epochPath(), stored, b.Epoch)
	}
	if s.f != nil && s.size >= s.cfg.MaxBytes {
		if err := s.f.Close(); err != nil {
			return "", err
		}
		s.f = nil
		s.seg, s.size = s.seg+1, 0
	}
	if s.f == nil {
		f, err := os.OpenFile(filepath.Join(s.dir, s.segmentName(s.seg)), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
		if err != nil {
			return "", fmt.Errorf("sink %s: %w", s.name, err)
		}
		if err := syncDir(s.dir); err != nil {
			f.Close()
			return "", err
		}
		s.f = f
	}
	buf := s.buf[:0]
	for i := range b.Messages {
		buf = append(buf, b.Messages[i].Value...)
		buf = append(buf, '\n')
	}
	s.buf = buf
	if _, err := s.f.Write(buf); err != nil {
		// A partial write is cut by the next Recover.
		s.f.Close()
		s.f = nil
		return "", fmt.Errorf("sink %s: writing %s: %w", s.name, s.segmentName(s.seg), err)
	}
	if !s.cfg.NoSync {
		if err := s.f.Sync(); err != nil {
			s.f.Close()
			s.f = nil
			return "", fmt.Errorf("sink %s: fsync %s: %w", s.name, s.segmentName(s.seg), err)
		}
	}
	s.size += int64(len(buf))
	return s.segmentName(s.seg) + ":" + strconv.FormatInt(s.size, 10), nil
}

// Close closes the open segment.
func (s *Sink) Close() error {
	if s.f == nil {
		return nil
	}
	err := s.f.Close()
	s.f = nil
	return err
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// Stdout writes JSON lines to standard output (or any writer). It keeps
// nothing to recover from: after a crash the lines since the last
// checkpoint are written again. Use the file sink for exactly-once.
type Stdout struct {
	name string
	w    *bufio.Writer
}

var _ pipeline.Sink = (*Stdout)(nil)

// NewStdout returns a sink writing to w (os.Stdout when nil).
func NewStdout(name string, w io.Writer) *Stdout {
	if w == nil {
		w = os.Stdout
	}
	return &Stdout{name: name, w: bufio.NewWriterSize(w, 256<<10)}
}

// Name returns the sink's name.
func (s *Stdout) Name() string { return s.name }

// Recover has nothing to scan.
func (s *Stdout) Recover(context.Context, uint64, string) (pipeline.Recovery, error) {
	return pipeline.Recovery{}, nil
}

// Write prints the batch and flushes it.
func (s *Stdout) Write(_ context.Context, b *pipeline.Batch) (string, error) {
	for i := range b.Messages {
		s.w.Write(b.Messages[i].Value)
		s.w.WriteByte('\n')
	}
	return "", s.w.Flush()
}

// Close flushes.
func (s *Stdout) Close() error { return s.w.Flush() }
