package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/go-mysql-org/go-mysql/client"

	"github.com/sluice-cdc/sluice/internal/charset/probe"
	"github.com/sluice-cdc/sluice/internal/testenv"
	"github.com/sluice-cdc/sluice/internal/testenv/throwaway"
	"github.com/sluice-cdc/sluice/position"
)

// TestEveryCharacterSet is issue 24's test, on each server: one column per
// character set the server lists (binary aside), filled with every
// character the set can store (asked of the server: internal/charset/probe
// for the table-driven sets, every code point of the BMP for the UTF and
// UCS ones, and beyond it a sample, or every one with allCodePoints),
// plus ENUM and SET columns and a column named in Japanese, in sets other
// than UTF-8. `sluice tail` (a snapshot, and the stream of the inserts, a
// key change and deletes, in both formats) and `sluice read` of the binlog
// files must write, value by value, what CONVERT(col USING utf8mb4)
// returns.
func TestEveryCharacterSet(t *testing.T) {
	bin := buildSluice(t)
	testenv.ForEachFlavor(t, func(t *testing.T, flavor position.Flavor) { everyCharacterSet(t, bin, flavor) })
}

// allCodePoints makes TestEveryCharacterSet write every code point beyond
// the BMP (SLUICE_CHARSETS_ALL=1, make soak), not a sample of them.
var allCodePoints = os.Getenv("SLUICE_CHARSETS_ALL") == "1"

// written reports whether TestEveryCharacterSet writes code point r:
// every one of the BMP; beyond it every one with allCodePoints, else
// every 61st and the first and last of each plane.
func written(r rune) bool {
	return r <= 0xFFFF || allCodePoints || r%61 == 0 || r&0xFFFF == 0 || r&0xFFFF == 0xFFFF
}

// charsRow is how many characters one row holds in each column.
const charsRow = 2000

