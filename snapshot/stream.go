package snapshot

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/go-mysql-org/go-mysql/client"

	"github.com/sluice-cdc/sluice/binlog"
	"github.com/sluice-cdc/sluice/codec"
	"github.com/sluice-cdc/sluice/internal/backoff"
	"github.com/sluice-cdc/sluice/internal/sqlstmt"
	"github.com/sluice-cdc/sluice/position"
)

// Stream reads tables while the binlog keeps streaming, chunk by chunk,
// with the watermark idea of DBLog: each chunk is read in a transaction
// WITH CONSISTENT SNAPSHOT between a low and a high watermark, two points
// of the stream. Transactions the stream hands out before the low one
// are all in the chunk's view; a transaction between the two may or may
// not be, and drops the chunk's rows with the keys it changes (its own row
// images are newer, or as new); transactions after the high one are not
// in the view. The chunk's surviving rows are delivered as snapshot reads
// when the stream reaches the high watermark. A row read by the snapshot
// therefore never overwrites a newer change from the binlog, and every
// row is either read or changed after the chunk's view.
//
// The watermarks depend on the server:
//
//   - MariaDB: the transaction's binlog_snapshot_file/position is the
//     exact point of its view: low and high watermark at once.
//   - MySQL with GTIDs (gtid_mode=ON): a transaction is in the binlog,
//     and streamed, before its engine commit makes it visible, and enters
//     gtid_executed only after that commit. So before the view opens,
//     gtid_executed is read (L) until it holds every transaction the
//     stream has handed out: all of those are then visible; a transaction
//     handed out later drops the rows it touches unless its GTID is in L.
//     The high watermark is the binlog position read once the view is
//     open: every transaction the view sees was written before it.
//   - MySQL without GTIDs: a watermark row written to the signal table
//     (StreamConfig.SignalTable) before the view opens, and updated once
//     the chunk is read: the stream's sightings of the two writes are the
//     watermarks. With binlog_order_commits=ON (the default, and
//     required) the low write's commit returns only once every
//     transaction before it in the binlog is committed in the engine.
//   - Tables of engines without transactions (MyISAM, Aria): the binlog
//     positions before and after the SELECT (see open).
//
// It takes no lock; only the last case writes to the source. A table
// without a primary key or unique NOT NULL key has no key to match the
// stream's changes with its rows: it is read whole, in one transaction at
// one exact point (on MySQL started under the brief lock of a consistent
// snapshot), after a TRUNCATE TABLE event that tells consumers to drop
// what they hold of it (see wholeRead); it needs a transactional engine.
//
// The final row of what is queued carries Txn.SnapshotLast, exactly once:
// a chunk reads one row beyond its size to know whether its range ends;
// when the final chunk has no row left (an empty last table, or every row
// changed while it was read), one row of a table read before is read again
// to carry the mark (a harmless re-read: it is current as of its chunk).
// Only when every table read is empty is no row marked.
type Stream struct {
	r     *binlog.Reader
	cfg   StreamConfig
	conn  *client.Conn
	rd    *reader // reads chunks on conn, each query prepared once
	srv   server  // the server behind conn
	queue []*Range
	win   *window
	// midTxn is set while the stream is inside a transaction cut in
	// chunks (the last one handed out was not Last): a window opens only
	// between whole transactions, whose GTIDs and positions say what they
	// are.
	midTxn bool
	// markID names this Stream's watermark rows; marks counts them;
	// markHasID: the signal table has a character column id, which the
	// rows fill with their name too.
	markID    string
	marks     int
	markHasID bool
	// signal is the signal table's database and name (cfg.SignalTable
	// read once), for markOf.
	signal [2]string
	// sinceMark is set when a transaction has been handed out since the
	// last high watermark row of this Stream's was seen (or none has
	// been seen). While it is not set, everything handed out is in the
	// binlog before a watermark write that has committed, hence visible
	// (binlog_order_commits), and the next chunk needs no low watermark
	// row of its own.
	sinceMark bool
	// whole is the table without a key being read whole, if any; held a
	// transaction taken from the reader past its point, handed out after
	// its rows.
	whole *wholeRead
	held  *binlog.Txn
	// tables are the keyed tables read since the queue was last empty:
	// where a row is read again to carry the final mark (see markLast);
	// markTries counts those reads.
	tables    []*Range
	markTries int
}

// StreamConfig configures a Stream.
type StreamConfig struct {
	// Source is the server (Addr, User, Password, TLS are used) for the
	// chunk queries; the Reader has its own connection. Source.Tables, when
	// set, must select the signal table.
	Source    binlog.Config
	ChunkRows int // default 4096
	Logger    *slog.Logger
	// SignalTable ("db.table", columns type and data) is where the
	// watermarks are written on a MySQL server without GTIDs; there the
	// Stream needs one, and INSERT, UPDATE and DELETE on it. The Stream
	// takes its watermark rows (type 'watermark') out of the transactions
	// it hands out.
	SignalTable string
}

