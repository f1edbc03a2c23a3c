package main

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluice-cdc/sluice/binlog"
	"github.com/sluice-cdc/sluice/checkpoint"
	"github.com/sluice-cdc/sluice/internal/sqlstmt"
	"github.com/sluice-cdc/sluice/position"
)

// schemaCmd prints the captured tables as of a position, from the schema
// history `sluice run` keeps beside its checkpoint.
func schemaCmd() *cobra.Command {
	var path, at, only string
	cmd := &cobra.Command{
		Use:   "schema --config FILE [--at FILE:POS] [--source NAME]",
		Short: "Print the captured tables' definitions as of a binlog position (from the schema history)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := loadConfig(path)
			if err != nil {
				return err
			}
			var pos position.Position
			if at != "" {
				if pos, err = position.ParseFilePos(at); err != nil {
					return fmt.Errorf("--at: %w", err)
				}
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), 10*time.Second)
			defer cancel()
			_, co, err := openStore(ctx, path, cfg)
			if err != nil {
				return err
			}
			if co != nil {
				defer co.Close()
			}
			w := cmd.OutOrStdout()
			found := false
			for _, sc := range cfg.Sources {
				src, err := sourceConfig(sc)
				if err != nil {
					return fmt.Errorf("%s: %w", path, err)
				}
				if only != "" && src.Name != only {
					continue
				}
				found = true
				var store binlog.HistoryStore = &checkpoint.FileSchemaStore{Path: checkpoint.SchemaPath(cfg.Checkpoint.Path, src.Name)}
				if co != nil {
					store = co.SchemaStore(nil, src.Name)
				}
				h := binlog.NewHistory("", nil, store, nil)
				if err := h.Load(ctx); err != nil {
					return err
				}
				if h.Empty() {
					fmt.Fprintf(w, "-- source %s: no schema history stored yet (sluice run keeps one from its first start)\n", src.Name)
					continue
				}
				base := h.Base()
				if !pos.IsZero() && pos.Compare(base) < 0 {
					return fmt.Errorf("source %s: %s is before the oldest definitions kept (%s): the history was compacted up to the oldest position a restart can resume from", src.Name, pos, base)
				}
				what := "the last position read"
				if !pos.IsZero() {
					what = pos.String()
				}
				fmt.Fprintf(w, "-- source %s, as of %s\n", src.Name, what)
				for _, t := range h.TablesAt(pos) {
					if t.Unknown {
						fmt.Fprintf(w, "-- %s: definition unknown (a statement the history could not apply; read from information_schema)\n\n", sqlstmt.TableText(t.DB, t.Name))
						continue
					}
					fmt.Fprintf(w, "-- %s\n%s;\n\n", sqlstmt.TableText(t.DB, t.Name), t.Create)
				}
			}
			if !found {
				return fmt.Errorf("--source %s: no such source in %s", only, path)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&path, "config", "", "pipeline config file")
	cmd.Flags().StringVar(&at, "at", "", "binlog position FILE:POS (default: the last position read)")
	cmd.Flags().StringVar(&only, "source", "", "only this source")
	return cmd
}
