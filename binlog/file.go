package binlog

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strconv"

	"github.com/go-mysql-org/go-mysql/replication"

	"github.com/sluice-cdc/sluice/position"
)

// FileConfig configures ReadFiles.
type FileConfig struct {
	// Tables selects tables; nil selects all user tables.
	Tables *Filter
	// Schema provides table definitions for files written without column
	// metadata (binlog_row_metadata=MINIMAL); nil names columns @1, @2...
	Schema SchemaSource
	// Flavor is the GTID flavour; it is detected from the events when empty.
	Flavor position.Flavor
	// ChunkBytes bounds one Txn chunk, as in Config.
	ChunkBytes int
	Logger     *slog.Logger
	// OnStatementChange is as in Config: "stop" (default) or "skip".
	OnStatementChange string
	// FullRowImages is as in Config: a rows event without every column
	// stops the read with ErrPartialRowImage.
	FullRowImages bool
}

// ReadFiles decodes binlog files from disk, in the given order, the same
// way the Reader decodes a live stream, calling fn for every transaction.
func ReadFiles(ctx context.Context, files []string, cfg FileConfig, fn func(*Txn) error) error {
	if err := CheckOnStatementChange(cfg.OnStatementChange); err != nil {
		return err
	}
	fr := newFileReader(ctx, cfg, fn)
	for _, name := range files {
		f, err := os.Open(name)
		if err != nil {
			return fmt.Errorf("binlog: %w", err)
		}
		fr.paths[filepath.Base(name)] = name
		err = fr.read(filepath.Base(name), f)
		f.Close()
		if err != nil {
			return err
		}
	}
	fr.pendingXA()
	return nil
}

// pendingXA warns of the XA transactions with selected changes that were
// prepared in the files read and neither committed nor rolled back in
// them: not delivered, as they were not committed (yet) as far as the
// files tell.
func (fr *fileReader) pendingXA() {
	xids := make([]string, 0, len(fr.r.prepared))
	for xid, p := range fr.r.prepared {
		if p.touched {
			xids = append(xids, xid)
		}
	}
	sort.Strings(xids)
	for _, xid := range xids {
		p := fr.r.prepared[xid]
		fr.r.log().Warn("an XA transaction prepared in the files read is neither committed nor rolled back in them: its changes are not delivered (give the file holding its XA COMMIT too)",
			"xid", xid, "prepared_at", p.start.File+":"+strconv.FormatUint(uint64(p.start.Offset), 10), "gtid", p.gtid)
	}
}

// ReadStream decodes one binlog file's bytes (starting with the 4-byte
// binlog magic) from r. name is used in positions and messages.
func ReadStream(ctx context.Context, name string, r io.Reader, cfg FileConfig, fn func(*Txn) error) error {
	if err := CheckOnStatementChange(cfg.OnStatementChange); err != nil {
		return err
	}
	return newFileReader(ctx, cfg, fn).read(name, r)
}

type fileReader struct {
	r   *Reader
	ctx context.Context
	// paths are the files read so far by base name: an XA transaction's
	// prepared part is read again from one of them at its commit.
	paths map[string]string
}

func newFileReader(ctx context.Context, cfg FileConfig, fn func(*Txn) error) *fileReader {
	rc := Config{Addr: "file", User: "file", Tables: cfg.Tables, ChunkBytes: cfg.ChunkBytes, Logger: cfg.Logger, ServerID: 1, OnStatementChange: cfg.OnStatementChange, FullRowImages: cfg.FullRowImages}
	rc.setDefaults()
	r := &Reader{cfg: rc, ctx: ctx, flavor: cfg.Flavor, schemas: newSchemaCache(cfg.Schema)}
	r.schemas.mariaDB = r.flavor == position.MariaDB
	r.emit = fn
	return &fileReader{r: r, ctx: ctx, paths: map[string]string{}}
}

// skipChecksumForFuzzing lets the fuzz target reach the event decoders
// with mutated bytes; it is set only by tests.
var skipChecksumForFuzzing bool

// maxEventSize is the largest event a server writes (max_allowed_packet
// is at most 1 GiB).
const maxEventSize = 1<<30 + 1<<20

var binlogMagic = []byte{0xfe, 'b', 'i', 'n'}

// encryptedMagic starts a MySQL binlog file written with
// binlog_encryption=ON (its 512-byte encryption header).
var encryptedMagic = []byte{0xfd, 'b', 'i', 'n'}

