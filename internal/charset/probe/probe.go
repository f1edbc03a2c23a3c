// Package probe asks a MySQL or MariaDB server how it converts every byte
// sequence of its character sets to Unicode: the data internal/charset's
// tables are generated from (gen/) and tested against (server_test.go).
// It is test equipment: the sluice binary does not link it.
package probe

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/go-mysql-org/go-mysql/client"
)

// Ruled are the sets decoded by rule, not by table.
var Ruled = map[string]bool{"binary": true, "utf8mb4": true, "utf8mb3": true, "utf8": true, "ucs2": true, "utf16": true, "utf16le": true, "utf32": true}

// The key space of the tables (internal/charset/table.go), and what a key
// maps to when it is not a code point.
const (
	DoubleBase = 0x100
	LongBase   = DoubleBase + 0x8000
	Unmapped   = -1
	invalid    = -2
)

// candidates lists the byte sequences of a set's shapes, with their keys.
func Candidates(cs string, maxlen int) (seqs [][]byte, keys []uint32) {
	add := func(k uint32, b ...byte) {
		seqs = append(seqs, b)
		keys = append(keys, k)
	}
	for b := range 256 {
		add(uint32(b), byte(b))
	}
	if maxlen >= 2 {
		for l := 0x80; l < 256; l++ {
			for t := range 256 {
				add(DoubleBase+uint32(l-0x80)<<8|uint32(t), byte(l), byte(t))
			}
		}
	}
	if maxlen == 3 {
		for a := 0x80; a < 256; a++ {
			for b := 0x80; b < 256; b++ {
				add(LongBase+uint32(a-0x80)<<7|uint32(b-0x80), 0x8F, byte(a), byte(b))
			}
		}
	}
	if maxlen == 4 && cs == "gb18030" {
		for a := 0x81; a <= 0xFE; a++ {
			for b := 0x30; b <= 0x39; b++ {
				for c := 0x81; c <= 0xFE; c++ {
					for d := 0x30; d <= 0x39; d++ {
						k := ((uint32(a-0x81)*10+uint32(b-0x30))*126+uint32(c-0x81))*10 + uint32(d-0x30)
						add(LongBase+k, byte(a), byte(b), byte(c), byte(d))
					}
				}
			}
		}
	}
	return seqs, keys
}

// Dump asks one server, over c (a connection it may change: it sets the
// names to utf8mb4 and creates the database gen), for every set's characters: key → code point,
// Unmapped or (absent) not a character.
func Dump(c *client.Conn) (map[string]map[uint32]rune, error) {
	for _, q := range []string{"SET NAMES utf8mb4", "CREATE DATABASE IF NOT EXISTS gen", "USE gen"} {
		if _, err := c.Execute(q); err != nil {
			return nil, err
		}
	}
	r, err := c.Execute("SELECT character_set_name, maxlen FROM information_schema.character_sets ORDER BY 1")
	if err != nil {
		return nil, err
	}
	out := map[string]map[uint32]rune{}
	for i := range r.Values {
		cs, _ := r.GetString(i, 0)
		maxlen, _ := r.GetInt(i, 1)
		if Ruled[cs] {
			continue
		}
		seqs, keys := Candidates(cs, int(maxlen))
		m, err := dumpSet(c, cs, int(maxlen), seqs, keys)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", cs, err)
		}
		out[cs] = m
	}
	return out, nil
}

func dumpSet(c *client.Conn, cs string, maxlen int, seqs [][]byte, keys []uint32) (map[uint32]rune, error) {
	for _, q := range []string{"DROP TABLE IF EXISTS s", "CREATE TABLE s (id INT PRIMARY KEY, b VARBINARY(4))"} {
		if _, err := c.Execute(q); err != nil {
			return nil, err
		}
	}
	const batch = 5000
	for off := 0; off < len(seqs); off += batch {
		var sb strings.Builder
		sb.WriteString("INSERT INTO s VALUES ")
		for j := off; j < off+batch && j < len(seqs); j++ {
			if j > off {
				sb.WriteByte(',')
			}
			fmt.Fprintf(&sb, "(%d,X'%X')", j, seqs[j])
		}
		if _, err := c.Execute(sb.String()); err != nil {
			return nil, err
		}
	}
	m := map[uint32]rune{}
	const page = 200000
	for off := 0; off < len(seqs); off += page {
		q := fmt.Sprintf("SELECT id, HEX(CONVERT(b USING %[1]s)) = HEX(b), HEX(CONVERT(CONVERT(b USING %[1]s) USING utf8mb4)) FROM s WHERE id >= %d AND id < %d", cs, off, off+page)
		rr, err := c.Execute(q)
		if err != nil {
			return nil, err
		}
		for k := range rr.Values {
			id, _ := rr.GetInt(k, 0)
			same, _ := rr.GetInt(k, 1)
			hx, _ := rr.GetString(k, 2)
			seq := seqs[id]
			u, err := hex.DecodeString(hx)
			if err != nil {
				return nil, err
			}
			r := classify(seq, same == 1, u)
			if r == Unmapped && maxlen > 1 && len(seq) == 1 && seq[0] >= 0x80 {
				// A lone lead byte of a multi-byte set, which MySQL's
				// CONVERT to the set lets through (eucjpms) and no column
				// stores: not a character.
				r = invalid
			}
			if r != invalid {
				m[keys[id]] = r
			}
		}
	}
	return m, nil
}

// classify is what one server says of seq: not a character (CONVERT to
// the set changes it, or gives nothing or a '?' per byte), Unmapped (one
// '?'), or the one code point it converts to.
func classify(seq []byte, kept bool, u []byte) rune {
	if !kept || len(u) == 0 {
		return invalid
	}
	if string(seq) != "?" && bytes.Equal(u, bytes.Repeat([]byte("?"), len(seq))) {
		if len(seq) == 1 {
			return Unmapped
		}
		return invalid // per byte: as the decoder writes an invalid sequence
	}
	if string(seq) != "?" && string(u) == "?" {
		return Unmapped
	}
	r, n := utf8.DecodeRune(u)
	if n != len(u) || r == utf8.RuneError && n <= 1 {
		return invalid
	}
	return r
}

// Merge adds b's answers to a: a sequence one server stores and the other
// does not is taken from the one that stores it (counted); two answers
// that differ are an error.
func Merge(a, b map[uint32]rune) (int, error) {
	only := 0
	var conflicts []string
	for k, rb := range b {
		ra, ok := a[k]
		switch {
		case !ok:
			a[k] = rb
			only++
		case ra == rb:
		case ra == Unmapped && k < DoubleBase, rb == Unmapped && k < DoubleBase:
			// one byte: Unmapped and not a character both become '?'
			if ra == Unmapped {
				a[k] = rb
			}
		default:
			conflicts = append(conflicts, fmt.Sprintf("key %#x: %U vs %U", k, ra, rb))
		}
	}
	for k := range a {
		if _, ok := b[k]; !ok {
			only++
		}
	}
	if len(conflicts) > 0 {
		if len(conflicts) > 20 {
			conflicts = conflicts[:20]
		}
		return 0, fmt.Errorf("the servers disagree: %s", strings.Join(conflicts, "; "))
	}
	return only, nil
}
