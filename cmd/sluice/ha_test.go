package main

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-cdc/sluice/codec"
	"github.com/sluice-cdc/sluice/coord"
	"github.com/sluice-cdc/sluice/internal/testenv"
	"github.com/sluice-cdc/sluice/internal/testenv/etcdenv"
	"github.com/sluice-cdc/sluice/internal/workload"
	"github.com/sluice-cdc/sluice/position"
)

// haLease is the leases of the HA tests: short, so that failovers are quick.
const haLease = 2 * time.Second

// replica is one `sluice run` process of a pipeline, with its own path to
// etcd (a proxy, so that a test can cut it off).
type replica struct {
	n       int
	config  string
	proxy   *etcdenv.Proxy
	mu      sync.Mutex
	cmd     *exec.Cmd
	log     *syncBuffer
	done    chan struct{}
	err     error
	starts  int
	started time.Time
}

// syncBuffer is a bytes.Buffer safe for the process's writes and the
// test's reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

type haEnv struct {
	*runEnv
	etcd *etcdenv.Etcd
	reps []*replica
	co   *coord.Etcd
}

// newHAEnv starts a server of flavor, etcd and the sinks, and writes one
// config per replica (each reaching etcd through its own proxy).
func newHAEnv(t *testing.T, flavor position.Flavor, replicas int) *haEnv {
	t.Helper()
	e := newRunEnv(t, flavor)
	e.withNATS(t)
	e.withRedis(t)
	e.withKafka(t)
	return withReplicas(t, e, "crash", replicas, func(extra string) { e.writeConfig(t, extra) })
}

// withReplicas starts etcd and writes one config per replica of pipeline
// (each reaching etcd through its own proxy): writeConfig writes e.config
// with the coordinator block it is given appended.
func withReplicas(t *testing.T, e *runEnv, pipeline string, replicas int, writeConfig func(extra string)) *haEnv {
	t.Helper()
	h := &haEnv{runEnv: e, etcd: etcdenv.Start(t)}
	for i := range replicas {
		p := etcdenv.NewProxy(t, h.etcd.Endpoint())
		writeConfig(fmt.Sprintf("coordinator:\n  type: etcd\n  etcd: {endpoints: [%q], lease_ttl: %s, id: replica-%d}\n", p.Endpoint(), haLease, i))
		cfg := filepath.Join(e.dir, fmt.Sprintf("replica-%d.yaml", i))
		if err := os.Rename(e.config, cfg); err != nil {
			t.Fatal(err)
		}
		h.reps = append(h.reps, &replica{n: i, config: cfg, proxy: p, log: &syncBuffer{}})
	}
	co, err := coord.New(coord.Config{Endpoints: []string{h.etcd.Endpoint()}, LeaseTTL: haLease, ID: "test"}, pipeline, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { co.Close() })
	h.co = co
	t.Cleanup(func() {
		for _, r := range h.reps {
			r.kill()
		}
	})
	return h
}

// logs is every replica's log, for failure messages.
func (h *haEnv) logs() fmt.Stringer {
	all := &syncBuffer{}
	for _, r := range h.reps {
		fmt.Fprintf(all, "--- replica-%d\n%s", r.n, r.log.String())
	}
	return all
}

func (r *replica) start(t *testing.T, bin string) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	cmd := exec.Command(bin, "run", "--config", r.config)
	cmd.Stderr = r.log
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	r.cmd, r.done, r.err, r.started = cmd, make(chan struct{}), nil, time.Now()
	r.starts++
	done := r.done
	go func() {
		err := cmd.Wait()
		r.mu.Lock()
		r.err = err
		r.mu.Unlock()
		close(done)
	}()
}

func (r *replica) startedAt() time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.started
}

func (r *replica) running() bool {
	r.mu.Lock()
	done := r.done
	r.mu.Unlock()
	if done == nil {
		return false
	}
	select {
	case <-done:
		return false
	default:
		return true
	}
}

