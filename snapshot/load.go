package snapshot

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-mysql-org/go-mysql/client"
	"github.com/go-mysql-org/go-mysql/mysql"

	"github.com/sluice-cdc/sluice/binlog"
	"github.com/sluice-cdc/sluice/internal/backoff"
	"github.com/sluice-cdc/sluice/internal/rawconn"
	"github.com/sluice-cdc/sluice/internal/sqlstmt"
	"github.com/sluice-cdc/sluice/position"
)

// Mode says when a consistent initial load is taken.
type Mode string

// Snapshot modes.
const (
	// ModeInitial snapshots when there is no saved position, then streams.
	ModeInitial Mode = "initial"
	// ModeNever never snapshots: streaming starts at the saved position or
	// at --from.
	ModeNever Mode = "never"
	// ModeWhenNeeded snapshots when there is no saved position or the
	// server has purged it.
	ModeWhenNeeded Mode = "when_needed"
	// ModeAlways snapshots on every start, then streams.
	ModeAlways Mode = "always"
	// ModeOnly snapshots and stops.
	ModeOnly Mode = "only"
)

// ParseMode checks a mode name.
func ParseMode(s string) (Mode, error) {
	switch m := Mode(s); m {
	case ModeInitial, ModeNever, ModeWhenNeeded, ModeAlways, ModeOnly:
		return m, nil
	}
	return "", fmt.Errorf("snapshot: mode %q: want initial, never, when_needed, always or only", s)
}

// Needed reports whether to snapshot, given whether a saved position
// exists and whether the server has purged it.
func (m Mode) Needed(saved, purged bool) (bool, error) {
	switch m {
	case ModeAlways, ModeOnly:
		return true, nil
	case ModeWhenNeeded:
		return !saved || purged, nil
	case ModeInitial:
		if saved && purged {
			return false, fmt.Errorf("%w: the saved position is no longer on the server; snapshot mode when_needed would take a new snapshot", binlog.ErrPurged)
		}
		return !saved, nil
	default:
		return false, nil
	}
}

// Config says what to load and how.
type Config struct {
	// Source is the server (Addr, User, Password, TLS are used).
	Source binlog.Config
	// Tables selects tables, as for streaming.
	Tables *binlog.Filter
	// Where holds an optional SQL condition per table ("db.table").
	Where map[string]string
	// Parallel is the number of connections reading at once (default 2).
	// On MariaDB, more than one needs the RELOAD privilege (BACKUP STAGE)
	// to start all of them at the same point; without it one connection
	// reads. On MySQL every consistent snapshot takes a lock for as long
	// as its connections take to start (see LockTimeout).
	Parallel int
	// LockTimeout bounds the lock a consistent snapshot of MySQL takes
	// while its connections start their transactions (FLUSH TABLES WITH
	// READ LOCK, or LOCK TABLES … READ of the tables read where that is
	// not allowed): the server's lock_wait_timeout and a client side
	// timeout both give up after it, so that the lock, which holds writers
	// back while it waits, never waits longer (default 10s); and it is how
	// long a query running for a second or more is waited for before
	// FLUSH TABLES WITH READ LOCK, whose flush would make writers wait for
	// it. MariaDB's BACKUP STAGE waits as long as it must.
	LockTimeout time.Duration
	// SignalTable ("db.table") is where the watermark method writes its
	// watermark rows on a MySQL server without GTIDs (gtid_mode not ON):
	// columns type ('watermark') and data. Without GTIDs and without a
	// signal table, the watermark method is refused. The snapshot does
	// not read the signal table itself.
	SignalTable string
	// ChunkRows is the number of rows per delivered chunk (default 16384).
	// Each key range is read with one SELECT, cut into chunks as it
	// streams.
	ChunkRows int
	// Method is "consistent" (default): the tables are read at one point
	// before streaming; or "watermark": Run reads nothing and defers every
	// table to a Stream, which reads them chunk by chunk while streaming.
	// Tables of engines without transactions (MyISAM, Aria) are always
	// deferred: no snapshot can hold them still.
	Method string
	Logger *slog.Logger
	// Save, when set, is called after every delivered chunk with what is
	// left to read, so that an interrupted snapshot can go on with Resume.
	Save func(State) error
	// Progress, when set, is called every ProgressEvery with the figures.
	Progress      func([]TableProgress)
	ProgressEvery time.Duration
}

// TableProgress is how far the load of one table has got.
type TableProgress struct {
	Table     string
	Rows      int64 // read so far
	Estimated int64 // the server's estimate of the table's rows
	Done      bool
	Started   time.Time
	Finished  time.Time
}

// State is an unfinished snapshot: its point and the key ranges not yet
// delivered. It is plain JSON, for checkpoints.
type State struct {
	Position position.Position `json:"position"`
	Ranges   []SavedRange      `json:"ranges"`
	// Tables ("db.table") are the snapshot's tables read before, one row
	// of which is read again to carry the final "last" mark when the
	// final chunk has no row (see Stream).
	Tables []string `json:"tables,omitempty"`
}

