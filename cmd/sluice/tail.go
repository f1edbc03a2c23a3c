package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluice-cdc/sluice/binlog"
	"github.com/sluice-cdc/sluice/checkpoint"
	"github.com/sluice-cdc/sluice/codec"
	"github.com/sluice-cdc/sluice/internal/sqlstmt"
	"github.com/sluice-cdc/sluice/pipeline"
	"github.com/sluice-cdc/sluice/position"
)

type outputOpts struct {
	format  string
	schemas bool
	name    string
	// keys puts each change's record key before its value (key, tab,
	// value), as a Kafka sink would send them.
	keys bool
	// options are --format-option KEY=VALUE: format debezium's options
	// by the names of a format block's keys.
	options []string
}

// formatOptions are the keys --format-option takes: the options of a
// format block (docs/CONFIG.md) that apply to one printed stream.
var formatOptions = []string{"decimal.handling.mode", "time.precision.mode", "bigint.unsigned.handling.mode", "binary.handling.mode", "replace.null.with.default", "provide.transaction.metadata", "skipped.operations"}

func (o *outputOpts) register(cmd *cobra.Command) {
	cmd.Flags().StringVar(&o.format, "format", codec.FormatSluice, "output format, one JSON object per change: sluice (sluice's exact values, docs/FORMAT.md), debezium (what Debezium's MySQL connector writes, in its default modes), or none (decode only, print the summary)")
	cmd.Flags().BoolVar(&o.schemas, "schemas", false, "with --format debezium: write the schema half ({\"schema\":...,\"payload\":...}, as JsonConverter's schemas.enable=true)")
	cmd.Flags().StringVar(&o.name, "name", "sluice", "source name written in each message's source.name")
	cmd.Flags().BoolVar(&o.keys, "keys", false, "start each line with the change's record key as a Kafka sink sends it (null for none) and a tab, then the value")
	cmd.Flags().StringArrayVar(&o.options, "format-option", nil, "with --format debezium: one of its options as KEY=VALUE, as in a format block ("+strings.Join(formatOptions, ", ")+"); repeat for several")
}

func (o *outputOpts) validate() error {
	if o.format == "none" {
		if o.schemas {
			return errors.New("--schemas is for --format debezium; --format none prints no changes")
		}
		if o.keys {
			return errors.New("--keys: --format none prints no changes")
		}
		return nil
	}
	if o.format != codec.FormatSluice && o.format != codec.FormatDebezium {
		return fmt.Errorf("--format %q: want sluice, debezium or none", o.format)
	}
	if len(o.options) > 0 && o.format != codec.FormatDebezium {
		return fmt.Errorf("--format-option is for --format debezium (format %s has no options)", o.format)
	}
	f, err := o.formatWithOptions()
	if err != nil {
		return err
	}
	if err := f.Validate(); err != nil {
		if o.schemas && o.format == codec.FormatSluice {
			return errors.New("--schemas is for --format debezium (format sluice has no schema half)")
		}
		return fmt.Errorf("--format %s: %w", o.format, err)
	}
	return nil
}

// codecFormat is the encoder's format for the flags (none encodes
// nothing); validate has checked them.
func (o *outputOpts) codecFormat() codec.Format {
	f, _ := o.formatWithOptions()
	return f
}

func (o *outputOpts) formatWithOptions() (codec.Format, error) {
	if o.format == "none" {
		return codec.Format{Name: codec.FormatSluice}, nil
	}
	f := codec.Format{Name: o.format, Schemas: o.schemas}
	for _, kv := range o.options {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return f, fmt.Errorf("--format-option %q: want KEY=VALUE, e.g. decimal.handling.mode=string", kv)
		}
		switch k {
		case "decimal.handling.mode":
			f.DecimalHandling = v
		case "time.precision.mode":
			f.TimePrecision = v
		case "bigint.unsigned.handling.mode":
			f.BigintUnsigned = v
		case "binary.handling.mode":
			f.BinaryHandling = v
		case "replace.null.with.default":
			f.ReplaceNullWithDefault = v
		case "skipped.operations":
			f.SkippedOperations = v
		case "provide.transaction.metadata":
			b, err := strconv.ParseBool(v)
			if err != nil {
				return f, fmt.Errorf("--format-option %s=%s: want true or false", k, v)
			}
			f.TransactionMetadata = b
		default:
			return f, fmt.Errorf("--format-option %q: unknown option %q; the options are %s", kv, k, strings.Join(formatOptions, ", "))
		}
	}
	return f, nil
}

