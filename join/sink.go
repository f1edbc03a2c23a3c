package join

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/sluice-cdc/sluice/binlog"
	"github.com/sluice-cdc/sluice/codec"
	"github.com/sluice-cdc/sluice/position"
	"github.com/sluice-cdc/sluice/sink"
)

// SinkOptions are what a join's sink needs besides its Config.
type SinkOptions struct {
	// Out receives the joined records: the sink named by Config.Sink. The
	// join's Sink owns it (recovers, writes and closes it); it must not be
	// one of the pipeline's own sinks.
	Out sink.Sink
	// DeadLetter receives late and untimed rows: the sink named by
	// Config.Late; nil with late: drop. Owned like Out.
	DeadLetter sink.Sink
	// Watermark returns the pipeline's low watermark: no message still to
	// come to this sink has an earlier event time (within the lateness).
	// The zero time means none yet. When nil, the watermark is the latest
	// EventTime among the messages consumed, which is right for one source
	// (its transactions arrive in commit order) but not for several.
	Watermark func() time.Time
	// Tick is how often the watermark is checked without input, so that
	// a quiet stream still evicts and emits (default 1 s; negative: never).
	Tick time.Duration
	// Logger (default slog.Default()).
	Logger *slog.Logger
	// CacheBytes is Pebble's block cache (default 64 MiB).
	CacheBytes int64
}

// Sink is a join as a sink.Sink: it takes the pipeline's batches,
// joins the rows of its two tables in its Pebble state, and delivers the
// joined records to a downstream sink exactly once, through an outbox.
//
// Each Write applies the batch's new messages (those past the last input
// sequence number consumed) and advances the watermark, then commits in one
// synced Pebble batch the state changes, the records produced (in the
// outbox, under their output sequence numbers) and the input sequence
// number consumed; only then does it deliver the outbox to the downstream
// sink. After a crash, Recover asks the downstream sink what it holds,
// delivers the rest of the outbox, and reports the input consumed, so the
// pipeline skips it: every record is produced once (the commit is atomic)
// and delivered once (the downstream skips by sequence number).
//
// A goroutine advances the watermark every Tick without input; it and the
// pipeline's calls are serialized by a mutex.
type Sink struct {
	cfg      Config
	opts     SinkOptions
	log      *slog.Logger
	name     string
	nameJSON []byte
	sides    [2]sideSpec
	outlets  [2]sink.Sink // joined records, dead letters (nil: drop)

	mu struct {
		sync.Mutex
		op        *Operator
		recovered bool
		closed    bool
		fatal     error // fencing seen by the ticker
		epoch     uint64
		meta      sinkMeta // committed plus what the pending batch holds
		committed sinkMeta
		deliv     [2]delivery // live: what each downstream holds
		broken    [2]bool     // a failed write: recover before the next
		tables    map[tableSide]*tableInfo
		// sidesOf caches, per table, which sides its rows go to (bit i:
		// side i): the table patterns are matched once per table, not
		// per row.
		sidesOf   map[*binlog.Table]uint8
		produced  int // records put in the outbox since the last commit
		untimed   uint64
		fresh     bool      // the meta has never been committed
		deleted   [2]uint64 // outbox records below this seq are deleted (or being)
		buf       []byte
		kbuf      []byte
		vbuf      []byte
		deliverIn []byte
	}
	op       atomic.Pointer[Operator] // for Stats
	counters struct {
		untimed, outputs, deadLetters, consumed atomic.Uint64
	}
	// crash, in tests, is called at points where a crash matters; an
	// error it returns is returned as if the process died there.
	crash func(point string) error

	ctx     context.Context
	cancel  context.CancelFunc
	tickWG  sync.WaitGroup
	started bool
}

var _ sink.Sink = (*Sink)(nil)

type sideSpec struct {
	filter  *binlog.Filter
	key     []string
	timeCol string // "" = commit time
}

type tableSide struct {
	t *binlog.Table
	s Side
}

// tableInfo is where a table's key and time columns are.
type tableInfo struct {
	key     []int
	timeCol int // -1: commit time
}

