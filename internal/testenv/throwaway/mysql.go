//go:build unix

package throwaway

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/sluice-cdc/sluice/internal/flock"
)

// MySQL servers for tests.
//
// Debian 12's archive has no MySQL, but Debian unstable (sid) has
// mysql-server-core and mysql-client-core (the 9.7 LTS line), and their
// binaries run on Debian 12 when started through the dynamic loader and
// libraries of sid itself. EnsureMySQL downloads the two packages and their
// library dependencies from the mirror the system's apt already uses (read
// from apt's configuration, never written here), with a private sources
// list and package lists so that nothing of the system's apt state changes,
// and unpacks them with `dpkg -x` into a cache directory. Nothing is
// installed: these packages conflict with MariaDB's.
//
// The cache is $SLUICE_TESTENV_CACHE, or the user's cache directory
// (~/.cache/sluice-testenv); $SLUICE_MYSQL_ROOT names an unpacked tree to
// use instead. A first download takes a few seconds to a minute; later
// test binaries find the unpacked tree and start at once.

// mysqlPackages are the packages whose programs the tests use.
var mysqlPackages = []string{"mysql-server-core", "mysql-client-core"}

// MySQLDist is an unpacked MySQL distribution.
type MySQLDist struct {
	Root    string // the unpacked tree (usr/sbin/mysqld, usr/bin/mysqldump, ...)
	Version string // the Debian package version, e.g. "9.7.4-2"
}

var (
	ensureMySQLOnce sync.Once
	ensureMySQLDist MySQLDist
	ensureMySQLErr  error
)

// EnsureMySQL makes sure an unpacked MySQL is in the cache (downloading it
// once, under a lock shared by all processes) and returns it.
func EnsureMySQL() (MySQLDist, error) {
	ensureMySQLOnce.Do(func() { ensureMySQLDist, ensureMySQLErr = ensureMySQL() })
	return ensureMySQLDist, ensureMySQLErr
}

// Command returns a command running one of the distribution's programs
// (e.g. "mysqlbinlog", "mysqldump", "mysql"; "mysqld" is in usr/sbin)
// through sid's dynamic loader and libraries.
func (d MySQLDist) Command(program string, args ...string) *exec.Cmd {
	name, all := d.argv(program, args...)
	return exec.Command(name, all...)
}

// argv is the loader and its arguments that run program with args.
func (d MySQLDist) argv(program string, args ...string) (string, []string) {
	bin := filepath.Join(d.Root, "usr", "bin", program)
	if program == "mysqld" {
		bin = filepath.Join(d.Root, "usr", "sbin", program)
	}
	libs := filepath.Join(d.Root, "usr", "lib", "x86_64-linux-gnu") + ":" + filepath.Join(d.Root, "lib", "x86_64-linux-gnu")
	all := append([]string{"--library-path", libs, bin}, args...)
	return d.loader(), all
}

func (d MySQLDist) loader() string {
	return filepath.Join(d.Root, "usr", "lib64", "ld-linux-x86-64.so.2")
}

func (d MySQLDist) complete() bool {
	for _, p := range []string{d.loader(), filepath.Join(d.Root, "usr", "sbin", "mysqld"), filepath.Join(d.Root, "usr", "bin", "mysqlbinlog")} {
		if _, err := os.Stat(p); err != nil {
			return false
		}
	}
	return true
}

// CacheDir is the directory the test servers and tools are kept in
// between runs: $SLUICE_TESTENV_CACHE, else the user's cache directory's
// sluice-testenv (MySQL's unpacked packages, Kafka's jars, the Debezium
// harness).
func CacheDir() (string, error) {
	if d := os.Getenv("SLUICE_TESTENV_CACHE"); d != "" {
		return d, nil
	}
	base, err := os.UserCacheDir()
	if err != nil {
		base = os.TempDir()
	}
	return filepath.Join(base, "sluice-testenv"), nil
}

// readyMarker in a distribution directory holds its version once the
// unpacking is complete.
const readyMarker = ".sluice-ready"

