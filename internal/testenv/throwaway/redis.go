//go:build unix

package throwaway

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/sluice-cdc/sluice/internal/testenv/certs"
)

// Throwaway Redis servers.
//
// A Redis gets its own directory (redis.conf, the append-only files under
// appendonlydir/, redis.log), its own TCP port on 127.0.0.1, no password,
// and runs with appendonly yes and appendfsync always: a write the server
// has acknowledged is on disk, so Kill (a crash) loses nothing that a
// client was told about. RDB snapshots are off (save ""), so nothing is
// written outside the directory.
//
//	r, err := throwaway.StartRedisServer(ctx, throwaway.RedisOptions{}) // in tests: testenv.StartRedis(t)
//	c := redis.NewClient(&redis.Options{Addr: r.Addr()})
//	r.Stop()            // an outage: clients get connection errors
//	r.Start(ctx)        // same port, same data
//
// Like MariaDB servers, the process runs in its own process group and is
// SIGKILLed by the kernel if the process that started it dies.

var (
	ensureRedisOnce sync.Once
	ensureRedisErr  error
)

// redisServerCandidates lists where Debian and others put redis-server;
// /usr/bin is on PATH, but be explicit for odd environments.
var redisServerCandidates = []string{"redis-server", "/usr/bin/redis-server", "/usr/sbin/redis-server", "/usr/local/bin/redis-server"}

func redisInstalled() bool {
	_, ok := findBinary(redisServerCandidates)
	return ok
}

// EnsureRedis makes sure redis-server is available, installing the Debian
// package redis-server with apt when it is missing (apt-get update first).
// Like EnsureMariaDB it runs once per process, serialises installs across
// processes with a file lock, and keeps the package's system service from
// starting (a temporary /usr/sbin/policy-rc.d).
func EnsureRedis() error {
	ensureRedisOnce.Do(func() {
		ensureRedisErr = aptInstall(redisInstalled, "redis-server", "redis-server")
	})
	return ensureRedisErr
}

// aptInstall installs the Debian packages pkgs unless installed() already
// holds, under the same cross-process lock and policy-rc.d guard as
// EnsureMariaDB. what names the missing program in errors.
func aptInstall(installed func() bool, what string, pkgs ...string) error {
	if installed() {
		return nil
	}
	unlock, err := lockFile(filepath.Join(os.TempDir(), "sluice-testenv-apt.lock"))
	if err != nil {
		return err
	}
	defer unlock()
	// Another process may have installed it while we waited for the lock.
	if installed() {
		return nil
	}

	list := strings.Join(pkgs, " ")
	if os.Geteuid() != 0 {
		return fmt.Errorf("testenv: %s not found and not running as root; install it with: apt-get install -y %s (or run `make deps` as root)", what, list)
	}
	aptGet, err := exec.LookPath("apt-get")
	if err != nil {
		return fmt.Errorf("testenv: %s not found and apt-get is not available; install %s manually", what, list)
	}
	const policyRCD = "/usr/sbin/policy-rc.d"
	if _, err := os.Stat(policyRCD); errors.Is(err, os.ErrNotExist) {
		if werr := os.WriteFile(policyRCD, []byte("#!/bin/sh\n# temporary, written by sluice internal/testenv\nexit 101\n"), 0o755); werr == nil {
			defer os.Remove(policyRCD)
		}
	}
	env := append(os.Environ(), "DEBIAN_FRONTEND=noninteractive", "NEEDRESTART_MODE=a")
	run := func(args ...string) error {
		cmd := exec.Command(aptGet, args...)
		cmd.Env = env
		var out bytes.Buffer
		cmd.Stdout = &out
		cmd.Stderr = &out
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("testenv: apt-get %s failed: %w\n%s", strings.Join(args, " "), err, tail(out.String(), 40))
		}
		return nil
	}
	if err := run("update"); err != nil {
		return err
	}
	args := append([]string{"install", "-y", "-o", "Dpkg::Options::=--force-confdef", "-o", "Dpkg::Options::=--force-confold"}, pkgs...)
	if err := run(args...); err != nil {
		return err
	}
	if !installed() {
		return fmt.Errorf("testenv: apt-get install %s succeeded but %s is still not found", list, what)
	}
	return nil
}

// Redis is a running (or stopped) throwaway redis-server. Its methods are
// safe for concurrent use.
type Redis struct {
	Host string // always "127.0.0.1"
	Port int
	Dir  string // holds redis.conf, appendonlydir/, redis.log

	// TLSPort is the tls-port, with RedisOptions.TLS (0 without).
	TLSPort int

	server  string
	opts    RedisOptions
	ownsDir bool // Close removes Dir

	mu     sync.Mutex // serialises Start/Stop/Kill/Close
	proc   *process
	closed bool
}

