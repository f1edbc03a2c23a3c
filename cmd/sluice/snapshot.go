package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluice-cdc/sluice/binlog"
	"github.com/sluice-cdc/sluice/checkpoint"
	"github.com/sluice-cdc/sluice/position"
	"github.com/sluice-cdc/sluice/snapshot"
)

type snapshotOpts struct {
	mode   string
	method string
	// deferred are the tables the snapshot left to be read while streaming.
	deferred    []snapshot.Deferred
	parallel    int
	chunkRows   int
	lockTimeout time.Duration
	where       []string
	// signalTable is --signal-table, where the watermark method writes on
	// a MySQL server without GTIDs.
	signalTable string
}

func (o *snapshotOpts) register(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&o.mode, "snapshot", "initial", "consistent initial load: initial (when there is no saved or given position), never, when_needed (also when the saved position was purged), always, only (snapshot and exit)")
	f.StringVar(&o.method, "snapshot-method", "consistent", "consistent: read the tables at one point, then stream; watermark: read them chunk by chunk while streaming (no long transaction; tables of engines without transactions, such as MyISAM and Aria, are always read this way)")
	f.IntVar(&o.parallel, "snapshot-parallel", 2, "connections reading the snapshot at once (on MariaDB more than one needs the RELOAD privilege)")
	f.DurationVar(&o.lockTimeout, "snapshot-lock-timeout", 10*time.Second, "MySQL: the longest a consistent snapshot waits for the lock its connections start under (FLUSH TABLES WITH READ LOCK, or LOCK TABLES ... READ without RELOAD), which holds writers back while it waits")
	f.IntVar(&o.chunkRows, "snapshot-chunk", 16384, "rows per delivered chunk (and per SELECT when reading while streaming)")
	f.StringArrayVar(&o.where, "where", nil, "snapshot only the rows of a table matching a condition: 'db.table=SQL condition' (repeatable)")
}

// run takes the snapshot when the mode asks for one, printing its rows
// and moving cfg.Start to the snapshot's position. done reports that the
// command should stop (mode only).
func (o *snapshotOpts) run(ctx context.Context, cfg *binlog.Config, saved bool, pr *printer, store *checkpoint.FileStore, cp *checkpoint.Checkpoint) (done bool, err error) {
	mode, err := snapshot.ParseMode(o.mode)
	if err != nil {
		return false, err
	}
	purged := false
	if saved && cfg.Start.File != "" && (mode == snapshot.ModeWhenNeeded || mode == snapshot.ModeInitial) {
		var oldest string
		if purged, oldest, err = binlog.PositionPurged(ctx, *cfg, cfg.Start); err != nil {
			return false, err
		}
		if purged {
			slog.Warn("the saved position is no longer on the server", "position", cfg.Start.String(), "oldest", oldest)
		}
	}
	need, err := mode.Needed(saved, purged)
	if err != nil || !need {
		return false, err
	}
	where := map[string]string{}
	for _, w := range o.where {
		table, cond, ok := strings.Cut(w, "=")
		if !ok || !strings.Contains(table, ".") || strings.TrimSpace(cond) == "" {
			return false, fmt.Errorf("--where %q: want 'db.table=SQL condition'", w)
		}
		where[strings.TrimSpace(table)] = cond
	}
	progress := newProgressReporter()
	res, err := snapshot.Run(ctx, snapshot.Config{
		Source:        *cfg,
		Tables:        cfg.Tables,
		Where:         where,
		Parallel:      o.parallel,
		Method:        o.method,
		ChunkRows:     o.chunkRows,
		LockTimeout:   o.lockTimeout,
		SignalTable:   o.signalTable,
		Logger:        slog.Default(),
		Progress:      progress.report,
		ProgressEvery: progress.every(),
		Save: func(st snapshot.State) error {
			if store == nil {
				return nil
			}
			return saveCheckpoint(ctx, store, cp, st.Position, &st)
		},
	}, func(txn *binlog.Txn) error {
		err := pr.txn(txn)
		txn.Release()
		return err
	})
	if err != nil {
		return false, err
	}
	slog.Info("snapshot done; streaming continues from its position", "rows", res.Rows, "tables", res.Tables, "method", res.Method, "position", res.Position.String())
	pr.snapMethod, pr.snapBlocked = res.Method, res.Blocked
	if store != nil {
		if err := saveCheckpoint(ctx, store, cp, res.Position, nil); err != nil {
			return false, err
		}
	}
	o.deferred = res.Deferred
	if mode == snapshot.ModeOnly && len(res.Deferred) == 0 {
		return true, nil
	}
	cfg.Start = res.Position
	return false, nil
}

// saveCheckpoint records the stream position and, while a snapshot is
// unfinished, what it has left to read.
func saveCheckpoint(ctx context.Context, store *checkpoint.FileStore, cp *checkpoint.Checkpoint, pos position.Position, st *snapshot.State) error {
	if cp.Sources == nil {
		cp.Sources = map[string]position.Position{}
	}
	cp.Sources[tailSource] = pos
	cp.Snapshot = nil
	if st != nil {
		raw, err := json.Marshal(st)
		if err != nil {
			return err
		}
		cp.Snapshot = raw
	}
	cp.SavedAt = time.Time{}
	v, err := store.Save(ctx, *cp, cp.Version)
	if err != nil {
		return err
	}
	cp.Version = v
	return nil
}
