//go:build unix

package throwaway

import (
	"context"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// A throwaway Kafka Connect worker.
//
// A Connect is one Kafka Connect worker of Apache Kafka KafkaVersion in
// standalone mode (org.apache.kafka.connect.cli.ConnectStandalone), on the
// JVM that runs the brokers, from jars fetched once with Maven into the
// test cache (connect-pom.xml: connect-runtime, connect-json and a log4j2
// binding), beside the brokers'. Connectors are plugins: each
// ConnectPlugin is a POM whose runtime dependencies (less Kafka's own,
// slf4j and Jackson's core, which the worker provides) are fetched once into a directory of
// the cache keyed by the POM's hash, and the worker's plugin.path names
// them all, so each plugin gets Connect's own class loader, as in a
// deployment. The worker runs the connectors given to StartConnect, with
// its offsets in a file of its temporary directory and its REST API on a
// free port of 127.0.0.1 (Status, Connectors).
//
//	c, err := throwaway.StartConnect(ctx, throwaway.ConnectOptions{
//		Brokers: k.Brokers(),
//		Plugins: []throwaway.ConnectPlugin{{Name: "jdbc", POM: pom}},
//	}, map[string]string{"name": "sink", "connector.class": "...", "topics.regex": "app\\..*"})
//	defer c.Close()
//
// Like the brokers, the JVM runs in its own process group and is SIGKILLed
// by the kernel if the process that started it dies.

//go:embed connect-pom.xml
var connectPOM []byte

// ConnectPlugin is a Kafka Connect plugin: the runtime dependencies of a
// Maven POM, in a directory of its own on the worker's plugin.path.
type ConnectPlugin struct {
	Name string // the directory's name: letters, digits, '-', '_', '.'
	POM  []byte // a pom.xml whose dependencies are the plugin's jars
}

// ConnectOptions configure StartConnect.
type ConnectOptions struct {
	// Brokers are the Kafka brokers the worker and its connectors use.
	Brokers []string
	// Plugins are fetched (once) and put on plugin.path.
	Plugins []ConnectPlugin
	// Worker adds or overrides worker properties. By default the key and
	// value converters are JsonConverter with schemas.enable=true, offsets
	// are flushed every second, and the sink connectors' consumers read
	// committed records only (isolation.level=read_committed).
	Worker map[string]string
	// HeapMB bounds the worker's heap; default 384.
	HeapMB int
	// Version is the Kafka Connect (connect-runtime) version: by default
	// KafkaVersion, the brokers'. A connector built against an older
	// Kafka may need its own (Debezium 3.6 uses a class Kafka 4.4
	// removed).
	Version string
	// FullJIT runs the JVM as a deployment does (jvmFlags), for a
	// benchmark; by default the worker starts faster and runs slower, as
	// a test wants.
	FullJIT bool
	// LogLevel is log4j2's level for the connectors' packages (default
	// WARN, as for the worker).
	LogLevel string
}

// Connect is a running throwaway Kafka Connect worker.
type Connect struct {
	Dir      string // worker.properties, connector-N.properties, offsets, connect.log
	RESTPort int

	mu     sync.Mutex
	proc   *process
	closed bool
}

var ensureConnect struct {
	mu sync.Mutex
	cp map[string]string // by version
}

// EnsureConnect makes sure java is installed and the jars of Kafka Connect
// version (KafkaVersion when empty) are in the test cache (fetched with
// Maven once, under the cache's lock), and returns the worker's class
// path.
func EnsureConnect(version string) (classPath string, err error) {
	if version == "" {
		version = KafkaVersion
	}
	ensureConnect.mu.Lock()
	defer ensureConnect.mu.Unlock()
	if cp, ok := ensureConnect.cp[version]; ok {
		return cp, nil
	}
	base, err := CacheDir()
	if err != nil {
		return "", err
	}
	cp, err := cachedJars(filepath.Join(base, "connect-"+version), connectPOM, "Kafka Connect "+version, "-Dconnect.version="+version)
	if err != nil {
		return "", err
	}
	if ensureConnect.cp == nil {
		ensureConnect.cp = map[string]string{}
	}
	ensureConnect.cp[version] = cp
	return cp, nil
}

// cachedJars returns the class path of the jars of pom's runtime
// dependencies in dir/libs, fetching them first (fetchJars, args added to
// Maven's) unless a complete fetch is there.
func cachedJars(dir string, pom []byte, what string, args ...string) (string, error) {
	base, err := CacheDir()
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("testenv: %w", err)
	}
	unlock, err := lockFile(filepath.Join(base, "connect.lock"))
	if err != nil {
		return "", err
	}
	defer unlock()
	libs := filepath.Join(dir, "libs")
	if _, err := os.Stat(filepath.Join(libs, readyMarker)); err != nil {
		if err := fetchJars(dir, pom, what, args...); err != nil {
			return "", err
		}
	}
	jars, _ := filepath.Glob(filepath.Join(libs, "*.jar"))
	if len(jars) == 0 {
		return "", fmt.Errorf("testenv: no jars in %s; remove the directory and run the tests again", libs)
	}
	sort.Strings(jars)
	return strings.Join(jars, string(os.PathListSeparator)), nil
}

