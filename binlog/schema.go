package binlog

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"

	"github.com/go-mysql-org/go-mysql/client"
	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/go-mysql-org/go-mysql/replication"
	"github.com/sluice-cdc/sluice/internal/rawconn"
	"github.com/sluice-cdc/sluice/internal/sqlstmt"
	"github.com/sluice-cdc/sluice/mysqlconn"
)

// ErrSchemaMismatch is returned when a row event does not fit the table
// definition known for it. sluice stops rather than decode a row into the
// wrong columns.
var ErrSchemaMismatch = errors.New("binlog: row does not match the table's schema")

// SchemaSource provides table definitions when the binlog has no column
// metadata (binlog_row_metadata=MINIMAL or NO_LOG). The reader calls
// Invalidate when a DDL statement passes: for each table it touches; with
// an empty table for a database it creates, alters or drops (every table
// of db); with both empty for a statement it cannot read (every table).
type SchemaSource interface {
	Columns(ctx context.Context, db, table string) (*Table, error)
	Invalidate(db, table string)
}

// schemaCache builds Tables from TABLE_MAP events, reusing the previous
// result while the server's table id and column layout stay the same.
type schemaCache struct {
	src     SchemaSource // may be nil
	hist    *History     // may be nil: checked against FULL metadata
	mariaDB bool
	byID    map[uint64]*Table
	layout  map[uint64][]byte // fingerprint of the TABLE_MAP column layout
	fp      []byte            // the last fingerprint taken, reused for the next rows event
}

func newSchemaCache(src SchemaSource) *schemaCache {
	return &schemaCache{src: src, byID: map[uint64]*Table{}, layout: map[uint64][]byte{}}
}

func fingerprint(dst []byte, tm *replication.TableMapEvent) []byte {
	dst = append(dst[:0], tm.Schema...)
	dst = append(dst, 0)
	dst = append(dst, tm.Table...)
	dst = append(dst, 0)
	dst = append(dst, tm.ColumnType...)
	for _, m := range tm.ColumnMeta {
		dst = append(dst, byte(m), byte(m>>8))
	}
	for _, n := range tm.ColumnName {
		dst = append(dst, n...)
		dst = append(dst, 0)
	}
	return dst
}

// invalidate forgets the cached definitions of db.table (after DDL): of
// every table of db when table is empty, of all when db is empty too.
// Names compare without case (lower_case_table_names may be set): at
// worst a definition is read again.
func (c *schemaCache) invalidate(db, table string) {
	if db == "" {
		clear(c.byID)
		clear(c.layout)
	}
	for id, t := range c.byID {
		if strings.EqualFold(t.Schema, db) && (table == "" || strings.EqualFold(t.Name, table)) {
			delete(c.byID, id)
			delete(c.layout, id)
		}
	}
	if c.src != nil {
		c.src.Invalidate(db, table)
	}
}

// lookup returns the cached definition of db.table (names compared as
// invalidate compares them), nil when none is cached.
func (c *schemaCache) lookup(db, table string) *Table {
	for _, t := range c.byID {
		if strings.EqualFold(t.Schema, db) && strings.EqualFold(t.Name, table) {
			return t
		}
	}
	return nil
}

// table returns the Table of a TABLE_MAP event. where names the event's
// position for error messages.
func (c *schemaCache) table(ctx context.Context, tm *replication.TableMapEvent, where eventPos) (*Table, error) {
	// Once per rows event: the buffer is kept (a stack array of a fixed
	// size is outgrown by a table of a few dozen named columns).
	c.fp = fingerprint(c.fp, tm)
	fp := c.fp
	if t, ok := c.byID[tm.TableID]; ok && bytes.Equal(c.layout[tm.TableID], fp) {
		return t, nil
	}
	t, err := c.build(ctx, tm, where)
	if err != nil {
		return nil, err
	}
	c.byID[tm.TableID] = t
	c.layout[tm.TableID] = bytes.Clone(fp)
	return t, nil
}

