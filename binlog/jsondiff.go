package binlog

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"log/slog"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/go-mysql-org/go-mysql/client"

	"github.com/sluice-cdc/sluice/position"
)

// Partial JSON updates (MySQL 8.0.3+, binlog_row_value_options=PARTIAL_JSON).
//
// An UPDATE that changes a JSON column only through JSON_SET, JSON_REPLACE
// and JSON_REMOVE is logged as a PARTIAL_UPDATE_ROWS_EVENT whose after
// image holds, for the columns flagged in its partial bitmap, a diff
// vector instead of the document (sql/json_diff.cc,
// Json_diff_vector::write_binary):
//
//	vector ::= length(uint32) diff*
//	diff   ::= operation(uint8) path-length(packed) path [value-length(packed) value]
//
// The operation is REPLACE (0), INSERT (1) or REMOVE (2); REMOVE has no
// value. The path is text as Json_path::to_string writes it ("$.a[1]",
// `$."key with space"`, "$.a[last]"); the value is a binary JSON document.
// The 4-byte length is the column's own length prefix (JSON columns have
// Meta 4). The diffs apply in order to the before image's document, with
// the rules of the replica's applier (apply_json_diffs): a path is followed
// exactly, without auto-wrapping; REPLACE needs the path to exist; INSERT
// needs its parent to exist and adds an object member that is not there
// yet, or inserts an array element at the index (past the end: appends);
// REMOVE needs the member or element to exist.
//
// sluice applies them without rebuilding the document: the before image's
// binary document is read lazily, and only the arrays and objects on a
// diff's path are expanded into nodes; everything else is rendered
// straight from the binary bytes. The text of the result is therefore the
// same as that of the whole document from a full image: members in the
// order MySQL stores them (by length, then by bytes), values rendered by
// the same code.

// JSON diff operations (enum_json_diff_operation).
const (
	jsonDiffReplace = 0
	jsonDiffInsert  = 1
	jsonDiffRemove  = 2
)

// jsonPathLeg is one leg of a diff's path: an object member, or an array
// cell counted from the start or (fromEnd, "last-N") from the end.
type jsonPathLeg struct {
	member  []byte // unescaped member name; nil for an array cell
	index   uint32
	fromEnd bool
	cell    bool
}

// jsonDiff is one operation of a diff vector.
type jsonDiff struct {
	op    byte
	path  []jsonPathLeg
	text  []byte // the path as logged, for error messages
	value []byte // binary JSON document (type byte first); nil for REMOVE
}

// maxDiffPathLegs bounds the legs of a path: a document nests at most 100
// levels, so a longer path can never match.
const maxDiffPathLegs = jsonMaxDepth + 1

// parseJSONDiffs parses a diff vector without its 4-byte length. Member
// names and values point into data.
func parseJSONDiffs(data []byte) ([]jsonDiff, error) {
	var diffs []jsonDiff
	for p := 0; p < len(data); {
		op := data[p]
		p++
		if op > jsonDiffRemove {
			return nil, jsonErr("JSON diff %d has unknown operation %d", len(diffs)+1, op)
		}
		plen, n, ok := packedLength(data[p:])
		if !ok || plen > uint64(len(data)-p-n) {
			return nil, jsonErr("JSON diff %d: path length out of bounds", len(diffs)+1)
		}
		p += n
		text := data[p : p+int(plen)]
		p += int(plen)
		legs, err := parseJSONPath(text)
		if err != nil {
			return nil, err
		}
		d := jsonDiff{op: op, path: legs, text: text}
		if op != jsonDiffRemove {
			vlen, n, ok := packedLength(data[p:])
			if !ok || vlen > uint64(len(data)-p-n) {
				return nil, jsonErr("JSON diff %d (%s): value length out of bounds", len(diffs)+1, text)
			}
			p += n
			if vlen == 0 {
				return nil, jsonErr("JSON diff %d (%s): empty value", len(diffs)+1, text)
			}
			d.value = data[p : p+int(vlen)]
			p += int(vlen)
		}
		diffs = append(diffs, d)
	}
	return diffs, nil
}

