package binlog

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/go-mysql-org/go-mysql/client"
	"github.com/go-mysql-org/go-mysql/mysql"
	"vitess.io/vitess/go/mysql/collations"
	"vitess.io/vitess/go/vt/schemadiff"
	"vitess.io/vitess/go/vt/sqlparser"
	"vitess.io/vitess/go/vt/vtenv"

	"github.com/sluice-cdc/sluice/internal/rawconn"
	"github.com/sluice-cdc/sluice/internal/sqlstmt"
	"github.com/sluice-cdc/sluice/mysqlconn"
	"github.com/sluice-cdc/sluice/position"
)

// History is a SchemaSource that knows the definitions of the captured
// tables as of the reader's position: the definitions at its start (SHOW
// CREATE TABLE, or what a store holds), then every DDL statement the reader
// passes, applied to them in binlog order with Vitess's schemadiff. A
// reader started at an old position with binlog_row_metadata=MINIMAL so
// decodes each row with the columns its table had when the row was
// written, whatever DDL came after.
//
// Each change is kept as an entry (its position, the table, its CREATE
// TABLE after the statement, or dropped, or unknown), so the definitions as
// of any position since the base are rebuilt by replaying entries
// (Rewind), and a store can persist them (HistoryStore).
//
// A statement schemadiff cannot apply makes the touched table unknown
// from its position on: its rows are then described by information_schema
// as without a history, checked against the TABLE_MAP's column types, or
// the reader stops with ErrSchemaMismatch.
type History struct {
	env     *schemadiff.Environment
	mariaDB bool
	match   func(db, table string) bool
	log     *slog.Logger
	store   HistoryStore

	mu       sync.Mutex
	fallback SchemaSource
	base     HistoryState // the state at base.Pos
	entries  []HistoryEntry
	cur      state

	unknown, mismatches atomic.Int64
}

// HistoryEntry is one change of one table (or one database's default
// character set) at a position.
type HistoryEntry struct {
	// Pos is the end of the DDL event (the position after it).
	Pos position.Position `json:"pos"`
	DB  string            `json:"db"`
	// Table is empty for a database's entry.
	Table string `json:"table,omitempty"`
	// Create is the table's CREATE TABLE after the statement; empty when
	// the table was dropped (Dropped) or is unknown.
	Create  string `json:"create,omitempty"`
	Dropped bool   `json:"dropped,omitempty"`
	// Unknown marks a table whose definition the statement changed in a
	// way the history could not apply.
	Unknown bool `json:"unknown,omitempty"`
	// Charset is a database's default character set (Table empty); empty
	// with Dropped for a dropped database.
	Charset string `json:"charset,omitempty"`
	// Statement is the statement's preview (first keywords, no values).
	Statement string `json:"statement,omitempty"`
}

// HistoryState is a full set of definitions at a position: the base a
// store keeps, from which entries are replayed.
type HistoryState struct {
	Pos       position.Position `json:"pos"`
	Databases map[string]string `json:"databases"` // database -> default charset
	Tables    []HistoryEntry    `json:"tables"`    // Create set, or Unknown
}

// HistoryStore persists a history: a base state and the entries after it.
// AppendSchema must be durable when it returns (the reader delivers a DDL
// change only after its entries are stored) and idempotent (an entry at a
// position already stored is dropped).
type HistoryStore interface {
	LoadSchema(ctx context.Context) (base *HistoryState, entries []HistoryEntry, err error)
	AppendSchema(ctx context.Context, entries []HistoryEntry) error
	// CompactSchema replaces the base with state, dropping entries up to
	// state.Pos.
	CompactSchema(ctx context.Context, state HistoryState) error
}

// HistoryStats counts what the history could not do.
type HistoryStats struct {
	// Unknown counts statements the history could not apply (each also a
	// warning): the tables they touch are read from information_schema.
	Unknown int64
	// Mismatches counts rows events whose binlog column metadata
	// (binlog_row_metadata=FULL) differed from the history's definition
	// (each also a warning; the binlog's own metadata is used).
	Mismatches int64
}

type histTable struct {
	db, name string
	entity   *schemadiff.CreateTableEntity // nil: unknown
	def      *Table                        // converted from entity, lazily
	full     *Table                        // def with its types resolved (History.Table), lazily
}

type state struct {
	dbs    map[string]string // lower(db) -> charset
	tables map[string]*histTable
}

func histKey(db, table string) string { return strings.ToLower(db) + "\x00" + strings.ToLower(table) }

var histEnv = func() *schemadiff.Environment {
	env, err := vtenv.New(vtenv.Options{MySQLServerVersion: "8.4.0"})
	if err != nil {
		panic(err) // a constant version string
	}
	return schemadiff.NewEnv(env, collations.MySQL8().DefaultConnectionCharset())
}()

// NewHistory returns an empty history of the tables match selects (nil:
// all). flavor tells how JSON columns are logged. store may be nil.
func NewHistory(flavor position.Flavor, match func(db, table string) bool, store HistoryStore, log *slog.Logger) *History {
	if match == nil {
		match = func(string, string) bool { return true }
	}
	if log == nil {
		log = slog.Default()
	}
	h := &History{env: histEnv, mariaDB: flavor == position.MariaDB, match: match, log: log, store: store}
	h.cur = state{dbs: map[string]string{}, tables: map[string]*histTable{}}
	h.base.Databases = map[string]string{}
	return h
}

// Stats returns the history's counters.
func (h *History) Stats() HistoryStats {
	return HistoryStats{Unknown: h.unknown.Load(), Mismatches: h.mismatches.Load()}
}

// Empty reports whether the history holds no base yet (nothing captured
// or loaded).
func (h *History) Empty() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.base.Pos.IsZero() && len(h.base.Tables) == 0 && len(h.entries) == 0
}

// SetFallback sets the source of tables the history does not know (never
// captured, or made unknown by a statement it could not apply).
func (h *History) SetFallback(src SchemaSource) {
	h.mu.Lock()
	h.fallback = src
	h.mu.Unlock()
}