func (r *replica) signal(sig syscall.Signal) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cmd != nil && r.cmd.Process != nil {
		_ = r.cmd.Process.Signal(sig)
	}
}

func (r *replica) kill() {
	r.signal(syscall.SIGCONT)
	r.signal(syscall.SIGKILL)
	r.mu.Lock()
	done := r.done
	r.mu.Unlock()
	if done != nil {
		<-done
	}
}

// leader returns the replica that leads and its epoch (waiting up to d).
func (h *haEnv) leader(t *testing.T, d time.Duration) (*replica, uint64) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		st, err := h.co.Status(ctx)
		cancel()
		if err == nil && st.Leader != nil {
			id := strings.TrimPrefix(st.Leader.ID, "replica-")
			// The leader named by etcd must be the process running now, not
			// an earlier one whose lease has not expired yet.
			if n, err := strconv.Atoi(id); err == nil && n < len(h.reps) && h.reps[n].running() && !st.Leader.Since.Before(h.reps[n].startedAt()) {
				return h.reps[n], st.Leader.Epoch
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no leader after %v (status %+v, err %v)", d, st, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// supervise restarts replicas that exit (as systemd or Kubernetes would),
// until stop is closed.
func (h *haEnv) supervise(t *testing.T, stop <-chan struct{}) *sync.WaitGroup {
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
			for _, r := range h.reps {
				if !r.running() {
					r.start(t, h.bin)
				}
			}
		}
	}()
	return &wg
}

// waitRow waits until every sink holds n rows; it returns how long that took.
func (h *haEnv) waitRows(t *testing.T, n int) time.Duration {
	t.Helper()
	start := time.Now()
	h.waitAll(t, n, h.logs())
	return time.Since(start)
}

// TestHAFailover: three replicas; kill -9 the leader; a follower leads and
// delivers within the lease TTL plus 2 s; nothing is lost or doubled.
func TestHAFailover(t *testing.T) { testenv.ForEachFlavor(t, testHAFailover) }

func testHAFailover(t *testing.T, flavor position.Flavor) {
	h := newHAEnv(t, flavor, 3)
	ctx := context.Background()
	for _, r := range h.reps {
		r.start(t, h.bin)
	}
	lead, epoch := h.leader(t, 30*time.Second)
	if err := h.w.Txns(ctx, 20); err != nil {
		t.Fatal(err)
	}
	h.waitRows(t, 20)
	out, err := exec.Command(h.bin, "status", "--config", h.reps[0].config).CombinedOutput()
	if err != nil || !strings.Contains(string(out), fmt.Sprintf("leader:     replica-%d, epoch %d", lead.n, epoch)) || strings.Count(string(out), "follower:") != 2 {
		t.Errorf("sluice status: %v\n%s", err, out)
	}
	var times []time.Duration
	for round := range 2 {
		killed := time.Now()
		lead.kill()
		// A transaction committed right after the kill must reach the sinks.
		if err := h.w.Txns(ctx, 1); err != nil {
			t.Fatal(err)
		}
		// Delivery is timed on the file sink, whose reader is instant (the
		// writer hands each batch to every sink at once; the others are
		// checked below).
		for {
			evs, err := h.readers["file"]()
			if err == nil && workload.Count(evs) >= h.w.N() {
				break
			}
			if time.Since(killed) > 30*time.Second {
				t.Fatalf("no delivery 30 s after the kill")
			}
			time.Sleep(10 * time.Millisecond)
		}
		took := time.Since(killed)
		h.waitRows(t, h.w.N())
		next, e2 := h.leader(t, 10*time.Second)
		t.Logf("failover %d: replica-%d (epoch %d) killed; replica-%d leads with epoch %d and delivered after %v", round+1, lead.n, epoch, next.n, e2, took.Round(time.Millisecond))
		if e2 <= epoch {
			t.Fatalf("the new epoch %d is not above the old %d", e2, epoch)
		}
		if took > haLease+2*time.Second {
			t.Errorf("failover took %v, more than the lease (%v) + 2 s; the new leader's log:\n%s", took, haLease, tailLines(next.log.String(), 25))
		}
		times = append(times, took)
		lead.start(t, h.bin) // back as a follower
		lead, epoch = next, e2
		if err := h.w.Txns(ctx, 10); err != nil {
			t.Fatal(err)
		}
	}
	h.waitRows(t, h.w.N())
	for _, r := range h.reps {
		r.kill()
	}
	h.checkAll(t, h.w.N())
	h.checkMaterialized(t)
	t.Logf("failover times: %v (lease %v)", times, haLease)
}