// packedLength reads a length in MySQL's packed-integer format
// (net_field_length): one byte below 251, else 0xfc, 0xfd or 0xfe
// followed by 2, 3 or 8 little-endian bytes. 0xfb (NULL) and 0xff are
// not lengths.
func packedLength(b []byte) (v uint64, n int, ok bool) {
	if len(b) == 0 {
		return 0, 0, false
	}
	switch c := b[0]; {
	case c < 0xfb:
		return uint64(c), 1, true
	case c == 0xfc && len(b) >= 3:
		return uint64(binary.LittleEndian.Uint16(b[1:])), 3, true
	case c == 0xfd && len(b) >= 4:
		return uint64(b[1]) | uint64(b[2])<<8 | uint64(b[3])<<16, 4, true
	case c == 0xfe && len(b) >= 9:
		return binary.LittleEndian.Uint64(b[1:]), 9, true
	}
	return 0, 0, false
}

// isPathSpace reports the bytes MySQL's path parser skips as whitespace.
func isPathSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r'
}

// parseJSONPath parses a path as MySQL writes it into a diff: "$" then
// member legs (".name", `."quoted name"`) and array cells ("[3]",
// "[last]", "[last-2]"), with optional whitespace between tokens as
// MySQL's parser allows. Wildcards, "**" and ranges, which a diff never
// holds, are errors.
func parseJSONPath(s []byte) ([]jsonPathLeg, error) {
	bad := func(what string) error { return jsonErr("JSON diff path %q: %s", s, what) }
	i := 0
	skip := func() {
		for i < len(s) && isPathSpace(s[i]) {
			i++
		}
	}
	skip()
	if i == len(s) || s[i] != '$' {
		return nil, bad("does not start with $")
	}
	i++
	var legs []jsonPathLeg
	for skip(); i < len(s); skip() {
		if len(legs) == maxDiffPathLegs {
			return nil, bad("too many legs")
		}
		switch s[i] {
		case '.':
			i++
			skip()
			if i == len(s) {
				return nil, bad("ends after '.'")
			}
			var name []byte
			var err error
			if s[i] == '"' {
				end := quotedEnd(s, i)
				if end < 0 {
					return nil, bad("unterminated quoted member name")
				}
				name, err = unescapeJSONString(s[i+1 : end-1])
				i = end
			} else {
				start := i
				for i < len(s) && !isPathSpace(s[i]) && s[i] != '[' && s[i] != '.' && s[i] != '*' {
					i++
				}
				if i == start {
					return nil, bad("wildcard or empty member name")
				}
				// An unquoted name may hold escapes too (MySQL unescapes
				// it), and must then be an identifier.
				if name, err = unescapeJSONString(s[start:i]); err == nil && !pathIdentifier(name) {
					return nil, bad("unquoted member name is not an identifier")
				}
			}
			if err != nil {
				return nil, bad(err.Error())
			}
			if name == nil {
				name = []byte{}
			}
			legs = append(legs, jsonPathLeg{member: name})
		case '[':
			i++
			skip()
			leg := jsonPathLeg{cell: true}
			number := true
			if bytes.HasPrefix(s[i:], []byte("last")) {
				i += 4
				leg.fromEnd = true
				skip()
				// "last" alone, or "last-N".
				if number = i < len(s) && s[i] == '-'; number {
					i++
					skip()
				}
			}
			if number {
				start := i
				var v uint64
				for i < len(s) && s[i] >= '0' && s[i] <= '9' && v <= 1<<32 {
					v = v*10 + uint64(s[i]-'0')
					i++
				}
				if i == start {
					return nil, bad("array index is not a number")
				}
				if v > 1<<32-1 {
					return nil, bad("array index out of range")
				}
				leg.index = uint32(v)
			}
			skip()
			if i == len(s) || s[i] != ']' {
				return nil, bad("array cell not closed (wildcards and ranges do not occur in diffs)")
			}
			i++
			legs = append(legs, leg)
		default:
			return nil, bad("unexpected character (wildcards do not occur in diffs)")
		}
	}
	return legs, nil
}

// pathIdentifier reports whether name may stand unquoted in a path: an
// ECMAScript identifier (letters, digits, '_' and '$', not starting with a
// digit). Non-ASCII characters are accepted: MySQL quotes what it is
// unsure of, and its own test of Unicode letters is not reproduced here.
func pathIdentifier(name []byte) bool {
	if len(name) == 0 || name[0] >= '0' && name[0] <= '9' {
		return false
	}
	for _, c := range name {
		if c < 0x80 && !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '$') {
			return false
		}
	}
	return true
}

