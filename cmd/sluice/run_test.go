package main

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	goredis "github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-cdc/sluice/codec"
	"github.com/sluice-cdc/sluice/internal/dbzharness"
	"github.com/sluice-cdc/sluice/internal/testenv"
	"github.com/sluice-cdc/sluice/internal/testenv/kafkaenv"
	"github.com/sluice-cdc/sluice/internal/testenv/natsenv"
	"github.com/sluice-cdc/sluice/internal/workload"
	"github.com/sluice-cdc/sluice/position"
	natssink "github.com/sluice-cdc/sluice/sink/nats"
)

// runEnv is a source server and a directory for a pipeline's files.
type runEnv struct {
	db     *testenv.Server
	dir    string
	bin    string
	config string
	w      *workload.Writer
	// sinks are extra sink blocks (YAML list items) and readers of what
	// they hold, keyed by name.
	sinks   []string
	readers map[string]func() ([]*codec.Event, error)
	redis   *testenv.Redis
	kafka   *kafkaReader
	// url, when set, is the source's url in place of db's.
	url string
}

// newRunEnv is a runEnv on a fresh server of flavor (the tests call it
// from testenv.ForEachFlavor).
func newRunEnv(t *testing.T, flavor position.Flavor) *runEnv {
	t.Helper()
	return newRunEnvOn(t, testenv.Options{Flavor: flavor})
}

// newRunEnvOn is newRunEnv on a server started with opts.
func newRunEnvOn(t *testing.T, opts testenv.Options) *runEnv {
	t.Helper()
	db := testenv.StartT(t, opts)
	if err := db.Exec(context.Background(), workload.Schema...); err != nil {
		t.Fatal(err)
	}
	e := &runEnv{db: db, dir: t.TempDir(), bin: buildSluice(t), w: &workload.Writer{DB: db}}
	e.readers = map[string]func() ([]*codec.Event, error){
		"file": func() ([]*codec.Event, error) {
			return workload.ReadFileSink(filepath.Join(e.dir, "out", "changes.*.jsonl"))
		},
	}
	return e
}

// writeConfig writes the pipeline's YAML: the file sink plus e.sinks.
func (e *runEnv) writeConfig(t *testing.T, extra string) {
	t.Helper()
	cfg := fmt.Sprintf(`pipeline: crash
source:
  url: %s
  server_id: 901
  tables: [app.*]
  snapshot: {chunk_rows: 100}
sinks:
  - name: file
    type: file
    file: {path: %s, max_bytes: 256KiB}
%s
checkpoint:
  path: %s
  interval: 200ms
buffer: {batch_bytes: 16KiB}
%s
`, cmp.Or(e.url, e.db.URL()), filepath.Join(e.dir, "out", "changes.jsonl"), strings.Join(e.sinks, "\n"), filepath.Join(e.dir, "ckpt.json"), extra)
	e.config = filepath.Join(e.dir, "sluice.yaml")
	if err := os.WriteFile(e.config, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
}

// start runs `sluice run` in the background; its stderr goes to log.
func (e *runEnv) start(t *testing.T, log io.Writer) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(e.bin, "run", "--config", e.config)
	cmd.Stderr = log
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return cmd
}

// waitAll waits until every sink holds n log rows.
func (e *runEnv) waitAll(t *testing.T, n int, log fmt.Stringer) {
	t.Helper()
	e.waitAllWithin(t, n, log, 90*time.Second)
}

