package pipeline_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	gonats "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	goredis "github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/sluice-cdc/sluice/binlog"
	"github.com/sluice-cdc/sluice/checkpoint"
	"github.com/sluice-cdc/sluice/internal/kafkatest"
	"github.com/sluice-cdc/sluice/internal/sqlstmt"
	"github.com/sluice-cdc/sluice/internal/testenv"
	"github.com/sluice-cdc/sluice/internal/testenv/natsenv"
	"github.com/sluice-cdc/sluice/pipeline"
	"github.com/sluice-cdc/sluice/position"
	"github.com/sluice-cdc/sluice/sink/file"
	"github.com/sluice-cdc/sluice/sink/kafka"
	natssink "github.com/sluice-cdc/sluice/sink/nats"
	redissink "github.com/sluice-cdc/sluice/sink/redis"
)

// TestNamesEverySink (issue 31): a database, tables and columns named
// beyond ASCII, with spaces, a backtick, a reserved word, a BMP symbol and
// 64 characters, on a server whose default character set is latin1, are
// snapshotted and streamed through the file, Kafka, NATS and Redis sinks:
// every row equals SELECT, and each table's topic, subject and key follow
// the documented mapping (docs/SINKS-*.md). Two tables whose names map to
// one topic or subject stop the pipeline with an error naming both.
func TestNamesEverySink(t *testing.T) {
	testenv.ForEachFlavor(t, namesEverySink)
}

// Names the test uses, 64 characters the longest (MySQL's and MariaDB's
// limit).
var (
	namesDB      = "名前 db"
	longName     = strings.Repeat("ü", 60) + "-end"
	namesTables  = []string{"Ünï cöde-tbl", "select", "a`b ☃", longName}
	namesColumns = []string{"select", "a b", "ça", "x`y", strings.Repeat("c", 32) + strings.Repeat("列", 32)}
)

