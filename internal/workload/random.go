package workload

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sluice-cdc/sluice/internal/testenv/throwaway"
	"github.com/sluice-cdc/sluice/mysqlconn"
	"github.com/sluice-cdc/sluice/position"
)

// The randomized workload of the differential tests.
//
// Random draws, from a seed, a sequence of steps on the database
// RandomDB and runs them on a real server, one after another: multi-table
// transactions (inserts, updates of values and of primary keys, deletes,
// range updates), savepoints with ROLLBACK TO, rolled back transactions,
// XA transactions (committed or rolled back at once, from another
// connection later with other transactions between, MySQL's and MariaDB's
// XA COMMIT ... ONE PHASE), transactions larger than the reader's chunk,
// DDL between them (ALTER TABLE ADD/DROP COLUMN, CREATE TABLE, CREATE
// TABLE ... SELECT, DROP TABLE, a DDL statement ending a transaction by
// an implicit commit) and, when asked, sessions that switch to
// binlog_format=STATEMENT for their DML.
//
// Every transaction that changes rows inserts a row of its own into
// RandomDB.txlog (its marker, n), so the output shows which transactions
// came out and how often. After every step Random reads the server's GTID
// state: the Expectation it returns says, by GTID, which transactions a
// reader must deliver (with their marker, or as DDL) and which never (XA
// prepared parts, XA ROLLBACK, statement-logged transactions), and which
// markers must appear exactly once and which never. CheckRandom compares
// a pipeline's output with it and with SELECT of every table.

// RandomDB is the database the random workload writes.
const RandomDB = "rnd"

// RandomOptions says what the random workload may do.
type RandomOptions struct {
	// Steps is how many steps to draw (default 50).
	Steps int
	// Statement adds transactions a session writes with
	// binlog_format=STATEMENT: into RandomDB.sbr (and their markers) and
	// CREATE TABLE RandomDB.sbrN ... SELECT,
	// never into the other tables, so that with on_statement_change: skip
	// the other tables still match the server.
	Statement bool
	// BigRows is the row count of a large transaction (default 3000 rows
	// of about 450 bytes: more than the reader's 1 MiB chunk).
	BigRows int
}

// Delivery is what a reader must deliver for one GTID.
type Delivery struct {
	Marker int    // the txlog marker the transaction carries; 0 for DDL alone
	DDL    string // the DDL statement's start, for DDL
	What   string // the step that wrote it, for messages
}

// Expectation is what a correct reader delivers of a random workload.
type Expectation struct {
	Seed int64
	// Deliver maps each GTID to deliver to what it carries; Never maps
	// the GTIDs that must never appear to why.
	Deliver map[string]Delivery
	Never   map[string]string
	// Markers are the committed transactions' markers (each must appear
	// once); Gone the rolled back or statement-logged ones (never).
	Markers map[int]string
	Gone    map[int]string
	// StatementSteps counts the statement-logged DML statements on
	// captured tables; the first one's GTID is FirstStatement.
	StatementSteps int
	FirstStatement string
	// BeforeStatement is Deliver as it was just before the first
	// statement-logged transaction: what a source that stops there may
	// have delivered (nil without one).
	BeforeStatement map[string]Delivery
	// Log lists the steps, for failure messages.
	Log []string
}

// TableRows is a table's rows by primary key (id, as decimal text): each
// row's columns as text, nil for NULL.
type TableRows map[string]map[string]*string

type rndTable struct {
	ids   map[int]bool
	added []string // columns added by ALTER TABLE, in order
}

type rndXA struct {
	xid    string
	marker int
	model  map[string]*rndTable // the tables as the transaction leaves them
	locked []lockKey
	what   string
}

type lockKey struct {
	table string
	id    int
}

type randomRun struct {
	ctx    context.Context
	db     *throwaway.Server
	rng    *rand.Rand
	opts   RandomOptions
	conn   *mysqlconn.Conn
	tables map[string]*rndTable
	locked map[lockKey]bool // rows held by prepared XA transactions
	xa     []*rndXA         // prepared, detached, not yet finished
	nextID int
	marker int
	nextT  int
	nextC  int
	gtid   struct {
		prefix string
		last   int64
	}
	exp *Expectation
}

