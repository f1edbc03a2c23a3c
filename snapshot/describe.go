package snapshot

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/go-mysql-org/go-mysql/client"
	"github.com/go-mysql-org/go-mysql/mysql"

	"github.com/sluice-cdc/sluice/binlog"
	"github.com/sluice-cdc/sluice/internal/rawconn"
	"github.com/sluice-cdc/sluice/internal/sqlstmt"
	"github.com/sluice-cdc/sluice/mysqlconn"
)

// Errors of Describe, Inspect and Scan; test for them with errors.Is.
var (
	// ErrTableNotFound: the table (or its database) does not exist.
	ErrTableNotFound = errors.New("snapshot: table not found")
	// ErrNoPrivilege: the user may not SELECT from the table. The server
	// says so also for tables that do not exist when the user has no
	// privilege at all on them, so as not to reveal which tables exist.
	ErrNoPrivilege = errors.New("snapshot: no SELECT privilege")
	// ErrNotBaseTable: the name is a view or a sequence, which the binlog
	// has no rows for.
	ErrNotBaseTable = errors.New("snapshot: not a base table")
	// ErrUnsupportedType: a column has a type whose snapshot values could
	// not be made to match what the binlog reader decodes.
	ErrUnsupportedType = errors.New("snapshot: unsupported column type")
)

// TableInfo is what Inspect learns about a table.
type TableInfo struct {
	// Table is the definition, as Describe returns it.
	Table *binlog.Table
	// Key is the key the table can be read in order of, as indexes into
	// Table.Columns in key order: the primary key, or else the first
	// unique B-tree index without prefix parts whose columns are all NOT
	// NULL (the one InnoDB clusters such a table by). Nil when the table
	// has neither: it can then only be read in one piece.
	Key []int
	// KeyName is "PRIMARY", the name of the unique index used, or "".
	KeyName string
	// Rows is the server's estimate of the number of rows
	// (information_schema.TABLES.TABLE_ROWS; approximate for InnoDB).
	Rows int64
	// Engine is the storage engine.
	Engine string
}

// Describe returns the definition of db.table from information_schema, in
// the form the binlog reader builds from binlog_row_metadata=FULL: every
// column's Name, Type (the real type code, MYSQL_TYPE_ENUM and _SET for
// ENUM and SET), Kind, Unsigned, Nullable, Charset, Collation, Enum, Set,
// Frac, Precision and BitLen are what the reader's Column holds for the
// same table. BinlogType and Meta, which only the binlog has, are zero, so
// the columns are not meant for Column.Resolve. MariaDB's JSON columns,
// LONGTEXT with a json_valid check, have Kind KindJSON as in the reader.
//
// Table.PrimaryKey holds the primary key, or when there is none the unique
// key Inspect reports (MariaDB treats that key as the primary key and
// logs it as such in the binlog metadata). Use Inspect to learn which key
// it is and the estimated row count.
//
// The errors wrap ErrTableNotFound, ErrNoPrivilege, ErrNotBaseTable or
// ErrUnsupportedType when they are the cause.
func Describe(ctx context.Context, c *mysqlconn.Conn, db, table string) (*binlog.Table, error) {
	info, err := Inspect(ctx, c, db, table)
	if err != nil {
		return nil, err
	}
	return info.Table, nil
}

// Inspect is Describe, plus the key the table can be read by and the
// server's estimate of its row count.
//
// Like Scan, Describe and Inspect run SessionSQL on c first.
func Inspect(ctx context.Context, c *mysqlconn.Conn, db, table string) (*TableInfo, error) {
	return inspectCtx(ctx, rawconn.Raw(c), db, table)
}

// inspectCtx is Inspect on the go-mysql connection.
func inspectCtx(ctx context.Context, c *client.Conn, db, table string) (*TableInfo, error) {
	var info *TableInfo
	err := withContext(ctx, c, func() error {
		var err error
		info, err = inspect(c, db, table)
		return err
	})
	if err != nil {
		return nil, err
	}
	return info, nil
}

