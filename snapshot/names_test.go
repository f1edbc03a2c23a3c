package snapshot_test

import (
	"context"
	"testing"

	"github.com/sluice-cdc/sluice/binlog"
	"github.com/sluice-cdc/sluice/internal/testenv"
	"github.com/sluice-cdc/sluice/position"
	"github.com/sluice-cdc/sluice/snapshot"
)

// TestSnapshotNonASCIINames: a table whose name is not ASCII is
// snapshotted on a server whose own default character set is latin1
// (MariaDB's without a configuration file). The connection's character
// set must not follow the server's default.
func TestSnapshotNonASCIINames(t *testing.T) {
	testenv.ForEachFlavor(t, func(t *testing.T, flavor position.Flavor) {
		extra := []string{"--character-set-server=latin1", "--collation-server=latin1_swedish_ci"}
		db := testenv.StartT(t, testenv.Options{Flavor: flavor, Extra: extra})
		ctx := context.Background()
		if err := db.Exec(ctx,
			"CREATE DATABASE oh CHARACTER SET utf8mb4",
			"CREATE TABLE oh.`Ünï cöde-tbl` (`select` INT PRIMARY KEY, `a b` VARCHAR(10), `ça` VARCHAR(10)) CHARACTER SET utf8mb4",
			"INSERT INTO oh.`Ünï cöde-tbl` VALUES (1, 'x', 'é')"); err != nil {
			t.Fatal(err)
		}
		cfg, _ := binlog.ParseSourceURL(db.URL())
		tables, _ := binlog.ParseFilter("oh.*")
		var names []string
		_, err := snapshot.Run(ctx, snapshot.Config{Source: cfg, Tables: tables},
			func(txn *binlog.Txn) error {
				for i := range txn.Changes {
					names = append(names, txn.Changes[i].Table.Name)
				}
				txn.Release()
				return nil
			})
		if err != nil {
			t.Fatal(err)
		}
		if len(names) != 1 || names[0] != "Ünï cöde-tbl" {
			t.Fatalf("rows of tables %q, want one of %q", names, "Ünï cöde-tbl")
		}
	})
}
