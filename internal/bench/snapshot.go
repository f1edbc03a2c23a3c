package bench

// The snapshot benchmark: a consistent snapshot of the libslave tables
// (short_table and long_table) taken by `sluice tail --snapshot only`, to
// --format none and to a Debezium JSON file, measured in the same run as
// the server's own dump tool (mariadb-dump on MariaDB, mysqldump from the
// MySQL distribution on MySQL) with --quick --single-transaction of the
// same tables to /dev/null. Every reader runs in its own child process, so
// its peak memory (rusage maxrss) is its own, and every time is the
// child's wall time as the parent sees it, process start and connecting
// included, the same way for all of them. Every reader connects without
// TLS, as sluice does by default.

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/sluice-cdc/sluice/internal/bench/libslavedb"
	"github.com/sluice-cdc/sluice/internal/testenv/throwaway"
	"github.com/sluice-cdc/sluice/mysqlconn"
	"github.com/sluice-cdc/sluice/position"
)

// Snapshot readers, in the order measured and printed.
const (
	SnapshotDump = "dump"        // mariadb-dump / mysqldump --quick --single-transaction > /dev/null
	SnapshotNone = "sluice-none" // sluice tail --snapshot only --format none
	SnapshotJSON = "sluice-json" // sluice tail --snapshot only --format sluice > file
	// SnapshotDbz is sluice writing what Debezium writes:
	// sluice tail --snapshot only --format debezium > file.
	SnapshotDbz = "sluice-dbz"
	// SnapshotDbzEmbedded is Debezium itself: Debezium Embedded's initial
	// snapshot (snapshot.mode=initial_only), each value by JsonConverter
	// without schemas, to a file (dbzSnapshotCmd).
	SnapshotDbzEmbedded = "dbz-embedded"
)

// SnapshotModes are the readers measured by default, the peer first.
var SnapshotModes = []string{SnapshotDump, SnapshotNone, SnapshotJSON}

// SnapshotAllModes are every reader SnapshotOptions.Modes may name:
// SnapshotModes, then sluice beside Debezium writing the same JSON.
var SnapshotAllModes = []string{SnapshotDump, SnapshotNone, SnapshotJSON, SnapshotDbz, SnapshotDbzEmbedded}

// sluiceReader tells sluice's readers from the peers.
func sluiceReader(mode string) bool { return mode != SnapshotDump && mode != SnapshotDbzEmbedded }

// DumpName is the name of the flavor's dump tool, the peer measured:
// "mariadb-dump" or "mysqldump".
func DumpName(flavor position.Flavor) string {
	if flavor == position.MySQL {
		return "mysqldump"
	}
	return "mariadb-dump"
}

// readerName is how a reader is printed: the dump by its tool's name.
func readerName(flavor position.Flavor, mode string) string {
	if mode == SnapshotDump {
		return DumpName(flavor)
	}
	return mode
}

// SnapshotMemoryLimit is the peak memory sluice must stay under.
const SnapshotMemoryLimit = 256 << 20

// SnapshotBlockedLimit is the longest sluice's consistent snapshot may
// hold writers back on an idle server.
const SnapshotBlockedLimit = 100 * time.Millisecond

// SnapshotTables are the tables written by PrepareSnapshot: their rows
// and their size in the server.
type SnapshotTables struct {
	Flavor              position.Flavor
	ShortRows, LongRows int64
	// ShortBytes and LongBytes are the tables' InnoDB data size
	// (information_schema.TABLES.DATA_LENGTH after ANALYZE TABLE): the
	// bytes of MiB/s, the same for every reader.
	ShortBytes, LongBytes int64
}

// SnapshotCase is one set of tables snapshotted together.
type SnapshotCase struct {
	Name   string
	Tables []string // table names in database bench
	Rows   int64    // rows in those tables
	Bytes  int64    // their data size in the server
}

// Cases are each table alone, then both together.
func (t SnapshotTables) Cases() []SnapshotCase {
	return []SnapshotCase{
		{Name: "short_table", Tables: []string{"short_table"}, Rows: t.ShortRows, Bytes: t.ShortBytes},
		{Name: "long_table", Tables: []string{"long_table"}, Rows: t.LongRows, Bytes: t.LongBytes},
		{Name: "both", Tables: []string{"short_table", "long_table"}, Rows: t.ShortRows + t.LongRows, Bytes: t.ShortBytes + t.LongBytes},
	}
}

