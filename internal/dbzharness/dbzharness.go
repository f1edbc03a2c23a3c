//go:build linux

// Package dbzharness runs Debezium itself, as the oracle of the tests of
// format debezium: Debezium Embedded with a connector and Kafka Connect's
// JsonConverter (the connect-json that Debezium depends on), in one JVM
// that serves many captures. Two builds exist, each one Debezium version
// for every module of its class path: DebeziumVersion (3.6.1.Final) with
// the MySQL connector, and MariaDBVersion (3.5.0.Final) with the MariaDB
// connector (its 3.6.1.Final is not served by the registry this project
// builds from; the MySQL connector of Debezium 3 refuses MariaDB).
//
// The Java side is this directory's pom.xml and src/ (the project's own
// test equipment, never shipped). Build compiles it with Maven once per
// version into the test cache ($SLUICE_TESTENV_CACHE, else the user's
// cache directory's sluice-testenv, as for throwaway's MySQL), keyed by a
// hash of its sources and the version, with Maven's local repository
// there too (m2/), so that later runs build offline. Start runs a JVM of
// a version; each Capture hands it Debezium's properties and reads back
// the records, each as its topic, key and value as JsonConverter
// serialised them:
//
//	h, err := dbzharness.Start(ctx, dbzharness.DebeziumVersion)
//	defer h.Close()
//	recs, err := h.Capture(ctx, dbzharness.MySQLProps(db.Host, db.Port, "root", "pw", "oracle.t", 5401), 10, 5*time.Second)
//
// SLUICE_DBZHARNESS_LOG sets Debezium's log level (default warn; its log
// is the JVM's standard error, Log). Maven and a JDK 17+ are what `make deps` installs (Debian's maven and
// openjdk-17-jdk-headless); JAVA_HOME, when set, names the JDK.
package dbzharness

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"embed"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/sluice-cdc/sluice/internal/flock"
	"github.com/sluice-cdc/sluice/internal/testenv/throwaway"
	"github.com/sluice-cdc/sluice/position"
)

// The Debezium versions the harness builds, each with its connector
// (connectors): every Debezium module of a class path is of one version.
const (
	// DebeziumVersion runs the MySQL connector (MySQLProps).
	DebeziumVersion = "3.6.1.Final"
	// MariaDBVersion runs the MariaDB connector (MariaDBProps): the
	// newest whose debezium-connector-mariadb the registry serves.
	MariaDBVersion = "3.5.0.Final"
)

// connectors maps each version Build knows to its connector, the suffix of
// the artifact debezium-connector-<name> (pom.xml's debezium.connector).
var connectors = map[string]string{
	DebeziumVersion: "mysql",
	MariaDBVersion:  "mariadb",
}

// VersionFor is the version whose connector reads flavor's servers.
func VersionFor(flavor position.Flavor) string {
	if flavor == position.MariaDB {
		return MariaDBVersion
	}
	return DebeziumVersion
}

// ErrNotInstalled is returned when Maven or a JDK is missing.
var ErrNotInstalled = errors.New("dbzharness: Maven or a JDK 17+ is not installed (run 'make deps', or apt-get install maven openjdk-17-jdk-headless)")

// Record is one record Debezium produced: its topic, and its key and value
// as JsonConverter serialised them with schemas.enable=false and with
// schemas.enable=true (nil for a null key or value, a tombstone's).
type Record struct {
	Topic                  string
	Key, Value             json.RawMessage
	SchemaKey, SchemaValue json.RawMessage
}

// Build compiles the harness with Debezium version (DebeziumVersion or
// MariaDBVersion) if the cache does not hold this source's build of it
// yet, and returns the java command's class path (the harness jar and its
// dependencies).
func Build(ctx context.Context, version string) (classpath string, err error) {
	out, err := build(ctx, version)
	if err != nil {
		return "", err
	}
	cp, ok := built(out)
	if !ok {
		return "", fmt.Errorf("dbzharness: the build in %s is incomplete", out)
	}
	return cp, nil
}

