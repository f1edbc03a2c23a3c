// Package sqlstmt reads the SQL statements a server writes into its binlog
// (query events): what kind of statement it is, which tables a DML
// statement writes, and which tables and databases a DDL statement
// touches, resolved against the event's default database. Account
// statements (users, roles, grants, passwords, servers) are told by their
// leading keywords and never parsed.
//
// DDL goes to the grammar first; where it fails or reads a statement only
// in part (MariaDB's CREATE OR REPLACE, ALTER ONLINE, DROP ... WAIT, IF
// [NOT] EXISTS on indexes, table options; triggers, functions, events,
// sequences), the statement's head is read from the grammar's tokens: the
// object keyword and the names after it. A name the tokenizer stops in
// (unquoted letters beyond ASCII) leaves the statement unparsed.
//
// It is the one place sluice parses SQL. The grammar is Vitess's
// (vitess.io/vitess/go/vt/sqlparser), a maintained MySQL 8 grammar; its
// tokenizer also gives the statement's first keywords without its values
// (Preview), the only part of a statement sluice ever puts into a message.
// A statement the grammar cannot read is still classified by its first
// keyword (Statement.Parsed is false and Tables is empty): the caller
// decides what an unreadable statement means.
package sqlstmt

import (
	"errors"
	"strings"

	vtlog "vitess.io/vitess/go/vt/log"
	"vitess.io/vitess/go/vt/sqlparser"
)

// Kind is the class of a statement.
type Kind uint8

// Statement kinds.
const (
	// Other is any statement of no other kind (SET, CALL, GRANT, ...).
	Other Kind = iota
	// DML writes rows: INSERT, REPLACE, UPDATE, DELETE, LOAD DATA (also
	// INSERT ... SELECT, multi-table UPDATE and DELETE, and WITH ...
	// UPDATE/DELETE).
	DML
	// DDL changes a schema: CREATE, ALTER, DROP, RENAME, TRUNCATE.
	DDL
	// Transaction control: BEGIN, START TRANSACTION, COMMIT, ROLLBACK,
	// SAVEPOINT, RELEASE SAVEPOINT, XA.
	Transaction
	// Account management: CREATE/ALTER/DROP/RENAME USER, CREATE/DROP
	// ROLE, GRANT, REVOKE, SET PASSWORD, SET [DEFAULT] ROLE, and
	// CREATE/ALTER/DROP SERVER (whose OPTIONS hold a password); MariaDB's
	// CREATE OR REPLACE forms too. Told by the leading keywords alone, never
	// by the grammar (MySQL's IDENTIFIED ... AS '<hash>' is not in it): such
	// a statement may carry credentials and is never to be shown.
	Account
)

func (k Kind) String() string {
	switch k {
	case DML:
		return "DML"
	case DDL:
		return "DDL"
	case Transaction:
		return "transaction control"
	case Account:
		return "account management"
	}
	return "other"
}

// Table is a table a statement writes.
type Table struct {
	Schema, Name string
}

func (t Table) String() string { return t.Schema + "." + t.Name }

// Statement is what Parse learned about one statement.
type Statement struct {
	Kind Kind
	// Verb is the statement's first keyword in upper case ("INSERT",
	// "LOAD", "XA"); empty when the statement has none.
	Verb string
	// Tables are the tables the statement writes (for DML) or whose
	// definition it creates, changes or drops (for DDL: tables, views,
	// MariaDB sequences, both names of a rename, the table of an index or a
	// trigger), each with its database: an unqualified name is resolved
	// against the default database given to Parse (Schema stays empty when
	// there is none).
	Tables []Table
	// Databases are, for DDL, the databases it touches without naming a
	// table: the database of CREATE/ALTER/DROP DATABASE (then Database is
	// set), the database of a routine, event or dropped trigger.
	Databases []string
	// Database is set for CREATE/ALTER/DROP DATABASE (or SCHEMA): every
	// table of Databases[0] may have changed.
	Database bool
	// CopiesRows is set for CREATE TABLE ... SELECT: logged as this
	// statement (a session with binlog_format STATEMENT or MIXED), the
	// rows it copies into Tables[0] are not in the binlog. (In ROW format
	// the server logs the CREATE without its SELECT, then the rows.)
	CopiesRows bool
	// Parsed is false when the statement could not be read: Kind comes
	// from the first keyword and Tables and Databases are empty. Account
	// statements are never parsed.
	Parsed bool
}