// SavedRange is a key range still to read: keys after After up to UpTo.
type SavedRange struct {
	Schema string          `json:"schema"`
	Table  string          `json:"table"`
	Where  string          `json:"where,omitempty"`
	After  json.RawMessage `json:"after,omitempty"`
	UpTo   json.RawMessage `json:"up_to,omitempty"`
	// MarkOnly: only one row is left to read, to carry the final "last"
	// mark (see Stream).
	MarkOnly bool `json:"mark_only,omitempty"`
}

// Result is what a finished snapshot tells the stream.
type Result struct {
	// Position is the binlog position the snapshot is consistent with:
	// streaming from it continues exactly after the snapshot.
	Position position.Position
	Rows     int64
	Tables   int
	// Method is how consistency was obtained: on MariaDB "backup-stage"
	// (several connections started at one point under BACKUP STAGE
	// BLOCK_COMMIT) or "consistent-snapshot" (one connection, at its
	// binlog_snapshot_position); on MySQL "global-read-lock" (the
	// connections started under FLUSH TABLES WITH READ LOCK) or
	// "lock-tables" (under LOCK TABLES … READ of the tables read);
	// "watermark" when nothing was read here.
	Method string
	// Blocked is how long the snapshot's lock held writers back: from
	// asking for it to releasing it (zero when none was taken). On
	// MariaDB, BACKUP STAGE BLOCK_COMMIT holds commits (not writes) back.
	Blocked time.Duration
	// Deferred lists the tables ("db.table") left to a Stream started at
	// Position (see Config.Method); the snapshot ends when the Stream has
	// read them.
	Deferred []Deferred
	// Addr is the address of the server read (the first of the source's
	// addresses that answered); Position is that server's.
	Addr string
}

// Deferred is a table Run left to be read while streaming.
type Deferred struct {
	Schema, Table, Where string
}