func everyCharacterSet(t *testing.T, bin string, flavor position.Flavor) {
	db := testenv.StartT(t, testenv.Options{Flavor: flavor})
	c, err := client.Connect(db.Addr(), db.User, db.Password, "")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	exec := func(q string) {
		t.Helper()
		if _, err := c.Execute(q); err != nil {
			t.Fatalf("%.200s: %v", q, err)
		}
	}
	r, err := c.Execute("SELECT character_set_name, maxlen FROM information_schema.character_sets WHERE character_set_name <> 'binary' ORDER BY 1")
	if err != nil {
		t.Fatal(err)
	}
	type set struct {
		name  string
		chars [][]byte // every character, in the set's own bytes
	}
	var sets []set
	maxlen := map[string]int{}
	for i := range r.Values {
		name, _ := r.GetString(i, 0)
		n, _ := r.GetInt(i, 1)
		maxlen[name] = int(n)
		sets = append(sets, set{name: name})
	}
	cache, err := throwaway.CacheDir()
	if err != nil {
		t.Fatal(err)
	}
	dump, err := probe.DumpCached(c, cache)
	if err != nil {
		t.Fatal(err)
	}
	rows := 0
	for i := range sets {
		s := &sets[i]
		if probe.Ruled[s.name] {
			// In UTF-8 (the server converts it into the column's set):
			// the code points written (the sets beyond the BMP encode
			// them arithmetically: a four-byte sequence, a surrogate
			// pair). Surrogates are no characters.
			top := rune(utf8.MaxRune)
			if s.name == "utf8mb3" || s.name == "ucs2" {
				top = 0xFFFF
			}
			for r := rune(0); r <= top; r++ {
				if (r < 0xD800 || r > 0xDFFF) && written(r) {
					s.chars = append(s.chars, utf8.AppendRune(nil, r))
				}
			}
		} else {
			// The same sample of gb18030's four-byte sequences beyond
			// the BMP (a linear map onto U+10000–U+10FFFF).
			seqs, keys := probe.Candidates(s.name, maxlen[s.name])
			for j, seq := range seqs {
				if r, ok := dump[s.name][keys[j]]; ok && written(r) {
					s.chars = append(s.chars, seq)
				}
			}
		}
		if len(s.chars) == 0 {
			t.Fatalf("%s: no characters", s.name)
		}
		rows = max(rows, (len(s.chars)+charsRow-1)/charsRow)
	}
	col := func(name string) string { return "c_" + name }
	var ddl strings.Builder
	ddl.WriteString("CREATE TABLE cs.t (id INT PRIMARY KEY")
	for _, s := range sets {
		fmt.Fprintf(&ddl, ", %s MEDIUMTEXT CHARACTER SET %s", col(s.name), s.name)
	}
	ddl.WriteString(", e ENUM('美','团','点评') CHARACTER SET gbk, s SET('Ä','ß','é') CHARACTER SET latin1")
	ddl.WriteString(", k ENUM('Привет','мир') CHARACTER SET koi8r, `名前` VARCHAR(20) CHARACTER SET sjis)")
	exec("SET NAMES utf8mb4")
	exec("CREATE DATABASE cs")
	exec(ddl.String())
	from := masterPos(t, db)
	for k := range rows {
		var q strings.Builder
		fmt.Fprintf(&q, "INSERT INTO cs.t VALUES (%d", k)
		for _, s := range sets {
			lo, hi := k*charsRow, min((k+1)*charsRow, len(s.chars))
			if lo >= hi {
				q.WriteString(", NULL")
				continue
			}
			var b []byte
			for _, ch := range s.chars[lo:hi] {
				b = append(b, ch...)
			}
			if probe.Ruled[s.name] {
				fmt.Fprintf(&q, ", CONVERT(_utf8mb4 X'%X' USING %s)", b, s.name)
			} else {
				fmt.Fprintf(&q, ", _%s X'%X'", s.name, b)
			}
		}
		fmt.Fprintf(&q, ", %d, %d, %d, '日本語 ﾃｽﾄ %d')", k%3+1, k%8, k%2+1, k)
		exec(q.String())
	}
	// What each row holds, converted by the server: the reference.
	want := map[int]map[string]string{}
	var sel strings.Builder
	sel.WriteString("SELECT id")
	names := []string{}
	for _, s := range sets {
		names = append(names, col(s.name))
	}
	names = append(names, "e", "s", "k", "名前")
	for _, n := range names {
		fmt.Fprintf(&sel, ", CONVERT(`%s` USING utf8mb4)", n)
	}
	sel.WriteString(" FROM cs.t")
	rs, err := c.Execute(sel.String())
	if err != nil {
		t.Fatal(err)
	}
	for i := range rs.Values {
		id, _ := rs.GetInt(i, 0)
		m := map[string]string{}
		for j, n := range names {
			if v, _ := rs.GetString(i, j+1); v != "" || !isNull(rs.Values[i][j+1].Value()) {
				m[n] = v
			}
		}
		want[int(id)] = m
	}
	// The stream: a key change and deletes after the inserts.
	exec("UPDATE cs.t SET id = id + 100000 WHERE id < 3")
	exec("DELETE FROM cs.t WHERE id % 5 = 4")
	to := masterPos(t, db)
	exec("FLUSH BINARY LOGS")

	type image map[string]json.RawMessage
	check := func(what string, id int, img image) {
		t.Helper()
		exp := want[id%100000]
		bad := 0
		for _, n := range names {
			raw, ok := img[n]
			w, has := exp[n]
			if !ok {
				t.Errorf("%s: row %d: column %s missing", what, id, n)
				continue
			}
			if !has {
				if string(raw) != "null" {
					t.Errorf("%s: row %d: %s = %.80s, want null", what, id, n, raw)
				}
				continue
			}
			var got string
			var members []string // format sluice writes a SET as its members
			if json.Unmarshal(raw, &members) == nil {
				got = strings.Join(members, ",")
			} else if err := json.Unmarshal(raw, &got); err != nil {
				t.Errorf("%s: row %d: %s = %.80s: %v", what, id, n, raw, err)
				continue
			}
			if got != w {
				bad++
				if bad <= 3 {
					t.Errorf("%s: row %d: %s differs from CONVERT(... USING utf8mb4) at character %d: %s", what, id, n, firstDiff(got, w), excerpt(got, w))
				}
			}
		}
	}
	// A line's row images, in either format.
	parse := func(what, out string) (ops []string, ids []int, befores, afters []image) {
		t.Helper()
		sc := bufio.NewScanner(strings.NewReader(out))
		sc.Buffer(nil, 64<<20)
		for sc.Scan() {
			var ev struct {
				Op      string          `json:"op"`
				Before  image           `json:"before"`
				After   image           `json:"after"`
				Payload json.RawMessage `json:"payload"`
				DDL     json.RawMessage `json:"ddl"`
			}
			if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
				t.Fatalf("%s: %.200s: %v", what, sc.Text(), err)
			}
			if ev.DDL != nil || ev.Op == "" {
				continue
			}
			id := func(img image) int {
				var n int
				json.Unmarshal(img["id"], &n)
				return n
			}
			ops = append(ops, ev.Op)
			befores, afters = append(befores, ev.Before), append(afters, ev.After)
			if ev.After != nil {
				ids = append(ids, id(ev.After))
			} else {
				ids = append(ids, id(ev.Before))
			}
		}
		if err := sc.Err(); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		return
	}
	stream := func(what, out string) {
		t.Helper()
		ops, _, befores, afters := parse(what, out)
		inserts, updates, deletes := 0, 0, 0
		for i, op := range ops {
			switch op {
			case "c", "i":
				inserts++
				check(what+" insert", idOf(afters[i]), afters[i])
			case "u":
				updates++
				check(what+" update before", idOf(befores[i]), befores[i])
				check(what+" update after", idOf(afters[i]), afters[i])
			case "d":
				deletes++
				check(what+" delete", idOf(befores[i]), befores[i])
			}
		}
		wantDel := 0
		for id := range rows {
			if id >= 3 && id%5 == 4 || id < 3 && (id+100000)%5 == 4 {
				wantDel++
			}
		}
		if inserts < rows || updates+deletes < 3+wantDel {
			t.Errorf("%s: %d inserts, %d updates, %d deletes; want %d inserts, 3 key changes (updates or delete+insert) and %d deletes", what, inserts, updates, deletes, rows, wantDel)
		}
	}
	// Characters a set maps to no code point (cp1250 0x81, GBK 0xA140 in
	// MySQL's gbk, ...) are '?', as CONVERT writes them: warned about
	// once per column.
	warned := func(what, stderr string) {
		t.Helper()
		for _, c := range []string{"c_cp1250", "c_gbk"} {
			if n := strings.Count(stderr, "column="+c+" "); n != 1 {
				t.Errorf("%s: %d warnings for column %s, want 1:\n%.2000s", what, n, c, stderr)
			}
		}
		if !strings.Contains(stderr, "written as '?'") {
			t.Errorf("%s: no warning of text written as '?'", what)
		}
	}
	for _, format := range []string{"sluice", "debezium"} {
		out, stderr := runBig(t, bin, "tail", "--source", db.URL(), "--tables", "cs.t", "--from", from, "--to", to, "--format", format)
		stream("tail stream "+format, out)
		warned("tail stream "+format, stderr)

		out, _ = runBig(t, bin, "tail", "--source", db.URL(), "--tables", "cs.t", "--snapshot", "only", "--format", format)
		ops, ids, _, afters := parse("tail snapshot "+format, out)
		if len(ops) != len(want)-countDeleted(rows) {
			t.Errorf("snapshot %s: %d rows, want %d", format, len(ops), len(want)-countDeleted(rows))
		}
		for i := range ops {
			check("tail snapshot "+format, ids[i], afters[i])
		}
	}
	file, _, _ := strings.Cut(from, ":")
	var files []string
	matches, _ := filepath.Glob(filepath.Join(db.DataDir(), "mysql-bin.[0-9]*"))
	for _, m := range matches {
		if filepath.Base(m) >= file {
			files = append(files, m)
		}
	}
	out, stderr := runBig(t, bin, append([]string{"read", "--tables", "cs.t"}, files...)...)
	stream("read", out)
	warned("read", stderr)
}

