package binlog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"strconv"
	"unsafe"

	"github.com/go-mysql-org/go-mysql/mysql"
)

// ErrCorruptRow is wrapped by every error reporting a row image that cannot
// be decoded: truncated, inconsistent with the table definition, or holding
// a value no server writes. Check for it with errors.Is.
var ErrCorruptRow = errors.New("binlog: corrupt row image")

// ColumnError reports a value of a row image that could not be decoded. It
// matches ErrCorruptRow with errors.Is, and the more precise cause (such as
// ErrCorruptJSON) when there is one.
type ColumnError struct {
	Table  string // schema.table
	Column string
	Index  int  // index of the column in the table
	Type   byte // the column's type code (Column.Type)
	Offset int  // byte offset of the value within the row image
	Reason string
	Err    error // underlying cause, may be nil
}

func (e *ColumnError) Error() string {
	return fmt.Sprintf("%v: %s column %d %q (%s) at offset %d: %s",
		ErrCorruptRow, e.Table, e.Index, e.Column, colTypeName(e.Type), e.Offset, e.Reason)
}

// Unwrap returns ErrCorruptRow and the underlying cause.
func (e *ColumnError) Unwrap() []error {
	if e.Err != nil {
		return []error{ErrCorruptRow, e.Err}
	}
	return []error{ErrCorruptRow}
}

// Arena sizes. A chunk's values live in slabs that are never reused, since
// a consumer may still hold earlier chunks. The first slabs of a chunk are
// sized after what the previous chunk used, so that a steady workload gets
// slabs that fit; past that, slabs double from the minimum up to the
// maximum. The maximums keep slabs within the allocator's small size
// classes (32 KiB), which are cheaper to allocate and free than large
// spans.
const (
	minValSlab = 64       // values
	maxValSlab = 816      // values (32 KiB)
	minBufSlab = 1 << 10  // bytes
	maxBufSlab = 32 << 10 // bytes
	// bigValue is the size above which a variable-length value gets its own
	// allocation instead of a place in the byte slab.
	bigValue = maxBufSlab / 2
	// maxDecimalText bounds the text of a DECIMAL(65,38): sign, 65 digits,
	// point, and a leading zero.
	maxDecimalText = 72
)

// rowDecoder decodes row images into Values without allocating per cell.
// Rows and the bytes of variable-length values are carved from slabs owned
// by the current chunk; reset starts a new chunk. Memory handed out is
// never written again, so rows stay valid for as long as the consumer
// holds them.
//
// A rowDecoder is not safe for concurrent use.
type rowDecoder struct {
	vals []Value // current value slab: len is used, cap is its size
	buf  []byte  // current byte slab

	valSizer, bufSizer slabSizer

	// arena records the slabs of the current chunk, so that they can be
	// reused once the consumer releases the chunk (Txn.Release); freeVals
	// and freeBufs hold slabs of released chunks.
	arena    *chunkArena
	freeVals [][]Value
	freeBufs [][]byte

	part partialState // set while a row of a partial JSON update is decoded
}

// partialState is what decoding a row of a PARTIAL_UPDATE_ROWS_EVENT
// needs beyond a plain image: the binary JSON documents of the before
// image, which the after image's diffs apply to.
type partialState struct {
	capture bool     // decoding the before image: keep raw
	raw     [][]byte // binary JSON of the before image's JSON columns (event bytes), by column
	bits    []byte   // decoding the after image: its partial bitmap, one bit per JSON column
	before  Row      // and the before image
	grown   int      // bytes of the documents rebuilt, for the reader's chunk budget
}

// takeGrown returns the bytes of documents rebuilt since the last call.
func (p *partialState) takeGrown() int {
	n := p.grown
	p.grown = 0
	return n
}

// chunkArena is the memory of one chunk: its value and byte slabs and its
// Changes slice.
type chunkArena struct {
	vals    [][]Value
	bufs    [][]byte
	changes []Change
}

// recycle makes the slabs of a released chunk available to later chunks.
func (d *rowDecoder) recycle(a *chunkArena) {
	d.freeVals = append(d.freeVals, a.vals...)
	d.freeBufs = append(d.freeBufs, a.bufs...)
	clear(a.vals)
	clear(a.bufs)
	a.vals, a.bufs = a.vals[:0], a.bufs[:0]
}

func (d *rowDecoder) newValSlab(n int) []Value {
	size := d.valSizer.next(n, minValSlab, maxValSlab)
	var slab []Value
	if k := len(d.freeVals); k > 0 && cap(d.freeVals[k-1]) >= n {
		slab = d.freeVals[k-1][:cap(d.freeVals[k-1])]
		d.freeVals[k-1] = nil
		d.freeVals = d.freeVals[:k-1]
		clear(slab) // slots must start zeroed (see setNum)
	} else {
		slab = make([]Value, size)
	}
	if d.arena != nil {
		d.arena.vals = append(d.arena.vals, slab)
	}
	return slab[:0]
}