// TestHAZombie: the leader is paused (SIGSTOP) past its lease, a new leader
// writes, the old one is resumed: no sink accepts anything from it, and it
// exits.
func TestHAZombie(t *testing.T) { testenv.ForEachFlavor(t, testHAZombie) }

func testHAZombie(t *testing.T, flavor position.Flavor) {
	h := newHAEnv(t, flavor, 2)
	ctx := context.Background()
	for _, r := range h.reps {
		r.start(t, h.bin)
	}
	old, epoch := h.leader(t, 30*time.Second)
	if err := h.w.Txns(ctx, 20); err != nil {
		t.Fatal(err)
	}
	h.waitRows(t, 20)
	// Keep writing while the old leader is paused, so that it holds
	// transactions it read but has not written.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
			if err := h.w.Txns(ctx, 1); err != nil {
				return
			}
		}
	}()
	time.Sleep(300 * time.Millisecond)
	old.signal(syscall.SIGSTOP)
	paused := time.Now()
	next, e2 := h.leader(t, 3*haLease+5*time.Second)
	for next == old {
		if time.Since(paused) > 3*haLease+5*time.Second {
			t.Fatalf("no new leader while the old one is paused")
		}
		time.Sleep(50 * time.Millisecond)
		next, e2 = h.leader(t, time.Second)
	}
	if e2 <= epoch {
		t.Fatalf("the new leader's epoch %d is not above the old %d", e2, epoch)
	}
	time.Sleep(time.Second) // the new leader writes
	old.signal(syscall.SIGCONT)
	select {
	case <-old.done:
	case <-time.After(3 * haLease):
		t.Fatalf("the resumed zombie did not exit:\n%s", old.log.String())
	}
	close(stop)
	wg.Wait()
	h.waitRows(t, h.w.N())
	t.Logf("zombie replica-%d (epoch %d) exited: %v; its last log lines:\n%s", old.n, epoch, old.err, tailLines(old.log.String(), 4))
	next.kill()
	h.checkNoZombieWrites(t)
	h.checkAll(t, h.w.N())
	h.checkMaterialized(t)
}

// haPauses is how many pauses TestHAZombieAfterCommit aims:
// SLUICE_HA_PAUSES, or 1 (make chaos: 20; each pause is about half a
// minute, and make test has a time budget).
func haPauses() int {
	if n, err := strconv.Atoi(os.Getenv("SLUICE_HA_PAUSES")); err == nil && n > 0 {
		return n
	}
	return 1
}

