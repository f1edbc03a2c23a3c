package pipeline_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-cdc/sluice/binlog"
	"github.com/sluice-cdc/sluice/checkpoint"
	"github.com/sluice-cdc/sluice/codec"
	"github.com/sluice-cdc/sluice/internal/testenv"
	"github.com/sluice-cdc/sluice/internal/testenv/kafkaenv"
	"github.com/sluice-cdc/sluice/pipeline"
	"github.com/sluice-cdc/sluice/position"
	"github.com/sluice-cdc/sluice/sink/kafka"
)

// The schemas of Debezium's transaction topic records, as Debezium 3's
// SchemaFactory builds them and JsonConverter writes them.
const (
	dbzTxnKeySchema = `{"type":"struct","fields":[{"type":"string","optional":false,"field":"id"}],"optional":false,"name":"io.debezium.connector.common.TransactionMetadataKey","version":1}`
	dbzTxnValSchema = `{"type":"struct","fields":[{"type":"string","optional":false,"field":"status"},{"type":"string","optional":false,"field":"id"},` +
		`{"type":"int64","optional":true,"field":"event_count"},` +
		`{"type":"array","items":{"type":"struct","fields":[{"type":"string","optional":false,"field":"data_collection"},{"type":"int64","optional":false,"field":"event_count"}],"optional":true,"name":"event.collection","version":1},"optional":true,"field":"data_collections"},` +
		`{"type":"int64","optional":false,"field":"ts_ms"}],"optional":false,"name":"io.debezium.connector.common.TransactionMetadataValue","version":1}`
)

// TestDebeziumTransactionMetadata: two Kafka sinks in format debezium with
// provide.transaction.metadata (schemas off with TRUNCATE events, schemas
// on with TRUNCATE skipped) get, for a multi-table transaction, a
// primary-key update and a big transaction that comes in chunks, the
// transaction block in every data event and a BEGIN and an END record in
// the transaction topic, byte for byte; the first sink is cut in the
// middle of the big transaction (a crash) and the restarted pipeline
// writes the rest with the right counts and no second BEGIN or END.
// Snapshot rows have no transaction block; a TRUNCATE is op "t" in the
// table's topic with TRUNCATE events, a DDL message in the schema-change
// topic without.
func TestDebeziumTransactionMetadata(t *testing.T) {
	testenv.ForEachFlavor(t, func(t *testing.T, f position.Flavor) { dbzTxnMetadata(t, f) })
}

