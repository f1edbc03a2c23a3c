package snapshot

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/go-mysql-org/go-mysql/client"

	"github.com/sluice-cdc/sluice/binlog"
	"github.com/sluice-cdc/sluice/codec"
	"github.com/sluice-cdc/sluice/position"
)

// Stream reads tables while the binlog keeps streaming, chunk by chunk,
// with the watermark idea of DBLog: each chunk is read at a binlog point P
// known exactly (a transaction WITH CONSISTENT SNAPSHOT and MariaDB's
// binlog_snapshot_position); the chunk's rows are delivered as snapshot
// reads when the stream reaches P, except rows whose key a transaction
// after P changed before that moment (that change is newer and wins). A
// row read by the snapshot therefore never overwrites a newer change from
// the binlog, and every row is either read or changed after P.
//
// It needs no lock and no writes to the source; a table needs a primary
// key or a unique NOT NULL key.
type Stream struct {
	r     *binlog.Reader
	cfg   StreamConfig
	conn  *client.Conn
	rd    *reader // reads chunks on conn, each query prepared once
	queue []*Range
	win   *window
}

// StreamConfig configures a Stream.
type StreamConfig struct {
	// Source is the server (Addr, User, Password, TLS are used) for the
	// chunk queries; the Reader has its own connection.
	Source    binlog.Config
	ChunkRows int // default 4096
	Logger    *slog.Logger
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

// window is the chunk being reconciled with the stream.
type window struct {
	rng      *Range
	low      position.Position
	high     position.Position
	rows     []binlog.Row
	dropped  []bool
	byKey    map[string]int
	last     binlog.Row // key of the chunk's last row: where the range continues
	complete bool       // the chunk ended the range
	started  time.Time
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
	return &Stream{r: r, cfg: cfg}
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
	rg.info = info
	rg.keyNames = nil
	for _, k := range info.Key {
		rg.keyNames = append(rg.keyNames, info.Table.Columns[k].Name)
	}
	s.queue = append(s.queue, rg)
	return nil
}

// Remaining returns the ranges not read yet, the current chunk's included.
func (s *Stream) Remaining() []*Range {
	var out []*Range
	if s.win != nil {
		out = append(out, s.win.rng)
	}
	return append(out, s.queue...)
}

// Close closes the chunk connection (not the reader).
func (s *Stream) Close() error {
	if s.conn != nil {
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
	rd, err := newReader(conn)
	if err != nil {
		conn.Close()
		return nil, err
	}
	s.conn, s.rd = conn, rd
	return conn, nil
}

// Next returns the next transaction of the stream, or a chunk of snapshot
// rows (Txn.Snapshot set) when one is reconciled.
func (s *Stream) Next(ctx context.Context) (*binlog.Txn, error) {
	for {
		if s.win == nil && len(s.queue) > 0 {
			if err := s.open(ctx); err != nil {
				return nil, err
			}
		}
		// Everything up to H has gone through when the reader has handed
		// out all transactions up to H (read first: it is published after
		// the handover) and none of them waits in its queue.
		if s.win != nil && s.r.Delivered().Compare(s.win.high) >= 0 && s.r.Pending() == 0 {
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
		if s.win != nil {
			s.observe(txn)
		}
		return txn, nil
	}
}

// open reads the next chunk in a transaction WITH CONSISTENT SNAPSHOT,
// whose binlog_snapshot_position says exactly which transactions the
// chunk includes: all those before the position, none after it.
//
// (Positions taken with SHOW MASTER STATUS around a plain SELECT are not
// exact: a transaction is in the binlog, and sent to replicas, before its
// engine commit makes it visible, so a SELECT can miss a change the
// binlog already holds. The consistent snapshot closes that gap.)
func (s *Stream) open(ctx context.Context) error {
	rg := s.queue[0]
	c, err := s.connection(ctx)
	if err != nil {
		return err
	}
	t := rg.info.Table
	// The reader must have fixed its start before a chunk is read, or the
	// transactions between the two would be lost.
	if err := s.r.Ready(ctx); err != nil {
		return err
	}
	for attempt := 0; ; attempt++ {
		w := &window{rng: rg, byKey: map[string]int{}, started: time.Now()}
		transactional := isTransactional(rg.info.Engine)
		if transactional {
			if _, err := c.Execute("START TRANSACTION WITH CONSISTENT SNAPSHOT, READ ONLY"); err != nil {
				return fmt.Errorf("snapshot: starting a chunk transaction: %w", err)
			}
			if w.low, err = snapshotPosition(c); err != nil {
				c.Execute("ROLLBACK")
				return err
			}
		} else if w.low, err = currentPosition(c); err != nil {
			// A table without transactions (MyISAM, Aria): a change is
			// visible as soon as it is made, before its binlog event is
			// written; so every change the SELECT can miss has its event
			// after this low watermark, and every change it may include
			// but whose event comes after the high watermark is replayed
			// on top by the stream (row images are whole), harmlessly.
			return err
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
			return fmt.Errorf("snapshot: reading a chunk of %s: %w", t.QualifiedName(), err)
		}
		// The stream must not have handed out transactions after the
		// chunk's point already (it can, briefly, for transactions written
		// to the binlog but not yet committed): then read the chunk again.
		if s.r.Delivered().Compare(w.low) > 0 {
			if attempt == 500 {
				return fmt.Errorf("snapshot: the stream of %s keeps running ahead of every chunk read; try again later", t.QualifiedName())
			}
			select {
			case <-time.After(10 * time.Millisecond):
			case <-ctx.Done():
				return ctx.Err()
			}
			continue
		}
		w.high = w.low
		if !transactional {
			if w.high, err = currentPosition(c); err != nil {
				return err
			}
		}
		w.dropped = make([]bool, len(w.rows))
		w.complete = len(w.rows) < s.cfg.ChunkRows
		if len(w.rows) > 0 {
			w.last = CloneKey(t, rg.info.Key, w.rows[len(w.rows)-1])
		}
		s.queue = s.queue[1:]
		s.win = w
		return nil
	}
}

// observe drops the chunk rows that a change between the watermarks touched.
func (s *Stream) observe(txn *binlog.Txn) {
	w := s.win
	if txn.Begin.Compare(w.low) < 0 {
		return // before the chunk's point: the chunk includes it
	}
	// After the chunk's point and handed out before the chunk: the change
	// is newer than the chunk's row, which must not overwrite it.
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

// close delivers the chunk's surviving rows and moves the range on.
func (s *Stream) close() *binlog.Txn {
	w := s.win
	s.win = nil
	t := w.rng.info.Table
	txn := &binlog.Txn{Begin: w.high, End: w.high, Last: true, Snapshot: true, CommitTime: w.started}
	for i, row := range w.rows {
		if !w.dropped[i] {
			txn.Changes = append(txn.Changes, binlog.Change{Op: binlog.OpRead, Table: t, After: row, File: w.high.File, Pos: w.high.Offset, Row: len(txn.Changes)})
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
