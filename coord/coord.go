package coord

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/sluice-cdc/sluice/internal/backoff"
)

// Errors of the package.
var (
	// ErrLeadershipLost means a leadership ended, or may have, without
	// Resign: etcd went unheard, the session ended or the leader key
	// changed. Leadership.Err wraps it with the reason.
	ErrLeadershipLost = errors.New("coord: leadership lost")
	// ErrResigned means the leadership ended by Resign or Close.
	ErrResigned = errors.New("coord: resigned")
	// ErrClosed means the Etcd was closed.
	ErrClosed = errors.New("coord: closed")
)

// Etcd coordinates the replicas of one pipeline through etcd: which of
// them leads (Campaign) and who is there (Status).
type Etcd struct {
	cfg      Config
	pipeline string
	log      *slog.Logger
	client   *clientv3.Client

	mu struct {
		sync.Mutex
		closed  bool
		leading map[*Leadership]struct{}
	}
}

// candidate is the value of an election key.
type candidate struct {
	ID string `json:"id"`
	// Since is when the replica began to lead, or, while it waits, to
	// campaign.
	Since time.Time `json:"since"`
}

// New connects to etcd for the replicas of pipeline. It fails when no
// member answers within cfg.DialTimeout. log may be nil (no logs).
func New(cfg Config, pipeline string, log *slog.Logger) (*Etcd, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("coord: %w", err)
	}
	if pipeline == "" || strings.ContainsAny(pipeline, "/ \t\r\n") {
		return nil, fmt.Errorf("coord: pipeline name %q must be non-empty, without '/' or white space", pipeline)
	}
	cfg = cfg.withDefaults()
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	log = log.With("pipeline", pipeline, "replica", cfg.ID)
	tc, err := cfg.tlsConfig()
	if err != nil {
		return nil, fmt.Errorf("coord: %w", err)
	}
	if tc != nil {
		ctx, cancel := context.WithTimeout(context.Background(), cfg.DialTimeout)
		err := cfg.checkTLS(ctx, tc)
		cancel()
		if err != nil {
			return nil, fmt.Errorf("coord: connecting to %w", err)
		}
	}
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   cfg.Endpoints,
		DialTimeout: cfg.DialTimeout,
		// gRPC pings each connection that has streams open (the lease
		// keep-alives, the watch), so that a member that went silent is
		// dropped for another; 10s is the least gRPC allows.
		DialKeepAliveTime:    10 * time.Second,
		DialKeepAliveTimeout: 5 * time.Second,
		TLS:                  tc,
		Username:             cfg.Username,
		Password:             cfg.Password,
		Logger:               zapToSlog(log),
	})
	if err != nil {
		return nil, fmt.Errorf("coord: connecting to etcd %s: %w", strings.Join(cfg.Endpoints, ","), err)
	}
	e := &Etcd{cfg: cfg, pipeline: pipeline, log: log, client: cli}
	e.mu.leading = map[*Leadership]struct{}{}
	return e, nil
}

// ID is this replica's name.
func (e *Etcd) ID() string { return e.cfg.ID }

// LeaseTTL is the lease TTL asked of etcd.
func (e *Etcd) LeaseTTL() time.Duration { return e.cfg.LeaseTTL }

// ElectionPrefix is the key prefix under which the replicas campaign:
// PREFIX<pipeline>/leader. Each campaigner's key is that, a "/", and its
// lease ID in hexadecimal.
func (e *Etcd) ElectionPrefix() string { return e.cfg.Prefix + e.pipeline + "/leader" }

// CheckpointKey is the key of the pipeline's checkpoint:
// PREFIX<pipeline>/checkpoint.
func (e *Etcd) CheckpointKey() string { return e.cfg.Prefix + e.pipeline + "/checkpoint" }

// CheckpointStore is the pipeline's checkpoint store at CheckpointKey,
// fenced by l: its saves fail with checkpoint.ErrConflict once l is no
// longer the leadership in etcd. With a nil l the store is not fenced,
// for a command that reads the checkpoint or writes it while no replica
// runs.
func (e *Etcd) CheckpointStore(l *Leadership) *EtcdStore {
	return newEtcdStore(e.client, e.CheckpointKey(), l.guardFunc())
}

// SchemaStore is the schema history of a source, in etcd beside the
// checkpoint (under CheckpointKey()+"/schema/"+source+"/"), written only
// while l leads; with a nil l, not fenced (as CheckpointStore).
func (e *Etcd) SchemaStore(l *Leadership, source string) *EtcdSchemaStore {
	return newEtcdSchemaStore(e.client, e.CheckpointKey()+"/schema/"+source+"/", l.guardFunc())
}

// Close ends every leadership of e (as Resign does, within a bound) and
// closes the client.
func (e *Etcd) Close() error {
	e.mu.Lock()
	e.mu.closed = true
	var ls []*Leadership
	for l := range e.mu.leading {
		ls = append(ls, l)
	}
	e.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), e.cfg.DialTimeout)
	defer cancel()
	for _, l := range ls {
		l.Resign(ctx)
	}
	err := e.client.Close()
	for _, l := range ls {
		<-l.done
	}
	return err
}

