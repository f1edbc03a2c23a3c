package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-cdc/sluice/binlog"
	"github.com/sluice-cdc/sluice/internal/sqlstmt"
	"github.com/sluice-cdc/sluice/position"
	"github.com/sluice-cdc/sluice/rowimage"
	"github.com/sluice-cdc/sluice/snapshot"
)

// SnapshotConfig says when and how the source's existing rows are loaded.
type SnapshotConfig struct {
	// Mode: initial (default), never, when_needed, always or only.
	Mode snapshot.Mode
	// Method: consistent (default) or watermark.
	Method string
	// Parallel connections reading at once (default 2).
	Parallel int
	// ChunkRows per SELECT and per delivered chunk (default 16384).
	ChunkRows int
	// Where holds an optional filter per "db.table".
	Where map[string]string
	// LockTimeout bounds the lock a consistent snapshot of MySQL takes
	// while its connections start (default 10s; see snapshot.Config).
	LockTimeout time.Duration
	// Progress, when set, receives the tables' progress every few seconds
	// (every ProgressEvery; default 5s).
	Progress      func([]snapshot.TableProgress)
	ProgressEvery time.Duration
}

// SourceConfig is one MySQL or MariaDB server to read.
type SourceConfig struct {
	// Name is the source's name in messages and checkpoints.
	Name string
	// Binlog is the replication connection (address, tables, server_id,
	// where to start when there is no checkpoint).
	Binlog binlog.Config
	// StartGiven makes Binlog.Start count as a saved position (the
	// snapshot mode "initial" then takes no snapshot).
	StartGiven bool
	Snapshot   SnapshotConfig
	// Schema, when set, stores the source's schema history (see
	// binlog.History): the captured tables' definitions as of every
	// position the pipeline may resume from, so that rows read after a
	// restart decode with the columns they were written with whatever DDL
	// came after (binlog_row_metadata=MINIMAL). Nil: information_schema.
	Schema binlog.HistoryStore
	// SignalTable ("db.table"), when set, is a table whose inserted rows
	// (type='snapshot', data='db.t1,db.t2') start incremental snapshots.
	SignalTable string
	// Standalone reads the source as a client of its own rather than as
	// one process of a pipeline (`sluice tail`): Binlog.ServerID and
	// ReplicaHost stay as given (zero: a random server_id and no replica
	// host, so no takeover of an earlier process and no fence on MySQL),
	// and the source's clock is not sampled on a second connection.
	Standalone bool
	// RowImage completes partial row images (binlog_row_image MINIMAL or
	// NOBLOB) from a local store of every row's last full image.
	RowImage RowImageConfig
}

// RowImageConfig is source.row_image: fill (see package rowimage).
type RowImageConfig struct {
	// Fill keeps the last full image of every row of the captured tables
	// in a Pebble store in Dir and completes partial images from it
	// before they are encoded, so every format sees full images.
	Fill bool
	// Dir is the store's directory (required with Fill).
	Dir string
	// Reselect completes a partial image of a row the store has never
	// seen whole from the source's current row, read by primary key
	// (fill_missing: reselect), instead of stopping the source with
	// rowimage.ErrMissing; such changes list the columns so read in
	// binlog.Change.Reselected.
	Reselect bool
}

// source drives one server: the snapshot when the mode asks for one, then
// the binlog with snapshot chunks read while it streams.
type source struct {
	cfg      SourceConfig
	pipeline string
	log      *slog.Logger
	// status updates the source's status (nil: none kept).
	status func(func(*SourceStatus))
	// mu guards the admin requests waiting for the stream loop, and the
	// cancel of the stream's current Next, which a request interrupts.
	mu         sync.Mutex
	pending    []addRequest
	cancelNext context.CancelFunc
	streaming  bool
	// reader is the current binlog reader; done adds up the counters of
	// the readers before it.
	reader  atomic.Pointer[binlog.Reader]
	statsMu sync.Mutex
	done    binlog.Stats
	// endsMissing counts the transactions whose Debezium END record could
	// not be written (the builder's; see SourceStats.TxnEndsMissing).
	endsMissing atomic.Int64
	// text counts the source's text that does not convert exactly.
	text *binlog.TextCheck
	// images is the row image store of a run (row_image: fill), nil
	// otherwise or between runs.
	images atomic.Pointer[rowimage.Store]
	// imagesCleared counts the starts that emptied the store.
	imagesCleared atomic.Int64
}

