package binlog

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/go-mysql-org/go-mysql/client"
	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/go-mysql-org/go-mysql/replication"
	"github.com/google/uuid"

	"github.com/sluice-cdc/sluice/internal/backoff"
	"github.com/sluice-cdc/sluice/internal/bytebudget"
	"github.com/sluice-cdc/sluice/internal/rawconn"
	"github.com/sluice-cdc/sluice/internal/sqlstmt"
	"github.com/sluice-cdc/sluice/mysqlconn"
	"github.com/sluice-cdc/sluice/position"
)

// Errors a caller may want to tell apart with errors.Is.
var (
	// ErrPurged means the requested position is no longer on the server.
	ErrPurged = errors.New("binlog: position purged from server")
	// ErrCorrupt means an event failed its checksum or could not be decoded.
	ErrCorrupt = errors.New("binlog: corrupt or truncated event")
	// ErrServerConfig means the server is not set up for row-based CDC.
	ErrServerConfig = errors.New("binlog: server not configured for row-based replication")
	// ErrPrivilege means the user lacks a privilege sluice needs.
	ErrPrivilege = errors.New("binlog: missing privilege")
	// ErrClosed is returned by Next after Close.
	ErrClosed = errors.New("binlog: reader closed")
	// ErrReplaced means the server dropped this replica's binlog dump
	// because another replica connected with the same server_id (MariaDB
	// error 4052, MySQL 1236 "... same server_uuid/server_id"), or, on
	// MySQL, a newer reader with the same ReplicaHost and ServerID ended
	// this one's dump: another process of the same pipeline has taken over.
	ErrReplaced = errors.New("binlog: another replica with the same server_id took over the binlog dump")
	// ErrPositionUnknown means the server never had the position asked
	// for: a GTID state with transactions it never executed (ahead of it,
	// or from another server), a binlog file it never wrote, an offset
	// past a file's end, or one inside an event or a transaction. Unlike
	// ErrPurged, a new snapshot does not cure it: the position belongs to
	// another server or history.
	ErrPositionUnknown = errors.New("binlog: position not known to the server")
	// ErrDiverged means the source failed over to a server that lacks
	// transactions already delivered from the saved position's server, and
	// did not receive them within Config.CatchUpWait: they were lost in
	// the failover (never replicated to this server), or the server has
	// another history. The error names the missing GTIDs.
	ErrDiverged = errors.New("binlog: the server lacks transactions already delivered")
	// ErrNoFailover means the saved position is of another server and
	// there are no GTIDs to find it on this one (gtid_mode is not ON):
	// file names and offsets mean nothing on another server.
	ErrNoFailover = errors.New("binlog: the saved position is of another server, and without GTIDs it cannot be found on this one")
	// ErrStatementChange means a change to a selected table was logged as
	// an SQL statement (a session with binlog_format=STATEMENT or MIXED),
	// not as row events: its rows are not in the binlog. The error names
	// the table, the position, the statement's first words and the fix.
	// Config.OnStatementChange "skip" turns it into a warning.
	ErrStatementChange = errors.New("binlog: a change to a selected table was logged as a statement, not as rows")
)

// Config.OnStatementChange values.
const (
	StatementStop = "stop" // stop with ErrStatementChange (the default)
	StatementSkip = "skip" // warn, count (Stats.StatementChanges) and go on
)

// Start modes for Config.StartAt.
const (
	StartCurrent  = "current"  // the server's current end of binlog
	StartEarliest = "earliest" // the oldest binlog the server still has
)

// Config says where to read from and how.
type Config struct {
	// Addr is host:port of the server.
	Addr string
	// Addrs, when set, lists every address of the source, Addr first:
	// servers of one replication topology (a primary and its replicas).
	// When the server in use cannot be reached the reader tries the
	// others in turn, and resumes on the one it reaches by GTID.
	Addrs    []string
	addrTLS  map[string]*tls.Config // TLS per address of Addrs (ParseSourceURL)
	User     string
	Password string
	// TLS, when set, encrypts the connection (set RootCAs to verify the
	// server). ParseSourceURL builds it from tls= and ca=.
	TLS *tls.Config
	// TLSMode TLSPreferred makes TLS optional: a server that does not
	// offer it is connected to unencrypted. Otherwise a set TLS is
	// required. (The other modes are expressed by TLS itself; TLSMode
	// records them for messages.)
	TLSMode TLSMode
	// ServerID is the replica id sluice registers with; it must differ from
	// the server's and from other replicas'. 0 picks a random one.
	ServerID uint32
	// Start is the position to resume from (after a whole transaction).
	// When it is zero, StartAt says where to begin.
	Start   position.Position
	StartAt string
	// CatchUpWait bounds how long the reader waits, after the source
	// failed over to another server, for that server to receive the
	// transactions already delivered that it lacks (a replica that lags).
	// Default 30s; negative: do not wait. Then ErrDiverged.
	CatchUpWait time.Duration
	// Stop, when set, ends the stream (Next returns io.EOF) after the
	// transaction that reaches this file:offset.
	Stop position.Position
	// Tables selects tables; nil selects all user tables.
	Tables *Filter
	// ChunkBytes bounds the memory of one Txn chunk: decoded values and
	// the bytes they hold (default 1 MiB). A larger transaction arrives as
	// several chunks. At most three chunks are held at once (one being
	// decoded, two waiting for the consumer), plus the one the consumer has.
	ChunkBytes int
	// Heartbeat asks the server for a heartbeat when idle (default 1s).
	Heartbeat time.Duration
	// DeliverHeartbeats hands each heartbeat received between transactions
	// to Next as an empty Txn with Heartbeat set: the server had sent
	// everything up to its End.
	DeliverHeartbeats bool
	// MaxBackoff bounds the wait between reconnection attempts (default 10s).
	MaxBackoff time.Duration
	// Logger receives operational messages (default slog.Default()).
	Logger *slog.Logger
	// Schema provides table definitions when the binlog lacks column
	// metadata. Nil uses information_schema on the same server.
	Schema SchemaSource
	// History, when set, keeps the captured tables' definitions as of the
	// reader's position (see History): it is told every DDL statement
	// before the statement's change is delivered, describes tables when
	// the binlog has no column metadata (Schema, or information_schema,
	// only for tables it does not know), and is checked against the
	// binlog's own metadata when there is some. An empty history captures
	// the definitions at the start position when the reader first connects.
	History *History
	// TakeOverServerID skips the check that no other replica is connected
	// with ServerID. The server drops the older of two connections with one
	// server_id, which is what a failover wants and a mistake otherwise.
	TakeOverServerID bool
	// ReplicaHost is the host name the replica registers with (shown by
	// SHOW SLAVE HOSTS). A replica already connected with ServerID and the
	// same ReplicaHost is taken to be an earlier process of the same
	// consumer (killed before the server noticed) and is taken over; the
	// pipeline sets it to "sluice-<pipeline>".
	ReplicaHost string
	// OnStatementChange says what happens to INSERT, UPDATE, DELETE,
	// REPLACE or LOAD DATA on a selected table that the server logged as a
	// statement instead of rows (a session or server with binlog_format
	// STATEMENT or MIXED): StatementStop ("stop", the default when empty)
	// ends the stream with ErrStatementChange; StatementSkip ("skip") logs
	// a warning per statement, counts it in Stats.StatementChanges and
	// goes on without its changes.
	OnStatementChange string
	// FullRowImages refuses row images that lack columns: at start a
	// server whose binlog_row_image is not FULL, and in the stream a rows
	// event of a selected table without every column (a session that set
	// binlog_row_image MINIMAL or NOBLOB), each with ErrServerConfig
	// naming the setting and the fix. A consumer that writes every column
	// (format debezium, as Debezium itself refuses) would otherwise write
	// NULL for a value the binlog did not carry.
	FullRowImages bool
}

// ErrPartialRowImage is the ErrServerConfig of a rows event without every
// column when Config.FullRowImages is set.
var ErrPartialRowImage = fmt.Errorf("%w: a row image lacks columns (binlog_row_image MINIMAL or NOBLOB)", ErrServerConfig)

// ParseSourceURL parses a source address into a Config:
//
//	mysql://USER:PASSWORD@HOST:PORT[,HOST:PORT...][?tls=MODE][&ca=/path/ca.pem][&server_id=N]
//
// Several addresses are servers of one replication topology (a primary and
// its replicas, with GTIDs): the reader uses the first it reaches and
// moves to the next when the one in use cannot be reached (Config.Addrs).
//
// tls= takes the modes MySQL's clients know (see TLSMode): disabled (the
// default), preferred, required, verify-ca, verify-identity; tls=true and
// tls=skip-verify are older names of verify-identity and required. ca=
// names the PEM file of the CA to verify against (with verify-ca or
// verify-identity; without it, the system's CAs).
func ParseSourceURL(s string) (Config, error) {
	u, err := url.Parse(s)
	if err != nil || u.Scheme != "mysql" || u.Host == "" {
		return Config{}, fmt.Errorf("binlog: source %q must look like mysql://USER:PASSWORD@HOST:PORT", redact(s))
	}
	cfg := Config{User: u.User.Username()}
	cfg.Password, _ = u.User.Password()
	for h := range strings.SplitSeq(u.Host, ",") {
		if h == "" {
			return Config{}, fmt.Errorf("binlog: source %q has an empty address in its host list (want HOST:PORT,HOST:PORT)", redact(s))
		}
		if _, _, err := net.SplitHostPort(h); err != nil {
			h = net.JoinHostPort(h, "3306")
		}
		cfg.Addrs = append(cfg.Addrs, h)
	}
	cfg.Addr = cfg.Addrs[0]
	if len(cfg.Addrs) == 1 {
		cfg.Addrs = nil
	}
	q := u.Query()
	for k := range q {
		if k != "tls" && k != "ca" && k != "server_id" {
			return Config{}, fmt.Errorf("binlog: unknown source option %q (known: tls, ca, server_id)", k)
		}
	}
	mode, err := parseTLSMode(q.Get("tls"))
	if err != nil {
		return Config{}, err
	}
	for i, a := range append([]string{cfg.Addr}, cfg.Addrs...) {
		host, _, _ := net.SplitHostPort(a)
		t, err := tlsConfig(mode, host, q.Get("ca"))
		if err != nil {
			return Config{}, err
		}
		if i == 0 {
			cfg.TLS = t
		} else if t != nil {
			if cfg.addrTLS == nil {
				cfg.addrTLS = map[string]*tls.Config{}
			}
			cfg.addrTLS[a] = t // verify-identity checks each server's own name
		}
	}
	if mode != TLSDisabled {
		cfg.TLSMode = mode
	}
	if id := q.Get("server_id"); id != "" {
		n, err := strconv.ParseUint(id, 10, 32)
		if err != nil || n == 0 {
			return Config{}, fmt.Errorf("binlog: source option server_id=%q: want a number from 1 to 4294967295", id)
		}
		cfg.ServerID = uint32(n)
	}
	return cfg, nil
}

func redact(s string) string {
	if u, err := url.Parse(s); err == nil && u.User != nil {
		if _, ok := u.User.Password(); ok {
			u.User = url.UserPassword(u.User.Username(), "xxxxx")
			return u.String()
		}
	}
	return s
}