// Capture reads the definitions of the selected tables from the server
// (SHOW CREATE TABLE, and each database's default character set) as the
// base at pos, the position they are current at, and stores the base.
func (h *History) Capture(ctx context.Context, c *mysqlconn.Conn, pos position.Position) error {
	return h.capture(ctx, rawconn.Raw(c), pos)
}

func (h *History) capture(ctx context.Context, c *client.Conn, pos position.Position) error {
	if rs, err := c.Execute("SET SESSION show_gipk_in_create_table_and_information_schema = ON"); err == nil {
		rs.Close()
	}
	rs, err := c.Execute(`SELECT TABLE_SCHEMA, TABLE_NAME FROM information_schema.TABLES
		WHERE TABLE_TYPE = 'BASE TABLE' AND TABLE_SCHEMA NOT IN ('mysql','information_schema','performance_schema','sys')`)
	if err != nil {
		return fmt.Errorf("binlog: schema history: listing tables: %w", err)
	}
	type name struct{ db, table string }
	var names []name
	for i := 0; i < rs.RowNumber(); i++ {
		n := name{resultString(rs, i, 0), resultString(rs, i, 1)}
		if h.match(n.db, n.table) {
			names = append(names, n)
		}
	}
	rs.Close()
	dbs, err := c.Execute(`SELECT SCHEMA_NAME, DEFAULT_CHARACTER_SET_NAME FROM information_schema.SCHEMATA`)
	if err != nil {
		return fmt.Errorf("binlog: schema history: reading database character sets: %w", err)
	}
	st := HistoryState{Pos: pos, Databases: map[string]string{}}
	for i := 0; i < dbs.RowNumber(); i++ {
		st.Databases[resultString(dbs, i, 0)] = resultString(dbs, i, 1)
	}
	dbs.Close()
	for _, n := range names {
		r, err := c.Execute("SHOW CREATE TABLE " + sqlstmt.QuoteName(n.db, n.table))
		var myErr *mysql.MyError
		if errors.As(err, &myErr) {
			// Dropped since, or not readable: described by
			// information_schema as without a history.
			h.log.Warn("schema history: SHOW CREATE TABLE failed: the table's rows are described by information_schema", "table", n.db+"."+n.table, "error", myErr.Message)
			st.Tables = append(st.Tables, HistoryEntry{Pos: pos, DB: n.db, Table: n.table, Unknown: true})
			continue
		}
		if err != nil {
			return fmt.Errorf("binlog: schema history: SHOW CREATE TABLE %s.%s: %w", n.db, n.table, err)
		}
		create := sqlstmt.Redact(resultString(r, 0, 1)) // a connection password is kept nowhere
		r.Close()
		st.Tables = append(st.Tables, HistoryEntry{Pos: pos, DB: n.db, Table: n.table, Create: create})
	}
	if h.store != nil {
		if err := h.store.CompactSchema(ctx, st); err != nil {
			return fmt.Errorf("binlog: schema history: storing the captured definitions: %w", err)
		}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.base, h.entries = st, nil
	h.cur = h.replay(st, nil, position.Position{})
	return nil
}

// Load reads the stored base and entries; the definitions are then as of
// the last entry (Rewind moves them to a reader's start).
func (h *History) Load(ctx context.Context) error {
	if h.store == nil {
		return nil
	}
	base, entries, err := h.store.LoadSchema(ctx)
	if err != nil {
		return fmt.Errorf("binlog: schema history: loading: %w", err)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if base != nil {
		h.base = *base
		if h.base.Databases == nil {
			h.base.Databases = map[string]string{}
		}
	}
	h.entries = entries
	h.cur = h.replay(h.base, h.entries, position.Position{})
	return nil
}

// Rewind sets the definitions to those as of pos: the base and the entries
// up to pos. A reader starting at pos then applies the DDL after it again;
// those entries are dropped, to be appended again as they pass.
func (h *History) Rewind(pos position.Position) {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := len(h.entries)
	if !pos.IsZero() {
		n = sort.Search(len(h.entries), func(i int) bool { return h.entries[i].Pos.Compare(pos) > 0 })
	}
	h.entries = h.entries[:n]
	h.cur = h.replay(h.base, h.entries, position.Position{})
	if !pos.IsZero() && !h.base.Pos.IsZero() && pos.Compare(h.base.Pos) < 0 {
		h.log.Warn("schema history: the start is before the oldest definitions kept: rows before them are decoded with later definitions (checked against the binlog's column types)", "start", pos.String(), "oldest", h.base.Pos.String())
	}
}

// setFlavor tells the history how the server logs JSON columns.
func (h *History) setFlavor(f position.Flavor) {
	h.mu.Lock()
	h.mariaDB = f == position.MariaDB
	for _, t := range h.cur.tables {
		t.def = nil
	}
	h.mu.Unlock()
}

// Compact makes the definitions as of upTo the new base, in the store
// too, and drops the entries up to it: upTo must be the oldest position
// any checkpoint or sink can still resume from. A position before the
// base leaves the history as it is.
func (h *History) Compact(ctx context.Context, upTo position.Position) error {
	h.mu.Lock()
	if upTo.IsZero() || h.base.Pos.IsZero() || upTo.Compare(h.base.Pos) <= 0 {
		h.mu.Unlock()
		return nil
	}
	s := h.replay(h.base, h.entries, upTo)
	st := HistoryState{Pos: upTo, Databases: map[string]string{}}
	for db, cs := range s.dbs {
		st.Databases[db] = cs
	}
	keys := make([]string, 0, len(s.tables))
	for k := range s.tables {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		t := s.tables[k]
		e := HistoryEntry{Pos: st.Pos, DB: t.db, Table: t.name, Unknown: t.entity == nil}
		if t.entity != nil {
			e.Create = sqlparser.CanonicalString(t.entity.CreateTable)
		}
		st.Tables = append(st.Tables, e)
	}
	n := sort.Search(len(h.entries), func(i int) bool { return h.entries[i].Pos.Compare(upTo) > 0 })
	h.mu.Unlock()
	if h.store != nil {
		if err := h.store.CompactSchema(ctx, st); err != nil {
			return fmt.Errorf("binlog: schema history: compacting up to %s: %w", upTo, err)
		}
	}
	h.mu.Lock()
	h.base = st
	h.entries = append([]HistoryEntry(nil), h.entries[n:]...)
	h.mu.Unlock()
	return nil
}

// Base is the position of the oldest definitions the history holds.
func (h *History) Base() position.Position {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.base.Pos
}

// Entries returns the entries after the base.
func (h *History) Entries() []HistoryEntry {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]HistoryEntry(nil), h.entries...)
}

