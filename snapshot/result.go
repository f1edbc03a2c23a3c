package snapshot

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"net"
	"strings"

	"github.com/go-mysql-org/go-mysql/client"
	"github.com/go-mysql-org/go-mysql/mysql"
)

// Reading result sets.
//
// go-mysql reads a result row by row through a sync.Pool, a copy into a
// bytes.Buffer and a []FieldValue per row; on a table of short rows that
// was most of the snapshot's CPU. The snapshot keeps go-mysql for
// connecting, for its statements (session, transactions) and for
// preparing, and reads the result of each execution itself: it writes
// COM_STMT_EXECUTE and reads the response straight from the connection's
// socket into one reused buffer, where rows are decoded in place.
//
// Reading the socket directly is sound because the protocol is strictly
// request and response: when go-mysql has read the whole response to its
// last command (it always does, or the connection is broken), its own
// read buffer is empty, since the server has sent nothing else; and the
// snapshot reads exactly the response to its execution, nothing after it.
// go-mysql resets its packet sequence before every command it writes.

// resultReader reads the packets of a response from the connection's
// socket into a reused buffer.
type resultReader struct {
	nc   net.Conn
	buf  []byte // buf[r:w] is read and not yet consumed
	r, w int
	seq  uint8  // the sequence number of the next packet
	big  []byte // a payload of 16 MiB or more, reassembled
}

// readBufSize is the size of the read buffer: large enough for many rows
// per read system call; it grows for a packet that does not fit.
const readBufSize = 256 << 10

// errMalformed says the server sent what the protocol does not allow.
var errMalformed = errors.New("snapshot: malformed packet from the server")

// start prepares for the response to a command just written (sequence 0).
func (rr *resultReader) start(nc net.Conn) {
	if rr.nc != nc {
		rr.nc, rr.r, rr.w = nc, 0, 0
	}
	if rr.buf == nil {
		rr.buf = make([]byte, readBufSize)
	}
	if rr.r != rr.w {
		// Left over from a response read to its end: impossible, see above.
		rr.r, rr.w = 0, 0
	}
	rr.seq = 1
}

// fill makes at least n bytes readable at buf[r:].
func (rr *resultReader) fill(n int) error {
	if rr.w-rr.r >= n {
		return nil
	}
	if n > len(rr.buf) {
		nb := make([]byte, max(n, 2*len(rr.buf)))
		rr.w = copy(nb, rr.buf[rr.r:rr.w])
		rr.buf, rr.r = nb, 0
	} else if rr.r > 0 {
		rr.w = copy(rr.buf, rr.buf[rr.r:rr.w])
		rr.r = 0
	}
	for rr.w-rr.r < n {
		m, err := rr.nc.Read(rr.buf[rr.w:])
		rr.w += m
		if err != nil && rr.w-rr.r < n {
			return fmt.Errorf("%w: %v", mysql.ErrBadConn, err)
		}
	}
	return nil
}

// next returns the payload of the next packet. It is valid until the next
// call.
func (rr *resultReader) next() ([]byte, error) {
	p, more, err := rr.packet()
	if err != nil || !more {
		return p, err
	}
	// A payload of 2^24-1 bytes continues in the next packet.
	rr.big = append(rr.big[:0], p...)
	for more {
		if p, more, err = rr.packet(); err != nil {
			return nil, err
		}
		rr.big = append(rr.big, p...)
	}
	return rr.big, nil
}

func (rr *resultReader) packet() (p []byte, more bool, err error) {
	if err := rr.fill(4); err != nil {
		return nil, false, err
	}
	h := rr.buf[rr.r:]
	n := int(h[0]) | int(h[1])<<8 | int(h[2])<<16
	if h[3] != rr.seq {
		return nil, false, fmt.Errorf("%w: packet sequence %d, want %d", errMalformed, h[3], rr.seq)
	}
	rr.seq++
	if err := rr.fill(4 + n); err != nil {
		return nil, false, err
	}
	p = rr.buf[rr.r+4 : rr.r+4+n : rr.r+4+n]
	rr.r += 4 + n
	return p, n == mysql.MaxPayloadLen, nil
}

// column is what a row's decoding needs of a result column.
type column struct {
	name  string
	typ   byte
	flags uint16
}

func (c column) unsigned() bool { return c.flags&mysql.UNSIGNED_FLAG != 0 }

// parseColumn reads a column definition packet (Protocol::ColumnDefinition41).
func parseColumn(p []byte) (column, error) {
	var c column
	pos := 0
	for i := 0; i < 6; i++ { // catalog, schema, table, org_table, name, org_name
		s, n, ok := lenencBytes(p[pos:])
		if !ok {
			return c, fmt.Errorf("%w: column definition", errMalformed)
		}
		if i == 4 {
			c.name = string(s)
		}
		pos += n
	}
	// 0x0c, charset (2), length (4), type (1), flags (2), decimals (1)
	if len(p) < pos+10 {
		return c, fmt.Errorf("%w: column definition", errMalformed)
	}
	c.typ = p[pos+7]
	c.flags = binary.LittleEndian.Uint16(p[pos+8:])
	return c, nil
}

