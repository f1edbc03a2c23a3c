// Package charset converts text in MySQL's and MariaDB's character sets to
// Unicode exactly as the server's own CONVERT(col USING utf8mb4) does.
//
// Every character set either server lists in SHOW CHARACTER SET has a
// conversion here. The UTF-8, UTF-16, UTF-32 and UCS-2 families are decoded
// by rule; every other set by a table taken from the servers themselves:
// tables/ is written by `go generate` (gen/), which starts a throwaway
// MariaDB and MySQL, asks each for CONVERT(... USING utf8mb4) of every byte
// sequence a set can hold, and merges the answers (the two servers agree on
// every sequence either can store). golang.org/x/text's encodings were
// measured against the servers first and differ from them in thousands of
// places (MySQL's sjis maps 0x815F to U+005C, x/text to U+FF3C; big5, gbk,
// euckr and cp932 map their user-defined areas or leave them unmapped
// differently; macce is not in x/text at all), so sluice keeps its own
// tables: a lookup per character, no transformer, and exact by construction.
//
// A byte sequence that is not a character of its set (the server refuses to
// store one, but a binary log from another server or a client that bypassed
// the checks can hold one), or a character with no Unicode mapping, becomes
// '?', as CONVERT writes it: an unmapped character of a multi-byte set is one
// '?' for the whole sequence, an invalid byte one '?' for that byte, and the
// next byte starts the next character. Next reports both, so that a caller
// can count what was replaced.
package charset

import (
	"slices"
	"sync"
	"unicode/utf8"
)

//go:generate go run ./gen -o tables

// Charset is the conversion of one character set to Unicode. The zero
// value is not usable; get one from Lookup.
type Charset struct {
	name string
	kind kind

	once   sync.Once
	single [256]rune // code point of a one-byte character, none when not one
	double []rune    // [lead-0x80][trail] of two-byte characters; 0 when not one
	long   []run     // three- and four-byte characters, sorted by key
	ascii  bool      // bytes 0x00-0x7F are ASCII
}

type kind uint8

const (
	kindUTF8 kind = iota
	kindUCS2
	kindUTF16
	kindUTF16LE
	kindUTF32
	kindTable
)

const (
	// none marks a byte sequence that is not a character of the set.
	none rune = -2
	// unmapped marks a character of the set that has no Unicode mapping.
	unmapped rune = -1
	// Replacement is what CONVERT writes for an invalid or unmapped
	// character.
	Replacement = '?'
)

// run is a range of count keys (see key) whose characters are consecutive
// code points from r, or all unmapped when r is unmapped.
type run struct {
	key   uint32
	count uint32
	r     rune
}

// Name is the character set's name as the server spells it.
func (c *Charset) Name() string { return c.name }

// IsUTF8 reports whether the set is UTF-8 (utf8mb4, utf8mb3): its text
// needs no conversion, only validation.
func (c *Charset) IsUTF8() bool { return c.kind == kindUTF8 }

// ASCIICompatible reports whether every byte below 0x80 is the ASCII
// character of the same value and never part of a longer character, so
// that a caller may copy such bytes as they are.
func (c *Charset) ASCIICompatible() bool {
	switch c.kind {
	case kindUTF8:
		return true
	case kindTable:
		c.load()
		return c.ascii
	}
	return false
}

var byName = func() map[string]*Charset {
	m := map[string]*Charset{
		"utf8mb4": {name: "utf8mb4", kind: kindUTF8},
		"utf8mb3": {name: "utf8mb3", kind: kindUTF8},
		"ucs2":    {name: "ucs2", kind: kindUCS2},
		"utf16":   {name: "utf16", kind: kindUTF16},
		"utf16le": {name: "utf16le", kind: kindUTF16LE},
		"utf32":   {name: "utf32", kind: kindUTF32},
	}
	m["utf8"] = m["utf8mb3"]
	for _, name := range tableNames() {
		m[name] = &Charset{name: name, kind: kindTable}
	}
	return m
}()

