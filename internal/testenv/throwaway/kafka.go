//go:build unix

package throwaway

import (
	"context"
	_ "embed"
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

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-cdc/sluice/internal/testenv/certs"
)

// Throwaway Apache Kafka brokers.
//
// A Kafka is one broker, or a cluster of three, of Apache Kafka
// KafkaVersion in KRaft mode: each node is broker and controller at once
// (process.roles=broker,controller), with a static quorum of all the
// nodes. It runs on the JVM (Java 17, from Debian's
// openjdk-17-jre-headless, installed when missing) with a bounded heap,
// from jars that EnsureKafka fetches once with Maven (Debian's maven,
// installed when missing) into the test cache, beside the unpacked MySQL:
// $SLUICE_TESTENV_CACHE or ~/.cache/sluice-testenv. Each node listens on
// two free ports of 127.0.0.1 (clients, controller) and keeps its log in a
// temporary directory; the whole cluster's directory is removed by Close.
//
// A node's data directory starts as a copy of one formatted once per node
// id in the cache (kafka.tools.StorageTool format, with a fixed cluster
// id): formatting is a JVM start of its own, and with a static quorum the
// formatted directory names no port, so the copy is as good as a new one.
//
//	k, err := throwaway.StartKafka(ctx, throwaway.KafkaOptions{}) // in tests: kafkaenv.Shared(t)
//	cl, err := kgo.NewClient(kgo.SeedBrokers(k.Brokers()...))
//	k.Kill(0)           // a crash of node 0 (SIGKILL)
//	k.Start(ctx, 0)     // node 0 again, same ports, same data
//	k.Close()
//
// Like the MariaDB servers, each JVM runs in its own process group and is
// SIGKILLed by the kernel if the process that started it dies.

// KafkaVersion is the version of Apache Kafka the brokers run.
const KafkaVersion = "4.4.0"

//go:embed kafka-pom.xml
var kafkaPOM []byte

// kafkaClusterID is the cluster id every throwaway cluster has (formatted
// into the cached data directories); clients never check it.
const kafkaClusterID = "c2x1aWNlLXRlc3RlbnYtMQ"

// KafkaHeapMB is a node's default heap (-Xmx), in MiB.
const KafkaHeapMB = 256

var javaCandidates = []string{"java", "/usr/lib/jvm/java-17-openjdk-amd64/bin/java", "/usr/lib/jvm/default-java/bin/java"}

// KafkaDist is the cached jars of a Kafka version and the java that runs
// them.
type KafkaDist struct {
	Dir       string // the version's cache directory: libs/, templates/
	Java      string
	ClassPath string
}

var (
	ensureKafkaOnce sync.Once
	ensureKafkaDist KafkaDist
	ensureKafkaErr  error
)

// EnsureKafka makes sure java (openjdk-17-jre-headless) and, if the jars
// are not yet cached, mvn (maven) are installed, installing the Debian
// packages with apt when missing, and that the jars of Kafka KafkaVersion
// are in the cache, fetched with `mvn dependency:copy-dependencies` once,
// under a lock shared by all processes.
func EnsureKafka() (KafkaDist, error) {
	ensureKafkaOnce.Do(func() { ensureKafkaDist, ensureKafkaErr = ensureKafka() })
	return ensureKafkaDist, ensureKafkaErr
}

func javaInstalled() bool {
	_, ok := findBinary(javaCandidates)
	return ok
}

// Java returns the java command: $JAVA_HOME/bin/java when JAVA_HOME is
// set, else the first of javaCandidates, installing Debian's
// openjdk-17-jre-headless when there is none. It is the one lookup of
// Java of the tests' JVMs: the brokers, Kafka Connect, the Debezium
// harness.
func Java() (string, error) {
	if h := os.Getenv("JAVA_HOME"); h != "" {
		j := filepath.Join(h, "bin", "java")
		if _, err := os.Stat(j); err != nil {
			return "", fmt.Errorf("testenv: JAVA_HOME=%s holds no bin/java: %w", h, err)
		}
		return j, nil
	}
	if err := aptInstall(javaInstalled, "java (a Java 17 runtime, for Kafka)", "openjdk-17-jre-headless"); err != nil {
		return "", err
	}
	java, _ := findBinary(javaCandidates)
	return java, nil
}

