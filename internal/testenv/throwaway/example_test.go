//go:build unix

package throwaway_test

import (
	"context"
	"fmt"
	"log"

	"github.com/sluice-cdc/sluice/internal/testenv/throwaway"
)

// A program starts a server, uses it and closes it, with errors returned:
// no *testing.T needed (tests use testenv.StartT, which closes it at the
// test's cleanup).
func ExampleStart() {
	ctx, cancel := context.WithTimeout(context.Background(), throwaway.StartTimeout)
	defer cancel()
	db, err := throwaway.Start(ctx, throwaway.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	if err := db.Exec(ctx, "CREATE DATABASE d", "CREATE TABLE d.t (id INT PRIMARY KEY)", "INSERT INTO d.t VALUES (1), (2)"); err != nil {
		log.Fatal(err)
	}
	r, err := db.Query(ctx, "SELECT COUNT(*), @@binlog_format FROM d.t")
	if err != nil {
		log.Fatal(err)
	}
	n, _ := r.GetInt(0, 0)
	format, _ := r.GetString(0, 1)
	fmt.Println(throwaway.FlavorName(db.Flavor), "rows:", n, "binlog_format:", format)
	// Output: MariaDB rows: 2 binlog_format: ROW
}
