package pipeline_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/sluice-cdc/sluice/binlog"
	"github.com/sluice-cdc/sluice/checkpoint"
	"github.com/sluice-cdc/sluice/internal/testenv"
	"github.com/sluice-cdc/sluice/pipeline"
	"github.com/sluice-cdc/sluice/position"
)

// printSink is the smallest Sink: it prints each message and keeps
// nothing durable, so Recover reports that it holds nothing beyond the
// checkpoint, and a restart resumes from the checkpoint. Each batch it
// is handed goes to seen, so the example knows when to go on.
type printSink struct{ seen chan int }

func (s *printSink) Name() string { return "stdout" }

func (s *printSink) Recover(ctx context.Context, epoch uint64, offset string) (pipeline.Recovery, error) {
	return pipeline.Recovery{}, nil
}

func (s *printSink) Write(ctx context.Context, b *pipeline.Batch) (string, error) {
	for _, m := range b.Messages {
		what := m.Op.String()
		if m.Snapshot {
			what = "snapshot " + what
		}
		// End marks the last change of a source transaction (snapshot
		// rows have none): the position to resume from after it.
		fmt.Printf("seq %d: %s %s.%s %s end=%v\n", m.Seq, what, m.DB, m.Table, m.Key, m.End != nil)
	}
	s.seen <- len(b.Messages)
	return "", nil
}

func (s *printSink) Close() error { return nil }

// A pipeline that loads a table (the snapshot), then follows its changes,
// into a sink written in a few lines. A throwaway MariaDB stands in for
// your server: give binlog.ParseSourceURL your own URL instead.
func Example() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	db, err := testenv.Start(ctx, testenv.Options{Flavor: position.MariaDB})
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	if err := db.Exec(ctx,
		"CREATE DATABASE shop",
		"CREATE TABLE shop.orders (id INT PRIMARY KEY, item VARCHAR(20))",
		"INSERT INTO shop.orders VALUES (1, 'book'), (2, 'pen')"); err != nil {
		log.Fatal(err)
	}

	src, err := binlog.ParseSourceURL(db.URL())
	if err != nil {
		log.Fatal(err)
	}
	src.Tables, _ = binlog.ParseFilter("shop.*")
	dir, err := os.MkdirTemp("", "sluice-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	sink := &printSink{seen: make(chan int, 16)}
	p, err := pipeline.New(pipeline.Config{
		Name:   "example",
		Source: pipeline.SourceConfig{Name: "shop-db", Binlog: src}, // snapshot first (mode initial)
		Sinks:  []pipeline.Sink{sink},
		Store:  &checkpoint.FileStore{Path: filepath.Join(dir, "checkpoint.json")},
	})
	if err != nil {
		log.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	// wait takes batches until n messages have been written.
	wait := func(n int) {
		for n > 0 {
			select {
			case k := <-sink.seen:
				n -= k
			case err := <-done:
				log.Fatalf("the pipeline stopped: %v", err)
			}
		}
	}
	wait(2) // the snapshot's two rows
	if err := db.Exec(ctx,
		"BEGIN", "UPDATE shop.orders SET item = 'novel' WHERE id = 1", "INSERT INTO shop.orders VALUES (3, 'ink')", "COMMIT",
		"DELETE FROM shop.orders WHERE id = 2"); err != nil {
		log.Fatal(err)
	}
	wait(3)
	cancel()
	if err := <-done; err != nil {
		log.Fatal(err)
	}
	// Output:
	// seq 1: snapshot read shop.orders {"id":1} end=false
	// seq 2: snapshot read shop.orders {"id":2} end=false
	// seq 3: update shop.orders {"id":1} end=false
	// seq 4: insert shop.orders {"id":3} end=true
	// seq 5: delete shop.orders {"id":2} end=true
}
