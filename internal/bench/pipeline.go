package bench

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/sluice-cdc/sluice/binlog"
	"github.com/sluice-cdc/sluice/checkpoint"
	"github.com/sluice-cdc/sluice/codec"
	"github.com/sluice-cdc/sluice/internal/testenv/throwaway"
	"github.com/sluice-cdc/sluice/pipeline"
)

// SinkKind makes a fresh sink of one kind for a measurement, writing
// format f; cleanup releases what it started. Formats says the kind
// writes formats other than sluice's.
type SinkKind struct {
	Name    string
	Formats bool
	New     func(ctx context.Context, dir string, f codec.Format) (s pipeline.Sink, cleanup func(), err error)
}

// OutputFormat is a sink format the pipeline benchmark measures, by the
// name the libslave benchmark's modes give it.
type OutputFormat struct {
	Name   string
	Format codec.Format
}

// OutputFormats are the formats the pipeline benchmark knows.
var OutputFormats = []OutputFormat{
	{"sluice", codec.Format{Name: codec.FormatSluice}},
	{"debezium", codec.Format{Name: codec.FormatDebezium}},
	{"debezium-schemas", codec.Format{Name: codec.FormatDebezium, Schemas: true}},
}

// ParseOutputFormats looks up --format values.
func ParseOutputFormats(names []string) ([]OutputFormat, error) {
	var out []OutputFormat
	for _, n := range names {
		n = strings.ToLower(strings.TrimSpace(n))
		i := slices.IndexFunc(OutputFormats, func(f OutputFormat) bool { return f.Name == n })
		if i < 0 {
			return nil, fmt.Errorf("--format: %q is not a format; use sluice, debezium or debezium-schemas (debezium with schemas: true), or several separated by commas", n)
		}
		out = append(out, OutputFormats[i])
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("--format: name at least one of sluice, debezium, debezium-schemas")
	}
	return out, nil
}

// PipelineResult is one end-to-end measurement: a binlog range through
// `sluice run`'s pipeline (decode, encode in the sink's format, sink,
// checkpoint). Bytes counts the encoded values and keys. CPUSeconds is
// the process's user and system CPU over the run (getrusage): the
// pipeline and the sink, and for an in-process sink (the file
// sink) the sink's side too; the database server is another process.
type PipelineResult struct {
	Range, Sink, Format string
	Messages, Bytes     int64
	Seconds             float64
	CPUSeconds          float64
}

// CPUPerMsg is the process CPU per message, in nanoseconds.
func (r PipelineResult) CPUPerMsg() float64 {
	if r.Messages == 0 {
		return 0
	}
	return r.CPUSeconds * 1e9 / float64(r.Messages)
}

// processCPU is the process's user plus system CPU time so far.
func processCPU() (float64, error) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, fmt.Errorf("reading the process's CPU time: %w", err)
	}
	tv := func(t syscall.Timeval) float64 { return float64(t.Sec) + float64(t.Usec)/1e6 }
	return tv(ru.Utime) + tv(ru.Stime), nil
}

// MsgsPerSec is the end-to-end rate.
func (r PipelineResult) MsgsPerSec() float64 {
	if r.Seconds == 0 {
		return 0
	}
	return float64(r.Messages) / r.Seconds
}

func sourceConfig(db *throwaway.Server) (binlog.Config, error) {
	src, err := binlog.ParseSourceURL(db.URL())
	if err != nil {
		return src, err
	}
	src.ServerID = 31337
	return src, nil
}