func (c *schemaCache) build(ctx context.Context, tm *replication.TableMapEvent, where eventPos) (*Table, error) {
	t := &Table{Schema: string(tm.Schema), Name: string(tm.Table), ID: tm.TableID}
	n := int(tm.ColumnCount)
	t.Columns = make([]Column, n)
	unsigned := tm.UnsignedMap()
	collations := columnCollations(tm, c.mariaDB)
	esCollations := tm.EnumSetCollationMap()
	enums := tm.EnumStrValueMap()
	sets := tm.SetStrValueMap()
	for i := range t.Columns {
		col := &t.Columns[i]
		col.BinlogType = tm.ColumnType[i]
		col.Meta = tm.ColumnMeta[i]
		col.Unsigned = unsigned[i]
		_, col.Nullable = tm.Nullable(i)
		if id, ok := collations[i]; ok {
			col.Collation = id
		} else if id, ok := esCollations[i]; ok {
			col.Collation = id
		}
		col.Charset = CharsetOfCollation(col.Collation)
		col.Enum = namesToUTF8(enums[i], col.Charset)
		col.Set = namesToUTF8(sets[i], col.Charset)
		if len(tm.ColumnName) == n {
			col.Name = string(tm.ColumnName[i])
		}
	}
	for _, k := range tm.PrimaryKey {
		t.PrimaryKey = append(t.PrimaryKey, int(k))
	}
	t.FromBinlog = len(tm.ColumnName) == n && n > 0
	geomTypes := tm.GeometryTypeMap()
	needSource := !t.FromBinlog
	defaults := false // the columns' defaults are known
	if t.FromBinlog && c.hist != nil {
		defaults = c.hist.check(t, where)
	}
	// MariaDB logs JSON columns as LONGTEXT; only information_schema knows
	// they hold JSON, so ask it once per table when it is available; and
	// the binlog has no column defaults.
	if c.src != nil && (needSource || c.mariaDB || !defaults) {
		def, err := c.src.Columns(ctx, t.Schema, t.Name)
		if err != nil {
			if needSource {
				return nil, fmt.Errorf("binlog: table %s at %s: the binlog has no column names (binlog_row_metadata is not FULL) and information_schema could not tell them: %w", t.QualifiedName(), where, err)
			}
		} else if err := merge(t, def, needSource); err != nil && needSource {
			return nil, fmt.Errorf("%w: table %s at %s: %v (the table changed after this event was written; restart from a position after the DDL, or set binlog_row_metadata=FULL so the binlog carries its own schema)", ErrSchemaMismatch, t.QualifiedName(), where, err)
		}
	}
	// The binlog's GEOMETRY_TYPE metadata (FULL) is the table as the row
	// was written; it wins over a later definition.
	for i, g := range geomTypes {
		if i < n {
			t.Columns[i].Point = g == geometryTypePoint
		}
	}
	if needSource && c.src == nil {
		for i := range t.Columns {
			t.Columns[i].Name = fmt.Sprintf("@%d", i+1)
		}
	}
	for i := range t.Columns {
		if err := t.Columns[i].Resolve(); err != nil {
			return nil, fmt.Errorf("binlog: table %s column %d at %s: %w", t.QualifiedName(), i+1, where, err)
		}
		if t.Columns[i].jsonText {
			t.Columns[i].Kind = KindJSON
		}
	}
	return t, nil
}

