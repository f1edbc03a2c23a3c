package snapshot

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/go-mysql-org/go-mysql/client"
	"github.com/go-mysql-org/go-mysql/mysql"

	"github.com/sluice-cdc/sluice/binlog"
	"github.com/sluice-cdc/sluice/internal/rawconn"
	"github.com/sluice-cdc/sluice/internal/sqlstmt"
	"github.com/sluice-cdc/sluice/mysqlconn"
)

// SessionSQL is the statement Scan runs on its connection before every
// query. It makes the server send what the binlog holds:
//
//   - character_set_results = NULL: text in each column's own character
//     set, unconverted, as the binlog carries it (codec converts it to
//     UTF-8 from Column.Charset);
//   - time_zone = '+00:00': TIMESTAMP values in UTC, which Scan turns into
//     Unix seconds without any time zone rule getting in the way;
//   - NAMES utf8mb4: the query text, and string arguments, are UTF-8.
const SessionSQL = "SET NAMES utf8mb4, character_set_results = NULL, time_zone = '+00:00'"

// SelectList returns the select list Scan expects for t: every column in
// table order, ENUM and SET columns as their numbers (`e`|0 AS `e`). The
// numbers are what the binlog carries; names would be ambiguous for an
// ENUM having the empty string as a member (the index 0 error value reads
// as the empty string too), and are in the column's character set, not
// necessarily UTF-8 as information_schema lists them. (A bitwise OR makes
// an unsigned BIGINT of the column's integer value on both servers; `e`+0
// is a DOUBLE on MySQL, inexact for SET masks above 2^53.) BINARY(n)
// columns, and MariaDB's INET4, INET6 and UUID described as such, are cast
// AS BINARY: SELECT gives those three as text ('::1'), the binlog their
// binary form, which the cast returns (and leaves a BINARY(n) as it is).
func SelectList(t *binlog.Table) string {
	var b strings.Builder
	for i := range t.Columns {
		if i > 0 {
			b.WriteString(", ")
		}
		col := &t.Columns[i]
		q := sqlstmt.QuoteIdent(col.Name)
		if col.Kind == binlog.KindBytes && col.Type == mysql.MYSQL_TYPE_STRING {
			b.WriteString("CAST(")
		}
		b.WriteString(q)
		if col.Kind == binlog.KindEnum || col.Kind == binlog.KindSet {
			b.WriteString("|0 AS ")
			b.WriteString(q)
		}
		if col.Kind == binlog.KindBytes && col.Type == mysql.MYSQL_TYPE_STRING {
			b.WriteString(" AS BINARY) AS ")
			b.WriteString(q)
		}
	}
	return b.String()
}

// Scan runs query, a SELECT whose result columns are t's columns in table
// order (SelectList writes such a list; ChunkQuery whole queries), with
// args for its placeholders, and calls fn with each row, converted to the
// values the binlog reader decodes for the same row: codec.AppendValue
// writes a value of the snapshot and of the binlog identically.
//
// Rows are streamed: the result is never held in memory. fn is called
// with the same Row each time, and the bytes of its values point into
// buffers that are reused too: both are valid only until fn returns. Copy
// what you keep (CloneKey copies a row's key). Converting a row allocates
// nothing.
//
// Before the query, Scan runs SessionSQL on c, which changes the
// session's character sets and time zone; use a connection of its own for
// the snapshot. Scan uses the binary protocol (a prepared statement), in
// which FLOAT and DOUBLE values arrive as their exact bits.
//
// ENUM and SET columns may be selected as numbers (SelectList does) or
// plainly, as names; a name is then looked up in Column.Enum or
// Column.Set, which fails for names that are not in UTF-8 and is ambiguous
// for an ENUM having the empty string as a member.
//
// If fn returns an error, Scan reads and discards the rest of the result,
// so that the connection stays usable, and returns that error. To abandon
// a large result quickly, cancel ctx instead: Scan then returns at once,
// and the connection is unusable and must be closed. Long pauses in fn
// hold the result open: the server gives up on a client that reads
// nothing for net_write_timeout seconds (default 60).
func Scan(ctx context.Context, c *mysqlconn.Conn, t *binlog.Table, query string, args []any, fn func(binlog.Row) error) error {
	return scan(ctx, rawconn.Raw(c), t, query, args, fn)
}

