package snapshot_test

import (
	"context"
	"io"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/sluice-cdc/sluice/binlog"
	"github.com/sluice-cdc/sluice/codec"
	"github.com/sluice-cdc/sluice/internal/bench/libslavedb"
	"github.com/sluice-cdc/sluice/internal/testenv"
	"github.com/sluice-cdc/sluice/position"
	"github.com/sluice-cdc/sluice/snapshot"
)

// The long_table of the libslave benchmark.
var longTableDDL = strings.Replace(libslavedb.LongTable, "CREATE TABLE long_table", "CREATE TABLE benchdb.long_table", 1)

const benchRows = 200000

var (
	benchMu    sync.Mutex
	benchSetup = map[position.Flavor]*sync.Once{}
)

func benchTable(b *testing.B, flavor position.Flavor) *testenv.Server {
	db := server(b, flavor)
	benchMu.Lock()
	once := benchSetup[flavor]
	if once == nil {
		once = &sync.Once{}
		benchSetup[flavor] = once
	}
	benchMu.Unlock()
	once.Do(func() {
		exec(b, db, seqs(db, "CREATE DATABASE benchdb", "USE benchdb", "SET SESSION sql_mode = ''", longTableDDL,
			"INSERT INTO benchdb.long_table (field5, field25) SELECT 'short_string', 'another_short_string' FROM seq_1_to_"+strconv.Itoa(benchRows),
			"ANALYZE TABLE benchdb.long_table")...)
	})
	return db
}

// BenchmarkScan reads the 200,000 rows of long_table (26 columns): whole
// in one Scan, in chunks of 10,000 rows, and encoded as JSON rows; beside
// mariadb-dump or mysqldump writing the same table to /dev/null; on each
// server flavor.
func BenchmarkScan(b *testing.B) {
	for _, flavor := range testenv.Flavors() {
		b.Run(string(flavor), func(b *testing.B) { benchmarkScan(b, flavor) })
	}
}

func benchmarkScan(b *testing.B, flavor position.Flavor) {
	db := benchTable(b, flavor)
	ctx := context.Background()
	c := conn(b, db)
	info, err := snapshot.Inspect(ctx, c, "benchdb", "long_table")
	if err != nil {
		b.Fatal(err)
	}
	t, key := info.Table, info.Key

	report := func(b *testing.B, rows int) {
		if rows != benchRows*b.N {
			b.Fatalf("read %d rows, want %d", rows, benchRows*b.N)
		}
		b.ReportMetric(float64(rows)/b.Elapsed().Seconds(), "rows/s")
		b.ReportMetric(0, "ns/op")
	}
	b.Run("whole", func(b *testing.B) {
		b.ReportAllocs()
		rows := 0
		q, args := snapshot.ChunkQuery(t, key, "", nil, nil, 0)
		for b.Loop() {
			if err := snapshot.Scan(ctx, c, t, q, args, func(binlog.Row) error { rows++; return nil }); err != nil {
				b.Fatal(err)
			}
		}
		report(b, rows)
	})
	b.Run("chunks", func(b *testing.B) {
		b.ReportAllocs()
		rows := 0
		const limit = 10000
		for b.Loop() {
			var after binlog.Row
			for {
				q, args := snapshot.ChunkQuery(t, key, "", after, nil, limit)
				n := 0
				err := snapshot.Scan(ctx, c, t, q, args, func(row binlog.Row) error {
					if n++; n == limit {
						after = snapshot.CloneKey(t, key, row)
					}
					return nil
				})
				if err != nil {
					b.Fatal(err)
				}
				rows += n
				if n < limit {
					break
				}
			}
		}
		report(b, rows)
	})
	b.Run("json", func(b *testing.B) {
		b.ReportAllocs()
		rows := 0
		var buf []byte
		q, args := snapshot.ChunkQuery(t, key, "", nil, nil, 0)
		for b.Loop() {
			err := snapshot.Scan(ctx, c, t, q, args, func(row binlog.Row) error {
				rows++
				buf = codec.AppendRow(buf[:0], t, row)
				buf = append(buf, '\n')
				return nil
			})
			if err != nil {
				b.Fatal(err)
			}
		}
		report(b, rows)
	})
	b.Run("dump", func(b *testing.B) {
		for b.Loop() {
			cmd, err := db.Command(testenv.ToolDump, "--host=127.0.0.1", "--port="+strconv.Itoa(db.Port), "--user="+db.User,
				"--password="+db.Password, "--single-transaction", "--quick", "--skip-lock-tables", "benchdb", "long_table")
			if err != nil {
				b.Skip(err)
			}
			var stderr strings.Builder
			cmd.Stdout, cmd.Stderr = io.Discard, &stderr
			if err := cmd.Run(); err != nil {
				b.Fatalf("%v: %s", err, stderr.String())
			}
		}
		b.ReportMetric(float64(benchRows*b.N)/b.Elapsed().Seconds(), "rows/s")
		b.ReportMetric(0, "ns/op")
	})
}
