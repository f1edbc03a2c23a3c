package snapshot

import (
	"bytes"
	"context"
	"encoding/hex"
	"fmt"
	"math/bits"
	"strconv"
	"strings"

	"github.com/go-mysql-org/go-mysql/client"

	"github.com/sluice-cdc/sluice/binlog"
	"github.com/sluice-cdc/sluice/codec"
	"github.com/sluice-cdc/sluice/internal/rawconn"
	"github.com/sluice-cdc/sluice/internal/sqlstmt"
	"github.com/sluice-cdc/sluice/mysqlconn"
)

// ChunkQuery returns a query for Scan that reads the rows of t that match
// where (SQL; "" for all rows) and whose key lies after the key of after
// and up to and including the key of upTo, in key order, at most limit of
// them (limit <= 0: no limit):
//
//	SELECT <SelectList(t)> FROM `db`.`t`
//	WHERE (<where>) AND (k1,k2) > (?,?) AND (k1,k2) <= (?,?)
//	ORDER BY k1, k2 LIMIT <limit>
//
// key holds the indexes in t.Columns of the key columns, in key order (see
// TableInfo.Key); it must be a unique key over NOT NULL columns. after and
// upTo are rows aligned with t.Columns of which only the key columns are
// read (a row from Scan, CloneKey or SplitPoints); nil leaves that side
// open. Reading chunk after chunk, each one after the last row of the one
// before, returns every row once, in key order.
//
// The key comparisons are written out as
// (k1 > ? OR (k1 = ? AND k2 > ?)), which means the same as the row
// comparison (k1,k2) > (?,?) but, unlike it, is turned into an index
// range by MariaDB's optimizer (MariaDB reads the whole index before the
// row comparison otherwise). Character and binary key values are written
// into the query as hexadecimal literals in the column's character set
// (_latin1 x'E9'): a literal compares in the column's own collation
// whatever the connection's character set, which a placeholder would not.
// Other key values are placeholders with the arguments KeyArgs makes;
// DECIMAL ones are cast to the column's exact type.
//
// A table without a key cannot be read in chunks: with key empty, after
// and upTo must be nil and the query reads the whole table in no
// particular order (limit is then ignored).
func ChunkQuery(t *binlog.Table, key []int, where string, after, upTo binlog.Row, limit int) (query string, args []any) {
	return chunkQuery(t, SelectList(t), key, where, after, upTo, limit, -1)
}

// RowQuery returns the query and arguments that read, with Scan, the row
// of t whose primary key columns equal row's (row is aligned with
// t.Columns and holds at least those columns), its key values written as
// ChunkQuery writes them. t must have a primary key.
func RowQuery(t *binlog.Table, row binlog.Row) (query string, args []any) {
	if len(t.PrimaryKey) == 0 || len(row) != len(t.Columns) {
		panic(fmt.Sprintf("snapshot: RowQuery: %s has no primary key, or the row has %d values", t, len(row)))
	}
	var b strings.Builder
	b.WriteString("SELECT ")
	b.WriteString(SelectList(t))
	b.WriteString(" FROM ")
	b.WriteString(sqlstmt.QuoteName(t.Schema, t.Name))
	for i, k := range t.PrimaryKey {
		if i == 0 {
			b.WriteString(" WHERE ")
		} else {
			b.WriteString(" AND ")
		}
		b.WriteString(columnRef(t, k))
		b.WriteString(" = ")
		args = operand(&b, &t.Columns[k], row[k], args)
	}
	return b.String(), args
}