// textChecked is an emitter that runs the source's TextCheck on every
// chunk (snapshot and stream alike) before passing it on.
type textChecked struct {
	emitter
	text *binlog.TextCheck
}

func (e textChecked) txn(ctx context.Context, t *binlog.Txn) error {
	e.text.Check(t)
	return e.emitter.txn(ctx, t)
}

// roundTrip is the current reader's round trip to its server (0 before
// it has connected).
func (s *source) roundTrip() time.Duration {
	if r := s.reader.Load(); r != nil {
		return r.RoundTrip()
	}
	return 0
}

// stats adds up the counters of the source's binlog readers.
func (s *source) stats() binlog.Stats {
	s.statsMu.Lock()
	st := s.done
	s.statsMu.Unlock()
	if r := s.reader.Load(); r != nil {
		st = st.Add(r.Stats())
	}
	return st
}

type addRequest struct {
	db, table, where string
	done             chan error
}

// emitter receives the source's output: each chunk, and a snapshot state
// that becomes true once every chunk emitted before it is durable.
type emitter interface {
	txn(ctx context.Context, t *binlog.Txn) error
	snapshotState(ctx context.Context, st *snapshot.State) error
	// streamFrom says that the stream starts from pos: after a
	// consistent snapshot, or where the reader fixed a start that no
	// checkpoint holds yet (the checkpoint saves it, so that a restart
	// before the first transaction resumes there, not at a new "current").
	streamFrom(ctx context.Context, pos position.Position) error
	// streamStarted says that the binlog stream is open (alignment then
	// counts the source).
	streamStarted()
}