// SnapshotOptions control the snapshot benchmark.
type SnapshotOptions struct {
	// Modes are the readers measured, in this order (SnapshotAllModes;
	// default SnapshotModes).
	Modes    []string
	Parallel int    // sluice's --snapshot-parallel (default 2)
	Chunk    int    // sluice's --snapshot-chunk (0: sluice's default)
	Runs     int    // runs per reader and case; the fastest is kept (default 1)
	Self     string // path of the sluice binary whose tail command is measured
	// ProfileDir, when set, receives a CPU profile of every sluice run
	// (CASE-MODE.prof).
	ProfileDir string
	// NoQuietWait skips waiting, before each run, for the machine to be
	// idle (for tests; see waitQuiet).
	NoQuietWait bool
	Log         io.Writer
}

// SnapshotResult is one measurement: the fastest of the runs.
type SnapshotResult struct {
	Case    string
	Mode    string
	Rows    int64   // rows in the tables (sluice: the rows it reported, checked equal)
	Bytes   int64   // the tables' data size in the server (SnapshotCase.Bytes)
	Seconds float64 // wall time of the child process
	// OwnSeconds is the time sluice or Debezium reports itself (from its
	// start, for Debezium the JVM's, to the end of the snapshot); 0 for
	// mariadb-dump.
	OwnSeconds float64
	// SteadySeconds runs from the first rows delivered (FirstRows of
	// them) to the last, for sluice and Debezium: the rate once started,
	// without the process's start-up, connecting and (Debezium) the
	// schema read.
	SteadySeconds float64
	FirstRows     int64
	// MaxRSS is the reader's peak resident memory, in bytes: its rusage
	// maxrss, or where that is no more than this process's own peak, the
	// highest VmHWM sampled while it ran (see peakRSS).
	MaxRSS int64
	// CPU is the user and system CPU time of the reader's process.
	CPU      float64
	OutBytes int64 // size of the JSON file written; 0 for the readers to /dev/null
	// ServerCPU is the CPU time the server process spent during the run
	// (Linux; 0 elsewhere): the cost a reader puts on the server.
	ServerCPU float64
	// Method is how sluice's snapshot was made consistent
	// (snapshot.Result.Method: backup-stage, global-read-lock, ...);
	// empty for the dump.
	Method string
	// Blocked is how long sluice's snapshot held writers back
	// (snapshot.Result.Blocked), the longest over the runs; 0 for the dump.
	Blocked time.Duration
}

// MiBPerSec is the tables' data size over wall time.
func (r SnapshotResult) MiBPerSec() float64 {
	if r.Seconds <= 0 {
		return 0
	}
	return float64(r.Bytes) / (1 << 20) / r.Seconds
}

// RowsPerSec is rows over wall time.
func (r SnapshotResult) RowsPerSec() float64 {
	if r.Seconds <= 0 {
		return 0
	}
	return float64(r.Rows) / r.Seconds
}

// SteadyRowsPerSec is the rate after the first rows (0 where not
// reported: the dump).
func (r SnapshotResult) SteadyRowsPerSec() float64 {
	if r.SteadySeconds <= 0 {
		return 0
	}
	return float64(r.Rows-r.FirstRows) / r.SteadySeconds
}

// rowBatch is the rows written per INSERT … SELECT, so that no single
// transaction grows too large.
const rowBatch = 1_000_000

// SnapshotServerOptions are the snapshot benchmark server's settings: a
// buffer pool large enough to hold both tables, room for the load's
// transactions, and quick flushing of its dirty pages (see settle).
func SnapshotServerOptions(flavor position.Flavor) throwaway.Options {
	redo := "--innodb-log-file-size=1G"
	if flavor == position.MySQL {
		redo = "--innodb-redo-log-capacity=2G"
	}
	return throwaway.Options{Flavor: flavor,
		Extra: []string{"--innodb-buffer-pool-size=2G", redo, "--max-allowed-packet=1G",
			"--innodb-io-capacity=20000", "--innodb-io-capacity-max=40000"}}
}

