package kafka

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-cdc/sluice/internal/backoff"
	"github.com/sluice-cdc/sluice/position"
	"github.com/sluice-cdc/sluice/sink"
)

// Recovery reads with plain Fetch requests, at read_committed isolation,
// decoded by kgo.ProcessFetchPartition: unlike a consumer, that says
// exactly how far each read got (past transaction markers and aborted
// batches, which a consumer never returns), so a read ends exactly at the
// end offsets it set out to reach.
const (
	fetchMaxBytes     = 32 << 20
	fetchPartMaxBytes = 8 << 20
	// retryWait is the pause before asking again after a partition had no
	// leader, or moved.
	retryWait = 100 * time.Millisecond
)

// scanner reads what the cluster holds after the sink's offsets.
type scanner struct {
	s *Sink
	// pos is, per partition, the next offset to read (-1: the partition's
	// start). Partitions of topics the template matches are added as
	// they are found, from their start.
	pos      offsets
	rec      *sink.Recovery
	maxEpoch uint64
	// known holds every topic of the cluster, as last listed.
	known map[string]bool
	// gone holds saved topics found deleted (warned once).
	gone map[string]bool
	// saved is the checkpoint's offsets (Recover's offset), which prove a
	// hanging transaction committed (hanging.go).
	saved offsets
	// own, when set, is the sink's producer id and epoch: a partition
	// that holds an older epoch of it open is hanging (hanging.go).
	own *ownProducer
}

// scanPart is one partition to read.
type scanPart struct {
	tp       topicPartition
	id       [16]byte
	leader   int32
	pos, end int64
}

// run lists the topics to read and their end offsets (last stable
// offsets), then reads every partition up to its end.
func (sc *scanner) run(ctx context.Context) error {
	for i := 0; ; i++ {
		parts, again, err := sc.plan(ctx)
		if err != nil {
			return err
		}
		if again && i < 2 {
			continue // a hanging transaction was ended: list the ends again
		}
		return sc.read(ctx, parts)
	}
}

// plan returns the partitions with something to read; again tells that
// it ended a hanging transaction, so that the ends it listed are stale.
func (sc *scanner) plan(ctx context.Context) (parts []*scanPart, again bool, err error) {
	parts, stuck, err := sc.planParts(ctx)
	if err != nil || len(stuck) == 0 || sc.own == nil {
		return parts, false, err
	}
	again, err = sc.resolveHanging(ctx, stuck)
	return parts, again, err
}