// waitAllWithin is waitAll with another bound.
func (e *runEnv) waitAllWithin(t *testing.T, n int, log fmt.Stringer, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for name, read := range e.readers {
		for {
			evs, err := read()
			if err == nil && workload.Count(evs) >= n {
				break
			}
			if time.Now().After(deadline) {
				got := -1
				if err == nil {
					got = workload.Count(evs)
				}
				l := log.String()
				t.Fatalf("sink %s holds %d of %d rows after %s (err %v)\n%s", name, got, n, within, err, l[max(0, len(l)-6000):])
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
}

func (e *runEnv) checkAll(t *testing.T, n int) {
	t.Helper()
	for name, read := range e.readers {
		evs, err := read()
		if err != nil {
			t.Fatalf("sink %s: %v", name, err)
		}
		if err := workload.Check(context.Background(), e.db, evs, n); err != nil {
			t.Fatalf("sink %s: %v", name, err)
		}
		t.Logf("sink %s: %d messages, %d transactions, each exactly once", name, len(evs), n)
	}
}

// kills is how many times the crash test kills sluice: SLUICE_KILLS, or 6
// (make chaos runs 20).
func kills() int {
	if n, err := strconv.Atoi(os.Getenv("SLUICE_KILLS")); err == nil && n > 0 {
		return n
	}
	return 6
}

// killRestart kills `sluice run` with -9 kills() times, each after a
// random 200–1000 ms, and starts it again; it returns the last process.
// progress says how far the writes got, for the log.
func (e *runEnv) killRestart(t *testing.T, cmd *exec.Cmd, log io.Writer, progress func() string) *exec.Cmd {
	t.Helper()
	n := kills()
	for i := range n {
		time.Sleep(time.Duration(200+rand.IntN(800)) * time.Millisecond)
		if err := cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		_ = cmd.Wait()
		t.Logf("kill %d/%d after %s", i+1, n, progress())
		cmd = e.start(t, log)
	}
	return cmd
}

// TestRunKill9ExactlyOnce: under continuous writes, kill -9 `sluice run`
// at random moments and restart it; every sink then holds every source
// transaction exactly once, in order.
func TestRunKill9ExactlyOnce(t *testing.T) {
	testenv.ForEachFlavor(t, runKill9ExactlyOnce)
}

func runKill9ExactlyOnce(t *testing.T, flavor position.Flavor) {
	e := newRunEnv(t, flavor)
	e.withNATS(t)
	e.withRedis(t)
	e.withKafka(t)
	ctx := context.Background()
	if err := e.w.Txns(ctx, 50); err != nil { // rows for the snapshot
		t.Fatal(err)
	}
	e.writeConfig(t, "")
	log := &syncBuffer{}
	// The first run takes the snapshot; the kills hit the stream.
	cmd := e.start(t, log)
	e.waitAll(t, 50, log)

	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	var werr error
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if werr = e.w.Txns(ctx, 1+rand.IntN(3)); werr != nil {
				return
			}
			time.Sleep(time.Duration(rand.IntN(3)) * time.Millisecond)
		}
	}()
	cmd = e.killRestart(t, cmd, log, func() string { return fmt.Sprintf("%d transactions", e.w.N()) })
	close(stop)
	wg.Wait()
	if werr != nil {
		t.Fatal(werr)
	}
	total := e.w.N()
	e.waitAll(t, total, log)
	_ = cmd.Process.Signal(syscall.SIGTERM)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("sluice run after SIGTERM: %v\n%s", err, log.String())
	}
	e.checkAll(t, total)
	e.checkKafkaSecondOpinions(t, total)
	e.checkMaterialized(t)
}