func inspect(c *client.Conn, db, table string) (*TableInfo, error) {
	name := sqlstmt.QuoteName(db, table)
	// Names are UTF-8: say so, whatever character set the connection
	// started with.
	if err := session(c); err != nil {
		return nil, err
	}
	// The probe tells a missing table from a forbidden one with the
	// server's own error, which information_schema (showing only what the
	// user may see) cannot.
	probe, err := c.Execute("SELECT * FROM " + name + " LIMIT 0")
	if err != nil {
		return nil, tableError(err, db, table)
	}
	probe.Close()

	t := &binlog.Table{Schema: db, Name: table}
	info := &TableInfo{Table: t}
	mariaDB := strings.Contains(strings.ToLower(c.GetServerVersion()), "mariadb")

	rs, err := c.Execute(`SELECT TABLE_TYPE, IFNULL(TABLE_ROWS, 0), IFNULL(ENGINE, '')
		FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ?`, db, table)
	if err != nil {
		return nil, fmt.Errorf("snapshot: reading information_schema.TABLES for %s: %w", name, err)
	}
	if rs.RowNumber() == 0 {
		rs.Close()
		return nil, fmt.Errorf("%w: %s is not in information_schema.TABLES", ErrTableNotFound, name)
	}
	typ := cell(rs, 0, 0)
	info.Rows, _ = rs.GetInt(0, 1)
	info.Engine = cell(rs, 0, 2)
	rs.Close()
	if typ != "BASE TABLE" && typ != "SYSTEM VERSIONED" {
		return nil, fmt.Errorf("%w: %s is a %s; only base tables have rows in the binlog", ErrNotBaseTable, name, strings.ToLower(typ))
	}

	rs, err = c.Execute(`SELECT c.COLUMN_NAME, c.DATA_TYPE, c.COLUMN_TYPE,
			IFNULL(c.NUMERIC_PRECISION, 0), IFNULL(c.NUMERIC_SCALE, 0), IFNULL(c.DATETIME_PRECISION, 0),
			IFNULL(c.CHARACTER_SET_NAME, ''), IFNULL(c.COLLATION_NAME, ''), c.IS_NULLABLE, IFNULL(co.ID, 0)
		FROM information_schema.COLUMNS c
		LEFT JOIN information_schema.COLLATIONS co ON co.COLLATION_NAME = c.COLLATION_NAME
		WHERE c.TABLE_SCHEMA = ? AND c.TABLE_NAME = ? ORDER BY c.ORDINAL_POSITION`, db, table)
	if err != nil {
		return nil, fmt.Errorf("snapshot: reading information_schema.COLUMNS for %s: %w", name, err)
	}
	defer rs.Close()
	if rs.RowNumber() == 0 {
		return nil, fmt.Errorf("%w: %s has no columns in information_schema.COLUMNS", ErrTableNotFound, name)
	}
	t.Columns = make([]binlog.Column, rs.RowNumber())
	for i := range t.Columns {
		col := &t.Columns[i]
		col.Name = cell(rs, i, 0)
		prec, _ := rs.GetInt(i, 3)
		scale, _ := rs.GetInt(i, 4)
		dtPrec, _ := rs.GetInt(i, 5)
		col.Charset = cell(rs, i, 6)
		col.Nullable = cell(rs, i, 8) == "YES"
		col.Collation, _ = rs.GetUint(i, 9)
		if err := col.SetSQLType(mariaDB, strings.ToLower(cell(rs, i, 1)), cell(rs, i, 2), int(prec), int(scale), int(dtPrec)); err != nil {
			return nil, fmt.Errorf("%w: %s column %q: %v", ErrUnsupportedType, name, col.Name, err)
		}
	}

	if err := readCreate(c, t, mariaDB); err != nil {
		return nil, err
	}
	if err := readKey(c, info); err != nil {
		return nil, err
	}
	if err := readJSONChecks(c, t); err != nil {
		return nil, err
	}
	return info, nil
}

// readKey finds the table's primary key, or else its first unique index
// over NOT NULL columns, in the order the server lists indexes (primary
// key first, then unique NOT NULL indexes in definition order).
func readKey(c *client.Conn, info *TableInfo) error {
	t := info.Table
	rs, err := c.Execute(`SELECT INDEX_NAME, COLUMN_NAME, IFNULL(SUB_PART, 0), INDEX_TYPE, SEQ_IN_INDEX
		FROM information_schema.STATISTICS
		WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ? AND NON_UNIQUE = 0`, t.Schema, t.Name)
	if err != nil {
		return fmt.Errorf("snapshot: reading the keys of %s: %w", sqlstmt.QuoteName(t.Schema, t.Name), err)
	}
	defer rs.Close()
	type index struct {
		name   string
		cols   []int // by SEQ_IN_INDEX - 1; -1 for a column not found
		usable bool
	}
	var order []string
	byName := map[string]*index{}
	for i := 0; i < rs.RowNumber(); i++ {
		name := cell(rs, i, 0)
		ix := byName[name]
		if ix == nil {
			ix = &index{name: name, usable: true}
			byName[name] = ix
			order = append(order, name)
		}
		seq, _ := rs.GetInt(i, 4)
		for int64(len(ix.cols)) < seq {
			ix.cols = append(ix.cols, -1)
		}
		j := t.ColumnIndex(cell(rs, i, 1))
		if seq >= 1 {
			ix.cols[seq-1] = j
		}
		sub, _ := rs.GetInt(i, 2)
		if j < 0 || t.Columns[j].Nullable || (name != "PRIMARY" && (sub != 0 || cell(rs, i, 3) != "BTREE")) {
			ix.usable = false
		}
	}
	pick := func(ix *index) bool {
		if ix == nil || !ix.usable || len(ix.cols) == 0 || contains(ix.cols, -1) {
			return false
		}
		info.Key, info.KeyName = ix.cols, ix.name
		t.PrimaryKey = append([]int(nil), ix.cols...)
		return true
	}
	if pick(byName["PRIMARY"]) {
		return nil
	}
	for _, name := range order {
		if pick(byName[name]) {
			return nil
		}
	}
	return nil
}

