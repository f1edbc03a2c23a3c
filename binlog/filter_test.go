package binlog

import (
	"strings"
	"testing"
)

func TestParseFilterNames(t *testing.T) {
	cases := []struct {
		spec      string
		match     [][2]string
		skip      [][2]string
		patterns  int
		errorWith string
	}{
		{spec: "shop.*", match: [][2]string{{"shop", "orders"}}, skip: [][2]string{{"shopx", "orders"}, {"mysql", "user"}}, patterns: 1},
		{spec: "oh.Ünï cöde-*", match: [][2]string{{"oh", "Ünï cöde-tbl"}}, skip: [][2]string{{"oh", "Uni code-tbl"}}, patterns: 1},
		{spec: "oh.Ünï ?öde-tbl", match: [][2]string{{"oh", "Ünï cöde-tbl"}}, patterns: 1},
		{spec: "`my.db`.`a,b`", match: [][2]string{{"my.db", "a,b"}}, skip: [][2]string{{"my", "db.a,b"}}, patterns: 1},
		{spec: "`a*`.`t?`, `x``y`.`select`", match: [][2]string{{"a*", "t?"}, {"x`y", "select"}}, skip: [][2]string{{"ab", "t1"}, {"x``y", "select"}}, patterns: 2},
		{spec: "`订单库`.*, shop.`order lines`", match: [][2]string{{"订单库", "订单"}, {"shop", "order lines"}}, patterns: 2},
		{spec: "`mysql`.user", match: [][2]string{{"mysql", "user"}}, patterns: 1},
		{spec: "shop", errorWith: "must be db.table"},
		{spec: "`my.db.orders", errorWith: "not closed"},
		{spec: "`my`db.orders", errorWith: "mixes a name in backticks"},
		{spec: "shop.", errorWith: "empty name"},
	}
	for _, tc := range cases {
		f, err := ParseFilter(tc.spec)
		if tc.errorWith != "" {
			if err == nil || !strings.Contains(err.Error(), tc.errorWith) {
				t.Errorf("ParseFilter(%q) = %v, want an error with %q", tc.spec, err, tc.errorWith)
			}
			continue
		}
		if err != nil {
			t.Fatalf("ParseFilter(%q): %v", tc.spec, err)
		}
		if f.Len() != tc.patterns || f.String() != strings.ReplaceAll(tc.spec, ", ", ",") {
			t.Errorf("ParseFilter(%q): %d patterns, String %q", tc.spec, f.Len(), f.String())
		}
		for _, m := range tc.match {
			if !f.Match(m[0], m[1]) || !f.MatchSchema(m[0]) {
				t.Errorf("%q does not select %q.%q", tc.spec, m[0], m[1])
			}
		}
		for _, m := range tc.skip {
			if f.Match(m[0], m[1]) {
				t.Errorf("%q selects %q.%q", tc.spec, m[0], m[1])
			}
		}
	}
}