// PrepareSnapshot starts a throwaway server of the flavor (see
// SnapshotServerOptions) and writes bench.short_table and bench.long_table,
// rowBatch rows per INSERT … SELECT, without binary logging them. The
// caller must Close the server.
func PrepareSnapshot(ctx context.Context, flavor position.Flavor, shortRows, longRows int64, log io.Writer) (*throwaway.Server, SnapshotTables, error) {
	sizes := SnapshotTables{Flavor: flavor}
	if shortRows < 1 || longRows < 1 {
		return nil, sizes, fmt.Errorf("bench snapshot: table sizes must be at least 1 (short %d, long %d)", shortRows, longRows)
	}
	start := time.Now()
	db, err := throwaway.Start(ctx, SnapshotServerOptions(flavor))
	if err != nil {
		return nil, sizes, fmt.Errorf("bench snapshot: starting %s: %w", flavor, err)
	}
	fmt.Fprintf(log, "%s started on %s (%s) in %.1fs\n", db.Version(), db.Addr(), db.Dir, time.Since(start).Seconds())
	fail := func(err error) (*throwaway.Server, SnapshotTables, error) {
		db.Close()
		return nil, SnapshotTables{}, err
	}
	conn, err := db.Conn(ctx)
	if err != nil {
		return fail(err)
	}
	defer conn.Close()
	setup := []string{
		"CREATE DATABASE bench",
		"USE bench",
		// The long table's NOT NULL columns without defaults take their
		// implicit defaults, as in the libslave article.
		"SET SESSION sql_mode = ''",
		// The snapshot reads tables, not the binlog: loading them need not
		// log 12M rows.
		"SET SESSION sql_log_bin = 0",
		libslavedb.ShortTable,
		tableDDL(flavor, libslavedb.LongTable),
	}
	if flavor == position.MySQL {
		// information_schema.TABLES otherwise shows sizes cached for a day.
		setup = append(setup, "SET SESSION information_schema_stats_expiry = 0")
	}
	for _, q := range setup {
		if _, err := conn.Execute(q); err != nil {
			return fail(fmt.Errorf("bench snapshot: %s: %w", abbrevSQL(q), err))
		}
	}
	load := []struct {
		table string
		rows  int64
		sql   string // with the FROM clause of the sequence for %s
		bytes *int64
	}{
		{"short_table", shortRows, "INSERT INTO short_table (field1, field2) SELECT seq, seq FROM %s", &sizes.ShortBytes},
		{"long_table", longRows, "INSERT INTO long_table (field5, field25) SELECT 'short_string', 'another_short_string' FROM %s", &sizes.LongBytes},
	}
	for _, l := range load {
		t0 := time.Now()
		var written int64
		for lo := int64(1); lo <= l.rows; lo += rowBatch {
			if err := ctx.Err(); err != nil {
				return fail(err)
			}
			hi := min(lo+rowBatch-1, l.rows)
			from, seqSetup := db.SeqFrom(int(lo), int(hi))
			for _, q := range seqSetup {
				if _, err := conn.Execute(q); err != nil {
					return fail(fmt.Errorf("bench snapshot: %s: %w", q, err))
				}
			}
			res, err := conn.Execute(fmt.Sprintf(l.sql, from))
			if err != nil {
				return fail(fmt.Errorf("bench snapshot: writing rows %d..%d of %s: %w", lo, hi, l.table, err))
			}
			written += int64(res.AffectedRows())
			el := time.Since(t0).Seconds()
			fmt.Fprintf(log, "  %s: %d/%d rows (%.0f%%) %.1fs, %.0f rows/s\n", l.table, written, l.rows, 100*float64(written)/float64(l.rows), el, float64(written)/el)
		}
		if written != l.rows {
			return fail(fmt.Errorf("bench snapshot: wrote %d rows into %s, want %d", written, l.table, l.rows))
		}
		if _, err := conn.Execute("ANALYZE TABLE " + l.table); err != nil {
			return fail(fmt.Errorf("bench snapshot: ANALYZE TABLE %s: %w", l.table, err))
		}
		if *l.bytes, err = tableBytes(conn, l.table); err != nil {
			return fail(err)
		}
		fmt.Fprintf(log, "wrote %s: %d rows (%.1f MiB) in %.1fs\n", l.table, written, float64(*l.bytes)/(1<<20), time.Since(t0).Seconds())
	}
	sizes.ShortRows, sizes.LongRows = shortRows, longRows
	for _, c := range sizes.Cases()[:2] {
		n, err := countTable(conn, c.Name)
		if err != nil {
			return fail(err)
		}
		if n != c.Rows {
			return fail(fmt.Errorf("bench snapshot: bench.%s has %d rows, want %d", c.Name, n, c.Rows))
		}
	}
	settle(ctx, conn, log)
	fmt.Fprintf(log, "prepared in %.1fs\n", time.Since(start).Seconds())
	return db, sizes, nil
}

