package codec

// Column defaults in format debezium: the "default" of a field schema and
// the value JsonConverter's replace.null.with.default writes for a null.
// Debezium's BinlogDefaultValueConverter turns the DDL's default text
// (binlog.Column.Default) into the value its converters take, which is
// then written as a value of the column is.

import (
	"math/big"
	"strconv"
	"strings"

	"github.com/sluice-cdc/sluice/binlog"
	"github.com/sluice-cdc/sluice/internal/jsonstr"
)

// defaultValue returns col's default as its value is written, or nil for
// a column without one (no default, DEFAULT NULL, an expression, a zero
// date in a nullable column, or text that does not convert).
func (d *dbzState) defaultValue(col *binlog.Column) []byte {
	if col.Default == nil {
		return nil
	}
	s := *col.Default
	switch col.Kind {
	case binlog.KindString, binlog.KindJSON, binlog.KindSet, binlog.KindEnum:
		// MySQL's SHOW CREATE TABLE writes a default with a 4-byte
		// UTF-8 character as a hex literal (0xF09F9880).
		if hb, ok := hexLiteral(s); ok && col.Kind != binlog.KindString {
			return jsonstr.AppendJava(nil, hb)
		}
		return jsonstr.AppendJava(nil, s)
	case binlog.KindBytes:
		b := []byte(s)
		if hb, ok := hexLiteral(s); ok {
			b = hb
		}
		switch d.opts.binary {
		case 'x':
			return appendHex(nil, b)
		}
		return appendBase64(nil, b)
	}
	s = strings.TrimSpace(s)
	var v binlog.Value
	switch col.Kind {
	case binlog.KindInt, binlog.KindUint:
		switch strings.ToLower(s) {
		case "true":
			s = "1"
		case "false":
			s = "0"
		}
		if col.Kind == binlog.KindUint || col.Unsigned {
			u, err := strconv.ParseUint(strings.TrimPrefix(s, "+"), 10, 64)
			if err != nil {
				return nil
			}
			v = binlog.UintValue(u)
		} else {
			i, err := strconv.ParseInt(s, 10, 64)
			if err != nil {
				return nil
			}
			v = binlog.IntValue(i)
		}
		if col.Kind == binlog.KindUint && !isBigintUnsigned(col) {
			return strconv.AppendUint(nil, v.Uint(), 10)
		}
		if col.Kind == binlog.KindInt && col.Unsigned {
			v = binlog.UintValue(v.Uint())
			return strconv.AppendUint(nil, v.Uint(), 10)
		}
	case binlog.KindYear:
		y, err := strconv.Atoi(s)
		if err != nil {
			return nil
		}
		// A two-digit year as the server stores it (DEFAULT 1 is 2001,
		// 70 is 1970), as a statement's text may give it.
		switch {
		case y >= 1 && y <= 69:
			y += 2000
		case y >= 70 && y <= 99:
			y += 1900
		}
		return strconv.AppendInt(nil, int64(y), 10)
	case binlog.KindBit:
		return d.defaultBits(col, s)
	case binlog.KindFloat, binlog.KindDouble:
		f, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return nil
		}
		v = binlog.FloatValue(col.Kind, f)
	case binlog.KindDecimal:
		switch strings.ToLower(s) {
		case "true":
			s = "1"
		case "false":
			s = "0"
		}
		text, ok := roundHalfUp(s, col.Frac, col.Precision > 0)
		if !ok {
			return nil
		}
		return d.appendDecimal(nil, col, []byte(text))
	case binlog.KindDate:
		y, mo, da, _, ok := parseDateTime(s)
		if zeroDate(s, y, mo, da) {
			if col.Nullable {
				return nil
			}
			y, mo, da = 1970, 1, 1
		} else if !ok {
			if col.Nullable {
				return nil
			}
			y, mo, da = 1970, 1, 1
		}
		v = binlog.DateValue(binlog.Date{Year: uint16(y), Month: uint8(mo), Day: uint8(da)})
	case binlog.KindDateTime:
		y, mo, da, tod, ok := parseDateTime(s)
		if zeroDate(s, y, mo, da) || !ok {
			if col.Nullable {
				return nil
			}
			y, mo, da, tod = 1970, 1, 1, 0
		}
		v = binlog.DateTimeValue(binlog.DateTime{Date: binlog.Date{Year: uint16(y), Month: uint8(mo), Day: uint8(da)},
			Hour: uint8(tod / 3600e6), Minute: uint8(tod / 60e6 % 60), Second: uint8(tod / 1e6 % 60), Micro: uint32(tod % 1e6)})
	case binlog.KindTimestamp:
		y, mo, da, tod, ok := parseDateTime(s)
		if zeroDate(s, y, mo, da) || s == "1970-01-01 00:00:00" || !ok {
			// Debezium: CURRENT_TIMESTAMP and zero are the epoch, null
			// (no default) in a nullable column.
			if col.Nullable {
				return nil
			}
			return []byte(zeroTimestampText)
		}
		// The text is in the connector's time zone: taken as UTC.
		us := (binlog.DaysFromCivil(int64(y), mo, da)*86400)*1e6 + tod
		v = binlog.TimestampValue(floorDiv(us, 1e6), uint32(us-floorDiv(us, 1e6)*1e6))
	case binlog.KindTime:
		if i := strings.IndexByte(s, ' '); i > 0 {
			s = s[i+1:] // a date and a time: the time
		}
		us, ok := parseDuration(s)
		if !ok {
			return nil
		}
		v = binlog.TimeValue(us)
	default:
		return nil // geometry, vector: no literal defaults
	}
	return d.appendValue(nil, col, &v)
}

