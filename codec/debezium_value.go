package codec

// Column values in format debezium: what Debezium's MySQL connector's
// value converters produce (and its MariaDB connector's, for a MariaDB
// source: d.conn), as Kafka Connect's JsonConverter writes them.

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"math"
	"math/big"
	"strconv"
	"strings"

	"github.com/go-mysql-org/go-mysql/mysql"

	"github.com/sluice-cdc/sluice/binlog"
	"github.com/sluice-cdc/sluice/internal/jsonstr"
)

// zeroTimestampText is what Debezium writes for a zero TIMESTAMP in a NOT
// NULL column: its fallback, the epoch.
const zeroTimestampText = `"1970-01-01T00:00:00Z"`

// appendValue appends the Debezium encoding of v, a value of column col.
func (d *dbzState) appendValue(dst []byte, col *binlog.Column, v *binlog.Value) []byte {
	switch v.Kind() {
	case binlog.KindInt:
		return strconv.AppendInt(dst, v.Int(), 10)
	case binlog.KindUint:
		if isBigintUnsigned(col) {
			if d.opts.precise {
				return appendDecimalBytes(dst, false, v.Uint(), nil)
			}
			// long mode: the two's-complement reading of the 64 bits.
			return strconv.AppendInt(dst, int64(v.Uint()), 10)
		}
		return strconv.AppendUint(dst, v.Uint(), 10)
	case binlog.KindYear:
		y := v.Int()
		if y == 0 {
			// Debezium reads the binlog's YEAR byte as 1900+n, and a
			// snapshot's year 0 through JDBC as year 0, which its time
			// adjuster makes 2000 (Debezium 3.6.1, TestDebeziumOracle).
			y = 1900
			if d.snap {
				y = 2000
			}
		}
		return strconv.AppendInt(dst, y, 10)
	case binlog.KindBit:
		n := bitLen(col)
		if n == 1 {
			return strconv.AppendBool(dst, v.Uint()&1 != 0)
		}
		var b [8]byte
		binary.LittleEndian.PutUint64(b[:], v.Uint())
		return appendBase64(dst, b[:(n+7)/8])
	case binlog.KindFloat:
		f := float32(v.Float())
		if !finite(float64(f)) {
			return append(dst, "null"...)
		}
		if col.FloatMD {
			// A double, the float widened: 3.14 is 3.140000104904175
			// (Debezium 3.6.1, TestDebeziumOracle).
			return appendJavaFloat(dst, float64(f), 64)
		}
		return appendJavaFloat(dst, float64(f), 32)
	case binlog.KindDouble:
		f := v.Float()
		if !finite(f) {
			return append(dst, "null"...)
		}
		return appendJavaFloat(dst, f, 64)
	case binlog.KindDecimal:
		return d.appendDecimal(dst, col, v.Bytes())
	case binlog.KindDate:
		dt := v.Date()
		if dt.Month == 0 || dt.Day == 0 {
			return d.appendZero(dst, col, "0")
		}
		return strconv.AppendInt(dst, binlog.DaysFromCivil(adjustYear(int64(dt.Year)), int(dt.Month), int(dt.Day)), 10)
	case binlog.KindDateTime:
		dt := v.DateTime()
		if dt.Month == 0 || dt.Day == 0 {
			return d.appendZero(dst, col, "0")
		}
		days := binlog.DaysFromCivil(adjustYear(int64(dt.Year)), int(dt.Month), int(dt.Day))
		us := ((days*24+int64(dt.Hour))*60+int64(dt.Minute))*60 + int64(dt.Second)
		us = us*1e6 + int64(dt.Micro%1e6)
		if micros := !d.opts.connect && col.Frac > 3; micros {
			return strconv.AppendInt(dst, us, 10)
		}
		return strconv.AppendInt(dst, floorDiv(us, 1000), 10)
	case binlog.KindTimestamp:
		sec, micro := v.Timestamp()
		if sec == 0 && micro == 0 {
			if d.conn.mariaDB && !d.snap {
				// Debezium's MariaDB connector reads a streamed zero
				// TIMESTAMP as the instant 0, with the column's digits,
				// in a nullable column too (Debezium 3.5.0,
				// TestDebeziumOracle).
				dst = append(dst, `"1970-01-01T00:00:00`...)
				dst = appendFrac(dst, 0, col.Frac)
				return append(dst, 'Z', '"')
			}
			return d.appendZero(dst, col, zeroTimestampText)
		}
		frac := col.Frac
		if d.snap {
			frac = snapshotFrac(micro)
		}
		return appendTimestamp(dst, sec, micro, frac)
	case binlog.KindTime:
		if d.opts.connect {
			us := v.Duration()
			if (us < 0 || us > 24*3600*1e6) && col.Nullable {
				// Kafka Connect's Time holds 00:00 to 24:00: Debezium
				// writes null for a TIME outside it (-00:00:00.000001,
				// 24:00:00.000001, 838:59:59) in a nullable column
				// (Debezium 3.6.1, TestDebeziumOracle). docs/FORMAT.md.
				return append(dst, "null"...)
			}
			return strconv.AppendInt(dst, floorDiv(us, 1000), 10)
		}
		return strconv.AppendInt(dst, v.Duration(), 10)
	case binlog.KindString:
		return appendJavaText(dst, v.Bytes(), col.Charset)
	case binlog.KindBytes:
		b := v.Bytes()
		if col.UUID && len(b) <= 16 {
			return d.appendDbzUUID(dst, b)
		}
		if n := fixedBinaryLen(col); len(b) < n {
			// BINARY(n): the binlog drops trailing zero bytes; Debezium pads.
			d.scratch = append(append(d.scratch[:0], b...), make([]byte, n-len(b))...)
			b = d.scratch
		}
		if d.opts.binary == 'x' {
			return appendHex(dst, b)
		}
		return appendBase64(dst, b)
	case binlog.KindGeometry:
		if col.Point {
			return appendPoint(dst, v.Bytes())
		}
		return appendGeometry(dst, v.Bytes())
	case binlog.KindEnum:
		i := v.Uint()
		if i >= 1 && i <= uint64(len(col.Enum)) {
			name := col.Enum[i-1]
			if !d.snap && strings.IndexByte(name, ',') >= 0 {
				// Debezium names a streamed member from its allowed
				// list, where a comma is escaped: 'a,b' is "a\\,b"
				// (snapshot rows come from JDBC: "a,b"). Debezium 3.6.1,
				// TestDebeziumOracle.
				name = strings.ReplaceAll(name, ",", `\,`)
			}
			return jsonstr.AppendJava(dst, name)
		}
		return append(dst, `""`...) // 0: MySQL's '' error value
	case binlog.KindSet:
		return appendDbzSet(dst, v.Uint(), col.Set)
	case binlog.KindJSON:
		doc := v.Bytes()
		if col.Type != mysql.MYSQL_TYPE_JSON {
			// MariaDB's JSON, a LONGTEXT: its text as stored, a plain
			// string, as Debezium's MariaDB connector writes it
			// (Debezium 3.5.0, TestDebeziumOracle).
			return appendJavaText(dst, doc, col.Charset)
		}
		if len(doc) == 0 {
			if col.Nullable {
				return append(dst, "null"...)
			}
			return append(dst, `"{}"`...)
		}
		d.scratch = appendJSONValue(d.scratch[:0], doc)
		if d.snap && col.Type == mysql.MYSQL_TYPE_JSON {
			// A snapshot row's JSON is the server's text, as Debezium
			// reads it through JDBC: MySQL writes ", " and ": " between
			// tokens (the snapshot took them out, so that its text is the
			// stream's; Debezium 3.6.1, TestDebeziumOracle).
			d.scratch2 = appendMySQLJSONSpacing(d.scratch2[:0], d.scratch)
			return jsonstr.AppendJava(dst, d.scratch2)
		}
		// A streamed binary document as Debezium's binlog library
		// formats it (appendDbzJSONText).
		d.scratch2 = appendDbzJSONText(d.scratch2[:0], d.scratch)
		return jsonstr.AppendJava(dst, d.scratch2)
	case binlog.KindVector:
		b := v.Bytes()
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
			dst = appendJavaFloat(dst, float64(f), 32)
		}
		return append(dst, ']')
	}
	// KindNull, KindAbsent (not in a MINIMAL image) and unknown kinds.
	return append(dst, "null"...)
}

