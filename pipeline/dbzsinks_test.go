package pipeline_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	gonats "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	goredis "github.com/redis/go-redis/v9"

	"github.com/sluice-cdc/sluice/binlog"
	"github.com/sluice-cdc/sluice/checkpoint"
	"github.com/sluice-cdc/sluice/codec"
	"github.com/sluice-cdc/sluice/internal/testenv"
	"github.com/sluice-cdc/sluice/internal/testenv/natsenv"
	"github.com/sluice-cdc/sluice/pipeline"
	"github.com/sluice-cdc/sluice/position"
	"github.com/sluice-cdc/sluice/sink/file"
	natssink "github.com/sluice-cdc/sluice/sink/nats"
	redissink "github.com/sluice-cdc/sluice/sink/redis"
)

// TestDebeziumNATSRedis: a NATS sink and a Redis stream sink in format
// debezium write, for every change (snapshot rows, inserts, an update
// that changes the key, a delete, DDL, a TRUNCATE as op "t"), exactly the
// Debezium value the file sink in the same format writes (its line
// without the sluice block), each once across a restart; the NATS sink
// sends DDL to the schema-change subject and the rest to the table's, and
// the Redis entries' key field is Debezium's key.
func TestDebeziumNATSRedis(t *testing.T) {
	testenv.ForEachFlavor(t, func(t *testing.T, flavor position.Flavor) { debeziumNATSRedis(t, flavor) })
}

