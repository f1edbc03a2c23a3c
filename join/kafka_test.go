package join

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os/exec"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-cdc/sluice/internal/testenv/kafkaenv"
	"github.com/sluice-cdc/sluice/internal/testenv/throwaway"
	"github.com/sluice-cdc/sluice/pipeline"
	"github.com/sluice-cdc/sluice/sink/kafka"
)

// TestSinkExactlyOnceKafka is TestSinkExactlyOnceWithCrashes with a
// Kafka sink downstream (a real Apache Kafka 4.4 broker, transactions and
// read_committed recovery): a crashed join's producer is left open, as a
// dead process's would be, and the next one fences it. Consumers then
// read each joined record once, numbered 1..n.
func TestSinkExactlyOnceKafka(t *testing.T) {
	k := kafkaenv.Shared(t)
	prefix := kafkaenv.Name(t, "")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	r := rand.New(rand.NewPCG(5, 5))
	dir := t.TempDir()
	cfg := testConfig(dir, FullJoin)
	msgs, rows := genMessages(r, 200, 10*time.Second, false)
	var opened []pipeline.Sink
	defer func() {
		for _, s := range opened {
			s.Close()
		}
	}()
	newOut := func() pipeline.Sink {
		s, err := kafka.New(kafka.Config{
			Name: "joined", Brokers: k.Brokers(), Topic: prefix + ".{source}", Partitions: 3,
			TransactionalID: prefix, RequestTimeout: 5 * time.Second,
		}, "shop.join.orders_payments", slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatal(err)
		}
		opened = append(opened, s)
		return s
	}
	rn := &runner{t: t, r: r, dir: dir, cfg: cfg, msgs: msgs, crashP: 0.05, newOut: newOut}
	rn.run(ctx)
	rn.finish(ctx)
	if rn.crashes == 0 {
		t.Fatal("no crash happened; the test proves nothing")
	}
	want := referenceRecords(cfg, rows)
	got := readKafkaJoined(ctx, t, k.Brokers(), prefix+".orders_payments", len(want))
	if !slices.Equal(got, want) {
		t.Fatalf("%d crashes: joined records in Kafka differ from the reference (%d, want %d)\n%s", rn.crashes, len(got), len(want), diffLines(want, got))
	}
	// A second opinion from another client: librdkafka's kcat,
	// read_committed, reads sluice-seq 1..n once each.
	seqs := kcatSeqs(ctx, t, k.Brokers(), prefix+".orders_payments")
	ok := len(seqs) == len(want)
	for i := 0; ok && i < len(seqs); i++ {
		ok = seqs[i] == uint64(i+1)
	}
	if !ok {
		t.Fatalf("kcat reads %d records (seqs %v), want 1..%d once each", len(seqs), seqs, len(want))
	}
	t.Logf("%d records exactly once in Kafka after %d crashes (franz-go and kcat, read_committed)", len(got), rn.crashes)
}

// kcatSeqs returns the sorted sluice-seq headers of the topic's committed
// records as kcat (isolation.level=read_committed) reads them.
func kcatSeqs(ctx context.Context, t *testing.T, brokers []string, topic string) []uint64 {
	t.Helper()
	kcat, err := throwaway.EnsureKcat()
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.CommandContext(ctx, kcat, "-C", "-b", strings.Join(brokers, ","), "-t", topic, "-o", "beginning", "-e", "-q",
		"-X", "isolation.level=read_committed", "-f", "%h\n").Output()
	if err != nil {
		t.Fatalf("kcat reading %s: %v", topic, err)
	}
	var seqs []uint64
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		for _, h := range strings.Split(line, ",") {
			if v, ok := strings.CutPrefix(h, pipeline.HeaderSeq+"="); ok {
				n, err := strconv.ParseUint(v, 10, 64)
				if err != nil {
					t.Fatalf("kcat: header %q: %v", h, err)
				}
				seqs = append(seqs, n)
			}
		}
	}
	slices.Sort(seqs)
	return seqs
}

// readKafkaJoined consumes the topic with read_committed until it has at
// least want records and nothing more arrives for a second; it checks the
// sluice-seq headers are 1..n once each.
func readKafkaJoined(ctx context.Context, t *testing.T, brokers []string, topic string, want int) []string {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(topic),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	type rec struct {
		seq uint64
		v   string
	}
	var recs []rec
	quietSince := time.Now()
	for len(recs) < want || time.Since(quietSince) < time.Second {
		if ctx.Err() != nil {
			t.Fatalf("read %d of %d records before the deadline", len(recs), want)
		}
		pctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		fs := cl.PollFetches(pctx)
		cancel()
		n := 0
		fs.EachRecord(func(r *kgo.Record) {
			n++
			var seq uint64
			for _, h := range r.Headers {
				if h.Key == pipeline.HeaderSeq {
					fmt.Sscan(string(h.Value), &seq)
				}
			}
			recs = append(recs, rec{seq, string(r.Value)})
		})
		if n > 0 {
			quietSince = time.Now()
		}
	}
	sort.Slice(recs, func(i, j int) bool { return recs[i].seq < recs[j].seq })
	var out []string
	for i, r := range recs {
		if r.seq != uint64(i+1) {
			t.Fatalf("record %d has sluice-seq %d: not numbered 1..n exactly once", i+1, r.seq)
		}
		m, err := pipeline.ParseMeta([]byte(r.v))
		if err != nil || m.Seq != r.seq || m.Source != "orders_payments" {
			t.Fatalf("record %d: sluice block %+v (%v)", i+1, m, err)
		}
		out = append(out, joinedPair(t, []byte(r.v)))
	}
	sort.Strings(out)
	return out
}
