package bench

// The end-to-end latency benchmark against Debezium: commit to consumer
// through a real Kafka broker. A steady load of single-statement
// transactions into bench.lat is read, in turn, by `sluice run` (a process
// of its own, format debezium without schemas, its Kafka sink's
// transactions) and by Debezium's connector in a Kafka Connect worker
// (standalone, JsonConverter without schemas, as Debezium is deployed),
// each into a topic of its own on the same broker; a consumer in this
// process (franz-go, read_committed) reads the topic and takes, for every
// row, the time from its commit (the row's TIMESTAMP(6) column, the
// statement's NOW(6)) to the moment the consumer holds it.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-cdc/sluice/internal/testenv/throwaway"
)

// The readers of the latency benchmark.
const (
	LatencySluice   = "sluice"   // sluice run, format debezium, Kafka sink
	LatencyDebezium = "debezium" // Debezium's connector in Kafka Connect
)

// latTableDDL is the table of the latency benchmarks: each row carries
// its commit time.
const latTableDDL = "CREATE TABLE IF NOT EXISTS bench.lat (id BIGINT AUTO_INCREMENT PRIMARY KEY, at TIMESTAMP(6) NOT NULL DEFAULT NOW(6), pad VARCHAR(64) NOT NULL DEFAULT 'steady-load')"

// KafkaLatencyOptions control RunKafkaLatency.
type KafkaLatencyOptions struct {
	Rates    []int         // rows per second (default 1,000 and 10,000)
	Duration time.Duration // measured, per reader and rate (default 30 s)
	Warmup   time.Duration // the same load before measuring (default 15 s)
	Self     string        // the sluice binary (sluice run)
	Log      io.Writer
}

// KafkaLatencyResult is one reader at one rate.
type KafkaLatencyResult struct {
	Reader     string
	Rate       int     // rows per second asked
	RowsPerSec float64 // achieved
	TxnRows    int     // rows per transaction (one INSERT every 10 ms)
	Samples    int
	P50, P99   time.Duration
	Max        time.Duration
	// CPU is the reader's process CPU time (user+system) over the
	// measured load; CPUPerRow divides it by the rows written then.
	CPU float64
	// Ready is the time from the reader's start until it read the binlog
	// (sluice: the process's start; Debezium: the worker's start, the
	// connector running, its schema read).
	Ready time.Duration
}

// CPUPerRow is the reader's CPU nanoseconds per row written during the
// measured load.
func (r KafkaLatencyResult) CPUPerRow() float64 {
	if r.Samples == 0 {
		return 0
	}
	return r.CPU * 1e9 / float64(r.Samples)
}

// RunKafkaLatency measures each reader at each rate, the readers in turn
// at each rate, on db and the broker k.
func RunKafkaLatency(ctx context.Context, db *throwaway.Server, k *throwaway.Kafka, opts KafkaLatencyOptions) ([]KafkaLatencyResult, error) {
	if len(opts.Rates) == 0 {
		opts.Rates = []int{1000, 10000}
	}
	if opts.Duration <= 0 {
		opts.Duration = 30 * time.Second
	}
	if opts.Warmup <= 0 {
		opts.Warmup = 15 * time.Second
	}
	if opts.Log == nil {
		opts.Log = io.Discard
	}
	if err := db.Exec(ctx, "CREATE DATABASE IF NOT EXISTS bench", latTableDDL); err != nil {
		return nil, err
	}
	var out []KafkaLatencyResult
	run := 0
	for _, rate := range opts.Rates {
		for _, reader := range []string{LatencySluice, LatencyDebezium} {
			run++
			res, err := latencyRun(ctx, db, k, reader, rate, run, opts)
			if err != nil {
				return out, fmt.Errorf("bench kafka-latency: %s at %d rows/s: %w", reader, rate, err)
			}
			fmt.Fprintf(opts.Log, "%s %-8s %6d rows/s (%5.0f achieved, %d per txn): %d rows, p50 %v p99 %v max %v, CPU %.2fs, ready in %v\n",
				db.Flavor, reader, rate, res.RowsPerSec, res.TxnRows, res.Samples, res.P50, res.P99, res.Max, res.CPU, res.Ready.Round(time.Millisecond))
			out = append(out, res)
		}
	}
	return out, nil
}

