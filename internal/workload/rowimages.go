package workload

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/sluice-cdc/sluice/internal/testenv/throwaway"
)

// The row image workload (issue 32, source.row_image: fill): one random
// sequence of statements run alike on several databases of one server,
// each written by a session with its own binlog_row_image (FULL, MINIMAL,
// NOBLOB). The databases hold the same rows at every step, so a reader
// that completes partial images must write for the MINIMAL and NOBLOB
// databases exactly the images it writes for the FULL one.
// CompareRowImages checks that on a sink's events.

// RowImageDBs are the databases of the row image workload and the
// binlog_row_image of the session that writes each.
var RowImageDBs = []struct{ DB, Image string }{{"ri_full", "FULL"}, {"ri_minimal", "MINIMAL"}, {"ri_noblob", "NOBLOB"}}

// rowImageTables: t has a primary key and TEXT, BLOB and JSON columns
// (NOBLOB leaves those out where they did not change); n has no key
// (MINIMAL logs every column of its before image, and k identifies a row).
var rowImageTables = []string{
	"CREATE TABLE %s.t (id INT PRIMARY KEY, a INT, b VARCHAR(20), c TEXT, d BLOB, j JSON, e DECIMAL(8,2) NOT NULL DEFAULT 0)",
	"CREATE TABLE %s.n (k INT NOT NULL, a INT, c TEXT)",
}

// RowImages draws the workload's statements from a seed.
type RowImages struct {
	rng  *rand.Rand
	ids  []int // the keys of t's rows
	ks   []int // the k of n's rows
	next int
}

// NewRowImages returns the workload of seed.
func NewRowImages(seed uint64) *RowImages {
	return &RowImages{rng: rand.New(rand.NewPCG(seed, 0x1a9e)), next: 1}
}

// Setup creates the databases and tables.
func (w *RowImages) Setup(ctx context.Context, db *throwaway.Server) error {
	var stmts []string
	for _, d := range RowImageDBs {
		stmts = append(stmts, "DROP DATABASE IF EXISTS "+d.DB, "CREATE DATABASE "+d.DB+" CHARACTER SET utf8mb4")
		for _, t := range rowImageTables {
			stmts = append(stmts, fmt.Sprintf(t, d.DB))
		}
	}
	return db.Exec(ctx, stmts...)
}

func (w *RowImages) text(n int) string {
	const letters = "abcdefghijklmnopqrstuvwxyz"
	b := make([]byte, 1+w.rng.IntN(n))
	for i := range b {
		b[i] = letters[w.rng.IntN(len(letters))]
	}
	return string(b)
}

// value returns a random SQL literal for column c of t (NULL sometimes).
func (w *RowImages) value(c string) string {
	if c != "e" && w.rng.IntN(6) == 0 {
		return "NULL"
	}
	switch c {
	case "a":
		return fmt.Sprint(w.rng.IntN(1000) - 500)
	case "b":
		return "'" + w.text(15) + "'"
	case "c":
		return "'" + strings.Repeat(w.text(10), 1+w.rng.IntN(20)) + "'"
	case "d":
		return fmt.Sprintf("X'%x'", w.text(30))
	case "j":
		return fmt.Sprintf(`'{"n":%d,"s":"%s"}'`, w.rng.IntN(100), w.text(8))
	case "e":
		return fmt.Sprintf("%d.%02d", w.rng.IntN(10000), w.rng.IntN(100))
	}
	panic(c)
}

var rowImageCols = []string{"a", "b", "c", "d", "j", "e"}

// insert is an INSERT of a new row of t, every column given.
func (w *RowImages) insert() string {
	id := w.next
	w.next++
	w.ids = append(w.ids, id)
	vals := []string{fmt.Sprint(id)}
	for _, c := range rowImageCols {
		vals = append(vals, w.value(c))
	}
	return "INSERT INTO %[1]s.t (id, a, b, c, d, j, e) VALUES (" + strings.Join(vals, ", ") + ")"
}

// Seed returns n inserts into t and n/2 into n: rows for a snapshot.
func (w *RowImages) Seed(n int) []string {
	var out []string
	for range n {
		out = append(out, w.insert())
	}
	for range n / 2 {
		out = append(out, w.insertN())
	}
	return out
}