func (c *Config) setDefaults() {
	if c.ChunkBytes <= 0 {
		c.ChunkBytes = 1 << 20
	}
	if c.Heartbeat <= 0 {
		c.Heartbeat = time.Second
	}
	if c.MaxBackoff <= 0 {
		c.MaxBackoff = 10 * time.Second
	}
	if c.CatchUpWait == 0 {
		c.CatchUpWait = 30 * time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.ServerID == 0 {
		c.ServerID = 1_000_000 + rand.Uint32N(1<<30)
	}
	if c.StartAt == "" {
		c.StartAt = StartCurrent
	}
}

// Validate reports what is wrong with the configuration.
func (c *Config) Validate() error {
	if c.Addr == "" {
		return errors.New("binlog: no server address (Addr, e.g. 127.0.0.1:3306)")
	}
	if c.User == "" {
		return errors.New("binlog: no user: give one with replication privileges")
	}
	if err := CheckOnStatementChange(c.OnStatementChange); err != nil {
		return err
	}
	if c.Start.IsZero() && c.StartAt != StartCurrent && c.StartAt != StartEarliest {
		return fmt.Errorf("binlog: StartAt %q: want %q or %q", c.StartAt, StartCurrent, StartEarliest)
	}
	return nil
}

// Reader streams committed transactions from one server.
//
// Use Next to pull transactions one at a time, or register handlers with
// OnRow and OnTxn and call Run. A Reader is not safe for concurrent Next calls.
type Reader struct {
	// prevChanges is the number of changes of the last chunk delivered.
	prevChanges int
	cfg         Config
	out         chan *Txn
	ctx         context.Context
	cancel      context.CancelFunc
	wg          sync.WaitGroup
	err         error // set before out is closed
	once        sync.Once
	ready       chan struct{} // closed once the start position is known
	done        chan struct{} // closed when the stream has ended (err is set)

	// owned by the streaming goroutine
	flavor position.Flavor
	// byGTID: resume by GTID (MariaDB, or MySQL with gtid_mode=ON);
	// otherwise by file and offset.
	byGTID bool
	tls    *tls.Config // as the preflight connection used it (nil: unencrypted)
	fence  *fence      // MySQL: ends older dumps of the same consumer
	// ownSchema is the information_schema source the reader made (closed
	// when it stops); nil when Config.Schema was given.
	ownSchema *selectChecked
	server    ServerInfo
	schemas   *schemaCache
	decoder   rowDecoder
	resume    position.Position // after the last whole transaction
	gset      position.GTIDSet  // GTID state after the last whole transaction
	file      string
	asm       assembly
	skip      skipState
	lastIdle  time.Time

	emit        func(*Txn) error // file mode: deliver directly
	rowHandlers []rowHandler
	txnHandlers []func(*Txn) error

	// prepared are the XA transactions seen prepared and not yet
	// resolved, by XID; fetch is set while a prepared part is re-read.
	prepared   map[string]xaPrepared
	fetch      *xaFetch
	crc        bool   // the events end in a CRC32 checksum (from the format description)
	payloadPos uint32 // start of the transaction payload event being handled
	// nextPos is where the next event of the stream must start (0: not
	// known yet): a stream that skips bytes is cut and resumed.
	nextPos uint32
	// atStmt is set between statements, where MariaDB leaves out the
	// Annotate_rows events (a replica gets them only on request).
	atStmt      bool
	startByFile bool             // connect by file position until a transaction has passed
	arenas      chan *chunkArena // chunks released by the consumer (Txn.Release)

	// inUse is the configuration for the address in use (Source).
	inUse atomic.Pointer[Config]

	deliveredMu  sync.Mutex
	deliveredPos position.Position

	reconnects  atomic.Int64
	replayed    atomic.Int64
	statements  atomic.Int64
	unparsedDDL atomic.Int64
	failovers   atomic.Int64
	rttNs       atomic.Int64 // a round trip to the server, measured when connecting (RoundTrip)
	catchUpNs   atomic.Int64
}

// Stats are counters of a Reader's life.
type Stats struct {
	// Reconnects counts replication connections re-established after a failure.
	Reconnects int64
	// Replayed counts changes received again after a reconnection and
	// dropped because they had been delivered before it.
	Replayed int64
	// StatementChanges counts DML statements on selected tables that were
	// logged as statements and skipped (OnStatementChange "skip").
	StatementChanges int64
	// UnparsedDDL counts DDL statements that could not be parsed (each
	// also a warning): they were delivered by their default database and
	// made the reader forget every cached table definition.
	UnparsedDDL int64
	// Failovers counts the times the source turned out to be another
	// server than the one the position was read from.
	Failovers int64
	// CatchUpWait is the time spent waiting for such a server to receive
	// transactions already delivered (Config.CatchUpWait).
	CatchUpWait time.Duration
	// History is what the schema history (Config.History) could not do:
	// statements it could not apply and rows events whose column metadata
	// differed from its definitions (each also a warning).
	History HistoryStats
}

// RoundTrip is the round trip of a query to the server, measured when the
// reader last connected (0 before).
func (r *Reader) RoundTrip() time.Duration { return time.Duration(r.rttNs.Load()) }

// Add returns the sums of s's and o's counters.
func (s Stats) Add(o Stats) Stats {
	return Stats{Reconnects: s.Reconnects + o.Reconnects, Replayed: s.Replayed + o.Replayed, StatementChanges: s.StatementChanges + o.StatementChanges,
		UnparsedDDL: s.UnparsedDDL + o.UnparsedDDL, Failovers: s.Failovers + o.Failovers, CatchUpWait: s.CatchUpWait + o.CatchUpWait,
		History: HistoryStats{Unknown: s.History.Unknown + o.History.Unknown, Mismatches: s.History.Mismatches + o.History.Mismatches}}
}

// Stats returns the reader's counters.
func (r *Reader) Stats() Stats {
	st := Stats{Reconnects: r.reconnects.Load(), Replayed: r.replayed.Load(), StatementChanges: r.statements.Load(), UnparsedDDL: r.unparsedDDL.Load(),
		Failovers: r.failovers.Load(), CatchUpWait: time.Duration(r.catchUpNs.Load())}
	if h := r.cfg.History; h != nil {
		st.History = h.Stats()
	}
	return st
}

// ServerInfo is what preflight learned about the server.
type ServerInfo struct {
	Version        ServerVersion
	Flavor         position.Flavor
	ServerID       uint32
	BinlogRowImage string
	RowMetadata    string
	// GTIDMode is MySQL's gtid_mode (ON, OFF, ON_PERMISSIVE, OFF_PERMISSIVE);
	// "ON" on MariaDB, which always has GTIDs. Only with ON does the reader
	// resume by GTID.
	GTIDMode string
	// Identity names the server in positions (position.Position.Server):
	// MySQL's server_uuid, MariaDB's server_id in decimal.
	Identity string
}

// here is the position at offset off of the binlog file being read.
func (r *Reader) here(off uint32) position.Position {
	return position.Position{File: r.file, Offset: off, Flavor: r.flavor, Server: r.server.Identity}
}

type rowHandler struct {
	db, table string
	fn        func(*Txn, *Change) error
}

// assembly is the transaction being put together.
type assembly struct {
	open     bool // inside a transaction
	hasBegin bool // a BEGIN query was seen (else a DDL ends the transaction)
	gtid     string
	serverID uint32
	thread   uint32 // the BEGIN query event's connection id (Txn.Thread)
	commit   time.Time
	begin    position.Position
	txn      *Txn // current chunk, nil until the first change
	chunk    int
	seen     int // changes of this transaction so far
	mem      int // estimated memory of the current chunk
	// full: the current chunk reached ChunkBytes. It is delivered when
	// the transaction's next row comes, not at once, so that the last
	// chunk of a transaction always holds its last row (a consumer then
	// knows a message is a transaction's last when it encodes it).
	full bool
	// delivered counts the changes (in transaction order) already handed
	// out in earlier chunks.
	delivered int
	// start is where the transaction's first event starts.
	start position.Position
	// xa: an XA transaction's part being passed over (its changes are
	// read again at its commit); xaTouched: it changes a selected table.
	xa, xaTouched bool
}

// skipState drops the changes of a transaction that were already delivered
// before a reconnection, and numbers the following chunks on from there.
type skipState struct {
	gtid    string
	begin   position.Position
	changes int
	chunk   int
}

func (s skipState) matches(a *assembly) bool {
	if s.changes == 0 {
		return false
	}
	if s.gtid != "" {
		return s.gtid == a.gtid
	}
	return s.begin == a.begin
}

// NewReader checks cfg and returns a Reader. It connects on the first
// Next or Run call.
func NewReader(cfg Config) (*Reader, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &Reader{cfg: cfg, out: make(chan *Txn, 2), ctx: ctx, cancel: cancel, ready: make(chan struct{}), done: make(chan struct{})}
	r.inUse.Store(&cfg)
	return r, nil
}

// Source returns the configuration of the server the reader uses: its
// address (the first of Config.Addrs that answered, or the one it moved
// to), with no other addresses, so that connections made with it (Dial)
// reach that server or fail. Other connections that must see what the
// stream sees (a snapshot read while streaming) use it. Safe to call at
// any time.
func (r *Reader) Source() Config { return r.inUse.Load().Only() }

// OnRow registers fn for every change to db.table ("*" matches any).
func (r *Reader) OnRow(db, table string, fn func(*Txn, *Change) error) {
	r.rowHandlers = append(r.rowHandlers, rowHandler{db, table, fn})
}

// OnTxn registers fn for every transaction chunk.
func (r *Reader) OnTxn(fn func(*Txn) error) { r.txnHandlers = append(r.txnHandlers, fn) }

// Run calls the handlers for every transaction until ctx ends (returning
// nil), the Stop position is reached (nil), or an error.
func (r *Reader) Run(ctx context.Context) error {
	defer r.Close()
	for {
		txn, err := r.Next(ctx)
		if err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, context.Canceled) {
				return nil
			}
			return err
		}
		for _, h := range r.txnHandlers {
			if err := h(txn); err != nil {
				return err
			}
		}
		for i := range txn.Changes {
			ch := &txn.Changes[i]
			if ch.Table == nil {
				continue
			}
			for _, h := range r.rowHandlers {
				if (h.db == "*" || h.db == ch.Table.Schema) && (h.table == "*" || h.table == ch.Table.Name) {
					if err := h.fn(txn, ch); err != nil {
						return err
					}
				}
			}
		}
	}
}