func (d *rowDecoder) newBufSlab(n int) []byte {
	size := d.bufSizer.next(n, minBufSlab, maxBufSlab)
	var slab []byte
	if k := len(d.freeBufs); k > 0 && cap(d.freeBufs[k-1]) >= n {
		slab = d.freeBufs[k-1][:0]
		d.freeBufs[k-1] = nil
		d.freeBufs = d.freeBufs[:k-1]
	} else {
		slab = make([]byte, 0, size)
	}
	if d.arena != nil {
		d.arena.bufs = append(d.arena.bufs, slab[:0:cap(slab)])
	}
	return slab
}

// slabSizer chooses slab sizes for one arena.
type slabSizer struct {
	hint int // slab space the previous chunk used
	used int // slab space this chunk has used
	grow int // size of the next slab once the hint is spent
}

// next returns the size of a new slab that must hold at least n.
func (s *slabSizer) next(n, lo, hi int) int {
	size := s.hint - s.used
	if size < n {
		size = max(s.grow, lo)
		s.grow = min(2*size, hi)
	}
	return max(min(size, hi), n)
}

func (s *slabSizer) reset() {
	if s.used > 0 {
		s.hint = s.used
	}
	s.used, s.grow = 0, 0
}

// reset starts a new chunk: later rows never share memory with the rows
// decoded so far.
func (d *rowDecoder) reset() {
	d.vals, d.buf, d.arena = nil, nil, nil
	d.valSizer.reset()
	d.bufSizer.reset()
}

// allocRow returns n zeroed values that nothing else will write to.
func (d *rowDecoder) allocRow(n int) Row {
	if cap(d.vals)-len(d.vals) < n {
		d.vals = d.newValSlab(n)
	}
	s := len(d.vals)
	d.vals = d.vals[:s+n]
	d.valSizer.used += n
	return Row(d.vals[s : s+n : s+n])
}

// reserve makes room for n more bytes in the byte slab.
func (d *rowDecoder) reserve(n int) {
	if cap(d.buf)-len(d.buf) < n {
		d.buf = d.newBufSlab(n)
	}
}

// setNum and setBytes fill a slot of a value slab. Slots start zeroed and
// are written once, so a number is stored without touching the slice
// field: no GC write barrier on the hot path.
func setNum(v *Value, k Kind, n uint64) { v.kind, v.num = k, n }

func setBytes(v *Value, k Kind, b []byte) {
	v.kind, v.p, v.n = k, unsafe.SliceData(b), uint32(len(b))
	if v.p == nil && b != nil {
		v.p = &emptyBytes[:1][0] // an empty, non-nil value
	}
}

// emptyBytes is the value of empty strings: non-nil, and with no capacity
// for a consumer's append to write into.
var emptyBytes = make([]byte, 0, 1)

// copyBytes returns a copy of src that belongs to the current chunk.
func (d *rowDecoder) copyBytes(src []byte) []byte {
	n := len(src)
	if n == 0 || n > cap(d.buf)-len(d.buf) {
		return d.copyBytesSlow(src)
	}
	s := len(d.buf)
	d.buf = append(d.buf, src...)
	d.bufSizer.used += n
	return d.buf[s : s+n : s+n]
}

func (d *rowDecoder) copyBytesSlow(src []byte) []byte {
	n := len(src)
	if n == 0 {
		return emptyBytes
	}
	if n > bigValue {
		b := make([]byte, n)
		copy(b, src)
		return b
	}
	d.reserve(n)
	return d.copyBytes(src)
}

// copyPadded returns a copy of src right-padded with zero bytes to n bytes.
func (d *rowDecoder) copyPadded(src []byte, n int) []byte {
	var b []byte
	if n > bigValue {
		b = make([]byte, 0, n)
	} else {
		d.reserve(n)
		b = d.buf[len(d.buf):len(d.buf)]
		d.buf = d.buf[:len(d.buf)+n]
		d.bufSizer.used += n
	}
	b = append(b, src...)
	return append(b, make([]byte, n-len(src))...)[:n:n]
}

