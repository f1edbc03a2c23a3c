package sqlstmt

import (
	"strings"

	"vitess.io/vitess/go/vt/sqlparser"
)

// token is one token of a statement's head: its type, its text, and the
// text in upper case (for keywords).
type token struct {
	typ     int
	val, up string
}

// head returns up to max tokens of q, comments left out; it stops at the
// end or at a token the tokenizer cannot read (then broken is set: the
// last token may be cut short, as the "t" of an unquoted name "tä").
func head(q string, max int) (out []token, broken bool) {
	tk := parser.NewStringTokenizer(q)
	out = make([]token, 0, max)
	for len(out) < max {
		typ, val := tk.Scan()
		if typ == sqlparser.LEX_ERROR {
			return out, true
		}
		if typ == 0 {
			break
		}
		if typ == sqlparser.COMMENT {
			continue
		}
		out = append(out, token{typ, val, strings.ToUpper(val)})
	}
	return out, false
}

// isAccount tells an account-management statement by its leading
// keywords: it never reaches the grammar, which cannot read all of them
// (and must not log them).
func isAccount(q string) bool {
	w, _ := head(q, 4)
	if len(w) == 0 {
		return false
	}
	switch w[0].up {
	case "GRANT", "REVOKE":
		return true
	case "SET":
		// SET PASSWORD, SET DEFAULT ROLE, SET ROLE.
		return len(w) > 1 && (w[1].up == "PASSWORD" || w[1].up == "ROLE" || w[1].up == "DEFAULT" && len(w) > 2 && w[2].up == "ROLE")
	case "CREATE", "ALTER", "DROP", "RENAME":
		i := 1
		if len(w) > 2 && w[1].up == "OR" && w[2].up == "REPLACE" { // MariaDB
			i = 3
		}
		if i < len(w) {
			switch w[i].up {
			case "USER", "ROLE", "SERVER":
				return true
			}
		}
	}
	return false
}

// parseDDL reads a DDL statement with the grammar, and where the grammar
// cannot read it (MariaDB's forms, triggers, functions, events,
// sequences), its head: the object keyword and the names after it.
func parseDDL(q, db string, st Statement) Statement {
	// A DDL statement the grammar reads only in part (MariaDB's table
	// options) is read by its head: the grammar may have cut a name
	// short.
	if stmt, err := parser.Parse(q); err == nil && fullyParsed(stmt) {
		switch s := stmt.(type) {
		case sqlparser.DBDDLStatement:
			if name := s.GetDatabaseName(); name != "" {
				st.Databases, st.Database, st.Parsed = []string{name}, true, true
				return st
			}
		case *sqlparser.CreateProcedure:
			st.Databases, st.Parsed = []string{qualifier(s.Name, db)}, true
			return st
		case *sqlparser.DropProcedure:
			st.Databases, st.Parsed = []string{qualifier(s.Name, db)}, true
			return st
		case sqlparser.DDLStatement:
			var tables []Table
			for _, tn := range s.AffectedTables() {
				if !tn.Name.IsEmpty() {
					tables = addTable(tables, resolve(tn, db))
				}
			}
			if len(tables) > 0 {
				st.Tables, st.Parsed = tables, true
				if ct, ok := s.(*sqlparser.CreateTable); ok && ct.Select != nil {
					st.CopiesRows = true
				}
				return st
			}
		}
	}
	st = ddlHead(q, db, st)
	st.CopiesRows = len(st.Tables) == 1 && createTableSelects(q)
	return st
}

