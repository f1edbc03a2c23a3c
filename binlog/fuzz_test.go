package binlog

import (
	"encoding/json"
	"errors"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/go-mysql-org/go-mysql/mysql"
)

// fuzzTypes are the column types FuzzDecodeImage picks from.
var fuzzTypes = []byte{
	mysql.MYSQL_TYPE_TINY, mysql.MYSQL_TYPE_SHORT, mysql.MYSQL_TYPE_INT24, mysql.MYSQL_TYPE_LONG,
	mysql.MYSQL_TYPE_LONGLONG, mysql.MYSQL_TYPE_FLOAT, mysql.MYSQL_TYPE_DOUBLE, mysql.MYSQL_TYPE_NEWDECIMAL,
	mysql.MYSQL_TYPE_DATE, mysql.MYSQL_TYPE_NEWDATE, mysql.MYSQL_TYPE_DATETIME, mysql.MYSQL_TYPE_TIMESTAMP,
	mysql.MYSQL_TYPE_TIME, mysql.MYSQL_TYPE_DATETIME2, mysql.MYSQL_TYPE_TIMESTAMP2, mysql.MYSQL_TYPE_TIME2,
	mysql.MYSQL_TYPE_YEAR, mysql.MYSQL_TYPE_VARCHAR, mysql.MYSQL_TYPE_VAR_STRING, mysql.MYSQL_TYPE_STRING,
	mysql.MYSQL_TYPE_BLOB, mysql.MYSQL_TYPE_BIT, mysql.MYSQL_TYPE_JSON, mysql.MYSQL_TYPE_GEOMETRY,
	mysql.MYSQL_TYPE_VECTOR, mysql.MYSQL_TYPE_ENUM, mysql.MYSQL_TYPE_SET, mysql.MYSQL_TYPE_NULL,
}

// fuzzTable builds a table from the head of the fuzz input:
//
//	ncols (1 + b%16), then per column: type selector, meta (2 bytes,
//	little-endian), flags (bit 0 unsigned, bit 1 binary collation, bit 7:
//	the selector is a raw type code); then the columns bitmap
//
// and returns the table, the bitmap and the rest of the input.
func fuzzTable(in []byte) (*Table, []byte, []byte, bool) {
	if len(in) < 1 {
		return nil, nil, nil, false
	}
	n := 1 + int(in[0]%16)
	in = in[1:]
	if len(in) < 4*n+(n+7)/8 {
		return nil, nil, nil, false
	}
	t := &Table{Schema: "fuzz", Name: "t"}
	for i := range n {
		sel, meta, flags := in[4*i], uint16(in[4*i+1])|uint16(in[4*i+2])<<8, in[4*i+3]
		c := Column{Name: "c", BinlogType: fuzzTypes[int(sel)%len(fuzzTypes)], Meta: meta, Unsigned: flags&1 != 0}
		if flags&0x80 != 0 {
			c.BinlogType = sel
		}
		if flags&2 != 0 {
			c.Collation = collationBinary
		} else {
			c.Collation = collUTF8MB4
		}
		if c.Resolve() != nil {
			return nil, nil, nil, false
		}
		t.Columns = append(t.Columns, c)
	}
	in = in[4*n:]
	return t, in[:(n+7)/8], in[(n+7)/8:], true
}

// fuzzHeader is the inverse of fuzzTable for seeds.
func fuzzHeader(cols []Column, present []byte) []byte {
	b := []byte{byte(len(cols) - 1)}
	for _, c := range cols {
		sel := slices.Index(fuzzTypes, c.BinlogType)
		var flags byte
		if c.Unsigned {
			flags |= 1
		}
		if c.Collation == collationBinary {
			flags |= 2
		}
		b = append(b, byte(sel), byte(c.Meta), byte(c.Meta>>8), flags)
	}
	return append(b, present...)
}