// printer writes changes and keeps the summary figures.
type printer struct {
	w *bufio.Writer
	// out0 is what w writes to: a run of lines too large for w's free
	// space is written to it directly.
	out0  io.Writer
	enc   *codec.Encoder
	none  bool
	keys  bool
	last  int // bytes of the last event written
	rows  int64
	txns  int64
	bytes int64
	// out is the bytes of the changes printed.
	out   int64
	start time.Time
	// first is when the first chunk with changes arrived and firstRows its
	// rows: the steady rate excludes connecting and the first chunk.
	first     time.Time
	firstRows int64
	// snapMethod and snapBlocked are the consistent snapshot's method and
	// the time its lock held writers back (snapshot.Result), once one ran.
	snapMethod  string
	snapBlocked time.Duration
}

// appendValue appends the line of t's change i.
func (p *printer) appendValue(b []byte, t *binlog.Txn, i int) []byte {
	return p.enc.AppendSnapshotChange(b, t, &t.Changes[i], codec.SnapshotOf(t, i))
}

func newPrinter(w io.Writer, o outputOpts) *printer {
	return &printer{
		w:     bufio.NewWriterSize(w, 256<<10),
		out0:  w,
		enc:   codec.NewEncoder(codec.Source{Name: o.name}, codec.WithFormat(o.codecFormat())),
		none:  o.format == "none",
		keys:  o.keys,
		start: time.Now(),
	}
}

// txn prints one transaction chunk; it flushes at the end of a transaction.
func (p *printer) txn(t *binlog.Txn) error {
	if !p.none {
		for i := range t.Changes {
			ch := &t.Changes[i]
			// Encoded straight into the writer's free space (Write then
			// copies nothing), flushed first when the last event's size
			// might not fit.
			if p.w.Available() < 2*p.last+4096 && p.w.Buffered() > 0 {
				if err := p.w.Flush(); err != nil {
					return fmt.Errorf("writing output: %w", err)
				}
			}
			b := p.w.AvailableBuffer()
			var ddl []byte
			if p.keys && ch.Op == binlog.OpDDL {
				// The value first: format debezium names a schema-change
				// key after the connector of the value's transaction's
				// server.
				ddl = p.appendValue(nil, t, i)
			}
			if p.keys {
				n := len(b)
				if b = p.enc.AppendKey(b, ch); len(b) == n {
					b = append(b, "null"...)
				}
				b = append(b, '\t')
			}
			if ddl != nil {
				b = append(b, ddl...)
			} else {
				b = p.appendValue(b, t, i)
			}
			if _, err := p.w.Write(b); err != nil {
				return fmt.Errorf("writing output: %w", err)
			}
			p.last = len(b)
			p.out += int64(len(b))
		}
	}
	p.count(t)
	if t.Last {
		if err := p.w.Flush(); err != nil {
			return fmt.Errorf("writing output: %w", err)
		}
	}
	return nil
}

// count adds a chunk, once printed, to the summary's figures.
func (p *printer) count(t *binlog.Txn) {
	p.bytes += int64(t.Bytes)
	rows := int64(0)
	for i := range t.Changes {
		if t.Changes[i].Op != binlog.OpDDL {
			rows++
		}
	}
	p.rows += rows
	if p.first.IsZero() && rows > 0 {
		// Rows, as p.rows counts them (DDL is not a row): the steady rate
		// is (p.rows-p.firstRows) over the time after this chunk.
		p.first, p.firstRows = time.Now(), rows
	}
	if t.Last && !t.Snapshot && (len(t.Changes) > 0 || t.Chunk > 0) {
		p.txns++
	}
}