// build is Build's work: it returns the build's directory in the cache.
func build(ctx context.Context, version string) (string, error) {
	connector, ok := connectors[version]
	if !ok {
		return "", fmt.Errorf("dbzharness: no build of Debezium %q (known: %s, %s)", version, DebeziumVersion, MariaDBVersion)
	}
	sum, err := hashSources(version, connector)
	if err != nil {
		return "", err
	}
	cache, err := throwaway.CacheDir()
	if err != nil {
		return "", err
	}
	out := filepath.Join(cache, "dbzharness-"+sum[:16])
	if _, ok := built(out); ok {
		return out, nil
	}
	if _, err := exec.LookPath("mvn"); err != nil {
		return "", ErrNotInstalled
	}
	if err := os.MkdirAll(cache, 0o755); err != nil {
		return "", fmt.Errorf("dbzharness: %w", err)
	}
	unlock, err := flock.Lock(filepath.Join(cache, "dbzharness.lock"))
	if err != nil {
		return "", fmt.Errorf("dbzharness: %w", err)
	}
	defer unlock()
	if _, ok := built(out); ok {
		return out, nil
	}
	work, err := os.MkdirTemp(cache, "dbzharness-build-")
	if err != nil {
		return "", fmt.Errorf("dbzharness: %w", err)
	}
	defer os.RemoveAll(work)
	if err := writeSources(work); err != nil {
		return "", fmt.Errorf("dbzharness: copying the sources: %w", err)
	}
	repo := filepath.Join(cache, "m2")
	mvn := func(offline bool) ([]byte, error) {
		args := []string{"-B", "-q", "-Dmaven.repo.local=" + repo,
			"-Ddebezium.version=" + version, "-Ddebezium.connector=" + connector, "package"}
		if offline {
			args = append([]string{"-o"}, args...)
		}
		cmd := exec.CommandContext(ctx, "mvn", args...)
		cmd.Dir = work
		cmd.Env = javaEnv()
		return cmd.CombinedOutput()
	}
	// Offline first: once the repository is warm no network is needed.
	if _, err := mvn(true); err != nil {
		if b, err := mvn(false); err != nil {
			return "", fmt.Errorf("dbzharness: mvn package (Debezium %s, connector %s; Maven Central must be reachable on the first build): %w\n%s", version, connector, err, tail(b, 40))
		}
	}
	tmp := out + ".tmp"
	os.RemoveAll(tmp)
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		return "", fmt.Errorf("dbzharness: %w", err)
	}
	for _, f := range []string{"dbzharness.jar", "classpath.txt"} {
		b, err := os.ReadFile(filepath.Join(work, "target", f))
		if err != nil {
			return "", fmt.Errorf("dbzharness: mvn package wrote no %s: %w", f, err)
		}
		if err := os.WriteFile(filepath.Join(tmp, f), b, 0o644); err != nil {
			return "", fmt.Errorf("dbzharness: %w", err)
		}
	}
	if err := os.CopyFS(filepath.Join(tmp, "corpus"), os.DirFS(filepath.Join(work, "target", "corpus", "ddl"))); err != nil {
		return "", fmt.Errorf("dbzharness: mvn package unpacked no corpus: %w", err)
	}
	os.RemoveAll(out)
	if err := os.Rename(tmp, out); err != nil {
		return "", fmt.Errorf("dbzharness: %w", err)
	}
	return out, nil
}

// Script is one of Debezium's connector test scripts.
type Script struct {
	// Name is the script's file name without ".sql" (Debezium's tests
	// run it in a database of that name).
	Name string
	// Statements are its statements, comments left out, without their
	// closing ";".
	Statements []string
}