// TablesAt returns the definitions of the captured tables as of pos (zero:
// the latest), sorted by name; a table the history does not know is listed
// with no columns and Unknown set.
func (h *History) TablesAt(pos position.Position) []HistoryTable {
	h.mu.Lock()
	s := h.replay(h.base, h.entries, pos)
	h.mu.Unlock()
	var out []HistoryTable
	for _, t := range s.tables {
		ht := HistoryTable{DB: t.db, Name: t.name, Unknown: t.entity == nil}
		if t.entity != nil {
			ht.Create = sqlparser.CanonicalString(t.entity.CreateTable)
			def, err := h.toTable(t, s)
			if err != nil {
				ht.Unknown = true
			} else {
				ht.Table = def
			}
		}
		out = append(out, ht)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].DB != out[j].DB {
			return out[i].DB < out[j].DB
		}
		return out[i].Name < out[j].Name
	})
	return out
}

// HistoryTable is one table as of a position (TablesAt).
type HistoryTable struct {
	DB, Name string
	Create   string
	Table    *Table
	Unknown  bool
}

// replay builds the state of base plus entries up to until (zero: all).
func (h *History) replay(base HistoryState, entries []HistoryEntry, until position.Position) state {
	s := state{dbs: map[string]string{}, tables: map[string]*histTable{}}
	for db, cs := range base.Databases {
		s.dbs[strings.ToLower(db)] = cs
	}
	// Only each table's last entry counts: parse that one alone (a
	// CREATE TABLE parse is most of the cost of loading a long history).
	last := map[string]int{}
	var order []HistoryEntry
	keep := func(e HistoryEntry) {
		if e.Table == "" {
			h.replayEntry(s, e)
			return
		}
		k := histKey(e.DB, e.Table)
		if i, ok := last[k]; ok {
			order[i] = e
			return
		}
		last[k] = len(order)
		order = append(order, e)
	}
	for _, e := range base.Tables {
		keep(e)
	}
	for _, e := range entries {
		if !until.IsZero() && e.Pos.Compare(until) > 0 {
			break
		}
		keep(e)
	}
	for _, e := range order {
		h.replayEntry(s, e)
	}
	return s
}

func (h *History) replayEntry(s state, e HistoryEntry) {
	if e.Table == "" {
		if e.Dropped {
			delete(s.dbs, strings.ToLower(e.DB))
		} else {
			s.dbs[strings.ToLower(e.DB)] = e.Charset
		}
		return
	}
	key := histKey(e.DB, e.Table)
	switch {
	case e.Dropped:
		delete(s.tables, key)
	case e.Unknown || e.Create == "":
		s.tables[key] = &histTable{db: e.DB, name: e.Table}
	default:
		ent, err := schemadiff.NewCreateTableEntityFromSQL(h.env, e.Create)
		if err != nil {
			h.log.Warn("schema history: a stored table definition does not parse: the table is read from information_schema", "table", e.DB+"."+e.Table, "error", err)
			s.tables[key] = &histTable{db: e.DB, name: e.Table}
			return
		}
		s.tables[key] = &histTable{db: e.DB, name: e.Table, entity: ent}
	}
}

// Columns returns the definition of db.table as of the reader's position.
func (h *History) Columns(ctx context.Context, db, table string) (*Table, error) {
	h.mu.Lock()
	t, ok := h.cur.tables[histKey(db, table)]
	var def *Table
	var err error
	if ok && t.entity != nil {
		if t.def == nil {
			t.def, err = h.toTable(t, h.cur)
		}
		def = t.def
	}
	fb := h.fallback
	h.mu.Unlock()
	if def != nil {
		return def, nil
	}
	if err != nil {
		h.log.Warn("schema history: a table definition cannot be used: read from information_schema", "table", db+"."+table, "error", err)
	}
	if fb == nil {
		return nil, fmt.Errorf("table %s.%s: the schema history does not know it and there is no information_schema to ask", db, table)
	}
	return fb.Columns(ctx, db, table)
}

// Table returns db.table's definition as of the reader's position with
// every column's type resolved as a TABLE_MAP would resolve it (Kind,
// Frac, Precision, BitLen: Column.SetSQLType from the declared type), or
// nil when the history does not know the table or a type. A TRUNCATE of a
// table the reader has read no row of carries it, so that its event has
// the table's schema.
func (h *History) Table(db, table string) *Table {
	h.mu.Lock()
	defer h.mu.Unlock()
	t, ok := h.cur.tables[histKey(db, table)]
	if !ok || t.entity == nil {
		return nil
	}
	if t.full != nil {
		return t.full
	}
	out, err := h.toTable(t, h.cur)
	if err != nil {
		return nil
	}
	for i, cd := range t.entity.CreateTable.TableSpec.Columns {
		col := &out.Columns[i]
		enum, set := col.Enum, col.Set
		dataType, colType, prec, scale, dtPrec := declaredSQLType(cd.Type, h.mariaDB)
		if err := col.SetSQLType(h.mariaDB, dataType, colType, prec, scale, dtPrec); err != nil {
			h.log.Warn("schema history: a column's type cannot be resolved", "table", db+"."+table, "column", col.Name, "error", err)
			return nil
		}
		col.Enum, col.Set = enum, set
		if col.jsonText {
			col.Kind = KindJSON
		}
	}
	t.full = out
	return out
}

