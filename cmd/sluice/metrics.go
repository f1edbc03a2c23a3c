package main

import (
	"encoding/json"
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/sluice-cdc/sluice/binlog"
	"github.com/sluice-cdc/sluice/join"
	"github.com/sluice-cdc/sluice/pipeline"
)

// metrics exposes a pipeline's figures to Prometheus. The pipeline keeps
// plain counters and a status; this is the edge that turns them into
// metrics on each scrape.
type metrics struct {
	p        *pipeline.Pipeline
	joins    []*join.Sink
	sinks    []pipeline.Sink
	reg      *prometheus.Registry
	latency  prometheus.Histogram
	pipeName string
}

func newMetrics(name string) *metrics {
	m := &metrics{reg: prometheus.NewRegistry(), pipeName: name}
	m.latency = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:        "sluice_delivery_latency_seconds",
		Help:        "Time from reading a source transaction to its being durable in every sink.",
		ConstLabels: prometheus.Labels{"pipeline": name},
		Buckets:     prometheus.ExponentialBuckets(0.0005, 2, 16),
	})
	m.reg.MustRegister(m.latency, m, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// delivered is the pipeline's OnDelivered hook.
func (m *metrics) delivered(read []time.Time, now time.Time) {
	for _, t := range read {
		m.latency.Observe(now.Sub(t).Seconds())
	}
}

func (m *metrics) handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
}

