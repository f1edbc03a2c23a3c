package coord

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
)

// Leadership is this replica's turn as the pipeline's leader, from
// Campaign until Lost closes.
//
// # When a leader must stop
//
// etcd ends a leadership by expiring its lease: the lease's TTL T after
// the last keep-alive etcd received (a renewal resets the lease to expire
// T from when the leader member applies it; etcd never expires it
// earlier, and only later after a change of etcd leader). Only then is
// the leader key deleted and can another replica lead. The old leader
// cannot hear of this if it is cut off, so it must stop on its own first,
// from what it last heard:
//
//   - It sends a keep-alive (KeepAliveOnce) every T/6, each bounded by
//     T/3, beside the etcd session's own every T/3.
//   - It records the send time s of the last keep-alive that etcd
//     answered. etcd renewed the lease after s, so the lease lives at
//     least until s+T.
//   - A timer fires at s + 2T/3, unless a newer answer moved s on. It
//     closes Lost. Leading started with such a keep-alive, so s is
//     always defined.
//
// So Lost closes at the latest 2T/3 after the last moment etcd is known to
// have heard from the leader, and at least T/3 before etcd can expire the
// lease and elect another leader: the leader has T/3 (3.3s at the
// default 10s TTL) to stop writing to its sinks. While etcd answers,
// s is never older than T/6 plus one round trip, so a single lost or slow
// keep-alive does not end a leadership; about three in a row do. Clocks
// do not need to agree: only durations are measured, each on one machine.
//
// Lost also closes when the session's lease is gone (etcd answered that it
// expired, or the etcd client gave up renewing it), when the leader key
// is deleted or changed by anyone else (watched from the moment of
// leading), when that watch fails, and on Resign. Once Lost is closed the
// leadership is over for good: the lease is revoked (best effort, bounded
// by T) so that another replica can lead without waiting for it to
// expire. To lead again, Campaign again.
//
// Lost bounds how long a cut-off leader goes on; it cannot make writes
// that are already in flight stop. What fences those is the epoch: a
// checkpoint save guarded by Guard fails once a new leader exists, and
// sinks can refuse writes stamped with an older epoch.
type Leadership struct {
	e        *Etcd
	session  *concurrency.Session
	key      string
	epoch    uint64
	since    time.Time
	ttl      time.Duration
	watchRev int64

	lost     chan struct{} // closed by run on loss or resignation
	stop     chan struct{} // closed by Resign
	stopOnce sync.Once
	done     chan struct{} // closed when run has ended, the lease revoked or given up
	// revokeErr is run's last word, read after done.
	revokeErr error

	mu struct {
		sync.Mutex
		err error
	}
}

// Epoch is the leader key's CreateRevision: it grows with each new
// leadership of the pipeline, whoever holds it.
func (l *Leadership) Epoch() uint64 { return l.epoch }

// Key is the leader key in etcd.
func (l *Leadership) Key() string { return l.key }

// Since is when this leadership began.
func (l *Leadership) Since() time.Time { return l.since }

// Lost is closed when the leadership is over, or may be: stop writing.
func (l *Leadership) Lost() <-chan struct{} { return l.lost }

// Err is nil while leading; after Lost closes, ErrResigned or an error
// wrapping ErrLeadershipLost that says why.
func (l *Leadership) Err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.mu.err
}

// guard is the comparison that holds while this leadership does: the
// leader key exists with this epoch as its CreateRevision. The stores put
// it in the transactions that only the leader may commit.
func (l *Leadership) guard() clientv3.Cmp {
	return clientv3.Compare(clientv3.CreateRevision(l.key), "=", int64(l.epoch))
}

// guardFunc is l.guard, or nil (no fence) for a nil l.
func (l *Leadership) guardFunc() func() clientv3.Cmp {
	if l == nil {
		return nil
	}
	return l.guard
}

// Resign ends the leadership: Lost closes, and the lease is revoked so
// that another replica may lead at once. It returns when the lease is
// revoked, or with ctx's error if ctx ends first (the revocation goes on,
// bounded by the lease TTL). After the leadership was lost, it returns
// what became of the revocation then; an error means the lease could not
// be revoked and ends by expiring. Calling it again does no harm.
func (l *Leadership) Resign(ctx context.Context) error {
	l.stopOnce.Do(func() { close(l.stop) })
	select {
	case <-l.done:
		return l.revokeErr
	case <-ctx.Done():
		return fmt.Errorf("coord: resigning %s: %w", l.key, ctx.Err())
	}
}

// ack is the outcome of one keep-alive sent at sent.
type ack struct {
	sent time.Time
	err  error
}

