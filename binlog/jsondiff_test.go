package binlog

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// tdiff is a JSON diff for the test encoder.
type tdiff struct {
	op    byte
	path  string
	value jv
}

// encodeDiffs writes a diff vector as MySQL does (Json_diff_vector::
// write_binary), without the 4-byte length.
func encodeDiffs(ds ...tdiff) []byte {
	var b []byte
	for _, d := range ds {
		b = append(b, d.op)
		b = appendLenEnc(b, len(d.path))
		b = append(b, d.path...)
		if d.op != jsonDiffRemove {
			v := encodeJSONB(d.value)
			b = appendLenEnc(b, len(v))
			b = append(b, v...)
		}
	}
	return b
}

// mysqlKeyLess is MySQL's order of object members: shorter first, then by
// bytes.
func mysqlKeyLess(a, b string) int {
	if len(a) != len(b) {
		return len(a) - len(b)
	}
	return strings.Compare(a, b)
}

// sortedJV returns v with every object's members in MySQL's order.
func sortedJV(v jv) jv {
	if v.arr {
		out := v
		out.vals = make([]jv, len(v.vals))
		for i := range v.vals {
			out.vals[i] = sortedJV(v.vals[i])
		}
		return out
	}
	if !v.obj {
		return v
	}
	idx := make([]int, len(v.keys))
	for i := range idx {
		idx[i] = i
	}
	slices.SortFunc(idx, func(a, b int) int { return mysqlKeyLess(v.keys[a], v.keys[b]) })
	out := v
	out.keys, out.vals = nil, nil
	for _, i := range idx {
		out.keys = append(out.keys, v.keys[i])
		out.vals = append(out.vals, sortedJV(v.vals[i]))
	}
	return out
}

var ecmaIdent = regexp.MustCompile(`^[A-Za-z_$][A-Za-z0-9_$]*$`)

// pathText writes legs as Json_path::to_string does: identifiers bare,
// other member names as JSON strings.
func pathText(legs []jsonPathLeg) string {
	var sb strings.Builder
	sb.WriteByte('$')
	for _, l := range legs {
		switch {
		case !l.cell && ecmaIdent.Match(l.member):
			sb.WriteString("." + string(l.member))
		case !l.cell:
			var buf bytes.Buffer
			enc := json.NewEncoder(&buf)
			enc.SetEscapeHTML(false)
			enc.Encode(string(l.member))
			sb.WriteString("." + strings.TrimSuffix(buf.String(), "\n"))
		case l.fromEnd && l.index == 0:
			sb.WriteString("[last]")
		case l.fromEnd:
			sb.WriteString("[last-" + strconv.Itoa(int(l.index)) + "]")
		default:
			sb.WriteString("[" + strconv.Itoa(int(l.index)) + "]")
		}
	}
	return sb.String()
}

