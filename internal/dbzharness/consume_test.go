//go:build linux

package dbzharness

import (
	"bytes"
	"encoding/base64"
	"slices"
	"testing"
)

// The consume command's lines: null and empty keys and values, headers
// whose base64 is padded with '=', a record without headers.
func TestParseConsumed(t *testing.T) {
	b := base64.StdEncoding.EncodeToString
	data := "db.t\t2\t41\t" + b([]byte(`{"id":1}`)) + "\t-\t" + b([]byte("sluice-seq")) + ":" + b([]byte("6")) + "," + b([]byte("n")) + ":-\n" +
		"db.t\t0\t7\t-\t\t-\n"
	recs, err := parseConsumed([]byte(data))
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 2 {
		t.Fatalf("%d records, want 2", len(recs))
	}
	r := recs[0]
	if r.Topic != "db.t" || r.Partition != 2 || r.Offset != 41 || string(r.Key) != `{"id":1}` || r.Value != nil {
		t.Errorf("first record %+v", r)
	}
	if len(r.Headers) != 2 || r.Headers[0].Key != "sluice-seq" || string(r.Headers[0].Value) != "6" || r.Headers[1].Key != "n" || r.Headers[1].Value != nil {
		t.Errorf("first record's headers %+v", r.Headers)
	}
	r = recs[1]
	if r.Key != nil || r.Value == nil || !bytes.Equal(r.Value, []byte{}) || r.Headers != nil {
		t.Errorf("second record %+v: want a null key, an empty value, no headers", r)
	}
	if _, err := parseConsumed([]byte("db.t\t0\t7\n")); err == nil {
		t.Error("a line of three fields parsed")
	}
}

func TestSplitSQL(t *testing.T) {
	got, err := SplitSQL("-- a comment; not a statement\nCREATE TABLE t (a VARCHAR(5) DEFAULT 'x;y', b INT COMMENT \"it\\\"s;\") ; # another;\n" +
		"INSERT INTO t VALUES ('a''b;', 1);/* c; */ /*!40101 SET x = 1 */;\n\n;SELECT `a;b`")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"CREATE TABLE t (a VARCHAR(5) DEFAULT 'x;y', b INT COMMENT \"it\\\"s;\")",
		"INSERT INTO t VALUES ('a''b;', 1)",
		"/*!40101 SET x = 1 */",
		"SELECT `a;b`",
	}
	if !slices.Equal(got, want) {
		t.Errorf("SplitSQL:\n got %q\nwant %q", got, want)
	}
	if _, err := SplitSQL("SELECT 'open"); err == nil {
		t.Error("SplitSQL of an open quote: no error")
	}
}