// run owns the leadership until it ends: it watches the keep-alives, the
// session and the leader key, closes Lost, then gives the lease up.
// renewed is the send time of a keep-alive etcd answered.
func (l *Leadership) run(renewed time.Time) {
	defer close(l.done)
	defer l.e.forget(l)
	ctx, cancel := context.WithCancel(l.e.client.Ctx())
	defer cancel()

	acks := make(chan ack)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		l.keepAlive(ctx, acks)
	}()
	// WithRequireLeader: a member cut off from its cluster's majority
	// cancels the watch rather than keep silent.
	wch := l.e.client.Watch(clientv3.WithRequireLeader(ctx), l.key, clientv3.WithRev(l.watchRev))

	limit := l.ttl * 2 / 3
	timer := time.NewTimer(time.Until(renewed.Add(limit)))
	defer timer.Stop()
	var cause error
	for cause == nil {
		select {
		case <-l.stop:
			cause = ErrResigned
		case <-l.session.Done():
			cause = fmt.Errorf("%w: the session's lease is no longer renewed", ErrLeadershipLost)
		case <-timer.C:
			cause = fmt.Errorf("%w: etcd unheard for %s, 2/3 of the lease TTL (last renewal sent %s ago)", ErrLeadershipLost, limit, time.Since(renewed).Round(time.Millisecond))
		case a := <-acks:
			switch {
			case errors.Is(a.err, rpctypes.ErrLeaseNotFound):
				cause = fmt.Errorf("%w: the lease expired", ErrLeadershipLost)
			case a.err != nil:
				l.e.log.Debug("lease keep-alive failed", "err", a.err, "unheard_for", time.Since(renewed))
			case a.sent.After(renewed):
				renewed = a.sent
				timer.Reset(time.Until(renewed.Add(limit)))
			}
		case wr, ok := <-wch:
			cause = l.keyChange(wr, ok)
		}
	}

	l.mu.Lock()
	l.mu.err = cause
	l.mu.Unlock()
	close(l.lost)
	if errors.Is(cause, ErrResigned) {
		l.e.log.Info("resigned leadership", "epoch", l.epoch)
	} else {
		l.e.log.Warn("leadership lost", "epoch", l.epoch, "err", cause)
	}

	cancel()
	wg.Wait()
	// Stop renewing and revoke, which deletes the leader key: the next
	// replica need not wait for the lease to expire. Bounded by the TTL,
	// after which it has expired anyway.
	l.session.Orphan()
	rctx, rcancel := context.WithTimeout(l.e.client.Ctx(), l.ttl)
	_, err := l.e.client.Revoke(rctx, l.session.Lease())
	rcancel()
	if err != nil && !errors.Is(err, rpctypes.ErrLeaseNotFound) {
		l.revokeErr = fmt.Errorf("coord: revoking the lease of %s (it expires within %s): %w", l.key, l.ttl, err)
	}
}

// keyChange says why a watch response on the leader key ends the
// leadership; nil for a response that does not (a progress report).
func (l *Leadership) keyChange(wr clientv3.WatchResponse, ok bool) error {
	if !ok {
		return fmt.Errorf("%w: the watch on the leader key %s ended", ErrLeadershipLost, l.key)
	}
	if err := wr.Err(); err != nil {
		return fmt.Errorf("%w: watching the leader key %s: %v", ErrLeadershipLost, l.key, err)
	}
	if len(wr.Events) == 0 {
		return nil
	}
	// The first event says how the key changed; any change ends it.
	ev := wr.Events[0]
	if ev.Type == mvccpb.DELETE {
		return fmt.Errorf("%w: the leader key %s was deleted at revision %d", ErrLeadershipLost, l.key, ev.Kv.ModRevision)
	}
	return fmt.Errorf("%w: the leader key %s was changed at revision %d", ErrLeadershipLost, l.key, ev.Kv.ModRevision)
}

// keepAlive renews the lease every TTL/6 and reports each outcome, until
// ctx ends.
func (l *Leadership) keepAlive(ctx context.Context, acks chan<- ack) {
	interval, timeout := l.ttl/6, l.ttl/3
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-t.C:
		case <-ctx.Done():
			return
		}
		sent := time.Now()
		rctx, cancel := context.WithTimeout(ctx, timeout)
		_, err := l.e.client.KeepAliveOnce(rctx, l.session.Lease())
		cancel()
		select {
		case acks <- ack{sent: sent, err: err}:
		case <-ctx.Done():
			return
		}
		t.Reset(time.Until(sent.Add(interval)))
	}
}
