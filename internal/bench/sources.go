package bench

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/sluice-cdc/sluice/binlog"
	"github.com/sluice-cdc/sluice/checkpoint"
	"github.com/sluice-cdc/sluice/internal/testenv/throwaway"
	"github.com/sluice-cdc/sluice/pipeline"
	"github.com/sluice-cdc/sluice/position"
	"github.com/sluice-cdc/sluice/sink/file"
)

// Shards are the servers of the many-sources benchmark, each with a range
// of binlog written at the same time as the others' (balanced load).
type Shards struct {
	DBs    []*throwaway.Server
	Ranges []Range
}

// Close stops the servers.
func (s *Shards) Close() {
	for _, db := range s.DBs {
		db.Close()
	}
}

// PrepareShards starts n servers of flavor and, on all at once for d,
// writes transactions of txnRows short_table rows each: n binlog ranges
// whose event times overlap.
func PrepareShards(ctx context.Context, flavor position.Flavor, n, txnRows int, d time.Duration, log io.Writer) (*Shards, error) {
	redo := "--innodb-log-file-size=256M"
	if flavor == position.MySQL {
		redo = "--innodb-redo-log-capacity=256M" // the size setting MySQL 8.0.30+ reads
	}
	opts := make([]throwaway.Options, n)
	for i := range opts {
		opts[i] = throwaway.Options{Flavor: flavor, ServerID: uint32(i + 1),
			Extra: []string{"--innodb-buffer-pool-size=256M", redo, "--max-binlog-size=1G"}}
	}
	dbs, err := throwaway.StartMany(ctx, opts, "CREATE DATABASE bench",
		"CREATE TABLE bench.short_table (id int NOT NULL AUTO_INCREMENT PRIMARY KEY, field1 int NOT NULL, field2 int NOT NULL) ENGINE=InnoDB",
		"CREATE TABLE bench.lat (id BIGINT AUTO_INCREMENT PRIMARY KEY, at TIMESTAMP(6) NOT NULL DEFAULT NOW(6), pad VARCHAR(64) NOT NULL DEFAULT 'steady-load')")
	if err != nil {
		return nil, err
	}
	s := &Shards{DBs: dbs, Ranges: make([]Range, n)}
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i, db := range s.DBs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			from, err := masterPos(ctx, db)
			if err != nil {
				errs[i] = err
				return
			}
			c, err := db.Conn(ctx)
			if err != nil {
				errs[i] = err
				return
			}
			defer c.Close()
			for _, q := range seqSession(flavor, txnRows) {
				if _, err := c.Execute(q); err != nil {
					errs[i] = err
					return
				}
			}
			insert := "INSERT INTO bench.short_table (field1, field2) SELECT seq, seq FROM " + seqRows(flavor, txnRows)
			var rows int64
			for start := time.Now(); time.Since(start) < d; {
				if _, err := c.Execute(insert); err != nil {
					errs[i] = err
					return
				}
				rows += int64(txnRows)
			}
			to, err := masterPos(ctx, db)
			if err != nil {
				errs[i] = err
				return
			}
			s.Ranges[i] = Range{Name: fmt.Sprintf("shard%d", i+1), Rows: rows, From: from, To: to}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			s.Close()
			return nil, err
		}
	}
	for _, r := range s.Ranges {
		fmt.Fprintf(log, "wrote %s: %d rows, %s -> %s\n", r.Name, r.Rows, r.From, r.To)
	}
	return s, nil
}

// SourcesResult is one run of the shards' ranges through one pipeline.
type SourcesResult struct {
	Align    bool
	Messages int64
	Seconds  float64
	Held     uint64
}

// MsgsPerSec is the end-to-end rate.
func (r SourcesResult) MsgsPerSec() float64 { return float64(r.Messages) / r.Seconds }