// sinkMeta is the sink's persisted progress (JSON under 'm' 's').
type sinkMeta struct {
	Version int    `json:"version"`
	StateID string `json:"state_id"`
	// Consumed is the input sequence number of the last message applied.
	Consumed uint64 `json:"consumed"`
	// Next is, per outlet, the next output sequence number.
	Next [2]uint64 `json:"next"`
	// Delivered and Offset are, per outlet, the last output sequence
	// number the downstream sink holds and its offset after it, as of the
	// commit (recovery asks the downstream for anything later).
	Delivered [2]uint64 `json:"delivered"`
	Offset    [2]string `json:"offset"`
	// Ends holds, per source, the last transaction end consumed.
	Ends map[string]endMeta `json:"ends,omitempty"`
	// Opens holds, per source, how many messages were consumed after its
	// last end (snapshot rows aside): the first part of a transaction
	// whose batch ended inside it. Recovery reports it
	// (sink.Recovery.Partial) and the pipeline sends only the rest.
	// Counted says Opens is kept (the state of an older sluice has none).
	Opens   map[string]int `json:"opens,omitempty"`
	Counted bool           `json:"counted,omitempty"`
	// LastEventTime is the latest event time consumed (µs), the default
	// watermark.
	LastEventTime int64 `json:"last_event_time"`
}

const sinkMetaVersion = 1

type endMeta struct {
	Pos position.Position `json:"pos"`
	Seq uint64            `json:"seq"`
}

type delivery struct {
	seq    uint64
	offset string
}

// Outlets.
const (
	outJoined     = 0
	outDeadLetter = 1
)

