package redis

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sluice-cdc/sluice/internal/testenv"
	"github.com/sluice-cdc/sluice/pipeline"
)

func readerConn(b []byte) (*conn, *bytes.Reader) {
	r := bytes.NewReader(b)
	return &conn{br: bufio.NewReaderSize(r, 32)}, r
}

func TestRead(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"+OK\r\n", "+OK"},
		{":-12\r\n", ":-12"},
		{"$5\r\nhello\r\n", "$hello"},
		{"$0\r\n\r\n", "$"},
		{"$-1\r\n", "nil"},
		{"*-1\r\n", "nil"},
		{"*0\r\n", "[]"},
		{"*3\r\n$1\r\na\r\n:1\r\n*1\r\n-ERR inner\r\n", "[$a :1 [-ERR inner]]"},
		{"-WRONGTYPE wrong kind\r\n", "error WRONGTYPE wrong kind"},
		{"$41\r\na bulk string longer than the read buffer\r\n", "$a bulk string longer than the read buffer"},
		{"+a status line longer than the read buffer\r\n", "error redis: malformed reply from the server: a line longer than 32 bytes"},
		{"$5\r\nhello!!", "error redis: malformed reply from the server: bulk string not followed by CRLF"},
		{"+OK\n", `error redis: malformed reply from the server: "+OK\n"`},
		{"?x\r\n", `error redis: malformed reply from the server: "?x"`},
		{"$-2\r\n", `error redis: malformed reply from the server: bad length "-2"`},
		{"*2\r\n:1\r\n", "error EOF"},
	} {
		c, _ := readerConn([]byte(tc.in))
		r, err := c.read()
		got := ""
		if err != nil {
			got = "error " + err.Error()
		} else {
			got = formatReply(r)
		}
		if got != tc.want {
			t.Errorf("%q: %s, want %s", tc.in, got, tc.want)
		}
	}
}

func formatReply(r reply) string {
	switch {
	case r.kind == '*' && r.n < 0, r.kind == '$' && r.n < 0:
		return "nil"
	case r.kind == '*':
		var parts []string
		for _, e := range r.elems {
			parts = append(parts, formatReply(e))
		}
		return "[" + strings.Join(parts, " ") + "]"
	case r.kind == ':':
		return fmt.Sprintf(":%d", r.n)
	case r.kind == '$':
		return "$" + r.str
	}
	return string(r.kind) + r.str
}

// FuzzReply reads any bytes as a reply, whole (read) and skipped (skip):
// neither panics, and where both succeed they end at the same byte.
func FuzzReply(f *testing.F) {
	for _, s := range []string{"+OK\r\n", ":1\r\n", "$3\r\nabc\r\n", "*2\r\n$1\r\na\r\n-ERR x\r\n", "*-1\r\n", "$-1\r\n", "*1\r\n*1\r\n*0\r\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		c1, r1 := readerConn(b)
		_, err1 := c1.read()
		c2, r2 := readerConn(b)
		err2 := c2.skip()
		ok1 := err1 == nil || isRespError(err1)
		ok2 := err2 == nil || isRespError(err2)
		if ok1 && ok2 {
			left1, left2 := r1.Len()+c1.br.Buffered(), r2.Len()+c2.br.Buffered()
			if left1 != left2 {
				t.Fatalf("%q: read left %d bytes, skip %d", b, left1, left2)
			}
		}
		if ok1 && !ok2 && !strings.Contains(err2.Error(), "nested") {
			t.Fatalf("%q: read: %v, skip: %v", b, err1, err2)
		}
	})
}

// TestLogin: AUTH with the password, SELECT of the database; a wrong
// password says what to check, and never shows the password.
func TestLogin(t *testing.T) {
	ctx := testCtx(t)
	r := testenv.StartRedis(t)
	c := newClient(t, r.Addr())
	if err := c.ConfigSet(ctx, "requirepass", "s3cret").Err(); err != nil {
		t.Fatal(err)
	}
	bad := newSink(t, r.Addr(), Config{Password: "wrong"})
	if _, err := bad.Recover(ctx, 1, ""); err == nil || !strings.Contains(err.Error(), "check password") || strings.Contains(err.Error(), "wrong") {
		t.Fatalf("Recover with a wrong password: %v", err)
	}
	s := newSink(t, r.Addr(), Config{Password: "s3cret", DB: 3})
	if _, err := s.Recover(ctx, 1, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Write(ctx, &pipeline.Batch{Epoch: 1, Messages: streamMsgs(1, 3)}); err != nil {
		t.Fatal(err)
	}
	if err := c.Do(ctx, "AUTH", "s3cret").Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.Do(ctx, "SELECT", "3").Err(); err != nil {
		t.Fatal(err)
	}
	if n, err := c.XLen(ctx, "d.u").Result(); err != nil || n != 2 {
		t.Fatalf("db 3 holds %d entries in d.u (%v), want 2", n, err)
	}
}

// TestCancel: cancelling the context ends a Write that waits for the
// server, and the sink connects again for the next one.
func TestCancel(t *testing.T) {
	ctx := testCtx(t)
	r := testenv.StartRedis(t)
	s := newSink(t, r.Addr(), Config{})
	if _, err := s.Recover(ctx, 1, ""); err != nil {
		t.Fatal(err)
	}
	c := newClient(t, r.Addr())
	// Writes wait for half a second: the sink's EXEC waits in the server.
	if err := c.Do(ctx, "CLIENT", "PAUSE", "500", "WRITE").Err(); err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	time.AfterFunc(100*time.Millisecond, cancel)
	_, err := s.Write(cctx, &pipeline.Batch{Epoch: 1, Messages: streamMsgs(1, 3)})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Write with a cancelled context: %v, want context.Canceled", err)
	}
	if _, err := s.Recover(ctx, 1, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Write(ctx, &pipeline.Batch{Epoch: 1, Messages: streamMsgs(1, 3)}); err != nil {
		t.Fatal(err)
	}
	checkStreams(t, c, streamMsgs(1, 3))
}