// chunkQuery writes the query of ChunkQuery with the given select list,
// and with an OFFSET when offset >= 0.
func chunkQuery(t *binlog.Table, selectList string, key []int, where string, after, upTo binlog.Row, limit, offset int) (string, []any) {
	if len(key) == 0 && (after != nil || upTo != nil) {
		panic("snapshot: ChunkQuery: after and upTo need a key")
	}
	for _, k := range key {
		if k < 0 || k >= len(t.Columns) {
			panic(fmt.Sprintf("snapshot: ChunkQuery: key column %d out of range for %s", k, t))
		}
	}
	var b strings.Builder
	b.WriteString("SELECT ")
	b.WriteString(selectList)
	b.WriteString(" FROM ")
	b.WriteString(sqlstmt.QuoteName(t.Schema, t.Name))
	var args []any
	sep := " WHERE "
	if where != "" {
		b.WriteString(sep)
		b.WriteString("(")
		b.WriteString(where)
		b.WriteString(")")
		sep = " AND "
	}
	if after != nil {
		b.WriteString(sep)
		args = keyCond(&b, t, key, after, ">", ">", args)
		sep = " AND "
	}
	if upTo != nil {
		b.WriteString(sep)
		args = keyCond(&b, t, key, upTo, "<", "<=", args)
	}
	if len(key) > 0 {
		b.WriteString(" ORDER BY ")
		for i, k := range key {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(columnRef(t, k))
		}
		if limit > 0 {
			b.WriteString(" LIMIT ")
			b.WriteString(strconv.Itoa(limit))
		}
		if offset >= 0 {
			if limit <= 0 {
				b.WriteString(" LIMIT 18446744073709551615")
			}
			b.WriteString(" OFFSET ")
			b.WriteString(strconv.Itoa(offset))
		}
	}
	return b.String(), args
}

// columnRef names column k qualified by its table, so that ORDER BY does
// not pick the select list's alias of an ENUM or SET (`e`|0 AS `e`),
// which would sort by an expression instead of reading the index in order.
func columnRef(t *binlog.Table, k int) string {
	return sqlstmt.QuoteName(t.Schema, t.Name) + "." + sqlstmt.QuoteIdent(t.Columns[k].Name)
}

// keyCond writes the comparison of the key with row's key: strictly
// greater (op ">", last ">") or up to and including (op "<", last "<="),
// expanded so that the optimizer makes an index range of it.
func keyCond(b *strings.Builder, t *binlog.Table, key []int, row binlog.Row, op, last string, args []any) []any {
	if len(row) != len(t.Columns) {
		panic(fmt.Sprintf("snapshot: a key row of %d values for %s", len(row), t))
	}
	b.WriteString("(")
	for i := range key {
		if i > 0 {
			b.WriteString(" OR ")
		}
		if len(key) > 1 {
			b.WriteString("(")
		}
		for j := 0; j <= i; j++ {
			if j > 0 {
				b.WriteString(" AND ")
			}
			k := key[j]
			b.WriteString(columnRef(t, k))
			switch {
			case j < i:
				b.WriteString(" = ")
			case i == len(key)-1:
				b.WriteString(" " + last + " ")
			default:
				b.WriteString(" " + op + " ")
			}
			args = operand(b, &t.Columns[k], row[k], args)
		}
		if len(key) > 1 {
			b.WriteString(")")
		}
	}
	b.WriteString(")")
	return args
}

// operand writes the SQL of one key value: a literal for character and
// binary data, else a placeholder whose argument it appends to args.
func operand(b *strings.Builder, col *binlog.Column, v binlog.Value, args []any) []any {
	switch v.Kind() {
	case binlog.KindString, binlog.KindJSON, binlog.KindBytes, binlog.KindGeometry:
		cs := "binary"
		if k := v.Kind(); k == binlog.KindString || k == binlog.KindJSON {
			cs = col.Charset
			if cs == "" {
				cs = "utf8mb4" // character data of unknown charset: take it as UTF-8
			}
		}
		if !validCharsetName(cs) {
			cs = "binary"
		}
		b.WriteString("_")
		b.WriteString(cs)
		b.WriteString(" x'")
		var buf [64]byte
		for p := v.Bytes(); len(p) > 0; {
			n := min(len(p), len(buf)/2)
			hex.Encode(buf[:], p[:n])
			b.Write(buf[:2*n])
			p = p[n:]
		}
		b.WriteString("'")
		return args
	case binlog.KindDecimal:
		fmt.Fprintf(b, "CAST(? AS DECIMAL(%d,%d))", max(col.Precision, 1), col.Frac)
	default:
		b.WriteString("?")
	}
	return append(args, keyArg(v))
}

// validCharsetName reports whether s can be written after an introducer's
// underscore as it is (character set names are lowercase ASCII words).
func validCharsetName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}

