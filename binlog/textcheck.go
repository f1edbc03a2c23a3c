package binlog

import (
	"log/slog"
	"sort"
	"sync"

	"github.com/sluice-cdc/sluice/internal/charset"
)

// TextCheck finds character values that do not convert exactly to UTF-8:
// bytes that are not a character of the column's set, or characters the
// set maps to no Unicode code point. The codec writes each as '?', as the
// server's CONVERT(col USING utf8mb4) does; TextCheck makes that loud: it
// counts them per column and warns once per column. Columns of UTF-8 sets
// are not checked (the codec validates them as it writes them, and the
// server stores no invalid UTF-8). A column of a set neither server has is
// warned about once, and its text is taken as UTF-8.
//
// Check is called once per chunk, before the chunk is encoded; its cost is
// one map lookup per table of the chunk, and a pass over the text of
// columns of other sets. It is safe for concurrent use.
type TextCheck struct {
	log *slog.Logger
	mu  struct {
		sync.Mutex
		cols   map[*Table][]textCol
		counts map[TextColumn]int64
		warned map[TextColumn]bool
	}
}

// TextColumn names a column.
type TextColumn struct{ DB, Table, Column string }

type textCol struct {
	i  int
	cs *charset.Charset
}

// NewTextCheck returns a TextCheck that warns on log (nil: slog.Default()).
func NewTextCheck(log *slog.Logger) *TextCheck {
	if log == nil {
		log = slog.Default()
	}
	tc := &TextCheck{log: log}
	tc.mu.cols = map[*Table][]textCol{}
	tc.mu.counts = map[TextColumn]int64{}
	tc.mu.warned = map[TextColumn]bool{}
	return tc
}

// Check counts the replaced characters of t's changes.
func (tc *TextCheck) Check(t *Txn) {
	var last *Table // a chunk's changes are mostly of one table: looked up once
	var cols []textCol
	for i := range t.Changes {
		ch := &t.Changes[i]
		if ch.Table == nil {
			continue
		}
		if ch.Table != last {
			last, cols = ch.Table, tc.columns(ch.Table)
		}
		if len(cols) == 0 {
			continue
		}
		for _, row := range [2]Row{ch.Before, ch.After} {
			for _, c := range cols {
				if c.i >= len(row) || row[c.i].Kind() != KindString {
					continue
				}
				if n := c.cs.Invalid(row[c.i].Bytes()); n > 0 {
					tc.add(ch.Table, c.i, n, t)
				}
			}
		}
	}
}

// columns returns the columns of t to check, worked out once per table
// definition.
func (tc *TextCheck) columns(t *Table) []textCol {
	tc.mu.Lock()
	defer tc.mu.Unlock()
	if cols, ok := tc.mu.cols[t]; ok {
		return cols
	}
	if len(tc.mu.cols) >= 4096 { // definitions replaced by DDL: forget them all
		clear(tc.mu.cols)
	}
	var cols []textCol
	for i := range t.Columns {
		col := &t.Columns[i]
		if col.Kind != KindString {
			continue
		}
		cs := charset.Lookup(col.Charset)
		if cs == nil {
			key := TextColumn{t.Schema, t.Name, col.Name}
			if col.Charset != "" && !tc.mu.warned[key] {
				tc.mu.warned[key] = true
				tc.log.Warn("a column's character set is unknown to sluice: its text is written as UTF-8, which may not be what the server holds; report it with the server's version",
					"table", t.QualifiedName(), "column", col.Name, "charset", col.Charset)
			}
			continue
		}
		if !cs.IsUTF8() {
			cols = append(cols, textCol{i: i, cs: cs})
		}
	}
	tc.mu.cols[t] = cols
	return cols
}

func (tc *TextCheck) add(t *Table, i, n int, txn *Txn) {
	key := TextColumn{t.Schema, t.Name, t.Columns[i].Name}
	tc.mu.Lock()
	defer tc.mu.Unlock()
	tc.mu.counts[key] += int64(n)
	if tc.mu.warned[key] {
		return
	}
	tc.mu.warned[key] = true
	where := "snapshot"
	if !txn.Snapshot {
		where = txn.End.String()
	}
	tc.log.Warn("text that is not valid in its column's character set, or has no Unicode mapping, was written as '?' (as CONVERT(col USING utf8mb4) does); counted in sluice_invalid_text_total, warned once per column. The server holds bytes a client sent in another character set than the column's: fix the rows, or the column's character set",
		"table", t.QualifiedName(), "column", key.Column, "charset", t.Columns[i].Charset, "characters", n, "at", where)
}

// TextCount is the count of replaced characters of one column.
type TextCount struct {
	TextColumn
	Characters int64
}

// Counts returns the count of replaced characters of each column that had
// any, sorted by table and column.
func (tc *TextCheck) Counts() []TextCount {
	if tc == nil {
		return nil
	}
	tc.mu.Lock()
	out := make([]TextCount, 0, len(tc.mu.counts))
	for k, n := range tc.mu.counts {
		out = append(out, TextCount{k, n})
	}
	tc.mu.Unlock()
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i].TextColumn, out[j].TextColumn
		if a.DB != b.DB {
			return a.DB < b.DB
		}
		if a.Table != b.Table {
			return a.Table < b.Table
		}
		return a.Column < b.Column
	})
	return out
}