// Random runs a random workload drawn from seed on db and returns what a
// reader must deliver of it. The database RandomDB is created afresh (an
// old one dropped first); the caller's reader should start at the
// position Random reports through start, called after the setup and
// before the first step.
func Random(ctx context.Context, db *throwaway.Server, seed int64, opts RandomOptions, start func() error) (*Expectation, error) {
	if opts.Steps <= 0 {
		opts.Steps = 50
	}
	if opts.BigRows <= 0 {
		opts.BigRows = 3000
	}
	w := &randomRun{ctx: ctx, db: db, rng: rand.New(rand.NewPCG(uint64(seed), 0x5eed)), opts: opts,
		tables: map[string]*rndTable{}, locked: map[lockKey]bool{}, nextID: 1,
		exp: &Expectation{Seed: seed, Deliver: map[string]Delivery{}, Never: map[string]string{}, Markers: map[int]string{}, Gone: map[int]string{}}}
	c, err := db.Conn(ctx)
	if err != nil {
		return nil, err
	}
	defer func() { w.conn.Close() }()
	w.conn = c
	setup := []string{
		"DROP DATABASE IF EXISTS " + RandomDB, "CREATE DATABASE " + RandomDB + " CHARACTER SET utf8mb4", "USE " + RandomDB,
		"CREATE TABLE txlog (n INT PRIMARY KEY, what VARCHAR(64) NOT NULL)",
		"CREATE TABLE sbr (id INT PRIMARY KEY, v INT)",
	}
	for range 3 {
		setup = append(setup, w.createSQL(w.newTable()))
	}
	if err := w.exec(setup...); err != nil {
		return nil, err
	}
	if err := w.session(); err != nil {
		return nil, err
	}
	if err := w.readGTID(nil); err != nil {
		return nil, err
	}
	if err := start(); err != nil {
		return nil, err
	}
	for i := 0; i < opts.Steps; i++ {
		if err := w.step(); err != nil {
			return w.exp, fmt.Errorf("seed %d step %d: %w\nsteps so far:\n%s\nsessions:\n%s", seed, i, err, strings.Join(w.exp.Log, "\n"), w.sessions())
		}
	}
	for len(w.xa) > 0 { // every prepared transaction ends
		if err := w.finishXA(0, w.rng.IntN(4) > 0); err != nil {
			return w.exp, err
		}
	}
	m := w.newMarker()
	if err := w.txn("the last transaction", m, nil, true); err != nil {
		return w.exp, err
	}
	return w.exp, nil
}

// LastMarker returns the marker of the workload's last transaction: once
// it is in the output, everything before it is too.
func (e *Expectation) LastMarker() int {
	last := 0
	for m := range e.Markers {
		last = max(last, m)
	}
	return last
}

// sessions lists the server's sessions and prepared XA transactions, for
// a step that waited too long for a lock.
func (w *randomRun) sessions() string {
	c, err := w.db.Conn(w.ctx)
	if err != nil {
		return err.Error()
	}
	defer c.Close()
	var b strings.Builder
	for _, q := range []string{"SELECT id, user, db, command, time, state, LEFT(info, 120) FROM information_schema.processlist", "XA RECOVER"} {
		rs, err := c.Execute(q)
		if err != nil {
			fmt.Fprintf(&b, "%s: %v\n", q, err)
			continue
		}
		for i := range rs.RowNumber() {
			var cols []string
			for j := range rs.ColumnNumber() {
				s, _ := rs.GetString(i, j)
				cols = append(cols, s)
			}
			b.WriteString(strings.Join(cols, " | ") + "\n")
		}
	}
	return b.String()
}

func (w *randomRun) session() error {
	return w.exec("SET NAMES utf8mb4", "SET SESSION innodb_lock_wait_timeout = 20", "SET SESSION lock_wait_timeout = 20")
}