// columnCollations returns the collation of each character column from a
// TABLE_MAP event's DEFAULT_CHARSET or COLUMN_CHARSET metadata, which
// number the character columns in table order. The server decides what
// counts as one (is_character_type): CHAR, VARCHAR and BLOB/TEXT on both;
// VECTOR too on MySQL 9, GEOMETRY too on MariaDB. go-mysql's CollationMap
// does not count VECTOR, which would give every character column after a
// VECTOR the collation of the one before it.
func columnCollations(tm *replication.TableMapEvent, mariaDB bool) map[int]uint64 {
	isChar := func(i int) bool {
		switch t := tm.ColumnType[i]; t {
		case mysql.MYSQL_TYPE_STRING:
			real, _ := stringMeta(tm.ColumnMeta[i])
			return real != mysql.MYSQL_TYPE_ENUM && real != mysql.MYSQL_TYPE_SET
		case mysql.MYSQL_TYPE_VAR_STRING, mysql.MYSQL_TYPE_VARCHAR, mysql.MYSQL_TYPE_BLOB, mysql.MYSQL_TYPE_VECTOR:
			return true
		case mysql.MYSQL_TYPE_GEOMETRY:
			return mariaDB
		}
		return false
	}
	n := min(int(tm.ColumnCount), len(tm.ColumnType), len(tm.ColumnMeta))
	switch {
	case len(tm.DefaultCharset) > 0:
		except := map[uint64]uint64{} // character column number -> collation
		for k := 1; k+1 < len(tm.DefaultCharset); k += 2 {
			except[tm.DefaultCharset[k]] = tm.DefaultCharset[k+1]
		}
		out := make(map[int]uint64)
		p := uint64(0)
		for i := range n {
			if !isChar(i) {
				continue
			}
			out[i] = tm.DefaultCharset[0]
			if c, ok := except[p]; ok {
				out[i] = c
			}
			p++
		}
		return out
	case len(tm.ColumnCharset) > 0:
		out := make(map[int]uint64)
		p := 0
		for i := range n {
			if isChar(i) && p < len(tm.ColumnCharset) {
				out[i] = tm.ColumnCharset[p]
				p++
			}
		}
		return out
	}
	return nil
}

// merge takes names, enum/set members, signedness and keys from an
// information_schema definition, after checking that it describes the
// same column layout as the binlog.
func merge(t *Table, def *Table, names bool) error {
	if len(def.Columns) != len(t.Columns) {
		return fmt.Errorf("the binlog row has %d columns, information_schema lists %d", len(t.Columns), len(def.Columns))
	}
	for i := range t.Columns {
		bc, dc := &t.Columns[i], &def.Columns[i]
		if !compatible(bc.BinlogType, bc.Meta, dc.Type) {
			return fmt.Errorf("column %d (%s): binlog type %s, information_schema type %s", i+1, dc.Name, typeName(bc.BinlogType), typeName(dc.Type))
		}
		if !names && bc.Name != "" && !strings.EqualFold(bc.Name, dc.Name) {
			return fmt.Errorf("column %d: binlog name %s, information_schema name %s", i+1, bc.Name, dc.Name)
		}
	}
	for i := range t.Columns {
		bc, dc := &t.Columns[i], &def.Columns[i]
		bc.jsonText = dc.jsonText
		bc.Point = dc.Point
		bc.FloatMD = dc.FloatMD
		bc.Comment = dc.Comment
		bc.UUID = dc.UUID
		if bc.Default == nil {
			bc.Default = dc.Default
		}
		if !names {
			continue
		}
		bc.Name = dc.Name
		if len(bc.Enum) == 0 {
			bc.Enum = dc.Enum
		}
		if len(bc.Set) == 0 {
			bc.Set = dc.Set
		}
		if !bc.Unsigned {
			bc.Unsigned = dc.Unsigned
		}
		if bc.Charset == "" {
			bc.Charset = dc.Charset
		}
	}
	if names && len(t.PrimaryKey) == 0 {
		t.PrimaryKey = def.PrimaryKey
	}
	return nil
}