// lenencInt decodes a length-encoded integer; n is its size, 0 if b is
// too short. null reports the NULL marker 0xfb.
func lenencInt(b []byte) (v uint64, n int, null bool) {
	if len(b) == 0 {
		return 0, 0, false
	}
	switch b[0] {
	case 0xfb:
		return 0, 1, true
	case 0xfc:
		if len(b) < 3 {
			return 0, 0, false
		}
		return uint64(binary.LittleEndian.Uint16(b[1:])), 3, false
	case 0xfd:
		if len(b) < 4 {
			return 0, 0, false
		}
		return uint64(b[1]) | uint64(b[2])<<8 | uint64(b[3])<<16, 4, false
	case 0xfe:
		if len(b) < 9 {
			return 0, 0, false
		}
		return binary.LittleEndian.Uint64(b[1:]), 9, false
	}
	return uint64(b[0]), 1, false
}

// lenencBytes decodes a length-encoded string; n is the bytes it took.
func lenencBytes(b []byte) (s []byte, n int, ok bool) {
	l, m, _ := lenencInt(b)
	if m == 0 || uint64(len(b)-m) < l {
		return nil, 0, false
	}
	return b[m : m+int(l) : m+int(l)], m + int(l), true
}

// isEnd reports whether p ends a result set: an EOF packet, or the OK
// packet with an EOF header that replaces it under CLIENT_DEPRECATE_EOF.
// A binary row starts with 0x00, never 0xfe.
func isEnd(p []byte) bool {
	return len(p) > 0 && p[0] == mysql.EOF_HEADER && len(p) < mysql.MaxPayloadLen
}

// isEOF reports whether p is a classic EOF packet (5 bytes with
// CLIENT_PROTOCOL_41), which ends the column definitions when
// CLIENT_DEPRECATE_EOF is off; the OK packet that ends an empty result
// under CLIENT_DEPRECATE_EOF is at least 7 bytes long.
func isEOF(p []byte) bool { return len(p) == 5 && p[0] == mysql.EOF_HEADER }

// stmt is a prepared statement of a reader.
type stmt struct {
	*client.Stmt
	query string
}

// exec writes COM_STMT_EXECUTE for s with args (integers, floats,
// booleans, string, []byte or nil), as go-mysql's Stmt.Execute writes it.
func (rd *reader) exec(s *stmt, args []any) error {
	if len(args) != s.Params {
		return fmt.Errorf("snapshot: %d arguments for %d placeholders", len(args), s.Params)
	}
	b := append(rd.cmd[:0], 0, 0, 0, 0, mysql.COM_STMT_EXECUTE)
	b = binary.LittleEndian.AppendUint32(b, s.ID)
	flags := mysql.CURSOR_TYPE_NO_CURSOR
	if len(args) > 0 {
		flags |= mysql.PARAMETER_COUNT_AVAILABLE
	}
	b = append(b, flags, 1, 0, 0, 0) // iteration count 1
	if len(args) > 0 {
		args = normalArgs(args)
		if rd.queryAttrs {
			b = appendLenencInt(b, uint64(len(args)))
		}
		nulls := len(b)
		b = append(b, make([]byte, (len(args)+7)/8)...)
		b = append(b, 1) // new-params-bound
		for i, a := range args {
			typ, flag := mysql.MYSQL_TYPE_STRING, byte(0)
			switch a.(type) {
			case nil:
				typ = mysql.MYSQL_TYPE_NULL
				b[nulls+i/8] |= 1 << (i % 8)
			case int64:
				typ = mysql.MYSQL_TYPE_LONGLONG
			case uint64:
				typ, flag = mysql.MYSQL_TYPE_LONGLONG, mysql.PARAM_UNSIGNED
			case float64:
				typ = mysql.MYSQL_TYPE_DOUBLE
			case string, []byte:
			default:
				return fmt.Errorf("snapshot: internal error: argument of type %T", a)
			}
			b = append(b, typ, flag)
			if rd.queryAttrs {
				b = append(b, 0) // no name
			}
		}
		for _, a := range args {
			switch v := a.(type) {
			case int64:
				b = binary.LittleEndian.AppendUint64(b, uint64(v))
			case uint64:
				b = binary.LittleEndian.AppendUint64(b, v)
			case float64:
				b = binary.LittleEndian.AppendUint64(b, math.Float64bits(v))
			case string:
				b = appendLenencInt(b, uint64(len(v)))
				b = append(b, v...)
			case []byte:
				b = appendLenencInt(b, uint64(len(v)))
				b = append(b, v...)
			}
		}
	}
	rd.cmd = b
	rd.c.ResetSequence()
	return rd.c.WritePacket(b) // go-mysql splits packets of 16 MiB and more
}

// normalArgs converts integer and float arguments of other types to
// int64, uint64 and float64, in a copy when one needs converting.
func normalArgs(args []any) []any {
	out := args
	for i, a := range args {
		var v any
		switch x := a.(type) {
		case int:
			v = int64(x)
		case int8:
			v = int64(x)
		case int16:
			v = int64(x)
		case int32:
			v = int64(x)
		case uint:
			v = uint64(x)
		case uint8:
			v = uint64(x)
		case uint16:
			v = uint64(x)
		case uint32:
			v = uint64(x)
		case float32:
			v = float64(x)
		case bool:
			v = int64(0)
			if x {
				v = int64(1)
			}
		default:
			continue
		}
		if &out[0] == &args[0] {
			out = append([]any(nil), args...)
		}
		out[i] = v
	}
	return out
}