func (w *RowImages) insertN() string {
	k := w.next
	w.next++
	w.ks = append(w.ks, k)
	return fmt.Sprintf("INSERT INTO %%[1]s.n (k, a, c) VALUES (%d, %s, %s)", k, w.value("a"), w.value("c"))
}

// Txn returns the statements of one random transaction: updates of random
// column subsets, key changes, deletes and inserts, of both tables.
func (w *RowImages) Txn() []string {
	var out []string
	for range 1 + w.rng.IntN(4) {
		switch r := w.rng.IntN(20); {
		case len(w.ids) == 0 || r < 2:
			out = append(out, w.insert())
		case r < 4:
			i := w.rng.IntN(len(w.ids))
			out = append(out, fmt.Sprintf("DELETE FROM %%[1]s.t WHERE id = %d", w.ids[i]))
			w.ids = slices.Delete(w.ids, i, i+1)
		case r < 6:
			// A key change, with another column or not.
			i := w.rng.IntN(len(w.ids))
			nid := w.next
			w.next++
			set := fmt.Sprintf("id = %d", nid)
			if w.rng.IntN(2) == 0 {
				c := rowImageCols[w.rng.IntN(len(rowImageCols))]
				set += ", " + c + " = " + w.value(c)
			}
			out = append(out, fmt.Sprintf("UPDATE %%[1]s.t SET %s WHERE id = %d", set, w.ids[i]))
			w.ids[i] = nid
		case r < 8 && len(w.ks) > 0:
			i := w.rng.IntN(len(w.ks))
			c := []string{"a", "c"}[w.rng.IntN(2)]
			out = append(out, fmt.Sprintf("UPDATE %%[1]s.n SET %s = %s WHERE k = %d", c, w.value(c), w.ks[i]))
		case r < 9:
			if len(w.ks) > 0 && w.rng.IntN(2) == 0 {
				i := w.rng.IntN(len(w.ks))
				out = append(out, fmt.Sprintf("DELETE FROM %%[1]s.n WHERE k = %d", w.ks[i]))
				w.ks = slices.Delete(w.ks, i, i+1)
			} else {
				out = append(out, w.insertN())
			}
		default:
			// An update of a random subset of columns (at least one).
			id := w.ids[w.rng.IntN(len(w.ids))]
			var sets []string
			for _, c := range rowImageCols {
				if w.rng.IntN(3) == 0 {
					sets = append(sets, c+" = "+w.value(c))
				}
			}
			if len(sets) == 0 {
				c := rowImageCols[w.rng.IntN(len(rowImageCols))]
				sets = append(sets, c+" = "+w.value(c))
			}
			out = append(out, fmt.Sprintf("UPDATE %%[1]s.t SET %s WHERE id = %d", strings.Join(sets, ", "), id))
		}
	}
	return out
}

// RunOn runs stmts as one transaction on each database, each from a
// session with its database's binlog_row_image.
func RunOn(ctx context.Context, db *throwaway.Server, stmts []string) error {
	for _, d := range RowImageDBs {
		all := []string{"SET SESSION binlog_row_image = '" + d.Image + "'", "BEGIN"}
		for _, s := range stmts {
			all = append(all, fmt.Sprintf(s, d.DB))
		}
		all = append(all, "COMMIT")
		if err := db.Exec(ctx, all...); err != nil {
			return fmt.Errorf("database %s: %w", d.DB, err)
		}
	}
	return nil
}

// ImageEvent is what CompareRowImages compares of one event: its table,
// op, and before and after images as written (JSON).
type ImageEvent struct {
	DB, Table, Op string
	Before, After json.RawMessage
}