// tableBytes is the InnoDB data size of bench.table.
func tableBytes(c *mysqlconn.Conn, table string) (int64, error) {
	rs, err := c.Execute("SELECT DATA_LENGTH FROM information_schema.TABLES WHERE TABLE_SCHEMA = 'bench' AND TABLE_NAME = ?", table)
	if err != nil {
		return 0, fmt.Errorf("bench snapshot: size of bench.%s: %w", table, err)
	}
	defer rs.Close()
	if rs.RowNumber() != 1 {
		return 0, fmt.Errorf("bench snapshot: information_schema.TABLES has no bench.%s", table)
	}
	return rs.GetInt(0, 0)
}

func countTable(c *mysqlconn.Conn, table string) (int64, error) {
	rs, err := c.Execute("SELECT COUNT(*) FROM " + table)
	if err != nil {
		return 0, fmt.Errorf("bench snapshot: counting bench.%s: %w", table, err)
	}
	defer rs.Close()
	n, err := rs.GetInt(0, 0)
	return n, err
}

// settle lets InnoDB write out the pages the load dirtied, so that the
// background flushing does not compete with the readers measured. It
// stops when few dirty pages are left, when their number stops falling, or
// after a minute and a half; the benchmark runs anyway.
func settle(ctx context.Context, c *mysqlconn.Conn, log io.Writer) {
	dirty := func() int64 {
		// SHOW STATUS, not information_schema.GLOBAL_STATUS: MySQL
		// has it in performance_schema only.
		rs, err := c.Execute("SHOW GLOBAL STATUS LIKE 'Innodb_buffer_pool_pages_dirty'")
		if err != nil || rs.RowNumber() != 1 {
			return -1
		}
		defer rs.Close()
		s, _ := rs.GetString(0, 1)
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return -1
		}
		return n
	}
	rs, err := c.Execute("SELECT @@GLOBAL.innodb_max_dirty_pages_pct")
	if err != nil {
		return
	}
	old, _ := rs.GetString(0, 0)
	old = strings.Clone(old)
	rs.Close()
	if _, err := c.Execute("SET GLOBAL innodb_max_dirty_pages_pct = 0"); err != nil {
		return
	}
	defer c.Execute("SET GLOBAL innodb_max_dirty_pages_pct = " + old)
	t0 := time.Now()
	n := dirty()
	fmt.Fprintf(log, "waiting for InnoDB to flush %d dirty pages...\n", n)
	last, lastAt := n, t0
	for n > 1000 && time.Since(t0) < 90*time.Second && ctx.Err() == nil {
		time.Sleep(500 * time.Millisecond)
		if n = dirty(); n < 0 {
			return
		}
		if time.Since(lastAt) >= 10*time.Second {
			if n > last*99/100 {
				break // not falling
			}
			fmt.Fprintf(log, "  %d dirty pages\n", n)
			last, lastAt = n, time.Now()
		}
	}
	fmt.Fprintf(log, "InnoDB flushed the load in %.1fs (%d dirty pages left)\n", time.Since(t0).Seconds(), n)
}

// DumpVersion is the first line of the server's dump tool's --version,
// e.g. "mysqldump  Ver 9.7.4 for Linux on x86_64 (...)".
func DumpVersion(db *throwaway.Server) (string, error) {
	cmd, err := db.Command(throwaway.ToolDump, "--version")
	if err != nil {
		return "", err
	}
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("bench snapshot: %s --version: %w", DumpName(db.Flavor), err)
	}
	line, _, _ := strings.Cut(strings.TrimSpace(string(out)), "\n")
	return line, nil
}

// dumpCommand is the server's dump tool reading the tables of database
// bench to stdout the way the benchmark measures it: --quick
// --single-transaction, over TCP without TLS (as sluice connects by
// default), stopped when ctx ends.
func dumpCommand(ctx context.Context, db *throwaway.Server, tables []string) (*exec.Cmd, []string, error) {
	args := []string{"--quick", "--single-transaction", "-h127.0.0.1", "-P", strconv.Itoa(db.Port), "-u" + db.User, "-p" + db.Password}
	if db.Flavor == position.MySQL {
		// caching_sha2_password without TLS needs the server's RSA key.
		args = append(args, "--ssl-mode=DISABLED", "--get-server-public-key")
	} else {
		args = append(args, "--skip-ssl")
	}
	args = append(append(args, "bench"), tables...)
	c, err := db.Command(throwaway.ToolDump, args...)
	if err != nil {
		return nil, nil, err
	}
	cmd := exec.CommandContext(ctx, c.Path, c.Args[1:]...)
	cmd.Env, cmd.Dir = c.Env, c.Dir
	return cmd, args, nil
}

