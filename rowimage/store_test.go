package rowimage

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/sluice-cdc/sluice/binlog"
	"github.com/sluice-cdc/sluice/position"
)

var testTable = &binlog.Table{
	Schema: "app", Name: "t",
	Columns: []binlog.Column{
		{Name: "id", Kind: binlog.KindInt},
		{Name: "a", Kind: binlog.KindInt, Nullable: true},
		{Name: "b", Kind: binlog.KindString, Nullable: true},
		{Name: "c", Kind: binlog.KindBytes, Nullable: true},
	},
	PrimaryKey: []int{0},
}

// modelRow is a full row of testTable.
type modelRow struct {
	a       int64
	b, c    string
	aNull   bool
	bEmpty  bool
	present bool
}

func (m modelRow) image(id int64) binlog.Row {
	a := binlog.IntValue(m.a)
	if m.aNull {
		a = binlog.NullValue()
	}
	b := binlog.BytesValue(binlog.KindString, []byte(m.b))
	if m.bEmpty {
		b = binlog.BytesValue(binlog.KindString, []byte{})
	}
	return binlog.Row{binlog.IntValue(id), a, b, binlog.BytesValue(binlog.KindBytes, []byte(m.c))}
}

// minimal keeps the key and the columns in keep, as MINIMAL logs them.
func minimal(r binlog.Row, keep ...int) binlog.Row {
	out := make(binlog.Row, len(r))
	out[0] = r[0]
	for _, i := range keep {
		out[i] = r[i]
	}
	return out
}

// workload is a random sequence of chunks against a model, each change
// with its full images (want) and its MINIMAL images (given).
type step struct {
	given, want []binlog.Change
	begin       position.Position
	snapshot    bool
}

func randomWorkload(rng *rand.Rand, chunks int) []step {
	rows := map[int64]modelRow{}
	var steps []step
	// A snapshot first: every row whole.
	snap := step{begin: position.Position{File: "f", Offset: 4}, snapshot: true}
	for id := int64(1); id <= 20; id++ {
		m := modelRow{a: rng.Int64N(100), b: fmt.Sprint("b", id), c: "c", present: true}
		rows[id] = m
		ch := binlog.Change{Op: binlog.OpRead, Table: testTable, After: m.image(id)}
		snap.given, snap.want = append(snap.given, ch), append(snap.want, ch)
	}
	steps = append(steps, snap)
	for i := 0; i < chunks; i++ {
		st := step{begin: position.Position{File: "f", Offset: uint32(100 + i)}}
		for j := rng.IntN(4) + 1; j > 0; j-- {
			id := rng.Int64N(30) + 1
			m, ok := rows[id]
			switch {
			case !ok:
				m = modelRow{a: rng.Int64N(100), b: "new", c: fmt.Sprint(i)}
				rows[id] = m
				full := binlog.Change{Op: binlog.OpInsert, Table: testTable, After: m.image(id)}
				st.given, st.want = append(st.given, full), append(st.want, full)
			case rng.IntN(6) == 0:
				delete(rows, id)
				want := binlog.Change{Op: binlog.OpDelete, Table: testTable, Before: m.image(id)}
				given := want
				given.Before = minimal(want.Before)
				st.given, st.want = append(st.given, given), append(st.want, want)
			case rng.IntN(6) == 0:
				// A key change.
				nid := rng.Int64N(1000) + 100
				if _, taken := rows[nid]; taken {
					continue
				}
				before := m.image(id)
				delete(rows, id)
				m.a++
				rows[nid] = m
				want := binlog.Change{Op: binlog.OpUpdate, Table: testTable, Before: before, After: m.image(nid)}
				given := want
				given.Before, given.After = minimal(before), minimal(m.image(nid), 1)
				st.given, st.want = append(st.given, given), append(st.want, want)
			default:
				before := m.image(id)
				var keep []int
				if rng.IntN(2) == 0 {
					m.a, m.aNull = rng.Int64N(100), rng.IntN(5) == 0
					keep = append(keep, 1)
				}
				if rng.IntN(2) == 0 {
					m.b, m.bEmpty = fmt.Sprint("u", i), rng.IntN(5) == 0
					keep = append(keep, 2)
				}
				if rng.IntN(3) == 0 {
					m.c = fmt.Sprint("blob", i)
					keep = append(keep, 3)
				}
				rows[id] = m
				want := binlog.Change{Op: binlog.OpUpdate, Table: testTable, Before: before, After: m.image(id)}
				given := want
				given.Before, given.After = minimal(before), minimal(m.image(id), keep...)
				st.given, st.want = append(st.given, given), append(st.want, want)
			}
		}
		steps = append(steps, st)
	}
	return steps
}