// PipelineThroughput runs the pipeline over rg into a new sink of kind k
// writing format f and times it from start until the last message is
// durable and checkpointed.
func PipelineThroughput(ctx context.Context, db *throwaway.Server, rg Range, k SinkKind, f OutputFormat) (PipelineResult, error) {
	res := PipelineResult{Range: rg.Name, Sink: k.Name, Format: f.Name}
	dir, err := os.MkdirTemp("", "sluice-bench-pipeline-")
	if err != nil {
		return res, err
	}
	defer os.RemoveAll(dir)
	sink, cleanup, err := k.New(ctx, dir, f.Format)
	if err != nil {
		return res, err
	}
	defer cleanup()
	src, err := sourceConfig(db)
	if err != nil {
		return res, err
	}
	src.Start, src.Stop = rg.From, rg.To
	p, err := pipeline.New(pipeline.Config{
		Name:   "bench",
		Source: pipeline.SourceConfig{Name: "bench", Binlog: src, StartGiven: true, Snapshot: pipeline.SnapshotConfig{Mode: "never"}},
		Sinks:  []pipeline.Sink{sink},
		Store:  &checkpoint.FileStore{Path: filepath.Join(dir, "ckpt.json")},
	})
	if err != nil {
		return res, err
	}
	cpu0, err := processCPU()
	if err != nil {
		return res, err
	}
	start := time.Now()
	if err := p.Run(ctx); err != nil {
		return res, err
	}
	res.Seconds = time.Since(start).Seconds()
	cpu1, err := processCPU()
	if err != nil {
		return res, err
	}
	res.CPUSeconds = cpu1 - cpu0
	c := p.Counters()
	res.Messages, res.Bytes = int64(c.Messages), int64(c.Bytes)
	if res.Messages != rg.Rows {
		return res, fmt.Errorf("%s into %s: %d messages for %d rows", rg.Name, k.Name, res.Messages, rg.Rows)
	}
	return res, nil
}

// LatencyResult is the commit-to-sink latency under a steady load.
type LatencyResult struct {
	Sink, Format  string
	TxnsPerSec    float64 // achieved write rate
	Samples       int
	P50, P99, Max time.Duration
}

// latencySink wraps a sink and records, after each durable write, how
// long ago each bench.lat row was committed (its TIMESTAMP(6) column).
type latencySink struct {
	pipeline.Sink
	mu      sync.Mutex
	samples []time.Duration
}

func (l *latencySink) Write(ctx context.Context, b *pipeline.Batch) (string, error) {
	off, err := l.Sink.Write(ctx, b)
	if err != nil {
		return off, err
	}
	now := time.Now()
	l.mu.Lock()
	for i := range b.Messages {
		ch := b.Messages[i].Change
		if ch == nil || ch.Table == nil || ch.Table.Name != "lat" || len(ch.After) < 2 {
			continue
		}
		sec, us := ch.After[1].Timestamp()
		l.samples = append(l.samples, now.Sub(time.Unix(sec, int64(us)*1000)))
	}
	l.mu.Unlock()
	return off, nil
}

// PipelineLatency writes txnsPerSec single-row transactions for d while the
// pipeline delivers them to a sink of kind k writing format f, and reports
// percentiles of the time from the row's commit to its being durable in
// the sink.
func PipelineLatency(ctx context.Context, db *throwaway.Server, k SinkKind, f OutputFormat, txnsPerSec int, d time.Duration) (LatencyResult, error) {
	res := LatencyResult{Sink: k.Name, Format: f.Name}
	if err := db.Exec(ctx, "CREATE TABLE IF NOT EXISTS bench.lat (id BIGINT AUTO_INCREMENT PRIMARY KEY, at TIMESTAMP(6) NOT NULL DEFAULT NOW(6), pad VARCHAR(64) NOT NULL DEFAULT 'steady-load')"); err != nil {
		return res, err
	}
	dir, err := os.MkdirTemp("", "sluice-bench-latency-")
	if err != nil {
		return res, err
	}
	defer os.RemoveAll(dir)
	inner, cleanup, err := k.New(ctx, dir, f.Format)
	if err != nil {
		return res, err
	}
	defer cleanup()
	sink := &latencySink{Sink: inner}
	src, err := sourceConfig(db)
	if err != nil {
		return res, err
	}
	if src.Tables, err = binlog.ParseFilter("bench.lat"); err != nil {
		return res, err
	}
	src.StartAt = binlog.StartCurrent
	p, err := pipeline.New(pipeline.Config{
		Name:   "latency",
		Source: pipeline.SourceConfig{Name: "bench", Binlog: src, Snapshot: pipeline.SnapshotConfig{Mode: "never"}},
		Sinks:  []pipeline.Sink{sink},
		Store:  &checkpoint.FileStore{Path: filepath.Join(dir, "ckpt.json")},
	})
	if err != nil {
		return res, err
	}
	pctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- p.Run(pctx) }()
	time.Sleep(500 * time.Millisecond) // connected and streaming

	conn, err := db.Conn(ctx)
	if err != nil {
		stop()
		<-done
		return res, err
	}
	defer conn.Close()
	// Paced in ticks of 10 ms: each tick commits its share of the rate.
	perTick := max(txnsPerSec/100, 1)
	tick := time.NewTicker(10 * time.Millisecond)
	start := time.Now()
	written := 0
	for time.Since(start) < d {
		<-tick.C
		for range perTick {
			if _, err := conn.Execute("INSERT INTO bench.lat () VALUES ()"); err != nil {
				tick.Stop()
				stop()
				<-done
				return res, err
			}
			written++
		}
	}
	tick.Stop()
	res.TxnsPerSec = float64(written) / time.Since(start).Seconds()
	// Wait for the last rows to arrive.
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		sink.mu.Lock()
		n := len(sink.samples)
		sink.mu.Unlock()
		if n >= written {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	stop()
	if err := <-done; err != nil {
		return res, err
	}
	sink.mu.Lock()
	s := slices.Clone(sink.samples)
	sink.mu.Unlock()
	if len(s) < written {
		return res, fmt.Errorf("latency into %s: %d of %d rows arrived", k.Name, len(s), written)
	}
	slices.Sort(s)
	res.Samples = len(s)
	res.P50, res.P99, res.Max = s[len(s)/2], s[len(s)*99/100], s[len(s)-1]
	return res, nil
}

