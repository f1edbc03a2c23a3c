package main

import (
	"cmp"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluice-cdc/sluice/binlog"
	"github.com/sluice-cdc/sluice/checkpoint"
	"github.com/sluice-cdc/sluice/config"
	"github.com/sluice-cdc/sluice/internal/sqlstmt"
	"github.com/sluice-cdc/sluice/join"
	"github.com/sluice-cdc/sluice/pipeline"
	"github.com/sluice-cdc/sluice/sink/file"
	"github.com/sluice-cdc/sluice/snapshot"
)

func runCmd() *cobra.Command {
	var path string
	cmd := &cobra.Command{
		Use:   "run",
		Short: "Run a pipeline: deliver every change of a source to its sinks exactly once",
		Long: `Run reads the source named in the config (snapshot first when its mode asks
for one, then the binlog), delivers every change to the sinks with a sequence
number, and saves checkpoints once the sinks hold them. After any crash it
resumes exactly after the last transaction the sinks hold. See docs/CONFIG.md
and docs/DELIVERY.md.`,
		Example: `  sluice run --config sluice.yaml`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := loadConfig(path)
			if err != nil {
				return err
			}
			setLogger(cfg.Log)
			return runPipeline(cmd.Context(), path, cfg)
		},
	}
	cmd.Flags().StringVarP(&path, "config", "c", "", "the pipeline's YAML file (docs/CONFIG.md)")
	return cmd
}

func setLogger(l config.Log) {
	level := slog.LevelInfo
	switch l.Level {
	case "debug":
		level = slog.LevelDebug
	case "warn":
		level = slog.LevelWarn
	case "error":
		level = slog.LevelError
	}
	opts := &slog.HandlerOptions{Level: level}
	if l.Format == "json" {
		slog.SetDefault(slog.New(slog.NewJSONHandler(os.Stderr, opts)))
		return
	}
	slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, opts)))
}

// buildPipeline turns a config into a pipeline (not started).
func buildPipeline(path string, cfg *config.Config, m *metrics, store checkpoint.Store, schema func(source string) binlog.HistoryStore, epoch func(context.Context, uint64) (uint64, error)) (*pipeline.Pipeline, []pipeline.Sink, error) {
	var srcs []pipeline.SourceConfig
	for i, sc := range cfg.Sources {
		key := "source"
		if len(cfg.Sources) > 1 {
			key = fmt.Sprintf("sources[%d]", i)
		}
		src, err := sourceConfig(sc)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %s.%w", path, key, err)
		}
		if schema != nil {
			src.Schema = schema(src.Name)
		}
		srcs = append(srcs, src)
	}
	built, err := buildSinks(path, cfg)
	if err != nil {
		return nil, nil, err
	}
	var p *pipeline.Pipeline
	sinks, joins, err := buildJoins(cfg, built, func() time.Time { return p.DeliveredWatermark() })
	if err != nil {
		closeSinks(built)
		return nil, nil, err
	}
	m.joins = joins
	pcfg := pipeline.Config{
		Name:    cfg.Pipeline,
		Sources: srcs,
		Align: pipeline.AlignConfig{
			MaxSkew:     cfg.Align.MaxSkew,
			MaxWait:     cfg.Align.MaxWait,
			OnStall:     cfg.Align.OnStall,
			SampleEvery: cfg.Align.SampleEvery,
		},
		Sinks:           sinks,
		Store:           store,
		Epoch:           epoch,
		BatchBytes:      int(cfg.Buffer.BatchBytes),
		BufferBytes:     int(cfg.Buffer.MaxBytes),
		CheckpointEvery: cfg.Checkpoint.Interval,
		Logger:          slog.Default(),
		OnDelivered:     m.delivered,
	}
	progress := newProgressReporter()
	for i := range pcfg.Sources {
		name := pcfg.Sources[i].Name
		pcfg.Sources[i].Snapshot.Progress = func(ps []snapshot.TableProgress) {
			p.SnapshotProgress(name, ps)
			progress.report(p.Status().Snapshot)
		}
	}
	p, err = pipeline.New(pcfg)
	if err != nil {
		closeSinks(sinks)
		return nil, nil, err
	}
	m.p = p
	m.sinks = sinks
	return p, sinks, nil
}