func TestJSONPathParse(t *testing.T) {
	m := func(s string) jsonPathLeg { return jsonPathLeg{member: []byte(s)} }
	c := func(i uint32) jsonPathLeg { return jsonPathLeg{cell: true, index: i} }
	e := func(i uint32) jsonPathLeg { return jsonPathLeg{cell: true, index: i, fromEnd: true} }
	for _, tc := range []struct {
		path string
		want []jsonPathLeg
	}{
		{"$", nil},
		{" $ ", nil},
		{"$.a", []jsonPathLeg{m("a")}},
		{"$.a.b_c.$d", []jsonPathLeg{m("a"), m("b_c"), m("$d")}},
		{"$[0]", []jsonPathLeg{c(0)}},
		{"$.a[12][3].b", []jsonPathLeg{m("a"), c(12), c(3), m("b")}},
		{"$[4294967295]", []jsonPathLeg{c(4294967295)}},
		{"$[last]", []jsonPathLeg{e(0)}},
		{"$[last-2]", []jsonPathLeg{e(2)}},
		{"$[ last - 2 ]", []jsonPathLeg{e(2)}},
		{`$."key with space"`, []jsonPathLeg{m("key with space")}},
		{`$."a.b[0]"`, []jsonPathLeg{m("a.b[0]")}},
		{`$."q\"uo\\te"`, []jsonPathLeg{m(`q"uo\te`)}},
		{`$."\u00e9\ud83d\ude00\n\/"`, []jsonPathLeg{m("é😀\n/")}},
		{`$.""`, []jsonPathLeg{m("")}},
		{`$.é`, []jsonPathLeg{m("é")}},
		{`$.a\u0062`, []jsonPathLeg{m("ab")}},
		{"$ .a [1] . b", []jsonPathLeg{m("a"), c(1), m("b")}},
	} {
		got, err := parseJSONPath([]byte(tc.path))
		if err != nil {
			t.Errorf("%s: %v", tc.path, err)
			continue
		}
		if fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("%s: got %v, want %v", tc.path, got, tc.want)
		}
	}
	for _, bad := range []string{
		"", "a", "$a", "$.", "$.*", "$[*]", "$**.a", "$[1 to 2]", "$[", "$[1", "$[-1]", "$[4294967296]",
		"$[99999999999999999999]", "$[last-]", "$[lastx]", "$.1a", "$.a-b", `$."abc`, `$."a\x"`, `$."\ud800"`, `$."\udc00\udc00"`,
		`$."\u12"`, `$.a"b`, "$.a]", "$[0]x",
	} {
		if legs, err := parseJSONPath([]byte(bad)); err == nil {
			t.Errorf("%q: parsed as %v, want an error", bad, legs)
		} else if !errors.Is(err, ErrCorruptJSON) || strings.Count(err.Error(), "corrupt") != 1 {
			t.Errorf("%q: error %v", bad, err)
		}
	}
}

// patch applies diffs to before and returns the text, checked for validity.
func patch(t *testing.T, before jv, ds ...tdiff) (string, error) {
	t.Helper()
	out, err := appendPatchedJSON(nil, encodeJSONB(before), encodeDiffs(ds...))
	if err == nil && !json.Valid(out) {
		t.Fatalf("invalid JSON %s", out)
	}
	return string(out), err
}