var (
	descMessages    = prometheus.NewDesc("sluice_messages_total", "Messages durable in every sink.", []string{"pipeline"}, nil)
	descTxns        = prometheus.NewDesc("sluice_transactions_total", "Source transactions delivered.", []string{"pipeline"}, nil)
	descBatches     = prometheus.NewDesc("sluice_batches_total", "Batches written.", []string{"pipeline"}, nil)
	descBytes       = prometheus.NewDesc("sluice_bytes_total", "Encoded bytes written.", []string{"pipeline"}, nil)
	descCheckpoints = prometheus.NewDesc("sluice_checkpoints_total", "Checkpoints saved.", []string{"pipeline"}, nil)
	descBuffered    = prometheus.NewDesc("sluice_buffered_bytes", "Memory of batches read and not yet durable.", []string{"pipeline"}, nil)
	descLastSeq     = prometheus.NewDesc("sluice_last_seq", "Sequence number of the last message durable in every sink.", []string{"pipeline"}, nil)
	descEpoch       = prometheus.NewDesc("sluice_epoch", "Fencing epoch of this run.", []string{"pipeline"}, nil)
	descLag         = prometheus.NewDesc("sluice_source_lag_seconds", "Age of the last delivered transaction's commit time when it was delivered.", []string{"pipeline"}, nil)
	descCommit      = prometheus.NewDesc("sluice_source_commit_time_seconds", "Commit time of the last delivered transaction (Unix seconds).", []string{"pipeline"}, nil)
	descSinkErrors  = prometheus.NewDesc("sluice_sink_errors_total", "Failed writes per sink.", []string{"pipeline", "sink"}, nil)
	descSinkUp      = prometheus.NewDesc("sluice_sink_up", "1 when the sink's last write succeeded.", []string{"pipeline", "sink"}, nil)
	descSnapRows    = prometheus.NewDesc("sluice_snapshot_rows", "Rows read by the snapshot per table.", []string{"pipeline", "table"}, nil)
	descSnapEst     = prometheus.NewDesc("sluice_snapshot_rows_estimated", "The server's estimate of each snapshotted table's rows.", []string{"pipeline", "table"}, nil)
	descSnapDone    = prometheus.NewDesc("sluice_snapshot_table_done", "1 when the table's snapshot is complete.", []string{"pipeline", "table"}, nil)
	descSnapBlocked = prometheus.NewDesc("sluice_snapshot_writers_blocked_seconds", "How long the source's last consistent snapshot held writers back with its lock (MySQL: FLUSH TABLES WITH READ LOCK or LOCK TABLES; 0 when it took none).", []string{"pipeline", "source"}, nil)
	descSrcEvent    = prometheus.NewDesc("sluice_source_event_time_seconds", "Clock-corrected event time up to which the source has been read (Unix seconds).", []string{"pipeline", "source"}, nil)
	descSrcLag      = prometheus.NewDesc("sluice_source_event_lag_seconds", "How far the source's event time is behind sluice's clock.", []string{"pipeline", "source"}, nil)
	descSrcOffset   = prometheus.NewDesc("sluice_source_clock_offset_seconds", "The source server's clock minus sluice's.", []string{"pipeline", "source"}, nil)
	descSrcStalled  = prometheus.NewDesc("sluice_source_stalled", "1 when the source sent nothing, not even a heartbeat, for align.max_wait.", []string{"pipeline", "source"}, nil)
	descSrcQueued   = prometheus.NewDesc("sluice_source_queued_bytes", "Bytes read from the source and waiting to be merged (a source held back by alignment fills it).", []string{"pipeline", "source"}, nil)
	descRowFilled   = prometheus.NewDesc("sluice_row_images_completed_total", "Changes whose partial row images (binlog_row_image MINIMAL or NOBLOB) were completed from the row image store (source.row_image: fill).", []string{"pipeline", "source"}, nil)
	descRowStore    = prometheus.NewDesc("sluice_row_image_store_bytes", "The row image store's size on disk (source.row_image: fill).", []string{"pipeline", "source"}, nil)
	descRowResel    = prometheus.NewDesc("sluice_row_images_reselected_total", "Changes whose partial row images were completed from the source's current row, read by primary key, because the row image store had never seen the row whole (source.fill_missing: reselect); each lists those columns (format sluice \"reselected\", Kafka header sluice-reselected).", []string{"pipeline", "source"}, nil)
	descRowCleared  = prometheus.NewDesc("sluice_row_image_store_cleared_total", "Starts that emptied the row image store because it could not be brought to the resume point (each a warning with the reason).", []string{"pipeline", "source"}, nil)
	descSrcStmt     = prometheus.NewDesc("sluice_statement_changes_skipped_total", "Changes to captured tables the server logged as SQL statements (binlog_format STATEMENT or MIXED), skipped with on_statement_change: skip.", []string{"pipeline", "source"}, nil)
	descSchemaSkip  = prometheus.NewDesc("sluice_schema_changes_not_written_total", "DDL statements a sink did not write (format debezium with include.schema.changes: false; the sink warned at start).", []string{"pipeline", "sink"}, nil)
	descSrcFailover = prometheus.NewDesc("sluice_source_failovers_total", "Times the source turned out to be another server than the saved position's (it failed over); each time it was resumed there by GTID.", []string{"pipeline", "source"}, nil)
	descSrcCatchUp  = prometheus.NewDesc("sluice_source_catch_up_wait_seconds_total", "Time spent waiting for a server the source failed over to to receive transactions already delivered (source.catch_up_wait).", []string{"pipeline", "source"}, nil)
	descSrcDDL      = prometheus.NewDesc("sluice_ddl_unparsed_total", "DDL statements the SQL parser could not read: each was a warning, was delivered by its default database, and made the source forget every cached table definition.", []string{"pipeline", "source"}, nil)
	descSchemaUnk   = prometheus.NewDesc("sluice_schema_history_unknown_total", "DDL statements the schema history could not apply (each a warning): the tables they touch are described by information_schema from then on.", []string{"pipeline", "source"}, nil)
	descTxnEndMiss  = prometheus.NewDesc("sluice_transaction_ends_missing_total", "Transactions whose Debezium END record (provide.transaction.metadata) was not written because their last chunk came without changes (each a warning; not expected).", []string{"pipeline", "source"}, nil)
	descInvalidText = prometheus.NewDesc("sluice_invalid_text_total", "Characters written as '?' because they were not valid in their column's character set or had no Unicode mapping (as CONVERT(col USING utf8mb4) writes them; each column warned about once).", []string{"pipeline", "source", "table", "column"}, nil)
	descSchemaMis   = prometheus.NewDesc("sluice_schema_history_mismatches_total", "Rows events whose binlog column metadata (binlog_row_metadata=FULL) differed from the schema history's definition (each a warning; the binlog's metadata was used).", []string{"pipeline", "source"}, nil)
	descWatermark   = prometheus.NewDesc("sluice_watermark_seconds", "Low watermark: the minimum over live sources of their event time (Unix seconds).", []string{"pipeline"}, nil)
	descSkew        = prometheus.NewDesc("sluice_source_skew_seconds", "Spread of the live sources' event times (the leading minus the slowest).", []string{"pipeline"}, nil)
	descHeld        = prometheus.NewDesc("sluice_align_held_transactions_total", "Transactions that waited for skew alignment.", []string{"pipeline"}, nil)
	descHoldTime    = prometheus.NewDesc("sluice_align_hold_seconds_total", "Time sources spent held back by skew alignment.", []string{"pipeline"}, nil)
	descDelivWM     = prometheus.NewDesc("sluice_watermark_delivered_seconds", "Low watermark of what every sink holds (Unix seconds): operators advance by it.", []string{"pipeline"}, nil)
	descJoinRows    = prometheus.NewDesc("sluice_join_state_rows", "Rows held in a join's state per side.", []string{"pipeline", "join", "side"}, nil)
	descJoinBytes   = prometheus.NewDesc("sluice_join_state_bytes", "Bytes held in a join's state per side.", []string{"pipeline", "join", "side"}, nil)
	descJoinEvicted = prometheus.NewDesc("sluice_join_evicted_rows_total", "Rows evicted from a join's state by the watermark.", []string{"pipeline", "join"}, nil)
	descJoinEvTime  = prometheus.NewDesc("sluice_join_eviction_seconds_total", "Time spent evicting.", []string{"pipeline", "join"}, nil)
	descJoinLate    = prometheus.NewDesc("sluice_join_late_rows_total", "Rows older than the watermark minus the lateness (dropped or dead-lettered).", []string{"pipeline", "join"}, nil)
	descJoinOut     = prometheus.NewDesc("sluice_join_records_total", "Joined records delivered (pairs and unmatched outer rows).", []string{"pipeline", "join"}, nil)
	descJoinWM      = prometheus.NewDesc("sluice_join_watermark_seconds", "The join's committed watermark (Unix seconds).", []string{"pipeline", "join"}, nil)
)