// checkKafkaSecondOpinions reads the Kafka sink's topics again with code
// no one here wrote, librdkafka's kcat and Kafka's own Java consumer (both
// read_committed), and checks what each saw as checkAll does: every
// transaction once, nothing lost, nothing doubled.
func (e *runEnv) checkKafkaSecondOpinions(t *testing.T, n int) {
	t.Helper()
	kcat, err := testenv.EnsureKcat()
	if err != nil {
		t.Fatal(err)
	}
	var kcatEvs []*codec.Event
	for _, topic := range e.kafka.topics {
		for _, r := range kcatRead(t, kcat, e.kafka.brokers[0], topic) {
			if r.Payload == nil {
				t.Fatalf("kcat: a record without a value at %s offset %d", r.Topic, r.Offset)
			}
			ev, err := codec.DecodeLine([]byte(*r.Payload))
			if err != nil {
				t.Fatalf("kcat: %s offset %d: %v", r.Topic, r.Offset, err)
			}
			kcatEvs = append(kcatEvs, ev)
		}
	}
	recs, err := debeziumT(t, dbzharness.DebeziumVersion).Consume(context.Background(), e.kafka.brokers, e.kafka.topics, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	var javaEvs []*codec.Event
	for _, r := range recs {
		ev, err := codec.DecodeLine(r.Value)
		if err != nil {
			t.Fatalf("Java consumer: %s/%d offset %d: %v", r.Topic, r.Partition, r.Offset, err)
		}
		javaEvs = append(javaEvs, ev)
	}
	for _, c := range []struct {
		who string
		evs []*codec.Event
	}{{"kcat (librdkafka)", kcatEvs}, {"Kafka's Java consumer", javaEvs}} {
		if err := workload.Check(context.Background(), e.db, c.evs, n); err != nil {
			t.Fatalf("sink kafka read by %s: %v", c.who, err)
		}
		t.Logf("sink kafka read by %s: %d messages, %d transactions, each exactly once", c.who, len(c.evs), n)
	}
}

// TestRunConfigErrors: a bad config stops `sluice run` at once with the
// file, line and key.
func TestRunConfigErrors(t *testing.T) {
	bin := buildSluice(t)
	dir := t.TempDir()
	cases := []struct{ yaml, want string }{
		{"pipeline: p\nsource:\n  url: mysql://u:p@127.0.0.1:1\n  tabels: [a.b]\n", `sluice.yaml:4: source.tabels: unknown key "tabels" (did you mean "tables"?)`},
		{"pipeline: p\nsource:\n  url: mysql://u:${SLUICE_TEST_UNSET}@127.0.0.1:1\n", "environment variable SLUICE_TEST_UNSET is not set"},
		{"pipeline: p\nsource: {url: 'mysql://u:p@127.0.0.1:1'}\nsinks:\n  - type: file\n    file: {path: x.jsonl, max_bytes: huge}\n", `"huge" is not a size`},
		{"pipeline: p\nsource: {url: 'postgres://u:p@127.0.0.1:1'}\n", "source.url"},
		// Two Kafka sinks on one cluster with the same topics: each one's
		// recovery would count the other's records.
		{"pipeline: p\nsource: {url: 'mysql://u:p@127.0.0.1:1'}\nsinks:\n  - {name: a, type: kafka, kafka: {brokers: ['127.0.0.1:1']}}\n  - {name: b, type: kafka, kafka: {brokers: ['127.0.0.1:1']}}\n",
			`sinks a and b write to the same Kafka cluster and topics (topic "{db}.{table}" of a, topic "{db}.{table}" of b)`},
		{"pipeline: p\nsource: {url: 'mysql://u:p@127.0.0.1:1'}\nsinks:\n  - {name: a, type: kafka, kafka: {brokers: ['127.0.0.1:1']}}\n  - {name: b, type: kafka, format: debezium, kafka: {brokers: ['127.0.0.1:1'], topic: 'd.{db}.{table}', schema_change_topic: '{db}.{table}'}}\n",
			`give one of them its own schema_change_topic`},
	}
	for _, c := range cases {
		path := filepath.Join(dir, "sluice.yaml")
		if err := os.WriteFile(path, []byte(c.yaml), 0o644); err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command(bin, "run", "--config", path).CombinedOutput()
		if err == nil || !strings.Contains(string(out), c.want) {
			t.Errorf("config %q: err %v, output %q, want it to contain %q", c.yaml, err, out, c.want)
		}
	}
	out, err := exec.Command(bin, "run").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "--config") {
		t.Errorf("no config: %v %s", err, out)
	}
	// A config only the server can judge stops `sluice run` at once too,
	// with no password in the output.
	testenv.ForEachFlavor(t, func(t *testing.T, flavor position.Flavor) {
		db, ahead, monitor := serverForBadInput(t, flavor)
		for _, c := range []struct{ source, want string }{
			{"url: mysql://root:pw-wrong@" + db.Addr(), "Access denied for user 'root'"},
			// The snapshot's position needs the monitoring privilege, the
			// stream REPLICATION SLAVE: sluice names the grant, in the
			// server's own words.
			{"url: mysql://nobinlog:pw-nobinlog@" + db.Addr(), "needs " + monitor + " to read the current binlog position"},
			{"url: mysql://nobinlog:pw-nobinlog@" + db.Addr() + "\n  snapshot: {mode: never}", "needs REPLICATION SLAVE to read the binlog: GRANT REPLICATION SLAVE, " + monitor + ", SELECT ON *.* TO 'nobinlog'@'%'"},
			{"url: " + db.URL() + "\n  start: mysql-bin.000099:4", "never wrote the binlog file mysql-bin.000099"},
			{"url: " + db.URL() + "\n  start: '" + ahead + "'", "ahead of the server"},
		} {
			path := filepath.Join(t.TempDir(), "sluice.yaml")
			yaml := fmt.Sprintf("pipeline: p\nsource:\n  %s\n  tables: [app.*]\nsinks:\n  - {name: f, type: file, file: {path: %s}}\ncheckpoint: {path: %s}\n",
				c.source, filepath.Join(filepath.Dir(path), "out.jsonl"), filepath.Join(filepath.Dir(path), "ckpt.json"))
			if err := os.WriteFile(path, []byte(yaml), 0o644); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			out, err := exec.CommandContext(ctx, bin, "run", "--config", path).CombinedOutput()
			timedOut := ctx.Err() != nil
			cancel()
			if err == nil || timedOut || !strings.Contains(string(out), c.want) {
				t.Errorf("source %q: err %v (timed out: %v), output %q, want it to contain %q", c.source, err, timedOut, out, c.want)
			}
			if strings.Contains(string(out), "pw-") {
				t.Errorf("source %q: a password in the output: %s", c.source, out)
			}
		}
	})
}