// quotedEnd returns the index just past the closing quote of the quoted
// string starting at s[i], or -1.
func quotedEnd(s []byte, i int) int {
	for j := i + 1; j < len(s); j++ {
		switch s[j] {
		case '\\':
			j++
		case '"':
			return j + 1
		}
	}
	return -1
}

// unescapeJSONString decodes the escapes of a JSON string body (without
// its quotes). It returns s itself when there are none.
func unescapeJSONString(s []byte) ([]byte, error) {
	k := bytes.IndexByte(s, '\\')
	if k < 0 {
		if bytes.IndexByte(s, '"') >= 0 {
			return nil, fmt.Errorf("unescaped quote in a member name")
		}
		return s, nil
	}
	out := append(make([]byte, 0, len(s)), s[:k]...)
	for i := k; i < len(s); i++ {
		c := s[i]
		if c == '"' {
			return nil, fmt.Errorf("unescaped quote in a member name")
		}
		if c != '\\' {
			out = append(out, c)
			continue
		}
		i++
		if i == len(s) {
			return nil, fmt.Errorf("member name ends with a backslash")
		}
		switch s[i] {
		case '"', '\\', '/':
			out = append(out, s[i])
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			r, ok := hex4(s[i+1:])
			if !ok {
				return nil, fmt.Errorf("bad \\u escape in a member name")
			}
			i += 4
			if utf16.IsSurrogate(r) {
				// A high surrogate must be followed by an escaped low one.
				lo, ok := rune(0), false
				if r < 0xdc00 && i+2 < len(s) && s[i+1] == '\\' && s[i+2] == 'u' {
					lo, ok = hex4(s[i+3:])
				}
				if !ok || lo < 0xdc00 || lo > 0xdfff {
					return nil, fmt.Errorf("unpaired surrogate escape in a member name")
				}
				r = utf16.DecodeRune(r, lo)
				i += 6
			}
			out = utf8.AppendRune(out, r)
		default:
			return nil, fmt.Errorf("bad escape \\%c in a member name", s[i])
		}
	}
	return out, nil
}

func hex4(b []byte) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	var r rune
	for _, c := range b[:4] {
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return r, true
}

// jnode is a value of a document being patched. Until expanded it is the
// binary value itself: its type and bytes (for an inlined scalar, the
// bytes of its value entry). An expanded array or object holds its
// elements (and member names) as nodes. A node is 40 bytes: expanding an
// array of n elements costs 40n bytes, some 13 times the 3 bytes of its
// smallest entries, once per patched row.
type jnode struct {
	t    byte
	inl  bool // inlined scalar: data is the value entry's bytes
	data []byte
	c    *jcontainer // set once expanded
}

type jcontainer struct {
	keys [][]byte // member names of an object
	kids []jnode
}

func (n *jnode) isObject() bool { return n.t == jsonbSmallObject || n.t == jsonbLargeObject }
func (n *jnode) isArray() bool  { return n.t == jsonbSmallArray || n.t == jsonbLargeArray }

// expand turns a binary array or object into nodes, with the checks the
// renderer makes (bounds of the header, of every key and of every value).
func (j *jsonbDecoder) expand(n *jnode) error {
	if n.c != nil || (!n.isObject() && !n.isArray()) {
		return nil
	}
	large := n.t == jsonbLargeObject || n.t == jsonbLargeArray
	object := n.isObject()
	data := n.data
	osz := 2
	if large {
		osz = 4
	}
	if len(data) < 2*osz {
		return jsonErr("truncated header")
	}
	count, size := readJSONBOffset(data, large), readJSONBOffset(data[osz:], large)
	if size > uint64(len(data)) {
		return jsonErr("size %d exceeds the %d bytes available", size, len(data))
	}
	data = data[:size]
	keyEntry, valEntry := uint64(osz+2), uint64(1+osz)
	hdr := 2*uint64(osz) + count*valEntry
	if object {
		hdr += count * keyEntry
	}
	if hdr > size {
		return jsonErr("%d entries do not fit in %d bytes", count, size)
	}
	if err := j.spend(int(hdr)); err != nil {
		return err
	}
	cnt := int(count)
	c := &jcontainer{kids: make([]jnode, cnt)}
	valStart := 2 * osz
	if object {
		c.keys = make([][]byte, cnt)
		valStart += cnt * int(keyEntry)
	}
	for i := range cnt {
		if object {
			e := 2*osz + i*int(keyEntry)
			koff := readJSONBOffset(data[e:], large)
			klen := uint64(binary.LittleEndian.Uint16(data[e+osz:]))
			if koff < hdr || koff+klen > size {
				return jsonErr("key %d out of bounds", i)
			}
			c.keys[i] = data[koff : koff+klen]
		}
		e := valStart + i*int(valEntry)
		vt := data[e]
		if inlined(vt, large) {
			c.kids[i] = jnode{t: vt, data: data[e+1 : e+1+osz], inl: true}
			continue
		}
		off := readJSONBOffset(data[e+1:], large)
		if off < hdr || off >= size {
			return jsonErr("value %d out of bounds", i)
		}
		c.kids[i] = jnode{t: vt, data: data[off:]}
	}
	n.c = c
	return nil
}