// Addr returns "127.0.0.1:PORT".
func (r *Redis) Addr() string { return net.JoinHostPort(r.Host, strconv.Itoa(r.Port)) }

// TLSAddr returns "127.0.0.1:TLSPORT", the TLS listener (with
// RedisOptions.TLS).
func (r *Redis) TLSAddr() string { return net.JoinHostPort(r.Host, strconv.Itoa(r.TLSPort)) }

// RedisOptions configure StartRedisServer.
type RedisOptions struct {
	// Dir holds the server's data: "" for a new temporary directory,
	// removed by Close; else Dir (created if missing), which Close leaves
	// in place.
	Dir string
	// TLS, when set, adds a tls-port (TLSAddr) presenting TLS's server
	// certificate; with ClientAuth, clients there need a certificate
	// signed by its CA. The plain port (Addr) stays open.
	TLS        *certs.PKI
	ClientAuth bool
	// Users are ACL users (name: password, neither with white space) with
	// every permission, besides the default user, who needs no password.
	Users map[string]string
}

// LogPath is the server's log file.
func (r *Redis) LogPath() string { return filepath.Join(r.Dir, "redis.log") }

// LogTail returns the last n lines of the server's log.
func (r *Redis) LogTail(n int) string { return readTail(r.LogPath(), n) }

// Running reports whether the server process is alive.
func (r *Redis) Running() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.proc != nil && !r.proc.exited()
}

// StartRedisServer installs redis-server if needed (EnsureRedis) and starts
// it on a free port of 127.0.0.1 with its data in opts.Dir. It returns
// once the server answers PING. ctx bounds startup only; call Close when
// done.
func StartRedisServer(ctx context.Context, opts RedisOptions) (*Redis, error) {
	if err := EnsureRedis(); err != nil {
		return nil, err
	}
	for user, pw := range opts.Users {
		if user == "" || pw == "" || strings.ContainsAny(user+pw, " \t\r\n\"'") {
			return nil, fmt.Errorf("testenv: Redis user %q: a name and a password without white space or quotes", user)
		}
	}
	server, _ := findBinary(redisServerCandidates)
	r := &Redis{Host: "127.0.0.1", server: server, opts: opts}
	dir := opts.Dir
	if dir == "" {
		d, err := ownedTempDir()
		if err != nil {
			return nil, err
		}
		r.Dir, r.ownsDir = d, true
	} else {
		abs, err := filepath.Abs(dir)
		if err != nil {
			return nil, fmt.Errorf("testenv: %w", err)
		}
		if err := os.MkdirAll(abs, 0o755); err != nil {
			return nil, fmt.Errorf("testenv: %w", err)
		}
		r.Dir = abs
	}
	ok := false
	defer func() {
		if !ok {
			_ = r.Close()
		}
	}()
	r.mu.Lock()
	defer r.mu.Unlock()
	err := onFreePort(&r.Port, func() error {
		if opts.TLS != nil {
			p, err := freePort()
			if err != nil {
				return err
			}
			r.TLSPort = p
		}
		return r.startLocked(ctx)
	})
	if err != nil {
		return nil, err
	}
	ok = true
	return r, nil
}

// conf is the server's configuration. A config file rather than arguments
// so that `save ""` needs no shell quoting and a person can read it.
func (r *Redis) conf() string {
	lines := []string{
		"bind 127.0.0.1",
		"port " + strconv.Itoa(r.Port),
		"protected-mode no",
		"daemonize no",
		"supervised no",
		"dir " + strconv.Quote(r.Dir),
		"logfile " + strconv.Quote(r.LogPath()),
		"pidfile " + strconv.Quote(filepath.Join(r.Dir, "redis.pid")),
		`save ""`,
		"appendonly yes",
		"appendfsync always",
		// A replica started by a test syncs at once, not after 5 s.
		"repl-diskless-sync-delay 0",
	}
	if t := r.opts.TLS; t != nil {
		auth := "no"
		if r.opts.ClientAuth {
			auth = "yes"
		}
		lines = append(lines,
			"tls-port "+strconv.Itoa(r.TLSPort),
			"tls-cert-file "+strconv.Quote(t.CertFile),
			"tls-key-file "+strconv.Quote(t.KeyFile),
			"tls-ca-cert-file "+strconv.Quote(t.CAFile),
			"tls-auth-clients "+auth)
	}
	users := make([]string, 0, len(r.opts.Users))
	for user := range r.opts.Users {
		users = append(users, user)
	}
	sort.Strings(users)
	for _, user := range users {
		lines = append(lines, "user "+user+" on >"+r.opts.Users[user]+" ~* &* +@all")
	}
	return strings.Join(append(lines, ""), "\n")
}

