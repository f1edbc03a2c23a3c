package binlog_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/sluice-cdc/sluice/binlog"
	"github.com/sluice-cdc/sluice/codec"
	"github.com/sluice-cdc/sluice/internal/testenv"
	"github.com/sluice-cdc/sluice/position"
)

// mysqlOnly skips a test of a MySQL-only feature when the run is narrowed
// to other flavors (SLUICE_TEST_FLAVORS).
func mysqlOnly(t *testing.T) {
	t.Helper()
	if !slices.Contains(testenv.Flavors(), position.MySQL) {
		t.Skip("MySQL-only feature; SLUICE_TEST_FLAVORS excludes mysql")
	}
}

// seenChange is a row change as sluice writes it: each column's JSON value
// exactly as in the output line.
type seenChange struct {
	op            string
	table         string
	before, after map[string]json.RawMessage
	key           string // codec.AppendChangeKey
	tbl           *binlog.Table
}

// readChanges reads the row changes between start and stop and returns
// them encoded and decoded again, as a consumer sees them.
func readChanges(t *testing.T, db *testenv.Server, start, stop position.Position, mod func(*binlog.Config)) []seenChange {
	t.Helper()
	r := newReader(t, db, func(c *binlog.Config) {
		c.Start, c.Stop = start, stop
		if mod != nil {
			mod(c)
		}
	})
	enc := codec.NewEncoder(codec.Source{Name: "test"})
	var out []seenChange
	var buf []byte
	for {
		txn, err := r.Next(context.Background())
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		for i := range txn.Changes {
			ch := &txn.Changes[i]
			if ch.Op == binlog.OpDDL {
				continue
			}
			buf = enc.AppendChange(buf[:0], txn, ch)
			ev, err := codec.DecodeLine(buf)
			if err != nil {
				t.Fatalf("decoding %s: %v", buf, err)
			}
			out = append(out, seenChange{op: ev.Op, table: ch.Table.Name, before: ev.Before, after: ev.After,
				key: string(codec.AppendChangeKey(nil, ch)), tbl: ch.Table})
		}
		txn.Release()
	}
}

// compactJSON is MySQL's JSON text without insignificant spaces: what the
// snapshot writes for a document SELECT returns.
func compactJSON(t *testing.T, s string) string {
	t.Helper()
	var b bytes.Buffer
	if err := json.Compact(&b, []byte(s)); err != nil {
		t.Fatalf("MySQL's JSON text %q: %v", s, err)
	}
	return b.String()
}

// binlogUpdate is one UPDATE row as mysqlbinlog --verbose prints it.
type binlogUpdate struct {
	partial bool              // in an Update_rows_partial event
	where   map[string]string // column number ("1", "2", ...) to the printed value
	set     map[string]string
}

var (
	binlogEventRe = regexp.MustCompile(`^#\d{6} .* end_log_pos \d+ .*\t(\w+): table id`)
	binlogValueRe = regexp.MustCompile(`^###   @(\d+)=(.*?)( /\* .* \*/)?$`)
)

// mysqlbinlogUpdates runs mysqlbinlog -vv over the server's binlog files and
// returns the UPDATE rows of table, in binlog order. Multi-line values (the
// partial update functions) are joined.
func mysqlbinlogUpdates(t *testing.T, db *testenv.Server, table string) (ups []binlogUpdate, payloads int) {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(db.DataDir(), "mysql-bin.[0-9]*"))
	cmd, err := db.Command(testenv.ToolBinlog, append([]string{"-vv", "--base64-output=DECODE-ROWS"}, files...)...)
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("mysqlbinlog: %v", err)
	}
	var cur *binlogUpdate
	var img map[string]string
	partial := false
	var last string // column of the value being continued
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		line := sc.Text()
		if m := binlogEventRe.FindStringSubmatch(line); m != nil {
			partial = m[1] == "Update_rows_partial"
			continue
		}
		if strings.Contains(line, "\tTransaction_Payload\t") {
			payloads++
		}
		switch {
		case strings.HasPrefix(line, "### UPDATE "):
			cur = nil
			if strings.HasSuffix(line, ".`"+table+"`") {
				ups = append(ups, binlogUpdate{partial: partial, where: map[string]string{}, set: map[string]string{}})
				cur = &ups[len(ups)-1]
			}
		case cur == nil:
		case line == "### WHERE":
			img = cur.where
		case line == "### SET":
			img = cur.set
		case strings.HasPrefix(line, "###   @"):
			m := binlogValueRe.FindStringSubmatch(line)
			if m == nil {
				t.Fatalf("mysqlbinlog line %q", line)
			}
			img[m[1]], last = m[2], m[1]
		case strings.HasPrefix(line, "###      "): // a partial update function goes on
			v := strings.TrimPrefix(line, "###      ")
			if i := strings.Index(v, " /* JSON"); i >= 0 {
				v = v[:i]
			}
			img[last] += v
		}
	}
	return ups, payloads
}