// render appends the text of a node, as appendJSONB renders the same
// value.
func (j *jsonbDecoder) render(dst []byte, n *jnode, depth int) ([]byte, error) {
	if n.c == nil {
		if n.inl {
			return appendJSONScalar(dst, n.t, n.data)
		}
		return j.value(dst, n.t, n.data, depth)
	}
	if depth >= jsonMaxDepth {
		return dst, jsonErr("nested deeper than %d levels", jsonMaxDepth)
	}
	object := n.isObject()
	if object {
		dst = append(dst, '{')
	} else {
		dst = append(dst, '[')
	}
	var err error
	c := n.c
	for i := range c.kids {
		if i > 0 {
			dst = append(dst, ',')
		}
		if object {
			if err := j.spend(len(c.keys[i])); err != nil {
				return dst, err
			}
			if dst, err = appendJSONString(dst, c.keys[i], "a key"); err != nil {
				return dst, err
			}
			dst = append(dst, ':')
		}
		if dst, err = j.render(dst, &c.kids[i], depth+1); err != nil {
			return dst, err
		}
	}
	if object {
		return append(dst, '}'), nil
	}
	return append(dst, ']'), nil
}

// cellIndex resolves an array cell leg against an array of n elements as
// MySQL's Json_array_index does: the position (clamped to [0, n]) and
// whether it is within the array.
func cellIndex(l *jsonPathLeg, n int) (pos int, within bool) {
	idx := uint64(l.index)
	within = idx < uint64(n)
	switch {
	case !l.fromEnd:
		return int(min(idx, uint64(n))), within
	case within:
		return n - int(idx) - 1, true
	}
	return 0, false
}

// memberIndex finds a member of an expanded object: its index and true,
// or where a new member of that name goes in MySQL's order (shorter names
// first, then by bytes) and false.
func memberIndex(c *jcontainer, name []byte) (int, bool) {
	at := len(c.keys)
	for i, k := range c.keys {
		if len(k) == len(name) && bytes.Equal(k, name) {
			return i, true
		}
		if at == len(c.keys) && (len(k) > len(name) || len(k) == len(name) && bytes.Compare(k, name) > 0) {
			at = i
		}
	}
	return at, false
}

// seek follows legs from n exactly (no auto-wrapping), expanding the
// containers on the way; nil when the path does not exist.
func (j *jsonbDecoder) seek(n *jnode, legs []jsonPathLeg) (*jnode, error) {
	for k := range legs {
		l := &legs[k]
		if err := j.expand(n); err != nil {
			return nil, err
		}
		switch {
		case n.isArray() && l.cell:
			pos, ok := cellIndex(l, len(n.c.kids))
			if !ok {
				return nil, nil
			}
			n = &n.c.kids[pos]
		case n.isObject() && !l.cell:
			i, ok := memberIndex(n.c, l.member)
			if !ok {
				return nil, nil
			}
			n = &n.c.kids[i]
		default:
			return nil, nil
		}
	}
	return n, nil
}