// scan is Scan on the go-mysql connection, whose result packets it reads.
func scan(ctx context.Context, c *client.Conn, t *binlog.Table, query string, args []any, fn func(binlog.Row) error) error {
	rd, err := newReader(c)
	if err != nil {
		return err
	}
	defer rd.close()
	return withContext(ctx, c, func() error {
		if err := session(c); err != nil {
			return err
		}
		return rd.scan(ctx, t, query, args, fn)
	})
}

// scan is Scan on a reader whose session is set: it prepares query once
// for the reader and does not check ctx's end itself (see withContext).
func (rd *reader) scan(ctx context.Context, t *binlog.Table, query string, args []any, fn func(binlog.Row) error) error {
	s := scanner{t: t, ctx: ctx, fn: fn, row: make(binlog.Row, len(t.Columns))}
	return rd.run(&s, query, args)
}

// scanInto is scan with each row decoded into into(), a row of
// len(t.Columns) values, instead of one reused row; an error from fn
// ends the read at once, leaving the connection unusable (reader.broken).
// Bytes values still point into the reader's buffer: copy them before
// fn returns.
func (rd *reader) scanInto(ctx context.Context, t *binlog.Table, query string, args []any, into func() binlog.Row, fn func(binlog.Row) error) error {
	s := scanner{t: t, ctx: ctx, fn: fn, into: into, abort: true}
	return rd.run(&s, query, args)
}

func (rd *reader) run(s *scanner, query string, args []any) error {
	st, err := rd.prepare(query)
	if err != nil {
		return s.queryError(err)
	}
	// Check the result's columns before running the query: an error
	// found once rows are coming would have to read them all.
	if len(st.RawColumnFields) > 0 {
		cols := make([]column, len(st.RawColumnFields))
		for i, raw := range st.RawColumnFields {
			if cols[i], err = parseColumn(raw); err != nil {
				return err
			}
		}
		if _, err := s.chooseConvs(cols); err != nil {
			return err
		}
	}
	err = rd.execute(st, args, s.onColumns, s.onRow)
	if err != nil && !errors.Is(err, errFromFn) && s.err == nil {
		return s.queryError(err)
	}
	return s.err
}

type scanner struct {
	t     *binlog.Table
	ctx   context.Context
	fn    func(binlog.Row) error
	row   binlog.Row        // the row decoded into, reused
	into  func() binlog.Row // if set, returns the row to decode into instead
	abort bool              // an error from fn ends the read at once
	cols  []column
	convs []conv
	n     int   // rows seen
	err   error // from fn or conversion
}

// errFromFn marks an error kept in scanner.err.
var errFromFn = errors.New("snapshot: row callback failed")

// conv says how to convert one result column.
type conv struct {
	op   convOp
	kind binlog.Kind
}

type convOp uint8

const (
	opInt       convOp = iota // integer field to KindInt
	opUint                    // integer field to KindUint
	opNum                     // integer field to kind (YEAR, ENUM/SET numbers, BIT+0)
	opFloat                   // FLOAT (or DOUBLE holding one) to KindFloat
	opDouble                  // DOUBLE to KindDouble
	opBytes                   // bytes as they come, of kind
	opBit                     // BIT bytes, big-endian, to KindBit
	opDate                    // binary-protocol DATE bytes
	opDateTime                // binary-protocol DATETIME bytes
	opTimestamp               // binary-protocol TIMESTAMP bytes (UTC)
	opTime                    // binary-protocol TIME bytes
	opEnumName                // ENUM member name
	opSetName                 // SET member names
	opJSON                    // MySQL's JSON text, spaces between tokens taken out
)