// Next returns the next transaction or chunk. It returns io.EOF after the
// Stop position, ctx.Err() when ctx ends, or the error that stopped the stream.
func (r *Reader) Next(ctx context.Context) (*Txn, error) {
	r.once.Do(r.start)
	select {
	case txn, ok := <-r.out:
		if !ok {
			return nil, r.err
		}
		return txn, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Ready connects if needed and waits until the reader has checked the
// server and fixed its start position (then Delivered returns it).
func (r *Reader) Ready(ctx context.Context) error {
	r.once.Do(r.start)
	select {
	case <-r.ready:
		return nil
	case <-r.done:
		return r.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Server returns what preflight learned about the server (after the first Next).
func (r *Reader) Server() ServerInfo { return r.server }

// Close stops the reader and waits for it.
func (r *Reader) Close() error {
	r.cancel()
	r.wg.Wait()
	return nil
}

func (r *Reader) start() {
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		err := r.loop()
		if r.ownSchema != nil {
			r.ownSchema.Close() // the information_schema connections the reader opened
		}
		if err == nil {
			err = ErrClosed
		}
		r.err = err
		close(r.done)
		close(r.out)
	}()
}

func (r *Reader) log() *slog.Logger { return r.cfg.Logger }

func (r *Reader) dial(ctx context.Context) (*client.Conn, error) { return dial(ctx, r.cfg) }

// Dial opens a plain SQL connection to cfg's server (address, user,
// password, TLS), for queries beside the replication stream: cfg.Addr or,
// when it cannot be reached, the first of cfg.Addrs that can.
func Dial(ctx context.Context, cfg Config) (*mysqlconn.Conn, error) {
	c, err := dial(ctx, cfg)
	return rawconn.Wrap(c), err
}

// dial is Dial for sluice's own queries, on the go-mysql connection.
func dial(ctx context.Context, cfg Config) (*client.Conn, error) {
	c, _, _, err := dialFirst(ctx, cfg)
	return c, err
}

// DialFirst is Dial, and returns the configuration of the server reached,
// with no other addresses (see Only): connections that must reach the same
// server (a snapshot's) dial with it.
func DialFirst(ctx context.Context, cfg Config) (*mysqlconn.Conn, Config, error) {
	c, _, reached, err := dialFirst(ctx, cfg)
	return rawconn.Wrap(c), reached.Only(), err
}

// Only is c for its address Addr alone: Addrs emptied, so that a
// connection made with it reaches that server or fails.
func (c Config) Only() Config {
	c.Addrs, c.addrTLS = nil, nil
	return c
}

// At is c with addr (one of c.Addrs) as the address tried first, with that
// address's TLS settings; the other addresses stay.
func (c Config) At(addr string) Config { return c.at(addr) }

// dialFirst connects to cfg.Addr or, when it cannot be reached, to the
// next of cfg.Addrs that can (in list order, starting after cfg.Addr). It
// returns cfg for the address reached; the error is cfg.Addr's.
func dialFirst(ctx context.Context, cfg Config) (*client.Conn, *tls.Config, Config, error) {
	c, t, err := dialTLS(ctx, cfg)
	if err == nil || len(cfg.Addrs) < 2 || ctx.Err() != nil {
		return c, t, cfg, err
	}
	i := slices.Index(cfg.Addrs, cfg.Addr)
	for k := 1; k < len(cfg.Addrs); k++ {
		next := cfg.at(cfg.Addrs[(i+k+len(cfg.Addrs))%len(cfg.Addrs)])
		if c, t, err2 := dialTLS(ctx, next); err2 == nil {
			return c, t, next, nil
		}
	}
	return nil, nil, cfg, err
}

// at is c for the address addr of c.Addrs.
func (c Config) at(addr string) Config {
	if addr == c.Addr {
		return c
	}
	if t, ok := c.addrTLS[addr]; ok {
		c.TLS = t
	} else if c.TLS != nil {
		host, _, _ := net.SplitHostPort(addr)
		c.TLS = c.TLS.Clone()
		c.TLS.ServerName = sniName(host)
	}
	c.Addr = addr
	return c
}

// dialAny connects to the server in use (r.cfg.Addr) or, when it cannot
// be reached, to the next address of r.cfg.Addrs that can, which becomes
// the one in use.
func (r *Reader) dialAny(ctx context.Context) (*client.Conn, *tls.Config, error) {
	c, t, cfg, err := dialFirst(ctx, r.cfg)
	if err == nil && cfg.Addr != r.cfg.Addr {
		r.log().Warn("the source's server cannot be reached: using another of its addresses", "unreachable", r.cfg.Addr, "server", cfg.Addr)
		r.cfg = cfg
		r.inUse.Store(&cfg)
	}
	return c, t, err
}

// dialTLS connects and returns the TLS configuration the connection uses
// (nil when unencrypted: no TLS asked for, or tls=preferred and the
// server offers none).
func dialTLS(ctx context.Context, cfg Config) (*client.Conn, *tls.Config, error) {
	c, err := connect(ctx, cfg, cfg.TLS)
	if err != nil && cfg.TLS != nil && cfg.TLSMode == TLSPreferred && strings.Contains(err.Error(), errNoTLS) {
		if c, err = connect(ctx, cfg, nil); err == nil {
			return c, nil, nil
		}
	}
	if err != nil {
		return nil, nil, connectError(ctx, cfg, err)
	}
	return c, cfg.TLS, nil
}

// ConnCollation is the character set and collation every connection sluice
// makes asks for in its handshake: utf8mb4, so that names and text reach
// sluice as UTF-8 and go back to the server as such. It is named
// explicitly because go-mysql's default (utf8mb4_0900_ai_ci, id 255) is
// unknown to MariaDB before 11.4, which then gives the connection the
// server's own default character set, latin1 where it is not configured:
// a name such as `Ünï` was read as Latin-1 bytes, sent back in a query
// and refused. utf8mb4_general_ci (id 45) is known to every supported
// server of both flavors. The replication connection, which go-mysql
// dials, sets it with SET NAMES (see dumpOption).
const ConnCollation = "utf8mb4_general_ci"

// setNames is the statement that gives a connection made without
// ConnCollation in its handshake the same character set.
const setNames = "SET NAMES utf8mb4 COLLATE " + ConnCollation

func connect(ctx context.Context, cfg Config, t *tls.Config) (*client.Conn, error) {
	opts := []client.Option{func(c *client.Conn) error { return c.SetCollation(ConnCollation) }}
	if t != nil {
		opts = append(opts, func(c *client.Conn) error { c.SetTLSConfig(t); return nil })
	}
	// go-mysql heeds ctx while dialing only; the handshake over a stalled
	// link is cut by closing the socket when ctx ends.
	var conns connSet
	defer context.AfterFunc(ctx, conns.closeAll)()
	return client.ConnectWithDialer(ctx, "", cfg.Addr, cfg.User, cfg.Password, "", conns.dial, opts...)
}

// connectError says why connecting failed, in words that name the fix
// where sluice knows it (TLS, MySQL's removed mysql_native_password).
func connectError(ctx context.Context, cfg Config, err error) error {
	mode := cfg.TLSMode
	if mode == "" && cfg.TLS != nil {
		mode = TLSRequired
	}
	var myErr *mysql.MyError
	if errors.As(err, &myErr) {
		// The server's own words, without go-mysql's call path
		// ("handleAuthResult: readAuthResult: ...").
		err = myErr
	}
	err = tlsAdvice(brief(err), mode)
	if errors.As(err, &myErr) && myErr.Code == mysql.ER_PLUGIN_IS_NOT_LOADED && strings.Contains(myErr.Message, "mysql_native_password") {
		if v, perr := probeServerVersion(ctx, cfg.Addr); perr == nil {
			if advice := v.nativePasswordAdvice(cfg.User); advice != "" {
				return fmt.Errorf("binlog: connecting to %s as %s: %w: %s", cfg.Addr, cfg.User, err, advice)
			}
		}
	}
	return fmt.Errorf("binlog: connecting to %s as %s: %w", cfg.Addr, cfg.User, err)
}

// loop connects, streams, and reconnects with backoff after transient errors.
func (r *Reader) loop() error {
	if err := r.prepare(); err != nil {
		return err
	}
	// Nothing before the start position will be handed out.
	r.setDelivered(r.resume)
	close(r.ready)
	bo := backoff.New(100*time.Millisecond, r.cfg.MaxBackoff)
	for {
		delivered, err := r.stream()
		if r.ctx.Err() != nil {
			return nil
		}
		if errors.Is(err, errXAFetch) {
			// A prepared part to re-read (r.fetch), or one delivered:
			// stream on after its commit.
			if r.fetch != nil && r.fetch.done {
				r.fetch = nil
			}
			continue
		}
		if errors.Is(err, io.EOF) {
			return io.EOF
		}
		if !retryable(err) {
			return err
		}
		if rerr := r.fence.replaced(r.ctx, r.cfg); rerr != nil {
			return rerr // a newer reader of the same consumer ended this one's dump
		}
		if delivered {
			bo.Reset()
		}
		r.reconnects.Add(1)
		wait := bo.Next()
		r.log().Warn("binlog connection lost; reconnecting", "server", r.cfg.Addr, "resume", r.resume.String(), "in", wait, "error", brief(err).Error())
		if backoff.Sleep(r.ctx, wait) != nil {
			return nil
		}
		for {
			err := r.recheckServer()
			if err == nil {
				break
			}
			if !retryable(err) {
				return err
			}
			// The server went away while it was being checked (a primary
			// dying during a failover): check again.
			wait := bo.Next()
			r.log().Warn("binlog: checking the source's server failed; trying again", "server", r.cfg.Addr, "in", wait, "error", brief(err).Error())
			if backoff.Sleep(r.ctx, wait) != nil {
				return nil
			}
		}
	}
}

// recheckServer runs before a reconnection: when the address now leads to
// another server (a DNS name or virtual IP moved to a promoted replica),
// that server is checked as at the start and the position is found on it
// by GTID. A server that cannot be reached, or a link too slow to check it
// within the setup bound, is left to the reconnection.
func (r *Reader) recheckServer() error {
	// Bounded by the last round trip until this connection measures its
	// own (the link may have slowed: that is often why the stream was
	// lost), then by the one measured.
	ctx, cancel := context.WithCancel(r.ctx)
	defer cancel()
	bound := func() time.Duration { return r.setupLimit() + max(r.cfg.CatchUpWait, 0) }
	timer := time.AfterFunc(bound(), cancel)
	defer timer.Stop()
	c, info, release, err := r.connectChecked(ctx, func() { timer.Reset(bound()) })
	defer release()
	if c == nil || ctx.Err() != nil {
		return nil
	}
	if err != nil || info.Identity == r.server.Identity {
		return err
	}
	if info.Flavor != r.flavor {
		return fmt.Errorf("%w: %s is now a %s server (%s); the position %s is of a %s server", ErrPositionUnknown, r.cfg.Addr, info.Flavor, info.Version, r.resume, r.flavor)
	}
	if !r.byGTID || !(info.Flavor == position.MariaDB || strings.EqualFold(info.GTIDMode, "ON")) {
		r.resume.GTIDs = ""
	}
	resume, err := r.onServer(c, info, r.resume)
	if err != nil {
		if ctx.Err() != nil && r.ctx.Err() == nil {
			return nil // the link stalled: the reconnection tries again
		}
		return err
	}
	r.server = info
	resume.Server = info.Identity
	r.resume = resume
	// An XA transaction's prepared part being re-read is read again on the
	// new server, from its commit on.
	r.fetch = nil
	return nil
}

// connectChecked connects to the source's server in use (or the first of
// its other addresses that answers, see dialAny), measures the round trip
// and runs the preflight checks. When ctx ends (its bound, or the reader
// is closed) the connection's socket is cut, since go-mysql's queries take
// no context and a stalled link would hold them for ever. c is nil when no
// server was reached; release stops the cut and closes c (call it also
// when err is set). measured, when set, is called once the round trip is
// known (RoundTrip).
func (r *Reader) connectChecked(ctx context.Context, measured func()) (c *client.Conn, info ServerInfo, release func(), err error) {
	c, tlsCfg, err := r.dialAny(ctx)
	if err != nil {
		return nil, info, func() {}, err
	}
	stop := cutOnDone(ctx, c)
	release = func() { stop(); c.Close() }
	r.tls = tlsCfg
	r.rttNs.Store(int64(roundTrip(c)))
	if measured != nil {
		measured()
	}
	info, err = preflight(c, r.cfg.ServerID, r.log())
	return c, info, release, err
}

// retryable reports whether err is a lost connection or a server going
// away, as opposed to a problem that reconnecting cannot fix.
func retryable(err error) bool {
	if err == nil {
		return true
	}
	if errors.Is(err, ErrPurged) || errors.Is(err, ErrPositionUnknown) || errors.Is(err, ErrCorrupt) || errors.Is(err, ErrSchemaMismatch) ||
		errors.Is(err, ErrServerConfig) || errors.Is(err, ErrPrivilege) || errors.Is(err, ErrReplaced) || errors.Is(err, errHandler) ||
		errors.Is(err, ErrStatementChange) || errors.Is(err, ErrUnsupportedEvent) || errors.Is(err, ErrDiverged) || errors.Is(err, ErrNoFailover) {
		return false
	}
	var myErr *mysql.MyError
	if errors.As(err, &myErr) {
		switch myErr.Code {
		case mysql.ER_SERVER_SHUTDOWN, mysql.ER_CON_COUNT_ERROR, 1927 /* ER_CONNECTION_KILLED */, 2013:
			return true
		}
		return false
	}
	return true // network errors, EOF, timeouts
}

var errHandler = errors.New("binlog: stream stopped")

// prepare runs the preflight checks and fixes the start position.
func (r *Reader) prepare() error {
	// Connecting takes a few round trips: minutes over a link with a
	// 10 s delay (about 25 round trips). A server that does not answer
	// at all is bounded by the dial's own 10 s.
	const limit = 10 * time.Minute
	ctx, cancel := context.WithTimeout(r.ctx, limit)
	defer cancel()
	c, info, release, err := r.connectChecked(ctx, nil)
	defer release()
	if err == nil && c != nil && r.cfg.TLSMode == TLSPreferred && r.tls == nil {
		r.log().Warn("the server does not offer TLS: connected unencrypted (tls=preferred)", "server", r.cfg.Addr)
	}
	if err == nil {
		err = r.checkStart(c, info)
	}
	if err != nil && c != nil && ctx.Err() != nil && r.ctx.Err() == nil {
		return fmt.Errorf("binlog: checking %s and finding the start position took more than %s (the round trip was %s): %w", r.cfg.Addr, limit, r.RoundTrip().Round(time.Millisecond), err)
	}
	return err
}

// checkStart finishes prepare on the checked connection c.
func (r *Reader) checkStart(c *client.Conn, info ServerInfo) (err error) {
	if !r.cfg.TakeOverServerID {
		if err := checkReplicas(c, info.Version, r.cfg.ServerID, r.cfg.ReplicaHost, r.log()); err != nil {
			return err
		}
	}
	r.server = info
	r.flavor = info.Flavor
	warnPartialJSON(c, info, r.log())
	r.byGTID = info.Flavor == position.MariaDB || strings.EqualFold(info.GTIDMode, "ON")
	if info.BinlogRowImage != "FULL" {
		if r.cfg.FullRowImages {
			return fmt.Errorf("%w: binlog_row_image is %s, so row images lack the columns a change did not touch, and format debezium would write them as NULL (Debezium itself refuses this setting): %s, or use format sluice, which leaves absent columns out",
				ErrServerConfig, info.BinlogRowImage, info.Version.setGlobal("binlog_row_image", "FULL"))
		}
		r.log().Warn("binlog_row_image is not FULL: columns that did not change are absent from row images", "binlog_row_image", info.BinlogRowImage)
	}
	src := r.cfg.Schema
	if src == nil {
		own := &selectChecked{SchemaSource: newInfoSchema(r.dial), dial: r.dial}
		src, r.ownSchema = own, own
	}
	if h := r.cfg.History; h != nil {
		h.SetFallback(src)
		h.setFlavor(r.flavor)
		src = h
	}
	r.schemas = newSchemaCache(src)
	r.schemas.mariaDB = r.flavor == position.MariaDB
	r.schemas.hist = r.cfg.History
	if r.fence, err = newFence(c, info.Version, r.cfg, r.log()); err != nil {
		return err
	}

	start := r.cfg.Start
	if start.IsZero() {
		if start, err = startPosition(c, info.Version, r.cfg.StartAt); err != nil {
			return err
		}
	} else {
		if !r.byGTID {
			start.GTIDs = "" // gtid_mode is not ON: positions are files and offsets
		}
		if start, err = r.onServer(c, info, start); err != nil {
			return err
		}
		if start.GTIDs == "" {
			// Learn the server's whole GTID state at the file position, so
			// that the positions after it carry all of it: a resume by GTID
			// must not ask for the transactions before the start again.
			// The first connection still asks for the file position itself,
			// which is what the user named.
			if start.GTIDs, err = gtidAt(c, info.Version, start); err != nil {
				return err
			}
			if !r.byGTID {
				start.GTIDs = ""
			}
			r.startByFile = true
		}
	}
	start.Flavor, start.Server = r.flavor, info.Identity
	if start.GTIDs != "" {
		if r.gset, err = position.ParseGTIDSet(r.flavor, start.GTIDs); err != nil {
			return err
		}
	}
	r.resume = start
	if h := r.cfg.History; h != nil && h.Empty() {
		if err := h.capture(r.ctx, c, position.Position{File: start.File, Offset: start.Offset}); err != nil {
			return err
		}
	}
	return nil
}

// onServer checks that the server can stream from start, and finds start
// on it when start is another server's position (the source failed over):
// by its GTID state, after waiting up to Config.CatchUpWait for a server
// that lacks transactions of it (a replica that lags), or ErrDiverged.
// Without GTIDs a position of another server is ErrNoFailover.
func (r *Reader) onServer(c *client.Conn, info ServerInfo, start position.Position) (position.Position, error) {
	other := start.Server != "" && start.Server != info.Identity
	if other {
		if start.GTIDs == "" {
			return start, fmt.Errorf("%w: the position %s is of server %s, but %s is server %s (gtid_mode %s): a binlog file and offset mean nothing on another server. Turn GTIDs on on every server of the topology (gtid_mode=ON), or start from a position of this server", ErrNoFailover, start, start.Server, r.cfg.Addr, info.Identity, info.GTIDMode)
		}
		r.failovers.Add(1)
		r.log().Warn("the source is another server than the saved position's (it failed over): resuming by GTID", "server", r.cfg.Addr, "identity", info.Identity, "saved_identity", start.Server, "gtids", start.GTIDs)
		// File names are the old server's; only the GTID state holds.
		start.File, start.Offset = "", 0
	}
	waited := time.Duration(0)
	began := time.Now()
	for {
		_, err := checkResumable(c, info.Version, start)
		var be *behindError
		switch {
		case err == nil:
			if waited > 0 {
				r.log().Info("the server has caught up with the saved position", "server", r.cfg.Addr, "waited", time.Since(began).Round(time.Millisecond).String())
			}
			if other {
				r.warnNew(c, info, start)
			}
			return start, nil
		case errors.Is(err, ErrPurged) && other:
			// MySQL: transactions not delivered yet (errant ones of the
			// promoted replica, or the old server's after the saved
			// position) that this server purged: they cannot be sent.
			return start, fmt.Errorf("%w. Those transactions were not delivered from server %s (errant transactions of this server while it was a replica, or ones after the saved position) and this server can no longer send them: their changes are in its tables but would be missing from the output; take a new snapshot", err, start.Server)
		case errors.Is(err, ErrPurged):
			return start, fmt.Errorf("%w. Start from there (--from earliest), or take a new snapshot", err)
		case !errors.As(err, &be):
			return start, err
		case !other && start.Server != "":
			return start, fmt.Errorf("%w: the GTID state %s holds transactions this server (%s, the one that wrote the position) no longer has: %s. Its binary logs and GTIDs were reset (RESET BINARY LOGS AND GTIDS, RESET MASTER) or it was restored from a backup; start from a position of this server, or take a new snapshot", ErrPositionUnknown, start.GTIDs, info.Identity, be.missing)
		case !other:
			return start, err
		case waited >= r.cfg.CatchUpWait:
			return start, fmt.Errorf("%w: %s (server %s) lacks transactions already delivered from server %s: %s. They were lost in the failover (never replicated to this server) or this server has another history; waited %s. sluice stops rather than deliver another history: compare the servers' GTIDs, then point the source at a server that has them, or start from a position of this one (accepting that those transactions' changes and this server's differ)", ErrDiverged, r.cfg.Addr, info.Identity, start.Server, be.missing, waited.Round(time.Millisecond))
		}
		if waited == 0 {
			r.log().Warn("the server lacks transactions already delivered: waiting for it to receive them (a replica that lags)", "server", r.cfg.Addr, "missing", be.missing, "wait_up_to", r.cfg.CatchUpWait.String())
		}
		if err := backoff.Sleep(r.ctx, 200*time.Millisecond); err != nil {
			return start, err
		}
		r.catchUpNs.Add(int64(time.Since(began) - waited))
		waited = time.Since(began)
	}
}

// warnNew names, after a failover, the transactions the new server has
// that the saved position lacks: errant transactions (written on it while
// it was a replica) and those written since its promotion. They are new
// data after the saved position, and delivered as such: the server sends
// them first. An errant transaction the server committed before
// transactions already delivered therefore comes after them.
func (r *Reader) warnNew(c *client.Conn, info ServerInfo, start position.Position) {
	saved, err := position.ParseGTIDSet(info.Flavor, start.GTIDs)
	if err != nil {
		return
	}
	extra, err := newTransactions(c, info.Version, saved)
	if err != nil {
		r.log().Warn("cannot compare the server's GTIDs with the saved position's", "server", r.cfg.Addr, "error", err.Error())
		return
	}
	if extra != "" {
		r.log().Warn("the server has transactions the saved position's server never had (errant transactions of a replica, or written since its promotion): delivering them as new data after the saved position", "server", r.cfg.Addr, "identity", info.Identity, "gtids", extra)
	}
}

// preflight checks the server the way a careful replica does.
func preflight(c *client.Conn, serverID uint32, log *slog.Logger) (ServerInfo, error) {
	var info ServerInfo
	v, err := ParseServerVersion(c.GetServerVersion())
	if err != nil {
		return info, err
	}
	info.Version, info.Flavor = v, v.Flavor
	rs, err := c.Execute("SELECT @@log_bin, @@binlog_row_image, @@server_id")
	if err != nil {
		return info, fmt.Errorf("binlog: reading server settings: %w", brief(err))
	}
	logBin, _ := rs.GetInt(0, 0)
	info.BinlogRowImage = strings.ToUpper(resultString(rs, 0, 1))
	sid, _ := rs.GetUint(0, 2)
	info.ServerID = uint32(sid)
	info.Identity = strconv.FormatUint(sid, 10)
	rs.Close()
	if v.mysql() {
		if info.Identity, err = serverIdentity(c); err != nil {
			return info, err
		}
	}
	// binlog_format is deprecated on MySQL since 8.0.34 (reading it warns);
	// a release without it logs ROW only.
	format := "ROW"
	if rs, err := c.Execute("SELECT @@binlog_format"); err == nil {
		format = resultString(rs, 0, 0)
		rs.Close()
	} else if myErr := (*mysql.MyError)(nil); !errors.As(err, &myErr) || myErr.Code != mysql.ER_UNKNOWN_SYSTEM_VARIABLE || !v.binlogFormatDeprecated() {
		return info, fmt.Errorf("binlog: reading binlog_format: %w", brief(err))
	}
	if logBin != 1 {
		if v.mysql() {
			return info, fmt.Errorf("%w: binary logging is off on %s: remove --skip-log-bin (or --disable-log-bin) from the server's options and restart it (MySQL 8.0 and later log by default)", ErrServerConfig, v)
		}
		return info, fmt.Errorf("%w: binary logging is off on %s: start the server with --log-bin (and binlog_format=ROW)", ErrServerConfig, v)
	}
	if !strings.EqualFold(format, "ROW") {
		fix := v.setGlobal("binlog_format", "ROW")
		if v.binlogFormatDeprecated() {
			fix += ", and remove binlog_format from the server's configuration (it is deprecated since MySQL 8.0.34; ROW is its default)"
		}
		return info, fmt.Errorf("%w: binlog_format is %s; sluice needs ROW. Run: %s (sessions already open keep their format until they reconnect)", ErrServerConfig, format, fix)
	}
	if info.BinlogRowImage != "FULL" && info.BinlogRowImage != "MINIMAL" && info.BinlogRowImage != "NOBLOB" {
		return info, fmt.Errorf("%w: binlog_row_image is %s; use FULL: %s", ErrServerConfig, info.BinlogRowImage, v.setGlobal("binlog_row_image", "FULL"))
	}
	if rs, err := c.Execute("SELECT @@binlog_row_metadata"); err == nil {
		info.RowMetadata = strings.ToUpper(resultString(rs, 0, 0))
		rs.Close()
	}
	info.GTIDMode = "ON" // MariaDB always has GTIDs
	if v.mysql() {
		if rs, err := c.Execute("SELECT @@gtid_mode"); err == nil {
			info.GTIDMode = strings.ToUpper(resultString(rs, 0, 0))
			rs.Close()
		}
		if rs, err := c.Execute("SELECT @@binlog_row_value_options"); err == nil {
			opts := strings.ToUpper(resultString(rs, 0, 0))
			rs.Close()
			if strings.Contains(opts, "PARTIAL_JSON") && info.BinlogRowImage != "FULL" {
				log.Warn("binlog_row_value_options=PARTIAL_JSON with binlog_row_image="+info.BinlogRowImage+": an update's before image may lack the JSON column a partial update changes, and such an update stops the stream; "+v.setGlobal("binlog_row_image", "FULL")+" (or "+v.setGlobal("binlog_row_value_options", "")+")", "server", v.String())
			}
		}
	}
	if info.ServerID == serverID {
		return info, fmt.Errorf("binlog: replica server_id %d is the server's own server_id; choose another (source option server_id=N)", serverID)
	}
	if err := checkGrants(c, v, info.RowMetadata != "FULL"); err != nil {
		return info, err
	}
	return info, nil
}

// checkReplicas refuses a server_id that a connected replica already uses.
func checkReplicas(c *client.Conn, v ServerVersion, serverID uint32, self string, log *slog.Logger) error {
	stmt := v.ReplicasStatement()
	rs, err := c.Execute(stmt)
	if err != nil {
		var myErr *mysql.MyError
		if errors.As(err, &myErr) && myErr.Code == mysql.ER_SPECIFIC_ACCESS_DENIED_ERROR {
			if v.mysql() {
				return fmt.Errorf("%w: %s needs REPLICATION SLAVE, to check that no other replica uses server_id %d: %s", ErrPrivilege, stmt, serverID, v.replicationGrant("<user>"))
			}
			// MariaDB drops the older of two dumps with one server_id, so a
			// clash shows up as ErrReplaced on one side.
			log.Warn("cannot check that no other replica uses this server_id: "+stmt+" needs "+v.replicasPrivilege(), "server_id", serverID, "grant", "GRANT "+v.replicasPrivilege()+" ON *.* TO <user>")
			return nil
		}
		return fmt.Errorf("binlog: %s: %w", stmt, brief(err))
	}
	defer rs.Close()
	hostCol, portCol := 1, 2 // Server_id, Host, [User, Password,] Port, ...
	if i, err := rs.NameIndex("Host"); err == nil {
		hostCol = i
	}
	if i, err := rs.NameIndex("Port"); err == nil {
		portCol = i
	}
	for i := 0; i < rs.RowNumber(); i++ {
		id, _ := rs.GetUint(i, 0)
		if uint32(id) == serverID {
			host := resultString(rs, i, hostCol)
			if self != "" && host == self {
				return nil // an earlier process of ours: it is taken over
			}
			port, _ := rs.GetUint(i, portCol)
			return fmt.Errorf("%w: server_id %d is already used by a replica registered from %s:%d (%s); two replicas with one server_id disturb each other. Choose another id (source option server_id=N), or leave it unset for a random one", ErrServerConfig, serverID, host, port, stmt)
		}
	}
	return nil
}

// startPosition resolves "current" or "earliest" to a position.
func startPosition(c *client.Conn, v ServerVersion, at string) (position.Position, error) {
	if at != StartEarliest {
		return currentPosition(c, v)
	}
	files, err := binlogFiles(c)
	if err != nil {
		return position.Position{}, err
	}
	if len(files) == 0 {
		return position.Position{}, fmt.Errorf("%w: the server has no binary logs", ErrServerConfig)
	}
	p := position.Position{File: files[0].name, Offset: 4, Flavor: v.Flavor}
	if p.GTIDs, err = gtidAt(c, v, p); err != nil {
		return p, err
	}
	return p, nil
}

// oldestPosition names the oldest position the server still has, for the
// purged-position error.
func (r *Reader) oldestPosition() string {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := r.dial(ctx)
	if err != nil {
		return "unknown (" + err.Error() + ")"
	}
	defer c.Close()
	files, err := binlogFiles(c)
	if err != nil || len(files) == 0 {
		return "unknown (the server lists no binlog files)"
	}
	return files[0].name + ":4"
}

// locate tells a purged file position from one the server never had,
// after the server said it cannot find the file.
func (r *Reader) locate() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := r.dial(ctx)
	if err != nil {
		return nil
	}
	defer c.Close()
	files, err := binlogFiles(c)
	if err != nil {
		return nil
	}
	return locateFile(files, r.resume)
}

// syncerLogger passes on go-mysql's warnings and errors only.
func (r *Reader) syncerLogger() *slog.Logger {
	return slog.New(&levelFilter{h: r.cfg.Logger.Handler(), min: slog.LevelError + 4})
}

type levelFilter struct {
	h   slog.Handler
	min slog.Level
}

func (l *levelFilter) Enabled(ctx context.Context, lv slog.Level) bool {
	return lv >= l.min && l.h.Enabled(ctx, lv)
}
func (l *levelFilter) Handle(ctx context.Context, rec slog.Record) error { return l.h.Handle(ctx, rec) }
func (l *levelFilter) WithAttrs(a []slog.Attr) slog.Handler {
	return &levelFilter{h: l.h.WithAttrs(a), min: l.min}
}
func (l *levelFilter) WithGroup(n string) slog.Handler {
	return &levelFilter{h: l.h.WithGroup(n), min: l.min}
}

// stream runs one replication connection from r.resume until an error.
// delivered reports whether any transaction was delivered.
func (r *Reader) stream() (delivered bool, err error) {
	host, portStr, err := net.SplitHostPort(r.cfg.Addr)
	if err != nil {
		return false, fmt.Errorf("binlog: address %q: %w", r.cfg.Addr, err)
	}
	port, _ := strconv.Atoi(portStr)
	// Two stages on two goroutines: go-mysql's reads the socket and parses
	// events (stage 1, in the syncer's handler), this stream's decodes rows
	// and assembles transactions (stage 2). Between them, a queue bounded
	// by bytes.
	sctx, scancel := context.WithCancel(r.ctx)
	defer scancel()
	q := &eventQueue{ch: make(chan queuedEvent, 4096), budget: bytebudget.New(r.cfg.ChunkBytes * 4)}
	h := &eventHandler{r: r}
	enq := &enqueuer{q: q, ctx: sctx}
	enq.last.Store(time.Now().UnixNano())
	// A silent connection is a dead one: the server sends a heartbeat every
	// cfg.Heartbeat when idle. (go-mysql's read timeout would also fire
	// while a slow consumer holds stage 1 back, so it is not used.) The
	// silence is measured from when the dump has started: the handshake,
	// the setup queries and the dump request take a dozen round trips,
	// which over a slow link (a second each way) is longer than any
	// heartbeat bound. The setup has its own bound on the time without an
	// answer, scaled by the round trip measured when connecting, and is
	// abandoned at once when the reader is closed (its socket is closed
	// under it).
	var (
		stalled, started atomic.Bool
		setupConns       connSet
	)
	silence := r.silenceLimit()
	setupLimit := r.setupLimit()
	go func() {
		began := time.Now()
		t := time.NewTicker(min(r.cfg.Heartbeat, time.Second))
		defer t.Stop()
		for {
			select {
			case <-sctx.Done():
				if !started.Load() {
					setupConns.closeAll() // StartSync cannot be cancelled otherwise
				}
				return
			case <-t.C:
				if !started.Load() {
					// Bounded by the time without an answer, not the
					// setup's whole time: a link that slowed down since
					// the round trip was measured still answers.
					last := max(began.UnixNano(), setupConns.read.Load())
					if time.Since(time.Unix(0, last)) > setupLimit {
						stalled.Store(true)
						setupConns.closeAll()
						scancel()
						return
					}
					continue
				}
				if !enq.waiting.Load() && time.Since(time.Unix(0, enq.last.Load())) > silence {
					stalled.Store(true)
					scancel()
					return
				}
			}
		}
	}()
	stage2 := make(chan struct{})
	go func() {
		defer close(stage2)
		for qe := range q.ch {
			if h.err == nil {
				if err := r.handle(qe.ev, h); err != nil {
					h.err = err
					scancel() // stop stage 1; drain what it queued
				}
			}
			q.budget.Release(qe.n)
		}
	}()
	syncer := replication.NewBinlogSyncer(replication.BinlogSyncerConfig{
		ServerID:                r.cfg.ServerID,
		Localhost:               r.cfg.ReplicaHost,
		Flavor:                  string(r.flavor),
		Host:                    host,
		Port:                    uint16(port),
		User:                    r.cfg.User,
		Password:                r.cfg.Password,
		TLSConfig:               r.tls,
		HeartbeatPeriod:         r.cfg.Heartbeat,
		DisableRetrySync:        true,
		VerifyChecksum:          true,
		Logger:                  r.syncerLogger(),
		RowsEventDecodeFunc:     stashRows,
		SynchronousEventHandler: enq,
		EventCacheCount:         1,
		DiscardGTIDSet:          true,
		Option:                  r.fence.dumpOption,
		Dialer:                  setupConns.dial,
	})
	finish := func() {
		setupConns.closing.Store(true)
		syncer.Close() // waits for stage 1 to stop
		close(q.ch)
		<-stage2
	}

	r.asm = assembly{}
	r.nextPos, r.atStmt = 0, false
	r.file = r.resume.File
	if h := r.cfg.History; h != nil && r.fetch == nil {
		// The definitions as of the position streamed from: the DDL
		// after it is applied again as it passes.
		h.Rewind(position.Position{File: r.resume.File, Offset: r.resume.Offset})
		r.schemas.invalidate("", "")
	}
	var s *replication.BinlogStreamer
	if f := r.fetch; f != nil {
		r.file = f.from.File
		s, err = syncer.StartSync(mysql.Position{Name: f.from.File, Pos: f.from.Offset})
	} else if r.resume.GTIDs != "" && !r.startByFile && r.byGTID {
		var set mysql.GTIDSet
		if set, err = syncSet(r.gset); err == nil {
			s, err = syncer.StartSyncGTID(set)
		}
	} else {
		s, err = syncer.StartSync(mysql.Position{Name: r.resume.File, Pos: r.resume.Offset})
	}
	if err != nil {
		finish()
		if stalled.Load() && r.ctx.Err() == nil {
			err = fmt.Errorf("binlog: starting the binlog dump from %s: no answer for %s (the round trip was %s when connecting)", r.cfg.Addr, setupLimit, r.RoundTrip().Round(time.Millisecond))
		}
		return false, r.classify(err)
	}
	enq.last.Store(time.Now().UnixNano())
	started.Store(true)
	_, err = s.GetEvent(sctx)
	finish()
	if h.err != nil {
		err = h.err
	}
	if stalled.Load() && r.ctx.Err() == nil {
		err = fmt.Errorf("binlog: no event or heartbeat from %s for %s", r.cfg.Addr, silence)
	}
	if r.asm.open && r.asm.delivered > 0 {
		// Part of this transaction is out: after reconnecting, skip that part.
		r.skip = skipState{gtid: r.asm.gtid, begin: r.asm.begin, changes: r.asm.delivered, chunk: r.asm.chunk}
	}
	return h.delivered, r.classify(err)
}

// syncSet is g as go-mysql's syncer takes it (nil for the zero set),
// parsed again from its text: position keeps its go-mysql set to itself.
func syncSet(g position.GTIDSet) (mysql.GTIDSet, error) {
	if g.IsZero() {
		return nil, nil
	}
	set, err := mysql.ParseGTIDSet(string(g.Flavor), g.String())
	if err != nil {
		return nil, fmt.Errorf("binlog: GTID set %q: %w", g.String(), err)
	}
	return set, nil
}

// CutOnDone closes c's socket when ctx ends, since go-mysql's queries take
// no context (over a stalled link one waits for ever); it returns the
// function that stops that. (The socket, not c: closing c writes its
// state, which a query running on another goroutine uses.)
func CutOnDone(ctx context.Context, c *mysqlconn.Conn) func() bool {
	return cutOnDone(ctx, rawconn.Raw(c))
}

func cutOnDone(ctx context.Context, c *client.Conn) func() bool {
	raw := c.Conn.Conn
	return context.AfterFunc(ctx, func() { raw.Close() })
}

// roundTrip times one query on c: the link's round trip, which scales the
// bounds on setting up and on silence.
func roundTrip(c *client.Conn) time.Duration {
	began := time.Now()
	if _, err := c.Execute("SELECT 1"); err != nil {
		return 0
	}
	return time.Since(began)
}

// silenceLimit is how long a started binlog dump may send nothing before
// its connection counts as dead: three heartbeats and 5 s, plus two round
// trips (a heartbeat is late by the link's delay, not by a multiple).
func (r *Reader) silenceLimit() time.Duration {
	return 3*r.cfg.Heartbeat + 5*time.Second + 2*r.RoundTrip()
}

// setupLimit bounds the time without an answer while a binlog dump is set
// up (handshake, setup queries, the dump request: a dozen round trips), and
// the whole of a reconnection's check of the server: 30 s plus 30 round
// trips.
func (r *Reader) setupLimit() time.Duration {
	return 30*time.Second + 30*r.RoundTrip()
}

// connSet records the connections a binlog syncer dials, so that its
// setup (which go-mysql does not let a context cancel) can be cut.
type connSet struct {
	mu      sync.Mutex
	conns   []net.Conn
	closed  bool
	closing atomic.Bool  // the syncer is stopping: bound its last dial
	read    atomic.Int64 // Unix ns when bytes last arrived on any of conns
}

func (s *connSet) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	d := net.Dialer{Timeout: 10 * time.Second}
	closing := s.closing.Load()
	if closing {
		d.Timeout = time.Second
	}
	c, err := d.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	if closing {
		// go-mysql's KILL of the dump, when it stops: bounded, as the link
		// may be dead.
		_ = c.SetDeadline(time.Now().Add(time.Second))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		c.Close()
		return nil, errors.New("binlog: reader closed")
	}
	s.conns = append(s.conns, c)
	return progressConn{c, &s.read}, nil
}

// progressConn notes when bytes last arrived (in Unix ns), so that a setup
// over a slow link that still answers is told from a stalled one.
type progressConn struct {
	net.Conn
	read *atomic.Int64
}

func (c progressConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.read.Store(time.Now().UnixNano())
	}
	return n, err
}