func ensureKafka() (KafkaDist, error) {
	java, err := Java()
	if err != nil {
		return KafkaDist{}, err
	}
	base, err := CacheDir()
	if err != nil {
		return KafkaDist{}, err
	}
	d := KafkaDist{Dir: filepath.Join(base, "kafka-"+KafkaVersion), Java: java}
	if err := os.MkdirAll(d.Dir, 0o755); err != nil {
		return KafkaDist{}, fmt.Errorf("testenv: %w", err)
	}
	unlock, err := lockFile(filepath.Join(base, "kafka.lock"))
	if err != nil {
		return KafkaDist{}, err
	}
	defer unlock()
	libs := filepath.Join(d.Dir, "libs")
	if _, err := os.Stat(filepath.Join(libs, readyMarker)); err != nil {
		if err := fetchKafkaJars(d.Dir); err != nil {
			return KafkaDist{}, err
		}
	}
	jars, _ := filepath.Glob(filepath.Join(libs, "*.jar"))
	if len(jars) == 0 {
		return KafkaDist{}, fmt.Errorf("testenv: no jars in %s; remove the directory and run the tests again", libs)
	}
	sort.Strings(jars)
	d.ClassPath = strings.Join(jars, string(os.PathListSeparator))
	return d, nil
}

func mvnInstalled() bool {
	_, ok := findBinary([]string{"mvn", "/usr/bin/mvn"})
	return ok
}

// fetchKafkaJars copies the jars of kafka-pom.xml's dependencies into
// dir/libs with Maven (through Maven's own local repository, ~/.m2).
func fetchKafkaJars(dir string) error {
	return fetchJars(dir, kafkaPOM, "the Kafka broker "+KafkaVersion)
}

// fetchJars writes pom into dir and copies the jars of its runtime
// dependencies into dir/libs with `mvn dependency:copy-dependencies`
// (through Maven's own local repository, ~/.m2), with args added to
// Maven's; what names the jars in messages. The one Maven fetch of the
// throwaway JVMs (the brokers, Kafka Connect and its plugins). The caller
// holds the cache's lock.
func fetchJars(dir string, pom []byte, what string, args ...string) error {
	if err := aptInstall(mvnInstalled, "mvn (Maven, to fetch the jars of "+what+")", "maven"); err != nil {
		return err
	}
	mvn, _ := findBinary([]string{"mvn", "/usr/bin/mvn"})
	start := time.Now()
	pomPath := filepath.Join(dir, "pom.xml")
	if err := os.WriteFile(pomPath, pom, 0o644); err != nil {
		return fmt.Errorf("testenv: %w", err)
	}
	tmp := filepath.Join(dir, "libs.tmp")
	_ = os.RemoveAll(tmp)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, mvn, append([]string{"-B", "-q", "-f", pomPath, "dependency:copy-dependencies",
		"-DincludeScope=runtime", "-DoutputDirectory=" + tmp}, args...)...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("testenv: fetching the jars of %s with Maven (%s) failed: %w; does this machine reach Maven Central?\n%s",
			what, pomPath, err, tail(string(out), 30))
	}
	if err := os.WriteFile(filepath.Join(tmp, readyMarker), []byte(what+"\n"), 0o644); err != nil {
		return fmt.Errorf("testenv: %w", err)
	}
	libs := filepath.Join(dir, "libs")
	_ = os.RemoveAll(libs)
	if err := os.Rename(tmp, libs); err != nil {
		return fmt.Errorf("testenv: %w", err)
	}
	fmt.Fprintf(os.Stderr, "testenv: fetched the jars of %s into %s in %v\n", what, libs, time.Since(start).Round(time.Millisecond))
	return nil
}