// Campaign blocks until this replica leads the pipeline, and returns the
// leadership; or until ctx ends, leaving the election. Failures that
// campaigning again may cure (a session that ended because etcd was
// unreachable for the lease TTL, a failed request) are logged and the
// campaign starts over, after a pause that doubles from 1s up to the
// lease TTL; refused credentials or permissions, and Close, end it with
// an error. Once leading, watch Lost.
//
// Each campaign takes a new lease and puts a new key under
// ElectionPrefix: "/" and the lease in hexadecimal, holding
// {"id","since"}, bound to the lease. The replicas line up by the keys'
// CreateRevision and the first leads. This is etcd's
// concurrency.Election, with the same keys (etcdctl elect -l PREFIX shows
// the leader), done here so that leaving the line on cancellation is
// bounded in time even when etcd cannot be reached.
//
// The leader key's CreateRevision is the leadership's epoch: as every key
// is created after the keys before it and a replica leads only once all
// older keys are gone, successive leaders have strictly growing epochs.
func (e *Etcd) Campaign(ctx context.Context) (*Leadership, error) {
	e.log.Info("campaigning for leadership", "election", e.ElectionPrefix())
	bo := backoff.New(time.Second, e.cfg.LeaseTTL)
	for {
		l, err := e.campaign(ctx)
		if err == nil {
			return l, nil
		}
		if ctx.Err() != nil {
			return nil, fmt.Errorf("coord: campaigning for %s: %w", e.pipeline, ctx.Err())
		}
		if e.client.Ctx().Err() != nil {
			return nil, ErrClosed
		}
		if !retryable(err) {
			return nil, fmt.Errorf("coord: campaigning for %s: %w", e.pipeline, err)
		}
		wait := bo.Next()
		e.log.Warn("campaign failed; campaigning again", "err", err, "in", wait)
		_ = backoff.Sleep(ctx, wait) // a cancelled ctx ends the next campaign
	}
}

// retryable tells the errors that campaigning again may cure (a session
// that ended while etcd was unreachable, a failed request) from those it
// cannot (a closed Etcd, refused credentials or permissions).
func retryable(err error) bool {
	for _, fatal := range []error{
		ErrClosed,
		rpctypes.ErrPermissionDenied,
		rpctypes.ErrAuthFailed,
		rpctypes.ErrAuthNotEnabled,
		rpctypes.ErrUserEmpty,
		rpctypes.ErrUserNotFound,
		rpctypes.ErrRoleNotFound,
		rpctypes.ErrInvalidAuthMgmt,
		errLeaseInUse,
	} {
		if errors.Is(err, fatal) {
			return false
		}
	}
	return true
}

// errSessionEnded is a campaign that lost its lease before or as it won.
var errSessionEnded = errors.New("coord: session ended")

// errLeaseInUse is a campaign whose new lease already has an election key.
var errLeaseInUse = errors.New("coord: lease in use elsewhere")

func (e *Etcd) campaign(ctx context.Context) (*Leadership, error) {
	e.mu.Lock()
	closed := e.mu.closed
	e.mu.Unlock()
	if closed {
		return nil, ErrClosed
	}
	grant, err := e.client.Grant(ctx, int64(e.cfg.LeaseTTL/time.Second))
	if err != nil {
		return nil, fmt.Errorf("granting a lease: %w", err)
	}
	ttl := time.Duration(grant.TTL) * time.Second // etcd may grant more than asked
	// The session keeps the lease alive while we wait (every TTL/3, as
	// the etcd client does); once leading, Leadership adds its own
	// faster keep-alives to know when it may have lost.
	session, err := concurrency.NewSession(e.client, concurrency.WithLease(grant.ID), concurrency.WithTTL(int(grant.TTL)))
	if err != nil {
		e.revoke(grant.ID, ttl)
		return nil, fmt.Errorf("starting a session: %w", err)
	}
	// On failure: stop renewing and end the lease, which deletes our key.
	abandon := func() {
		session.Orphan()
		e.revoke(session.Lease(), ttl)
	}
	failed := func(err error) (*Leadership, error) {
		lost := sessionEnded(session)
		abandon()
		if ctx.Err() == nil && lost {
			return nil, fmt.Errorf("%w: %v", errSessionEnded, err)
		}
		return nil, err
	}

	// Stop waiting when the session ends: our key is gone with the lease.
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(session.Ctx(), cancel)()

	key := fmt.Sprintf("%s/%x", e.ElectionPrefix(), session.Lease())
	val, _ := json.Marshal(candidate{ID: e.cfg.ID, Since: time.Now().UTC()})
	resp, err := e.client.Txn(cctx).
		If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, string(val), clientv3.WithLease(session.Lease()))).
		Commit()
	if err != nil {
		return failed(fmt.Errorf("putting the election key %s: %w", key, err))
	}
	if !resp.Succeeded {
		abandon()
		return nil, fmt.Errorf("%w: election key %s exists already", errLeaseInUse, key)
	}
	rev := resp.Header.Revision
	if err := e.waitOlder(cctx, rev); err != nil {
		return failed(err)
	}

	// Leading, as far as the line goes. Fresh evidence that the lease
	// lives, taken now: the watchdog's clock starts at this send time.
	sent := time.Now()
	if _, err := e.client.KeepAliveOnce(cctx, session.Lease()); err != nil {
		abandon()
		if ctx.Err() != nil {
			return nil, err
		}
		return nil, fmt.Errorf("%w: renewing the lease on winning: %v", errSessionEnded, err)
	}
	// Announce the leadership, if the key is still ours (the lease may
	// have expired while we waited).
	since := time.Now().UTC()
	val, _ = json.Marshal(candidate{ID: e.cfg.ID, Since: since})
	resp, err = e.client.Txn(cctx).
		If(clientv3.Compare(clientv3.CreateRevision(key), "=", rev)).
		Then(clientv3.OpPut(key, string(val), clientv3.WithLease(session.Lease()))).
		Commit()
	if err == nil && !resp.Succeeded {
		err = fmt.Errorf("%w: election key %s went while waiting", errSessionEnded, key)
	}
	if err != nil {
		abandon()
		return nil, err
	}

	l := &Leadership{
		e:        e,
		session:  session,
		key:      key,
		epoch:    uint64(rev),
		since:    since,
		ttl:      ttl,
		lost:     make(chan struct{}),
		stop:     make(chan struct{}),
		done:     make(chan struct{}),
		watchRev: resp.Header.Revision + 1,
	}
	e.mu.Lock()
	if e.mu.closed {
		e.mu.Unlock()
		abandon()
		return nil, ErrClosed
	}
	e.mu.leading[l] = struct{}{}
	e.mu.Unlock()
	go l.run(sent)
	e.log.Info("leading", "epoch", l.epoch, "key", key, "lease_ttl", ttl)
	return l, nil
}

