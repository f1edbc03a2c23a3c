package redis

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"time"
)

// conn is one connection to the server speaking RESP2: the sink writes
// whole transactions (MULTI, hundreds of commands, EXEC) into one buffer
// and sends it with one write, and reads the replies without building a
// value per reply. A general client (go-redis) costs about 2 µs of CPU
// and several allocations per queued command, more than Redis itself
// spends on it.
//
// A conn is used by one goroutine. Any error other than a Redis error
// reply leaves it in an unknown state: the caller closes it.
type conn struct {
	nc      net.Conn
	br      *bufio.Reader
	out     []byte // commands of the next round trip
	timeout time.Duration
	// watching is set while a WATCH may be in force: the next round trip
	// starts with UNWATCH.
	watching bool
}

// respError is an error reply of the server ("-ERR ...", "-WRONGTYPE ...").
type respError string

func (e respError) Error() string { return string(e) }

// errProtocol marks a reply that is not valid RESP2.
var errProtocol = errors.New("redis: malformed reply from the server")

const (
	readBufferSize = 64 << 10
	// maxBulkRead bounds a bulk string read into memory (replies to HGETALL,
	// CONFIG GET, TYPE; the replies to XADD are skipped, not read).
	maxBulkRead = 64 << 20
	maxArrayLen = 1 << 22
	maxDepth    = 8
)

// dialOptions are what connecting needs.
type dialOptions struct {
	addr               string
	username, password string
	db                 int
	tls                *tls.Config
	dialTimeout        time.Duration
	timeout            time.Duration // per round trip
}

// dial connects, authenticates and selects the database.
func dial(ctx context.Context, o *dialOptions) (*conn, error) {
	dctx, cancel := context.WithTimeout(ctx, o.dialTimeout)
	defer cancel()
	d := net.Dialer{KeepAlive: 30 * time.Second}
	nc, err := d.DialContext(dctx, "tcp", o.addr)
	if err != nil {
		return nil, err
	}
	if tc, ok := nc.(*net.TCPConn); ok {
		_ = tc.SetNoDelay(true)
	}
	if o.tls != nil {
		t := tls.Client(nc, o.tls)
		if err := t.HandshakeContext(dctx); err != nil {
			nc.Close()
			return nil, fmt.Errorf("%w: %w", errTLSHandshake, err)
		}
		nc = t
	}
	c := &conn{nc: nc, br: bufio.NewReaderSize(nc, readBufferSize), timeout: o.timeout}
	var cmds []string // the commands sent, one reply each
	if o.password != "" || o.username != "" {
		if o.username != "" {
			c.out = appendCommand(c.out, "AUTH", o.username, o.password)
		} else {
			c.out = appendCommand(c.out, "AUTH", o.password)
		}
		cmds = append(cmds, "AUTH")
	}
	if o.db != 0 {
		c.out = appendCommand(c.out, "SELECT", strconv.Itoa(o.db))
		cmds = append(cmds, "SELECT")
	}
	if len(cmds) == 0 && o.tls != nil {
		// In TLS 1.3 a server that refuses the client's certificate
		// says so after the handshake: one round trip finds out here.
		c.out = appendCommand(c.out, "PING")
		cmds = append(cmds, "PING")
	}
	if len(cmds) == 0 {
		return c, nil
	}
	failed := ""
	err = c.exchange(ctx, 0, func() error {
		for _, cmd := range cmds {
			if _, err := c.read(); err != nil {
				failed = cmd
				return err
			}
		}
		return nil
	})
	if err == nil {
		return c, nil
	}
	c.close()
	var ne net.Error
	switch {
	case isRespError(err) && failed == "AUTH" && o.username != "":
		return nil, fmt.Errorf("logging in as user %q (AUTH): %w; check username and password", o.username, err)
	case isRespError(err) && failed == "AUTH":
		return nil, fmt.Errorf("logging in (AUTH with a password and no username, the default user): %w; check password, and set username for an ACL user", err)
	case isRespError(err) && failed == "SELECT":
		return nil, fmt.Errorf("selecting database %d (SELECT): %w; check db", o.db, err)
	case isRespError(err), errors.As(err, &ne) && ne.Timeout(), ctx.Err() != nil:
		return nil, err
	case o.tls != nil:
		return nil, fmt.Errorf("%w: %w", errClosedAfterHandshake, err)
	default:
		return nil, fmt.Errorf("%w: %w", errClosedAtFirstCommand, err)
	}
}