// SetReadDeadline on a socket that closeAll closed reports success: reads
// fail at once anyway. go-mysql (1.16) answers an error here, in
// BinlogSyncer.close, by closing its connection before its reader
// goroutine is known to have stopped, which writes the connection's state
// under that goroutine (a data race seen in TestXATransactions); with no
// error it waits for the goroutine first.
func (c progressConn) SetReadDeadline(t time.Time) error {
	if err := c.Conn.SetReadDeadline(t); err != nil && !errors.Is(err, net.ErrClosed) {
		return err
	}
	return nil
}

func (s *connSet) closeAll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	for _, c := range s.conns {
		c.Close()
	}
	s.conns = nil
}

// queuedEvent is a parsed event waiting for stage 2, with the bytes it
// holds of the queue's budget.
type queuedEvent struct {
	ev *replication.BinlogEvent
	n  int
}

type eventQueue struct {
	ch     chan queuedEvent
	budget *bytebudget.Budget
}

// enqueuer is stage 1's end: go-mysql calls it for every parsed event.
type enqueuer struct {
	q       *eventQueue
	ctx     context.Context
	last    atomic.Int64 // UnixNano of the last event received
	waiting atomic.Bool  // blocked on a full queue (backpressure, not a dead server)
}

func (e *enqueuer) HandleEvent(ev *replication.BinlogEvent) error {
	e.last.Store(time.Now().UnixNano())
	e.waiting.Store(true)
	defer func() {
		e.last.Store(time.Now().UnixNano())
		e.waiting.Store(false)
	}()
	n := len(ev.RawData)
	if e.q.budget.Acquire(e.ctx, n) != nil {
		return errHandler
	}
	select {
	case e.q.ch <- queuedEvent{ev, n}:
		return nil
	case <-e.ctx.Done():
		e.q.budget.Release(n)
		return errHandler
	}
}

