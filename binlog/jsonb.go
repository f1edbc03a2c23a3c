package binlog

import (
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strconv"

	"github.com/go-mysql-org/go-mysql/mysql"

	"github.com/sluice-cdc/sluice/internal/jsonstr"
)

// ErrCorruptJSON is wrapped by the errors of the binary JSON decoder.
var ErrCorruptJSON = errors.New("binlog: corrupt binary JSON")

// MySQL's binary JSON format (sql-common/json_binary.h):
//
//	doc     ::= type value
//	object  ::= count size key-entry* value-entry* key* value*
//	array   ::= count size value-entry* value*
//	key-entry   ::= key-offset key-length(uint16)
//	value-entry ::= type offset-or-inlined-value
//
// count, size and offsets are uint16 in the small forms and uint32 in the
// large ones, little-endian, offsets relative to the start of the object
// or array (after its type byte). Literals and 16-bit integers are inlined
// in the value entry, and so are 32-bit integers in the large forms.
const (
	jsonbSmallObject = 0x00
	jsonbLargeObject = 0x01
	jsonbSmallArray  = 0x02
	jsonbLargeArray  = 0x03
	jsonbLiteral     = 0x04
	jsonbInt16       = 0x05
	jsonbUint16      = 0x06
	jsonbInt32       = 0x07
	jsonbUint32      = 0x08
	jsonbInt64       = 0x09
	jsonbUint64      = 0x0a
	jsonbDouble      = 0x0b
	jsonbString      = 0x0c
	jsonbOpaque      = 0x0f

	jsonbNull  = 0x00
	jsonbTrue  = 0x01
	jsonbFalse = 0x02

	// jsonMaxDepth is MySQL's JSON_DOCUMENT_MAX_DEPTH: arrays and objects
	// nest at most this deep.
	jsonMaxDepth = 100
)

// appendJSONB appends the JSON text of the binary JSON document data to
// dst, the way MySQL prints it but without insignificant spaces: object
// members in stored order, doubles as MySQL writes them (shortest
// round-trip digits, integral ones with ".0", see appendJSONDouble),
// opaque DECIMALs as numbers, opaque DATE, TIME, DATETIME and TIMESTAMP
// values as quoted strings with six fractional digits, and other opaque values as "base64:typeN:...". An
// empty document is the JSON null literal, as in MySQL.
//
// Corrupt input returns an error wrapping ErrCorruptJSON, never a panic.
// Nesting is limited to 100 levels, and the text produced is bounded by a
// small multiple of the input size even when offsets of a corrupt document
// point several entries at the same bytes.
func appendJSONB(dst []byte, data []byte) ([]byte, error) {
	if len(data) == 0 {
		return append(dst, "null"...), nil
	}
	j := jsonbDecoder{budget: len(data) - 1}
	return j.value(dst, data[0], data[1:], 0)
}

type jsonbDecoder struct {
	// budget is the number of input bytes not yet accounted for. The parts
	// of a well-formed document do not overlap, so decoding one consumes
	// at most its size; a document whose entries share bytes runs out.
	budget int
}

func jsonErr(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrCorruptJSON}, args...)...)
}

// appendJSONString appends s quoted. MySQL's JSON holds only valid
// utf8mb4, so a string or key (what names which) that is not valid UTF-8
// is a corrupt event: an error, never a silent replacement.
func appendJSONString(dst, s []byte, what string) ([]byte, error) {
	dst, ok := jsonstr.AppendValid(dst, s)
	if !ok {
		return dst, jsonErr("%s is not valid UTF-8 (MySQL stores JSON as utf8mb4)", what)
	}
	return dst, nil
}

func (j *jsonbDecoder) spend(n int) error {
	j.budget -= n
	if j.budget < 0 {
		return jsonErr("values overlap")
	}
	return nil
}

