// Package bench recreates the benchmark of the libslave article on a
// throwaway MariaDB or MySQL and measures sluice beside its peers in the
// same run.
//
// Four binlog ranges are written: one million inserts into short_table and
// long_table, then one UPDATE of every row of each. For each range the
// harness runs, each in its own child process so peak memory is the
// child's own:
//
//   - sluice: the Reader decoding every column of every row into typed values;
//   - go-mysql: go-mysql v1.16's BinlogSyncer with its default row decoder (the peer);
//   - raw: the same range transferred without decoding rows (the floor);
//   - debezium: sluice's Debezium JSON output written to /dev/null.
package bench

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/sluice-cdc/sluice/binlog"
	"github.com/sluice-cdc/sluice/internal/bench/libslavedb"
	"github.com/sluice-cdc/sluice/internal/testenv/throwaway"
	"github.com/sluice-cdc/sluice/position"
)

// Range is one binlog range of the benchmark.
type Range struct {
	Name        string
	Rows        int64
	From, To    position.Position
	Description string
}

// Options control the benchmark.
type Options struct {
	Rows  int      // rows per table (default 1,000,000)
	Modes []string // modes to measure (default all)
	Runs  int      // runs per mode and range; the best is kept (default 1)
	// Self is the sluice binary whose tail command reads the sluice
	// modes' ranges.
	Self string
	// Peer is the binary whose child command (bench.Child) reads the
	// peers' ranges: sluice-bench itself.
	Peer string
	// ProfileDir, when set, receives a CPU profile of every sluice run
	// (RANGE-MODE.prof).
	ProfileDir string
	Out        io.Writer
	Log        io.Writer
}

// Modes measured, in the order printed: sluice decoding only, the two
// peers, then sluice's output in each format (`sluice tail --format`),
// written to /dev/null (tail's summary counts the bytes).
var Modes = []string{"sluice", "go-mysql", "raw", "sluice-json", "debezium", "debezium-schemas"}

// DebeziumModes are Debezium itself as the speed peer: Debezium Embedded
// 3.6.1's MySQL connector (on MariaDB 3.5.0's MariaDB connector, the
// newest served) in a JVM of its own, each value serialised by Kafka
// Connect's JsonConverter without and with schemas, the peers of the
// debezium and debezium-schemas modes. Not among the default Modes (they
// need Java and Maven); `make bench-debezium` runs them.
var DebeziumModes = []string{"dbz-embedded", "dbz-embedded-schemas"}

// formatArgs are the `sluice tail` output flags of each format mode.
var formatArgs = map[string][]string{
	"sluice":           {"--format", "none"},
	"sluice-json":      {"--format", "sluice"},
	"debezium":         {"--format", "debezium"},
	"debezium-schemas": {"--format", "debezium", "--schemas"},
}

// Prepare starts a server of the flavor and writes the four ranges.
func Prepare(ctx context.Context, flavor position.Flavor, rows int, log io.Writer) (*throwaway.Server, []Range, error) {
	return PrepareRanges(ctx, flavor, rows, nil, log)
}

// ServerOptions are the benchmark server's settings: room for the
// million-row transactions.
func ServerOptions(flavor position.Flavor) throwaway.Options {
	redo := "--innodb-log-file-size=512M"
	if flavor == position.MySQL {
		redo = "--innodb-redo-log-capacity=1G"
	}
	return throwaway.Options{Flavor: flavor,
		Extra: []string{"--innodb-buffer-pool-size=1G", redo, "--max-binlog-size=1G", "--max-allowed-packet=1G"}}
}

// seqRows is a FROM clause with a column seq running 1..n: MariaDB's
// SEQUENCE engine, a recursive CTE on MySQL (which needs
// cte_max_recursion_depth raised in the session, see seqSession).
func seqRows(flavor position.Flavor, n int) string {
	if flavor == position.MySQL {
		return fmt.Sprintf("(WITH RECURSIVE s (seq) AS (SELECT 1 UNION ALL SELECT seq + 1 FROM s WHERE seq < %d) SELECT seq FROM s) AS s", n)
	}
	return fmt.Sprintf("bench.seq_1_to_%d", n)
}

// seqSession are the session settings seqRows needs.
func seqSession(flavor position.Flavor, n int) []string {
	if flavor == position.MySQL {
		return []string{"SET SESSION sql_mode = ''", fmt.Sprintf("SET SESSION cte_max_recursion_depth = %d", n+1)}
	}
	return []string{"SET SESSION sql_mode = ''"}
}