func (w *randomRun) exec(stmts ...string) error {
	for _, s := range stmts {
		if _, err := w.conn.Execute(s); err != nil {
			return fmt.Errorf("%.200s: %w", s, err)
		}
	}
	return nil
}

func (w *randomRun) newTable() string {
	w.nextT++
	name := "t" + strconv.Itoa(w.nextT)
	w.tables[name] = &rndTable{ids: map[int]bool{}}
	return name
}

func (w *randomRun) createSQL(name string) string {
	return "CREATE TABLE " + RandomDB + "." + name + " (id INT PRIMARY KEY, a INT, s VARCHAR(64), d DECIMAL(10,2), pad TEXT) DEFAULT CHARSET=utf8mb4"
}

func (w *randomRun) newMarker() int {
	w.marker++
	return w.marker
}

// readGTID reads the server's GTID state and returns the GTIDs committed
// since the last call, in order (into got).
func (w *randomRun) readGTID(got *[]string) error {
	q := "SELECT @@GLOBAL.gtid_binlog_pos"
	if w.db.Flavor == position.MySQL {
		q = "SELECT @@GLOBAL.gtid_executed"
	}
	rs, err := w.conn.Execute(q)
	if err != nil {
		return err
	}
	s, _ := rs.GetString(0, 0)
	s = position.CompactGTIDs(s)
	if strings.Contains(s, ",") {
		return fmt.Errorf("GTID state %q has several domains or servers: the random workload needs one", s)
	}
	cut := strings.LastIndexAny(s, "-:")
	if cut < 0 {
		return fmt.Errorf("GTID state %q", s)
	}
	n, err := strconv.ParseInt(s[cut+1:], 10, 64)
	if err != nil {
		return fmt.Errorf("GTID state %q: %w", s, err)
	}
	prefix := s[:cut+1]
	if w.db.Flavor == position.MySQL {
		prefix = s[:strings.IndexByte(s, ':')+1]
	}
	if got != nil {
		for g := w.gtid.last + 1; g <= n; g++ {
			*got = append(*got, prefix+strconv.FormatInt(g, 10))
		}
	}
	w.gtid.prefix, w.gtid.last = prefix, n
	return nil
}

// expectGTIDs reads the GTIDs a step committed and checks their number.
func (w *randomRun) expectGTIDs(what string, n int) ([]string, error) {
	var got []string
	if err := w.readGTID(&got); err != nil {
		return nil, err
	}
	if len(got) != n {
		return got, fmt.Errorf("%s committed %d GTIDs (%v), the workload expected %d", what, len(got), got, n)
	}
	return got, nil
}

func (w *randomRun) logf(format string, args ...any) string {
	s := fmt.Sprintf(format, args...)
	w.exp.Log = append(w.exp.Log, s)
	return s
}

func cloneModel(m map[string]*rndTable) map[string]*rndTable {
	out := make(map[string]*rndTable, len(m))
	for k, t := range m {
		out[k] = &rndTable{ids: maps.Clone(t.ids), added: slices.Clone(t.added)}
	}
	return out
}