// RunSnapshot measures every reader on every case, the fastest of
// opts.Runs. Runs of the readers alternate so that a slow spell of the
// machine does not fall on one reader only.
func RunSnapshot(ctx context.Context, db *throwaway.Server, sizes SnapshotTables, opts SnapshotOptions) ([]SnapshotResult, error) {
	if opts.Parallel <= 0 {
		opts.Parallel = 2
	}
	if opts.Log == nil {
		opts.Log = io.Discard
	}
	if len(opts.Modes) == 0 {
		opts.Modes = SnapshotModes
	}
	for _, m := range opts.Modes {
		if !slices.Contains(SnapshotAllModes, m) {
			return nil, fmt.Errorf("bench snapshot: unknown reader %q (readers: %s)", m, strings.Join(SnapshotAllModes, ", "))
		}
	}
	tmp, err := os.MkdirTemp("", "sluice-bench-snapshot-")
	if err != nil {
		return nil, fmt.Errorf("bench snapshot: %w", err)
	}
	defer os.RemoveAll(tmp)
	var results []SnapshotResult
	for _, c := range sizes.Cases() {
		best := map[string]SnapshotResult{}
		for i := 0; i < max(opts.Runs, 1); i++ {
			for _, mode := range opts.Modes {
				res, err := runSnapshotChild(ctx, db, c, mode, tmp, opts)
				// Write out the file just written (and removed) now,
				// rather than during the next run.
				syscall.Sync()
				if err != nil {
					return results, fmt.Errorf("bench snapshot: %s of %s: %w", mode, c.Name, err)
				}
				fmt.Fprintf(opts.Log, "%s %-11s %-15s run %d: %10d rows %8.3fs %11.0f rows/s  max RSS %4d MiB  CPU %6.2fs  server CPU %6.2fs%s%s\n",
					db.Flavor, c.Name, readerName(db.Flavor, mode), i+1, res.Rows, res.Seconds, res.RowsPerSec(), res.MaxRSS>>20, res.CPU, res.ServerCPU, blockedNote(res), outSize(res))
				b, ok := best[mode]
				blocked := max(res.Blocked, b.Blocked)
				if !ok || res.Seconds < b.Seconds {
					b = res
				}
				b.Blocked = blocked // the longest of the runs, not the fastest run's
				best[mode] = b
			}
		}
		for _, mode := range opts.Modes {
			results = append(results, best[mode])
		}
	}
	return results, nil
}

