package kafka

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-cdc/sluice/internal/testenv/kafkaenv"
	"github.com/sluice-cdc/sluice/pipeline"
)

// TestCluster runs the faults of a three-broker cluster (replication
// factor 3, min.insync.replicas=2; kafkaenv.StartCluster) on one cluster,
// started once for all of them: each subtest has its own topics and
// transactional id, and leaves every broker running.
func TestCluster(t *testing.T) {
	// A log cleaner that looks for work every 100 ms (testCompacted).
	k := kafkaenv.StartCluster(t, map[string]string{"log.cleaner.backoff.ms": "100"})
	for _, tc := range []struct {
		name string
		run  func(t *testing.T, c *cluster)
	}{
		{"KillPartitionLeader", testKillPartitionLeader},
		{"KillTxnCoordinator", testKillTxnCoordinator},
		{"PausedReplicaFenced", testPausedReplicaFenced},
		{"Compacted", testCompacted},
		{"LeaderlessAtCommit", testLeaderlessAtCommit},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.run(t, &cluster{k: k, prefix: kafkaenv.Name(t, "")})
		})
	}
}

// faultSink is a sink for the cluster's fault tests: replication factor
// 3 (the cluster's default) and a request timeout that lets a leader
// election finish within a few retries.
func faultSink(t *testing.T, c *cluster) *Sink {
	return newSink(t, c, Config{RequestTimeout: 3 * time.Second})
}

// clusterAdmin is an admin client of c, closed at the end of the test.
func clusterAdmin(t *testing.T, c *cluster) *kadm.Client {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return kadm.NewClient(cl)
}

// partitionLeader returns the broker id that leads partition part of the
// test's topic.
func partitionLeader(t *testing.T, c *cluster, topic string, part int32) int32 {
	t.Helper()
	md, err := clusterAdmin(t, c).Metadata(testCtx(t), c.topic(topic))
	if err != nil {
		t.Fatal(err)
	}
	d, ok := md.Topics[c.topic(topic)]
	if !ok || d.Err != nil {
		t.Fatalf("metadata of %s: %v", c.topic(topic), d.Err)
	}
	p, ok := d.Partitions[part]
	if !ok || p.Leader < 0 {
		t.Fatalf("partition %d of %s has no leader: %+v", part, c.topic(topic), p)
	}
	return p.Leader
}