// KeyArgs returns the values of row's key columns (key indexes t.Columns)
// as query arguments, in key order, that compare exactly with the column
// through a placeholder:
//
//	integers, YEAR         int64 (uint64 for unsigned, so BIGINT UNSIGNED is exact)
//	ENUM, SET, BIT         uint64: the index, the bit mask, the bits
//	FLOAT, DOUBLE          float64, the exact value
//	DECIMAL                string, the exact decimal text (compare it as
//	                       CAST(? AS DECIMAL(p,s)) for exactness on every server)
//	DATE, DATETIME, TIME   string, as the server writes it, with six
//	                       fractional digits ("2024-01-02 03:04:05.000006");
//	                       zero and partial dates as they are
//	TIMESTAMP              string, UTC (for a session with time_zone '+00:00',
//	                       as Scan sets it)
//	character, binary      []byte, the bytes as stored, in the column's
//	                       character set (a copy)
//	NULL                   nil
//
// Character values compare exactly through a placeholder only when the
// column's character set is the connection's (utf8mb4 after Scan);
// ChunkQuery writes them as literals instead, which is exact for every
// character set and collation. The arguments own their memory: they stay
// valid when row is reused.
func KeyArgs(t *binlog.Table, key []int, row binlog.Row) []any {
	args := make([]any, len(key))
	for i, k := range key {
		args[i] = keyArg(row[k])
	}
	return args
}

func keyArg(v binlog.Value) any {
	switch v.Kind() {
	case binlog.KindInt, binlog.KindYear:
		return v.Int()
	case binlog.KindUint, binlog.KindEnum, binlog.KindSet, binlog.KindBit:
		return v.Uint()
	case binlog.KindFloat, binlog.KindDouble:
		return v.Float()
	case binlog.KindDecimal:
		return string(v.Bytes())
	case binlog.KindDate:
		return string(codec.AppendDate(nil, v.Date()))
	case binlog.KindDateTime:
		return string(appendDateTime(nil, v.DateTime()))
	case binlog.KindTimestamp:
		sec, micro := v.Timestamp()
		return string(appendDateTime(nil, binlog.UTCDateTime(sec, micro)))
	case binlog.KindTime:
		return string(appendTime(nil, v.Duration()))
	case binlog.KindString, binlog.KindBytes, binlog.KindJSON, binlog.KindGeometry:
		return bytes.Clone(nonNil(v.Bytes()))
	}
	return nil // NULL, absent
}

// CloneRow returns a copy of row that stays valid after Scan reuses it.
func CloneRow(row binlog.Row) binlog.Row {
	out := make(binlog.Row, len(row))
	for i, v := range row {
		out[i] = cloneValue(v)
	}
	return out
}

// CloneKey returns a row aligned with t.Columns holding a copy of row's
// key values (key indexes t.Columns), every other column absent: a
// row that stays valid after Scan reuses row, for ChunkQuery's after and
// upTo.
func CloneKey(t *binlog.Table, key []int, row binlog.Row) binlog.Row {
	out := make(binlog.Row, len(t.Columns))
	for _, k := range key {
		out[k] = cloneValue(row[k])
	}
	return out
}

func cloneValue(v binlog.Value) binlog.Value {
	switch v.Kind() {
	case binlog.KindString, binlog.KindBytes, binlog.KindJSON, binlog.KindGeometry, binlog.KindDecimal, binlog.KindVector:
		return binlog.BytesValue(v.Kind(), bytes.Clone(nonNil(v.Bytes())))
	}
	return v // no bytes: a copy of the struct is a copy of the value
}

// SplitPoints returns up to n-1 keys that divide the rows of t matching
// where into n ranges of about the same number of rows, in increasing key
// order: the ranges are (nil, p[0]], (p[0], p[1]], ..., (p[len-1], nil),
// to be read with ChunkQuery(t, key, where, p[i-1], p[i], limit). The
// ranges cover the table exactly, whatever the key's type; only their
// balance is approximate. Each returned row is aligned with t.Columns and
// holds only the key columns.
//
// The row count is the server's estimate (information_schema.TABLES), or
// COUNT(*) for small tables and when where is set. A key that is a single
// integer column whose values are dense (at least one row for every two
// values between its MIN and MAX, as with AUTO_INCREMENT) is split
// arithmetically, in two index lookups. Other keys are sampled with
// ORDER BY key LIMIT 1 OFFSET k, each read starting after the previous
// sample, so that the samples together cost one pass over the key's index
// (for a primary key, over the table): with an exact count, the keys at
// positions rows*i/n are read; with an estimate, the key at every k-th
// position, k about rows/4n, and the points are the samples nearest to an
// even split of the rows sampled, so that an estimate that is off does not
// unbalance the ranges. Fewer points come back when the table has fewer
// rows than n (or far fewer than estimated); none when it has fewer than
// two rows, or no key.
//
// SplitPoints runs queries on c with Scan (so SessionSQL too); run it in
// the snapshot's transaction so that the points fit the rows it reads.
func SplitPoints(ctx context.Context, c *mysqlconn.Conn, t *binlog.Table, key []int, where string, n int) ([]binlog.Row, error) {
	return splitPoints(ctx, rawconn.Raw(c), t, key, where, n)
}

