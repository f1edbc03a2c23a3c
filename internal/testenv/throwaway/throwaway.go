//go:build unix

// Package throwaway starts throwaway MariaDB, MySQL and Redis servers for
// tests, benchmarks, examples and the demo, returning errors: it does not
// import testing, so a program (cmd/sluice-bench, the demo) can use it.
// Tests use it through internal/testenv, whose StartT, StartRedis and
// ForEachFlavor are the *testing.T layer over it; testenv's other names are
// this package's.
//
// Each server gets its own temporary directory (data directory, unix socket,
// error log), its own TCP port on 127.0.0.1, row-based binary logging with
// GTIDs (MariaDB: strict mode; MySQL: gtid_mode=ON), and a root account
// reachable over TCP with the password "sluice". Servers run in their own
// process group and, on Linux, are SIGKILLed by the kernel if the process
// that started them dies, so a crashed test never leaves a server behind.
//
// MariaDB comes from Debian's packages (installed when missing), MySQL from
// Debian unstable's packages unpacked into a cache without being installed
// (see EnsureMySQL). Errors keep the prefix "testenv:".
//
//	db, err := throwaway.Start(ctx, throwaway.Options{Flavor: position.MySQL})
//	if err != nil { ... }
//	defer db.Close()
//	if err := db.Exec(ctx, "CREATE DATABASE d", "CREATE TABLE d.t (id INT PRIMARY KEY)"); err != nil { ... }
//	conn, err := db.Conn(ctx) // *mysqlconn.Conn over TCP as root/sluice
package throwaway

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/go-mysql-org/go-mysql/client"
	"github.com/go-mysql-org/go-mysql/mysql"

	"github.com/sluice-cdc/sluice/internal/rawconn"
	"github.com/sluice-cdc/sluice/mysqlconn"
	"github.com/sluice-cdc/sluice/position"
)

const (
	// DefaultUser is the account tests connect as.
	DefaultUser = "root"
	// DefaultPassword is the password of DefaultUser over TCP.
	DefaultPassword = "sluice"

	startupTimeout = 60 * time.Second
	stopTimeout    = 30 * time.Second
	installTimeout = 120 * time.Second
	pollInterval   = 50 * time.Millisecond

	// StartTimeout bounds a start when the caller has no deadline of its
	// own (testenv.StartT, StartRedis): installing the server included.
	StartTimeout = installTimeout + startupTimeout
)

// Options configures a throwaway server. The zero value gives MariaDB with
// binlog_row_metadata=FULL, binlog_row_image=FULL, server_id=1.
type Options struct {
	// Flavor is position.MariaDB (default) or position.MySQL.
	Flavor position.Flavor
	// RowMetadata is binlog_row_metadata: "FULL" (default) or "MINIMAL"
	// (MariaDB also accepts "NO_LOG").
	RowMetadata string
	// RowImage is binlog_row_image: "FULL" (default) or "MINIMAL"
	// (MariaDB also accepts "NOBLOB").
	RowImage string
	// ServerID is server_id; default 1.
	ServerID uint32
	// Compressed turns on binlog compression: MariaDB's log_bin_compress
	// (with log_bin_compress_min_len at its minimum, 10, so that nearly all
	// row and query events are actually written compressed), MySQL's
	// binlog_transaction_compression.
	Compressed bool
	// NoGTID starts MySQL with gtid_mode=OFF (MariaDB always has GTIDs).
	NoGTID bool
	// MaxBinlogSize is max_binlog_size, e.g. "1M" (the server minimum is
	// 4096 bytes). Empty means the server default (1G).
	MaxBinlogSize string
	// Extra are additional server arguments, e.g. "--binlog-checksum=NONE".
	// They come last and so override the defaults.
	Extra []string
	// ClockOffset runs the server under libfaketime (Debian's faketime
	// package, installed when missing) with its clock this far off, for
	// clock-skew tests.
	ClockOffset time.Duration
}