// latencyReader is one reader started: its process, stopped by stop;
// failed, when set, tells whether it has exited and why.
type latencyReader struct {
	pid    int
	stop   func() error
	failed func() error
}

func latencyRun(ctx context.Context, db *throwaway.Server, k *throwaway.Kafka, reader string, rate, run int, opts KafkaLatencyOptions) (KafkaLatencyResult, error) {
	res := KafkaLatencyResult{Reader: reader, Rate: rate, TxnRows: max(rate/100, 1)}
	// A topic (and source) of its own per server, run and reader: the
	// broker outlives the servers, and sluice's recovery would read an
	// earlier run's messages in a topic it finds.
	prefix := fmt.Sprintf("lat_%s_%d_%s", db.Flavor, run, reader)
	topic := prefix + ".bench.lat"
	dumps, err := binlogDumps(ctx, db)
	if err != nil {
		return res, err
	}
	t0 := time.Now()
	var r latencyReader
	switch reader {
	case LatencySluice:
		r, err = startSluiceRun(ctx, db, k, opts.Self, prefix, uint32(5700+run))
	case LatencyDebezium:
		r, err = startDebeziumConnect(ctx, db, k, prefix, uint32(5700+run))
	}
	if err != nil {
		return res, err
	}
	defer r.stop()
	if err := waitBinlogDumps(ctx, db, dumps+1, 3*time.Minute, r.failed); err != nil {
		return res, fmt.Errorf("%s: %w", reader, err)
	}
	res.Ready = time.Since(t0)

	c := newLatencyConsumer(k.Brokers(), topic)
	defer c.close()
	conn, err := db.Conn(ctx)
	if err != nil {
		return res, err
	}
	defer conn.Close()
	insert := "INSERT INTO bench.lat () VALUES ()" + strings.Repeat(",()", res.TxnRows-1)
	load := func(d time.Duration) (rows int, elapsed time.Duration, err error) {
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		start := time.Now()
		for time.Since(start) < d {
			<-tick.C
			if _, err := conn.Execute(insert); err != nil {
				return rows, time.Since(start), err
			}
			rows += res.TxnRows
		}
		return rows, time.Since(start), nil
	}
	if _, _, err := load(opts.Warmup); err != nil {
		return res, err
	}
	rs, err := conn.Execute("SELECT COALESCE(MAX(id), 0) FROM bench.lat")
	if err != nil {
		return res, err
	}
	warmID, _ := rs.GetInt(0, 0)
	c.from(warmID)
	cpu0 := procCPU(r.pid)
	written, elapsed, err := load(opts.Duration)
	if err != nil {
		return res, err
	}
	res.RowsPerSec = float64(written) / elapsed.Seconds()
	deadline := time.Now().Add(time.Minute)
	for c.count() < written && time.Now().Before(deadline) && ctx.Err() == nil {
		time.Sleep(20 * time.Millisecond)
	}
	if cpu1 := procCPU(r.pid); cpu0 >= 0 && cpu1 >= cpu0 {
		res.CPU = cpu1 - cpu0
	}
	s, err := c.samples()
	if err != nil {
		return res, err
	}
	if len(s) < written {
		return res, fmt.Errorf("%d of the %d rows written reached the consumer of %s within a minute", len(s), written, topic)
	}
	slices.Sort(s)
	res.Samples = len(s)
	res.P50, res.P99, res.Max = s[len(s)/2], s[len(s)*99/100], s[len(s)-1]
	return res, nil
}