func (c *Config) defaults() {
	if c.Parallel <= 0 {
		c.Parallel = 2
	}
	if c.ChunkRows <= 0 {
		c.ChunkRows = 16384
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.ProgressEvery <= 0 {
		c.ProgressEvery = 5 * time.Second
	}
	if c.LockTimeout <= 0 {
		c.LockTimeout = 10 * time.Second
	}
}

func (c *Config) dial(ctx context.Context) (*client.Conn, error) {
	conn, err := binlog.Dial(ctx, c.Source)
	return rawconn.Raw(conn), err
}

// Run reads every selected table at one consistent point and calls emit
// with chunks of rows (Op binlog.OpRead), one goroutine at a time. The
// final chunk has SnapshotLast set. It returns the binlog position to
// stream from.
//
// On MariaDB the point needs no lock that holds writers back: BACKUP STAGE
// BLOCK_COMMIT holds commits only while the connections start, or one
// connection reads at its binlog_snapshot_position. MySQL has no such
// position: its connections start their transactions under a lock held
// for that moment only (see Config.LockTimeout and Result.Blocked); where
// the user may take no lock at all, Run reads nothing itself and leaves
// every table to the watermark method (Result.Deferred).
func Run(ctx context.Context, cfg Config, emit func(*binlog.Txn) error) (Result, error) {
	cfg.SignalTable, cfg.Where = canonicalTable(cfg.SignalTable), canonicalKeys(cfg.Where)
	cfg.defaults()
	if cfg.Method != "" && cfg.Method != "consistent" && cfg.Method != "watermark" {
		return Result{}, fmt.Errorf("snapshot: method %q: want consistent or watermark", cfg.Method)
	}
	// Every connection of the snapshot goes to one server: the first of the
	// source's addresses that answers (the stream's own choice, see
	// binlog.Dial). Its position names that server, so that a stream that
	// reaches another one (a failover, or the first address back) finds it
	// there by GTID, or without GTIDs refuses it (binlog.ErrNoFailover),
	// instead of taking its file and offset for its own.
	conn, reached, err := binlog.DialFirst(ctx, cfg.Source)
	if err != nil {
		return Result{}, err
	}
	defer conn.Close()
	coord := rawconn.Raw(conn)
	if reached.Addr != cfg.Source.Addr {
		cfg.Logger.Warn("snapshot: the source's server cannot be reached: reading from another of its addresses", "unreachable", cfg.Source.Addr, "server", reached.Addr)
	}
	cfg.Source = reached
	identity, err := binlog.ServerIdentity(conn)
	if err != nil {
		return Result{}, fmt.Errorf("snapshot: %w", err)
	}
	res, err := run(ctx, cfg, coord, emit)
	res.Addr = reached.Addr
	if !res.Position.IsZero() {
		res.Position.Server = identity
	}
	return res, err
}

func run(ctx context.Context, cfg Config, coord *client.Conn, emit func(*binlog.Txn) error) (Result, error) {
	srv, err := probeServer(coord)
	if err != nil {
		return Result{}, err
	}
	tables, err := listTables(coord, cfg.Tables)
	if err != nil {
		return Result{}, err
	}
	infos := make([]*TableInfo, 0, len(tables))
	var deferred []Deferred
	for _, name := range tables {
		if name == cfg.SignalTable {
			continue // its rows are signals, not data
		}
		db, tbl, err := sqlstmt.ParseTableText(name)
		if err != nil {
			return Result{}, fmt.Errorf("snapshot: %w", err)
		}
		info, err := inspectCtx(ctx, coord, db, tbl)
		if err != nil {
			return Result{}, err
		}
		if cfg.Method == "watermark" || !isTransactional(info.Engine) {
			// (An InnoDB table without a key is read whole by the Stream,
			// at one point.)
			if len(info.Key) == 0 && !isTransactional(info.Engine) {
				return Result{}, fmt.Errorf("snapshot: %s (engine %s) has no primary or unique NOT NULL key: it can only be read while streaming with a key; add one, or convert it to InnoDB", name, info.Engine)
			}
			deferred = append(deferred, Deferred{Schema: db, Table: tbl, Where: cfg.Where[name]})
			continue
		}
		infos = append(infos, info)
	}
	// Nothing to read at one point: the stream starts now, and reads
	// what was deferred while it streams.
	watermark := func() (Result, error) {
		if len(deferred) > 0 {
			if _, err := checkWatermark(coord, srv, cfg.SignalTable, cfg.Tables); err != nil {
				return Result{}, err
			}
		}
		pos, err := srv.position(coord)
		if err != nil {
			return Result{}, err
		}
		return Result{Position: pos, Method: "watermark", Deferred: deferred, Tables: len(deferred)}, nil
	}
	if cfg.Method == "watermark" || len(infos) == 0 {
		return watermark()
	}

	conns, res, err := startConsistent(ctx, &cfg, coord, srv, infos)
	if errors.Is(err, errNoLock) {
		// MySQL, and the user may take no lock: every table is read
		// while streaming, which needs no lock (and needs keys).
		for _, info := range infos {
			if len(info.Key) == 0 {
				return Result{}, fmt.Errorf("%w; and %s has no primary or unique NOT NULL key, so it cannot be read while streaming instead", err, info.Table.QualifiedName())
			}
		}
		cfg.Logger.Warn("snapshot: no lock allowed for a consistent snapshot: reading every table while streaming (the watermark method) instead", "reason", err.Error())
		for _, info := range infos {
			t := info.Table
			deferred = append(deferred, Deferred{Schema: t.Schema, Table: t.Name, Where: cfg.Where[t.QualifiedName()]})
		}
		return watermark()
	}
	if err != nil {
		return Result{}, err
	}
	workers := make([]*reader, len(conns))
	for i, c := range conns {
		if workers[i], err = newReader(c); err != nil {
			for _, c := range conns {
				c.Close()
			}
			return Result{}, err
		}
	}
	defer func() {
		for _, w := range workers {
			if !w.broken {
				w.close()
				w.c.Execute("ROLLBACK")
			}
			w.c.Close()
		}
	}()
	res.Tables = len(infos)
	attrs := []any{"tables", len(infos), "connections", len(workers), "method", res.Method, "position", res.Position.String()}
	if res.Blocked > 0 {
		attrs = append(attrs, "writers_blocked", res.Blocked.Round(time.Microsecond).String())
	}
	cfg.Logger.Info("snapshot started", attrs...)

	// Work: one item per key range of every table.
	type item struct {
		info     *TableInfo
		lo, hi   binlog.Row // exclusive, inclusive; nil for open ends
		progress *tableProgress
	}
	progress := make([]*tableProgress, len(infos))
	var items []item
	for i, info := range infos {
		progress[i] = &tableProgress{TableProgress: TableProgress{Table: info.Table.QualifiedName(), Estimated: info.Rows}}
		where := cfg.Where[info.Table.QualifiedName()]
		var splits []binlog.Row
		if len(info.Key) > 0 && len(workers) > 1 && info.Rows > int64(2*cfg.ChunkRows) {
			splits, err = splitPoints(ctx, coord, info.Table, info.Key, where, 2*len(workers))
			if err != nil {
				return Result{}, err
			}
		}
		var lo binlog.Row
		for _, s := range splits {
			items = append(items, item{info, lo, s, progress[i]})
			lo = s
		}
		items = append(items, item{info, lo, nil, progress[i]})
		progress[i].ranges.Store(int64(len(splits) + 1))
	}

	// Emission is serialized. Each table's latest chunk is held back
	// until the table's next chunk or its end, so that its last row can be
	// marked (Debezium's last_in_data_collection); the latest chunk
	// released is held back again so that the very last row of the
	// snapshot can be marked. The first chunk released, and each table's
	// first, are marked as they go. What was emitted is tracked per range,
	// for Save.
	type sent struct {
		txn  *binlog.Txn
		item int
		key  binlog.Row
	}
	var (
		emitMu     sync.Mutex
		pending    *sent
		held       = map[*TableInfo]*sent{}
		heldItems  = make([]int, len(items)) // chunks of each range held back
		rangesLeft = map[*TableInfo]int{}
		begun      = map[*TableInfo]bool{}
		total      atomic.Int64
		emitted    = make([]binlog.Row, len(items)) // key of the last row emitted per range
		finished   = make([]bool, len(items))
	)
	for i := range items {
		emitted[i] = items[i].lo
		rangesLeft[items[i].info]++
	}
	save := func() error { // under emitMu
		if cfg.Save == nil {
			return nil
		}
		st := State{Position: res.Position}
		for _, info := range infos {
			if len(info.Key) > 0 {
				st.Tables = append(st.Tables, info.Table.QualifiedName())
			}
		}
		st.Tables = st.Tables[max(0, len(st.Tables)-maxMarkTables):]
		for i, it := range items {
			if finished[i] && heldItems[i] == 0 {
				continue
			}
			t := it.info.Table
			st.Ranges = append(st.Ranges, SavedRange{Schema: t.Schema, Table: t.Name, Where: cfg.Where[t.QualifiedName()],
				After: EncodeKey(emitted[i]), UpTo: EncodeKey(it.hi)})
		}
		return cfg.Save(st)
	}
	release := func(c *sent) error { // under emitMu
		info := items[c.item].info
		c.txn.SnapshotFirst = pending == nil && len(begun) == 0
		c.txn.SnapshotTableFirst = !begun[info]
		begun[info] = true
		prev := pending
		pending = c
		if prev == nil {
			return nil
		}
		if err := emit(prev.txn); err != nil {
			return err
		}
		heldItems[prev.item]--
		emitted[prev.item] = prev.key
		return save()
	}
	send := func(txn *binlog.Txn, item int, key binlog.Row) error {
		emitMu.Lock()
		defer emitMu.Unlock()
		info := items[item].info
		heldItems[item]++
		prev := held[info]
		held[info] = &sent{txn, item, key}
		if prev == nil {
			return nil
		}
		return release(prev)
	}
	rangeFinished := func(item int) error {
		emitMu.Lock()
		defer emitMu.Unlock()
		finished[item] = true
		info := items[item].info
		if rangesLeft[info]--; rangesLeft[info] > 0 {
			return nil
		}
		c := held[info]
		if c == nil {
			return nil // no rows
		}
		delete(held, info)
		c.txn.SnapshotTableLast = true
		return release(c)
	}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stopProgress := startProgress(ctx, &cfg, progress)
	defer stopProgress()

	work := make(chan int)
	errs := make(chan error, len(workers))
	var wg sync.WaitGroup
	for _, w := range workers {
		wg.Add(1)
		go func(rd *reader) {
			defer wg.Done()
			for idx := range work {
				it := items[idx]
				err := readRange(ctx, rd, &cfg, it.info, it.lo, it.hi, res.Position, func(txn *binlog.Txn, last binlog.Row) error {
					it.progress.rows.Add(int64(len(txn.Changes)))
					total.Add(int64(len(txn.Changes)))
					return send(txn, idx, last)
				})
				if err == nil {
					err = rangeFinished(idx)
				}
				if err != nil {
					errs <- err
					cancel()
					return
				}
				it.progress.rangeDone()
			}
		}(w)
	}
	go func() {
		defer close(work)
		for i := range items {
			select {
			case work <- i:
			case <-ctx.Done():
				return
			}
		}
	}()
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return Result{}, err
	}
	if err := ctx.Err(); err != nil {
		return Result{}, err
	}
	res.Deferred = deferred
	if pending != nil {
		pending.txn.SnapshotLast = len(deferred) == 0 // else the Stream marks the last row
		if err := emit(pending.txn); err != nil {
			return Result{}, err
		}
	}
	res.Rows = total.Load()
	stopProgress()
	cfg.Logger.Info("snapshot finished", "tables", res.Tables, "rows", res.Rows, "position", res.Position.String())
	return res, nil
}