// Range is a part of a table still to be read: keys after After (nil: from
// the start) up to and including UpTo (nil: to the end).
type Range struct {
	Schema, Table string
	Where         string
	After, UpTo   binlog.Row
	info          *TableInfo
	keyNames      []string
	// markOnly reads one row, to carry the final mark (see Stream).
	markOnly bool
}

// windowKind is how a chunk's watermarks are known (see Stream).
type windowKind uint8

const (
	byPosition windowKind = iota // binlog positions: low and high
	byGTID                       // visible GTIDs, high position
	byMark                       // watermark rows in the signal table
)

// window is the chunk being reconciled with the stream.
type window struct {
	rng  *Range
	kind windowKind
	// byPosition: a transaction beginning before low is in the chunk.
	// byPosition and byGTID: the chunk is delivered once the stream has
	// handed out everything up to high; byMark: high is the end of the
	// transaction that updated the watermark row.
	low, high position.Position
	// byGTID: the transactions the chunk sees for sure.
	visible position.GTIDSet
	// byMark: the watermark rows' data, and whether the stream has shown
	// them.
	lowMark, highMark string
	lowSeen, highSeen bool
	rows              []binlog.Row
	dropped           []bool
	byKey             map[string]int
	last              binlog.Row // key of the chunk's last row: where the range continues
	complete          bool       // the chunk ended the range
	more              bool       // a row beyond the chunk was seen
	started           time.Time
}

// knobs turn off one rule of the watermark method each, for the tests
// that prove the rule is needed (export_test.go); never set otherwise.
var knobs struct {
	// noVisibleWait: do not wait for gtid_executed to hold what the
	// stream handed out (byGTID), write no low watermark row (byMark).
	noVisibleWait atomic.Bool
	// noDrop: no transaction drops a chunk's rows.
	noDrop atomic.Bool
}

