package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"

	"github.com/spf13/cobra"

	"github.com/sluice-cdc/sluice/binlog"
	"github.com/sluice-cdc/sluice/mysqlconn"
)

func readCmd() *cobra.Command {
	var (
		tables, schemaFrom string
		onStatement        string
		out                outputOpts
	)
	cmd := &cobra.Command{
		Use:   "read FILE...",
		Short: "Decode binlog files from disk (like mysqlbinlog) as JSON lines",
		Example: `  sluice read /var/lib/mysql/mysql-bin.000001
  sluice read --schema-from mysql://root:pw@127.0.0.1:3306 --tables 'shop.*' binlog.000007`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, files []string) error {
			if err := out.validate(); err != nil {
				return err
			}
			filter, err := binlog.ParseFilter(tables)
			if err != nil {
				return err
			}
			fc := binlog.FileConfig{Tables: filter, Logger: slog.Default(), OnStatementChange: onStatement, FullRowImages: out.codecFormat().IsDebezium()}
			if schemaFrom != "" {
				src, err := binlog.ParseSourceURL(schemaFrom)
				if err != nil {
					return fmt.Errorf("--schema-from: %w", err)
				}
				is := binlog.NewInfoSchema(func(ctx context.Context) (*mysqlconn.Conn, error) {
					return binlog.Dial(ctx, src)
				})
				defer is.Close()
				fc.Schema = is
			}
			pr := newPrinter(os.Stdout, out)
			text := binlog.NewTextCheck(slog.Default())
			err = binlog.ReadFiles(cmd.Context(), files, fc, func(t *binlog.Txn) error {
				text.Check(t)
				return pr.txn(t)
			})
			if ferr := pr.w.Flush(); err == nil {
				err = ferr
			}
			fmt.Fprintln(os.Stderr, pr.summary())
			if errors.Is(err, context.Canceled) {
				return nil
			}
			return err
		},
	}
	cmd.Flags().StringVar(&tables, "tables", "", "tables to print, comma-separated db.table globs (default: every user table)")
	cmd.Flags().StringVar(&onStatement, "on-statement-change", binlog.StatementStop, onStatementHelp)
	cmd.Flags().StringVar(&schemaFrom, "schema-from", "", "server to read table definitions from when the files have no column metadata: mysql://USER:PASS@HOST:PORT")
	out.register(cmd)
	return cmd
}
