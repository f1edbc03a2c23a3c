// Command inmemory keeps an in-memory copy of two related tables,
// campaigns and banners, consistent with a MariaDB server: it loads them
// with a consistent snapshot and then follows the binlog from exactly the
// snapshot's position, applying each transaction atomically. A banner is
// visible only while its campaign exists.
//
//	go run ./examples/inmemory --source mysql://repl:secret@127.0.0.1:3306 --db ads
//
// It prints a summary line every --print-every until interrupted.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/sluice-cdc/sluice/binlog"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	var usage usageError
	switch {
	case err == nil:
	case errors.Is(err, flag.ErrHelp):
		os.Exit(0)
	case errors.As(err, &usage):
		if !usage.printed {
			fmt.Fprintln(os.Stderr, "inmemory:", err)
		}
		os.Exit(2)
	default:
		fmt.Fprintln(os.Stderr, "inmemory:", err)
		os.Exit(1)
	}
}

// usageError is a mistake in the command line; printed when the flag
// package has already shown it.
type usageError struct {
	error
	printed bool
}

// run is main without the process around it: it parses args, keeps the
// copy and prints summaries to out until ctx ends.
func run(ctx context.Context, args []string, out, errOut io.Writer) error {
	fs := flag.NewFlagSet("inmemory", flag.ContinueOnError)
	fs.SetOutput(errOut)
	source := fs.String("source", "", "the server, mysql://USER:PASSWORD@HOST:PORT (the user needs SELECT, REPLICATION SLAVE and REPLICATION CLIENT/BINLOG MONITOR; RELOAD for a parallel snapshot)")
	db := fs.String("db", "ads", "the database holding the campaigns and banners tables")
	every := fs.Duration("print-every", 2*time.Second, "how often to print a summary")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return usageError{err, true}
	}
	if fs.NArg() > 0 {
		return usageError{fmt.Errorf("unexpected arguments %q", fs.Args()), false}
	}
	if *source == "" {
		return usageError{errors.New("--source mysql://USER:PASSWORD@HOST:PORT is required"), false}
	}
	if *every <= 0 {
		return usageError{errors.New("--print-every must be positive"), false}
	}
	src, err := binlog.ParseSourceURL(*source)
	if err != nil {
		return usageError{err, false}
	}
	logger := slog.New(slog.NewTextHandler(errOut, nil))
	store := NewStore(*db)

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, Config{Source: src, DB: *db, Logger: logger}, store, func() {
			st := store.Stats()
			logger.Info("tables loaded; following the binlog", "campaigns", st.Campaigns, "banners", st.Banners, "position", st.Position.String())
		})
	}()

	tick := time.NewTicker(*every)
	defer tick.Stop()
	for {
		select {
		case <-tick.C:
			fmt.Fprintf(out, "%s %s\n", time.Now().Format(time.TimeOnly), store.Stats())
		case err := <-done:
			// Run returns nil once ctx has ended (Ctrl-C), else its error.
			fmt.Fprintf(out, "%s %s\n", time.Now().Format(time.TimeOnly), store.Stats())
			return err
		}
	}
}