// NewSink checks cfg and opts and returns the join's sink. The state is
// opened by Recover.
func NewSink(cfg Config, opts SinkOptions) (*Sink, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	if opts.Out == nil {
		return nil, fmt.Errorf("join %s: no sink for the joined records (sink: %s)", cfg.Name, cfg.Sink)
	}
	if cfg.Late != LateDrop && opts.DeadLetter == nil {
		return nil, fmt.Errorf("join %s: late: %s names a dead-letter sink, but none was given", cfg.Name, cfg.Late)
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Tick == 0 {
		opts.Tick = time.Second
	}
	s := &Sink{cfg: cfg, opts: opts, name: "join:" + cfg.Name, nameJSON: codec.AppendString(nil, cfg.Name)}
	s.log = opts.Logger.With("join", cfg.Name)
	s.outlets[outJoined] = opts.Out
	if cfg.Late != LateDrop {
		s.outlets[outDeadLetter] = opts.DeadLetter
	}
	for i, sc := range []SideConfig{cfg.Left, cfg.Right} {
		f, err := binlog.ParseFilter(sc.Table)
		if err != nil {
			return nil, err
		}
		s.sides[i] = sideSpec{filter: f, key: sc.Key, timeCol: sc.timeColumn()}
	}
	s.mu.tables = map[tableSide]*tableInfo{}
	s.mu.sidesOf = map[*binlog.Table]uint8{}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	return s, nil
}

// Name is "join:" and the join's name.
func (s *Sink) Name() string { return s.name }

// Recover opens the state (or, after a failed Write, drops what that Write
// left uncommitted), recovers the downstream sinks under epoch and
// delivers what they lack, and reports the input the join has consumed so
// that the pipeline sends only what follows. offset is what Write last
// returned ("state-id:consumed"); it detects a state directory that was
// replaced or restored from an older copy.
func (s *Sink) Recover(ctx context.Context, epoch uint64, offset string) (sink.Recovery, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.closed {
		return sink.Recovery{}, fmt.Errorf("join %s: Recover after Close", s.cfg.Name)
	}
	s.mu.recovered = false
	if s.mu.op == nil {
		op, err := OpenOperator(s.cfg.StateDir, OperatorConfig{
			Type: s.cfg.Type, Before: s.cfg.Before, After: s.cfg.After, Lateness: s.cfg.Lateness,
			Fingerprint: s.cfg.fingerprint(), OnLate: s.onLate, CacheBytes: s.opts.CacheBytes, Logger: s.log,
		})
		if err != nil {
			return sink.Recovery{}, fmt.Errorf("join %s: %w", s.cfg.Name, err)
		}
		s.mu.op = op
		m, ok, err := s.loadMeta()
		if err != nil {
			op.Close()
			s.mu.op = nil
			return sink.Recovery{}, err
		}
		s.op.Store(op)
		if !ok {
			s.mu.fresh = true
			m = sinkMeta{Version: sinkMetaVersion, StateID: newStateID(), Next: [2]uint64{1, 1}}
		}
		s.mu.meta, s.mu.committed = m, m.clone()
		for i := range 2 {
			s.mu.deliv[i] = delivery{seq: m.Delivered[i], offset: m.Offset[i]}
			s.mu.deleted[i] = m.Delivered[i] + 1 // earlier commits deleted the rest
		}
	} else {
		s.mu.op.Discard()
		s.mu.meta = s.mu.committed.clone()
	}
	s.mu.produced, s.mu.untimed = 0, 0
	m := &s.mu.meta
	if offset != "" {
		id, seqText, _ := strings.Cut(offset, ":")
		seq, err := strconv.ParseUint(seqText, 10, 64)
		switch {
		case err != nil:
			return sink.Recovery{}, fmt.Errorf("join %s: the checkpoint's offset %q is not STATE-ID:SEQ: was it saved by another kind of sink named %s?", s.cfg.Name, offset, s.name)
		case s.mu.fresh:
			return sink.Recovery{}, fmt.Errorf("join %s: the state directory %s is empty, but the checkpoint says the join had consumed up to seq %d: restore the directory, or remove the entry %q from the checkpoint's sinks to start the join with empty state", s.cfg.Name, s.cfg.StateDir, seq, s.name)
		case id != m.StateID:
			return sink.Recovery{}, fmt.Errorf("join %s: the state in %s (id %s) is not the one the checkpoint was saved with (id %s): restore the directory, or remove the entry %q from the checkpoint's sinks to continue with this state", s.cfg.Name, s.cfg.StateDir, m.StateID, id, s.name)
		case seq > m.Consumed:
			return sink.Recovery{}, fmt.Errorf("join %s: the state in %s has consumed up to seq %d, behind the checkpoint's %d (restored from an older copy?): restore the newer state, or remove the entry %q from the checkpoint's sinks to continue from this one", s.cfg.Name, s.cfg.StateDir, m.Consumed, seq, s.name)
		}
	}
	s.mu.epoch = epoch
	for i, out := range s.outlets {
		if out == nil {
			continue
		}
		if err := s.recoverOutlet(ctx, i); err != nil {
			return sink.Recovery{}, err
		}
	}
	if err := s.deliverAll(ctx); err != nil {
		return sink.Recovery{}, err
	}
	if err := s.commit(false); err != nil {
		return sink.Recovery{}, err
	}
	s.mu.recovered = true
	if !s.started && s.opts.Tick > 0 {
		s.started = true
		s.tickWG.Add(1)
		go s.tickLoop()
	}
	rec := sink.Recovery{MaxSeq: m.Consumed, Offset: s.offset(), Uncounted: m.Consumed > 0 && !m.Counted}
	for src, n := range m.Opens {
		if n > 0 {
			if rec.Partial == nil {
				rec.Partial = map[string]int{}
			}
			rec.Partial[src] = n
		}
	}
	if len(m.Ends) > 0 {
		rec.Ends = make(map[string]sink.End, len(m.Ends))
		for k, v := range m.Ends {
			rec.Ends[k] = sink.End{Pos: v.Pos, Seq: v.Seq}
		}
	}
	s.log.Info("join recovered", "consumed", m.Consumed, "outputs", m.Next[outJoined]-1, "delivered", s.mu.deliv[outJoined].seq,
		"rows_left", s.mu.op.cur.Rows[Left], "rows_right", s.mu.op.cur.Rows[Right])
	return rec, nil
}

func newStateID() string {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err) // crypto/rand does not fail on supported systems
	}
	return hex.EncodeToString(b[:])
}

func (m sinkMeta) clone() sinkMeta {
	if m.Ends != nil {
		ends := make(map[string]endMeta, len(m.Ends))
		for k, v := range m.Ends {
			ends[k] = v
		}
		m.Ends = ends
	}
	m.Opens = maps.Clone(m.Opens)
	return m
}

func (s *Sink) offset() string {
	return s.mu.meta.StateID + ":" + strconv.FormatUint(s.mu.meta.Consumed, 10)
}

func (s *Sink) loadMeta() (sinkMeta, bool, error) {
	v, closer, err := s.mu.op.db.Get(keySinkMeta)
	if errors.Is(err, pebble.ErrNotFound) {
		return sinkMeta{}, false, nil
	}
	if err != nil {
		return sinkMeta{}, false, fmt.Errorf("join %s: reading the state: %w", s.cfg.Name, err)
	}
	defer closer.Close()
	m, err := decodeSinkMeta(v)
	if err != nil {
		return m, false, fmt.Errorf("join %s: state in %s: %w", s.cfg.Name, s.cfg.StateDir, err)
	}
	return m, true, nil
}