// apply applies one diff to the document rooted at root.
func (j *jsonbDecoder) apply(root *jnode, d *jsonDiff) error {
	if len(d.path) == 0 {
		return jsonErr("JSON diff on the whole document (%s)", d.text)
	}
	var val jnode
	if d.op != jsonDiffRemove {
		val = jnode{t: d.value[0], data: d.value[1:]}
	}
	last := &d.path[len(d.path)-1]
	if d.op == jsonDiffReplace {
		n, err := j.seek(root, d.path)
		if err != nil {
			return err
		}
		if n == nil {
			return jsonErr("JSON diff cannot be applied: REPLACE at %s, which the document does not have", d.text)
		}
		*n = val
		return nil
	}
	parent, err := j.seek(root, d.path[:len(d.path)-1])
	if err != nil {
		return err
	}
	if parent != nil {
		if err := j.expand(parent); err != nil {
			return err
		}
	}
	op := [...]string{"REPLACE", "INSERT", "REMOVE"}[d.op]
	switch {
	case parent == nil:
		return jsonErr("JSON diff cannot be applied: %s at %s, whose parent the document does not have", op, d.text)
	case parent.isObject() && !last.cell:
		c := parent.c
		i, ok := memberIndex(c, last.member)
		if d.op == jsonDiffInsert {
			if ok {
				return jsonErr("JSON diff cannot be applied: INSERT at %s, which the document already has", d.text)
			}
			c.keys = insertAt(c.keys, i, last.member)
			c.kids = insertAt(c.kids, i, val)
			return nil
		}
		if !ok {
			return jsonErr("JSON diff cannot be applied: REMOVE at %s, which the document does not have", d.text)
		}
		c.keys = append(c.keys[:i], c.keys[i+1:]...)
		c.kids = append(c.kids[:i], c.kids[i+1:]...)
		return nil
	case parent.isArray() && last.cell:
		c := parent.c
		pos, within := cellIndex(last, len(c.kids))
		if d.op == jsonDiffInsert {
			c.kids = insertAt(c.kids, pos, val)
			return nil
		}
		if !within {
			return jsonErr("JSON diff cannot be applied: REMOVE at %s, past the end of the array", d.text)
		}
		c.kids = append(c.kids[:pos], c.kids[pos+1:]...)
		return nil
	}
	return jsonErr("JSON diff cannot be applied: %s at %s, whose parent is not an object or array of that kind", op, d.text)
}

func insertAt[T any](s []T, i int, v T) []T {
	var zero T
	s = append(s, zero)
	copy(s[i+1:], s[i:])
	s[i] = v
	return s
}

// appendPatchedJSON appends the JSON text of the binary document before
// with the diff vector diffs (without its length prefix) applied. The
// work is bounded by the sizes of both: only containers on the diffs'
// paths are expanded, and rendering spends a budget of their bytes.
func appendPatchedJSON(dst, before, diffs []byte) ([]byte, error) {
	ds, err := parseJSONDiffs(diffs)
	if err != nil {
		return dst, err
	}
	if len(ds) == 0 {
		return appendJSONB(dst, before)
	}
	if len(before) == 0 {
		return dst, jsonErr("JSON diff on an empty document")
	}
	budget := len(before) - 1
	for i := range ds {
		budget += len(ds[i].value) + len(ds[i].text) // inserted members' names come from paths
	}
	j := jsonbDecoder{budget: budget}
	root := jnode{t: before[0], data: before[1:]}
	for i := range ds {
		if err := j.apply(&root, &ds[i]); err != nil {
			return dst, err
		}
	}
	return j.render(dst, &root, 0)
}

// warnPartialJSON warns, at startup, when a MySQL server logs partial JSON
// updates (binlog_row_value_options=PARTIAL_JSON) with before images that
// lack the documents the diffs apply to (binlog_row_image=MINIMAL): the
// reader stops with ErrServerConfig at the first such update. Sessions
// may set either variable for themselves; this looks at the global values.
func warnPartialJSON(c *client.Conn, info ServerInfo, log *slog.Logger) {
	if info.Flavor != position.MySQL || info.BinlogRowImage != "MINIMAL" {
		return
	}
	rs, err := c.Execute("SELECT @@GLOBAL.binlog_row_value_options")
	if err != nil {
		return
	}
	defer rs.Close()
	if opts := resultString(rs, 0, 0); strings.Contains(strings.ToUpper(opts), "PARTIAL_JSON") {
		log.Warn("binlog_row_value_options=PARTIAL_JSON with binlog_row_image=MINIMAL: an UPDATE through JSON_SET, JSON_REPLACE or JSON_REMOVE is logged as a diff "+
			"whose document the before image lacks, and stops the stream; run SET GLOBAL binlog_row_image = 'FULL' (or SET GLOBAL binlog_row_value_options = '')",
			"binlog_row_value_options", opts, "binlog_row_image", info.BinlogRowImage)
	}
}