// snapshotFrac is the digits of a TIMESTAMP's fraction that Debezium
// writes for a snapshot row (read through JDBC): as many as it needs, none
// for a zero fraction (06.500000 is "06.5Z", 01.000000 "01Z"); streamed
// rows have the column's fsp digits. Debezium 3.6.1, TestDebeziumOracle.
func snapshotFrac(micro uint32) int {
	if micro == 0 {
		return 0
	}
	n := 6
	for micro%10 == 0 {
		micro /= 10
		n--
	}
	return n
}

// adjustYear is Debezium's enable.time.adjuster (on by default): a DATE or
// DATETIME of the years 0 to 69 is read as 2000 to 2069, of 70 to 99 as
// 1970 to 1999, as a two-digit year would be (0050-03-04 is 2050-03-04).
// Verified against Debezium 3.6.1, in the snapshot and the stream.
func adjustYear(y int64) int64 {
	switch {
	case y >= 0 && y <= 69:
		return y + 2000
	case y >= 70 && y <= 99:
		return y + 1900
	}
	return y
}

// appendZero writes a zero date: null in a nullable column, else
// Debezium's fallback for NOT NULL columns, the column's default (d.def)
// or without one the epoch (text).
func (d *dbzState) appendZero(dst []byte, col *binlog.Column, epoch string) []byte {
	if col.Nullable {
		return append(dst, "null"...)
	}
	if d.def != nil {
		return append(dst, d.def...)
	}
	return append(dst, epoch...)
}

