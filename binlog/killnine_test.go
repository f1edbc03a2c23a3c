package binlog_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	osexec "os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-cdc/sluice/binlog"
	"github.com/sluice-cdc/sluice/internal/testenv"
	"github.com/sluice-cdc/sluice/position"
)

// The child process of TestKillNineResume: it reads from the position in
// $SLUICE_CHILD_START and appends what it gets to $SLUICE_CHILD_OUT, one
// write per chunk (so a kill -9 loses no line it wrote):
//
//	R <txn> <id>     a row of app.t
//	D <query>        a DDL statement
//	E <position>     the end of a whole transaction (JSON)
func TestKillNineChild(t *testing.T) {
	out := os.Getenv("SLUICE_CHILD_OUT")
	if out == "" {
		t.Skip("the child process of TestKillNineResume")
	}
	var start, stop position.Position
	if err := json.Unmarshal([]byte(os.Getenv("SLUICE_CHILD_START")), &start); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(os.Getenv("SLUICE_CHILD_STOP")), &stop); err != nil {
		t.Fatal(err)
	}
	cfg, err := binlog.ParseSourceURL(os.Getenv("SLUICE_CHILD_URL"))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Start, cfg.Stop, cfg.ChunkBytes = start, stop, 16<<10
	cfg.Tables, _ = binlog.ParseFilter("app.*")
	r, err := binlog.NewReader(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	f, err := os.OpenFile(out, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for {
		txn, err := r.Next(context.Background())
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		var b bytes.Buffer
		for _, ch := range txn.Changes {
			switch {
			case ch.Op == binlog.OpDDL:
				fmt.Fprintf(&b, "D %s\n", strings.ReplaceAll(ch.Query, "\n", " "))
			case ch.Table.Name == "t":
				fmt.Fprintf(&b, "R %d %d\n", ch.After[1].Int(), ch.After[0].Int())
			default:
				fmt.Fprintf(&b, "R %s.%s\n", ch.Table.Schema, ch.Table.Name)
			}
		}
		if txn.Last && len(txn.Changes) > 0 {
			end, _ := json.Marshal(txn.End)
			fmt.Fprintf(&b, "E %s\n", end)
		}
		if _, err := f.Write(b.Bytes()); err != nil {
			t.Fatal(err)
		}
		if d := os.Getenv("SLUICE_CHILD_DELAY"); d != "" && !txn.Last {
			ms, _ := strconv.Atoi(d)
			time.Sleep(time.Duration(ms) * time.Millisecond) // give the parent time to kill it mid-transaction
		}
	}
}

// childOutput is what a child wrote: its whole transactions (rows by
// transaction number), and the rows after the last whole one.
type childOutput struct {
	committed map[int64][]int64
	partial   int // rows after the last E
	last      position.Position
	first     position.Position // End of the first whole transaction
	other     []string          // DDL and rows of other tables
}

func readChild(t *testing.T, path string) childOutput {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := childOutput{committed: map[int64][]int64{}}
	var pending [][2]int64
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "R "):
			var txn, id int64
			if _, err := fmt.Sscanf(line, "R %d %d", &txn, &id); err != nil {
				out.other = append(out.other, line)
				continue
			}
			pending = append(pending, [2]int64{txn, id})
		case strings.HasPrefix(line, "D "):
			out.other = append(out.other, line)
		case strings.HasPrefix(line, "E "):
			var p position.Position
			if err := json.Unmarshal([]byte(line[2:]), &p); err != nil {
				continue // cut by the kill
			}
			for _, r := range pending {
				out.committed[r[0]] = append(out.committed[r[0]], r[1])
			}
			pending = pending[:0]
			if out.first.IsZero() {
				out.first = p
			}
			out.last = p
		}
	}
	out.partial = len(pending)
	return out
}