func blockedNote(r SnapshotResult) string {
	if r.Method == "" {
		return ""
	}
	return fmt.Sprintf("  %s, writers blocked %.1f ms", r.Method, ms(r.Blocked))
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func outSize(r SnapshotResult) string {
	if r.OutBytes == 0 {
		return ""
	}
	return fmt.Sprintf("  output %.0f MB", float64(r.OutBytes)/1e6)
}

// runSnapshotChild runs one reader on one case in a child process.
func runSnapshotChild(ctx context.Context, db *throwaway.Server, c SnapshotCase, mode, tmp string, opts SnapshotOptions) (SnapshotResult, error) {
	res := SnapshotResult{Case: c.Name, Mode: mode, Rows: c.Rows, Bytes: c.Bytes}
	var (
		cmd  *exec.Cmd
		bin  string
		args []string
		out  *os.File
		file string
	)
	devnull, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		return res, err
	}
	defer devnull.Close()
	out = devnull
	switch mode {
	case SnapshotDump:
		bin = DumpName(db.Flavor)
		if cmd, args, err = dumpCommand(ctx, db, c.Tables); err != nil {
			return res, err
		}
	case SnapshotDbzEmbedded:
		bin = "debezium"
		file = filepath.Join(tmp, c.Name+".jsonl")
		defer os.Remove(file)
		var cleanup func()
		if cmd, cleanup, err = dbzSnapshotCmd(ctx, db, c.Tables, c.Rows, file); err != nil {
			return res, err
		}
		defer cleanup()
		args = cmd.Args[1:]
		out = nil // its summary on stdout, its records to file
	case SnapshotNone, SnapshotJSON, SnapshotDbz:
		bin = opts.Self
		tables := make([]string, len(c.Tables))
		for i, t := range c.Tables {
			tables[i] = "bench." + t
		}
		format := map[string]string{SnapshotNone: "none", SnapshotJSON: "sluice", SnapshotDbz: "debezium"}[mode]
		if mode != SnapshotNone {
			file = filepath.Join(tmp, c.Name+".jsonl")
			if out, err = os.Create(file); err != nil {
				return res, err
			}
			defer os.Remove(file)
			defer out.Close()
		}
		args = []string{"tail", "--source", db.URL(), "--tables", strings.Join(tables, ","), "--snapshot", "only",
			"--snapshot-parallel", strconv.Itoa(opts.Parallel), "--format", format}
		if opts.Chunk > 0 {
			args = append(args, "--snapshot-chunk", strconv.Itoa(opts.Chunk))
		}
		cmd = exec.CommandContext(ctx, bin, args...)
	default:
		return res, fmt.Errorf("unknown reader %q", mode)
	}
	var stderr, stdout strings.Builder
	cmd.Stdout, cmd.Stderr = out, &stderr
	if out == nil {
		cmd.Stdout = &stdout
	}
	if opts.ProfileDir != "" && sluiceReader(mode) {
		cmd.Env = append(os.Environ(), "SLUICE_CPUPROFILE="+filepath.Join(opts.ProfileDir, c.Name+"-"+mode+".prof"))
	}
	if !opts.NoQuietWait {
		waitQuiet(ctx, opts.Log)
	}
	cpu0 := procCPU(db.Pid())
	t0 := time.Now()
	var sampled int64
	if err = cmd.Start(); err == nil {
		stop := sampleHWM(cmd.Process.Pid)
		err = cmd.Wait()
		sampled = stop()
	}
	res.Seconds = time.Since(t0).Seconds()
	if cpu0 >= 0 {
		if cpu1 := procCPU(db.Pid()); cpu1 >= cpu0 {
			res.ServerCPU = cpu1 - cpu0
		}
	}
	if err != nil {
		return res, fmt.Errorf("%s %s: %w\n%s", bin, strings.Join(redact(args, db.Password), " "), err, lastLines(stderr.String(), 20))
	}
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		res.MaxRSS = peakRSS(ru.Maxrss*1024, sampled) // kilobytes on Linux
		res.CPU = time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
	}
	if mode == SnapshotDump {
		return res, nil
	}
	// The summary is the line starting "rows=": sluice's on stderr (the
	// log lines around it carry rows= fields of their own), Debezium's
	// (the harness's Bench) on stdout.
	who, text := bin+" tail", stderr.String()
	if mode == SnapshotDbzEmbedded {
		who, text = "Debezium", stdout.String()
	}
	summary := ""
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), "rows=") {
			summary = sc.Text()
		}
	}
	if summary == "" {
		return res, fmt.Errorf("no summary line from %s:\n%s", who, lastLines(text+stderr.String(), 20))
	}
	res.Rows = -1
	for _, f := range strings.Fields(summary) {
		k, v, _ := strings.Cut(f, "=")
		switch k {
		case "rows":
			res.Rows, _ = strconv.ParseInt(v, 10, 64)
		case "seconds":
			res.OwnSeconds, _ = strconv.ParseFloat(v, 64)
		case "steady_seconds":
			res.SteadySeconds, _ = strconv.ParseFloat(v, 64)
		case "first_rows":
			res.FirstRows, _ = strconv.ParseInt(v, 10, 64)
		case "snapshot_method":
			res.Method = v
		case "writers_blocked_seconds":
			sec, _ := strconv.ParseFloat(v, 64)
			res.Blocked = time.Duration(sec * float64(time.Second))
		}
	}
	if res.Method == "" && sluiceReader(mode) {
		return res, fmt.Errorf("the summary of %s names no snapshot method (summary: %s)", who, summary)
	}
	if res.Rows != c.Rows {
		return res, fmt.Errorf("%s read %d rows, want %d (summary: %s)", who, res.Rows, c.Rows, summary)
	}
	if file != "" {
		fi, err := os.Stat(file)
		if err != nil {
			return res, err
		}
		res.OutBytes = fi.Size()
		if res.OutBytes == 0 {
			return res, fmt.Errorf("%s wrote an empty %s", who, file)
		}
	}
	return res, nil
}

// waitQuiet waits, up to half a minute, until the machine's CPUs were
// at least 90% idle for a second, so that a run does not start in the
// middle of someone else's work (the machines we measure on are shared).
func waitQuiet(ctx context.Context, log io.Writer) {
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		idle0, total0 := procStat()
		time.Sleep(time.Second)
		idle1, total1 := procStat()
		if total1 <= total0 || (idle1-idle0)*10 >= (total1-total0)*9 {
			return
		}
	}
	fmt.Fprintln(log, "  (the machine was still busy after 30 s; measuring anyway)")
}