// template returns the cached formatted data directory of node id,
// formatting it first if needed. The caller holds no lock; template takes
// the cache's.
func (d KafkaDist) template(id int) (string, error) {
	dir := filepath.Join(d.Dir, "templates", "node-"+strconv.Itoa(id))
	if _, err := os.Stat(filepath.Join(dir, readyMarker)); err == nil {
		return filepath.Join(dir, "data"), nil
	}
	base, err := CacheDir()
	if err != nil {
		return "", err
	}
	unlock, err := lockFile(filepath.Join(base, "kafka.lock"))
	if err != nil {
		return "", err
	}
	defer unlock()
	if _, err := os.Stat(filepath.Join(dir, readyMarker)); err == nil {
		return filepath.Join(dir, "data"), nil
	}
	_ = os.RemoveAll(dir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("testenv: %w", err)
	}
	// Only what format reads: the node id, its roles, its log dir and a
	// quorum (whose ports format does not record).
	props := strings.Join([]string{
		"process.roles=broker,controller",
		"node.id=" + strconv.Itoa(id),
		"controller.quorum.voters=" + strconv.Itoa(id) + "@127.0.0.1:1",
		"controller.listener.names=CONTROLLER",
		"listeners=PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:1",
		"log.dirs=" + filepath.Join(dir, "data"),
		"",
	}, "\n")
	conf := filepath.Join(dir, "format.properties")
	if err := os.WriteFile(conf, []byte(props), 0o644); err != nil {
		return "", fmt.Errorf("testenv: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, d.Java, "-Xmx128m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
		"-cp", d.ClassPath, "kafka.tools.StorageTool", "format", "-t", kafkaClusterID, "-c", conf)
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("testenv: formatting a Kafka data directory (kafka.tools.StorageTool format -c %s) failed: %w\n%s", conf, err, tail(string(out), 30))
	}
	if err := os.WriteFile(filepath.Join(dir, readyMarker), []byte(KafkaVersion+"\n"), 0o644); err != nil {
		return "", fmt.Errorf("testenv: %w", err)
	}
	return filepath.Join(dir, "data"), nil
}

// KafkaOptions configure StartKafka.
type KafkaOptions struct {
	// Nodes is the number of nodes, each broker and controller: 1 (the
	// default) or 3. With 3, topics default to replication factor 3 and
	// min.insync.replicas=2, and so do the internal topics (offsets,
	// transaction state).
	Nodes int
	// HeapMB bounds each node's heap; default KafkaHeapMB.
	HeapMB int
	// Config adds or overrides server properties on every node.
	Config map[string]string
	// SASL, when set, adds a SASL_PLAINTEXT listener on each node
	// (SASLBrokers) that takes these users (name: password) with PLAIN,
	// SCRAM-SHA-256 and SCRAM-SHA-512. Passwords must not hold '"' or
	// '\\'. The PLAINTEXT listener (Brokers) stays open, without
	// authentication.
	SASL map[string]string
	// TLS, when set, adds an SSL listener on each node (TLSBrokers) that
	// presents TLS's server certificate and, with ClientAuth, requires a
	// client certificate signed by its CA; with SASL too, also a SASL_SSL
	// listener (SASLTLSBrokers: TLS without client certificates, then
	// SASL). The brokers read TLS.KeystoreFile and TLS.CAFile as PEM
	// keystore and truststore.
	TLS        *certs.PKI
	ClientAuth bool
	// FullJIT runs each node's JVM as a deployment does (jvmFlags), for
	// a benchmark; by default it starts fast and runs slower, as a test
	// wants.
	FullJIT bool
}

// jvmFlags are the heap and JIT flags of a throwaway server's JVM
// (brokers, Kafka Connect): by default the serial collector and the
// client compiler only — two cores shared with the tests, and a JVM that
// lives for one test binary, started fast; with fullJIT the JVM's own
// defaults (G1, both compiler tiers), as a deployment runs, for the
// benchmarks, where the tests' flags would slow the server measured.
func jvmFlags(heapMB int, fullJIT bool) []string {
	f := []string{"-Xmx" + strconv.Itoa(heapMB) + "m", "-Xms64m"}
	if !fullJIT {
		f = append(f, "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1")
	}
	return f
}

