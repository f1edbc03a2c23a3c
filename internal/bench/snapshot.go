package bench

// The snapshot benchmark: a consistent snapshot of the libslave tables
// (short_table and long_table) taken by `sluice tail --snapshot only`, to
// --format none and to a Debezium JSON file, measured in the same run as
// `mariadb-dump --quick --single-transaction` of the same tables to
// /dev/null. Every reader runs in its own child process, so its peak memory
// (rusage maxrss) is its own, and every time is the child's wall time as the
// parent sees it, process start and connecting included, the same way for
// all of them.

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/go-mysql-org/go-mysql/client"

	"github.com/sluice-cdc/sluice/internal/testenv"
)

// Snapshot readers, in the order measured and printed.
const (
	SnapshotDump     = "mariadb-dump"    // mariadb-dump --quick --single-transaction > /dev/null
	SnapshotNone     = "sluice-none"     // sluice tail --snapshot only --format none
	SnapshotDebezium = "sluice-debezium" // sluice tail --snapshot only --format debezium > file
)

// SnapshotModes are the readers measured, the peer first.
var SnapshotModes = []string{SnapshotDump, SnapshotNone, SnapshotDebezium}

// SnapshotMemoryLimit is the peak memory sluice must stay under.
const SnapshotMemoryLimit = 256 << 20

// SnapshotTables are the sizes of the tables written by PrepareSnapshot.
type SnapshotTables struct {
	ShortRows, LongRows int64
}

// SnapshotCase is one set of tables snapshotted together.
type SnapshotCase struct {
	Name   string
	Tables []string // table names in database bench
	Rows   int64    // rows in those tables
}

// Cases are each table alone, then both together.
func (t SnapshotTables) Cases() []SnapshotCase {
	return []SnapshotCase{
		{Name: "short_table", Tables: []string{"short_table"}, Rows: t.ShortRows},
		{Name: "long_table", Tables: []string{"long_table"}, Rows: t.LongRows},
		{Name: "both", Tables: []string{"short_table", "long_table"}, Rows: t.ShortRows + t.LongRows},
	}
}

// SnapshotOptions control the snapshot benchmark.
type SnapshotOptions struct {
	Parallel int    // sluice's --snapshot-parallel (default 2)
	Chunk    int    // sluice's --snapshot-chunk (0: sluice's default)
	Runs     int    // runs per reader and case; the fastest is kept (default 1)
	Self     string // path of the sluice binary to run
	Dump     string // path of mariadb-dump (default: found on PATH)
	// ProfileDir, when set, receives a CPU profile of every sluice run
	// (CASE-MODE.prof).
	ProfileDir string
	Log        io.Writer
}

// SnapshotResult is one measurement: the fastest of the runs.
type SnapshotResult struct {
	Case    string
	Mode    string
	Rows    int64   // rows in the tables (sluice: the rows it reported, checked equal)
	Seconds float64 // wall time of the child process
	// OwnSeconds is the time sluice reports itself (from its start to the
	// end of the snapshot); 0 for mariadb-dump.
	OwnSeconds float64
	MaxRSS     int64 // bytes
	// CPU is the user and system CPU time of the reader's process.
	CPU      float64
	OutBytes int64 // size of the Debezium JSON file; 0 otherwise
	// ServerCPU is the CPU time mariadbd spent during the run (Linux;
	// 0 elsewhere): the cost a reader puts on the server.
	ServerCPU float64
}

// RowsPerSec is rows over wall time.
func (r SnapshotResult) RowsPerSec() float64 {
	if r.Seconds <= 0 {
		return 0
	}
	return float64(r.Rows) / r.Seconds
}

// rowBatch is the rows written per INSERT … SELECT, so that no single
// transaction grows too large.
const rowBatch = 1_000_000