func (st step) txn() *binlog.Txn {
	t := &binlog.Txn{Begin: st.begin, Snapshot: st.snapshot, Last: true}
	t.Changes = make([]binlog.Change, len(st.given))
	for i, ch := range st.given {
		ch.Before, ch.After = append(binlog.Row(nil), ch.Before...), append(binlog.Row(nil), ch.After...)
		t.Changes[i] = ch
	}
	return t
}

func sameRow(a, b binlog.Row) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !a[i].Equal(b[i]) {
			return false
		}
	}
	return true
}

func checkStep(t *testing.T, s *Store, i int, st step, seq uint64) {
	t.Helper()
	txn := st.txn()
	if err := s.Fill(txn, seq); err != nil {
		t.Fatalf("chunk %d: %v", i, err)
	}
	for j, ch := range txn.Changes {
		w := st.want[j]
		if !sameRow(ch.Before, w.Before) || !sameRow(ch.After, w.After) {
			t.Fatalf("chunk %d change %d (%s): got before %v after %v, want before %v after %v", i, j, ch.Op, ch.Before, ch.After, w.Before, w.After)
		}
	}
}

// TestFillMatchesModel completes MINIMAL images of a random workload and
// compares them with the model's full images; then it rewinds to random
// resume points and replays, as a restart after kill -9 does, and the
// images are still exact.
func TestFillMatchesModel(t *testing.T) {
	for seed := uint64(1); seed <= 20; seed++ {
		rng := rand.New(rand.NewPCG(seed, 7))
		steps := randomWorkload(rng, 60)
		s, err := Open(t.TempDir(), nil)
		if err != nil {
			t.Fatal(err)
		}
		// The run's first checkpoint (version 1) has no position yet.
		if err := s.Trim(position.Position{}, 0, 1); err != nil {
			t.Fatal(err)
		}
		ver := uint64(1)
		seqs := make([]uint64, len(steps))
		next := uint64(1)
		for i, st := range steps {
			seqs[i] = next
			checkStep(t, s, i, st, next)
			next += uint64(len(st.given))
		}
		low := 1 // no restart resumes before the last trim's checkpoint
		for round := 0; round < 3; round++ {
			// Resume at a random stream chunk k: chunks k.. are read again.
			k := low + rng.IntN(len(steps)-low)
			res, err := s.Rewind(Resume{Pos: steps[k].begin, LastSeq: seqs[k] - 1, Version: ver})
			if err != nil {
				t.Fatal(err)
			}
			want := 0
			for _, st := range steps[k:] {
				if len(st.given) > 0 {
					want++
				}
			}
			if res.Cleared || res.Undone != want {
				t.Fatalf("seed %d: rewind to chunk %d: %+v, want %d undone", seed, k, res, want)
			}
			if k > 1 && rng.IntN(2) == 0 {
				// A checkpoint at chunk k-1 trims what no restart needs.
				ver++
				if err := s.Trim(steps[k-1].begin, seqs[k-1]-1, ver); err != nil {
					t.Fatal(err)
				}
				low = k - 1
			}
			for i := k; i < len(steps); i++ {
				checkStep(t, s, i, steps[i], seqs[i])
			}
		}
		if st := s.Stats(); st.Completed == 0 {
			t.Fatalf("seed %d: nothing completed", seed)
		}
		s.Close()
	}
}