func decodeSinkMeta(b []byte) (sinkMeta, error) {
	var m sinkMeta
	if err := json.Unmarshal(b, &m); err != nil {
		return m, corrupt("sink meta: %v", err)
	}
	if m.Version != sinkMetaVersion {
		return m, corrupt("sink meta has version %d; this sluice reads version %d", m.Version, sinkMetaVersion)
	}
	if m.StateID == "" {
		return m, corrupt("sink meta has no state id")
	}
	for i := range 2 {
		if m.Next[i] == 0 || m.Delivered[i] >= m.Next[i] {
			return m, corrupt("sink meta: outlet %d delivered %d of %d records", i, m.Delivered[i], m.Next[i]-1)
		}
	}
	return m, nil
}

// recoverOutlet asks outlet i's sink what it holds.
func (s *Sink) recoverOutlet(ctx context.Context, i int) error {
	out := s.outlets[i]
	d := &s.mu.deliv[i]
	rec, err := out.Recover(ctx, s.mu.epoch, d.offset)
	if err != nil {
		return fmt.Errorf("join %s: recovering sink %s: %w", s.cfg.Name, out.Name(), err)
	}
	held := max(d.seq, rec.MaxSeq)
	if produced := s.mu.meta.Next[i] - 1; held > produced {
		return fmt.Errorf("join %s: sink %s holds records up to seq %d, but this join's state (%s) has produced only %d: the state was replaced or restored from an older copy, or another join writes to the sink; give each join its own sink, or empty the sink and the state to start over",
			s.cfg.Name, out.Name(), held, s.cfg.StateDir, produced)
	}
	d.seq = held
	if rec.Offset != "" {
		d.offset = rec.Offset
	}
	s.mu.broken[i] = false
	return nil
}

// Write applies the messages of b the join has not consumed, advances the
// watermark, commits, and delivers the records produced. It returns the
// join's offset ("state-id:consumed").
func (s *Sink) Write(ctx context.Context, b *sink.Batch) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.mu.fatal != nil:
		return "", s.mu.fatal
	case !s.mu.recovered:
		return "", fmt.Errorf("join %s: Write without a successful Recover since the last failure; call Recover first", s.cfg.Name)
	case b.Epoch < s.mu.epoch:
		return "", fmt.Errorf("join %s: batch of epoch %d, below the epoch %d the join recovered under: %w", s.cfg.Name, b.Epoch, s.mu.epoch, sink.ErrFenced)
	}
	s.mu.epoch = b.Epoch
	applied := false
	for i := range b.Messages {
		m := &b.Messages[i]
		if m.Seq <= s.mu.meta.Consumed {
			continue
		}
		if err := s.consume(m); err != nil {
			s.rollback()
			return "", fmt.Errorf("join %s: message seq %d (%s.%s): %w", s.cfg.Name, m.Seq, m.DB, m.Table, err)
		}
		applied = true
	}
	if err := s.advance(); err != nil {
		s.rollback()
		return "", err
	}
	if applied || s.mu.produced > 0 {
		if err := s.hook("before-commit"); err != nil {
			return "", err
		}
		if err := s.commit(true); err != nil {
			s.rollback()
			return "", err
		}
		if err := s.hook("after-commit"); err != nil {
			return "", err
		}
	}
	if err := s.deliverAll(ctx); err != nil {
		return "", err
	}
	return s.offset(), nil
}

func (s *Sink) hook(point string) error {
	if s.crash == nil {
		return nil
	}
	if err := s.crash(point); err != nil {
		s.mu.recovered = false
		return err
	}
	return nil
}

// rollback drops what an unfinished Write or tick did.
func (s *Sink) rollback() {
	s.mu.op.Discard()
	s.mu.meta = s.mu.committed.clone()
	s.mu.produced, s.mu.untimed = 0, 0
	s.mu.recovered = false // the pipeline recovers before it retries
}