func ensureMySQL() (MySQLDist, error) {
	if root := os.Getenv("SLUICE_MYSQL_ROOT"); root != "" {
		d := MySQLDist{Root: root, Version: "unknown"}
		if !d.complete() {
			return d, fmt.Errorf("testenv: SLUICE_MYSQL_ROOT=%s has no usr/sbin/mysqld, usr/bin/mysqlbinlog and usr/lib64/ld-linux-x86-64.so.2", root)
		}
		return d, nil
	}
	base, err := CacheDir()
	if err != nil {
		return MySQLDist{}, err
	}
	if err := os.MkdirAll(base, 0o755); err != nil {
		return MySQLDist{}, fmt.Errorf("testenv: %w", err)
	}
	unlock, err := lockFile(filepath.Join(base, "mysql.lock"))
	if err != nil {
		return MySQLDist{}, err
	}
	defer unlock()
	if d, ok := cachedMySQL(base); ok {
		return d, nil
	}
	return downloadMySQL(base)
}

// cachedMySQL finds the newest complete distribution in the cache.
func cachedMySQL(base string) (MySQLDist, bool) {
	dirs, _ := filepath.Glob(filepath.Join(base, "mysql-*"))
	sort.Sort(sort.Reverse(sort.StringSlice(dirs)))
	for _, dir := range dirs {
		v, err := os.ReadFile(filepath.Join(dir, readyMarker))
		if err != nil {
			continue
		}
		d := MySQLDist{Root: filepath.Join(dir, "root"), Version: strings.TrimSpace(string(v))}
		if d.complete() {
			return d, true
		}
	}
	return MySQLDist{}, false
}

// lockFile takes an exclusive flock on path, waiting for other processes.
func lockFile(path string) (unlock func(), err error) {
	unlock, err = flock.Lock(path)
	if err != nil {
		return nil, fmt.Errorf("testenv: %w", err)
	}
	return unlock, nil
}