// compatible reports whether a binlog column type can hold a column that
// information_schema describes with type code want.
func compatible(binlogType byte, meta uint16, want byte) bool {
	got := binlogType
	if got == mysql.MYSQL_TYPE_STRING && meta >= 256 {
		b0 := byte(meta >> 8)
		if b0&0x30 != 0x30 {
			got = b0 | 0x30
		} else {
			got = b0
		}
	}
	norm := func(t byte) byte {
		switch t {
		case mysql.MYSQL_TYPE_DATETIME2:
			return mysql.MYSQL_TYPE_DATETIME
		case mysql.MYSQL_TYPE_TIMESTAMP2:
			return mysql.MYSQL_TYPE_TIMESTAMP
		case mysql.MYSQL_TYPE_TIME2:
			return mysql.MYSQL_TYPE_TIME
		case mysql.MYSQL_TYPE_NEWDATE:
			return mysql.MYSQL_TYPE_DATE
		case mysql.MYSQL_TYPE_VAR_STRING:
			return mysql.MYSQL_TYPE_VARCHAR
		case mysql.MYSQL_TYPE_TINY_BLOB, mysql.MYSQL_TYPE_MEDIUM_BLOB, mysql.MYSQL_TYPE_LONG_BLOB:
			return mysql.MYSQL_TYPE_BLOB
		case mysql.MYSQL_TYPE_DECIMAL:
			return mysql.MYSQL_TYPE_NEWDECIMAL
		}
		return t
	}
	g, w := norm(got), norm(want)
	if g == w {
		return true
	}
	// CHAR columns of a multi-byte charset may be logged as VARCHAR-like
	// STRING; JSON on MariaDB is a BLOB.
	if (g == mysql.MYSQL_TYPE_STRING && w == mysql.MYSQL_TYPE_VARCHAR) || (g == mysql.MYSQL_TYPE_VARCHAR && w == mysql.MYSQL_TYPE_STRING) {
		return true
	}
	return g == mysql.MYSQL_TYPE_BLOB && w == mysql.MYSQL_TYPE_JSON
}

func typeName(t byte) string {
	if name, ok := typeNames[t]; ok {
		return name
	}
	return fmt.Sprintf("type %d", t)
}

var typeNames = map[byte]string{
	mysql.MYSQL_TYPE_DECIMAL: "DECIMAL", mysql.MYSQL_TYPE_TINY: "TINYINT", mysql.MYSQL_TYPE_SHORT: "SMALLINT",
	mysql.MYSQL_TYPE_LONG: "INT", mysql.MYSQL_TYPE_FLOAT: "FLOAT", mysql.MYSQL_TYPE_DOUBLE: "DOUBLE",
	mysql.MYSQL_TYPE_NULL: "NULL", mysql.MYSQL_TYPE_TIMESTAMP: "TIMESTAMP", mysql.MYSQL_TYPE_LONGLONG: "BIGINT",
	mysql.MYSQL_TYPE_INT24: "MEDIUMINT", mysql.MYSQL_TYPE_DATE: "DATE", mysql.MYSQL_TYPE_TIME: "TIME",
	mysql.MYSQL_TYPE_DATETIME: "DATETIME", mysql.MYSQL_TYPE_YEAR: "YEAR", mysql.MYSQL_TYPE_NEWDATE: "DATE",
	mysql.MYSQL_TYPE_VARCHAR: "VARCHAR", mysql.MYSQL_TYPE_BIT: "BIT", mysql.MYSQL_TYPE_TIMESTAMP2: "TIMESTAMP",
	mysql.MYSQL_TYPE_DATETIME2: "DATETIME", mysql.MYSQL_TYPE_TIME2: "TIME", mysql.MYSQL_TYPE_JSON: "JSON",
	mysql.MYSQL_TYPE_NEWDECIMAL: "DECIMAL", mysql.MYSQL_TYPE_ENUM: "ENUM", mysql.MYSQL_TYPE_SET: "SET",
	mysql.MYSQL_TYPE_TINY_BLOB: "TINYBLOB", mysql.MYSQL_TYPE_MEDIUM_BLOB: "MEDIUMBLOB",
	mysql.MYSQL_TYPE_LONG_BLOB: "LONGBLOB", mysql.MYSQL_TYPE_BLOB: "BLOB", mysql.MYSQL_TYPE_VAR_STRING: "VARCHAR",
	mysql.MYSQL_TYPE_STRING: "CHAR", mysql.MYSQL_TYPE_GEOMETRY: "GEOMETRY",
}

// InfoSchema is a SchemaSource that reads information_schema over its own
// connection.
type InfoSchema struct {
	dial func(ctx context.Context) (*client.Conn, error)

	mu struct {
		sync.Mutex
		conn  *client.Conn
		cache map[string]*Table
	}
	reads int // information_schema queries made (under mu)
}