// commit writes the sink's meta into the pending batch, with the removal
// of the records delivered since the last commit, and commits it.
func (s *Sink) commit(sync bool) error {
	m := &s.mu.meta
	for i := range 2 {
		d := s.mu.deliv[i]
		m.Delivered[i], m.Offset[i] = d.seq, d.offset
		// Delivered records leave the outbox (point deletes: range
		// deletions, one per commit, would pile up in the memtable and
		// make every new iterator slower).
		for seq := s.mu.deleted[i]; seq <= d.seq; seq++ {
			s.mu.kbuf = outboxKey(s.mu.kbuf[:0], byte(i), seq)
			if err := s.mu.op.out.Delete(s.mu.kbuf, nil); err != nil {
				return err
			}
		}
	}
	raw, err := json.Marshal(m)
	if err != nil {
		return err
	}
	if err := s.mu.op.out.Set(keySinkMeta, raw, nil); err != nil {
		return err
	}
	if err := s.mu.op.Commit(sync); err != nil {
		return fmt.Errorf("join %s: %w", s.cfg.Name, err)
	}
	s.mu.committed = m.clone()
	s.mu.produced, s.mu.fresh = 0, false
	for i := range 2 {
		s.mu.deleted[i] = max(s.mu.deleted[i], s.mu.deliv[i].seq+1)
	}
	s.counters.consumed.Store(m.Consumed)
	s.counters.untimed.Add(s.mu.untimed)
	s.mu.untimed = 0
	return nil
}

// watermark returns the watermark to advance to (µs; MinInt64: none).
func (s *Sink) watermark() int64 {
	if s.opts.Watermark == nil {
		if s.mu.meta.LastEventTime == 0 {
			return math.MinInt64
		}
		return s.mu.meta.LastEventTime
	}
	w := s.opts.Watermark()
	if w.IsZero() {
		return math.MinInt64
	}
	return w.UnixMicro()
}

func (s *Sink) advance() error {
	w := s.watermark()
	if w == math.MinInt64 {
		return nil
	}
	if _, err := s.mu.op.Advance(w, s.emit); err != nil {
		return fmt.Errorf("join %s: advancing the watermark: %w", s.cfg.Name, err)
	}
	return nil
}

// consume applies one input message.
func (s *Sink) consume(m *sink.Message) error {
	meta := &s.mu.meta
	if ch := m.Change; ch != nil && ch.Table != nil && ch.Op != binlog.OpDDL {
		sides := s.sidesOf(ch.Table)
		for side := range s.sides {
			if sides&(1<<side) != 0 {
				if err := s.apply(Side(side), m, ch); err != nil {
					return err
				}
			}
		}
	}
	if m.End != nil {
		if meta.Ends == nil {
			meta.Ends = map[string]endMeta{}
		}
		meta.Ends[m.Source] = endMeta{Pos: *m.End, Seq: m.Seq}
		delete(meta.Opens, m.Source)
	} else if !m.Snapshot {
		if meta.Opens == nil {
			meta.Opens = map[string]int{}
		}
		meta.Opens[m.Source]++
	}
	meta.Counted = true
	if !m.EventTime.IsZero() {
		meta.LastEventTime = max(meta.LastEventTime, m.EventTime.UnixMicro())
	}
	meta.Consumed = m.Seq
	return nil
}

// sidesOf returns which sides the rows of t go to (bit i: side i).
func (s *Sink) sidesOf(t *binlog.Table) uint8 {
	if m, ok := s.mu.sidesOf[t]; ok {
		return m
	}
	var m uint8
	for side := range s.sides {
		if s.sides[side].filter.Match(t.Schema, t.Name) {
			m |= 1 << side
		}
	}
	if len(s.mu.sidesOf) > 4096 {
		clear(s.mu.sidesOf) // table definitions replaced by DDL
	}
	s.mu.sidesOf[t] = m
	return m
}

func (s *Sink) tableInfo(side Side, t *binlog.Table) (*tableInfo, error) {
	k := tableSide{t, side}
	if ti, ok := s.mu.tables[k]; ok {
		return ti, nil
	}
	sp := &s.sides[side]
	ti := &tableInfo{timeCol: -1}
	for _, c := range sp.key {
		i := t.ColumnIndex(c)
		if i < 0 {
			return nil, fmt.Errorf("table %s has no column %q (%s.key of join %s); fix the join's key columns: %w", t.QualifiedName(), c, side, s.cfg.Name, sink.ErrPermanent)
		}
		ti.key = append(ti.key, i)
	}
	if sp.timeCol != "" {
		if ti.timeCol = t.ColumnIndex(sp.timeCol); ti.timeCol < 0 {
			return nil, fmt.Errorf("table %s has no column %q (%s.time of join %s); name a time column of the table, or use time: commit: %w", t.QualifiedName(), sp.timeCol, side, s.cfg.Name, sink.ErrPermanent)
		}
	}
	if len(s.mu.tables) > 4096 {
		clear(s.mu.tables) // table definitions replaced by DDL
	}
	s.mu.tables[k] = ti
	return ti, nil
}