func dbzTxnMetadata(t *testing.T, flavor position.Flavor) {
	ctx := context.Background()
	db := testenv.StartT(t, testenv.Options{Flavor: flavor})
	if err := db.Exec(ctx, "CREATE DATABASE app",
		"CREATE TABLE app.a (id INT PRIMARY KEY, v VARCHAR(20))",
		"CREATE TABLE app.b (id INT PRIMARY KEY)",
		"CREATE TABLE app.big (id INT PRIMARY KEY, pad VARCHAR(300))",
		"INSERT INTO app.a VALUES (1, 'snap')"); err != nil {
		t.Fatal(err)
	}
	// A broker of the test's own: its topics are named as Debezium's,
	// the same in both flavors.
	kc := kafkaenv.Start(t, nil)
	log := slog.New(slog.DiscardHandler)
	formats := []codec.Format{
		{Name: codec.FormatDebezium, TransactionMetadata: true, SkippedOperations: codec.SkipNone},
		{Name: codec.FormatDebezium, TransactionMetadata: true, Schemas: true},
	}
	open := func(i int) pipeline.Sink {
		tag := "k" + strconv.Itoa(i)
		s, err := kafka.New(kafka.Config{Name: tag, Brokers: kc.Brokers(), Topic: tag + ".{db}.{table}", TransactionTopic: tag + ".{source}.transaction", SchemaChangeTopic: tag + ".{source}",
			Partitions: 1, Format: formats[i]}, "dbztxn", log)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	const bigRows = 600
	// Cut sink 0 inside the big transaction, in the second batch that
	// holds its rows: its BEGIN went out with an earlier batch.
	batches := 0
	x := &cutSink{Sink: open(0), cut: func(ms []pipeline.Message) int {
		first := slices.IndexFunc(ms, func(m pipeline.Message) bool { return m.Table == "big" })
		if first < 0 {
			return 0
		}
		if batches++; batches < 2 {
			return 0
		}
		k := first + 3
		if k >= len(ms) || slices.ContainsFunc(ms[:k+1], func(m pipeline.Message) bool { return m.End != nil }) {
			return 0
		}
		return k
	}}
	y := open(1)
	src, err := binlog.ParseSourceURL(db.URL())
	if err != nil {
		t.Fatal(err)
	}
	src.ServerID = 781
	src.ChunkBytes = 8 << 10 // the big transaction comes in many chunks
	if src.Tables, err = binlog.ParseFilter("app.*"); err != nil {
		t.Fatal(err)
	}
	cfg := pipeline.Config{
		Name:            "dbztxn",
		Source:          pipeline.SourceConfig{Name: "db1", Binlog: src, Snapshot: pipeline.SnapshotConfig{Mode: "initial"}},
		Sinks:           []pipeline.Sink{formatted{x}, y},
		Store:           &checkpoint.FileStore{Path: filepath.Join(t.TempDir(), "ckpt.json")},
		BatchBytes:      16 << 10,
		CheckpointEvery: 20 * time.Millisecond,
		RetryMin:        10 * time.Millisecond,
	}
	run := func() (chan error, context.CancelFunc) {
		p, err := pipeline.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		rctx, cancel := context.WithCancel(ctx)
		x.stop = cancel
		done := make(chan error, 1)
		go func() { done <- p.Run(rctx) }()
		(&running{p: p, done: done}).waitStreaming(t)
		return done, cancel
	}
	done, cancel := run()
	from, fill := db.SeqFrom(1, bigRows)
	if err := db.Exec(ctx,
		"BEGIN", "INSERT INTO app.a VALUES (2, 'x'), (3, 'y')", "INSERT INTO app.b VALUES (1)", "UPDATE app.a SET v = 'z' WHERE id = 2", "DELETE FROM app.b WHERE id = 1", "COMMIT",
		"UPDATE app.a SET id = 30 WHERE id = 3"); err != nil {
		t.Fatal(err)
	}
	if err := db.Exec(ctx, append(fill, "USE app", "INSERT INTO app.big SELECT seq, REPEAT('p', 300) FROM "+from)...); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		cancel()
		t.Fatalf("sink 0 was not cut inside the big transaction (cut: %v)", x.done.Load())
	}
	cancel()
	if !x.done.Load() {
		t.Fatal("the pipeline stopped before the cut")
	}
	t.Logf("cut after %d messages of the big transaction", x.held.Load())
	x.Close()
	y.Close()
	x.Sink, x.cut = open(0), nil
	y = open(1)
	defer x.Close()
	defer y.Close()
	cfg.Sinks = []pipeline.Sink{formatted{x}, y}
	done, cancel = run()
	defer func() {
		cancel()
		<-done
	}()
	if err := db.Exec(ctx, "TRUNCATE TABLE app.b"); err != nil {
		t.Fatal(err)
	}

	// What the two sinks hold, once all is there.
	var recs map[string][]*kgo.Record
	complete := func() bool {
		recs = readTopics(t, kc.Brokers(), `^k[01]\.`)
		trunc0 := slices.ContainsFunc(recs["k0.app.b"], func(r *kgo.Record) bool { return bytes.Contains(r.Value, []byte(`"op":"t"`)) })
		trunc1 := slices.ContainsFunc(recs["k1.db1"], func(r *kgo.Record) bool { return bytes.Contains(r.Value, []byte("TRUNCATE")) })
		return len(recs["k0.db1.transaction"]) >= 6 && len(recs["k1.db1.transaction"]) >= 6 && trunc0 && trunc1
	}
	deadline := time.Now().Add(60 * time.Second)
	for !complete() {
		if time.Now().After(deadline) {
			t.Fatalf("after 60 s: %d and %d transaction records (want 6 each), topics %v", len(recs["k0.db1.transaction"]), len(recs["k1.db1.transaction"]), slices.Sorted(maps.Keys(recs)))
		}
		time.Sleep(200 * time.Millisecond)
	}

	type txnWant struct {
		events []string // "table op total dco", in total order
		tables string   // data_collections
	}
	bigEvents := make([]string, bigRows)
	for i := range bigEvents {
		bigEvents[i] = fmt.Sprintf("app.big c %d %d", i+1, i+1)
	}
	want := []txnWant{
		{[]string{"app.a c 1 1", "app.a c 2 2", "app.b c 3 1", "app.a u 4 3", "app.b d 5 2"},
			`[{"data_collection":"app.a","event_count":3},{"data_collection":"app.b","event_count":2}]`},
		{[]string{"app.a d 1 1", "app.a c 2 2"}, `[{"data_collection":"app.a","event_count":2}]`},
		{bigEvents, fmt.Sprintf(`[{"data_collection":"app.big","event_count":%d}]`, bigRows)},
	}
	for i, f := range formats {
		tag := "k" + strconv.Itoa(i)
		wrap := func(schema, payload string) string {
			if !f.Schemas {
				return payload
			}
			return `{"schema":` + schema + `,"payload":` + payload + `}`
		}
		// The data events, by transaction id.
		type ev struct {
			seq   uint64
			total int64
			desc  string
		}
		byTxn := map[string][]ev{}
		var ids []string // in the order of their first event's seq
		firstSeq := map[string]uint64{}
		lastSeq := map[string]uint64{}
		tsMs := map[string]int64{}
		for topic, rs := range recs {
			if !strings.HasPrefix(topic, tag+".app.") || strings.HasSuffix(topic, "._") {
				continue
			}
			for _, r := range rs {
				if r.Value == nil {
					continue // a tombstone
				}
				var v struct {
					Payload *json.RawMessage `json:"payload"`
				}
				raw := r.Value
				if f.Schemas {
					if err := json.Unmarshal(r.Value, &v); err != nil || v.Payload == nil {
						t.Fatalf("%s: %s: not a value with a payload: %v", tag, topic, err)
					}
					raw = *v.Payload
				}
				var e struct {
					Source struct {
						TsMs int64   `json:"ts_ms"`
						GTID *string `json:"gtid"`
						File string  `json:"file"`
						DB   string  `json:"db"`
						Tb   string  `json:"table"`
					} `json:"source"`
					Transaction *struct {
						ID         string `json:"id"`
						Total      int64  `json:"total_order"`
						Collection int64  `json:"data_collection_order"`
					} `json:"transaction"`
					Op string `json:"op"`
				}
				if err := json.Unmarshal(raw, &e); err != nil {
					t.Fatalf("%s: %s: %v: %s", tag, topic, err, raw)
				}
				seq := recordSeq(t, r)
				if e.Op == "r" || e.Op == "t" {
					if e.Transaction != nil || !bytes.Contains(raw, []byte(`"transaction":null,"op":"`+e.Op+`"`)) {
						t.Errorf("%s: a %q event has a transaction block: %s", tag, e.Op, raw)
					}
					if e.Op == "t" && (i != 0 || r.Key != nil || topic != "k0.app.b") {
						t.Errorf("%s: op t event in topic %s with key %q, want only sink k0, topic k0.app.b, null key", tag, topic, r.Key)
					}
					continue
				}
				tx := e.Transaction
				if tx == nil {
					t.Fatalf("%s: a data event without a transaction block: %s", tag, raw)
				}
				block := fmt.Sprintf(`"transaction":{"id":%q,"total_order":%d,"data_collection_order":%d},"op":"%s"`, tx.ID, tx.Total, tx.Collection, e.Op)
				if !bytes.Contains(raw, []byte(block)) {
					t.Errorf("%s: event does not hold %s: %s", tag, block, raw)
				}
				switch {
				case e.Source.GTID != nil && tx.ID != *e.Source.GTID:
					t.Errorf("%s: transaction id %q, want the GTID %q", tag, tx.ID, *e.Source.GTID)
				case e.Source.GTID == nil && !strings.HasPrefix(tx.ID, "file="+e.Source.File+",pos="):
					t.Errorf("%s: transaction id %q without a GTID, want file=%s,pos=...", tag, tx.ID, e.Source.File)
				}
				if _, ok := byTxn[tx.ID]; !ok {
					ids = append(ids, tx.ID)
				}
				byTxn[tx.ID] = append(byTxn[tx.ID], ev{seq, tx.Total, fmt.Sprintf("%s.%s %s %d %d", e.Source.DB, e.Source.Tb, e.Op, tx.Total, tx.Collection)})
				if s, ok := firstSeq[tx.ID]; !ok || seq < s {
					firstSeq[tx.ID] = seq
				}
				lastSeq[tx.ID] = max(lastSeq[tx.ID], seq)
				tsMs[tx.ID] = e.Source.TsMs
			}
		}
		slices.SortFunc(ids, func(a, b string) int { return int(firstSeq[a]) - int(firstSeq[b]) })
		if len(ids) != len(want) {
			t.Fatalf("%s: events of %d transactions, want %d: %v", tag, len(ids), len(want), ids)
		}
		var wantTxn []string
		for k, id := range ids {
			evs := byTxn[id]
			slices.SortFunc(evs, func(a, b ev) int {
				if a.seq != b.seq {
					return int(a.seq) - int(b.seq)
				}
				return int(a.total - b.total) // a key change: delete (total n), then create (n+1)
			})
			var got []string
			for _, e := range evs {
				got = append(got, e.desc)
			}
			if !slices.Equal(got, want[k].events) {
				t.Errorf("%s: transaction %d (%s): events\n%v\nwant\n%v", tag, k+1, id, abbrevList(got), abbrevList(want[k].events))
			}
			keyWant := wrap(dbzTxnKeySchema, fmt.Sprintf(`{"id":%q}`, id))
			wantTxn = append(wantTxn,
				fmt.Sprintf("seq %d key %s value %s", firstSeq[id], keyWant, wrap(dbzTxnValSchema, fmt.Sprintf(`{"status":"BEGIN","id":%q,"event_count":null,"data_collections":null,"ts_ms":%d}`, id, tsMs[id]))),
				fmt.Sprintf("seq %d key %s value %s", lastSeq[id], keyWant, wrap(dbzTxnValSchema, fmt.Sprintf(`{"status":"END","id":%q,"event_count":%d,"data_collections":%s,"ts_ms":%d}`, id, len(want[k].events), want[k].tables, tsMs[id]))))
		}
		var gotTxn []string
		for _, r := range recs[tag+".db1.transaction"] {
			gotTxn = append(gotTxn, fmt.Sprintf("seq %d key %s value %s", recordSeq(t, r), r.Key, r.Value))
		}
		if !slices.Equal(gotTxn, wantTxn) {
			t.Errorf("%s: transaction topic holds\n%s\nwant\n%s", tag, strings.Join(gotTxn, "\n"), strings.Join(wantTxn, "\n"))
		}
	}
	// Without TRUNCATE events (sink 1) the statement is a DDL message.
	if slices.ContainsFunc(recs["k1.app.b"], func(r *kgo.Record) bool { return bytes.Contains(r.Value, []byte(`"op":"t"`)) }) {
		t.Error("k1 (skipped.operations t) wrote an op t event")
	}
	if slices.ContainsFunc(recs["k0.db1"], func(r *kgo.Record) bool { return bytes.Contains(r.Value, []byte("TRUNCATE")) }) {
		t.Error("k0 (skipped.operations none) wrote the TRUNCATE as a DDL message too")
	}
}