// PrepareSnapshot starts a throwaway MariaDB with a buffer pool large
// enough to hold both tables and writes bench.short_table and
// bench.long_table. The caller must Close the server.
func PrepareSnapshot(ctx context.Context, shortRows, longRows int64, log io.Writer) (*testenv.Server, SnapshotTables, error) {
	var sizes SnapshotTables
	if shortRows < 1 || longRows < 1 {
		return nil, sizes, fmt.Errorf("bench snapshot: table sizes must be at least 1 (short %d, long %d)", shortRows, longRows)
	}
	start := time.Now()
	db, err := testenv.Start(ctx, testenv.Options{
		Extra: []string{"--innodb-buffer-pool-size=2G", "--innodb-log-file-size=1G", "--max-allowed-packet=1G",
			// Flush the load's dirty pages quickly (see settle).
			"--innodb-io-capacity=20000", "--innodb-io-capacity-max=40000"},
	})
	if err != nil {
		return nil, sizes, fmt.Errorf("bench snapshot: starting MariaDB: %w", err)
	}
	fmt.Fprintf(log, "MariaDB started on %s (%s) in %.1fs\n", db.Addr(), db.Dir, time.Since(start).Seconds())
	fail := func(err error) (*testenv.Server, SnapshotTables, error) {
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
		"CREATE TABLE short_table (id int NOT NULL AUTO_INCREMENT PRIMARY KEY, field1 int NOT NULL, field2 int NOT NULL) ENGINE=InnoDB",
		longTableDDL,
	}
	for _, q := range setup {
		if _, err := conn.Execute(q); err != nil {
			return fail(fmt.Errorf("bench snapshot: %s: %w", abbrevSQL(q), err))
		}
	}
	load := []struct {
		table string
		rows  int64
		sql   string // with the sequence's bounds for %d %d
	}{
		{"short_table", shortRows, "INSERT INTO short_table (field1, field2) SELECT seq, seq FROM seq_%d_to_%d"},
		{"long_table", longRows, "INSERT INTO long_table (field5, field25) SELECT 'short_string', 'another_short_string' FROM seq_%d_to_%d"},
	}
	for _, l := range load {
		t0 := time.Now()
		var written int64
		for lo := int64(1); lo <= l.rows; lo += rowBatch {
			if err := ctx.Err(); err != nil {
				return fail(err)
			}
			hi := min(lo+rowBatch-1, l.rows)
			res, err := conn.Execute(fmt.Sprintf(l.sql, lo, hi))
			if err != nil {
				return fail(fmt.Errorf("bench snapshot: writing rows %d..%d of %s: %w", lo, hi, l.table, err))
			}
			written += int64(res.AffectedRows)
			el := time.Since(t0).Seconds()
			fmt.Fprintf(log, "  %s: %d/%d rows (%.0f%%) %.1fs, %.0f rows/s\n", l.table, written, l.rows, 100*float64(written)/float64(l.rows), el, float64(written)/el)
		}
		if written != l.rows {
			return fail(fmt.Errorf("bench snapshot: wrote %d rows into %s, want %d", written, l.table, l.rows))
		}
		if _, err := conn.Execute("ANALYZE TABLE " + l.table); err != nil {
			return fail(fmt.Errorf("bench snapshot: ANALYZE TABLE %s: %w", l.table, err))
		}
		fmt.Fprintf(log, "wrote %s: %d rows in %.1fs\n", l.table, written, time.Since(t0).Seconds())
	}
	sizes = SnapshotTables{ShortRows: shortRows, LongRows: longRows}
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

func countTable(c *client.Conn, table string) (int64, error) {
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
func settle(ctx context.Context, c *client.Conn, log io.Writer) {
	dirty := func() int64 {
		rs, err := c.Execute("SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS WHERE VARIABLE_NAME = 'INNODB_BUFFER_POOL_PAGES_DIRTY'")
		if err != nil {
			return -1
		}
		defer rs.Close()
		s, _ := rs.GetString(0, 0)
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

// FindDump returns the path of mariadb-dump, or mysqldump.
func FindDump() (string, error) {
	for _, name := range []string{"mariadb-dump", "mysqldump", "/usr/bin/mariadb-dump", "/usr/local/mysql/bin/mariadb-dump"} {
		if p, err := exec.LookPath(name); err == nil {
			return p, nil
		}
	}
	return "", errors.New("bench snapshot: neither mariadb-dump nor mysqldump is on PATH (install mariadb-client)")
}

// RunSnapshot measures every reader on every case, the fastest of
// opts.Runs. Runs of the readers alternate so that a slow spell of the
// machine does not fall on one reader only.
func RunSnapshot(ctx context.Context, db *testenv.Server, sizes SnapshotTables, opts SnapshotOptions) ([]SnapshotResult, error) {
	if opts.Parallel <= 0 {
		opts.Parallel = 2
	}
	if opts.Log == nil {
		opts.Log = io.Discard
	}
	if opts.Dump == "" {
		var err error
		if opts.Dump, err = FindDump(); err != nil {
			return nil, err
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
			for _, mode := range SnapshotModes {
				res, err := runSnapshotChild(ctx, db, c, mode, tmp, opts)
				// Write out the file just written (and removed) now,
				// rather than during the next run.
				syscall.Sync()
				if err != nil {
					return results, fmt.Errorf("bench snapshot: %s of %s: %w", mode, c.Name, err)
				}
				fmt.Fprintf(opts.Log, "%-11s %-15s run %d: %10d rows %8.3fs %11.0f rows/s  max RSS %4d MiB  CPU %6.2fs  server CPU %6.2fs%s\n",
					c.Name, mode, i+1, res.Rows, res.Seconds, res.RowsPerSec(), res.MaxRSS>>20, res.CPU, res.ServerCPU, outSize(res))
				if b, ok := best[mode]; !ok || res.Seconds < b.Seconds {
					best[mode] = res
				}
			}
		}
		for _, mode := range SnapshotModes {
			results = append(results, best[mode])
		}
	}
	return results, nil
}

func outSize(r SnapshotResult) string {
	if r.OutBytes == 0 {
		return ""
	}
	return fmt.Sprintf("  output %.0f MB", float64(r.OutBytes)/1e6)
}

// runSnapshotChild runs one reader on one case in a child process.
func runSnapshotChild(ctx context.Context, db *testenv.Server, c SnapshotCase, mode, tmp string, opts SnapshotOptions) (SnapshotResult, error) {
	res := SnapshotResult{Case: c.Name, Mode: mode, Rows: c.Rows}
	var (
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
		bin = opts.Dump
		args = append([]string{"--quick", "--single-transaction", "-h127.0.0.1", "-P", strconv.Itoa(db.Port), "-u" + db.User, "-p" + db.Password, "bench"}, c.Tables...)
	case SnapshotNone, SnapshotDebezium:
		bin = opts.Self
		tables := make([]string, len(c.Tables))
		for i, t := range c.Tables {
			tables[i] = "bench." + t
		}
		format := "none"
		if mode == SnapshotDebezium {
			format = "debezium"
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
	default:
		return res, fmt.Errorf("unknown reader %q", mode)
	}
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Stdout = out
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if opts.ProfileDir != "" && mode != SnapshotDump {
		cmd.Env = append(os.Environ(), "SLUICE_CPUPROFILE="+filepath.Join(opts.ProfileDir, c.Name+"-"+mode+".prof"))
	}
	waitQuiet(ctx, opts.Log)
	cpu0 := procCPU(db.Pid())
	t0 := time.Now()
	err = cmd.Run()
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
		res.MaxRSS = ru.Maxrss * 1024 // kilobytes on Linux
		res.CPU = time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
	}
	if mode == SnapshotDump {
		return res, nil
	}
	// sluice: the summary is the stderr line starting "rows="; the log
	// lines around it carry rows= fields of their own.
	summary := ""
	sc := bufio.NewScanner(strings.NewReader(stderr.String()))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), "rows=") {
			summary = sc.Text()
		}
	}
	if summary == "" {
		return res, fmt.Errorf("no summary line from %s tail:\n%s", bin, lastLines(stderr.String(), 20))
	}
	res.Rows = -1
	for _, f := range strings.Fields(summary) {
		k, v, _ := strings.Cut(f, "=")
		switch k {
		case "rows":
			res.Rows, _ = strconv.ParseInt(v, 10, 64)
		case "seconds":
			res.OwnSeconds, _ = strconv.ParseFloat(v, 64)
		}
	}
	if res.Rows != c.Rows {
		return res, fmt.Errorf("sluice read %d rows, want %d (summary: %s)", res.Rows, c.Rows, summary)
	}
	if file != "" {
		fi, err := out.Stat()
		if err != nil {
			return res, err
		}
		res.OutBytes = fi.Size()
		if res.OutBytes == 0 {
			return res, fmt.Errorf("sluice wrote an empty %s", file)
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

// SnapshotVerdict checks the two criteria: sluice (to --format
// none and to a file) at least as fast as mariadb-dump on every case, and
// its peak memory within SnapshotMemoryLimit. It returns one line per
// criterion and whether both hold.
func SnapshotVerdict(results []SnapshotResult) (lines []string, ok bool) {
	dump := map[string]SnapshotResult{}
	for _, r := range results {
		if r.Mode == SnapshotDump {
			dump[r.Case] = r
		}
	}
	worst, worstAt := 0.0, ""
	var maxRSS int64
	rssAt := ""
	for _, r := range results {
		if r.Mode == SnapshotDump {
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
	}
	fast := worstAt != "" && worst >= 1
	small := rssAt != "" && maxRSS <= SnapshotMemoryLimit
	lines = append(lines,
		fmt.Sprintf("sluice at least as fast as mariadb-dump everywhere: %s (lowest ratio %.2f×, %s)", yesNo(fast), worst, worstAt),
		fmt.Sprintf("sluice peak memory ≤ %d MiB everywhere: %s (highest %d MiB, %s)", SnapshotMemoryLimit>>20, yesNo(small), maxRSS>>20, rssAt))
	return lines, fast && small
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "NO"
}

// ReportSnapshot prints the results as a Markdown table, each sluice
// reader with its ratio to mariadb-dump on the same tables.
func ReportSnapshot(w io.Writer, results []SnapshotResult) {
	dump := map[string]SnapshotResult{}
	for _, r := range results {
		if r.Mode == SnapshotDump {
			dump[r.Case] = r
		}
	}
	tw := tabwriter.NewWriter(w, 0, 0, 1, ' ', tabwriter.Debug)
	fmt.Fprintln(tw, "| tables\t reader\t rows\t seconds\t rows/s\t ÷ mariadb-dump\t max RSS MiB\t CPU s\t server CPU s\t output MB\t")
	fmt.Fprintln(tw, "|---\t---\t---:\t---:\t---:\t---:\t---:\t---:\t---:\t---:\t")
	for _, r := range results {
		ratio, out := "-", "-"
		if d, ok := dump[r.Case]; ok && r.Mode != SnapshotDump && d.RowsPerSec() > 0 {
			ratio = fmt.Sprintf("%.2f×", r.RowsPerSec()/d.RowsPerSec())
		}
		if r.OutBytes > 0 {
			out = fmt.Sprintf("%.0f", float64(r.OutBytes)/1e6)
		}
		fmt.Fprintf(tw, "| %s\t %s\t %d\t %.2f\t %.0f\t %s\t %d\t %.2f\t %.2f\t %s\t\n", r.Case, r.Mode, r.Rows, r.Seconds, r.RowsPerSec(), ratio, r.MaxRSS>>20, r.CPU, r.ServerCPU, out)
	}
	tw.Flush()
}