// NewInfoSchema returns a SchemaSource that connects with dial when first used.
func NewInfoSchema(dial func(ctx context.Context) (*mysqlconn.Conn, error)) *InfoSchema {
	return newInfoSchema(func(ctx context.Context) (*client.Conn, error) {
		c, err := dial(ctx)
		return rawconn.Raw(c), err
	})
}

func newInfoSchema(dial func(ctx context.Context) (*client.Conn, error)) *InfoSchema {
	s := &InfoSchema{dial: dial}
	s.mu.cache = map[string]*Table{}
	return s
}

// Invalidate forgets the cached definition of db.table: of every table of
// db when table is empty, of all tables when db is empty too.
func (s *InfoSchema) Invalidate(db, table string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if db == "" {
		clear(s.mu.cache)
		return
	}
	for key, t := range s.mu.cache {
		if strings.EqualFold(t.Schema, db) && (table == "" || strings.EqualFold(t.Name, table)) {
			delete(s.mu.cache, key)
		}
	}
}

// Close closes the connection.
func (s *InfoSchema) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.conn != nil {
		err := s.mu.conn.Close()
		s.mu.conn = nil
		return err
	}
	return nil
}

// Columns returns the definition of db.table.
func (s *InfoSchema) Columns(ctx context.Context, db, table string) (*Table, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	key := db + "." + table
	if t, ok := s.mu.cache[key]; ok {
		return t, nil
	}
	var lastErr error
	for attempt := 0; attempt < 2; attempt++ {
		if s.mu.conn == nil {
			c, err := s.dial(ctx)
			if err != nil {
				return nil, err
			}
			// MySQL 8.0.30+ hides a generated invisible primary key
			// (my_row_id) from information_schema when this is OFF, but
			// logs it in every row. Elsewhere the variable is unknown.
			if rs, err := c.Execute("SET SESSION show_gipk_in_create_table_and_information_schema = ON"); err == nil {
				rs.Close()
			}
			s.mu.conn = c
		}
		t, err := s.query(db, table)
		if err == nil {
			s.mu.cache[key] = t
			return t, nil
		}
		lastErr = err
		var myErr *mysql.MyError
		if errors.As(err, &myErr) {
			return nil, err
		}
		s.mu.conn.Close() // connection problem: redial once
		s.mu.conn = nil
	}
	return nil, lastErr
}

func (s *InfoSchema) query(db, table string) (*Table, error) {
	s.reads++
	c := s.mu.conn
	rs, err := c.Execute(`SELECT COLUMN_NAME, DATA_TYPE, COLUMN_TYPE, IFNULL(CHARACTER_SET_NAME,''), IS_NULLABLE
		FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ? ORDER BY ORDINAL_POSITION`, db, table)
	if err != nil {
		return nil, fmt.Errorf("reading columns of %s.%s: %w", db, table, err)
	}
	defer rs.Close()
	if rs.RowNumber() == 0 {
		return nil, fmt.Errorf("table %s.%s not found in information_schema (dropped, or no SELECT privilege on it)", db, table)
	}
	t := &Table{Schema: db, Name: table}
	for i := 0; i < rs.RowNumber(); i++ {
		name := resultString(rs, i, 0)
		dataType := resultString(rs, i, 1)
		colType := resultString(rs, i, 2)
		charset := resultString(rs, i, 3)
		nullable := resultString(rs, i, 4)
		col := Column{Name: name, Charset: charset, Nullable: nullable == "YES"}
		col.Type = typeFromInfoSchema(strings.ToLower(dataType))
		col.Point = strings.EqualFold(dataType, "point")
		col.UUID = strings.EqualFold(dataType, "uuid")
		lc := strings.ToLower(colType)
		col.FloatMD = strings.EqualFold(dataType, "float") && strings.Contains(lc, ",")
		col.Unsigned = strings.Contains(lc, "unsigned")
		switch col.Type {
		case mysql.MYSQL_TYPE_ENUM:
			col.Enum = ParseMembers(colType)
		case mysql.MYSQL_TYPE_SET:
			col.Set = ParseMembers(colType)
		}
		if charset == "" && (col.Type == mysql.MYSQL_TYPE_STRING || col.Type == mysql.MYSQL_TYPE_VARCHAR || col.Type == mysql.MYSQL_TYPE_BLOB) {
			col.Charset = "binary"
		}
		t.Columns = append(t.Columns, col)
	}
	pk, err := c.Execute(`SELECT COLUMN_NAME FROM information_schema.STATISTICS
		WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ? AND INDEX_NAME = 'PRIMARY' ORDER BY SEQ_IN_INDEX`, db, table)
	if err != nil {
		return nil, fmt.Errorf("reading primary key of %s.%s: %w", db, table, err)
	}
	defer pk.Close()
	for i := 0; i < pk.RowNumber(); i++ {
		name := resultString(pk, i, 0)
		if j := t.ColumnIndex(name); j >= 0 {
			t.PrimaryKey = append(t.PrimaryKey, j)
		}
	}
	applyShowCreate(c, t, false) // only JSON's reading depends on the flavour
	// MariaDB's JSON is LONGTEXT with a json_valid() check named after the column.
	if chk, err := c.Execute(`SELECT CONSTRAINT_NAME, CHECK_CLAUSE FROM information_schema.CHECK_CONSTRAINTS
		WHERE CONSTRAINT_SCHEMA = ? AND TABLE_NAME = ?`, db, table); err == nil {
		defer chk.Close()
		for i := 0; i < chk.RowNumber(); i++ {
			name := resultString(chk, i, 0)
			clause := resultString(chk, i, 1)
			if j := t.ColumnIndex(name); j >= 0 && strings.EqualFold(strings.ReplaceAll(clause, " ", ""), "json_valid(`"+name+"`)") {
				t.Columns[j].jsonText = true
			}
		}
	}
	return t, nil
}