// CompareRowImages checks that the events of every database of the
// workload are those of the FULL one, table by table: the snapshot's rows
// as a set (chunks of a parallel snapshot come in any order), the
// changes in order. It reports the first difference.
func CompareRowImages(evs []ImageEvent) error {
	by := map[string][]ImageEvent{}
	snap := map[string][]string{}
	for _, e := range evs {
		if e.Op == "r" {
			var x bytes.Buffer
			if err := json.Compact(&x, e.After); err != nil {
				return err
			}
			snap[e.DB+"."+e.Table] = append(snap[e.DB+"."+e.Table], x.String())
			continue
		}
		by[e.DB+"."+e.Table] = append(by[e.DB+"."+e.Table], e)
	}
	for _, rows := range snap {
		slices.Sort(rows)
	}
	for _, table := range []string{"t", "n"} {
		want := snap[RowImageDBs[0].DB+"."+table]
		for _, d := range RowImageDBs[1:] {
			if got := snap[d.DB+"."+table]; !slices.Equal(got, want) {
				return fmt.Errorf("%s.%s: the snapshot's rows differ from %s.%s's:\n%s\nwith FULL:\n%s", d.DB, table, RowImageDBs[0].DB, table, strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
		}
	}
	for _, table := range []string{"t", "n"} {
		want := by[RowImageDBs[0].DB+"."+table]
		if len(want) == 0 {
			return fmt.Errorf("no events of %s.%s", RowImageDBs[0].DB, table)
		}
		for _, d := range RowImageDBs[1:] {
			got := by[d.DB+"."+table]
			if len(got) != len(want) {
				return fmt.Errorf("%s.%s: %d events, %s.%s: %d", d.DB, table, len(got), RowImageDBs[0].DB, table, len(want))
			}
			for i := range want {
				w, g := want[i], got[i]
				if w.Op != g.Op || !jsonEqual(w.Before, g.Before) || !jsonEqual(w.After, g.After) {
					return fmt.Errorf("%s.%s event %d: op %s before %s after %s; with FULL: op %s before %s after %s",
						d.DB, table, i, g.Op, g.Before, g.After, w.Op, w.Before, w.After)
				}
			}
		}
	}
	return nil
}

// jsonEqual compares two JSON texts as written, byte for byte after
// compacting (the member order is the table's).
func jsonEqual(a, b json.RawMessage) bool {
	var x, y bytes.Buffer
	if json.Compact(&x, a) != nil || json.Compact(&y, b) != nil {
		return bytes.Equal(a, b)
	}
	return bytes.Equal(x.Bytes(), y.Bytes())
}

// DoneTable is a table of the FULL database only: a row inserted into it
// after the workload marks the end of the output.
const DoneTable = "done"

// Prepare creates the workload's tables and DoneTable, and inserts seed
// rows into t (and seed/2 into n) for a snapshot; the snapshot then holds
// SnapshotRows(seed) rows.
func (w *RowImages) Prepare(ctx context.Context, db *throwaway.Server, seed int) error {
	if err := w.Setup(ctx, db); err != nil {
		return err
	}
	if err := db.Exec(ctx, "CREATE TABLE "+RowImageDBs[0].DB+"."+DoneTable+" (id INT PRIMARY KEY)"); err != nil {
		return err
	}
	return RunOn(ctx, db, w.Seed(seed))
}

// SnapshotRows is the number of rows a snapshot after Prepare(seed) reads.
func SnapshotRows(seed int) int { return len(RowImageDBs) * (seed + seed/2) }

// Finish inserts the row of DoneTable.
func Finish(ctx context.Context, db *throwaway.Server) error {
	return db.Exec(ctx, "INSERT INTO "+RowImageDBs[0].DB+"."+DoneTable+" VALUES (1)")
}

// Finished reports whether evs end with the row of DoneTable.
func Finished(evs []ImageEvent) bool { return len(evs) > 0 && evs[len(evs)-1].Table == DoneTable }

// Snapshotted reports whether evs hold n snapshot rows.
func Snapshotted(evs []ImageEvent, n int) bool {
	c := 0
	for _, e := range evs {
		if e.Op == "r" {
			c++
		}
	}
	return c >= n
}

// ReadImageEvents reads the row events of a file sink's segments (glob),
// in format sluice or debezium without schemas: both have before, after,
// op and source's db and table at the top; other lines are passed over.
func ReadImageEvents(glob string) ([]ImageEvent, error) {
	segs, err := filepath.Glob(glob)
	if err != nil {
		return nil, err
	}
	slices.Sort(segs)
	var out []ImageEvent
	for _, seg := range segs {
		b, err := os.ReadFile(seg)
		if err != nil {
			return nil, err
		}
		for l := range bytes.Lines(b) {
			var ev struct {
				Before, After json.RawMessage
				Op            string
				Source        struct{ DB, Table string }
			}
			if json.Unmarshal(l, &ev) == nil && ev.Op != "" {
				out = append(out, ImageEvent{DB: ev.Source.DB, Table: ev.Source.Table, Op: ev.Op, Before: ev.Before, After: ev.After})
			}
		}
	}
	return out, nil
}