func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func httpGet(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		return err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// TestRunAdminIncrementalSnapshotAndMetrics: `sluice snapshot
// --incremental` asks a running pipeline, through its admin address, to
// re-read a table while it streams; /metrics and /status show the figures.
func TestRunAdminIncrementalSnapshotAndMetrics(t *testing.T) {
	testenv.ForEachFlavor(t, func(t *testing.T, flavor position.Flavor) {
		runAdminIncrementalSnapshotAndMetrics(t, flavor)
	})
}

func runAdminIncrementalSnapshotAndMetrics(t *testing.T, flavor position.Flavor) {
	e := newRunEnvOn(t, testenv.Options{Flavor: flavor})
	ctx := context.Background()
	if err := e.w.Txns(ctx, 30); err != nil {
		t.Fatal(err)
	}
	admin := freePort(t)
	e.writeConfig(t, "admin: {addr: "+admin+"}")
	// Start from now: no initial snapshot, so the table's rows come only
	// from the incremental one.
	cfg, _ := os.ReadFile(e.config)
	cfg = bytes.Replace(cfg, []byte("snapshot: {chunk_rows: 100}"), []byte("snapshot: {mode: never, chunk_rows: 10}"), 1)
	if err := os.WriteFile(e.config, cfg, 0o644); err != nil {
		t.Fatal(err)
	}
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
	if err := e.w.Txns(ctx, 5); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(e.bin, "snapshot", "--incremental", "app.log", "--config", e.config).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "incremental snapshot of app.log started") {
		t.Fatalf("sluice snapshot: %v %s\n%s", err, out, log.String())
	}
	// All 35 rows arrive: 30 only by the snapshot, 5 by both.
	e.waitAll(t, 35, log)
	evs, err := e.readers["file"]()
	if err != nil {
		t.Fatal(err)
	}
	reads := 0
	for _, ev := range evs {
		if ev.Op == "r" && ev.Source.Table == "log" {
			reads++
		}
	}
	if reads < 30 {
		t.Fatalf("%d snapshot rows of app.log, want at least 30", reads)
	}
	out, err = exec.Command(e.bin, "snapshot", "--incremental", "app.nope", "--admin", admin).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "app.nope") {
		t.Fatalf("snapshot of a missing table: %v %s", err, out)
	}
	metrics := httpGet(t, "http://"+admin+"/metrics")
	for _, want := range []string{`sluice_messages_total{pipeline="crash"}`, `sluice_sink_up{pipeline="crash",sink="file"} 1`, "sluice_delivery_latency_seconds_bucket", `sluice_epoch{pipeline="crash"} 1`,
		`sluice_snapshot_writers_blocked_seconds{pipeline="crash",source="crash"} 0`} { // no consistent snapshot taken
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	out, err = exec.Command(e.bin, "status", "--config", e.config).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "checkpoint: version") || !strings.Contains(string(out), "running=true epoch=1") {
		t.Errorf("sluice status: %v\n%s", err, out)
	}
	status := httpGet(t, "http://"+admin+"/status")
	if !strings.Contains(status, `"running": true`) || !strings.Contains(status, `"last_seq"`) {
		t.Errorf("/status: %s", status)
	}
}