// planParts returns the partitions with something to read, and those
// whose last stable offset is below their end (with both).
func (sc *scanner) planParts(ctx context.Context) ([]*scanPart, map[topicPartition][2]int64, error) {
	s := sc.s
	details, err := sc.listTopics(ctx)
	if err != nil {
		return nil, nil, err
	}
	sc.known = make(map[string]bool, len(details))
	saved := map[string]bool{}
	for tp := range sc.pos {
		saved[tp.topic] = true
	}
	var topics []string
	info := map[topicPartition]*scanPart{}
	for name, d := range details {
		if d.err != nil {
			if !saved[name] && errors.Is(d.err, kerr.UnknownTopicOrPartition) {
				continue // deleted while listed
			}
			return nil, nil, s.wrap("recovery: describing topic "+name, d.err)
		}
		sc.known[name] = true
		if d.internal || !saved[name] && !s.matches(name) {
			continue
		}
		topics = append(topics, name)
		for p, leader := range d.leaders {
			tp := topicPartition{name, p}
			if _, ok := sc.pos[tp]; !ok {
				sc.pos[tp] = -1
			}
			info[tp] = &scanPart{tp: tp, id: d.id, leader: leader}
		}
	}
	for name := range saved {
		if !sc.known[name] {
			if !sc.gone[name] {
				s.log.Warn("a topic of the checkpoint no longer exists: what it held after the checkpoint is lost to recovery", "topic", name)
				sc.gone[name] = true
			}
			for tp := range sc.pos {
				if tp.topic == name {
					delete(sc.pos, tp)
				}
			}
		}
	}
	if len(topics) == 0 {
		return nil, nil, nil
	}
	slices.Sort(topics)
	ends, err := sc.listOffsets(ctx, "last stable", s.adm.ListCommittedOffsets, topics)
	if err != nil {
		return nil, nil, err
	}
	starts, err := sc.listOffsets(ctx, "start", s.adm.ListStartOffsets, topics)
	if err != nil {
		return nil, nil, err
	}
	hwms, err := sc.listOffsets(ctx, "end", s.adm.ListEndOffsets, topics)
	if err != nil {
		return nil, nil, err
	}
	var parts []*scanPart
	stuck := map[topicPartition][2]int64{}
	for tp, pos := range sc.pos {
		sp := info[tp]
		if sp == nil {
			// A partition the checkpoint names but the topic lacks: the
			// topic was created again with fewer partitions.
			s.log.Warn("a partition of the checkpoint no longer exists", "topic", tp.topic, "partition", tp.part)
			delete(sc.pos, tp)
			continue
		}
		start, okS := starts.Lookup(tp.topic, tp.part)
		end, okE := ends.Lookup(tp.topic, tp.part)
		hwm, okH := hwms.Lookup(tp.topic, tp.part)
		if !okS || !okE || !okH {
			return nil, nil, fmt.Errorf("kafka: sink %s: recovery: the cluster listed no offsets for topic %s partition %d; try again", s.cfg.Name, tp.topic, tp.part)
		}
		switch {
		case pos < 0:
			pos = start.Offset
		case pos < start.Offset:
			s.log.Warn("records after the checkpoint were deleted (retention?) before recovery could read them; reading from the partition's start",
				"topic", tp.topic, "partition", tp.part, "offset", pos, "start", start.Offset)
			pos = start.Offset
		case pos > hwm.Offset:
			s.log.Warn("the checkpoint's offset is beyond the partition's end (was the topic deleted and created again?); reading it from its start",
				"topic", tp.topic, "partition", tp.part, "offset", pos, "end", hwm.Offset)
			pos = start.Offset
		}
		sc.pos[tp] = pos
		if end.Offset < hwm.Offset {
			stuck[tp] = [2]int64{end.Offset, hwm.Offset}
		}
		if pos < end.Offset {
			sp.pos, sp.end = pos, end.Offset
			parts = append(parts, sp)
		}
	}
	slices.SortFunc(parts, func(a, b *scanPart) int {
		if a.tp.topic != b.tp.topic {
			if a.tp.topic < b.tp.topic {
				return -1
			}
			return 1
		}
		return int(a.tp.part) - int(b.tp.part)
	})
	return parts, stuck, nil
}

func (sc *scanner) listTopics(ctx context.Context) (map[string]topicMeta, error) {
	details, err := sc.s.metadata(ctx)
	if err != nil {
		return nil, sc.s.wrap("recovery: listing the cluster's topics", err)
	}
	return details, nil
}

func (sc *scanner) listOffsets(ctx context.Context, what string, list func(context.Context, ...string) (kadm.ListedOffsets, error), topics []string) (kadm.ListedOffsets, error) {
	lctx, cancel := context.WithTimeout(ctx, sc.s.cfg.RequestTimeout)
	defer cancel()
	l, err := list(lctx, topics...)
	if err == nil {
		l.Each(func(o kadm.ListedOffset) {
			if err == nil && o.Err != nil && o.Partition >= 0 {
				err = fmt.Errorf("topic %s partition %d: %w", o.Topic, o.Partition, o.Err)
			}
		})
	}
	if err != nil {
		return nil, sc.s.wrap("recovery: listing the "+what+" offsets of the partitions to read", err)
	}
	return l, nil
}