// isBigintUnsigned reports whether an unsigned column is BIGINT UNSIGNED
// (or of unknown width, taken as the widest).
func isBigintUnsigned(col *binlog.Column) bool {
	return col.Type == mysql.MYSQL_TYPE_LONGLONG || col.Type == 0
}

// bitLen is the width of a BIT column, 64 when unknown.
func bitLen(col *binlog.Column) int {
	if col.BitLen >= 1 && col.BitLen <= 64 {
		return col.BitLen
	}
	return 64
}

// fixedBinaryLen is n for a BINARY(n) column, else 0. The length is in
// the column's TABLE_MAP metadata (real type and length, the length's
// bits 8 and 9 folded into the type byte inverted).
func fixedBinaryLen(col *binlog.Column) int {
	if col.Type != mysql.MYSQL_TYPE_STRING {
		return 0
	}
	m := col.Meta
	if m < 256 {
		return int(m)
	}
	b0, b1 := byte(m>>8), byte(m)
	if b0&0x30 != 0x30 {
		return int(b1) | int((b0&0x30)^0x30)<<4
	}
	return int(b1)
}

func appendBase64(dst, b []byte) []byte {
	dst = append(dst, '"')
	dst = base64.StdEncoding.AppendEncode(dst, b)
	return append(dst, '"')
}

func appendHex(dst, b []byte) []byte {
	const digits = "0123456789abcdef"
	dst = append(dst, '"')
	for _, c := range b {
		dst = append(dst, digits[c>>4], digits[c&15])
	}
	return append(dst, '"')
}

// appendGeometry writes io.debezium.data.geometry.Geometry: the WKB after
// MySQL's 4-byte little-endian SRID, and the SRID (null for 0).
func appendGeometry(dst, b []byte) []byte {
	return append(appendWKBSRID(append(dst, '{'), b), '}')
}

// appendWKBSRID writes the wkb and srid fields of a Geometry or Point.
func appendWKBSRID(dst, b []byte) []byte {
	var srid uint32
	if len(b) >= 4 {
		srid = binary.LittleEndian.Uint32(b)
		b = b[4:]
	} else {
		b = nil
	}
	dst = append(dst, `"wkb":`...)
	dst = appendBase64(dst, b)
	dst = append(dst, `,"srid":`...)
	if srid == 0 {
		return append(dst, "null"...)
	}
	return strconv.AppendInt(dst, int64(int32(srid)), 10)
}

// appendPoint writes io.debezium.data.geometry.Point, a POINT column's
// value: x and y read from the WKB (either byte order), then the WKB and
// the SRID as in appendGeometry. A value that is not a 2D point's 21-byte
// WKB (the server stores none in a POINT column; Debezium fails on one)
// gets null coordinates rather than invented ones.
func appendPoint(dst, b []byte) []byte {
	dst = append(dst, `{"x":`...)
	x, y, ok := pointXY(b)
	if ok && finite(x) && finite(y) {
		dst = appendJavaFloat(dst, x, 64)
		dst = append(dst, `,"y":`...)
		dst = appendJavaFloat(dst, y, 64)
	} else {
		dst = append(dst, `null,"y":null`...)
	}
	dst = append(dst, ',')
	return append(appendWKBSRID(dst, b), '}')
}