// Corpus returns Debezium's own connector test scripts (the ddl/*.sql of
// io.debezium:debezium-connector-binlog's test jar at version, fetched by
// the harness's build), sorted by name.
func Corpus(ctx context.Context, version string) ([]Script, error) {
	out, err := build(ctx, version)
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(out, "corpus")
	files, err := filepath.Glob(filepath.Join(dir, "*.sql"))
	if err != nil || len(files) == 0 {
		return nil, fmt.Errorf("dbzharness: no scripts in %s (%v)", dir, err)
	}
	sort.Strings(files)
	var scripts []Script
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("dbzharness: %w", err)
		}
		// Debezium's runner (UniqueDatabase) drops every line that starts
		// with "--" ("--- Left empty on purpose" too, which is no comment to
		// the server), and its scripts write the ";" inside a routine's body
		// as "$$", made ";" once the script is split.
		var lines []string
		for _, l := range strings.Split(string(b), "\n") {
			if !strings.HasPrefix(strings.TrimSpace(l), "--") {
				lines = append(lines, l)
			}
		}
		stmts, err := SplitSQL(strings.Join(lines, "\n"))
		if err != nil {
			return nil, fmt.Errorf("dbzharness: %s: %w", filepath.Base(f), err)
		}
		for i := range stmts {
			stmts[i] = strings.ReplaceAll(stmts[i], "$$", ";")
		}
		scripts = append(scripts, Script{Name: strings.TrimSuffix(filepath.Base(f), ".sql"), Statements: stmts})
	}
	return scripts, nil
}

// SplitSQL splits a script as the mysql client does without DELIMITER:
// at each ";" outside quotes ('…', "…", `…`, with backslash escapes in
// the first two) and comments (-- and # to the end of the line, /* … */;
// MySQL's executable /*! … */ comments are kept). Comments are left out,
// empty statements dropped.
func SplitSQL(s string) ([]string, error) {
	var out []string
	var cur strings.Builder
	flush := func() {
		if st := strings.TrimSpace(cur.String()); st != "" {
			out = append(out, st)
		}
		cur.Reset()
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '\'' || c == '"' || c == '`':
			j := i + 1
			for ; j < len(s); j++ {
				if s[j] == '\\' && c != '`' {
					j++
					continue
				}
				if s[j] == c {
					if j+1 < len(s) && s[j+1] == c { // a doubled quote
						j++
						continue
					}
					break
				}
			}
			if j >= len(s) {
				return nil, fmt.Errorf("a %c quote opened at byte %d is not closed", c, i)
			}
			cur.WriteString(s[i : j+1])
			i = j
		case c == '#' || c == '-' && strings.HasPrefix(s[i:], "-- ") || strings.HasPrefix(s[i:], "--\n"):
			j := strings.IndexByte(s[i:], '\n')
			if j < 0 {
				i = len(s)
			} else {
				i += j
				cur.WriteByte('\n')
			}
		case c == '/' && strings.HasPrefix(s[i:], "/*") && !strings.HasPrefix(s[i:], "/*!"):
			j := strings.Index(s[i+2:], "*/")
			if j < 0 {
				return nil, fmt.Errorf("a comment opened at byte %d is not closed", i)
			}
			i += j + 3
			cur.WriteByte(' ')
		case c == ';':
			flush()
		default:
			cur.WriteByte(c)
		}
	}
	flush()
	return out, nil
}

// built returns the class path of the build in dir when it is complete and
// every jar it names is still there.
func built(dir string) (string, bool) {
	b, err := os.ReadFile(filepath.Join(dir, "classpath.txt"))
	if err != nil {
		return "", false
	}
	deps := strings.Split(strings.TrimSpace(string(b)), string(os.PathListSeparator))
	for _, d := range deps {
		if _, err := os.Stat(d); err != nil {
			return "", false
		}
	}
	jar := filepath.Join(dir, "dbzharness.jar")
	if _, err := os.Stat(jar); err != nil {
		return "", false
	}
	return strings.Join(append([]string{jar}, deps...), string(os.PathListSeparator)), true
}

