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
func ReadAll(ctx context.Context, brokers []string, topics ...string) ([]*kgo.Record, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.KeepControlRecords())
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	ends, err := kadm.NewClient(cl).ListCommittedOffsets(ctx, topics...)
	if err != nil {
		return nil, fmt.Errorf("listing the end offsets of %s: %w", strings.Join(topics, ", "), err)
	}
	if err := ends.Error(); err != nil {
		return nil, fmt.Errorf("listing the end offsets of %s: %w", strings.Join(topics, ", "), err)
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
