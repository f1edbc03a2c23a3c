// Package position holds where a replication source stands: a binlog file
// and offset, and the GTID state, in the flavour the server speaks.
//
// A Position always points just after a whole transaction, so resuming
// from it never repeats or splits one. Resume prefers the GTID state
// (which survives binlog rotation and failover to another server of the
// same replication topology) and falls back to file and offset.
package position

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/go-mysql-org/go-mysql/mysql"
)

// Flavor is the GTID dialect of a server.
type Flavor string

// The two GTID flavours: MySQL's uuid:interval sets and MariaDB's
// domain-server-sequence lists.
const (
	MySQL   Flavor = "mysql"
	MariaDB Flavor = "mariadb"
)

// ErrSyntax is returned for a position or GTID set that does not parse.
var ErrSyntax = errors.New("position: syntax error")

// Position is the point just after a committed transaction on one source.
type Position struct {
	File   string `json:"file,omitempty"`
	Offset uint32 `json:"pos,omitempty"`
	// GTIDs is the server's GTID state after the transaction, in the
	// canonical text form of Flavor ("uuid:1-5,uuid2:1-3" or "0-1-42,1-1-7").
	GTIDs  string `json:"gtids,omitempty"`
	Flavor Flavor `json:"flavor,omitempty"`
	// Server is the identity of the server whose binlog File and Offset
	// name: MySQL's server_uuid, MariaDB's server_id. Empty when unknown
	// (positions saved by older versions, or typed by a user). File names
	// and offsets mean nothing on another server; see Compare.
	Server string `json:"server,omitempty"`
}

// compareGTIDs orders p and q by GTID containment; ok is false when
// either has no GTID state or neither state contains the other.
func (p Position) compareGTIDs(q Position) (c int, ok bool) {
	if p.GTIDs == "" || q.GTIDs == "" || p.Flavor != q.Flavor {
		return 0, false
	}
	if p.GTIDs == q.GTIDs {
		return 0, true
	}
	ps, err1 := ParseGTIDSet(p.Flavor, p.GTIDs)
	qs, err2 := ParseGTIDSet(q.Flavor, q.GTIDs)
	if err1 != nil || err2 != nil {
		return 0, false
	}
	switch pc, qc := ps.Contains(qs), qs.Contains(ps); {
	case pc && qc:
		return 0, true
	case pc:
		return 1, true
	case qc:
		return -1, true
	}
	return 0, false
}

// IsZero reports whether p names no position at all.
func (p Position) IsZero() bool { return p.File == "" && p.GTIDs == "" }

// HasFile reports whether p has a binlog file and offset.
func (p Position) HasFile() bool { return p.File != "" }

// String renders p as "file:offset", followed by " gtid:SET" when known.
func (p Position) String() string {
	var b strings.Builder
	if p.File != "" {
		b.WriteString(p.File)
		b.WriteByte(':')
		b.WriteString(strconv.FormatUint(uint64(p.Offset), 10))
	}
	if p.GTIDs != "" {
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		b.WriteString("gtid:")
		b.WriteString(p.GTIDs)
	}
	return b.String()
}

// ParseFilePos parses "mysql-bin.000003:1234".
func ParseFilePos(s string) (Position, error) {
	i := strings.LastIndexByte(s, ':')
	if i <= 0 || i == len(s)-1 {
		return Position{}, fmt.Errorf("%w: %q is not FILE:POS (example: mysql-bin.000003:4)", ErrSyntax, s)
	}
	off, err := strconv.ParseUint(s[i+1:], 10, 32)
	if err != nil {
		return Position{}, fmt.Errorf("%w: offset in %q: %v", ErrSyntax, s, err)
	}
	return Position{File: s[:i], Offset: uint32(off)}, nil
}

// GTIDSet is a parsed GTID state of either flavour. The zero GTIDSet
// holds no set (IsZero); ParseGTIDSet makes one, Add adds to it.
type GTIDSet struct {
	Flavor Flavor
	set    mysql.GTIDSet // nil in the zero GTIDSet
}

// IsZero reports whether g is the zero GTIDSet, holding no parsed set.
// The set parsed from "" is empty, not zero: Add works on it.
func (g GTIDSet) IsZero() bool { return g.set == nil }

// DetectFlavor guesses the flavour of a GTID text: MariaDB GTIDs are
// three numbers joined by dashes; MySQL GTIDs start with a UUID.
func DetectFlavor(s string) Flavor {
	s = strings.TrimSpace(s)
	if s == "" {
		return ""
	}
	first := strings.TrimSpace(strings.SplitN(s, ",", 2)[0])
	if strings.Contains(first, ":") {
		return MySQL
	}
	return MariaDB
}

