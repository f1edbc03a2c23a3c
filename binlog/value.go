package binlog

import (
	"encoding/binary"
	"fmt"
	"math"
	"unsafe"
)

// Kind says what a Value holds. It follows the column's type, so the
// consumer never has to guess: an INT UNSIGNED column yields KindUint, a
// DECIMAL column KindDecimal, and so on.
type Kind uint8

// Value kinds. KindAbsent is a column that is not in the row image at all
// (binlog_row_image=MINIMAL or NOBLOB): it is not NULL, it is unknown.
const (
	KindAbsent    Kind = iota // column not logged in this image
	KindNull                  // SQL NULL
	KindInt                   // signed integer: Int()
	KindUint                  // unsigned integer: Uint()
	KindFloat                 // FLOAT (single precision): Float()
	KindDouble                // DOUBLE: Float()
	KindDecimal               // exact decimal text, e.g. "-12.3400": Bytes()
	KindDate                  // DATE: Date(); zero dates allowed
	KindDateTime              // DATETIME: DateTime(); zero dates allowed
	KindTimestamp             // TIMESTAMP: Unix seconds + microseconds, UTC: Timestamp()
	KindTime                  // TIME: signed microseconds: Duration()
	KindYear                  // YEAR: Int() (0 for the zero year)
	KindString                // character data in the column's charset: Bytes()
	KindBytes                 // binary data (BINARY, VARBINARY, BLOB): Bytes()
	KindEnum                  // ENUM: 1-based index in Uint(), 0 for the empty '' error value
	KindSet                   // SET: bitmask in Uint()
	KindBit                   // BIT(n): Uint()
	KindJSON                  // JSON document as JSON text: Bytes()
	KindGeometry              // geometry as MySQL's internal format (4-byte SRID + WKB): Bytes()
	KindVector                // VECTOR (MySQL 9): 4-byte little-endian float32s: Bytes(), Floats()
)

var kindNames = [...]string{
	KindAbsent: "absent", KindNull: "null", KindInt: "int", KindUint: "uint",
	KindFloat: "float", KindDouble: "double", KindDecimal: "decimal", KindDate: "date",
	KindDateTime: "datetime", KindTimestamp: "timestamp", KindTime: "time", KindYear: "year",
	KindString: "string", KindBytes: "bytes", KindEnum: "enum", KindSet: "set", KindBit: "bit",
	KindJSON: "json", KindGeometry: "geometry", KindVector: "vector",
}

func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("kind(%d)", k)
}

// Value is one typed column value. It is a 24-byte struct, not an
// interface, so that decoding a row allocates nothing per cell: numbers and
// temporal values live in num, variable-length data is p[:n]. The bytes
// belong to the Txn chunk the value came with; copy them to keep them
// longer than the chunk.
type Value struct {
	num  uint64
	p    *byte
	n    uint32
	kind Kind
}

// Kind reports what the value holds.
func (v Value) Kind() Kind { return v.kind }

// IsNull reports whether the value is SQL NULL.
func (v Value) IsNull() bool { return v.kind == KindNull }

// IsAbsent reports whether the column was missing from the row image.
func (v Value) IsAbsent() bool { return v.kind == KindAbsent }

// Int returns a signed integer or YEAR.
func (v Value) Int() int64 { return int64(v.num) }

// Uint returns an unsigned integer, an enum index, a set mask or a bit value.
func (v Value) Uint() uint64 { return v.num }

// Float returns a FLOAT or DOUBLE value.
func (v Value) Float() float64 { return math.Float64frombits(v.num) }

// Bytes returns the bytes of a string, binary, decimal, JSON, geometry or
// vector value (nil for other kinds). The slice's capacity is its length.
func (v Value) Bytes() []byte {
	if v.p == nil {
		return nil
	}
	return unsafe.Slice(v.p, v.n)
}

// Floats appends the elements of a VECTOR value to dst: the value's bytes
// are IEEE 754 single-precision floats, 4 bytes each, little-endian, as
// MySQL stores them (trailing bytes short of a whole float are ignored).
func (v Value) Floats(dst []float32) []float32 {
	b := v.Bytes()
	for len(b) >= 4 {
		dst = append(dst, math.Float32frombits(binary.LittleEndian.Uint32(b)))
		b = b[4:]
	}
	return dst
}

// Date is a calendar date as stored by MySQL; any field may be zero
// ("0000-00-00" and partial zero dates are legal in MySQL).
type Date struct {
	Year       uint16
	Month, Day uint8
}

// DateTime is a DATETIME value with microseconds.
type DateTime struct {
	Date
	Hour, Minute, Second uint8
	Micro                uint32
}