func (o Options) withDefaults() Options {
	if o.Flavor == "" {
		o.Flavor = position.MariaDB
	}
	if o.RowMetadata == "" {
		o.RowMetadata = "FULL"
	}
	if o.RowImage == "" {
		o.RowImage = "FULL"
	}
	if o.ServerID == 0 {
		o.ServerID = 1
	}
	o.RowMetadata = strings.ToUpper(o.RowMetadata)
	o.RowImage = strings.ToUpper(o.RowImage)
	o.Extra = append([]string(nil), o.Extra...)
	return o
}

// Server is a running (or stopped) throwaway server. Its methods are safe
// for concurrent use.
type Server struct {
	Flavor   position.Flavor
	Host     string // always "127.0.0.1"
	Port     int
	User     string // "root"
	Password string // "sluice"
	Dir      string // temporary directory holding data/, sock, error.log
	ServerID uint32

	opts   Options
	daemon string    // mariadbd (MariaDB); the MySQL daemon runs from dist
	dist   MySQLDist // MySQL only

	mu     sync.Mutex // serialises Stop/Kill/Restart/Close
	proc   *process   // nil when not running
	closed bool
}

// Addr returns "127.0.0.1:PORT".
func (m *Server) Addr() string { return net.JoinHostPort(m.Host, strconv.Itoa(m.Port)) }

// URL returns "mysql://root:sluice@127.0.0.1:PORT".
func (m *Server) URL() string {
	return fmt.Sprintf("mysql://%s:%s@%s", m.User, m.Password, m.Addr())
}

// DataDir is the server's datadir; binary logs are DataDir()/mysql-bin.NNNNNN.
func (m *Server) DataDir() string { return filepath.Join(m.Dir, "data") }

// Socket is the path of the server's unix socket (root without password).
func (m *Server) Socket() string { return filepath.Join(m.Dir, "sock") }

// TmpDir is the server's private tmpdir. Every server needs its own: at
// startup mariadbd deletes all "#sql*" files in its tmpdir, which breaks a
// concurrently bootstrapping server sharing /tmp ("Unknown table
// 'mysql.tmp_user_nopasswd'" from mariadb-install-db).
func (m *Server) TmpDir() string { return filepath.Join(m.Dir, "tmp") }

// ErrorLogPath is the path of the server's error log.
func (m *Server) ErrorLogPath() string { return filepath.Join(m.Dir, "error.log") }

// ErrorLogTail returns the last n lines of the error log (for diagnostics).
func (m *Server) ErrorLogTail(n int) string {
	b, _ := os.ReadFile(m.ErrorLogPath())
	return tail(string(b), n)
}

// Pid returns the process id of the running server, or 0 if it is stopped.
func (m *Server) Pid() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.proc == nil || m.proc.exited() {
		return 0
	}
	return m.proc.pid
}

// Running reports whether the server process is alive.
func (m *Server) Running() bool { return m.Pid() != 0 }

// Name is the server's name in messages: "MariaDB 127.0.0.1:PORT".
func (m *Server) Name() string { return FlavorName(m.Flavor) + " " + m.Addr() }

// FlavorName is the flavor's name in messages: "MySQL", else "MariaDB"
// (the default flavor).
func FlavorName(f position.Flavor) string {
	if f == position.MySQL {
		return "MySQL"
	}
	return "MariaDB"
}

// StartMany starts one server per options at once, then runs setup on each
// (once it accepts connections). On an error it closes what it started.
func StartMany(ctx context.Context, opts []Options, setup ...string) ([]*Server, error) {
	dbs := make([]*Server, len(opts))
	errs := make([]error, len(opts))
	var wg sync.WaitGroup
	for i, o := range opts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if dbs[i], errs[i] = Start(ctx, o); errs[i] == nil && len(setup) > 0 {
				errs[i] = dbs[i].Exec(ctx, setup...)
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		for _, db := range dbs {
			if db != nil {
				db.Close()
			}
		}
		return nil, err
	}
	return dbs, nil
}