// summary is the one-line report: totals, wall time from start, and the
// steady rate (rows after the first chunk over the time after it).
func (p *printer) summary() string { return p.summaryAt(time.Now()) }

// summaryAt is the summary as of now. No rate is negative or not a
// number: a rate over no time, or over a clock that went back, is 0.
func (p *printer) summaryAt(now time.Time) string {
	secs := max(now.Sub(p.start).Seconds(), 0)
	steady, steadySecs := 0.0, 0.0
	if d := now.Sub(p.first).Seconds(); !p.first.IsZero() && d > 0 {
		steady, steadySecs = rate(p.rows-p.firstRows, d), d
	}
	s := fmt.Sprintf("rows=%d txns=%d bytes=%d seconds=%.3f rows_per_sec=%.0f steady_rows_per_sec=%.0f steady_seconds=%.3f first_rows=%d out_bytes=%d",
		p.rows, p.txns, p.bytes, secs, rate(p.rows, secs), steady, steadySecs, p.firstRows, p.out)
	if p.snapMethod != "" {
		s += fmt.Sprintf(" snapshot_method=%s writers_blocked_seconds=%.6f", p.snapMethod, p.snapBlocked.Seconds())
	}
	return s
}

// rate is n per secs; 0 when either is not positive.
func rate(n int64, secs float64) float64 {
	if n <= 0 || !(secs > 0) {
		return 0
	}
	return float64(n) / secs
}

