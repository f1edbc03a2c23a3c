//go:build unix

package throwaway

import (
	"bytes"
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Throwaway PostgreSQL servers.
//
// A Postgres is one PostgreSQL PostgresVersion server from Debian's
// packages (postgresql-15, installed when missing), in its own temporary
// directory: a data directory made by initdb (UTF8, locale C, trust
// authentication, superuser "postgres"), a free TCP port of 127.0.0.1 and
// no unix socket, fsync off (the data is thrown away). PostgreSQL refuses
// to run as root, so when the tests run as root (CI) initdb and the server
// run as the unprivileged user "nobody", which owns the data directory;
// as any other user they run as that user.
//
//	pg, err := throwaway.StartPostgres(ctx, throwaway.PostgresOptions{})
//	defer pg.Close()
//	pg.DSN("postgres")     // postgres://postgres@127.0.0.1:PORT/postgres?sslmode=disable
//	pg.JDBCURL("postgres") // jdbc:postgresql://127.0.0.1:PORT/postgres
//	rows, err := pg.Query(ctx, "postgres", "SELECT id, name FROM t ORDER BY id")
//
// Like the MariaDB servers, the server runs in its own process group and
// is SIGKILLed by the kernel if the process that started it dies.

// PostgresVersion is the major version of the PostgreSQL servers.
const PostgresVersion = "15"

// PostgresUser is the superuser of a throwaway PostgreSQL server (trust
// authentication: no password).
const PostgresUser = "postgres"

// PostgresNull is how Query returns an SQL NULL.
const PostgresNull = "⟨NULL⟩"

var postgresBinDirs = []string{"/usr/lib/postgresql/" + PostgresVersion + "/bin"}

func postgresBinDir() (string, bool) {
	for _, d := range postgresBinDirs {
		if _, ok := findBinary([]string{filepath.Join(d, "postgres")}); ok {
			if _, ok := findBinary([]string{filepath.Join(d, "initdb")}); ok {
				return d, true
			}
		}
	}
	return "", false
}

var (
	ensurePostgresOnce sync.Once
	ensurePostgresErr  error
)

// EnsurePostgres makes sure PostgreSQL PostgresVersion's server and
// client programs are installed, installing Debian's postgresql-15 with
// apt when they are missing (its system service kept from starting, as
// for MariaDB).
func EnsurePostgres() error {
	ensurePostgresOnce.Do(func() {
		ensurePostgresErr = aptInstall(func() bool { _, ok := postgresBinDir(); return ok },
			"PostgreSQL "+PostgresVersion+" (/usr/lib/postgresql/"+PostgresVersion+"/bin/postgres)", "postgresql-"+PostgresVersion)
	})
	return ensurePostgresErr
}

// PostgresOptions configure StartPostgres.
type PostgresOptions struct {
	// Config adds or overrides server settings (postgres -c name=value).
	Config map[string]string
}

// Postgres is a running throwaway PostgreSQL server. Its methods are safe
// for concurrent use.
type Postgres struct {
	Host string // always "127.0.0.1"
	Port int
	Dir  string // holds data/ and postgres.log

	bin  string // the programs' directory
	opts PostgresOptions
	cred *syscall.Credential // the server's user when not ours (root runs it as nobody)

	mu     sync.Mutex
	proc   *process
	closed bool
}

// Addr returns "127.0.0.1:PORT".
func (p *Postgres) Addr() string { return net.JoinHostPort(p.Host, strconv.Itoa(p.Port)) }

// DSN is the libpq URL of database db as PostgresUser (no password, no
// TLS), for Go drivers and psql.
func (p *Postgres) DSN(db string) string {
	u := url.URL{Scheme: "postgres", User: url.User(PostgresUser), Host: p.Addr(), Path: "/" + db, RawQuery: "sslmode=disable"}
	return u.String()
}

// JDBCURL is the JDBC URL of database db (user PostgresUser, no
// password), for Java clients.
func (p *Postgres) JDBCURL(db string) string {
	return "jdbc:postgresql://" + p.Addr() + "/" + db
}

// DataDir is the server's data directory.
func (p *Postgres) DataDir() string { return filepath.Join(p.Dir, "data") }

// LogPath is the server's log (its standard error).
func (p *Postgres) LogPath() string { return filepath.Join(p.Dir, "postgres.log") }

// LogTail returns the last n lines of the server's log.
func (p *Postgres) LogTail(n int) string { return readTail(p.LogPath(), n) }

// StartPostgres installs PostgreSQL if needed (EnsurePostgres), makes a
// data directory with initdb in a new temporary directory and starts the
// server on a free port. It returns once the server accepts connections.
// ctx bounds startup only; call Close when done.
func StartPostgres(ctx context.Context, opts PostgresOptions) (*Postgres, error) {
	if err := EnsurePostgres(); err != nil {
		return nil, err
	}
	bin, _ := postgresBinDir()
	dir, err := ownedTempDir()
	if err != nil {
		return nil, err
	}
	p := &Postgres{Host: "127.0.0.1", Dir: dir, bin: bin, opts: opts}
	ok := false
	defer func() {
		if !ok {
			_ = p.Close()
		}
	}()
	if err := os.Mkdir(p.DataDir(), 0o700); err != nil {
		return nil, fmt.Errorf("testenv: %w", err)
	}
	if os.Geteuid() == 0 {
		cred, err := unprivileged()
		if err != nil {
			return nil, err
		}
		if err := os.Chown(p.DataDir(), int(cred.Uid), int(cred.Gid)); err != nil {
			return nil, fmt.Errorf("testenv: handing PostgreSQL's data directory to uid %d: %w", cred.Uid, err)
		}
		p.cred = cred
	}
	if err := p.initdb(ctx); err != nil {
		return nil, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := onFreePort(&p.Port, func() error { return p.startLocked(ctx) }); err != nil {
		return nil, err
	}
	ok = true
	return p, nil
}

// unprivileged is the credential of the user "nobody", PostgreSQL's when
// the tests run as root.
func unprivileged() (*syscall.Credential, error) {
	u, err := user.Lookup("nobody")
	if err != nil {
		return nil, fmt.Errorf("testenv: PostgreSQL cannot run as root and there is no user nobody to run it as: %w", err)
	}
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err1 != nil || err2 != nil {
		return nil, fmt.Errorf("testenv: user nobody has uid %q, gid %q", u.Uid, u.Gid)
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: []uint32{}}, nil
}

// command is name (one of PostgreSQL's programs) with args, as the
// server's user, its output to out.
func (p *Postgres) command(name string, args []string, out *os.File) *exec.Cmd {
	cmd := newCmd(filepath.Join(p.bin, name), args, out, p.Dir)
	// A locale the C library always has; HOME and USER may be root's.
	cmd.Env = append(os.Environ(), "LC_ALL=C", "LANG=C", "PGTZ=UTC")
	if p.cred != nil {
		cmd.SysProcAttr.Credential = p.cred
		cmd.Dir = p.DataDir() // a directory the user may enter
	}
	return cmd
}

func (p *Postgres) initdb(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, installTimeout)
	defer cancel()
	logPath := filepath.Join(p.Dir, "initdb.log")
	out, err := os.Create(logPath)
	if err != nil {
		return fmt.Errorf("testenv: %w", err)
	}
	defer out.Close()
	cmd := p.command("initdb", []string{"-D", p.DataDir(), "-U", PostgresUser, "--auth=trust",
		"--encoding=UTF8", "--locale=C", "--no-sync", "--no-instructions"}, out)
	proc, err := startCmd(cmd)
	if err != nil {
		return fmt.Errorf("testenv: starting initdb: %w", err)
	}
	select {
	case <-proc.done:
	case <-ctx.Done():
		_ = proc.signal(syscall.SIGKILL)
		<-proc.done
		return fmt.Errorf("testenv: initdb: %w\n%s", ctx.Err(), readTail(logPath, 25))
	}
	if proc.waitErr != nil {
		return fmt.Errorf("testenv: initdb -D %s failed: %v\n%s", p.DataDir(), proc.waitErr, readTail(logPath, 25))
	}
	return nil
}

// settings are the server's -c options.
func (p *Postgres) settings() []string {
	conf := map[string]string{
		"port":                    strconv.Itoa(p.Port),
		"listen_addresses":        p.Host,
		"unix_socket_directories": "",
		"fsync":                   "off",
		"synchronous_commit":      "off",
		"full_page_writes":        "off",
		"shared_buffers":          "32MB",
		"max_connections":         "50",
		"timezone":                "UTC",
		"log_timezone":            "UTC",
		"logging_collector":       "off",
	}
	for k, v := range p.opts.Config {
		conf[k] = v
	}
	args := make([]string, 0, 2*len(conf))
	for _, k := range sortedKeys(conf) {
		args = append(args, "-c", k+"="+conf[k])
	}
	return args
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// startLocked starts the server on p.Port and waits until it accepts
// connections. p.mu must be held.
func (p *Postgres) startLocked(ctx context.Context) error {
	if p.proc != nil && !p.proc.exited() {
		return errors.New("testenv: PostgreSQL already running")
	}
	p.proc = nil
	var logOffset int64
	if fi, err := os.Stat(p.LogPath()); err == nil {
		logOffset = fi.Size()
	}
	out, err := os.OpenFile(p.LogPath(), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("testenv: %w", err)
	}
	defer out.Close()
	proc, err := startCmd(p.command("postgres", append([]string{"-D", p.DataDir()}, p.settings()...), out))
	if err != nil {
		return fmt.Errorf("testenv: starting PostgreSQL: %w", err)
	}
	logSince := func() string {
		b, _ := os.ReadFile(p.LogPath())
		if int64(len(b)) >= logOffset {
			b = b[logOffset:]
		}
		return tail(string(b), 25)
	}
	ctx, cancel := context.WithTimeout(ctx, startupTimeout)
	defer cancel()
	ticker := time.NewTicker(2 * pollInterval)
	defer ticker.Stop()
	var lastErr error
	for {
		select {
		case <-proc.done:
			log := logSince()
			if strings.Contains(log, "Address already in use") {
				return fmt.Errorf("testenv: PostgreSQL on port %d: %w", p.Port, errPortInUse)
			}
			return fmt.Errorf("testenv: PostgreSQL exited during startup (%v); log:\n%s", proc.waitErr, log)
		case <-ctx.Done():
			_ = proc.signal(syscall.SIGKILL)
			<-proc.done
			return fmt.Errorf("testenv: PostgreSQL on %s not ready: %w (last error: %v); log:\n%s", p.Addr(), ctx.Err(), lastErr, logSince())
		case <-ticker.C:
		}
		if lastErr = p.ready(ctx); lastErr == nil {
			p.proc = proc
			return nil
		}
	}
}

// ready asks pg_isready whether the server accepts connections.
func (p *Postgres) ready(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(p.bin, "pg_isready"), "-q", "-h", p.Host, "-p", strconv.Itoa(p.Port), "-U", PostgresUser, "-d", "postgres")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("pg_isready: %v %s", err, bytes.TrimSpace(out))
	}
	return nil
}

