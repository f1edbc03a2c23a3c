package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluice-cdc/sluice/internal/sqlstmt"
	"github.com/sluice-cdc/sluice/pipeline"
	"github.com/sluice-cdc/sluice/snapshot"
)

type snapshotOpts struct {
	mode        string
	method      string
	parallel    int
	chunkRows   int
	lockTimeout time.Duration
	where       []string
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

// config is the pipeline's snapshot configuration for the flags.
func (o *snapshotOpts) config() (pipeline.SnapshotConfig, error) {
	mode, err := snapshot.ParseMode(o.mode)
	if err != nil {
		return pipeline.SnapshotConfig{}, err
	}
	where := map[string]string{}
	for _, w := range o.where {
		// The first '=' outside backticks ends the table: a name with
		// one is written in backticks.
		i, quoted := 0, false
		for ; i < len(w) && (quoted || w[i] != '='); i++ {
			if w[i] == '`' {
				quoted = !quoted
			}
		}
		if i == len(w) || strings.TrimSpace(w[i+1:]) == "" {
			return pipeline.SnapshotConfig{}, fmt.Errorf("--where %q: want 'db.table=SQL condition'", w)
		}
		db, table, err := sqlstmt.ParseTableText(w[:i])
		if err != nil {
			return pipeline.SnapshotConfig{}, fmt.Errorf("--where %q: %w", w, err)
		}
		where[sqlstmt.TableText(db, table)] = w[i+1:]
	}
	return pipeline.SnapshotConfig{
		Mode:        mode,
		Method:      o.method,
		Parallel:    o.parallel,
		ChunkRows:   o.chunkRows,
		Where:       where,
		LockTimeout: o.lockTimeout,
	}, nil
}