// Harness is a running JVM serving captures, one at a time.
type Harness struct {
	mu     sync.Mutex
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stdout *bufio.Reader
	stderr *tailBuffer
	dir    string
	n      int
	// Version is the Debezium version the JVM runs.
	Version string
	// Started is how long the JVM took to start and answer.
	Started time.Duration
}

// Start builds the harness with Debezium version if needed and starts its
// JVM.
func Start(ctx context.Context, version string) (*Harness, error) {
	cp, err := Build(ctx, version)
	if err != nil {
		return nil, err
	}
	java, err := javaBinary()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "sluice-dbzharness-")
	if err != nil {
		return nil, fmt.Errorf("dbzharness: %w", err)
	}
	t0 := time.Now()
	level := os.Getenv("SLUICE_DBZHARNESS_LOG") // Debezium's log level; default warn
	if level == "" {
		level = "warn"
	}
	cmd := exec.Command(java, "-Xmx512m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
		"-Dorg.slf4j.simpleLogger.defaultLogLevel="+level, "-Dorg.slf4j.simpleLogger.showDateTime=true",
		"-cp", cp, "io.sluice.dbzharness.Main")
	cmd.Dir = dir
	// Its own process group, killed with the test binary (stdin's end ends
	// it too).
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	h := &Harness{cmd: cmd, dir: dir, stderr: &tailBuffer{max: 64 << 10}, Version: version}
	cmd.Stderr = h.stderr
	if h.stdin, err = cmd.StdinPipe(); err != nil {
		return nil, fmt.Errorf("dbzharness: %w", err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("dbzharness: %w", err)
	}
	h.stdout = bufio.NewReader(out)
	if err := cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("dbzharness: starting %s: %w", java, err)
	}
	line, err := h.readLine(ctx, time.Minute)
	if err != nil || line != "ready" {
		h.Close()
		return nil, fmt.Errorf("dbzharness: the JVM did not start (%q, %v); its log:\n%s", line, err, h.stderr.String())
	}
	h.Started = time.Since(t0)
	return h, nil
}

func (h *Harness) readLine(ctx context.Context, d time.Duration) (string, error) {
	type res struct {
		s   string
		err error
	}
	ch := make(chan res, 1)
	go func() {
		s, err := h.stdout.ReadString('\n')
		ch <- res{strings.TrimRight(s, "\n"), err}
	}()
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case r := <-ch:
		return r.s, r.err
	case <-timer.C:
		h.kill()
		return "", fmt.Errorf("dbzharness: no answer in %v (JVM killed)", d)
	case <-ctx.Done():
		h.kill()
		return "", ctx.Err()
	}
}

func (h *Harness) kill() {
	if h.cmd.Process != nil {
		syscall.Kill(-h.cmd.Process.Pid, syscall.SIGKILL)
	}
}

// Capture runs one Debezium engine with props (the engine's and the
// connector's options; name, offset storage and schema history default to
// an in-memory offset store and a schema-history file of this capture;
// options under "converter." configure JsonConverter) until it has
// produced max records, or idle passes without a record after the first
// (two minutes before it), or the engine stops by itself (as after
// snapshot.mode=initial_only). Each record comes serialised with and
// without schemas. It returns the time the capture took in the JVM.
func (h *Harness) Capture(ctx context.Context, props map[string]string, max int, idle time.Duration) ([]Record, time.Duration, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.n++
	base := filepath.Join(h.dir, "capture-"+strconv.Itoa(h.n))
	p := map[string]string{
		"name":                                  "sluice-oracle-" + strconv.Itoa(h.n),
		"offset.storage":                        "org.apache.kafka.connect.storage.MemoryOffsetBackingStore",
		"offset.flush.interval.ms":              "60000",
		"schema.history.internal":               "io.debezium.storage.file.history.FileSchemaHistory",
		"schema.history.internal.file.filename": base + ".history",
	}
	for k, v := range props {
		p[k] = v
	}
	if err := os.WriteFile(base+".properties", []byte(throwaway.JavaProperties(p)), 0o600); err != nil {
		return nil, 0, fmt.Errorf("dbzharness: %w", err)
	}
	out := base + ".records"
	if _, err := fmt.Fprintf(h.stdin, "capture %s %s %d %d\n", base+".properties", out, max, idle.Milliseconds()); err != nil {
		return nil, 0, fmt.Errorf("dbzharness: the JVM is gone (%v); its log:\n%s", err, h.stderr.String())
	}
	line, err := h.readLine(ctx, idle+5*time.Minute)
	if err != nil {
		return nil, 0, fmt.Errorf("%w; its log:\n%s", err, h.stderr.String())
	}
	f := strings.SplitN(line, " ", 3)
	if f[0] != "ok" || len(f) != 3 {
		return nil, 0, fmt.Errorf("dbzharness: Debezium failed: %s\nits log:\n%s", line, h.stderr.String())
	}
	ms, _ := strconv.Atoi(f[2])
	recs, err := readRecords(out)
	return recs, time.Duration(ms) * time.Millisecond, err
}