// unquoteBinlog decodes a value mysqlbinlog printed quoted (my_b_write_quoted:
// '...' with \\, \', \b, \f, \n, \r, \t and \xNN for other control
// characters).
func unquoteBinlog(t *testing.T, s string) string {
	t.Helper()
	if len(s) < 2 || s[0] != '\'' || s[len(s)-1] != '\'' {
		t.Fatalf("mysqlbinlog value %q is not quoted", s)
	}
	s = s[1 : len(s)-1]
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '\\' || i+1 == len(s) {
			b.WriteByte(s[i])
			continue
		}
		i++
		switch c := s[i]; c {
		case 'b':
			b.WriteByte('\b')
		case 'f':
			b.WriteByte('\f')
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case 't':
			b.WriteByte('\t')
		case 'x':
			v, err := hex.DecodeString(s[i+1 : min(i+3, len(s))])
			if err != nil || len(v) != 1 {
				t.Fatalf("mysqlbinlog value %q: bad \\x escape", s)
			}
			b.Write(v)
			i += 2
		default: // \\ and \'
			b.WriteByte(c)
		}
	}
	return b.String()
}

var partialJSONTable = "CREATE TABLE app.docs (id INT PRIMARY KEY, n INT, j1 JSON, j2 JSON, note VARCHAR(20), j3 JSON)"

// partialJSONWrites are updates MySQL logs as JSON diffs (nested paths,
// arrays, keys that need quoting, several documents in one row, a large
// document, a NULL document, a row updated many times in one transaction,
// several rows in one event) and a few it logs whole.
func partialJSONWrites() []string {
	large := `JSON_OBJECT('items', (SELECT JSON_ARRAYAGG(JSON_OBJECT('id', n, 'name', CONCAT('item-', n), 'tags', JSON_ARRAY(n, n * 2.5, 'x')))
		FROM (WITH RECURSIVE s(n) AS (SELECT 0 UNION ALL SELECT n + 1 FROM s WHERE n < 799) SELECT n FROM s) seq), 'meta', JSON_OBJECT('v', 1))`
	w := []string{
		`INSERT INTO app.docs VALUES
		 (1, 0, '{"a": [1, 2, [3, 4]], "b": {"c": "x", "dd": true}, "key with space": 1, "q\\"uote": null, "é": "ü"}', '[1, 2, 3]', 'a', NULL),
		 (2, 0, '{"counter": 0, "list": []}', '{"x": {"y": {"z": [0]}}}', 'b', '{"k": 1}'),
		 (3, 0, ` + large + `, '{}', 'c', NULL),
		 (4, 0, '{"s": "s"}', '{"t": 1}', 'd', '[]'),
		 (5, 0, '{"s": "s"}', '{"t": 1}', 'e', '[]')`,
		// Nested members and array elements, replaced, inserted, removed.
		`UPDATE app.docs SET j1 = JSON_SET(j1, '$.a[1]', 5, '$.b.e', 'new', '$.a[2][0]', 'three', '$.a[10]', 9) WHERE id = 1`,
		`UPDATE app.docs SET j1 = JSON_REPLACE(j1, '$.b.c', 'yy', '$."key with space"', JSON_ARRAY(1, 2), '$."q\\"uote"', 'q', '$."é"', 'ß') WHERE id = 1`,
		`UPDATE app.docs SET j1 = JSON_REMOVE(j1, '$.a[0]', '$.b.dd'), n = n + 1 WHERE id = 1`,
		`UPDATE app.docs SET j1 = JSON_SET(j1, '$.a[last]', 7, '$.b.aa', JSON_OBJECT('deep', JSON_ARRAY(JSON_OBJECT('k', 1)))) WHERE id = 1`,
		`UPDATE app.docs SET j1 = JSON_SET(j1, '$.b.aa.deep[0].k', 2, '$.b.aa.deep[1]', 'end', '$.zz', 1.5e300, '$.dec', CAST(12.50 AS DECIMAL(6,2))) WHERE id = 1`,
		`UPDATE app.docs SET j1 = JSON_SET(j1, '$.dt', CAST('2024-02-29 12:34:56.5' AS DATETIME(6)), '$.d', CAST('2024-02-29' AS DATE), '$.t', CAST('-12:00:01.25' AS TIME(6)),
		   '$.bin', CAST(x'00ff' AS BINARY)) WHERE id = 1`,
		// Several JSON columns in one row, and one of them NULL.
		`UPDATE app.docs SET j1 = JSON_SET(j1, '$.counter', 1), j2 = JSON_SET(j2, '$.x.y.z[0]', 1, '$.x.y.w', 'w'), j3 = JSON_REMOVE(j3, '$.k') WHERE id = 2`,
		`UPDATE app.docs SET j1 = JSON_SET(j1, '$.list[0]', 'a'), j3 = JSON_SET(j3, '$.a', 1) WHERE id = 1`, // j3 is NULL
		// A large document, a small change.
		`UPDATE app.docs SET j1 = JSON_SET(j1, '$.items[400].name', 'renamed', '$.meta.v', 2, '$.items[799].tags[1]', 0.25) WHERE id = 3`,
		`UPDATE app.docs SET j1 = JSON_REMOVE(j1, '$.items[0]'), j2 = JSON_SET(j2, '$.n', 1) WHERE id = 3`,
		// Several rows in one event.
		`UPDATE app.docs SET j1 = JSON_SET(j1, '$.s', CONCAT('row-', id)), j3 = JSON_SET(j3, '$[0]', id) WHERE id IN (4, 5)`,
		// A row updated many times in one transaction.
		"BEGIN",
	}
	for i := range 40 {
		w = append(w, fmt.Sprintf(`UPDATE app.docs SET j1 = JSON_SET(j1, '$.counter', %d, '$.list[%d]', %d) WHERE id = 2`, i+2, i+1, i))
	}
	w = append(w,
		`UPDATE app.docs SET j1 = JSON_REMOVE(j1, '$.list[3]') WHERE id = 2`,
		"COMMIT",
		// Logged whole: not JSON_SET/REPLACE/REMOVE of the column itself.
		`UPDATE app.docs SET j2 = JSON_MERGE_PATCH(j2, '{"m": 1}'), note = 'whole' WHERE id = 2`,
		// A last update of every row that changes no JSON column: its before
		// image holds every document whole.
		`UPDATE app.docs SET n = n + 100`,
	)
	return w
}

