package main

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	goredis "github.com/redis/go-redis/v9"

	"github.com/sluice-cdc/sluice/internal/testenv"
	"github.com/sluice-cdc/sluice/internal/testenv/kafkaenv"
	"github.com/sluice-cdc/sluice/internal/testenv/natsenv"
	"github.com/sluice-cdc/sluice/pipeline"
	"github.com/sluice-cdc/sluice/position"
)

// TestRunDebeziumNetSinks: sluice run with format debezium on a NATS sink,
// a Redis stream sink and a Kafka sink with include.schema.changes false:
// the NATS and Redis sinks get Debezium's values (no sluice block), the
// NATS sink's DDL on the schema-change subject sluice.<source>, and
// /metrics counts the DDL the Kafka sink did not write in
// sluice_schema_changes_not_written_total.
func TestRunDebeziumNetSinks(t *testing.T) {
	testenv.ForEachFlavor(t, func(t *testing.T, flavor position.Flavor) { runDebeziumNetSinks(t, flavor) })
}

func runDebeziumNetSinks(t *testing.T, flavor position.Flavor) {
	e := newRunEnv(t, flavor)
	ctx := context.Background()
	ns := natsenv.StartNATS(t)
	rs := testenv.StartRedis(t)
	kc := kafkaenv.Start(t, nil) // its own: the topics are the tables' names
	createTopics(t, kc.Brokers(), 1, "app.log", "app.kv", "app.bulk")
	e.sinks = append(e.sinks,
		fmt.Sprintf("  - name: nats\n    type: nats\n    format: debezium\n    nats: {url: %q, ack_timeout: 2s}", ns.URL()),
		fmt.Sprintf("  - name: redis\n    type: redis\n    format: debezium\n    redis: {addr: %q}", rs.Addr()),
		fmt.Sprintf("  - name: kafka\n    type: kafka\n    format: debezium\n    kafka: {brokers: [%q], request_timeout: 3s, include.schema.changes: false}", kc.Brokers()[0]))
	admin := freePort(t)
	e.writeConfig(t, "admin: {addr: "+admin+"}")
	log := &syncBuffer{}
	cmd := e.start(t, log)
	defer func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
	}()
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(httpGet(t, "http://"+admin+"/healthz"), "ok") {
		if time.Now().After(deadline) {
			t.Fatalf("not healthy after 30 s\n%s", log.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	// Write once the binlog is read from the snapshot's position on: a
	// DDL statement before it would be in no sink's binlog stream.
	for !strings.Contains(log.String(), "streaming continues from its position") {
		if time.Now().After(deadline) {
			t.Fatalf("no snapshot done after 30 s\n%s", log.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := e.w.Txns(ctx, 3); err != nil {
		t.Fatal(err)
	}
	if err := e.db.Exec(ctx, "CREATE TABLE app.extra (id INT PRIMARY KEY)", "ALTER TABLE app.extra ADD COLUMN n INT"); err != nil {
		t.Fatal(err)
	}
	const want = `sluice_schema_changes_not_written_total{pipeline="crash",sink="kafka"} 2`
	deadline = time.Now().Add(60 * time.Second)
	for {
		metrics := httpGet(t, "http://"+admin+"/metrics")
		if strings.Contains(metrics, want) {
			break
		}
		if time.Now().After(deadline) {
			var got []string
			for l := range strings.Lines(metrics) {
				if strings.HasPrefix(l, "sluice_schema_changes_not_written_total") || strings.HasPrefix(l, "sluice_messages_total") || strings.HasPrefix(l, "sluice_sink_up") {
					got = append(got, strings.TrimSpace(l))
				}
			}
			t.Fatalf("/metrics lacks %s after 60 s; it has %q\n%s", want, got, log.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	if !strings.Contains(log.String(), "include.schema.changes is false") {
		t.Errorf("no warning at start about include.schema.changes false:\n%s", log.String())
	}

	// The NATS stream: Debezium's values, the two DDL statements on the
	// schema-change subject.
	nc, err := nats.Connect(ns.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	st, err := js.Stream(ctx, "sluice-crash")
	if err != nil {
		t.Fatal(err)
	}
	state := st.CachedInfo().State
	ddl, data := 0, 0
	for seq := state.FirstSeq; seq <= state.LastSeq && seq > 0; seq++ {
		m, err := st.GetMsg(ctx, seq)
		if err != nil {
			t.Fatal(err)
		}
		if m.Header.Get(pipeline.HeaderSeq) == "" {
			continue // a fence
		}
		if bytes.Contains(m.Data, []byte(`"sluice":{`)) {
			t.Errorf("NATS message %d has a sluice block in format debezium: %s", seq, m.Data)
		}
		switch {
		case m.Subject == "sluice.crash":
			ddl++
			if !bytes.Contains(m.Data, []byte(`"ddl":`)) {
				t.Errorf("NATS message %d on the schema-change subject is not a schema-change event: %s", seq, m.Data)
			}
		case strings.HasPrefix(m.Subject, "sluice.app."):
			data++
		default:
			t.Errorf("NATS message %d on subject %s", seq, m.Subject)
		}
	}
	if ddl != 2 || data == 0 {
		t.Errorf("NATS stream: %d schema-change events (want 2) and %d data events (want some)", ddl, data)
	}

	// A Redis stream: Debezium's key and value.
	rc := goredis.NewClient(&goredis.Options{Addr: rs.Addr(), Protocol: 2, DisableIdentity: true})
	defer rc.Close()
	xs, err := rc.XRange(ctx, "app.log", "-", "+").Result()
	if err != nil || len(xs) == 0 {
		t.Fatalf("Redis stream app.log: %v, %d entries", err, len(xs))
	}
	for _, x := range xs {
		v, _ := x.Values["value"].(string)
		k, _ := x.Values["key"].(string)
		if strings.Contains(v, `"sluice":{`) || !strings.Contains(v, `"op":`) || !strings.HasPrefix(k, `{"id":`) {
			t.Errorf("Redis entry %s: key %s value %s, want Debezium's key and value", x.ID, k, v)
		}
	}
}