// readRange reads the rows of one key range, in key order, with one
// query, and delivers them in chunks of cfg.ChunkRows rows, each with the
// key of its last row (nil for a table without a key, read whole in no
// particular order).
//
// One query per range costs the server less than a query per chunk (each
// one a range scan of its own, ORDER BY … LIMIT); the price is a result
// held open while emit blocks, which is why the workers' sessions raise
// net_write_timeout (see startConsistent).
func readRange(ctx context.Context, rd *reader, cfg *Config, info *TableInfo, lo, hi binlog.Row, pos position.Position, emit func(txn *binlog.Txn, lastKey binlog.Row) error) error {
	t := info.Table
	query, args := ChunkQuery(t, info.Key, cfg.Where[t.QualifiedName()], lo, hi, 0)
	var (
		txn   *binlog.Txn
		arena rowArena
	)
	start := func() {
		txn = &binlog.Txn{Begin: pos, End: pos, Last: true, Snapshot: true, CommitTime: time.Now(),
			Changes: make([]binlog.Change, 0, cfg.ChunkRows)}
		arena = rowArena{perRow: len(t.Columns), rows: cfg.ChunkRows}
	}
	deliver := func() error {
		var last binlog.Row
		if len(info.Key) > 0 {
			last = CloneKey(t, info.Key, txn.Changes[len(txn.Changes)-1].After)
		}
		return emit(txn, last)
	}
	start()
	err := rd.scanInto(ctx, t, query, args, arena.next, func(row binlog.Row) error {
		arena.keepBytes(row)
		txn.Changes = append(txn.Changes, binlog.Change{Op: binlog.OpRead, Table: t, After: row, File: pos.File, Pos: pos.Offset, Row: len(txn.Changes)})
		if len(txn.Changes) < cfg.ChunkRows {
			return nil
		}
		if err := deliver(); err != nil {
			return err
		}
		start()
		return nil
	})
	if err != nil {
		var myErr *mysql.MyError
		if errors.As(err, &myErr) && (myErr.Code == mysql.ER_TABLE_DEF_CHANGED || myErr.Code == mysql.ER_NO_SUCH_TABLE) {
			return fmt.Errorf("snapshot: %s was dropped or altered while the snapshot read it (%v); nothing of it after the last delivered chunk was read: run the snapshot again (with --checkpoint it resumes)", t.QualifiedName(), myErr)
		}
		return fmt.Errorf("snapshot: reading %s: %w", t.QualifiedName(), err)
	}
	if len(txn.Changes) > 0 {
		return deliver()
	}
	return nil
}