// value appends the value of type t stored at the start of data; depth is
// the number of arrays and objects around it.
func (j *jsonbDecoder) value(dst []byte, t byte, data []byte, depth int) ([]byte, error) {
	switch t {
	case jsonbSmallObject, jsonbLargeObject, jsonbSmallArray, jsonbLargeArray:
		return j.container(dst, t, data, depth)
	case jsonbLiteral, jsonbInt16, jsonbUint16:
		if err := j.spend(scalarSize(t)); err != nil {
			return dst, err
		}
		return appendJSONScalar(dst, t, data)
	case jsonbInt32, jsonbUint32, jsonbInt64, jsonbUint64, jsonbDouble:
		if err := j.spend(scalarSize(t)); err != nil {
			return dst, err
		}
		return appendJSONScalar(dst, t, data)
	case jsonbString:
		l, n, err := jsonbVarLen(data)
		if err != nil {
			return dst, err
		}
		if err := j.spend(n + l); err != nil {
			return dst, err
		}
		return appendJSONString(dst, data[n:n+l], "a string")
	case jsonbOpaque:
		if len(data) < 1 {
			return dst, jsonErr("truncated opaque value")
		}
		l, n, err := jsonbVarLen(data[1:])
		if err != nil {
			return dst, err
		}
		if err := j.spend(1 + n + l); err != nil {
			return dst, err
		}
		return appendJSONOpaque(dst, data[0], data[1+n:1+n+l])
	}
	return dst, jsonErr("unknown value type 0x%02x", t)
}

// scalarSize returns the stored size of a fixed-size scalar.
func scalarSize(t byte) int {
	switch t {
	case jsonbLiteral:
		return 1
	case jsonbInt16, jsonbUint16:
		return 2
	case jsonbInt32, jsonbUint32:
		return 4
	}
	return 8
}

// appendJSONScalar appends a literal, integer or double.
func appendJSONScalar(dst []byte, t byte, data []byte) ([]byte, error) {
	if len(data) < scalarSize(t) {
		return dst, jsonErr("truncated value of type 0x%02x", t)
	}
	switch t {
	case jsonbLiteral:
		switch data[0] {
		case jsonbNull:
			return append(dst, "null"...), nil
		case jsonbTrue:
			return append(dst, "true"...), nil
		case jsonbFalse:
			return append(dst, "false"...), nil
		}
		return dst, jsonErr("unknown literal 0x%02x", data[0])
	case jsonbInt16:
		return strconv.AppendInt(dst, int64(int16(binary.LittleEndian.Uint16(data))), 10), nil
	case jsonbUint16:
		return strconv.AppendUint(dst, uint64(binary.LittleEndian.Uint16(data)), 10), nil
	case jsonbInt32:
		return strconv.AppendInt(dst, int64(int32(binary.LittleEndian.Uint32(data))), 10), nil
	case jsonbUint32:
		return strconv.AppendUint(dst, uint64(binary.LittleEndian.Uint32(data)), 10), nil
	case jsonbInt64:
		return strconv.AppendInt(dst, int64(binary.LittleEndian.Uint64(data)), 10), nil
	case jsonbUint64:
		return strconv.AppendUint(dst, binary.LittleEndian.Uint64(data), 10), nil
	default: // jsonbDouble
		return appendJSONDouble(dst, math.Float64frombits(binary.LittleEndian.Uint64(data)))
	}
}

// inlined reports whether values of type t are stored in the value entry.
func inlined(t byte, large bool) bool {
	switch t {
	case jsonbLiteral, jsonbInt16, jsonbUint16:
		return true
	case jsonbInt32, jsonbUint32:
		return large
	}
	return false
}

