package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-cdc/sluice/codec"
	"github.com/sluice-cdc/sluice/internal/testenv"
	"github.com/sluice-cdc/sluice/internal/testenv/kafkaenv"
	"github.com/sluice-cdc/sluice/position"
)

// The CLI as a user runs it: the real binary against a real server.

// binDir holds the sluice binary the tests run, built once per test
// process (each flavor's subtest would otherwise link it again).
var binDir struct {
	once sync.Once
	dir  string
	bin  string
	err  error
}

func TestMain(m *testing.M) {
	code := m.Run()
	closeDebezium()
	kafkaenv.Stop()
	if binDir.dir != "" {
		os.RemoveAll(binDir.dir)
	}
	os.Exit(code)
}

// buildSluice returns the path of the sluice binary, built from this
// package's source on the first call.
func buildSluice(t *testing.T) string {
	t.Helper()
	binDir.once.Do(func() {
		dir, err := os.MkdirTemp("", "sluice-test-bin-")
		if err != nil {
			binDir.err = err
			return
		}
		binDir.dir, binDir.bin = dir, filepath.Join(dir, "sluice")
		if out, err := exec.Command("go", "build", "-o", binDir.bin, ".").CombinedOutput(); err != nil {
			binDir.err = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if binDir.err != nil {
		t.Fatal(binDir.err)
	}
	return binDir.bin
}

func masterPos(t *testing.T, db *testenv.Server) string {
	t.Helper()
	q := "SHOW MASTER STATUS"
	if db.Flavor == position.MySQL {
		q = "SHOW BINARY LOG STATUS" // MySQL 8.2+ (the tests run 9.7)
	}
	rs, err := db.Query(context.Background(), q)
	if err != nil {
		t.Fatal(err)
	}
	f, _ := rs.GetString(0, 0)
	p, _ := rs.GetString(0, 1)
	return f + ":" + p
}

func run(t *testing.T, bin string, args ...string) (stdout, stderr string) {
	t.Helper()
	var o bytes.Buffer
	_, stderr = runTo(t, &o, bin, args...)
	return o.String(), stderr
}

// runTo is run with the standard output written to w.
func runTo(t *testing.T, w io.Writer, bin string, args ...string) (stdout io.Writer, stderr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	var e bytes.Buffer
	cmd.Stdout, cmd.Stderr = w, &e
	if err := cmd.Run(); err != nil {
		t.Fatalf("sluice %s: %v\n%s", strings.Join(args, " "), err, e.String())
	}
	return w, e.String()
}

func events(t *testing.T, out string) []*codec.Event {
	t.Helper()
	var evs []*codec.Event
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		ev, err := codec.DecodeLine(sc.Bytes())
		if err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		evs = append(evs, ev)
	}
	return evs
}

func rowEvents(evs []*codec.Event) []*codec.Event {
	var rows []*codec.Event
	for _, ev := range evs {
		if !ev.IsDDL() {
			rows = append(rows, ev)
		}
	}
	return rows
}

func TestTailRangeCheckpointAndRead(t *testing.T) {
	bin := buildSluice(t)
	testenv.ForEachFlavor(t, func(t *testing.T, flavor position.Flavor) { tailRangeCheckpointAndRead(t, bin, flavor) })
}

func tailRangeCheckpointAndRead(t *testing.T, bin string, flavor position.Flavor) {
	db := testenv.StartT(t, testenv.Options{Flavor: flavor})
	ctx := context.Background()
	if err := db.Exec(ctx, "CREATE DATABASE shop", "CREATE TABLE shop.items (id INT PRIMARY KEY, name VARCHAR(20), price DECIMAL(6,2))", "CREATE TABLE shop.other (id INT PRIMARY KEY)"); err != nil {
		t.Fatal(err)
	}
	from := masterPos(t, db)
	if err := db.Exec(ctx, "INSERT INTO shop.items VALUES (1, 'pen', 1.50), (2, 'ink', 7.25)", "INSERT INTO shop.other VALUES (1)", "UPDATE shop.items SET price = 1.75 WHERE id = 1", "DELETE FROM shop.items WHERE id = 2"); err != nil {
		t.Fatal(err)
	}
	to := masterPos(t, db)

	// A range, one table, with the summary.
	out, errOut := run(t, bin, "tail", "--source", db.URL(), "--tables", "shop.items", "--from", from, "--to", to)
	evs := events(t, out)
	var ops []string
	for _, ev := range evs {
		ops = append(ops, ev.Op)
	}
	if strings.Join(ops, ",") != "c,c,u,d" {
		t.Fatalf("ops %v\n%s", ops, out)
	}
	if string(evs[2].After["price"]) != `"1.75"` || string(evs[2].Before["price"]) != `"1.50"` || evs[3].Source.Table != "items" {
		t.Fatalf("update/delete lines: %+v %+v", evs[2], evs[3])
	}
	if !strings.Contains(errOut, "rows=4 txns=3 ") {
		t.Fatalf("summary: %q", errOut)
	}
	// --format sluice is the default.
	named, _ := run(t, bin, "tail", "--source", db.URL(), "--tables", "shop.items", "--from", from, "--to", to, "--format", "sluice")
	if tsMS := regexp.MustCompile(`"ts_ms":[0-9]+`); tsMS.ReplaceAllString(named, "") != tsMS.ReplaceAllString(out, "") {
		t.Fatalf("--format sluice differs from the default:\n%s\n%s", named, out)
	}
	// --format none: only the summary.
	out, errOut = run(t, bin, "tail", "--source", db.URL(), "--from", from, "--to", to, "--format", "none")
	if out != "" || !strings.Contains(errOut, "rows=5 txns=4 ") {
		t.Fatalf("--format none: stdout %q, stderr %q", out, errOut)
	}

	// --checkpoint: a second run resumes after what the first printed.
	ckpt := filepath.Join(t.TempDir(), "tail.ckpt")
	out, _ = run(t, bin, "tail", "--source", db.URL(), "--tables", "shop.*", "--from", from, "--to", to, "--checkpoint", ckpt)
	if n := len(events(t, out)); n != 5 {
		t.Fatalf("first checkpointed run printed %d events, want 5", n)
	}
	var cp struct {
		Version uint64                    `json:"version"`
		Sources map[string]map[string]any `json:"sources"`
	}
	raw, err := os.ReadFile(ckpt)
	if err != nil || json.Unmarshal(raw, &cp) != nil || cp.Sources["tail"]["gtids"] == nil {
		t.Fatalf("checkpoint file: %s %v", raw, err)
	}
	if err := db.Exec(ctx, "INSERT INTO shop.items VALUES (3, 'nib', 0.99)"); err != nil {
		t.Fatal(err)
	}
	to2 := masterPos(t, db)
	out, errOut = run(t, bin, "tail", "--source", db.URL(), "--tables", "shop.*", "--to", to2, "--checkpoint", ckpt)
	evs = events(t, out)
	if len(evs) != 1 || string(evs[0].After["id"]) != "3" {
		t.Fatalf("resumed run: want only the new insert, got %s (stderr %s)", out, errOut)
	}

	// read: the server's own binlog file from disk gives the same lines.
	file, _, _ := strings.Cut(from, ":")
	out, _ = run(t, bin, "read", "--tables", "shop.items", filepath.Join(db.DataDir(), file))
	evs = rowEvents(events(t, out))
	if len(evs) != 5 || string(evs[4].After["name"]) != `"nib"` {
		t.Fatalf("read: %d events\n%s", len(evs), out)
	}
}

// A file written without column names: --schema-from fills them in.
// TestTailSnapshotThenStream is the README's first example as a new user
// runs it, on each server: `sluice tail --source … --tables 'shop.*'` as a
// replication user with the usual grants (RELOAD, not LOCK TABLES), while
// a writer changes the table. The snapshot comes first, then the stream,
// each change exactly once: an insert never finds its row already there,
// an update or a delete always finds it; the rows rebuilt equal the
// table.
func TestTailSnapshotThenStream(t *testing.T) {
	bin := buildSluice(t)
	signalServers(t, func(t *testing.T, opts testenv.Options, _ string) { tailSnapshotThenStream(t, bin, opts) })
}

func tailSnapshotThenStream(t *testing.T, bin string, opts testenv.Options) {
	db := testenv.StartT(t, opts)
	ctx := context.Background()
	const rows = 20000
	from, setup := db.SeqFrom(1, rows)
	stmts := append([]string{"CREATE DATABASE shop", "USE shop",
		"CREATE TABLE shop.items (id INT PRIMARY KEY, name VARCHAR(40), price DECIMAL(10,2), stock INT NOT NULL)"}, setup...)
	stmts = append(stmts, "INSERT INTO shop.items SELECT seq, CONCAT('item', seq), seq / 100, 10 FROM "+from,
		"CREATE USER 'repl'@'%' IDENTIFIED BY 'secret'",
		"GRANT SELECT, RELOAD, REPLICATION SLAVE, REPLICATION CLIENT ON *.* TO 'repl'@'%'")
	if err := db.Exec(ctx, stmts...); err != nil {
		t.Fatal(err)
	}
	var stop atomic.Bool
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		c, err := db.Conn(ctx)
		if err != nil {
			t.Error(err)
			return
		}
		defer c.Close()
		rng := rand.New(rand.NewPCG(8, 9))
		next := rows + 1
		for !stop.Load() {
			id := rng.IntN(rows) + 1
			var q string
			switch rng.IntN(4) {
			case 0:
				q = fmt.Sprintf("INSERT INTO shop.items VALUES (%d, 'new', 9.99, 1)", next)
				next++
			case 1:
				q = fmt.Sprintf("DELETE FROM shop.items WHERE id = %d", id)
			default:
				q = fmt.Sprintf("UPDATE shop.items SET stock = stock - 1, price = price + 0.01 WHERE id = %d", id)
			}
			c.Execute(q)
		}
	}()
	time.Sleep(200 * time.Millisecond)
	out := filepath.Join(t.TempDir(), "out.jsonl")
	f, err := os.Create(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var stderr syncBuffer
	url := "mysql://repl:secret@" + db.Addr()
	cmd := exec.Command(bin, "tail", "--source", url, "--tables", "shop.*", "--snapshot-chunk", "1000")
	cmd.Stdout, cmd.Stderr = f, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		b, _ := os.ReadFile(out)
		if bytes.Contains(b, []byte(`"snapshot":"last"`)) {
			break
		}
		if time.Now().After(deadline) {
			stop.Store(true)
			wg.Wait()
			t.Fatalf("no snapshot after 60 s\n%s", stderr.String())
		}
	}
	time.Sleep(time.Second) // changes after the snapshot too
	stop.Store(true)
	wg.Wait()
	end := masterPos(t, db)
	// tail has printed everything up to end once its output stops growing.
	for prev, deadline := -1, time.Now().Add(30*time.Second); ; time.Sleep(300 * time.Millisecond) {
		b, _ := os.ReadFile(out)
		if len(b) == prev || time.Now().After(deadline) {
			break
		}
		prev = len(b)
	}
	cmd.Process.Signal(syscall.SIGTERM)
	cmd.Wait()
	logLines := strings.Split(strings.TrimSpace(stderr.String()), "\n")
	t.Logf("stream up to %s; %s", end, logLines[len(logLines)-1])

	b, _ := os.ReadFile(out)
	state := map[string]string{}
	reads, changes, streaming := 0, 0, false
	for _, line := range bytes.Split(b, []byte("\n")) {
		if len(line) == 0 {
			continue
		}
		ev, err := codec.DecodeLine(line)
		if err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		if ev.IsDDL() {
			continue
		}
		if ev.Op == "r" {
			if streaming {
				t.Fatalf("a snapshot row after the stream began: %s", line)
			}
			reads++
		} else {
			streaming = true
			changes++
			if ev.Op == "c" {
				if _, ok := state[string(ev.After["id"])]; ok {
					t.Fatalf("insert of a row the snapshot or the stream already had: %s", line)
				}
			} else if _, ok := state[string(ev.Before["id"])]; !ok {
				t.Fatalf("%s of a row nothing delivered: %s", ev.Op, line)
			}
		}
		if ev.Before != nil {
			delete(state, string(ev.Before["id"]))
		}
		if ev.After != nil {
			j, _ := json.Marshal(ev.After)
			state[string(ev.After["id"])] = string(j)
		}
	}
	if changes == 0 {
		t.Fatal("no change streamed after the snapshot")
	}
	rs, err := db.Query(ctx, "SELECT id, name, price, stock FROM shop.items")
	if err != nil {
		t.Fatal(err)
	}
	bad := 0
	for i := 0; i < rs.RowNumber(); i++ {
		id, _ := rs.GetInt(i, 0)
		name, _ := rs.GetString(i, 1)
		price, _ := rs.GetString(i, 2)
		stock, _ := rs.GetInt(i, 3)
		j, _ := json.Marshal(map[string]any{"id": id, "name": name, "price": price, "stock": stock})
		if got := state[fmt.Sprint(id)]; got != string(j) {
			if bad++; bad < 5 {
				t.Errorf("id %d: rebuilt %s, server %s", id, got, j)
			}
		}
		delete(state, fmt.Sprint(id))
	}
	t.Logf("%d snapshot rows, %d changes", reads, changes)
	if bad > 0 || len(state) > 0 {
		t.Fatalf("%d rows differ, %d rebuilt rows not on the server", bad, len(state))
	}
}

func TestReadSchemaFrom(t *testing.T) {
	bin := buildSluice(t)
	testenv.ForEachFlavor(t, func(t *testing.T, flavor position.Flavor) {
		// A server that logs no column names writes the file.
		db := testenv.StartT(t, testenv.Options{Flavor: flavor, RowMetadata: "MINIMAL"})
		if err := db.Exec(context.Background(), "CREATE DATABASE shop",
			"CREATE TABLE shop.items (id INT UNSIGNED PRIMARY KEY, name VARCHAR(40) NOT NULL, price DECIMAL(8,2), added DATETIME(3), tags SET('new','sale'), kind ENUM('book','toy'), note TEXT, raw VARBINARY(8))",
			"INSERT INTO shop.items VALUES (1, 'Dune', 9.99, '2023-11-14 22:13:20.125', 'new', 'book', 'a classic', x'00ff')"); err != nil {
			t.Fatal(err)
		}
		name, _, _ := strings.Cut(masterPos(t, db), ":")
		file := filepath.Join(db.DataDir(), name)
		out, _ := run(t, bin, "read", "--tables", "shop.items", file)
		if !strings.Contains(out, `"@2":"Dune"`) {
			t.Fatalf("without --schema-from, columns are numbered: %.300s", out)
		}
		out, _ = run(t, bin, "read", "--tables", "shop.items", "--schema-from", db.URL(), file)
		if !strings.Contains(out, `"name":"Dune"`) || !strings.Contains(out, `"tags":["new"]`) || !strings.Contains(out, `"price":"9.99"`) {
			t.Fatalf("with --schema-from: %.300s", out)
		}
	})
}

func TestBadInput(t *testing.T) {
	bin := buildSluice(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"tail"}, "--source is required"},
		{[]string{"tail", "--source", "postgres://x@y"}, "must look like mysql://"},
		{[]string{"tail", "--source", "mysql://u@127.0.0.1:1", "--from", "yesterday"}, "want current, earliest, FILE:POS or gtid:SET"},
		{[]string{"tail", "--source", "mysql://u@127.0.0.1:1", "--tables", "nodot"}, "must be db.table"},
		{[]string{"tail", "--source", "mysql://u@127.0.0.1:1", "--format", "xml"}, "want sluice, debezium or none"},
		{[]string{"tail", "--source", "mysql://u@127.0.0.1:1", "--schemas"}, "--schemas is for --format debezium"},
		{[]string{"tail", "--source", "mysql://u@127.0.0.1:1", "--format-option", "decimal.handling.mode=string"}, "--format-option is for --format debezium"},
		{[]string{"tail", "--source", "mysql://u@127.0.0.1:1", "--format", "debezium", "--format-option", "decimal.handling.mode"}, "want KEY=VALUE"},
		{[]string{"tail", "--source", "mysql://u@127.0.0.1:1", "--format", "debezium", "--format-option", "decimal.mode=string"}, `unknown option "decimal.mode"; the options are decimal.handling.mode,`},
		{[]string{"tail", "--source", "mysql://u@127.0.0.1:1", "--format", "debezium", "--format-option", "decimal.handling.mode=exact"}, `decimal.handling.mode is "exact"`},
		{[]string{"tail", "--source", "mysql://u@127.0.0.1:1"}, "connection refused"},
		{[]string{"read", "main_test.go"}, "not a binlog file"},
	} {
		cmd := exec.Command(bin, tc.args...)
		out, err := cmd.CombinedOutput()
		if err == nil || !strings.Contains(string(out), tc.want) {
			t.Errorf("sluice %v: want an error containing %q, got %v: %s", tc.args, tc.want, err, out)
		}
	}
	// Input only the server can judge: each its own message, at once, and
	// no password in it.
	testenv.ForEachFlavor(t, func(t *testing.T, flavor position.Flavor) {
		db, ahead, monitor := serverForBadInput(t, flavor)
		for _, tc := range []struct {
			args []string
			want string
		}{
			{[]string{"--source", "mysql://root:pw-wrong@" + db.Addr()}, "Access denied for user 'root'"},
			// The snapshot's position needs the monitoring privilege, the
			// stream REPLICATION SLAVE: sluice names each.
			{[]string{"--source", "mysql://nobinlog:pw-nobinlog@" + db.Addr()}, "needs " + monitor + " to read the current binlog position"},
			{[]string{"--source", "mysql://nobinlog:pw-nobinlog@" + db.Addr(), "--from", "current"}, "needs REPLICATION SLAVE"},
			{[]string{"--source", db.URL(), "--from", "mysql-bin.000099:4"}, "never wrote the binlog file mysql-bin.000099"},
			{[]string{"--source", db.URL(), "--from", ahead}, "ahead of the server"},
		} {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			out, err := exec.CommandContext(ctx, bin, append([]string{"tail", "--tables", "shop.*"}, tc.args...)...).CombinedOutput()
			timedOut := ctx.Err() != nil
			cancel()
			if err == nil || timedOut || !strings.Contains(string(out), tc.want) {
				t.Errorf("sluice tail %v: want an error containing %q at once, got %v (timed out: %v): %s", tc.args, tc.want, err, timedOut, out)
			}
			if strings.Contains(string(out), "pw-") {
				t.Errorf("sluice tail %v: a password in the output: %s", tc.args, out)
			}
			if strings.Contains(string(out), "handleAuthResult") || strings.Contains(string(out), "readAuthResult") {
				t.Errorf("sluice tail %v: go-mysql's call path in the message, not the server's words: %s", tc.args, out)
			}
		}
	})
}

