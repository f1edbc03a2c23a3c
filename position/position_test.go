package position

import (
	"errors"
	"testing"
)

func TestParseFilePos(t *testing.T) {
	p, err := ParseFilePos("mysql-bin.000042:1234")
	if err != nil || p.File != "mysql-bin.000042" || p.Offset != 1234 {
		t.Fatalf("got %+v %v", p, err)
	}
	for _, bad := range []string{"", "mysql-bin.000001", "mysql-bin.000001:", ":4", "f:-1", "f:99999999999"} {
		if _, err := ParseFilePos(bad); !errors.Is(err, ErrSyntax) {
			t.Errorf("%q: want ErrSyntax, got %v", bad, err)
		}
	}
}

func TestGTIDSets(t *testing.T) {
	tests := []struct {
		flavor        Flavor
		a, b          string
		aContainsB    bool
		canonicalForA string
	}{
		{MariaDB, "0-1-10,1-2-5", "0-1-7", true, "0-1-10,1-2-5"},
		{MariaDB, "0-1-10", "0-1-11", false, "0-1-10"},
		{MariaDB, "0-1-10", "1-1-1", false, "0-1-10"},
		{MariaDB, "1-2-5,0-1-10", "", true, "0-1-10,1-2-5"},
		{MySQL, "3e11fa47-71ca-11e1-9e33-c80aa9429562:1-23", "3e11fa47-71ca-11e1-9e33-c80aa9429562:5-7", true, "3e11fa47-71ca-11e1-9e33-c80aa9429562:1-23"},
		{MySQL, "3e11fa47-71ca-11e1-9e33-c80aa9429562:1-23", "3e11fa47-71ca-11e1-9e33-c80aa9429562:20-24", false, "3e11fa47-71ca-11e1-9e33-c80aa9429562:1-23"},
		{MySQL, "3E11FA47-71CA-11E1-9E33-C80AA9429562:1-5:7-9,0b8ed5b4-0c0f-11ee-9e33-c80aa9429562:1", "0b8ed5b4-0c0f-11ee-9e33-c80aa9429562:1", true,
			"0b8ed5b4-0c0f-11ee-9e33-c80aa9429562:1,3e11fa47-71ca-11e1-9e33-c80aa9429562:1-5:7-9"},
	}
	for _, tc := range tests {
		a, err := ParseGTIDSet(tc.flavor, tc.a)
		if err != nil {
			t.Fatalf("%s %q: %v", tc.flavor, tc.a, err)
		}
		b, err := ParseGTIDSet(tc.flavor, tc.b)
		if err != nil {
			t.Fatalf("%s %q: %v", tc.flavor, tc.b, err)
		}
		if got := a.Contains(b); got != tc.aContainsB {
			t.Errorf("%q contains %q = %v, want %v", tc.a, tc.b, got, tc.aContainsB)
		}
		if got := a.String(); got != tc.canonicalForA {
			t.Errorf("%q printed as %q, want %q", tc.a, got, tc.canonicalForA)
		}
		// Print, parse, compare: stable.
		again, err := ParseGTIDSet(tc.flavor, a.String())
		if err != nil || !again.Equal(a) {
			t.Errorf("round trip of %q: %v %v", tc.a, again, err)
		}
	}
}

func TestGTIDAdd(t *testing.T) {
	m, _ := ParseGTIDSet(MariaDB, "0-1-5")
	if err := m.Add("0-1-6"); err != nil || m.String() != "0-1-6" {
		t.Fatalf("mariadb add: %v %s", err, m)
	}
	if err := m.Add("2-3-1"); err != nil || m.String() != "0-1-6,2-3-1" {
		t.Fatalf("mariadb add domain: %v %s", err, m)
	}
	s, _ := ParseGTIDSet(MySQL, "3e11fa47-71ca-11e1-9e33-c80aa9429562:1-5")
	if err := s.Add("3e11fa47-71ca-11e1-9e33-c80aa9429562:6"); err != nil || s.String() != "3e11fa47-71ca-11e1-9e33-c80aa9429562:1-6" {
		t.Fatalf("mysql add: %v %s", err, s)
	}
	c := s.Clone()
	_ = c.Add("3e11fa47-71ca-11e1-9e33-c80aa9429562:8")
	if s.String() != "3e11fa47-71ca-11e1-9e33-c80aa9429562:1-6" {
		t.Fatalf("clone shares state: %s", s)
	}
}