func debeziumNATSRedis(t *testing.T, flavor position.Flavor) {
	db := testenv.StartT(t, testenv.Options{Flavor: flavor})
	ns := natsenv.StartNATS(t)
	rs := testenv.StartRedis(t)
	ctx := context.Background()
	if err := db.Exec(ctx, "CREATE DATABASE app", "CREATE TABLE app.t (id INT PRIMARY KEY, d DECIMAL(6,2), ts DATETIME(3))",
		"INSERT INTO app.t VALUES (1, 1.50, '2024-01-02 03:04:05.678'), (2, -0.01, NULL)"); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	format := codec.Format{Name: codec.FormatDebezium, SkippedOperations: "none"}
	store := &checkpoint.FileStore{Path: filepath.Join(dir, "ckpt.json")}
	run := func() func() {
		src, err := binlog.ParseSourceURL(db.URL())
		if err != nil {
			t.Fatal(err)
		}
		src.ServerID = 779
		if src.Tables, err = binlog.ParseFilter("app.*"); err != nil {
			t.Fatal(err)
		}
		fs, err := file.New("file", file.Config{Path: filepath.Join(dir, "out.jsonl"), Format: format}, nil)
		if err != nil {
			t.Fatal(err)
		}
		nsk, err := natssink.New(natssink.Config{Name: "nats", URL: ns.URL(), Format: format}, "dbz", nil)
		if err != nil {
			t.Fatal(err)
		}
		rsk, err := redissink.New(redissink.Config{Name: "redis", Addr: rs.Addr(), Format: format}, "dbz", nil)
		if err != nil {
			t.Fatal(err)
		}
		sinks := []pipeline.Sink{fs, nsk, rsk}
		p, err := pipeline.New(pipeline.Config{
			Name:            "dbz",
			Source:          pipeline.SourceConfig{Name: "db1", Binlog: src, Snapshot: pipeline.SnapshotConfig{Mode: "initial"}},
			Sinks:           sinks,
			Store:           store,
			BatchBytes:      1 << 10,
			CheckpointEvery: 20 * time.Millisecond,
			RetryMin:        10 * time.Millisecond,
		})
		if err != nil {
			t.Fatal(err)
		}
		return runUntilStopped(t, ctx, p, sinks)
	}

	// fileVals: seq -> Debezium's value, from the file sink's lines.
	fileVals := func() map[uint64][]byte {
		out := map[uint64][]byte{}
		for _, l := range fileLines(t, filepath.Join(dir, "out.jsonl")) {
			var m struct{ Sluice pipeline.Meta }
			if err := json.Unmarshal(l, &m); err != nil {
				t.Fatalf("file line %s: %v", l, err)
			}
			i := bytes.LastIndex(l, []byte(`,"sluice":{`))
			if i < 0 {
				t.Fatalf("file line without a sluice block: %s", l)
			}
			if _, dup := out[m.Sluice.Seq]; dup {
				t.Fatalf("seq %d twice in the file sink", m.Sluice.Seq)
			}
			out[m.Sluice.Seq] = append(l[:i:i], '}')
		}
		return out
	}
	type natsMsg struct {
		subject string
		data    []byte
	}
	natsVals := func() map[uint64]natsMsg {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		nc, err := gonats.Connect(ns.URL())
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		js, err := jetstream.New(nc)
		if err != nil {
			t.Fatal(err)
		}
		st, err := js.Stream(cctx, natssink.DefaultStream("dbz"))
		if err != nil {
			return nil // not created yet
		}
		state := st.CachedInfo().State
		out := map[uint64]natsMsg{}
		for seq := state.FirstSeq; seq <= state.LastSeq && seq > 0; seq++ {
			m, err := st.GetMsg(cctx, seq)
			if err != nil {
				t.Fatal(err)
			}
			if natssink.IsFence(m.Header) {
				continue
			}
			s, err := strconv.ParseUint(m.Header.Get(pipeline.HeaderSeq), 10, 64)
			if err != nil {
				t.Fatalf("stream sequence %d: %v", seq, err)
			}
			if _, dup := out[s]; dup {
				t.Fatalf("seq %d twice in the NATS stream", s)
			}
			out[s] = natsMsg{m.Subject, m.Data}
		}
		return out
	}
	rc := goredis.NewClient(&goredis.Options{Addr: rs.Addr(), Protocol: 2, DisableIdentity: true})
	defer rc.Close()
	type redisEntry struct{ stream, key, value string }
	redisVals := func() map[uint64]redisEntry {
		out := map[uint64]redisEntry{}
		keys, err := rc.Keys(ctx, "*").Result()
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range keys {
			if typ, _ := rc.Type(ctx, k).Result(); typ != "stream" {
				continue
			}
			xs, err := rc.XRange(ctx, k, "-", "+").Result()
			if err != nil {
				t.Fatal(err)
			}
			for _, x := range xs {
				s, err := strconv.ParseUint(x.Values[pipeline.HeaderSeq].(string), 10, 64)
				if err != nil {
					t.Fatalf("entry %s of %s: %v", x.ID, k, err)
				}
				if _, dup := out[s]; dup {
					t.Fatalf("seq %d twice in the Redis streams", s)
				}
				key, _ := x.Values[redissink.FieldKey].(string)
				val, _ := x.Values[redissink.FieldValue].(string)
				out[s] = redisEntry{k, key, val}
			}
		}
		return out
	}
	wait := func(n int) {
		deadline := time.Now().Add(60 * time.Second)
		for {
			f, nm, r := fileVals(), natsVals(), redisVals()
			if len(f) >= n && len(nm) >= n && len(r) >= n {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("after 60 s the file, NATS and Redis sinks hold %d, %d, %d changes, want %d", len(f), len(nm), len(r), n)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}

	stop := run()
	wait(2) // the snapshot's rows
	// The checkpoint as it is now, put back after the first run, as if
	// the process had died before saving a later one: the sinks hold more
	// than the checkpoint says, and their recoveries (NATS from headers
	// only, Redis from its high-water hash) must keep each change once.
	early, err := os.ReadFile(store.Path)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Exec(ctx, "INSERT INTO app.t VALUES (3, 9999.99, '1970-01-01 00:00:00.001')", "UPDATE app.t SET id = 10 WHERE id = 1"); err != nil {
		t.Fatal(err)
	}
	wait(4)
	stop()
	if err := os.WriteFile(store.Path, early, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := db.Exec(ctx, "DELETE FROM app.t WHERE id = 2", "ALTER TABLE app.t ADD COLUMN n INT", "INSERT INTO app.t VALUES (4, 0.00, NULL, 7)", "TRUNCATE TABLE app.t"); err != nil {
		t.Fatal(err)
	}
	stop = run()
	wait(8)
	time.Sleep(300 * time.Millisecond) // anything written twice would show now
	stop()

	f, nm, r := fileVals(), natsVals(), redisVals()
	if len(f) != 8 || len(nm) != 8 || len(r) != 8 {
		t.Fatalf("the file, NATS and Redis sinks hold %d, %d, %d changes, want 8 each (once each across the restart)", len(f), len(nm), len(r))
	}
	ops := map[string]int{}
	for seq, want := range f {
		n, ok := nm[seq]
		if !ok || !bytes.Equal(n.data, want) {
			t.Errorf("seq %d: NATS data\n%s\nwant the file sink's Debezium value\n%s", seq, n.data, want)
		}
		e, ok := r[seq]
		if !ok || e.value != string(want) {
			t.Errorf("seq %d: Redis value\n%s\nwant the file sink's Debezium value\n%s", seq, e.value, want)
		}
		var ev struct {
			Op            string
			DDL           string
			Before, After *struct{ ID int }
		}
		if err := json.Unmarshal(want, &ev); err != nil {
			t.Fatal(err)
		}
		switch {
		case ev.DDL != "":
			ops["ddl"]++
			if n.subject != "sluice.db1" {
				t.Errorf("seq %d (DDL %q): NATS subject %q, want the schema-change subject sluice.db1", seq, ev.DDL, n.subject)
			}
			if !json.Valid([]byte(e.key)) || !bytes.Contains([]byte(e.key), []byte(`"app"`)) {
				t.Errorf("seq %d (DDL): Redis key %q, want Debezium's schema-change key naming database app", seq, e.key)
			}
		default:
			ops[ev.Op]++
			if n.subject != "sluice.app.t" {
				t.Errorf("seq %d (op %s): NATS subject %q, want sluice.app.t", seq, ev.Op, n.subject)
			}
			if e.stream != "app.t" {
				t.Errorf("seq %d (op %s): Redis stream %q, want app.t", seq, ev.Op, e.stream)
			}
			row := ev.After
			if row == nil {
				row = ev.Before
			}
			if row != nil {
				if wantKey := `{"id":` + strconv.Itoa(row.ID) + `}`; e.key != wantKey {
					t.Errorf("seq %d (op %s): Redis key %q, want Debezium's key %s", seq, ev.Op, e.key, wantKey)
				}
			}
		}
	}
	// Snapshot reads, two creates, the update of the key, a delete, the
	// ALTER and the TRUNCATE.
	if ops["r"] != 2 || ops["c"] != 2 || ops["u"] != 1 || ops["d"] != 1 || ops["ddl"] != 1 || ops["t"] != 1 {
		t.Errorf("events by op: %v, want r 2, c 2, u 1, d 1, ddl 1, t 1", ops)
	}
}