// Start installs the server if needed (see EnsureMariaDB and EnsureMySQL),
// creates a fresh data directory in a new temporary directory and starts
// the server on a free port of 127.0.0.1. It returns once the server
// accepts connections and root can log in over TCP with DefaultPassword.
// ctx bounds startup only, not the server's lifetime; call Close when done.
func Start(ctx context.Context, opts Options) (*Server, error) {
	opts = opts.withDefaults()
	m := &Server{
		Flavor:   opts.Flavor,
		Host:     "127.0.0.1",
		User:     DefaultUser,
		Password: DefaultPassword,
		ServerID: opts.ServerID,
		opts:     opts,
	}
	var init func(context.Context) error
	switch opts.Flavor {
	case position.MariaDB:
		if err := EnsureMariaDB(); err != nil {
			return nil, err
		}
		m.daemon, _ = findBinary(mariadbdCandidates)
		installDB, _ := findBinary(installDBCandidates)
		init = func(ctx context.Context) error { return m.installDB(ctx, installDB) }
	case position.MySQL:
		d, err := EnsureMySQL()
		if err != nil {
			return nil, err
		}
		m.dist = d
		init = m.copyTemplate
	default:
		return nil, fmt.Errorf("testenv: unknown flavor %q (want %q or %q)", opts.Flavor, position.MariaDB, position.MySQL)
	}
	if opts.ClockOffset != 0 {
		if err := aptInstall(func() bool { _, err := os.Stat(libfaketime); return err == nil }, "libfaketime", "faketime"); err != nil {
			return nil, err
		}
	}
	dir, err := ownedTempDir()
	if err != nil {
		return nil, err
	}
	m.Dir = dir
	ok := false
	defer func() {
		if !ok {
			_ = m.Close()
		}
	}()
	if err := os.Mkdir(m.TmpDir(), 0o755); err != nil {
		return nil, fmt.Errorf("testenv: %w", err)
	}
	if err := init(ctx); err != nil {
		return nil, err
	}

	m.mu.Lock()
	defer m.mu.Unlock()
	if err := onFreePort(&m.Port, func() error { return m.startLocked(ctx) }); err != nil {
		return nil, err
	}
	if err := m.setupAccounts(ctx); err != nil {
		return nil, err
	}
	ok = true
	return m, nil
}

// ownedTempDir makes a new temporary directory marked with this process's
// pid, so that SweepStaleDirs can remove it once the process is gone.
func ownedTempDir() (string, error) {
	sweepOnce.Do(SweepStaleDirs)
	dir, err := makeTempDir()
	if err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(dir, ownerFile), []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
		os.RemoveAll(dir)
		return "", fmt.Errorf("testenv: %w", err)
	}
	return dir, nil
}

// onFreePort sets *port to a free port and calls start, trying again on
// another port when someone else bound it in between (a few times).
func onFreePort(port *int, start func() error) error {
	const attempts = 5
	for i := 1; ; i++ {
		p, err := freePort()
		if err != nil {
			return err
		}
		*port = p
		err = start()
		if err == nil || !errors.Is(err, errPortInUse) || i == attempts {
			return err
		}
	}
}

const (
	dirPrefix = "sluice-mariadb-"
	ownerFile = "owner.pid"
)

var sweepOnce sync.Once

// SweepStaleDirs removes temporary directories left behind by processes
// (test binaries, benchmarks) that died before their cleanup ran (their servers died with them, thanks
// to Pdeathsig). A directory is stale when the process named in its
// owner.pid no longer exists.
func SweepStaleDirs() {
	for _, base := range []string{os.TempDir(), "/tmp"} {
		entries, _ := os.ReadDir(base)
		for _, e := range entries {
			if !e.IsDir() || !strings.HasPrefix(e.Name(), dirPrefix) {
				continue
			}
			dir := filepath.Join(base, e.Name())
			b, err := os.ReadFile(filepath.Join(dir, ownerFile))
			if err != nil {
				continue
			}
			pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
			if err != nil || pid <= 0 || pid == os.Getpid() {
				continue
			}
			if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
				_ = os.RemoveAll(dir)
			}
		}
		if os.TempDir() == "/tmp" {
			break
		}
	}
}