// decodeImage decodes one row image of table t from data: the null bitmap
// over the columns present in the image (those set in present, the
// columns bitmap of the rows event), then each present non-NULL value. It
// returns the row, aligned with t.Columns, and the number of bytes read.
// Columns not in the image are KindAbsent. Every column must have been
// resolved (Column.Resolve).
func (d *rowDecoder) decodeImage(t *Table, data []byte, present []byte) (row Row, n int, err error) {
	cols := t.Columns
	if len(present)*8 < len(cols) {
		return nil, 0, fmt.Errorf("%w: %s: columns bitmap of %d bytes for %d columns",
			ErrCorruptRow, t.QualifiedName(), len(present), len(cols))
	}
	// The null bitmap has one bit per present column.
	np := 0
	full := len(cols) >> 3
	for _, b := range present[:full] {
		np += bits.OnesCount8(b)
	}
	if rem := len(cols) & 7; rem != 0 {
		np += bits.OnesCount8(present[full] & (1<<rem - 1))
	}
	pos := (np + 7) >> 3
	if pos > len(data) {
		return nil, 0, fmt.Errorf("%w: %s: null bitmap of %d bytes, only %d left",
			ErrCorruptRow, t.QualifiedName(), pos, len(data))
	}
	nulls := data[:pos]

	row = d.allocRow(len(cols))
	ni := 0 // index in the null bitmap
	for i := range cols {
		if present[i>>3]&(1<<(i&7)) == 0 {
			continue // KindAbsent: the slab is zeroed
		}
		isNull := nulls[ni>>3]&(1<<(ni&7)) != 0
		ni++
		c := &cols[i]
		if c.Kind == KindAbsent {
			return nil, 0, fmt.Errorf("binlog: %s column %q has not been resolved (call Column.Resolve)",
				t.QualifiedName(), c.Name)
		}
		if isNull {
			row[i].kind = KindNull
			continue
		}
		rest := data[pos:]
		var w int // bytes of the value
		switch c.Type {
		case mysql.MYSQL_TYPE_LONG:
			if len(rest) < 4 {
				return nil, 0, d.short(t, i, pos, 4, len(rest))
			}
			u := binary.LittleEndian.Uint32(rest)
			if c.Unsigned {
				setNum(&row[i], KindUint, uint64(u))
			} else {
				setNum(&row[i], KindInt, uint64(int64(int32(u))))
			}
			w = 4
		case mysql.MYSQL_TYPE_TINY:
			if len(rest) < 1 {
				return nil, 0, d.short(t, i, pos, 1, len(rest))
			}
			if c.Unsigned {
				setNum(&row[i], KindUint, uint64(rest[0]))
			} else {
				setNum(&row[i], KindInt, uint64(int64(int8(rest[0]))))
			}
			w = 1
		case mysql.MYSQL_TYPE_SHORT:
			if len(rest) < 2 {
				return nil, 0, d.short(t, i, pos, 2, len(rest))
			}
			u := binary.LittleEndian.Uint16(rest)
			if c.Unsigned {
				setNum(&row[i], KindUint, uint64(u))
			} else {
				setNum(&row[i], KindInt, uint64(int64(int16(u))))
			}
			w = 2
		case mysql.MYSQL_TYPE_INT24:
			if len(rest) < 3 {
				return nil, 0, d.short(t, i, pos, 3, len(rest))
			}
			u := uint32(rest[0]) | uint32(rest[1])<<8 | uint32(rest[2])<<16
			if c.Unsigned {
				setNum(&row[i], KindUint, uint64(u))
			} else {
				setNum(&row[i], KindInt, uint64(int64(int32(u<<8)>>8)))
			}
			w = 3
		case mysql.MYSQL_TYPE_LONGLONG:
			if len(rest) < 8 {
				return nil, 0, d.short(t, i, pos, 8, len(rest))
			}
			u := binary.LittleEndian.Uint64(rest)
			if c.Unsigned {
				setNum(&row[i], KindUint, u)
			} else {
				setNum(&row[i], KindInt, u)
			}
			w = 8
		case mysql.MYSQL_TYPE_FLOAT:
			if len(rest) < 4 {
				return nil, 0, d.short(t, i, pos, 4, len(rest))
			}
			f := math.Float32frombits(binary.LittleEndian.Uint32(rest))
			setNum(&row[i], KindFloat, math.Float64bits(float64(f)))
			w = 4
		case mysql.MYSQL_TYPE_DOUBLE:
			if len(rest) < 8 {
				return nil, 0, d.short(t, i, pos, 8, len(rest))
			}
			setNum(&row[i], KindDouble, binary.LittleEndian.Uint64(rest))
			w = 8
		case mysql.MYSQL_TYPE_VARCHAR, mysql.MYSQL_TYPE_VAR_STRING:
			var l int
			if c.Meta < 256 {
				if len(rest) < 1 {
					return nil, 0, d.short(t, i, pos, 1, len(rest))
				}
				l, w = int(rest[0]), 1
			} else {
				if len(rest) < 2 {
					return nil, 0, d.short(t, i, pos, 2, len(rest))
				}
				l, w = int(binary.LittleEndian.Uint16(rest)), 2
			}
			if l > len(rest)-w {
				return nil, 0, d.short(t, i, pos, w+l, len(rest))
			}
			setBytes(&row[i], c.Kind, d.copyBytes(rest[w:w+l]))
			w += l
		case mysql.MYSQL_TYPE_BLOB, mysql.MYSQL_TYPE_GEOMETRY:
			var l int
			switch w = int(c.Meta); {
			case w == 2 && len(rest) >= 2:
				l = int(binary.LittleEndian.Uint16(rest))
			case w == 1 && len(rest) >= 1:
				l = int(rest[0])
			case w == 3 && len(rest) >= 3:
				l = int(rest[0]) | int(rest[1])<<8 | int(rest[2])<<16
			case w == 4 && len(rest) >= 4:
				l = int(binary.LittleEndian.Uint32(rest))
			default:
				_, _, err := d.lengthPrefixed(t, i, rest, pos) // reports the error
				return nil, 0, err
			}
			if l > len(rest)-w {
				return nil, 0, d.short(t, i, pos, w+l, len(rest))
			}
			setBytes(&row[i], c.Kind, d.copyBytes(rest[w:w+l]))
			w += l
		case mysql.MYSQL_TYPE_STRING:
			_, max := stringMeta(c.Meta)
			var l int
			if max < 256 {
				if len(rest) < 1 {
					return nil, 0, d.short(t, i, pos, 1, len(rest))
				}
				l, w = int(rest[0]), 1
			} else {
				if len(rest) < 2 {
					return nil, 0, d.short(t, i, pos, 2, len(rest))
				}
				l, w = int(binary.LittleEndian.Uint16(rest)), 2
			}
			if l > len(rest)-w {
				return nil, 0, d.short(t, i, pos, w+l, len(rest))
			}
			if c.Kind == KindBytes && l < max {
				// BINARY(n): the server strips the trailing 0x00 padding
				// from the binlog; put it back, as SELECT shows it.
				setBytes(&row[i], KindBytes, d.copyPadded(rest[w:w+l], max))
			} else {
				setBytes(&row[i], c.Kind, d.copyBytes(rest[w:w+l]))
			}
			w += l
		case mysql.MYSQL_TYPE_TIMESTAMP2:
			fsp := c.Frac
			if fsp < 0 || fsp > 6 {
				return nil, 0, d.corrupt(t, i, pos, "fractional-second precision "+strconv.Itoa(fsp), nil)
			}
			w = 4 + (fsp+1)/2
			if len(rest) < w {
				return nil, 0, d.short(t, i, pos, w, len(rest))
			}
			micro, ok := fracMicros(rest[4:w])
			if !ok {
				return nil, 0, d.corrupt(t, i, pos, "fractional seconds out of range", nil)
			}
			setNum(&row[i], KindTimestamp, TimestampValue(int64(binary.BigEndian.Uint32(rest)), micro).num)
		case mysql.MYSQL_TYPE_DATETIME2:
			fsp := c.Frac
			if fsp < 0 || fsp > 6 {
				return nil, 0, d.corrupt(t, i, pos, "fractional-second precision "+strconv.Itoa(fsp), nil)
			}
			w = 5 + (fsp+1)/2
			if len(rest) < w {
				return nil, 0, d.short(t, i, pos, w, len(rest))
			}
			micro, ok := fracMicros(rest[5:w])
			if !ok {
				return nil, 0, d.corrupt(t, i, pos, "fractional seconds out of range", nil)
			}
			v := be40(rest)
			if v < datetimeIntOffset {
				return nil, 0, d.corrupt(t, i, pos, "negative DATETIME", nil)
			}
			setNum(&row[i], KindDateTime, DateTimeValue(unpackDatetime(v-datetimeIntOffset, micro)).num)
		default:
			val, nw, err := d.decodeOther(t, i, rest, pos)
			if err != nil {
				return nil, 0, err
			}
			if val.p != nil {
				row[i].kind, row[i].p, row[i].n = val.kind, val.p, val.n
			} else {
				setNum(&row[i], val.kind, val.num)
			}
			w = nw
		}
		pos += w
	}
	return row, pos, nil
}

