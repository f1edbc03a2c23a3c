package kafkaenv

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

func TestMain(m *testing.M) { Main(m) }

// produceRead writes n records to topic (created with rf replicas when
// rf > 0) in one transaction and
// reads them back read_committed.
func produceRead(t *testing.T, brokers []string, topic string, rf int16, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.TransactionalID(topic), kgo.DefaultProduceTopic(topic))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if rf > 0 {
		createTopic(t, brokers, topic, rf)
	}
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < n; i++ {
		cl.Produce(ctx, &kgo.Record{Value: []byte{byte(i)}}, nil)
	}
	if err := cl.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatalf("commit: %v", err)
	}
	cons, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(topic),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	got := 0
	for got < n {
		fs := cons.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatalf("after %d of %d records: %v", got, n, err)
		}
		got += fs.NumRecords()
	}
	if got != n {
		t.Fatalf("read %d records, wrote %d", got, n)
	}
}

// createTopic creates topic with two partitions of rf replicas.
func createTopic(t *testing.T, brokers []string, topic string, rf int16) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 2, rf, nil, topic); err != nil {
		t.Fatalf("creating %s: %v", topic, err)
	}
}

func TestShared(t *testing.T) {
	k := Shared(t)
	if again := Shared(t); again != k {
		t.Fatal("Shared started a second broker")
	}
	if k.Nodes() != 1 || len(k.Brokers()) != 1 {
		t.Fatalf("shared broker has %d nodes, %v", k.Nodes(), k.Brokers())
	}
	produceRead(t, k.Brokers(), Name(t, "a"), 1, 10)
	if a, b := Name(t, "x"), Name(t, "x"); a == b {
		t.Fatalf("Name gave %q twice", a)
	}
}

// A three-node cluster keeps committing with one node killed
// (min.insync.replicas=2 of 3) and takes it back.
func TestCluster(t *testing.T) {
	k := StartCluster(t, nil)
	if len(k.Brokers()) != 3 {
		t.Fatalf("brokers %v", k.Brokers())
	}
	produceRead(t, k.Brokers(), Name(t, "before"), 3, 10)
	// The topic is made while all three run: one made after the kill may
	// get a replica on the dead node (the controller has not fenced it
	// yet) and stay below min.insync.replicas.
	down := Name(t, "down")
	createTopic(t, k.Brokers(), down, 3)
	if err := k.Kill(2); err != nil {
		t.Fatal(err)
	}
	produceRead(t, k.Brokers()[:2], down, 0, 10)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := k.Start(ctx, 2); err != nil {
		t.Fatal(err)
	}
	produceRead(t, k.Brokers(), Name(t, "after"), 3, 10)
}