func (j *jsonbDecoder) container(dst []byte, t byte, data []byte, depth int) ([]byte, error) {
	if depth >= jsonMaxDepth {
		return dst, jsonErr("nested deeper than %d levels", jsonMaxDepth)
	}
	large := t == jsonbLargeObject || t == jsonbLargeArray
	object := t == jsonbSmallObject || t == jsonbLargeObject
	osz := 2
	if large {
		osz = 4
	}
	if len(data) < 2*osz {
		return dst, jsonErr("truncated header")
	}
	count, size := readJSONBOffset(data, large), readJSONBOffset(data[osz:], large)
	if size > uint64(len(data)) {
		return dst, jsonErr("size %d exceeds the %d bytes available", size, len(data))
	}
	data = data[:size]
	keyEntry, valEntry := uint64(osz+2), uint64(1+osz)
	hdr := 2*uint64(osz) + count*valEntry
	if object {
		hdr += count * keyEntry
	}
	if hdr > size {
		return dst, jsonErr("%d entries do not fit in %d bytes", count, size)
	}
	if err := j.spend(int(hdr)); err != nil {
		return dst, err
	}
	n := int(count)
	valStart := 2 * osz
	if object {
		valStart += n * int(keyEntry)
		dst = append(dst, '{')
	} else {
		dst = append(dst, '[')
	}
	for i := range n {
		if i > 0 {
			dst = append(dst, ',')
		}
		if object {
			e := 2*osz + i*int(keyEntry)
			koff := readJSONBOffset(data[e:], large)
			klen := uint64(binary.LittleEndian.Uint16(data[e+osz:]))
			if koff < hdr || koff+klen > size {
				return dst, jsonErr("key %d out of bounds", i)
			}
			if err := j.spend(int(klen)); err != nil {
				return dst, err
			}
			var err error
			if dst, err = appendJSONString(dst, data[koff:koff+klen], "a key"); err != nil {
				return dst, err
			}
			dst = append(dst, ':')
		}
		e := valStart + i*int(valEntry)
		vt := data[e]
		var err error
		if inlined(vt, large) {
			dst, err = appendJSONScalar(dst, vt, data[e+1:e+1+osz])
		} else {
			off := readJSONBOffset(data[e+1:], large)
			if off < hdr || off >= size {
				return dst, jsonErr("value %d out of bounds", i)
			}
			dst, err = j.value(dst, vt, data[off:], depth+1)
		}
		if err != nil {
			return dst, err
		}
	}
	if object {
		return append(dst, '}'), nil
	}
	return append(dst, ']'), nil
}

func readJSONBOffset(b []byte, large bool) uint64 {
	if large {
		return uint64(binary.LittleEndian.Uint32(b))
	}
	return uint64(binary.LittleEndian.Uint16(b))
}

// jsonbVarLen reads the length prefix of strings and opaque values: 7 bits
// per byte, least significant first, high bit set on all but the last
// byte, at most 5 bytes, at most 2^32-1. It checks that the length fits in
// what follows the prefix.
func jsonbVarLen(b []byte) (length, n int, err error) {
	var l uint64
	for i := 0; i < 5 && i < len(b); i++ {
		l |= uint64(b[i]&0x7f) << (7 * i)
		if b[i]&0x80 == 0 {
			if l > math.MaxUint32 || l > uint64(len(b)-i-1) {
				return 0, 0, jsonErr("length %d exceeds the %d bytes available", l, len(b)-i-1)
			}
			return int(l), i + 1, nil
		}
	}
	return 0, 0, jsonErr("bad variable-length prefix")
}

// appendJSONDouble appends a double as MySQL writes it in a JSON
// document's text (my_gcvt with the JSON field width), so that the binlog's
// binary JSON reads as SELECT shows it: its shortest round-trip digits, in
// fixed notation when the decimal point falls from 14 places before the
// first digit to 15 after it, or later while digits remain after it
// (0.00000015, 100000000000000.0, 1234567890123456.8; integral values get
// ".0", so the text reads back as a double), otherwise in exponent
// notation without "+" or leading zeros (1e-16, 1e15, 1.5e300).
func appendJSONDouble(dst []byte, f float64) ([]byte, error) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return dst, jsonErr("double is %v", f)
	}
	var tmp [32]byte
	e := strconv.AppendFloat(tmp[:0], f, 'e', -1, 64) // [-]d.ddde±XX
	k := 0
	for e[k] != 'e' {
		k++
	}
	digits := k // significant digits: the mantissa without sign and point
	if e[0] == '-' {
		digits--
	}
	if digits > 1 {
		digits--
	}
	exp, _ := strconv.Atoi(string(e[k+1:]))
	// decpt is where the decimal point falls relative to the digits
	// (dtoa's: 0.ddd times 10^decpt).
	if decpt := exp + 1; decpt >= -14 && (decpt <= 15 || digits > decpt) {
		s := len(dst)
		dst = strconv.AppendFloat(dst, f, 'f', -1, 64)
		for _, c := range dst[s:] {
			if c == '.' {
				return dst, nil
			}
		}
		return append(dst, ".0"...), nil
	}
	dst = append(dst, e[:k+1]...)
	k++
	if e[k] == '-' {
		dst = append(dst, '-')
	}
	k++
	for k < len(e)-1 && e[k] == '0' {
		k++
	}
	return append(dst, e[k:]...), nil
}