// render is the text of v from a full image.
func fullText(t *testing.T, v jv) string {
	t.Helper()
	out, err := appendJSONB(nil, encodeJSONB(v))
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

func TestJSONDiffApply(t *testing.T) {
	i16 := func(i int64) jv { return jInt(jsonbInt16, i) }
	doc := sortedJV(jObj(false,
		"a", jArr(false, i16(1), i16(2), i16(3)),
		"b", jObj(false, "c", jStr("x"), "dd", jLit(jsonbTrue)),
		"key with space", i16(1),
		`q"`, jDouble(2.5),
	))
	for _, tc := range []struct {
		name  string
		diffs []tdiff
		want  jv
	}{
		{"no diffs", nil, doc},
		{"replace array element", []tdiff{{jsonDiffReplace, "$.a[1]", i16(5)}},
			sortedJV(jObj(false, "a", jArr(false, i16(1), i16(5), i16(3)), "b", doc.vals[1], "key with space", i16(1), `q"`, jDouble(2.5)))},
		{"replace nested member with a container", []tdiff{{jsonDiffReplace, "$.b.c", jObj(false, "z", jArr(false))}},
			sortedJV(jObj(false, "a", doc.vals[0], "b", jObj(false, "c", jObj(false, "z", jArr(false)), "dd", jLit(jsonbTrue)), "key with space", i16(1), `q"`, jDouble(2.5)))},
		{"quoted keys", []tdiff{{jsonDiffReplace, `$."key with space"`, jStr("s")}, {jsonDiffRemove, `$."q\""`, jv{}}},
			sortedJV(jObj(false, "a", doc.vals[0], "b", doc.vals[1], "key with space", jStr("s")))},
		{"insert members in MySQL's order", []tdiff{
			{jsonDiffInsert, "$.b.e", i16(7)},  // between "c" and "dd"
			{jsonDiffInsert, "$.b.ab", i16(8)}, // before "dd"
			{jsonDiffInsert, "$.b.zzz", i16(9)},
			{jsonDiffInsert, "$.b.A", i16(6)},
		}, sortedJV(jObj(false, "a", doc.vals[0], "b", jObj(false, "c", jStr("x"), "dd", jLit(jsonbTrue), "e", i16(7), "ab", i16(8), "zzz", i16(9), "A", i16(6)), "key with space", i16(1), `q"`, jDouble(2.5)))},
		{"insert array elements", []tdiff{
			{jsonDiffInsert, "$.a[0]", i16(0)},
			{jsonDiffInsert, "$.a[2]", jStr("mid")},
			{jsonDiffInsert, "$.a[100]", jStr("end")},
			{jsonDiffInsert, "$.a[last]", jStr("before last")},
		}, sortedJV(jObj(false, "a", jArr(false, i16(0), i16(1), jStr("mid"), i16(2), i16(3), jStr("before last"), jStr("end")), "b", doc.vals[1], "key with space", i16(1), `q"`, jDouble(2.5)))},
		{"remove and replace from the end", []tdiff{
			{jsonDiffRemove, "$.a[last]", jv{}},
			{jsonDiffReplace, "$.a[last-1]", i16(-1)},
			{jsonDiffRemove, "$.b", jv{}},
		}, sortedJV(jObj(false, "a", jArr(false, i16(-1), i16(2)), "key with space", i16(1), `q"`, jDouble(2.5)))},
		{"diff inside an inserted value", []tdiff{
			{jsonDiffInsert, "$.n", jObj(false, "x", jArr(false, i16(1)))},
			{jsonDiffInsert, "$.n.x[1]", i16(2)},
			{jsonDiffReplace, "$.n.x[0]", jStr("one")},
		}, sortedJV(jObj(false, "a", doc.vals[0], "b", doc.vals[1], "n", jObj(false, "x", jArr(false, jStr("one"), i16(2))), "key with space", i16(1), `q"`, jDouble(2.5)))},
		{"repeated updates of one path", []tdiff{
			{jsonDiffReplace, "$.b.c", jStr("1")}, {jsonDiffReplace, "$.b.c", jStr("2")}, {jsonDiffRemove, "$.b.c", jv{}}, {jsonDiffInsert, "$.b.c", jStr("3")},
		}, sortedJV(jObj(false, "a", doc.vals[0], "b", jObj(false, "c", jStr("3"), "dd", jLit(jsonbTrue)), "key with space", i16(1), `q"`, jDouble(2.5)))},
	} {
		got, err := patch(t, doc, tc.diffs...)
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if want := fullText(t, tc.want); got != want {
			t.Errorf("%s:\n got %s\nwant %s", tc.name, got, want)
		}
	}

	for _, tc := range []struct {
		name  string
		diffs []tdiff
	}{
		{"replace missing member", []tdiff{{jsonDiffReplace, "$.nope", i16(1)}}},
		{"replace past the end", []tdiff{{jsonDiffReplace, "$.a[3]", i16(1)}}},
		{"replace through a scalar", []tdiff{{jsonDiffReplace, `$."key with space".x`, i16(1)}}},
		{"member of an array", []tdiff{{jsonDiffReplace, "$.a.x", i16(1)}}},
		{"cell of an object (no auto-wrapping)", []tdiff{{jsonDiffReplace, "$.b[0]", i16(1)}}},
		{"insert existing member", []tdiff{{jsonDiffInsert, "$.b.c", i16(1)}}},
		{"insert under a missing parent", []tdiff{{jsonDiffInsert, "$.x.y", i16(1)}}},
		{"remove missing member", []tdiff{{jsonDiffRemove, "$.b.zz", jv{}}}},
		{"remove past the end", []tdiff{{jsonDiffRemove, "$.a[3]", jv{}}}},
		{"remove past the start", []tdiff{{jsonDiffRemove, "$.a[last-3]", jv{}}}},
		{"whole document", []tdiff{{jsonDiffReplace, "$", i16(1)}}},
	} {
		if got, err := patch(t, doc, tc.diffs...); err == nil {
			t.Errorf("%s: applied, got %s", tc.name, got)
		} else if !errors.Is(err, ErrCorruptJSON) {
			t.Errorf("%s: %v", tc.name, err)
		}
	}

	// Corrupt vectors.
	good := encodeDiffs(tdiff{jsonDiffReplace, "$.a[0]", i16(1)})
	for name, diffs := range map[string][]byte{
		"unknown operation": append([]byte{3}, good[1:]...),
		"path too long":     {0, 0x40, '$'},
		"truncated value":   good[:len(good)-1],
		"empty value":       {0, 1, '$', 0},
		"bad packed length": {0, 0xfb},
		"bad path":          encodeDiffs(tdiff{jsonDiffRemove, "$.a[*]", jv{}}),
	} {
		if _, err := appendPatchedJSON(nil, encodeJSONB(doc), diffs); !errors.Is(err, ErrCorruptJSON) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := appendPatchedJSON(nil, nil, good); !errors.Is(err, ErrCorruptJSON) {
		t.Errorf("empty document: %v", err)
	}
}

// The model: the same diffs applied to jv trees, by MySQL's rules.

func modelSeek(v *jv, legs []jsonPathLeg) *jv {
	for _, l := range legs {
		switch {
		case v.arr && l.cell:
			pos, ok := cellIndex(&l, len(v.vals))
			if !ok {
				return nil
			}
			v = &v.vals[pos]
		case v.obj && !l.cell:
			i := slices.Index(v.keys, string(l.member))
			if i < 0 {
				return nil
			}
			v = &v.vals[i]
		default:
			return nil
		}
	}
	return v
}

func modelApply(root *jv, op byte, legs []jsonPathLeg, val jv) bool {
	if len(legs) == 0 {
		return false
	}
	if op == jsonDiffReplace {
		n := modelSeek(root, legs)
		if n == nil {
			return false
		}
		*n = val
		return true
	}
	p := modelSeek(root, legs[:len(legs)-1])
	last := legs[len(legs)-1]
	switch {
	case p == nil:
		return false
	case p.obj && !last.cell:
		name := string(last.member)
		i := slices.Index(p.keys, name)
		if op == jsonDiffRemove {
			if i < 0 {
				return false
			}
			p.keys = slices.Delete(p.keys, i, i+1)
			p.vals = slices.Delete(p.vals, i, i+1)
			return true
		}
		if i >= 0 {
			return false
		}
		at, _ := slices.BinarySearchFunc(p.keys, name, mysqlKeyLess)
		p.keys = slices.Insert(p.keys, at, name)
		p.vals = slices.Insert(p.vals, at, val)
		return true
	case p.arr && last.cell:
		pos, within := cellIndex(&last, len(p.vals))
		if op == jsonDiffRemove {
			if !within {
				return false
			}
			p.vals = slices.Delete(p.vals, pos, pos+1)
			return true
		}
		p.vals = slices.Insert(p.vals, pos, val)
		return true
	}
	return false
}

// randPath returns a path into v for op: mostly one that applies (an
// existing value for REPLACE and REMOVE, a new member or cell of an
// existing container for INSERT), sometimes one that does not.
func randPath(r *rand.Rand, v jv, op byte) []jsonPathLeg {
	var legs []jsonPathLeg
	for (v.obj || v.arr) && (len(legs) == 0 || r.IntN(3) > 0) {
		if op == jsonDiffInsert && r.IntN(8) > 0 && !slices.ContainsFunc(v.vals, func(c jv) bool { return c.obj || c.arr }) {
			break // insert here rather than under a scalar
		}
		if v.obj && len(v.keys) > 0 {
			i := r.IntN(len(v.keys))
			legs = append(legs, jsonPathLeg{member: []byte(v.keys[i])})
			v = v.vals[i]
		} else if v.arr && len(v.vals) > 0 {
			i := r.IntN(len(v.vals))
			l := jsonPathLeg{cell: true, index: uint32(i)}
			if r.IntN(3) == 0 {
				l = jsonPathLeg{cell: true, index: uint32(len(v.vals) - 1 - i), fromEnd: true}
			}
			legs = append(legs, l)
			v = v.vals[i]
		} else {
			break
		}
	}
	if op == jsonDiffInsert || r.IntN(10) == 0 {
		// One leg more: a new member (a random name may exist already),
		// or a cell anywhere up to past the end.
		if v.obj || (!v.arr && r.IntN(2) == 0) {
			legs = append(legs, jsonPathLeg{member: []byte(randJSONString(r, 4))})
		} else {
			legs = append(legs, jsonPathLeg{cell: true, index: uint32(r.IntN(len(v.vals) + 3)), fromEnd: r.IntN(4) == 0})
		}
	}
	return legs
}

// TestJSONDiffRandom applies random diffs to random documents and checks
// that the text equals that of the model's result from a full image, and
// that a diff is rejected exactly when the model rejects it.
func TestJSONDiffRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(12, 34))
	applied := 0
	defer func() {
		if applied < 1500 {
			t.Errorf("only %d of 3000 random diff vectors applied", applied)
		}
		t.Logf("%d of 3000 random diff vectors applied, the others rejected", applied)
	}()
	for iter := range 3000 {
		doc := sortedJV(jObj(r.IntN(3) == 0, "root", randJV(r, 4), "x", randJV(r, 3)))
		model := sortedJV(doc) // a deep copy
		var ds []tdiff
		ok := true
		for range 1 + r.IntN(6) {
			op := byte(r.IntN(3))
			legs := randPath(r, model, op)
			d := tdiff{op: op, path: pathText(legs)}
			if op != jsonDiffRemove {
				d.value = sortedJV(randJV(r, 2))
			}
			ds = append(ds, d)
			if !modelApply(&model, op, legs, sortedJV(d.value)) { // a copy: the model changes it later
				ok = false
				break
			}
		}
		got, err := patch(t, doc, ds...)
		if ok {
			applied++
		}
		switch {
		case !ok && err == nil:
			t.Fatalf("iteration %d: diffs %v applied (%s), the model rejects them", iter, ds, got)
		case ok && err != nil:
			t.Fatalf("iteration %d: diffs %v: %v", iter, ds, err)
		case ok:
			if want := fullText(t, model); got != want {
				t.Fatalf("iteration %d: diffs %v\n got %s\nwant %s", iter, ds, got, want)
			}
		}
	}
}