// ReportPipeline prints the throughput and latency tables in Markdown.
// "vs sluice" is a result's msg/s divided by that of format sluice on the
// same range and sink (when measured); "CPU vs sluice" its process CPU per
// message divided by format sluice's.
func ReportPipeline(w io.Writer, tp []PipelineResult, lat []LatencyResult) {
	tw := tabwriter.NewWriter(w, 0, 0, 1, ' ', tabwriter.Debug)
	fmt.Fprintln(tw, "| range\t sink\t format\t messages\t seconds\t msg/s\t B/msg\t CPU ns/msg\t vs sluice\t CPU vs sluice\t")
	fmt.Fprintln(tw, "|---\t---\t---\t---\t---\t---\t---\t---\t---\t---\t")
	for _, r := range tp {
		vs, cpuVs := "-", "-"
		for _, b := range tp {
			if b.Range == r.Range && b.Sink == r.Sink && b.Format == "sluice" && b.MsgsPerSec() > 0 {
				vs = fmt.Sprintf("%.2f×", r.MsgsPerSec()/b.MsgsPerSec())
				if b.CPUPerMsg() > 0 {
					cpuVs = fmt.Sprintf("%.2f×", r.CPUPerMsg()/b.CPUPerMsg())
				}
			}
		}
		per := 0.0
		if r.Messages > 0 {
			per = float64(r.Bytes) / float64(r.Messages)
		}
		fmt.Fprintf(tw, "| %s\t %s\t %s\t %d\t %.2f\t %.0f\t %.0f\t %.0f\t %s\t %s\t\n", r.Range, r.Sink, r.Format, r.Messages, r.Seconds, r.MsgsPerSec(), per, r.CPUPerMsg(), vs, cpuVs)
	}
	tw.Flush()
	if len(lat) == 0 {
		return
	}
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 0, 1, ' ', tabwriter.Debug)
	fmt.Fprintln(tw, "| sink\t format\t load txn/s\t samples\t p50 ms\t p99 ms\t max ms\t")
	fmt.Fprintln(tw, "|---\t---\t---\t---\t---\t---\t---\t")
	ms := func(d time.Duration) string { return fmt.Sprintf("%.2f", float64(d.Microseconds())/1000) }
	for _, r := range lat {
		fmt.Fprintf(tw, "| %s\t %s\t %.0f\t %d\t %s\t %s\t %s\t\n", r.Sink, r.Format, r.TxnsPerSec, r.Samples, ms(r.P50), ms(r.P99), ms(r.Max))
	}
	tw.Flush()
}