// downloadMySQL fetches and unpacks the packages into base/mysql-VERSION.
func downloadMySQL(base string) (MySQLDist, error) {
	start := time.Now()
	work, err := os.MkdirTemp(base, "download-")
	if err != nil {
		return MySQLDist{}, fmt.Errorf("testenv: %w", err)
	}
	defer os.RemoveAll(work)

	mirror, err := debianMirror()
	if err != nil {
		return MySQLDist{}, err
	}
	list := filepath.Join(work, "sid.list")
	signedBy := ""
	if _, err := os.Stat("/usr/share/keyrings/debian-archive-keyring.gpg"); err == nil {
		signedBy = "[signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] "
	}
	if err := os.WriteFile(list, []byte("deb "+signedBy+mirror+" sid main\n"), 0o644); err != nil {
		return MySQLDist{}, fmt.Errorf("testenv: %w", err)
	}
	lists := filepath.Join(work, "lists")
	cache := filepath.Join(work, "cache")
	debs := filepath.Join(work, "debs")
	for _, d := range []string{filepath.Join(lists, "partial"), filepath.Join(cache, "archives", "partial"), debs} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return MySQLDist{}, fmt.Errorf("testenv: %w", err)
		}
	}
	// Only our list, our package lists and an empty dpkg status: the
	// system's apt state is neither read nor changed.
	opts := []string{
		"-o", "Dir::Etc::sourcelist=" + list,
		"-o", "Dir::Etc::sourceparts=" + filepath.Join(work, "no-parts"),
		"-o", "Dir::State::Lists=" + lists,
		"-o", "Dir::Cache=" + cache,
		"-o", "Dir::State::status=/dev/null",
		"-o", "APT::Sandbox::User=root",
		"-o", "Debug::NoLocking=1",
	}
	apt := func(dir, program string, args ...string) (string, error) {
		cmd := exec.Command(program, append(append([]string(nil), opts...), args...)...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive", "LC_ALL=C")
		var out, errOut bytes.Buffer
		cmd.Stdout = &out
		cmd.Stderr = &errOut
		if err := cmd.Run(); err != nil {
			return "", fmt.Errorf("testenv: fetching MySQL from Debian sid (%s): %s %s: %w\n%s%s", mirror, program, strings.Join(args, " "), err, tail(errOut.String(), 20), tail(out.String(), 20))
		}
		return out.String(), nil
	}
	if _, err := apt(work, "apt-get", "update", "-q"); err != nil {
		return MySQLDist{}, err
	}
	show, err := apt(work, "apt-cache", "show", "--no-all-versions", mysqlPackages[0])
	if err != nil {
		return MySQLDist{}, err
	}
	version := ""
	for _, line := range strings.Split(show, "\n") {
		if v, ok := strings.CutPrefix(line, "Version: "); ok {
			version = strings.TrimSpace(v)
			break
		}
	}
	if version == "" {
		return MySQLDist{}, fmt.Errorf("testenv: Debian sid at %s has no %s package", mirror, mysqlPackages[0])
	}
	deps, err := apt(work, "apt-cache", append([]string{"depends", "--recurse", "--no-recommends", "--no-suggests",
		"--no-conflicts", "--no-breaks", "--no-replaces", "--no-enhances"}, mysqlPackages...)...)
	if err != nil {
		return MySQLDist{}, err
	}
	pkgs := neededPackages(deps)
	if _, err := apt(debs, "apt-get", append([]string{"download", "-q"}, pkgs...)...); err != nil {
		return MySQLDist{}, err
	}
	root := filepath.Join(work, "root")
	files, _ := filepath.Glob(filepath.Join(debs, "*.deb"))
	if len(files) < len(pkgs) {
		return MySQLDist{}, fmt.Errorf("testenv: apt-get download gave %d of %d packages", len(files), len(pkgs))
	}
	for _, f := range files {
		if out, err := exec.Command("dpkg", "-x", f, root).CombinedOutput(); err != nil {
			return MySQLDist{}, fmt.Errorf("testenv: dpkg -x %s: %w\n%s", filepath.Base(f), err, out)
		}
	}
	final := filepath.Join(base, "mysql-"+version)
	os.RemoveAll(final)
	if err := os.MkdirAll(final, 0o755); err != nil {
		return MySQLDist{}, fmt.Errorf("testenv: %w", err)
	}
	if err := os.Rename(root, filepath.Join(final, "root")); err != nil {
		return MySQLDist{}, fmt.Errorf("testenv: %w", err)
	}
	d := MySQLDist{Root: filepath.Join(final, "root"), Version: version}
	if !d.complete() {
		return d, fmt.Errorf("testenv: the unpacked MySQL %s in %s lacks mysqld, mysqlbinlog or the loader", version, final)
	}
	if err := os.WriteFile(filepath.Join(final, readyMarker), []byte(version+"\n"), 0o644); err != nil {
		return d, fmt.Errorf("testenv: %w", err)
	}
	fmt.Fprintf(os.Stderr, "testenv: unpacked MySQL %s from Debian sid (%d packages) into %s in %v\n", version, len(pkgs), final, time.Since(start).Round(time.Second))
	return d, nil
}

// neededPackages picks the real packages out of `apt-cache depends
// --recurse` output: unindented lines, without virtual packages (<...>)
// and without perl, which only the helper scripts need.
func neededPackages(out string) []string {
	seen := map[string]bool{}
	var pkgs []string
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == ' ' || line[0] == '<' {
			continue
		}
		name := strings.TrimSpace(line)
		if name == "perl" || strings.HasPrefix(name, "perl-") || strings.HasPrefix(name, "libperl") || seen[name] {
			continue
		}
		seen[name] = true
		pkgs = append(pkgs, name)
	}
	sort.Strings(pkgs)
	return pkgs
}

// debianMirror returns the Debian archive URL the system's apt uses (the
// site of its "main" component of a release that is neither -security nor
// -updates nor -backports), as apt itself reports it.
func debianMirror() (string, error) {
	out, err := exec.Command("apt-get", "indextargets", "--no-release-info", "--format", "$(SITE)|$(RELEASE)|$(COMPONENT)|$(TARGET_OF)").Output()
	if err != nil {
		return "", fmt.Errorf("testenv: apt-get indextargets (to find the Debian mirror apt uses): %w", err)
	}
	var candidates []string
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Split(line, "|")
		if len(f) != 4 || f[3] != "deb" || f[2] != "main" {
			continue
		}
		if strings.Contains(f[1], "-") || strings.Contains(f[0], "security") {
			continue
		}
		candidates = append(candidates, f[0])
	}
	if len(candidates) == 0 {
		return "", errors.New("testenv: apt's configuration names no Debian archive with a main component (apt-get indextargets); MySQL is fetched from Debian sid on the same mirror")
	}
	return candidates[0], nil
}