// pluginDir fetches plugin p (once) and returns the plugin.path entry
// that holds it: the cache's connect-plugins/<name>-<hash>, whose one
// directory, libs/, holds the plugin's jars (an entry's every jar alone
// would be a plugin of its own).
func pluginDir(p ConnectPlugin) (string, error) {
	if p.Name == "" || strings.ContainsAny(p.Name, "/\\ ") {
		return "", fmt.Errorf("testenv: a Connect plugin named %q", p.Name)
	}
	base, err := CacheDir()
	if err != nil {
		return "", err
	}
	// Kafka's own jars and slf4j come from the worker (Connect loads them
	// from its class path whatever a plugin holds), and so does Jackson's
	// core: the worker's Jackson modules are found by every class loader's
	// ServiceLoader (the Blackbird module of connect-runtime), and a
	// plugin's own jackson-databind then takes them for strangers ("not a
	// subtype").
	exclude := "-DexcludeGroupIds=org.apache.kafka,org.slf4j,com.fasterxml.jackson.core"
	sum := sha256.Sum256(append(append([]byte(nil), p.POM...), exclude...))
	dir := filepath.Join(base, "connect-plugins", p.Name+"-"+hex.EncodeToString(sum[:8]))
	if _, err := cachedJars(dir, p.POM, "the Connect plugin "+p.Name, exclude); err != nil {
		return "", err
	}
	return dir, nil
}