// session runs SessionSQL.
func session(c *client.Conn) error {
	if _, err := c.Execute(SessionSQL); err != nil {
		return fmt.Errorf("snapshot: preparing the session (%s): %w", SessionSQL, err)
	}
	return nil
}

func (s *scanner) queryError(err error) error {
	var me *mysql.MyError
	if errors.As(err, &me) {
		switch me.Code {
		case mysql.ER_NO_SUCH_TABLE, mysql.ER_BAD_DB_ERROR, mysql.ER_TABLEACCESS_DENIED_ERROR,
			mysql.ER_COLUMNACCESS_DENIED_ERROR, mysql.ER_DBACCESS_DENIED_ERROR:
			return tableError(err, s.t.Schema, s.t.Name)
		}
	}
	return fmt.Errorf("snapshot: reading %s: %w", sqlstmt.QuoteName(s.t.Schema, s.t.Name), err)
}

// onColumns chooses each result column's conversion.
func (s *scanner) onColumns(cols []column) error {
	convs, err := s.chooseConvs(cols)
	if err != nil {
		s.err = err
		return errFromFn
	}
	s.cols, s.convs = cols, convs
	return nil
}

// chooseConvs checks result columns against the table's and chooses the
// conversion of each.
func (s *scanner) chooseConvs(fields []column) ([]conv, error) {
	t := s.t
	if len(fields) != len(t.Columns) {
		return nil, fmt.Errorf("snapshot: %s: the query returns %d columns, the table has %d: select the table's columns in table order (see SelectList)",
			t.QualifiedName(), len(fields), len(t.Columns))
	}
	convs := make([]conv, len(t.Columns))
	for i, f := range fields {
		col := &t.Columns[i]
		cv, ok := chooseConv(col, f)
		if !ok {
			return nil, fmt.Errorf("snapshot: %s: result column %d %q has type %s, which cannot hold column %q (%s): select the table's columns in table order (see SelectList)",
				t.QualifiedName(), i+1, f.name, fieldTypeName(f.typ), col.Name, col.Kind)
		}
		convs[i] = cv
	}
	return convs, nil
}

func isIntField(t byte) bool {
	switch t {
	case mysql.MYSQL_TYPE_TINY, mysql.MYSQL_TYPE_SHORT, mysql.MYSQL_TYPE_INT24,
		mysql.MYSQL_TYPE_LONG, mysql.MYSQL_TYPE_LONGLONG:
		return true
	}
	return false
}

func isStringField(t byte) bool {
	switch t {
	case mysql.MYSQL_TYPE_VARCHAR, mysql.MYSQL_TYPE_VAR_STRING, mysql.MYSQL_TYPE_STRING,
		mysql.MYSQL_TYPE_TINY_BLOB, mysql.MYSQL_TYPE_MEDIUM_BLOB, mysql.MYSQL_TYPE_LONG_BLOB,
		mysql.MYSQL_TYPE_BLOB, mysql.MYSQL_TYPE_JSON, mysql.MYSQL_TYPE_VECTOR:
		return true
	}
	return false
}

