// Package file is the pipeline's file sink: JSON lines appended to
// numbered segment files, rotated by size, fsynced before a batch counts
// as written, and fenced by an epoch file. It also has the stdout sink.
//
// Layout for path "out/changes.jsonl":
//
//	out/changes.000001.jsonl   segments, oldest first; the highest is written
//	out/changes.000002.jsonl
//	out/changes.epoch          the highest epoch that has written here
//	out/changes.lock           locked (flock) around every epoch check and write
//
// The offset saved in checkpoints is "segment:byte offset", always the end
// of a line. Recovery reads every line after it, truncates a torn last
// line (a crash mid-write: that batch was never acknowledged), and reports
// the sequence numbers and transaction ends it found.
//
// # Fencing
//
// A Write holds an exclusive lock on NAME.lock from its epoch check to the
// end of its fsync: it reads NAME.epoch, refuses (sink.ErrFenced) if a
// higher epoch is stored, and otherwise appends and syncs the whole batch
// before it lets go. Recover takes the same lock, raises NAME.epoch to its
// own epoch and scans while it holds it. So the write of an older leader
// and a new leader's takeover never interleave: the older leader either
// finished its batch before the new one raised the epoch (and the new
// one's scan finds and accounts for it), or it sees the higher epoch and
// writes nothing. An older leader paused while it holds the lock (a
// SIGSTOP in the middle of a batch) makes the new leader's Recover wait
// for it, logging every second what it waits for, until it resumes and
// finishes that one batch or dies (the kernel then releases its lock);
// there is no timeout, because going on without the lock is exactly the
// interleaving the lock exists to prevent.
//
// The lock is flock(2): it holds between processes of one machine, and
// between machines only on a shared file system whose flock is a real
// lock (NFSv4, CephFS, GlusterFS with locking; not NFSv3 without lockd).
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
	"time"

	"github.com/sluice-cdc/sluice/checkpoint"
	"github.com/sluice-cdc/sluice/codec"
	"github.com/sluice-cdc/sluice/internal/flock"
	"github.com/sluice-cdc/sluice/sink"
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
	// Format is the lines' format (the sink's format: in the config, not
	// in the file block): sluice (default) or debezium. A debezium line is
	// Debezium's value with sluice's block added as its last member
	// ({...,"sluice":{"seq":...}}), which recovery reads.
	Format codec.Format `yaml:"-"`
}

// Validate names what is wrong.
func (c *Config) Validate() error {
	if c.Path == "" {
		return errors.New("path is required (e.g. path: out/changes.jsonl)")
	}
	if c.MaxBytes < 0 {
		return fmt.Errorf("max_bytes %d: must be positive", c.MaxBytes)
	}
	return c.Format.Validate()
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

	lock *flock.File // NAME.lock, opened by the first Recover
	f    *os.File
	seg  int   // number of the open segment
	size int64 // its size
	buf  []byte
}

var _ sink.Sink = (*Sink)(nil)

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

// Format returns the format of the sink's lines (sink.Formatted).
func (s *Sink) Format() codec.Format { return s.cfg.Format }

func (s *Sink) segmentName(n int) string {
	return fmt.Sprintf("%s.%06d%s", s.stem, n, s.ext)
}

func (s *Sink) epochPath() string { return filepath.Join(s.dir, s.stem+".epoch") }

func (s *Sink) lockPath() string { return filepath.Join(s.dir, s.stem+".lock") }

// acquire takes NAME.lock (opening it on first use), logging while another
// process holds it.
func (s *Sink) acquire(ctx context.Context, what string) error {
	if s.lock == nil {
		l, err := flock.Open(s.lockPath())
		if err != nil {
			return fmt.Errorf("sink %s: %w", s.name, err)
		}
		s.lock = l
	}
	err := s.lock.Lock(ctx, func(waited time.Duration) {
		if waited < 2*time.Second || int(waited.Seconds())%10 == 0 {
			s.log.Warn("waiting for the file sink's lock: another process holds it (an earlier leader paused or slow in the middle of a write, or a newer leader recovering); it lets go when its batch or recovery is done, or when it dies",
				"sink", s.name, "lock", s.lockPath(), "for", what, "waited", waited.Round(time.Second).String())
		}
	})
	if err != nil {
		return fmt.Errorf("sink %s: %w", s.name, err)
	}
	return nil
}

