package binlog_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/sluice-cdc/sluice/binlog"
	"github.com/sluice-cdc/sluice/codec"
	"github.com/sluice-cdc/sluice/position"
)

// Decode a binlog file captured from MariaDB and print each change with
// its typed values rendered as JSON.
func ExampleReadFiles() {
	tables, _ := binlog.ParseFilter("shop.items")
	var n int
	err := binlog.ReadFiles(context.Background(), []string{"testdata/mariadb-full.bin"}, binlog.FileConfig{Tables: tables},
		func(txn *binlog.Txn) error {
			for _, ch := range txn.Changes {
				if n++; n > 5 {
					return nil
				}
				switch ch.Op {
				case binlog.OpDDL:
					fmt.Printf("%s ddl: %.40s...\n", txn.GTID, ch.Query)
				default:
					fmt.Printf("%s %s %s before=%s after=%s\n", txn.GTID, ch.Op, ch.Table.QualifiedName(),
						codec.AppendRow(nil, ch.Table, ch.Before), codec.AppendRow(nil, ch.Table, ch.After))
				}
			}
			return nil
		})
	if err != nil {
		log.Fatal(err)
	}
	// Output:
	// 0-1-1 ddl: CREATE DATABASE shop...
	// 0-1-2 ddl: CREATE TABLE shop.items (id INT UNSIGNED...
	// 0-1-3 insert shop.items before=null after={"id":1,"name":"Dune","price":"9.99","added":"2023-11-14T22:13:20.125","tags":["new"],"kind":"book","note":"a classic","raw":"AP8="}
	// 0-1-3 insert shop.items before=null after={"id":2,"name":"Yo-yo","price":"2.50","added":"2023-11-14T22:13:21.000","tags":["new","sale"],"kind":"toy","note":null,"raw":null}
	// 0-1-4 update shop.items before={"id":1,"name":"Dune","price":"9.99","added":"2023-11-14T22:13:20.125","tags":["new"],"kind":"book","note":"a classic","raw":"AP8="} after={"id":1,"name":"Dune","price":"7.49","added":"2023-11-14T22:13:20.125","tags":["sale"],"kind":"book","note":"a classic","raw":"AP8="}
}

// Follow a live server with per-table handlers. (Not run: it needs a server.)
func ExampleReader_OnRow() {
	// e.g. mysql://repl:secret@db.example:3306?tls=verify-identity, or
	// ?tls=verify-ca&ca=/path/ca.pem with MySQL's auto-generated certificates.
	cfg, err := binlog.ParseSourceURL(os.Getenv("SLUICE_SOURCE"))
	if err != nil {
		log.Fatal(err)
	}
	cfg.Tables, _ = binlog.ParseFilter("shop.*")
	r, err := binlog.NewReader(cfg)
	if err != nil {
		log.Fatal(err)
	}
	r.OnRow("shop", "orders", func(txn *binlog.Txn, ch *binlog.Change) error {
		fmt.Println(ch.Op, ch.After[0].Uint(), string(ch.After[2].Bytes()))
		return nil
	})
	r.OnTxn(func(txn *binlog.Txn) error {
		if txn.Last {
			fmt.Println("committed; resume from", txn.End)
		}
		return nil
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := r.Run(ctx); err != nil {
		log.Fatal(err)
	}
}

// Pull transactions one at a time and save the resume position after each.
func ExampleReader_Next() {
	cfg, _ := binlog.ParseSourceURL("mysql://repl:secret@127.0.0.1:3306")
	cfg.StartAt = binlog.StartCurrent
	r, err := binlog.NewReader(cfg)
	if err != nil {
		log.Fatal(err)
	}
	defer r.Close()
	ctx := context.Background()
	for {
		txn, err := r.Next(ctx)
		if err != nil {
			log.Fatal(err)
		}
		for _, ch := range txn.Changes {
			fmt.Println(ch.Op, ch.Table.QualifiedName())
		}
		if txn.Last {
			fmt.Println("resume point:", txn.End)
		}
	}
}

// The TLS modes of a source address are those of MySQL's clients; the
// password never appears in an error.
func ExampleParseSourceURL() {
	for _, url := range []string{
		"mysql://repl:secret@db.example:3306",
		"mysql://repl:secret@db.example?tls=preferred",
		"mysql://repl:secret@10.0.0.5:3306?tls=verify-ca",
		"mysql://repl:secret@db.example:3306?tls=true&server_id=7",
		"mysql://repl:secret@db.example:3306?tls=maybe",
	} {
		cfg, err := binlog.ParseSourceURL(url)
		if err != nil {
			fmt.Println("error:", err)
			continue
		}
		fmt.Printf("%s as %s, TLS %q, server_id %d\n", cfg.Addr, cfg.User, cfg.TLSMode, cfg.ServerID)
	}
	// Output:
	// db.example:3306 as repl, TLS "", server_id 0
	// db.example:3306 as repl, TLS "preferred", server_id 0
	// 10.0.0.5:3306 as repl, TLS "verify-ca", server_id 0
	// db.example:3306 as repl, TLS "verify-identity", server_id 7
	// error: binlog: source option tls="maybe": want disabled, preferred, required, verify-ca or verify-identity (true and skip-verify are older names of verify-identity and required)
}

// Check a saved position before resuming from it: purged (take a new
// snapshot), unknown to the server (another server's position: stop), or
// resumable. (Not run: it needs a server.)
func ExamplePositionPurged() {
	cfg, _ := binlog.ParseSourceURL("mysql://repl:secret@127.0.0.1:3306")
	saved, _ := position.ParseFilePos("mysql-bin.000042:1234")
	saved.GTIDs = "3e11fa47-71ca-11e1-9e33-c80aa9429562:1-9120"
	ctx := context.Background()
	purged, oldest, err := binlog.PositionPurged(ctx, cfg, saved)
	switch {
	case errors.Is(err, binlog.ErrPositionUnknown):
		log.Fatalf("not a position of this server: %v", err)
	case err != nil:
		log.Fatal(err)
	case purged:
		fmt.Println("purged; the server starts at", oldest)
	default:
		cfg.Start = saved
	}
}

// The whole GTID state at a file position, e.g. for a position a user
// gave as FILE:POS: BINLOG_GTID_POS on MariaDB, the file's Previous_gtids
// plus the GTIDs before the offset on MySQL. (Not run: it needs a server.)
func ExampleGTIDAt() {
	cfg, _ := binlog.ParseSourceURL("mysql://repl:secret@127.0.0.1:3306")
	c, err := binlog.Dial(context.Background(), cfg)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	p, _ := position.ParseFilePos("mysql-bin.000003:157")
	if p.GTIDs, err = binlog.GTIDAt(c, p); err != nil {
		log.Fatal(err) // ErrPositionUnknown inside a transaction or past the file's end
	}
	fmt.Println(p)
}