// splitPoints is SplitPoints on the go-mysql connection.
func splitPoints(ctx context.Context, c *client.Conn, t *binlog.Table, key []int, where string, n int) ([]binlog.Row, error) {
	if n < 2 || len(key) == 0 {
		return nil, nil
	}
	rows, exact, err := countRows(ctx, c, t, where)
	if err != nil {
		return nil, err
	}
	if rows < int64(n) {
		if rows < 2 {
			return nil, nil
		}
		n = int(rows)
	}
	if len(key) == 1 {
		switch t.Columns[key[0]].Kind {
		case binlog.KindInt, binlog.KindUint:
			points, ok, err := splitInts(ctx, c, t, key[0], where, n, rows)
			if err != nil || ok {
				return points, err
			}
		}
	}
	if exact {
		return sampleAt(ctx, c, t, key, where, n, rows)
	}
	return sampleKeys(ctx, c, t, key, where, n, rows)
}

// smallTable is the estimated row count under which SplitPoints counts
// rows exactly: the estimate of a small or new InnoDB table can be far
// off, and counting it is cheap.
const smallTable = 100000

func countRows(ctx context.Context, c *client.Conn, t *binlog.Table, where string) (rows int64, exact bool, err error) {
	err = withContext(ctx, c, func() error {
		if err := session(c); err != nil {
			return err
		}
		if where == "" {
			rs, err := c.Execute(`SELECT IFNULL(TABLE_ROWS, 0) FROM information_schema.TABLES
				WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ?`, t.Schema, t.Name)
			if err != nil {
				return fmt.Errorf("snapshot: estimating the rows of %s: %w", sqlstmt.QuoteName(t.Schema, t.Name), err)
			}
			if rs.RowNumber() > 0 {
				rows, _ = rs.GetInt(0, 0)
			}
			rs.Close()
			if rows >= smallTable {
				return nil
			}
		}
		q := "SELECT COUNT(*) FROM " + sqlstmt.QuoteName(t.Schema, t.Name)
		if where != "" {
			q += " WHERE (" + where + ")"
		}
		rs, err := c.Execute(q)
		if err != nil {
			return tableError(err, t.Schema, t.Name)
		}
		rows, _ = rs.GetInt(0, 0)
		rs.Close()
		exact = true
		return nil
	})
	return rows, exact, err
}

// splitInts splits a single integer key arithmetically between its MIN
// and MAX when its values are dense; ok is false when they are not.
func splitInts(ctx context.Context, c *client.Conn, t *binlog.Table, k int, where string, n int, rows int64) (points []binlog.Row, ok bool, err error) {
	col := t.Columns[k]
	col.Nullable = true
	mm := &binlog.Table{Schema: t.Schema, Name: t.Name, Columns: []binlog.Column{col, col}}
	ref := columnRef(t, k)
	q := "SELECT MIN(" + ref + "), MAX(" + ref + ") FROM " + sqlstmt.QuoteName(t.Schema, t.Name)
	if where != "" {
		q += " WHERE (" + where + ")"
	}
	var lo, hi binlog.Value
	err = scan(ctx, c, mm, q, nil, func(r binlog.Row) error {
		lo, hi = r[0], r[1]
		return nil
	})
	if err != nil || lo.IsNull() || hi.IsNull() {
		return nil, false, err
	}
	// Map both kinds onto uint64 in an order-preserving way.
	signed := lo.Kind() == binlog.KindInt
	toU := func(v binlog.Value) uint64 {
		if signed {
			return v.Uint() ^ 1<<63
		}
		return v.Uint()
	}
	ulo, uhi := toU(lo), toU(hi)
	span := uhi - ulo // the number of values is span+1
	if span == 0 || uint64(rows) < span/2 {
		return nil, span == 0, nil // one value, or sparse: sample instead
	}
	prev := ulo
	for i := 1; i < n; i++ {
		// ulo + span*i/n, without overflowing.
		h, l := bits.Mul64(span, uint64(i))
		q, _ := bits.Div64(h, l, uint64(n))
		p := ulo + q
		if p == prev || p >= uhi {
			continue
		}
		prev = p
		row := make(binlog.Row, len(t.Columns))
		if signed {
			row[k] = binlog.IntValue(int64(p ^ 1<<63))
		} else {
			row[k] = binlog.UintValue(p)
		}
		points = append(points, row)
	}
	return points, true, nil
}