// Lookup returns the named character set (the name as SHOW CHARACTER SET
// gives it, any case; "utf8" is utf8mb3), or nil when neither server has
// one of that name. "binary" is not a character set here: its data is
// bytes.
func Lookup(name string) *Charset {
	if c, ok := byName[name]; ok {
		return c
	}
	var buf [16]byte // every name is shorter; lowered without allocating
	if len(name) > len(buf) {
		return nil
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		buf[i] = c
	}
	return byName[string(buf[:len(name)])]
}

// Names lists every character set Lookup knows, sorted.
func Names() []string {
	out := make([]string, 0, len(byName))
	for n := range byName {
		if n != "utf8" {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out
}

// Single returns the code point of each byte of a one-byte set (negative
// where the byte converts to '?': not a character, or unmapped), or nil
// for every other set. A caller converting much text reads it instead of
// calling Next per byte.
func (c *Charset) Single() *[256]rune {
	if c.kind != kindTable {
		return nil
	}
	c.load()
	if c.double != nil || c.long != nil {
		return nil
	}
	return &c.single
}

// Next decodes the character at the start of s (which must not be empty):
// its code point r, its length n in bytes (at least 1), and ok false when
// the bytes are not a character of the set or the character has no
// Unicode mapping, in which case r is Replacement, as CONVERT writes it.
// UTF-8 text is decoded as utf8mb4 (an invalid byte is Replacement too).
func (c *Charset) Next(s []byte) (r rune, n int, ok bool) {
	switch c.kind {
	case kindUTF8:
		if s[0] < utf8.RuneSelf {
			return rune(s[0]), 1, true
		}
		r, n = utf8.DecodeRune(s)
		if r == utf8.RuneError && n <= 1 {
			return Replacement, 1, false
		}
		return r, n, true
	case kindUCS2, kindUTF16, kindUTF16LE:
		return c.nextUTF16(s)
	case kindUTF32:
		if len(s) < 4 {
			return Replacement, len(s), false
		}
		u := uint32(s[0])<<24 | uint32(s[1])<<16 | uint32(s[2])<<8 | uint32(s[3])
		if u > utf8.MaxRune || u >= 0xD800 && u <= 0xDFFF {
			return Replacement, 4, false
		}
		return rune(u), 4, true
	}
	c.load()
	b := s[0]
	if b < 0x80 && c.ascii || c.double == nil && c.long == nil {
		if r := c.single[b]; r >= 0 {
			return r, 1, true
		}
		return Replacement, 1, false
	}
	if len(c.long) > 0 && len(s) >= 3 {
		if k, n, isLong := longKey(c.name, s); isLong {
			if r, found := c.lookupLong(k); found {
				if r == unmapped {
					return Replacement, n, false
				}
				return r, n, true
			}
		}
	}
	if c.double != nil && b >= 0x80 && len(s) >= 2 {
		switch r := c.double[int(b-0x80)<<8|int(s[1])]; {
		case r > 0:
			return r, 2, true
		case r == unmapped:
			return Replacement, 2, false
		}
	}
	if r := c.single[b]; r >= 0 {
		return r, 1, true
	}
	return Replacement, 1, false
}

// nextUTF16 decodes UCS-2 and UTF-16 (big-endian unless utf16le). ucs2 has
// no surrogate pairs: a surrogate is invalid, as is an unpaired one in
// UTF-16 and a trailing odd byte.
func (c *Charset) nextUTF16(s []byte) (rune, int, bool) {
	if len(s) < 2 {
		return Replacement, len(s), false
	}
	unit := func(i int) rune {
		if c.kind == kindUTF16LE {
			return rune(s[i]) | rune(s[i+1])<<8
		}
		return rune(s[i])<<8 | rune(s[i+1])
	}
	r := unit(0)
	if r < 0xD800 || r > 0xDFFF {
		return r, 2, true
	}
	if c.kind != kindUCS2 && r < 0xDC00 && len(s) >= 4 {
		if r2 := unit(2); r2 >= 0xDC00 && r2 <= 0xDFFF {
			return 0x10000 + (r-0xD800)<<10 + (r2 - 0xDC00), 4, true
		}
	}
	return Replacement, 2, false
}

// AppendUTF8 appends s converted to UTF-8 and returns the extended slice
// and the number of characters replaced by '?' (invalid or unmapped).
// UTF-8 text valid as utf8mb4 is appended as it is.
func (c *Charset) AppendUTF8(dst, s []byte) ([]byte, int) {
	bad := 0
	if c.kind == kindUTF8 && utf8.Valid(s) {
		return append(dst, s...), 0
	}
	if t := c.Single(); t != nil {
		for _, b := range s {
			r := t[b]
			if r < 0 {
				r = Replacement
				bad++
			}
			dst = utf8.AppendRune(dst, r)
		}
		return dst, bad
	}
	ascii := c.ASCIICompatible()
	for i := 0; i < len(s); {
		if ascii && s[i] < utf8.RuneSelf {
			dst = append(dst, s[i])
			i++
			continue
		}
		r, n, ok := c.Next(s[i:])
		if !ok {
			bad++
		}
		dst = utf8.AppendRune(dst, r)
		i += n
	}
	return dst, bad
}

// Invalid returns the number of characters of s that convert to '?'
// because they are not characters of the set or have no Unicode mapping
// (0 for text that converts exactly).
func (c *Charset) Invalid(s []byte) int {
	switch c.kind {
	case kindUTF8:
		if utf8.Valid(s) {
			return 0
		}
	case kindTable:
		c.load()
		if c.double == nil && c.long == nil {
			bad := 0
			for _, b := range s {
				if c.single[b] < 0 {
					bad++
				}
			}
			return bad
		}
	}
	ascii := c.ASCIICompatible()
	bad := 0
	for i := 0; i < len(s); {
		if ascii && s[i] < utf8.RuneSelf {
			i++
			continue
		}
		_, n, ok := c.Next(s[i:])
		if !ok {
			bad++
		}
		i += n
	}
	return bad
}

// longKey returns the key of the three- or four-byte sequence at the start
// of s, if s starts with one of its set's shapes: EUC-JP's 0x8F followed by
// two bytes 0x80-0xFF (ujis, eucjpms), GB18030's byte 0x81-0xFE, a digit, a
// byte 0x81-0xFE and a digit.
func longKey(name string, s []byte) (key uint32, n int, ok bool) {
	if name == "gb18030" {
		if len(s) < 4 || s[1] < 0x30 || s[1] > 0x39 || s[0] < 0x81 || s[0] > 0xFE ||
			s[2] < 0x81 || s[2] > 0xFE || s[3] < 0x30 || s[3] > 0x39 {
			return 0, 0, false
		}
		return ((uint32(s[0]-0x81)*10+uint32(s[1]-0x30))*126+uint32(s[2]-0x81))*10 + uint32(s[3]-0x30), 4, true
	}
	if s[0] != 0x8F || s[1] < 0x80 || s[2] < 0x80 {
		return 0, 0, false
	}
	return uint32(s[1]-0x80)<<7 | uint32(s[2]-0x80), 3, true
}

// lookupLong finds key among the long runs.
func (c *Charset) lookupLong(key uint32) (rune, bool) {
	lo, hi := 0, len(c.long)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if c.long[m].key+c.long[m].count <= key {
			lo = m + 1
		} else {
			hi = m
		}
	}
	if lo == len(c.long) || c.long[lo].key > key {
		return 0, false
	}
	rn := c.long[lo]
	if rn.r == unmapped {
		return unmapped, true
	}
	return rn.r + rune(key-rn.key), true
}