// briefError keeps the first line of an error's text: go-mysql's errors
// carry stack traces in their messages. errors.Is and As still see the
// original.
type briefError struct{ err error }

func (b briefError) Error() string {
	msg := b.err.Error()
	if i := strings.IndexByte(msg, '\n'); i >= 0 {
		msg = msg[:i]
	}
	if errors.Is(b.err, mysql.ErrBadConn) {
		return wordLostConn(msg)
	}
	return msg
}

// wordLostConn rewords go-mysql's lost connection ("…: io.ReadFull(header)
// failed. err EOF: connection was bad", "Write failed. err …") as "…: the
// connection to the server was lost (EOF)", keeping what came before it
// and the network error's own words.
func wordLostConn(msg string) string {
	body, ok := strings.CutSuffix(msg, ": "+mysql.ErrBadConn.Error())
	i := strings.Index(body, " failed")
	if !ok || i < 0 {
		return msg
	}
	prefix := ""
	if j := strings.LastIndex(body[:i], ": "); j >= 0 {
		prefix = body[:j+2]
	}
	cause := "closed"
	if _, after, ok := strings.Cut(body[i:], " err "); ok {
		cause, _, _ = strings.Cut(after, ", copied")
	}
	return prefix + "the connection to the server was lost (" + cause + ")"
}