// A large document with a small diff: only the containers on the path are
// expanded.
func TestJSONDiffLargeDocument(t *testing.T) {
	var items []jv
	for i := range 3000 {
		items = append(items, jObj(false, "id", jInt(jsonbInt32, int64(i)), "name", jStr(strings.Repeat("n", i%40))))
	}
	doc := sortedJV(jObj(true, "items", jArr(true, items...), "meta", jObj(false, "v", jInt(jsonbInt16, 1))))
	before := encodeJSONB(doc)
	if len(before) < 64<<10 {
		t.Fatalf("document of %d bytes, want a large one", len(before))
	}
	items[1500] = jObj(false, "id", jInt(jsonbInt32, 1500), "name", jStr("changed"))
	want := fullText(t, sortedJV(jObj(true, "items", jArr(true, items...), "meta", jObj(false, "v", jInt(jsonbInt16, 2)))))
	diffs := encodeDiffs(tdiff{jsonDiffReplace, "$.items[1500].name", jStr("changed")}, tdiff{jsonDiffReplace, "$.meta.v", jInt(jsonbInt16, 2)})
	got, err := appendPatchedJSON(nil, before, diffs)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Fatalf("patched document differs from the full one (%d vs %d bytes)", len(got), len(want))
	}
	if a := testing.AllocsPerRun(20, func() { appendPatchedJSON(got[:0], before, diffs) }); a > 20 {
		t.Errorf("%v allocations for a two-diff patch of a %d-byte document", a, len(before))
	}
}