// nextLeader waits for a leader with a higher epoch than after.
func (h *haEnv) nextLeader(t *testing.T, after uint64) (*replica, uint64) {
	t.Helper()
	deadline := time.Now().Add(6*haLease + 10*time.Second)
	for {
		lead, epoch := h.leader(t, 6*haLease+10*time.Second)
		if epoch > after {
			return lead, epoch
		}
		if time.Now().After(deadline) {
			t.Fatalf("no leader with an epoch above %d:\n%s", after, tailLines(h.logs().String(), 60))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// zombieWrites counts the messages of evs that come, in the order a
// consumer reads them within one log (group names it: a file, a stream, a
// partition), after a message of a newer epoch: writes of an old leader
// after its successor's. first describes the first of them.
func zombieWrites(evs []*codec.Event, group func(i int) string) (n int, first string) {
	high := map[string]uint64{}
	for i, ev := range evs {
		g := group(i)
		if ev.Sluice.Epoch < high[g] {
			if n == 0 {
				first = fmt.Sprintf("message %d (%s, seq %d) has epoch %d after one of epoch %d", i, g, ev.Sluice.Seq, ev.Sluice.Epoch, high[g])
			}
			n++
			continue
		}
		high[g] = ev.Sluice.Epoch
	}
	return n, first
}

// checkNoZombieWrites fails if any sink holds a message of an older epoch
// after one of a newer epoch, in the order its consumers read it (Kafka:
// per partition; Redis: per stream; the file and NATS: all of it).
func (h *haEnv) checkNoZombieWrites(t *testing.T) {
	t.Helper()
	for name, read := range h.readers {
		evs, err := read()
		if err != nil {
			t.Fatalf("sink %s: %v", name, err)
		}
		group := func(int) string { return name }
		switch name {
		case "kafka":
			parts := h.kafka.parts
			group = func(i int) string { return parts[i] }
		case "redis":
			group = func(i int) string { return "s:app." + evs[i].Source.Table }
		}
		epochs := map[uint64]int{}
		for _, ev := range evs {
			epochs[ev.Sluice.Epoch]++
		}
		n, first := zombieWrites(evs, group)
		if n > 0 {
			t.Errorf("sink %s: %d messages written by an old leader after its successor's; the first: %s", name, n, first)
		}
		t.Logf("sink %s: zombie writes %d (%d messages over %d epochs)", name, n, len(evs), len(epochs))
	}
}

// TestHAZombieAfterCommit: three replicas; a large transaction commits and
// the leader is paused (SIGSTOP) right after its COMMIT, while it reads
// and writes that transaction's batches, for twice the lease; a successor
// leads and writes; the old leader is resumed in the middle of its batch.
// No sink holds a message of the old epoch after one of the new, nothing
// is lost or doubled, and the successor's recovery accounts for whatever
// the old leader finished before the takeover.
func TestHAZombieAfterCommit(t *testing.T) { testenv.ForEachFlavor(t, testHAZombieAfterCommit) }

func testHAZombieAfterCommit(t *testing.T, flavor position.Flavor) {
	h := newHAEnv(t, flavor, 3)
	ctx := context.Background()
	// Batches of the default size (1 MiB, thousands of messages), as in
	// the runs that found old leaders appending after their successors:
	// the time between a write's epoch check and its append grows with
	// the batch.
	for _, r := range h.reps {
		cfg, err := os.ReadFile(r.config)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(r.config, bytes.Replace(cfg, []byte("buffer: {batch_bytes: 16KiB}\n"), nil, 1), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, r := range h.reps {
		r.start(t, h.bin)
	}
	lead, epoch := h.leader(t, 30*time.Second)
	if err := h.w.Txns(ctx, 20); err != nil {
		t.Fatal(err)
	}
	h.waitRows(t, 20)
	// Small transactions keep coming, so that the successor writes while
	// the old leader is paused and right after it resumes.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
			if err := h.w.Txns(ctx, 1); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	superStop := make(chan struct{})
	super := h.supervise(t, superStop)
	var once sync.Once
	stopSuper := func() { once.Do(func() { close(superStop); super.Wait() }) }
	t.Cleanup(stopSuper)
	n := haPauses()
	for i := range n {
		if i > 0 {
			lead, epoch = h.nextLeader(t, epoch)
			time.Sleep(time.Duration(300+rand.IntN(700)) * time.Millisecond)
		}
		rows := 4000 + rand.IntN(6000)
		if err := h.w.BulkTxn(ctx, rows); err != nil {
			t.Fatal(err)
		}
		delay := time.Duration(rand.IntN(40)) * time.Millisecond
		time.Sleep(delay)
		lead.signal(syscall.SIGSTOP)
		time.Sleep(2 * haLease)
		next, e2 := h.nextLeader(t, epoch)
		lead.mu.Lock()
		done := lead.done
		lead.mu.Unlock()
		lead.signal(syscall.SIGCONT)
		select {
		case <-done:
		case <-time.After(3 * haLease):
			t.Fatalf("the resumed old leader replica-%d did not exit:\n%s", lead.n, tailLines(lead.log.String(), 30))
		}
		t.Logf("pause %d/%d: replica-%d (epoch %d) stopped %v after the COMMIT of a %d-row transaction, for %v; replica-%d leads with epoch %d; the old one exited: %s",
			i+1, n, lead.n, epoch, delay, rows, 2*haLease, next.n, e2, tailLines(lead.log.String(), 1))
	}
	close(stop)
	wg.Wait()
	total := h.w.N()
	h.waitRows(t, total)
	stopSuper()
	for _, r := range h.reps {
		r.kill()
	}
	logs := h.logs().String()
	t.Logf("a successor waited for the file sink's lock held by a paused writer: %d log lines", strings.Count(logs, "waiting for the file sink's lock"))
	h.checkNoZombieWrites(t)
	h.checkAll(t, total)
	h.checkMaterialized(t)
	if strings.Contains(logs, "lines of an older epoch after lines of a newer one") {
		t.Errorf("a recovery found old-epoch lines after newer ones in the file sink")
	}
	t.Logf("zombie report: %d pauses after a large COMMIT, %d transactions; zombie writes 0, lost 0, duplicated 0 (every sink checked)", n, total)
}

// TestHAPartition: the leader is cut from etcd (not from the server or the
// sinks): it stops writing within 2/3 of the lease and exits; another
// replica leads; nothing is lost or doubled.
func TestHAPartition(t *testing.T) { testenv.ForEachFlavor(t, testHAPartition) }

func testHAPartition(t *testing.T, flavor position.Flavor) {
	h := newHAEnv(t, flavor, 2)
	ctx := context.Background()
	for _, r := range h.reps {
		r.start(t, h.bin)
	}
	lead, _ := h.leader(t, 30*time.Second)
	if err := h.w.Txns(ctx, 20); err != nil {
		t.Fatal(err)
	}
	h.waitRows(t, 20)
	cut := time.Now()
	lead.proxy.Cut()
	select {
	case <-lead.done:
	case <-time.After(haLease * 2):
		t.Fatalf("the partitioned leader did not stop within 2 leases:\n%s", lead.log.String())
	}
	exited := time.Since(cut)
	// When it stopped writing: the time of its "leadership lost" line.
	var stopped time.Duration
	for _, line := range strings.Split(lead.log.String(), "\n") {
		if !strings.Contains(line, "leadership lost: stopped writing") {
			continue
		}
		ts, _, _ := strings.Cut(strings.TrimPrefix(line, "time="), " ")
		at, err := time.Parse(time.RFC3339Nano, ts)
		if err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		stopped = at.Sub(cut)
	}
	t.Logf("partitioned leader stopped writing %v after the cut and exited after %v (2/3 of the lease is %v)", stopped.Round(time.Millisecond), exited.Round(time.Millisecond), haLease*2/3)
	if stopped <= 0 || stopped > haLease*2/3+300*time.Millisecond {
		t.Errorf("the partitioned leader stopped writing %v after the cut, not within 2/3 of the lease", stopped)
	}
	if !strings.Contains(lead.log.String(), "leadership lost") {
		t.Errorf("no log line saying leadership was lost:\n%s", lead.log.String())
	}
	if err := h.w.Txns(ctx, 20); err != nil {
		t.Fatal(err)
	}
	h.waitRows(t, h.w.N())
	lead.proxy.Restore()
	for _, r := range h.reps {
		r.kill()
	}
	h.checkAll(t, h.w.N())
}

// haFaults is how many faults the chaos test injects: SLUICE_HA_FAULTS,
// or 5 (make chaos: 50; make test has a time budget).
func haFaults() int {
	if n, err := strconv.Atoi(os.Getenv("SLUICE_HA_FAULTS")); err == nil && n > 0 {
		return n
	}
	return 5
}

// TestHAChaos: three replicas under continuous writes and random faults
// (kill -9, SIGSTOP past the lease then SIGCONT, etcd cut); afterwards
// every sink holds every transaction exactly once.
func TestHAChaos(t *testing.T) { testenv.ForEachFlavor(t, testHAChaos) }

func testHAChaos(t *testing.T, flavor position.Flavor) {
	h := newHAEnv(t, flavor, 3)
	ctx := context.Background()
	for _, r := range h.reps {
		r.start(t, h.bin)
	}
	h.leader(t, 30*time.Second)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			case <-time.After(time.Duration(rand.IntN(4)) * time.Millisecond):
			}
			if err := h.w.Txns(ctx, 1+rand.IntN(3)); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	superStop := make(chan struct{})
	super := h.supervise(t, superStop)
	var once sync.Once
	stopSuper := func() { once.Do(func() { close(superStop); super.Wait() }) }
	t.Cleanup(stopSuper) // also when the test fails half-way
	faults := map[string]int{}
	var lastEpoch uint64
	failovers := 0
	n := haFaults()
	for i := range n {
		// Every fault below costs the leader its leadership: wait for the
		// next one (a higher epoch) before the next fault.
		lead, epoch := h.leader(t, 6*haLease+10*time.Second)
		for deadline := time.Now().Add(6*haLease + 10*time.Second); epoch <= lastEpoch; {
			if time.Now().After(deadline) {
				t.Fatalf("no new leader after fault %d", i)
			}
			time.Sleep(50 * time.Millisecond)
			lead, epoch = h.leader(t, 6*haLease+10*time.Second)
		}
		if lastEpoch != 0 {
			failovers++
		}
		lastEpoch = epoch
		time.Sleep(time.Duration(300+rand.IntN(700)) * time.Millisecond)
		var kind string
		switch rand.IntN(3) {
		case 0:
			kind = "kill -9"
			lead.signal(syscall.SIGKILL)
		case 1:
			kind = "SIGSTOP past the lease"
			lead.signal(syscall.SIGSTOP)
			time.Sleep(haLease + time.Duration(rand.IntN(1000))*time.Millisecond)
			lead.signal(syscall.SIGCONT)
		case 2:
			kind = "etcd cut"
			lead.proxy.Cut()
			time.Sleep(haLease)
			lead.proxy.Restore()
		}
		faults[kind]++
		t.Logf("fault %d/%d: %s on replica-%d (epoch %d) after %d transactions", i+1, n, kind, lead.n, epoch, h.w.N())
	}
	close(stop)
	wg.Wait()
	_, epoch := h.leader(t, 6*haLease+10*time.Second)
	for deadline := time.Now().Add(6*haLease + 10*time.Second); epoch <= lastEpoch && time.Now().Before(deadline); {
		time.Sleep(50 * time.Millisecond)
		_, epoch = h.leader(t, 6*haLease+10*time.Second)
	}
	if epoch > lastEpoch {
		failovers++
	}
	total := h.w.N()
	h.waitRows(t, total)
	stopSuper()
	for _, r := range h.reps {
		r.kill()
	}
	h.checkNoZombieWrites(t)
	h.checkAll(t, total)
	h.checkMaterialized(t)
	t.Logf("chaos report: faults injected %d %v; failovers %d; transactions written %d; lost 0; duplicated 0 (every sink checked)", n, faults, failovers, total)
}

func tailLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
