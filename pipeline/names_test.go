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

	"github.com/sluice-cdc/sluice/binlog"
	"github.com/sluice-cdc/sluice/checkpoint"
	"github.com/sluice-cdc/sluice/internal/kafkatest"
	"github.com/sluice-cdc/sluice/internal/sqlstmt"
	"github.com/sluice-cdc/sluice/internal/testenv"
	"github.com/sluice-cdc/sluice/internal/testenv/kafkaenv"
	"github.com/sluice-cdc/sluice/internal/testenv/natsenv"
	"github.com/sluice-cdc/sluice/pipeline"
	"github.com/sluice-cdc/sluice/position"
	"github.com/sluice-cdc/sluice/sink/file"
	"github.com/sluice-cdc/sluice/sink/kafka"
	natssink "github.com/sluice-cdc/sluice/sink/nats"
	redissink "github.com/sluice-cdc/sluice/sink/redis"
)

// TestNamesEverySink (issue 31): databases, tables, columns, an index and
// ENUM members named beyond ASCII, with spaces, a backtick, a quote, a
// dot, a reserved word, a BMP symbol and 64 characters, on a server whose default character set is
// latin1, are snapshotted, streamed (through a DDL kept in the schema
// history) and snapshotted again by a signal, through the file, Kafka,
// NATS and Redis sinks: every row equals SELECT, and each table's topic,
// subject and key follow the documented mapping (docs/SINKS-*.md) and
// hold that table's messages. Two tables whose names map to one topic or
// subject stop the pipeline with an error naming both.
func TestNamesEverySink(t *testing.T) {
	testenv.ForEachFlavor(t, namesEverySink)
}

// Names the test uses, 64 characters the longest (MySQL's and MariaDB's
// limit).
var (
	namesDB      = "名前 db"
	dotDB        = "dot.db"
	longName     = strings.Repeat("ü", 60) + "-end"
	namesTables  = [][2]string{{namesDB, "Ünï cöde-tbl"}, {namesDB, "select"}, {namesDB, "a`b ☃"}, {namesDB, longName}, {dotDB, "t.1"}}
	namesColumns = []string{"select", "a b", "ça", "x`y", strings.Repeat("c", 32) + strings.Repeat("列", 32), "énum"}
	signalTable  = [2]string{namesDB, "sluice signal"}
)