// pointXY reads the coordinates of a 2D point from MySQL's geometry
// format (4-byte SRID, then WKB: byte order, type 1, x, y).
func pointXY(b []byte) (x, y float64, ok bool) {
	if len(b) != 4+21 {
		return 0, 0, false
	}
	w := b[4:]
	var order binary.ByteOrder = binary.BigEndian
	if w[0] != 0 {
		order = binary.LittleEndian
	}
	if order.Uint32(w[1:]) != 1 {
		return 0, 0, false
	}
	return math.Float64frombits(order.Uint64(w[5:])), math.Float64frombits(order.Uint64(w[13:])), true
}

// appendDbzSet writes a SET as Debezium does: the names of the set bits
// joined by commas (a bit past the known names adds its comma but no
// name, as Debezium's converter does).
func appendDbzSet(dst []byte, mask uint64, names []string) []byte {
	dst = append(dst, '"')
	first := true
	for i := 0; mask != 0; i++ {
		if mask&1 != 0 {
			if !first {
				dst = append(dst, ',')
			}
			first = false
			if i < len(names) {
				dst = appendEscapedBody(dst, names[i])
			}
		}
		mask >>= 1
	}
	return append(dst, '"')
}

// appendEscapedBody appends s as the inside of a JSON string.
func appendEscapedBody(dst []byte, s string) []byte {
	n := len(dst)
	dst = jsonstr.AppendJava(dst, s)
	// drop the quotes appendQuoted put around it
	copy(dst[n:], dst[n+1:len(dst)-1])
	return dst[:len(dst)-2]
}

// appendDecimal writes a DECIMAL value (text like "-12.3400") in the
// decimal.handling.mode: precise is the base64 of the big-endian two's
// complement of the unscaled integer at the column's scale.
func (d *dbzState) appendDecimal(dst []byte, col *binlog.Column, text []byte) []byte {
	switch d.opts.decimal {
	case 's':
		return jsonstr.AppendJava(dst, text)
	case 'd':
		f, err := strconv.ParseFloat(string(text), 64)
		if err != nil || math.IsInf(f, 0) {
			return append(dst, "null"...)
		}
		return appendJavaFloat(dst, f, 64)
	}
	neg, digits, scale, ok := splitDecimal(text, d.scratch[:0])
	if !ok {
		return append(dst, "null"...)
	}
	want := scale
	if col.Precision > 0 {
		want = col.Frac
	}
	for ; scale < want; scale++ {
		digits = append(digits, '0')
	}
	if scale > want {
		digits = digits[:len(digits)-(scale-want)]
	}
	d.scratch = digits
	// Strip leading zeros; at most 19 digits fit a uint64.
	i := 0
	for i < len(digits)-1 && digits[i] == '0' {
		i++
	}
	digits = digits[i:]
	if len(digits) <= 19 {
		var m uint64
		for _, c := range digits {
			m = m*10 + uint64(c-'0')
		}
		return appendDecimalBytes(dst, neg && m != 0, m, nil)
	}
	var b big.Int
	b.SetString(string(digits), 10)
	return appendDecimalBytes(dst, neg, 0, &b)
}

// splitDecimal parses [-]digits[.digits] into the sign, all digits (into
// buf) and the number of fractional digits.
func splitDecimal(text, buf []byte) (neg bool, digits []byte, scale int, ok bool) {
	i := 0
	if i < len(text) && (text[i] == '-' || text[i] == '+') {
		neg = text[i] == '-'
		i++
	}
	dot := false
	for ; i < len(text); i++ {
		c := text[i]
		switch {
		case c >= '0' && c <= '9':
			buf = append(buf, c)
			if dot {
				scale++
			}
		case c == '.' && !dot:
			dot = true
		default:
			return false, buf, 0, false
		}
	}
	return neg, buf, scale, len(buf) > 0
}

// appendDecimalBytes writes the base64 of the minimal big-endian two's
// complement of the integer -m or m (or of b when not nil), as Java's
// BigInteger.toByteArray gives it.
func appendDecimalBytes(dst []byte, neg bool, m uint64, b *big.Int) []byte {
	var buf [9]byte
	var mag []byte
	if b == nil {
		if neg {
			m-- // two's complement of -m is the inverse of m-1
		}
		binary.BigEndian.PutUint64(buf[1:], m)
		mag = buf[1:]
		for len(mag) > 0 && mag[0] == 0 {
			mag = mag[1:]
		}
	} else {
		if b.Sign() < 0 {
			neg = true
			b.Neg(b)
		}
		if neg {
			b.Sub(b, big.NewInt(1))
		}
		mag = b.Bytes()
	}
	var ob [40]byte
	out := ob[:0]
	if neg {
		out = append(out, 0xFF)
		for _, c := range mag {
			out = append(out, ^c)
		}
		if len(out) > 1 && out[1]&0x80 != 0 {
			out = out[1:]
		}
	} else {
		out = append(out, 0)
		out = append(out, mag...)
		if len(out) > 1 && out[1]&0x80 == 0 {
			out = out[1:]
		}
	}
	return appendBase64(dst, out)
}