// Exec runs SQL statements in database db, each on its own (psql -c,
// autocommit), stopping at the first error.
func (p *Postgres) Exec(ctx context.Context, db string, sql ...string) error {
	if len(sql) == 0 {
		return nil
	}
	args := make([]string, 0, 2*len(sql))
	for _, s := range sql {
		args = append(args, "-c", s)
	}
	_, err := p.psql(ctx, db, args...)
	return err
}

// Query runs one query in database db and returns its rows, each column
// in PostgreSQL's text form, an SQL NULL as PostgresNull.
func (p *Postgres) Query(ctx context.Context, db, query string) ([][]string, error) {
	out, err := p.psql(ctx, db, "--csv", "-t", "-P", "null="+PostgresNull, "-c", query)
	if err != nil {
		return nil, err
	}
	r := csv.NewReader(bytes.NewReader(out))
	r.FieldsPerRecord = -1
	rows, err := r.ReadAll()
	if err != nil {
		return nil, fmt.Errorf("testenv: reading psql's rows of %q: %w", query, err)
	}
	return rows, nil
}

func (p *Postgres) psql(ctx context.Context, db string, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	args = append([]string{"-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", p.DSN(db)}, args...)
	cmd := exec.CommandContext(ctx, filepath.Join(p.bin, "psql"), args...)
	cmd.Env = append(os.Environ(), "PGTZ=UTC", "PGCLIENTENCODING=UTF8")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("testenv: psql on %s: %w: %s", p.Addr(), err, bytes.TrimSpace(stderr.Bytes()))
	}
	return stdout.Bytes(), nil
}

