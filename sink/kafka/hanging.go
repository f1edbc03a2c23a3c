package kafka

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-cdc/sluice/sink"
)

// ErrHangingTransaction is wrapped by Recover's error when a partition
// holds an open transaction of the sink's own transactional id that the
// transaction coordinator no longer knows of, and recovery cannot prove
// how the coordinator ended it. The error wraps sink.ErrPermanent too: an
// operator must end the transaction (the error says how), and the
// pipeline stops rather than retry.
var ErrHangingTransaction = errors.New("kafka: hanging transaction")

// A hanging transaction.
//
// Apache Kafka (seen with 4.4.0) drops a transaction's markers for every
// partition that has no leader when its coordinator sends them:
// TransactionMarkerChannelManager skips such partitions as "likely
// deleted" and completes the transaction without them. That happens to a
// commit while every replica of a partition is down (the commit returns
// success; TestCluster/LeaderlessAtCommit), and after a broker that is
// the coordinator and the partitions' leader is killed between
// PrepareCommit and the markers: its coordinator loads the transaction
// log while the partitions have no leader yet (TestKillBeforeMarkers). The
// coordinator then holds the transactional id as CompleteCommit at the
// bumped epoch with no partition, while the partitions still hold the
// transaction open (DescribeProducers: the old epoch, a current
// transaction start offset, coordinator epoch -1: no marker ever came).
// Nothing ends it: the coordinator thinks it is done, its timeouts are
// for what it holds open, and a new producer's InitProducerId aborts
// only that. Its records, and every record after them in the partition,
// are invisible to read_committed consumers and to recovery. (A later
// transaction of the same producer id that writes the partition folds the
// old records into its own and commits them with it, whatever the
// coordinator had decided.)
//
// Recovery therefore looks, in both reads, at every partition whose last
// stable offset is below its end: an open transaction there of the
// sink's own producer id at an older epoch, while the coordinator holds
// none open, is hanging. It ends it the way the coordinator did when it
// can prove that way (scanner.outcome; both proofs need transaction
// version 2, one transaction per epoch, which the producer uses when the
// cluster has it on) by writing the same marker (WriteTxnMarkers, as the
// coordinator would have; it needs CLUSTER_ACTION on the cluster where
// ACLs are on), and reads on. Otherwise it stops with
// ErrHangingTransaction, naming the partition and the fix. The first
// read runs before recovery's producer starts: the coordinator's state it
// reads then is a proof that the producer's start (an epoch bump) would
// erase, and an error there leaves it for the next attempt.

// coordState is what the transaction coordinator said of the sink's
// transactional id before recovery's producer started.
type coordState struct {
	known bool // the coordinator answered
	state string
	pid   int64
	epoch int16
}

// describeTxn asks the coordinator about the sink's transactional id. A
// failure is not an error of recovery: it only takes away the proof that
// ends a hanging transaction.
func (s *Sink) describeTxn(ctx context.Context) coordState {
	dctx, cancel := context.WithTimeout(ctx, s.cfg.RequestTimeout)
	defer cancel()
	ds, err := s.adm.DescribeTransactions(dctx, s.cfg.TransactionalID)
	if err != nil {
		s.log.Debug("describing the transactional id", "transactional_id", s.cfg.TransactionalID, "err", err)
		return coordState{}
	}
	d, err := ds.On(s.cfg.TransactionalID, nil)
	if err != nil || d.Err != nil {
		return coordState{}
	}
	return coordState{known: true, state: d.State, pid: d.ProducerID, epoch: d.ProducerEpoch}
}

// ownProducer is recovery's producer, once started, and what the
// coordinator said before it started.
type ownProducer struct {
	pid   int64
	epoch int16
	pre   coordState
}

// hangingTxn is an open transaction of the sink's producer id in a
// partition that the coordinator does not hold open.
type hangingTxn struct {
	tp         topicPartition
	leader     int32
	pid        int64
	epoch      int16
	coordEpoch int32
	start      int64 // its first offset, the partition's last stable offset
	end        int64 // the partition's end offset
}