// sampleKeys samples the key at every step-th position, each sample
// read starting after the one before (ORDER BY key LIMIT 1 OFFSET
// step-1), and picks the n-1 samples closest to the even split of the
// rows actually sampled. step starts at rows/(4n), so that a low estimate
// of rows still gives even ranges; when more than 8n samples pile up
// (the estimate was far too low), every other one is dropped and step
// doubles. The samples together cost one pass over the key's index.
func sampleKeys(ctx context.Context, c *client.Conn, t *binlog.Table, key []int, where string, n int, rows int64) ([]binlog.Row, error) {
	step := max(rows/int64(4*n), 1)
	var samples []binlog.Row // samples[i] is the key at position (i+1)*step
	var prev binlog.Row
	for {
		p, err := keyAfter(ctx, c, t, key, where, prev, step-1)
		if err != nil {
			return nil, err
		}
		if p == nil {
			break // past the end
		}
		samples = append(samples, p)
		prev = p
		if len(samples) >= 8*n {
			kept := samples[:0]
			for i := 1; i < len(samples); i += 2 {
				kept = append(kept, samples[i])
			}
			clear(samples[len(kept):])
			samples = kept
			step *= 2
		}
	}
	// About step/2 rows follow the last sample.
	total := int64(len(samples))*step + step/2
	var points []binlog.Row
	last := -1
	for j := 1; j < n; j++ {
		target := total * int64(j) / int64(n) // the position of the j-th point
		i := int((target+step/2)/step) - 1    // the sample nearest to it
		i = min(max(i, 0), len(samples)-1)
		if i <= last {
			continue
		}
		points = append(points, samples[i])
		last = i
	}
	return points, nil
}

// sampleAt reads the keys at positions rows*j/n, j = 1..n-1, rows being
// the exact count: each read starts after the previous point.
func sampleAt(ctx context.Context, c *client.Conn, t *binlog.Table, key []int, where string, n int, rows int64) ([]binlog.Row, error) {
	var points []binlog.Row
	var prev binlog.Row
	var at int64 // the position of prev
	for j := 1; j < n; j++ {
		pos := rows * int64(j) / int64(n)
		if pos <= at {
			continue
		}
		p, err := keyAfter(ctx, c, t, key, where, prev, pos-at-1)
		if err != nil {
			return nil, err
		}
		if p == nil {
			break // rows were deleted since the count
		}
		points = append(points, p)
		prev, at = p, pos
	}
	return points, nil
}

// keyAfter returns the key of the row skip rows after the first row
// after prev (nil: from the start), in key order, as a row aligned with
// t.Columns; nil when there is no such row.
func keyAfter(ctx context.Context, c *client.Conn, t *binlog.Table, key []int, where string, prev binlog.Row, skip int64) (binlog.Row, error) {
	kt := &binlog.Table{Schema: t.Schema, Name: t.Name, Columns: make([]binlog.Column, len(key))}
	for i, k := range key {
		kt.Columns[i] = t.Columns[k]
	}
	q, args := chunkQuery(t, SelectList(kt), key, where, prev, nil, 1, int(skip))
	var p binlog.Row
	err := scan(ctx, c, kt, q, args, func(r binlog.Row) error {
		p = make(binlog.Row, len(t.Columns))
		for j, k := range key {
			p[k] = cloneValue(r[j])
		}
		return nil
	})
	return p, err
}

// Text forms of temporal key values, as the server writes them.

func appendDateTime(dst []byte, dt binlog.DateTime) []byte {
	dst = codec.AppendDate(dst, dt.Date)
	dst = append(dst, ' ')
	return codec.AppendClock(dst, uint64(dt.Hour), uint64(dt.Minute), uint64(dt.Second), dt.Micro)
}

func appendTime(dst []byte, us int64) []byte {
	u := uint64(us)
	if us < 0 {
		dst = append(dst, '-')
		u = -u
	}
	s := u / 1000000
	return codec.AppendClock(dst, s/3600, s/60%60, s%60, uint32(u%1000000))
}
