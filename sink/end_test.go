package sink

import (
	"testing"

	"github.com/sluice-cdc/sluice/position"
)

// TestEndHeader: the end position's header form has every value a string
// (so that Kafka Connect's SimpleHeaderConverter reads a map<string,string>,
// which Debezium's JDBC sink takes), and ParseEnd reads it and the plain
// JSON form (older Kafka records, the other sinks) alike.
func TestEndHeader(t *testing.T) {
	p := position.Position{File: "mysql-bin.000003", Offset: 4711, GTIDs: "0-1-5", Flavor: position.MariaDB, Server: "1"}
	if got, want := string(AppendEndHeader(nil, &p)), `{"file":"mysql-bin.000003","pos":"4711","gtids":"0-1-5","flavor":"mariadb","server":"1"}`; got != want {
		t.Fatalf("AppendEndHeader: %s, want %s", got, want)
	}
	if got, want := string(AppendEnd(nil, &p)), `{"file":"mysql-bin.000003","pos":4711,"gtids":"0-1-5","flavor":"mariadb","server":"1"}`; got != want {
		t.Fatalf("AppendEnd: %s, want %s", got, want)
	}
	for _, tc := range []struct {
		in   string
		want position.Position
		bad  bool
	}{
		{in: `{"file":"mysql-bin.000003","pos":"4711","gtids":"0-1-5","flavor":"mariadb","server":"1"}`, want: p},
		{in: `{"file":"mysql-bin.000003","pos":4711,"gtids":"0-1-5","flavor":"mariadb","server":"1"}`, want: p},
		{in: `{"file":"f","pos":null}`, want: position.Position{File: "f"}},
		{in: `{"gtids":"u:1-3","flavor":"mysql"}`, want: position.Position{GTIDs: "u:1-3", Flavor: position.MySQL}},
		{in: `{"file":"f","pos":"4294967296"}`, bad: true},
		{in: `{"file":"f","pos":-1}`, bad: true},
		{in: `{"file":"f","pos":"4x"}`, bad: true},
		{in: `{"file":"f","pos":1.5}`, bad: true},
		{in: `{"file":`, bad: true},
	} {
		got, err := ParseEnd([]byte(tc.in))
		if tc.bad {
			if err == nil {
				t.Errorf("ParseEnd(%s) = %+v, want an error", tc.in, *got)
			}
			continue
		}
		if err != nil || *got != tc.want {
			t.Errorf("ParseEnd(%s) = %+v, %v; want %+v", tc.in, got, err, tc.want)
		}
	}
}
