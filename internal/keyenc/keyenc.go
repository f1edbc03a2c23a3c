// Package keyenc is the one encoding of key column values as bytes: the
// join's state keys (package join) and the row image store's row keys
// (package rowimage). It depends on the change model alone.
package keyenc

import (
	"encoding/binary"
	"math"
	"strconv"
	"strings"

	"github.com/sluice-cdc/sluice/binlog"
	"github.com/sluice-cdc/sluice/internal/charset"
)

// Keys are stored as an order-preserving, self-delimiting byte string:
// the concatenation of one encoded element per key column. Two keys are
// equal exactly when their encodings are equal, and no key's encoding is a
// prefix of another's, so the keyspace (join key, event time) can be read
// for one key with the range [key, key+0xFF...). Within each class the
// byte order is the value order:
//
//	tag 0x10  negative number   ^exponent(2 bytes), ^digits, 0xFF
//	tag 0x11  zero
//	tag 0x12  positive number   exponent(2 bytes), digits, 0x00
//	tag 0x20  date and time     8 bytes (packed DATETIME, big-endian)
//	tag 0x21  TIME              8 bytes (microseconds, sign bit flipped)
//	tag 0x30  text or binary    bytes with 0x00 escaped as 0x00 0xFF, then 0x00 0x01
//	tag 0x31  JSON document     as text
//	tag 0x32  geometry          as text
//
// Numbers of every column type share one class, so that INT 7, BIGINT
// UNSIGNED 7, DECIMAL 7.00 and DOUBLE 7 are one key: a number is written as
// its decimal digits d1 d2 ... (no leading or trailing zeros) and the
// exponent E with value = 0.d1d2... × 10^E, E biased by 0x8000. DATE,
// DATETIME and TIMESTAMP share the date-and-time class (a DATE is its
// midnight, a TIMESTAMP its UTC date and time). Text is compared as UTF-8
// bytes, not by the column's collation: 'a' and 'A' are different keys.
const (
	tagNeg      = 0x10
	tagZero     = 0x11
	tagPos      = 0x12
	tagDateTime = 0x20
	tagTime     = 0x21
	tagText     = 0x30
	tagJSON     = 0x31
	tagGeometry = 0x32

	expBias = 0x8000
)

// AppendValue appends the key encoding of one column value to dst.
// col supplies the character set of text and the member names of ENUM and
// SET columns; it may be nil. It reports false for SQL NULL and for a
// column missing from the row image: such a key joins nothing.
func AppendValue(dst []byte, col *binlog.Column, v binlog.Value) ([]byte, bool) {
	switch v.Kind() {
	case binlog.KindNull, binlog.KindAbsent:
		return dst, false
	case binlog.KindInt, binlog.KindYear:
		i := v.Int()
		if i < 0 {
			return appendInteger(dst, true, uint64(-i)), true
		}
		return appendInteger(dst, false, uint64(i)), true
	case binlog.KindUint, binlog.KindBit:
		return appendInteger(dst, false, v.Uint()), true
	case binlog.KindFloat, binlog.KindDouble:
		f := v.Float()
		if v.Kind() == binlog.KindFloat {
			f = float64(float32(f))
		}
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return dst, false
		}
		return appendFloatKey(dst, f), true
	case binlog.KindDecimal:
		return appendDecimalKey(dst, v.Bytes()), true
	case binlog.KindDate:
		return appendDateTimeKey(dst, binlog.DateTime{Date: v.Date()}), true
	case binlog.KindDateTime:
		return appendDateTimeKey(dst, v.DateTime()), true
	case binlog.KindTimestamp:
		sec, micro := v.Timestamp()
		return appendDateTimeKey(dst, binlog.UTCDateTime(sec, micro)), true
	case binlog.KindTime:
		dst = append(dst, tagTime)
		return binary.BigEndian.AppendUint64(dst, uint64(v.Duration())^(1<<63)), true
	case binlog.KindString:
		return appendEscaped(append(dst, tagText), textUTF8(col, v)), true
	case binlog.KindBytes:
		return appendEscaped(append(dst, tagText), v.Bytes()), true
	case binlog.KindEnum:
		i := v.Uint()
		if col != nil && i >= 1 && i <= uint64(len(col.Enum)) {
			return appendEscaped(append(dst, tagText), []byte(col.Enum[i-1])), true
		}
		if i == 0 {
			return appendEscaped(append(dst, tagText), nil), true
		}
		return appendInteger(dst, false, i), true
	case binlog.KindSet:
		mask := v.Uint()
		if col != nil && mask>>min(len(col.Set), 63) == 0 {
			var names []string
			for i, n := range col.Set {
				if mask&(1<<i) != 0 {
					names = append(names, n)
				}
			}
			return appendEscaped(append(dst, tagText), []byte(strings.Join(names, ","))), true
		}
		return appendInteger(dst, false, mask), true
	case binlog.KindJSON:
		return appendEscaped(append(dst, tagJSON), v.Bytes()), true
	case binlog.KindGeometry:
		return appendEscaped(append(dst, tagGeometry), v.Bytes()), true
	}
	return dst, false
}

// appendEscaped writes b with 0x00 as 0x00 0xFF, then the terminator
// 0x00 0x01: shorter strings sort first and no encoding is a prefix of
// another.
func appendEscaped(dst, b []byte) []byte {
	for _, c := range b {
		if c == 0 {
			dst = append(dst, 0, 0xFF)
		} else {
			dst = append(dst, c)
		}
	}
	return append(dst, 0, 1)
}