func namesEverySink(t *testing.T, flavor position.Flavor) {
	ctx := context.Background()
	db := testenv.StartT(t, testenv.Options{Flavor: flavor, Extra: []string{"--character-set-server=latin1", "--collation-server=latin1_swedish_ci"}})
	ns := natsenv.StartNATS(t)
	rs := testenv.StartRedis(t)
	kc := kafkaenv.Start(t, nil) // its own broker: each flavor's topics have the same names

	tables := append([][2]string(nil), namesTables...)
	// Identifiers beyond the BMP: a server that keeps one has it tested
	// too. (MariaDB refuses the statement; MySQL takes it but names the
	// table "t?".)
	if err := db.Exec(ctx, "CREATE DATABASE emoji_probe", "CREATE TABLE emoji_probe.`t😀` (i INT)"); err != nil {
		t.Logf("%s refuses an identifier beyond the BMP: %v", flavor, err)
	} else if r, err := db.Query(ctx, "SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA = 'emoji_probe'"); err != nil {
		t.Fatal(err)
	} else if name, _ := r.GetString(0, 0); name != "t😀" {
		t.Logf("%s takes an identifier beyond the BMP but names the table %q", flavor, name)
	} else {
		tables = append(tables, [2]string{namesDB, "t😀"})
	}
	stmts := []string{"CREATE DATABASE " + sqlstmt.QuoteIdent(namesDB) + " CHARACTER SET utf8mb4", "CREATE DATABASE " + sqlstmt.QuoteIdent(dotDB) + " CHARACTER SET utf8mb4",
		"CREATE TABLE " + sqlstmt.QuoteName(signalTable[0], signalTable[1]) + " (id INT AUTO_INCREMENT PRIMARY KEY, type VARCHAR(32), data VARCHAR(2000))"}
	var cols []string
	for i, c := range namesColumns {
		typ := "VARCHAR(20)"
		switch i {
		case 0:
			typ = "INT PRIMARY KEY"
		case 5: // members named beyond ASCII, with a space and a quote
			typ = "ENUM('ä', 'b c', 'x''y', '名前')"
		}
		cols = append(cols, sqlstmt.QuoteIdent(c)+" "+typ)
	}
	// An index named beyond ASCII, with a space and a backtick.
	cols = append(cols, "UNIQUE KEY `ïndex ``ü`` 列` (`ça`)")
	var colNames []string
	for _, c := range namesColumns {
		colNames = append(colNames, sqlstmt.QuoteIdent(c))
	}
	insert := func(tbl [2]string, id int) string {
		member := []string{"ä", "b c", "x''y", "名前"}[id%4]
		return fmt.Sprintf("INSERT INTO %s (%s) VALUES (%d, 'é %d', '日本 %d', 'a`b', NULL, '%s')", sqlstmt.QuoteName(tbl[0], tbl[1]), strings.Join(colNames, ", "), id, id, id, member)
	}
	for _, tbl := range tables {
		stmts = append(stmts, "CREATE TABLE "+sqlstmt.QuoteName(tbl[0], tbl[1])+" ("+strings.Join(cols, ", ")+") CHARACTER SET utf8mb4", insert(tbl, 1))
	}
	if err := db.Exec(ctx, stmts...); err != nil {
		t.Fatal(err)
	}

	src, err := binlog.ParseSourceURL(db.URL())
	if err != nil {
		t.Fatal(err)
	}
	src.ServerID = 783
	// As a user writes it: a glob for the one, a backticked name for the
	// database with a dot.
	if src.Tables, err = binlog.ParseFilter(namesDB + ".*, `" + dotDB + "`.*"); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	log := slog.New(slog.DiscardHandler)
	fs, err := file.New("file", file.Config{Path: filepath.Join(dir, "out.jsonl")}, log)
	if err != nil {
		t.Fatal(err)
	}
	ks, err := kafka.New(kafka.Config{Name: "kafka", Brokers: kc.Brokers(), Partitions: 1}, "names", log)
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
		Name: "names",
		Source: pipeline.SourceConfig{Name: "db1", Binlog: src, Snapshot: pipeline.SnapshotConfig{Mode: "initial"},
			Schema:      &checkpoint.FileSchemaStore{Path: checkpoint.SchemaPath(store.Path, "db1")},
			SignalTable: sqlstmt.TableText(signalTable[0], signalTable[1])},
		Sinks: sinks, Store: store, CheckpointEvery: 20 * time.Millisecond, RetryMin: 10 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	stop := runUntilStopped(t, ctx, p, sinks)

	// fileChanges reads the file sink: its row changes (not DDL) and the
	// count of messages per table.
	type fileLine struct {
		After  map[string]any
		DDL    string
		Op     string
		Source struct{ DB, Table string }
	}
	fileChanges := func() (changes []fileLine, perTable map[[2]string]int) {
		perTable = map[[2]string]int{}
		for _, l := range fileLines(t, filepath.Join(dir, "out.jsonl")) {
			var m fileLine
			if err := json.Unmarshal(l, &m); err != nil {
				t.Fatalf("file line %s: %v", l, err)
			}
			if m.Source.DB != namesDB && m.Source.DB != dotDB {
				t.Fatalf("a change of database %q: %s", m.Source.DB, l)
			}
			perTable[[2]string{m.Source.DB, m.Source.Table}]++
			if m.DDL == "" {
				changes = append(changes, m)
			}
		}
		return changes, perTable
	}
	waitChanges := func(n int) []fileLine {
		t.Helper()
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			changes, _ := fileChanges()
			if len(changes) >= n {
				return changes
			}
			if time.Now().After(deadline) {
				t.Fatalf("after 30 s the file sink holds %d changes, want %d", len(changes), n)
			}
		}
	}
	waitChanges(len(tables)) // the snapshot's rows

	// Streamed: an insert and an update per table; a column added to one
	// table (the schema history must read the DDL), and a row with it.
	first := tables[0]
	var later []string
	for _, tbl := range tables {
		later = append(later, insert(tbl, 2), "UPDATE "+sqlstmt.QuoteName(tbl[0], tbl[1])+" SET "+sqlstmt.QuoteIdent("a b")+" = 'ü' WHERE "+sqlstmt.QuoteIdent("select")+" = 1")
	}
	later = append(later, "ALTER TABLE "+sqlstmt.QuoteName(first[0], first[1])+" ADD COLUMN `ñ ü` VARCHAR(5) DEFAULT 'ß'", insert(first, 3))
	if err := db.Exec(ctx, later...); err != nil {
		t.Fatal(err)
	}
	waitChanges(3*len(tables) + 1)
	// An incremental snapshot of two tables, asked for by a signal row
	// that names them as TableText writes them.
	signalled := [][2]string{tables[1], {dotDB, "t.1"}}
	data := sqlstmt.TableText(signalled[0][0], signalled[0][1]) + "," + sqlstmt.TableText(signalled[1][0], signalled[1][1])
	if err := db.Exec(ctx, "INSERT INTO "+sqlstmt.QuoteName(signalTable[0], signalTable[1])+" (type, data) VALUES ('snapshot', '"+strings.ReplaceAll(data, "'", "''")+"')"); err != nil {
		t.Fatal(err)
	}
	changes := waitChanges(3*len(tables) + 1 + 2*len(signalled))
	time.Sleep(200 * time.Millisecond) // nothing more comes
	if again, _ := fileChanges(); len(again) != len(changes) {
		t.Fatalf("the file sink holds %d changes, want %d", len(again), len(changes))
	}

	// Each table's rows, as their last change left them, equal SELECT's.
	type rowKey struct {
		table [2]string
		id    float64
	}
	got := map[rowKey]map[string]any{}
	reread := map[[2]string]int{}
	for _, c := range changes {
		id, _ := c.After["select"].(float64)
		tbl := [2]string{c.Source.DB, c.Source.Table}
		got[rowKey{tbl, id}] = c.After
		if c.Op == "r" && id == 2 {
			reread[tbl]++
		}
	}
	for _, tbl := range signalled {
		if reread[tbl] != 1 {
			t.Errorf("the signal's snapshot read row 2 of %s %d times, want once", sqlstmt.QuoteName(tbl[0], tbl[1]), reread[tbl])
		}
	}
	for _, tbl := range tables {
		r, err := db.Query(ctx, "SELECT * FROM "+sqlstmt.QuoteName(tbl[0], tbl[1])+" ORDER BY 1")
		if err != nil {
			t.Fatal(err)
		}
		name := sqlstmt.QuoteName(tbl[0], tbl[1])
		for i := range r.RowNumber() {
			id, _ := r.GetInt(i, 0)
			after := got[rowKey{tbl, float64(id)}]
			if after == nil {
				t.Errorf("%s row %d: not in the file sink", name, id)
				continue
			}
			// Rows last changed before the ALTER TABLE have no image of
			// the column it added.
			added := tbl == first && id != 3
			if n := len(r.Fields); len(after) != n && (!added || len(after) != n-1) {
				t.Errorf("%s row %d: %d columns in the file sink, %d in SELECT: %v", name, id, len(after), len(r.Fields), after)
			}
			for j, f := range r.Fields {
				col := string(f.Name)
				if added && col == "ñ ü" {
					continue
				}
				if j < len(namesColumns) && col != namesColumns[j] {
					t.Errorf("%s column %d is named %q by the server, want %q", name, j, col, namesColumns[j])
				}
				s, _ := r.GetString(i, j)
				v, ok := after[col]
				switch {
				case !ok:
					t.Errorf("%s row %d has no column %q: %v", name, id, col, after)
				case j == 0:
					if v != float64(id) {
						t.Errorf("%s row %d: %q is %v", name, id, col, v)
					}
				case isNull(r, i, j):
					if v != nil {
						t.Errorf("%s row %d: %q is %v, want null", name, id, col, v)
					}
				case v != s:
					t.Errorf("%s row %d: %q is %v, SELECT gives %q", name, id, col, v, s)
				}
			}
		}
		r.Close()
	}
	if v := got[rowKey{first, 3}]["ñ ü"]; v != "ß" {
		t.Errorf("the row after ALTER TABLE … ADD COLUMN `ñ ü`: %v", got[rowKey{first, 3}])
	}
	_, perTable := fileChanges()

	// Kafka: each table's topic, by the mapping of docs/SINKS-kafka.md,
	// holds what the file sink holds of the table.
	for _, tbl := range tables {
		topic := kafkaTopic(tbl[0], tbl[1])
		rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		recs, err := kafkatest.ReadAll(rctx, kc.Brokers(), topic)
		cancel()
		if err != nil || len(recs) != perTable[tbl] {
			t.Errorf("kafka topic %q of %s: %d records, %v; want %d", topic, sqlstmt.QuoteName(tbl[0], tbl[1]), len(recs), err, perTable[tbl])
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
		if subj := "sluice." + natsToken(tbl[0]) + "." + natsToken(tbl[1]); subjects[subj] != perTable[tbl] {
			t.Errorf("nats subject %q of %s: %d messages, want %d (subjects: %v)", subj, sqlstmt.QuoteName(tbl[0], tbl[1]), subjects[subj], perTable[tbl], subjects)
		}
	}
	// Redis: each table's stream is "{db}.{table}" as it is.
	rc := goredis.NewClient(&goredis.Options{Addr: rs.Addr(), Protocol: 2, DisableIdentity: true})
	defer rc.Close()
	for _, tbl := range tables {
		key := tbl[0] + "." + tbl[1]
		if n, err := rc.XLen(ctx, key).Result(); err != nil || int(n) != perTable[tbl] {
			t.Errorf("redis stream %q: %d entries, %v; want %d", key, n, err, perTable[tbl])
		}
	}
	stop()

	// Two tables on one topic, subject or key by accident: the pipeline
	// stops, naming both. Kafka and NATS: `a b` and `a_b`; Redis, whose
	// keys take names as they are: `cx.y`.`z` and `cx`.`y.z`.
	if err := db.Exec(ctx, "CREATE DATABASE coll", "CREATE TABLE coll.`a b` (i INT PRIMARY KEY)", "CREATE TABLE coll.a_b (i INT PRIMARY KEY)",
		"CREATE DATABASE `cx.y`", "CREATE DATABASE cx", "CREATE TABLE `cx.y`.z (i INT PRIMARY KEY)", "CREATE TABLE cx.`y.z` (i INT PRIMARY KEY)"); err != nil {
		t.Fatal(err)
	}
	for i, name := range []string{"kafka", "nats", "redis"} {
		var s pipeline.Sink
		filter, pair := "coll.*", [2][2]string{{"coll", "a b"}, {"coll", "a_b"}}
		switch name {
		case "kafka":
			s, err = kafka.New(kafka.Config{Name: "kafka", Brokers: kc.Brokers(), Partitions: 1}, "coll", log)
		case "nats":
			s, err = natssink.New(natssink.Config{Name: "nats", URL: ns.URL(), Subject: "coll.{db}.{table}"}, "coll", log)
		default:
			s, err = redissink.New(redissink.Config{Name: "redis", Addr: rs.Addr(), KeyPrefix: "coll:"}, "coll", log)
			filter, pair = "`cx.y`.*, cx.*", [2][2]string{{"cx.y", "z"}, {"cx", "y.z"}}
		}
		if err != nil {
			t.Fatal(err)
		}
		src.Tables, _ = binlog.ParseFilter(filter)
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
		if err := db.Exec(ctx, fmt.Sprintf("INSERT INTO %s VALUES (%d)", sqlstmt.QuoteName(pair[0][0], pair[0][1]), i),
			fmt.Sprintf("INSERT INTO %s VALUES (%d)", sqlstmt.QuoteName(pair[1][0], pair[1][1]), i)); err != nil {
			t.Fatal(err)
		}
		rctx, cancel := context.WithTimeout(ctx, 60*time.Second)
		err = p.Run(rctx)
		cancel()
		s.Close()
		a, b := sqlstmt.QuoteName(pair[0][0], pair[0][1]), sqlstmt.QuoteName(pair[1][0], pair[1][1])
		if err == nil || !strings.Contains(err.Error(), a) || !strings.Contains(err.Error(), b) {
			t.Errorf("%s: two tables on one name: the pipeline ended with %v, want an error naming %s and %s", name, err, a, b)
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
