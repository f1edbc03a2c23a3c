package join

import (
	"bytes"
	"errors"
	"testing"
	"time"
)

// The decoders below read what the state directory holds. Damaged bytes
// must give ErrCorrupt (a clear error), never a panic. Seeds are in
// testdata/fuzz/<target>.

func FuzzDecodeEntries(f *testing.F) {
	f.Add(encodeEntries(nil, []Entry{{ID: []byte(`{"id":1}`), Data: []byte("payload"), Matched: true}, {ID: nil, Data: nil}}))
	f.Fuzz(func(t *testing.T, b []byte) {
		es, err := decodeEntries(nil, 5, b)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error %v is not ErrCorrupt", err)
			}
			return
		}
		// What decodes re-encodes to the same bytes.
		if again := encodeEntries(nil, es); !bytes.Equal(again, b) {
			t.Fatalf("decoded %x, re-encoded %x", b, again)
		}
	})
}

func FuzzDecodeIndex(f *testing.F) {
	key := keyOf(7)
	f.Add(indexKey(nil, Right, 1234, key), appendIndexValue(nil, 2, 40))
	f.Add(entriesKey(nil, Left, key, -5), []byte{1})
	f.Fuzz(func(t *testing.T, k, v []byte) {
		if tm, key, err := splitIndexKey(k); err == nil {
			if !bytes.Equal(indexKey(nil, Side(k[1]), tm, key), k) {
				t.Fatalf("index key %x does not round-trip", k)
			}
		} else if !errors.Is(err, ErrCorrupt) {
			t.Fatal(err)
		}
		if key, tm, err := splitEntriesKey(k); err == nil {
			if !bytes.Equal(entriesKey(nil, Side(k[1]), key, tm), k) {
				t.Fatalf("entries key %x does not round-trip", k)
			}
		} else if !errors.Is(err, ErrCorrupt) {
			t.Fatal(err)
		}
		if c, s, err := decodeIndexValue(v); err == nil {
			if !bytes.Equal(appendIndexValue(nil, c, s), v) {
				t.Fatalf("index value %x does not round-trip", v)
			}
		} else if !errors.Is(err, ErrCorrupt) {
			t.Fatal(err)
		}
	})
}

func FuzzDecodeOutbox(f *testing.F) {
	f.Add(appendOutboxRecord(nil, &outboxRecord{Key: []byte("[7]"), DB: "shop", Table: "j", EventTime: 99, Body: []byte(`{"join":"j","left":null`)}))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := decodeOutboxRecord(b)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatal(err)
			}
			return
		}
		if !bytes.Equal(appendOutboxRecord(nil, &r), b) {
			t.Fatalf("outbox record %x does not round-trip", b)
		}
	})
}

func FuzzDecodePayload(f *testing.F) {
	f.Add(appendPayload(nil, &payload{KeyJSON: []byte("[7]"), DB: []byte("shop"), Side: []byte(`{"row":{}}`)}))
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := decodePayload(b)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatal(err)
			}
			return
		}
		if !bytes.Equal(appendPayload(nil, &p), b) {
			t.Fatalf("payload %x does not round-trip", b)
		}
	})
}

func FuzzDecodeMeta(f *testing.F) {
	f.Add([]byte(`{"version":1,"fingerprint":"f","type":"inner","watermark":5,"horizon":[1,2],"rows":[3,4],"bytes":[5,6]}`))
	f.Add([]byte(`{"version":1,"state_id":"ab","consumed":9,"next":[3,1],"delivered":[2,0],"offset":["x:1",""],"ends":{"shop":{"pos":{"file":"b.1","pos":4},"seq":9}}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		if _, err := decodeOpMeta(b); err != nil && !errors.Is(err, ErrCorrupt) {
			t.Fatal(err)
		}
		m, err := decodeSinkMeta(b)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatal(err)
			}
			return
		}
		for i := range 2 {
			if m.Delivered[i] >= m.Next[i] {
				t.Fatalf("accepted meta delivering more than it produced: %+v", m)
			}
		}
	})
}

// TestCorruptStateErrors: damaged entries or meta in a real state give
// ErrCorrupt errors that name what is damaged, not a panic or a wrong join.
func TestCorruptStateErrors(t *testing.T) {
	dir := t.TempDir()
	cfg := OperatorConfig{Type: LeftJoin, After: time.Second, Fingerprint: "x"}
	op, err := OpenOperator(dir, cfg)
	if err != nil {
		t.Fatal(err)
	}
	nop := func(*Output) error { return nil }
	k := keyOf(1)
	if err := op.Add(Left, &Row{Key: k, Time: 10, Data: []byte("a")}, nop); err != nil {
		t.Fatal(err)
	}
	if err := op.Commit(true); err != nil {
		t.Fatal(err)
	}
	if err := op.db.Set(entriesKey(nil, Left, k, 10), []byte{1, 0, 200}, nil); err != nil {
		t.Fatal(err)
	}
	err = op.Add(Right, &Row{Key: k, Time: 10, Data: []byte("b")}, nop)
	if !errors.Is(err, ErrCorrupt) {
		t.Fatalf("probe of a damaged entry: %v", err)
	}
	op.Discard()
	if _, err := op.Advance(10_000_000, nop); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("eviction of a damaged entry: %v", err)
	}
	op.Discard()
	if err := op.db.Set(keyOperatorMeta, []byte(`{"version":1,"rows":[-1,0]`), nil); err != nil {
		t.Fatal(err)
	}
	op.Close()
	if _, err := OpenOperator(dir, cfg); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("damaged meta: %v", err)
	}
}

// FuzzStateMerger: merge operands read back from disk go through the
// merger; damaged ones give ErrCorrupt, and what merges decodes.
func FuzzStateMerger(f *testing.F) {
	e1 := encodeEntries(nil, []Entry{{ID: []byte("1"), Data: []byte("a")}})
	e2 := encodeEntries(nil, []Entry{{ID: []byte("2"), Data: []byte("b"), Matched: true}})
	f.Add(byte(nsEntries), e1, e2)
	f.Add(byte(nsIndex), appendIndexValue(nil, 1, 5), appendIndexValue(nil, 2, 9))
	f.Fuzz(func(t *testing.T, ns byte, older, newer []byte) {
		m, err := stateMerger.Merge([]byte{ns, 0}, newer)
		if err == nil {
			err = m.MergeOlder(older)
		}
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatal(err)
			}
			return
		}
		v, _, err := m.Finish(true)
		if err != nil {
			t.Fatal(err)
		}
		switch ns {
		case nsEntries:
			a, errA := decodeEntries(nil, 0, older)
			b, errB := decodeEntries(nil, 0, newer)
			got, err := decodeEntries(nil, 0, v)
			if errA == nil && errB == nil && (err != nil || len(got) != len(a)+len(b)) {
				t.Fatalf("merged %d+%d entries into %d (%v)", len(a), len(b), len(got), err)
			}
		case nsIndex:
			if _, _, err := decodeIndexValue(v); err != nil {
				t.Fatalf("merged index value does not decode: %v", err)
			}
		}
	})
}