var allDescs = []*prometheus.Desc{descMessages, descTxns, descBatches, descBytes, descCheckpoints, descBuffered, descLastSeq, descEpoch, descLag, descCommit, descSinkErrors, descSinkUp, descSnapRows, descSnapEst, descSnapDone, descSnapBlocked,
	descSrcEvent, descSrcLag, descSrcOffset, descSrcStalled, descSrcQueued, descSrcStmt, descRowFilled, descRowStore, descRowCleared, descRowResel, descSchemaSkip, descSrcDDL, descSchemaUnk, descSchemaMis, descInvalidText, descTxnEndMiss, descSrcFailover, descSrcCatchUp, descWatermark, descSkew, descHeld, descHoldTime,
	descDelivWM, descJoinRows, descJoinBytes, descJoinEvicted, descJoinEvTime, descJoinLate, descJoinOut, descJoinWM}

// Describe implements prometheus.Collector.
func (m *metrics) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range allDescs {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (m *metrics) Collect(ch chan<- prometheus.Metric) {
	if m.p == nil {
		return
	}
	c := m.p.Counters()
	st := m.p.Status()
	n := m.pipeName
	counter := func(d *prometheus.Desc, v float64, l ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, append([]string{n}, l...)...)
	}
	gauge := func(d *prometheus.Desc, v float64, l ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, append([]string{n}, l...)...)
	}
	counter(descMessages, float64(c.Messages))
	counter(descTxns, float64(c.Txns))
	counter(descBatches, float64(c.Batches))
	counter(descBytes, float64(c.Bytes))
	counter(descCheckpoints, float64(c.Checkpoints))
	gauge(descBuffered, float64(c.BufferedBytes))
	gauge(descLastSeq, float64(st.LastSeq))
	gauge(descEpoch, float64(st.Epoch))
	gauge(descLag, st.Lag.Seconds())
	if !st.CommitTime.IsZero() {
		gauge(descCommit, float64(st.CommitTime.UnixNano())/1e9)
	}
	for sink, v := range st.SinkErrors {
		counter(descSinkErrors, float64(v), sink)
	}
	for _, s := range m.sinks {
		if sk, ok := s.(interface{ SchemaChangesNotWritten() uint64 }); ok {
			counter(descSchemaSkip, float64(sk.SchemaChangesNotWritten()), s.Name())
		}
	}
	for _, s := range st.Sinks {
		up := 1.0
		if _, down := st.SinkDown[s]; down {
			up = 0
		}
		gauge(descSinkUp, up, s)
	}
	counter(descHeld, float64(c.Held))
	counter(descHoldTime, c.HoldTime.Seconds())
	if !st.Watermark.IsZero() {
		gauge(descWatermark, float64(st.Watermark.UnixNano())/1e9)
		gauge(descSkew, st.Skew.Seconds())
	}
	if wm := m.p.DeliveredWatermark(); !wm.IsZero() {
		gauge(descDelivWM, float64(wm.UnixNano())/1e9)
	}
	for _, j := range m.joins {
		js := j.Stats()
		name := strings.TrimPrefix(j.Name(), "join:")
		for side, label := range []string{"left", "right"} {
			gauge(descJoinRows, float64(js.Rows[side]), name, label)
			gauge(descJoinBytes, float64(js.Bytes[side]), name, label)
		}
		counter(descJoinEvicted, float64(js.EvictedRows), name)
		counter(descJoinEvTime, js.EvictionTime.Seconds(), name)
		counter(descJoinLate, float64(js.LateRows), name)
		counter(descJoinOut, float64(js.Outputs), name)
		if !js.Watermark.IsZero() {
			gauge(descJoinWM, float64(js.Watermark.UnixNano())/1e9, name)
		}
	}
	for _, s := range st.Sources {
		if !s.EventTime.IsZero() {
			gauge(descSrcEvent, float64(s.EventTime.UnixNano())/1e9, s.Name)
			gauge(descSrcLag, s.Lag.Seconds(), s.Name)
		}
		gauge(descSrcOffset, s.ClockOffset.Seconds(), s.Name)
		stalled := 0.0
		if s.Stalled {
			stalled = 1
		}
		gauge(descSrcStalled, stalled, s.Name)
		gauge(descSrcQueued, float64(s.Queued), s.Name)
		counter(descSrcStmt, float64(s.StatementChanges), s.Name)
		counter(descRowFilled, float64(s.RowImagesCompleted), s.Name)
		gauge(descRowStore, float64(s.RowImageStoreBytes), s.Name)
		counter(descRowCleared, float64(s.RowImageStoreCleared), s.Name)
		counter(descRowResel, float64(s.RowImagesReselected), s.Name)
		counter(descSrcDDL, float64(s.UnparsedDDL), s.Name)
		counter(descSchemaUnk, float64(s.SchemaUnknown), s.Name)
		counter(descSchemaMis, float64(s.SchemaMismatches), s.Name)
		counter(descTxnEndMiss, float64(s.TxnEndsMissing), s.Name)
		for _, tc := range s.InvalidText {
			counter(descInvalidText, float64(tc.Characters), s.Name, tc.DB+"."+tc.Table, tc.Column)
		}
		counter(descSrcFailover, float64(s.Failovers), s.Name)
		counter(descSrcCatchUp, s.CatchUpWait.Seconds(), s.Name)
		gauge(descSnapBlocked, s.SnapshotBlocked.Seconds(), s.Name)
	}
	for _, t := range st.Snapshot {
		gauge(descSnapRows, float64(t.Rows), t.Table)
		gauge(descSnapEst, float64(t.Estimated), t.Table)
		done := 0.0
		if t.Done {
			done = 1
		}
		gauge(descSnapDone, done, t.Table)
	}
}