// read fetches every partition from pos up to end, observing the records.
func (sc *scanner) read(ctx context.Context, parts []*scanPart) error {
	s := sc.s
	lastProgress := time.Now()
	for len(parts) > 0 {
		progress, refresh := false, false
		var byLeader = map[int32][]*scanPart{}
		var leaders []int32
		for _, p := range parts {
			if _, ok := byLeader[p.leader]; !ok {
				leaders = append(leaders, p.leader)
			}
			byLeader[p.leader] = append(byLeader[p.leader], p)
		}
		slices.Sort(leaders)
		var lastErr error
		for _, leader := range leaders {
			ps := byLeader[leader]
			if leader < 0 {
				refresh = true
				lastErr = fmt.Errorf("topic %s partition %d has no leader", ps[0].tp.topic, ps[0].tp.part)
				continue
			}
			moved, err := sc.fetch(ctx, leader, ps)
			if err != nil {
				if ctx.Err() != nil {
					return fmt.Errorf("kafka: sink %s: recovery: %w", s.cfg.Name, ctx.Err())
				}
				var fatal *fatalScanError
				if errors.As(err, &fatal) {
					return fatal.err
				}
				refresh, lastErr = true, err
				continue
			}
			if moved {
				progress = true
			}
		}
		parts = slices.DeleteFunc(parts, func(p *scanPart) bool {
			if p.pos > sc.pos[p.tp] {
				sc.pos[p.tp] = p.pos
			}
			return p.pos >= p.end
		})
		if progress {
			lastProgress = time.Now()
		} else if time.Since(lastProgress) > s.cfg.RequestTimeout {
			p := parts[0]
			if lastErr == nil {
				lastErr = errors.New("the broker returns nothing")
			}
			return s.wrap(fmt.Sprintf("recovery: reading topic %s partition %d at offset %d (up to %d) made no progress for %s", p.tp.topic, p.tp.part, p.pos, p.end, s.cfg.RequestTimeout), lastErr)
		}
		if refresh && len(parts) > 0 {
			if err := backoff.Sleep(ctx, retryWait); err != nil {
				return fmt.Errorf("kafka: sink %s: recovery: %w", s.cfg.Name, err)
			}
			if err := sc.refreshLeaders(ctx, parts); err != nil {
				return err
			}
		}
	}
	return nil
}

// fatalScanError ends a recovery read at once.
type fatalScanError struct{ err error }

func (e *fatalScanError) Error() string { return e.err.Error() }

// fetch reads once from one leader; moved tells whether any partition got
// further. A retryable error asks the caller to look the leaders up again.
func (sc *scanner) fetch(ctx context.Context, leader int32, ps []*scanPart) (moved bool, err error) {
	s := sc.s
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID = -1
	req.MaxWaitMillis = 0
	req.MinBytes = 0
	req.MaxBytes = fetchMaxBytes
	req.IsolationLevel = 1 // read_committed
	req.SessionID = 0
	req.SessionEpoch = -1 // no fetch session
	byName := map[string]int{}
	want := map[topicPartition]*scanPart{}
	byID := map[[16]byte]string{}
	for _, p := range ps {
		want[p.tp] = p
		ti, ok := byName[p.tp.topic]
		if !ok {
			rt := kmsg.NewFetchRequestTopic()
			rt.Topic, rt.TopicID = p.tp.topic, p.id
			ti = len(req.Topics)
			req.Topics = append(req.Topics, rt)
			byID[p.id] = p.tp.topic
			byName[p.tp.topic] = ti
		}
		rt := &req.Topics[ti]
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition = p.tp.part
		rp.FetchOffset = p.pos
		rp.CurrentLeaderEpoch = -1
		rp.LastFetchedEpoch = -1
		rp.LogStartOffset = -1
		rp.PartitionMaxBytes = fetchPartMaxBytes
		rt.Partitions = append(rt.Partitions, rp)
	}
	fctx, cancel := context.WithTimeout(ctx, s.cfg.RequestTimeout)
	defer cancel()
	kresp, err := s.meta.Broker(int(leader)).Request(fctx, req)
	if err != nil {
		return false, fmt.Errorf("fetching from broker %d: %w", leader, err)
	}
	resp := kresp.(*kmsg.FetchResponse)
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return false, fmt.Errorf("fetching from broker %d: %w", leader, err)
	}
	var retry error
	for i := range resp.Topics {
		rt := &resp.Topics[i]
		topic := rt.Topic
		if topic == "" {
			topic = byID[rt.TopicID]
		}
		for j := range rt.Partitions {
			rp := &rt.Partitions[j]
			p := want[topicPartition{topic, rp.Partition}]
			if p == nil {
				continue
			}
			if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
				if errors.Is(err, kerr.OffsetOutOfRange) {
					// Deleted by retention (or truncated) since the plan:
					// read on from the start, as plan would have.
					s.log.Warn("records to read were deleted (retention?) during recovery; reading on from the partition's start",
						"topic", topic, "partition", rp.Partition, "offset", p.pos, "start", rp.LogStartOffset)
					if rp.LogStartOffset > p.pos {
						p.pos = rp.LogStartOffset
						moved = true
						continue
					}
				}
				if kerr.IsRetriable(err) || errors.Is(err, kerr.OffsetOutOfRange) || errors.Is(err, kerr.UnknownTopicID) {
					retry = fmt.Errorf("topic %s partition %d: %w", topic, rp.Partition, err)
					continue
				}
				return false, &fatalScanError{s.wrap(fmt.Sprintf("recovery: reading topic %s partition %d at offset %d", topic, rp.Partition, p.pos), err)}
			}
			fp, next := kgo.ProcessFetchPartition(kgo.ProcessFetchPartitionOpts{
				Offset:         p.pos,
				IsolationLevel: kgo.ReadCommitted(),
				Topic:          topic,
				Partition:      rp.Partition,
			}, rp, kgo.DefaultDecompressor(), nil)
			if fp.Err != nil {
				return false, &fatalScanError{fmt.Errorf("kafka: sink %s: recovery: decoding topic %s partition %d at offset %d: %w", s.cfg.Name, topic, rp.Partition, p.pos, fp.Err)}
			}
			for _, r := range fp.Records {
				if err := sc.observe(r); err != nil {
					return false, &fatalScanError{err}
				}
			}
			if next > p.pos {
				p.pos = next
				moved = true
			}
		}
	}
	if retry != nil && !moved {
		return false, retry
	}
	return moved, nil
}