func contains(s []int, v int) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// readCreate sets the columns' defaults, and the ENUM and SET members as
// written, from SHOW CREATE TABLE as the binlog reader has them
// (binlog.ApplyShowCreateTable). The statement's text is asked for in
// UTF-8 (the session's character_set_results is NULL, which gives it in
// the dictionary's utf8mb3, a 4-byte character as '?'), then the session
// is set back.
func readCreate(c *client.Conn, t *binlog.Table, mariaDB bool) error {
	if _, err := c.Execute("SET character_set_results = utf8mb4"); err != nil {
		return fmt.Errorf("snapshot: preparing to read SHOW CREATE TABLE: %w", err)
	}
	binlog.ApplyShowCreateTable(rawconn.Wrap(c), t, mariaDB)
	if _, err := c.Execute("SET character_set_results = NULL"); err != nil {
		return fmt.Errorf("snapshot: restoring the session after SHOW CREATE TABLE: %w", err)
	}
	return nil
}

// readJSONChecks marks MariaDB's JSON columns: LONGTEXT with a
// json_valid() check named after the column, as binlog.InfoSchema does.
func readJSONChecks(c *client.Conn, t *binlog.Table) error {
	rs, err := c.Execute(`SELECT CONSTRAINT_NAME, CHECK_CLAUSE FROM information_schema.CHECK_CONSTRAINTS
		WHERE CONSTRAINT_SCHEMA = ? AND TABLE_NAME = ?`, t.Schema, t.Name)
	if err != nil {
		var me *mysql.MyError
		if errors.As(err, &me) {
			return nil // no such table or column: not MariaDB, no MariaDB JSON
		}
		return fmt.Errorf("snapshot: reading the check constraints of %s: %w", sqlstmt.QuoteName(t.Schema, t.Name), err)
	}
	defer rs.Close()
	for i := 0; i < rs.RowNumber(); i++ {
		name, clause := cell(rs, i, 0), cell(rs, i, 1)
		j := t.ColumnIndex(name)
		if j < 0 || !strings.EqualFold(strings.ReplaceAll(clause, " ", ""), "json_valid(`"+name+"`)") {
			continue
		}
		if col := &t.Columns[j]; col.Type == mysql.MYSQL_TYPE_BLOB && col.Kind == binlog.KindString {
			col.MarkJSONText()
		}
	}
	return nil
}

// tableError turns the server's answer to a SELECT on db.table into an
// error saying what is wrong.
func tableError(err error, db, table string) error {
	name := sqlstmt.QuoteName(db, table)
	var me *mysql.MyError
	if errors.As(err, &me) {
		switch me.Code {
		case mysql.ER_NO_SUCH_TABLE, mysql.ER_BAD_DB_ERROR:
			return fmt.Errorf("%w: %s does not exist (server error %d: %s)", ErrTableNotFound, name, me.Code, me.Message)
		case mysql.ER_TABLEACCESS_DENIED_ERROR, mysql.ER_COLUMNACCESS_DENIED_ERROR, mysql.ER_DBACCESS_DENIED_ERROR:
			return fmt.Errorf("%w on %s for this user (server error %d: %s); the snapshot reads tables with SELECT: GRANT SELECT ON %s TO the user sluice connects as",
				ErrNoPrivilege, name, me.Code, me.Message, name)
		}
	}
	return fmt.Errorf("snapshot: reading %s: %w", name, err)
}

// cell returns a copy of a result cell as a string: go-mysql's GetString
// points into a buffer that is reused after the result is closed.
func cell(rs *mysql.Result, row, col int) string {
	s, _ := rs.GetString(row, col)
	return strings.Clone(s)
}