// eventAction is what the join does with one change event of a side's
// table.
type eventAction uint8

const (
	eventSkip    eventAction = iota // the event changes nothing
	eventAdd                        // its row (the after image) joins: Operator.Add
	eventRetract                    // its row leaves the state: Operator.Retract
)

// action says what change events of kind op do under the events options
// (defaults filled in): inserts join; snapshot reads join with snapshot:
// join; updates join (the after image, as a new row) with updates: join;
// deletes retract with deletes: retract; everything else is skipped.
func (ev Events) action(op binlog.Op) eventAction {
	switch op {
	case binlog.OpInsert:
		return eventAdd
	case binlog.OpRead:
		if ev.Snapshot == SnapshotJoin {
			return eventAdd
		}
	case binlog.OpUpdate:
		if ev.Updates == UpdatesJoin {
			return eventAdd
		}
	case binlog.OpDelete:
		if ev.Deletes == DeletesRetract {
			return eventRetract
		}
	}
	return eventSkip
}

// apply joins one change on one side.
func (s *Sink) apply(side Side, m *sink.Message, ch *binlog.Change) error {
	var row, fallback binlog.Row
	switch s.cfg.Events.action(ch.Op) {
	case eventSkip:
		return nil
	case eventAdd:
		row = ch.After
		if ch.Op == binlog.OpUpdate {
			fallback = ch.Before
		}
	case eventRetract:
		ti, err := s.tableInfo(side, ch.Table)
		if err != nil {
			return err
		}
		key, _ := s.key(ti, ch.Table, ch.Before, nil)
		s.mu.kbuf = codec.AppendChangeKey(s.mu.kbuf[:0], ch)
		_, err = s.mu.op.Retract(side, key, s.mu.kbuf)
		return err
	}
	ti, err := s.tableInfo(side, ch.Table)
	if err != nil {
		return err
	}
	var t int64
	ok := false
	if ti.timeCol < 0 {
		if m.EventTime.IsZero() {
			if ch.Op == binlog.OpRead {
				s.mu.untimed++ // a snapshot row has no commit time: skipped
				return nil
			}
		} else {
			t, ok = m.EventTime.UnixMicro(), true
		}
	} else {
		v := valueAt(row, ti.timeCol)
		if v.Kind() == binlog.KindAbsent {
			v = valueAt(fallback, ti.timeCol)
		}
		if t, ok, err = eventTimeOf(&ch.Table.Columns[ti.timeCol], v); err != nil {
			return fmt.Errorf("%s side of join %s: %w", side, s.cfg.Name, errors.Join(err, sink.ErrPermanent))
		}
	}
	key, keyJSON := s.key(ti, ch.Table, row, fallback)
	p := payload{KeyJSON: keyJSON, DB: []byte(ch.Table.Schema)}
	p.Side = appendSide(nil, m, ch, row, t)
	data := appendPayload(make([]byte, 0, len(p.KeyJSON)+len(p.DB)+len(p.Side)+8), &p)
	if !ok {
		s.mu.untimed++
		return s.deadLetter(reasonNoTime, side, data)
	}
	id := codec.AppendChangeKey(nil, ch)
	return s.mu.op.Add(side, &Row{Key: key, Time: t, ID: id, Data: data}, s.emit)
}

func valueAt(row binlog.Row, i int) binlog.Value {
	if i < len(row) {
		return row[i]
	}
	return binlog.Value{}
}

// key returns the encoded join key (nil if a key column is NULL) and its
// JSON array; a column absent from row is taken from fallback.
func (s *Sink) key(ti *tableInfo, t *binlog.Table, row, fallback binlog.Row) (key, keyJSON []byte) {
	keyJSON = append(keyJSON, '[')
	valid := true
	for n, i := range ti.key {
		v := valueAt(row, i)
		if v.Kind() == binlog.KindAbsent {
			v = valueAt(fallback, i)
		}
		if n > 0 {
			keyJSON = append(keyJSON, ',')
		}
		keyJSON = codec.AppendValue(keyJSON, &t.Columns[i], v)
		if valid {
			var ok bool
			if key, ok = AppendKeyValue(key, &t.Columns[i], v); !ok {
				valid = false
			}
		}
	}
	if !valid {
		key = nil
	}
	return key, append(keyJSON, ']')
}