func makeTempDir() (string, error) {
	dir, err := os.MkdirTemp("", dirPrefix)
	if err != nil {
		return "", fmt.Errorf("testenv: %w", err)
	}
	// sun_path is 108 bytes; fall back to /tmp if TMPDIR is deep.
	if len(filepath.Join(dir, "sock")) > 100 {
		os.Remove(dir)
		if dir, err = os.MkdirTemp("/tmp", dirPrefix); err != nil {
			return "", fmt.Errorf("testenv: %w", err)
		}
	}
	// mariadbd may run as a different user (mysql) if we are not root and a
	// setuid wrapper is in play; keep the directory traversable.
	_ = os.Chmod(dir, 0o755)
	return dir, nil
}

func (m *Server) installDB(ctx context.Context, installDB string) error {
	ctx, cancel := context.WithTimeout(ctx, installTimeout)
	defer cancel()
	logPath := filepath.Join(m.Dir, "install.log")
	out, err := os.Create(logPath)
	if err != nil {
		return fmt.Errorf("testenv: %w", err)
	}
	defer out.Close()
	args := []string{
		"--no-defaults",
		"--datadir=" + m.DataDir(),
		"--auth-root-authentication-method=normal",
		"--skip-test-db",
		"--skip-name-resolve",
		"--tmpdir=" + m.TmpDir(),
		// Same InnoDB geometry as the server so it does not resize the redo
		// log on first start.
		"--innodb-log-file-size=64M",
		"--innodb-buffer-pool-size=128M",
	}
	if os.Geteuid() == 0 {
		args = append(args, "--user=root")
	}
	p, err := startProcess(installDB, args, out, m.Dir)
	if err != nil {
		return fmt.Errorf("testenv: starting %s: %w", installDB, err)
	}
	select {
	case <-p.done:
	case <-ctx.Done():
		p.signal(syscall.SIGKILL)
		<-p.done
		return fmt.Errorf("testenv: %s: %w\n%s", filepath.Base(installDB), ctx.Err(), readExcerpt(logPath))
	}
	if p.waitErr != nil {
		return fmt.Errorf("testenv: %s failed: %v\n%s", filepath.Base(installDB), p.waitErr, readExcerpt(logPath))
	}
	return nil
}

func (m *Server) args() []string {
	o := m.opts
	a := []string{"--no-defaults"} // must be first
	if m.Flavor == position.MySQL {
		usr := filepath.Join(m.dist.Root, "usr")
		a = append(a,
			"--basedir="+usr,
			"--lc-messages-dir="+filepath.Join(usr, "share", "mysql"),
			"--plugin-dir="+filepath.Join(usr, "lib", "mysql", "plugin"),
		)
	}
	// The settings both servers take.
	a = append(a,
		"--datadir="+m.DataDir(),
		"--socket="+m.Socket(),
		"--port="+strconv.Itoa(m.Port),
		"--bind-address=127.0.0.1",
		"--pid-file="+filepath.Join(m.Dir, m.daemonName()+".pid"),
		"--log-error="+m.ErrorLogPath(),
		"--tmpdir="+m.TmpDir(),
		"--log-bin="+filepath.Join(m.DataDir(), "mysql-bin"),
		"--binlog-format=ROW",
		"--binlog-row-metadata="+o.RowMetadata,
		"--binlog-row-image="+o.RowImage,
		"--binlog-checksum=CRC32",
		"--server-id="+strconv.FormatUint(uint64(o.ServerID), 10),
		"--skip-name-resolve",
		"--innodb-buffer-pool-size=128M",
		"--innodb-flush-log-at-trx-commit=2",
		"--sync-binlog=0",
		"--max-connections=200",
		// --no-defaults would otherwise leave latin1 on MariaDB.
		"--character-set-server=utf8mb4",
	)
	if os.Geteuid() == 0 {
		a = append(a, "--user=root")
	}
	if m.Flavor == position.MySQL {
		gtid := "ON"
		if o.NoGTID {
			gtid = "OFF"
		}
		a = append(a,
			"--mysqlx=OFF",
			"--log-replica-updates",
			"--gtid-mode="+gtid,
			"--enforce-gtid-consistency="+gtid,
			"--innodb-redo-log-capacity=64M",
			"--secure-file-priv=",
		)
		if o.Compressed {
			a = append(a, "--binlog-transaction-compression=ON")
		}
	} else {
		a = append(a,
			"--log-slave-updates",
			"--gtid-strict-mode=ON",
			"--innodb-log-file-size=64M",
			// Debian's configuration's collation.
			"--collation-server=utf8mb4_general_ci",
		)
		if o.Compressed {
			a = append(a, "--log-bin-compress=ON", "--log-bin-compress-min-len=10")
		}
	}
	if o.MaxBinlogSize != "" {
		a = append(a, "--max-binlog-size="+o.MaxBinlogSize)
	}
	return append(a, o.Extra...)
}