func TestFillMissing(t *testing.T) {
	s, err := Open(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	full := modelRow{a: 1, b: "x", c: "y"}.image(5)
	txn := &binlog.Txn{Changes: []binlog.Change{{Op: binlog.OpUpdate, Table: testTable, Before: minimal(full), After: minimal(full, 1), File: "mysql-bin.000003", Pos: 1234}}}
	err = s.Fill(txn, 1)
	var me *MissingError
	if !errors.Is(err, ErrMissing) || !errors.As(err, &me) {
		t.Fatalf("got %v, want ErrMissing", err)
	}
	want := "row image of table app.t, key (id=5), at mysql-bin.000003:1234: the binlog carries a partial image"
	if got := err.Error(); len(got) < len(want) || got[:len(want)] != want {
		t.Fatalf("error %q does not start with %q", got, want)
	}
	// An image whose table's columns changed is not used.
	s2, err := Open(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	if err := s2.Fill(&binlog.Txn{Changes: []binlog.Change{{Op: binlog.OpInsert, Table: testTable, After: full}}}, 1); err != nil {
		t.Fatal(err)
	}
	altered := *testTable
	altered.Columns = append(append([]binlog.Column(nil), testTable.Columns...), binlog.Column{Name: "d", Kind: binlog.KindInt})
	before := append(minimal(full), binlog.Value{})
	err = s2.Fill(&binlog.Txn{Changes: []binlog.Change{{Op: binlog.OpDelete, Table: &altered, Before: before}}}, 2)
	if !errors.Is(err, ErrMissing) {
		t.Fatalf("after the table changed: got %v, want ErrMissing", err)
	}
	// A table without a key and a partial before image.
	nokey := *testTable
	nokey.PrimaryKey = nil
	err = s2.Fill(&binlog.Txn{Changes: []binlog.Change{{Op: binlog.OpDelete, Table: &nokey, Before: minimal(full)}}}, 3)
	if !errors.Is(err, ErrNoKey) {
		t.Fatalf("no key: got %v, want ErrNoKey", err)
	}
}

// TestFillReselect: with a Reselect, a row the store never saw is read by
// its key (an update's new key), its absent columns are completed and
// listed in Reselected, the row is stored for the changes after it, and a
// row the source does not have, or a failed read, is ErrMissing.
func TestFillReselect(t *testing.T) {
	s, err := Open(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	current := map[int64]binlog.Row{6: modelRow{a: 2, b: "now", c: "z"}.image(6), 8: modelRow{a: 5, b: "dflt", c: ""}.image(8)}
	var asked []int64
	fail := false
	s.SetReselect(func(tb *binlog.Table, key binlog.Row) (binlog.Row, bool, error) {
		if fail {
			return nil, false, errors.New("connection refused")
		}
		id := key[0].Int()
		asked = append(asked, id)
		r, ok := current[id]
		return r, ok, nil
	})
	old := modelRow{a: 1, b: "x", c: "y"}.image(5)
	moved := modelRow{a: 2, b: "now", c: "z"}.image(6)
	ins := modelRow{a: 5, b: "dflt", c: ""}.image(8)
	// Row 5 became row 6 (a changed too); row 8 was inserted naming id and c.
	txn := &binlog.Txn{Changes: []binlog.Change{
		{Op: binlog.OpUpdate, Table: testTable, Before: minimal(old), After: minimal(moved, 1)},
		{Op: binlog.OpInsert, Table: testTable, After: minimal(ins, 3)},
	}}
	if err := s.Fill(txn, 1); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(asked) != "[6 8]" {
		t.Errorf("read keys %v, want [6 8] (the update under its new key)", asked)
	}
	up, in := txn.Changes[0], txn.Changes[1]
	wantBefore := binlog.Row{old[0], moved[1], moved[2], moved[3]} // the key from the binlog, the rest as read
	if fmt.Sprint(up.Before) != fmt.Sprint(wantBefore) || fmt.Sprint(up.After) != fmt.Sprint(moved) || fmt.Sprint(up.Reselected) != "[1 2 3]" {
		t.Errorf("update: before %v after %v reselected %v, want %v %v [1 2 3]", up.Before, up.After, up.Reselected, wantBefore, moved)
	}
	if fmt.Sprint(in.After) != fmt.Sprint(ins) || fmt.Sprint(in.Reselected) != "[1 2]" {
		t.Errorf("insert: after %v reselected %v, want %v [1 2]", in.After, in.Reselected, ins)
	}
	if st := s.Stats(); st.Reselected != 2 {
		t.Errorf("Stats().Reselected = %d, want 2", st.Reselected)
	}
	// Row 6 is now in the store: no read.
	asked = nil
	next := &binlog.Txn{Changes: []binlog.Change{{Op: binlog.OpDelete, Table: testTable, Before: minimal(moved)}}}
	if err := s.Fill(next, 3); err != nil || asked != nil || fmt.Sprint(next.Changes[0].Before) != fmt.Sprint(moved) || next.Changes[0].Reselected != nil {
		t.Fatalf("a stored row: err %v, read %v, before %v, reselected %v", err, asked, next.Changes[0].Before, next.Changes[0].Reselected)
	}
	// A row the source does not have, and a failed read.
	for _, f := range []bool{false, true} {
		fail = f
		err := s.Fill(&binlog.Txn{Changes: []binlog.Change{{Op: binlog.OpDelete, Table: testTable, Before: minimal(modelRow{}.image(9))}}}, 4)
		var me *MissingError
		if !errors.Is(err, ErrMissing) || !errors.As(err, &me) || me.Key != "(id=9)" {
			t.Fatalf("fail=%v: got %v, want ErrMissing for (id=9)", f, err)
		}
	}
}

// TestRewindClears: a snapshot chunk read again before a stream chunk that
// is not cannot be undone alone; the store is emptied and says why.
func TestRewindClears(t *testing.T) {
	s, err := Open(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	snap := &binlog.Txn{Snapshot: true, Begin: position.Position{File: "f", Offset: 4}, Changes: []binlog.Change{{Op: binlog.OpRead, Table: testTable, After: modelRow{a: 1}.image(1)}}}
	stream := &binlog.Txn{Begin: position.Position{File: "f", Offset: 10}, Changes: []binlog.Change{{Op: binlog.OpInsert, Table: testTable, After: modelRow{a: 2}.image(2)}}}
	if err := s.Trim(position.Position{}, 0, 1); err != nil {
		t.Fatal(err)
	}
	if err := s.Fill(snap, 5); err != nil {
		t.Fatal(err)
	}
	if err := s.Fill(stream, 6); err != nil {
		t.Fatal(err)
	}
	res, err := s.Rewind(Resume{Pos: position.Position{File: "f", Offset: 20}, LastSeq: 4, Version: 1})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Cleared || res.Reason == "" {
		t.Fatalf("got %+v, want the store cleared", res)
	}
	if empty, err := s.empty(); err != nil || !empty {
		t.Fatalf("store not empty (%v)", err)
	}
}

// TestRewindStale: a store that missed checkpoints (or is newer than the
// checkpoint) is emptied, not trusted.
func TestRewindStale(t *testing.T) {
	for _, tc := range []struct {
		stored, cp uint64
		cleared    bool
	}{{5, 5, false}, {5, 6, false}, {5, 7, true}, {6, 5, true}} {
		s, err := Open(t.TempDir(), nil)
		if err != nil {
			t.Fatal(err)
		}
		pos := position.Position{File: "f", Offset: 10}
		if err := s.Fill(&binlog.Txn{Begin: position.Position{File: "f", Offset: 4}, Changes: []binlog.Change{{Op: binlog.OpInsert, Table: testTable, After: modelRow{a: 2}.image(2)}}}, 1); err != nil {
			t.Fatal(err)
		}
		if err := s.Trim(pos, 1, tc.stored); err != nil {
			t.Fatal(err)
		}
		res, err := s.Rewind(Resume{Pos: pos, LastSeq: 1, Version: tc.cp})
		if err != nil {
			t.Fatal(err)
		}
		if res.Cleared != tc.cleared {
			t.Errorf("store at version %d, checkpoint %d: %+v, want cleared %v", tc.stored, tc.cp, res, tc.cleared)
		}
		s.Close()
	}
}

// TestFillKinds: a value stored under another byte-carrying kind (a
// MariaDB JSON column: KindJSON from a snapshot, KindString from the
// binlog) is completed under the column's kind.
func TestFillKinds(t *testing.T) {
	s, err := Open(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	snapTable := &binlog.Table{Schema: "app", Name: "j", PrimaryKey: []int{0}, Columns: []binlog.Column{{Name: "id", Kind: binlog.KindInt}, {Name: "j", Kind: binlog.KindJSON}, {Name: "a", Kind: binlog.KindInt}}}
	binlogTable := &binlog.Table{Schema: "app", Name: "j", PrimaryKey: []int{0}, Columns: []binlog.Column{{Name: "id", Kind: binlog.KindInt}, {Name: "j", Kind: binlog.KindString}, {Name: "a", Kind: binlog.KindInt}}}
	doc := []byte(`{"n":1}`)
	if err := s.Fill(&binlog.Txn{Snapshot: true, Changes: []binlog.Change{{Op: binlog.OpRead, Table: snapTable, After: binlog.Row{binlog.IntValue(1), binlog.BytesValue(binlog.KindJSON, doc), binlog.IntValue(5)}}}}, 1); err != nil {
		t.Fatal(err)
	}
	txn := &binlog.Txn{Changes: []binlog.Change{{Op: binlog.OpUpdate, Table: binlogTable, Before: binlog.Row{binlog.IntValue(1), {}, {}}, After: binlog.Row{binlog.IntValue(1), {}, binlog.IntValue(6)}}}}
	if err := s.Fill(txn, 2); err != nil {
		t.Fatal(err)
	}
	want := binlog.BytesValue(binlog.KindString, doc)
	if ch := txn.Changes[0]; !ch.Before[1].Equal(want) || !ch.After[1].Equal(want) || !ch.Before[2].Equal(binlog.IntValue(5)) {
		t.Fatalf("got before %v after %v", ch.Before, ch.After)
	}
}
