package pipeline_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-cdc/sluice/binlog"
	"github.com/sluice-cdc/sluice/checkpoint"
	"github.com/sluice-cdc/sluice/codec"
	"github.com/sluice-cdc/sluice/internal/kafkatest"
	"github.com/sluice-cdc/sluice/internal/testenv"
	"github.com/sluice-cdc/sluice/internal/testenv/kafkaenv"
	"github.com/sluice-cdc/sluice/pipeline"
	"github.com/sluice-cdc/sluice/position"
	"github.com/sluice-cdc/sluice/sink/kafka"
)

// dbzSchemaChange is Debezium's schema-change event (SchemaChangeValue),
// the fields this test checks.
type dbzSchemaChange struct {
	Source struct {
		Name string `json:"name"`
		DB   string `json:"db"`
	} `json:"source"`
	TsMs         int64   `json:"ts_ms"`
	DatabaseName string  `json:"databaseName"`
	SchemaName   *string `json:"schemaName"`
	DDL          string  `json:"ddl"`
	TableChanges []struct {
		Type  string `json:"type"`
		ID    string `json:"id"`
		Table *struct {
			DefaultCharsetName    string   `json:"defaultCharsetName"`
			PrimaryKeyColumnNames []string `json:"primaryKeyColumnNames"`
			Columns               []struct {
				Name            string  `json:"name"`
				JdbcType        int     `json:"jdbcType"`
				TypeName        string  `json:"typeName"`
				TypeExpression  string  `json:"typeExpression"`
				Length          *int    `json:"length"`
				Position        int     `json:"position"`
				Optional        bool    `json:"optional"`
				AutoIncremented bool    `json:"autoIncremented"`
				Generated       bool    `json:"generated"`
				Comment         *string `json:"comment"`
			} `json:"columns"`
		} `json:"table"`
	} `json:"tableChanges"`
}

// TestDebeziumSchemaChangeTopic: in format debezium, CREATE, ALTER and
// DROP TABLE reach the schema-change topic ({source}, Debezium's
// topic.prefix) as Debezium's schema-change events, keyed by database,
// with the table's definition after the statement from the schema
// history; schemas on wraps key and value in SchemaChangeKey and
// SchemaChangeValue. A restart delivers each statement exactly once.
// Heartbeats (heartbeat.interval.ms) reach their topic while the source is
// idle and are not counted by recovery.
func TestDebeziumSchemaChangeTopic(t *testing.T) {
	testenv.ForEachFlavor(t, func(t *testing.T, f position.Flavor) { dbzSchemaChangeTopic(t, f) })
}