// command is the program and arguments that start the server.
func (m *Server) command() (string, []string) {
	if m.Flavor == position.MySQL {
		return m.dist.argv("mysqld", m.args()...)
	}
	return m.daemon, m.args()
}

// daemonName names the server program in messages.
func (m *Server) daemonName() string {
	if m.Flavor == position.MySQL {
		return "mysqld"
	}
	return "mariadbd"
}

var errPortInUse = errors.New("port already in use")

// startLocked starts the server on m.Port and waits until it answers on its
// unix socket. m.mu must be held.
func (m *Server) startLocked(ctx context.Context) error {
	daemon := m.daemonName()
	if m.proc != nil && !m.proc.exited() {
		return fmt.Errorf("testenv: %s already running", daemon)
	}
	m.proc = nil
	var logOffset int64
	if fi, err := os.Stat(m.ErrorLogPath()); err == nil {
		logOffset = fi.Size()
	}
	out, err := os.OpenFile(filepath.Join(m.Dir, daemon+".out"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("testenv: %w", err)
	}
	defer out.Close() // the child has its own copy
	_ = os.Remove(m.Socket())

	name, args := m.command()
	p, err := startProcess(name, args, out, m.Dir, m.env()...)
	if err != nil {
		return fmt.Errorf("testenv: starting %s: %w", daemon, err)
	}

	ctx, cancel := context.WithTimeout(ctx, startupTimeout)
	defer cancel()
	logSince := func() string {
		f, err := os.Open(m.ErrorLogPath())
		if err != nil {
			return ""
		}
		defer f.Close()
		if _, err := f.Seek(logOffset, io.SeekStart); err != nil {
			return ""
		}
		b, _ := io.ReadAll(f)
		return string(b)
	}
	ticker := time.NewTicker(pollInterval)
	defer ticker.Stop()
	var lastErr error
	for {
		select {
		case <-p.done:
			log := logSince()
			if strings.Contains(log, "Address already in use") || strings.Contains(log, "Bind on TCP/IP port") {
				return fmt.Errorf("testenv: %s on port %d: %w", daemon, m.Port, errPortInUse)
			}
			return fmt.Errorf("testenv: %s exited during startup (%v); error log:\n%s%s",
				daemon, p.waitErr, excerpt(log), readTail(filepath.Join(m.Dir, daemon+".out"), 10))
		case <-ctx.Done():
			p.signal(syscall.SIGKILL)
			<-p.done
			return fmt.Errorf("testenv: %s did not accept connections on %s: %w (last error: %v); error log:\n%s",
				daemon, m.Socket(), ctx.Err(), lastErr, excerpt(logSince()))
		case <-ticker.C:
		}
		if _, err := os.Stat(m.Socket()); err != nil {
			lastErr = err
			continue
		}
		pctx, pcancel := context.WithTimeout(ctx, 5*time.Second)
		c, err := dial(pctx, m.Socket(), m.User, "")
		if err == nil {
			err = c.Ping()
			closeConn(c)
		}
		pcancel()
		if err == nil {
			m.proc = p
			return nil
		}
		lastErr = err
	}
}

// setupAccounts gives root@127.0.0.1 and root@% DefaultPassword and all
// privileges; root@localhost (unix socket) stays passwordless.
// The statements are not written to the binary log, so a fresh server's
// binlog contains no GTIDs.
func (m *Server) setupAccounts(ctx context.Context) error {
	pw := strings.ReplaceAll(m.Password, "'", "''")
	stmts := []string{"SET SESSION sql_log_bin = 0"}
	for _, host := range []string{"127.0.0.1", "%"} {
		stmts = append(stmts,
			// mariadb-install-db already creates a passwordless
			// root@127.0.0.1, hence the ALTER.
			fmt.Sprintf("CREATE USER IF NOT EXISTS '%s'@'%s' IDENTIFIED BY '%s'", m.User, host, pw),
			fmt.Sprintf("ALTER USER '%s'@'%s' IDENTIFIED BY '%s'", m.User, host, pw),
			fmt.Sprintf("GRANT ALL PRIVILEGES ON *.* TO '%s'@'%s' WITH GRANT OPTION", m.User, host),
		)
	}
	c, err := dial(ctx, m.Socket(), m.User, "")
	if err != nil {
		return fmt.Errorf("testenv: connect via %s: %w", m.Socket(), err)
	}
	defer closeConn(c)
	for _, s := range stmts {
		if _, err := execute(ctx, c, s); err != nil {
			return fmt.Errorf("testenv: %q: %w", s, err)
		}
	}
	return nil
}

// Conn opens a new connection to the server over TCP as root, of the type
// binlog's and snapshot's functions take. ctx bounds connecting only. The
// caller must Close it.
func (m *Server) Conn(ctx context.Context) (*mysqlconn.Conn, error) {
	c, err := m.conn(ctx)
	return rawconn.Wrap(c), err
}

// conn is Conn on the go-mysql connection, for the harness's own queries.
func (m *Server) conn(ctx context.Context) (*client.Conn, error) {
	c, err := dial(ctx, m.Addr(), m.User, m.Password)
	if err != nil {
		return nil, fmt.Errorf("testenv: connect to %s: %w", m.Addr(), err)
	}
	return c, nil
}

// Exec runs the statements in order on one connection and stops at the
// first error, which names the failing statement.
func (m *Server) Exec(ctx context.Context, sql ...string) error {
	c, err := m.conn(ctx)
	if err != nil {
		return err
	}
	defer closeConn(c)
	for _, s := range sql {
		if _, err := execute(ctx, c, s); err != nil {
			return fmt.Errorf("testenv: exec %q: %w", abbrev(s, 200), err)
		}
	}
	return nil
}

// Query runs one statement over TCP and returns its result (rows are in
// Result.Resultset; use e.g. r.GetString(row, col)).
func (m *Server) Query(ctx context.Context, query string, args ...any) (*mysql.Result, error) {
	c, err := m.conn(ctx)
	if err != nil {
		return nil, err
	}
	defer closeConn(c)
	r, err := execute(ctx, c, query, args...)
	if err != nil {
		return nil, fmt.Errorf("testenv: query %q: %w", abbrev(query, 200), err)
	}
	return r, nil
}

// Stop shuts the server down gracefully (SIGTERM), waiting up to 30 s
// before SIGKILLing it. Stopping a stopped server is a no-op.
func (m *Server) Stop() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.stopLocked(stopTimeout)
}