// emit puts a joined record (or an unmatched row with nulls) in the outbox.
func (s *Sink) emit(o *Output) error {
	var lp, rp payload
	var err error
	var left, right, key, db []byte
	var t int64 = math.MinInt64
	if o.Left != nil {
		if lp, err = decodePayload(o.Left.Data); err != nil {
			return err
		}
		left, key, db, t = lp.Side, lp.KeyJSON, lp.DB, o.Left.Time
	}
	if o.Right != nil {
		if rp, err = decodePayload(o.Right.Data); err != nil {
			return err
		}
		right = rp.Side
		if key == nil {
			key, db = rp.KeyJSON, rp.DB
		}
		t = max(t, o.Right.Time)
	}
	body := appendJoinedBody(s.mu.buf[:0], s.nameJSON, key, left, right)
	s.mu.buf = body
	return s.put(outJoined, &outboxRecord{Key: key, DB: string(db), Table: s.cfg.Name, EventTime: t, Body: body})
}

// onLate is the operator's dead-letter hook.
func (s *Sink) onLate(side Side, r *Row) error {
	return s.deadLetter(reasonLate, side, r.Data)
}

func (s *Sink) deadLetter(reason string, side Side, data []byte) error {
	if s.outlets[outDeadLetter] == nil {
		return nil
	}
	p, err := decodePayload(data)
	if err != nil {
		return err
	}
	body := appendDeadLetterBody(s.mu.buf[:0], s.nameJSON, reason, side, s.mu.op.Watermark(), p.KeyJSON, p.Side)
	s.mu.buf = body
	var table string
	// The side JSON names the table; the record is filed under it.
	var st struct {
		Table string `json:"table"`
	}
	if err := json.Unmarshal(p.Side, &st); err == nil {
		table = st.Table
	}
	return s.put(outDeadLetter, &outboxRecord{Key: p.KeyJSON, DB: string(p.DB), Table: table, Body: body})
}

// put adds a record to outlet i's outbox under its next sequence number.
func (s *Sink) put(i int, r *outboxRecord) error {
	m := &s.mu.meta
	seq := m.Next[i]
	m.Next[i]++
	s.mu.kbuf = outboxKey(s.mu.kbuf[:0], byte(i), seq)
	s.mu.vbuf = appendOutboxRecord(s.mu.vbuf[:0], r)
	s.mu.produced++
	return s.mu.op.out.Set(s.mu.kbuf, s.mu.vbuf, nil)
}

// deliverAll delivers every outlet's committed outbox.
func (s *Sink) deliverAll(ctx context.Context) error {
	for i, out := range s.outlets {
		if out == nil {
			continue
		}
		if err := s.deliver(ctx, i); err != nil {
			return err
		}
	}
	return nil
}

// deliverChunk bounds the bytes of one downstream write.
const deliverChunk = 4 << 20