// NewStream wraps r, which must stream from a position not after the
// moment AddRange is called (normally: the reader's start).
func NewStream(r *binlog.Reader, cfg StreamConfig) *Stream {
	cfg.SignalTable = canonicalTable(cfg.SignalTable)
	if cfg.ChunkRows <= 0 {
		cfg.ChunkRows = 4096
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	var id [6]byte
	_, _ = rand.Read(id[:])
	s := &Stream{r: r, cfg: cfg, markID: "sluice-" + hex.EncodeToString(id[:]), sinceMark: true}
	s.signal[0], s.signal[1], _ = sqlstmt.ParseTableText(cfg.SignalTable) // checked by checkWatermark
	return s
}

// AddTable queues a whole table (rows matching where, if given).
func (s *Stream) AddTable(ctx context.Context, db, table, where string) error {
	return s.AddRange(ctx, &Range{Schema: db, Table: table, Where: where})
}

// AddRange queues a range of a table.
func (s *Stream) AddRange(ctx context.Context, rg *Range) error {
	c, err := s.connection(ctx)
	if err != nil {
		return err
	}
	info, err := inspectCtx(ctx, c, rg.Schema, rg.Table)
	if err != nil {
		return err
	}
	if len(info.Key) == 0 && !isTransactional(info.Engine) {
		return fmt.Errorf("snapshot: %s.%s has no primary key and no unique NOT NULL key, and its engine (%s) has no transactions: it cannot be read while streaming; add a key, or convert it to InnoDB", rg.Schema, rg.Table, info.Engine)
	}
	if len(info.Key) > 0 && isTransactional(info.Engine) {
		if s.markHasID, err = checkWatermark(c, s.srv, s.cfg.SignalTable, s.cfg.Source.Tables); err != nil {
			return fmt.Errorf("reading %s.%s while streaming: %w", rg.Schema, rg.Table, err)
		}
	}
	if len(info.Key) == 0 {
		rg.After, rg.UpTo = nil, nil // (the key it was read by is gone): all of it
	}
	rg.info = info
	rg.keyNames = nil
	for _, k := range info.Key {
		rg.keyNames = append(rg.keyNames, info.Table.Columns[k].Name)
	}
	s.queue = append(s.queue, rg)
	return nil
}

// checkWatermark checks that the watermark method can read tables of srv
// while streaming: on MySQL without GTIDs it needs a signal table that the
// stream reads (filter), with columns type and data, and
// binlog_order_commits ON. It says whether the signal table has a
// character column id (as Debezium's has), which the watermark rows then
// fill too.
func checkWatermark(c *client.Conn, srv server, signal string, filter *binlog.Filter) (idColumn bool, err error) {
	if srv.flavor == position.MariaDB || srv.gtids {
		return false, nil
	}
	if signal == "" {
		return false, errors.New("snapshot: the watermark method (reading tables while streaming: snapshot method watermark, an interrupted snapshot resumed, incremental snapshots) needs, on a MySQL server without GTIDs (gtid_mode is not ON), a signal table to write its watermark rows to: give one with --signal-table db.table (config: source signal_table), a table with columns type and data on which the user has INSERT, UPDATE and DELETE; or turn GTIDs on (gtid_mode=ON)")
	}
	db, table, err := sqlstmt.ParseTableText(signal)
	if err != nil {
		return false, fmt.Errorf("snapshot: signal %w", err)
	}
	if filter != nil && !filter.Match(db, table) {
		return false, fmt.Errorf("snapshot: the signal table %s is not among the tables the stream reads (%s): the watermark rows written to it would never be seen; add it", signal, filter)
	}
	info, err := inspect(c, db, table)
	if err != nil {
		return false, fmt.Errorf("snapshot: the signal table: %w", err)
	}
	if info.Table.ColumnIndex("type") < 0 || info.Table.ColumnIndex("data") < 0 {
		return false, fmt.Errorf("snapshot: the signal table %s needs columns type and data", signal)
	}
	if i := info.Table.ColumnIndex("id"); i >= 0 && info.Table.Columns[i].Kind == binlog.KindString {
		idColumn = true
	}
	rs, err := c.Execute("SELECT @@GLOBAL.binlog_order_commits")
	if err != nil {
		return false, fmt.Errorf("snapshot: reading binlog_order_commits: %w", err)
	}
	on, _ := rs.GetInt(0, 0)
	rs.Close()
	if on != 1 {
		return false, errors.New("snapshot: binlog_order_commits is OFF on this MySQL server without GTIDs: then a transaction can be visible before one written to the binlog ahead of it, and the watermark rows in the signal table bound nothing; SET GLOBAL binlog_order_commits = ON (and in the server's configuration), or turn GTIDs on (gtid_mode=ON)")
	}
	return idColumn, nil
}

// Remaining returns the ranges not read yet, the current chunk's included.
func (s *Stream) Remaining() []*Range {
	var out []*Range
	if s.whole != nil {
		out = append(out, s.whole.rng)
	}
	if s.win != nil {
		out = append(out, s.win.rng)
	}
	return append(out, s.queue...)
}

// Close closes the chunk connection (not the reader), taking out the
// watermark row of a chunk not finished.
func (s *Stream) Close() error {
	if s.whole != nil {
		s.whole.stop()
		s.whole = nil
	}
	if s.conn != nil {
		if s.win != nil && s.win.kind == byMark {
			s.deleteMark(s.win)
		}
		return s.conn.Close()
	}
	return nil
}

// dropConnection closes a connection left unusable (a chunk read that
// failed midway); the next chunk opens another.
func (s *Stream) dropConnection() {
	if s.conn != nil {
		s.conn.Close()
	}
	s.conn, s.rd = nil, nil
}

func (s *Stream) connection(ctx context.Context) (*client.Conn, error) {
	if s.conn != nil {
		return s.conn, nil
	}
	// The chunks are read from the server the reader streams from (the
	// first of the source's addresses that answered, or the one it moved
	// to), whose binlog the watermarks must be in.
	c := Config{Source: s.cfg.Source}
	if s.r != nil {
		c.Source = s.r.Source()
	}
	conn, err := c.dial(ctx)
	if err != nil {
		return nil, err
	}
	if _, err := conn.Execute(SessionSQL); err != nil {
		conn.Close()
		return nil, err
	}
	srv, err := probeServer(conn)
	if err != nil {
		conn.Close()
		return nil, err
	}
	rd, err := newReader(conn)
	if err != nil {
		conn.Close()
		return nil, err
	}
	s.conn, s.rd, s.srv = conn, rd, srv
	return conn, nil
}

// Next returns the next transaction of the stream, or a chunk of snapshot
// rows (Txn.Snapshot set) when one is reconciled.
func (s *Stream) Next(ctx context.Context) (*binlog.Txn, error) {
	for {
		if s.whole != nil {
			txn, err := s.nextWhole(ctx)
			if err != nil || txn != nil {
				return txn, err
			}
		}
		if s.whole == nil && s.held != nil {
			txn := s.held
			s.held = nil
			return txn, nil
		}
		if s.win == nil && s.whole == nil && len(s.queue) > 0 && !s.midTxn {
			if err := s.open(ctx); err != nil {
				return nil, err
			}
			continue
		}
		// A chunk goes out between whole transactions only, so that the
		// messages of a transaction cut between batches follow each other
		// (a recovery counts what a sink holds of one from its first).
		if s.win != nil && !s.midTxn && s.reached() {
			return s.close(), nil
		}
		wait, cancel := ctx, context.CancelFunc(func() {})
		if s.win != nil || s.whole != nil {
			wait, cancel = context.WithTimeout(ctx, 20*time.Millisecond)
		}
		txn, err := s.r.Next(wait)
		cancel()
		if err != nil {
			if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil && (s.win != nil || s.whole != nil) {
				continue
			}
			return nil, err
		}
		s.midTxn = !txn.Last
		s.sinceMark = true
		if s.win != nil {
			s.observe(txn)
		}
		s.takeMarks(txn)
		if w := s.whole; w != nil && !w.reached && !txn.Begin.IsZero() && txn.Begin.Compare(w.pos) >= 0 {
			// Past the whole read's point: it goes out after the rows.
			s.held = txn
			w.reached = true
			continue
		}
		return txn, nil
	}
}

// reached reports whether the stream has handed out everything up to the
// window's high watermark.
func (s *Stream) reached() bool {
	w := s.win
	if w.kind == byMark {
		return w.highSeen
	}
	// Everything up to H has gone through when the reader has handed out
	// all transactions up to H (read first: it is published after the
	// handover) and none of them waits in its queue.
	return s.r.Delivered().Compare(w.high) >= 0 && s.r.Pending() == 0
}

// open reads the next chunk in a transaction WITH CONSISTENT SNAPSHOT
// between the watermarks the server allows (see Stream).
//
// (Positions taken with SHOW MASTER STATUS around a plain SELECT are not
// exact: a transaction is in the binlog, and sent to replicas, before its
// engine commit makes it visible, so a SELECT can miss a change the
// binlog already holds. Each kind of window closes that gap its own way.)
func (s *Stream) open(ctx context.Context) error {
	rg := s.queue[0]
	c, err := s.connection(ctx)
	if err != nil {
		return err
	}
	// The reader must have fixed its start before a chunk is read, or the
	// transactions between the two would be lost.
	if err := s.r.Ready(ctx); err != nil {
		return err
	}
	if len(rg.info.Key) == 0 {
		return s.openWhole(ctx, c, rg)
	}
	if !rg.markOnly {
		s.markTable(rg)
	}
	kind := byPosition
	if isTransactional(rg.info.Engine) && s.srv.flavor == position.MySQL {
		kind = byMark
		if s.srv.gtids {
			kind = byGTID
		}
	}
	for attempt := 0; ; attempt++ {
		w, err := s.read(ctx, c, rg, kind)
		if err != nil {
			return err
		}
		// byPosition: the stream must not have handed out transactions
		// after the chunk's point already (it can, briefly, for
		// transactions written to the binlog but not yet committed): then
		// read the chunk again.
		if kind == byPosition && s.r.Delivered().Compare(w.low) > 0 {
			if attempt == 500 {
				return fmt.Errorf("snapshot: the stream of %s keeps running ahead of every chunk read; try again later", rg.info.Table.QualifiedName())
			}
			if err := backoff.Sleep(ctx, 10*time.Millisecond); err != nil {
				return err
			}
			continue
		}
		w.dropped = make([]bool, len(w.rows))
		w.complete = !w.more || rg.markOnly
		if len(w.rows) > 0 {
			w.last = CloneKey(rg.info.Table, rg.info.Key, w.rows[len(w.rows)-1])
		}
		s.queue = s.queue[1:]
		s.win = w
		return nil
	}
}

// read reads one chunk of rg with its watermarks.
func (s *Stream) read(ctx context.Context, c *client.Conn, rg *Range, kind windowKind) (*window, error) {
	t := rg.info.Table
	w := &window{rng: rg, kind: kind, byKey: map[string]int{}, started: time.Now()}
	var err error
	switch kind {
	case byPosition:
		if !isTransactional(rg.info.Engine) {
			// A table without transactions (MyISAM, Aria): a change is
			// visible as soon as it is made, before its binlog event is
			// written; so every change the SELECT can miss has its event
			// after this low watermark, and every change it may include
			// but whose event comes after the high watermark is replayed
			// on top by the stream (row images are whole), harmlessly.
			if w.low, err = s.srv.position(c); err != nil {
				return nil, err
			}
		}
	case byGTID:
		if w.visible, err = s.visibleSet(ctx, c); err != nil {
			return nil, err
		}
	case byMark:
		s.marks++
		w.lowMark = fmt.Sprintf("%s:%d:low", s.markID, s.marks)
		w.highMark = fmt.Sprintf("%s:%d:high", s.markID, s.marks)
		// The low watermark: everything handed out so far is visible once
		// a write after it has committed (binlog_order_commits), which
		// the last chunk's high watermark did if nothing came since.
		if !s.sinceMark || knobs.noVisibleWait.Load() {
			w.lowSeen = true
		} else if err := s.insertMark(c, w.lowMark); err != nil {
			return nil, err
		}
	}
	transactional := isTransactional(rg.info.Engine)
	if transactional {
		if _, err := c.Execute("START TRANSACTION WITH CONSISTENT SNAPSHOT, READ ONLY"); err != nil {
			return nil, fmt.Errorf("snapshot: starting a chunk transaction: %w", err)
		}
		switch kind {
		case byPosition: // MariaDB
			w.low, err = snapshotPosition(c)
		case byGTID:
			w.high, err = s.srv.position(c)
		}
		if err != nil {
			c.Execute("ROLLBACK")
			return nil, err
		}
	}
	// One row beyond the chunk says whether the range goes on, so that
	// the chunk that ends it is known (and marked) when it is read.
	limit := s.cfg.ChunkRows + 1
	if rg.markOnly {
		limit = 1
	}
	query, args := ChunkQuery(t, rg.info.Key, rg.Where, rg.After, rg.UpTo, limit)
	var arena rowArena
	err = withContext(ctx, c, func() error {
		return s.rd.scan(ctx, t, query, args, func(row binlog.Row) error {
			if len(w.rows) == s.cfg.ChunkRows {
				w.more = true
				return nil
			}
			row = arena.clone(row)
			w.byKey[keyString(t, rg.info.Key, row)] = len(w.rows)
			w.rows = append(w.rows, row)
			return nil
		})
	})
	if s.rd.broken || ctx.Err() != nil {
		s.dropConnection()
	} else if transactional {
		c.Execute("COMMIT")
	}
	if err != nil {
		if kind == byMark && s.conn != nil {
			s.deleteMark(w)
		}
		return nil, fmt.Errorf("snapshot: reading a chunk of %s: %w", t.QualifiedName(), err)
	}
	switch kind {
	case byPosition:
		w.high = w.low
		if !transactional {
			if w.high, err = s.srv.position(c); err != nil {
				return nil, err
			}
		}
	case byMark:
		if w.lowSeen { // no low watermark row written
			err = s.insertMark(c, w.highMark)
		} else {
			err = s.writeMark(c, "UPDATE %s SET `data` = ? WHERE `type` = 'watermark' AND `data` = ?", w.highMark, w.lowMark)
		}
		if err != nil {
			return nil, err
		}
	}
	return w, nil
}

// visibleSet reads MySQL's gtid_executed until it holds every transaction
// the stream has handed out, and returns it: a read view opened after it
// sees all of them (see gtidExecuted). A transaction is streamed as soon
// as it is in the binlog, a little before its engine commit, so the wait
// is short; it is bounded, for a server that lost transactions it had
// sent (a failover to a replica behind).
func (s *Stream) visibleSet(ctx context.Context, c *client.Conn) (position.GTIDSet, error) {
	delivered, err := position.ParseGTIDSet(position.MySQL, s.r.Delivered().GTIDs)
	if err != nil {
		return position.GTIDSet{}, fmt.Errorf("snapshot: the stream's GTID state: %w", err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		l, err := gtidExecuted(c)
		if err != nil {
			return l, err
		}
		if l.Contains(delivered) || knobs.noVisibleWait.Load() {
			return l, nil
		}
		if time.Now().After(deadline) {
			return l, fmt.Errorf("snapshot: the server's gtid_executed (%s) still lacks transactions the stream has received (%s) after 30s: did it lose them (a failover to a replica behind)?", l, delivered)
		}
		if err := backoff.Sleep(ctx, time.Millisecond); err != nil {
			return l, err
		}
	}
}

// writeMark runs a write of a watermark row (query has a %s for the
// signal table's name).
func (s *Stream) writeMark(c *client.Conn, query string, args ...any) error {
	db, table, _ := sqlstmt.ParseTableText(s.cfg.SignalTable) // checked by checkWatermark
	q := fmt.Sprintf(query, sqlstmt.QuoteName(db, table))
	if _, err := c.Execute(q, args...); err != nil {
		return fmt.Errorf("snapshot: writing a watermark row to the signal table %s (the user needs INSERT, UPDATE and DELETE on it): %w", s.cfg.SignalTable, err)
	}
	return nil
}

// insertMark writes a new watermark row named mark.
func (s *Stream) insertMark(c *client.Conn, mark string) error {
	if s.markHasID {
		return s.writeMark(c, "INSERT INTO %s (`id`, `type`, `data`) VALUES (?, 'watermark', ?)", mark, mark)
	}
	return s.writeMark(c, "INSERT INTO %s (`type`, `data`) VALUES ('watermark', ?)", mark)
}

// deleteMark takes a window's watermark row out of the signal table; a
// row left behind (the delete failed, the process was killed) is
// harmless: its name is this Stream's only.
func (s *Stream) deleteMark(w *window) {
	if s.conn == nil {
		return
	}
	if err := s.writeMark(s.conn, "DELETE FROM %s WHERE `type` = 'watermark' AND `data` IN (?, ?)", w.lowMark, w.highMark); err != nil {
		s.cfg.Logger.Warn("snapshot: could not delete a watermark row", "error", err.Error())
	}
}

// observe drops the chunk rows that a change between the watermarks
// touched, and notes the watermark rows of a byMark window.
func (s *Stream) observe(txn *binlog.Txn) {
	w := s.win
	switch w.kind {
	case byPosition:
		if txn.Begin.Compare(w.low) < 0 {
			return // before the chunk's point: the chunk includes it
		}
	case byGTID:
		if txn.GTID != "" {
			if g, err := position.ParseGTIDSet(position.MySQL, txn.GTID); err == nil && w.visible.Contains(g) {
				return // committed before the chunk's view: included
			}
		}
	case byMark:
		wasLow := w.lowSeen
		for i := range txn.Changes {
			switch s.markOf(&txn.Changes[i]) {
			case w.lowMark:
				w.lowSeen = true
			case w.highMark:
				w.highSeen, w.high = true, txn.End
				s.sinceMark = false
			}
		}
		if !wasLow {
			return // before the low watermark: the chunk includes it
		}
	}
	if knobs.noDrop.Load() {
		return
	}
	// After the chunk's point and handed out before the chunk: the change
	// is newer than the chunk's row (or as new), which must not overwrite
	// it.
	for i := range txn.Changes {
		ch := &txn.Changes[i]
		if ch.Table == nil || ch.Table.Schema != w.rng.Schema || ch.Table.Name != w.rng.Table {
			continue
		}
		for _, row := range []binlog.Row{ch.Before, ch.After} {
			if row == nil {
				continue
			}
			if k, ok := keyStringByName(ch.Table, w.rng.keyNames, row); ok {
				if j, ok := w.byKey[k]; ok {
					w.dropped[j] = true
				}
			}
		}
	}
}

// markOf returns the data of a change to a watermark row of the signal
// table (its after image, else its before image), or "".
func (s *Stream) markOf(ch *binlog.Change) string {
	if s.cfg.SignalTable == "" || ch.Table == nil || ch.Table.Name != s.signal[1] || ch.Table.Schema != s.signal[0] {
		return ""
	}
	typ, data := ch.Table.ColumnIndex("type"), ch.Table.ColumnIndex("data")
	if typ < 0 || data < 0 {
		return ""
	}
	row := ch.After
	if row == nil {
		row = ch.Before
	}
	if typ >= len(row) || data >= len(row) || string(row[typ].Bytes()) != "watermark" {
		return ""
	}
	if d := row[data].Bytes(); len(d) > 0 {
		return string(d)
	}
	return "-"
}

// takeMarks takes the changes of watermark rows (this Stream's and any
// other's) out of txn: they are the method's, not the user's.
func (s *Stream) takeMarks(txn *binlog.Txn) {
	if s.cfg.SignalTable == "" {
		return
	}
	kept := txn.Changes[:0]
	for _, ch := range txn.Changes {
		if s.markOf(&ch) == "" {
			kept = append(kept, ch)
		}
	}
	for i := len(kept); i < len(txn.Changes); i++ {
		txn.Changes[i] = binlog.Change{}
	}
	txn.Changes = kept
}

// close delivers the chunk's surviving rows and moves the range on.
func (s *Stream) close() *binlog.Txn {
	w := s.win
	s.win = nil
	if w.kind == byMark {
		s.deleteMark(w)
	}
	t := w.rng.info.Table
	end := w.high
	txn := &binlog.Txn{Begin: end, End: end, Last: true, Snapshot: true, CommitTime: w.started}
	for i, row := range w.rows {
		if !w.dropped[i] {
			txn.Changes = append(txn.Changes, binlog.Change{Op: binlog.OpRead, Table: t, After: row, File: end.File, Pos: end.Offset, Row: len(txn.Changes)})
		}
	}
	switch {
	case !w.complete:
		next := *w.rng
		next.After = w.last
		s.queue = append([]*Range{&next}, s.queue...)
	case w.rng.markOnly && len(w.rows) == 0:
		// That table is empty now: try the one read before it.
		s.tables = slices.DeleteFunc(s.tables, func(r *Range) bool { return r.Schema == w.rng.Schema && r.Table == w.rng.Table })
		s.markLast(txn)
	default:
		s.markLast(txn)
	}
	return txn
}

// markTable notes a keyed table read, for markLast (the latest last).
func (s *Stream) markTable(rg *Range) {
	s.tables = slices.DeleteFunc(s.tables, func(t *Range) bool { return t.Schema == rg.Schema && t.Table == rg.Table })
	s.tables = append(s.tables, &Range{Schema: rg.Schema, Table: rg.Table, Where: rg.Where, info: rg.info, keyNames: rg.keyNames})
}

// addMarkTable notes db.table, a table a snapshot resumed by Resume read
// before, for markLast; a table without a key (or gone) is left out.
func (s *Stream) addMarkTable(ctx context.Context, db, table string) error {
	if slices.ContainsFunc(s.tables, func(t *Range) bool { return t.Schema == db && t.Table == table }) {
		return nil
	}
	c, err := s.connection(ctx)
	if err != nil {
		return err
	}
	info, err := inspectCtx(ctx, c, db, table)
	if err != nil || len(info.Key) == 0 {
		return nil // (a table dropped since, or without a key, is no candidate)
	}
	rg := &Range{Schema: db, Table: table, info: info}
	for _, k := range info.Key {
		rg.keyNames = append(rg.keyNames, info.Table.Columns[k].Name)
	}
	// Before the tables read by this Stream: those are more recent.
	s.tables = append([]*Range{rg}, s.tables...)
	if len(s.tables) > maxMarkTables {
		s.tables = s.tables[len(s.tables)-maxMarkTables:]
	}
	return nil
}

// MarkTables names the keyed tables read last ("db.table", at most
// maxMarkTables), for State.Tables.
func (s *Stream) MarkTables() []string {
	var out []string
	for _, t := range s.tables[max(0, len(s.tables)-maxMarkTables):] {
		out = append(out, sqlstmt.TableText(t.Schema, t.Table))
	}
	return out
}

// maxMarkTables bounds State.Tables: a few tables to read a row of again
// for the final mark are enough, and the state is saved with every chunk.
const maxMarkTables = 8

// markLast marks txn, a chunk that ended its range, as holding the final
// row when nothing else is queued; when it has no row to mark, it queues
// the reading of one row of a keyed table read before (the last first).
func (s *Stream) markLast(txn *binlog.Txn) {
	if len(s.queue) > 0 {
		return
	}
	if len(txn.Changes) > 0 {
		txn.SnapshotLast = true
		s.tables, s.markTries = nil, 0
		return
	}
	if len(s.tables) == 0 || s.markTries >= 100 {
		if s.markTries >= 100 {
			s.cfg.Logger.Warn("snapshot: no row could be read to carry the final \"last\" mark (every one read was changed at once); the snapshot ends unmarked")
		}
		s.tables, s.markTries = nil, 0
		return
	}
	s.markTries++
	t := s.tables[len(s.tables)-1]
	s.queue = append(s.queue, &Range{Schema: t.Schema, Table: t.Table, Where: t.Where, info: t.info, keyNames: t.keyNames, markOnly: true})
}

// keyString renders a row's key for comparison between the snapshot and
// the binlog: both decode values identically, so their JSON is the same.
func keyString(t *binlog.Table, key []int, row binlog.Row) string {
	var b []byte
	for _, k := range key {
		b = codec.AppendValue(b, &t.Columns[k], row[k])
		b = append(b, 0)
	}
	return string(b)
}

func keyStringByName(t *binlog.Table, names []string, row binlog.Row) (string, bool) {
	var b []byte
	for _, n := range names {
		i := t.ColumnIndex(n)
		if i < 0 || i >= len(row) || row[i].IsAbsent() {
			return "", false
		}
		b = codec.AppendValue(b, &t.Columns[i], row[i])
		b = append(b, 0)
	}
	return string(b), true
}

// EncodeKey and DecodeKey save a range's key bounds, for resuming.
func EncodeKey(row binlog.Row) json.RawMessage {
	if row == nil {
		return nil
	}
	type part struct {
		K uint8  `json:"k"`
		N uint64 `json:"n,omitempty"`
		B []byte `json:"b,omitempty"`
	}
	parts := make([]part, len(row))
	for i, v := range row {
		parts[i] = part{K: uint8(v.Kind()), N: v.Uint(), B: v.Bytes()}
	}
	out, _ := json.Marshal(parts)
	return out
}

// DecodeKey reverses EncodeKey.
func DecodeKey(raw json.RawMessage) (binlog.Row, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var parts []struct {
		K uint8  `json:"k"`
		N uint64 `json:"n"`
		B []byte `json:"b"`
	}
	if err := json.Unmarshal(raw, &parts); err != nil {
		return nil, fmt.Errorf("snapshot: saved key %s: %w", raw, err)
	}
	row := make(binlog.Row, len(parts))
	for i, p := range parts {
		k := binlog.Kind(p.K)
		switch k {
		case binlog.KindString, binlog.KindBytes, binlog.KindDecimal, binlog.KindJSON, binlog.KindGeometry:
			if p.B == nil {
				p.B = []byte{}
			}
			row[i] = binlog.BytesValue(k, p.B)
		case binlog.KindNull:
			row[i] = binlog.NullValue()
		default:
			row[i] = binlog.NumValue(k, p.N)
		}
	}
	return row, nil
}

// isTransactional reports whether an engine gives consistent snapshots.
func isTransactional(engine string) bool {
	switch strings.ToLower(engine) {
	case "myisam", "aria", "memory", "csv", "archive", "merge", "mrg_myisam":
		return false
	}
	return true
}

// wholeRead is a table without a key read whole at one point while the
// stream goes on (resuming an interrupted consistent snapshot): no key
// lets a change in the stream be matched with a row read, so the table is
// replaced instead. The read's transaction starts at an exact point Q
// (MariaDB: its binlog_snapshot_position; MySQL: started under the lock a
// consistent snapshot takes, see startConsistent); the stream hands out
// everything before Q, then a TRUNCATE TABLE event for the table and the
// rows read, then what follows Q. A consumer that applies the TRUNCATE (or
// drops what it holds of the table at it) ends up with the table exactly.
type wholeRead struct {
	rng *Range
	pos position.Position // Q
	// reached: the stream has handed out everything before Q; marked:
	// the TRUNCATE event went out; pending is the chunk read and not
	// handed out yet (held back until the next one shows it is not the
	// last).
	reached, marked bool
	pending         *binlog.Txn
	chunks          chan wholeChunk
	cancel          context.CancelFunc
	done            chan struct{}
}

type wholeChunk struct {
	txn *binlog.Txn
	err error
}

// stop ends the read and waits for its goroutine.
func (w *wholeRead) stop() {
	w.cancel()
	<-w.done
}

// openWhole starts reading rg, a table without a key, whole (see
// wholeRead), on a connection of its own.
func (s *Stream) openWhole(ctx context.Context, c *client.Conn, rg *Range) error {
	t := rg.info.Table
	cfg := Config{Source: s.cfg.Source, Parallel: 1, ChunkRows: s.cfg.ChunkRows, Logger: s.cfg.Logger,
		Where: map[string]string{t.QualifiedName(): rg.Where}}
	cfg.defaults()
	for attempt := 0; ; attempt++ {
		conns, res, err := startConsistent(ctx, &cfg, c, s.srv, []*TableInfo{rg.info})
		if err != nil {
			return fmt.Errorf("snapshot: reading %s again whole (it has no key): %w", t.QualifiedName(), err)
		}
		worker := conns[0]
		// The stream must not have handed out a transaction after the
		// point already (MariaDB: one in the binlog, not yet visible when
		// the view opened): then take the point again.
		if s.r.Delivered().Compare(res.Position) > 0 {
			worker.Close()
			if attempt == 500 {
				return fmt.Errorf("snapshot: the stream of %s keeps running ahead of every point taken to read it whole; try again later", t.QualifiedName())
			}
			if err := backoff.Sleep(ctx, 10*time.Millisecond); err != nil {
				return err
			}
			continue
		}
		rd, err := newReader(worker)
		if err != nil {
			worker.Close()
			return err
		}
		rctx, cancel := context.WithCancel(context.Background())
		w := &wholeRead{rng: rg, pos: res.Position, chunks: make(chan wholeChunk), cancel: cancel, done: make(chan struct{})}
		go func() {
			defer close(w.done)
			defer worker.Close()
			err := readRange(rctx, rd, &cfg, rg.info, nil, nil, res.Position, func(txn *binlog.Txn, _ binlog.Row) error {
				select {
				case w.chunks <- wholeChunk{txn: txn}:
					return nil
				case <-rctx.Done():
					return rctx.Err()
				}
			})
			if err == nil {
				rd.close()
				worker.Execute("ROLLBACK")
			}
			if err != nil && rctx.Err() == nil {
				select {
				case w.chunks <- wholeChunk{err: err}:
				case <-rctx.Done():
				}
			}
			close(w.chunks)
		}()
		s.queue = s.queue[1:]
		s.whole = w
		s.cfg.Logger.Info("snapshot: reading a table without a key again whole, after a TRUNCATE TABLE event for it", "table", t.QualifiedName(), "position", res.Position.String())
		return nil
	}
}

// nextWhole returns the next output of the whole read: nil until the
// stream has handed out everything before its point, then the TRUNCATE
// event and the chunks; when the read is done it takes it off.
func (s *Stream) nextWhole(ctx context.Context) (*binlog.Txn, error) {
	w := s.whole
	if !w.reached {
		if s.r.Delivered().Compare(w.pos) < 0 || s.r.Pending() > 0 {
			return nil, nil
		}
		w.reached = true
	}
	t := w.rng.info.Table
	if !w.marked {
		w.marked = true
		return &binlog.Txn{Begin: w.pos, End: w.pos, Last: true, Snapshot: true, CommitTime: time.Now(),
			Changes: []binlog.Change{{Op: binlog.OpDDL, Table: &binlog.Table{Schema: t.Schema, Name: t.Name}, Schema: t.Schema,
				Query: "TRUNCATE TABLE " + sqlstmt.QuoteName(t.Schema, t.Name), File: w.pos.File, Pos: w.pos.Offset}}}, nil
	}
	for {
		var c wholeChunk
		var ok bool
		select {
		case c, ok = <-w.chunks:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if c.err != nil {
			s.whole = nil
			w.stop()
			return nil, fmt.Errorf("snapshot: reading %s again whole: %w", t.QualifiedName(), c.err)
		}
		if ok {
			prev := w.pending
			w.pending = c.txn
			if prev != nil {
				return prev, nil
			}
			continue
		}
		// The read is done: its last chunk goes out (with the final mark
		// when nothing else is queued).
		s.whole = nil
		w.stop()
		txn := w.pending
		if txn == nil {
			txn = &binlog.Txn{Begin: w.pos, End: w.pos, Last: true, Snapshot: true, CommitTime: time.Now()}
		}
		s.markLast(txn)
		return txn, nil
	}
}

// canonicalTable is a "db.table" setting as sluice writes it
// (sqlstmt.TableText), so that it compares equal to a table's
// QualifiedName however the user quoted it; a setting it cannot read is
// left for the check that names it.
func canonicalTable(s string) string {
	if db, table, err := sqlstmt.ParseTableText(s); err == nil {
		return sqlstmt.TableText(db, table)
	}
	return s
}

// canonicalKeys is m with its "db.table" keys canonical (canonicalTable).
func canonicalKeys(m map[string]string) map[string]string {
	if len(m) == 0 {
		return m
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[canonicalTable(k)] = v
	}
	return out
}