// Kill SIGKILLs the server (a crash, as far as InnoDB and the binlog are
// concerned) and waits for it to exit. Killing a stopped server is a no-op.
func (m *Server) Kill() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.stopLocked(0)
}

func (m *Server) stopLocked(grace time.Duration) error {
	p := m.proc
	if p == nil {
		return nil
	}
	m.proc = nil
	return p.stop(fmt.Sprintf("%s %d", m.daemonName(), p.pid), grace, nil)
}

// Restart stops the server gracefully (if running) and starts it again with
// the same data directory, port and options.
func (m *Server) Restart(ctx context.Context) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return errors.New("testenv: Restart on a closed server")
	}
	if err := m.stopLocked(stopTimeout); err != nil {
		return err
	}
	// The port is normally free again at once (the server uses SO_REUSEADDR),
	// but someone else may have taken it meanwhile; retry for a while.
	return whilePortInUse(ctx, func() error { return m.startLocked(ctx) })
}

// whilePortInUse calls start until it fails otherwise than with
// errPortInUse (a port a stopped process held is not yet free, or another
// process took it), 20 times at most, 250 ms apart: the one restart loop
// of the servers.
func whilePortInUse(ctx context.Context, start func() error) error {
	var err error
	for i := 0; i < 20; i++ {
		if err = start(); !errors.Is(err, errPortInUse) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(250 * time.Millisecond):
		}
	}
	return err
}