// resolveHanging looks at the partitions whose last stable offset is
// below their end (stuck: partition -> last stable and end offsets) for
// open transactions of the sink's own producer id, and ends those it can
// prove the outcome of. It reports whether it wrote a marker (the caller
// lists the offsets again), or an error wrapping ErrHangingTransaction.
func (sc *scanner) resolveHanging(ctx context.Context, stuck map[topicPartition][2]int64) (bool, error) {
	s, own := sc.s, sc.own
	set := kadm.TopicsSet{}
	for tp := range stuck {
		set.Add(tp.topic, tp.part)
	}
	dctx, cancel := context.WithTimeout(ctx, s.cfg.RequestTimeout)
	defer cancel()
	described, err := s.adm.DescribeProducers(dctx, set)
	if err != nil {
		// Only a check: an old cluster or missing rights leave the
		// partition as before (read up to its last stable offset).
		s.log.Warn("recovery: could not describe the producers of partitions whose last stable offset is below their end", "err", err)
		return false, nil
	}
	var hanging []hangingTxn
	for _, p := range described.SortedPartitions() {
		if p.Err != nil {
			s.log.Warn("recovery: could not describe the producers of a partition whose last stable offset is below its end", "topic", p.Topic, "partition", p.Partition, "err", p.Err)
			continue
		}
		tp := topicPartition{p.Topic, p.Partition}
		for _, pr := range p.ActiveProducers.Sorted() {
			if pr.ProducerID != own.pid || pr.CurrentTxnStartOffset < 0 || pr.ProducerEpoch >= own.epoch {
				continue
			}
			hanging = append(hanging, hangingTxn{tp: tp, leader: p.Leader, pid: pr.ProducerID, epoch: pr.ProducerEpoch,
				coordEpoch: pr.CoordinatorEpoch, start: pr.CurrentTxnStartOffset, end: stuck[tp][1]})
		}
	}
	if len(hanging) == 0 {
		return false, nil
	}
	// Both proofs rest on transaction version 2 (one transaction per
	// epoch), which the producer uses when the cluster has it on.
	tv2 := s.txnVersion2(ctx, hanging[0].leader)
	wrote := false
	var unproven []hangingTxn
	for _, h := range hanging {
		commit, proof := sc.outcome(h)
		if !tv2 {
			proof = ""
		}
		if proof == "" {
			unproven = append(unproven, h)
			continue
		}
		if err := s.writeMarker(ctx, h, commit); err != nil {
			return false, sc.hangingErr(h, nil, err)
		}
		what := "aborted"
		if commit {
			what = "committed"
		}
		s.log.Warn("recovery: ended a hanging transaction of the sink's transactional id (a broker lost its markers) as the transaction coordinator had: "+what,
			"topic", h.tp.topic, "partition", h.tp.part, "producer_id", h.pid, "producer_epoch", h.epoch, "start_offset", h.start, "proof", proof)
		wrote = true
	}
	if len(unproven) > 0 {
		return false, sc.hangingErr(unproven[0], unproven[1:], nil)
	}
	return wrote, nil
}

// outcome says how the coordinator ended a hanging transaction, and the
// proof ("" when there is none):
//
//   - the checkpoint's offset of the partition is past the transaction's
//     start: the offset a Write returns is past its records and only a
//     Write whose commit the coordinator accepted returns one; a record of
//     that Write at or after the start is of the open transaction (the
//     partition's producer state names its epoch as the last this
//     producer id wrote there, and with transaction version 2 each epoch
//     is one transaction), so the coordinator committed it;
//   - the coordinator's own state, read before recovery's producer
//     started (coordState.outcome).
//
// Should the two disagree (which Kafka's protocol rules out), nothing is
// proven.
func (sc *scanner) outcome(h hangingTxn) (commit bool, proof string) {
	coordCommit, coordKnows := sc.own.pre.outcome(h.pid, h.epoch)
	if off, ok := sc.saved[h.tp]; ok && off > h.start {
		if coordKnows && !coordCommit {
			return false, ""
		}
		return true, fmt.Sprintf("the checkpoint is at offset %d, after the transaction's start: a Write of it returned, so it was committed", off)
	}
	if coordKnows {
		return coordCommit, fmt.Sprintf("the coordinator held the transactional id as %s at epoch %d before this producer started", sc.own.pre.state, sc.own.pre.epoch)
	}
	return false, ""
}

// outcome says how the coordinator ended the transaction of producer id
// pid at epoch, if its state proves it: with transaction version 2 a
// transaction of epoch e ends (commit, abort, a fencing abort, a timeout)
// in CompleteCommit or CompleteAbort at epoch e+1, and the next
// transaction writes at e+1, so that state at e+1 is the end of that
// transaction and of no other.
func (c coordState) outcome(pid int64, epoch int16) (commit, proven bool) {
	if !c.known || c.pid != pid || c.epoch != epoch+1 {
		return false, false
	}
	switch c.state {
	case "CompleteCommit":
		return true, true
	case "CompleteAbort":
		return false, true
	}
	return false, false
}

// txnVersion2 reports whether the cluster's finalized transaction.version
// feature, as broker id says, is 2 or more (KIP-890 part 2, which the
// producer then uses: the epoch moves on at the end of every
// transaction).
func (s *Sink) txnVersion2(ctx context.Context, id int32) bool {
	actx, cancel := context.WithTimeout(ctx, s.cfg.RequestTimeout)
	defer cancel()
	req := kmsg.NewPtrApiVersionsRequest()
	req.ClientSoftwareName, req.ClientSoftwareVersion = "sluice", "1"
	kresp, err := s.meta.Broker(int(id)).Request(actx, req)
	if err != nil {
		s.log.Warn("recovery: could not ask a broker for its transaction version", "broker", id, "err", err)
		return false
	}
	for _, f := range kresp.(*kmsg.ApiVersionsResponse).FinalizedFeatures {
		if f.Name == "transaction.version" {
			return f.MaxVersionLevel >= 2
		}
	}
	return false
}