func namesEverySink(t *testing.T, flavor position.Flavor) {
	ctx := context.Background()
	db := testenv.StartT(t, testenv.Options{Flavor: flavor, Extra: []string{"--character-set-server=latin1", "--collation-server=latin1_swedish_ci"}})
	ns := natsenv.StartNATS(t)
	rs := testenv.StartRedis(t)
	kc, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(kc.Close)

	tables := append([]string(nil), namesTables...)
	// Identifiers beyond the BMP: both servers refuse them today; a server
	// that takes one has it tested too.
	// (MySQL takes the statement but names the table "t?".)
	if err := db.Exec(ctx, "CREATE DATABASE emoji_probe", "CREATE TABLE emoji_probe.`t😀` (i INT)"); err != nil {
		t.Logf("%s refuses an identifier beyond the BMP: %v", flavor, err)
	} else if r, err := db.Query(ctx, "SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA = 'emoji_probe'"); err != nil {
		t.Fatal(err)
	} else if name, _ := r.GetString(0, 0); name != "t😀" {
		t.Logf("%s takes an identifier beyond the BMP but names the table %q", flavor, name)
	} else {
		tables = append(tables, "t😀")
	}
	stmts := []string{"CREATE DATABASE " + sqlstmt.QuoteIdent(namesDB) + " CHARACTER SET utf8mb4"}
	var cols []string
	for i, c := range namesColumns {
		typ := "VARCHAR(20)"
		if i == 0 {
			typ = "INT PRIMARY KEY"
		}
		cols = append(cols, sqlstmt.QuoteIdent(c)+" "+typ)
	}
	insert := func(tbl string, id int) string {
		return fmt.Sprintf("INSERT INTO %s VALUES (%d, 'é %d', '日本 %d', 'a`b', NULL)", sqlstmt.QuoteName(namesDB, tbl), id, id, id)
	}
	for _, tbl := range tables {
		stmts = append(stmts, "CREATE TABLE "+sqlstmt.QuoteName(namesDB, tbl)+" ("+strings.Join(cols, ", ")+") CHARACTER SET utf8mb4", insert(tbl, 1))
	}
	if err := db.Exec(ctx, stmts...); err != nil {
		t.Fatal(err)
	}

	src, err := binlog.ParseSourceURL(db.URL())
	if err != nil {
		t.Fatal(err)
	}
	src.ServerID = 783
	if src.Tables, err = binlog.ParseFilter("`" + namesDB + "`.*"); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	log := slog.New(slog.DiscardHandler)
	fs, err := file.New("file", file.Config{Path: filepath.Join(dir, "out.jsonl")}, log)
	if err != nil {
		t.Fatal(err)
	}
	ks, err := kafka.New(kafka.Config{Name: "kafka", Brokers: kc.ListenAddrs(), Partitions: 1}, "names", log)
	if err != nil {
		t.Fatal(err)
	}
	nsk, err := natssink.New(natssink.Config{Name: "nats", URL: ns.URL()}, "names", log)
	if err != nil {
		t.Fatal(err)
	}
	rsk, err := redissink.New(redissink.Config{Name: "redis", Addr: rs.Addr()}, "names", log)
	if err != nil {
		t.Fatal(err)
	}
	sinks := []pipeline.Sink{fs, ks, nsk, rsk}
	store := &checkpoint.FileStore{Path: filepath.Join(dir, "ckpt.json")}
	p, err := pipeline.New(pipeline.Config{
		Name:   "names",
		Source: pipeline.SourceConfig{Name: "db1", Binlog: src, Snapshot: pipeline.SnapshotConfig{Mode: "initial"}},
		Sinks:  sinks, Store: store, CheckpointEvery: 20 * time.Millisecond, RetryMin: 10 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	stop := runUntilStopped(t, ctx, p, sinks)
	for deadline := time.Now().Add(30 * time.Second); len(fileLines(t, filepath.Join(dir, "out.jsonl"))) < len(tables); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("after 30 s the snapshot's rows are not in the file sink")
		}
	}
	var later []string
	for _, tbl := range tables {
		later = append(later, insert(tbl, 2), "UPDATE "+sqlstmt.QuoteName(namesDB, tbl)+" SET "+sqlstmt.QuoteIdent("a b")+" = 'ü' WHERE "+sqlstmt.QuoteIdent("select")+" = 1")
	}
	if err := db.Exec(ctx, later...); err != nil {
		t.Fatal(err)
	}

	// The file sink: each table's rows, as its last change left them,
	// equal SELECT's.
	want := 3 * len(tables) // snapshot row, insert, update
	type rowKey struct {
		table string
		id    float64
	}
	var got map[rowKey]map[string]any
	deadline := time.Now().Add(30 * time.Second)
	for {
		got = map[rowKey]map[string]any{}
		lines := fileLines(t, filepath.Join(dir, "out.jsonl"))
		for _, l := range lines {
			var m struct {
				After  map[string]any
				Source struct{ DB, Table string }
			}
			if err := json.Unmarshal(l, &m); err != nil {
				t.Fatalf("file line %s: %v", l, err)
			}
			if m.Source.DB != namesDB {
				t.Fatalf("a change of database %q, want %q: %s", m.Source.DB, namesDB, l)
			}
			id, _ := m.After["select"].(float64)
			got[rowKey{m.Source.Table, id}] = m.After
		}
		if len(lines) >= want {
			break
		}
		if time.Now().After(deadline) {
			for _, l := range lines {
				t.Logf("%.200s", l)
			}
			t.Fatalf("after 30 s the file sink holds %d changes, want %d", len(lines), want)
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, tbl := range tables {
		r, err := db.Query(ctx, "SELECT * FROM "+sqlstmt.QuoteName(namesDB, tbl)+" ORDER BY 1")
		if err != nil {
			t.Fatal(err)
		}
		for i := range r.RowNumber() {
			id, _ := r.GetInt(i, 0)
			after := got[rowKey{tbl, float64(id)}]
			if after == nil {
				t.Errorf("%s row %d: not in the file sink (it has %v)", tbl, id, got)
				continue
			}
			for j, f := range r.Fields {
				if string(f.Name) != namesColumns[j] {
					t.Errorf("%s column %d is named %q by the server, want %q", tbl, j, f.Name, namesColumns[j])
				}
				s, _ := r.GetString(i, j)
				v, ok := after[namesColumns[j]]
				switch {
				case !ok:
					t.Errorf("%s row %d has no column %q: %v", tbl, id, namesColumns[j], after)
				case j == 0:
					if v != float64(id) {
						t.Errorf("%s row %d: %q is %v", tbl, id, namesColumns[j], v)
					}
				case isNull(r, i, j):
					if v != nil {
						t.Errorf("%s row %d: %q is %v, want null", tbl, id, namesColumns[j], v)
					}
				case v != s:
					t.Errorf("%s row %d: %q is %v, SELECT gives %q", tbl, id, namesColumns[j], v, s)
				}
			}
		}
		r.Close()
	}

	// Kafka: each table's topic, by the mapping of docs/SINKS-kafka.md.
	for _, tbl := range tables {
		topic := kafkaTopic(namesDB, tbl)
		rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		recs, err := kafkatest.ReadAll(rctx, kc.ListenAddrs(), topic)
		cancel()
		if err != nil || len(recs) != 3 {
			t.Errorf("kafka topic %q of %s: %d records, %v; want 3", topic, tbl, len(recs), err)
		}
	}
	// NATS: each table's subject, by docs/SINKS-nats.md.
	nc, err := gonats.Connect(ns.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	st, err := js.Stream(ctx, natssink.DefaultStream("names"))
	if err != nil {
		t.Fatal(err)
	}
	subjects := map[string]int{}
	for seq := st.CachedInfo().State.FirstSeq; seq <= st.CachedInfo().State.LastSeq; seq++ {
		m, err := st.GetMsg(ctx, seq)
		if err != nil {
			t.Fatal(err)
		}
		if !natssink.IsFence(m.Header) {
			subjects[m.Subject]++
		}
	}
	for _, tbl := range tables {
		if subj := "sluice." + natsToken(namesDB) + "." + natsToken(tbl); subjects[subj] != 3 {
			t.Errorf("nats subject %q of %s: %d messages, want 3 (subjects: %v)", subj, tbl, subjects[subj], subjects)
		}
	}
	// Redis: each table's stream is "{db}.{table}" as it is.
	rc := goredis.NewClient(&goredis.Options{Addr: rs.Addr(), Protocol: 2, DisableIdentity: true})
	defer rc.Close()
	for _, tbl := range tables {
		if n, err := rc.XLen(ctx, namesDB+"."+tbl).Result(); err != nil || n != 3 {
			t.Errorf("redis stream %q: %d entries, %v; want 3", namesDB+"."+tbl, n, err)
		}
	}
	stop()

	// Two tables on one topic or subject by accident: the pipeline stops,
	// naming both.
	if err := db.Exec(ctx, "CREATE DATABASE coll", "CREATE TABLE coll.`a b` (i INT PRIMARY KEY)", "CREATE TABLE coll.a_b (i INT PRIMARY KEY)"); err != nil {
		t.Fatal(err)
	}
	for i, name := range []string{"kafka", "nats"} {
		var s pipeline.Sink
		if name == "kafka" {
			s, err = kafka.New(kafka.Config{Name: "kafka", Brokers: kc.ListenAddrs(), Partitions: 1}, "coll", log)
		} else {
			s, err = natssink.New(natssink.Config{Name: "nats", URL: ns.URL(), Subject: "coll.{db}.{table}"}, "coll", log)
		}
		if err != nil {
			t.Fatal(err)
		}
		src.Tables, _ = binlog.ParseFilter("coll.*")
		src.ServerID = 784
		p, err := pipeline.New(pipeline.Config{
			Name:   "coll",
			Source: pipeline.SourceConfig{Name: "db1", Binlog: src, Snapshot: pipeline.SnapshotConfig{Mode: "initial"}},
			Sinks:  []pipeline.Sink{s}, Store: &checkpoint.FileStore{Path: filepath.Join(dir, name+"-coll.json")},
			CheckpointEvery: 20 * time.Millisecond, RetryMin: 10 * time.Millisecond,
		})
		if err != nil {
			t.Fatal(err)
		}
		if err := db.Exec(ctx, fmt.Sprintf("INSERT INTO coll.`a b` VALUES (%d)", i), fmt.Sprintf("INSERT INTO coll.a_b VALUES (%d)", i)); err != nil {
			t.Fatal(err)
		}
		rctx, cancel := context.WithTimeout(ctx, 60*time.Second)
		err = p.Run(rctx)
		cancel()
		s.Close()
		if err == nil || !strings.Contains(err.Error(), "`coll`.`a b`") || !strings.Contains(err.Error(), "`coll`.`a_b`") {
			t.Errorf("%s: two tables on one name: the pipeline ended with %v, want an error naming both", name, err)
		} else {
			t.Logf("%s: %v", name, err)
		}
	}
}

func isNull(r interface{ IsNull(int, int) (bool, error) }, row, col int) bool {
	null, _ := r.IsNull(row, col)
	return null
}

// kafkaTopic is docs/SINKS-kafka.md's "Topic names" for "{db}.{table}".
func kafkaTopic(db, table string) string {
	esc := func(s string) string {
		var b strings.Builder
		for _, r := range s {
			switch {
			case r > 0xffff:
				fmt.Fprintf(&b, "_U%08x", r)
			case r > 0x7f:
				fmt.Fprintf(&b, "_u%04x", r)
			case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '_', r == '-':
				b.WriteRune(r)
			default:
				b.WriteByte('_')
			}
		}
		return b.String()
	}
	t := esc(db) + "." + esc(table)
	if len(t) > 249 {
		sum := sha256.Sum256([]byte(t))
		t = t[:240] + "_" + hex.EncodeToString(sum[:4])
	}
	return t
}

// natsToken is docs/SINKS-nats.md's token of a name: '.', '*', '>' and
// white space (and other ASCII controls) become '_'; the rest stays.
func natsToken(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '.' || r == '*' || r == '>' || r <= ' ' || r == 0x7f {
			return '_'
		}
		return r
	}, s)
}