// decodeOther decodes the values of the less common types.
func (d *rowDecoder) decodeOther(t *Table, i int, rest []byte, pos int) (Value, int, error) {
	c := &t.Columns[i]
	need := func(n int) error {
		if len(rest) < n {
			return d.short(t, i, pos, n, len(rest))
		}
		return nil
	}
	switch c.Type {
	case mysql.MYSQL_TYPE_NEWDECIMAL:
		prec, scale := c.Precision, c.Frac
		if !validDecimal(prec, scale) {
			return Value{}, 0, d.corrupt(t, i, pos, fmt.Sprintf("DECIMAL(%d,%d)", prec, scale), nil)
		}
		w := decimalBinSize(prec, scale)
		if err := need(w); err != nil {
			return Value{}, 0, err
		}
		d.reserve(maxDecimalText)
		s := len(d.buf)
		out, err := appendDecimal(d.buf, rest[:w], prec, scale)
		if err != nil {
			return Value{}, 0, d.corrupt(t, i, pos, err.Error(), nil)
		}
		d.buf = out
		d.bufSizer.used += len(out) - s
		return BytesValue(KindDecimal, out[s:len(out):len(out)]), w, nil

	case mysql.MYSQL_TYPE_DATE, mysql.MYSQL_TYPE_NEWDATE:
		if err := need(3); err != nil {
			return Value{}, 0, err
		}
		u := uint32(rest[0]) | uint32(rest[1])<<8 | uint32(rest[2])<<16
		return DateValue(Date{Year: uint16(u >> 9), Month: uint8(u >> 5 & 15), Day: uint8(u & 31)}), 3, nil

	case mysql.MYSQL_TYPE_TIME2:
		fsp := c.Frac
		if fsp < 0 || fsp > 6 {
			return Value{}, 0, d.corrupt(t, i, pos, "fractional-second precision "+strconv.Itoa(fsp), nil)
		}
		w := 3 + (fsp+1)/2
		if err := need(w); err != nil {
			return Value{}, 0, err
		}
		us, ok := decodeTime2(rest[:w])
		if !ok {
			return Value{}, 0, d.corrupt(t, i, pos, "TIME value out of range", nil)
		}
		return TimeValue(us), w, nil

	case mysql.MYSQL_TYPE_TIMESTAMP:
		if err := need(4); err != nil {
			return Value{}, 0, err
		}
		return TimestampValue(int64(binary.LittleEndian.Uint32(rest)), 0), 4, nil

	case mysql.MYSQL_TYPE_DATETIME:
		// The pre-5.6.4 format: YYYYMMDDhhmmss as a little-endian integer.
		if err := need(8); err != nil {
			return Value{}, 0, err
		}
		v := binary.LittleEndian.Uint64(rest)
		ymd, hms := v/1000000, v%1000000
		year, month, day := ymd/10000, ymd/100%100, ymd%100
		hour, minute, second := hms/10000, hms/100%100, hms%100
		if year > 9999 || month > 12 || day > 31 || hour > 23 || minute > 59 || second > 59 {
			return Value{}, 0, d.corrupt(t, i, pos, "DATETIME value out of range", nil)
		}
		return DateTimeValue(DateTime{
			Date: Date{Year: uint16(year), Month: uint8(month), Day: uint8(day)},
			Hour: uint8(hour), Minute: uint8(minute), Second: uint8(second),
		}), 8, nil

	case mysql.MYSQL_TYPE_TIME:
		// The pre-5.6.4 format: [-]HHMMSS as a signed 3-byte integer.
		if err := need(3); err != nil {
			return Value{}, 0, err
		}
		v := int64(int32((uint32(rest[0])|uint32(rest[1])<<8|uint32(rest[2])<<16)<<8) >> 8)
		neg := v < 0
		if neg {
			v = -v
		}
		h, m, s := v/10000, v/100%100, v%100
		if m > 59 || s > 59 {
			return Value{}, 0, d.corrupt(t, i, pos, "TIME value out of range", nil)
		}
		us := ((h*60+m)*60 + s) * 1000000
		if neg {
			us = -us
		}
		return TimeValue(us), 3, nil

	case mysql.MYSQL_TYPE_YEAR:
		if err := need(1); err != nil {
			return Value{}, 0, err
		}
		y := uint64(rest[0])
		if y != 0 {
			y += 1900
		}
		return NumValue(KindYear, y), 1, nil

	case mysql.MYSQL_TYPE_ENUM:
		switch c.Meta & 0xFF {
		case 1:
			if err := need(1); err != nil {
				return Value{}, 0, err
			}
			return NumValue(KindEnum, uint64(rest[0])), 1, nil
		case 2:
			if err := need(2); err != nil {
				return Value{}, 0, err
			}
			return NumValue(KindEnum, uint64(binary.LittleEndian.Uint16(rest))), 2, nil
		}
		return Value{}, 0, d.corrupt(t, i, pos, fmt.Sprintf("ENUM stored in %d bytes", c.Meta&0xFF), nil)

	case mysql.MYSQL_TYPE_SET:
		w := int(c.Meta & 0xFF)
		if w < 1 || w > 8 {
			return Value{}, 0, d.corrupt(t, i, pos, fmt.Sprintf("SET stored in %d bytes", w), nil)
		}
		if err := need(w); err != nil {
			return Value{}, 0, err
		}
		var u uint64
		for k := w - 1; k >= 0; k-- {
			u = u<<8 | uint64(rest[k])
		}
		return NumValue(KindSet, u), w, nil

	case mysql.MYSQL_TYPE_BIT:
		if c.BitLen < 1 || c.BitLen > 64 {
			return Value{}, 0, d.corrupt(t, i, pos, fmt.Sprintf("BIT(%d)", c.BitLen), nil)
		}
		w := (c.BitLen + 7) / 8
		if err := need(w); err != nil {
			return Value{}, 0, err
		}
		var u uint64
		for _, b := range rest[:w] {
			u = u<<8 | uint64(b)
		}
		return NumValue(KindBit, u), w, nil

	case mysql.MYSQL_TYPE_JSON:
		body, w, err := d.lengthPrefixed(t, i, rest, pos)
		if err != nil {
			return Value{}, 0, err
		}
		if d.part.bits != nil && d.isPartial(t, i) {
			text, err := d.patchJSON(t, i, body, pos)
			return BytesValue(c.Kind, text), w, err
		}
		if d.part.capture {
			d.part.raw[i] = body
		}
		text, err := d.appendJSON(body)
		if err != nil {
			return Value{}, 0, d.corrupt(t, i, pos, err.Error(), err)
		}
		return BytesValue(c.Kind, text), w, nil

	case mysql.MYSQL_TYPE_VECTOR:
		body, w, err := d.lengthPrefixed(t, i, rest, pos)
		if err != nil {
			return Value{}, 0, err
		}
		if len(body)%4 != 0 {
			return Value{}, 0, d.corrupt(t, i, pos, fmt.Sprintf("VECTOR of %d bytes, not a whole number of 4-byte floats", len(body)), nil)
		}
		return BytesValue(KindVector, d.copyBytes(body)), w, nil

	case mysql.MYSQL_TYPE_NULL:
		return NullValue(), 0, nil
	}
	return Value{}, 0, d.corrupt(t, i, pos, "type code "+strconv.Itoa(int(c.Type))+" cannot be decoded", nil)
}