var parser = func() *sqlparser.Parser {
	// The grammar logs the whole text of a DDL statement it reads only in
	// part; sluice reports unreadable statements itself, by their Preview.
	vtlog.Warningf = func(string, ...any) {}
	p, err := sqlparser.New(sqlparser.Options{MySQLServerVersion: "8.4.0"})
	if err != nil {
		panic(err) // a constant version string
	}
	return p
}()

// Parse classifies query, run with defaultDB as the default database
// (the query event's schema; empty for none), lists the tables a DML
// statement writes and the tables and databases a DDL statement touches.
// Account statements are told by their leading keywords before any
// grammar runs; statements of other kinds by their first keyword only.
func Parse(query, defaultDB string) Statement {
	st := Statement{Verb: firstKeyword(query)}
	st.Kind = kindOf(st.Verb)
	if (st.Kind == DDL || st.Verb == "SET" || st.Verb == "GRANT" || st.Verb == "REVOKE") && isAccount(query) {
		st.Kind = Account
		return st
	}
	if st.Kind != DDL && st.Kind != DML {
		return st
	}
	query = quoteBareNames(query)
	if st.Kind == DDL {
		return parseDDL(query, defaultDB, st)
	}
	if st.Verb == "LOAD" {
		// The grammar reads LOAD DATA as an opaque statement: its table
		// comes from the tokens after INTO TABLE.
		if t, ok := loadTable(query, defaultDB); ok {
			st.Tables, st.Parsed = []Table{t}, true
		}
		return st
	}
	stmt, err := parser.Parse(query)
	if err != nil {
		return st
	}
	tables, err := written(stmt, defaultDB)
	if err != nil {
		return st
	}
	st.Tables, st.Parsed = tables, true
	return st
}

func kindOf(verb string) Kind {
	switch verb {
	case "INSERT", "REPLACE", "UPDATE", "DELETE", "LOAD", "WITH":
		// WITH starts DML in a binlog: a WITH ... SELECT is not logged.
		return DML
	case "CREATE", "ALTER", "DROP", "RENAME", "TRUNCATE":
		return DDL
	case "BEGIN", "START", "COMMIT", "ROLLBACK", "SAVEPOINT", "RELEASE", "XA":
		return Transaction
	}
	return Other
}

// firstKeyword is the statement's first word after comments and blanks.
func firstKeyword(q string) string {
	q = sqlparser.StripLeadingComments(q)
	for strings.HasPrefix(q, "#") { // MySQL's end-of-line comments
		i := strings.IndexByte(q, '\n')
		if i < 0 {
			return ""
		}
		q = sqlparser.StripLeadingComments(q[i+1:])
	}
	end := 0
	for end < len(q) && (q[end] >= 'a' && q[end] <= 'z' || q[end] >= 'A' && q[end] <= 'Z' || q[end] == '_') {
		end++
	}
	return strings.ToUpper(q[:end])
}

var errNoTable = errors.New("sqlstmt: no target table")

// written lists the tables a parsed DML statement writes.
func written(stmt sqlparser.Statement, db string) ([]Table, error) {
	switch s := stmt.(type) {
	case *sqlparser.Insert:
		tn, ok := s.Table.Expr.(sqlparser.TableName)
		if !ok {
			return nil, errNoTable
		}
		return []Table{resolve(tn, db)}, nil
	case *sqlparser.Update:
		return targets(s.TableExprs, nil, updatedAliases(s.Exprs), db)
	case *sqlparser.Delete:
		return targets(s.TableExprs, s.Targets, nil, db)
	}
	return nil, errNoTable
}