func (b briefError) Unwrap() error { return b.err }

// brief shortens go-mysql's errors to their first line, and words a lost
// connection as such.
func brief(err error) error {
	if err == nil || !strings.Contains(err.Error(), "\n") && !errors.Is(err, mysql.ErrBadConn) {
		return err
	}
	return briefError{err}
}

// Brief is how sluice words a client error of go-mysql for a log or an
// error message: its first line, and a lost connection in words.
func Brief(err error) error { return brief(err) }

// classify turns server errors into the package's error classes.
func (r *Reader) classify(err error) error {
	err = brief(err)
	if err == nil || errors.Is(err, io.EOF) {
		return err
	}
	var myErr *mysql.MyError
	if errors.As(err, &myErr) {
		switch {
		case strings.Contains(myErr.Message, "same server_uuid/server_id"):
			return fmt.Errorf("%w (server_id %d, at %s): %s", ErrReplaced, r.cfg.ServerID, r.resume, myErr.Message)
		case myErr.Code == mysql.ER_SPECIFIC_ACCESS_DENIED_ERROR:
			return fmt.Errorf("%w: the server refused the binlog dump: %s: %s", ErrPrivilege, myErr.Message, r.server.Version.replicationGrant("<user>"))
		case myErr.Code == mysql.ER_MASTER_FATAL_ERROR_READING_BINLOG:
			return r.fatalReading(myErr, err)
		}
	}
	var evErr *replication.EventError
	if errors.As(err, &evErr) || errors.Is(err, replication.ErrChecksumMismatch) || strings.Contains(err.Error(), "failed checksum") {
		var typ replication.EventType
		if evErr != nil && evErr.Header != nil {
			typ = evErr.Header.EventType
		}
		return fmt.Errorf("%w: %s after %s: %s (the binlog is damaged or not a binlog; nothing after this point was delivered)", ErrCorrupt, r.file, r.resume, parseErrorText(typ, err))
	}
	return err
}

// fatalReading classifies the server's "fatal error reading binlog" (1236,
// ER_SOURCE_FATAL_ERROR_READING_BINLOG), whose text says what happened:
//
//	MySQL:   Cannot replicate because the source purged required binary logs. ...
//	MySQL:   Replica has more GTIDs than the source has, using the source's SERVER_UUID. ...
//	MariaDB: Could not find GTID state requested by slave in any binlog files. ...
//	MariaDB: Error: connecting slave requested to start from GTID 0-1-100, which is not in the master's binlog
//	both:    Could not find first log file name in binary log index file
//	MySQL:   Client requested source to start replication from position > file size
//	MariaDB: Client requested master to start replication from impossible position; ...
//	MySQL:   binlog truncated in the middle of event; ...  MariaDB: bogus data in log event; ...
func (r *Reader) fatalReading(myErr *mysql.MyError, err error) error {
	msg := strings.ToLower(myErr.Message)
	switch {
	case strings.Contains(msg, "more gtids than the source") || strings.Contains(msg, "not in the master's binlog"):
		return fmt.Errorf("%w: cannot resume at %s: the server has not executed transactions the position has seen: %s. Start from a position of this server", ErrPositionUnknown, r.resume, myErr.Message)
	case strings.Contains(msg, "purged") || strings.Contains(msg, "could not find gtid state"):
		return fmt.Errorf("%w: cannot resume at %s: %s. The oldest position the server still has is %s; start from there (--from earliest), or take a new snapshot", ErrPurged, r.resume, myErr.Message, r.oldestPosition())
	case strings.Contains(msg, "could not find first log file"):
		if lerr := r.locate(); errors.Is(lerr, ErrPurged) {
			return fmt.Errorf("%w. Start from there (--from earliest), or take a new snapshot", lerr)
		} else if lerr != nil {
			return lerr
		}
	case strings.Contains(msg, "position > file size") || strings.Contains(msg, "impossible position"):
		return fmt.Errorf("%w: cannot start at %s: the offset is past the end of the file: %s", ErrPositionUnknown, r.resume, myErr.Message)
	case r.startByFile && (strings.Contains(msg, "bogus data") || strings.Contains(msg, "in the middle of event")):
		return fmt.Errorf("%w: cannot start at %s: no event starts at that offset: %s", ErrPositionUnknown, r.resume, myErr.Message)
	}
	return fmt.Errorf("binlog: server stopped the stream at %s: %w", r.resume, err)
}

// stashRows is the go-mysql rows-event hook: it decodes only the header
// and keeps the row bytes, which the event handler then decodes with
// sluice's own decoder in the streaming goroutine. The bytes are parked in
// Rows[0][0] so no shared state is needed even when go-mysql decodes
// compressed transaction payloads concurrently.
func stashRows(e *replication.RowsEvent, data []byte) error {
	pos, err := e.DecodeHeader(data)
	if err != nil {
		return err
	}
	e.Rows = [][]any{{data[pos:]}}
	return nil
}

// eventHandler is the state of one stream's stage 2.
type eventHandler struct {
	r         *Reader
	err       error
	delivered bool
}

func (r *Reader) handle(ev *replication.BinlogEvent, h *eventHandler) error {
	hdr := ev.Header
	if err := r.checkContiguous(ev); err != nil {
		return err
	}
	if k := kindOf(hdr.EventType, hdr.Flags); k.live != eventDecoded || k.file != eventDecoded {
		// Passed over knowingly, or a stop (events.go).
		var body []byte
		if g, ok := ev.Event.(*replication.GenericEvent); ok {
			body = g.Data
		}
		return r.other(hdr, body)
	}
	switch e := ev.Event.(type) {
	case *replication.RotateEvent:
		r.nextPos = 0
		r.file = string(e.NextLogName)
		if !r.asm.open && hdr.Timestamp != 0 || r.resume.File == "" {
			// A real rotation between transactions: the next one starts in the new file.
			r.resume.File, r.resume.Offset = r.file, uint32(e.Position)
			if r.emit == nil {
				r.setDelivered(r.resume)
			}
		}
		return nil
	case *replication.FormatDescriptionEvent:
		r.crc = e.ChecksumAlgorithm == replication.BINLOG_CHECKSUM_ALG_CRC32
		r.advanceIdle(hdr)
		return nil
	case *replication.MariadbBinlogCheckPointEvent:
		r.advanceIdle(hdr)
		return nil
	case *replication.ExecuteLoadQueryEvent:
		// LOAD DATA logged as a statement (the file's bytes came before
		// in BEGIN_LOAD_QUERY events).
		db, q, err := executeLoadQuery(ev.RawData, r.crc)
		if err != nil {
			return fmt.Errorf("%w: EXECUTE_LOAD_QUERY event at %s:%d: %v", ErrCorrupt, r.file, hdr.LogPos-hdr.EventSize, err)
		}
		return r.statementChange(hdr, db, q, sqlstmt.Parse(q, db))
	case *replication.PreviousGTIDsEvent:
		// A file starts with the GTID state before it: when nothing else
		// gave the state (reading files), start from it.
		if r.gset.IsZero() && !r.asm.open && r.flavor == position.MySQL {
			g, err := position.ParseGTIDSet(position.MySQL, e.GTIDSets)
			if err != nil {
				return fmt.Errorf("%w: PREVIOUS_GTIDS event at %s:%d: %v", ErrCorrupt, r.file, hdr.LogPos, err)
			}
			r.gset = g
			r.resume.GTIDs = g.String()
		}
		r.advanceIdle(hdr)
		return nil
	case *replication.MariadbGTIDListEvent:
		defer r.advanceIdle(hdr)
		if r.gset.IsZero() && !r.asm.open && r.flavor == position.MariaDB && len(e.GTIDs) > 0 {
			parts := make([]string, len(e.GTIDs))
			for i, g := range e.GTIDs {
				parts[i] = fmt.Sprintf("%d-%d-%d", g.DomainID, g.ServerID, g.SequenceNumber)
			}
			g, err := position.ParseGTIDSet(position.MariaDB, strings.Join(parts, ","))
			if err != nil {
				return fmt.Errorf("%w: GTID_LIST event at %s:%d: %v", ErrCorrupt, r.file, hdr.LogPos, err)
			}
			r.gset = g
			r.resume.GTIDs = g.String()
		}
		return nil
	case *replication.HeartbeatEvent:
		return r.idle(h)
	case *replication.MariadbGTIDEvent:
		r.beginTxn(hdr, fmt.Sprintf("%d-%d-%d", e.GTID.DomainID, e.GTID.ServerID, e.GTID.SequenceNumber), time.Unix(int64(hdr.Timestamp), 0))
		r.asm.hasBegin = !e.IsStandalone()
		r.asm.xa = e.Flags&mariadbFlPreparedXA != 0 && r.fetch == nil
		return nil
	case *replication.GTIDEvent:
		return r.mysqlGTID(hdr, e, "")
	case *replication.GtidTaggedLogEvent: // MySQL 8.4 uuid:tag:N
		return r.mysqlGTID(hdr, &e.GTIDEvent, e.Tag.String())
	case *replication.QueryEvent:
		return r.query(hdr, e, h)
	case *replication.TableMapEvent:
		return nil // kept by the parser; resolved when rows arrive
	case *replication.RowsEvent:
		return r.rows(hdr, e, ev.Header.EventType, h)
	case *replication.GenericEvent:
		if hdr.EventType == replication.XA_PREPARE_LOG_EVENT {
			return r.xaPrepare(hdr, e.Data, h)
		}
		return r.other(hdr, e.Data)
	case *replication.XIDEvent:
		return r.commit(hdr, h)
	case *replication.TransactionPayloadEvent:
		// Inner events carry the payload's position; changes are located
		// at the payload event.
		r.payloadPos = hdr.LogPos - hdr.EventSize
		defer func() { r.payloadPos = 0 }()
		for _, inner := range e.Events {
			if err := r.handle(inner, h); err != nil {
				return err
			}
		}
		return nil
	}
	// A code decoded above that came as another event type.
	return r.other(hdr, nil)
}

// logEventArtificial marks events the server makes up for the stream
// (they are not in the binlog file at their position).
const logEventArtificial = 0x20

// errGap is returned when the stream skips part of the binlog; it is
// retried (reconnecting resumes after the last whole transaction).
var errGap = errors.New("binlog: the stream skipped part of the binlog")

// checkContiguous checks that a live stream's event starts where the
// previous one ended: every event carries its end position, so bytes lost
// between server and sluice (a proxy, a broken middlebox) show as a gap,
// even where whole events are missing and every checksum is right.
func (r *Reader) checkContiguous(ev *replication.BinlogEvent) error {
	hdr := ev.Header
	if r.emit != nil || r.payloadPos != 0 || hdr.LogPos == 0 || hdr.Flags&logEventArtificial != 0 {
		return nil
	}
	// What the event is: a transaction start (checking begins there: before
	// the stream's first transaction the server jumps from the file's
	// header events to the position asked for), a table map (MariaDB may
	// leave out an Annotate_rows event before it), and whether a statement
	// ends with it.
	txnStart, tableMap, stmtEnd := false, false, true
	switch e := ev.Event.(type) {
	case *replication.HeartbeatEvent, *replication.RotateEvent, *replication.FormatDescriptionEvent:
		return nil
	case *replication.MariadbGTIDEvent, *replication.GTIDEvent, *replication.GtidTaggedLogEvent:
		txnStart = true
	case *replication.TableMapEvent:
		tableMap, stmtEnd = true, false
	case *replication.RowsEvent:
		stmtEnd = e.Flags&replication.RowsEventStmtEndFlag != 0
	}
	if r.nextPos == 0 && !txnStart {
		return nil
	}
	start := hdr.LogPos - hdr.EventSize
	if r.nextPos != 0 && start != r.nextPos && !(tableMap && r.atStmt && start > r.nextPos) {
		return fmt.Errorf("%w: in %s an event starts at %d but the previous one ended at %d; reconnecting from %s", errGap, r.file, start, r.nextPos, r.resume)
	}
	r.nextPos, r.atStmt = hdr.LogPos, stmtEnd
	return nil
}