func shardSources(s *Shards, ranges bool) ([]pipeline.SourceConfig, error) {
	var out []pipeline.SourceConfig
	for i, db := range s.DBs {
		src, err := binlog.ParseSourceURL(db.URL())
		if err != nil {
			return nil, err
		}
		src.ServerID = 41000 + uint32(i)
		sc := pipeline.SourceConfig{Name: fmt.Sprintf("shard%d", i+1), Binlog: src, Snapshot: pipeline.SnapshotConfig{Mode: "never"}}
		if ranges {
			sc.Binlog.Start, sc.Binlog.Stop, sc.StartGiven = s.Ranges[i].From, s.Ranges[i].To, true
		} else {
			sc.Binlog.StartAt = binlog.StartCurrent
			if sc.Binlog.Tables, err = binlog.ParseFilter("bench.lat"); err != nil {
				return nil, err
			}
		}
		out = append(out, sc)
	}
	return out, nil
}

// SourcesThroughput runs the shards' ranges through a pipeline with the
// four sources into a file sink, with alignment (max_skew 2s) or without,
// timed until the last message is durable and checkpointed.
func SourcesThroughput(ctx context.Context, s *Shards, align bool) (SourcesResult, error) {
	res := SourcesResult{Align: align}
	dir, err := os.MkdirTemp("", "sluice-bench-sources-")
	if err != nil {
		return res, err
	}
	defer os.RemoveAll(dir)
	sink, err := file.New("file", file.Config{Path: filepath.Join(dir, "out", "changes.jsonl")}, nil)
	if err != nil {
		return res, err
	}
	defer sink.Close()
	srcs, err := shardSources(s, true)
	if err != nil {
		return res, err
	}
	cfg := pipeline.Config{Name: "bench", Sources: srcs, Sinks: []pipeline.Sink{sink},
		Store: &checkpoint.FileStore{Path: filepath.Join(dir, "ckpt.json")}}
	if align {
		cfg.Align.MaxSkew = 2 * time.Second
	}
	p, err := pipeline.New(cfg)
	if err != nil {
		return res, err
	}
	start := time.Now()
	if err := p.Run(ctx); err != nil {
		return res, err
	}
	res.Seconds = time.Since(start).Seconds()
	c := p.Counters()
	res.Messages, res.Held = int64(c.Messages), c.Held
	var want int64
	for _, r := range s.Ranges {
		want += r.Rows
	}
	if res.Messages != want {
		return res, fmt.Errorf("sources: %d messages for %d rows", res.Messages, want)
	}
	return res, nil
}