// declaredSQLType gives a declared column type as information_schema
// would describe it, for Column.SetSQLType: DATA_TYPE, a COLUMN_TYPE
// with what SetSQLType reads from it (UNSIGNED, FLOAT's scale, ENUM and
// SET members), and the precision, scale and fractional-second precision
// with the server's defaults (DECIMAL(10,0), BIT(1), DATETIME(0)).
func declaredSQLType(ct *sqlparser.ColumnType, mariaDB bool) (dataType, colType string, prec, scale, dtPrec int) {
	dataType = strings.ToLower(ct.Type)
	switch dataType {
	case "bool", "boolean":
		dataType = "tinyint"
	case "integer":
		dataType = "int"
	case "dec", "fixed":
		dataType = "decimal"
	case "nchar":
		dataType = "char"
	case "nvarchar":
		dataType = "varchar"
	case "json":
		if mariaDB {
			dataType = "longtext" // MariaDB's JSON is LONGTEXT with a json_valid check
		}
	}
	length := func(def int) int {
		if ct.Length != nil {
			return *ct.Length
		}
		return def
	}
	colType = dataType
	switch dataType {
	case "decimal", "numeric":
		prec = length(10)
		if ct.Scale != nil {
			scale = *ct.Scale
		}
	case "bit":
		prec = length(1)
	case "datetime", "timestamp", "time":
		dtPrec = length(0)
	case "float":
		if ct.Scale != nil {
			colType = fmt.Sprintf("float(%d,%d)", length(0), *ct.Scale)
		}
	case "enum", "set":
		colType = dataType + "(" + strings.Join(ct.EnumValues, ",") + ")"
	}
	if ct.Unsigned {
		colType += " unsigned"
	}
	return dataType, colType, prec, scale, dtPrec
}

// Invalidate forwards to the fallback: the history itself changes only by
// ApplyDDL.
func (h *History) Invalidate(db, table string) {
	h.mu.Lock()
	fb := h.fallback
	h.mu.Unlock()
	if fb != nil {
		fb.Invalidate(db, table)
	}
}

// check compares the binlog's own column metadata with the history's
// definition of t's table, and reports a difference.
//
// It copies the history's column defaults into t when the definitions
// agree, and reports whether it did.
func (h *History) check(t *Table, where eventPos) bool {
	h.mu.Lock()
	ht, ok := h.cur.tables[histKey(t.Schema, t.Name)]
	var def *Table
	if ok && ht.entity != nil {
		if ht.def == nil {
			ht.def, _ = h.toTable(ht, h.cur)
		}
		def = ht.def
	}
	h.mu.Unlock()
	if def == nil {
		return false
	}
	var diff string
	if len(def.Columns) != len(t.Columns) {
		diff = fmt.Sprintf("the binlog has %d columns, the history %d", len(t.Columns), len(def.Columns))
	} else {
		for i := range t.Columns {
			bc, dc := &t.Columns[i], &def.Columns[i]
			if !strings.EqualFold(bc.Name, dc.Name) {
				diff = fmt.Sprintf("column %d: binlog name %s, history name %s", i+1, bc.Name, dc.Name)
				break
			}
			if !compatible(bc.BinlogType, bc.Meta, dc.Type) {
				diff = fmt.Sprintf("column %d (%s): binlog type %s, history type %s", i+1, bc.Name, typeName(bc.BinlogType), typeName(dc.Type))
				break
			}
		}
	}
	if diff == "" {
		// What the binlog's metadata does not carry: defaults, a FLOAT
		// declared with a scale, comments.
		for i := range t.Columns {
			t.Columns[i].Default = def.Columns[i].Default
			t.Columns[i].FloatMD = def.Columns[i].FloatMD
			t.Columns[i].Comment = def.Columns[i].Comment
		}
		return true
	}
	{
		h.mismatches.Add(1)
		h.log.Warn("schema history: the binlog's column metadata differs from the history's definition (the binlog's is used)", "table", t.QualifiedName(), "at", where.String(), "difference", diff)
	}
	return false
}

// ParseCreateTable reads a CREATE TABLE statement (SHOW CREATE TABLE's
// text) with the schema history's parser and returns its columns as the
// history gives them: Name, Type, Nullable, Unsigned, Enum, Set, Default
// and Comment (Schema and Name of the table are empty; character sets are not
// meant to be used). mariaDB selects MariaDB's reading of JSON.
func ParseCreateTable(create string, mariaDB bool) (*Table, error) {
	ent, err := schemadiff.NewCreateTableEntityFromSQL(histEnv, create)
	if err != nil {
		return nil, err
	}
	h := &History{env: histEnv, mariaDB: mariaDB}
	return h.toTable(&histTable{entity: ent}, state{dbs: map[string]string{}})
}

// ApplyDDL applies one DDL statement (run with default database db) that
// ends at pos, appends its entries (to the store first, when there is
// one), and returns the touched captured tables before and after it
// (nil where a table did not exist or is unknown).
func (h *History) ApplyDDL(ctx context.Context, pos position.Position, db, q string) ([]TableChange, error) {
	h.mu.Lock()
	if n := len(h.entries); n > 0 && h.entries[n-1].Pos.Compare(pos) >= 0 || !h.base.Pos.IsZero() && h.base.Pos.Compare(pos) >= 0 {
		h.mu.Unlock()
		return nil, nil // already applied (read again after a reconnection)
	}
	entries, changes := h.apply(pos, db, q)
	h.mu.Unlock()
	if len(entries) == 0 {
		return changes, nil
	}
	if h.store != nil {
		if err := h.store.AppendSchema(ctx, entries); err != nil {
			return nil, fmt.Errorf("binlog: schema history: storing the change of %s at %s: %w", sqlstmt.Preview(q, 40), pos, err)
		}
	}
	h.mu.Lock()
	h.entries = append(h.entries, entries...)
	for _, e := range entries {
		h.replayEntry(h.cur, e)
	}
	h.mu.Unlock()
	return changes, nil
}