// procStat returns the idle and total CPU time of the machine so far,
// in clock ticks, from /proc/stat (0, 0 where there is none).
func procStat() (idle, total int64) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line) // cpu user nice system idle iowait irq softirq steal ...
	for i := 1; i < len(f) && i <= 8; i++ {
		n, _ := strconv.ParseInt(f[i], 10, 64)
		total += n
		if i == 4 || i == 5 {
			idle += n
		}
	}
	return idle, total
}

// peakRSS is a child's peak resident memory from its rusage maxrss and
// the highest VmHWM sampled while it ran. Go starts children with
// vfork (CLONE_VM), so on Linux a child's maxrss is at least this
// process's own peak when it was started (the kernel takes the shared
// memory's high-water mark into the child's at exec): where maxrss is no
// more than that, it tells nothing of the child, and the sampled peak,
// a little low at worst, is the better figure.
func peakRSS(maxrss, sampled int64) int64 {
	if self := hwm("self"); sampled > 0 && self > 0 && maxrss <= self {
		return sampled
	}
	return maxrss
}

// sampleHWM samples the VmHWM of process pid every 10 ms until stop is
// called, which returns the highest seen (0 if none).
func sampleHWM(pid int) (stop func() int64) {
	var peak atomic.Int64
	done := make(chan struct{})
	finished := make(chan struct{})
	who := strconv.Itoa(pid)
	go func() {
		defer close(finished)
		t := time.NewTicker(10 * time.Millisecond)
		defer t.Stop()
		for {
			if n := hwm(who); n > peak.Load() {
				peak.Store(n)
			}
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	}()
	return func() int64 {
		close(done)
		<-finished
		return peak.Load()
	}
}

// hwm is the VmHWM (peak resident memory) of /proc/<who>, in bytes; 0
// where there is none (not Linux, or the process has exited).
func hwm(who string) int64 {
	b, err := os.ReadFile("/proc/" + who + "/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			f := strings.Fields(v) // "1234 kB"
			if len(f) == 2 && f[1] == "kB" {
				n, _ := strconv.ParseInt(f[0], 10, 64)
				return n << 10
			}
		}
	}
	return 0
}

// procCPU is the user and system CPU seconds of process pid so far, from
// /proc (-1 where there is none).
func procCPU(pid int) float64 {
	if pid <= 0 {
		return -1
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return -1
	}
	// The fields after the command (which may hold spaces) in parentheses:
	// state is field 3, utime 14 and stime 15, in clock ticks (USER_HZ, 100).
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return -1
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return -1
	}
	u, err1 := strconv.ParseInt(f[11], 10, 64)
	k, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return -1
	}
	return float64(u+k) / 100
}