// chooseConv picks the conversion of result field f into column col's kind.
func chooseConv(col *binlog.Column, f column) (conv, bool) {
	ft := f.typ
	k := col.Kind
	switch k {
	case binlog.KindInt:
		return conv{op: opInt, kind: k}, isIntField(ft)
	case binlog.KindUint:
		return conv{op: opUint, kind: k}, isIntField(ft)
	case binlog.KindFloat:
		return conv{op: opFloat, kind: k}, ft == mysql.MYSQL_TYPE_FLOAT || ft == mysql.MYSQL_TYPE_DOUBLE
	case binlog.KindDouble:
		return conv{op: opDouble, kind: k}, ft == mysql.MYSQL_TYPE_DOUBLE
	case binlog.KindDecimal:
		return conv{op: opBytes, kind: k}, ft == mysql.MYSQL_TYPE_NEWDECIMAL || ft == mysql.MYSQL_TYPE_DECIMAL
	case binlog.KindDate:
		return conv{op: opDate, kind: k}, ft == mysql.MYSQL_TYPE_DATE || ft == mysql.MYSQL_TYPE_NEWDATE
	case binlog.KindDateTime:
		return conv{op: opDateTime, kind: k}, ft == mysql.MYSQL_TYPE_DATETIME || ft == mysql.MYSQL_TYPE_DATETIME2
	case binlog.KindTimestamp:
		return conv{op: opTimestamp, kind: k}, ft == mysql.MYSQL_TYPE_TIMESTAMP || ft == mysql.MYSQL_TYPE_TIMESTAMP2
	case binlog.KindTime:
		return conv{op: opTime, kind: k}, ft == mysql.MYSQL_TYPE_TIME || ft == mysql.MYSQL_TYPE_TIME2
	case binlog.KindYear:
		return conv{op: opNum, kind: k}, ft == mysql.MYSQL_TYPE_YEAR || isIntField(ft)
	case binlog.KindJSON:
		if ft == mysql.MYSQL_TYPE_JSON {
			return conv{op: opJSON, kind: k}, true
		}
		return conv{op: opBytes, kind: k}, isStringField(ft)
	case binlog.KindString, binlog.KindBytes, binlog.KindVector:
		return conv{op: opBytes, kind: k}, isStringField(ft)
	case binlog.KindGeometry:
		return conv{op: opBytes, kind: k}, ft == mysql.MYSQL_TYPE_GEOMETRY || isStringField(ft)
	case binlog.KindEnum:
		if isIntField(ft) {
			return conv{op: opNum, kind: k}, true
		}
		return conv{op: opEnumName, kind: k}, ft == mysql.MYSQL_TYPE_ENUM || isStringField(ft)
	case binlog.KindSet:
		if isIntField(ft) {
			return conv{op: opNum, kind: k}, true
		}
		return conv{op: opSetName, kind: k}, ft == mysql.MYSQL_TYPE_SET || isStringField(ft)
	case binlog.KindBit:
		if isIntField(ft) {
			return conv{op: opNum, kind: k}, true
		}
		return conv{op: opBit, kind: k}, ft == mysql.MYSQL_TYPE_BIT
	}
	return conv{}, false
}

// ctxCheckEvery is how many rows pass between checks of the context (the
// deadline set when it ends is the main way out; this one also works on
// connections configured with a read timeout, which resets deadlines).
const ctxCheckEvery = 1024

func (s *scanner) onRow(p []byte) error {
	s.n++
	if s.n%ctxCheckEvery == 0 {
		if err := s.ctx.Err(); err != nil {
			return err
		}
	}
	row := s.row
	if s.into != nil {
		row = s.into()
	}
	if err := s.decode(p, row); err != nil {
		s.err = err
		return errFromFn
	}
	if err := s.fn(row); err != nil {
		s.err = err
		if s.abort {
			return err
		}
		return errFromFn
	}
	return nil
}