// Kafka is a running throwaway Kafka cluster. Its methods are safe for
// concurrent use.
type Kafka struct {
	Dir  string // one directory per node: node-<id>/
	dist KafkaDist
	opts KafkaOptions

	mu     sync.Mutex // serialises Start/Stop/Kill/Close
	nodes  []*kafkaNode
	closed bool
}

type kafkaNode struct {
	id       int // node.id, from 1
	port     int // the PLAINTEXT listener
	ctrlPort int // the CONTROLLER listener
	saslPort int // the SASL_PLAINTEXT listener, with KafkaOptions.SASL
	tlsPort  int // the SSL listener, with KafkaOptions.TLS
	// saslTLSPort is the SASL_SSL listener, with KafkaOptions.SASL and TLS.
	saslTLSPort int
	dir         string
	proc        *process
}

// StartKafka starts a cluster of opts.Nodes nodes in a new temporary
// directory and returns once every broker is registered with the
// controller and serves metadata. ctx bounds startup only; call Close
// when done.
func StartKafka(ctx context.Context, opts KafkaOptions) (*Kafka, error) {
	if opts.Nodes == 0 {
		opts.Nodes = 1
	}
	if opts.Nodes != 1 && opts.Nodes != 3 {
		return nil, fmt.Errorf("testenv: a Kafka cluster of %d nodes; want 1 or 3", opts.Nodes)
	}
	if opts.HeapMB == 0 {
		opts.HeapMB = KafkaHeapMB
	}
	dist, err := EnsureKafka()
	if err != nil {
		return nil, err
	}
	dir, err := ownedTempDir()
	if err != nil {
		return nil, err
	}
	k := &Kafka{Dir: dir, dist: dist, opts: opts}
	ok := false
	defer func() {
		if !ok {
			_ = k.Close()
		}
	}()
	for i := 1; i <= opts.Nodes; i++ {
		tmpl, err := dist.template(i)
		if err != nil {
			return nil, err
		}
		n := &kafkaNode{id: i, dir: filepath.Join(dir, "node-"+strconv.Itoa(i))}
		if err := os.MkdirAll(n.dir, 0o755); err != nil {
			return nil, fmt.Errorf("testenv: %w", err)
		}
		if err := copyTree(tmpl, filepath.Join(n.dir, "data")); err != nil {
			return nil, fmt.Errorf("testenv: copying Kafka's formatted directory %s: %w", tmpl, err)
		}
		k.nodes = append(k.nodes, n)
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	const attempts = 5
	for i := 1; ; i++ {
		err = k.startAllLocked(ctx)
		if err == nil {
			break
		}
		if !errors.Is(err, errPortInUse) || i == attempts {
			return nil, err
		}
	}
	ok = true
	return k, nil
}

// startAllLocked picks free ports for every node, starts them all and
// waits until each serves metadata naming every broker.
func (k *Kafka) startAllLocked(ctx context.Context) error {
	for _, n := range k.nodes {
		var err error
		if n.port, err = freePort(); err != nil {
			return err
		}
		if n.ctrlPort, err = freePort(); err != nil {
			return err
		}
		if k.opts.SASL != nil {
			if n.saslPort, err = freePort(); err != nil {
				return err
			}
		}
		if k.opts.TLS != nil {
			if n.tlsPort, err = freePort(); err != nil {
				return err
			}
		}
		if k.opts.SASL != nil && k.opts.TLS != nil {
			if n.saslTLSPort, err = freePort(); err != nil {
				return err
			}
		}
	}
	for _, n := range k.nodes {
		if err := k.launchLocked(n); err != nil {
			k.killAllLocked()
			return err
		}
	}
	for _, n := range k.nodes {
		if err := k.waitLocked(ctx, n, len(k.nodes)); err != nil {
			k.killAllLocked()
			return err
		}
	}
	if err := k.addSCRAMUsers(ctx); err != nil {
		k.killAllLocked()
		return err
	}
	if err := k.waitTxnCoordinator(ctx); err != nil {
		k.killAllLocked()
		return err
	}
	return nil
}

// waitTxnCoordinator starts one transactional producer and waits until
// the broker gives it a producer ID. A fresh cluster creates its
// transaction state topic on the first such request and answers
// COORDINATOR_NOT_AVAILABLE or COORDINATOR_LOAD_IN_PROGRESS until that
// topic is loaded, which on a loaded machine takes seconds; a test that
// starts a producer with a short request timeout would fail on the
// broker's start-up rather than on what it tests.
func (k *Kafka) waitTxnCoordinator(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, startupTimeout)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(k.nodes[0].addr()), kgo.TransactionalID("testenv-ready"))
	if err != nil {
		return fmt.Errorf("testenv: %w", err)
	}
	defer cl.Close()
	if _, _, err := cl.ProducerID(ctx); err != nil {
		return fmt.Errorf("testenv: Kafka's transaction coordinator not ready after %s: %w; log (%s):\n%s",
			startupTimeout, err, k.nodes[0].dir, readTail(k.nodes[0].logPath(), 30))
	}
	return nil
}

