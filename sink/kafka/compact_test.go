package kafka

import (
	"bytes"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-cdc/sluice/binlog"
	"github.com/sluice-cdc/sluice/codec"
	"github.com/sluice-cdc/sluice/pipeline"
)

// compactedTopicConfig makes the log cleaner compact a topic within about
// a second (with the cluster's log.cleaner.backoff.ms small, see
// TestCluster): segments roll every 100 ms, any dirty segment is
// cleanable, tombstones go 1 s after the cleaner first saw them.
var compactedTopicConfig = map[string]*string{
	"cleanup.policy":            kadm.StringPtr("compact"),
	"segment.ms":                kadm.StringPtr("100"),
	"min.cleanable.dirty.ratio": kadm.StringPtr("0.01"),
	"delete.retention.ms":       kadm.StringPtr("1000"),
	"min.compaction.lag.ms":     kadm.StringPtr("0"),
	"max.compaction.lag.ms":     kadm.StringPtr("1000"),
}

// change is a message of table shop.orders in format debezium: op c, u
// or d of the row id, at seq, ending a source transaction when end.
func change(seq uint64, op string, id int, end bool) pipeline.Message {
	key := fmt.Sprintf(`{"id":%d}`, id)
	m := pipeline.Message{Seq: seq, Source: "src", DB: "shop", Table: "orders", Key: []byte(key), Op: binlog.OpUpdate}
	row := fmt.Sprintf(`{"id":%d,"v":%d}`, id, seq)
	switch op {
	case "c":
		m.Op = binlog.OpInsert
		m.Value = []byte(`{"before":null,"after":` + row + `,"op":"c"}`)
	case "u":
		m.Value = []byte(`{"before":{"id":` + strconv.Itoa(id) + `},"after":` + row + `,"op":"u"}`)
	case "d":
		m.Op = binlog.OpDelete
		m.Value = []byte(`{"before":` + row + `,"after":null,"op":"d"}`)
	}
	if end {
		m.End = endAt(seq)
	}
	return m
}