func (fr *fileReader) read(name string, in io.Reader) error {
	r := fr.r
	r.file = name
	r.resume = position.Position{File: name, Offset: 4, Flavor: r.flavor}
	r.asm = assembly{}
	h := &eventHandler{r: r}
	err := fr.scan(name, in, 4, func(ev *replication.BinlogEvent) error {
		if _, ok := ev.Event.(*replication.RotateEvent); ok {
			return nil // the next file is given by the caller
		}
		err := r.handle(ev, h)
		if errors.Is(err, errXAFetch) {
			// An XA transaction committed here: read its prepared part
			// again (fetchPrepared), then go on after the commit.
			err = fr.fetchPrepared(h)
			r.file = name
		}
		return err
	})
	if err != nil {
		return err
	}
	if r.asm.open {
		return fmt.Errorf("%w: %s ends inside a transaction that began at %s (the file is truncated, or the transaction continues in a file not given)", ErrCorrupt, name, r.asm.begin)
	}
	return nil
}

// errScanDone ends a scan before the end of its file.
var errScanDone = errors.New("binlog: scan done")

// fetchPrepared reads the prepared part of the XA transaction r.fetch
// again, from the file that holds it, and delivers it as the commit's
// transaction: the events from its first one to its XA_PREPARE event.
func (fr *fileReader) fetchPrepared(h *eventHandler) error {
	r := fr.r
	f := r.fetch
	if f == nil {
		return nil
	}
	crc := r.crc // the file being read's; the earlier file's FDE sets its own
	defer func() { r.fetch, r.asm, r.crc = nil, assembly{}, crc }()
	path, ok := fr.paths[f.from.File]
	if !ok {
		return fmt.Errorf("binlog: %s:%d: XA transaction %s committed here changes selected tables, and its prepared part (in %s at %d) cannot be read again from a stream: give the files by name (sluice read FILE...)", f.end.File, f.end.Offset, f.xid, f.from.File, f.from.Offset)
	}
	in, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("binlog: reading XA transaction %s's prepared part again: %w", f.xid, err)
	}
	defer in.Close()
	r.file = f.from.File
	r.asm = assembly{}
	err = fr.scan(f.from.File, in, int64(f.from.Offset), func(ev *replication.BinlogEvent) error {
		if _, ok := ev.Event.(*replication.RotateEvent); ok {
			return nil
		}
		err := r.handle(ev, h)
		if errors.Is(err, errXAFetch) && f.done {
			return errScanDone
		}
		return err
	})
	if errors.Is(err, errScanDone) {
		return nil
	}
	if err != nil {
		return err
	}
	return fmt.Errorf("%w: %s: XA transaction %s's prepared part, from offset %d, has no XA_PREPARE event before the end of the file (committed at %s:%d)", ErrCorrupt, f.from.File, f.xid, f.from.Offset, f.end.File, f.end.Offset)
}