// TableChange is a captured table before and after a DDL statement.
type TableChange struct {
	DB, Table     string
	Before, After *Table
	// Kind is "CREATE", "ALTER" or "DROP".
	Kind string
	// Def is After's definition (types as declared, defaults, comments);
	// nil with After.
	Def *TableDef
}

// apply works out the entries of one statement against h.cur without
// changing it (under mu).
func (h *History) apply(pos position.Position, db, q string) ([]HistoryEntry, []TableChange) {
	preview := sqlstmt.Preview(q, 40)
	stmt, err := sqlstmt.Grammar(q)
	pending := map[string]*HistoryEntry{}
	var order []string
	var changes []TableChange
	set := func(e HistoryEntry) {
		e.Pos, e.Statement = pos, preview
		k := histKey(e.DB, e.Table)
		if _, ok := pending[k]; !ok {
			order = append(order, k)
		}
		pending[k] = &e
	}
	entity := func(d, t string) (*histTable, bool) {
		k := histKey(d, t)
		if e, ok := pending[k]; ok {
			if e.Dropped || e.Unknown {
				return &histTable{db: d, name: t}, !e.Dropped
			}
			ent, err := schemadiff.NewCreateTableEntityFromSQL(h.env, e.Create)
			if err != nil {
				return &histTable{db: d, name: t}, true
			}
			return &histTable{db: d, name: t, entity: ent}, true
		}
		ht, ok := h.cur.tables[k]
		return ht, ok
	}
	unknown := func(d, t string, why string) {
		if !h.match(d, t) {
			return
		}
		h.unknown.Add(1)
		h.log.Warn("schema history: a DDL statement could not be applied to the table's definition: its rows are read with information_schema's from here on", "table", d+"."+t, "statement", preview, "at", pos.String(), "reason", why)
		set(HistoryEntry{DB: d, Table: t, Unknown: true})
	}
	put := func(d, t string, ent *schemadiff.CreateTableEntity) {
		if !h.match(d, t) {
			if _, ok := entity(d, t); ok {
				set(HistoryEntry{DB: d, Table: t, Dropped: true})
			}
			return
		}
		ct := sqlparser.CloneRefOfCreateTable(ent.CreateTable)
		ct.Table = sqlparser.TableName{Name: sqlparser.NewIdentifierCS(t)}
		set(HistoryEntry{DB: d, Table: t, Create: sqlparser.CanonicalString(ct)})
	}
	qual := func(tn sqlparser.TableName) (string, string) {
		d := tn.Qualifier.String()
		if d == "" {
			d = db
		}
		return d, tn.Name.String()
	}
	if err != nil {
		// Not for the grammar: whatever it touches is unknown. sqlstmt
		// reads the names from its head.
		st := sqlstmt.Parse(q, db)
		if st.Parsed {
			for _, t := range st.Tables {
				if _, ok := entity(t.Schema, t.Name); ok || h.match(t.Schema, t.Name) {
					unknown(t.Schema, t.Name, "the grammar cannot read it")
				}
			}
		} else {
			for _, t := range h.cur.tables {
				if db == "" || strings.EqualFold(t.db, db) {
					unknown(t.db, t.name, "the statement could not be parsed")
				}
			}
		}
		return h.entries2(pending, order), changes
	}
	before := map[string]*Table{}
	remember := func(d, t string) {
		k := histKey(d, t)
		if _, ok := before[k]; ok {
			return
		}
		if ht, ok := entity(d, t); ok && ht.entity != nil {
			before[k], _ = h.toTable(ht, h.cur)
		} else {
			before[k] = nil
		}
	}
	switch s := stmt.(type) {
	case *sqlparser.CreateTable:
		d, t := qual(s.Table)
		if s.Temp {
			break
		}
		remember(d, t)
		if s.OptLike != nil {
			ld, lt := qual(s.OptLike.LikeTable)
			src, ok := entity(ld, lt)
			if !ok || src.entity == nil {
				unknown(d, t, "the table it is created like is not known")
				break
			}
			put(d, t, src.entity)
			break
		}
		if _, exists := entity(d, t); exists && s.IfNotExists {
			break
		}
		ct := sqlparser.CloneRefOfCreateTable(s)
		ct.Select = nil
		ct.IfNotExists = false
		ct.Table = sqlparser.TableName{Name: s.Table.Name}
		h.defaultCharset(ct, h.dbCharset(pending, d))
		ent, err := schemadiff.NewCreateTableEntity(h.env, ct)
		if err != nil {
			if _, partial := err.(*schemadiff.NotFullyParsedError); partial {
				unknown(d, t, "the schema history's grammar (Vitess's) reads only part of this CREATE TABLE")
			} else {
				unknown(d, t, err.Error())
			}
			break
		}
		put(d, t, ent)
	case *sqlparser.DropTable:
		if s.Temp {
			break
		}
		for _, tn := range s.FromTables {
			d, t := qual(tn)
			if _, ok := entity(d, t); ok {
				remember(d, t)
				set(HistoryEntry{DB: d, Table: t, Dropped: true})
			}
		}
	case *sqlparser.RenameTable:
		for _, p := range s.TablePairs {
			fd, ft := qual(p.FromTable)
			td, tt := qual(p.ToTable)
			h.rename(fd, ft, td, tt, entity, set, put, unknown, remember)
		}
	case *sqlparser.AlterTable:
		d, t := qual(s.Table)
		ht, ok := entity(d, t)
		if !ok {
			if h.match(d, t) {
				unknown(d, t, "the table was not known before")
			}
			break
		}
		remember(d, t)
		if ht.entity == nil {
			break // stays unknown
		}
		ent, newName, err := h.alter(ht.entity, s, h.dbCharset(pending, d))
		if err != nil {
			unknown(d, t, err.Error())
			break
		}
		if newName != nil {
			nd, nt := qual(*newName)
			set(HistoryEntry{DB: d, Table: t, Dropped: true})
			remember(nd, nt)
			put(nd, nt, ent)
		} else {
			put(d, t, ent)
		}
	case *sqlparser.CreateDatabase:
		cs := h.env.CollationEnv().DefaultConnectionCharset()
		name := h.env.CollationEnv().LookupName(cs)
		charset := charsetOfCollationName(name)
		for _, o := range s.CreateOptions {
			switch o.Type {
			case sqlparser.CharacterSetType:
				charset = strings.ToLower(o.Value)
			case sqlparser.CollateType:
				charset = charsetOfCollationName(strings.ToLower(o.Value))
			}
		}
		if _, ok := h.cur.dbs[strings.ToLower(s.DBName.String())]; ok && s.IfNotExists {
			break
		}
		set(HistoryEntry{DB: s.DBName.String(), Charset: charset})
	case *sqlparser.AlterDatabase:
		d := s.DBName.String()
		if d == "" {
			d = db
		}
		for _, o := range s.AlterOptions {
			switch o.Type {
			case sqlparser.CharacterSetType:
				set(HistoryEntry{DB: d, Charset: strings.ToLower(o.Value)})
			case sqlparser.CollateType:
				set(HistoryEntry{DB: d, Charset: charsetOfCollationName(strings.ToLower(o.Value))})
			}
		}
	case *sqlparser.DropDatabase:
		d := s.DBName.String()
		for _, t := range h.cur.tables {
			if strings.EqualFold(t.db, d) {
				remember(t.db, t.name)
				set(HistoryEntry{DB: t.db, Table: t.name, Dropped: true})
			}
		}
		set(HistoryEntry{DB: d, Dropped: true})
	}
	// A CREATE TABLE the history could not read creates the table all
	// the same.
	_, creating := stmt.(*sqlparser.CreateTable)
	entries := h.entries2(pending, order)
	for _, e := range entries {
		if e.Table == "" {
			continue
		}
		k := histKey(e.DB, e.Table)
		tc := TableChange{DB: e.DB, Table: e.Table, Before: before[k]}
		if !e.Dropped && !e.Unknown {
			if ent, err := schemadiff.NewCreateTableEntityFromSQL(h.env, e.Create); err == nil {
				dbs := h.pendingDBs(pending)
				tc.After, _ = h.toTable(&histTable{db: e.DB, name: e.Table, entity: ent}, state{dbs: dbs})
				if tc.After != nil {
					tc.Def = tableDef(ent, dbs[strings.ToLower(e.DB)])
				}
			}
		}
		switch {
		case e.Dropped:
			tc.Kind = "DROP"
		case tc.Before == nil && (!e.Unknown || creating):
			tc.Kind = "CREATE"
		default:
			tc.Kind = "ALTER"
		}
		changes = append(changes, tc)
	}
	return entries, changes
}

