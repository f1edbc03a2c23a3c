// Package kafkatest reads Kafka topics in tests the way a read_committed
// consumer would, to their end: one reader for every test that checks what
// a sink left in Kafka.
package kafkatest

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// ReadAll returns every committed record of the topics, in topic,
// partition and offset order, read by a read_committed consumer up to
// each partition's last stable offset when the call began.
//
// It knows it has read a partition to that end by the control records
// (commit and abort markers), which it asks for and then drops: a
// transaction's records are followed by its marker, so the last offset
// before the end is always returned, whether the transaction committed or
// not. Waiting for a quiet period instead returns too early on a slow
// machine, where the first fetch can take longer than the quiet period.
// ctx bounds the read.
//
// A real broker answers a transaction's commit (EndTxn) before it has
// written the commit markers into the partitions, so the last stable
// offset can lag a commit that has returned by some milliseconds: ReadAll
// first waits, for up to settle, until no partition has a transaction
// open (its last stable offset is its end offset), then reads to the last
// stable offsets, whatever they are by then.
func ReadAll(ctx context.Context, brokers []string, topics ...string) ([]*kgo.Record, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.KeepControlRecords())
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	ends, err := stableEnds(ctx, kadm.NewClient(cl), topics)
	if err != nil {
		return nil, err
	}
	type tp struct {
		topic string
		part  int32
	}
	left := map[tp]int64{} // partitions not read to their end yet
	want := map[string]map[int32]kgo.Offset{}
	ends.Each(func(o kadm.ListedOffset) {
		if o.Offset <= 0 {
			return
		}
		left[tp{o.Topic, o.Partition}] = o.Offset
		if want[o.Topic] == nil {
			want[o.Topic] = map[int32]kgo.Offset{}
		}
		want[o.Topic][o.Partition] = kgo.NewOffset().AtStart()
	})
	cl.AddConsumePartitions(want)
	var out []*kgo.Record
	for len(left) > 0 {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return nil, fmt.Errorf("reading %s: %d partitions not read to their end: %w", strings.Join(topics, ", "), len(left), ctx.Err())
		}
		var ferr error
		fs.EachError(func(topic string, part int32, err error) {
			ferr = fmt.Errorf("reading %s/%d: %w", topic, part, err)
		})
		if ferr != nil {
			return nil, ferr
		}
		fs.EachRecord(func(r *kgo.Record) {
			k := tp{r.Topic, r.Partition}
			if end, ok := left[k]; ok && r.Offset+1 >= end {
				delete(left, k)
			}
			if !r.Attrs.IsControl() {
				out = append(out, r)
			}
		})
	}
	slices.SortStableFunc(out, func(a, b *kgo.Record) int {
		return cmp.Or(strings.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition), cmp.Compare(a.Offset, b.Offset))
	})
	return out, nil
}

// settle bounds ReadAll's wait for open transactions to end.
const settle = 10 * time.Second

// stableEnds lists the last stable offsets of the topics' partitions once
// every partition's equals its end offset, or when settle has passed.
func stableEnds(ctx context.Context, adm *kadm.Client, topics []string) (kadm.ListedOffsets, error) {
	deadline := time.Now().Add(settle)
	for {
		ends, err := adm.ListCommittedOffsets(ctx, topics...)
		if err == nil {
			err = ends.Error()
		}
		if err != nil {
			return nil, fmt.Errorf("listing the last stable offsets of %s: %w", strings.Join(topics, ", "), err)
		}
		hwms, err := adm.ListEndOffsets(ctx, topics...)
		if err == nil {
			err = hwms.Error()
		}
		if err != nil {
			return nil, fmt.Errorf("listing the end offsets of %s: %w", strings.Join(topics, ", "), err)
		}
		open := false
		ends.Each(func(o kadm.ListedOffset) {
			if h, ok := hwms.Lookup(o.Topic, o.Partition); ok && h.Offset != o.Offset {
				open = true
			}
		})
		if !open || time.Now().After(deadline) {
			return ends, nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("waiting for the transactions on %s to end: %w", strings.Join(topics, ", "), ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// Topics lists the cluster's topics, Kafka's internal ones (such as
// __transaction_state) left out, sorted by name.
func Topics(ctx context.Context, brokers []string) ([]string, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	ts, err := kadm.NewClient(cl).ListTopics(ctx)
	if err != nil {
		return nil, fmt.Errorf("listing the topics: %w", err)
	}
	return ts.Names(), nil
}