// A keyed topic with cleanup.policy=compact, as Debezium users run them,
// written by the sink in format debezium (a tombstone after each delete):
// once the cleaner has run, a read_committed consumer finds the last
// value of each row and nothing of the deleted rows (their deletes and,
// after delete.retention.ms, their tombstones are gone), as with
// Debezium's topics; and recovery, from the start or from a checkpoint
// older than the compaction, still finds the last seq and the last
// transaction end, which are on the partition's last record (compaction
// keeps the last record of every key). What compaction can take from
// recovery is in docs/SINKS-kafka.md (Compacted topics).
func testCompacted(t *testing.T, c *cluster) {
	topic := "shop.orders"
	adm := clusterAdmin(t, c)
	resp, err := adm.CreateTopics(testCtx(t), 1, 3, compactedTopicConfig, c.topic(topic))
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		t.Fatalf("creating the compacted topic: %v", err)
	}
	cfg := Config{Format: codec.Format{Name: codec.FormatDebezium}}
	s := newSink(t, c, cfg)
	recoverRetrying(t, s, 1, "")
	// Rows 1..5 inserted, then updated.
	a := &pipeline.Batch{Epoch: 1}
	for id := 1; id <= 5; id++ {
		a.Messages = append(a.Messages, change(uint64(id), "c", id, false))
	}
	for id := 1; id <= 5; id++ {
		a.Messages = append(a.Messages, change(uint64(5+id), "u", id, id == 5))
	}
	offA := mustWrite(t, s, a)
	// Rows 2 and 4 deleted, row 1 updated again.
	mustWrite(t, s, &pipeline.Batch{Epoch: 1, Messages: []pipeline.Message{
		change(11, "d", 2, false), change(12, "d", 4, false), change(13, "u", 1, true),
	}})
	want := map[string]uint64{`{"id":1}`: 13, `{"id":3}`: 8, `{"id":5}`: 10}

	// Updates of row 9 roll segments and keep the log dirty until the
	// cleaner has compacted it and dropped the tombstones.
	seq := uint64(13)
	var got map[string][]*kgo.Record
	deadline := time.Now().Add(90 * time.Second)
	for {
		seq++
		mustWrite(t, s, &pipeline.Batch{Epoch: 1, Messages: []pipeline.Message{change(seq, "u", 9, true)}})
		want[`{"id":9}`] = seq
		got = map[string][]*kgo.Record{}
		for _, r := range readAll(t, c, topic) {
			got[string(r.Key)] = append(got[string(r.Key)], r)
		}
		if compacted(got, want, `{"id":9}`) {
			break
		}
		if time.Now().After(deadline) {
			for k, rs := range got {
				t.Logf("key %s: %d records, last seq %s", k, len(rs), mustHeader(rs[len(rs)-1], pipeline.HeaderSeq))
			}
			t.Fatalf("the topic is not compacted to the last value of each row after 90 s")
		}
		time.Sleep(300 * time.Millisecond)
	}
	for k, rs := range got {
		r := rs[len(rs)-1]
		if r.Value == nil {
			t.Errorf("key %s: a tombstone left after delete.retention.ms", k)
		}
		if s, _ := header(r, pipeline.HeaderSeq); s != strconv.FormatUint(want[k], 10) {
			t.Errorf("key %s: seq %s, want %d (its last change)", k, s, want[k])
		}
	}
	t.Logf("compacted after %d writes of row 9: one record per row (row 9: %d), rows 2 and 4 gone", seq-13, len(got[`{"id":9}`]))

	// Recovery on the compacted topic, from its start and from a
	// checkpoint older than the compaction (records after it removed),
	// finds the last seq and the last end; from the last checkpoint,
	// nothing; and the sink writes on.
	for _, off := range []string{"", offA} {
		s2 := newSink(t, c, cfg)
		rec := mustRecover(t, s2, 2, off)
		if rec.MaxSeq != seq || rec.Ends["src"].Seq != seq || len(rec.Partial) != 0 {
			t.Fatalf("Recover(%q) on the compacted topic: MaxSeq %d, ends %+v, partial %v; want %d, an end at %d, none", off, rec.MaxSeq, rec.Ends, rec.Partial, seq, seq)
		}
		s2.Close()
	}
	s3 := newSink(t, c, cfg)
	var logged bytes.Buffer
	s3.log = slog.New(slog.NewTextHandler(&logged, nil))
	rec := mustRecover(t, s3, 2, "")
	// The test's topic has min.compaction.lag.ms=0: recovery warns.
	if w := logged.String(); !strings.Contains(w, "min.compaction.lag.ms=0") || !strings.Contains(w, c.topic(topic)) {
		t.Errorf("Recover on a topic compacted with min.compaction.lag.ms=0 logged %q, want a warning naming it", w)
	}
	logged.Reset()
	mustRecover(t, s3, 2, rec.Offset)
	if strings.Contains(logged.String(), "min.compaction.lag.ms=0") {
		t.Errorf("the warning again at the next Recover: %s", logged.String())
	}
	mustWrite(t, s3, &pipeline.Batch{Epoch: 2, Messages: []pipeline.Message{change(seq+1, "c", 2, true)}})
	if again := mustRecover(t, s3, 2, rec.Offset); again.MaxSeq != seq+1 {
		t.Fatalf("Recover after writing seq %d: MaxSeq %d", seq+1, again.MaxSeq)
	}
}

// compacted reports whether the records per key are one each, the last
// change of each row of want, and no other key; the row busy, still
// being written (its last segments not yet cleaned), may have more, the
// last its last change.
func compacted(got map[string][]*kgo.Record, want map[string]uint64, busy string) bool {
	if len(got) != len(want) {
		return false
	}
	for k, rs := range got {
		w, ok := want[k]
		if !ok || len(rs) != 1 && k != busy || mustHeader(rs[len(rs)-1], pipeline.HeaderSeq) != strconv.FormatUint(w, 10) {
			return false
		}
	}
	return true
}

func mustHeader(r *kgo.Record, key string) string {
	v, _ := header(r, key)
	return v
}