// Errors of a connection that failed in its TLS handshake, or that the
// server ended at the first command.
var (
	errTLSHandshake         = errors.New("TLS handshake")
	errClosedAfterHandshake = errors.New("the server ended the connection after the TLS handshake")
	errClosedAtFirstCommand = errors.New("the server ended the connection at the first command")
)

func (c *conn) close() error { return c.nc.Close() }

// exchange sends c.out and runs read for the replies, within one deadline:
// write_timeout (plus extra, for a command that blocks) from now, or ctx's
// deadline if earlier; cancelling ctx ends it at once.
func (c *conn) exchange(ctx context.Context, extra time.Duration, read func() error) error {
	dl := time.Now().Add(c.timeout + extra)
	if d, ok := ctx.Deadline(); ok && d.Before(dl) {
		dl = d
	}
	if err := c.nc.SetDeadline(dl); err != nil {
		return err
	}
	fired := make(chan struct{})
	stop := context.AfterFunc(ctx, func() {
		_ = c.nc.SetDeadline(time.Unix(1, 0))
		close(fired)
	})
	_, err := c.nc.Write(c.out)
	c.out = c.out[:0]
	if err == nil {
		err = read()
	}
	if !stop() {
		<-fired // the deadline is in the past now: the conn is done for
		if err == nil {
			err = ctx.Err()
		}
	}
	if err != nil && ctx.Err() != nil {
		if !isRespError(err) {
			err = fmt.Errorf("%w (%v)", ctx.Err(), err)
		}
	}
	return err
}

// ---- writing ----

func appendHeader(dst []byte, kind byte, n int) []byte {
	dst = append(dst, kind)
	dst = strconv.AppendInt(dst, int64(n), 10)
	return append(dst, '\r', '\n')
}

// appendArray appends the header of a command of n arguments.
func appendArray(dst []byte, n int) []byte { return appendHeader(dst, '*', n) }

func appendBulk(dst, b []byte) []byte {
	dst = appendHeader(dst, '$', len(b))
	dst = append(dst, b...)
	return append(dst, '\r', '\n')
}

func appendBulkString(dst []byte, s string) []byte {
	dst = appendHeader(dst, '$', len(s))
	dst = append(dst, s...)
	return append(dst, '\r', '\n')
}

// appendBulk2 appends a and b as one bulk string.
func appendBulk2(dst, a, b []byte) []byte {
	dst = appendHeader(dst, '$', len(a)+len(b))
	dst = append(dst, a...)
	dst = append(dst, b...)
	return append(dst, '\r', '\n')
}

func appendBulkUint(dst []byte, v uint64) []byte {
	var b [20]byte
	return appendBulk(dst, strconv.AppendUint(b[:0], v, 10))
}

// appendCommand appends a command of string arguments.
func appendCommand(dst []byte, args ...string) []byte {
	dst = appendArray(dst, len(args))
	for _, a := range args {
		dst = appendBulkString(dst, a)
	}
	return dst
}

// ---- reading ----

// reply is a reply read into memory (small replies only).
type reply struct {
	kind  byte   // '+' status, ':' integer, '$' bulk, '*' array
	str   string // status or bulk string
	n     int64  // integer; -1 for a nil bulk string or array
	elems []reply
}

// line reads one line and returns it without its CRLF.
func (c *conn) line() ([]byte, error) {
	l, err := c.br.ReadSlice('\n')
	if err != nil {
		if errors.Is(err, bufio.ErrBufferFull) {
			return nil, fmt.Errorf("%w: a line longer than %d bytes", errProtocol, c.br.Size())
		}
		return nil, err
	}
	if len(l) < 3 || l[len(l)-2] != '\r' {
		return nil, fmt.Errorf("%w: %q", errProtocol, l)
	}
	return l[:len(l)-2], nil
}

func parseLen(b []byte) (int64, error) {
	n, err := strconv.ParseInt(string(b), 10, 64)
	if err != nil || n < -1 {
		return 0, fmt.Errorf("%w: bad length %q", errProtocol, b)
	}
	return n, nil
}