// refreshLeaders looks the partitions' leaders up again.
func (sc *scanner) refreshLeaders(ctx context.Context, parts []*scanPart) error {
	details, err := sc.listTopics(ctx)
	if err != nil {
		return err
	}
	for _, p := range parts {
		d, ok := details[p.tp.topic]
		if !ok {
			return fmt.Errorf("kafka: sink %s: recovery: topic %s was deleted while recovery read it", sc.s.cfg.Name, p.tp.topic)
		}
		if leader, ok := d.leaders[p.tp.part]; ok {
			p.leader, p.id = leader, d.id
		}
	}
	return nil
}

// observe reports one record to the recovery if this pipeline wrote it.
func (sc *scanner) observe(r *kgo.Record) error {
	var seqV, epochV, srcV, endV, pipeV []byte
	hasSeq, snap := false, false
	for _, h := range r.Headers {
		switch h.Key {
		case sink.HeaderSeq:
			seqV, hasSeq = h.Value, true
		case sink.HeaderEpoch:
			epochV = h.Value
		case sink.HeaderSource:
			srcV = h.Value
		case sink.HeaderEnd:
			endV = h.Value
		case HeaderPipeline:
			pipeV = h.Value
		case HeaderSnapshot:
			snap = true
		}
	}
	if !hasSeq || string(pipeV) != sc.s.pipeline {
		return nil // not a record of this pipeline
	}
	where := func() string {
		return fmt.Sprintf("kafka: sink %s: recovery: topic %s partition %d offset %d", sc.s.cfg.Name, r.Topic, r.Partition, r.Offset)
	}
	seq, err := strconv.ParseUint(string(seqV), 10, 64)
	if err != nil {
		return fmt.Errorf("%s: bad %s header %q", where(), sink.HeaderSeq, seqV)
	}
	epoch, err := strconv.ParseUint(string(epochV), 10, 64)
	if err != nil {
		return fmt.Errorf("%s: bad %s header %q", where(), sink.HeaderEpoch, epochV)
	}
	var end *position.Position
	if endV != nil {
		if end, err = sink.ParseEnd(endV); err != nil {
			return fmt.Errorf("%s: %w", where(), err)
		}
	}
	// A tombstone (null value) repeats its delete's seq without the end:
	// observed again, it changes nothing.
	sc.rec.Observe(seq, string(srcV), end, snap || sink.SnapshotRow(r.Value))
	sc.maxEpoch = max(sc.maxEpoch, epoch)
	return nil
}