// mysqlGTID starts a transaction at a MySQL GTID event. An anonymous GTID
// event (gtid_mode=OFF) starts one without a GTID.
func (r *Reader) mysqlGTID(hdr *replication.EventHeader, e *replication.GTIDEvent, tag string) error {
	ct := time.Unix(int64(hdr.Timestamp), 0)
	if e.OriginalCommitTimestamp > 0 {
		ct = time.UnixMicro(int64(e.OriginalCommitTimestamp))
	}
	if hdr.EventType == replication.ANONYMOUS_GTID_EVENT {
		r.beginTxn(hdr, "", ct)
		return nil
	}
	u, err := uuid.FromBytes(e.SID)
	if err != nil {
		return fmt.Errorf("%w: GTID event at %s:%d: %v", ErrCorrupt, r.file, hdr.LogPos, err)
	}
	gtid := u.String() + ":" + strconv.FormatInt(e.GNO, 10)
	if tag == "" {
		tag = e.Tag.String()
	}
	if tag != "" {
		gtid = u.String() + ":" + tag + ":" + strconv.FormatInt(e.GNO, 10)
	}
	r.beginTxn(hdr, gtid, ct)
	return nil
}

func (r *Reader) beginTxn(hdr *replication.EventHeader, gtid string, commit time.Time) {
	serverID := hdr.ServerID
	if f := r.fetch; f != nil {
		// Re-reading an XA transaction's prepared part: it is delivered as
		// its commit.
		gtid, commit, serverID = f.gtid, f.commitTime, f.serverID
	}
	r.asm = assembly{open: true, gtid: gtid, serverID: serverID, commit: commit, begin: r.resume,
		start: r.here(hdr.LogPos - hdr.EventSize)}
	if r.skip.matches(&r.asm) {
		// Replaying a transaction that was cut by a lost connection.
		r.asm.chunk = r.skip.chunk
		r.asm.delivered = r.skip.changes
	} else {
		r.skip = skipState{}
	}
}

// allColumns reports whether a rows event's columns bitmap has all n
// columns.
func allColumns(bitmap []byte, n int) bool {
	if len(bitmap)*8 < n {
		return false
	}
	for i := range n {
		if bitmap[i>>3]&(1<<(i&7)) == 0 {
			return false
		}
	}
	return true
}

func (r *Reader) query(hdr *replication.EventHeader, e *replication.QueryEvent, h *eventHandler) error {
	q := strings.TrimSpace(queryText(e.Query, e.StatusVars))
	if verb, xid, ok := xaStatement(q); ok {
		switch verb {
		case "START": // MySQL: the prepared part (or a one-phase XA) begins
			if !r.asm.open {
				r.beginTxn(hdr, "", time.Unix(int64(hdr.Timestamp), 0))
			}
			r.asm.hasBegin = true
			r.asm.xa = r.fetch == nil
		case "COMMIT", "ROLLBACK":
			if r.fetch != nil {
				return nil
			}
			if !r.asm.open {
				r.beginTxn(hdr, "", time.Unix(int64(hdr.Timestamp), 0))
			}
			return r.xaOutcome(hdr, verb, xid, h)
		}
		return nil // XA END; the XA_PREPARE event ends the part
	}
	if r.asm.xa {
		return nil // read again, and checked, at the XA transaction's commit
	}
	// BEGIN and COMMIT (every transaction has them on MySQL, and without
	// GTIDs) are told apart without the parser.
	switch {
	case strings.EqualFold(q, "BEGIN"):
		if !r.asm.open {
			r.beginTxn(hdr, "", time.Unix(int64(hdr.Timestamp), 0))
		}
		r.asm.hasBegin = true
		r.asm.thread = e.SlaveProxyID
		return nil
	case strings.EqualFold(q, "COMMIT"):
		return r.commit(hdr, h)
	}
	st := sqlstmt.Parse(q, string(e.Schema))
	if err := r.statementChange(hdr, string(e.Schema), q, st); err != nil {
		return err
	}
	if r.asm.open && r.asm.hasBegin {
		// A statement logged inside a transaction (SAVEPOINT, ...). DDL
		// there is CREATE TABLE ... SELECT in ROW format: MariaDB and
		// MySQL 8+ log the CREATE and its rows as one transaction (MySQL
		// with GTIDs: "CREATE TABLE ... START TRANSACTION", then the rows,
		// then the commit). The DDL is delivered in that transaction,
		// before its rows.
		return r.ddl(hdr, string(e.Schema), q, st, ansiQuotes(e.StatusVars))
	}
	if !r.asm.open {
		r.beginTxn(hdr, "", time.Unix(int64(hdr.Timestamp), 0))
	}
	// A statement outside BEGIN..COMMIT (DDL, account management, ...)
	// is a transaction of its own.
	if err := r.ddl(hdr, string(e.Schema), q, st, ansiQuotes(e.StatusVars)); err != nil {
		return err
	}
	return r.commit(hdr, h)
}

// ddl handles a statement logged as a transaction of its own. A DDL
// statement forgets the cached definitions of the tables it touches (of
// every table of a database it creates, alters or drops; of all tables
// when it cannot be read) and is delivered, as one OpDDL change, when it
// touches a selected table or a database with selected tables. One that
// cannot be read is reported (a warning with its first words, and
// Stats.UnparsedDDL) and delivered when its default database has
// selected tables, or it has none, or it names such a database. Account
// statements (which may carry password hashes) and statements of other
// kinds are never delivered, and their text is never logged. ansi says
// the statement ran with sql_mode ANSI_QUOTES (Change.ANSIQuotes).
func (r *Reader) ddl(hdr *replication.EventHeader, db, q string, st sqlstmt.Statement, ansi bool) error {
	if st.Kind != sqlstmt.DDL {
		return nil
	}
	q = sqlstmt.Redact(q) // a table's connection password goes nowhere
	ch := Change{Op: OpDDL, ANSIQuotes: ansi, Query: q, Schema: db, File: r.file, Pos: hdr.LogPos - hdr.EventSize}
	if h := r.cfg.History; h != nil {
		changes, err := h.ApplyDDL(r.ctx, r.endHere(hdr), db, q)
		if err != nil {
			return err
		}
		ch.TableChanges = changes
	}
	deliver := false
	// A TRUNCATE leaves the table's definition as it is: its change
	// carries the one its rows were last read with, when one is cached,
	// else the schema history's, so that format debezium's op "t" event
	// has the table's schema.
	var truncated *Table
	if st.Parsed && st.Verb == "TRUNCATE" && len(st.Tables) == 1 {
		truncated = r.schemas.lookup(st.Tables[0].Schema, st.Tables[0].Name)
		if truncated == nil && r.cfg.History != nil {
			truncated = r.cfg.History.Table(st.Tables[0].Schema, st.Tables[0].Name)
		}
	}
	if st.Parsed {
		named := -1 // the first selected table, else the first
		for i, t := range st.Tables {
			r.schemas.invalidate(t.Schema, t.Name)
			if r.cfg.Tables.Match(t.Schema, t.Name) {
				deliver = true
				if named < 0 {
					named = i
				}
			}
		}
		named = max(named, 0)
		for _, d := range st.Databases {
			if st.Database {
				r.schemas.invalidate(d, "")
			}
			deliver = deliver || r.cfg.Tables.MatchSchema(d)
		}
		switch {
		case len(st.Tables) == 1:
			ch.Table = truncated
			if ch.Table == nil {
				ch.Table = &Table{Schema: st.Tables[0].Schema, Name: st.Tables[0].Name}
			}
			ch.Schema = st.Tables[0].Schema
		case len(st.Tables) > 1:
			ch.Schema = st.Tables[named].Schema
		case len(st.Databases) > 0:
			ch.Schema = st.Databases[0]
		}
	} else {
		r.schemas.invalidate("", "")
		r.unparsedDDL.Add(1)
		deliver = db == "" || r.cfg.Tables.MatchSchema(db) || ddlMentionsSelected(q, r.cfg.Tables)
		r.log().Warn("a DDL statement could not be parsed: every cached table definition is forgotten, and it is delivered by its default database alone",
			"statement", sqlstmt.Preview(q, 80), "default_database", db, "at", eventPos{r.file, hdr.LogPos - hdr.EventSize}.String(), "delivered", deliver)
	}
	if deliver {
		txn := r.chunk()
		txn.Changes = append(txn.Changes, ch)
	}
	return nil
}

// executeLoadQuery reads the default database and the statement of an
// EXECUTE_LOAD_QUERY event (raw: header, body and, with crc, the
// checksum): the query event's fixed part (thread id 4, time 4, database
// length 1, error code 2, status length 2), then file id 4, start and end
// offsets 4+4 and the duplicate handling 1, the status variables, the
// database, a NUL and the statement.
func executeLoadQuery(raw []byte, crc bool) (db, q string, err error) {
	body := raw[min(len(raw), replication.EventHeaderSize):]
	if crc {
		if len(body) < 4 {
			return "", "", errors.New("event too short")
		}
		body = body[:len(body)-4]
	}
	const fixed = 13 + 13
	if len(body) < fixed {
		return "", "", fmt.Errorf("%d bytes, want at least %d", len(body), fixed)
	}
	dbLen := int(body[8])
	statusLen := int(body[11]) | int(body[12])<<8
	rest := body[fixed:]
	if len(rest) < statusLen+dbLen+1 {
		return "", "", fmt.Errorf("status variables (%d bytes) and database name (%d) longer than the event", statusLen, dbLen)
	}
	rest = rest[statusLen:]
	return string(rest[:dbLen]), string(rest[dbLen+1:]), nil
}

// CheckOnStatementChange checks a value of Config.OnStatementChange
// (and FileConfig's): "", StatementStop or StatementSkip.
func CheckOnStatementChange(v string) error {
	switch v {
	case "", StatementStop, StatementSkip:
		return nil
	}
	return fmt.Errorf("binlog: on_statement_change %q: want %q (stop the stream, the default) or %q (warn and go on without the statement's changes)", v, StatementStop, StatementSkip)
}

// statementChange stops the stream (or, with OnStatementChange "skip",
// warns) at a DML statement on a selected table that the server logged as
// a statement, or a CREATE TABLE ... SELECT of a selected table logged so:
// its rows are not in the binlog and would be lost without a word. (With
// skip, the CREATE is still delivered as DDL.) A DML statement the grammar cannot read counts as touching a
// selected table when its default database is selected, or it has none,
// or it names a selected database (the rule DDL is matched by).
func (r *Reader) statementChange(hdr *replication.EventHeader, db, q string, st sqlstmt.Statement) error {
	if st.Kind != sqlstmt.DML && !st.CopiesRows {
		return nil // CREATE TABLE ... SELECT logged as a statement: its rows are not in the binlog either
	}
	var hit []string
	if st.Parsed {
		for _, t := range st.Tables {
			if r.cfg.Tables.Match(t.Schema, t.Name) {
				hit = append(hit, t.String())
			}
		}
	} else if db == "" || r.cfg.Tables.MatchSchema(db) || ddlMentionsSelected(q, r.cfg.Tables) {
		what := "a table of database " + db
		if db == "" {
			what = "a table (no default database)"
		}
		hit = append(hit, what+" (the statement could not be parsed)")
	}
	if len(hit) == 0 {
		return nil
	}
	where := eventPos{r.file, hdr.LogPos - hdr.EventSize}
	if r.payloadPos != 0 {
		where.pos = r.payloadPos
	}
	gtid := r.asm.gtid
	if gtid == "" {
		gtid = "none"
	}
	preview := sqlstmt.Preview(q, 80)
	fix := "SET GLOBAL binlog_format = 'ROW'"
	if r.server.Version.Flavor != "" {
		fix = r.server.Version.setGlobal("binlog_format", "ROW")
	}
	if r.cfg.OnStatementChange == StatementSkip {
		r.statements.Add(1)
		r.log().Warn("skipped a change logged as a statement: its rows are not in the binlog and are not delivered (on_statement_change: skip)",
			"tables", strings.Join(hit, ", "), "at", where.String(), "gtid", gtid, "statement", preview,
			"fix", "the session that wrote it must use binlog_format=ROW (SET SESSION binlog_format = 'ROW'); server: "+fix)
		return nil
	}
	return fmt.Errorf("%w: %s %s at %s (GTID %s): %q. The server logged it with binlog_format STATEMENT or MIXED, so its rows are not in the binlog. "+
		"Make the session that wrote it use ROW (SET SESSION binlog_format = 'ROW', or reconnect it after %s); then take a new snapshot of %s, "+
		"or set on_statement_change: skip to warn and go on without such changes",
		ErrStatementChange, st.Verb, strings.Join(hit, ", "), where, gtid, preview, fix, strings.Join(hit, ", "))
}

// ddlMentionsSelected reports whether a statement the grammar could not
// read names a qualified object of a selected database, as in
// "ALTER TABLE db.t ..." run from another default database.
func ddlMentionsSelected(q string, f *Filter) bool {
	for _, w := range strings.Fields(q) {
		w = strings.Trim(w, "`;,()")
		if db, _, ok := strings.Cut(w, "."); ok && f.MatchSchema(strings.Trim(db, "`")) {
			return true
		}
	}
	return false
}