func FuzzDecodeImage(f *testing.F) {
	r := rand.New(rand.NewPCG(5, 6))
	cat := columnCatalog()
	for range 40 {
		var gens []genCol
		for range 1 + r.IntN(16) {
			gens = append(gens, cat[r.IntN(len(cat))])
		}
		tt := newTestTable(f, r, gens, r.IntN(2) == 0)
		seed := fuzzHeader(tt.tbl.Columns, tt.present)
		for range 1 + r.IntN(3) {
			img, _ := tt.image(r, 4)
			seed = append(seed, img...)
		}
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		tbl, present, data, ok := fuzzTable(in)
		if !ok {
			return
		}
		var d rowDecoder
		for rows := 0; len(data) > 0 && rows < 64; rows++ {
			row, n, err := d.decodeImage(tbl, data, present)
			if err != nil {
				if !errors.Is(err, ErrCorruptRow) {
					t.Fatalf("error does not wrap ErrCorruptRow: %v", err)
				}
				return
			}
			if n < 0 || n > len(data) {
				t.Fatalf("consumed %d of %d bytes", n, len(data))
			}
			if len(row) != len(tbl.Columns) {
				t.Fatalf("row of %d values for %d columns", len(row), len(tbl.Columns))
			}
			for i, v := range row {
				c := &tbl.Columns[i]
				if present[i/8]&(1<<(i%8)) == 0 {
					if !v.IsAbsent() {
						t.Fatalf("column %d not present but %v", i, v.Kind())
					}
					continue
				}
				if v.Kind() != KindNull && v.Kind() != c.Kind {
					t.Fatalf("column %d (%s): kind %v, want %v", i, colTypeName(c.Type), v.Kind(), c.Kind)
				}
				if v.Kind() == KindJSON && !json.Valid(v.Bytes()) {
					t.Fatalf("column %d: invalid JSON text %q", i, v.Bytes())
				}
			}
			if n == 0 {
				return // no column present: nothing more to read
			}
			data = data[n:]
			if rows%8 == 7 {
				d.reset()
			}
		}
	})
}

func FuzzJSONB(f *testing.F) {
	r := rand.New(rand.NewPCG(9, 10))
	for range 60 {
		f.Add(encodeJSONB(randJV(r, 4)))
	}
	f.Add([]byte{})
	f.Add(encodeJSONB(jArr(true, jObj(true, "k", jInt(jsonbInt32, -1)), jOpaque(mysql.MYSQL_TYPE_TIME, le64(packTime(true, 1, 2, 3, 4))))))
	f.Fuzz(func(t *testing.T, doc []byte) {
		out, err := appendJSONB(nil, doc)
		if err != nil {
			if !errors.Is(err, ErrCorruptJSON) {
				t.Fatalf("error does not wrap ErrCorruptJSON: %v", err)
			}
			return
		}
		if !json.Valid(out) {
			t.Fatalf("invalid JSON %q from %x", out, doc)
		}
		// The text is at most six bytes per input byte (a control character
		// in a string), whatever the offsets say.
		if len(out) > 6*len(doc)+32 {
			t.Fatalf("%d bytes of text from %d bytes of input", len(out), len(doc))
		}
	})
}

// FuzzXAPrepare feeds XA_PREPARE_LOG_EVENT bodies to their parser: an
// error or an XID in the servers' X'..',X'..',N form, never a panic.
func FuzzXAPrepare(f *testing.F) {
	f.Add([]byte{0, 1, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 'a', '1'})
	f.Add([]byte{1, 1, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 'x', 'y'})
	f.Add([]byte{0, 0xff, 0xff, 0xff, 0xff, 64, 0, 0, 0, 64, 0, 0, 0})
	f.Fuzz(func(t *testing.T, body []byte) {
		ev, err := parseXAPrepare(body)
		if err == nil && (!strings.HasPrefix(ev.xid, "X'") || strings.Count(ev.xid, "'") != 4) {
			t.Fatalf("XID %q", ev.xid)
		}
		if err == nil && ev.xid != normalizeXID(ev.xid) {
			t.Fatalf("XID %q not normalized", ev.xid)
		}
	})
}

// FuzzExecuteLoadQuery feeds EXECUTE_LOAD_QUERY events to their parser.
func FuzzExecuteLoadQuery(f *testing.F) {
	body := make([]byte, 26)
	body[8] = 4 // database length
	ev := append(make([]byte, 19), body...)
	ev = append(ev, "shop\x00LOAD DATA INFILE 'x' INTO TABLE t"...)
	f.Add(ev, false)
	f.Add(append(ev, 1, 2, 3, 4), true)
	f.Add([]byte{1, 2, 3}, true)
	f.Fuzz(func(t *testing.T, raw []byte, crc bool) {
		db, q, err := executeLoadQuery(raw, crc)
		if err == nil && len(db)+len(q) > len(raw) {
			t.Fatalf("read %d bytes from %d", len(db)+len(q), len(raw))
		}
	})
}
