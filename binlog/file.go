package binlog

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"

	"github.com/go-mysql-org/go-mysql/replication"

	"github.com/sluice-cdc/sluice/position"
)

// FileConfig configures ReadFiles.
type FileConfig struct {
	// Tables selects tables; nil selects all user tables.
	Tables *Filter
	// Schema provides table definitions for files written without column
	// metadata (binlog_row_metadata=MINIMAL); nil names columns @1, @2...
	Schema SchemaSource
	// Flavor is the GTID flavour; it is detected from the events when empty.
	Flavor position.Flavor
	// ChunkBytes bounds one Txn chunk, as in Config.
	ChunkBytes int
	Logger     *slog.Logger
}

// ReadFiles decodes binlog files from disk, in the given order, the same
// way the Reader decodes a live stream, calling fn for every transaction.
func ReadFiles(ctx context.Context, files []string, cfg FileConfig, fn func(*Txn) error) error {
	rc := Config{Addr: "file", User: "file", Tables: cfg.Tables, ChunkBytes: cfg.ChunkBytes, Logger: cfg.Logger, ServerID: 1}
	rc.setDefaults()
	r := &Reader{cfg: rc, ctx: ctx, flavor: cfg.Flavor, schemas: newSchemaCache(cfg.Schema)}
	r.emit = fn
	for _, name := range files {
		if err := ctx.Err(); err != nil {
			return err
		}
		r.file = filepath.Base(name)
		r.resume = position.Position{File: r.file, Offset: 4, Flavor: r.flavor}
		r.asm = assembly{}
		p := replication.NewBinlogParser()
		p.SetVerifyChecksum(true)
		p.SetRowsEventDecodeFunc(stashRows)
		p.SetFlavor(string(r.flavor))
		h := &eventHandler{r: r}
		err := p.ParseFile(name, 0, func(ev *replication.BinlogEvent) error {
			if err := ctx.Err(); err != nil {
				return err
			}
			if r.flavor == "" {
				switch ev.Event.(type) {
				case *replication.MariadbGTIDEvent, *replication.MariadbGTIDListEvent, *replication.MariadbBinlogCheckPointEvent:
					r.flavor = position.MariaDB
				case *replication.GTIDEvent, *replication.PreviousGTIDsEvent:
					r.flavor = position.MySQL
				}
				r.schemas.mariaDB = r.flavor == position.MariaDB
			}
			if _, ok := ev.Event.(*replication.RotateEvent); ok {
				return nil // the next file is given by the caller
			}
			return r.handle(ev, h)
		})
		if err != nil {
			if errors.Is(err, context.Canceled) {
				return err
			}
			if h.err != nil {
				return h.err
			}
			return fmt.Errorf("%w: %s after %s: %v", ErrCorrupt, name, r.resume, err)
		}
		if r.asm.open {
			return fmt.Errorf("%w: %s ends inside a transaction that began at %s (the file is truncated, or the transaction continues in a file not given)", ErrCorrupt, name, r.asm.begin)
		}
	}
	return nil
}
