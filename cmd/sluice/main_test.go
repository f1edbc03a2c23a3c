package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluice-cdc/sluice/codec"
	"github.com/sluice-cdc/sluice/internal/testenv"
)

// The CLI as a user runs it: the real binary against a real server.

func buildSluice(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "sluice")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

func masterPos(t *testing.T, db *testenv.MariaDB) string {
	t.Helper()
	rs, err := db.Query(context.Background(), "SHOW MASTER STATUS")
	if err != nil {
		t.Fatal(err)
	}
	f, _ := rs.GetString(0, 0)
	p, _ := rs.GetString(0, 1)
	return f + ":" + p
}

func run(t *testing.T, bin string, args ...string) (stdout, stderr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	if err := cmd.Run(); err != nil {
		t.Fatalf("sluice %s: %v\n%s", strings.Join(args, " "), err, e.String())
	}
	return o.String(), e.String()
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
	db := testenv.StartT(t, testenv.MariaDBOptions{})
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
	out, _ = run(t, bin, "read", "--tables", "shop.items", filepath.Join(db.DataDir(), "mysql-bin.000001"))
	evs = rowEvents(events(t, out))
	if len(evs) != 5 || string(evs[4].After["name"]) != `"nib"` {
		t.Fatalf("read: %d events\n%s", len(evs), out)
	}
}

// A file written without column names: --schema-from fills them in.
func TestReadSchemaFrom(t *testing.T) {
	bin := buildSluice(t)
	db := testenv.StartT(t, testenv.MariaDBOptions{})
	if err := db.Exec(context.Background(), "CREATE DATABASE shop",
		"CREATE TABLE shop.items (id INT UNSIGNED PRIMARY KEY, name VARCHAR(40) NOT NULL, price DECIMAL(8,2), added DATETIME(3), tags SET('new','sale'), kind ENUM('book','toy'), note TEXT, raw VARBINARY(8))"); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join("..", "..", "binlog", "testdata", "mariadb-minimal.bin")
	out, _ := run(t, bin, "read", "--tables", "shop.items", file)
	if !strings.Contains(out, `"@2":"Dune"`) {
		t.Fatalf("without --schema-from, columns are numbered: %.300s", out)
	}
	out, _ = run(t, bin, "read", "--tables", "shop.items", "--schema-from", db.URL(), file)
	if !strings.Contains(out, `"name":"Dune"`) || !strings.Contains(out, `"tags":["new"]`) {
		t.Fatalf("with --schema-from: %.300s", out)
	}
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
		{[]string{"tail", "--source", "mysql://u@127.0.0.1:1", "--format", "xml"}, "want debezium or none"},
		{[]string{"tail", "--source", "mysql://u@127.0.0.1:1"}, "connection refused"},
		{[]string{"read", "main_test.go"}, "not a binlog file"},
	} {
		cmd := exec.Command(bin, tc.args...)
		out, err := cmd.CombinedOutput()
		if err == nil || !strings.Contains(string(out), tc.want) {
			t.Errorf("sluice %v: want an error containing %q, got %v: %s", tc.args, tc.want, err, out)
		}
	}
}