// rowArena is the memory of a chunk's rows: one allocation for a chunk's
// values when perRow and rows size it, and slabs for their bytes.
type rowArena struct {
	vals   []binlog.Value
	buf    []byte
	perRow int // columns per row
	rows   int // rows expected in the chunk
}

// next returns room for a row of perRow values.
func (a *rowArena) next() binlog.Row {
	if cap(a.vals)-len(a.vals) < a.perRow {
		n := max(a.perRow*256, 1024)
		if a.vals == nil && a.rows > 0 {
			n = a.perRow * a.rows // the first slab holds the whole chunk
		}
		a.vals = make([]binlog.Value, 0, max(n, a.perRow))
	}
	s := len(a.vals)
	a.vals = a.vals[:s+a.perRow]
	return binlog.Row(a.vals[s : s+a.perRow : s+a.perRow])
}

// keepBytes copies the bytes row's values point to (a reused buffer) into
// the arena.
func (a *rowArena) keepBytes(row binlog.Row) {
	for i, v := range row {
		if b := v.Bytes(); b != nil {
			if cap(a.buf)-len(a.buf) < len(b) {
				a.buf = make([]byte, 0, max(len(b), 64<<10))
			}
			o := len(a.buf)
			a.buf = append(a.buf, b...)
			row[i] = binlog.BytesValue(v.Kind(), a.buf[o:len(a.buf):len(a.buf)])
		}
	}
}

// clone copies row into the arena.
func (a *rowArena) clone(row binlog.Row) binlog.Row {
	if a.perRow == 0 {
		a.perRow = len(row)
	}
	out := a.next()
	copy(out, row)
	a.keepBytes(out)
	return out
}

// workerSessionSQL lets a reading connection's result wait for a slow
// consumer: readRange reads a whole key range with one query, and the
// server drops a client that reads nothing for net_write_timeout seconds
// (default 60). A year is the most MariaDB accepts. A client that goes
// away still ends the query: its socket is closed.
const workerSessionSQL = "SET SESSION net_write_timeout = 31536000"

// errNoLock: a consistent snapshot of MySQL needs a lock the user may not
// take.
var errNoLock = errors.New("snapshot: a consistent snapshot of MySQL starts its connections under FLUSH TABLES WITH READ LOCK (the RELOAD privilege) or LOCK TABLES … READ of the tables read (the LOCK TABLES privilege), and the server allowed neither")

