package coord

import (
	"context"
	"errors"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/sluice-cdc/sluice/checkpoint"
	"github.com/sluice-cdc/sluice/internal/testenv/certs"
	"github.com/sluice-cdc/sluice/internal/testenv/etcdenv"
)

// ttl is the lease TTL of the tests: the least etcd grants, to keep them
// short.
const ttl = 2 * time.Second

func newReplica(t *testing.T, endpoint, id string) *Etcd {
	t.Helper()
	e, err := New(Config{Endpoints: []string{endpoint}, LeaseTTL: ttl, ID: id}, "p1", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

func testCtx(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// won is a campaign's outcome.
type won struct {
	e   *Etcd
	l   *Leadership
	err error
	at  time.Time
}

// campaign runs e.Campaign in the background and reports on ch.
func campaign(ctx context.Context, e *Etcd, ch chan<- won) {
	go func() {
		l, err := e.Campaign(ctx)
		ch <- won{e: e, l: l, err: err, at: time.Now()}
	}()
}

func next(t *testing.T, ch <-chan won, within time.Duration) won {
	t.Helper()
	select {
	case w := <-ch:
		if w.err != nil {
			t.Fatalf("campaign of %s: %v", w.e.ID(), w.err)
		}
		return w
	case <-time.After(within):
		t.Fatalf("no leader within %s", within)
		return won{}
	}
}

func noLeader(t *testing.T, ch <-chan won, during time.Duration) {
	t.Helper()
	select {
	case w := <-ch:
		t.Fatalf("%s leads too (err %v)", w.e.ID(), w.err)
	case <-time.After(during):
	}
}

// waitFollowers waits until Status shows n followers.
func waitFollowers(t *testing.T, e *Etcd, n int) Status {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		st, err := e.Status(testCtx(t, 5*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		if len(st.Followers) == n {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("status %+v: want %d followers", st, n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestOneLeaderAtATimeAndEpochsGrow(t *testing.T) {
	srv := etcdenv.Start(t)
	reps := []*Etcd{newReplica(t, srv.Endpoint(), "a"), newReplica(t, srv.Endpoint(), "b"), newReplica(t, srv.Endpoint(), "c")}
	st, err := reps[0].Status(testCtx(t, 5*time.Second))
	if err != nil || st.Leader != nil || len(st.Followers) != 0 {
		t.Fatalf("status before any campaign: %+v, %v", st, err)
	}

	ctx := testCtx(t, 30*time.Second)
	ch := make(chan won, len(reps))
	for _, r := range reps {
		campaign(ctx, r, ch)
	}
	w := next(t, ch, 5*time.Second)
	noLeader(t, ch, 300*time.Millisecond)

	// Status: the leader, then the others in the order they will lead.
	st = waitFollowers(t, reps[1], 2)
	if st.Pipeline != "p1" || st.Leader == nil || st.Leader.ID != w.e.ID() || st.Leader.Epoch != w.l.Epoch() || st.Leader.Key != w.l.Key() {
		t.Fatalf("status %+v: want leader %s at epoch %d", st, w.e.ID(), w.l.Epoch())
	}
	if !st.Leader.Since.Equal(w.l.Since()) {
		t.Errorf("status leader since %s, leadership since %s", st.Leader.Since, w.l.Since())
	}
	seen := map[string]bool{w.e.ID(): true}
	prev := st.Leader.Epoch
	for _, f := range st.Followers {
		if seen[f.ID] || f.Epoch <= prev || f.Since.IsZero() {
			t.Fatalf("status %+v: followers must be the other replicas, in epoch order", st)
		}
		seen[f.ID], prev = true, f.Epoch
	}

	// Successive leaderships by resignation: each next leader is the first
	// follower, with a higher epoch, and leads only after the resignation.
	epochs := []uint64{w.l.Epoch()}
	for i := 1; i < len(reps); i++ {
		st, err := w.e.Status(testCtx(t, 5*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		if err := w.l.Resign(testCtx(t, 5*time.Second)); err != nil {
			t.Fatalf("resign: %v", err)
		}
		select {
		case <-w.l.Lost():
		default:
			t.Fatal("Lost still open after Resign")
		}
		if !errors.Is(w.l.Err(), ErrResigned) {
			t.Fatalf("Err after Resign: %v", w.l.Err())
		}
		nw := next(t, ch, 2*time.Second) // at once: the lease was revoked
		if nw.e.ID() != st.Followers[0].ID || nw.l.Epoch() != st.Followers[0].Epoch {
			t.Fatalf("%s leads at epoch %d; status said %+v was next", nw.e.ID(), nw.l.Epoch(), st.Followers[0])
		}
		epochs = append(epochs, nw.l.Epoch())
		w = nw
	}
	for i := 1; i < len(epochs); i++ {
		if epochs[i] <= epochs[i-1] {
			t.Fatalf("epochs %v do not grow", epochs)
		}
	}

	// Campaigning again after resigning gives a higher epoch still.
	if err := w.l.Resign(testCtx(t, 5*time.Second)); err != nil {
		t.Fatal(err)
	}
	campaign(ctx, reps[0], ch)
	again := next(t, ch, 5*time.Second)
	if again.l.Epoch() <= epochs[len(epochs)-1] {
		t.Fatalf("epoch %d after %v", again.l.Epoch(), epochs)
	}
	if err := again.l.Resign(testCtx(t, 5*time.Second)); err != nil {
		t.Fatal(err)
	}
	if err := again.l.Resign(testCtx(t, 5*time.Second)); err != nil {
		t.Fatalf("second resign: %v", err)
	}
}

func TestCrashedLeaderIsReplacedWithinTTL(t *testing.T) {
	srv := etcdenv.Start(t)
	a, b := newReplica(t, srv.Endpoint(), "a"), newReplica(t, srv.Endpoint(), "b")
	ctx := testCtx(t, 30*time.Second)
	la, err := a.Campaign(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ch := make(chan won, 1)
	campaign(ctx, b, ch)
	waitFollowers(t, b, 1)

	// The process dies: its connection closes, nothing is revoked.
	crash := time.Now()
	a.Client().Close()
	w := next(t, ch, ttl+2*time.Second)
	took := w.at.Sub(crash)
	t.Logf("new leader %s after %s (lease TTL %s)", w.e.ID(), took, ttl)
	if took < ttl/2 {
		t.Fatalf("new leader after %s: before the lease could expire", took)
	}
	if w.l.Epoch() <= la.Epoch() {
		t.Fatalf("epoch %d after %d", w.l.Epoch(), la.Epoch())
	}
	select {
	case <-la.Lost():
		if !errors.Is(la.Err(), ErrLeadershipLost) {
			t.Fatalf("crashed leader's Err: %v", la.Err())
		}
	case <-time.After(time.Second):
		t.Fatal("the crashed leader's Lost is still open")
	}
}

// TestPartitionedLeaderStopsFirst cuts the leader off from etcd: it must
// give up within 2/3 of the TTL, before anyone else can lead, and its
// checkpoint saves must fail once another leads.
func TestPartitionedLeaderStopsFirst(t *testing.T) {
	srv := etcdenv.Start(t)
	proxy := etcdenv.NewProxy(t, srv.Endpoint())
	a := newReplica(t, proxy.Endpoint(), "a")
	b, c := newReplica(t, srv.Endpoint(), "b"), newReplica(t, srv.Endpoint(), "c")
	ctx := testCtx(t, 30*time.Second)
	la, err := a.Campaign(ctx)
	if err != nil {
		t.Fatal(err)
	}
	storeA := a.CheckpointStore(la)
	v, err := storeA.Save(ctx, checkpoint.Checkpoint{Epoch: la.Epoch(), LastSeq: 1}, 0)
	if err != nil {
		t.Fatalf("the leader's save: %v", err)
	}
	ch := make(chan won, 2)
	campaign(ctx, b, ch)
	campaign(ctx, c, ch)
	waitFollowers(t, b, 2)
	// Let a few keep-alives pass, so that the cut falls at a random
	// point of their cycle (every TTL/6).
	time.Sleep(ttl/3 + rand.N(ttl/6))

	cut := time.Now()
	proxy.Cut()
	var lostAt time.Time
	select {
	case <-la.Lost():
		lostAt = time.Now()
	case <-time.After(ttl + 2*time.Second):
		t.Fatal("the cut-off leader's Lost is still open")
	}
	w := next(t, ch, ttl+2*time.Second)
	t.Logf("cut at 0; leader stopped after %s; %s leads after %s (lease TTL %s)",
		lostAt.Sub(cut).Round(time.Millisecond), w.e.ID(), w.at.Sub(cut).Round(time.Millisecond), ttl)
	// The watchdog's timer, or the etcd client's own keep-alive deadline
	// (its last answer + TTL) when that comes first.
	if !errors.Is(la.Err(), ErrLeadershipLost) {
		t.Errorf("cut-off leader's Err: %v, want ErrLeadershipLost", la.Err())
	}
	const slack = 400 * time.Millisecond
	if lost := lostAt.Sub(cut); lost > ttl*2/3+slack {
		t.Errorf("leader stopped %s after the cut, want within 2/3 of %s (+%s)", lost, ttl, slack)
	}
	if !lostAt.Before(w.at) {
		t.Errorf("new leader at %s, old leader stopped only at %s", w.at.Sub(cut), lostAt.Sub(cut))
	}
	if w.l.Epoch() <= la.Epoch() {
		t.Errorf("epoch %d after %d", w.l.Epoch(), la.Epoch())
	}

	// The network is back: the old leader's late save is refused, the new
	// leader's goes through.
	proxy.Restore()
	_, err = storeA.Save(testCtx(t, 10*time.Second), checkpoint.Checkpoint{Epoch: la.Epoch(), LastSeq: 2}, v)
	if !errors.Is(err, checkpoint.ErrConflict) || !strings.Contains(err.Error(), "leadership lost") {
		t.Fatalf("the old leader's save: %v, want a conflict for leadership lost", err)
	}
	storeW := w.e.CheckpointStore(w.l)
	cp, err := storeW.Load(ctx)
	if err != nil || cp.Version != v || cp.LastSeq != 1 {
		t.Fatalf("new leader loads %+v, %v; want the old leader's save (version %d)", cp, err, v)
	}
	if _, err := storeW.Save(ctx, checkpoint.Checkpoint{Epoch: w.l.Epoch(), LastSeq: 2}, v); err != nil {
		t.Fatalf("the new leader's save: %v", err)
	}
	if err := la.Resign(testCtx(t, 5*time.Second)); err != nil {
		t.Logf("resign after the loss: %v", err)
	}
}

func TestLostWhenLeaderKeyDeleted(t *testing.T) {
	srv := etcdenv.Start(t)
	a, other := newReplica(t, srv.Endpoint(), "a"), newReplica(t, srv.Endpoint(), "admin")
	ctx := testCtx(t, 10*time.Second)
	la, err := a.Campaign(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := other.Client().Delete(ctx, la.Key()); err != nil {
		t.Fatal(err)
	}
	select {
	case <-la.Lost():
	case <-time.After(time.Second):
		t.Fatal("Lost still open after the leader key was deleted")
	}
	if !errors.Is(la.Err(), ErrLeadershipLost) || !strings.Contains(la.Err().Error(), "deleted") {
		t.Fatalf("Err: %v, want the key deleted", la.Err())
	}
}

func TestCampaignCancelledLeavesTheLine(t *testing.T) {
	srv := etcdenv.Start(t)
	a, b := newReplica(t, srv.Endpoint(), "a"), newReplica(t, srv.Endpoint(), "b")
	la, err := a.Campaign(testCtx(t, 10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	if _, err := b.Campaign(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("campaign past its deadline: %v", err)
	}
	st := waitFollowers(t, a, 0)
	if st.Leader == nil || st.Leader.ID != "a" {
		t.Fatalf("status %+v: want a leading alone", st)
	}
	_ = la
}

func TestCloseHandsOver(t *testing.T) {
	srv := etcdenv.Start(t)
	a, b := newReplica(t, srv.Endpoint(), "a"), newReplica(t, srv.Endpoint(), "b")
	ctx := testCtx(t, 10*time.Second)
	la, err := a.Campaign(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ch := make(chan won, 1)
	campaign(ctx, b, ch)
	waitFollowers(t, b, 1)
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if !errors.Is(la.Err(), ErrResigned) {
		t.Fatalf("Err after Close: %v", la.Err())
	}
	next(t, ch, time.Second) // revoked, not expired
	if _, err := a.Campaign(ctx); !errors.Is(err, ErrClosed) {
		t.Fatalf("campaign after Close: %v", err)
	}
}

// TestFollowerCutOffCampaignsAgain cuts a waiting replica off for longer
// than the lease TTL: its place in line is lost with its lease, and once
// back it campaigns again and leads in its turn.
func TestFollowerCutOffCampaignsAgain(t *testing.T) {
	srv := etcdenv.Start(t)
	proxy := etcdenv.NewProxy(t, srv.Endpoint())
	a, b := newReplica(t, srv.Endpoint(), "a"), newReplica(t, proxy.Endpoint(), "b")
	ctx := testCtx(t, 30*time.Second)
	la, err := a.Campaign(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ch := make(chan won, 1)
	campaign(ctx, b, ch)
	before := waitFollowers(t, a, 1)

	proxy.Cut()
	waitFollowers(t, a, 0) // b's lease expired, its key with it
	noLeader(t, ch, 0)
	proxy.Restore()
	after := waitFollowers(t, a, 1)
	if after.Followers[0].ID != "b" || after.Followers[0].Key == before.Followers[0].Key {
		t.Fatalf("followers %+v after %+v: want b back with a new key", after.Followers, before.Followers)
	}
	if err := la.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	w := next(t, ch, 2*time.Second)
	if w.l.Epoch() != after.Followers[0].Epoch {
		t.Fatalf("b leads at epoch %d, status said %d", w.l.Epoch(), after.Followers[0].Epoch)
	}
}

// etcd with TLS and client-certificate authentication (--client-cert-auth),
// as hosted etcd requires: the replica connects with the tls block (CA,
// certificate, key), takes the lease and leads, and its checkpoint store
// works; a wrong CA or no client certificate is refused at New with an
// error that names the endpoint and says what to set.
func TestTLSClientCertificates(t *testing.T) {
	p := certs.New(t)
	srv := etcdenv.StartSecure(t, p)
	good := Config{Endpoints: []string{srv.Endpoint()}, LeaseTTL: ttl, ID: "a",
		TLS: TLSConfig{CAFile: p.CAFile, CertFile: p.ClientCertFile, KeyFile: p.ClientKeyFile}}
	e, err := New(good, "p1", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	l, err := e.Campaign(testCtx(t, 10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if l.Epoch() == 0 {
		t.Fatal("a leadership of epoch 0")
	}
	if err := l.Resign(testCtx(t, 5*time.Second)); err != nil {
		t.Fatal(err)
	}

	wrongCA, noCert := good, good
	wrongCA.TLS.CAFile = p.OtherCAFile
	noCert.TLS.CertFile, noCert.TLS.KeyFile = "", ""
	for _, c := range []struct {
		name string
		cfg  Config
		want []string
	}{
		{"wrong CA", wrongCA, []string{"certificate signed by unknown authority", "tls.ca_file"}},
		{"no client certificate", noCert, []string{"tls.cert_file"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			c.cfg.DialTimeout = 2 * time.Second
			e, err := New(c.cfg, "p1", nil)
			if err == nil {
				e.Close()
			}
			certs.Refused(t, err, nil, append(c.want, srv.Endpoint())...)
		})
	}
}