// copyTemplate gives the server a data directory: a copy of one
// initialized once per distribution (mysqld --initialize-insecure takes a
// few seconds; a copy a fraction of one), without the template's
// server_uuid, so that every server has its own.
func (m *Server) copyTemplate(ctx context.Context) error {
	tmpl, err := m.dist.template(ctx)
	if err != nil {
		return err
	}
	if err := copyTree(tmpl, m.DataDir()); err != nil {
		return fmt.Errorf("testenv: copying the MySQL data directory template: %w", err)
	}
	if err := os.Remove(filepath.Join(m.DataDir(), "auto.cnf")); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("testenv: %w", err)
	}
	return nil
}

// template returns a data directory made by mysqld --initialize-insecure,
// made once per distribution under a lock shared by all processes.
func (d MySQLDist) template(ctx context.Context) (string, error) {
	base, err := CacheDir()
	if err != nil {
		return "", err
	}
	dir := filepath.Join(base, "templates", strings.NewReplacer("/", "_", ".", "_").Replace(strings.Trim(d.Root, "/")))
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return "", fmt.Errorf("testenv: %w", err)
	}
	unlock, err := lockFile(dir + ".lock")
	if err != nil {
		return "", err
	}
	defer unlock()
	if _, err := os.Stat(filepath.Join(dir, readyMarker)); err == nil {
		return dir, nil
	}
	os.RemoveAll(dir)
	work := dir + ".init"
	os.RemoveAll(work)
	defer os.RemoveAll(work)
	if err := os.MkdirAll(work, 0o755); err != nil {
		return "", fmt.Errorf("testenv: %w", err)
	}
	data := filepath.Join(work, "data")
	args := []string{"--no-defaults", "--initialize-insecure",
		"--basedir=" + filepath.Join(d.Root, "usr"),
		"--lc-messages-dir=" + filepath.Join(d.Root, "usr", "share", "mysql"),
		"--datadir=" + data,
		"--tmpdir=" + work,
		"--log-error=" + filepath.Join(work, "init.log"),
		"--innodb-redo-log-capacity=64M",
		"--innodb-buffer-pool-size=128M",
	}
	if os.Geteuid() == 0 {
		args = append(args, "--user=root")
	}
	ctx, cancel := context.WithTimeout(ctx, installTimeout)
	defer cancel()
	name, argv := d.argv("mysqld", args...)
	cmd := exec.CommandContext(ctx, name, argv...)
	cmd.SysProcAttr = sysProcAttr()
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("testenv: mysqld --initialize-insecure: %w\n%s%s", err, out, readExcerpt(filepath.Join(work, "init.log")))
	}
	for _, f := range []string{"auto.cnf"} {
		os.Remove(filepath.Join(data, f))
	}
	if err := os.WriteFile(filepath.Join(data, readyMarker), []byte(d.Version+"\n"), 0o644); err != nil {
		return "", fmt.Errorf("testenv: %w", err)
	}
	if err := os.Rename(data, dir); err != nil {
		return "", fmt.Errorf("testenv: %w", err)
	}
	return dir, nil
}

// copyTree copies the regular files and directories under src to dst
// (which must not exist), without the ready marker.
func copyTree(src, dst string) error {
	return filepath.WalkDir(src, func(path string, e os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		to := filepath.Join(dst, rel)
		switch {
		case e.IsDir():
			return os.Mkdir(to, 0o750)
		case rel == readyMarker || !e.Type().IsRegular():
			return nil
		}
		in, err := os.Open(path)
		if err != nil {
			return err
		}
		defer in.Close()
		fi, err := in.Stat()
		if err != nil {
			return err
		}
		out, err := os.OpenFile(to, os.O_CREATE|os.O_EXCL|os.O_WRONLY, fi.Mode().Perm())
		if err != nil {
			return err
		}
		if _, err := io.Copy(out, in); err != nil {
			out.Close()
			return err
		}
		return out.Close()
	})
}