// addSCRAMUsers gives the users of KafkaOptions.SASL SCRAM-SHA-256 and
// SCRAM-SHA-512 credentials (kept in the cluster's metadata) and waits
// until the brokers know them.
func (k *Kafka) addSCRAMUsers(ctx context.Context) error {
	if len(k.opts.SASL) == 0 {
		return nil
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(k.nodes[0].addr()))
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(ctx, startupTimeout)
	defer cancel()
	// A request names each user once: one request per mechanism.
	for _, m := range []kadm.ScramMechanism{kadm.ScramSha256, kadm.ScramSha512} {
		var ups []kadm.UpsertSCRAM
		for user, pw := range k.opts.SASL {
			ups = append(ups, kadm.UpsertSCRAM{User: user, Mechanism: m, Iterations: 4096, Password: pw})
		}
		res, err := adm.AlterUserSCRAMs(ctx, nil, ups)
		if err == nil {
			err = res.Error()
		}
		if err != nil {
			return fmt.Errorf("testenv: adding the Kafka cluster's %s users: %w", m, err)
		}
	}
	for {
		d, err := adm.DescribeUserSCRAMs(ctx)
		if err == nil && d.Error() == nil && len(d) >= len(k.opts.SASL) && len(d.Sorted()[0].CredInfos) == 2 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("testenv: the Kafka cluster's SCRAM users not visible: %w (last: %v)", ctx.Err(), err)
		case <-time.After(pollInterval):
		}
	}
}

// SASLBrokers returns the SASL_PLAINTEXT listeners of the nodes (nil
// without KafkaOptions.SASL).
func (k *Kafka) SASLBrokers() []string {
	return k.listeners(k.opts.SASL != nil, func(n *kafkaNode) int { return n.saslPort })
}

// TLSBrokers returns the SSL listeners of the nodes (nil without
// KafkaOptions.TLS).
func (k *Kafka) TLSBrokers() []string {
	return k.listeners(k.opts.TLS != nil, func(n *kafkaNode) int { return n.tlsPort })
}

// SASLTLSBrokers returns the SASL_SSL listeners of the nodes (nil
// without both KafkaOptions.SASL and TLS).
func (k *Kafka) SASLTLSBrokers() []string {
	return k.listeners(k.opts.SASL != nil && k.opts.TLS != nil, func(n *kafkaNode) int { return n.saslTLSPort })
}

func (k *Kafka) listeners(on bool, port func(*kafkaNode) int) []string {
	if !on {
		return nil
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	out := make([]string, len(k.nodes))
	for i, n := range k.nodes {
		out[i] = net.JoinHostPort("127.0.0.1", strconv.Itoa(port(n)))
	}
	return out
}

func (k *Kafka) killAllLocked() {
	for _, n := range k.nodes {
		_ = k.stopNodeLocked(n, 0)
	}
}

// Brokers returns the client listeners of the nodes, "127.0.0.1:PORT"
// each, as seed brokers.
func (k *Kafka) Brokers() []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	out := make([]string, len(k.nodes))
	for i, n := range k.nodes {
		out[i] = n.addr()
	}
	return out
}

// Nodes is the number of nodes.
func (k *Kafka) Nodes() int { return len(k.nodes) }

