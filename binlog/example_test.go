package binlog_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/sluice-cdc/sluice/binlog"
	"github.com/sluice-cdc/sluice/codec"
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
	cfg, err := binlog.ParseSourceURL(os.Getenv("SLUICE_SOURCE")) // mysql://repl:secret@127.0.0.1:3306
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
