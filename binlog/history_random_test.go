package binlog_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluice-cdc/sluice/binlog"
	"github.com/sluice-cdc/sluice/codec"
	"github.com/sluice-cdc/sluice/internal/testenv"
	"github.com/sluice-cdc/sluice/internal/workload"
	"github.com/sluice-cdc/sluice/position"
)

// A random DDL workload for the schema history: tables whose columns are
// added, dropped, renamed, retyped, reordered and recharset, tables
// renamed, created (also LIKE another), dropped and partitioned, with
// rows written between. The test keeps a model of every table and of
// every row image the server must log, so each decoded image is checked,
// the old ones too, not only the final state.

type hcol struct {
	name, typ string // typ: INT, BIGINT, VARCHAR(20), TEXT, ENUM('a','b')...
	charset   string // "" inherits
}

type htable struct {
	cols []hcol
	rows map[int]map[string]*string
}

// hwant is one row image the binlog holds, as the model predicts it.
type hwant struct {
	table, op     string
	before, after map[string]*string
}

type hrun struct {
	t      *testing.T
	db     *testenv.Server
	rng    *rand.Rand
	tables map[string]*htable
	want   []hwant
	nextT  int
	nextC  int
	nextID int
	log    []string
}

func (w *hrun) exec(q string) {
	w.t.Helper()
	w.log = append(w.log, q)
	if err := w.db.Exec(context.Background(), q); err != nil {
		w.t.Fatalf("%s: %v\nsteps:\n%s", q, err, strings.Join(w.log, "\n"))
	}
}