// startLocked starts redis-server on r.Port and waits until it answers
// PING (not LOADING). r.mu must be held.
func (r *Redis) startLocked(ctx context.Context) error {
	if r.proc != nil && !r.proc.exited() {
		return errors.New("testenv: redis-server already running")
	}
	r.proc = nil
	confPath := filepath.Join(r.Dir, "redis.conf")
	if err := os.WriteFile(confPath, []byte(r.conf()), 0o644); err != nil {
		return fmt.Errorf("testenv: %w", err)
	}
	var logOffset int64
	if fi, err := os.Stat(r.LogPath()); err == nil {
		logOffset = fi.Size()
	}
	out, err := os.OpenFile(filepath.Join(r.Dir, "redis.out"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("testenv: %w", err)
	}
	defer out.Close()
	p, err := startProcess(r.server, []string{confPath}, out, r.Dir)
	if err != nil {
		return fmt.Errorf("testenv: starting %s: %w", r.server, err)
	}
	logSince := func() string {
		b, _ := os.ReadFile(r.LogPath())
		if int64(len(b)) >= logOffset {
			b = b[logOffset:]
		}
		return tail(string(b), 25)
	}
	ctx, cancel := context.WithTimeout(ctx, startupTimeout)
	defer cancel()
	ticker := time.NewTicker(pollInterval / 2)
	defer ticker.Stop()
	var lastErr error
	for {
		select {
		case <-p.done:
			log := logSince()
			if strings.Contains(log, "Address already in use") || strings.Contains(log, "Could not create server TCP listening socket") {
				return fmt.Errorf("testenv: redis-server on port %d: %w", r.Port, errPortInUse)
			}
			return fmt.Errorf("testenv: redis-server exited during startup (%v); log:\n%s%s",
				p.waitErr, log, readTail(filepath.Join(r.Dir, "redis.out"), 10))
		case <-ctx.Done():
			_ = p.signal(syscall.SIGKILL)
			<-p.done
			return fmt.Errorf("testenv: redis-server did not answer PING on %s: %w (last error: %v); log:\n%s",
				r.Addr(), ctx.Err(), lastErr, logSince())
		case <-ticker.C:
		}
		if lastErr = redisPing(ctx, r.Addr()); lastErr == nil {
			r.proc = p
			return nil
		}
	}
}

// redisPing sends PING and expects +PONG (a loading server answers
// -LOADING).
func redisPing(ctx context.Context, addr string) error {
	d := net.Dialer{Timeout: time.Second}
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return err
	}
	if line = strings.TrimSpace(line); line != "+PONG" {
		return fmt.Errorf("PING answered %q", line)
	}
	return nil
}

// Start starts a stopped server again on the same port with the same data.
func (r *Redis) Start(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return errors.New("testenv: Start on closed Redis")
	}
	return whilePortInUse(ctx, func() error { return r.startLocked(ctx) })
}

// Stop shuts the server down (SIGTERM: it finishes the append-only file
// and exits), SIGKILLing it after 30 s. Stopping a stopped server is a
// no-op.
func (r *Redis) Stop() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.stopLocked(stopTimeout)
}

// Kill SIGKILLs the server (a crash) and waits for it to exit.
func (r *Redis) Kill() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.stopLocked(0)
}

func (r *Redis) stopLocked(grace time.Duration) error {
	p := r.proc
	if p == nil {
		return nil
	}
	r.proc = nil
	// Redis refuses a shutdown while it writes its first AOF (say, right
	// after a replica's initial sync): SIGTERM again every 500 ms until it
	// goes or the grace is over.
	return p.stop(fmt.Sprintf("redis-server %d", p.pid), grace, func() error {
		if err := p.signal(syscall.SIGTERM); err != nil {
			return err
		}
		go func() {
			deadline := time.After(grace)
			tick := time.NewTicker(500 * time.Millisecond)
			defer tick.Stop()
			for {
				select {
				case <-p.done:
					return
				case <-deadline:
					return
				case <-tick.C:
					_ = p.signal(syscall.SIGTERM)
				}
			}
		}()
		return nil
	})
}

// Close kills the server and, when StartRedisServer made the directory,
// removes it. It is idempotent.
func (r *Redis) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil
	}
	r.closed = true
	err := r.stopLocked(0)
	if r.ownsDir {
		if rerr := os.RemoveAll(r.Dir); rerr != nil && err == nil {
			err = fmt.Errorf("testenv: removing %s: %w", r.Dir, rerr)
		}
	}
	return err
}