func appendLenencInt(b []byte, v uint64) []byte {
	switch {
	case v < 251:
		return append(b, byte(v))
	case v < 1<<16:
		return append(b, 0xfc, byte(v), byte(v>>8))
	case v < 1<<24:
		return append(b, 0xfd, byte(v), byte(v>>8), byte(v>>16))
	}
	return binary.LittleEndian.AppendUint64(append(b, 0xfe), v)
}

// reader reads tables over one connection: it prepares each query once
// and reads results with a resultReader.
type reader struct {
	c          *client.Conn
	rr         resultReader
	cmd        []byte
	queryAttrs bool // CLIENT_QUERY_ATTRIBUTES (MySQL 8): parameters carry names
	stmts      []*stmt
	cols       []column
	// broken is set when a response was left unread (an error while
	// reading it, or a row callback that ended the read): the connection
	// can only be closed.
	broken bool
}

// maxStmts is how many prepared statements a reader keeps; the oldest is
// closed when another is needed. Queries whose key values are written as
// literals differ chunk by chunk and are prepared each time.
const maxStmts = 8

func newReader(c *client.Conn) (*reader, error) {
	if c.Compression != mysql.MYSQL_COMPRESS_NONE {
		return nil, errors.New("snapshot: compressed connections are not supported")
	}
	rd := &reader{c: c}
	for _, name := range strings.Split(c.CapabilityString(), "|") {
		if name == "CLIENT_QUERY_ATTRIBUTES" {
			rd.queryAttrs = true
		}
	}
	return rd, nil
}

// prepare returns the prepared statement of query, preparing it if the
// reader has not kept it.
func (rd *reader) prepare(query string) (*stmt, error) {
	for i, s := range rd.stmts {
		if s.query == query {
			if i > 0 { // most recent first
				copy(rd.stmts[1:i+1], rd.stmts[:i])
				rd.stmts[0] = s
			}
			return s, nil
		}
	}
	st, err := rd.c.Prepare(query)
	if err != nil {
		return nil, err
	}
	s := &stmt{Stmt: st, query: query}
	if len(rd.stmts) == maxStmts {
		_ = rd.stmts[maxStmts-1].Close()
		rd.stmts = rd.stmts[:maxStmts-1]
	}
	rd.stmts = append([]*stmt{s}, rd.stmts...)
	return s, nil
}

// close closes the reader's statements (not the connection).
func (rd *reader) close() {
	if rd.broken {
		rd.stmts = nil // closing them would write to a connection mid-response
		return
	}
	for _, s := range rd.stmts {
		_ = s.Close()
	}
	rd.stmts = nil
}

// execute runs s with args and reads its result: columns(cols) is called
// once the columns are known and row(p) with each row packet (valid until
// row returns). When either returns an error wrapping errFromFn, the rest
// of the result is read, so that the connection stays usable, and that
// error is returned; any other error from row is returned at once, the
// connection unusable.
func (rd *reader) execute(s *stmt, args []any, columns func([]column) error, row func([]byte) error) error {
	rd.broken = true // until the whole response is read
	if err := rd.exec(s, args); err != nil {
		return err
	}
	rr := &rd.rr
	rr.start(rd.c.Conn.Conn)
	p, err := rr.next()
	if err != nil {
		return err
	}
	switch {
	case len(p) == 0:
		return errMalformed
	case p[0] == mysql.ERR_HEADER:
		rd.broken = false
		return rd.c.HandleErrorPacket(bytes.Clone(p))
	case p[0] == mysql.OK_HEADER:
		rd.broken = false
		return errors.New("snapshot: the statement returned no result set")
	}
	n, m, _ := lenencInt(p)
	if m != len(p) || n == 0 || n > 4096 {
		return fmt.Errorf("%w: column count", errMalformed)
	}
	rd.cols = rd.cols[:0]
	for i := 0; i < int(n); i++ {
		if p, err = rr.next(); err != nil {
			return err
		}
		col, err := parseColumn(p)
		if err != nil {
			return err
		}
		rd.cols = append(rd.cols, col)
	}
	var keep error // from columns or row: reported after the result is read
	if err := columns(rd.cols); err != nil {
		keep = err
	}
	first := true
	for {
		if p, err = rr.next(); err != nil {
			return err
		}
		if first && isEOF(p) {
			first = false // the end of the column definitions
			continue
		}
		first = false
		if isEnd(p) {
			rd.broken = false
			return keep
		}
		if p[0] == mysql.ERR_HEADER {
			rd.broken = false
			return rd.c.HandleErrorPacket(bytes.Clone(p))
		}
		if keep == nil {
			if err := row(p); err != nil {
				if !errors.Is(err, errFromFn) {
					return err
				}
				keep = err
			}
		}
	}
}