// appendJSONOpaque appends an opaque value (a MySQL value of type ft
// stored in a JSON document).
func appendJSONOpaque(dst []byte, ft byte, data []byte) ([]byte, error) {
	switch ft {
	case mysql.MYSQL_TYPE_NEWDECIMAL:
		if len(data) < 2 {
			return dst, jsonErr("truncated DECIMAL")
		}
		// A decimal inside a document is a computed value: its precision
		// may pass a column's 65 digits, up to the 81 a MySQL decimal
		// holds (MySQL 9.7 stores a DECIMAL(65,30) value with precision 66).
		prec, scale := int(data[0]), int(data[1])
		if !validJSONDecimal(prec, scale) {
			return dst, jsonErr("DECIMAL(%d,%d) out of range", prec, scale)
		}
		n := decimalBinSize(prec, scale)
		if len(data)-2 < n {
			return dst, jsonErr("truncated DECIMAL(%d,%d)", prec, scale)
		}
		out, err := appendDecimal(dst, data[2:2+n], prec, scale)
		if err != nil {
			return dst, jsonErr("DECIMAL: %v", err)
		}
		return out, nil
	case mysql.MYSQL_TYPE_DATE, mysql.MYSQL_TYPE_DATETIME, mysql.MYSQL_TYPE_TIMESTAMP, mysql.MYSQL_TYPE_TIME:
		if len(data) < 8 {
			return dst, jsonErr("truncated temporal value")
		}
		packed := int64(binary.LittleEndian.Uint64(data))
		if ft == mysql.MYSQL_TYPE_TIME {
			us, ok := unpackTime(packed)
			if !ok {
				return dst, jsonErr("TIME out of range")
			}
			return appendJSONTime(dst, us), nil
		}
		if packed < 0 {
			packed = -packed
		}
		micro := packed & (1<<24 - 1)
		if micro >= 1000000 {
			return dst, jsonErr("fractional seconds out of range")
		}
		dt := unpackDatetime(packed>>24, uint32(micro))
		dst = append(dst, '"')
		dst = appendDate(dst, dt.Date)
		if ft != mysql.MYSQL_TYPE_DATE {
			dst = append(dst, ' ')
			dst = appendPadded(dst, uint32(dt.Hour), 2)
			dst = append(dst, ':')
			dst = appendPadded(dst, uint32(dt.Minute), 2)
			dst = append(dst, ':')
			dst = appendPadded(dst, uint32(dt.Second), 2)
			dst = append(dst, '.')
			dst = appendPadded(dst, dt.Micro, 6)
		}
		return append(dst, '"'), nil
	}
	dst = append(dst, `"base64:type`...)
	dst = strconv.AppendUint(dst, uint64(ft), 10)
	dst = append(dst, ':')
	dst = base64.StdEncoding.AppendEncode(dst, data)
	return append(dst, '"'), nil
}

func appendDate(dst []byte, d Date) []byte {
	if d.Year > 9999 {
		dst = strconv.AppendUint(dst, uint64(d.Year), 10)
	} else {
		dst = appendPadded(dst, uint32(d.Year), 4)
	}
	dst = append(dst, '-')
	dst = appendPadded(dst, uint32(d.Month), 2)
	dst = append(dst, '-')
	return appendPadded(dst, uint32(d.Day), 2)
}

// appendJSONTime appends a TIME as "[-]HH:MM:SS.ffffff".
func appendJSONTime(dst []byte, us int64) []byte {
	dst = append(dst, '"')
	if us < 0 {
		dst = append(dst, '-')
		us = -us
	}
	sec := us / 1000000
	h := sec / 3600
	if h >= 100 {
		dst = strconv.AppendInt(dst, h, 10)
	} else {
		dst = appendPadded(dst, uint32(h), 2)
	}
	dst = append(dst, ':')
	dst = appendPadded(dst, uint32(sec/60%60), 2)
	dst = append(dst, ':')
	dst = appendPadded(dst, uint32(sec%60), 2)
	dst = append(dst, '.')
	dst = appendPadded(dst, uint32(us%1000000), 6)
	return append(dst, '"')
}
