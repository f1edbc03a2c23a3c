// Package kafkaenv gives tests real Apache Kafka brokers (throwaway.Kafka:
// Kafka 4.4 in KRaft mode on the JVM) and names for what the tests make on
// them.
//
// A JVM takes seconds to start, so a test package shares one broker among
// its tests: Shared starts it at the first call and Main stops it (and
// removes its directory) after the package's tests. Tests on a shared
// broker keep to their own topics and transactional ids, made unique by
// Name. A test that crashes or stops brokers starts its own cluster with
// Start (one node) or StartCluster (three nodes, replication factor 3,
// min.insync.replicas=2), stopped at the end of the test.
//
//	func TestMain(m *testing.M) { kafkaenv.Main(m) }
//
//	func TestX(t *testing.T) {
//		k := kafkaenv.Shared(t)
//		topic := kafkaenv.Name(t, "orders")
//		cl, err := kgo.NewClient(kgo.SeedBrokers(k.Brokers()...))
//		...
//	}
package kafkaenv

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-cdc/sluice/internal/testenv/certs"
	"github.com/sluice-cdc/sluice/internal/testenv/throwaway"
)

// Kafka is a running throwaway cluster.
type Kafka = throwaway.Kafka

var shared struct {
	mu    sync.Mutex
	k     *throwaway.Kafka
	err   error
	took  time.Duration
	tried bool
}

// Shared returns the package's shared one-node broker, starting it at the
// first call. It fails the test if the broker does not start. Only
// packages whose TestMain calls Main may use it (else the broker lives
// until the test binary exits, and its directory until the next sweep).
func Shared(t testing.TB) *Kafka {
	t.Helper()
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if !shared.tried {
		shared.tried = true
		start := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		shared.k, shared.err = throwaway.StartKafka(ctx, throwaway.KafkaOptions{})
		cancel()
		shared.took = time.Since(start)
		if shared.err == nil {
			t.Logf("kafkaenv: Kafka %s started on %v in %v", throwaway.KafkaVersion, shared.k.Brokers(), shared.took.Round(time.Millisecond))
		}
	}
	if shared.err != nil {
		t.Fatalf("kafkaenv: starting the shared Kafka broker: %v", shared.err)
	}
	return shared.k
}

// Main runs the package's tests and then stops the shared broker, if one
// was started, and exits with the tests' code.
func Main(m *testing.M) {
	code := m.Run()
	Stop()
	os.Exit(code)
}

// Stop stops the shared broker and removes its directory, for a TestMain
// that does more than Main.
func Stop() {
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if shared.k != nil {
		if err := shared.k.Close(); err != nil {
			fmt.Fprintf(os.Stderr, "kafkaenv: %v\n", err)
		}
		shared.k = nil
	}
}

// Start starts a one-node cluster for the test alone (to crash, stop or
// configure it), stopped at the end of the test. config adds server
// properties.
func Start(t testing.TB, config map[string]string) *Kafka {
	t.Helper()
	return start(t, throwaway.KafkaOptions{Nodes: 1, Config: config})
}

// StartCluster starts a three-node cluster for the test (each node broker
// and controller; replication factor 3, min.insync.replicas=2), stopped at
// the end of the test.
func StartCluster(t testing.TB, config map[string]string) *Kafka {
	t.Helper()
	return start(t, throwaway.KafkaOptions{Nodes: 3, Config: config})
}

// StartSecure starts a one-node cluster for the test, stopped at the end
// of the test, with the listeners that managed services offer: with users
// (name: password), SASLBrokers take them with PLAIN, SCRAM-SHA-256 and
// SCRAM-SHA-512; with p, TLSBrokers present p's server certificate (and,
// with clientAuth, require a client certificate signed by p's CA), and
// with users too SASLTLSBrokers do TLS then SASL. Either may be nil.
func StartSecure(t testing.TB, users map[string]string, p *certs.PKI, clientAuth bool) *Kafka {
	t.Helper()
	return start(t, throwaway.KafkaOptions{Nodes: 1, SASL: users, TLS: p, ClientAuth: clientAuth})
}

func start(t testing.TB, opts throwaway.KafkaOptions) *Kafka {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	begin := time.Now()
	k, err := throwaway.StartKafka(ctx, opts)
	if err != nil {
		t.Fatalf("kafkaenv: %v", err)
	}
	t.Logf("kafkaenv: Kafka %s, %d node(s), started on %v in %v", throwaway.KafkaVersion, opts.Nodes, k.Brokers(), time.Since(begin).Round(time.Millisecond))
	t.Cleanup(func() {
		if t.Failed() {
			for i := 0; i < k.Nodes(); i++ {
				t.Logf("kafkaenv: node %d's log:\n%s", k.NodeID(i), k.LogTail(i, 30))
			}
		}
		if err := k.Close(); err != nil {
			t.Errorf("kafkaenv: %v", err)
		}
	})
	return k
}

var (
	seq      atomic.Uint64
	notTopic = regexp.MustCompile(`[^a-zA-Z0-9_-]+`)
)

// Name returns a name unique in the test process, for a topic, a
// transactional id or a group on a shared broker: the test's name (its
// characters that a topic name cannot have made '_'), a number and
// suffix. It is at most 200 characters long.
func Name(t testing.TB, suffix string) string {
	n := notTopic.ReplaceAllString(t.Name(), "_")
	if len(n) > 150 {
		n = n[len(n)-150:]
	}
	n += "-" + strconv.FormatUint(seq.Add(1), 10)
	if suffix != "" {
		n += "-" + suffix
	}
	return n
}