// startSluiceRun starts `sluice run` reading bench.lat from the current
// position into the topic <prefix>.bench.lat, format debezium without
// schemas (what Debezium's JsonConverter writes with schemas.enable=false),
// every other option sluice's default.
func startSluiceRun(ctx context.Context, db *throwaway.Server, k *throwaway.Kafka, bin, prefix string, serverID uint32) (latencyReader, error) {
	if bin == "" {
		return latencyReader{}, fmt.Errorf("no sluice binary")
	}
	dir, err := os.MkdirTemp("", "sluice-bench-latency-")
	if err != nil {
		return latencyReader{}, err
	}
	cfg := fmt.Sprintf(`pipeline: latency
source:
  name: %s
  url: %s
  server_id: %d
  tables: [bench.lat]
  snapshot: {mode: never}
sinks:
  - name: kafka
    type: kafka
    format: {name: debezium, schemas: false}
    kafka:
      brokers: [%q]
      topic: "{source}.{db}.{table}"
checkpoint: {path: %s}
`, prefix, db.URL(), serverID, k.Brokers()[0], filepath.Join(dir, "ckpt.json"))
	path := filepath.Join(dir, "sluice.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		os.RemoveAll(dir)
		return latencyReader{}, err
	}
	logf, err := os.Create(filepath.Join(dir, "sluice.log"))
	if err != nil {
		os.RemoveAll(dir)
		return latencyReader{}, err
	}
	cmd := exec.CommandContext(ctx, bin, "run", "--config", path)
	cmd.Stdout, cmd.Stderr = logf, logf
	dieWithParent(cmd)
	if err := cmd.Start(); err != nil {
		logf.Close()
		os.RemoveAll(dir)
		return latencyReader{}, err
	}
	done := make(chan struct{})
	var waitErr error
	go func() {
		waitErr = cmd.Wait()
		close(done)
	}()
	exitErr := func() error {
		log, _ := os.ReadFile(logf.Name())
		return fmt.Errorf("sluice run exited (%v):\n%s", waitErr, lastLines(string(log), 20))
	}
	var once sync.Once
	var stopErr error
	return latencyReader{pid: cmd.Process.Pid,
		failed: func() error {
			select {
			case <-done:
				return exitErr()
			default:
				return nil
			}
		},
		stop: func() error {
			once.Do(func() {
				_ = cmd.Process.Signal(syscall.SIGTERM)
				<-done
				if waitErr != nil {
					stopErr = exitErr()
				}
				logf.Close()
				os.RemoveAll(dir)
			})
			return stopErr
		}}, nil
}

// binlogDumps counts the replicas reading db's binlog.
func binlogDumps(ctx context.Context, db *throwaway.Server) (int, error) {
	rs, err := db.Query(ctx, "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE COMMAND LIKE 'Binlog Dump%'")
	if err != nil {
		return 0, err
	}
	n, _ := rs.GetInt(0, 0)
	return int(n), nil
}

// waitBinlogDumps waits until n replicas read db's binlog, and fails at
// once when failed (if set) reports the reader gone.
func waitBinlogDumps(ctx context.Context, db *throwaway.Server, n int, d time.Duration, failed func() error) error {
	deadline := time.Now().Add(d)
	for {
		if failed != nil {
			if err := failed(); err != nil {
				return err
			}
		}
		got, err := binlogDumps(ctx, db)
		if err != nil {
			return err
		}
		if got >= n {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the reader did not start reading the binlog within %v", d)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// latencyConsumer reads a topic from its start and keeps, for each row
// whose id is above the mark set by from, the time from its commit to
// the moment it was fetched.
type latencyConsumer struct {
	cl   *kgo.Client
	done chan struct{}

	mu   sync.Mutex
	mark int64
	lat  []time.Duration
	seen map[int64]bool
	err  error
}

func newLatencyConsumer(brokers []string, topic string) *latencyConsumer {
	c := &latencyConsumer{done: make(chan struct{}), mark: -1, seen: map[int64]bool{}}
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(topic),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.MetadataMinAge(100*time.Millisecond), kgo.MetadataMaxAge(time.Second))
	if err != nil {
		c.err = err
		close(c.done)
		return c
	}
	c.cl = cl
	go c.loop()
	return c
}

func (c *latencyConsumer) loop() {
	defer close(c.done)
	for {
		fs := c.cl.PollFetches(context.Background())
		now := time.Now()
		if fs.IsClientClosed() {
			return
		}
		fs.EachRecord(func(r *kgo.Record) {
			id, at, err := latencyRow(r.Value)
			c.mu.Lock()
			defer c.mu.Unlock()
			if err != nil {
				if c.err == nil {
					c.err = fmt.Errorf("record at %s/%d/%d: %w", r.Topic, r.Partition, r.Offset, err)
				}
				return
			}
			if c.mark < 0 || id <= c.mark || c.seen[id] {
				return
			}
			c.seen[id] = true
			c.lat = append(c.lat, now.Sub(at))
		})
	}
}

// from sets the mark: rows up to id are the warm-up's.
func (c *latencyConsumer) from(id int64) {
	c.mu.Lock()
	c.mark = id
	c.mu.Unlock()
}

func (c *latencyConsumer) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.lat)
}