// startConsistent opens the reading connections, each in a transaction
// that sees the database at one point, and returns the binlog position of
// that point.
//
// The connections are opened and their sessions set first; only then is
// the point taken, so that a lock it needs is held for as long as the
// transactions take to start and the position to be read, no longer.
func startConsistent(ctx context.Context, cfg *Config, coord *client.Conn, srv server, infos []*TableInfo) ([]*client.Conn, Result, error) {
	var res Result
	n := cfg.Parallel
	var workers []*client.Conn
	fail := func(err error) ([]*client.Conn, Result, error) {
		for _, w := range workers {
			w.Close()
		}
		return nil, res, err
	}
	open := func(n int) error {
		for len(workers) < n {
			w, err := cfg.dial(ctx)
			if err != nil {
				return err
			}
			workers = append(workers, w)
			for _, q := range []string{SessionSQL, workerSessionSQL, "SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ"} {
				if _, err := w.Execute(q); err != nil {
					return fmt.Errorf("snapshot: %s: %w", q, err)
				}
			}
		}
		return nil
	}
	if err := open(n); err != nil {
		return fail(err)
	}
	if srv.flavor == position.MySQL {
		var err error
		res, err = startLocked(ctx, cfg, coord, srv, infos, workers)
		if err != nil {
			return fail(err)
		}
		return workers, res, nil
	}

	locked := false
	var blockStart time.Time
	if n > 1 {
		if _, err := coord.Execute("BACKUP STAGE START"); err == nil {
			blockStart = time.Now()
			if _, err := coord.Execute("BACKUP STAGE BLOCK_COMMIT"); err == nil {
				locked = true
			} else {
				coord.Execute("BACKUP STAGE END")
			}
		}
		if !locked {
			cfg.Logger.Warn("snapshot: one connection only: starting several at one point needs BACKUP STAGE (the RELOAD privilege)", "parallel", n)
			for _, w := range workers[1:] {
				w.Close()
			}
			workers = workers[:1]
		}
	}
	unlock := func() {
		if locked {
			coord.Execute("BACKUP STAGE END")
			locked = false
			res.Blocked = time.Since(blockStart)
		}
	}
	defer unlock()
	if err := beginAll(workers); err != nil {
		return fail(err)
	}
	var err error
	if locked {
		res.Method = "backup-stage"
		res.Position, err = srv.position(coord)
	} else {
		res.Method = "consistent-snapshot"
		res.Position, err = snapshotPosition(workers[0])
		if err == nil {
			res.Position.Flavor = position.MariaDB
			res.Position.GTIDs, err = binlog.GTIDAt(rawconn.Wrap(coord), res.Position)
		}
	}
	if err != nil {
		return fail(err)
	}
	unlock()
	if res.Method == "backup-stage" {
		cfg.Logger.Info("snapshot lock released", "method", res.Method, "writers_blocked", res.Blocked.Round(time.Microsecond).String(), "connections", len(workers))
	}
	return workers, res, nil
}

