package codec

import (
	"encoding/base64"
	"encoding/binary"
	"math"
	"strconv"

	"github.com/sluice-cdc/sluice/binlog"
	"github.com/sluice-cdc/sluice/internal/jsonstr"
)

// zeroColumn stands in for a nil *binlog.Column: no fractional digits,
// UTF-8 text, no ENUM or SET names.
var zeroColumn binlog.Column

// AppendValue appends the JSON encoding of one column value to dst and
// returns the extended slice. col gives what the value alone does not:
// the number of fractional-second digits (Frac), the character set of
// text (Charset) and the ENUM and SET member names; it may be nil.
//
// The encoding of each kind is specified in docs/FORMAT.md. In short:
// integers, YEAR and BIT are JSON numbers (exact, also for BIGINT
// UNSIGNED); DECIMAL is a string holding the exact decimal text; FLOAT and
// DOUBLE are the shortest numbers that round-trip (NaN and infinities,
// which MySQL cannot store, are null); dates and times are strings in
// ISO-8601 style with exactly col.Frac fractional digits, zero dates kept
// as they are; text is converted from col.Charset to UTF-8; binary data
// and geometries are base64; ENUM is its member name, SET an array of
// member names; JSON documents are embedded; VECTOR is an array of
// numbers written like FLOAT values; NULL is null.
//
// KindAbsent (a column missing from a MINIMAL row image) is written as
// null here; AppendRow and the Encoder omit such columns instead. A kind
// AppendValue does not know is written as null too.
//
// The output is always valid JSON and valid UTF-8, whatever the value
// holds; AppendValue never fails and allocates only to grow dst.
func AppendValue(dst []byte, col *binlog.Column, v binlog.Value) []byte {
	if col == nil {
		col = &zeroColumn
	}
	return appendValue(dst, col, &v)
}

// appendValue is AppendValue with a non-nil column and the value by
// reference, which saves copying it on the per-cell path.
// appendFloat is strconv.AppendFloat(dst, f, 'g', -1, bitSize): a whole
// number below a million in magnitude (0, 1, 42, prices in whole units,
// counters) is written as the integer it is, which is what 'g' writes for
// it (it switches to an exponent from 1e+06 on, and writes -0 as "-0").
func appendFloat(dst []byte, f float64, bitSize int) []byte {
	if f > -1e6 && f < 1e6 && f == float64(int64(f)) && (f != 0 || !math.Signbit(f)) {
		return strconv.AppendInt(dst, int64(f), 10)
	}
	return strconv.AppendFloat(dst, f, 'g', -1, bitSize)
}

// finite reports whether f is neither NaN nor an infinity (which MySQL
// cannot store; both formats write such a value as null).
func finite(f float64) bool { return !math.IsNaN(f) && !math.IsInf(f, 0) }

func appendValue(dst []byte, col *binlog.Column, v *binlog.Value) []byte {
	switch v.Kind() {
	case binlog.KindInt, binlog.KindYear:
		return strconv.AppendInt(dst, v.Int(), 10)
	case binlog.KindUint, binlog.KindBit:
		return strconv.AppendUint(dst, v.Uint(), 10)
	case binlog.KindDecimal:
		return jsonstr.Append(dst, v.Bytes())
	case binlog.KindFloat:
		f := float32(v.Float())
		if !finite(float64(f)) {
			return append(dst, "null"...)
		}
		return appendFloat(dst, float64(f), 32)
	case binlog.KindDouble:
		f := v.Float()
		if !finite(f) {
			return append(dst, "null"...)
		}
		return appendFloat(dst, f, 64)
	case binlog.KindDate:
		dst = append(dst, '"')
		dst = appendDate(dst, v.Date())
		return append(dst, '"')
	case binlog.KindDateTime:
		dt := v.DateTime()
		dst = append(dst, '"')
		dst = appendDate(dst, dt.Date)
		dst = append(dst, 'T')
		dst = appendClock(dst, uint64(dt.Hour), uint64(dt.Minute), uint64(dt.Second))
		dst = appendFrac(dst, dt.Micro, col.Frac)
		return append(dst, '"')
	case binlog.KindTimestamp:
		sec, micro := v.Timestamp()
		return appendTimestamp(dst, sec, micro, col.Frac)
	case binlog.KindTime:
		return appendTime(dst, v.Duration(), col.Frac)
	case binlog.KindString:
		return appendText(dst, v.Bytes(), col.Charset)
	case binlog.KindBytes, binlog.KindGeometry:
		dst = append(dst, '"')
		dst = base64.StdEncoding.AppendEncode(dst, v.Bytes())
		return append(dst, '"')
	case binlog.KindEnum:
		i := v.Uint()
		switch {
		case i == 0:
			return append(dst, '"', '"')
		case i <= uint64(len(col.Enum)):
			return jsonstr.Append(dst, col.Enum[i-1])
		}
		return strconv.AppendUint(dst, i, 10)
	case binlog.KindSet:
		return appendSet(dst, v.Uint(), col.Set)
	case binlog.KindJSON:
		return appendJSONValue(dst, v.Bytes())
	case binlog.KindVector:
		return appendVector(dst, v.Bytes())
	}
	// KindNull, KindAbsent and unknown kinds.
	return append(dst, "null"...)
}