// run streams until ctx ends or the stop position is reached; done
// reports that mode "only" finished.
func (s *source) run(ctx context.Context, start position.Position, saved bool, resume *snapshot.State, out emitter) error {
	if s.text != nil {
		out = textChecked{out, s.text}
	}
	cfg := s.cfg.Binlog
	if !start.IsZero() {
		cfg.Start = start
	}
	cfg.Logger = s.log
	cfg.DeliverHeartbeats = true // alignment follows idle sources by them
	if cfg.ReplicaHost == "" && !s.cfg.Standalone {
		cfg.ReplicaHost = "sluice-" + s.pipeline
	}
	if cfg.ServerID == 0 && !s.cfg.Standalone {
		cfg.ServerID = PipelineServerID(s.pipeline)
	}
	mode := s.cfg.Snapshot.Mode
	if mode == "" {
		mode = snapshot.ModeInitial
	}
	var h *binlog.History
	if s.cfg.Schema != nil {
		var match func(db, table string) bool
		if cfg.Tables != nil {
			match = cfg.Tables.Match
		}
		h = binlog.NewHistory("", match, s.cfg.Schema, s.log)
		if err := h.Load(ctx); err != nil {
			return err
		}
	}
	var deferred []snapshot.Deferred
	if resume == nil {
		purged := false
		if saved && cfg.Start.File != "" && (mode == snapshot.ModeWhenNeeded || mode == snapshot.ModeInitial) {
			var oldest string
			var err error
			if purged, oldest, err = binlog.PositionPurged(ctx, cfg, cfg.Start); err != nil {
				return err
			}
			if purged {
				s.log.Warn("the saved position is no longer on the server", "position", cfg.Start.String(), "oldest", oldest)
			}
		}
		need, err := mode.Needed(saved, purged)
		if err != nil {
			return err
		}
		var captured position.Position
		if need && h != nil {
			// The definitions just before the snapshot's point: the
			// stream starts there, and the DDL before it was not read
			// (a snapshot taken again after a crash starts later than
			// the definitions stored by the first).
			if captured, err = captureHistory(ctx, cfg, h); err != nil {
				return err
			}
			if afterCapture != nil {
				afterCapture()
			}
		}
		if need {
			sc := s.cfg.Snapshot
			res, err := snapshot.Run(ctx, snapshot.Config{
				Source:      cfg,
				Tables:      cfg.Tables,
				Where:       sc.Where,
				Parallel:    sc.Parallel,
				Method:      sc.Method,
				ChunkRows:   sc.ChunkRows,
				LockTimeout: sc.LockTimeout,
				SignalTable: s.cfg.SignalTable,
				Logger:      s.log,
				Progress:    sc.Progress,
				// (Zero: the snapshot's default.)
				ProgressEvery: sc.ProgressEvery,
				Save: func(st snapshot.State) error {
					return out.snapshotState(ctx, &st)
				},
			}, func(t *binlog.Txn) error { return out.txn(ctx, t) })
			if err != nil {
				return err
			}
			if h != nil {
				if err := historyUpTo(ctx, cfg, h, captured, res.Position); err != nil {
					return err
				}
			}
			s.log.Info("snapshot done; streaming continues from its position", "rows", res.Rows, "tables", res.Tables, "method", res.Method, "position", res.Position.String())
			if s.status != nil {
				s.status(func(st *SourceStatus) { st.SnapshotBlocked, st.SnapshotMethod = res.Blocked, res.Method })
			}
			deferred = res.Deferred
			if len(deferred) == 0 {
				if err := out.streamFrom(ctx, res.Position); err != nil {
					return err
				}
			} else {
				// The tables left to read while streaming are saved with
				// the position, in one checkpoint: a crash before the
				// first of their chunks resumes them (with the position
				// alone, the restart would stream and never read them).
				st := snapshot.State{Position: res.Position}
				for _, d := range deferred {
					st.Ranges = append(st.Ranges, snapshot.SavedRange{Schema: d.Schema, Table: d.Table, Where: d.Where})
				}
				if err := out.snapshotState(ctx, &st); err != nil {
					return err
				}
			}
			if mode == snapshot.ModeOnly && len(deferred) == 0 {
				return nil
			}
			cfg.Start = res.Position
			// The stream starts on the server the snapshot read (its
			// position names it; another one would find it by GTID).
			cfg = cfg.At(res.Addr)
		}
	}
	fresh := cfg.Start.IsZero() // the reader resolves start_at itself
	if h != nil {
		// No position older than the start can be resumed from again
		// (it is the earliest of the checkpoint's and the sinks').
		if err := h.Compact(ctx, cfg.Start); err != nil {
			return err
		}
		if !h.Empty() {
			h.Rewind(cfg.Start)
		} else if !fresh {
			s.log.Warn("no schema history stored: the table definitions are captured now, for a start at an older position (rows written before later DDL are checked against the binlog's column types)", "start", cfg.Start.String())
		}
		cfg.History = h
	}
	r, err := binlog.NewReader(cfg)
	if err != nil {
		return err
	}
	defer r.Close()
	s.reader.Store(r)
	defer func() {
		s.reader.Store(nil)
		s.statsMu.Lock()
		s.done = s.done.Add(r.Stats())
		s.statsMu.Unlock()
	}()
	if err := r.Ready(ctx); err != nil {
		return err
	}
	if fresh && resume == nil {
		if err := out.streamFrom(ctx, r.Delivered()); err != nil {
			return err
		}
	}
	out.streamStarted()
	st := snapshot.NewStream(r, snapshot.StreamConfig{Source: cfg, ChunkRows: s.cfg.Snapshot.ChunkRows, Logger: s.log, SignalTable: s.cfg.SignalTable})
	defer st.Close()
	if resume != nil {
		s.log.Info("resuming an interrupted snapshot while streaming", "ranges", len(resume.Ranges), "from", cfg.Start.String())
		if err := snapshot.Resume(ctx, st, *resume); err != nil {
			return err
		}
	}
	for _, d := range deferred {
		if err := st.AddTable(ctx, d.Schema, d.Table, d.Where); err != nil {
			return err
		}
	}
	sigDB, sigTable, _ := sqlstmt.ParseTableText(s.cfg.SignalTable)
	only := mode == snapshot.ModeOnly
	lastSaved := -1
	defer s.stopStreaming()
	for {
		if only && len(st.Remaining()) == 0 {
			return nil
		}
		// Admin requests interrupt a waiting Next (it is safe to cancel:
		// nothing is consumed) and are served between transactions.
		s.mu.Lock()
		reqs := s.pending
		s.pending = nil
		s.streaming = true
		nctx, cancel := context.WithCancel(ctx)
		s.cancelNext = cancel
		s.mu.Unlock()
		for _, req := range reqs {
			err := st.AddTable(ctx, req.db, req.table, req.where)
			req.done <- err
			if err == nil {
				s.log.Info("incremental snapshot started", "table", req.db+"."+req.table)
			}
		}
		txn, err := st.Next(nctx)
		s.mu.Lock()
		s.cancelNext = nil
		s.mu.Unlock()
		cancel()
		if err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			if errors.Is(err, context.Canceled) && ctx.Err() == nil {
				continue // an admin request
			}
			return err
		}
		if sigTable != "" {
			if err := Signals(ctx, st, txn, sigDB, sigTable, s.log); err != nil {
				return err
			}
		}
		// The snapshot's state moves with its chunks: hand it over after
		// the chunk, so it is saved only once the chunk is durable.
		left := st.Saved()
		if txn.Snapshot || len(left) != lastSaved {
			if err := out.txn(ctx, txn); err != nil {
				return err
			}
			var state *snapshot.State
			if len(left) > 0 {
				state = &snapshot.State{Ranges: left, Tables: st.MarkTables()}
			}
			if err := out.snapshotState(ctx, state); err != nil {
				return err
			}
			lastSaved = len(left)
			continue
		}
		if err := out.txn(ctx, txn); err != nil {
			return err
		}
	}
}