// Consumed is one record Kafka's own Java consumer read.
type Consumed struct {
	Topic     string
	Partition int32
	Offset    int64
	// Key and Value are nil for a null key or value (a tombstone's).
	Key, Value []byte
	Headers    []Header
}

// Header is one record header.
type Header struct {
	Key   string
	Value []byte
}

// Consume reads every partition of topics from its start to its end with
// Kafka's own Java consumer (kafka-clients, isolation.level=read_committed,
// in the harness's JVM): a second opinion, from code no one here wrote, on
// what sluice's Kafka sink made visible. The end is each partition's last
// stable offset when Consume starts; it fails if that is not reached
// within timeout, or a topic does not exist. Records come in partition
// order within each partition.
func (h *Harness) Consume(ctx context.Context, brokers, topics []string, timeout time.Duration) ([]Consumed, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.n++
	out := filepath.Join(h.dir, "consume-"+strconv.Itoa(h.n)+".records")
	if _, err := fmt.Fprintf(h.stdin, "consume %s %s %s %d\n", strings.Join(brokers, ","), out, strings.Join(topics, ","), timeout.Milliseconds()); err != nil {
		return nil, fmt.Errorf("dbzharness: the JVM is gone (%v); its log:\n%s", err, h.stderr.String())
	}
	line, err := h.readLine(ctx, timeout+time.Minute)
	if err != nil {
		return nil, fmt.Errorf("%w; its log:\n%s", err, h.stderr.String())
	}
	if f := strings.SplitN(line, " ", 3); f[0] != "ok" || len(f) != 3 {
		return nil, fmt.Errorf("dbzharness: the Kafka consumer failed: %s\nits log:\n%s", line, h.stderr.String())
	}
	data, err := os.ReadFile(out)
	if err != nil {
		return nil, fmt.Errorf("dbzharness: %w", err)
	}
	os.Remove(out)
	return parseConsumed(data)
}

// parseConsumed reads the consume command's output lines.
func parseConsumed(data []byte) ([]Consumed, error) {
	unb64 := func(s string) ([]byte, error) {
		if s == "-" {
			return nil, nil
		}
		b, err := base64.StdEncoding.DecodeString(s)
		if b == nil && err == nil {
			b = []byte{}
		}
		return b, err
	}
	var recs []Consumed
	for _, l := range strings.Split(string(data), "\n") {
		if l == "" {
			continue
		}
		f := strings.Split(l, "\t")
		if len(f) != 6 {
			return nil, fmt.Errorf("dbzharness: a consumed record line without six fields: %.200q", l)
		}
		part, err1 := strconv.ParseInt(f[1], 10, 32)
		off, err2 := strconv.ParseInt(f[2], 10, 64)
		key, err3 := unb64(f[3])
		val, err4 := unb64(f[4])
		if err := errors.Join(err1, err2, err3, err4); err != nil {
			return nil, fmt.Errorf("dbzharness: consumed record line %.200q: %w", l, err)
		}
		r := Consumed{Topic: f[0], Partition: int32(part), Offset: off, Key: key, Value: val}
		if f[5] != "-" {
			for _, kv := range strings.Split(f[5], ",") {
				k, v, _ := strings.Cut(kv, ":")
				kb, err1 := unb64(k)
				vb, err2 := unb64(v)
				if err := errors.Join(err1, err2); err != nil {
					return nil, fmt.Errorf("dbzharness: consumed record header %q: %w", kv, err)
				}
				r.Headers = append(r.Headers, Header{Key: string(kb), Value: vb})
			}
		}
		recs = append(recs, r)
	}
	return recs, nil
}