func (s *Sink) release() {
	if err := s.lock.Unlock(); err != nil {
		s.log.Warn("releasing the file sink's lock", "sink", s.name, "err", err.Error())
	}
}

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
// files hold after offset, all under the sink's lock (see Fencing).
func (s *Sink) Recover(ctx context.Context, epoch uint64, offset string) (sink.Recovery, error) {
	var rec sink.Recovery
	if err := os.MkdirAll(s.dir, 0o755); err != nil {
		return rec, fmt.Errorf("sink %s: %w", s.name, err)
	}
	if s.f != nil {
		s.f.Close()
		s.f = nil
	}
	if err := s.acquire(ctx, "recovery"); err != nil {
		return rec, err
	}
	defer s.release()
	stored, err := s.readEpoch()
	if err != nil {
		return rec, err
	}
	if stored > epoch {
		return rec, fmt.Errorf("%w: %s holds epoch %d, this writer has %d", sink.ErrFenced, s.epochPath(), stored, epoch)
	}
	if stored < epoch {
		if err := checkpoint.WriteFileAtomic(s.epochPath(), []byte(strconv.FormatUint(epoch, 10)+"\n")); err != nil {
			return rec, fmt.Errorf("sink %s: writing epoch file: %w", s.name, err)
		}
	}
	s.epoch = epoch
	segs, err := s.segments()
	if err != nil {
		return rec, err
	}
	fromSeg, fromOff := 0, int64(0)
	if offset != "" {
		name, off, ok := strings.Cut(offset, ":")
		n, err1 := strconv.ParseInt(off, 10, 64)
		if !ok || err1 != nil || n < 0 {
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
	sc := scanState{epoch: epoch}
	s.seg, s.size = 0, 0
	for i, sg := range segs {
		if sg < fromSeg {
			continue
		}
		start := int64(0)
		if sg == fromSeg {
			start = fromOff
		}
		size, err := s.scan(ctx, sg, start, i == len(segs)-1, &rec, &sc)
		if err != nil {
			return rec, err
		}
		s.seg, s.size = sg, size
	}
	if sc.stale > 0 {
		s.log.Warn("the file sink holds lines of an older epoch after lines of a newer one: an old leader (a sluice before the file sink locked its writes) appended after its successor; recovery ignores those lines, and consumers should drop them (their epoch is below the epoch of a line before them)",
			"sink", s.name, "lines", sc.stale, "first_at", sc.staleAt)
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

// scanState is what a recovery scan carries from line to line and from
// segment to segment.
type scanState struct {
	epoch   uint64 // the recovering writer's
	high    uint64 // the highest epoch of a line read so far
	stale   int    // lines of a lower epoch than one before them
	staleAt string // where the first of them is
}

// scan reads segment sg from start, observing each line; a torn final line
// of the last segment is cut off. It returns the segment's (new) size.
//
// A start inside a line (a checkpoint saved by a sluice whose offsets
// could miss bytes another process had appended) is moved back to that
// line's start, so that the scan reads whole lines; a line of an older
// epoch after one of a newer epoch is not observed (see Recover); any
// other line that is not sluice's stops recovery with
// sink.ErrPermanent, naming the file and the byte.
func (s *Sink) scan(ctx context.Context, sg int, start int64, last bool, rec *sink.Recovery, sc *scanState) (int64, error) {
	path := filepath.Join(s.dir, s.segmentName(sg))
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return 0, fmt.Errorf("sink %s: %w", s.name, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return 0, fmt.Errorf("sink %s: %w", s.name, err)
	}
	if start > fi.Size() {
		return 0, fmt.Errorf("sink %s: %s is %d bytes, shorter than the checkpoint's offset %d: lines the checkpoint counts as written are gone (the file was cut or replaced, or a machine crash lost them with no_sync); restore the file, or remove the checkpoint and the sink's files to start over: %w",
			s.name, path, fi.Size(), start, sink.ErrPermanent)
	}
	if start > 0 {
		ls, err := lineStart(f, start)
		if err != nil {
			return 0, fmt.Errorf("sink %s: reading %s: %w", s.name, path, err)
		}
		if ls != start {
			s.log.Warn("the checkpoint's offset is inside a line (an old leader appended bytes the offset did not count): reading from the start of that line",
				"sink", s.name, "file", path, "offset", start, "line_start", ls)
			start = ls
		}
	}
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
					return 0, fmt.Errorf("sink %s: %s ends in a partial line at byte %d but is not the newest segment; the files were changed by hand: remove the partial line (or restore the file) and restart: %w", s.name, path, off, sink.ErrPermanent)
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
			return 0, fmt.Errorf("sink %s: %s, the line at byte %d (%d bytes): %w; move the file aside (or remove that line) and restart: %w", s.name, path, off, len(line), err, sink.ErrPermanent)
		}
		switch {
		case meta.Epoch > sc.epoch:
			return 0, fmt.Errorf("%w: %s holds a line of epoch %d at byte %d, this writer has %d", sink.ErrFenced, path, meta.Epoch, off, sc.epoch)
		case meta.Epoch < sc.high:
			if sc.stale == 0 {
				sc.staleAt = s.segmentName(sg) + ":" + strconv.FormatInt(off, 10)
			}
			sc.stale++
		default:
			sc.high = meta.Epoch
			rec.Observe(meta.Seq, meta.Source, meta.End, meta.Snapshot || sink.SnapshotRow(line[:len(line)-1]))
		}
		off += int64(len(line))
	}
}

// lineStart returns where the line holding the byte before off begins
// (off itself when that byte ends a line).
func lineStart(f *os.File, off int64) (int64, error) {
	buf := make([]byte, 64<<10)
	for end := off; end > 0; {
		n := min(int64(len(buf)), end)
		if _, err := f.ReadAt(buf[:n], end-n); err != nil {
			return 0, err
		}
		if i := bytes.LastIndexByte(buf[:n], '\n'); i >= 0 {
			return end - n + int64(i) + 1, nil
		}
		end -= n
	}
	return 0, nil
}

var metaMark = []byte(`,"sluice":{`)

// parseMeta reads the sluice block at the end of a line without decoding
// the whole line: the block is always last, so the last mark is it.
func parseMeta(line []byte) (sink.Meta, error) {
	i := bytes.LastIndex(line, metaMark)
	if i < 0 || len(line) < 2 || line[len(line)-1] != '}' {
		return sink.Meta{}, errors.New(`line has no "sluice" block: the file holds lines not written by sluice run`)
	}
	var m sink.Meta
	if err := json.Unmarshal(line[i+len(metaMark)-1:len(line)-1], &m); err != nil {
		return m, fmt.Errorf("bad sluice block: %w", err)
	}
	return m, nil
}

// Write appends the batch, rotating first if the segment is full, and
// syncs it to disk: the epoch check, the append and the fsync happen under
// the sink's lock, as one step no takeover can come between.
func (s *Sink) Write(ctx context.Context, b *sink.Batch) (string, error) {
	if b.Epoch < s.epoch {
		return "", fmt.Errorf("%w: batch of epoch %d, below the epoch %d this sink recovered under", sink.ErrFenced, b.Epoch, s.epoch)
	}
	if s.lock == nil {
		return "", fmt.Errorf("sink %s: Write without Recover", s.name)
	}
	if err := s.acquire(ctx, "a write"); err != nil {
		return "", err
	}
	defer s.release()
	stored, err := s.readEpoch()
	if err != nil {
		return "", err
	}
	if stored > s.epoch {
		return "", fmt.Errorf("%w: %s holds epoch %d, this writer has %d", sink.ErrFenced, s.epochPath(), stored, s.epoch)
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
	// The segment must end where this writer left it: the offset returned
	// below is computed from that, and must be the end of a line.
	if fi, err := s.f.Stat(); err != nil || fi.Size() != s.size {
		s.f.Close()
		s.f = nil
		if err == nil {
			err = fmt.Errorf("%s is %d bytes, but this writer left it at %d: something else wrote to it (or cut it); recovering", s.segmentName(s.seg), fi.Size(), s.size)
		}
		return "", fmt.Errorf("sink %s: %w", s.name, err)
	}
	buf := s.buf[:0]
	dbz := s.cfg.Format.IsDebezium()
	for i := range b.Messages {
		if dbz {
			buf = sink.AppendMetaMember(buf, b.Messages[i].Value, b.Epoch, &b.Messages[i])
		} else {
			buf = append(buf, b.Messages[i].Value...)
		}
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

// Close closes the open segment and the lock file.
func (s *Sink) Close() error {
	var err error
	if s.f != nil {
		err = s.f.Close()
		s.f = nil
	}
	if s.lock != nil {
		err = errors.Join(err, s.lock.Close())
		s.lock = nil
	}
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
// checkpoint are written again. Use the file sink for exactly-once. In
// format debezium each line is Debezium's value exactly (no sluice block).
type Stdout struct {
	name   string
	w      *bufio.Writer
	format codec.Format
}

var _ sink.Sink = (*Stdout)(nil)

// NewStdout returns a sink writing to w (os.Stdout when nil).
func NewStdout(name string, w io.Writer) *Stdout {
	if w == nil {
		w = os.Stdout
	}
	return &Stdout{name: name, w: bufio.NewWriterSize(w, 256<<10)}
}

// NewStdoutFormat is NewStdout for lines in format f (valid by
// codec.Format.Validate).
func NewStdoutFormat(name string, w io.Writer, f codec.Format) *Stdout {
	s := NewStdout(name, w)
	s.format = f
	return s
}

// Format returns the format of the lines (sink.Formatted).
func (s *Stdout) Format() codec.Format { return s.format }

// Name returns the sink's name.
func (s *Stdout) Name() string { return s.name }

// Recover has nothing to scan.
func (s *Stdout) Recover(context.Context, uint64, string) (sink.Recovery, error) {
	return sink.Recovery{}, nil
}

// Write prints the batch and flushes it.
func (s *Stdout) Write(_ context.Context, b *sink.Batch) (string, error) {
	for i := range b.Messages {
		s.w.Write(b.Messages[i].Value)
		s.w.WriteByte('\n')
	}
	return "", s.w.Flush()
}

// Close flushes.
func (s *Stdout) Close() error { return s.w.Flush() }