func resolve(tn sqlparser.TableName, db string) Table {
	t := Table{Schema: tn.Qualifier.String(), Name: tn.Name.String()}
	if t.Schema == "" {
		t.Schema = db
	}
	return t
}

// updatedAliases are the table qualifiers of an UPDATE's SET columns;
// nil when a column is unqualified (then every table may be written).
func updatedAliases(exprs sqlparser.UpdateExprs) map[string]bool {
	m := map[string]bool{}
	for _, e := range exprs {
		q := e.Name.Qualifier
		if q.IsEmpty() {
			return nil
		}
		m[strings.ToLower(q.Name.String())] = true
	}
	return m
}

// targets resolves the written tables of a multi-table statement: the
// named DELETE targets, or the UPDATE's tables whose alias (or name) a SET
// column names, or, when that cannot be told, every table of the
// statement (more than it writes, never less).
func targets(exprs []sqlparser.TableExpr, named sqlparser.TableNames, aliases map[string]bool, db string) ([]Table, error) {
	type ref struct {
		alias string
		table Table
	}
	var refs []ref
	var walk func(sqlparser.TableExpr)
	walk = func(te sqlparser.TableExpr) {
		switch t := te.(type) {
		case *sqlparser.AliasedTableExpr:
			tn, ok := t.Expr.(sqlparser.TableName)
			if !ok {
				return // a derived table: not written
			}
			alias := t.As.String()
			if alias == "" {
				alias = tn.Name.String()
			}
			refs = append(refs, ref{strings.ToLower(alias), resolve(tn, db)})
		case *sqlparser.JoinTableExpr:
			walk(t.LeftExpr)
			walk(t.RightExpr)
		case *sqlparser.ParenTableExpr:
			for _, e := range t.Exprs {
				walk(e)
			}
		}
	}
	for _, e := range exprs {
		walk(e)
	}
	var out []Table
	add := func(t Table) {
		for _, o := range out {
			if o == t {
				return
			}
		}
		out = append(out, t)
	}
	switch {
	case len(named) > 0:
		for _, n := range named {
			found := false
			if n.Qualifier.IsEmpty() {
				for _, r := range refs {
					if r.alias == strings.ToLower(n.Name.String()) {
						add(r.table)
						found = true
					}
				}
			}
			if !found {
				add(resolve(n, db))
			}
		}
	case aliases != nil && len(refs) > 1:
		for _, r := range refs {
			if aliases[r.alias] {
				add(r.table)
			}
		}
		if len(out) == 0 { // qualifiers naming no table: be safe
			for _, r := range refs {
				add(r.table)
			}
		}
	default:
		for _, r := range refs {
			add(r.table)
		}
	}
	if len(out) == 0 {
		return nil, errNoTable
	}
	return out, nil
}

// loadTable finds the table of LOAD DATA ... INTO TABLE [db.]name.
func loadTable(q, db string) (Table, bool) {
	tk := parser.NewStringTokenizer(q)
	prev := 0
	for {
		typ, _ := tk.Scan()
		if typ == 0 || typ == sqlparser.LEX_ERROR {
			return Table{}, false
		}
		if prev == sqlparser.INTO && typ == sqlparser.TABLE {
			break
		}
		prev = typ
	}
	typ, name := tk.Scan()
	if typ != sqlparser.ID {
		return Table{}, false
	}
	t := Table{Schema: db, Name: name}
	if typ, _ := tk.Scan(); typ == '.' {
		typ, second := tk.Scan()
		if typ != sqlparser.ID {
			return Table{}, false
		}
		t = Table{Schema: name, Name: second}
	}
	return t, true
}