// lengthPrefixed reads a value with a little-endian length prefix of
// Column.Meta bytes (BLOB, GEOMETRY, JSON, VECTOR).
func (d *rowDecoder) lengthPrefixed(t *Table, i int, rest []byte, pos int) ([]byte, int, error) {
	var l uint64
	w := int(t.Columns[i].Meta)
	switch w {
	case 1:
		if len(rest) >= 1 {
			l = uint64(rest[0])
		}
	case 2:
		if len(rest) >= 2 {
			l = uint64(binary.LittleEndian.Uint16(rest))
		}
	case 3:
		if len(rest) >= 3 {
			l = uint64(rest[0]) | uint64(rest[1])<<8 | uint64(rest[2])<<16
		}
	case 4:
		if len(rest) >= 4 {
			l = uint64(binary.LittleEndian.Uint32(rest))
		}
	default:
		return nil, 0, d.corrupt(t, i, pos, fmt.Sprintf("length prefix of %d bytes", w), nil)
	}
	if len(rest) < w {
		return nil, 0, d.short(t, i, pos, w, len(rest))
	}
	if l > uint64(len(rest)-w) {
		return nil, 0, d.corrupt(t, i, pos, fmt.Sprintf("value of %d bytes, only %d left", l, len(rest)-w), nil)
	}
	return rest[w : w+int(l)], w + int(l), nil
}