// TestRunSnapshotWritersBlocked: sluice run's initial snapshot, taken
// while a writer commits transactions, reports how long its lock held
// writers back (LOCK TABLES on MySQL, BACKUP STAGE BLOCK_COMMIT on
// MariaDB) in /metrics and /status, and the writer's slowest transaction
// agrees; the sink then holds every transaction exactly once.
func TestRunSnapshotWritersBlocked(t *testing.T) {
	testenv.ForEachFlavor(t, func(t *testing.T, flavor position.Flavor) {
		e := newRunEnvOn(t, testenv.Options{Flavor: flavor})
		ctx := context.Background()
		if err := e.w.Txns(ctx, 200); err != nil {
			t.Fatal(err)
		}
		admin := freePort(t)
		e.writeConfig(t, "admin: {addr: "+admin+"}")
		var stop atomic.Bool
		var slowest atomic.Int64
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				began := time.Now()
				if err := e.w.Txns(ctx, 1); err != nil {
					t.Error(err)
					return
				}
				if d := int64(time.Since(began)); d > slowest.Load() {
					slowest.Store(d)
				}
			}
		}()
		log := &syncBuffer{}
		cmd := e.start(t, log)
		defer func() {
			_ = cmd.Process.Signal(syscall.SIGTERM)
			_ = cmd.Wait()
		}()
		var blocked float64
		for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(100 * time.Millisecond) {
			if time.Now().After(deadline) {
				stop.Store(true)
				wg.Wait()
				t.Fatalf("no writers_blocked figure after 60 s\n%s", log.String())
			}
			if !strings.Contains(log.String(), "snapshot done") {
				continue
			}
			for _, line := range strings.Split(httpGet(t, "http://"+admin+"/metrics"), "\n") {
				if strings.HasPrefix(line, "sluice_snapshot_writers_blocked_seconds{") {
					f := strings.Fields(line)
					blocked, _ = strconv.ParseFloat(f[len(f)-1], 64)
				}
			}
			if blocked > 0 {
				break
			}
		}
		time.Sleep(500 * time.Millisecond)
		stop.Store(true)
		wg.Wait()
		status := httpGet(t, "http://"+admin+"/status")
		t.Logf("writers blocked %.4fs by the snapshot; the slowest transaction took %v", blocked, time.Duration(slowest.Load()))
		if blocked > 2 || time.Duration(slowest.Load()) > time.Duration(blocked*float64(time.Second))+3*time.Second {
			t.Errorf("writers blocked %.4fs, the slowest transaction took %v", blocked, time.Duration(slowest.Load()))
		}
		if !strings.Contains(status, `"snapshot_writers_blocked_seconds": `) || strings.Contains(status, `"snapshot_writers_blocked_seconds": 0,`) {
			t.Errorf("/status lacks the blocked time: %s", status)
		}
		if !strings.Contains(log.String(), "writers_blocked=") {
			t.Errorf("the log does not say how long writers were blocked:\n%s", log.String())
		}
		e.waitAll(t, e.w.N(), log)
		e.checkAll(t, e.w.N())
	})
}

// withNATS adds a NATS sink on an embedded JetStream server to the run.
func (e *runEnv) withNATS(t *testing.T) *natsenv.NATS {
	t.Helper()
	n := natsenv.StartNATS(t)
	e.sinks = append(e.sinks, fmt.Sprintf("  - name: nats\n    type: nats\n    nats: {url: %q, ack_timeout: 2s}", n.URL()))
	e.readers["nats"] = func() ([]*codec.Event, error) { return readNATS(n.URL(), "sluice-crash") }
	return n
}

