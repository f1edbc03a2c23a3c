package kafka

import (
	"fmt"
	"testing"
	"time"

	"github.com/sluice-cdc/sluice/pipeline"
)

const benchBatch = 1000

// renumber makes b's messages first, first+1, ... (their values keep the
// seq they were made with: the sink does not read them).
func renumber(b *pipeline.Batch, first uint64) {
	for i := range b.Messages {
		b.Messages[i].Seq = first + uint64(i)
	}
}

// BenchmarkWrite writes batches of 1000 messages of about 300 bytes (two
// tables, keys spread over the partitions, a transaction end every third
// message) to the package's real Kafka broker (a JVM on this machine,
// taking its share of the CPU): one op is one batch, that is one Kafka
// transaction.
func BenchmarkWrite(b *testing.B) {
	for _, compression := range []string{"none", "lz4"} {
		for _, parts := range []int32{1, 6} {
			b.Run(fmt.Sprintf("compression=%s/partitions=%d", compression, parts), func(b *testing.B) {
				benchWrite(b, Config{Compression: compression, Partitions: parts})
			})
		}
	}
}

func benchWrite(b *testing.B, cfg Config) {
	c := newCluster(b)
	cfg.RequestTimeout = 30 * time.Second
	s := newSink(b, c, cfg)
	mustRecover(b, s, 1, "")
	bt := batch(1, 1, benchBatch)
	for i := range bt.Messages {
		k := fmt.Appendf(nil, `{"id":%d}`, i) // distinct keys
		bt.Messages[i].Key = k
	}
	size := 0
	for _, m := range bt.Messages {
		size += len(m.Value)
	}
	b.SetBytes(int64(size))
	b.ReportAllocs()
	b.ResetTimer()
	next := uint64(1)
	for b.Loop() {
		renumber(bt, next)
		mustWrite(b, s, bt)
		next += benchBatch
	}
	b.ReportMetric(float64(next-1)/b.Elapsed().Seconds(), "msgs/s")
}

// BenchmarkRecover reads back 100000 messages' headers: one op is one
// full recovery from "".
func BenchmarkRecover(b *testing.B) {
	const total = 100000
	c := newCluster(b)
	s := newSink(b, c, Config{RequestTimeout: 30 * time.Second, Compression: "lz4"})
	mustRecover(b, s, 1, "")
	bt := batch(1, 1, benchBatch)
	for next := uint64(1); next <= total; next += benchBatch {
		renumber(bt, next)
		mustWrite(b, s, bt)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		rec := mustRecover(b, s, 1, "")
		if rec.MaxSeq != total {
			b.Fatalf("MaxSeq %d, want %d", rec.MaxSeq, total)
		}
	}
	b.ReportMetric(float64(total)*float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
}
