package binlog

import (
	"errors"
	"fmt"
	"path"
	"strings"

	"github.com/sluice-cdc/sluice/internal/sqlstmt"
)

// Filter selects tables by patterns "db.table" where each side is a glob
// ("shop.*", "*.orders", "app.user_?") or a name in backticks taken as it
// is, as SQL quotes it ("`my.db`.`a,b*`"; a backtick in it doubled). A glob
// may hold any character but ',', '.' and a backtick (so "oh.Ünï cöde-*"
// is a glob); a name that holds one of those, or a glob character
// ('*', '?', '[', '\') meant literally, is written in backticks. An empty
// filter selects every table outside the server's own schemas (mysql,
// information_schema, performance_schema, sys), which are only selected
// when named explicitly.
type Filter struct {
	pats  [][2]string // globs (a quoted name with its glob characters escaped)
	texts []string    // each pattern as written
}

var systemSchemas = map[string]bool{"mysql": true, "information_schema": true, "performance_schema": true, "sys": true}

// ParseFilter parses a comma-separated list of patterns (a comma in
// backticks is part of a name).
func ParseFilter(spec string) (*Filter, error) {
	f := &Filter{}
	parts, err := sqlstmt.SplitOutsideQuotes(spec, ',')
	if err != nil {
		return nil, fmt.Errorf("binlog: table patterns %q: %w", spec, err)
	}
	for _, p := range parts {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		sides, err := sqlstmt.SplitOutsideQuotes(p, '.')
		if err != nil {
			return nil, fmt.Errorf("binlog: table pattern %q: %w", p, err)
		}
		if len(sides) != 2 {
			return nil, fmt.Errorf("binlog: table pattern %q must be db.table (use db.* for every table of db; a name with a '.' goes in backticks: `my.db`.orders)", p)
		}
		var pat [2]string
		for i, side := range sides {
			g, err := patternGlob(side)
			if err != nil {
				return nil, fmt.Errorf("binlog: table pattern %q: %w", p, err)
			}
			if _, err := path.Match(g, ""); err != nil {
				return nil, fmt.Errorf("binlog: table pattern %q: bad glob %q: %v", p, side, err)
			}
			pat[i] = g
		}
		f.pats = append(f.pats, pat)
		f.texts = append(f.texts, p)
	}
	return f, nil
}

// Len is the number of patterns.
func (f *Filter) Len() int {
	if f == nil {
		return 0
	}
	return len(f.pats)
}

// patternGlob is the glob of one side of a pattern: a glob as it is, or a
// name in backticks with its glob characters escaped.
func patternGlob(side string) (string, error) {
	name, quoted, err := sqlstmt.UnquoteIdent(side)
	if err != nil {
		return "", err
	}
	if !quoted {
		if name == "" {
			return "", errors.New("has an empty name (use * for any)")
		}
		return name, nil
	}
	var b strings.Builder
	for _, r := range name {
		if strings.ContainsRune(`*?[\`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String(), nil
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
	return strings.Join(f.texts, ",")
}