// readNATS reads every message of a stream, in stream order.
func readNATS(url, stream string) ([]*codec.Event, error) {
	nc, err := nats.Connect(url)
	if err != nil {
		return nil, err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s, err := js.Stream(ctx, stream)
	if err != nil {
		return nil, err
	}
	info, err := s.Info(ctx)
	if err != nil {
		return nil, err
	}
	var evs []*codec.Event
	if info.State.Msgs == 0 {
		return nil, nil
	}
	c, err := s.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{})
	if err != nil {
		return nil, err
	}
	read := uint64(0)
	for read < info.State.Msgs {
		batch, err := c.Fetch(1000, jetstream.FetchMaxWait(2*time.Second))
		if err != nil {
			return nil, err
		}
		got := 0
		for m := range batch.Messages() {
			read++
			got++
			if natssink.IsFence(m.Headers()) {
				continue // each leader's recovery fences the stream
			}
			ev, err := codec.DecodeLine(m.Data())
			if err != nil {
				return nil, err
			}
			evs = append(evs, ev)
		}
		if err := batch.Error(); err != nil {
			return nil, err
		}
		if got == 0 {
			return nil, fmt.Errorf("stream %s: read %d of %d messages", stream, read, info.State.Msgs)
		}
	}
	return evs, nil
}

// withRedis adds two Redis sinks on one throwaway redis-server: a stream
// per table, and the rows materialized as hashes.
func (e *runEnv) withRedis(t *testing.T) *testenv.Redis {
	t.Helper()
	r := testenv.StartRedis(t)
	e.sinks = append(e.sinks,
		fmt.Sprintf("  - name: redis\n    type: redis\n    redis: {addr: %q, mode: stream, key_prefix: 's:', write_timeout: 2s}", r.Addr()),
		fmt.Sprintf("  - name: redis-rows\n    type: redis\n    redis: {addr: %q, mode: materialize, key_prefix: 'm:', write_timeout: 2s}", r.Addr()))
	e.readers["redis"] = func() ([]*codec.Event, error) {
		return readRedisStreams(r.Addr(), "s:app.log", "s:app.kv", "s:app.bulk")
	}
	e.redis = r
	return r
}

// readRedisStreams reads every entry of the streams.
func readRedisStreams(addr string, keys ...string) ([]*codec.Event, error) {
	c := goredis.NewClient(&goredis.Options{Addr: addr})
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var evs []*codec.Event
	for _, k := range keys {
		msgs, err := c.XRange(ctx, k, "-", "+").Result()
		if err != nil {
			return nil, err
		}
		for _, m := range msgs {
			v, _ := m.Values["value"].(string)
			ev, err := codec.DecodeLine([]byte(v))
			if err != nil {
				return nil, fmt.Errorf("%s %s: %w", k, m.ID, err)
			}
			evs = append(evs, ev)
		}
	}
	return evs, nil
}

// checkMaterialized compares the Redis hashes of app.kv with the table.
func (e *runEnv) checkMaterialized(t *testing.T) {
	t.Helper()
	c := goredis.NewClient(&goredis.Options{Addr: e.redis.Addr()})
	defer c.Close()
	ctx := context.Background()
	keys, err := c.Keys(ctx, "m:app.kv:*").Result()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, k := range keys {
		h, err := c.HGetAll(ctx, k).Result()
		if err != nil {
			t.Fatal(err)
		}
		got[h["k"]] = h["v"]
	}
	want, err := workload.KV(ctx, e.db)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("Redis materialized app.kv differs from the table:\n got %v\nwant %v", got, want)
	}
	n, err := c.Keys(ctx, "m:app.log:*").Result()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("redis-rows: app.kv equals the table (%d rows); app.log has %d hashes", len(got), len(n))
}

