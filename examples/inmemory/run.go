package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/sluice-cdc/sluice/binlog"
	"github.com/sluice-cdc/sluice/position"
	"github.com/sluice-cdc/sluice/snapshot"
)

// Config says where the tables are.
type Config struct {
	// Source is the server: Addr, User, Password, TLS and ServerID are used.
	Source binlog.Config
	// DB is the database holding campaigns and banners.
	DB string
	// ChunkBytes bounds the memory of one chunk of a large transaction
	// (0: the reader's default, 1 MiB).
	ChunkBytes int
	// LockTimeout bounds how long a load of a MySQL server waits for the
	// snapshot's lock, holding writers back meanwhile, before it gives up
	// and tries again (0: the snapshot's default, 10s; see
	// snapshot.Config.LockTimeout). MariaDB's snapshot takes no lock.
	LockTimeout time.Duration
	// Logger receives progress and reconnection messages (default slog.Default()).
	Logger *slog.Logger
}

// idlePoll is how often, when no transaction arrives, the store's position
// is moved up to what the reader has seen (transactions of other tables,
// heartbeats), so that it tells how current the copy is.
const idlePoll = 250 * time.Millisecond

// Run keeps store a copy of the tables until ctx ends (then it returns
// nil) or an error stops it: it loads both tables with a consistent
// snapshot, then applies the binlog from exactly the snapshot's position.
// ready, if not nil, is called once, when the first load is published.
// A DDL statement on the tables makes it load them again (ErrReload). On
// MySQL the snapshot takes a lock for a moment; when it cannot have it in
// time (snapshot.ErrLockTimeout) the load is tried again, a second later
// and then less often.
func Run(ctx context.Context, cfg Config, store *Store, ready func()) error {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	tables, err := binlog.ParseFilter(cfg.DB + ".campaigns," + cfg.DB + ".banners")
	if err != nil {
		return err
	}
	wait := time.Second
	for {
		pos, err := load(ctx, cfg, tables, store)
		if errors.Is(err, snapshot.ErrLockTimeout) && ctx.Err() == nil {
			// MySQL: the snapshot's lock could not be had in time
			// (writers waiting for each other's row locks held it up);
			// nothing was loaded, so try again a little later.
			cfg.Logger.Warn("the snapshot could not take its lock; trying again", "in", wait.String(), "err", err.Error())
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(wait):
			}
			wait = min(2*wait, 30*time.Second)
			continue
		}
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		wait = time.Second
		if ready != nil {
			ready()
			ready = nil
		}
		err = stream(ctx, cfg, tables, store, pos)
		switch {
		case ctx.Err() != nil:
			return nil
		case errors.Is(err, ErrReload):
			cfg.Logger.Info("reloading the tables", "reason", err.Error())
		default:
			return err
		}
	}
}

// load reads both tables at one consistent point into a new Load and
// publishes it, returning the point's binlog position.
func load(ctx context.Context, cfg Config, tables *binlog.Filter, store *Store) (position.Position, error) {
	l := store.NewLoad()
	res, err := snapshot.Run(ctx, snapshot.Config{Source: cfg.Source, Tables: tables, LockTimeout: cfg.LockTimeout, Logger: cfg.Logger},
		func(txn *binlog.Txn) error {
			err := l.Add(txn)
			txn.Release()
			return err
		})
	if err != nil {
		return position.Position{}, fmt.Errorf("loading %s: %w", tables, err)
	}
	l.Publish(res.Position)
	return res.Position, nil
}

// stream applies the binlog from pos until ctx ends or an error.
func stream(ctx context.Context, cfg Config, tables *binlog.Filter, store *Store, pos position.Position) error {
	rc := cfg.Source
	rc.Tables = tables
	rc.Start, rc.StartAt, rc.Stop = pos, "", position.Position{}
	rc.ChunkBytes = cfg.ChunkBytes
	rc.Logger = cfg.Logger
	r, err := binlog.NewReader(rc)
	if err != nil {
		return err
	}
	defer r.Close()
	for {
		wait, cancel := context.WithTimeout(ctx, idlePoll)
		txn, err := r.Next(wait)
		cancel()
		if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
			// Nothing for a while. Every transaction up to Delivered has
			// been handed over (read it first: it moves after the
			// handover) and, with none waiting, applied by this loop.
			if d := r.Delivered(); r.Pending() == 0 {
				store.Advance(d)
			}
			continue
		}
		if err != nil {
			return err
		}
		err = store.Apply(txn)
		txn.Release()
		if err != nil {
			return err
		}
	}
}