// waitOlder waits until no election key older than rev is left.
func (e *Etcd) waitOlder(ctx context.Context, rev int64) error {
	opts := append(clientv3.WithLastCreate(), clientv3.WithMaxCreateRev(rev-1))
	for {
		resp, err := e.client.Get(ctx, e.ElectionPrefix()+"/", opts...)
		if err != nil {
			return fmt.Errorf("reading the election: %w", err)
		}
		if len(resp.Kvs) == 0 {
			return nil
		}
		older := string(resp.Kvs[0].Key)
		if err := e.waitDeleted(ctx, older, resp.Header.Revision+1); err != nil {
			return err
		}
	}
}

// waitDeleted waits until key is deleted at or after revision rev.
func (e *Etcd) waitDeleted(ctx context.Context, key string, rev int64) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for wr := range e.client.Watch(ctx, key, clientv3.WithRev(rev), clientv3.WithFilterPut()) {
		if err := wr.Err(); err != nil {
			return fmt.Errorf("watching %s: %w", key, err)
		}
		if len(wr.Events) > 0 {
			return nil
		}
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return fmt.Errorf("watching %s: the watch ended", key)
}

func sessionEnded(s *concurrency.Session) bool {
	select {
	case <-s.Done():
		return true
	default:
		return false
	}
}

// revoke ends a lease and with it the keys it holds, within ttl (after
// which etcd has expired it anyway). Errors are of no use: the lease
// expires regardless.
func (e *Etcd) revoke(id clientv3.LeaseID, ttl time.Duration) {
	ctx, cancel := context.WithTimeout(e.client.Ctx(), ttl)
	defer cancel()
	e.client.Revoke(ctx, id)
}

func (e *Etcd) forget(l *Leadership) {
	e.mu.Lock()
	delete(e.mu.leading, l)
	e.mu.Unlock()
}

// Status is who campaigns for a pipeline, for `sluice status`.
type Status struct {
	Pipeline string `json:"pipeline"`
	// Leader is nil when no replica leads.
	Leader *Member `json:"leader"`
	// Followers wait in line, the next leader first.
	Followers []Member `json:"followers"`
}

// Member is one campaigning replica.
type Member struct {
	ID string `json:"id"`
	// Since is when the leader began to lead, or a follower to campaign.
	Since time.Time `json:"since"`
	// Epoch is the leader's epoch; a follower's is the one it will lead
	// with (its key's CreateRevision).
	Epoch uint64 `json:"epoch"`
	// Key is the member's election key; its last part is its lease.
	Key string `json:"key"`
}

// Status reads who leads the pipeline and who waits.
func (e *Etcd) Status(ctx context.Context) (Status, error) {
	st := Status{Pipeline: e.pipeline}
	resp, err := e.client.Get(ctx, e.ElectionPrefix()+"/", clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend))
	if err != nil {
		return st, fmt.Errorf("coord: reading the election of %s: %w", e.pipeline, err)
	}
	for i, kv := range resp.Kvs {
		var c candidate
		if err := json.Unmarshal(kv.Value, &c); err != nil {
			c.ID = string(kv.Value) // a campaigner that is not sluice's
		}
		m := Member{ID: c.ID, Since: c.Since, Epoch: uint64(kv.CreateRevision), Key: string(kv.Key)}
		if i == 0 {
			st.Leader = &m
		} else {
			st.Followers = append(st.Followers, m)
		}
	}
	return st, nil
}