func redact(args []string, password string) []string {
	out := make([]string, len(args))
	for i, a := range args {
		out[i] = strings.ReplaceAll(a, password, "***")
	}
	return out
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func abbrevSQL(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 80 {
		return s[:80] + "…"
	}
	return s
}

// SnapshotVerdict checks the three criteria on one server: sluice
// (to --format none and to a file) at least as fast as the server's dump
// tool on every case, its peak memory within SnapshotMemoryLimit, and its
// consistent snapshot holding writers back no longer than
// SnapshotBlockedLimit. It returns one line per criterion and whether all
// hold.
func SnapshotVerdict(flavor position.Flavor, results []SnapshotResult) (lines []string, ok bool) {
	dump := map[string]SnapshotResult{}
	for _, r := range results {
		if r.Mode == SnapshotDump {
			dump[r.Case] = r
		}
	}
	worst, worstAt := 0.0, ""
	var maxRSS int64
	var blocked time.Duration
	rssAt, blockedAt := "", ""
	for _, r := range results {
		if !sluiceReader(r.Mode) {
			continue
		}
		if d, ok := dump[r.Case]; ok && d.RowsPerSec() > 0 {
			if ratio := r.RowsPerSec() / d.RowsPerSec(); worstAt == "" || ratio < worst {
				worst, worstAt = ratio, r.Case+" "+r.Mode
			}
		}
		if r.MaxRSS > maxRSS {
			maxRSS, rssAt = r.MaxRSS, r.Case+" "+r.Mode
		}
		if blockedAt == "" || r.Blocked > blocked {
			blocked, blockedAt = r.Blocked, r.Case+" "+r.Mode+", "+r.Method
		}
	}
	fast := worstAt != "" && worst >= 1
	small := rssAt != "" && maxRSS <= SnapshotMemoryLimit
	brief := blockedAt != "" && blocked <= SnapshotBlockedLimit
	dn := DumpName(flavor)
	lines = append(lines,
		fmt.Sprintf("sluice at least as fast as %s everywhere: %s (lowest ratio %.2f×, %s)", dn, yesNo(fast), worst, worstAt),
		fmt.Sprintf("sluice peak memory ≤ %d MiB everywhere: %s (highest %d MiB, %s)", SnapshotMemoryLimit>>20, yesNo(small), maxRSS>>20, rssAt),
		fmt.Sprintf("writers blocked by sluice's consistent snapshot ≤ %.0f ms everywhere: %s (longest %.1f ms, %s)", ms(SnapshotBlockedLimit), yesNo(brief), ms(blocked), blockedAt))
	return lines, fast && small && brief
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "NO"
}

// ReportSnapshot prints the results on one server as a Markdown table,
// each reader with its ratio to the dump tool on the same tables, and
// where Debezium ran, sluice writing Debezium's JSON (SnapshotDbz) beside
// it: rows/s over Debezium's and Debezium's CPU over sluice's.
func ReportSnapshot(w io.Writer, flavor position.Flavor, results []SnapshotResult) {
	dump, dbz := map[string]SnapshotResult{}, map[string]SnapshotResult{}
	for _, r := range results {
		switch r.Mode {
		case SnapshotDump:
			dump[r.Case] = r
		case SnapshotDbzEmbedded:
			dbz[r.Case] = r
		}
	}
	tw := tabwriter.NewWriter(w, 0, 0, 1, ' ', tabwriter.Debug)
	fmt.Fprintf(tw, "| tables\t reader\t rows\t table MiB\t seconds\t rows/s\t steady rows/s\t MiB/s\t ÷ %s\t max RSS MiB\t writers blocked ms\t CPU s\t server CPU s\t output MB\t\n", DumpName(flavor))
	fmt.Fprintln(tw, "|---\t---\t---:\t---:\t---:\t---:\t---:\t---:\t---:\t---:\t---:\t---:\t---:\t---:\t")
	for _, r := range results {
		ratio, out, blocked, steady := "-", "-", "-", "-"
		if d, ok := dump[r.Case]; ok && r.Mode != SnapshotDump && d.RowsPerSec() > 0 {
			ratio = fmt.Sprintf("%.2f×", r.RowsPerSec()/d.RowsPerSec())
		}
		if r.OutBytes > 0 {
			out = fmt.Sprintf("%.0f", float64(r.OutBytes)/1e6)
		}
		if r.Method != "" {
			blocked = fmt.Sprintf("%.1f (%s)", ms(r.Blocked), r.Method)
		}
		if v := r.SteadyRowsPerSec(); v > 0 {
			steady = fmt.Sprintf("%.0f", v)
		}
		fmt.Fprintf(tw, "| %s\t %s\t %d\t %.1f\t %.2f\t %.0f\t %s\t %.1f\t %s\t %d\t %s\t %.2f\t %.2f\t %s\t\n",
			r.Case, readerName(flavor, r.Mode), r.Rows, float64(r.Bytes)/(1<<20), r.Seconds, r.RowsPerSec(), steady, r.MiBPerSec(), ratio, r.MaxRSS>>20, blocked, r.CPU, r.ServerCPU, out)
	}
	tw.Flush()
	if len(dbz) == 0 {
		return
	}
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 0, 1, ' ', tabwriter.Debug)
	fmt.Fprintln(tw, "| tables\t rows/s sluice ÷ Debezium\t steady rows/s sluice ÷ Debezium\t CPU Debezium ÷ sluice\t max RSS Debezium ÷ sluice\t output bytes Debezium ÷ sluice\t")
	fmt.Fprintln(tw, "|---\t---:\t---:\t---:\t---:\t---:\t")
	for _, r := range results {
		d, ok := dbz[r.Case]
		if r.Mode != SnapshotDbz || !ok {
			continue
		}
		fmt.Fprintf(tw, "| %s\t %s\t %s\t %s\t %s\t %s\t\n", r.Case, times(r.RowsPerSec(), d.RowsPerSec()),
			times(r.SteadyRowsPerSec(), d.SteadyRowsPerSec()), times(d.CPU, r.CPU), times(float64(d.MaxRSS), float64(r.MaxRSS)),
			times(float64(d.OutBytes), float64(r.OutBytes)))
	}
	tw.Flush()
}

// times is a over b as a ratio ("-" where b is not positive).
func times(a, b float64) string {
	if !(b > 0) {
		return "-"
	}
	return fmt.Sprintf("%.2f×", a/b)
}