// appendVector appends a VECTOR value, little-endian float32s, as a JSON
// array of numbers written like FLOAT values (the shortest text that
// reads back as the same single-precision value); NaN and infinities,
// which MySQL does not store in a vector, are null. Bytes short of a whole
// float at the end are ignored.
func appendVector(dst, b []byte) []byte {
	dst = append(dst, '[')
	for k := 0; k+4 <= len(b); k += 4 {
		if k > 0 {
			dst = append(dst, ',')
		}
		f := math.Float32frombits(binary.LittleEndian.Uint32(b[k:]))
		if !finite(float64(f)) {
			dst = append(dst, "null"...)
			continue
		}
		dst = appendFloat(dst, float64(f), 32)
	}
	return append(dst, ']')
}

// appendSet appends a SET value: the array of the names of the members
// whose bit is set, in definition order; or the mask as a number when the
// names are unknown or the mask has a bit no known member has.
func appendSet(dst []byte, mask uint64, names []string) []byte {
	if len(names) == 0 || (len(names) < 64 && mask>>uint(len(names)) != 0) {
		return strconv.AppendUint(dst, mask, 10)
	}
	dst = append(dst, '[')
	first := true
	for i := 0; mask != 0 && i < len(names); i++ {
		if mask&1 != 0 {
			if !first {
				dst = append(dst, ',')
			}
			first = false
			dst = jsonstr.Append(dst, names[i])
		}
		mask >>= 1
	}
	return append(dst, ']')
}

// appendPad appends n in decimal, zero-padded to at least width digits.
func appendPad(dst []byte, n uint64, width int) []byte {
	if width == 2 && n < 100 {
		return append(dst, byte('0'+n/10), byte('0'+n%10))
	}
	if width == 4 && n < 10000 {
		return append(dst, byte('0'+n/1000), byte('0'+n/100%10), byte('0'+n/10%10), byte('0'+n%10))
	}
	var buf [20]byte
	i := len(buf)
	for n >= 10 {
		i--
		buf[i] = byte('0' + n%10)
		n /= 10
	}
	i--
	buf[i] = byte('0' + n)
	for len(buf)-i < width {
		i--
		buf[i] = '0'
	}
	return append(dst, buf[i:]...)
}

// appendDate appends "YYYY-MM-DD", zero fields and all.
func appendDate(dst []byte, d binlog.Date) []byte {
	dst = appendPad(dst, uint64(d.Year), 4)
	dst = append(dst, '-')
	dst = appendPad(dst, uint64(d.Month), 2)
	dst = append(dst, '-')
	return appendPad(dst, uint64(d.Day), 2)
}

// appendClock appends "HH:MM:SS"; the hours take more digits if needed.
func appendClock(dst []byte, h, m, s uint64) []byte {
	dst = appendPad(dst, h, 2)
	dst = append(dst, ':')
	dst = appendPad(dst, m, 2)
	dst = append(dst, ':')
	return appendPad(dst, s, 2)
}

// appendFrac appends '.' and the first frac (at most 6) digits of the
// six-digit microsecond count; nothing when frac <= 0.
func appendFrac(dst []byte, micro uint32, frac int) []byte {
	if frac <= 0 {
		return dst
	}
	frac = min(frac, 6)
	micro %= 1000000
	var buf [7]byte
	buf[0] = '.'
	for i := 6; i >= 1; i-- {
		buf[i] = byte('0' + micro%10)
		micro /= 10
	}
	return append(dst, buf[:1+frac]...)
}

// appendTimestamp appends a TIMESTAMP as a UTC ISO-8601 string ending in
// 'Z'. The zero timestamp (MySQL's '0000-00-00 00:00:00') is written
// "0000-00-00T00:00:00Z", with frac zero digits before the 'Z': MySQL
// cannot store 1970-01-01 00:00:00 UTC itself (its range starts one second
// later), so there is no ambiguity.
func appendTimestamp(dst []byte, sec int64, micro uint32, frac int) []byte {
	dst = append(dst, '"')
	if sec == 0 && micro == 0 {
		dst = append(dst, "0000-00-00T00:00:00"...)
	} else {
		days, rem := sec/86400, sec%86400
		if rem < 0 {
			days--
			rem += 86400
		}
		y, m, d := binlog.CivilFromDays(days)
		if y < 0 {
			dst = append(dst, '-')
			y = -y
		}
		dst = appendPad(dst, uint64(y), 4)
		dst = append(dst, '-')
		dst = appendPad(dst, uint64(m), 2)
		dst = append(dst, '-')
		dst = appendPad(dst, uint64(d), 2)
		dst = append(dst, 'T')
		dst = appendClock(dst, uint64(rem/3600), uint64(rem/60%60), uint64(rem%60))
	}
	dst = appendFrac(dst, micro, frac)
	return append(dst, 'Z', '"')
}

// appendTime appends a TIME value, signed microseconds, as
// "[-]HH:MM:SS[.ffffff]" with at least two hour digits.
func appendTime(dst []byte, micros int64, frac int) []byte {
	dst = append(dst, '"')
	u := uint64(micros)
	if micros < 0 {
		dst = append(dst, '-')
		u = -u
	}
	s := u / 1000000
	dst = appendClock(dst, s/3600, s/60%60, s%60)
	dst = appendFrac(dst, uint32(u%1000000), frac)
	return append(dst, '"')
}

// AppendDate appends d as "YYYY-MM-DD", zero fields and all (as MySQL
// writes a DATE literal).
func AppendDate(dst []byte, d binlog.Date) []byte { return appendDate(dst, d) }

// AppendClock appends "HH:MM:SS.ffffff" (hours take more digits if needed):
// the time part of a MySQL DATETIME or TIME literal with microseconds.
func AppendClock(dst []byte, h, m, s uint64, micro uint32) []byte {
	return appendFrac(appendClock(dst, h, m, s), micro, 6)
}