// CompactGTIDs removes the line breaks MySQL puts after each UUID's part
// of a long GTID set (in SHOW BINARY LOG STATUS, gtid_executed,
// performance_schema.log_status), giving the set's text on one line.
func CompactGTIDs(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "\n", ""), "\r", "")
}

// ParseGTIDSet parses a GTID set of the given flavour. An empty flavour
// is detected from the text.
func ParseGTIDSet(flavor Flavor, s string) (GTIDSet, error) {
	if flavor == "" {
		flavor = DetectFlavor(s)
		if flavor == "" {
			flavor = MariaDB
		}
	}
	var (
		set mysql.GTIDSet
		err error
	)
	switch flavor {
	case MySQL:
		set, err = mysql.ParseMysqlGTIDSet(s)
	case MariaDB:
		if err = checkMariaDB(s); err == nil {
			set, err = mysql.ParseMariadbGTIDSet(s)
		}
	default:
		return GTIDSet{}, fmt.Errorf("%w: unknown GTID flavour %q (want mysql or mariadb)", ErrSyntax, flavor)
	}
	if err != nil {
		return GTIDSet{}, fmt.Errorf("%w: %s GTID set %q: %v", ErrSyntax, flavor, s, err)
	}
	return GTIDSet{Flavor: flavor, set: set}, nil
}

// checkMariaDB validates "D-S-N[,D-S-N...]" strictly: go-mysql accepts
// some malformed input silently.
func checkMariaDB(s string) error {
	if strings.TrimSpace(s) == "" {
		return nil
	}
	for part := range strings.SplitSeq(s, ",") {
		f := strings.Split(strings.TrimSpace(part), "-")
		if len(f) != 3 {
			return fmt.Errorf("%q is not domain-server-sequence", part)
		}
		for i, x := range f {
			bits := 32
			if i == 2 {
				bits = 64
			}
			if _, err := strconv.ParseUint(x, 10, bits); err != nil {
				return fmt.Errorf("%q: %v", part, err)
			}
		}
	}
	return nil
}

// String renders the set canonically.
func (g GTIDSet) String() string {
	if g.set == nil {
		return ""
	}
	return g.set.String()
}

// Contains reports whether every transaction of o is in g. For MariaDB it
// compares per domain: g contains o when, for every domain of o, g's last
// sequence number is at least o's.
func (g GTIDSet) Contains(o GTIDSet) bool {
	if g.set == nil {
		return o.set == nil || o.String() == ""
	}
	if o.set == nil {
		return true
	}
	if g.Flavor != o.Flavor {
		return false
	}
	return g.set.Contain(o.set)
}

// Equal reports whether g and o hold the same transactions.
func (g GTIDSet) Equal(o GTIDSet) bool {
	return g.Flavor == o.Flavor && g.String() == o.String()
}

// Clone returns an independent copy.
func (g GTIDSet) Clone() GTIDSet {
	if g.set == nil {
		return g
	}
	return GTIDSet{Flavor: g.Flavor, set: g.set.Clone()}
}

// Add records one transaction's GTID ("uuid:N" or "D-S-N") in g.
func (g GTIDSet) Add(gtid string) error {
	if g.set == nil {
		return errors.New("position: Add on an empty GTIDSet; parse one first")
	}
	if err := g.set.Update(gtid); err != nil {
		return fmt.Errorf("%w: GTID %q: %v", ErrSyntax, gtid, err)
	}
	return nil
}

// Compare orders two positions: -1 if p is before q, 0 if equal, +1 if
// after. Positions of one server are ordered by binlog file and offset
// (a server's binlog file names sort in the order it wrote them).
// Positions of two servers (both identities known and different: the
// source failed over) are ordered by their GTID states, one containing
// the other; file names are not compared across servers unless there is
// nothing else to go by (no GTIDs, or two states neither of which
// contains the other).
func (p Position) Compare(q Position) int {
	if p.Server != q.Server && p.Server != "" && q.Server != "" {
		if c, ok := p.compareGTIDs(q); ok {
			return c
		}
	}
	switch {
	case p.File < q.File:
		return -1
	case p.File > q.File:
		return 1
	case p.Offset < q.Offset:
		return -1
	case p.Offset > q.Offset:
		return 1
	}
	return 0
}