// kill -9 in the middle of a snapshot under write load, restart: the
// snapshot goes on where it stopped (while streaming), and snapshot rows
// plus changes from all runs rebuild the table exactly.
// signalServers runs fn on MariaDB, MySQL, and MySQL without GTIDs,
// where the watermark method (resuming a snapshot, incremental
// snapshots) writes its watermark rows to the signal table signal
// (app.sluice_signal, made by fn; "" where none is needed).
func signalServers(t *testing.T, fn func(t *testing.T, opts testenv.Options, signal string)) {
	testenv.ForEachFlavor(t, func(t *testing.T, flavor position.Flavor) {
		fn(t, testenv.Options{Flavor: flavor}, "")
		if flavor == position.MySQL {
			t.Run("no-gtid", func(t *testing.T) {
				fn(t, testenv.Options{Flavor: flavor, NoGTID: true}, "app.sluice_signal")
			})
		}
	})
}

func TestSnapshotKill9Resume(t *testing.T) {
	bin := buildSluice(t)
	signalServers(t, func(t *testing.T, opts testenv.Options, signal string) { snapshotKill9Resume(t, bin, opts, signal) })
}

func snapshotKill9Resume(t *testing.T, bin string, opts testenv.Options, signal string) {
	db := testenv.StartT(t, opts)
	ctx := context.Background()
	const rows = 30000
	from, setup := db.SeqFrom(1, rows)
	stmts := append([]string{"CREATE DATABASE app", "USE app",
		"CREATE TABLE app.t (id INT PRIMARY KEY, v VARCHAR(40), n INT)"}, setup...)
	stmts = append(stmts, "INSERT INTO app.t SELECT seq, CONCAT('v', seq), 0 FROM "+from)
	if signal != "" {
		stmts = append(stmts, "CREATE TABLE "+signal+" (id VARCHAR(64) PRIMARY KEY, type VARCHAR(32) NOT NULL, data VARCHAR(2048))")
	}
	if err := db.Exec(ctx, stmts...); err != nil {
		t.Fatal(err)
	}
	var stop atomic.Bool
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		rng := rand.New(rand.NewPCG(3, 4))
		next := rows + 1
		for !stop.Load() {
			id := rng.IntN(rows) + 1
			var q string
			switch rng.IntN(3) {
			case 0:
				q = fmt.Sprintf("INSERT INTO app.t VALUES (%d, 'new', 1)", next)
				next++
			case 1:
				q = fmt.Sprintf("UPDATE app.t SET n = n + 1 WHERE id = %d", id)
			default:
				q = fmt.Sprintf("DELETE FROM app.t WHERE id = %d", id)
			}
			db.Exec(ctx, q)
			// At most ~100 transactions a second: tail --checkpoint saves
			// (two fsyncs) after each one, and on a loaded machine a
			// faster writer keeps it ever further behind the chunks'
			// watermarks, so the snapshot would never finish.
			time.Sleep(10 * time.Millisecond)
		}
	}()
	dir := t.TempDir()
	ckpt := filepath.Join(dir, "tail.ckpt")
	args := []string{"tail", "--source", db.URL(), "--tables", "app.t", "--checkpoint", ckpt, "--snapshot-chunk", "300", "--snapshot-parallel", "1"}
	if signal != "" {
		args = append(args, "--signal-table", signal)
	}
	stderr := &syncBuffer{} // the log of the runs after the kill
	start := func(name string, extra ...string) (*exec.Cmd, string) {
		out := filepath.Join(dir, name)
		f, err := os.Create(out)
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(bin, append(append([]string{}, args...), extra...)...)
		cmd.Stdout = f
		cmd.Stderr = stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); f.Close() })
		return cmd, out
	}
	lines := func(path string) int {
		b, _ := os.ReadFile(path)
		return bytes.Count(b, []byte("\n"))
	}
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(60 * time.Second); !cond(); time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				l := stderr.String()
				t.Fatalf("timed out waiting for %s; sluice's log:\n%s", what, l[max(0, len(l)-4000):])
			}
		}
	}

	// The first run writes into a pipe the test stops reading after 6000
	// lines: sluice then blocks mid-snapshot, however fast it is, and is
	// killed there.
	out1 := filepath.Join(dir, "run1.jsonl")
	run1 := exec.Command(bin, args...)
	pipe, err := run1.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := run1.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { run1.Process.Kill() })
	var got []byte
	sc := bufio.NewScanner(pipe)
	sc.Buffer(nil, 1<<20)
	for n := 0; n < 6000 && sc.Scan(); n++ {
		got = append(append(got, sc.Bytes()...), '\n')
	}
	time.Sleep(300 * time.Millisecond) // let it save checkpoints up to what the pipe took
	run1.Process.Signal(syscall.SIGKILL)
	// What it wrote before dying is output too: read the pipe to its end.
	for sc.Scan() {
		got = append(append(got, sc.Bytes()...), '\n')
	}
	os.WriteFile(out1, got, 0o644)
	run1.Wait()
	raw, _ := os.ReadFile(ckpt)
	if !bytes.Contains(raw, []byte(`"snapshot"`)) {
		t.Fatalf("the checkpoint after the kill holds no unfinished snapshot: %s", raw)
	}

	run2, out2 := start("run2.jsonl")
	waitFor("the resumed snapshot to finish", func() bool {
		b, _ := os.ReadFile(out2)
		return bytes.Contains(b, []byte(`"snapshot":"last"`))
	})
	stop.Store(true)
	wg.Wait()
	end := masterPos(t, db)
	time.Sleep(500 * time.Millisecond)
	run2.Process.Signal(syscall.SIGTERM)
	run2.Wait()
	run3, out3 := start("run3.jsonl", "--to", end)
	if err := run3.Wait(); err != nil {
		t.Fatalf("third run: %v", err)
	}

	state := map[string]string{}
	snapRows := 0
	for _, path := range []string{out1, out2, out3} {
		b, _ := os.ReadFile(path)
		for _, line := range bytes.Split(b, []byte("\n")) {
			ev, err := codec.DecodeLine(line)
			if err != nil || ev.IsDDL() {
				continue // the line the kill cut, or empty
			}
			if ev.Op == "r" {
				snapRows++
			}
			if ev.Before != nil {
				delete(state, string(ev.Before["id"]))
			}
			if ev.After != nil {
				j, _ := json.Marshal(ev.After)
				state[string(ev.After["id"])] = string(j)
			}
		}
	}
	want := map[string]string{}
	c, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	rs, err := c.Execute("SELECT id, v, n FROM app.t")
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < rs.RowNumber(); i++ {
		id, _ := rs.GetInt(i, 0)
		v, _ := rs.GetString(i, 1)
		n, _ := rs.GetInt(i, 2)
		j, _ := json.Marshal(map[string]any{"id": id, "v": v, "n": n})
		want[fmt.Sprint(id)] = string(j)
	}
	bad := 0
	for k, w := range want {
		if state[k] != w {
			if bad++; bad < 5 {
				t.Errorf("id %s: rebuilt %s, server %s", k, state[k], w)
			}
		}
	}
	for k := range state {
		if _, ok := want[k]; !ok {
			if bad++; bad < 5 {
				t.Errorf("id %s rebuilt, not on the server", k)
			}
		}
	}
	t.Logf("snapshot rows over the runs %d, server rows %d, lines %d/%d/%d", snapRows, len(want), lines(out1), lines(out2), lines(out3))
	if bad > 0 {
		t.Fatalf("%d rows differ", bad)
	}
}