// zeroDate reports whether a date's text is one of MySQL's zero dates
// (a zero year, month or day; "0"), which Debezium reads as the epoch.
func zeroDate(s string, y, mo, da int) bool {
	if s == "0" {
		return true
	}
	if len(s) < 10 || s[4] != '-' || s[7] != '-' {
		return false
	}
	return y == 0 || mo == 0 || da == 0
}

// parseDateTime reads "YYYY-MM-DD[ HH:MM:SS[.ffffff]]": the date and the
// time of day in microseconds.
func parseDateTime(s string) (y, mo, da int, tod int64, ok bool) {
	if len(s) < 10 || s[4] != '-' || s[7] != '-' {
		return 0, 0, 0, 0, false
	}
	var e1, e2, e3 error
	y, e1 = strconv.Atoi(s[:4])
	mo, e2 = strconv.Atoi(s[5:7])
	da, e3 = strconv.Atoi(s[8:10])
	if e1 != nil || e2 != nil || e3 != nil {
		return 0, 0, 0, 0, false
	}
	rest := strings.TrimSpace(s[10:])
	if rest != "" {
		us, good := parseDuration(rest)
		if !good || us < 0 || us >= 86400e6 {
			return 0, 0, 0, 0, false
		}
		tod = us
	}
	if y == 0 || mo == 0 || da == 0 {
		return y, mo, da, tod, true
	}
	return y, mo, da, tod, mo <= 12 && da <= 31
}

// parseDuration reads "[-]H:MM:SS[.ffffff]" (hours may exceed 24) in
// microseconds.
func parseDuration(s string) (int64, bool) {
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	parts := strings.Split(s, ":")
	if len(parts) != 3 {
		return 0, false
	}
	h, e1 := strconv.ParseInt(parts[0], 10, 64)
	m, e2 := strconv.ParseInt(parts[1], 10, 64)
	sec, frac, _ := strings.Cut(parts[2], ".")
	sv, e3 := strconv.ParseInt(sec, 10, 64)
	if e1 != nil || e2 != nil || e3 != nil || len(frac) > 6 {
		return 0, false
	}
	var micro int64
	if frac != "" {
		f, err := strconv.ParseInt((frac + "000000")[:6], 10, 64)
		if err != nil {
			return 0, false
		}
		micro = f
	}
	us := ((h*60+m)*60+sv)*1e6 + micro
	if neg {
		us = -us
	}
	return us, true
}