func TestPartialJSONUpdates(t *testing.T) {
	mysqlOnly(t)
	for name, opts := range map[string]testenv.Options{
		"image=FULL":                  {},
		"image=NOBLOB":                {RowImage: "NOBLOB"},
		"image=FULL,metadata=MINIMAL": {RowMetadata: "MINIMAL"},
		"image=FULL,compressed":       {Compressed: true},
	} {
		t.Run(name, func(t *testing.T) {
			opts.Flavor = position.MySQL
			opts.Extra = append(opts.Extra, "--binlog-row-value-options=PARTIAL_JSON")
			partialJSON(t, opts)
		})
	}
}

func partialJSON(t *testing.T, opts testenv.Options) {
	db := testenv.StartT(t, opts)
	exec(t, db, "CREATE DATABASE app", partialJSONTable)
	start := masterStatus(t, db)
	exec(t, db, partialJSONWrites()...)
	stop := masterStatus(t, db)
	changes := readChanges(t, db, start, stop, nil)

	cols := []string{"j1", "j2", "j3"}
	colNum := map[string]string{"j1": "3", "j2": "4", "j3": "6"}
	ups, payloads := mysqlbinlogUpdates(t, db, "docs")
	if opts.Compressed && payloads < 12 { // one per transaction
		t.Fatalf("binlog_transaction_compression=ON, but mysqlbinlog shows %d Transaction_Payload events", payloads)
	}
	rs, err := db.Query(context.Background(), "SELECT LENGTH(CAST(j1 AS CHAR)) FROM app.docs WHERE id = 3")
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := rs.GetInt(0, 0); n < 20000 {
		t.Fatalf("the large document has %d bytes of text, want tens of KB", n)
	}
	rs.Close()
	var updates []seenChange
	for _, ch := range changes {
		if ch.op == "u" {
			updates = append(updates, ch)
		}
	}
	if len(updates) != len(ups) {
		t.Fatalf("sluice decoded %d updates, mysqlbinlog prints %d", len(updates), len(ups))
	}
	// The test must exercise the diffs: most updates logged as partial,
	// with every operation.
	npartial := 0
	for _, u := range ups {
		if u.partial {
			npartial++
		}
	}
	funcs := map[string]int{}
	for _, u := range ups {
		for _, c := range cols {
			for _, f := range []string{"JSON_REPLACE(", "JSON_INSERT(", "JSON_ARRAY_INSERT(", "JSON_REMOVE("} {
				funcs[f] += strings.Count(u.set[colNum[c]], f)
			}
		}
	}
	if npartial < 40 || funcs["JSON_REPLACE("] == 0 || funcs["JSON_INSERT("] == 0 || funcs["JSON_ARRAY_INSERT("] == 0 || funcs["JSON_REMOVE("] == 0 {
		t.Fatalf("the workload was logged with %d partial updates of %d and functions %v: it does not exercise partial JSON", npartial, len(ups), funcs)
	}

	// Oracles, per row and JSON column, in binlog order:
	//  - sluice's before image equals mysqlbinlog's (a whole document);
	//  - sluice's after image equals the next update's before image, byte
	//    for byte (sluice's own text of the whole document), and MySQL's
	//    text of it (mysqlbinlog's WHERE, compacted);
	//  - the last after image equals SELECT.
	type key struct{ id, col string }
	lastAfter := map[key]string{}
	for i, u := range updates {
		id := string(u.before["id"])
		for _, c := range cols {
			k := key{id, c}
			b := string(u.before[c])
			if want := ups[i].where[colNum[c]]; want == "NULL" {
				if b != "null" {
					t.Errorf("update %d id=%s %s: before %s, mysqlbinlog NULL", i, id, c, b)
				}
			} else if w := compactJSON(t, unquoteBinlog(t, want)); b != w {
				t.Errorf("update %d id=%s %s: before\n%s\nmysqlbinlog\n%s", i, id, c, b, w)
			}
			if prev, ok := lastAfter[k]; ok && prev != b {
				t.Errorf("update %d id=%s %s: the document rebuilt from the previous update's diff\n%s\ndiffers from the whole document in this update's before image\n%s", i, id, c, prev, b)
			}
			if a, ok := u.after[c]; ok {
				lastAfter[k] = string(a)
			} else {
				delete(lastAfter, k)
			}
		}
	}
	rs, err = db.Query(context.Background(), "SELECT id, IFNULL(CAST(j1 AS CHAR), 'null'), IFNULL(CAST(j2 AS CHAR), 'null'), IFNULL(CAST(j3 AS CHAR), 'null') FROM app.docs ORDER BY id")
	if err != nil {
		t.Fatal(err)
	}
	for row := range rs.RowNumber() {
		id, _ := rs.GetString(row, 0)
		for ci, c := range cols {
			s, _ := rs.GetString(row, ci+1)
			got, ok := lastAfter[key{id, c}]
			if want := compactJSON(t, s); !ok || got != want {
				t.Errorf("id=%s %s: sluice's last after image\n%s\nSELECT\n%s", id, c, got, want)
			}
		}
	}
	rs.Close()
}