// textUTF8 returns character data as UTF-8, converted from the column's
// character set as the codec converts it (keys of a latin1 column and a
// utf8mb4 column compare equal when the text is).
func textUTF8(col *binlog.Column, v binlog.Value) []byte {
	b := v.Bytes()
	if col == nil {
		return b
	}
	cs := charset.Lookup(col.Charset)
	if cs == nil || cs.IsUTF8() {
		return b
	}
	out, _ := cs.AppendUTF8(make([]byte, 0, len(b)+len(b)/2), b)
	return out
}

// appendDigits writes a number given by its decimal digits and the
// position of the decimal point: value = 0.digits × 10^point (point may be
// negative or beyond the digits). Leading and trailing zeros are dropped;
// no digits is zero.
func appendDigits(dst []byte, neg bool, digits []byte, point int) []byte {
	// Drop leading zeros (they move the point) and trailing zeros.
	i := 0
	for i < len(digits) && digits[i] == '0' {
		i++
	}
	exp := point - i
	digits = digits[i:]
	for len(digits) > 0 && digits[len(digits)-1] == '0' {
		digits = digits[:len(digits)-1]
	}
	if len(digits) == 0 {
		return append(dst, tagZero)
	}
	e := uint16(exp + expBias)
	if !neg {
		dst = append(dst, tagPos, byte(e>>8), byte(e))
		dst = append(dst, digits...)
		return append(dst, 0)
	}
	dst = append(dst, tagNeg, ^byte(e>>8), ^byte(e))
	for _, d := range digits {
		dst = append(dst, ^d)
	}
	return append(dst, 0xFF)
}

// appendInteger encodes an integer of magnitude u.
func appendInteger(dst []byte, neg bool, u uint64) []byte {
	var buf [20]byte
	d := strconv.AppendUint(buf[:0], u, 10)
	return appendDigits(dst, neg, d, len(d))
}

// appendDecimalKey encodes DECIMAL text ("-12.3400", "0.5", "7").
func appendDecimalKey(dst, text []byte) []byte {
	neg := len(text) > 0 && text[0] == '-'
	if neg || len(text) > 0 && text[0] == '+' {
		text = text[1:]
	}
	digits := make([]byte, 0, len(text))
	point := -1
	for _, c := range text {
		switch {
		case c >= '0' && c <= '9':
			digits = append(digits, c)
		case c == '.' && point < 0:
			point = len(digits)
		}
	}
	if point < 0 {
		point = len(digits)
	}
	return appendDigits(dst, neg, digits, point)
}

// appendFloatKey encodes a finite float by its shortest decimal form, the
// form in which it equals a DECIMAL or an integer of the same value.
func appendFloatKey(dst []byte, f float64) []byte {
	if f == 0 {
		return append(dst, tagZero) // and -0
	}
	neg := f < 0
	if neg {
		f = -f
	}
	// 'e' with the shortest digits: "d.ddddde±XX".
	s := strconv.AppendFloat(nil, f, 'e', -1, 64)
	mant, exp, _ := strings.Cut(string(s), "e")
	x, _ := strconv.Atoi(exp)
	digits := make([]byte, 0, len(mant))
	for i := 0; i < len(mant); i++ {
		if mant[i] != '.' {
			digits = append(digits, mant[i])
		}
	}
	return appendDigits(dst, neg, digits, x+1)
}

func appendDateTimeKey(dst []byte, dt binlog.DateTime) []byte {
	n := uint64(dt.Micro&0xFFFFF) | uint64(dt.Second&0x3F)<<20 | uint64(dt.Minute&0x3F)<<26 |
		uint64(dt.Hour&0x1F)<<32 | uint64(dt.Day&0x1F)<<37 | uint64(dt.Month&0x0F)<<42 | uint64(dt.Year)<<46
	dst = append(dst, tagDateTime)
	return binary.BigEndian.AppendUint64(dst, n)
}

// keyElementEnd returns the length of the first element of an encoded key,
// or -1 when b does not start with a well-formed element.
func keyElementEnd(b []byte) int {
	if len(b) == 0 {
		return -1
	}
	switch b[0] {
	case tagZero:
		return 1
	case tagPos, tagNeg:
		term := byte(0)
		if b[0] == tagNeg {
			term = 0xFF
		}
		if len(b) < 4 {
			return -1
		}
		for i := 3; i < len(b); i++ {
			if b[i] == term {
				if i == 3 {
					return -1 // a number has at least one digit
				}
				return i + 1
			}
			d := b[i]
			if b[0] == tagNeg {
				d = ^d
			}
			if d < '0' || d > '9' {
				return -1
			}
		}
		return -1
	case tagDateTime, tagTime:
		if len(b) < 9 {
			return -1
		}
		return 9
	case tagText, tagJSON, tagGeometry:
		for i := 1; i+1 < len(b); i++ {
			if b[i] != 0 {
				continue
			}
			switch b[i+1] {
			case 1:
				return i + 2
			case 0xFF:
				i++
			default:
				return -1
			}
		}
		return -1
	}
	return -1
}

// Valid reports whether b is a sequence of well-formed key elements.
func Valid(b []byte) bool {
	if len(b) == 0 {
		return false
	}
	for len(b) > 0 {
		n := keyElementEnd(b)
		if n < 0 {
			return false
		}
		b = b[n:]
	}
	return true
}