func dbzSchemaChangeTopic(t *testing.T, flavor position.Flavor) {
	ctx := context.Background()
	db := testenv.StartT(t, testenv.Options{Flavor: flavor})
	if err := db.Exec(ctx, "CREATE DATABASE app"); err != nil {
		t.Fatal(err)
	}
	// A broker of the test's own: its topics are named as Debezium's,
	// the same in both flavors.
	kc := kafkaenv.Start(t, nil)
	log := slog.New(slog.DiscardHandler)
	open := func() []pipeline.Sink {
		plain, err := kafka.New(kafka.Config{Name: "k0", Brokers: kc.Brokers(), Topic: "{source}.{db}.{table}", Partitions: 1,
			HeartbeatIntervalMs: 100, Format: codec.Format{Name: codec.FormatDebezium, SchemaComments: true}}, "dbzddl", log)
		if err != nil {
			t.Fatal(err)
		}
		plain.SetSources([]string{"db1"})
		withSchemas, err := kafka.New(kafka.Config{Name: "k1", Brokers: kc.Brokers(), Topic: "s.{source}.{db}.{table}", SchemaChangeTopic: "s.{source}",
			TransactionalID: "dbzddl-k1", Partitions: 1, Format: codec.Format{Name: codec.FormatDebezium, Schemas: true}}, "dbzddl", log)
		if err != nil {
			t.Fatal(err)
		}
		return []pipeline.Sink{plain, withSchemas}
	}
	src, err := binlog.ParseSourceURL(db.URL())
	if err != nil {
		t.Fatal(err)
	}
	if src.Tables, err = binlog.ParseFilter("app.*"); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	store := &checkpoint.FileStore{Path: filepath.Join(dir, "ckpt.json")}
	cfg := pipeline.Config{
		Name: "dbzddl",
		Source: pipeline.SourceConfig{Name: "db1", Binlog: src, Snapshot: pipeline.SnapshotConfig{Mode: "initial"},
			Schema: &checkpoint.FileSchemaStore{Path: checkpoint.SchemaPath(store.Path, "db1")}},
		Store:           store,
		CheckpointEvery: 20 * time.Millisecond,
		RetryMin:        10 * time.Millisecond,
	}
	run := func() func() {
		cfg.Sinks = open()
		p, err := pipeline.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		rctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- p.Run(rctx) }()
		(&running{p: p, done: done}).waitStreaming(t)
		return func() {
			cancel()
			if err := <-done; err != nil && ctx.Err() == nil && !strings.Contains(err.Error(), "context canceled") {
				t.Errorf("pipeline: %v", err)
			}
			for _, s := range cfg.Sinks {
				s.Close()
			}
		}
	}
	read := func(topic string, want int) []*kgo.Record {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			rctx, cancel := context.WithTimeout(ctx, 20*time.Second)
			recs, err := kafkatest.ReadAll(rctx, kc.Brokers(), topic)
			cancel()
			if err != nil && !strings.Contains(err.Error(), "UNKNOWN_TOPIC") {
				t.Fatal(err)
			}
			if len(recs) >= want || time.Now().After(deadline) {
				return recs
			}
			time.Sleep(100 * time.Millisecond)
		}
	}

	stop := run()
	if err := db.Exec(ctx,
		"CREATE TABLE app.a (id INT NOT NULL AUTO_INCREMENT PRIMARY KEY, v VARCHAR(20) COMMENT 'the value')",
		"INSERT INTO app.a (v) VALUES ('x')",
		"ALTER TABLE app.a ADD COLUMN n BIGINT NULL"); err != nil {
		t.Fatal(err)
	}
	read("db1", 2)
	// Idle: heartbeats come at the interval.
	time.Sleep(600 * time.Millisecond)
	stop()
	hbs := read("__debezium-heartbeat.db1", 2)
	if len(hbs) < 2 {
		t.Fatalf("%d heartbeats in 600 ms of an idle source at heartbeat.interval.ms 100, want several", len(hbs))
	}
	for _, r := range hbs {
		var v struct {
			TsMs int64 `json:"ts_ms"`
		}
		if string(r.Key) != `{"serverName":"db1"}` || json.Unmarshal(r.Value, &v) != nil || v.TsMs < time.Now().Add(-time.Minute).UnixMilli() {
			t.Fatalf("heartbeat record %s = %s, want key {\"serverName\":\"db1\"} and a recent ts_ms", r.Key, r.Value)
		}
		for _, h := range r.Headers {
			if h.Key == pipeline.HeaderSeq {
				t.Fatalf("a heartbeat carries %s: recovery would count it", h.Key)
			}
		}
	}

	// The restart: heartbeats are ignored, nothing is written twice.
	stop = run()
	if err := db.Exec(ctx, "DROP TABLE app.a"); err != nil {
		t.Fatal(err)
	}
	recs := read("db1", 3)
	// Both sinks take each batch at once: wait for the second's records
	// too before stopping, or the stop may cut its write short (to be
	// written again at the next start, but not read here).
	srecs := read("s.db1", 3)
	stop()
	if len(recs) != 3 {
		for _, r := range recs {
			t.Logf("%s", r.Value)
		}
		t.Fatalf("%d schema-change records, want 3 (CREATE, ALTER, DROP once each)", len(recs))
	}
	var evs []dbzSchemaChange
	for i, r := range recs {
		if string(r.Key) != `{"databaseName":"app"}` {
			t.Errorf("record %d key %s, want {\"databaseName\":\"app\"}", i, r.Key)
		}
		var ev dbzSchemaChange
		if err := json.Unmarshal(r.Value, &ev); err != nil {
			t.Fatalf("record %d: %v: %s", i, err, r.Value)
		}
		if ev.DatabaseName != "app" || ev.SchemaName != nil || ev.Source.Name != "db1" || ev.Source.DB != "app" || ev.TsMs == 0 || len(ev.TableChanges) != 1 {
			t.Errorf("record %d: %s", i, r.Value)
		}
		evs = append(evs, ev)
	}
	for i, want := range []string{"CREATE TABLE app.a", "ALTER TABLE app.a ADD COLUMN n", "DROP TABLE app.a"} {
		// MySQL logs DROP TABLE as "DROP TABLE `app`.`a` /* generated by server */".
		if !strings.HasPrefix(strings.ReplaceAll(evs[i].DDL, "`", ""), want) {
			t.Errorf("event %d ddl %q, want it to start with %q", i, evs[i].DDL, want)
		}
	}
	for i, typ := range []string{"CREATE", "ALTER", "DROP"} {
		if len(evs[i].TableChanges) == 1 && (evs[i].TableChanges[0].Type != typ || evs[i].TableChanges[0].ID != `"app"."a"`) {
			t.Errorf("event %d table change %s %s, want %s \"app\".\"a\"", i, evs[i].TableChanges[0].Type, evs[i].TableChanges[0].ID, typ)
		}
	}
	if evs[2].TableChanges[0].Table != nil {
		t.Errorf("DROP's table change has a table; Debezium writes null")
	}
	t.Logf("ALTER: %s", recs[1].Value)
	alter := evs[1].TableChanges[0].Table
	if alter == nil {
		t.Fatalf("ALTER without the table's definition: %s", recs[1].Value)
	}
	if strings.Join(alter.PrimaryKeyColumnNames, ",") != "id" || alter.DefaultCharsetName == "" || len(alter.Columns) != 3 {
		t.Fatalf("ALTER's table: %s", recs[1].Value)
	}
	type col struct {
		name, typ string
		jdbc, pos int
		opt, auto bool
	}
	// Debezium's parser marks an AUTO_INCREMENT column generated too.
	for i, want := range []col{{"id", "INT", 4, 1, false, true}, {"v", "VARCHAR", 12, 2, true, false}, {"n", "BIGINT", -5, 3, true, false}} {
		c := alter.Columns[i]
		if c.Name != want.name || c.TypeName != want.typ || c.JdbcType != want.jdbc || c.Position != want.pos || c.Optional != want.opt || c.AutoIncremented != want.auto || c.Generated != want.auto {
			t.Errorf("column %d: %+v, want %+v", i, c, want)
		}
	}
	if c := alter.Columns[1]; c.Comment == nil || *c.Comment != "the value" || c.Length == nil || *c.Length != 20 {
		t.Errorf("column v: comment %v length %v, want 'the value' and 20 (include.schema.comments)", c.Comment, c.Length)
	}
	if bytes.Contains(srecs[1].Value, []byte("the value")) {
		t.Errorf("without include.schema.comments the comment is written: %s", srecs[1].Value)
	}

	// Schemas on: the same events under Debezium's schema names, its
	// MariaDB connector's on MariaDB.
	names := "io.debezium.connector." + string(flavor) + ".SchemaChange"
	if len(srecs) != 3 {
		t.Fatalf("%d schema-change records with schemas, want 3", len(srecs))
	}
	for i, r := range srecs {
		var env struct {
			Schema  struct{ Name string }
			Payload json.RawMessage
		}
		var key struct {
			Schema  struct{ Name string }
			Payload map[string]string
		}
		if err := json.Unmarshal(r.Value, &env); err != nil || env.Schema.Name != names+"Value" {
			t.Errorf("record %d with schemas: %v: %.200s", i, err, r.Value)
		}
		if err := json.Unmarshal(r.Key, &key); err != nil || key.Schema.Name != names+"Key" || key.Payload["databaseName"] != "app" {
			t.Errorf("record %d key with schemas: %v: %s", i, err, r.Key)
		}
		var ev dbzSchemaChange
		if err := json.Unmarshal(env.Payload, &ev); err != nil || ev.DDL != evs[i].DDL {
			t.Errorf("record %d payload with schemas differs: %v", i, err)
		}
	}
}