func tailCmd() *cobra.Command {
	var (
		source, tables, from, to, ckpt string
		signal                         string
		out                            outputOpts
		onStatement                    string
		snap                           snapshotOpts
	)
	cmd := &cobra.Command{
		Use:   "tail",
		Short: "Stream row changes from a server's binlog to stdout as JSON lines",
		Example: `  sluice tail --source mysql://repl:secret@127.0.0.1:3306 --tables 'shop.*'
  sluice tail --source mysql://repl:secret@db:3306 --from mysql-bin.000042:4 --to mysql-bin.000043:4 --format none
  sluice tail --source mysql://repl:secret@db:3306 --checkpoint tail.ckpt`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := out.validate(); err != nil {
				return err
			}
			if source == "" {
				return errors.New("--source is required, e.g. --source mysql://USER:PASSWORD@127.0.0.1:3306")
			}
			cfg, err := binlog.ParseSourceURL(source)
			if err != nil {
				return err
			}
			if err := binlog.CheckOnStatementChange(onStatement); err != nil {
				return fmt.Errorf("--on-statement-change: %w", err)
			}
			cfg.OnStatementChange = onStatement
			if signal != "" {
				sdb, stbl, err := sqlstmt.ParseTableText(signal)
				if err != nil {
					return fmt.Errorf("--signal-table: %w", err)
				}
				if tables != "" {
					tables += "," + sqlstmt.QuoteName(sdb, stbl) // the signal table is always read (its name, not a glob)
				}
			}
			if cfg.Tables, err = binlog.ParseFilter(tables); err != nil {
				return err
			}
			if err := parseFrom(from, &cfg); err != nil {
				return err
			}
			if to != "" {
				if cfg.Stop, err = position.ParseFilePos(to); err != nil {
					return fmt.Errorf("--to: %w", err)
				}
			}
			sc, err := snap.config()
			if err != nil {
				return err
			}
			var store checkpoint.Store = &memStore{}
			if ckpt != "" {
				fs := &tailStore{checkpoint.FileStore{Path: ckpt}}
				cp, err := fs.Load(cmd.Context())
				if err != nil {
					return err
				}
				if p, ok := cp.Sources[tailSource]; ok && !p.IsZero() {
					slog.Info("resuming from checkpoint", "file", ckpt, "position", p.String())
				}
				store = fs
			}
			pr := newPrinter(os.Stdout, out)
			sink := &tailSink{p: pr, format: out.codecFormat(), name: out.name}
			progress := newProgressReporter()
			sc.Progress, sc.ProgressEvery = progress.report, progress.every()
			p, err := pipeline.New(pipeline.Config{
				Name: tailSource,
				Source: pipeline.SourceConfig{
					Name:   tailSource,
					Binlog: cfg,
					// A start position given by --from counts as a saved
					// position (as a checkpoint's does): snapshot mode
					// initial then streams from it.
					StartGiven:  !cfg.Start.IsZero() || cmd.Flags().Changed("from"),
					Snapshot:    sc,
					SignalTable: signal,
					Standalone:  true,
				},
				Sinks:           []pipeline.Sink{sink},
				Store:           store,
				BatchBytes:      tailBatchBytes,
				BufferBytes:     tailBufferBytes,
				CheckpointEvery: tailCheckpointEvery,
				// One source: nothing to align, and an idle one is not
				// "stalled".
				Align:  pipeline.AlignConfig{MaxWait: math.MaxInt64},
				Logger: slog.Default(),
			})
			if err != nil {
				return err
			}
			err = p.Run(cmd.Context())
			if sink.err != nil {
				err = sink.err
			}
			st := p.Status().Sources[0]
			pr.snapMethod, pr.snapBlocked = st.SnapshotMethod, st.SnapshotBlocked
			if err == nil && cmd.Context().Err() != nil && !st.Streaming {
				// Interrupted before the stream began (in the initial
				// snapshot): exit 130, as an interrupted command does and
				// as tail did before it ran the pipeline. The checkpoint
				// holds the snapshot's progress.
				err = cmd.Context().Err()
			}
			if cfg.Stop.File != "" || out.format == "none" || err == nil {
				fmt.Fprintln(os.Stderr, pr.summary())
			}
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&source, "source", "", "server to read: mysql://USER:PASSWORD@HOST:PORT[?tls=true&server_id=N]")
	f.StringVar(&tables, "tables", "", "tables to follow, comma-separated db.table globs (default: every user table)")
	f.StringVar(&from, "from", "current", "where to start: current, earliest, FILE:POS, or gtid:SET")
	f.StringVar(&to, "to", "", "stop after the transaction reaching FILE:POS and print a summary")
	f.StringVar(&onStatement, "on-statement-change", binlog.StatementStop, onStatementHelp)
	f.StringVar(&ckpt, "checkpoint", "", "file to save the position of what was printed in (within 0.1 s of printing it), and to resume from")
	f.StringVar(&signal, "signal-table", "", "db.table whose inserted rows (id, type='snapshot', data='db.t1,db.t2') start an incremental snapshot of those tables while streaming; on MySQL without GTIDs the watermark method writes its watermark rows (type='watermark') there")
	out.register(cmd)
	snap.register(cmd)
	return cmd
}

func parseFrom(from string, cfg *binlog.Config) error {
	switch {
	case from == binlog.StartCurrent || from == binlog.StartEarliest:
		cfg.StartAt = from
	case strings.HasPrefix(from, "gtid:"):
		set := strings.TrimPrefix(from, "gtid:")
		g, err := position.ParseGTIDSet("", set)
		if err != nil {
			return fmt.Errorf("--from: %w", err)
		}
		cfg.Start = position.Position{GTIDs: g.String(), Flavor: g.Flavor}
	default:
		p, err := position.ParseFilePos(from)
		if err != nil {
			return fmt.Errorf("--from %q: want current, earliest, FILE:POS or gtid:SET", from)
		}
		cfg.Start = p
	}
	return nil
}

const onStatementHelp = "what a change to a selected table logged as an SQL statement (binlog_format STATEMENT or MIXED) does: stop (exit with an error naming it) or skip (warn and go on without its rows)"