// Close kills the server and removes its temporary directory. It is
// idempotent. The data is thrown away, so there is no graceful shutdown.
func (m *Server) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil
	}
	m.closed = true
	err := m.stopLocked(0)
	if rerr := os.RemoveAll(m.Dir); rerr != nil && err == nil {
		err = fmt.Errorf("testenv: removing %s: %w", m.Dir, rerr)
	}
	return err
}

// process is a child started from a goroutine locked to its OS thread.
// Pdeathsig fires when the *thread* that forked the child exits, not the
// process; Go may retire threads of goroutines that exit while locked, so the
// forking goroutine stays locked and alive (blocked in wait) for the child's
// whole lifetime.
type process struct {
	pid     int
	done    chan struct{} // closed after the child has been reaped
	waitErr error         // valid after done is closed
}

func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// stop ends p, the one stop of the servers: unless grace is 0, term asks
// it to shut down (nil: SIGTERM to its group) and stop waits up to grace
// for it to exit; then it SIGKILLs the group and waits up to stopTimeout.
// name names the process in errors ("Kafka node 2 (pid 123)").
func (p *process) stop(name string, grace time.Duration, term func() error) error {
	if p.exited() {
		return nil
	}
	if grace > 0 {
		if term == nil {
			term = func() error { return p.signal(syscall.SIGTERM) }
		}
		if err := term(); err != nil && !errors.Is(err, syscall.ESRCH) {
			return fmt.Errorf("testenv: asking %s to shut down: %w", name, err)
		}
		select {
		case <-p.done:
			return nil
		case <-time.After(grace):
		}
	}
	if err := p.signal(syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("testenv: SIGKILL %s: %w", name, err)
	}
	select {
	case <-p.done:
		return nil
	case <-time.After(stopTimeout):
		return fmt.Errorf("testenv: %s did not exit after SIGKILL", name)
	}
}

// signal sends sig to the child's process group.
func (p *process) signal(sig syscall.Signal) error {
	if p.exited() {
		return nil
	}
	return syscall.Kill(-p.pid, sig)
}

func startProcess(name string, args []string, out *os.File, dir string, env ...string) (*process, error) {
	cmd := newCmd(name, args, out, dir)
	if len(env) > 0 {
		cmd.Env = append(os.Environ(), env...)
	}
	return startCmd(cmd)
}

// startCmd starts cmd (made by newCmd, perhaps adjusted: a credential,
// an environment) as a process of its own group, killed with its parent.
func startCmd(cmd *exec.Cmd) (*process, error) {
	p := &process{done: make(chan struct{})}
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread() // only after the child is reaped
		defer close(p.done)
		if err := cmd.Start(); err != nil {
			p.waitErr = err
			started <- err
			return
		}
		p.pid = cmd.Process.Pid
		started <- nil
		p.waitErr = cmd.Wait()
	}()
	if err := <-started; err != nil {
		return nil, err
	}
	return p, nil
}

// libfaketime is Debian's preloadable clock shifter (package faketime).
const libfaketime = "/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1"