// chunk returns the current chunk, starting one if needed.
func (r *Reader) chunk() *Txn {
	if r.asm.txn == nil {
		r.asm.txn = &Txn{GTID: r.asm.gtid, ServerID: r.asm.serverID, Thread: r.asm.thread, CommitTime: r.asm.commit, Begin: r.asm.begin, Chunk: r.asm.chunk}
		if f := r.fetch; f != nil {
			r.asm.txn.XID, r.asm.txn.PrepareGTID = f.xid, f.prepare
		}
		r.decoder.reset()
		if r.arenas == nil {
			r.arenas = make(chan *chunkArena, 8)
		}
		var a *chunkArena
		select {
		case a = <-r.arenas: // released by the consumer: reuse its memory
			r.decoder.recycle(a)
			r.asm.txn.Changes = a.changes[:0]
		default:
			a = &chunkArena{}
		}
		r.decoder.arena = a
		r.asm.txn.arena, r.asm.txn.free = a, r.arenas
	}
	return r.asm.txn
}

func (r *Reader) rows(hdr *replication.EventHeader, e *replication.RowsEvent, typ replication.EventType, h *eventHandler) error {
	tm := e.Table
	if tm == nil || !r.cfg.Tables.Match(string(tm.Schema), string(tm.Table)) {
		return nil
	}
	if r.asm.xa {
		r.asm.xaTouched = true // read again at its commit
		return nil
	}
	evPos := hdr.LogPos - hdr.EventSize
	if r.payloadPos != 0 {
		evPos = r.payloadPos
	}
	where := eventPos{r.file, evPos} // formatted only into an error
	if !r.asm.open {
		r.beginTxn(hdr, "", time.Unix(int64(hdr.Timestamp), 0))
		r.asm.hasBegin = true
	}
	t, err := r.schemas.table(r.ctx, tm, where)
	if err != nil {
		return err
	}
	if len(t.Columns) != int(e.ColumnCount) {
		return fmt.Errorf("%w: table %s at %s: the row has %d columns, the table map %d", ErrSchemaMismatch, t.QualifiedName(), where, e.ColumnCount, len(t.Columns))
	}
	var op Op
	switch e.Type() {
	case replication.EnumRowsEventTypeInsert:
		op = OpInsert
	case replication.EnumRowsEventTypeUpdate:
		op = OpUpdate
	case replication.EnumRowsEventTypeDelete:
		op = OpDelete
	default:
		if typ != replication.PARTIAL_UPDATE_ROWS_EVENT {
			return fmt.Errorf("%w: unknown rows event type %v at %s", ErrCorrupt, typ, where)
		}
		op = OpUpdate // JSON diffs in the after image, applied by the decoder
	}
	partial := typ == replication.PARTIAL_UPDATE_ROWS_EVENT
	if r.cfg.FullRowImages && (!allColumns(e.ColumnBitmap1, len(t.Columns)) || op == OpUpdate && !allColumns(e.ColumnBitmap2, len(t.Columns))) {
		return fmt.Errorf("%w: table %s at %s: a session logged it with binlog_row_image MINIMAL or NOBLOB (the server's setting may be FULL); format debezium would write the absent columns as NULL. Set binlog_row_image = 'FULL' in the sessions and the server, then restart from a snapshot of the table (a new snapshot or --from a position before it), or use format sluice, which leaves absent columns out",
			ErrPartialRowImage, t.QualifiedName(), where)
	}
	body, _ := e.Rows[0][0].([]byte)
	switch typ {
	case replication.MARIADB_WRITE_ROWS_COMPRESSED_EVENT_V1, replication.MARIADB_UPDATE_ROWS_COMPRESSED_EVENT_V1, replication.MARIADB_DELETE_ROWS_COMPRESSED_EVENT_V1:
		if body, err = decompressMariaDB(body); err != nil {
			return fmt.Errorf("%w: compressed rows event at %s: %v", ErrCorrupt, where, err)
		}
	}
	if r.asm.full {
		if err := r.flushChunk(h); err != nil {
			return err
		}
	}
	txn := r.chunk()
	txn.Bytes += int(hdr.EventSize)
	r.asm.mem += len(body) // the values' bytes, at most
	perChange := int(unsafe.Sizeof(Change{})) + len(t.Columns)*int(unsafe.Sizeof(Value{}))
	if op == OpUpdate {
		perChange += len(t.Columns) * int(unsafe.Sizeof(Value{}))
	}
	for rowIdx := 0; len(body) > 0; rowIdx++ {
		left := len(body)
		ch := Change{Op: op, Table: t, File: r.file, Pos: evPos, Row: rowIdx}
		if r.asm.full {
			// Mid-event: the rest of this event goes to the next chunk.
			if err := r.flushChunk(h); err != nil {
				return err
			}
		}
		txn = r.chunk() // before decoding: the row's memory must belong to its chunk
		var img Row
		var n int
		if partial {
			img, n, err = r.decoder.decodeBeforePartial(t, body, e.ColumnBitmap1)
		} else {
			img, n, err = r.decoder.decodeImage(t, body, e.ColumnBitmap1)
		}
		if err != nil {
			return fmt.Errorf("%w: table %s at %s row %d: %v", ErrCorrupt, t.QualifiedName(), where, rowIdx, err)
		}
		body = body[n:]
		switch op {
		case OpInsert:
			ch.After = img
		case OpDelete:
			ch.Before = img
		case OpUpdate:
			ch.Before = img
			if partial {
				ch.After, n, err = r.decoder.decodeAfterPartial(t, body, e.ColumnBitmap2, img)
				r.asm.mem += r.decoder.part.takeGrown() // whole documents rebuilt from small diffs
			} else {
				ch.After, n, err = r.decoder.decodeImage(t, body, e.ColumnBitmap2)
			}
			if errors.Is(err, ErrServerConfig) {
				return fmt.Errorf("%w (at %s row %d)", err, where, rowIdx)
			}
			if err != nil {
				return fmt.Errorf("%w: table %s at %s row %d (after image): %v", ErrCorrupt, t.QualifiedName(), where, rowIdx, err)
			}
			body = body[n:]
		}
		if len(body) == left {
			return fmt.Errorf("%w: table %s at %s row %d: an empty row image with %d bytes left in the event", ErrCorrupt, t.QualifiedName(), where, rowIdx, left)
		}
		r.asm.seen++
		if r.asm.seen <= r.asm.delivered {
			r.replayed.Add(1)
			continue // delivered before the connection was lost
		}
		if txn.Changes == nil {
			// Sized after the previous chunk: a chunk of a big transaction
			// gets room at once, a small transaction little (chunks held by
			// a consumer must not each pin a large slice).
			txn.Changes = make([]Change, 0, min(r.cfg.ChunkBytes/perChange+1, 1<<16, max(16, r.prevChanges)))
		}
		txn.Changes = append(txn.Changes, ch)
		if r.asm.mem += perChange; r.asm.mem >= r.cfg.ChunkBytes {
			r.asm.full = true // delivered before the next row
		}
	}
	return nil
}

// flushChunk delivers the current chunk of an unfinished transaction.
func (r *Reader) flushChunk(h *eventHandler) error {
	txn := r.asm.txn
	if txn == nil || len(txn.Changes) == 0 {
		return nil
	}
	r.asm.txn = nil
	r.decoder.reset() // nothing more may be written into the delivered chunk's memory
	r.asm.mem, r.asm.full = 0, false
	r.asm.chunk++
	r.asm.delivered = r.asm.seen
	return r.deliver(txn, h)
}

func (r *Reader) deliver(txn *Txn, h *eventHandler) error {
	r.prevChanges = len(txn.Changes)
	if r.emit != nil {
		h.delivered = true
		return r.emit(txn)
	}
	select {
	case r.out <- txn:
		h.delivered = true
		if txn.Last {
			r.setDelivered(txn.End)
		}
		return nil
	case <-r.ctx.Done():
		return errHandler
	}
}

// endHere is the position after the event of hdr with the GTID state
// that includes the open transaction's GTID: what commit records as its
// end. (Positions with their server and GTIDs order the schema history
// across a failover, where file names mean nothing.)
func (r *Reader) endHere(hdr *replication.EventHeader) position.Position {
	end := r.here(hdr.LogPos)
	g := r.gset.Clone()
	if r.asm.gtid != "" && r.fetch == nil {
		if g.IsZero() {
			g, _ = position.ParseGTIDSet(r.flavor, "")
		}
		if !g.IsZero() && g.Add(r.asm.gtid) != nil {
			return end
		}
	}
	end.GTIDs = g.String()
	return end
}

// commit ends the transaction at the event whose header is hdr.
func (r *Reader) commit(hdr *replication.EventHeader, h *eventHandler) error {
	if !r.asm.open {
		return nil
	}
	end := r.here(hdr.LogPos)
	if f := r.fetch; f != nil {
		end, r.gset = f.end, f.gset.Clone()
	} else if r.asm.gtid != "" && r.gset.IsZero() {
		if g, err := position.ParseGTIDSet(r.flavor, ""); err == nil {
			r.gset = g
		}
	}
	if r.asm.gtid != "" && r.fetch == nil {
		if err := r.gset.Add(r.asm.gtid); err != nil {
			return err
		}
	}
	end.GTIDs = r.gset.String()
	txn := r.asm.txn
	if txn == nil && r.asm.chunk > 0 {
		txn = r.chunk() // an empty last chunk closes a chunked transaction
	}
	r.skip = skipState{}
	r.startByFile = false
	r.resume = end
	r.asm.open = false
	r.asm.txn = nil
	if txn == nil {
		if err := r.maybeProgress(hdr, h); err != nil {
			return err
		}
		r.setDelivered(end) // nothing of it to hand over
		return nil
	}
	txn.End, txn.Last = end, true
	if err := r.deliver(txn, h); err != nil {
		return err
	}
	return r.checkStop(end)
}

func (r *Reader) setDelivered(p position.Position) {
	r.deliveredMu.Lock()
	r.deliveredPos = p
	r.deliveredMu.Unlock()
}

// Delivered returns the position up to which every transaction has been
// handed to Next (or had nothing to hand over). Together with Pending it
// tells a consumer that it has seen everything up to a position.
func (r *Reader) Delivered() position.Position {
	r.deliveredMu.Lock()
	defer r.deliveredMu.Unlock()
	return r.deliveredPos
}

// Pending returns the number of chunks waiting to be taken by Next.
func (r *Reader) Pending() int { return len(r.out) }

// maybeProgress delivers an empty transaction now and then, so that
// consumers saving positions move past runs of filtered-out transactions.
func (r *Reader) maybeProgress(hdr *replication.EventHeader, h *eventHandler) error {
	if now := time.Now(); now.Sub(r.lastIdle) >= time.Second {
		r.lastIdle = now
		txn := &Txn{Begin: r.asm.begin, End: r.resume, Last: true, CommitTime: time.Unix(int64(hdr.Timestamp), 0)}
		if err := r.deliver(txn, h); err != nil {
			return err
		}
	}
	return r.checkStop(r.resume)
}

// advanceIdle moves the resume position past an event that belongs to no
// transaction (the header events of a binlog file), so that Delivered
// reaches the server's end of binlog when nothing else is written.
func (r *Reader) advanceIdle(hdr *replication.EventHeader) {
	if r.emit != nil || r.fetch != nil || r.asm.open || hdr.LogPos == 0 || r.file != r.resume.File || hdr.LogPos <= r.resume.Offset {
		return
	}
	r.resume.Offset = hdr.LogPos
	if r.emit == nil {
		r.setDelivered(r.resume)
	}
}

// idle handles a heartbeat: the server had nothing more to send. Outside
// a transaction it is handed to Next as an empty Txn with Heartbeat set,
// in order with the transactions, so that a consumer learns that it has
// everything the server had at that moment.
func (r *Reader) idle(h *eventHandler) error {
	if r.asm.open {
		return nil
	}
	if r.emit == nil && r.cfg.DeliverHeartbeats {
		prev := r.prevChanges
		err := r.deliver(&Txn{Begin: r.resume, End: r.resume, Last: true, Heartbeat: true}, h)
		r.prevChanges = prev
		if err != nil {
			return err
		}
	}
	r.setDelivered(r.resume)
	return r.checkStop(r.resume)
}

func (r *Reader) checkStop(end position.Position) error {
	if r.cfg.Stop.File == "" {
		return nil
	}
	if end.File > r.cfg.Stop.File || end.File == r.cfg.Stop.File && end.Offset >= r.cfg.Stop.Offset {
		return io.EOF
	}
	return nil
}

// eventPos locates a binlog event in error messages; it is formatted only
// when an error needs it, not for every event.
type eventPos struct {
	file string
	pos  uint32
}

func (p eventPos) String() string { return p.file + ":" + strconv.FormatUint(uint64(p.pos), 10) }