// appendJSON converts a binary JSON document to text in the current chunk.
func (d *rowDecoder) appendJSON(body []byte) ([]byte, error) {
	est := 2*len(body) + 16
	if est > bigValue {
		out, err := appendJSONB(make([]byte, 0, est), body)
		if err != nil {
			return nil, err
		}
		return out[:len(out):len(out)], nil
	}
	d.reserve(est)
	s := len(d.buf)
	out, err := appendJSONB(d.buf, body)
	if err != nil {
		return nil, err // d.buf is unchanged; bytes past its length are free
	}
	// If the text outgrew the slab, append moved it (with a copy of the
	// slab) to a new array: values already handed out keep the old one.
	d.buf = out
	d.bufSizer.used += len(out) - s
	return out[s:len(out):len(out)], nil
}

// decodeBeforePartial decodes the before image of a row of a partial JSON
// update (PARTIAL_UPDATE_ROWS_EVENT) like decodeImage, and keeps the
// binary JSON of its JSON columns for decodeAfterPartial. The kept bytes
// are data's: they are valid until the event is done with.
func (d *rowDecoder) decodeBeforePartial(t *Table, data []byte, present []byte) (Row, int, error) {
	n := len(t.Columns)
	if cap(d.part.raw) < n {
		d.part.raw = make([][]byte, n)
	}
	d.part.raw = d.part.raw[:n]
	clear(d.part.raw)
	d.part.capture = true
	row, w, err := d.decodeImage(t, data, present)
	d.part.capture = false
	return row, w, err
}

// decodeAfterPartial decodes the after image of a row of a partial JSON
// update: binlog_row_value_options as a packed integer, with
// PARTIAL_JSON_UPDATES (bit 0) a bitmap with one bit per JSON column of
// the table (present in the image or not), then the image, in which a JSON
// column whose bit is set holds a diff vector. The diffs are applied to
// the document of before, decoded by decodeBeforePartial just before, so
// that the row holds whole documents, as an ordinary update does.
func (d *rowDecoder) decodeAfterPartial(t *Table, data []byte, present []byte, before Row) (Row, int, error) {
	opts, n, ok := packedLength(data)
	if !ok {
		return nil, 0, fmt.Errorf("%w: %s: partial update without binlog_row_value_options", ErrCorruptRow, t.QualifiedName())
	}
	if opts&1 != 0 { // PARTIAL_JSON_UPDATES
		jsonCols := 0
		for i := range t.Columns {
			if t.Columns[i].BinlogType == mysql.MYSQL_TYPE_JSON {
				jsonCols++
			}
		}
		nb := (jsonCols + 7) / 8
		if len(data)-n < nb {
			return nil, 0, fmt.Errorf("%w: %s: partial update bitmap of %d bytes, only %d left", ErrCorruptRow, t.QualifiedName(), nb, len(data)-n)
		}
		if nb > 0 {
			d.part.bits, d.part.before = data[n:n+nb], before
		}
		n += nb
	}
	row, w, err := d.decodeImage(t, data[n:], present)
	d.part.bits, d.part.before = nil, nil
	return row, n + w, err
}

// isPartial reports whether JSON column i of the after image being
// decoded holds a diff vector: the bit of its rank among the table's JSON
// columns.
func (d *rowDecoder) isPartial(t *Table, i int) bool {
	k := 0
	for j := range i {
		if t.Columns[j].BinlogType == mysql.MYSQL_TYPE_JSON {
			k++
		}
	}
	return k>>3 < len(d.part.bits) && d.part.bits[k>>3]&(1<<(k&7)) != 0
}

