package nats

import (
	"testing"
	"time"

	"github.com/sluice-cdc/sluice/internal/testenv/natsenv"
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

// BenchmarkWrite writes batches of 1000 messages of about 300 bytes to an
// embedded server (file storage, same machine): one op is one batch.
func BenchmarkWrite(b *testing.B) {
	n := natsenv.StartNATS(b)
	s := newSink(b, n.URL(), Config{AckTimeout: 30 * time.Second})
	mustRecover(b, s, 1, "")
	bt := batch(1, 1, benchBatch)
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

// BenchmarkRecover scans 100000 messages' headers: one op is one full
// scan.
func BenchmarkRecover(b *testing.B) {
	const total = 100000
	n := natsenv.StartNATS(b)
	s := newSink(b, n.URL(), Config{AckTimeout: 30 * time.Second})
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