func (h *History) entries2(pending map[string]*HistoryEntry, order []string) []HistoryEntry {
	out := make([]HistoryEntry, 0, len(order))
	for _, k := range order {
		out = append(out, *pending[k])
	}
	return out
}

func (h *History) pendingDBs(pending map[string]*HistoryEntry) map[string]string {
	m := make(map[string]string, len(h.cur.dbs))
	for k, v := range h.cur.dbs {
		m[k] = v
	}
	for _, e := range pending {
		if e.Table == "" && !e.Dropped {
			m[strings.ToLower(e.DB)] = e.Charset
		}
	}
	return m
}

func (h *History) dbCharset(pending map[string]*HistoryEntry, db string) string {
	return h.pendingDBs(pending)[strings.ToLower(db)]
}

func (h *History) rename(fd, ft, td, tt string, entity func(d, t string) (*histTable, bool), set func(HistoryEntry), put func(string, string, *schemadiff.CreateTableEntity), unknown func(d, t, why string), remember func(d, t string)) {
	ht, ok := entity(fd, ft)
	if ok {
		remember(fd, ft)
		set(HistoryEntry{DB: fd, Table: ft, Dropped: true})
	}
	remember(td, tt)
	switch {
	case ok && ht.entity != nil:
		put(td, tt, ht.entity)
	case h.match(td, tt):
		unknown(td, tt, "the table renamed to it was not known")
	}
}

// defaultCharset gives a table definition without a character set the
// database's default (its columns' charset depends on it).
func (h *History) defaultCharset(ct *sqlparser.CreateTable, dbCharset string) {
	if ct.TableSpec == nil || dbCharset == "" {
		return
	}
	for _, o := range ct.TableSpec.Options {
		switch strings.ToLower(o.Name) {
		case "charset", "collate":
			return
		}
	}
	ct.TableSpec.Options = append(ct.TableSpec.Options, &sqlparser.TableOption{Name: "charset", String: dbCharset})
}

