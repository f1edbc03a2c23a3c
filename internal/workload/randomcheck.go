package workload

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/sluice-cdc/sluice/codec"
)

// What a pipeline does with the statement-logged transactions of a
// random workload (source.on_statement_change).
const (
	StatementStop = "stop" // the source stops at the first one
	StatementSkip = "skip" // each is skipped (a warning and a metric)
)

// DDL of the random workload, as a consumer rebuilding the tables applies
// it (the servers log CREATE TABLE ... SELECT rewritten, with backticks).
var (
	ddlName    = "(?:`?" + RandomDB + "`?\\.)?`?(\\w+)`?"
	ddlAdd     = regexp.MustCompile(`(?is)^ALTER TABLE ` + ddlName + ` ADD COLUMN (\w+) INT(?: DEFAULT (-?\d+))?$`)
	ddlDropCol = regexp.MustCompile(`(?is)^ALTER TABLE ` + ddlName + ` DROP COLUMN (\w+)$`)
	ddlCreate  = regexp.MustCompile(`(?is)^CREATE TABLE ` + ddlName)
	ddlDrop    = regexp.MustCompile(`(?is)^DROP TABLE (?:IF EXISTS )?` + ddlName)
)

// CheckRandom checks a pipeline's output (messages with the sluice block,
// in any order) of the workload exp against server, the tables as SELECT
// reads them (SelectAll) after the workload:
//   - the tables rebuilt from the output (row changes in sequence order,
//     and the workload's DDL applied to them) equal server's, column by
//     column;
//   - every GTID to deliver is there, its messages contiguous and once;
//     no other GTID is (prepared parts, XA ROLLBACK, statement-logged
//     transactions);
//   - every committed transaction's marker is there once, in the
//     transaction of its GTID; no rolled back or statement-logged one.
func CheckRandom(evs []*codec.Event, exp *Expectation, server map[string]TableRows) error {
	return checkRandom(evs, exp, exp.Deliver, server)
}

// CheckRandomStopped checks the output of a pipeline that stopped at the
// first statement-logged transaction of exp: it holds only transactions
// committed before that one, each once, every marker at most once.
// (Those it read but had not yet written when it stopped come after a
// restart; CheckRandom checks the output of both runs.)
func CheckRandomStopped(evs []*codec.Event, exp *Expectation) error {
	return checkRandom(evs, exp, exp.BeforeStatement, nil)
}

// checkRandom checks evs against deliver, and against server unless it is
// nil (then transactions of deliver may be missing).
func checkRandom(evs []*codec.Event, exp *Expectation, deliver map[string]Delivery, server map[string]TableRows) error {
	markers := map[int]string{}
	for _, d := range deliver {
		if d.Marker != 0 {
			markers[d.Marker] = d.What
		}
	}
	evs = slices.Clone(evs)
	for _, ev := range evs {
		if ev.Sluice == nil {
			return fmt.Errorf("a message has no sluice block: %+v", ev)
		}
	}
	sort.SliceStable(evs, func(i, j int) bool { return evs[i].Sluice.Seq < evs[j].Sluice.Seq })

	var errs []error
	fail := func(format string, args ...any) {
		if len(errs) < 20 {
			errs = append(errs, fmt.Errorf(format, args...))
		}
	}
	// Transactions by GTID: contiguous, once; markers once, in theirs.
	markerGTID := map[int]string{}
	for g, d := range deliver {
		if d.Marker != 0 {
			markerGTID[d.Marker] = g
		}
	}
	seen := map[string]bool{}
	hasDDL := map[string]bool{}
	markerSeen := map[int]int{}
	last := ""
	reported := map[string]bool{}
	for i, ev := range evs {
		g := ev.Source.GTID
		if g != last {
			if seen[g] {
				fail("GTID %s comes again at message %d (seq %d): delivered twice, or its messages are not together", g, i, ev.Sluice.Seq)
			}
			seen[g] = true
			last = g
		}
		if _, ok := deliver[g]; !ok && !reported[g] {
			reported[g] = true
			why := exp.Never[g]
			if why == "" {
				if _, later := exp.Deliver[g]; later {
					why = "committed after the statement-logged transaction the source must stop at"
				} else {
					why = "a GTID the workload did not commit"
				}
			}
			fail("message seq %d (%s.%s op %q) has GTID %s: %s", ev.Sluice.Seq, ev.Source.DB, ev.Source.Table, ev.Op, g, why)
		}
		if ev.IsDDL() {
			hasDDL[g] = true
			continue
		}
		if strings.HasPrefix(ev.Source.Table, "sbr") {
			fail("a change of %s.sbr (written only with binlog_format=STATEMENT) was delivered: seq %d GTID %s", RandomDB, ev.Sluice.Seq, g)
		}
		if ev.Source.Table == "txlog" && ev.Op == "c" {
			var m int
			if err := json.Unmarshal(ev.After["n"], &m); err != nil {
				fail("txlog row %s: %v", ev.After["n"], err)
				continue
			}
			markerSeen[m]++
			if want, ok := markerGTID[m]; ok && want != g {
				fail("marker %d came with GTID %s, its transaction's is %s (%s)", m, g, want, deliver[want].What)
			}
		}
	}
	for g, d := range deliver {
		if server == nil {
			break // a prefix
		}
		if !seen[g] {
			fail("GTID %s was not delivered: %s", g, d.What)
		} else if d.DDL != "" && !hasDDL[g] {
			fail("GTID %s carries no DDL message: %s", g, d.What)
		}
	}
	for m, what := range markers {
		if markerSeen[m] != 1 && (server != nil || markerSeen[m] > 1) {
			fail("marker %d delivered %d times, want once: %s", m, markerSeen[m], what)
		}
	}
	for m, n := range markerSeen {
		if _, ok := markers[m]; !ok {
			why := exp.Gone[m]
			if why == "" {
				why = "after the statement-logged transaction the source must stop at"
			}
			fail("marker %d delivered %d times, want never: %s", m, n, why)
		}
	}

	// The tables rebuilt from the output.
	rebuilt, err := rebuild(evs)
	if err != nil {
		fail("%v", err)
	}
	if server == nil {
		return errors.Join(errs...)
	}
	for name, want := range server {
		got := rebuilt[name]
		keyCol := "id"
		if name == "txlog" {
			keyCol = "n"
		}
		n := 0
		for key, row := range want {
			if name == "txlog" {
				var m int
				fmt.Sscan(key, &m)
				if _, gone := exp.Gone[m]; gone {
					continue // a statement-logged transaction's marker: on the server, never delivered
				}
			}
			n++
			g, ok := got[key]
			if !ok {
				fail("%s %s=%s: on the server, missing from the rebuilt table (server row %s)", name, keyCol, key, rowText(row))
				continue
			}
			if !sameRow(row, g) {
				fail("%s %s=%s: server %s, rebuilt %s", name, keyCol, key, rowText(row), rowText(g))
			}
		}
		for key := range got {
			if _, ok := want[key]; !ok {
				fail("%s %s=%s: rebuilt from the output, not on the server (%s)", name, keyCol, key, rowText(got[key]))
			}
		}
		if n != len(got) {
			fail("%s: %d rows on the server, %d rebuilt", name, n, len(got))
		}
	}
	for name, rows := range rebuilt {
		if _, ok := server[name]; !ok && !strings.HasPrefix(name, "sbr") {
			fail("table %s rebuilt from the output (%d rows) is not on the server", name, len(rows))
		}
	}
	return errors.Join(errs...)
}