func readRecords(path string) ([]Record, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("dbzharness: %w", err)
	}
	var recs []Record
	for _, l := range bytes.Split(data, []byte("\n")) {
		if len(l) == 0 {
			continue
		}
		f := bytes.Split(l, []byte("\t"))
		if len(f) != 5 {
			return nil, fmt.Errorf("dbzharness: a record line without five fields: %.200q", l)
		}
		r := Record{Topic: string(f[0])}
		for i, dst := range []*json.RawMessage{&r.Key, &r.Value, &r.SchemaKey, &r.SchemaValue} {
			if string(f[i+1]) != "null" {
				*dst = json.RawMessage(f[i+1])
			}
		}
		recs = append(recs, r)
	}
	return recs, nil
}

// Log is the tail of the JVM's standard error (Debezium's log).
func (h *Harness) Log() string { return h.stderr.String() }

// Close ends the JVM (end of input, then a kill after 10 s) and removes its
// files.
func (h *Harness) Close() error {
	h.stdin.Close()
	done := make(chan error, 1)
	go func() { done <- h.cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		h.kill()
		<-done
	}
	return os.RemoveAll(h.dir)
}

// MySQLProps are the connector options for a MySQL server at host:port
// read by user, capturing tables (Debezium's table.include.list, a regular
// expression over db.table), with serverID as the replica's server id.
// The topic prefix is "sluice", tail's default source name. They need a
// harness of DebeziumVersion.
func MySQLProps(host string, port int, user, password, tables string, serverID uint32) map[string]string {
	p := connectorProps("io.debezium.connector.mysql.MySqlConnector", host, port, user, password, tables, serverID)
	p["database.ssl.mode"] = "disabled"
	return p
}

// PropsFor is MySQLProps or MariaDBProps, as flavor needs (with a
// harness of VersionFor(flavor)).
func PropsFor(flavor position.Flavor, host string, port int, user, password, tables string, serverID uint32) map[string]string {
	if flavor == position.MariaDB {
		return MariaDBProps(host, port, user, password, tables, serverID)
	}
	return MySQLProps(host, port, user, password, tables, serverID)
}

// MariaDBProps are MySQLProps for a MariaDB server, read by Debezium's
// MariaDB connector: they need a harness of MariaDBVersion.
func MariaDBProps(host string, port int, user, password, tables string, serverID uint32) map[string]string {
	p := connectorProps("io.debezium.connector.mariadb.MariaDbConnector", host, port, user, password, tables, serverID)
	p["database.ssl.mode"] = "disable" // the MariaDB connector's name for it
	return p
}

func connectorProps(class, host string, port int, user, password, tables string, serverID uint32) map[string]string {
	return map[string]string{
		"connector.class":        class,
		"database.hostname":      host,
		"database.port":          strconv.Itoa(port),
		"database.user":          user,
		"database.password":      password,
		"database.server.id":     strconv.FormatUint(uint64(serverID), 10),
		"topic.prefix":           "sluice",
		"table.include.list":     tables,
		"include.schema.changes": "false",
	}
}