// buildJoins wraps each join's sinks into the join's own sink (named
// join:NAME) and returns the pipeline's sinks: the joins' and the sinks no
// join uses. The joins own their sinks.
func buildJoins(cfg *config.Config, built []pipeline.Sink, watermark func() time.Time) ([]pipeline.Sink, []*join.Sink, error) {
	byName := map[string]pipeline.Sink{}
	for _, s := range built {
		byName[s.Name()] = s
	}
	var out []pipeline.Sink
	for i, sc := range cfg.Sinks {
		if sc.Join == "" {
			out = append(out, built[i])
		}
	}
	var joins []*join.Sink
	for _, jc := range cfg.Joins {
		opts := join.SinkOptions{Out: byName[jc.Sink], Watermark: watermark, Logger: slog.Default().With("join", jc.Name)}
		if jc.Late != "" && jc.Late != join.LateDrop {
			opts.DeadLetter = byName[jc.Late]
		}
		js, err := join.NewSink(jc, opts)
		if err != nil {
			return nil, nil, err
		}
		joins = append(joins, js)
		out = append(out, js)
	}
	return out, joins, nil
}

// sourceConfig turns one source block into the pipeline's source; an
// error names the key ("url: ...").
func sourceConfig(sc config.Source) (pipeline.SourceConfig, error) {
	src, err := binlog.ParseSourceURL(string(sc.URL))
	if err != nil {
		return pipeline.SourceConfig{}, fmt.Errorf("url: %w", err)
	}
	if sc.ServerID != 0 {
		src.ServerID = sc.ServerID
	}
	src.Heartbeat = sc.Heartbeat
	src.OnStatementChange = sc.OnStatementChange
	src.CatchUpWait = sc.CatchUpWait
	tables := strings.Join(sc.Tables, ",")
	if sc.SignalTable != "" && tables != "" {
		sdb, stbl, err := sqlstmt.ParseTableText(sc.SignalTable)
		if err != nil {
			return pipeline.SourceConfig{}, fmt.Errorf("signal_table: %w", err)
		}
		tables += "," + sqlstmt.QuoteName(sdb, stbl) // its name, not a glob
	}
	if src.Tables, err = binlog.ParseFilter(tables); err != nil {
		return pipeline.SourceConfig{}, fmt.Errorf("tables: %w", err)
	}
	startGiven := false
	if sc.Start != "" {
		if err := parseFrom(sc.Start, &src); err != nil {
			return pipeline.SourceConfig{}, fmt.Errorf("start: %w", err)
		}
		startGiven = !src.Start.IsZero()
	}
	return pipeline.SourceConfig{
		Name:       sc.Name,
		Binlog:     src,
		StartGiven: startGiven,
		Snapshot: pipeline.SnapshotConfig{
			Mode:        snapshot.Mode(sc.Snapshot.Mode),
			Method:      sc.Snapshot.Method,
			Parallel:    sc.Snapshot.Parallel,
			ChunkRows:   sc.Snapshot.ChunkRows,
			Where:       sc.Snapshot.Where,
			LockTimeout: sc.Snapshot.LockTimeout,
		},
		SignalTable: sc.SignalTable,
		RowImage:    pipeline.RowImageConfig{Fill: sc.RowImage == "fill", Dir: sc.RowImageDir, Reselect: sc.FillMissing == "reselect"},
	}, nil
}

func closeSinks(sinks []pipeline.Sink) {
	for _, s := range sinks {
		if err := s.Close(); err != nil {
			slog.Warn("closing sink", "sink", s.Name(), "err", err.Error())
		}
	}
}