// With binlog_row_image=MINIMAL the before image lacks the document a diff
// applies to: preflight warns, and the first partial update stops the
// reader with ErrServerConfig naming the table, the position and the
// setting to change.
func TestPartialJSONMinimalImage(t *testing.T) {
	mysqlOnly(t)
	db := testenv.StartT(t, testenv.Options{Flavor: position.MySQL, RowImage: "MINIMAL", Extra: []string{"--binlog-row-value-options=PARTIAL_JSON"}})
	exec(t, db, "CREATE DATABASE app", partialJSONTable, `INSERT INTO app.docs VALUES (1, 0, JSON_OBJECT('a', 1, 'pad', REPEAT('x', 200)), NULL, 'x', NULL)`)
	start := masterStatus(t, db)
	exec(t, db, `UPDATE app.docs SET n = 1 WHERE id = 1`, `UPDATE app.docs SET j1 = JSON_SET(j1, '$.a', 2) WHERE id = 1`)
	stop := masterStatus(t, db)
	var logs bytes.Buffer
	r := newReader(t, db, func(c *binlog.Config) {
		c.Start, c.Stop = start, stop
		c.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	})
	var err error
	for err == nil {
		var txn *binlog.Txn
		if txn, err = r.Next(context.Background()); err == nil {
			txn.Release()
		}
	}
	if !errors.Is(err, binlog.ErrServerConfig) {
		t.Fatalf("got %v, want ErrServerConfig", err)
	}
	for _, want := range []string{"app.docs", `"j1"`, "binlog_row_image", "PARTIAL_JSON", "SET GLOBAL binlog_row_image = 'FULL'", "mysql-bin.0000", "row 0"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if !strings.Contains(logs.String(), "binlog_row_value_options=PARTIAL_JSON with binlog_row_image=MINIMAL") {
		t.Errorf("no preflight warning in the log:\n%s", logs.String())
	}
}
