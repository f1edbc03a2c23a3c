package binlog

import "testing"

func TestQueryText(t *testing.T) {
	// Q_FLAGS2 (4 bytes), Q_SQL_MODE (8), Q_CATALOG_NZ ("std"), then
	// Q_CHARSET_CODE with character_set_client = 28 (gbk_chinese_ci).
	vars := []byte{0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 6, 3, 's', 't', 'd', 4, 28, 0, 45, 0, 45, 0}
	if got := queryText([]byte("COMMENT '\xd7\xa2\xca\xcd'"), vars); got != "COMMENT '注释'" {
		t.Errorf("gbk client: %q", got)
	}
	utf := append(vars[:20:20], 45, 0, 45, 0, 45, 0)
	if got := queryText([]byte("COMMENT '注释'"), utf); got != "COMMENT '注释'" {
		t.Errorf("utf8mb4 client: %q", got)
	}
	// An unknown status variable before Q_CHARSET_CODE, or none: as it is.
	if got := queryText([]byte("x\xd7"), []byte{200, 1, 4, 28, 0}); got != "x\xd7" {
		t.Errorf("unknown variable: %q", got)
	}
	if got := queryText([]byte("x\xd7"), nil); got != "x\xd7" {
		t.Errorf("no variables: %q", got)
	}
	if _, ok := clientCollation([]byte{2}); ok {
		t.Error("truncated catalog read as a collation")
	}
}

func TestANSIQuotes(t *testing.T) {
	// Q_FLAGS2, then Q_SQL_MODE with ANSI_QUOTES (4) and REAL_AS_FLOAT (1).
	ansi := []byte{0, 0, 0, 0, 0, 1, 5, 0, 0, 0, 0, 0, 0, 0, 4, 33, 0, 33, 0, 33, 0}
	if !ansiQuotes(ansi) {
		t.Error("ANSI_QUOTES not seen")
	}
	plain := []byte{0, 0, 0, 0, 0, 1, 1, 0, 0, 0, 2, 0, 0, 0}
	if ansiQuotes(plain) || ansiQuotes(nil) || ansiQuotes(ansi[:10]) {
		t.Error("ANSI_QUOTES seen where the mode has none, or the variable is cut")
	}
	if coll, ok := clientCollation(ansi); !ok || coll != 33 {
		t.Errorf("collation after the mode: %d %v", coll, ok)
	}
}

// FuzzQueryText: status variables and statements from a binlog never
// crash the decoding, and a statement of a UTF-8 client is kept as it is.
func FuzzQueryText(f *testing.F) {
	f.Add([]byte("COMMENT '\xd7\xa2'"), []byte{0, 0, 0, 0, 0, 4, 28, 0, 45, 0, 45, 0})
	f.Add([]byte("x"), []byte{2, 200})
	f.Fuzz(func(t *testing.T, q, vars []byte) {
		_ = queryText(q, vars)
		if coll, ok := clientCollation(vars); ok && CharsetOfCollation(uint64(coll)) == "utf8mb4" {
			if got := queryText(q, vars); got != string(q) {
				t.Fatalf("utf8mb4 client's statement changed: %q", got)
			}
		}
	})
}