// buildSinks creates each configured sink.
func buildSinks(path string, cfg *config.Config) ([]pipeline.Sink, error) {
	var out []pipeline.Sink
	for i, sc := range cfg.Sinks {
		s, err := buildSink(path, cfg.Pipeline, i, sc)
		if err != nil {
			closeSinks(out)
			return nil, err
		}
		if ks, ok := s.(interface{ SetSources([]string) }); ok {
			names := make([]string, len(cfg.Sources))
			for j := range cfg.Sources {
				names[j] = cfg.Sources[j].Name
			}
			ks.SetSources(names) // Kafka's heartbeats, one per source
		}
		out = append(out, s)
	}
	if err := checkKafkaTopics(out); err != nil {
		closeSinks(out)
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return out, nil
}

func buildSink(path, pipelineName string, i int, sc config.Sink) (pipeline.Sink, error) {
	if sc.Join != "" {
		// A join numbers its records itself: its sinks recover and fence
		// as a pipeline of their own (Kafka's transactional id, Redis'
		// high-water key, NATS' stream).
		pipelineName += ".join." + sc.Join
	}
	switch sc.Type {
	case "stdout":
		return file.NewStdoutFormat(sc.Name, os.Stdout, sc.Format.Codec()), nil
	case "file":
		s, err := file.New(sc.Name, file.Config{Path: sc.File.Path, MaxBytes: int64(sc.File.MaxBytes), NoSync: sc.File.NoSync, Format: sc.Format.Codec()}, slog.Default())
		if err != nil {
			return nil, fmt.Errorf("%s:%d: sinks[%d]: %w", path, sc.Line, i, err)
		}
		return s, nil
	}
	return buildNetSink(path, pipelineName, i, sc)
}

// runPipeline runs the pipeline with its admin endpoint until ctx ends.
// With an etcd coordinator it first waits, as a follower, until this
// process leads; it then runs under the leadership's epoch, and when the
// leadership is lost it stops writing at once and returns an error (exit
// status 1: a supervisor restarts it as a follower).
func runPipeline(ctx context.Context, path string, cfg *config.Config) error {
	m := newMetrics(cfg.Pipeline)
	var (
		store  checkpoint.Store = &checkpoint.FileStore{Path: cfg.Checkpoint.Path}
		schema                  = func(source string) binlog.HistoryStore {
			return &checkpoint.FileSchemaStore{Path: checkpoint.SchemaPath(cfg.Checkpoint.Path, source)}
		}
		epoch func(context.Context, uint64) (uint64, error)
		lost  <-chan struct{}
	)
	if cfg.Coordinator.Type == "etcd" {
		co, err := newCoordinator(path, cfg)
		if err != nil {
			return err
		}
		defer co.Close()
		slog.Info("waiting for leadership (follower)", "pipeline", cfg.Pipeline, "id", co.ID())
		lead, err := co.Campaign(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		slog.Info("leading the pipeline", "pipeline", cfg.Pipeline, "epoch", lead.Epoch(), "id", co.ID())
		store = co.CheckpointStore(lead)
		schema = func(source string) binlog.HistoryStore { return co.SchemaStore(lead, source) }
		le := lead.Epoch()
		epoch = func(context.Context, uint64) (uint64, error) { return le, nil }
		lost = lead.Lost()
	}
	p, sinks, err := buildPipeline(path, cfg, m, store, schema, epoch)
	if err != nil {
		return err
	}
	defer closeSinks(sinks)
	if cfg.Admin.Addr != "" {
		stop, err := serveAdmin(ctx, cfg.Admin, p, m)
		if err != nil {
			return err
		}
		defer stop()
	}
	rctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	if lost != nil {
		go func() {
			select {
			case <-lost:
				slog.Error("leadership lost: stopped writing; exiting so that a supervisor restarts this process as a follower", "pipeline", cfg.Pipeline)
				cancel(errLeadershipLost)
			case <-rctx.Done():
			}
		}()
	}
	ran, watched := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(watched)
		watchShutdown(ctx, p, ran, shutdownBound)
	}()
	err = p.Run(rctx)
	close(ran)
	<-watched
	if cause := context.Cause(rctx); errors.Is(cause, errLeadershipLost) {
		return cause
	}
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

// requireToken lets reads (GET, HEAD) through and every other request
// only with "Authorization: Bearer TOKEN"; an empty token lets all
// through. The comparison takes the same time whatever the bytes (both
// sides are hashed first, so neither the length is told).
func requireToken(token string, next http.Handler) http.Handler {
	if token == "" {
		return next
	}
	want := sha256.Sum256([]byte(token))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
			sum := sha256.Sum256([]byte(got))
			if subtle.ConstantTimeCompare(sum[:], want[:]) != 1 || !ok {
				slog.Warn("admin command refused: missing or wrong token", "method", r.Method, "path", r.URL.Path, "remote", r.RemoteAddr)
				w.Header().Set("WWW-Authenticate", `Bearer realm="sluice admin"`)
				http.Error(w, "missing or wrong admin token: send Authorization: Bearer <admin.token> (sluice snapshot: --token or $SLUICE_ADMIN_TOKEN)", http.StatusUnauthorized)
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// shutdownBound is how long `sluice run` may take to stop after SIGTERM or
// SIGINT: sources closed (bounded whatever the link does), the last batch
// written and checkpointed. Past it the process exits with status 1 as if
// killed, which the checkpoint and the sinks' recovery make safe.
const shutdownBound = 30 * time.Second

// watchShutdown logs, once ctx ends (a signal), what the pipeline is
// waiting for, then again every 5 s, and ends the process after bound if
// Run has not returned (ran closed) by then.
func watchShutdown(ctx context.Context, p *pipeline.Pipeline, ran <-chan struct{}, bound time.Duration) {
	select {
	case <-ran:
		if ctx.Err() == nil {
			return // stopped by an error, not a signal
		}
	case <-ctx.Done():
	}
	began := time.Now()
	slog.Info("signal received: stopping (closing the sources, writing and checkpointing what was read)", append([]any{"bound", bound.String()}, waitingFor(p.Status())...)...)
	tick := time.NewTicker(5 * time.Second)
	defer tick.Stop()
	deadline := time.NewTimer(bound)
	defer deadline.Stop()
	for {
		select {
		case <-ran:
			slog.Info("stopped", "in", time.Since(began).Round(time.Millisecond).String())
			return
		case <-tick.C:
			slog.Warn("still stopping", append([]any{"for", time.Since(began).Round(time.Second).String()}, waitingFor(p.Status())...)...)
		case <-deadline.C:
			slog.Error("not stopped within the bound: exiting; the restart resumes from the last checkpoint, and the sinks' recovery drops what was written after it", append([]any{"bound", bound.String()}, waitingFor(p.Status())...)...)
			os.Exit(1)
		}
	}
}

// waitingFor describes, as log attributes, what a stopping pipeline waits
// for: each source's state and the sinks whose writes fail.
func waitingFor(st pipeline.Status) []any {
	var out []any
	for _, s := range st.Sources {
		state := "connecting"
		switch {
		case s.Stalled:
			state = "stalled (nothing received for align.max_wait)"
		case s.Streaming:
			state = "streaming"
		case len(s.Snapshot) > 0:
			state = "snapshot"
		}
		out = append(out, "source."+cmp.Or(s.Name, "0"), state+" at "+s.Position.String())
	}
	for name, why := range st.SinkDown {
		out = append(out, "sink."+name, "failing: "+why)
	}
	return append(out, "checkpoint", st.Position.String())
}

var errLeadershipLost = errors.New("leadership lost (etcd unreachable for 2/3 of the lease, or another process leads)")

// serveAdmin starts the admin HTTP endpoint: /metrics, /healthz, /status
// and POST /snapshot?table=db.table[&where=...][&source=name]. With a
// token, every command (a request other than GET or HEAD) needs it.
func serveAdmin(ctx context.Context, cfg config.Admin, p *pipeline.Pipeline, m *metrics) (stop func(), err error) {
	addr := cfg.Addr
	if !cfg.Loopback() && cfg.Token == "" { // config.Parse refuses this too
		return nil, fmt.Errorf("admin.addr %s is not a loopback address: set admin.token, or bind admin.addr to 127.0.0.1", addr)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("admin.addr %s: %w (is another sluice running? pick a free port)", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", m.handler())
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		st := p.Status()
		if !st.Running {
			http.Error(w, "not running", http.StatusServiceUnavailable)
			return
		}
		if len(st.SinkDown) > 0 {
			http.Error(w, fmt.Sprintf("sinks down: %v", st.SinkDown), http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("GET /status", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, statusView(p))
	})
	mux.HandleFunc("POST /snapshot", func(w http.ResponseWriter, r *http.Request) {
		table := r.URL.Query().Get("table")
		db, tbl, err := sqlstmt.ParseTableText(table)
		if err != nil {
			http.Error(w, "want ?table=db.table: "+err.Error(), http.StatusBadRequest)
			return
		}
		rctx, cancel := context.WithTimeout(r.Context(), 30*time.Second)
		defer cancel()
		if err := p.AddTable(rctx, r.URL.Query().Get("source"), db, tbl, r.URL.Query().Get("where")); err != nil {
			http.Error(w, err.Error(), http.StatusUnprocessableEntity)
			return
		}
		fmt.Fprintf(w, "incremental snapshot of %s started\n", table)
	})
	srv := &http.Server{Handler: requireToken(cfg.Token, mux), ReadHeaderTimeout: 5 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			slog.Error("admin endpoint stopped", "err", err.Error())
		}
	}()
	slog.Info("admin endpoint listening", "addr", ln.Addr().String())
	return func() {
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}, nil
}