// Date returns a DATE value.
func (v Value) Date() Date {
	return Date{Year: uint16(v.num >> 16), Month: uint8(v.num >> 8), Day: uint8(v.num)}
}

// DateTime returns a DATETIME value.
func (v Value) DateTime() DateTime {
	n := v.num
	return DateTime{
		Micro:  uint32(n & 0xFFFFF),
		Second: uint8(n >> 20 & 0x3F),
		Minute: uint8(n >> 26 & 0x3F),
		Hour:   uint8(n >> 32 & 0x1F),
		Date:   Date{Day: uint8(n >> 37 & 0x1F), Month: uint8(n >> 42 & 0x0F), Year: uint16(n >> 46 & 0xFFFF)},
	}
}

// Timestamp returns a TIMESTAMP as Unix seconds and microseconds (UTC).
// The zero timestamp "0000-00-00 00:00:00" is seconds 0 and micro 0.
func (v Value) Timestamp() (sec int64, micro uint32) {
	return int64(v.num >> 20), uint32(v.num & 0xFFFFF)
}

// Duration returns a TIME value in microseconds (may be negative).
func (v Value) Duration() int64 { return int64(v.num) }

// Constructors. They are used by the decoders and by tests.

// NullValue returns SQL NULL.
func NullValue() Value { return Value{kind: KindNull} }

// IntValue returns a signed integer value.
func IntValue(i int64) Value { return Value{kind: KindInt, num: uint64(i)} }

// UintValue returns an unsigned integer value.
func UintValue(u uint64) Value { return Value{kind: KindUint, num: u} }

// FloatValue returns a FLOAT (k == KindFloat) or DOUBLE value.
func FloatValue(k Kind, f float64) Value { return Value{kind: k, num: math.Float64bits(f)} }

// BytesValue returns a value of a byte-carrying kind (string, bytes,
// decimal, JSON, geometry, vector).
func BytesValue(k Kind, b []byte) Value {
	var v Value
	setBytes(&v, k, b)
	return v
}

// NumValue returns a value of an integer-carrying kind (enum, set, bit, year).
func NumValue(k Kind, n uint64) Value { return Value{kind: k, num: n} }

// DateValue returns a DATE value.
func DateValue(d Date) Value {
	return Value{kind: KindDate, num: uint64(d.Year)<<16 | uint64(d.Month)<<8 | uint64(d.Day)}
}

// DateTimeValue returns a DATETIME value.
func DateTimeValue(dt DateTime) Value {
	n := uint64(dt.Micro&0xFFFFF) | uint64(dt.Second&0x3F)<<20 | uint64(dt.Minute&0x3F)<<26 |
		uint64(dt.Hour&0x1F)<<32 | uint64(dt.Day&0x1F)<<37 | uint64(dt.Month&0x0F)<<42 | uint64(dt.Year)<<46
	return Value{kind: KindDateTime, num: n}
}

// TimestampValue returns a TIMESTAMP value from Unix seconds and microseconds.
func TimestampValue(sec int64, micro uint32) Value {
	return Value{kind: KindTimestamp, num: uint64(sec)<<20 | uint64(micro&0xFFFFF)}
}

// TimeValue returns a TIME value from signed microseconds.
func TimeValue(micros int64) Value { return Value{kind: KindTime, num: uint64(micros)} }

// Equal reports whether two values hold the same kind and content.
func (v Value) Equal(o Value) bool {
	return v.kind == o.kind && v.num == o.num && string(v.Bytes()) == string(o.Bytes())
}

// String renders the value for debugging (not the JSON format; see codec).
func (v Value) String() string {
	switch v.kind {
	case KindAbsent, KindNull:
		return v.kind.String()
	case KindInt, KindYear:
		return fmt.Sprint(v.Int())
	case KindUint, KindEnum, KindSet, KindBit:
		return fmt.Sprint(v.Uint())
	case KindFloat, KindDouble:
		return fmt.Sprint(v.Float())
	case KindDate:
		d := v.Date()
		return fmt.Sprintf("%04d-%02d-%02d", d.Year, d.Month, d.Day)
	case KindDateTime:
		d := v.DateTime()
		return fmt.Sprintf("%04d-%02d-%02d %02d:%02d:%02d.%06d", d.Year, d.Month, d.Day, d.Hour, d.Minute, d.Second, d.Micro)
	case KindTimestamp:
		s, us := v.Timestamp()
		return fmt.Sprintf("%d.%06d", s, us)
	case KindTime:
		return fmt.Sprintf("%dus", v.Duration())
	case KindBytes, KindGeometry:
		return fmt.Sprintf("%x", v.Bytes())
	case KindVector:
		return fmt.Sprint(v.Floats(nil))
	default:
		return string(v.Bytes())
	}
}

// Row is one row image, aligned with Table.Columns.
type Row []Value