// createTableSelects reports whether q, a CREATE TABLE the grammar could
// not read whole (MariaDB's forms, "CREATE TABLE t (PRIMARY KEY (id))
// SELECT ..."), copies rows from a SELECT: the SELECT keyword appears
// nowhere else in a table definition (a column named so is quoted;
// strings and comments are tokens of their own).
func createTableSelects(q string) bool {
	tk := parser.NewStringTokenizer(q)
	create, table := false, false
	for n := -1; ; {
		typ, val := tk.Scan()
		if typ == 0 || typ == sqlparser.LEX_ERROR {
			return false
		}
		if typ == sqlparser.COMMENT {
			continue
		}
		n++
		up := strings.ToUpper(val)
		switch {
		case n == 0:
			create = up == "CREATE"
		case !table:
			table = up == "TABLE"
			if !table && up != "OR" && up != "REPLACE" && up != "TEMPORARY" {
				return false
			}
		case typ == sqlparser.SELECT:
			return create
		}
	}
}

func fullyParsed(stmt sqlparser.Statement) bool {
	switch s := stmt.(type) {
	case sqlparser.DBDDLStatement:
		return s.IsFullyParsed()
	case sqlparser.DDLStatement:
		return s.IsFullyParsed()
	}
	return true
}

func qualifier(tn sqlparser.TableName, db string) string {
	if !tn.Qualifier.IsEmpty() {
		return tn.Qualifier.String()
	}
	return db
}

func addTable(out []Table, t Table) []Table {
	for _, o := range out {
		if o == t {
			return out
		}
	}
	return append(out, t)
}