// free returns the ids of t that no prepared transaction holds, sorted.
func (w *randomRun) free(model map[string]*rndTable, name string) []int {
	var ids []int
	for id := range model[name].ids {
		if !w.locked[lockKey{name, id}] {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return ids
}

func (w *randomRun) tableNames(model map[string]*rndTable) []string {
	names := slices.Collect(maps.Keys(model))
	slices.Sort(names)
	return names
}

func (w *randomRun) value() string {
	if w.rng.IntN(8) == 0 {
		return "NULL"
	}
	return strconv.Itoa(w.rng.IntN(2000) - 1000)
}

func (w *randomRun) text() string {
	if w.rng.IntN(8) == 0 {
		return "NULL"
	}
	words := []string{"alpha", "béta", "gamma", "δέλτα", "e", "x'y", `q"uote`, "back\\\\slash", "naïve", "z"}
	return "'" + strings.ReplaceAll(words[w.rng.IntN(len(words))], "'", "''") + strconv.Itoa(w.rng.IntN(100)) + "'"
}

func (w *randomRun) decimal() string {
	if w.rng.IntN(8) == 0 {
		return "NULL"
	}
	return fmt.Sprintf("%d.%02d", w.rng.IntN(20000)-10000, w.rng.IntN(100))
}

// ops draws 1..max row changes on model (which they change), holding
// the rows they touch in held when it is not nil.
func (w *randomRun) ops(model map[string]*rndTable, maxOps int, held *[]lockKey) []string {
	var out []string
	names := w.tableNames(model)
	for range 1 + w.rng.IntN(maxOps) {
		name := names[w.rng.IntN(len(names))]
		t := model[name]
		ids := w.free(model, name)
		full := RandomDB + "." + name
		hold := func(id int) {
			if held != nil {
				*held = append(*held, lockKey{name, id})
			}
		}
		switch k := w.rng.IntN(10); {
		case k < 4 || len(ids) == 0: // insert one or a few rows
			var rows []string
			for range 1 + w.rng.IntN(3) {
				id := w.nextID
				w.nextID++
				t.ids[id] = true
				hold(id)
				rows = append(rows, fmt.Sprintf("(%d, %s, %s, %s, REPEAT('p', %d))", id, w.value(), w.text(), w.decimal(), w.rng.IntN(50)))
			}
			out = append(out, "INSERT INTO "+full+" (id, a, s, d, pad) VALUES "+strings.Join(rows, ", "))
		case k < 6: // update values
			id := ids[w.rng.IntN(len(ids))]
			hold(id)
			set := fmt.Sprintf("a = %s, s = %s", w.value(), w.text())
			if len(t.added) > 0 && w.rng.IntN(2) == 0 {
				set += fmt.Sprintf(", %s = %s", t.added[w.rng.IntN(len(t.added))], w.value())
			}
			out = append(out, fmt.Sprintf("UPDATE %s SET %s WHERE id = %d", full, set, id))
		case k < 8: // change the primary key
			id := ids[w.rng.IntN(len(ids))]
			nid := w.nextID
			w.nextID++
			delete(t.ids, id)
			t.ids[nid] = true
			hold(id)
			hold(nid)
			out = append(out, fmt.Sprintf("UPDATE %s SET id = %d, d = %s WHERE id = %d", full, nid, w.decimal(), id))
		case k < 9 && held == nil && len(w.locked) == 0 && len(ids) > 1: // a range (locks gaps: never beside a prepared transaction)
			lo := ids[w.rng.IntN(len(ids))]
			out = append(out, fmt.Sprintf("UPDATE %s SET a = COALESCE(a, 0) + 1 WHERE id BETWEEN %d AND %d", full, lo, lo+w.rng.IntN(20)))
		default:
			id := ids[w.rng.IntN(len(ids))]
			delete(t.ids, id)
			hold(id)
			out = append(out, fmt.Sprintf("DELETE FROM %s WHERE id = %d", full, id))
		}
	}
	return out
}

func markerSQL(m int, what string) string {
	return fmt.Sprintf("INSERT INTO %s.txlog VALUES (%d, '%s')", RandomDB, m, what)
}

// txn commits (or, with commit false, rolls back) one transaction of
// stmts plus its marker m.
func (w *randomRun) txn(what string, m int, stmts []string, commit bool) error {
	end := "COMMIT"
	if !commit {
		end = "ROLLBACK"
	}
	all := append(append([]string{"BEGIN"}, stmts...), markerSQL(m, what), end)
	if err := w.exec(all...); err != nil {
		return err
	}
	n := 1
	if !commit {
		n = 0
	}
	got, err := w.expectGTIDs(what, n)
	if err != nil {
		return err
	}
	desc := w.logf("%s (marker %d, %d statements) %v", what, m, len(stmts), got)
	if commit {
		w.exp.Deliver[got[0]] = Delivery{Marker: m, What: desc}
		w.exp.Markers[m] = desc
	} else {
		w.exp.Gone[m] = desc
	}
	return nil
}

func (w *randomRun) step() error {
	pending := len(w.xa) > 0
	k := w.rng.IntN(100)
	// DDL, large transactions and implicit commits wait for the prepared
	// XA transactions (they would wait for their locks).
	if pending && k >= 66 && k < 90 || !w.opts.Statement && k >= 90 && k < 96 || !pending && k >= 62 && k < 66 {
		k = 99
	}
	switch {
	case k < 30:
		model := cloneModel(w.tables)
		stmts := w.ops(model, 6, nil)
		if err := w.txn("a transaction", w.newMarker(), stmts, true); err != nil {
			return err
		}
		w.tables = model
	case k < 38: // savepoints
		model := cloneModel(w.tables)
		stmts := w.ops(model, 3, nil)
		stmts = append(stmts, "SAVEPOINT s1")
		saved := cloneModel(model)
		stmts = append(stmts, w.ops(model, 3, nil)...)
		stmts = append(stmts, "ROLLBACK TO SAVEPOINT s1")
		model = saved
		stmts = append(stmts, w.ops(model, 3, nil)...)
		if err := w.txn("savepoint and ROLLBACK TO", w.newMarker(), stmts, true); err != nil {
			return err
		}
		w.tables = model
	case k < 44:
		model := cloneModel(w.tables)
		if err := w.txn("a rolled back transaction", w.newMarker(), w.ops(model, 5, nil), false); err != nil {
			return err
		}
	case k < 62:
		return w.xaStep()
	case k < 66:
		return w.finishXA(w.rng.IntN(len(w.xa)), w.rng.IntN(3) > 0)
	case k < 70:
		return w.bigTxn()
	case k < 85:
		return w.ddlStep()
	case k < 90:
		return w.implicitCommit()
	case k < 96:
		return w.statementTxn()
	default:
		model := cloneModel(w.tables)
		stmts := w.ops(model, 2, nil)
		if err := w.txn("a small transaction", w.newMarker(), stmts, true); err != nil {
			return err
		}
		w.tables = model
	}
	return nil
}

// xaStep runs an XA transaction: prepared and committed or rolled back on
// its connection, one phase, or prepared on a connection then closed
// (finished later by finishXA, from another connection).
func (w *randomRun) xaStep() error {
	m := w.newMarker()
	xid := fmt.Sprintf("x%d-%d", w.exp.Seed, m)
	model := cloneModel(w.tables)
	var held []lockKey
	stmts := w.ops(model, 5, &held)
	c, err := w.db.Conn(w.ctx)
	if err != nil {
		return err
	}
	run := func(stmts ...string) error {
		for _, s := range stmts {
			if _, err := c.Execute(s); err != nil {
				return fmt.Errorf("%.200s: %w", s, err)
			}
		}
		return nil
	}
	body := append(append([]string{"SET SESSION innodb_lock_wait_timeout = 20", "XA START '" + xid + "'"}, stmts...), markerSQL(m, "xa "+xid), "XA END '"+xid+"'")
	if err := run(body...); err != nil {
		c.Close()
		return err
	}
	switch how := w.rng.IntN(10); {
	case how < 2: // one phase
		err := run("XA COMMIT '" + xid + "' ONE PHASE")
		c.Close()
		if err != nil {
			return err
		}
		got, err := w.expectGTIDs("XA one phase", 1)
		if err != nil {
			return err
		}
		desc := w.logf("XA %s ONE PHASE (marker %d) %v", xid, m, got)
		w.exp.Deliver[got[0]] = Delivery{Marker: m, What: desc}
		w.exp.Markers[m] = desc
		w.tables = model
		return nil
	case how < 5: // prepare, then commit or roll back on the same connection
		commit := how < 4
		end := "XA COMMIT '" + xid + "'"
		if !commit {
			end = "XA ROLLBACK '" + xid + "'"
		}
		err := run("XA PREPARE '"+xid+"'", end)
		c.Close()
		if err != nil {
			return err
		}
		got, err := w.expectGTIDs("XA prepare and "+end, 2)
		if err != nil {
			return err
		}
		desc := w.logf("XA %s prepared then %s (marker %d) %v", xid, end, m, got)
		w.exp.Never[got[0]] = "the prepared part of " + desc
		if commit {
			w.exp.Deliver[got[1]] = Delivery{Marker: m, What: desc}
			w.exp.Markers[m] = desc
			w.tables = model
		} else {
			w.exp.Never[got[1]] = desc
			w.exp.Gone[m] = desc
		}
		return nil
	default: // prepared and left: finished later, by another connection
		err := run("XA PREPARE '" + xid + "'")
		c.Close()
		if err != nil {
			return err
		}
		got, err := w.expectGTIDs("XA prepare", 1)
		if err != nil {
			return err
		}
		desc := w.logf("XA %s prepared, connection closed (marker %d) %v", xid, m, got)
		w.exp.Never[got[0]] = "the prepared part of " + desc
		for _, k := range held {
			w.locked[k] = true
		}
		w.xa = append(w.xa, &rndXA{xid: xid, marker: m, model: model, locked: held, what: desc})
		return nil
	}
}

// finishXA commits or rolls back the prepared transaction w.xa[i] from
// the workload's connection. MariaDB answers XAER_NOTA (1397) until the
// server has detached the transaction from its closed connection.
func (w *randomRun) finishXA(i int, commit bool) error {
	x := w.xa[i]
	w.xa = slices.Delete(w.xa, i, i+1)
	stmt := "XA COMMIT '" + x.xid + "'"
	if !commit {
		stmt = "XA ROLLBACK '" + x.xid + "'"
	}
	if err := XAFinish(w.ctx, w.conn, stmt); err != nil {
		return err
	}
	for _, k := range x.locked {
		delete(w.locked, k)
	}
	got, err := w.expectGTIDs(stmt, 1)
	if err != nil {
		return err
	}
	desc := w.logf("%s from another connection (marker %d) %v", stmt, x.marker, got)
	if commit {
		w.exp.Deliver[got[0]] = Delivery{Marker: x.marker, What: desc}
		w.exp.Markers[x.marker] = desc
		// Only its rows changed since it was prepared (it held them), so
		// its view of them stands; other tables as they are now.
		for name, t := range x.model {
			cur, ok := w.tables[name]
			if !ok {
				continue
			}
			for _, k := range x.locked {
				if k.table != name {
					continue
				}
				if t.ids[k.id] {
					cur.ids[k.id] = true
				} else {
					delete(cur.ids, k.id)
				}
			}
		}
	} else {
		w.exp.Never[got[0]] = desc
		w.exp.Gone[x.marker] = desc
	}
	return nil
}

// XAFinish runs an XA COMMIT or XA ROLLBACK of a transaction prepared on
// a connection just closed, on c, retrying MariaDB's XAER_NOTA (error
// 1397) for up to 5 s: the server detaches the transaction from the
// closed connection a moment after the client has gone.
func XAFinish(ctx context.Context, c *mysqlconn.Conn, stmt string) error {
	deadline := time.Now().Add(5 * time.Second)
	for {
		_, err := c.Execute(stmt)
		if err == nil {
			return nil
		}
		if !strings.Contains(err.Error(), "1397") || time.Now().After(deadline) {
			return fmt.Errorf("%s: %w", stmt, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// bigTxn inserts BigRows rows in one transaction (sometimes an XA one),
// more than one chunk of the reader.
func (w *randomRun) bigTxn() error {
	names := w.tableNames(w.tables)
	name := names[w.rng.IntN(len(names))]
	first := w.nextID
	w.nextID += w.opts.BigRows
	from, setup := w.db.SeqFrom(first, first+w.opts.BigRows-1)
	ins := fmt.Sprintf("INSERT INTO %s.%s (id, a, s, d, pad) SELECT seq, seq %% 1000, CONCAT('big', seq), seq / 100, REPEAT('b', 400) FROM %s", RandomDB, name, from)
	if err := w.exec(setup...); err != nil {
		return err
	}
	m := w.newMarker()
	var got []string
	what := fmt.Sprintf("a large transaction of %d rows into %s", w.opts.BigRows, name)
	if w.rng.IntN(2) == 0 {
		if err := w.txn(what, m, []string{ins}, true); err != nil {
			return err
		}
	} else {
		xid := fmt.Sprintf("big%d-%d", w.exp.Seed, m)
		if err := w.exec("XA START '"+xid+"'", ins, markerSQL(m, "big xa"), "XA END '"+xid+"'", "XA PREPARE '"+xid+"'", "XA COMMIT '"+xid+"'"); err != nil {
			return err
		}
		var err error
		if got, err = w.expectGTIDs("a large XA transaction", 2); err != nil {
			return err
		}
		desc := w.logf("%s as XA %s (marker %d) %v", what, xid, m, got)
		w.exp.Never[got[0]] = "the prepared part of " + desc
		w.exp.Deliver[got[1]] = Delivery{Marker: m, What: desc}
		w.exp.Markers[m] = desc
	}
	for id := first; id < first+w.opts.BigRows; id++ {
		w.tables[name].ids[id] = true
	}
	return nil
}

// ddl runs one DDL statement (no transaction may be pending) and expects
// it delivered.
func (w *randomRun) ddl(stmt string) error {
	if err := w.exec(stmt); err != nil {
		return err
	}
	got, err := w.expectGTIDs(stmt, 1)
	if err != nil {
		return err
	}
	desc := w.logf("%s %v", stmt, got)
	w.exp.Deliver[got[0]] = Delivery{DDL: stmt, What: desc}
	return nil
}

func (w *randomRun) ddlStep() error {
	names := w.tableNames(w.tables)
	name := names[w.rng.IntN(len(names))]
	t := w.tables[name]
	full := RandomDB + "." + name
	switch k := w.rng.IntN(10); {
	case k < 3:
		w.nextC++
		col := "c" + strconv.Itoa(w.nextC)
		def := ""
		if w.rng.IntN(2) == 0 {
			def = " DEFAULT " + strconv.Itoa(w.rng.IntN(100))
		}
		if err := w.ddl("ALTER TABLE " + full + " ADD COLUMN " + col + " INT" + def); err != nil {
			return err
		}
		t.added = append(t.added, col)
	case k < 5 && len(t.added) > 0:
		i := w.rng.IntN(len(t.added))
		if err := w.ddl("ALTER TABLE " + full + " DROP COLUMN " + t.added[i]); err != nil {
			return err
		}
		t.added = slices.Delete(t.added, i, i+1)
	case k < 7:
		return w.ddl(w.createSQL(w.newTable()))
	case k < 8: // CREATE TABLE ... SELECT: the DDL and its rows in one transaction
		src := t
		nt := w.newTable()
		if err := w.ddl(fmt.Sprintf("CREATE TABLE %s.%s (PRIMARY KEY (id)) SELECT * FROM %s", RandomDB, nt, full)); err != nil {
			return err
		}
		w.tables[nt] = &rndTable{ids: maps.Clone(src.ids), added: slices.Clone(src.added)}
	case len(names) > 2:
		if err := w.ddl("DROP TABLE " + full); err != nil {
			return err
		}
		delete(w.tables, name)
	default:
		return w.ddl(w.createSQL(w.newTable()))
	}
	return nil
}

// implicitCommit writes rows in a transaction that a DDL statement ends:
// the rows commit as one transaction, the DDL is another.
func (w *randomRun) implicitCommit() error {
	m := w.newMarker()
	model := cloneModel(w.tables)
	stmts := w.ops(model, 4, nil)
	nt := w.newTable()
	ddl := w.createSQL(nt)
	all := append(append([]string{"BEGIN"}, stmts...), markerSQL(m, "implicit commit"), ddl)
	if err := w.exec(all...); err != nil {
		return err
	}
	got, err := w.expectGTIDs("an implicit commit", 2)
	if err != nil {
		return err
	}
	desc := w.logf("rows ended by the implicit commit of %s (marker %d) %v", nt, m, got)
	w.exp.Deliver[got[0]] = Delivery{Marker: m, What: desc}
	w.exp.Markers[m] = desc
	w.exp.Deliver[got[1]] = Delivery{DDL: ddl, What: desc}
	model[nt] = w.tables[nt]
	w.tables = model
	return nil
}

// statementTxn writes RandomDB.sbr and a marker from a session with
// binlog_format=STATEMENT.
func (w *randomRun) statementTxn() error {
	if w.exp.BeforeStatement == nil {
		w.exp.BeforeStatement = maps.Clone(w.exp.Deliver)
	}
	if len(w.xa) == 0 && w.rng.IntN(3) == 0 {
		// CREATE TABLE ... SELECT logged as that statement: delivered as
		// DDL (with skip), without the rows it copies. Its table is named
		// sbr..., left out of the comparison like sbr. (It reads its source
		// with shared locks: never beside a prepared transaction.)
		names := w.tableNames(w.tables)
		w.nextT++
		stmt := fmt.Sprintf("CREATE TABLE %s.sbr%d SELECT * FROM %s.%s", RandomDB, w.nextT, RandomDB, names[w.rng.IntN(len(names))])
		if err := w.exec("SET SESSION binlog_format = 'STATEMENT'", stmt, "SET SESSION binlog_format = 'ROW'"); err != nil {
			return err
		}
		got, err := w.expectGTIDs(stmt, 1)
		if err != nil {
			return err
		}
		desc := w.logf("binlog_format=STATEMENT: %s %v", stmt, got)
		if w.exp.FirstStatement == "" {
			w.exp.FirstStatement = got[0]
		}
		w.exp.StatementSteps++
		w.exp.Deliver[got[0]] = Delivery{DDL: stmt, What: desc}
		return nil
	}
	m := w.newMarker()
	id := w.nextID
	w.nextID++
	if err := w.exec("SET SESSION binlog_format = 'STATEMENT'", "BEGIN",
		fmt.Sprintf("INSERT INTO %s.sbr VALUES (%d, %d)", RandomDB, id, m),
		fmt.Sprintf("UPDATE %s.sbr SET v = v + 1 WHERE id = %d", RandomDB, id),
		markerSQL(m, "statement"), "COMMIT", "SET SESSION binlog_format = 'ROW'"); err != nil {
		return err
	}
	got, err := w.expectGTIDs("a statement-logged transaction", 1)
	if err != nil {
		return err
	}
	desc := w.logf("binlog_format=STATEMENT: INSERT, UPDATE of sbr and the marker (marker %d) %v", m, got)
	if w.exp.FirstStatement == "" {
		w.exp.FirstStatement = got[0]
	}
	w.exp.StatementSteps += 3
	w.exp.Never[got[0]] = desc
	w.exp.Gone[m] = desc
	return nil
}

// SelectAll reads every table of RandomDB but sbr...: rows by id, columns as
// text (nil for NULL).
func SelectAll(ctx context.Context, c *mysqlconn.Conn) (map[string]TableRows, error) {
	rs, err := c.Execute("SELECT table_name FROM information_schema.tables WHERE table_schema = '" + RandomDB + "' AND table_name NOT LIKE 'sbr%'")
	if err != nil {
		return nil, err
	}
	var names []string
	for i := range rs.RowNumber() {
		s, _ := rs.GetString(i, 0)
		names = append(names, s)
	}
	out := map[string]TableRows{}
	for _, name := range names {
		rs, err := c.Execute("SELECT * FROM " + RandomDB + "." + name)
		if err != nil {
			return nil, err
		}
		rows := TableRows{}
		key := "id"
		if name == "txlog" {
			key = "n"
		}
		for i := range rs.RowNumber() {
			row := map[string]*string{}
			for j := range rs.ColumnNumber() {
				name := rs.ColumnName(j)
				if null, _ := rs.IsNull(i, j); null {
					row[name] = nil
					continue
				}
				s, _ := rs.GetString(i, j)
				row[name] = &s
			}
			rows[*row[key]] = row
		}
		out[name] = rows
	}
	return out, nil
}