// statusView is the JSON of GET /status.
func statusView(p *pipeline.Pipeline) map[string]any {
	st := p.Status()
	c := p.Counters()
	return map[string]any{
		"running": st.Running, "started": st.Started, "epoch": st.Epoch,
		"position": st.Position, "last_seq": st.LastSeq,
		"checkpoint_version": st.CheckpointVersion, "checkpoint_at": st.CheckpointAt,
		"commit_time": st.CommitTime, "lag_seconds": st.Lag.Seconds(),
		"sinks": st.Sinks, "sink_errors": st.SinkErrors, "sinks_down": st.SinkDown,
		"snapshot": st.Snapshot, "counters": c,
		"sources": sourcesView(st.Sources), "watermark": st.Watermark, "skew_seconds": st.Skew.Seconds(),
	}
}

func sourcesView(ss []pipeline.SourceStatus) []map[string]any {
	out := make([]map[string]any, len(ss))
	for i, s := range ss {
		out[i] = map[string]any{
			"name": s.Name, "position": s.Position, "event_time": s.EventTime, "lag_seconds": s.Lag.Seconds(),
			"clock_offset_seconds": s.ClockOffset.Seconds(), "clock_rtt_seconds": s.ClockRTT.Seconds(),
			"streaming": s.Streaming, "stalled": s.Stalled, "queued_bytes": s.Queued,
			"snapshot_writers_blocked_seconds": s.SnapshotBlocked.Seconds(),
			"invalid_text":                     invalidTextView(s.InvalidText),
		}
	}
	return out
}

// invalidTextView is a source's sluice_invalid_text_total: "db.table.column"
// to the characters written as '?'.
func invalidTextView(tc []binlog.TextCount) map[string]int64 {
	out := make(map[string]int64, len(tc))
	for _, c := range tc {
		out[c.DB+"."+c.Table+"."+c.Column] = c.Characters
	}
	return out
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}