// beginAll starts the consistent-snapshot transaction of every worker, all
// at once.
func beginAll(workers []*client.Conn) error {
	const q = "START TRANSACTION WITH CONSISTENT SNAPSHOT, READ ONLY"
	errs := make([]error, len(workers))
	var wg sync.WaitGroup
	for i, w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := w.Execute(q); err != nil {
				errs[i] = fmt.Errorf("snapshot: %s: %w", q, err)
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// ErrLockTimeout: a consistent snapshot of MySQL gave up waiting for its
// lock, or for a long query to end, after Config.LockTimeout (a long
// query, or a writer waiting for an open transaction's row locks, held it
// up). Nothing was read; trying again, when the server is quieter, may
// succeed. Test with errors.Is.
var ErrLockTimeout = errors.New("snapshot: the snapshot lock timed out")

// lockTimeoutError is a lock timeout, with the server's error inside.
type lockTimeoutError struct{ err error }

func (e lockTimeoutError) Error() string        { return e.err.Error() }
func (e lockTimeoutError) Unwrap() error        { return e.err }
func (e lockTimeoutError) Is(target error) bool { return target == ErrLockTimeout }

// startLocked starts the workers' transactions on MySQL at one point,
// under a lock that holds writers back while they start and the position
// is read:
//
//   - FLUSH TABLES WITH READ LOCK (RELOAD) where the user may take it: it
//     waits for the commits under way and holds every other back, so that
//     every transaction in the binlog before the position is committed
//     (visible, in gtid_executed) and none after. Its flush of the open
//     tables makes every statement that opens a table wait for the queries
//     using it to end, even once the flush has given up: so it is taken
//     only when SHOW PROCESSLIST shows no query running for a second or
//     more (other users' sessions need the PROCESS privilege to be seen),
//     and after a plain FLUSH TABLES, as mysqldump does, so that its own
//     flush is short.
//   - Else, or while a long query runs, LOCK TABLES … READ of the tables
//     read (the LOCK TABLES privilege): it waits for the transactions that
//     wrote them to end (commit included) and holds their writers back, so
//     that the same holds for every transaction touching them; it does not
//     wait for queries that only read them. A transaction writing two of
//     the tables while the lock is taken can fail with a deadlock error
//     (the server chooses it as the victim), which is why it comes second.
//
// Each waits at most cfg.LockTimeout.
func startLocked(ctx context.Context, cfg *Config, coord *client.Conn, srv server, infos []*TableInfo, workers []*client.Conn) (Result, error) {
	var res Result
	d := cfg.LockTimeout
	lockErr := func(what string, err error, waited time.Duration) error {
		switch serverCode(err) {
		case errLockWaitTimeout, errQueryInterrupted:
			return lockTimeoutError{fmt.Errorf("snapshot: %s did not get its lock within %s (an open transaction or a long query holds one of the tables, or a query waits for the row locks of an open transaction; see SHOW PROCESSLIST) and gave up after %s, writers may have waited as long; try again when the server is quieter, raise the snapshot lock timeout, or use the watermark method, which takes no lock: %w",
				what, d, waited.Round(time.Millisecond), err)}
		}
		return fmt.Errorf("snapshot: %s: %w", what, err)
	}
	lockTables := func() error {
		var b strings.Builder
		b.WriteString("LOCK TABLES ")
		for i, info := range infos {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(sqlstmt.QuoteName(info.Table.Schema, info.Table.Name))
			b.WriteString(" READ")
		}
		return lockStatement(ctx, cfg.dial, coord, b.String(), d)
	}
	ftwrl := func() error {
		err := lockStatement(ctx, cfg.dial, coord, "FLUSH LOCAL TABLES", d)
		if err == nil {
			err = lockStatement(ctx, cfg.dial, coord, "FLUSH TABLES WITH READ LOCK", d)
		}
		return err
	}
	long, err := longRunning(coord)
	if err != nil {
		return res, err
	}
	var start time.Time
	if long == "" {
		// FLUSH TABLES WITH READ LOCK.
		res.Method = "global-read-lock"
		start = time.Now()
		if err = ftwrl(); err != nil && !refused(err) {
			return res, lockErr("FLUSH TABLES WITH READ LOCK", err, time.Since(start))
		}
	}
	if long != "" || err != nil {
		// LOCK TABLES … READ of the tables read.
		why := err
		if long != "" {
			why = fmt.Errorf("a query has been running (%s) and the flush of FLUSH TABLES WITH READ LOCK would hold every writer back until it ends", long)
		}
		cfg.Logger.Info("snapshot: not taking FLUSH TABLES WITH READ LOCK: locking the tables read instead", "reason", why.Error())
		res.Method = "lock-tables"
		start = time.Now()
		err := lockTables()
		if refused(err) && long != "" {
			// LOCK TABLES is not allowed: wait for the query to end,
			// then FLUSH TABLES WITH READ LOCK.
			if long, err = waitNoLongQuery(ctx, coord, d); err != nil {
				return res, err
			}
			if long != "" {
				return res, lockTimeoutError{fmt.Errorf("snapshot: a query has been running (%s), and the flush of FLUSH TABLES WITH READ LOCK would hold every writer back until it ends; gave up waiting for it after %s. LOCK TABLES … READ, which does not wait for queries, is not allowed: let the query finish or KILL it, grant LOCK TABLES on the tables, raise the snapshot lock timeout, or use the watermark method, which takes no lock", long, d)}
			}
			res.Method = "global-read-lock"
			start = time.Now()
			if err = ftwrl(); err != nil && !refused(err) {
				return res, lockErr("FLUSH TABLES WITH READ LOCK", err, time.Since(start))
			}
		}
		if refused(err) {
			return res, fmt.Errorf("%w (%v; %v); grant one of them (managed services such as RDS refuse FLUSH TABLES WITH READ LOCK even with RELOAD: GRANT LOCK TABLES ON db.* TO the user), or use the watermark method", errNoLock, why, err)
		}
		if err != nil {
			return res, lockErr("LOCK TABLES … READ", err, time.Since(start))
		}
	}
	unlock := func() error {
		_, err := coord.Execute("UNLOCK TABLES")
		res.Blocked = time.Since(start)
		return err
	}
	if err := beginAll(workers); err != nil {
		unlock()
		return res, err
	}
	if res.Position, err = srv.position(coord); err != nil {
		unlock()
		return res, err
	}
	if err := unlock(); err != nil {
		return res, fmt.Errorf("snapshot: UNLOCK TABLES: %w", err)
	}
	cfg.Logger.Info("snapshot lock released", "method", res.Method, "writers_blocked", res.Blocked.Round(time.Microsecond).String(), "connections", len(workers))
	return res, nil
}

// longQuery is how long a statement must have run to keep FLUSH TABLES
// WITH READ LOCK from being taken (PROCESSLIST counts whole seconds).
const longQuery = 1

// longRunning describes a statement (but this session's and
// replication's) that SHOW PROCESSLIST shows running for longQuery
// seconds or more, or returns "".
func longRunning(c *client.Conn) (string, error) {
	self := uint64(c.GetConnectionID())
	rs, err := c.Execute("SHOW PROCESSLIST")
	if err != nil {
		return "", fmt.Errorf("snapshot: SHOW PROCESSLIST: %w", err)
	}
	defer rs.Close()
	for i := 0; i < rs.RowNumber(); i++ {
		id, _ := rs.GetUintByName(i, "Id")
		secs, _ := rs.GetIntByName(i, "Time")
		cmd, _ := rs.GetStringByName(i, "Command")
		if id == self || cmd != "Query" || secs < longQuery {
			continue
		}
		user, _ := rs.GetStringByName(i, "User")
		db, _ := rs.GetStringByName(i, "db")
		return fmt.Sprintf("id %d of user %s in database %q, for %ds", id, user, db, secs), nil
	}
	return "", nil
}

// waitNoLongQuery waits, for at most d, until longRunning finds nothing,
// and returns what it last found.
func waitNoLongQuery(ctx context.Context, c *client.Conn, d time.Duration) (string, error) {
	deadline := time.Now().Add(d)
	for {
		long, err := longRunning(c)
		if err != nil || long == "" || time.Now().After(deadline) {
			return long, err
		}
		if err := backoff.Sleep(ctx, 100*time.Millisecond); err != nil {
			return "", err
		}
	}
}

// snapshotPosition reads MariaDB's binlog_snapshot_file/position: the
// binlog position matching the connection's consistent snapshot.
func snapshotPosition(c *client.Conn) (position.Position, error) {
	rs, err := c.Execute("SHOW STATUS LIKE 'binlog_snapshot_%'")
	if err != nil {
		return position.Position{}, fmt.Errorf("snapshot: reading binlog_snapshot_position: %w", err)
	}
	defer rs.Close()
	var p position.Position
	for i := 0; i < rs.RowNumber(); i++ {
		switch cell(rs, i, 0) {
		case "Binlog_snapshot_file":
			p.File = cell(rs, i, 1)
		case "Binlog_snapshot_position":
			off, _ := rs.GetUintByName(i, "Value")
			if off == 0 {
				fmt.Sscan(cell(rs, i, 1), &off)
			}
			p.Offset = uint32(off)
		}
	}
	if p.File == "" {
		return p, errors.New("snapshot: the server has no binlog_snapshot_file status (MariaDB only; is binary logging on?)")
	}
	return p, nil
}

// listTables returns the selected base tables as "db.table"
// (sqlstmt.TableText).
func listTables(c *client.Conn, f *binlog.Filter) ([]string, error) {
	rs, err := c.Execute("SELECT TABLE_SCHEMA, TABLE_NAME FROM information_schema.TABLES WHERE TABLE_TYPE = 'BASE TABLE' ORDER BY TABLE_SCHEMA, TABLE_NAME")
	if err != nil {
		return nil, fmt.Errorf("snapshot: listing tables: %w", err)
	}
	defer rs.Close()
	var out []string
	for i := 0; i < rs.RowNumber(); i++ {
		db, t := cell(rs, i, 0), cell(rs, i, 1)
		if f.Match(db, t) {
			out = append(out, sqlstmt.TableText(db, t))
		}
	}
	return out, nil
}

// tableProgress counts one table's rows and finished ranges.
type tableProgress struct {
	TableProgress
	rows   atomic.Int64
	ranges atomic.Int64
	mu     sync.Mutex
}

func (p *tableProgress) rangeDone() {
	if p.ranges.Add(-1) == 0 {
		p.mu.Lock()
		p.Finished = time.Now()
		p.mu.Unlock()
	}
}

func (p *tableProgress) snapshot() TableProgress {
	p.mu.Lock()
	defer p.mu.Unlock()
	tp := p.TableProgress
	tp.Rows = p.rows.Load()
	tp.Done = p.ranges.Load() == 0
	return tp
}

func startProgress(ctx context.Context, cfg *Config, ps []*tableProgress) (stop func()) {
	if cfg.Progress == nil {
		return func() {}
	}
	start := time.Now()
	for _, p := range ps {
		p.Started = start
	}
	report := func() {
		out := make([]TableProgress, len(ps))
		for i, p := range ps {
			out[i] = p.snapshot()
		}
		cfg.Progress(out)
	}
	done := make(chan struct{})
	var once sync.Once
	go func() {
		t := time.NewTicker(cfg.ProgressEvery)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				report()
			case <-done:
				return
			case <-ctx.Done():
				return
			}
		}
	}()
	return func() {
		once.Do(func() {
			close(done)
			report()
		})
	}
}