// roundHalfUp gives the decimal text s at scale digits after the point,
// rounded half up as Java's BigDecimal.setScale(HALF_UP) does (when
// scaled; else s as it is, checked).
func roundHalfUp(s string, scale int, scaled bool) (string, bool) {
	r, ok := new(big.Rat).SetString(s)
	if !ok {
		return "", false
	}
	if !scaled {
		if _, _, _, good := splitDecimal([]byte(s), nil); !good {
			return r.FloatString(scale), true
		}
		return s, true
	}
	// Half up (away from zero): add ±0.5 ulp, then truncate.
	ulp := new(big.Rat).SetFrac(big.NewInt(1), new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(scale)), nil))
	half := new(big.Rat).Mul(ulp, big.NewRat(1, 2))
	if r.Sign() < 0 {
		half.Neg(half)
	}
	r.Add(r, half)
	q := new(big.Rat).Quo(r, ulp)
	n := new(big.Int).Quo(q.Num(), q.Denom()) // truncates toward zero
	t := new(big.Rat).SetFrac(n, new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(scale)), nil))
	out := t.FloatString(scale)
	if n.Sign() == 0 && strings.HasPrefix(out, "-") {
		out = out[1:]
	}
	return out, true
}

// hexLiteral reads a 0x... or X'...' literal's bytes.
func hexLiteral(s string) ([]byte, bool) {
	var h string
	switch {
	case strings.HasPrefix(s, "0x"):
		h = s[2:]
	case len(s) >= 3 && (s[0] == 'x' || s[0] == 'X') && s[1] == '\'' && s[len(s)-1] == '\'':
		h = s[2 : len(s)-1]
	default:
		return nil, false
	}
	if len(h)%2 == 1 {
		h = "0" + h
	}
	out := make([]byte, len(h)/2)
	for i := range out {
		b, err := strconv.ParseUint(h[2*i:2*i+2], 16, 8)
		if err != nil {
			return nil, false
		}
		out[i] = byte(b)
	}
	return out, true
}

// defaultBits converts a BIT default: for BIT(1) a boolean; else the
// binary digits into bytes as Debezium's converter does (big-endian in
// groups of eight from the right), reversed into little-endian and padded
// to the column's width, except that a single byte is written as it is.
func (d *dbzState) defaultBits(col *binlog.Column, s string) []byte {
	var digits string
	switch {
	case strings.HasPrefix(s, "0b"):
		digits = s[2:]
	case len(s) >= 3 && (s[0] == 'b' || s[0] == 'B') && s[1] == '\'' && s[len(s)-1] == '\'':
		digits = s[2 : len(s)-1]
	default:
		if hb, ok := hexLiteral(s); ok {
			var b strings.Builder
			for _, c := range hb {
				b.WriteString(strconv.FormatUint(uint64(c)|0x100, 2)[1:])
			}
			digits = b.String()
		} else if u, err := strconv.ParseUint(s, 10, 64); err == nil {
			digits = strconv.FormatUint(u, 2)
		} else if col.BitLen == 1 {
			switch strings.ToLower(s) {
			case "true":
				digits = "1"
			case "false":
				digits = "0"
			}
		}
	}
	if digits == "" {
		return nil
	}
	for _, c := range digits {
		if c != '0' && c != '1' {
			return nil
		}
	}
	if bitLen(col) == 1 {
		u, _ := strconv.ParseUint(digits, 2, 64)
		return strconv.AppendBool(nil, u != 0)
	}
	n := (len(digits) + 7) / 8
	be := make([]byte, n)
	for i := 0; i < n; i++ {
		lo := max(len(digits)-8, 0)
		b, _ := strconv.ParseUint(digits[lo:], 2, 8)
		be[n-i-1] = byte(b)
		digits = digits[:lo]
	}
	if n == 1 {
		return appendBase64(nil, be)
	}
	le := make([]byte, max(n, (bitLen(col)+7)/8))
	for i := range be {
		le[i] = be[n-1-i]
	}
	return appendBase64(nil, le)
}