// patchJSON returns, in the current chunk, the text of column i's document
// in the before image with the diff vector diffs applied.
func (d *rowDecoder) patchJSON(t *Table, i int, diffs []byte, pos int) ([]byte, error) {
	c := &t.Columns[i]
	var b Value
	if i < len(d.part.before) {
		b = d.part.before[i]
	}
	switch b.Kind() {
	case KindAbsent:
		return nil, fmt.Errorf("%w: table %s column %q: the server logged this update as a partial JSON diff (binlog_row_value_options=PARTIAL_JSON) "+
			"but its before image lacks the column (binlog_row_image is MINIMAL or NOBLOB), so the new document cannot be rebuilt. "+
			"Run SET GLOBAL binlog_row_image = 'FULL' (or SET GLOBAL binlog_row_value_options = ''), then snapshot the table again: this change is not in the binlog whole",
			ErrServerConfig, t.QualifiedName(), c.Name)
	case KindNull:
		return nil, d.corrupt(t, i, pos, "a JSON diff for a column that was NULL", ErrCorruptJSON)
	}
	before := d.part.raw[i]
	est := 2*(len(before)+len(diffs)) + 16
	if est > bigValue {
		out, err := appendPatchedJSON(make([]byte, 0, est), before, diffs)
		if err != nil {
			return nil, d.corrupt(t, i, pos, err.Error(), err)
		}
		d.part.grown += len(out)
		return out[:len(out):len(out)], nil
	}
	d.reserve(est)
	s := len(d.buf)
	out, err := appendPatchedJSON(d.buf, before, diffs)
	if err != nil {
		return nil, d.corrupt(t, i, pos, err.Error(), err)
	}
	d.buf = out
	d.bufSizer.used += len(out) - s
	d.part.grown += len(out) - s
	return out[s:len(out):len(out)], nil
}

func (d *rowDecoder) short(t *Table, i, pos, need, have int) error {
	return d.corrupt(t, i, pos, fmt.Sprintf("value needs %d bytes, only %d left", need, have), nil)
}

func (d *rowDecoder) corrupt(t *Table, i, pos int, reason string, cause error) error {
	c := &t.Columns[i]
	return &ColumnError{
		Table: t.QualifiedName(), Column: c.Name, Index: i, Type: c.Type,
		Offset: pos, Reason: reason, Err: cause,
	}
}

// Temporal formats (MySQL 5.6.4+, see sql-common/my_time.cc).

const (
	datetimeIntOffset = 0x8000000000   // DATETIMEF_INT_OFS
	timeIntOffset     = 0x800000       // TIMEF_INT_OFS
	timeOffset        = 0x800000000000 // TIMEF_OFS
)

func be40(b []byte) int64 {
	return int64(b[0])<<32 | int64(b[1])<<24 | int64(b[2])<<16 | int64(b[3])<<8 | int64(b[4])
}

// fracMicros decodes the fractional-second bytes of TIME2, DATETIME2 and
// TIMESTAMP2 (0 to 3 bytes, big-endian, in units of 1/100 for one byte,
// 1/10000 for two, microseconds for three).
func fracMicros(b []byte) (uint32, bool) {
	switch len(b) {
	case 0:
		return 0, true
	case 1:
		return uint32(b[0]) * 10000, b[0] < 100
	case 2:
		v := uint32(b[0])<<8 | uint32(b[1])
		return v * 100, v < 10000
	default:
		v := uint32(b[0])<<16 | uint32(b[1])<<8 | uint32(b[2])
		return v, v < 1000000
	}
}

// unpackDatetime splits the integer part of a DATETIME2: 17 bits of
// year*13+month, 5 bits day, 5 bits hour, 6 bits minute, 6 bits second.
func unpackDatetime(v int64, micro uint32) DateTime {
	ymd := v >> 17
	ym := ymd >> 5
	hms := v & (1<<17 - 1)
	return DateTime{
		Date:   Date{Year: uint16(ym / 13), Month: uint8(ym % 13), Day: uint8(ymd & 31)},
		Hour:   uint8(hms >> 12),
		Minute: uint8(hms >> 6 & 63),
		Second: uint8(hms & 63),
		Micro:  micro,
	}
}

// decodeTime2 decodes a TIME2 value of 3 to 6 bytes to signed
// microseconds. Negative values store the fraction in reverse order for
// binary sorting, which the length-specific branches undo.
func decodeTime2(b []byte) (int64, bool) {
	var packed int64 // hms<<24 | microseconds, signed
	switch len(b) {
	case 3:
		packed = (int64(b[0])<<16 | int64(b[1])<<8 | int64(b[2]) - timeIntOffset) << 24
	case 4:
		intPart := int64(b[0])<<16 | int64(b[1])<<8 | int64(b[2]) - timeIntOffset
		frac := int64(b[3])
		if intPart < 0 && frac != 0 {
			intPart++
			frac -= 0x100
		}
		packed = intPart<<24 + frac*10000
	case 5:
		intPart := int64(b[0])<<16 | int64(b[1])<<8 | int64(b[2]) - timeIntOffset
		frac := int64(b[3])<<8 | int64(b[4])
		if intPart < 0 && frac != 0 {
			intPart++
			frac -= 0x10000
		}
		packed = intPart<<24 + frac*100
	default:
		packed = int64(b[0])<<40 | int64(b[1])<<32 | int64(b[2])<<24 | int64(b[3])<<16 |
			int64(b[4])<<8 | int64(b[5]) - timeOffset
	}
	return unpackTime(packed)
}

