package checkpoint

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/sluice-cdc/sluice/binlog"
	"github.com/sluice-cdc/sluice/position"
)

// BenchmarkSchemaHistoryLoad: a stored history of 10,000 DDL statements
// (ALTERs adding and dropping columns of 20 tables of 12 columns) — its
// size, and the time to load it and replay it to the last position (what
// `sluice run` does at each start before compacting).
func BenchmarkSchemaHistoryLoad(b *testing.B) {
	path := filepath.Join(b.TempDir(), "ckpt.json.schema.main")
	ctx := context.Background()
	h := binlog.NewHistory(position.MySQL, nil, &FileSchemaStore{Path: path}, nil)
	pos := func(i int) position.Position {
		return position.Position{File: "mysql-bin.000001", Offset: uint32(1000 + 100*i)}
	}
	if err := h.Compact(ctx, pos(0)); err != nil { // an empty base: nothing to do
		b.Fatal(err)
	}
	n := 0
	apply := func(q string) {
		n++
		if _, err := h.ApplyDDL(ctx, pos(n), "app", q); err != nil {
			b.Fatal(err)
		}
	}
	for t := range 20 {
		q := fmt.Sprintf("CREATE TABLE t%d (id BIGINT PRIMARY KEY", t)
		for c := range 11 {
			q += fmt.Sprintf(", c%d VARCHAR(64) CHARACTER SET latin1 NOT NULL DEFAULT ''", c)
		}
		apply(q + ") ENGINE=InnoDB DEFAULT CHARSET=utf8mb4")
	}
	for n < 10000 {
		t := n % 20
		if ((n-20)/20)%2 == 0 {
			apply(fmt.Sprintf("ALTER TABLE t%d ADD COLUMN x INT UNSIGNED AFTER id", t))
		} else {
			apply(fmt.Sprintf("ALTER TABLE t%d DROP COLUMN x", t))
		}
	}
	fi, err := os.Stat(path)
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for b.Loop() {
		l := binlog.NewHistory(position.MySQL, nil, &FileSchemaStore{Path: path}, nil)
		if err := l.Load(ctx); err != nil {
			b.Fatal(err)
		}
		if got := len(l.Entries()); got != 10000 {
			b.Fatalf("%d entries loaded", got)
		}
	}
	b.ReportMetric(float64(fi.Size()), "stored-bytes")
}