func sameRow(a, b map[string]*string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		w, ok := b[k]
		if !ok || (v == nil) != (w == nil) || v != nil && *v != *w {
			return false
		}
	}
	return true
}

func rowText(r map[string]*string) string {
	keys := make([]string, 0, len(r))
	for k := range r {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	b.WriteByte('{')
	for i, k := range keys {
		if i > 0 {
			b.WriteString(", ")
		}
		if r[k] == nil {
			fmt.Fprintf(&b, "%s: NULL", k)
		} else {
			v := *r[k]
			if len(v) > 40 {
				v = v[:20] + fmt.Sprintf("…(%d bytes)", len(v))
			}
			fmt.Fprintf(&b, "%s: %q", k, v)
		}
	}
	b.WriteByte('}')
	return b.String()
}

// rebuild applies the output, in sequence order, to empty tables.
func rebuild(evs []*codec.Event) (map[string]TableRows, error) {
	state := map[string]TableRows{}
	table := func(name string) TableRows {
		if state[name] == nil {
			state[name] = TableRows{}
		}
		return state[name]
	}
	var errs []error
	for _, ev := range evs {
		if ev.IsDDL() {
			q := strings.TrimSpace(ev.DDL)
			switch {
			case ddlAdd.MatchString(q):
				m := ddlAdd.FindStringSubmatch(q)
				var def *string
				if m[3] != "" {
					def = &m[3]
				}
				for _, row := range table(m[1]) {
					row[m[2]] = def
				}
			case ddlDropCol.MatchString(q):
				m := ddlDropCol.FindStringSubmatch(q)
				for _, row := range table(m[1]) {
					delete(row, m[2])
				}
			case ddlCreate.MatchString(q):
				state[ddlCreate.FindStringSubmatch(q)[1]] = TableRows{}
			case ddlDrop.MatchString(q):
				delete(state, ddlDrop.FindStringSubmatch(q)[1])
			default:
				errs = append(errs, fmt.Errorf("DDL %.100q at seq %d is none the workload wrote", q, ev.Sluice.Seq))
			}
			continue
		}
		rows := table(ev.Source.Table)
		keyCol := "id"
		if ev.Source.Table == "txlog" {
			keyCol = "n"
		}
		if ev.Before != nil {
			k, _ := jsonText(ev.Before[keyCol])
			if _, ok := rows[deref(k)]; !ok {
				errs = append(errs, fmt.Errorf("seq %d: %s of %s %s=%s, a row the output never had", ev.Sluice.Seq, ev.Op, ev.Source.Table, keyCol, deref(k)))
			}
			delete(rows, deref(k))
		}
		if ev.After != nil {
			row := map[string]*string{}
			for col, raw := range ev.After {
				v, err := jsonText(raw)
				if err != nil {
					errs = append(errs, fmt.Errorf("seq %d column %s: %v", ev.Sluice.Seq, col, err))
				}
				row[col] = v
			}
			k := deref(row[keyCol])
			if _, ok := rows[k]; ok && ev.Op == "c" {
				errs = append(errs, fmt.Errorf("seq %d: insert of %s %s=%s, a row the output already had", ev.Sluice.Seq, ev.Source.Table, keyCol, k))
			}
			rows[k] = row
		}
	}
	return state, errors.Join(errs...)
}

func deref(s *string) string {
	if s == nil {
		return "<null>"
	}
	return *s
}

// jsonText is a JSON value as the server's text: a string unquoted, a
// number as written, nil for null.
func jsonText(raw json.RawMessage) (*string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	if raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, err
		}
		return &s, nil
	}
	s := string(raw)
	return &s, nil
}