// BenchmarkJSONDiffLarge rebuilds a 100 KB document from a two-diff vector,
// against rendering the same document whole (BenchmarkJSONB-like).
func BenchmarkJSONDiffLarge(b *testing.B) {
	var items []jv
	for i := range 3000 {
		items = append(items, jObj(false, "id", jInt(jsonbInt32, int64(i)), "name", jStr(strings.Repeat("n", i%40))))
	}
	before := encodeJSONB(sortedJV(jObj(true, "items", jArr(true, items...), "meta", jObj(false, "v", jInt(jsonbInt16, 1)))))
	diffs := encodeDiffs(tdiff{jsonDiffReplace, "$.items[1500].name", jStr("changed")}, tdiff{jsonDiffReplace, "$.meta.v", jInt(jsonbInt16, 2)})
	buf := make([]byte, 0, 4*len(before))
	b.Run("patched", func(b *testing.B) {
		b.SetBytes(int64(len(before)))
		b.ReportAllocs()
		for b.Loop() {
			if _, err := appendPatchedJSON(buf[:0], before, diffs); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("whole", func(b *testing.B) {
		b.SetBytes(int64(len(before)))
		b.ReportAllocs()
		for b.Loop() {
			if _, err := appendJSONB(buf[:0], before); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// FuzzJSONDiff feeds arbitrary documents and diff vectors to the applier:
// it must never panic, and what it produces is valid JSON of a size
// bounded by its input.
func FuzzJSONDiff(f *testing.F) {
	doc := encodeJSONB(sortedJV(jObj(false, "a", jArr(false, jInt(jsonbInt16, 1), jStr("x")), "b", jObj(false, "c", jLit(jsonbNull)))))
	f.Add(doc, encodeDiffs(tdiff{jsonDiffReplace, "$.a[1]", jStr("y")}))
	f.Add(doc, encodeDiffs(tdiff{jsonDiffInsert, "$.b.d", jArr(false, jDouble(1.5))}, tdiff{jsonDiffRemove, "$.a[last]", jv{}}))
	f.Add(doc, encodeDiffs(tdiff{jsonDiffInsert, `$."b"."new key"`, jStr("v")}, tdiff{jsonDiffInsert, "$.a[9]", jLit(jsonbTrue)}))
	f.Add(doc, encodeDiffs(tdiff{jsonDiffReplace, "$.b.c", jObj(true, "deep", jArr(true, jInt(jsonbInt64, -1)))}, tdiff{jsonDiffReplace, "$.b.c.deep[0]", jStr("z")}))
	f.Add(doc, []byte{})
	f.Add([]byte{jsonbSmallArray, 1, 0, 5, 0, jsonbInt16, 1, 0}, encodeDiffs(tdiff{jsonDiffInsert, "$[0]", jStr("a")}))
	f.Fuzz(func(t *testing.T, before, diffs []byte) {
		out, err := appendPatchedJSON(nil, before, diffs)
		if err != nil {
			if !errors.Is(err, ErrCorruptJSON) {
				t.Fatalf("error %v does not wrap ErrCorruptJSON", err)
			}
			return
		}
		if !json.Valid(out) {
			t.Fatalf("invalid JSON %q", out)
		}
		if limit := 16*(len(before)+len(diffs)) + 64; len(out) > limit {
			t.Fatalf("%d bytes of text from %d+%d bytes of input", len(out), len(before), len(diffs))
		}
	})
}

// partialRowSeed is a row of a partial update of a table (INT, JSON, JSON):
// the before image, then the after image with binlog_row_value_options,
// the partial bitmap and a diff vector for the first JSON column.
func partialRowSeed(before1, before2 jv, diffs []byte, after2 jv) []byte {
	le32 := func(b []byte) []byte { return append(leN(4, uint64(len(b))), b...) }
	img := []byte{0} // null bitmap: nothing NULL
	img = append(img, leN(4, 7)...)
	img = append(img, le32(encodeJSONB(before1))...)
	img = append(img, le32(encodeJSONB(before2))...)
	img = append(img, 1, 1, 0) // PARTIAL_JSON_UPDATES, first JSON column partial, null bitmap
	img = append(img, leN(4, 7)...)
	img = append(img, le32(diffs)...)
	return append(img, le32(encodeJSONB(after2))...)
}

// FuzzDecodePartialUpdate decodes rows of partial JSON updates of random
// tables: errors are ErrCorruptRow (or ErrServerConfig for a diff whose
// before image lacks the column), never panics, and JSON values are valid.
func FuzzDecodePartialUpdate(f *testing.F) {
	cols := []Column{
		{BinlogType: 3 /* LONG */, Collation: collUTF8MB4},
		{BinlogType: 245 /* JSON */, Meta: 4, Collation: collUTF8MB4},
		{BinlogType: 245, Meta: 4, Collation: collUTF8MB4},
	}
	doc := sortedJV(jObj(false, "a", jArr(false, jInt(jsonbInt16, 1)), "b", jStr("x")))
	f.Add(append(fuzzHeader(cols, []byte{7}), partialRowSeed(doc, jArr(false),
		encodeDiffs(tdiff{jsonDiffReplace, "$.a[0]", jStr("y")}, tdiff{jsonDiffInsert, "$.c", jLit(jsonbTrue)}), jArr(false, jStr("z")))...))
	f.Add(append(fuzzHeader(cols, []byte{7}), partialRowSeed(doc, jLit(jsonbNull), nil, jLit(jsonbNull))...))
	f.Add(append(fuzzHeader(cols, []byte{5}), 0, 1, 0, 0, 0, 1, 1, 0, 1, 0, 0, 0, 0, 0, 0, 0))
	f.Fuzz(func(t *testing.T, in []byte) {
		tbl, present, data, ok := fuzzTable(in)
		if !ok {
			return
		}
		var d rowDecoder
		for rows := 0; len(data) > 0 && rows < 16; rows++ {
			before, n, err := d.decodeBeforePartial(tbl, data, present)
			if err == nil {
				data = data[n:]
				var after Row
				after, n, err = d.decodeAfterPartial(tbl, data, present, before)
				if err == nil {
					for i, v := range after {
						if v.Kind() == KindJSON && !json.Valid(v.Bytes()) {
							t.Fatalf("column %d: invalid JSON text %q", i, v.Bytes())
						}
					}
				}
			}
			if err != nil {
				if !errors.Is(err, ErrCorruptRow) && !errors.Is(err, ErrServerConfig) {
					t.Fatalf("error wraps neither ErrCorruptRow nor ErrServerConfig: %v", err)
				}
				return
			}
			if n == 0 {
				return
			}
			data = data[n:]
		}
	})
}

func TestDecodePartialRow(t *testing.T) {
	cols := []Column{
		{Name: "id", BinlogType: 3, Collation: collUTF8MB4},
		{Name: "j", BinlogType: 245, Meta: 4, Collation: collUTF8MB4},
		{Name: "k", BinlogType: 245, Meta: 4, Collation: collUTF8MB4},
	}
	tbl := resolved(t, cols...)
	doc := sortedJV(jObj(false, "a", jArr(false, jInt(jsonbInt16, 1)), "b", jStr("x")))
	data := partialRowSeed(doc, jArr(false), encodeDiffs(tdiff{jsonDiffReplace, "$.a[0]", jStr("y")}, tdiff{jsonDiffInsert, "$.c", jLit(jsonbTrue)}), jArr(false, jStr("z")))
	var d rowDecoder
	all := []byte{7}
	before, n, err := d.decodeBeforePartial(tbl, data, all)
	if err != nil {
		t.Fatal(err)
	}
	after, m, err := d.decodeAfterPartial(tbl, data[n:], all, before)
	if err != nil {
		t.Fatal(err)
	}
	if n+m != len(data) {
		t.Fatalf("decoded %d+%d of %d bytes", n, m, len(data))
	}
	if got := fmt.Sprint(after); got != `[7 {"a":["y"],"b":"x","c":true} ["z"]]` {
		t.Fatalf("after image %s", got)
	}
	if d.part.takeGrown() == 0 {
		t.Error("the rebuilt document's bytes are not counted")
	}

	// The before image lacks the document (binlog_row_image=MINIMAL).
	noDoc := slices.Clone(before)
	noDoc[1] = Value{}
	if _, _, err := d.decodeAfterPartial(tbl, data[n:], all, noDoc); !errors.Is(err, ErrServerConfig) || !strings.Contains(err.Error(), `column "j"`) {
		t.Errorf("absent before document: %v", err)
	}
	noDoc[1] = NullValue()
	if _, _, err := d.decodeAfterPartial(tbl, data[n:], all, noDoc); !errors.Is(err, ErrCorruptRow) {
		t.Errorf("NULL before document: %v", err)
	}
}