// TestKillNineResume is the scenario at the reader's level: a
// consumer starts at FILE:POS on a server that already has GTIDs (an
// account, a schema), is killed with SIGKILL twice under write load, in
// the middle of large transactions, and restarts each time from the End
// of the last whole transaction it saved (a GTID state, since the first
// one). No transaction before the start is delivered, none after it is
// missing or delivered twice, and the first saved position already holds
// the server's whole GTID state at the start.
func TestKillNineResume(t *testing.T) {
	testenv.ForEachFlavor(t, func(t *testing.T, flavor position.Flavor) {
		db := startServer(t, flavor, testenv.Options{})
		exec(t, db, "CREATE USER 'acct'@'%' IDENTIFIED BY 'pw'", "GRANT SELECT ON *.* TO 'acct'@'%'",
			"CREATE DATABASE app", "CREATE TABLE app.pre (id INT PRIMARY KEY)", "INSERT INTO app.pre VALUES (1)",
			"CREATE TABLE app.t (id INT PRIMARY KEY, txn INT, pad VARCHAR(100))")
		start := binlogEnd(t, db) // FILE:POS only, as a user would write it
		before := serverGTIDs(t, db)

		// The writer: transactions 1..n, every fifth of 3000 rows (chunked).
		const n = 40
		rowsOf := func(k int) int {
			if k%5 == 0 {
				return 3000
			}
			return 1 + k%3
		}
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			id := 0
			for k := 1; k <= n; k++ {
				m := rowsOf(k)
				stmt := fmt.Sprintf("INSERT INTO app.t SELECT %d + seq, %d, REPEAT('k', 90) FROM ", id, k)
				setup, from := seqRows(db, m)
				if err := db.Exec(context.Background(), append(setup, stmt+from)...); err != nil {
					t.Error(err)
					return
				}
				id += m
				time.Sleep(30 * time.Millisecond)
			}
		}()

		dir := t.TempDir()
		run := func(i int, from position.Position, stop position.Position, killWhen func(string) bool) string {
			out := filepath.Join(dir, fmt.Sprintf("child%d.out", i))
			js, _ := json.Marshal(from)
			stopJS, _ := json.Marshal(stop)
			cmd := osexec.Command(os.Args[0], "-test.run=^TestKillNineChild$", "-test.count=1")
			cmd.Env = append(os.Environ(), "SLUICE_CHILD_OUT="+out, "SLUICE_CHILD_URL="+db.URL(), "SLUICE_CHILD_START="+string(js),
				"SLUICE_CHILD_STOP="+string(stopJS), "SLUICE_CHILD_DELAY=15", "SLUICE_TEST_FLAVORS=")
			var stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stderr, &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			deadline := time.After(90 * time.Second)
			for {
				select {
				case err := <-done:
					if killWhen != nil || err != nil {
						t.Fatalf("child %d ended before it was killed: %v\n%s", i, err, stderr.String())
					}
					return out
				case <-deadline:
					cmd.Process.Kill()
					t.Fatalf("child %d: timed out\n%s", i, stderr.String())
				case <-time.After(5 * time.Millisecond):
				}
				if killWhen == nil {
					continue
				}
				b, _ := os.ReadFile(out)
				if killWhen(string(b)) {
					cmd.Process.Kill() // SIGKILL
					<-done
					return out
				}
			}
		}
		// Kill when the child is inside a large transaction it has
		// delivered part of, after at least min whole transactions.
		midLarge := func(min int) func(string) bool {
			return func(s string) bool {
				ends := strings.Count(s, "\nE ")
				tail := s[strings.LastIndex(s, "\nE ")+1:]
				return ends >= min && strings.Count(tail, "\nR ") > 100
			}
		}

		var outs []childOutput
		out := readChild(t, run(1, start, position.Position{}, midLarge(6)))
		outs = append(outs, out)
		if !out.first.IsZero() && out.first.GTIDs == "" {
			t.Fatalf("the first saved position %s has no GTID state", out.first)
		}
		if g := mustSet(t, flavor, out.first.GTIDs); !g.Contains(before) {
			t.Fatalf("the first saved position %s lacks the server's GTID state at the start (%s)", out.first, before)
		}
		out = readChild(t, run(2, out.last, position.Position{}, midLarge(4)))
		outs = append(outs, out)
		wg.Wait()
		stop := binlogEnd(t, db)
		out = readChild(t, run(3, out.last, stop, nil))
		outs = append(outs, out)

		// Every transaction exactly once, whole, across the three children.
		got := map[int64][]int64{}
		for i, o := range outs {
			if len(o.other) > 0 {
				t.Errorf("child %d delivered what was written before the start: %q", i+1, o.other)
			}
			for k, ids := range o.committed {
				if _, dup := got[k]; dup {
					t.Errorf("transaction %d delivered by two children", k)
				}
				got[k] = ids
			}
			t.Logf("child %d: %d whole transactions, %d rows of an unfinished one when killed", i+1, len(o.committed), o.partial)
		}
		for k := 1; k <= n; k++ {
			ids := got[int64(k)]
			if len(ids) != rowsOf(k) {
				t.Errorf("transaction %d: %d rows, want %d", k, len(ids), rowsOf(k))
			}
			seen := map[int64]bool{}
			for _, id := range ids {
				if seen[id] {
					t.Errorf("transaction %d: row %d twice", k, id)
				}
				seen[id] = true
			}
		}
		if len(got) != n {
			t.Errorf("%d transactions delivered, want %d", len(got), n)
		}
		if outs[0].partial == 0 || outs[1].partial == 0 {
			t.Logf("note: a kill did not land inside a large transaction (rows after the last whole one: %d, %d)", outs[0].partial, outs[1].partial)
		}
	})
}