// scan decodes the events of one binlog file (its bytes from the magic on)
// and calls fn for each, from the event at offset from (the file's header
// events are always decoded; the events between them and from are skipped
// unread when in can seek, else read and passed over).
func (fr *fileReader) scan(name string, in io.Reader, from int64, fn func(*replication.BinlogEvent) error) (err error) {
	r := fr.r
	magic := make([]byte, 4)
	if _, err := io.ReadFull(in, magic); err == nil && bytes.Equal(magic, encryptedMagic) {
		return fmt.Errorf("%w: %s is an encrypted MySQL binlog (binlog_encryption=ON) and cannot be read without the server's keyring; read it through the server instead (sluice tail or run: the server decrypts what it sends to a replica)", ErrUnsupportedEvent, name)
	} else if err != nil || !bytes.Equal(magic, binlogMagic) {
		return fmt.Errorf("%w: %s is not a binlog file (it does not start with the binlog magic bytes fe 62 69 6e)", ErrCorrupt, name)
	}
	p := replication.NewBinlogParser()
	p.SetVerifyChecksum(!skipChecksumForFuzzing)
	p.SetRowsEventDecodeFunc(stashRows)
	p.SetFlavor(string(r.flavor))
	p.SetPayloadDecoderConcurrency(1)
	var offset int64 = 4 // of the event being read
	var typ replication.EventType
	defer func() {
		// go-mysql's event parsers index into event bodies without checking
		// every length; corrupt input must come out as an error in words,
		// not a crash (the panic's text says nothing to a user).
		if rec := recover(); rec != nil {
			err = fmt.Errorf("%w: %s: %s event at offset %d cannot be decoded: its bytes do not fit its type (the file is damaged; events before this point were delivered)", ErrCorrupt, name, eventName(typ), offset)
		}
	}()
	corrupt := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s: event at offset %d: %s (the file is damaged or truncated; events before this point were delivered)", ErrCorrupt, name, offset, fmt.Sprintf(format, args...))
	}
	header := make([]byte, replication.EventHeaderSize)
	var buf bytes.Buffer
	for {
		if err := fr.ctx.Err(); err != nil {
			return err
		}
		if _, err := io.ReadFull(in, header); err == io.EOF {
			break
		} else if err != nil {
			return corrupt("truncated event header")
		}
		typ = replication.EventType(header[4])
		if offset == 4 && typ != replication.FORMAT_DESCRIPTION_EVENT {
			// A version 4 binlog starts with a FORMAT_DESCRIPTION event;
			// versions 1 and 3 (MySQL before 5.0) with START_EVENT_V3.
			if typ == replication.START_EVENT_V3 {
				k := kindOf(typ, 0)
				return fmt.Errorf("%w: %s: %s at offset 4: %s", ErrUnsupportedEvent, name, k.name, k.why)
			}
			return fmt.Errorf("%w: %s: the first event (at offset 4) is %s, not a FORMAT_DESCRIPTION_EVENT: the file is damaged or not a binlog", ErrCorrupt, name, eventName(typ))
		}
		size := binary.LittleEndian.Uint32(header[9:])
		if size < replication.EventHeaderSize || size > maxEventSize {
			return corrupt("impossible event size %d", size)
		}
		// Grow with the data actually there: a corrupt size must not allocate.
		buf.Reset()
		buf.Write(header)
		if n, err := buf.ReadFrom(io.LimitReader(in, int64(size)-replication.EventHeaderSize)); err != nil || n != int64(size)-replication.EventHeaderSize {
			return corrupt("truncated event: %d bytes announced", size)
		}
		raw := bytes.Clone(buf.Bytes())
		if k := kindOf(typ, binary.LittleEndian.Uint16(header[17:])); k.file == eventStops && typ != replication.INCIDENT_EVENT {
			// Before go-mysql decodes it (it takes the pre-GA row events for
			// rows events of today). An incident is parsed for its message.
			return fmt.Errorf("%w: %s (type code %d) at %s:%d: %s", ErrUnsupportedEvent, k.name, typ, name, offset, k.why)
		}
		if replication.EventType(header[4]) == replication.FORMAT_DESCRIPTION_EVENT {
			// A file the server is still writing has LOG_EVENT_BINLOG_IN_USE_F
			// set in its FORMAT_DESCRIPTION event; the checksum was computed
			// without it (as mysqlbinlog knows).
			raw[17] &^= 0x01
		}
		if replication.EventType(header[4]) == replication.MARIADB_QUERY_COMPRESSED_EVENT {
			if err := checkQueryCompressed(raw[replication.EventHeaderSize:]); err != nil {
				return corrupt("%v", err)
			}
		}
		ev, err := p.Parse(raw)
		if err != nil {
			return corrupt("%s", parseErrorText(typ, err))
		}
		if fde, ok := ev.Event.(*replication.FormatDescriptionEvent); ok && fde.Version != 4 {
			return fmt.Errorf("%w: %s: FORMAT_DESCRIPTION_EVENT at offset %d says binlog format version %d: only version 4 binlogs (MySQL 5.0 and later, every MariaDB) are supported", ErrUnsupportedEvent, name, offset, fde.Version)
		}
		if r.flavor == "" {
			switch ev.Event.(type) {
			case *replication.MariadbGTIDEvent, *replication.MariadbGTIDListEvent, *replication.MariadbBinlogCheckPointEvent:
				r.flavor = position.MariaDB
			case *replication.GTIDEvent, *replication.GtidTaggedLogEvent, *replication.PreviousGTIDsEvent:
				r.flavor = position.MySQL
			}
			r.schemas.mariaDB = r.flavor == position.MariaDB
			if r.flavor != "" && !r.asm.open {
				r.resume.Flavor = r.flavor
			}
		}
		if offset >= from || typ == replication.FORMAT_DESCRIPTION_EVENT {
			if err := fn(ev); err != nil {
				return err
			}
		}
		offset += int64(size)
		if offset < from && typ == replication.FORMAT_DESCRIPTION_EVENT {
			if sk, ok := in.(io.Seeker); ok {
				if _, err := sk.Seek(from, io.SeekStart); err != nil {
					return fmt.Errorf("binlog: %s: seeking to offset %d: %w", name, from, err)
				}
				offset = from
			}
		}
	}
	return nil
}