// NodeID returns the node.id (the broker id in metadata) of node i
// (0-based).
func (k *Kafka) NodeID(i int) int32 { return int32(k.nodes[i].id) }

// Index returns the index of the node whose broker id is id, or -1.
func (k *Kafka) Index(id int32) int {
	for i, n := range k.nodes {
		if int32(n.id) == id {
			return i
		}
	}
	return -1
}

func (n *kafkaNode) addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(n.port)) }

func (n *kafkaNode) logPath() string { return filepath.Join(n.dir, "server.log") }

// LogTail returns the last lines of node i's log (warnings and errors,
// and the start and stop).
func (k *Kafka) LogTail(i, lines int) string {
	return readTail(k.nodes[i].logPath(), lines) + readTail(filepath.Join(k.nodes[i].dir, "stdout.log"), 10)
}

// properties is node n's server.properties.
func (k *Kafka) properties(n *kafkaNode) string {
	var voters []string
	for _, m := range k.nodes {
		voters = append(voters, fmt.Sprintf("%d@127.0.0.1:%d", m.id, m.ctrlPort))
	}
	rf := strconv.Itoa(len(k.nodes))
	minISR := "1"
	if len(k.nodes) >= 3 {
		minISR = "2"
	}
	props := map[string]string{
		"process.roles":                    "broker,controller",
		"node.id":                          strconv.Itoa(n.id),
		"controller.quorum.voters":         strings.Join(voters, ","),
		"listeners":                        fmt.Sprintf("PLAINTEXT://127.0.0.1:%d,CONTROLLER://127.0.0.1:%d", n.port, n.ctrlPort),
		"advertised.listeners":             fmt.Sprintf("PLAINTEXT://127.0.0.1:%d", n.port),
		"controller.listener.names":        "CONTROLLER",
		"inter.broker.listener.name":       "PLAINTEXT",
		"listener.security.protocol.map":   "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
		"log.dirs":                         filepath.Join(n.dir, "data"),
		"num.partitions":                   "1",
		"default.replication.factor":       rf,
		"min.insync.replicas":              minISR,
		"offsets.topic.replication.factor": rf,
		// One partition each: the internal topics are created at the
		// first group or transaction, and 50 partitions take seconds.
		"offsets.topic.num.partitions":                                "1",
		"transaction.state.log.replication.factor":                    rf,
		"transaction.state.log.min.isr":                               minISR,
		"transaction.state.log.num.partitions":                        "1",
		"share.coordinator.state.topic.replication.factor":            rf,
		"share.coordinator.state.topic.min.isr":                       minISR,
		"group.initial.rebalance.delay.ms":                            "0",
		"auto.create.topics.enable":                                   "false",
		"log.retention.check.interval.ms":                             "300000",
		"controlled.shutdown.enable":                                  "true",
		"transaction.abort.timed.out.transaction.cleanup.interval.ms": "10000",
	}
	listener := func(name string, port int) {
		l := fmt.Sprintf("%s://127.0.0.1:%d", name, port)
		props["listeners"] += "," + l
		props["advertised.listeners"] += "," + l
		props["listener.security.protocol.map"] += "," + name + ":" + name
	}
	var saslListeners []string
	if k.opts.SASL != nil {
		listener("SASL_PLAINTEXT", n.saslPort)
		saslListeners = append(saslListeners, "sasl_plaintext")
	}
	if t := k.opts.TLS; t != nil {
		listener("SSL", n.tlsPort)
		// One keystore and truststore for the SSL and SASL_SSL
		// listeners, PEM files.
		props["ssl.keystore.type"] = "PEM"
		props["ssl.keystore.location"] = t.KeystoreFile
		props["ssl.truststore.type"] = "PEM"
		props["ssl.truststore.location"] = t.CAFile
		if k.opts.ClientAuth {
			props["listener.name.ssl.ssl.client.auth"] = "required"
		}
		if k.opts.SASL != nil {
			listener("SASL_SSL", n.saslTLSPort)
			props["listener.name.sasl_ssl.ssl.client.auth"] = "none"
			saslListeners = append(saslListeners, "sasl_ssl")
		}
	}
	if k.opts.SASL != nil {
		props["sasl.enabled.mechanisms"] = "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512"
		users := []string{"org.apache.kafka.common.security.plain.PlainLoginModule required"}
		names := make([]string, 0, len(k.opts.SASL))
		for user := range k.opts.SASL {
			names = append(names, user)
		}
		sort.Strings(names)
		for _, user := range names {
			users = append(users, fmt.Sprintf("user_%s=%q", user, k.opts.SASL[user]))
		}
		for _, l := range saslListeners {
			props["listener.name."+l+".plain.sasl.jaas.config"] = strings.Join(users, " ") + ";"
			props["listener.name."+l+".scram-sha-256.sasl.jaas.config"] = "org.apache.kafka.common.security.scram.ScramLoginModule required;"
			props["listener.name."+l+".scram-sha-512.sasl.jaas.config"] = "org.apache.kafka.common.security.scram.ScramLoginModule required;"
		}
	}
	for key, v := range k.opts.Config {
		props[key] = v
	}
	return JavaProperties(props)
}