// alter applies an ALTER TABLE to ent: each option in the order written
// (as MySQL reads FIRST and AFTER), partition changes, and a rename. The
// forms schemadiff does not apply are rewritten into ones it does: CHANGE
// COLUMN is RENAME COLUMN then MODIFY COLUMN; CONVERT TO CHARACTER SET sets
// the table's and every character column's charset; options with no
// effect on the definition (LOCK, FORCE, ...) are left out.
func (h *History) alter(ent *schemadiff.CreateTableEntity, s *sqlparser.AlterTable, dbCharset string) (*schemadiff.CreateTableEntity, *sqlparser.TableName, error) {
	var newName *sqlparser.TableName
	cur := ent
	name := sqlparser.TableName{Name: ent.CreateTable.Table.Name}
	applyOne := func(opts []sqlparser.AlterOption, spec *sqlparser.PartitionSpec, po *sqlparser.PartitionOption) error {
		at := &sqlparser.AlterTable{Table: name, AlterOptions: opts, PartitionSpec: spec, PartitionOption: po, FullyParsed: true}
		next, err := cur.Apply(schemadiff.EntityDiffByStatement(at))
		if err != nil {
			return err
		}
		cur = next.(*schemadiff.CreateTableEntity)
		return nil
	}
	for _, opt := range s.AlterOptions {
		switch o := opt.(type) {
		case *sqlparser.RenameTableName:
			tn := o.Table
			newName = &tn
		case *sqlparser.ChangeColumn:
			if !strings.EqualFold(o.OldColumn.Name.String(), o.NewColDefinition.Name.String()) {
				rn := &sqlparser.RenameColumn{OldName: o.OldColumn, NewName: &sqlparser.ColName{Name: o.NewColDefinition.Name}}
				if err := applyOne([]sqlparser.AlterOption{rn}, nil, nil); err != nil {
					return nil, nil, err
				}
			}
			mc := &sqlparser.ModifyColumn{NewColDefinition: o.NewColDefinition, First: o.First, After: o.After}
			if err := applyOne([]sqlparser.AlterOption{mc}, nil, nil); err != nil {
				return nil, nil, err
			}
		case *sqlparser.AlterCharset:
			ct := sqlparser.CloneRefOfCreateTable(cur.CreateTable)
			cs, coll := strings.ToLower(o.CharacterSet), strings.ToLower(o.Collate)
			if cs == "" || cs == "default" {
				cs = dbCharset
			}
			var kept sqlparser.TableOptions
			for _, to := range ct.TableSpec.Options {
				if n := strings.ToLower(to.Name); n != "charset" && n != "collate" {
					kept = append(kept, to)
				}
			}
			kept = append(kept, &sqlparser.TableOption{Name: "charset", String: cs})
			if coll != "" {
				kept = append(kept, &sqlparser.TableOption{Name: "collate", String: coll})
			}
			ct.TableSpec.Options = kept
			for _, col := range ct.TableSpec.Columns {
				if isTextType(col.Type.Type) {
					col.Type.Charset = sqlparser.ColumnCharset{}
					if col.Type.Options != nil {
						col.Type.Options.Collate = ""
					}
				}
			}
			next, err := schemadiff.NewCreateTableEntity(h.env, ct)
			if err != nil {
				return nil, nil, err
			}
			cur = next
		case sqlparser.TableOptions:
			// A new default character set leaves the columns theirs:
			// those that inherited the old default keep it, spelled out
			// in the same edit (schemadiff's normal form drops a column
			// charset equal to the table's).
			var rest sqlparser.TableOptions
			var cs sqlparser.TableOptions
			for _, to := range o {
				if n := strings.ToLower(to.Name); n == "charset" || n == "collate" {
					cs = append(cs, to)
				} else {
					rest = append(rest, to)
				}
			}
			if len(cs) > 0 {
				old := entityCharset(cur, dbCharset)
				ct := sqlparser.CloneRefOfCreateTable(cur.CreateTable)
				if tableOptionsCharset(cs) != old {
					for _, col := range ct.TableSpec.Columns {
						if isTextType(col.Type.Type) && col.Type.Charset.Name == "" && (col.Type.Options == nil || col.Type.Options.Collate == "") {
							col.Type.Charset.Name = old
						}
					}
				}
				var kept sqlparser.TableOptions
				for _, to := range ct.TableSpec.Options {
					if n := strings.ToLower(to.Name); n != "charset" && n != "collate" {
						kept = append(kept, to)
					}
				}
				for _, to := range cs {
					c := *to
					c.Name = strings.ToLower(c.Name)
					if strings.EqualFold(c.String, "default") {
						c.String = dbCharset
					}
					kept = append(kept, &c)
				}
				ct.TableSpec.Options = kept
				next, err := schemadiff.NewCreateTableEntity(h.env, ct)
				if err != nil {
					return nil, nil, err
				}
				cur = next
			}
			if len(rest) > 0 {
				if err := applyOne([]sqlparser.AlterOption{rest}, nil, nil); err != nil {
					return nil, nil, err
				}
			}
		case *sqlparser.LockOption, *sqlparser.Force, *sqlparser.Validation, *sqlparser.OrderByOption, *sqlparser.KeyState, *sqlparser.TablespaceOperation, sqlparser.AlgorithmValue:
			// no effect on the definition
		default:
			if err := applyOne([]sqlparser.AlterOption{opt}, nil, nil); err != nil {
				return nil, nil, err
			}
		}
	}
	if s.PartitionSpec != nil || s.PartitionOption != nil {
		if err := applyOne(nil, s.PartitionSpec, s.PartitionOption); err != nil {
			if s.PartitionOption != nil {
				return nil, nil, err
			}
			// Partition maintenance (REORGANIZE, TRUNCATE, COALESCE,
			// EXCHANGE ...) never changes the columns: the definition
			// stays, its partition list may be stale.
			h.log.Debug("schema history: a partition change is not applied to the stored definition (columns are unchanged)", "table", name.Name.String(), "reason", err)
		}
	}
	return cur, newName, nil
}

// entityCharset is a table's default character set: its own, else its
// database's.
func entityCharset(e *schemadiff.CreateTableEntity, dbCharset string) string {
	cs := e.GetCharset()
	if cs == "" {
		if coll := e.GetCollation(); coll != "" {
			cs = charsetOfCollationName(coll)
		}
	}
	if cs == "" {
		cs = dbCharset
	}
	if cs == "" {
		cs = "utf8mb4"
	}
	if cs == "utf8" {
		cs = "utf8mb3"
	}
	return cs
}

// tableOptionsCharset is the character set table options set, or "".
func tableOptionsCharset(opts sqlparser.TableOptions) string {
	for _, o := range opts {
		switch strings.ToLower(o.Name) {
		case "charset":
			return strings.ToLower(o.String)
		case "collate":
			return charsetOfCollationName(strings.ToLower(o.String))
		}
	}
	return ""
}

func isTextType(t string) bool {
	switch strings.ToLower(t) {
	case "char", "varchar", "tinytext", "text", "mediumtext", "longtext", "enum", "set", "nchar", "nvarchar":
		return true
	}
	return false
}