// BenchCommand is the command of Debezium as sluice-bench's speed peer
// (the harness's Bench class, a JVM of its own): one engine with props
// that stops after max records, writing each value as JsonConverter does
// (with schemas when schemas) to output, and prints its rows=N ...
// summary. dir holds the properties and the schema history; version is
// the Debezium of the harness (VersionFor the server's flavor).
func BenchCommand(ctx context.Context, version, dir string, props map[string]string, max int64, schemas bool, output string) (*exec.Cmd, error) {
	cp, err := Build(ctx, version)
	if err != nil {
		return nil, err
	}
	java, err := javaBinary()
	if err != nil {
		return nil, err
	}
	p := map[string]string{
		"name":                                  "sluice-bench",
		"offset.storage":                        "io.sluice.dbzharness.PresetOffsetStore",
		"offset.flush.interval.ms":              "600000",
		"schema.history.internal":               "io.debezium.storage.file.history.FileSchemaHistory",
		"schema.history.internal.file.filename": filepath.Join(dir, "bench.history"),
	}
	for k, v := range props {
		p[k] = v
	}
	os.Remove(p["schema.history.internal.file.filename"])
	path := filepath.Join(dir, "bench.properties")
	if err := os.WriteFile(path, []byte(throwaway.JavaProperties(p)), 0o600); err != nil {
		return nil, fmt.Errorf("dbzharness: %w", err)
	}
	level := os.Getenv("SLUICE_DBZHARNESS_LOG")
	if level == "" {
		level = "warn"
	}
	// A production JVM's settings (no TieredStopAtLevel: the peer runs
	// at full speed once warm), heap bounded as the harness's.
	cmd := exec.CommandContext(ctx, java, "-Xmx1g", "-Dorg.slf4j.simpleLogger.defaultLogLevel="+level,
		"-cp", cp, "io.sluice.dbzharness.Bench", path, strconv.FormatInt(max, 10), strconv.FormatBool(schemas), output)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	return cmd, nil
}

// StartAt are the properties that make an engine named name (for
// Capture or BenchCommand) start streaming at a binlog position: an
// offset preset in its offset store (the harness's PresetOffsetStore) and
// snapshot.mode=recovery (the schema read from the tables as they are now,
// no rows). gtids is the server's GTID set at that position (the
// connector resumes by GTID when the server has GTIDs on); empty without.
// topicPrefix is the connector's topic.prefix (MySQLProps: "sluice").
func StartAt(name, topicPrefix, file string, pos uint32, gtids string) map[string]string {
	v := map[string]any{"file": file, "pos": pos}
	if gtids != "" {
		v["gtids"] = gtids
	}
	b, _ := json.Marshal(v)
	return map[string]string{
		"name":                        name,
		"offset.storage":              "io.sluice.dbzharness.PresetOffsetStore",
		"offset.storage.preset.key":   fmt.Sprintf(`[%q,{"server":%q}]`, name, topicPrefix),
		"offset.storage.preset.value": string(b),
		"snapshot.mode":               "recovery",
	}
}

func javaBinary() (string, error) {
	j, err := throwaway.Java()
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrNotInstalled, err)
	}
	return j, nil
}

func javaEnv() []string {
	env := os.Environ()
	if os.Getenv("JAVA_HOME") == "" {
		if j, err := javaBinary(); err == nil {
			// /usr/bin/java is a link into the JDK's directory.
			if r, err := filepath.EvalSymlinks(j); err == nil {
				j = r
			}
			env = append(env, "JAVA_HOME="+filepath.Dir(filepath.Dir(j)))
		}
	}
	return env
}

// sources are the harness's Java sources, embedded so that a binary
// built with -trimpath (sluice-bench) builds the harness as the tests do.
//
//go:embed pom.xml src
var sources embed.FS

