package binlog

import (
	"fmt"
	"path"
	"strings"
)

// Filter selects tables by patterns "db.table" where each side is a glob
// ("shop.*", "*.orders", "app.user_?"). An empty filter selects every table
// outside the server's own schemas (mysql, information_schema,
// performance_schema, sys), which are only selected when named explicitly.
type Filter struct {
	pats [][2]string
}

var systemSchemas = map[string]bool{"mysql": true, "information_schema": true, "performance_schema": true, "sys": true}

// ParseFilter parses a comma-separated list of patterns.
func ParseFilter(spec string) (*Filter, error) {
	f := &Filter{}
	for p := range strings.SplitSeq(spec, ",") {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		db, tbl, ok := strings.Cut(p, ".")
		if !ok {
			return nil, fmt.Errorf("binlog: table pattern %q must be db.table (use db.* for every table of db)", p)
		}
		for _, g := range []string{db, tbl} {
			if _, err := path.Match(g, ""); err != nil {
				return nil, fmt.Errorf("binlog: table pattern %q: bad glob %q: %v", p, g, err)
			}
		}
		f.pats = append(f.pats, [2]string{db, tbl})
	}
	return f, nil
}

// Match reports whether db.table is selected.
func (f *Filter) Match(db, table string) bool {
	if f == nil || len(f.pats) == 0 {
		return !systemSchemas[strings.ToLower(db)]
	}
	for _, p := range f.pats {
		okDB, _ := path.Match(p[0], db)
		okT, _ := path.Match(p[1], table)
		if okDB && okT {
			if systemSchemas[strings.ToLower(db)] && p[0] != db {
				continue // system schemas only when named
			}
			return true
		}
	}
	return false
}

// MatchSchema reports whether any table of db may be selected.
func (f *Filter) MatchSchema(db string) bool {
	if f == nil || len(f.pats) == 0 {
		return !systemSchemas[strings.ToLower(db)]
	}
	for _, p := range f.pats {
		if ok, _ := path.Match(p[0], db); ok {
			return true
		}
	}
	return false
}

// String renders the filter as it was given.
func (f *Filter) String() string {
	if f == nil || len(f.pats) == 0 {
		return "*.*"
	}
	parts := make([]string, len(f.pats))
	for i, p := range f.pats {
		parts[i] = p[0] + "." + p[1]
	}
	return strings.Join(parts, ",")
}