// stopStreaming answers requests that came too late.
func (s *source) stopStreaming() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.streaming = false
	for _, req := range s.pending {
		req.done <- errors.New("the pipeline is stopping")
	}
	s.pending = nil
}

// captureHistory captures h's definitions now, at the server's current
// binlog position, which it returns.
func captureHistory(ctx context.Context, cfg binlog.Config, h *binlog.History) (position.Position, error) {
	c, err := binlog.Dial(ctx, cfg)
	if err != nil {
		return position.Position{}, err
	}
	defer c.Close()
	pos, err := binlog.BinlogPosition(c)
	if err != nil {
		return position.Position{}, err
	}
	at := position.Position{File: pos.File, Offset: pos.Offset}
	return at, h.Capture(ctx, c, at)
}

// afterCapture, when set (by tests), runs between the capture of the
// definitions and the snapshot.
var afterCapture func()

// historyUpTo applies to h the DDL logged between the capture of its
// definitions (from) and the snapshot's point (to), where the stream
// starts: a DDL run while the snapshot was starting would otherwise be in
// neither. The binlog between them is read with h as the schema source
// (its rows decoded and dropped); a statement's entries are stored as the
// stream's are.
func historyUpTo(ctx context.Context, cfg binlog.Config, h *binlog.History, from, to position.Position) error {
	if from.IsZero() || to.File == "" || (position.Position{File: to.File, Offset: to.Offset}).Compare(from) <= 0 {
		return nil
	}
	cfg.Start, cfg.Stop, cfg.History = from, to, h
	r, err := binlog.NewReader(cfg)
	if err != nil {
		return err
	}
	defer r.Close()
	for {
		txn, err := r.Next(ctx)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("schema history: reading the DDL between the definitions' capture (%s) and the snapshot's point (%s): %w", from, to, err)
		}
		txn.Release()
	}
}