// decode converts a binary-protocol row packet into row: a 0x00
// header, a NULL bitmap offset by two bits, then each non-NULL value in
// its type's layout. Bytes values point into p.
func (s *scanner) decode(p []byte, row binlog.Row) error {
	cols := s.cols
	nullLen := (len(cols) + 9) / 8
	if len(p) < 1+nullLen || p[0] != 0 {
		return fmt.Errorf("%w: row", errMalformed)
	}
	nulls := p[1 : 1+nullLen]
	pos := 1 + nullLen
	for i := range s.convs {
		if bit := i + 2; nulls[bit>>3]&(1<<(bit&7)) != 0 {
			row[i] = binlog.NullValue()
			continue
		}
		f := &cols[i]
		var (
			u    uint64 // an integer or float's bits
			b    []byte // anything else
			size int
		)
		switch f.typ {
		case mysql.MYSQL_TYPE_TINY:
			size = 1
		case mysql.MYSQL_TYPE_SHORT, mysql.MYSQL_TYPE_YEAR:
			size = 2
		case mysql.MYSQL_TYPE_INT24, mysql.MYSQL_TYPE_LONG, mysql.MYSQL_TYPE_FLOAT:
			size = 4
		case mysql.MYSQL_TYPE_LONGLONG, mysql.MYSQL_TYPE_DOUBLE:
			size = 8
		case mysql.MYSQL_TYPE_DATE, mysql.MYSQL_TYPE_NEWDATE, mysql.MYSQL_TYPE_DATETIME, mysql.MYSQL_TYPE_DATETIME2,
			mysql.MYSQL_TYPE_TIMESTAMP, mysql.MYSQL_TYPE_TIMESTAMP2, mysql.MYSQL_TYPE_TIME, mysql.MYSQL_TYPE_TIME2:
			// A length byte and the fields: laid out as a length-encoded
			// string of at most 12 bytes.
			if pos >= len(p) || p[pos] > 12 {
				return s.badRow(i)
			}
			fallthrough
		default:
			v, n, ok := lenencBytes(p[pos:])
			if !ok {
				return s.badRow(i)
			}
			b, pos = v, pos+n
		}
		if size > 0 {
			if len(p)-pos < size {
				return s.badRow(i)
			}
			q := p[pos : pos+size]
			pos += size
			switch size {
			case 1:
				u = uint64(q[0])
				if !f.unsigned() {
					u = uint64(int64(int8(q[0])))
				}
			case 2:
				u = uint64(binary.LittleEndian.Uint16(q))
				if !f.unsigned() && f.typ != mysql.MYSQL_TYPE_YEAR {
					u = uint64(int64(int16(u)))
				}
			case 4:
				u = uint64(binary.LittleEndian.Uint32(q))
				if !f.unsigned() && f.typ != mysql.MYSQL_TYPE_FLOAT {
					u = uint64(int64(int32(u)))
				}
			case 8:
				u = binary.LittleEndian.Uint64(q)
			}
		}
		cv := s.convs[i]
		switch cv.op {
		case opInt:
			row[i] = binlog.IntValue(int64(u))
		case opUint:
			row[i] = binlog.UintValue(u)
		case opNum:
			row[i] = binlog.NumValue(cv.kind, u)
		case opFloat:
			// As the binlog decoder: the single-precision value, widened.
			if f.typ == mysql.MYSQL_TYPE_FLOAT {
				row[i] = binlog.FloatValue(binlog.KindFloat, float64(math.Float32frombits(uint32(u))))
			} else {
				row[i] = binlog.FloatValue(binlog.KindFloat, float64(float32(math.Float64frombits(u))))
			}
		case opDouble:
			row[i] = binlog.FloatValue(binlog.KindDouble, math.Float64frombits(u))
		case opBytes:
			row[i] = binlog.BytesValue(cv.kind, nonNil(b))
		case opJSON:
			row[i] = binlog.BytesValue(cv.kind, nonNil(compactJSON(b)))
		default:
			v, err := s.convertOther(i, cv, b)
			if err != nil {
				return err
			}
			row[i] = v
		}
	}
	return nil
}

// compactJSON takes out, in place, the spaces MySQL's JSON text has
// between tokens (after each ':' and ','): the binlog decoder writes a
// binary JSON document as the same text without them.
func compactJSON(b []byte) []byte {
	out := b[:0]
	inString, escaped := false, false
	for _, c := range b {
		if inString {
			out = append(out, c)
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
			continue
		}
		switch c {
		case ' ', '\n', '\t', '\r':
			continue
		case '"':
			inString = true
		}
		out = append(out, c)
	}
	return out
}

func (s *scanner) badRow(i int) error {
	return fmt.Errorf("%w: %s column %q of a row", errMalformed, s.t.QualifiedName(), s.t.Columns[i].Name)
}