// appendJavaFloat writes f as Java's Double.toString (bitSize 64) or
// Float.toString (32) writes it, which is what JsonConverter's Jackson
// writes: the shortest digits that read back as f, plain with at least one
// fractional digit for 1e-3 <= |f| < 1e7 ("42.0", "0.001"), else
// "d.dddE[-]n" ("1.0E7", "1.5E-4").
func appendJavaFloat(dst []byte, f float64, bitSize int) []byte {
	if f == 0 {
		if math.Signbit(f) {
			return append(dst, "-0.0"...)
		}
		return append(dst, "0.0"...)
	}
	a := math.Abs(f)
	if a < 1e7 && a >= 1 && f == math.Trunc(f) {
		dst = strconv.AppendInt(dst, int64(f), 10)
		return append(dst, '.', '0')
	}
	plain := a >= 1e-3 && a < 1e7
	if plain {
		// The shortest digits in plain layout, as Java writes them here.
		n := len(dst)
		dst = strconv.AppendFloat(dst, f, 'f', -1, bitSize)
		if bytes.IndexByte(dst[n:], '.') < 0 {
			dst = append(dst, '.', '0')
		}
		return dst
	}
	var buf [32]byte
	e := strconv.AppendFloat(buf[:0], f, 'e', -1, bitSize) // [-]d[.ddd]e±XX
	if len(e) > 1 && e[1] == 'e' || len(e) > 2 && e[0] == '-' && e[2] == 'e' {
		// One digit: Java writes two, the closer of the two-digit
		// decimals (4.9E-324 for the smallest double, 1.0E23 for 1e23).
		e = strconv.AppendFloat(buf[:0], f, 'e', 1, bitSize)
	}
	neg := e[0] == '-'
	if neg {
		e = e[1:]
	}
	var digs [24]byte
	ds := digs[:0]
	k := 0
	for ; k < len(e) && e[k] != 'e'; k++ {
		if e[k] != '.' {
			ds = append(ds, e[k])
		}
	}
	exp, _ := strconv.Atoi(string(e[k+1:]))
	if neg {
		dst = append(dst, '-')
	}
	dst = append(dst, ds[0], '.')
	if len(ds) > 1 {
		dst = append(dst, ds[1:]...)
	} else {
		dst = append(dst, '0')
	}
	dst = append(dst, 'E')
	return strconv.AppendInt(dst, int64(exp), 10)
}

// appendUUID appends the 16 bytes b as a UUID's text in quotes,
// lower-case hex in groups of 8-4-4-4-12.
func appendUUID(dst []byte, b []byte) []byte {
	const hexDigits = "0123456789abcdef"
	dst = append(dst, '"')
	for i, c := range b {
		if i == 4 || i == 6 || i == 8 || i == 10 {
			dst = append(dst, '-')
		}
		dst = append(dst, hexDigits[c>>4], hexDigits[c&15])
	}
	return append(dst, '"')
}

// appendDbzUUID appends a MariaDB UUID as Debezium's MariaDB connector
// writes it: its text, in every binary.handling.mode. A streamed one is
// the binlog's BINARY(16), whose trailing zero bytes the server drops, and
// Debezium pads what is left with zeros in front:
// 123e4567-e89b-12d3-a456-426614174000 is streamed as
// 00123e45-67e8-9b12-d3a4-564266141740 (Debezium 3.5.0,
// TestDebeziumOracle); a snapshot's is read as text, unchanged.
func (d *dbzState) appendDbzUUID(dst []byte, b []byte) []byte {
	if !d.snap {
		b = bytes.TrimRight(b, "\x00")
	}
	var u [16]byte
	if d.snap {
		copy(u[:], b) // BINARY(16): zero-padded at the end
	} else {
		copy(u[16-len(b):], b)
	}
	return appendUUID(dst, u[:])
}