func (w *hrun) names() []string {
	out := make([]string, 0, len(w.tables))
	for n := range w.tables {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

func (w *hrun) pick(s []string) string { return s[w.rng.IntN(len(s))] }

var hStrings = []string{"a", "bé", "cö", "dd", "é", "xyz", "zœ"}

func (w *hrun) value(c hcol) (sql string, text *string) {
	if w.rng.IntN(8) == 0 {
		return "NULL", nil
	}
	var s string
	switch {
	case c.typ == "INT" || c.typ == "BIGINT":
		s = strconv.Itoa(w.rng.IntN(2000) - 1000)
	case strings.HasPrefix(c.typ, "ENUM"):
		s = w.pick(enumMembers(c.typ))
	default:
		s = w.pick(hStrings)
		if c.charset == "latin1" || c.charset == "" {
			s = strings.ReplaceAll(s, "œ", "o") // not in latin1
		}
	}
	if c.typ == "INT" || c.typ == "BIGINT" {
		return s, &s
	}
	return "'" + s + "'", &s
}

func enumMembers(typ string) []string {
	var out []string
	for _, m := range strings.Split(strings.TrimSuffix(strings.TrimPrefix(typ, "ENUM("), ")"), ",") {
		out = append(out, strings.Trim(m, "'"))
	}
	return out
}

func cloneRow(r map[string]*string) map[string]*string {
	out := make(map[string]*string, len(r))
	for k, v := range r {
		out[k] = v
	}
	return out
}

func (w *hrun) colIndex(t *htable, name string) int {
	return slices.IndexFunc(t.cols, func(c hcol) bool { return c.name == name })
}

func (w *hrun) create(name string) {
	w.nextC++
	t := &htable{rows: map[int]map[string]*string{}, cols: []hcol{{name: "id", typ: "INT"}, {name: "c" + strconv.Itoa(w.nextC), typ: "VARCHAR(20)"}}}
	w.nextC++
	t.cols = append(t.cols, hcol{name: "c" + strconv.Itoa(w.nextC), typ: "INT"})
	w.exec(fmt.Sprintf("CREATE TABLE %s.%s (id INT PRIMARY KEY, %s VARCHAR(20), %s INT)", workload.RandomDB, name, t.cols[1].name, t.cols[2].name))
	w.tables[name] = t
}

// write inserts, updates or deletes a row of a random table.
func (w *hrun) write() {
	name := w.pick(w.names())
	t := w.tables[name]
	full := workload.RandomDB + "." + name
	ids := make([]int, 0, len(t.rows))
	for id := range t.rows {
		ids = append(ids, id)
	}
	sort.Ints(ids)
	switch k := w.rng.IntN(6); {
	case k < 3 || len(ids) == 0:
		w.nextID++
		row := map[string]*string{}
		var names, vals []string
		for _, c := range t.cols {
			sql, text := w.value(c)
			if c.name == "id" {
				s := strconv.Itoa(w.nextID)
				sql, text = s, &s
			}
			names, vals = append(names, c.name), append(vals, sql)
			row[c.name] = text
		}
		w.exec(fmt.Sprintf("INSERT INTO %s (%s) VALUES (%s)", full, strings.Join(names, ", "), strings.Join(vals, ", ")))
		t.rows[w.nextID] = row
		w.want = append(w.want, hwant{table: name, op: "c", after: cloneRow(row)})
	case k < 5 && len(t.cols) > 1:
		id := ids[w.rng.IntN(len(ids))]
		c := t.cols[1+w.rng.IntN(len(t.cols)-1)]
		sql, text := w.value(c)
		before := cloneRow(t.rows[id])
		if (before[c.name] == nil) == (text == nil) && (text == nil || *before[c.name] == *text) {
			return // no change: the server logs no row
		}
		w.exec(fmt.Sprintf("UPDATE %s SET %s = %s WHERE id = %d", full, c.name, sql, id))
		t.rows[id][c.name] = text
		w.want = append(w.want, hwant{table: name, op: "u", before: before, after: cloneRow(t.rows[id])})
	default:
		id := ids[w.rng.IntN(len(ids))]
		w.exec(fmt.Sprintf("DELETE FROM %s WHERE id = %d", full, id))
		w.want = append(w.want, hwant{table: name, op: "d", before: cloneRow(t.rows[id])})
		delete(t.rows, id)
	}
}

// place is a random FIRST / AFTER clause for a column of t (not before id).
func (w *hrun) place(t *htable, skip string) (clause string, after string, ok bool) {
	if w.rng.IntN(2) == 0 {
		return "", "", false
	}
	var cands []string
	for _, c := range t.cols {
		if c.name != skip {
			cands = append(cands, c.name)
		}
	}
	a := w.pick(cands)
	return " AFTER " + a, a, true
}

func (w *hrun) move(t *htable, c hcol, after string, moved bool, at int) {
	if !moved {
		if at >= 0 {
			t.cols[at] = c
		} else {
			t.cols = append(t.cols, c)
		}
		return
	}
	if at >= 0 {
		t.cols = slices.Delete(t.cols, at, at+1)
	}
	i := w.colIndex(t, after)
	t.cols = slices.Insert(t.cols, i+1, c)
}

var hTypes = []string{"INT", "BIGINT", "VARCHAR(20)", "VARCHAR(30)", "TEXT", "ENUM('a','b')"}

// compatibleType is another type of the same class (values convert unchanged).
func (w *hrun) compatibleType(typ string) string {
	switch {
	case typ == "INT" || typ == "BIGINT":
		return w.pick([]string{"INT", "BIGINT"})
	case strings.HasPrefix(typ, "ENUM"):
		return typ[:len(typ)-1] + ",'" + string(rune('c'+len(enumMembers(typ))-2)) + "')" // a member more
	}
	return w.pick([]string{"VARCHAR(20)", "VARCHAR(30)", "TEXT"})
}

func (w *hrun) ddl() {
	names := w.names()
	name := w.pick(names)
	t := w.tables[name]
	full := workload.RandomDB + "." + name
	textCol := func() (int, bool) {
		var idx []int
		for i, c := range t.cols {
			if !strings.HasPrefix(c.typ, "ENUM") && c.typ != "INT" && c.typ != "BIGINT" {
				idx = append(idx, i)
			}
		}
		if len(idx) == 0 {
			return 0, false
		}
		return idx[w.rng.IntN(len(idx))], true
	}
	switch k := w.rng.IntN(15); {
	case k < 3: // ADD COLUMN
		w.nextC++
		c := hcol{name: "c" + strconv.Itoa(w.nextC), typ: w.pick(hTypes)}
		cs := ""
		if !strings.Contains(c.typ, "INT") && w.rng.IntN(3) == 0 {
			c.charset = w.pick([]string{"latin1", "utf8mb4"})
			cs = " CHARACTER SET " + c.charset
		}
		clause, after, moved := w.place(t, "")
		w.exec("ALTER TABLE " + full + " ADD COLUMN " + c.name + " " + c.typ + cs + clause)
		w.move(t, c, after, moved, -1)
		for _, r := range t.rows {
			r[c.name] = nil
		}
	case k < 5 && len(t.cols) > 2: // DROP COLUMN
		i := 1 + w.rng.IntN(len(t.cols)-1)
		c := t.cols[i]
		w.exec("ALTER TABLE " + full + " DROP COLUMN " + c.name)
		t.cols = slices.Delete(t.cols, i, i+1)
		for _, r := range t.rows {
			delete(r, c.name)
		}
	case k < 6 && len(t.cols) > 1: // RENAME COLUMN
		i := 1 + w.rng.IntN(len(t.cols)-1)
		old := t.cols[i].name
		w.nextC++
		nn := "c" + strconv.Itoa(w.nextC)
		w.exec("ALTER TABLE " + full + " RENAME COLUMN " + old + " TO " + nn)
		t.cols[i].name = nn
		for _, r := range t.rows {
			r[nn] = r[old]
			delete(r, old)
		}
	case k < 8 && len(t.cols) > 1: // CHANGE or MODIFY, maybe moved
		i := 1 + w.rng.IntN(len(t.cols)-1)
		c := t.cols[i]
		nc := c
		nc.typ = w.compatibleType(c.typ)
		change := w.rng.IntN(2) == 0
		if change {
			w.nextC++
			nc.name = "c" + strconv.Itoa(w.nextC)
		}
		cs := ""
		if c.charset != "" {
			cs = " CHARACTER SET " + c.charset
		}
		clause, after, moved := w.place(t, c.name)
		if change {
			w.exec("ALTER TABLE " + full + " CHANGE COLUMN " + c.name + " " + nc.name + " " + nc.typ + cs + clause)
		} else {
			w.exec("ALTER TABLE " + full + " MODIFY COLUMN " + c.name + " " + nc.typ + cs + clause)
		}
		w.move(t, nc, after, moved, i)
		if nc.name != c.name {
			for _, r := range t.rows {
				r[nc.name] = r[c.name]
				delete(r, c.name)
			}
		}
	case k < 9: // a column's charset
		i, ok := textCol()
		if !ok {
			return
		}
		c := t.cols[i]
		c.charset = w.pick([]string{"latin1", "utf8mb4"})
		for _, r := range t.rows {
			if v := r[c.name]; v != nil && strings.Contains(*v, "œ") {
				c.charset = "utf8mb4" // latin1 lacks it
			}
		}
		w.exec("ALTER TABLE " + full + " MODIFY " + c.name + " " + c.typ + " CHARACTER SET " + c.charset)
		t.cols[i] = c
	case k < 10: // the table's charset: converted, or only its default
		cs := w.pick([]string{"latin1", "utf8mb4"})
		lossy := false
		for _, r := range t.rows {
			for _, v := range r {
				lossy = lossy || v != nil && strings.Contains(*v, "œ")
			}
		}
		if w.rng.IntN(2) == 0 && !(lossy && cs == "latin1") {
			w.exec("ALTER TABLE " + full + " CONVERT TO CHARACTER SET " + cs)
			for i := range t.cols {
				if !strings.Contains(t.cols[i].typ, "INT") {
					t.cols[i].charset = cs
				}
			}
			for _, r := range t.rows { // converted: what latin1 lacks is lost
				for k, v := range r {
					if v != nil && cs == "latin1" && strings.Contains(*v, "œ") {
						s := strings.ReplaceAll(*v, "œ", "?")
						r[k] = &s
					}
				}
			}
		} else {
			// Only the default changes: the columns keep their charsets
			// and their values.
			w.exec("ALTER TABLE " + full + " DEFAULT CHARSET=" + cs)
		}
	case k < 11: // RENAME TABLE
		w.nextT++
		nn := "t" + strconv.Itoa(w.nextT)
		w.exec("RENAME TABLE " + full + " TO " + workload.RandomDB + "." + nn)
		w.tables[nn] = t
		delete(w.tables, name)
	case k < 12 && len(names) > 1:
		w.exec("DROP TABLE " + full)
		delete(w.tables, name)
	case k < 13:
		w.nextT++
		nn := "t" + strconv.Itoa(w.nextT)
		if w.rng.IntN(2) == 0 {
			w.exec("CREATE TABLE " + workload.RandomDB + "." + nn + " LIKE " + full)
			w.tables[nn] = &htable{cols: slices.Clone(t.cols), rows: map[int]map[string]*string{}}
		} else {
			w.create(nn)
		}
	default: // partitions
		switch w.rng.IntN(3) {
		case 0:
			w.exec("ALTER TABLE " + full + " PARTITION BY HASH (id) PARTITIONS 3")
		case 1:
			w.exec("ALTER TABLE " + full + " PARTITION BY KEY (id) PARTITIONS 2")
			w.exec("ALTER TABLE " + full + " COALESCE PARTITION 1")
		default:
			w.exec("ALTER TABLE " + full + " PARTITION BY RANGE (id) (PARTITION p0 VALUES LESS THAN (100000), PARTITION p1 VALUES LESS THAN MAXVALUE)")
			w.exec("ALTER TABLE " + full + " REMOVE PARTITIONING")
		}
	}
}

// TestHistoryRandomDDL: random DDL between writes, all written before the
// reader starts, read from the start with binlog_row_metadata=MINIMAL:
// every row image decodes as the model predicts (names and values), and
// the model equals SELECT at the end. SLUICE_HISTORY_SEED replays a seed.
func TestHistoryRandomDDL(t *testing.T) {
	testenv.ForEachFlavor(t, func(t *testing.T, f position.Flavor) {
		seed := time.Now().UnixNano()
		if s := os.Getenv("SLUICE_HISTORY_SEED"); s != "" {
			seed, _ = strconv.ParseInt(s, 10, 64)
		}
		t.Logf("seed %d (SLUICE_HISTORY_SEED=%d replays it)", seed, seed)
		db := startServer(t, f, testenv.Options{RowMetadata: "MINIMAL"})
		exec(t, db, "CREATE DATABASE "+workload.RandomDB+" CHARACTER SET utf8mb4")
		w := &hrun{t: t, db: db, rng: rand.New(rand.NewPCG(uint64(seed), 1)), tables: map[string]*htable{}}
		for range 2 {
			w.nextT++
			w.create("t" + strconv.Itoa(w.nextT))
		}
		tables, _ := binlog.ParseFilter(workload.RandomDB + ".*")
		h, start := captureHistory(t, db, f, tables, nil)
		for range 120 {
			if w.rng.IntN(3) == 0 {
				w.ddl()
			} else {
				w.write()
			}
		}
		exec(t, db, "CREATE TABLE "+workload.RandomDB+".done (id INT PRIMARY KEY)")

		r := newReader(t, db, func(c *binlog.Config) { c.Start, c.Tables, c.History = start, tables, h })
		enc := codec.NewEncoder(codec.Source{Name: "test"})
		var got []*codec.Event
	read:
		for {
			txn := next(t, r)
			for i := range txn.Changes {
				ch := &txn.Changes[i]
				if ch.Op == binlog.OpDDL {
					if strings.Contains(ch.Query, ".done") {
						break read
					}
					continue
				}
				ev, err := codec.DecodeLine(enc.AppendChange(nil, txn, ch))
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, ev)
			}
		}
		image := func(m map[string]json.RawMessage) map[string]*string {
			if m == nil {
				return nil
			}
			out := map[string]*string{}
			for k, raw := range m {
				if len(raw) == 0 || string(raw) == "null" {
					out[k] = nil
					continue
				}
				var s string
				if raw[0] != '"' || json.Unmarshal(raw, &s) != nil {
					s = string(raw)
				}
				out[k] = &s
			}
			return out
		}
		text := func(m map[string]*string) string {
			if m == nil {
				return "nil"
			}
			keys := make([]string, 0, len(m))
			for k := range m {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			var b []string
			for _, k := range keys {
				v := "NULL"
				if m[k] != nil {
					v = strconv.Quote(*m[k])
				}
				b = append(b, k+"="+v)
			}
			return strings.Join(b, " ")
		}
		if len(got) != len(w.want) {
			t.Errorf("%d row changes decoded, %d written", len(got), len(w.want))
		}
		for i := range min(len(got), len(w.want)) {
			g, e := got[i], w.want[i]
			gb, ga := text(image(g.Before)), text(image(g.After))
			if g.Source.Table != e.table || g.Op != e.op || gb != text(e.before) || ga != text(e.after) {
				t.Fatalf("row change %d: got %s %s before {%s} after {%s}\nwant %s %s before {%s} after {%s}\nsteps:\n%s",
					i, g.Source.Table, g.Op, gb, ga, e.table, e.op, text(e.before), text(e.after), strings.Join(w.log, "\n"))
			}
		}
		// The model is the server's state.
		c, err := db.Conn(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		server, err := workload.SelectAll(context.Background(), c)
		if err != nil {
			t.Fatal(err)
		}
		for name, tab := range w.tables {
			rows := server[name]
			if len(rows) != len(tab.rows) {
				t.Fatalf("table %s: %d rows on the server, %d in the model", name, len(rows), len(tab.rows))
			}
			for id, r := range tab.rows {
				if a, b := text(rows[strconv.Itoa(id)]), text(r); a != b {
					t.Fatalf("table %s id %d: server {%s}, model {%s}", name, id, a, b)
				}
			}
		}
		if s := h.Stats(); s.Unknown != 0 {
			t.Errorf("history stats %+v: every statement of the workload should apply", s)
		}
	})
}