// tableDDL adapts a CREATE TABLE to the flavor: MySQL takes a TEXT
// column's default only as an expression.
func tableDDL(flavor position.Flavor, ddl string) string {
	if flavor == position.MySQL {
		return strings.ReplaceAll(ddl, `text NOT NULL DEFAULT ""`, `text NOT NULL DEFAULT ('')`)
	}
	return ddl
}

// PrepareRanges starts a server of the flavor and writes the named ranges
// (all when names is empty), in the order short_insert, long_insert,
// short_update, long_update.
func PrepareRanges(ctx context.Context, flavor position.Flavor, rows int, names []string, log io.Writer) (*throwaway.Server, []Range, error) {
	return PrepareText(ctx, flavor, rows, names, "", log)
}

// TextSample is the text of every text column of the tables PrepareText
// makes in a character set: Chinese for the sets that hold it, Polish for
// latin2, each 2 to 3 bytes a character in UTF-8.
func TextSample(charset string) string {
	if charset == "latin2" {
		return "zażółć gęślą jaźń 2024"
	}
	return "美团点评 数据库 2024"
}

// PrepareText is PrepareRanges with the tables' text in a character set:
// with charset "" they are the article's (utf8mb4 text holding ASCII);
// otherwise short_table gains a VARCHAR(64) column field3 and long_table
// is converted to the set, and the inserts write TextSample(charset) into
// short_table's field3 and long_table's field5 and field25, so that each
// changed row carries one or two values to convert.
func PrepareText(ctx context.Context, flavor position.Flavor, rows int, names []string, charset string, log io.Writer) (*throwaway.Server, []Range, error) {
	db, err := throwaway.Start(ctx, ServerOptions(flavor))
	if err != nil {
		return nil, nil, err
	}
	c, err := db.Conn(ctx)
	if err != nil {
		db.Close()
		return nil, nil, err
	}
	defer c.Close()
	setup := append(seqSession(flavor, rows),
		"CREATE DATABASE bench",
		"USE bench",
		"SET GLOBAL sql_mode = ''",
		libslavedb.ShortTable,
		tableDDL(flavor, libslavedb.LongTable),
	)
	shortCols, shortVals := "field1, field2", "seq, seq"
	longVals := "'short_string', 'another_short_string'"
	if charset != "" {
		setup = append(setup, "SET NAMES utf8mb4",
			"ALTER TABLE short_table ADD field3 VARCHAR(64) CHARACTER SET "+charset+" NOT NULL DEFAULT ''",
			"ALTER TABLE long_table CONVERT TO CHARACTER SET "+charset)
		text := "'" + TextSample(charset) + "'"
		shortCols, shortVals, longVals = "field1, field2, field3", "seq, seq, "+text, text+", "+text
	}
	for _, q := range setup {
		if _, err := c.Execute(q); err != nil {
			db.Close()
			return nil, nil, fmt.Errorf("bench: %s: %w", q, err)
		}
	}
	steps := []struct{ name, sql, desc string }{
		{"short_insert", "INSERT INTO bench.short_table (" + shortCols + ") SELECT " + shortVals + " FROM " + seqRows(flavor, rows), "INSERT … SELECT into short_table"},
		{"long_insert", "INSERT INTO bench.long_table (field5, field25) SELECT " + longVals + " FROM " + seqRows(flavor, rows), "INSERT … SELECT into long_table"},
		{"short_update", "UPDATE bench.short_table SET field1=12", "UPDATE short_table SET field1=12"},
		{"long_update", "UPDATE bench.long_table SET field6=12", "UPDATE long_table SET field6=12"},
	}
	var ranges []Range
	for _, s := range steps {
		if len(names) > 0 && !slices.Contains(names, s.name) {
			continue
		}
		from, err := binlog.BinlogPosition(c)
		if err != nil {
			db.Close()
			return nil, nil, err
		}
		start := time.Now()
		res, err := c.Execute(s.sql)
		if err != nil {
			db.Close()
			return nil, nil, fmt.Errorf("bench: %s: %w", s.desc, err)
		}
		affected := int64(res.AffectedRows()) // an UPDATE logs only the rows it changed
		to, err := binlog.BinlogPosition(c)
		if err != nil {
			db.Close()
			return nil, nil, err
		}
		fmt.Fprintf(log, "wrote %-13s %s -> %s in %.1fs\n", s.name, from, to, time.Since(start).Seconds())
		ranges = append(ranges, Range{Name: s.name, Rows: affected, From: from, To: to, Description: s.desc})
	}
	return db, ranges, nil
}