// JavaProperties writes props as a Java .properties file, sorted by key,
// each key and value escaped as java.util.Properties reads them back: the
// one writer of the brokers' and the Debezium harness's configurations.
func JavaProperties(props map[string]string) string {
	keys := make([]string, 0, len(props))
	for key := range props {
		keys = append(keys, key)
	}
	sort.Strings(keys)
	esc := strings.NewReplacer(`\`, `\\`, "\n", `\n`, "=", `\=`, ":", `\:`)
	var b strings.Builder
	for _, key := range keys {
		fmt.Fprintf(&b, "%s=%s\n", esc.Replace(key), esc.Replace(props[key]))
	}
	return b.String()
}

// log4j2 is a node's logging: warnings and errors, and the broker's start
// and stop, to server.log in its directory.
func log4j2(n *kafkaNode) string {
	return strings.Join([]string{
		"appender.f.type=File",
		"appender.f.name=F",
		"appender.f.fileName=" + n.logPath(),
		"appender.f.layout.type=PatternLayout",
		"appender.f.layout.pattern=[%d] %p %m (%c)%n",
		"rootLogger.level=WARN",
		"rootLogger.appenderRef.f.ref=F",
		"logger.server.name=kafka.server.KafkaRaftServer",
		"logger.server.level=INFO",
		"",
	}, "\n")
}

// launchLocked writes node n's configuration and starts its JVM.
func (k *Kafka) launchLocked(n *kafkaNode) error {
	if n.proc != nil && !n.proc.exited() {
		return fmt.Errorf("testenv: Kafka node %d already running", n.id)
	}
	n.proc = nil
	conf := filepath.Join(n.dir, "server.properties")
	if err := os.WriteFile(conf, []byte(k.properties(n)), 0o644); err != nil {
		return fmt.Errorf("testenv: %w", err)
	}
	logConf := filepath.Join(n.dir, "log4j2.properties")
	if err := os.WriteFile(logConf, []byte(log4j2(n)), 0o644); err != nil {
		return fmt.Errorf("testenv: %w", err)
	}
	out, err := os.OpenFile(filepath.Join(n.dir, "stdout.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("testenv: %w", err)
	}
	defer out.Close()
	args := append(jvmFlags(k.opts.HeapMB, k.opts.FullJIT),
		"-Djava.awt.headless=true",
		"-Dlog4j2.configurationFile="+logConf,
		"-cp", k.dist.ClassPath,
		"kafka.Kafka", conf,
	)
	p, err := startProcess(k.dist.Java, args, out, n.dir)
	if err != nil {
		return fmt.Errorf("testenv: starting %s (Kafka node %d): %w", k.dist.Java, n.id, err)
	}
	n.proc = p
	return nil
}

// waitLocked waits until node n's broker answers a metadata request that
// names want brokers, or the node dies, or the start-up times out.
func (k *Kafka) waitLocked(ctx context.Context, n *kafkaNode, want int) error {
	ctx, cancel := context.WithTimeout(ctx, startupTimeout)
	defer cancel()
	p := n.proc
	ticker := time.NewTicker(4 * pollInterval)
	defer ticker.Stop()
	var lastErr error
	for {
		select {
		case <-p.done:
			log := readTail(n.logPath(), 30) + readTail(filepath.Join(n.dir, "stdout.log"), 20)
			if strings.Contains(log, "Address already in use") {
				return fmt.Errorf("testenv: Kafka node %d on ports %d/%d: %w", n.id, n.port, n.ctrlPort, errPortInUse)
			}
			return fmt.Errorf("testenv: Kafka node %d exited during startup (%v); log (%s):\n%s", n.id, p.waitErr, n.dir, log)
		case <-ctx.Done():
			return fmt.Errorf("testenv: Kafka node %d on %s not ready: %w (last error: %v); log (%s):\n%s",
				n.id, n.addr(), ctx.Err(), lastErr, n.dir, readTail(n.logPath(), 30))
		case <-ticker.C:
		}
		if lastErr = kafkaReady(ctx, n.addr(), want); lastErr == nil {
			return nil
		}
	}
}

// kafkaReady asks the broker at addr for metadata and checks that it
// names want brokers and a controller.
func kafkaReady(ctx context.Context, addr string, want int) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DialTimeout(time.Second), kgo.RequestRetries(0))
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req := kmsg.NewPtrMetadataRequest()
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return err
	}
	if len(resp.Brokers) < want || resp.ControllerID < 0 {
		return fmt.Errorf("metadata names %d brokers (want %d) and controller %d", len(resp.Brokers), want, resp.ControllerID)
	}
	return nil
}

// Start starts node i (0-based) again, after Stop or Kill, on the same
// ports with the same data, and waits until it serves metadata.
func (k *Kafka) Start(ctx context.Context, i int) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.closed {
		return errors.New("testenv: Start on a closed Kafka")
	}
	n := k.nodes[i]
	// The old process's ports can take a moment to be free again.
	return whilePortInUse(ctx, func() error {
		if err := k.launchLocked(n); err != nil {
			return err
		}
		return k.waitLocked(ctx, n, 1)
	})
}

// Stop shuts node i down (SIGTERM: a controlled shutdown), SIGKILLing it
// after 30 s. Stopping a stopped node does nothing.
func (k *Kafka) Stop(i int) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.stopNodeLocked(k.nodes[i], stopTimeout)
}

// Kill SIGKILLs node i (a crash) and waits for it to exit.
func (k *Kafka) Kill(i int) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.stopNodeLocked(k.nodes[i], 0)
}

// Pause stops node i with SIGSTOP (a node that hangs: its connections
// stay open and nothing answers); Resume continues it.
func (k *Kafka) Pause(i int) error { return k.signal(i, syscall.SIGSTOP) }

// Resume continues node i after Pause.
func (k *Kafka) Resume(i int) error { return k.signal(i, syscall.SIGCONT) }

func (k *Kafka) signal(i int, sig syscall.Signal) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	p := k.nodes[i].proc
	if p == nil || p.exited() {
		return fmt.Errorf("testenv: Kafka node %d is not running", k.nodes[i].id)
	}
	return p.signal(sig)
}

func (k *Kafka) stopNodeLocked(n *kafkaNode, grace time.Duration) error {
	p := n.proc
	if p == nil {
		return nil
	}
	n.proc = nil
	// A paused node (Pause) must run again to shut down.
	return p.stop(fmt.Sprintf("Kafka node %d (pid %d)", n.id, p.pid), grace, func() error {
		_ = p.signal(syscall.SIGCONT)
		return p.signal(syscall.SIGTERM)
	})
}

// Close kills every node and removes the cluster's directory. It is
// idempotent.
func (k *Kafka) Close() error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.closed {
		return nil
	}
	k.closed = true
	var err error
	for _, n := range k.nodes {
		if e := k.stopNodeLocked(n, 0); e != nil && err == nil {
			err = e
		}
	}
	if rerr := os.RemoveAll(k.Dir); rerr != nil && err == nil {
		err = fmt.Errorf("testenv: removing %s: %w", k.Dir, rerr)
	}
	return err
}