// read reads one reply. An error reply is returned as a respError after
// the whole reply is consumed; errors inside arrays stay elements (kind
// '-').
func (c *conn) read() (reply, error) {
	r, err := c.readDepth(0)
	if err != nil {
		return reply{}, err
	}
	if r.kind == '-' {
		return reply{}, respError(r.str)
	}
	return r, nil
}

func (c *conn) readDepth(depth int) (reply, error) {
	l, err := c.line()
	if err != nil {
		return reply{}, err
	}
	switch l[0] {
	case '+', '-':
		return reply{kind: l[0], str: string(l[1:])}, nil
	case ':':
		n, err := strconv.ParseInt(string(l[1:]), 10, 64)
		if err != nil {
			return reply{}, fmt.Errorf("%w: bad integer %q", errProtocol, l)
		}
		return reply{kind: ':', n: n}, nil
	case '$':
		n, err := parseLen(l[1:])
		if err != nil {
			return reply{}, err
		}
		if n < 0 {
			return reply{kind: '$', n: -1}, nil
		}
		if n > maxBulkRead {
			return reply{}, fmt.Errorf("%w: a bulk string of %d bytes", errProtocol, n)
		}
		b := make([]byte, n+2)
		if _, err := io.ReadFull(c.br, b); err != nil {
			return reply{}, err
		}
		if b[n] != '\r' || b[n+1] != '\n' {
			return reply{}, fmt.Errorf("%w: bulk string not followed by CRLF", errProtocol)
		}
		return reply{kind: '$', str: string(b[:n])}, nil
	case '*':
		n, err := parseLen(l[1:])
		if err != nil {
			return reply{}, err
		}
		if n < 0 {
			return reply{kind: '*', n: -1}, nil
		}
		if n > maxArrayLen || depth >= maxDepth {
			return reply{}, fmt.Errorf("%w: an array of %d elements at depth %d", errProtocol, n, depth)
		}
		r := reply{kind: '*', n: n, elems: make([]reply, 0, min(n, 1024))}
		for i := int64(0); i < n; i++ {
			e, err := c.readDepth(depth + 1)
			if err != nil {
				return reply{}, err
			}
			r.elems = append(r.elems, e)
		}
		return r, nil
	}
	return reply{}, fmt.Errorf("%w: %q", errProtocol, l)
}

// skip reads one reply without keeping it, and returns an error reply as
// a respError (inside arrays too: the first one).
func (c *conn) skip() error {
	return c.skipDepth(0)
}

func (c *conn) skipDepth(depth int) error {
	l, err := c.line()
	if err != nil {
		return err
	}
	switch l[0] {
	case '+', ':':
		return nil
	case '-':
		return respError(l[1:])
	case '$':
		n, err := parseLen(l[1:])
		if err != nil || n < 0 {
			return err
		}
		if _, err := c.br.Discard(int(n)); err != nil {
			return err
		}
		crlf, err := c.br.Peek(2)
		if err != nil {
			return err
		}
		if crlf[0] != '\r' || crlf[1] != '\n' {
			return fmt.Errorf("%w: bulk string not followed by CRLF", errProtocol)
		}
		_, err = c.br.Discard(2)
		return err
	case '*':
		n, err := parseLen(l[1:])
		if err != nil || n < 0 {
			return err
		}
		if depth >= maxDepth {
			return fmt.Errorf("%w: arrays nested deeper than %d", errProtocol, maxDepth)
		}
		var first error
		for i := int64(0); i < n; i++ {
			err := c.skipDepth(depth + 1)
			switch {
			case err != nil && isRespError(err):
				if first == nil {
					first = err
				}
			case err != nil:
				return err
			}
		}
		return first
	}
	return fmt.Errorf("%w: %q", errProtocol, l)
}

// arrayHeader reads the header of an array reply and returns its length:
// -1 for a nil array, a respError for an error reply.
func (c *conn) arrayHeader() (int64, error) {
	l, err := c.line()
	if err != nil {
		return 0, err
	}
	switch l[0] {
	case '*':
		return parseLen(l[1:])
	case '-':
		return 0, respError(l[1:])
	}
	return 0, fmt.Errorf("%w: expected an array, got %q", errProtocol, l)
}