func charsetOfCollationName(coll string) string {
	if coll == "binary" {
		return "binary"
	}
	if i := strings.IndexByte(coll, '_'); i > 0 {
		return coll[:i]
	}
	return coll
}

// toTable converts a history definition into the reader's Table: names,
// types, signedness, ENUM/SET members, each character column's charset
// (its own, else the table's, else the database's), nullability and the
// primary key. MariaDB's JSON is LONGTEXT holding JSON.
func (h *History) toTable(t *histTable, s state) (*Table, error) {
	spec := t.entity.CreateTable.TableSpec
	out := &Table{Schema: t.db, Name: t.name}
	tableCS := entityCharset(t.entity, s.dbs[strings.ToLower(t.db)])
	// schemadiff's normal form gives a column whose charset is spelled
	// out and equals the table's the environment's default collation;
	// such a column has the table's charset.
	envColl := h.env.CollationEnv().LookupName(h.env.DefaultColl)
	jsonChecked := map[string]bool{}
	for _, c := range spec.Constraints {
		// The grammar reads json_valid(c) as a JSON attribute function.
		if chk, ok := c.Details.(*sqlparser.CheckConstraintDefinition); ok {
			if f, ok := chk.Expr.(*sqlparser.JSONAttributesExpr); ok && f.Type == sqlparser.ValidAttributeType && f.Path == nil {
				if cn, ok := f.JSONDoc.(*sqlparser.ColName); ok {
					jsonChecked[cn.Name.Lowered()] = true
				}
			}
		}
	}
	for _, cd := range spec.Columns {
		ty := strings.ToLower(cd.Type.Type)
		col := Column{Name: cd.Name.String(), Unsigned: cd.Type.Unsigned, Nullable: true}
		if cd.Type.Options != nil && cd.Type.Options.Null != nil {
			col.Nullable = *cd.Type.Options.Null
		}
		col.Default, _ = columnDefault(cd)
		col.Type = typeFromInfoSchema(ty)
		col.Point = ty == "point"
		col.UUID = ty == "uuid"
		col.FloatMD = ty == "float" && cd.Type.Scale != nil
		if cd.Type.Options != nil && cd.Type.Options.Comment != nil {
			col.Comment = cd.Type.Options.Comment.Val
		}
		switch ty {
		case "integer":
			col.Type = mysql.MYSQL_TYPE_LONG
		case "dec", "fixed":
			col.Type = mysql.MYSQL_TYPE_NEWDECIMAL
		case "nchar":
			col.Type = mysql.MYSQL_TYPE_STRING
		case "nvarchar":
			col.Type = mysql.MYSQL_TYPE_VARCHAR
		}
		if col.Type == mysql.MYSQL_TYPE_NULL {
			return nil, fmt.Errorf("column %s: type %s is not known to the history", col.Name, ty)
		}
		switch col.Type {
		case mysql.MYSQL_TYPE_ENUM:
			col.Enum = unquoteMembers(cd.Type.EnumValues)
		case mysql.MYSQL_TYPE_SET:
			col.Set = unquoteMembers(cd.Type.EnumValues)
		}
		if col.Type == mysql.MYSQL_TYPE_JSON && h.mariaDB {
			col.Type = mysql.MYSQL_TYPE_BLOB
			col.jsonText = true
			col.Charset = "utf8mb4"
		}
		if jsonChecked[cd.Name.Lowered()] && h.mariaDB {
			col.jsonText = true
		}
		switch {
		case isTextType(ty):
			switch {
			case cd.Type.Charset.Name != "":
				col.Charset = strings.ToLower(cd.Type.Charset.Name)
			case cd.Type.Options != nil && cd.Type.Options.Collate != "" && !strings.EqualFold(cd.Type.Options.Collate, envColl):
				col.Charset = charsetOfCollationName(strings.ToLower(cd.Type.Options.Collate))
			case ty == "nchar" || ty == "nvarchar":
				col.Charset = "utf8mb3"
			default:
				col.Charset = tableCS
			}
			if col.Charset == "utf8" {
				col.Charset = "utf8mb3"
			}
		case ty == "binary" || ty == "varbinary" || strings.HasSuffix(ty, "blob"):
			col.Charset = "binary"
		}
		out.Columns = append(out.Columns, col)
	}
	for _, idx := range spec.Indexes {
		if idx.Info == nil || idx.Info.Type != sqlparser.IndexTypePrimary {
			continue
		}
		for _, ic := range idx.Columns {
			if j := out.ColumnIndex(ic.Column.String()); j >= 0 {
				out.PrimaryKey = append(out.PrimaryKey, j)
				out.Columns[j].Nullable = false
			}
		}
	}
	return out, nil
}

// unquoteMembers reads ENUM/SET members as the grammar keeps them: quoted
// SQL strings.
func unquoteMembers(vals []string) []string {
	out := make([]string, len(vals))
	for i, v := range vals {
		if len(v) >= 2 && (v[0] == '\'' || v[0] == '"') && v[len(v)-1] == v[0] {
			members := ParseMembers("(" + v + ")")
			if len(members) == 1 {
				out[i] = members[0]
				continue
			}
		}
		out[i] = v
	}
	return out
}

// TypeName is the SQL name of a column's type as the history and
// information_schema know it ("INT", "VARCHAR", "TEXT", "ENUM"...).
func (c *Column) TypeName() string {
	if c.jsonText {
		return "JSON"
	}
	n := typeName(c.Type)
	if c.Type == mysql.MYSQL_TYPE_BLOB && c.Charset != "" && c.Charset != "binary" {
		n = "TEXT"
	}
	if c.Type == mysql.MYSQL_TYPE_VARCHAR && c.Charset == "binary" {
		n = "VARBINARY"
	}
	if c.Type == mysql.MYSQL_TYPE_STRING && c.Charset == "binary" {
		n = "BINARY"
	}
	return n
}