// env is the server's extra environment: libfaketime for a clock offset.
// The monotonic clock stays true (DONT_FAKE_MONOTONIC), so libfaketime's
// "forced monotonic fix" of condition-variable waits is not needed: it is
// turned off, because libfaketime 0.9.10 turns it on by itself for the
// newer C library of the unpacked MySQL, and then MySQL's timed waits ran
// late, so that mysqld took a minute to start instead of two seconds.
func (m *Server) env() []string {
	if m.opts.ClockOffset == 0 {
		return nil
	}
	return []string{"LD_PRELOAD=" + libfaketime, fmt.Sprintf("FAKETIME=%+.3f", m.opts.ClockOffset.Seconds()),
		"DONT_FAKE_MONOTONIC=1", "FAKETIME_FORCE_MONOTONIC_FIX=0"}
}

func newCmd(name string, args []string, out *os.File, dir string) *exec.Cmd {
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Stdin = nil // /dev/null
	cmd.Stdout = out
	cmd.Stderr = out
	cmd.SysProcAttr = sysProcAttr()
	return cmd
}

// dial connects with go-mysql's client; addr containing '/' means a unix
// socket. ctx bounds dialing and the handshake.
func dial(ctx context.Context, addr, user, password string) (*client.Conn, error) {
	var (
		mu sync.Mutex
		nc net.Conn
	)
	dialer := func(dctx context.Context, network, address string) (net.Conn, error) {
		c, err := (&net.Dialer{Timeout: 10 * time.Second}).DialContext(dctx, network, address)
		if err != nil {
			return nil, err
		}
		deadline := time.Now().Add(30 * time.Second)
		if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
			deadline = d
		}
		_ = c.SetDeadline(deadline)
		mu.Lock()
		nc = c
		mu.Unlock()
		return c, nil
	}
	stop := context.AfterFunc(ctx, func() {
		mu.Lock()
		defer mu.Unlock()
		if nc != nil {
			_ = nc.SetDeadline(time.Unix(1, 0))
		}
	})
	// The character set sluice's own connections ask for
	// (binlog.ConnCollation; not imported: binlog's tests import this
	// package), so that a test's names and text reach the server as UTF-8
	// even where the server's default is latin1.
	utf8 := func(c *client.Conn) error { return c.SetCollation("utf8mb4_general_ci") }
	c, err := client.ConnectWithDialer(ctx, "", addr, user, password, "", dialer, utf8)
	if !stop() {
		if c != nil {
			c.Close()
		}
		if err == nil {
			err = ctx.Err()
		}
		return nil, err
	}
	if err != nil {
		return nil, err
	}
	_ = c.SetDeadline(time.Time{})
	return c, nil
}

// execute runs one statement, aborting it (by expiring the connection's
// deadline, which breaks the connection) when ctx is done.
func execute(ctx context.Context, c *client.Conn, query string, args ...any) (*mysql.Result, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	stop := context.AfterFunc(ctx, func() { _ = c.SetDeadline(time.Unix(1, 0)) })
	r, err := c.Execute(query, args...)
	if !stop() && err != nil {
		err = fmt.Errorf("%w (%v)", ctx.Err(), err)
	}
	return r, err
}

// closeConn says COM_QUIT before closing, so the server does not log
// "Aborted connection" warnings.
func closeConn(c *client.Conn) {
	_ = c.SetDeadline(time.Now().Add(time.Second))
	if err := c.Quit(); err != nil {
		_ = c.Close()
	}
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("testenv: finding a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func readTail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil || len(b) == 0 {
		return ""
	}
	return tail(string(b), n)
}

func readExcerpt(path string) string {
	b, _ := os.ReadFile(path)
	return excerpt(string(b))
}

// excerpt returns the [ERROR] lines of a server log followed by its last 25
// lines: the first error is often far above the tail.
func excerpt(log string) string {
	var errs []string
	for _, l := range strings.Split(log, "\n") {
		if strings.Contains(l, "[ERROR]") && len(errs) < 20 {
			errs = append(errs, l)
		}
	}
	t := tail(log, 25)
	if len(errs) == 0 {
		return t
	}
	return "errors:\n" + strings.Join(errs, "\n") + "\n...\n" + t
}

func abbrev(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
