package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluice-cdc/sluice/config"
	"github.com/sluice-cdc/sluice/internal/sqlstmt"
)

// snapshotCmd asks a running pipeline, through its admin endpoint, to
// snapshot tables again while it keeps streaming.
func snapshotCmd() *cobra.Command {
	var (
		incremental        []string
		admin, cfg, source string
		where, token       string
	)
	cmd := &cobra.Command{
		Use:   "snapshot --incremental db.table [--incremental db.t2] (--config FILE | --admin HOST:PORT)",
		Short: "Re-read tables of a running pipeline while it streams (incremental snapshot)",
		Long: `snapshot asks a running "sluice run" to read tables again, chunk by chunk,
while it keeps streaming. Rows come out as snapshot reads (op "r"); a row that
changes while its chunk is read comes out with its newer value only (the DBLog
watermark method). Progress shows in the pipeline's logs, /status and metrics.`,
		Example: `  sluice snapshot --incremental shop.items --config sluice.yaml
  sluice snapshot --incremental shop.items --where 'id > 1000' --admin 127.0.0.1:7070`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if len(incremental) == 0 {
				return errors.New("name the tables: --incremental db.table (repeatable)")
			}
			if token == "" {
				token = os.Getenv(adminTokenEnv)
			}
			if admin == "" && cfg == "" {
				return errors.New("say which pipeline: --config FILE (its admin.addr) or --admin HOST:PORT")
			}
			if cfg != "" {
				c, err := config.Load(cfg)
				if err != nil {
					return err
				}
				if admin == "" {
					if admin = c.Admin.Addr; admin == "" {
						return fmt.Errorf("%s has no admin.addr: the pipeline takes no commands; add admin: {addr: 127.0.0.1:7070} and restart it", cfg)
					}
				}
				if token == "" {
					token = c.Admin.Token
				}
			}
			client := &http.Client{Timeout: 40 * time.Second}
			for _, t := range incremental {
				if _, _, err := sqlstmt.ParseTableText(t); err != nil {
					return fmt.Errorf("--incremental: %w", err)
				}
				if err := postSnapshot(cmd.Context(), client, admin, token, t, where, source); err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "incremental snapshot of %s started\n", t)
			}
			return nil
		},
	}
	cmd.Flags().StringArrayVar(&incremental, "incremental", nil, "table to re-read while streaming: db.table (repeatable)")
	cmd.Flags().StringVar(&admin, "admin", "", "the running pipeline's admin address (host:port)")
	cmd.Flags().StringVarP(&cfg, "config", "c", "", "the running pipeline's config (to find its admin address)")
	cmd.Flags().StringVar(&where, "where", "", "read only rows matching this SQL condition")
	cmd.Flags().StringVar(&source, "source", "", "the source to read the table from (a pipeline with several sources)")
	cmd.Flags().StringVar(&token, "token", "", "the pipeline's admin.token (default: $"+adminTokenEnv+", else admin.token of --config; prefer those: a flag shows in ps)")
	return cmd
}

// adminTokenEnv is where sluice snapshot finds the admin token.
const adminTokenEnv = "SLUICE_ADMIN_TOKEN"

func postSnapshot(ctx context.Context, c *http.Client, admin, token, table, where, source string) error {
	q := url.Values{"table": {table}}
	if source != "" {
		q.Set("source", source)
	}
	if where != "" {
		q.Set("where", where)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+admin+"/snapshot?"+q.Encode(), nil)
	if err != nil {
		return err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := c.Do(req)
	if err != nil {
		return fmt.Errorf("asking the pipeline at %s: %w (is sluice run running with this admin address?)", admin, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode == http.StatusUnauthorized {
		return fmt.Errorf("the pipeline at %s refused the snapshot of %s: missing or wrong admin token (give the pipeline's admin.token with --token, $%s or --config)", admin, table, adminTokenEnv)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("the pipeline refused the snapshot of %s: %s", table, strings.TrimSpace(string(body)))
	}
	return nil
}