// Preview is the start of a statement for messages: its leading keywords,
// names and punctuation up to the first literal value (a string, number
// or hex literal may carry secrets), at most maxLen bytes, with "..."
// when anything was left out. Comments are left out.
func Preview(q string, maxLen int) string {
	tk := parser.NewStringTokenizer(q)
	var b strings.Builder
	more := false
	for {
		typ, val := tk.Scan()
		if typ == 0 {
			break
		}
		if typ == sqlparser.LEX_ERROR || isLiteral(typ) {
			more = true
			break
		}
		if typ == sqlparser.COMMENT {
			continue
		}
		text := val
		if typ == sqlparser.ID && needsQuotes(val) {
			text = QuoteIdent(val)
		} else if typ < 256 {
			text = string(rune(typ))
		}
		if b.Len()+len(text)+1 > maxLen {
			more = true
			break
		}
		if b.Len() > 0 && text != "." && text != "," && text != ")" && !strings.HasSuffix(b.String(), ".") && !strings.HasSuffix(b.String(), "(") {
			b.WriteByte(' ')
		}
		b.WriteString(text)
	}
	if more {
		b.WriteString(" ...")
	}
	return b.String()
}

func isLiteral(typ int) bool {
	switch typ {
	case sqlparser.STRING, sqlparser.INTEGRAL, sqlparser.FLOAT, sqlparser.DECIMAL, sqlparser.HEX, sqlparser.HEXNUM,
		sqlparser.BIT_LITERAL, sqlparser.VALUE_ARG, sqlparser.LIST_ARG, sqlparser.OFFSET_ARG, sqlparser.NCHAR_STRING, sqlparser.AT_ID, sqlparser.AT_AT_ID:
		return true
	}
	return false
}

func needsQuotes(id string) bool {
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '$') {
			return true
		}
	}
	return id == ""
}

// Grammar returns the syntax tree of one statement, for callers that need
// more than Parse tells (the schema history applies DDL trees to table
// definitions). The error names the statement by nothing but its
// position in it.
//
// A CREATE or ALTER TABLE the grammar reads only in part is read again in
// grammarForm's words (type synonyms, keys before columns), and that tree
// returned when it is whole.
//
// A column's character set or collation written as a string (CHARACTER
// SET 'utf8' COLLATE 'utf8_unicode_ci', which the servers take) is a name
// in the tree, as it is to the server, and utf8 is utf8mb3 (its meaning on
// MySQL 8 and MariaDB 10.6+), so that a charset and collation given
// together agree for Vitess's schemadiff.
func Grammar(query string) (sqlparser.Statement, error) {
	q := quoteBareNames(query)
	st, err := parser.Parse(q)
	if err != nil || !fullyParsed(st) {
		if r, ok := grammarForm(q); ok {
			if st2, err2 := parser.Parse(r); err2 == nil && fullyParsed(st2) {
				st, err = st2, nil
			}
		}
	}
	if err == nil {
		unquoteCharsets(st)
	}
	return st, err
}

// unquoteCharsets makes each column's character set and collation in st
// that the grammar kept with its quotes a bare name, utf8 utf8mb3.
func unquoteCharsets(st sqlparser.Statement) {
	unquote := func(s string) string {
		if len(s) >= 2 && (s[0] == '\'' || s[0] == '"') && s[len(s)-1] == s[0] {
			s = s[1 : len(s)-1]
		}
		if strings.EqualFold(s, "utf8") || len(s) > 5 && strings.EqualFold(s[:5], "utf8_") {
			s = "utf8mb3" + s[4:]
		}
		return s
	}
	_ = sqlparser.Walk(func(n sqlparser.SQLNode) (bool, error) {
		if ct, ok := n.(*sqlparser.ColumnType); ok && ct != nil {
			ct.Charset.Name = unquote(ct.Charset.Name)
			if ct.Options != nil {
				ct.Options.Collate = unquote(ct.Options.Collate)
			}
		}
		return true, nil
	}, st)
}

// QuoteIdent quotes an identifier for MySQL and MariaDB: in backticks,
// with each backtick in it doubled. It is sluice's one identifier quoter.
func QuoteIdent(s string) string {
	return "`" + strings.ReplaceAll(s, "`", "``") + "`"
}

// QuoteName returns the quoted name of table in db: `db`.`table`.
func QuoteName(db, table string) string {
	return QuoteIdent(db) + "." + QuoteIdent(table)
}