// writeMarker writes a transaction marker, commit or abort, for the
// hanging transaction to its partition's leader: the marker the
// coordinator would have written (transaction version 2: the epoch after
// the transaction's).
func (s *Sink) writeMarker(ctx context.Context, h hangingTxn, commit bool) error {
	req := kmsg.NewPtrWriteTxnMarkersRequest()
	m := kmsg.NewWriteTxnMarkersRequestMarker()
	m.ProducerID = h.pid
	m.ProducerEpoch = h.epoch + 1
	m.Committed = commit
	m.CoordinatorEpoch = max(h.coordEpoch, 0)
	m.TransactionVersion = 2
	rt := kmsg.NewWriteTxnMarkersRequestMarkerTopic()
	rt.Topic = h.tp.topic
	rt.Partitions = []int32{h.tp.part}
	m.Topics = append(m.Topics, rt)
	req.Markers = append(req.Markers, m)
	wctx, cancel := context.WithTimeout(ctx, s.cfg.RequestTimeout)
	defer cancel()
	kresp, err := s.meta.Broker(int(h.leader)).Request(wctx, req)
	if err != nil {
		return fmt.Errorf("writing the marker to broker %d: %w", h.leader, err)
	}
	resp := kresp.(*kmsg.WriteTxnMarkersResponse)
	for _, rm := range resp.Markers {
		for _, t := range rm.Topics {
			for _, p := range t.Partitions {
				if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
					return fmt.Errorf("writing the marker to broker %d: %w", h.leader, err)
				}
			}
		}
	}
	return nil
}

// hangingErr explains a hanging transaction that recovery did not end,
// and names the others (cause: why writing the marker failed, or nil
// when the outcome is unknown).
func (sc *scanner) hangingErr(h hangingTxn, others []hangingTxn, cause error) error {
	s, pre := sc.s, sc.own.pre
	coord := "did not say what it holds for the transactional id"
	if pre.known {
		coord = fmt.Sprintf("held the transactional id as %s, producer id %d, epoch %d", pre.state, pre.pid, pre.epoch)
	}
	why := "which does not tell how the coordinator ended it, and the checkpoint is not past its start"
	if _, proof := sc.outcome(h); proof != "" && cause == nil {
		why = "but the cluster's transaction.version is below 2, where an epoch spans several transactions and neither the coordinator's state nor the checkpoint proves how it ended"
	}
	if cause != nil {
		commit, proof := sc.outcome(h)
		why = fmt.Sprintf("so it was %s (%s), but writing that marker failed (%v; it needs CLUSTER_ACTION on the cluster where ACLs are on)",
			map[bool]string{true: "committed", false: "aborted"}[commit], proof, cause)
	}
	bootstrap := strings.Join(s.cfg.Brokers, ",")
	also := ""
	if len(others) > 0 {
		var l []string
		for _, o := range others {
			l = append(l, fmt.Sprintf("topic %s partition %d from offset %d", o.tp.topic, o.tp.part, o.start))
		}
		also = " The same holds for " + strings.Join(l, ", ") + ": abort each the same way."
	}
	return fmt.Errorf("kafka: sink %s: recovery: topic %s partition %d holds a transaction of the sink's transactional id %q (producer id %d, epoch %d) open from offset %d (end %d) that the transaction coordinator no longer holds open: "+
		"a broker lost its commit or abort markers (Kafka skips the markers of partitions that have no leader when the coordinator sends them: during a broker's restart after a crash, or while all the partition's replicas were down). Until it ends, read_committed consumers and recovery see nothing of the partition from offset %d. "+
		"Before this producer started the coordinator %s, %s. "+
		"Fix: look at it with kafka-transactions.sh --bootstrap-server %s find-hanging --broker-id %d --max-transaction-timeout 0; "+
		"abort it with kafka-transactions.sh --bootstrap-server %s abort --topic %s --partition %d --start-offset %d and start sluice again: "+
		"sluice then writes again what it does not find after the checkpoint, which is exactly once unless another partition holds a committed part of that transaction with a later seq (then those seqs are missing from this partition: compare the topic with the source).%s: %w: %w",
		s.cfg.Name, h.tp.topic, h.tp.part, s.cfg.TransactionalID, h.pid, h.epoch, h.start, h.end, h.start,
		coord, why,
		bootstrap, h.leader,
		bootstrap, h.tp.topic, h.tp.part, h.start,
		also, ErrHangingTransaction, sink.ErrPermanent)
}

// txnInFlight reports whether a coordinator state is that of a
// transaction the coordinator itself will end (or is ending).
func txnInFlight(state string) bool {
	switch state {
	case "Ongoing", "PrepareCommit", "PrepareAbort", "PrepareEpochFence":
		return true
	}
	return false
}
