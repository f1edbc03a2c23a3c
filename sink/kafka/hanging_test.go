package kafka

import "testing"

// How recovery decides the outcome of a hanging transaction (hanging.go):
// only a checkpoint past its start, or the coordinator's state at exactly
// the next epoch of the same producer id, proves it.
func TestHangingOutcome(t *testing.T) {
	tp := topicPartition{"shop.orders", 0}
	h := hangingTxn{tp: tp, pid: 7, epoch: 4, start: 100}
	for _, tc := range []struct {
		name           string
		saved          offsets
		pre            coordState
		commit, proven bool
	}{
		{"the coordinator committed it", nil, coordState{known: true, state: "CompleteCommit", pid: 7, epoch: 5}, true, true},
		{"the coordinator aborted it", nil, coordState{known: true, state: "CompleteAbort", pid: 7, epoch: 5}, false, true},
		{"a later transaction ended since", nil, coordState{known: true, state: "CompleteCommit", pid: 7, epoch: 6}, false, false},
		{"a producer started since", nil, coordState{known: true, state: "Empty", pid: 7, epoch: 6}, false, false},
		{"another producer id", nil, coordState{known: true, state: "CompleteCommit", pid: 8, epoch: 5}, false, false},
		{"the coordinator did not answer", nil, coordState{}, false, false},
		{"the checkpoint is past its start", offsets{tp: 101}, coordState{known: true, state: "Empty", pid: 7, epoch: 9}, true, true},
		{"the checkpoint is at its start", offsets{tp: 100}, coordState{}, false, false},
		{"the checkpoint of another partition", offsets{{"shop.orders", 1}: 500}, coordState{}, false, false},
		{"checkpoint and coordinator agree", offsets{tp: 150}, coordState{known: true, state: "CompleteCommit", pid: 7, epoch: 5}, true, true},
		// Kafka's protocol rules it out; if it happens, nothing is proven.
		{"checkpoint and coordinator disagree", offsets{tp: 150}, coordState{known: true, state: "CompleteAbort", pid: 7, epoch: 5}, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sc := &scanner{saved: tc.saved, own: &ownProducer{pid: 7, epoch: 10, pre: tc.pre}}
			commit, proof := sc.outcome(h)
			if commit != tc.commit || (proof != "") != tc.proven {
				t.Fatalf("outcome = commit %v, proof %q; want commit %v, proven %v", commit, proof, tc.commit, tc.proven)
			}
		})
	}
}