func idOf(img map[string]json.RawMessage) int {
	var n int
	json.Unmarshal(img["id"], &n)
	return n
}

// countDeleted is how many of rows rows the test's DELETE removed.
func countDeleted(rows int) int {
	n := 0
	for id := range rows {
		if id < 3 {
			id += 100000
		}
		if id%5 == 4 {
			n++
		}
	}
	return n
}

func isNull(v any) bool { return v == nil }

// firstDiff is the index in runes of the first rune where a and b differ.
func firstDiff(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	for i := range min(len(ra), len(rb)) {
		if ra[i] != rb[i] {
			return i
		}
	}
	return min(len(ra), len(rb))
}

func excerpt(got, want string) string {
	i := firstDiff(got, want)
	cut := func(s string) string {
		r := []rune(s)
		return fmt.Sprintf("%+q", string(r[min(i, len(r)):min(i+4, len(r))]))
	}
	return "got " + cut(got) + ", want " + cut(want)
}

// runBig is run with the output written to a file (it can be tens of MB).
func runBig(t *testing.T, bin string, args ...string) (stdout, stderr string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "out")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	_, stderr = runTo(t, f, bin, args...)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b), stderr
}

// TestDDLInClientCharset: a client that ran SET NAMES gbk sends its DDL in
// gbk, and the server logs it so; the schema change (its statement, the
// column's name, default and comment) comes out in UTF-8, and the rows
// after it too.
func TestDDLInClientCharset(t *testing.T) {
	bin := buildSluice(t)
	testenv.ForEachFlavor(t, func(t *testing.T, flavor position.Flavor) {
		db := testenv.StartT(t, testenv.Options{Flavor: flavor})
		c, err := client.Connect(db.Addr(), db.User, db.Password, "")
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		from := masterPos(t, db)
		// 名 美 注释 点评 in gbk.
		const name, def, comment, text = "\xc3\xfb", "\xc3\xc0", "\xd7\xa2\xca\xcd", "\xb5\xe3\xc6\xc0"
		for _, q := range []string{"SET NAMES gbk", "CREATE DATABASE cs",
			"CREATE TABLE cs.g (id INT PRIMARY KEY, `" + name + "` VARCHAR(10) CHARACTER SET gbk DEFAULT '" + def + "' COMMENT '" + comment + "')",
			"INSERT INTO cs.g VALUES (1, '" + text + "')", "INSERT INTO cs.g (id) VALUES (2)"} {
			if _, err := c.Execute(q); err != nil {
				t.Fatalf("%q: %v", q, err)
			}
		}
		to := masterPos(t, db)
		out, _ := run(t, bin, "tail", "--source", db.URL(), "--tables", "cs.g", "--from", from, "--to", to)
		if !strings.Contains(out, "CREATE TABLE cs.g (id INT PRIMARY KEY, `名` VARCHAR(10) CHARACTER SET gbk DEFAULT '美' COMMENT '注释')") ||
			!strings.Contains(out, `"名":"点评"`) || !strings.Contains(out, `"名":"美"`) {
			t.Errorf("format sluice: the DDL or the rows are not the UTF-8 of what the gbk client sent:\n%s", out)
		}
		out, _ = run(t, bin, "tail", "--source", db.URL(), "--tables", "cs.g", "--from", from, "--to", to, "--format", "debezium")
		// (tableChanges need the schema history of `sluice run`, which
		// reads the same statement text.)
		for _, want := range []string{"`名` VARCHAR(10) CHARACTER SET gbk DEFAULT '美' COMMENT '注释'", `"名":"点评"`, `"名":"美"`} {
			if !strings.Contains(out, want) {
				t.Errorf("format debezium: no %s in:\n%s", want, out)
			}
		}
	})
}