// ApplyShowCreateTable sets the defaults of t's columns, and their ENUM and
// SET members as written (information_schema's COLUMN_TYPE shows a 4-byte
// UTF-8 character of a member as '?' on MySQL), from the server's SHOW
// CREATE TABLE read with the schema history's parser (ParseCreateTable,
// ApplyCreateTable). When the statement cannot be read or parsed, t is
// left as it is and NoDefaultsWarning is logged with the table and the
// reason. The session's character_set_results must give the text in
// UTF-8 (utf8mb4). The binlog reader's information_schema path and the
// snapshot's Describe both use it.
func ApplyShowCreateTable(c *mysqlconn.Conn, t *Table, mariaDB bool) {
	applyShowCreate(rawconn.Raw(c), t, mariaDB)
}

func applyShowCreate(c *client.Conn, t *Table, mariaDB bool) {
	sc, err := c.Execute("SHOW CREATE TABLE " + sqlstmt.QuoteName(t.Schema, t.Name))
	if err == nil {
		create := resultString(sc, 0, 1)
		sc.Close()
		var def *Table
		if def, err = ParseCreateTable(create, mariaDB); err == nil {
			ApplyCreateTable(t, def)
			return
		}
	}
	slog.Default().Warn(NoDefaultsWarning, "table", t.Schema+"."+t.Name, "error", err)
}

// NoDefaultsWarning is logged when a table's SHOW CREATE TABLE cannot be
// read or parsed: its columns are described without their defaults and
// ENUM or SET members as written (information_schema's are used).
const NoDefaultsWarning = "SHOW CREATE TABLE could not be read or parsed: the table's columns have no defaults (format debezium's schema shows none, and replace.null.with.default leaves nulls null); grant SELECT on the table, or report the statement if it does not parse"

// ApplyCreateTable sets the Default and Comment of each column of t, and the members
// of its ENUM and SET columns, from def (ParseCreateTable of the same
// table), matching columns by name; a column def does not have, or whose
// member count differs, is left as it is.
func ApplyCreateTable(t *Table, def *Table) {
	for i := range t.Columns {
		col := &t.Columns[i]
		j := def.ColumnIndex(col.Name)
		if j < 0 {
			continue
		}
		dc := &def.Columns[j]
		col.Default = dc.Default
		col.Comment = dc.Comment
		if len(col.Enum) > 0 && len(dc.Enum) == len(col.Enum) {
			col.Enum = dc.Enum
		}
		if len(col.Set) > 0 && len(dc.Set) == len(col.Set) {
			col.Set = dc.Set
		}
	}
}