// deliver writes outlet i's committed records past what its sink holds,
// in chunks, and stages the removal of what was delivered.
func (s *Sink) deliver(ctx context.Context, i int) error {
	out := s.outlets[i]
	if s.mu.broken[i] {
		if err := s.recoverOutlet(ctx, i); err != nil {
			return err
		}
	}
	d := &s.mu.deliv[i]
	if d.seq+1 >= s.mu.committed.Next[i] {
		return nil
	}
	lower := outboxKey(nil, byte(i), d.seq+1)
	upper := outboxKey(nil, byte(i), s.mu.committed.Next[i])
	it, err := s.mu.op.db.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper})
	if err != nil {
		return err
	}
	defer it.Close()
	ok := it.First()
	source := s.nameJSON
	for ok {
		buf := s.mu.deliverIn[:0]
		type span struct{ k0, k1, v0, v1 int }
		var spans []span
		var msgs []sink.Message
		for ; ok && len(buf) < deliverChunk; ok = it.Next() {
			k := it.Key()
			seq := uint64(0)
			if len(k) == 10 {
				seq = binary.BigEndian.Uint64(k[2:])
			}
			want := d.seq + 1 + uint64(len(msgs))
			if seq != want {
				return corrupt("outbox of join %s: record seq %d where %d was expected (key %x)", s.cfg.Name, seq, want, k)
			}
			v, err := it.ValueAndErr()
			if err != nil {
				return err
			}
			r, err := decodeOutboxRecord(v)
			if err != nil {
				return fmt.Errorf("join %s: outbox record %d: %w", s.cfg.Name, seq, err)
			}
			sp := span{k0: len(buf)}
			buf = append(buf, r.Key...)
			sp.k1, sp.v0 = len(buf), len(buf)
			buf = appendSluiceBlock(append(buf, r.Body...), seq, s.mu.epoch, source)
			sp.v1 = len(buf)
			spans = append(spans, sp)
			m := sink.Message{Seq: seq, Source: s.cfg.Name, DB: r.DB, Table: r.Table, Op: binlog.OpInsert}
			if r.EventTime != 0 && r.EventTime != math.MinInt64 {
				m.EventTime = time.UnixMicro(r.EventTime).UTC()
			}
			msgs = append(msgs, m)
		}
		if err := it.Error(); err != nil {
			return err
		}
		s.mu.deliverIn = buf
		for j := range msgs {
			sp := spans[j]
			msgs[j].Key = buf[sp.k0:sp.k1:sp.k1]
			msgs[j].Value = buf[sp.v0:sp.v1:sp.v1]
		}
		batch := &sink.Batch{Epoch: s.mu.epoch, Messages: msgs}
		off, err := out.Write(ctx, batch)
		if err != nil {
			s.mu.broken[i] = true
			if errors.Is(err, sink.ErrFenced) {
				return fmt.Errorf("join %s: sink %s: %w", s.cfg.Name, out.Name(), err)
			}
			return fmt.Errorf("join %s: delivering to sink %s: %w", s.cfg.Name, out.Name(), err)
		}
		d.seq, d.offset = batch.LastSeq(), off
		if i == outJoined {
			s.counters.outputs.Add(uint64(len(msgs)))
		} else {
			s.counters.deadLetters.Add(uint64(len(msgs)))
		}
		// Delivered records leave the outbox with the next commit.
		if err := s.hook("mid-delivery"); err != nil {
			return err
		}
	}
	return nil
}

// tickLoop advances the watermark when no Write does.
func (s *Sink) tickLoop() {
	defer s.tickWG.Done()
	t := time.NewTicker(s.opts.Tick)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			s.tick(s.ctx)
		case <-s.ctx.Done():
			return
		}
	}
}

// tick advances the watermark, commits what that produced (synced when it
// produced records) and delivers it. Failures are logged and left to the
// next Write or tick.
func (s *Sink) tick(ctx context.Context) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.mu.recovered || s.mu.closed || s.mu.fatal != nil {
		return
	}
	w := s.watermark()
	if w <= s.mu.op.Watermark() {
		return
	}
	if err := s.advance(); err != nil {
		s.rollback()
		s.log.Error("join: advancing the watermark failed; the pipeline recovers the join at its next write", "err", err)
		return
	}
	if err := s.commit(s.mu.produced > 0); err != nil {
		s.rollback()
		s.log.Error("join: committing the state failed", "err", err)
		return
	}
	if err := s.deliverAll(ctx); err != nil {
		if errors.Is(err, sink.ErrFenced) {
			s.mu.fatal = err
		}
		s.log.Warn("join: delivering records failed; retried at the next write or tick", "err", err)
	}
}

// Close stops the ticker, commits what delivery left pending, and closes
// the state and the downstream sinks.
func (s *Sink) Close() error {
	s.cancel()
	s.tickWG.Wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.closed {
		return nil
	}
	s.mu.closed = true
	var errs []error
	if s.mu.op != nil {
		if s.mu.recovered {
			errs = append(errs, s.commit(true))
		}
		errs = append(errs, s.mu.op.Close())
	}
	for _, out := range s.outlets {
		if out != nil {
			errs = append(errs, out.Close())
		}
	}
	return errors.Join(errs...)
}

// Stats returns the join's figures; safe to call at any time, it does
// not wait for a Write.
func (s *Sink) Stats() Stats {
	var st Stats
	if op := s.op.Load(); op != nil {
		st = op.Stats()
	}
	st.UntimedRows = s.counters.untimed.Load()
	st.Outputs = s.counters.outputs.Load()
	st.DeadLetters = s.counters.deadLetters.Load()
	st.Consumed = s.counters.consumed.Load()
	return st
}