// formatted gives a cut sink its sink's format.
type formatted struct{ *cutSink }

func (f formatted) Format() codec.Format { return pipeline.SinkFormat(f.Sink) }

// readTopics reads every committed record of the topics matching re.
func readTopics(t *testing.T, addrs []string, re string) map[string][]*kgo.Record {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.ConsumeRegex(), kgo.ConsumeTopics(re),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	out := map[string][]*kgo.Record{}
	for idle := 0; idle < 2; {
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		fs := cl.PollFetches(ctx)
		cancel()
		n := 0
		fs.EachRecord(func(r *kgo.Record) {
			out[r.Topic] = append(out[r.Topic], r)
			n++
		})
		if n == 0 {
			idle++
		} else {
			idle = 0
		}
	}
	return out
}

func recordSeq(t *testing.T, r *kgo.Record) uint64 {
	t.Helper()
	for _, h := range r.Headers {
		if h.Key == pipeline.HeaderSeq {
			n, err := strconv.ParseUint(string(h.Value), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatalf("record of topic %s without %s", r.Topic, pipeline.HeaderSeq)
	return 0
}

// abbrevList shows a long list by its ends.
func abbrevList(l []string) string {
	if len(l) <= 12 {
		return strings.Join(l, ", ")
	}
	return strings.Join(l[:6], ", ") + fmt.Sprintf(", ... (%d) ..., ", len(l)-12) + strings.Join(l[len(l)-6:], ", ")
}
