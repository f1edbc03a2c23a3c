package pipeline_test

import (
	"maps"
	"math/rand/v2"
	"testing"

	"github.com/sluice-cdc/sluice/pipeline"
	"github.com/sluice-cdc/sluice/position"
)

// obs is one message as a recovery scan sees it.
type obs struct {
	seq  uint64
	src  string
	end  bool
	snap bool
}

// TestRecoveryPartial: Partial counts, per source, the messages after its
// last end, leaving snapshot rows out, whatever order the scan sees them in
// (a Kafka scan reads partition after partition).
func TestRecoveryPartial(t *testing.T) {
	// a: a whole transaction (1-3), snapshot rows of b (4-5), b's DDL
	// (6, an end), a's next transaction cut after 2 messages (7-8) with a
	// snapshot row of a inside (9) and one of b (10); then, renumbered
	// after a crash, the rest of a's messages held again (20-21).
	msgs := []obs{
		{1, "a", false, false}, {2, "a", false, false}, {3, "a", true, false},
		{4, "b", false, true}, {5, "b", false, true}, {6, "b", true, false},
		{7, "a", false, false}, {8, "a", false, false}, {9, "a", false, true}, {10, "b", false, true},
		{20, "a", false, false}, {21, "a", false, false},
	}
	want := map[string]int{"a": 4}
	end := &position.Position{File: "f", Offset: 4}
	for round := range 20 {
		order := append([]obs(nil), msgs...)
		if round > 0 {
			rand.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		}
		var rec pipeline.Recovery
		for _, m := range order {
			var e *position.Position
			if m.end {
				e = end
			}
			rec.Observe(m.seq, m.src, e, m.snap)
		}
		if !maps.Equal(rec.Partial, want) {
			t.Fatalf("order %v: Partial %v, want %v", order, rec.Partial, want)
		}
		if rec.MaxSeq != 21 || rec.Ends["a"].Seq != 3 || rec.Ends["b"].Seq != 6 {
			t.Fatalf("order %v: MaxSeq %d, Ends %+v", order, rec.MaxSeq, rec.Ends)
		}
	}
	// An end after everything leaves nothing partial.
	var rec pipeline.Recovery
	for _, m := range msgs {
		var e *position.Position
		if m.end {
			e = end
		}
		rec.Observe(m.seq, m.src, e, m.snap)
	}
	rec.Observe(30, "a", end, false)
	if len(rec.Partial) != 0 {
		t.Fatalf("Partial %v after the end of a, want none", rec.Partial)
	}
}

func TestSnapshotRow(t *testing.T) {
	for v, want := range map[string]bool{
		`{"before":null,"after":{"id":1},"source":{"snapshot":"true"},"op":"r","ts_ms":17,"sluice":{"seq":1,"epoch":1}}`:                                          true,
		`{"before":null,"after":{"j":{"op":"r","ts_ms":1}},"source":{"snapshot":"false"},"op":"c","ts_ms":17,"sluice":{"seq":1,"epoch":1}}`:                       false,
		`{"source":{"snapshot":"false"},"databaseName":"d","ddl":"x,\"op\":\"r\"","ts_ms":17,"sluice":{"seq":1,"epoch":1,"end":{"file":"f"}}}`:                    false,
		`{"source":{"name":"s","ts_ms":0,"snapshot":"true","db":"d"},"databaseName":"d","ddl":"TRUNCATE TABLE d.t","ts_ms":17,"sluice":{"seq":1,"epoch":1}}`:      true,
		`{"source":{"name":"s","ts_ms":0,"snapshot":"false","db":"d"},"databaseName":"d","ddl":",\"snapshot\":\"true\"","ts_ms":17,"sluice":{"seq":1,"epoch":1}}`: false,
		`{"op":"r","ts_ms":17}`: false,
		``:                      false,
	} {
		if got := pipeline.SnapshotRow([]byte(v)); got != want {
			t.Errorf("SnapshotRow(%s) = %v, want %v", v, got, want)
		}
	}
}