// A row in the signal table starts an incremental snapshot of a table
// while tail streams; rows read and changes streamed rebuild it exactly.
func TestSignalIncrementalSnapshot(t *testing.T) {
	bin := buildSluice(t)
	signalServers(t, func(t *testing.T, opts testenv.Options, _ string) { signalIncrementalSnapshot(t, bin, opts) })
}

func signalIncrementalSnapshot(t *testing.T, bin string, opts testenv.Options) {
	db := testenv.StartT(t, opts)
	ctx := context.Background()
	from, setup := db.SeqFrom(1, 10000)
	stmts := append([]string{"CREATE DATABASE app", "USE app",
		"CREATE TABLE app.t (id INT PRIMARY KEY, v VARCHAR(40), n INT)"}, setup...)
	stmts = append(stmts, "INSERT INTO app.t SELECT seq, CONCAT('v', seq), 0 FROM "+from,
		"CREATE TABLE app.sluice_signal (id VARCHAR(64) PRIMARY KEY, type VARCHAR(32) NOT NULL, data VARCHAR(2048))")
	if err := db.Exec(ctx, stmts...); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "out.jsonl")
	f, _ := os.Create(out)
	defer f.Close()
	start := masterPos(t, db) // an explicit start: the signal cannot slip in before tail connects
	cmd := exec.Command(bin, "tail", "--source", db.URL(), "--tables", "app.t", "--from", start, "--signal-table", "app.sluice_signal", "--snapshot-chunk", "500")
	cmd.Stdout = f
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	time.Sleep(time.Second)
	var stop atomic.Bool
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		rng := rand.New(rand.NewPCG(5, 6))
		for i := 0; !stop.Load(); i++ {
			id := rng.IntN(10000) + 1
			q := fmt.Sprintf("UPDATE app.t SET n = n + 1 WHERE id = %d", id)
			if i%3 == 0 {
				q = fmt.Sprintf("DELETE FROM app.t WHERE id = %d", id)
			}
			db.Exec(ctx, q)
		}
	}()
	if err := db.Exec(ctx, "INSERT INTO app.sluice_signal VALUES ('s1', 'snapshot', 'app.t')"); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		b, _ := os.ReadFile(out)
		if bytes.Contains(b, []byte(`"snapshot":"last"`)) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the signalled snapshot did not finish")
		}
	}
	stop.Store(true)
	wg.Wait()
	time.Sleep(time.Second) // let tail print the last changes
	cmd.Process.Signal(syscall.SIGTERM)
	cmd.Wait()

	b, _ := os.ReadFile(out)
	state := map[string]string{}
	for _, line := range bytes.Split(b, []byte("\n")) {
		ev, err := codec.DecodeLine(line)
		if err != nil || ev.IsDDL() {
			continue
		}
		if ev.Source.Table == "sluice_signal" {
			t.Fatal("a signal row was printed")
		}
		if ev.Before != nil {
			delete(state, string(ev.Before["id"]))
		}
		if ev.After != nil {
			j, _ := json.Marshal(ev.After)
			state[string(ev.After["id"])] = string(j)
		}
	}
	rs, err := db.Query(ctx, "SELECT id, v, n FROM app.t")
	if err != nil {
		t.Fatal(err)
	}
	bad := 0
	for i := 0; i < rs.RowNumber(); i++ {
		id, _ := rs.GetInt(i, 0)
		v, _ := rs.GetString(i, 1)
		n, _ := rs.GetInt(i, 2)
		j, _ := json.Marshal(map[string]any{"id": id, "v": v, "n": n})
		if state[fmt.Sprint(id)] != string(j) {
			if bad++; bad < 5 {
				t.Errorf("id %d: rebuilt %s, server %s", id, state[fmt.Sprint(id)], j)
			}
		}
		delete(state, fmt.Sprint(id))
	}
	if len(state) > 0 || bad > 0 {
		t.Fatalf("%d rows differ, %d rebuilt rows not on the server", bad, len(state))
	}
}

// serverForBadInput starts a server of flavor with a user 'nobinlog'
// (password pw-nobinlog) that may only SELECT, and returns it with a
// start position ahead of everything it has and the name of its
// monitoring privilege.
func serverForBadInput(t *testing.T, flavor position.Flavor) (db *testenv.Server, ahead, monitor string) {
	t.Helper()
	db = testenv.StartT(t, testenv.Options{Flavor: flavor})
	if err := db.Exec(context.Background(),
		"CREATE USER 'nobinlog'@'%' IDENTIFIED BY 'pw-nobinlog'", "GRANT SELECT ON *.* TO 'nobinlog'@'%'"); err != nil {
		t.Fatal(err)
	}
	if flavor == position.MySQL {
		return db, "gtid:3e11fa47-71ca-11e1-9e33-c80aa9429562:1-5", "REPLICATION CLIENT"
	}
	return db, "gtid:0-1-999999", "BINLOG MONITOR"
}