// Resume queues the ranges an interrupted snapshot left on a Stream; the
// Stream's reader must start at the state's position or at a later
// position saved by the same consumer. A table without a key is read
// again whole, after a TRUNCATE TABLE event for it (see Stream).
func Resume(ctx context.Context, s *Stream, st State) error {
	for _, sr := range st.Ranges {
		after, err := DecodeKey(sr.After)
		if err != nil {
			return err
		}
		upTo, err := DecodeKey(sr.UpTo)
		if err != nil {
			return err
		}
		// A table without a key (an interrupted consistent snapshot can
		// leave one) is read again whole, replacing its rows (see Stream).
		rg := &Range{Schema: sr.Schema, Table: sr.Table, Where: sr.Where, After: after, UpTo: upTo, markOnly: sr.MarkOnly}
		if err := s.AddRange(ctx, rg); err != nil {
			return err
		}
	}
	for _, name := range st.Tables {
		db, table, err := sqlstmt.ParseTableText(name)
		if err != nil {
			return fmt.Errorf("snapshot: the saved snapshot state: %w", err)
		}
		if err := s.addMarkTable(ctx, db, table); err != nil {
			return err
		}
	}
	return nil
}

// Saved describes what a Stream has left, for checkpoints (nil when done).
func (s *Stream) Saved() []SavedRange {
	var out []SavedRange
	for _, rg := range s.Remaining() {
		out = append(out, SavedRange{Schema: rg.Schema, Table: rg.Table, Where: rg.Where, After: EncodeKey(rg.After), UpTo: EncodeKey(rg.UpTo), MarkOnly: rg.markOnly})
	}
	return out
}