// StartConnect fetches what is missing, starts a standalone worker with
// connectors (each a connector's properties: name, connector.class, ...)
// and returns once the worker's REST API reports every connector and each
// of its tasks RUNNING. ctx bounds the start only; call Close when done.
func StartConnect(ctx context.Context, opts ConnectOptions, connectors ...map[string]string) (*Connect, error) {
	if len(opts.Brokers) == 0 {
		return nil, errors.New("testenv: StartConnect without brokers")
	}
	if opts.HeapMB == 0 {
		opts.HeapMB = 384
	}
	if opts.LogLevel == "" {
		opts.LogLevel = "WARN"
	}
	java, err := Java()
	if err != nil {
		return nil, err
	}
	cp, err := EnsureConnect(opts.Version)
	if err != nil {
		return nil, err
	}
	var plugins []string
	for _, p := range opts.Plugins {
		d, err := pluginDir(p)
		if err != nil {
			return nil, err
		}
		plugins = append(plugins, d)
	}
	dir, err := ownedTempDir()
	if err != nil {
		return nil, err
	}
	c := &Connect{Dir: dir}
	ok := false
	defer func() {
		if !ok {
			_ = c.Close()
		}
	}()
	var names []string
	var files []string
	for i, conn := range connectors {
		if conn["name"] == "" {
			return nil, fmt.Errorf("testenv: Connect connector %d has no name", i)
		}
		names = append(names, conn["name"])
		f := filepath.Join(dir, "connector-"+strconv.Itoa(i)+".properties")
		if err := os.WriteFile(f, []byte(JavaProperties(conn)), 0o600); err != nil {
			return nil, fmt.Errorf("testenv: %w", err)
		}
		files = append(files, f)
	}
	logPath := filepath.Join(dir, "connect.log")
	logConf := filepath.Join(dir, "log4j2.properties")
	if err := os.WriteFile(logConf, []byte(connectLog4j2(logPath, opts.LogLevel)), 0o644); err != nil {
		return nil, fmt.Errorf("testenv: %w", err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	err = onFreePort(&c.RESTPort, func() error {
		worker := map[string]string{
			"bootstrap.servers":              strings.Join(opts.Brokers, ","),
			"key.converter":                  "org.apache.kafka.connect.json.JsonConverter",
			"value.converter":                "org.apache.kafka.connect.json.JsonConverter",
			"key.converter.schemas.enable":   "true",
			"value.converter.schemas.enable": "true",
			"offset.storage.file.filename":   filepath.Join(dir, "offsets"),
			"offset.flush.interval.ms":       "1000",
			"plugin.path":                    strings.Join(plugins, ","),
			"listeners":                      "http://127.0.0.1:" + strconv.Itoa(c.RESTPort),
			"consumer.isolation.level":       "read_committed",
			// Plugins found by their ServiceLoader manifests alone, not
			// by scanning every class of every jar (seconds on 2 cores).
			"plugin.discovery": "service_load",
		}
		for k, v := range opts.Worker {
			worker[k] = v
		}
		wp := filepath.Join(dir, "worker.properties")
		if err := os.WriteFile(wp, []byte(JavaProperties(worker)), 0o600); err != nil {
			return fmt.Errorf("testenv: %w", err)
		}
		out, err := os.OpenFile(filepath.Join(dir, "stdout.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return fmt.Errorf("testenv: %w", err)
		}
		defer out.Close()
		args := append(append(jvmFlags(opts.HeapMB, opts.FullJIT),
			"-Djava.awt.headless=true",
			"-Dlog4j2.configurationFile="+logConf,
			"-cp", cp,
			"org.apache.kafka.connect.cli.ConnectStandalone", wp,
		), files...)
		p, err := startProcess(java, args, out, dir)
		if err != nil {
			return fmt.Errorf("testenv: starting %s (Kafka Connect): %w", java, err)
		}
		c.proc = p
		if err := c.waitLocked(ctx, names); err != nil {
			_ = p.signal(syscall.SIGKILL)
			<-p.done
			c.proc = nil
			return err
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	ok = true
	return c, nil
}

func connectLog4j2(path, level string) string {
	return strings.Join([]string{
		"appender.f.type=File",
		"appender.f.name=F",
		"appender.f.fileName=" + path,
		"appender.f.layout.type=PatternLayout",
		"appender.f.layout.pattern=[%d] %p %m (%c)%n",
		"rootLogger.level=WARN",
		"rootLogger.appenderRef.f.ref=F",
		"logger.connect.name=org.apache.kafka.connect.runtime.WorkerSinkTask",
		"logger.connect.level=" + level,
		"logger.dbz.name=io.debezium",
		"logger.dbz.level=" + level,
		"",
	}, "\n")
}

// LogTail returns the last n lines of the worker's log (warnings and
// errors, and the connectors' at ConnectOptions.LogLevel).
func (c *Connect) LogTail(n int) string {
	return readTail(filepath.Join(c.Dir, "connect.log"), n) + readTail(filepath.Join(c.Dir, "stdout.log"), 10)
}

// ConnectorStatus is what the worker's REST API says of a connector
// (GET /connectors/<name>/status).
type ConnectorStatus struct {
	Name      string `json:"name"`
	Connector struct {
		State string `json:"state"`
		Trace string `json:"trace"`
	} `json:"connector"`
	Tasks []struct {
		ID    int    `json:"id"`
		State string `json:"state"`
		Trace string `json:"trace"`
	} `json:"tasks"`
}

// Err is nil when the connector and all its tasks (at least one) are
// RUNNING, else it says which is not and why.
func (s ConnectorStatus) Err() error {
	if s.Connector.State != "RUNNING" {
		return fmt.Errorf("connector %s is %s %s", s.Name, s.Connector.State, s.Connector.Trace)
	}
	if len(s.Tasks) == 0 {
		return fmt.Errorf("connector %s has no task yet", s.Name)
	}
	for _, t := range s.Tasks {
		if t.State != "RUNNING" {
			return fmt.Errorf("connector %s task %d is %s: %s", s.Name, t.ID, t.State, t.Trace)
		}
	}
	return nil
}

// Status asks the worker for connector name's status.
func (c *Connect) Status(ctx context.Context, name string) (ConnectorStatus, error) {
	var s ConnectorStatus
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	u := "http://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(c.RESTPort)) + "/connectors/" + name + "/status"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return s, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return s, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return s, err
	}
	if resp.StatusCode != http.StatusOK {
		return s, fmt.Errorf("GET %s: %s: %s", u, resp.Status, b)
	}
	if err := json.Unmarshal(b, &s); err != nil {
		return s, fmt.Errorf("GET %s: %w", u, err)
	}
	return s, nil
}

// waitLocked waits until every named connector runs with all its tasks.
// A task that failed ends the wait at once.
func (c *Connect) waitLocked(ctx context.Context, names []string) error {
	ctx, cancel := context.WithTimeout(ctx, 2*startupTimeout)
	defer cancel()
	p := c.proc
	ticker := time.NewTicker(4 * pollInterval)
	defer ticker.Stop()
	var lastErr error
	for _, name := range names {
		for {
			select {
			case <-p.done:
				log := c.LogTail(30)
				if strings.Contains(log, "Address already in use") {
					return fmt.Errorf("testenv: Kafka Connect's REST port %d: %w", c.RESTPort, errPortInUse)
				}
				return fmt.Errorf("testenv: Kafka Connect exited during startup (%v); log (%s):\n%s", p.waitErr, c.Dir, log)
			case <-ctx.Done():
				return fmt.Errorf("testenv: Kafka Connect's connector %s not running: %w (last: %v); log (%s):\n%s", name, ctx.Err(), lastErr, c.Dir, c.LogTail(30))
			case <-ticker.C:
			}
			s, err := c.Status(ctx, name)
			if err == nil {
				err = s.Err()
				if err != nil && (s.Connector.State == "FAILED" || strings.Contains(err.Error(), " is FAILED")) {
					return fmt.Errorf("testenv: Kafka Connect: %w", err)
				}
			}
			if lastErr = err; err == nil {
				break
			}
		}
	}
	return nil
}

// Pid is the worker's process id (its JVM's).
func (c *Connect) Pid() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.proc == nil {
		return 0
	}
	return c.proc.pid
}

// Close kills the worker and removes its directory. It is idempotent.
func (c *Connect) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil
	}
	c.closed = true
	var err error
	if p := c.proc; p != nil {
		err = p.stop(fmt.Sprintf("Kafka Connect (pid %d)", p.pid), 0, nil)
	}
	if rerr := os.RemoveAll(c.Dir); rerr != nil && err == nil {
		err = fmt.Errorf("testenv: removing %s: %w", c.Dir, rerr)
	}
	return err
}