// empty is the value of empty strings: non-nil, as the binlog decoder's.
var empty = make([]byte, 0)

func nonNil(b []byte) []byte {
	if b == nil {
		return empty
	}
	return b
}

func (s *scanner) convertOther(i int, cv conv, b []byte) (binlog.Value, error) {
	col := &s.t.Columns[i]
	switch cv.op {
	case opDate:
		dt, ok := binaryDateTime(b)
		if !ok || len(b) > 4 {
			return binlog.Value{}, s.badValue(col, b)
		}
		return binlog.DateValue(dt.Date), nil
	case opDateTime:
		dt, ok := binaryDateTime(b)
		if !ok {
			return binlog.Value{}, s.badValue(col, b)
		}
		return binlog.DateTimeValue(dt), nil
	case opTimestamp:
		dt, ok := binaryDateTime(b)
		if !ok {
			return binlog.Value{}, s.badValue(col, b)
		}
		if dt == (binlog.DateTime{}) {
			return binlog.TimestampValue(0, 0), nil // the zero timestamp
		}
		if dt.Month < 1 || dt.Month > 12 || dt.Day < 1 || dt.Day > 31 {
			return binlog.Value{}, s.badValue(col, b)
		}
		sec := binlog.DaysFromCivil(int64(dt.Year), int(dt.Month), int(dt.Day))*86400 +
			int64(dt.Hour)*3600 + int64(dt.Minute)*60 + int64(dt.Second)
		return binlog.TimestampValue(sec, dt.Micro), nil
	case opTime:
		us, ok := binaryTime(b)
		if !ok {
			return binlog.Value{}, s.badValue(col, b)
		}
		return binlog.TimeValue(us), nil
	case opBit:
		if len(b) > 8 {
			return binlog.Value{}, s.badValue(col, b)
		}
		var u uint64
		for _, c := range b {
			u = u<<8 | uint64(c)
		}
		return binlog.NumValue(binlog.KindBit, u), nil
	case opEnumName:
		if idx, ok := memberIndex(col.Enum, b); ok {
			return binlog.NumValue(binlog.KindEnum, uint64(idx)), nil
		}
		if len(b) == 0 {
			return binlog.NumValue(binlog.KindEnum, 0), nil // the '' error value
		}
		return binlog.Value{}, fmt.Errorf("snapshot: %s column %q: %q is not a member of the ENUM as information_schema lists it; select the column as %s|0 (see SelectList)",
			s.t.QualifiedName(), col.Name, b, sqlstmt.QuoteIdent(col.Name))
	case opSetName:
		var mask uint64
		for len(b) > 0 {
			name := b
			if j := indexByte(b, ','); j >= 0 {
				name, b = b[:j], b[j+1:]
			} else {
				b = nil
			}
			idx, ok := memberIndex(col.Set, name)
			if !ok || idx > 64 {
				return binlog.Value{}, fmt.Errorf("snapshot: %s column %q: %q is not a member of the SET as information_schema lists it; select the column as %s|0 (see SelectList)",
					s.t.QualifiedName(), col.Name, name, sqlstmt.QuoteIdent(col.Name))
			}
			mask |= 1 << (idx - 1)
		}
		return binlog.NumValue(binlog.KindSet, mask), nil
	}
	return binlog.Value{}, fmt.Errorf("snapshot: internal error: conversion %d", cv.op)
}

func (s *scanner) badValue(col *binlog.Column, b []byte) error {
	return fmt.Errorf("snapshot: %s column %q: the server sent a %s value of %d bytes (% x) that cannot be decoded",
		s.t.QualifiedName(), col.Name, col.Kind, len(b), b)
}

// memberIndex returns the 1-based index of name in members.
func memberIndex(members []string, name []byte) (int, bool) {
	for j, m := range members {
		if m == string(name) {
			return j + 1, true
		}
	}
	return 0, false
}

