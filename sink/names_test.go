package sink

import (
	"errors"
	"strings"
	"testing"
)

func TestNamesClaim(t *testing.T) {
	type claim struct{ name, source, db, table string }
	cases := []struct {
		tmpl   string
		claims []claim
		clash  string // "": every claim succeeds; else the last one fails naming this
	}{
		{"{db}.{table}", []claim{{"a.b_c", "s", "a", "b c"}, {"a.b_c", "s", "a", "b c"}, {"a.d", "s", "a", "d"}}, ""},
		{"{db}.{table}", []claim{{"a.b_c", "s", "a", "b c"}, {"a.b_c", "s", "a", "b_c"}}, "`a`.`b c` and `a`.`b_c`"},
		{"{db}.{table}", []claim{{"a.b.c", "s", "a.b", "c"}, {"a.b.c", "s", "a", "b.c"}}, "`a.b`.`c` and `a`.`b.c`"},
		// The shards of one table share "{table}" on purpose, and every
		// table a template without placeholders.
		{"{table}", []claim{{"orders", "s", "shard1", "orders"}, {"orders", "s", "shard2", "orders"}}, ""},
		{"all", []claim{{"all", "s", "a", "x"}, {"all", "t", "b", "y"}}, ""},
		{"{table}", []claim{{"a_b", "s", "d", "a b"}, {"a_b", "s", "e", "a.b"}}, "`d`.`a b` and `e`.`a.b`"},
		{"{source}.{db}.{table}", []claim{{"x.d.t", "x", "d", "t"}, {"x.d.t", "x_", "d", "t"}}, "`d`.`t` of source x and `d`.`t` of source x_"},
	}
	for _, tc := range cases {
		tmpl, err := ParseTemplate(tc.tmpl)
		if err != nil {
			t.Fatal(err)
		}
		n := NewNames(tmpl, "topic")
		var last error
		for i, c := range tc.claims {
			last = n.Claim(c.name, c.source, c.db, c.table)
			if last != nil && (tc.clash == "" || i != len(tc.claims)-1) {
				t.Fatalf("%s: claim %d %+v: %v", tc.tmpl, i, c, last)
			}
		}
		if tc.clash == "" {
			continue
		}
		if last == nil || !strings.Contains(last.Error(), tc.clash) || !errors.Is(last, ErrPermanent) {
			t.Errorf("%s: the clash of %+v gave %v, want an ErrPermanent naming %s", tc.tmpl, tc.claims, last, tc.clash)
		}
	}
}
