package snapshot

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"

	"github.com/go-mysql-org/go-mysql/client"

	"github.com/sluice-cdc/sluice/binlog"
	"github.com/sluice-cdc/sluice/codec"
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
// It takes no lock; only the last case writes to the source. A table needs
// a primary key or a unique NOT NULL key.
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
	// sinceMark is set when a transaction has been handed out since the
	// last high watermark row of this Stream's was seen (or none has
	// been seen). While it is not set, everything handed out is in the
	// binlog before a watermark write that has committed, hence visible
	// (binlog_order_commits), and the next chunk needs no low watermark
	// row of its own.
	sinceMark bool
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
	if cfg.ChunkRows <= 0 {
		cfg.ChunkRows = 4096
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	var id [6]byte
	_, _ = rand.Read(id[:])
	return &Stream{r: r, cfg: cfg, markID: "sluice-" + hex.EncodeToString(id[:]), sinceMark: true}
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
	info, err := Inspect(ctx, c, rg.Schema, rg.Table)
	if err != nil {
		return err
	}
	if len(info.Key) == 0 {
		return fmt.Errorf("snapshot: %s.%s has no primary key and no unique NOT NULL key: it cannot be read while streaming (take a consistent snapshot instead)", rg.Schema, rg.Table)
	}
	if isTransactional(info.Engine) {
		if s.markHasID, err = checkWatermark(c, s.srv, s.cfg.SignalTable, s.cfg.Source.Tables); err != nil {
			return fmt.Errorf("reading %s.%s while streaming: %w", rg.Schema, rg.Table, err)
		}
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
	db, table, ok := strings.Cut(signal, ".")
	if !ok {
		return false, fmt.Errorf("snapshot: signal table %q: want db.table", signal)
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
	if s.win != nil {
		out = append(out, s.win.rng)
	}
	return append(out, s.queue...)
}

// Close closes the chunk connection (not the reader), taking out the
// watermark row of a chunk not finished.
func (s *Stream) Close() error {
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
	c := Config{Source: s.cfg.Source}
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
		if s.win == nil && len(s.queue) > 0 && !s.midTxn {
			if err := s.open(ctx); err != nil {
				return nil, err
			}
		}
		if s.win != nil && s.reached() {
			return s.close(), nil
		}
		wait, cancel := ctx, context.CancelFunc(func() {})
		if s.win != nil {
			wait, cancel = context.WithTimeout(ctx, 20*time.Millisecond)
		}
		txn, err := s.r.Next(wait)
		cancel()
		if err != nil {
			if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil && s.win != nil {
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
			select {
			case <-time.After(10 * time.Millisecond):
			case <-ctx.Done():
				return ctx.Err()
			}
			continue
		}
		w.dropped = make([]bool, len(w.rows))
		w.complete = len(w.rows) < s.cfg.ChunkRows
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
	query, args := ChunkQuery(t, rg.info.Key, rg.Where, rg.After, rg.UpTo, s.cfg.ChunkRows)
	var arena rowArena
	err = withContext(ctx, c, func() error {
		return s.rd.scan(ctx, t, query, args, func(row binlog.Row) error {
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
		select {
		case <-time.After(time.Millisecond):
		case <-ctx.Done():
			return l, ctx.Err()
		}
	}
}

// writeMark runs a write of a watermark row (query has a %s for the
// signal table's name).
func (s *Stream) writeMark(c *client.Conn, query string, args ...any) error {
	db, table, _ := strings.Cut(s.cfg.SignalTable, ".")
	q := fmt.Sprintf(query, quoteName(db, table))
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
	if s.cfg.SignalTable == "" || ch.Table == nil || ch.Table.Schema+"."+ch.Table.Name != s.cfg.SignalTable {
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
	if !w.complete {
		next := *w.rng
		next.After = w.last
		s.queue = append([]*Range{&next}, s.queue...)
	} else if len(s.queue) == 0 {
		txn.SnapshotLast = true
	}
	return txn
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