// unpackTime converts MySQL's packed time (hms<<24 | micro, negated for
// negative times) to signed microseconds.
func unpackTime(packed int64) (int64, bool) {
	neg := packed < 0
	if neg {
		packed = -packed
	}
	hms := packed >> 24
	micro := packed & (1<<24 - 1)
	h, m, s := hms>>12&1023, hms>>6&63, hms&63
	if micro >= 1000000 || m > 59 || s > 59 {
		return 0, false
	}
	us := ((h*60+m)*60+s)*1000000 + micro
	if neg {
		us = -us
	}
	return us, true
}

// Decimals (strings/decimal.cc, decimal2bin/bin2decimal): the digits are
// stored in groups of nine per four bytes, big-endian, the integer part's
// leading partial group and the fraction's trailing partial group in the
// fewest bytes that hold their digits. The sign bit of the first byte is
// inverted, and every byte of a negative number is inverted.

var dig2bytes = [10]int{0, 1, 1, 2, 2, 3, 3, 4, 4, 4}

var pow10u32 = [10]uint32{1, 10, 100, 1000, 10000, 100000, 1000000, 10000000, 100000000, 1000000000}

// decimalBinSize returns the size of a DECIMAL(prec, scale) value.
func decimalBinSize(prec, scale int) int {
	intg := prec - scale
	return intg/9*4 + dig2bytes[intg%9] + scale/9*4 + dig2bytes[scale%9]
}

// errDecimal reports a decimal digit group out of range.
var errDecimal = errors.New("decimal digit group out of range")

// appendDecimal appends the text of a binary DECIMAL(prec, scale) value:
// leading zeros trimmed, all scale digits kept, "-" for negative numbers
// (never for zero). b must hold exactly decimalBinSize(prec, scale) bytes
// and prec, scale must satisfy validDecimal (or validJSONDecimal).
func appendDecimal(dst, b []byte, prec, scale int) ([]byte, error) {
	var tmp [40]byte
	n := copy(tmp[:], b)
	if n == 0 || n != len(b) {
		return dst, errDecimal
	}
	neg := tmp[0]&0x80 == 0
	tmp[0] ^= 0x80
	if neg {
		for k := range n {
			tmp[k] = ^tmp[k]
		}
	}
	intg := prec - scale
	intg0, intg0x := intg/9, intg%9
	frac0, frac0x := scale/9, scale%9

	start := len(dst)
	if neg {
		dst = append(dst, '-')
	}
	p := 0
	started := false // a significant integer digit has been written
	if intg0x > 0 {
		sz := dig2bytes[intg0x]
		v := beUint32(tmp[p : p+sz])
		p += sz
		if v >= pow10u32[intg0x] {
			return dst[:start], errDecimal
		}
		if v != 0 {
			dst = strconv.AppendUint(dst, uint64(v), 10)
			started = true
		}
	}
	for range intg0 {
		v := binary.BigEndian.Uint32(tmp[p:])
		p += 4
		if v >= 1000000000 {
			return dst[:start], errDecimal
		}
		if started {
			dst = appendPadded(dst, v, 9)
		} else if v != 0 {
			dst = strconv.AppendUint(dst, uint64(v), 10)
			started = true
		}
	}
	nonzero := started
	if !started {
		dst = append(dst, '0')
	}
	if scale > 0 {
		dst = append(dst, '.')
		for range frac0 {
			v := binary.BigEndian.Uint32(tmp[p:])
			p += 4
			if v >= 1000000000 {
				return dst[:start], errDecimal
			}
			nonzero = nonzero || v != 0
			dst = appendPadded(dst, v, 9)
		}
		if frac0x > 0 {
			sz := dig2bytes[frac0x]
			v := beUint32(tmp[p : p+sz])
			if v >= pow10u32[frac0x] {
				return dst[:start], errDecimal
			}
			nonzero = nonzero || v != 0
			dst = appendPadded(dst, v, frac0x)
		}
	}
	if neg && !nonzero {
		// A negative zero (never written by a server): drop the sign.
		copy(dst[start:], dst[start+1:])
		dst = dst[:len(dst)-1]
	}
	return dst, nil
}

func beUint32(b []byte) uint32 {
	var v uint32
	for _, c := range b {
		v = v<<8 | uint32(c)
	}
	return v
}

// appendPadded appends v as exactly width decimal digits (v < 10^width).
func appendPadded(dst []byte, v uint32, width int) []byte {
	var d [10]byte
	for k := width - 1; k >= 0; k-- {
		d[k] = byte('0' + v%10)
		v /= 10
	}
	return append(dst, d[:width]...)
}