// ddlHead reads the head of a DDL statement the grammar could not read:
//
//	CREATE [OR REPLACE] [TEMPORARY] [DEFINER = user] [SQL SECURITY x] [ALGORITHM = x]
//	       [ONLINE|OFFLINE] [UNIQUE|FULLTEXT|SPATIAL] object ...
//	ALTER [ONLINE|OFFLINE] [IGNORE] TABLE [IF EXISTS] name ...
//	DROP [TEMPORARY] object [IF EXISTS] name [, name ...] ...
//	RENAME TABLE a TO b [, c TO d ...]
//	TRUNCATE [TABLE] name
//
// where object is TABLE, SEQUENCE or VIEW (its names are tables), INDEX
// name ON table, TRIGGER name {BEFORE|AFTER} {INSERT|UPDATE|DELETE} ON
// table, DATABASE or SCHEMA name, or FUNCTION, PROCEDURE, EVENT or
// PACKAGE [BODY] name (their database). Anything else stays unparsed.
func ddlHead(q, db string, st Statement) Statement {
	w, broken := head(q, 64)
	if len(w) == 0 {
		return st
	}
	i := 1
	at := func(words ...string) bool {
		for _, wd := range words {
			if i < len(w) && w[i].up == wd {
				return true
			}
		}
		return false
	}
	skip := func(words ...string) bool {
		if i+len(words) > len(w) {
			return false
		}
		for j, wd := range words {
			if w[i+j].up != wd {
				return false
			}
		}
		i += len(words)
		return true
	}
	// name reads [db.]name; not a name the tokenizer stopped in.
	name := func() (Table, bool) {
		if i >= len(w) || !isName(w[i]) {
			return Table{}, false
		}
		t := Table{Schema: db, Name: w[i].val}
		i++
		if i < len(w) && w[i].typ == '.' {
			if i+1 >= len(w) || !isName(w[i+1]) {
				return Table{}, false
			}
			t = Table{Schema: t.Name, Name: w[i+1].val}
			i += 2
		}
		if i == len(w) && broken {
			return Table{}, false
		}
		return t, true
	}
	names := func() []Table {
		var out []Table
		for {
			t, ok := name()
			if !ok {
				return nil
			}
			out = addTable(out, t)
			if i >= len(w) || w[i].typ != ',' {
				return out
			}
			i++
		}
	}
	var tables []Table
	var dbs []string
	verb := w[0].up
	switch verb {
	case "CREATE", "ALTER", "DROP":
		skip("OR", "REPLACE")
		for {
			switch {
			case skip("TEMPORARY"), skip("ONLINE"), skip("OFFLINE"), skip("IGNORE"),
				skip("UNIQUE"), skip("FULLTEXT"), skip("SPATIAL"), skip("AGGREGATE"):
				continue
			case at("DEFINER", "ALGORITHM"):
				i++
				if i < len(w) && w[i].typ == '=' {
					i++
				}
				if i < len(w) { // user (or CURRENT_USER) / algorithm
					i++
				}
				for i < len(w) && (w[i].typ == sqlparser.AT_ID || w[i].typ == sqlparser.AT_AT_ID || w[i].val == "@") {
					i++ // the host part of a user
				}
				if i+1 < len(w) && w[i].typ == '(' && w[i+1].typ == ')' {
					i += 2 // CURRENT_USER()
				}
				continue
			case skip("SQL", "SECURITY"):
				i++
				continue
			}
			break
		}
		ifExists := func() { _ = skip("IF", "NOT", "EXISTS") || skip("IF", "EXISTS") }
		switch {
		case skip("TABLE"), skip("SEQUENCE"), skip("VIEW"):
			ifExists()
			if verb == "CREATE" || verb == "ALTER" {
				if t, ok := name(); ok {
					tables = []Table{t}
				}
			} else {
				tables = names()
			}
		case skip("INDEX"), skip("KEY"):
			ifExists()
			if _, ok := name(); ok && skip("ON") {
				if t, ok := name(); ok {
					tables = []Table{t}
				}
			}
		case skip("TRIGGER"):
			ifExists()
			trg, ok := name()
			if !ok {
				break
			}
			if verb == "DROP" {
				dbs = []string{trg.Schema}
				break
			}
			if at("BEFORE", "AFTER") {
				i++
				if at("INSERT", "UPDATE", "DELETE") {
					i++
					if skip("ON") {
						if t, ok := name(); ok {
							tables = []Table{t}
						}
					}
				}
			}
		case skip("DATABASE"), skip("SCHEMA"):
			ifExists()
			switch {
			case verb == "ALTER" && (i == len(w) || dbOption[w[i].up]):
				if db != "" { // ALTER DATABASE of the default database
					dbs, st.Database = []string{db}, true
				}
			case i < len(w) && isName(w[i]) && (i+1 < len(w) || !broken):
				dbs, st.Database = []string{w[i].val}, true
			}
		case skip("FUNCTION"), skip("PROCEDURE"), skip("EVENT"), skip("PACKAGE"):
			skip("BODY")
			ifExists()
			if t, ok := name(); ok {
				dbs = []string{t.Schema}
			}
		}
	case "RENAME":
		if !skip("TABLE") && !skip("TABLES") {
			break
		}
		skip("IF", "EXISTS") // MariaDB
		for {
			from, ok := name()
			if !ok || !skip("TO") {
				tables = nil
				break
			}
			to, ok := name()
			if !ok {
				tables = nil
				break
			}
			tables = addTable(addTable(tables, from), to)
			if i >= len(w) || w[i].typ != ',' {
				break
			}
			i++
		}
	case "TRUNCATE":
		skip("TABLE")
		if t, ok := name(); ok {
			tables = []Table{t}
		}
	}
	if len(tables) == 0 && len(dbs) == 0 {
		st.Database = false
		return st
	}
	st.Tables, st.Databases, st.Parsed = tables, dbs, true
	return st
}

// dbOption are the words that may follow ALTER DATABASE when it names
// no database (then it alters the default one).
var dbOption = map[string]bool{"CHARACTER": true, "CHARSET": true, "DEFAULT": true, "COLLATE": true,
	"COMMENT": true, "ENCRYPTION": true, "READ": true, "UPGRADE": true}

// isName reports whether a token can be an identifier: a plain or quoted
// name, or a keyword (non-reserved keywords are names in MySQL).
func isName(t token) bool {
	if t.typ == sqlparser.ID {
		return true
	}
	if t.typ < 256 || t.val == "" || isLiteral(t.typ) || t.typ == sqlparser.AT_ID {
		return false
	}
	c := t.val[0]
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_'
}