// ParseMembers parses the member list of an information_schema COLUMN_TYPE
// such as enum('a','b”c') (a quote inside a member is doubled).
func ParseMembers(colType string) []string {
	open := strings.IndexByte(colType, '(')
	end := strings.LastIndexByte(colType, ')')
	if open < 0 || end <= open {
		return nil
	}
	s := colType[open+1 : end]
	var out []string
	var cur strings.Builder
	in := false
	for i := 0; i < len(s); i++ {
		ch := s[i]
		switch {
		case !in && ch == '\'':
			in = true
			cur.Reset()
		case in && ch == '\'' && i+1 < len(s) && s[i+1] == '\'':
			cur.WriteByte('\'')
			i++
		case in && ch == '\\' && i+1 < len(s):
			cur.WriteByte(s[i+1])
			i++
		case in && ch == '\'':
			in = false
			out = append(out, cur.String())
		case in:
			cur.WriteByte(ch)
		}
	}
	return out
}

// geometryTypePoint is POINT in a TABLE_MAP event's GEOMETRY_TYPE
// metadata (the server's Field::geometry_type: 0 GEOMETRY, 1 POINT,
// 2 LINESTRING...).
const geometryTypePoint = 1

func typeFromInfoSchema(dataType string) byte {
	switch dataType {
	case "tinyint", "bool", "boolean":
		return mysql.MYSQL_TYPE_TINY
	case "smallint":
		return mysql.MYSQL_TYPE_SHORT
	case "mediumint":
		return mysql.MYSQL_TYPE_INT24
	case "int", "integer":
		return mysql.MYSQL_TYPE_LONG
	case "bigint":
		return mysql.MYSQL_TYPE_LONGLONG
	case "float":
		return mysql.MYSQL_TYPE_FLOAT
	case "double", "real", "double precision":
		return mysql.MYSQL_TYPE_DOUBLE
	case "decimal", "numeric":
		return mysql.MYSQL_TYPE_NEWDECIMAL
	case "date":
		return mysql.MYSQL_TYPE_DATE
	case "datetime":
		return mysql.MYSQL_TYPE_DATETIME2
	case "timestamp":
		return mysql.MYSQL_TYPE_TIMESTAMP2
	case "time":
		return mysql.MYSQL_TYPE_TIME2
	case "year":
		return mysql.MYSQL_TYPE_YEAR
	case "char", "binary":
		return mysql.MYSQL_TYPE_STRING
	case "inet4", "inet6", "uuid":
		// MariaDB's fixed-size binary types, logged as BINARY(4) or
		// BINARY(16) (no character set in information_schema: binary).
		return mysql.MYSQL_TYPE_STRING
	case "varchar", "varbinary":
		return mysql.MYSQL_TYPE_VARCHAR
	case "tinytext", "text", "mediumtext", "longtext", "tinyblob", "blob", "mediumblob", "longblob":
		return mysql.MYSQL_TYPE_BLOB
	case "enum":
		return mysql.MYSQL_TYPE_ENUM
	case "set":
		return mysql.MYSQL_TYPE_SET
	case "bit":
		return mysql.MYSQL_TYPE_BIT
	case "json":
		return mysql.MYSQL_TYPE_JSON
	case "vector":
		return mysql.MYSQL_TYPE_VECTOR
	case "geometry", "point", "linestring", "polygon", "multipoint", "multilinestring", "multipolygon", "geometrycollection", "geomcollection":
		return mysql.MYSQL_TYPE_GEOMETRY
	}
	return mysql.MYSQL_TYPE_NULL
}

// resultString returns a copy of a result cell: go-mysql's GetString
// points into a buffer that is reused after the result is closed.
func resultString(rs *mysql.Result, row, col int) string {
	s, _ := rs.GetString(row, col)
	return strings.Clone(s)
}