// outage is how long the outage test keeps a sink down: SLUICE_OUTAGE, or
// 6 s (make chaos: 30 s).
func outage() time.Duration {
	if d, err := time.ParseDuration(os.Getenv("SLUICE_OUTAGE")); err == nil && d > 0 {
		return d
	}
	return 6 * time.Second
}

// vmHWM is a process's peak resident memory.
func vmHWM(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("no VmHWM in /proc/%d/status", pid)
}

// TestRunSinkOutage: Redis stops and the Kafka broker crashes under load; the
// pipeline retries with a clear log line, reports the sink down, keeps its memory within the
// buffer, and when Redis is back delivers everything exactly once.
func TestRunSinkOutage(t *testing.T) {
	testenv.ForEachFlavor(t, runSinkOutage)
}

func runSinkOutage(t *testing.T, flavor position.Flavor) {
	e := newRunEnv(t, flavor)
	r := e.withRedis(t)
	kc := e.withOwnKafka(t)
	ctx := context.Background()
	admin := freePort(t)
	e.writeConfig(t, "admin: {addr: "+admin+"}\n")
	cfg, _ := os.ReadFile(e.config)
	cfg = bytes.Replace(cfg, []byte("buffer: {batch_bytes: 16KiB}"), []byte("buffer: {batch_bytes: 64KiB, max_bytes: 4MiB}"), 1)
	if err := os.WriteFile(e.config, cfg, 0o644); err != nil {
		t.Fatal(err)
	}
	log := &syncBuffer{}
	cmd := e.start(t, log)
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	if err := e.w.Txns(ctx, 20); err != nil {
		t.Fatal(err)
	}
	e.waitAll(t, 20, log)

	if err := r.Stop(); err != nil {
		t.Fatal(err)
	}
	// Kafka is down too meanwhile (its broker crashed: connections are
	// refused).
	if err := kc.Kill(0); err != nil {
		t.Fatal(err)
	}
	// Write under the outage: far more than the 4 MiB buffer holds.
	end := time.Now().Add(outage())
	sawDown := false
	for time.Now().Before(end) {
		if err := e.w.Txns(ctx, 50); err != nil {
			t.Fatal(err)
		}
		if !sawDown && strings.Contains(httpGet(t, "http://"+admin+"/metrics"), `sluice_sink_up{pipeline="crash",sink="redis"} 0`) {
			sawDown = true
		}
	}
	if !sawDown {
		t.Error("sluice_sink_up never showed the Redis sink down")
	}
	during, err := vmHWM(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("peak RSS during the outage: %d MiB", during>>20)
	if !strings.Contains(log.String(), "sink write failed; retrying") {
		t.Errorf("no retry log line during the outage:\n%s", log.String())
	}
	if err := r.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := kc.Start(ctx, 0); err != nil {
		t.Fatal(err)
	}
	total := e.w.N()
	e.waitAll(t, total, log)
	if !strings.Contains(log.String(), "sink is back; delivery continues") {
		t.Errorf("no log line when the sink came back")
	}
	hwm, err := vmHWM(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d transactions (%d during a %v outage); sluice peak RSS %d MiB", total, total-20, outage(), hwm>>20)
	if hwm > 200<<20 {
		t.Errorf("peak RSS %d MiB: memory is not bounded by the buffer", hwm>>20)
	}
	// A sink that is down when sluice starts is waited for.
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	if err := r.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := e.w.Txns(ctx, 30); err != nil {
		t.Fatal(err)
	}
	log2 := &syncBuffer{}
	cmd = e.start(t, log2)
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(log2.String(), "sink unavailable at start; retrying") {
		if time.Now().After(deadline) || cmd.ProcessState != nil {
			t.Fatalf("no retry at start with Redis down:\n%s", log2.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := r.Start(ctx); err != nil {
		t.Fatal(err)
	}
	total = e.w.N()
	e.waitAll(t, total, log2)
	_ = cmd.Process.Signal(syscall.SIGTERM)
	_ = cmd.Wait()
	e.checkAll(t, total)
	e.checkMaterialized(t)
}

// withKafka adds a Kafka sink on the package's shared real Kafka broker
// (kafkaenv.Shared), with topics and a transactional id of the test's
// own (a prefix).
func (e *runEnv) withKafka(t *testing.T) *kafkaenv.Kafka {
	t.Helper()
	k := kafkaenv.Shared(t)
	e.addKafka(t, k)
	return k
}

// withOwnKafka adds a Kafka sink on a broker of the test's own, for a test
// that stops or kills it.
func (e *runEnv) withOwnKafka(t *testing.T) *kafkaenv.Kafka {
	t.Helper()
	k := kafkaenv.Start(t, nil)
	e.addKafka(t, k)
	return k
}

func (e *runEnv) addKafka(t *testing.T, k *kafkaenv.Kafka) {
	t.Helper()
	prefix := kafkaenv.Name(t, "")
	var topics []string
	for _, tbl := range []string{"app.log", "app.kv", "app.bulk"} {
		topics = append(topics, prefix+"."+tbl)
	}
	createTopics(t, k.Brokers(), 3, topics...)
	e.sinks = append(e.sinks, fmt.Sprintf("  - name: kafka\n    type: kafka\n    kafka: {brokers: [%q], request_timeout: 3s, topic: %q, transactional_id: %q}",
		k.Brokers()[0], prefix+".{db}.{table}", prefix))
	kr := newKafkaReader(t, k.Brokers(), topics...)
	e.kafka = kr
	e.readers["kafka"] = func() ([]*codec.Event, error) {
		// As many messages as the file sink holds are expected: a consumer
		// cannot tell "all read" from "not fetched yet" (partitions arrive
		// at different times, slowly under -race).
		want := 0
		if evs, err := e.readers["file"](); err == nil {
			want = len(evs)
		}
		return kr.read(want)
	}
}

// createTopics creates the topics, with parts partitions each.
func createTopics(t *testing.T, brokers []string, parts int32, topics ...string) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := kadm.NewClient(cl).CreateTopics(ctx, parts, 1, nil, topics...)
	if err == nil {
		err = res.Error()
	}
	if err != nil {
		t.Fatalf("creating topics %v: %v", topics, err)
	}
}

// kafkaReader reads the committed records of topics (read_committed)
// with one consumer kept across calls, so that each call reads only what
// came since the last (re-reading every topic from the start on each poll
// of a wait loop was too slow on a loaded machine).
type kafkaReader struct {
	brokers []string
	topics  []string
	cl      *kgo.Client
	evs     []*codec.Event
	// parts names the topic and partition of each of evs: the order of
	// records is kept within a partition only.
	parts []string
}

func newKafkaReader(t *testing.T, brokers []string, topics ...string) *kafkaReader {
	r := &kafkaReader{brokers: brokers, topics: topics}
	t.Cleanup(func() {
		if r.cl != nil {
			r.cl.Close()
		}
	})
	return r
}

// read returns every record read so far, reading on until it holds want
// of them and nothing more comes for a second, or 30 s pass.
func (r *kafkaReader) read(want int) ([]*codec.Event, error) {
	if r.cl == nil {
		cl, err := kgo.NewClient(kgo.SeedBrokers(r.brokers...), kgo.ConsumeTopics(r.topics...),
			kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
		if err != nil {
			return nil, err
		}
		r.cl = cl
	}
	deadline := time.Now().Add(30 * time.Second)
	for empty := 0; time.Now().Before(deadline); {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		fs := r.cl.PollFetches(ctx)
		cancel()
		if err := fs.Err0(); err != nil && !errors.Is(err, context.DeadlineExceeded) {
			return nil, err
		}
		if fs.NumRecords() == 0 {
			if empty++; len(r.evs) >= want && empty >= 1 {
				break
			}
			continue
		}
		empty = 0
		var derr error
		fs.EachRecord(func(rec *kgo.Record) {
			ev, err := codec.DecodeLine(rec.Value)
			if err != nil {
				derr = err
				return
			}
			r.evs = append(r.evs, ev)
			r.parts = append(r.parts, rec.Topic+"/"+strconv.Itoa(int(rec.Partition)))
		})
		if derr != nil {
			return nil, derr
		}
	}
	return append([]*codec.Event(nil), r.evs...), nil
}
