package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluice-cdc/sluice/checkpoint"
	"github.com/sluice-cdc/sluice/config"
	"github.com/sluice-cdc/sluice/coord"
)

// loadConfig loads the --config file of run, status and schema.
func loadConfig(path string) (*config.Config, error) {
	if path == "" {
		return nil, config.ErrNoConfig
	}
	return config.Load(path)
}

// statusCmd prints what a pipeline's checkpoint, coordinator and running
// process say about it.
func statusCmd() *cobra.Command {
	var path string
	cmd := &cobra.Command{
		Use:   "status --config FILE",
		Short: "Show a pipeline's leader, epoch, position and checkpoint",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := loadConfig(path)
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), 10*time.Second)
			defer cancel()
			w := cmd.OutOrStdout()
			fmt.Fprintf(w, "pipeline:   %s\n", cfg.Pipeline)
			store, co, err := openStore(ctx, path, cfg)
			if err != nil {
				return err
			}
			if co != nil {
				defer co.Close()
			}
			if err := printCoordinator(ctx, w, co); err != nil {
				return err
			}
			cp, err := store.Load(ctx)
			if err != nil {
				return err
			}
			if cp.Version == 0 {
				fmt.Fprintln(w, "checkpoint: none saved yet")
			} else {
				fmt.Fprintf(w, "checkpoint: version %d, saved %s, epoch %d, last seq %d\n", cp.Version, cp.SavedAt.Format(time.RFC3339), cp.Epoch, cp.LastSeq)
				for name, pos := range cp.Sources {
					fmt.Fprintf(w, "  source %s: %s\n", name, pos.String())
				}
				for name, off := range cp.Sinks {
					fmt.Fprintf(w, "  sink %s: offset %s\n", name, off)
				}
				if len(cp.Snapshot) > 0 {
					fmt.Fprintln(w, "  a snapshot is under way")
				}
				for name := range cp.Snapshots {
					fmt.Fprintf(w, "  a snapshot of source %s is under way\n", name)
				}
			}
			if cfg.Admin.Addr != "" {
				printAdmin(ctx, w, cfg.Admin.Addr)
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&path, "config", "c", "", "the pipeline's YAML file")
	return cmd
}

// printAdmin shows what the local process's admin endpoint reports.
func printAdmin(ctx context.Context, w io.Writer, addr string) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/status", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		fmt.Fprintf(w, "process:    no answer at %s (not running here)\n", addr)
		return
	}
	defer resp.Body.Close()
	var st struct {
		Running  bool              `json:"running"`
		Epoch    uint64            `json:"epoch"`
		LastSeq  uint64            `json:"last_seq"`
		Lag      float64           `json:"lag_seconds"`
		SinkDown map[string]string `json:"sinks_down"`
		Sources  []struct {
			Name    string    `json:"name"`
			Event   time.Time `json:"event_time"`
			Lag     float64   `json:"lag_seconds"`
			Offset  float64   `json:"clock_offset_seconds"`
			Stalled bool      `json:"stalled"`
		} `json:"sources"`
		Watermark time.Time `json:"watermark"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		fmt.Fprintf(w, "process:    %s answered something else: %v\n", addr, err)
		return
	}
	fmt.Fprintf(w, "process:    at %s: running=%v epoch=%d last_seq=%d lag=%.1fs\n", addr, st.Running, st.Epoch, st.LastSeq, st.Lag)
	for s, e := range st.SinkDown {
		fmt.Fprintf(w, "  sink %s is down: %s\n", s, e)
	}
	if !st.Watermark.IsZero() {
		fmt.Fprintf(w, "  watermark %s\n", st.Watermark.Format(time.RFC3339Nano))
	}
	for _, src := range st.Sources {
		state := ""
		if src.Stalled {
			state = " STALLED"
		}
		fmt.Fprintf(w, "  source %s: event lag %.1fs, clock offset %+.3fs%s\n", src.Name, src.Lag, src.Offset, state)
	}
}

// openStore opens the configured checkpoint store (read only here).
func openStore(ctx context.Context, path string, cfg *config.Config) (checkpoint.Store, *coord.Etcd, error) {
	if cfg.Coordinator.Type != "etcd" {
		return &checkpoint.FileStore{Path: cfg.Checkpoint.Path}, nil, nil
	}
	co, err := newCoordinator(path, cfg)
	if err != nil {
		return nil, nil, err
	}
	return co.CheckpointStore(nil), co, nil
}

// printCoordinator shows the leader and followers.
func printCoordinator(ctx context.Context, w io.Writer, co *coord.Etcd) error {
	if co == nil {
		fmt.Fprintln(w, "leader:     none (coordinator: none; one process)")
		return nil
	}
	st, err := co.Status(ctx)
	if err != nil {
		return err
	}
	if st.Leader == nil {
		fmt.Fprintln(w, "leader:     none (no process leads now)")
	} else {
		fmt.Fprintf(w, "leader:     %s, epoch %d, since %s (%s ago)\n", st.Leader.ID, st.Leader.Epoch, st.Leader.Since.Format(time.RFC3339), time.Since(st.Leader.Since).Round(time.Second))
	}
	for _, f := range st.Followers {
		fmt.Fprintf(w, "follower:   %s, waiting since %s\n", f.ID, f.Since.Format(time.RFC3339))
	}
	return nil
}