// Result is one measurement.
type Result struct {
	Range   string
	Mode    string
	Rows    int64
	Bytes   int64
	Seconds float64 // wall time, connecting included
	// SteadySeconds runs from the first rows event (or first delivered
	// chunk) to the end, and FirstRows are the rows that came with it: the
	// rate leaves out connecting and preflight, the same way for every reader.
	SteadySeconds float64
	FirstRows     int64
	MaxRSS        int64 // bytes
	// StartupSeconds is, for the Debezium modes, the JVM's start to the
	// first record (class loading, the engine, the connector's schema
	// read); Seconds includes it, SteadySeconds does not.
	StartupSeconds float64
	// OutBytes is what a format mode wrote (its messages, newlines
	// included).
	OutBytes int64
	// CPUSeconds is the child's user and system CPU time (the least of
	// the runs): on a shared machine it compares the formats better than
	// wall time.
	CPUSeconds float64
}

// RowsPerSec is the steady decoding rate.
func (r Result) RowsPerSec() float64 {
	if r.SteadySeconds == 0 {
		return 0
	}
	return float64(r.Rows-r.FirstRows) / r.SteadySeconds
}

// Run measures every mode on every range, best of opts.Runs. The runs of
// a range take the modes in turn (run 1 of every mode, then run 2, …),
// so that a noisy phase of a shared machine falls on all of them alike.
func Run(ctx context.Context, db *throwaway.Server, ranges []Range, opts Options) ([]Result, error) {
	modes := opts.Modes
	if len(modes) == 0 {
		modes = Modes
	}
	var results []Result
	for _, rg := range ranges {
		best := make([]Result, len(modes))
		for i := 0; i < max(opts.Runs, 1); i++ {
			for m, mode := range modes {
				res, err := runChild(ctx, opts, db, rg, mode)
				if err != nil {
					return results, fmt.Errorf("%s on %s: %w", mode, rg.Name, err)
				}
				cpu := best[m].CPUSeconds
				if i == 0 || res.CPUSeconds < cpu {
					cpu = res.CPUSeconds
				}
				if best[m].Seconds == 0 || res.RowsPerSec() > best[m].RowsPerSec() {
					best[m] = res
				}
				best[m].CPUSeconds = cpu
			}
		}
		for m, mode := range modes {
			b := best[m]
			fmt.Fprintf(opts.Log, "%-13s %-9s %9d rows %8.3fs (steady %.3fs) %12.0f rows/s  max RSS %4d MiB\n", rg.Name, mode, b.Rows, b.Seconds, b.SteadySeconds, b.RowsPerSec(), b.MaxRSS>>20)
			results = append(results, b)
		}
	}
	return results, nil
}

// runChild runs one measurement in a child process and reads its
// "rows=N bytes=N seconds=F" summary: `sluice tail` (opts.Self) for
// sluice's modes, `sluice-bench child` (opts.Peer) for the peers.
func runChild(ctx context.Context, opts Options, db *throwaway.Server, rg Range, mode string) (Result, error) {
	from := rg.From.File + ":" + strconv.FormatUint(uint64(rg.From.Offset), 10)
	to := rg.To.File + ":" + strconv.FormatUint(uint64(rg.To.Offset), 10)
	self, args := opts.Peer, []string{"child", mode, db.URL(), from, to}
	fa, tail := formatArgs[mode]
	if tail {
		self, args = opts.Self, append([]string{"tail", "--source", db.URL(), "--from", from, "--to", to}, fa...)
	}
	if self == "" {
		return Result{}, fmt.Errorf("bench: no binary to run mode %s in (Options.Self for sluice's modes, Options.Peer for the peers)", mode)
	}
	var cmd *exec.Cmd
	dbz := slices.Contains(DebeziumModes, mode)
	if dbz {
		c, cleanup, err := debeziumCmd(ctx, db, rg, mode, 77101)
		if err != nil {
			return Result{}, err
		}
		defer cleanup()
		cmd, tail = c, false
	} else {
		cmd = exec.CommandContext(ctx, self, args...)
	}
	if opts.ProfileDir != "" && !dbz {
		cmd.Env = append(os.Environ(), "SLUICE_CPUPROFILE="+filepath.Join(opts.ProfileDir, rg.Name+"-"+mode+".prof"))
	}
	var out strings.Builder
	devnull, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		return Result{}, err
	}
	defer devnull.Close()
	cmd.Stdout, cmd.Stderr = devnull, &out // tail: changes to /dev/null (it counts them), summary on stderr
	if !tail {
		cmd.Stdout, cmd.Stderr = &out, os.Stderr
	}
	if err := cmd.Run(); err != nil {
		return Result{}, fmt.Errorf("%s: %w\n%s", strings.Join(cmd.Args, " "), err, out.String())
	}
	res := Result{Range: rg.Name, Mode: mode}
	for _, f := range strings.Fields(out.String()) {
		k, v, _ := strings.Cut(f, "=")
		switch k {
		case "rows":
			res.Rows, _ = strconv.ParseInt(v, 10, 64)
		case "bytes":
			res.Bytes, _ = strconv.ParseInt(v, 10, 64)
		case "seconds":
			res.Seconds, _ = strconv.ParseFloat(v, 64)
		case "steady_seconds":
			res.SteadySeconds, _ = strconv.ParseFloat(v, 64)
		case "out_bytes":
			res.OutBytes, _ = strconv.ParseInt(v, 10, 64)
		case "first_rows":
			res.FirstRows, _ = strconv.ParseInt(v, 10, 64)
		case "startup_seconds":
			res.StartupSeconds, _ = strconv.ParseFloat(v, 64)
		}
	}
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		res.MaxRSS = ru.Maxrss * 1024
		res.CPUSeconds = time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
	}
	if mode == "raw" {
		res.Rows = rg.Rows // the floor decodes no rows: rows/s is the range's rows over the transfer time
	}
	if res.Rows != rg.Rows {
		return res, fmt.Errorf("decoded %d rows, want %d", res.Rows, rg.Rows)
	}
	return res, nil
}

