package main

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/sluice-cdc/sluice/binlog"
	"github.com/sluice-cdc/sluice/pipeline"
	"github.com/sluice-cdc/sluice/position"
)

// The tail sink prints a batch's values in order, whether they lie one
// after the other in one buffer (one run, written without a copy) or not,
// and small or larger than the printer's buffer.
func TestTailSinkWrite(t *testing.T) {
	buf := make([]byte, 0, 1<<20)
	var want bytes.Buffer
	var msgs []pipeline.Message
	add := func(line []byte) {
		msgs = append(msgs, pipeline.Message{Value: line})
		want.Write(line)
	}
	for i := range 5 { // adjacent in buf
		v0 := len(buf)
		buf = append(buf, bytes.Repeat([]byte{'a' + byte(i)}, 100+i)...)
		buf = append(buf, '\n')
		add(buf[v0:])
	}
	add([]byte("elsewhere\n"))
	big := bytes.Repeat([]byte("x"), 300<<10)
	add(append(big, '\n'))
	v0 := len(buf)
	buf = append(buf, "after a gap\n"...)
	add(buf[v0+6:])

	if !follows(msgs[0].Value, msgs[1].Value) || follows(msgs[4].Value, msgs[5].Value) || follows(msgs[0].Value, msgs[2].Value) || follows(nil, msgs[0].Value) {
		t.Fatal("follows: wrong adjacency")
	}
	var out bytes.Buffer
	s := &tailSink{p: newPrinter(&out, outputOpts{format: "sluice"})}
	for range 2 {
		if _, err := s.Write(context.Background(), &pipeline.Batch{Messages: msgs}); err != nil {
			t.Fatal(err)
		}
	}
	if w := bytes.Repeat(want.Bytes(), 2); !bytes.Equal(out.Bytes(), w) {
		t.Fatalf("printed %d bytes, want %d: %.200q", out.Len(), len(w), out.Bytes())
	}
	if s.p.out != int64(2*want.Len()) {
		t.Fatalf("counted %d bytes, want %d", s.p.out, 2*want.Len())
	}

	// An output that fails ends the run with a permanent error.
	s = &tailSink{p: newPrinter(failWriter{}, outputOpts{format: "sluice"})}
	_, err := s.Write(context.Background(), &pipeline.Batch{Messages: msgs})
	if !errors.Is(err, pipeline.ErrPermanent) || s.err == nil {
		t.Fatalf("err = %v, s.err = %v; want a permanent error", err, s.err)
	}
}

type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

// tail --keys writes a schema-change event's key after encoding its
// value, so that the key is named after the value's server's connector
// from the first transaction on (format debezium on MariaDB:
// io.debezium.connector.mariadb.SchemaChangeKey).
func TestTailKeysSchemaChange(t *testing.T) {
	var out bytes.Buffer
	p := newPrinter(&out, outputOpts{format: "debezium", schemas: true, keys: true, name: "srv"})
	txn := &binlog.Txn{Last: true, Begin: position.Position{Flavor: position.MariaDB}, Changes: []binlog.Change{
		{Op: binlog.OpDDL, Query: "CREATE TABLE t (id INT)", Schema: "app", File: "mysql-bin.000001", Pos: 4}}}
	if err := p.txn(txn); err != nil {
		t.Fatal(err)
	}
	key, value, ok := strings.Cut(out.String(), "\t")
	if !ok || !strings.Contains(key, `"name":"io.debezium.connector.mariadb.SchemaChangeKey"`) ||
		!strings.Contains(value, `"name":"io.debezium.connector.mariadb.SchemaChangeValue"`) || !strings.HasSuffix(value, "\n") {
		t.Fatalf("printed %.600s", out.String())
	}
}