func indexByte(b []byte, c byte) int {
	for i, x := range b {
		if x == c {
			return i
		}
	}
	return -1
}

// binaryDateTime decodes the binary protocol's DATE, DATETIME and
// TIMESTAMP: 0 bytes for the zero value, 4 for a date (year as 2 bytes
// little-endian, month, day), 7 with hour, minute and second, 11 with
// microseconds as 4 bytes little-endian. Zero fields are kept.
func binaryDateTime(b []byte) (binlog.DateTime, bool) {
	var dt binlog.DateTime
	switch len(b) {
	case 11:
		dt.Micro = binary.LittleEndian.Uint32(b[7:])
		if dt.Micro > 999999 {
			return dt, false
		}
		fallthrough
	case 7:
		dt.Hour, dt.Minute, dt.Second = b[4], b[5], b[6]
		fallthrough
	case 4:
		dt.Year, dt.Month, dt.Day = binary.LittleEndian.Uint16(b), b[2], b[3]
	case 0:
	default:
		return dt, false
	}
	return dt, true
}

// binaryTime decodes the binary protocol's TIME to signed microseconds:
// 0 bytes for zero, 8 (sign, days as 4 bytes little-endian, hour, minute,
// second) or 12 (with microseconds as 4 bytes little-endian).
func binaryTime(b []byte) (int64, bool) {
	var micro int64
	switch len(b) {
	case 0:
		return 0, true
	case 12:
		micro = int64(binary.LittleEndian.Uint32(b[8:]))
		if micro > 999999 {
			return 0, false
		}
	case 8:
	default:
		return 0, false
	}
	days := int64(binary.LittleEndian.Uint32(b[1:]))
	us := ((days*24+int64(b[5]))*3600+int64(b[6])*60+int64(b[7]))*1000000 + micro
	if b[0] == 1 {
		us = -us
	}
	return us, true
}

// fieldTypeName names a result field's type for error messages.
func fieldTypeName(t byte) string {
	switch t {
	case mysql.MYSQL_TYPE_TINY:
		return "TINYINT"
	case mysql.MYSQL_TYPE_SHORT:
		return "SMALLINT"
	case mysql.MYSQL_TYPE_INT24:
		return "MEDIUMINT"
	case mysql.MYSQL_TYPE_LONG:
		return "INT"
	case mysql.MYSQL_TYPE_LONGLONG:
		return "BIGINT"
	case mysql.MYSQL_TYPE_FLOAT:
		return "FLOAT"
	case mysql.MYSQL_TYPE_DOUBLE:
		return "DOUBLE"
	case mysql.MYSQL_TYPE_DECIMAL, mysql.MYSQL_TYPE_NEWDECIMAL:
		return "DECIMAL"
	case mysql.MYSQL_TYPE_DATE, mysql.MYSQL_TYPE_NEWDATE:
		return "DATE"
	case mysql.MYSQL_TYPE_DATETIME, mysql.MYSQL_TYPE_DATETIME2:
		return "DATETIME"
	case mysql.MYSQL_TYPE_TIMESTAMP, mysql.MYSQL_TYPE_TIMESTAMP2:
		return "TIMESTAMP"
	case mysql.MYSQL_TYPE_TIME, mysql.MYSQL_TYPE_TIME2:
		return "TIME"
	case mysql.MYSQL_TYPE_YEAR:
		return "YEAR"
	case mysql.MYSQL_TYPE_BIT:
		return "BIT"
	case mysql.MYSQL_TYPE_JSON:
		return "JSON"
	case mysql.MYSQL_TYPE_ENUM:
		return "ENUM"
	case mysql.MYSQL_TYPE_SET:
		return "SET"
	case mysql.MYSQL_TYPE_GEOMETRY:
		return "GEOMETRY"
	case mysql.MYSQL_TYPE_NULL:
		return "NULL"
	}
	if isStringField(t) {
		return "string"
	}
	return fmt.Sprintf("type %d", t)
}