// PipelineServerID is the replica server_id a pipeline uses when none is
// configured: the same for every process of the pipeline (so that a new
// leader's binlog dump replaces the old one's on the server), different
// between pipelines with different names.
func PipelineServerID(pipeline string) uint32 {
	return 1_000_000 + crc32.ChecksumIEEE([]byte(pipeline))%(1<<30)
}

// addTable asks the running stream to snapshot a table incrementally.
func (s *source) addTable(ctx context.Context, db, table, where string) error {
	req := addRequest{db: db, table: table, where: where, done: make(chan error, 1)}
	s.mu.Lock()
	if !s.streaming {
		s.mu.Unlock()
		return errors.New("the pipeline is not streaming yet (it is starting or taking its initial snapshot); try again once it streams")
	}
	s.pending = append(s.pending, req)
	if s.cancelNext != nil {
		s.cancelNext()
	}
	s.mu.Unlock()
	select {
	case err := <-req.done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Signals starts incremental snapshots asked for by rows inserted into the
// signal table db.table (columns type = 'snapshot' and data =
// 'db.t1,db.t2'), and takes those rows out of txn.
func Signals(ctx context.Context, stream *snapshot.Stream, txn *binlog.Txn, db, table string, log *slog.Logger) error {
	kept := txn.Changes[:0]
	for _, ch := range txn.Changes {
		if ch.Op == binlog.OpDDL || ch.Table == nil || ch.Table.Schema != db || ch.Table.Name != table {
			// (A DDL change of the signal table names it too, and is kept.)
			kept = append(kept, ch)
			continue
		}
		if ch.Op != binlog.OpInsert {
			continue
		}
		typ, data := ch.Table.ColumnIndex("type"), ch.Table.ColumnIndex("data")
		if typ < 0 || data < 0 {
			return fmt.Errorf("signal table %s.%s needs columns type and data", db, table)
		}
		if string(ch.After[typ].Bytes()) == "watermark" {
			continue // a watermark row of the snapshot's (see snapshot.StreamConfig)
		}
		if string(ch.After[typ].Bytes()) != "snapshot" {
			log.Warn("ignoring a signal of unknown type", "type", string(ch.After[typ].Bytes()))
			continue
		}
		names, err := sqlstmt.SplitOutsideQuotes(string(ch.After[data].Bytes()), ',')
		if err != nil {
			log.Warn("ignoring a snapshot signal whose data is not a list of db.table", "data", string(ch.After[data].Bytes()), "error", err)
			continue
		}
		for _, name := range names {
			sdb, st, err := sqlstmt.ParseTableText(name)
			if err != nil {
				log.Warn("ignoring a snapshot signal for a name that is not db.table", "name", name, "error", err)
				continue
			}
			if err := stream.AddTable(ctx, sdb, st, ""); err != nil {
				return err
			}
			log.Info("incremental snapshot started by a signal", "table", sqlstmt.TableText(sdb, st))
		}
	}
	txn.Changes = kept
	return nil
}

// ResumeState returns the unfinished snapshot saved in a checkpoint's
// Snapshot field, if any.
func ResumeState(raw json.RawMessage) (*snapshot.State, error) {
	if len(raw) == 0 {
		return nil, nil
	}
	var st snapshot.State
	if err := json.Unmarshal(raw, &st); err != nil {
		return nil, fmt.Errorf("checkpoint: unfinished snapshot state: %w", err)
	}
	if len(st.Ranges) == 0 {
		return nil, nil
	}
	return &st, nil
}