func TestGTIDSyntaxErrors(t *testing.T) {
	for _, tc := range []struct {
		f Flavor
		s string
	}{
		{MariaDB, "0-1"}, {MariaDB, "a-b-c"}, {MariaDB, "0-1-2-3"}, {MySQL, "not-a-uuid:1-5"}, {MySQL, "3e11fa47-71ca-11e1-9e33-c80aa9429562"}, {"oracle", "1"},
	} {
		if _, err := ParseGTIDSet(tc.f, tc.s); !errors.Is(err, ErrSyntax) {
			t.Errorf("%s %q: want ErrSyntax, got %v", tc.f, tc.s, err)
		}
	}
}

func TestDetectFlavor(t *testing.T) {
	if DetectFlavor("0-1-5,1-1-2") != MariaDB || DetectFlavor("3e11fa47-71ca-11e1-9e33-c80aa9429562:1-5") != MySQL || DetectFlavor(" ") != "" {
		t.Fatal("flavour detection")
	}
}

func TestPositionString(t *testing.T) {
	p := Position{File: "mysql-bin.000001", Offset: 4, GTIDs: "0-1-1"}
	if p.String() != "mysql-bin.000001:4 gtid:0-1-1" || (Position{}).String() != "" || !(Position{}).IsZero() {
		t.Fatalf("String: %q", p.String())
	}
}

func TestCompactGTIDs(t *testing.T) {
	in := "3e11fa47-71ca-11e1-9e33-c80aa9429562:1-5,\n4e11fa47-71ca-11e1-9e33-c80aa9429562:1-3:7"
	if got, want := CompactGTIDs(in), "3e11fa47-71ca-11e1-9e33-c80aa9429562:1-5,4e11fa47-71ca-11e1-9e33-c80aa9429562:1-3:7"; got != want {
		t.Errorf("CompactGTIDs: %q", got)
	}
}

// TestCompareAcrossServers: positions of two servers are ordered by their
// GTID states, never by their file names.
func TestCompareAcrossServers(t *testing.T) {
	old := Position{File: "mysql-bin.000009", Offset: 900, GTIDs: "3e11fa47-71ca-11e1-9e33-c80aa9429562:1-20", Flavor: MySQL, Server: "3e11fa47-71ca-11e1-9e33-c80aa9429562"}
	newer := Position{File: "replica-bin.000001", Offset: 400, GTIDs: "3e11fa47-71ca-11e1-9e33-c80aa9429562:1-21", Flavor: MySQL, Server: "4e11fa47-71ca-11e1-9e33-c80aa9429563"}
	older := Position{File: "a-bin.000100", Offset: 9999, GTIDs: "3e11fa47-71ca-11e1-9e33-c80aa9429562:1-19", Flavor: MySQL, Server: "4e11fa47-71ca-11e1-9e33-c80aa9429563"}
	same := Position{File: "replica-bin.000001", Offset: 4, GTIDs: "3e11fa47-71ca-11e1-9e33-c80aa9429562:1-20", Flavor: MySQL, Server: "4e11fa47-71ca-11e1-9e33-c80aa9429563"}
	for _, c := range []struct {
		p, q Position
		want int
	}{
		{old, newer, -1}, {newer, old, 1}, {old, older, 1}, {older, old, -1}, {old, same, 0},
		// One server: by file and offset, whatever the GTIDs say.
		{newer, same, 1}, {older, newer, -1},
	} {
		if got := c.p.Compare(c.q); got != c.want {
			t.Errorf("%s vs %s: %d, want %d", c.p, c.q, got, c.want)
		}
	}
	m1 := Position{File: "mariadb-bin.000003", Offset: 100, GTIDs: "0-1-50", Flavor: MariaDB, Server: "1"}
	m2 := Position{File: "mariadb-bin.000001", Offset: 100, GTIDs: "0-2-51", Flavor: MariaDB, Server: "2"}
	if m1.Compare(m2) != -1 || m2.Compare(m1) != 1 {
		t.Errorf("MariaDB across servers: %d %d, want -1 1", m1.Compare(m2), m2.Compare(m1))
	}
}