// Stop shuts the server down (SIGINT: a fast shutdown, which also frees
// its shared memory), SIGKILLing it after 30 s. Stopping a stopped server
// does nothing.
func (p *Postgres) Stop() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stopLocked(stopTimeout)
}

// Start starts a stopped server again on the same port with the same data.
func (p *Postgres) Start(ctx context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return errors.New("testenv: Start on a closed PostgreSQL")
	}
	return whilePortInUse(ctx, func() error { return p.startLocked(ctx) })
}

func (p *Postgres) stopLocked(grace time.Duration) error {
	proc := p.proc
	if proc == nil {
		return nil
	}
	p.proc = nil
	// A fast shutdown: SIGINT to the postmaster alone, which stops its
	// children itself.
	return proc.stop(fmt.Sprintf("PostgreSQL %d", proc.pid), grace, func() error { return syscall.Kill(proc.pid, syscall.SIGINT) })
}

// Close stops the server (a fast shutdown, bounded by 10 s) and removes
// its directory. It is idempotent.
func (p *Postgres) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil
	}
	p.closed = true
	err := p.stopLocked(10 * time.Second)
	if rerr := os.RemoveAll(p.Dir); rerr != nil && err == nil {
		err = fmt.Errorf("testenv: removing %s: %w", p.Dir, rerr)
	}
	return err
}