// hashSources hashes pom.xml and src/, and the version and connector they
// are built with.
func hashSources(version, connector string) (string, error) {
	h := sha256.New()
	fmt.Fprintf(h, "debezium %s %s\x00", version, connector)
	err := fs.WalkDir(sources, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := sources.ReadFile(p)
		if err != nil {
			return err
		}
		fmt.Fprintf(h, "%s\x00%d\x00", p, len(b))
		h.Write(b)
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("dbzharness: hashing the sources: %w", err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// writeSources writes pom.xml and src/ into dst.
func writeSources(dst string) error {
	return fs.WalkDir(sources, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, p), 0o755)
		}
		b, err := sources.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, p), b, 0o644)
	})
}

func tail(b []byte, lines int) string {
	l := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(l) > lines {
		l = l[len(l)-lines:]
	}
	return strings.Join(l, "\n")
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	b   []byte
	max int
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > t.max {
		t.b = append(t.b[:0], t.b[len(t.b)-t.max:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.b)
}

// ConnectorPlugin is Debezium's source connector for flavor's servers
// (VersionFor's version and connector) as a Kafka Connect plugin, for
// throwaway.StartConnect: Debezium as its users deploy it, in a Connect
// worker writing to Kafka. ConnectorProps configure it.
func ConnectorPlugin(flavor position.Flavor) throwaway.ConnectPlugin {
	version := VersionFor(flavor)
	name := "debezium-connector-" + connectors[version]
	pom := fmt.Sprintf(`<?xml version="1.0" encoding="UTF-8"?>
<!-- Debezium's %[1]s %[2]s as a Kafka Connect plugin (test and
     benchmark equipment, generated by dbzharness.ConnectorPlugin). -->
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>io.github.sluice-cdc</groupId>
  <artifactId>sluice-testenv-%[1]s</artifactId>
  <version>1</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency>
      <groupId>io.debezium</groupId>
      <artifactId>%[1]s</artifactId>
      <version>%[2]s</version>
      <exclusions>
        <!-- Confluent's Avro converter (the MariaDB connector 3.5's):
             not served by Maven Central, not used. -->
        <exclusion><groupId>io.confluent</groupId><artifactId>*</artifactId></exclusion>
      </exclusions>
    </dependency>
  </dependencies>
</project>
`, name, version)
	return throwaway.ConnectPlugin{Name: name + "-" + version, POM: []byte(pom)}
}

// ConnectVersionFor is the Kafka Connect version to run ConnectorPlugin
// (flavor) in: the Kafka that Debezium's version is built against (its
// BOM's, as the harness's class path shows: connect-json 4.3.0 for
// 3.6.1, 4.1.1 for 3.5.0). Kafka 4.4's Connect cannot run either: both
// load org.apache.kafka.common.utils.Sanitizer, which 4.4 no longer has.
func ConnectVersionFor(flavor position.Flavor) string {
	if VersionFor(flavor) == MariaDBVersion {
		return "4.1.1"
	}
	return "4.3.0"
}

// ConnectorProps are PropsFor's options for the connector run by a
// Kafka Connect worker under name, with topics prefixed topicPrefix and
// its schema history in the Kafka topic <topicPrefix>.history of brokers,
// the change topics created by Connect (Debezium's defaults for a Connect
// deployment otherwise).
func ConnectorProps(flavor position.Flavor, name, topicPrefix string, brokers []string, host string, port int, user, password, tables string, serverID uint32) map[string]string {
	p := PropsFor(flavor, host, port, user, password, tables, serverID)
	p["name"] = name
	p["tasks.max"] = "1"
	p["topic.prefix"] = topicPrefix
	p["schema.history.internal.kafka.bootstrap.servers"] = strings.Join(brokers, ",")
	p["schema.history.internal.kafka.topic"] = topicPrefix + ".history"
	// Connect creates the change topics (the throwaway brokers do not
	// create topics on first use) with the broker's default partitions
	// and replication, as sluice's Kafka sink does by default.
	p["topic.creation.default.replication.factor"] = "-1"
	p["topic.creation.default.partitions"] = "-1"
	return p
}
