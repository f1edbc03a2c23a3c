package charset

import "encoding/binary"

// The generated tables (tables/NAME.bin) hold each set's characters as runs over
// one key space:
//
//	0-255              a one-byte sequence: the byte
//	doubleBase + k     a two-byte sequence: k = (lead-0x80)<<8 | trail
//	longBase + k       a three- or four-byte sequence: k = longKey
//
// A run is three varints: the gap from the previous run's end to its first
// key, count<<1 | 1 when its characters are unmapped (else count<<1), and,
// for mapped runs, the first code point minus the code point that would
// follow the previous mapped run. Keys not in any run are not characters.
const (
	doubleBase = 0x100
	longBase   = doubleBase + 0x8000
)

// load decodes the set's table into the lookup tables, once.
func (c *Charset) load() {
	c.once.Do(func() {
		for i := range c.single {
			c.single[i] = none
		}
		var key uint32
		var next rune
		data := tableData(c.name)
		for len(data) > 0 {
			gap, n := binary.Uvarint(data)
			data = data[n:]
			cf, n := binary.Uvarint(data)
			data = data[n:]
			r := unmapped
			if cf&1 == 0 {
				d, n := binary.Varint(data)
				data = data[n:]
				r = next + rune(d)
				next = r + rune(cf>>1)
			}
			key += uint32(gap)
			count := uint32(cf >> 1)
			c.add(run{key: key, count: count, r: r})
			key += count
		}
		c.ascii = true
		for b := range 0x80 {
			if c.single[b] != rune(b) {
				c.ascii = false
			}
		}
	})
}

// add stores one run in the table of its key range.
func (c *Charset) add(rn run) {
	switch {
	case rn.key >= longBase:
		rn.key -= longBase
		c.long = append(c.long, rn)
	case rn.key >= doubleBase:
		if c.double == nil {
			c.double = make([]rune, 0x8000)
		}
		for i := range rn.count {
			r := rn.r
			if r != unmapped {
				r += rune(i)
			}
			c.double[rn.key-doubleBase+i] = r
		}
	default:
		for i := range rn.count {
			r := rn.r
			if r != unmapped {
				r += rune(i)
			}
			c.single[rn.key+i] = r
		}
	}
}