// txnCoordinator returns the broker id of the transaction coordinator of
// txnID, waiting while there is none (the transaction state topic being
// created, or its leader moving).
func txnCoordinator(t *testing.T, c *cluster, txnID string) int32 {
	t.Helper()
	adm := clusterAdmin(t, c)
	deadline := time.Now().Add(30 * time.Second)
	for {
		r, ok := adm.FindTxnCoordinators(testCtx(t), txnID)[txnID]
		if ok && r.Err == nil {
			return r.NodeID
		}
		if time.Now().After(deadline) {
			t.Fatalf("finding the transaction coordinator of %s: %+v", txnID, r)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// driver writes batches of 10 messages as the pipeline does: after a
// failed Write it recovers from the last offset a Write returned and goes
// on after what the recovery found, until stop is closed.
type driver struct {
	s     *Sink
	epoch uint64
	next  uint64 // the next seq to write
	off   string

	mu       sync.Mutex
	written  uint64 // seqs 1..written are acknowledged by a Write or found by Recover
	failures int
	lastErr  error
}

func (d *driver) acked() uint64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.written
}

func (d *driver) run(ctx context.Context, stop <-chan struct{}) error {
	for {
		select {
		case <-stop:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		default:
		}
		b := batch(d.epoch, d.next, d.next+9)
		off, err := d.s.Write(ctx, b)
		if err == nil {
			d.off, d.next = off, d.next+10
			d.mu.Lock()
			d.written = d.next - 1
			d.mu.Unlock()
			continue
		}
		if errors.Is(err, pipeline.ErrFenced) {
			return err
		}
		d.mu.Lock()
		d.failures++
		d.lastErr = err
		d.mu.Unlock()
		// Recover until it succeeds, as the pipeline's retry loop does.
		for {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			rec, rerr := d.s.Recover(ctx, d.epoch, d.off)
			if rerr == nil {
				if rec.MaxSeq >= d.next {
					d.next = rec.MaxSeq + 1
				}
				d.off = rec.Offset
				d.mu.Lock()
				d.written = d.next - 1
				d.mu.Unlock()
				break
			}
			if errors.Is(rerr, pipeline.ErrFenced) {
				return rerr
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
}

// writeThroughFault writes with a driver while fault runs, then for a
// little longer, and checks that the topics hold every seq written once.
// fault gets the driver, to wait for progress.
func writeThroughFault(t *testing.T, c *cluster, s *Sink, fault func(d *driver)) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	recoverRetrying(t, s, 1, "")
	d := &driver{s: s, epoch: 1, next: 1}
	stop := make(chan struct{})
	done := make(chan error, 1)
	go func() { done <- d.run(ctx, stop) }()
	fault(d)
	close(stop)
	if err := <-done; err != nil {
		t.Fatalf("writing: %v", err)
	}
	t.Logf("wrote seqs 1..%d; %d Writes failed (last: %v)", d.next-1, d.failures, d.lastErr)
	checkOnce(t, c, 1, d.next-1, "shop.orders", "shop.order_lines")
}

// recoverRetrying calls Recover until it succeeds, for up to a minute, as
// the pipeline retries it: the first producer of a fresh cluster waits
// for the transaction state topic (replication factor 3) to be created.
func recoverRetrying(t *testing.T, s *Sink, epoch uint64, offset string) pipeline.Recovery {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		rec, err := s.Recover(testCtx(t), epoch, offset)
		if err == nil {
			return rec
		}
		if time.Now().After(deadline) || errors.Is(err, pipeline.ErrFenced) {
			t.Fatalf("Recover(%d, %q): %v", epoch, offset, err)
		}
		t.Logf("Recover(%d, %q): %v; again", epoch, offset, err)
		time.Sleep(500 * time.Millisecond)
	}
}

// waitAcked waits until the driver has more than n seqs acknowledged.
func waitAcked(t *testing.T, d *driver, n uint64, within time.Duration) uint64 {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		if a := d.acked(); a > n {
			return a
		}
		if time.Now().After(deadline) {
			d.mu.Lock()
			defer d.mu.Unlock()
			t.Fatalf("no Write succeeded beyond seq %d within %v (%d failures, last: %v)", n, within, d.failures, d.lastErr)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// killRestart kills broker id (SIGKILL) while d writes, checks that
// writes go on with the two others, starts it again and checks that
// writes go on.
func killRestart(t *testing.T, c *cluster, d *driver, id int32, what string) {
	t.Helper()
	i := c.k.Index(id)
	if i < 0 {
		t.Fatalf("no node with broker id %d", id)
	}
	a := waitAcked(t, d, 20, 30*time.Second)
	if err := c.k.Kill(i); err != nil {
		t.Fatal(err)
	}
	t.Logf("killed broker %d (%s) after seq %d", id, what, a)
	// With two of three brokers (min.insync.replicas=2) the cluster
	// stays writable once a new leader is elected.
	a = waitAcked(t, d, a+30, time.Minute)
	t.Logf("broker %d down: written up to seq %d", id, a)
	if err := c.k.Start(testCtx(t), i); err != nil {
		t.Fatal(err)
	}
	a = waitAcked(t, d, a+30, time.Minute)
	t.Logf("broker %d back: written up to seq %d", id, a)
}

// The leader of a partition the sink writes is killed (SIGKILL) in the
// middle of the writes and started again: nothing is lost or doubled.
func testKillPartitionLeader(t *testing.T, c *cluster) {
	s := faultSink(t, c)
	writeThroughFault(t, c, s, func(d *driver) {
		waitAcked(t, d, 0, 30*time.Second) // the topics exist
		coord := txnCoordinator(t, c, s.TransactionalID())
		// The leader of a partition that is not also the coordinator:
		// this test is about the partition.
		leader := int32(-1)
		for p := int32(0); p < 3 && leader < 0; p++ {
			if l := partitionLeader(t, c, "shop.orders", p); l != coord {
				leader = l
				t.Logf("partition %d of %s: leader %d; transaction coordinator %d", p, c.topic("shop.orders"), l, coord)
			}
		}
		if leader < 0 {
			t.Fatalf("every partition of %s is led by the transaction coordinator %d", c.topic("shop.orders"), coord)
		}
		killRestart(t, c, d, leader, "partition leader")
	})
}

// The transaction coordinator of the sink's transactional id (the leader
// of its transaction state partition) is killed in the middle of the
// writes and started again: nothing is lost or doubled.
func testKillTxnCoordinator(t *testing.T, c *cluster) {
	s := faultSink(t, c)
	writeThroughFault(t, c, s, func(d *driver) {
		waitAcked(t, d, 0, 30*time.Second)
		coord := txnCoordinator(t, c, s.TransactionalID())
		killRestart(t, c, d, coord, "transaction coordinator")
		if now := txnCoordinator(t, c, s.TransactionalID()); now != coord {
			t.Logf("the transaction coordinator moved from broker %d to %d", coord, now)
		}
	})
}

// Two replicas of one pipeline (HA): the leader (epoch 1) is paused in
// the middle of a Write, after its records were acknowledged and before
// its commit, past its lease; the next leader (epoch 2, the same
// transactional id) recovers and writes. The old leader's producer is
// fenced by the real transaction coordinator: when it wakes up its commit
// fails with ErrFenced and its records are never visible to a
// read_committed consumer, and so does its next Write.
func testPausedReplicaFenced(t *testing.T, c *cluster) {
	old := faultSink(t, c)
	recoverRetrying(t, old, 1, "")
	off := mustWrite(t, old, batch(1, 1, 10))

	paused, wake := make(chan struct{}), make(chan struct{})
	old.beforeCommit = func() {
		close(paused)
		<-wake
	}
	late := make(chan error, 1)
	go func() {
		_, err := old.Write(testCtx(t), batch(1, 11, 20))
		late <- err
	}()
	select {
	case <-paused:
	case err := <-late:
		t.Fatalf("the old leader's Write returned before its commit: %v", err)
	}

	// The new leader: the same transactional id, a higher epoch.
	next := faultSink(t, c)
	rec := mustRecover(t, next, 2, off)
	if rec.MaxSeq != 0 {
		t.Fatalf("the new leader recovered MaxSeq %d: the old leader's uncommitted records are visible", rec.MaxSeq)
	}
	mustWrite(t, next, batch(2, 11, 20))

	close(wake)
	err := <-late
	if !errors.Is(err, pipeline.ErrFenced) {
		t.Fatalf("the old leader's late commit: %v, want ErrFenced", err)
	}
	t.Logf("the old leader's late commit: %v", err)
	old.beforeCommit = nil
	// Its next Write (the pipeline would stop; a zombie might not).
	if _, err := old.Recover(testCtx(t), 1, off); !errors.Is(err, pipeline.ErrFenced) {
		t.Fatalf("the old leader's Recover: %v, want ErrFenced", err)
	}
	mustWrite(t, next, batch(2, 21, 30))

	checkOnce(t, c, 1, 30, "shop.orders", "shop.order_lines")
	// Every record of 11..30 read_committed is the new leader's; the old
	// leader's 11..20 are in the log (read_uncommitted) but aborted.
	oldSeen := 0
	for _, r := range readUncommitted(t, c, "shop.orders", "shop.order_lines") {
		seq, _ := header(r, pipeline.HeaderSeq)
		ep, _ := header(r, pipeline.HeaderEpoch)
		if n, _ := strconv.Atoi(seq); n > 10 && ep == "1" {
			oldSeen++
		}
	}
	if oldSeen != 10 {
		t.Errorf("read_uncommitted sees %d records of seqs 11..20 of epoch 1, want the old leader's 10 (aborted)", oldSeen)
	}
	for _, r := range readAll(t, c, "shop.orders", "shop.order_lines") {
		seq, _ := header(r, pipeline.HeaderSeq)
		ep, _ := header(r, pipeline.HeaderEpoch)
		if n, _ := strconv.Atoi(seq); n > 10 && ep != "2" {
			t.Errorf("read_committed: seq %d of epoch %s, want epoch 2", n, ep)
		}
	}
}

// readUncommitted returns every record of the test's topics, aborted ones
// included, read with read_uncommitted up to the partitions' ends.
func readUncommitted(t *testing.T, c *cluster, topics ...string) []*kgo.Record {
	t.Helper()
	var names []string
	for _, n := range topics {
		names = append(names, c.topic(n))
	}
	adm := clusterAdmin(t, c)
	ends, err := adm.ListEndOffsets(testCtx(t), names...)
	if err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.FetchIsolationLevel(kgo.ReadUncommitted()), kgo.ConsumeTopics(names...),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.KeepControlRecords())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	left := map[topicPartition]int64{}
	ends.Each(func(o kadm.ListedOffset) {
		if o.Offset > 0 {
			left[topicPartition{o.Topic, o.Partition}] = o.Offset
		}
	})
	var out []*kgo.Record
	ctx := testCtx(t)
	for len(left) > 0 {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("reading uncommitted: %d partitions not read to their end", len(left))
		}
		fs.EachRecord(func(r *kgo.Record) {
			tp := topicPartition{r.Topic, r.Partition}
			if end, ok := left[tp]; ok && r.Offset+1 >= end {
				delete(left, tp)
			}
			if !r.Attrs.IsControl() {
				out = append(out, r)
			}
		})
	}
	slices.SortFunc(out, func(a, b *kgo.Record) int { return int(a.Offset - b.Offset) })
	return out
}

// A Write commits while every replica of one of its partitions is down
// (a topic of replication factor 1 here; with replication factor 3, the
// in-sync replicas all down): the transaction coordinator skips the
// partitions that have no leader, as if deleted, and completes the
// commit, and the Write returns. When the broker comes back its
// partitions hold the transaction open for ever (a hanging transaction,
// hanging.go): the same fault as TestKillBeforeMarkers, made
// deterministic. A recovery from the checkpoint before that Write cannot
// prove the outcome and stops with ErrHangingTransaction; one from the
// checkpoint the Write returned commits it, and every seq is read once.
func testLeaderlessAtCommit(t *testing.T, c *cluster) {
	// A request timeout that gives the transaction (timeout 2×8+10 s)
	// time for the controller to fence the killed broker (its session
	// timeout, 9 s).
	cfg := Config{RequestTimeout: 8 * time.Second, ReplicationFactor: 1}
	s := newSink(t, c, cfg)
	recoverRetrying(t, s, 1, "")
	off1 := mustWrite(t, s, batch(1, 1, 10))
	coord := txnCoordinator(t, c, s.TransactionalID())
	victim, parts := int32(-1), 0
	for _, topic := range []string{"shop.orders", "shop.order_lines"} {
		for p := int32(0); p < 3; p++ {
			if l := partitionLeader(t, c, topic, p); l != coord && (victim < 0 || l == victim) {
				victim = l
				parts++
			}
		}
	}
	if victim < 0 {
		t.Fatalf("every partition is led by the transaction coordinator %d", coord)
	}
	t.Logf("broker %d leads %d of the partitions (replication factor 1); transaction coordinator %d", victim, parts, coord)
	i := c.k.Index(victim)
	restarted := false
	defer func() {
		if !restarted {
			_ = c.k.Start(context.Background(), i)
		}
	}()
	s.beforeCommit = func() {
		if err := c.k.Kill(i); err != nil {
			t.Error(err)
			return
		}
		// Until the controller has fenced it: its partitions have no
		// leader.
		deadline := time.Now().Add(30 * time.Second)
		for {
			md, err := clusterAdmin(t, c).Metadata(testCtx(t), c.topic("shop.orders"), c.topic("shop.order_lines"))
			leaderless := false
			if err == nil {
				for _, d := range md.Topics {
					for _, p := range d.Partitions {
						leaderless = leaderless || p.Leader < 0
					}
				}
			}
			if leaderless {
				return
			}
			if time.Now().After(deadline) {
				t.Errorf("the partitions of broker %d still have a leader 30 s after it was killed", victim)
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	off2, err := s.Write(testCtx(t), batch(1, 11, 20))
	s.beforeCommit = nil
	if err != nil {
		t.Fatalf("the Write whose partitions lost their leader before the commit: %v (Kafka no longer skips them?)", err)
	}
	if err := c.k.Start(testCtx(t), i); err != nil {
		t.Fatal(err)
	}
	restarted = true
	hung := stuckPartitions(t, c, "shop.orders", "shop.order_lines")
	if len(hung) == 0 {
		t.Fatalf("no partition holds the transaction open after broker %d came back: Kafka wrote the markers after all", victim)
	}
	t.Logf("the Write returned; hanging after broker %d came back: %v", victim, hung)

	// From the checkpoint before that Write, after another producer
	// with the transactional id started (the coordinator's state no
	// longer says): nothing proves the outcome.
	bumpEpoch(t, c, s.TransactionalID())
	s2 := newSink(t, c, cfg)
	_, err = s2.Recover(testCtx(t), 2, off1)
	if !errors.Is(err, ErrHangingTransaction) {
		t.Fatalf("Recover(%s): %v, want ErrHangingTransaction", off1, err)
	}
	// From the checkpoint the Write returned: committed.
	rec := recoverRetrying(t, s2, 2, off2)
	if rec.MaxSeq != 0 {
		t.Fatalf("Recover(%s) found MaxSeq %d", off2, rec.MaxSeq)
	}
	if hung := stuckPartitions(t, c, "shop.orders", "shop.order_lines"); len(hung) != 0 {
		t.Fatalf("still hanging after the recovery: %v", hung)
	}
	mustWrite(t, s2, batch(2, 21, 30))
	checkOnce(t, c, 1, 30, "shop.orders", "shop.order_lines")
}