func (c *latencyConsumer) samples() ([]time.Duration, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.lat), c.err
}

func (c *latencyConsumer) close() {
	if c.cl != nil {
		c.cl.Close()
	}
	<-c.done
}

// latencyRow reads the id and the commit time of a bench.lat row from a
// Debezium change event's value without schemas (sluice's format
// debezium and Debezium's JsonConverter write the same): after.id, and
// after.at, a TIMESTAMP(6) as io.debezium.time.ZonedTimestamp writes it.
func latencyRow(value []byte) (int64, time.Time, error) {
	var v struct {
		After *struct {
			ID int64  `json:"id"`
			At string `json:"at"`
		} `json:"after"`
	}
	if err := json.Unmarshal(value, &v); err != nil {
		return 0, time.Time{}, fmt.Errorf("not a change event: %w", err)
	}
	if v.After == nil {
		return 0, time.Time{}, fmt.Errorf("no after image: %.200s", value)
	}
	at, err := time.Parse(time.RFC3339Nano, v.After.At)
	if err != nil {
		return 0, time.Time{}, fmt.Errorf("after.at: %w", err)
	}
	return v.After.ID, at, nil
}

// ReportKafkaLatency prints the results as a Markdown table, sluice and
// Debezium side by side at each rate.
func ReportKafkaLatency(w io.Writer, results []KafkaLatencyResult) {
	byRate, rates := groupBy(results, func(r KafkaLatencyResult) (int, string) { return r.Rate, r.Reader })
	tw := tabwriter.NewWriter(w, 0, 0, 1, ' ', tabwriter.Debug)
	fmt.Fprintln(tw, "| rows/s (achieved, rows per txn)\t reader\t rows\t p50 ms\t p99 ms\t max ms\t CPU ns/row\t ready s\t p50 Debezium ÷ sluice\t p99 Debezium ÷ sluice\t CPU Debezium ÷ sluice\t")
	fmt.Fprintln(tw, "|---\t---\t---:\t---:\t---:\t---:\t---:\t---:\t---:\t---:\t---:\t")
	for _, rate := range rates {
		s, d := byRate[rate][LatencySluice], byRate[rate][LatencyDebezium]
		for _, r := range []KafkaLatencyResult{s, d} {
			if r.Reader == "" {
				continue
			}
			p50, p99, cpu := "", "", ""
			if r.Reader == LatencyDebezium && s.Reader != "" {
				p50, p99, cpu = times(float64(d.P50), float64(s.P50)), times(float64(d.P99), float64(s.P99)), times(d.CPUPerRow(), s.CPUPerRow())
			}
			fmt.Fprintf(tw, "| %d (%.0f, %d)\t %s\t %d\t %.2f\t %.2f\t %.2f\t %.0f\t %.1f\t %s\t %s\t %s\t\n", r.Rate, r.RowsPerSec, r.TxnRows, r.Reader, r.Samples,
				ms(r.P50), ms(r.P99), ms(r.Max), r.CPUPerRow(), r.Ready.Seconds(), p50, p99, cpu)
		}
	}
	tw.Flush()
}