// SourcesLatency writes perShard single-row transactions per second to
// every shard for d while two pipelines, one with alignment (max_skew 2s)
// and one without, deliver them to file sinks at the same time; it reports
// each one's commit-to-sink latency.
func SourcesLatency(ctx context.Context, s *Shards, perShard int, d time.Duration) (off, on LatencyResult, err error) {
	dir, err := os.MkdirTemp("", "sluice-bench-sources-lat-")
	if err != nil {
		return off, on, err
	}
	defer os.RemoveAll(dir)
	type run struct {
		sink *latencySink
		p    *pipeline.Pipeline
		done chan error
	}
	pctx, stop := context.WithCancel(ctx)
	defer stop()
	var runs []*run
	for _, align := range []bool{false, true} {
		name := fmt.Sprintf("lat-align-%v", align)
		inner, err := file.New("file", file.Config{Path: filepath.Join(dir, name, "changes.jsonl")}, nil)
		if err != nil {
			return off, on, err
		}
		defer inner.Close()
		srcs, err := shardSources(s, false)
		if err != nil {
			return off, on, err
		}
		for i := range srcs {
			srcs[i].Binlog.ServerID += uint32(100 * len(runs))
		}
		cfg := pipeline.Config{Name: name, Sources: srcs, Sinks: []pipeline.Sink{&latencySink{Sink: inner}},
			Store: &checkpoint.FileStore{Path: filepath.Join(dir, name+".json")}}
		if align {
			cfg.Align.MaxSkew = 2 * time.Second
		}
		r := &run{sink: cfg.Sinks[0].(*latencySink), done: make(chan error, 1)}
		if r.p, err = pipeline.New(cfg); err != nil {
			return off, on, err
		}
		go func() { r.done <- r.p.Run(pctx) }()
		runs = append(runs, r)
	}
	time.Sleep(time.Second) // connected and streaming
	var wg sync.WaitGroup
	written := make([]int, len(s.DBs))
	errs := make([]error, len(s.DBs))
	start := time.Now()
	for i, db := range s.DBs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := db.Conn(ctx)
			if err != nil {
				errs[i] = err
				return
			}
			defer c.Close()
			perTick := max(perShard/100, 1)
			tick := time.NewTicker(10 * time.Millisecond)
			defer tick.Stop()
			for time.Since(start) < d {
				<-tick.C
				for range perTick {
					if _, err := c.Execute("INSERT INTO bench.lat () VALUES ()"); err != nil {
						errs[i] = err
						return
					}
					written[i]++
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	total := 0
	for i, err := range errs {
		if err != nil {
			return off, on, err
		}
		total += written[i]
	}
	deadline := time.Now().Add(20 * time.Second)
	for _, r := range runs {
		for time.Now().Before(deadline) {
			r.sink.mu.Lock()
			n := len(r.sink.samples)
			r.sink.mu.Unlock()
			if n >= total {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	stop()
	out := make([]LatencyResult, len(runs))
	for i, r := range runs {
		if err := <-r.done; err != nil {
			return off, on, err
		}
		r.sink.mu.Lock()
		smp := slices.Clone(r.sink.samples)
		r.sink.mu.Unlock()
		if len(smp) < total {
			return off, on, fmt.Errorf("sources latency: %d of %d rows arrived", len(smp), total)
		}
		slices.Sort(smp)
		out[i] = LatencyResult{Sink: fmt.Sprintf("align %v", i == 1), TxnsPerSec: float64(total) / elapsed.Seconds(), Samples: len(smp),
			P50: smp[len(smp)/2], P99: smp[len(smp)*99/100], Max: smp[len(smp)-1]}
	}
	return out[0], out[1], nil
}

// ReportSources prints the throughput runs and the latency comparison.
func ReportSources(w io.Writer, tp []SourcesResult, off, on LatencyResult) {
	tw := tabwriter.NewWriter(w, 0, 0, 1, ' ', tabwriter.Debug)
	fmt.Fprintln(tw, "| alignment\t messages\t seconds\t msg/s\t held txns\t")
	fmt.Fprintln(tw, "|---\t---\t---\t---\t---\t")
	for _, r := range tp {
		a := "off"
		if r.Align {
			a = "max_skew 2s"
		}
		fmt.Fprintf(tw, "| %s\t %d\t %.2f\t %.0f\t %d\t\n", a, r.Messages, r.Seconds, r.MsgsPerSec(), r.Held)
	}
	tw.Flush()
	if off.Samples == 0 {
		return
	}
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 0, 1, ' ', tabwriter.Debug)
	fmt.Fprintln(tw, "| alignment\t load txn/s\t samples\t p50 ms\t p99 ms\t max ms\t")
	fmt.Fprintln(tw, "|---\t---\t---\t---\t---\t---\t")
	ms := func(d time.Duration) string { return fmt.Sprintf("%.2f", float64(d.Microseconds())/1000) }
	for _, r := range []LatencyResult{off, on} {
		fmt.Fprintf(tw, "| %s\t %.0f\t %d\t %s\t %s\t %s\t\n", r.Sink, r.TxnsPerSec, r.Samples, ms(r.P50), ms(r.P99), ms(r.Max))
	}
	tw.Flush()
	fmt.Fprintf(w, "\nadded p99 latency with alignment: %+.2f ms\n", float64((on.P99-off.P99).Microseconds())/1000)
}