// groupBy indexes results by the two keys of each (the last result of a
// pair wins), and returns the first keys in the order first seen: the
// rows of a report and its columns.
func groupBy[K comparable, R any](results []R, keys func(R) (K, string)) (map[K]map[string]R, []K) {
	by := map[K]map[string]R{}
	var order []K
	for _, r := range results {
		k, sub := keys(r)
		if by[k] == nil {
			by[k] = map[string]R{}
			order = append(order, k)
		}
		by[k][sub] = r
	}
	return by, order
}

// Report prints the results as a Markdown table with ratios.
func Report(w io.Writer, results []Result) {
	by, order := groupBy(results, func(r Result) (string, string) { return r.Range, r.Mode })
	ratio := func(a, b Result) string {
		if a.RowsPerSec() == 0 || b.RowsPerSec() == 0 {
			return "-"
		}
		return fmt.Sprintf("%.2f×", a.RowsPerSec()/b.RowsPerSec())
	}
	// Each table is printed where one of its modes ran (--modes).
	ran := func(modes ...string) bool {
		for _, m := range by {
			for _, mode := range modes {
				if m[mode].Rows > 0 {
					return true
				}
			}
		}
		return false
	}
	tw := tabwriter.NewWriter(w, 0, 0, 1, ' ', tabwriter.Debug)
	if ran("sluice", "go-mysql", "raw") {
		fmt.Fprintln(tw, "| range\t rows\t binlog MB\t sluice rows/s\t go-mysql rows/s\t raw floor rows/s\t sluice/go-mysql\t sluice/raw\t sluice max RSS MiB\t")
		fmt.Fprintln(tw, "|---\t---\t---\t---\t---\t---\t---\t---\t---\t")
	}
	for _, name := range order {
		m := by[name]
		s, g, raw := m["sluice"], m["go-mysql"], m["raw"]
		if s.Rows == 0 && g.Rows == 0 && raw.Rows == 0 {
			continue
		}
		fmt.Fprintf(tw, "| %s\t %d\t %.0f\t %.0f\t %.0f\t %.0f\t %s\t %s\t %d\t\n", name, s.Rows, float64(raw.Bytes)/1e6,
			s.RowsPerSec(), g.RowsPerSec(), raw.RowsPerSec(), ratio(s, g), ratio(s, raw), s.MaxRSS>>20)
	}
	tw.Flush()

	// The formats: JSON rows/s and bytes per row, each format beside
	// sluice's own (the budget: debezium without schemas within
	// 10% of it, with schemas within 40%), and the CPU time of the tail
	// process per row with its ratio to sluice's (above 1: costs more).
	tw = tabwriter.NewWriter(w, 0, 0, 1, ' ', tabwriter.Debug)
	if ran("sluice-json", "debezium", "debezium-schemas") {
		fmt.Fprintln(w)
		fmt.Fprintln(tw, "| range\t sluice JSON rows/s\t B/row\t CPU ns/row\t debezium rows/s\t B/row\t vs sluice\t CPU ns/row\t CPU vs sluice\t debezium+schemas rows/s\t B/row\t vs sluice\t CPU ns/row\t CPU vs sluice\t")
		fmt.Fprintln(tw, "|---\t---\t---\t---\t---\t---\t---\t---\t---\t---\t---\t---\t---\t---\t")
	}
	cpuRow := func(r Result) string {
		if r.Rows == 0 || r.CPUSeconds == 0 {
			return "-"
		}
		return fmt.Sprintf("%.0f", r.CPUSeconds*1e9/float64(r.Rows))
	}
	cpuRatio := func(a, b Result) string {
		if a.CPUSeconds == 0 || b.CPUSeconds == 0 || a.Rows == 0 || b.Rows == 0 {
			return "-"
		}
		return fmt.Sprintf("%.2f×", (a.CPUSeconds/float64(a.Rows))/(b.CPUSeconds/float64(b.Rows)))
	}
	perRow := func(r Result) string {
		if r.Rows == 0 || r.OutBytes == 0 {
			return "-"
		}
		return fmt.Sprintf("%.0f", float64(r.OutBytes)/float64(r.Rows))
	}
	for _, name := range order {
		m := by[name]
		sj, dz, ds := m["sluice-json"], m["debezium"], m["debezium-schemas"]
		if sj.Rows == 0 && dz.Rows == 0 && ds.Rows == 0 {
			continue
		}
		fmt.Fprintf(tw, "| %s\t %.0f\t %s\t %s\t %.0f\t %s\t %s\t %s\t %s\t %.0f\t %s\t %s\t %s\t %s\t\n", name, sj.RowsPerSec(), perRow(sj), cpuRow(sj),
			dz.RowsPerSec(), perRow(dz), ratio(dz, sj), cpuRow(dz), cpuRatio(dz, sj), ds.RowsPerSec(), perRow(ds), ratio(ds, sj), cpuRow(ds), cpuRatio(ds, sj))
	}
	tw.Flush()

	// Debezium itself beside sluice's debezium format: each in steady
	// state (first row to last) and with its start-up (process start to
	// the last row: the JVM's class loading and warm-up, sluice's connect
	// and preflight), CPU per row and peak memory of each process.
	wall := func(r Result) float64 {
		if r.Seconds == 0 {
			return 0
		}
		return float64(r.Rows) / r.Seconds
	}
	header := false
	for _, name := range order {
		m := by[name]
		for _, pair := range [][2]string{{"debezium", "dbz-embedded"}, {"debezium-schemas", "dbz-embedded-schemas"}} {
			sl, dbz := m[pair[0]], m[pair[1]]
			if dbz.Rows == 0 {
				continue
			}
			if !header {
				fmt.Fprintln(w)
				tw = tabwriter.NewWriter(w, 0, 0, 1, ' ', tabwriter.Debug)
				fmt.Fprintln(tw, "| range	 format	 sluice rows/s steady	 with start-up	 CPU ns/row	 max RSS MiB	 Debezium rows/s steady	 with start-up	 start-up s	 CPU ns/row	 max RSS MiB	 rows/s sluice/Debezium	 CPU Debezium/sluice	")
				fmt.Fprintln(tw, "|---	---	---	---	---	---	---	---	---	---	---	---	---	")
				header = true
			}
			fmt.Fprintf(tw, "| %s	 %s	 %.0f	 %.0f	 %s	 %d	 %.0f	 %.0f	 %.2f	 %s	 %d	 %s	 %s	\n", name, pair[0],
				sl.RowsPerSec(), wall(sl), cpuRow(sl), sl.MaxRSS>>20, dbz.RowsPerSec(), wall(dbz), dbz.StartupSeconds, cpuRow(dbz), dbz.MaxRSS>>20,
				ratio(sl, dbz), cpuRatio(dbz, sl))
		}
	}
	if header {
		tw.Flush()
	}
}

// masterPos is the server's current binlog position.
func masterPos(ctx context.Context, db *throwaway.Server) (position.Position, error) {
	c, err := db.Conn(ctx)
	if err != nil {
		return position.Position{}, err
	}
	defer c.Close()
	return binlog.BinlogPosition(c)
}

// gtidAt is the server's GTID state at p.
func gtidAt(ctx context.Context, db *throwaway.Server, p position.Position) (string, error) {
	c, err := db.Conn(ctx)
	if err != nil {
		return "", err
	}
	defer c.Close()
	return binlog.GTIDAt(c, p)
}
