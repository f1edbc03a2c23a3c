// Package rawconn defines sluice's MySQL connection and result types, which
// the public package mysqlconn re-exports, and the two functions that cross
// between them and go-mysql's: Wrap and Raw.
//
// The types live here rather than in mysqlconn so that sluice's own packages
// (binlog, snapshot, pipeline, the commands and the test harness) can reach
// the go-mysql connection underneath — snapshot reads result packets from it
// directly, binlog sets its deadlines and TLS — while no exported identifier
// of a public package names a go-mysql type. Code outside this module cannot
// import an internal package, so for it a mysqlconn.Conn is opaque.
package rawconn

import (
	"github.com/go-mysql-org/go-mysql/client"
	"github.com/go-mysql-org/go-mysql/mysql"
)

// Conn is an open connection to a MySQL or MariaDB server. It is not safe
// for concurrent use: one query at a time, as on the wire.
type Conn struct {
	c *client.Conn
}

// Wrap gives c the sluice type; nil stays nil.
func Wrap(c *client.Conn) *Conn {
	if c == nil {
		return nil
	}
	return &Conn{c: c}
}

// Raw is the go-mysql connection under c; nil stays nil.
func Raw(c *Conn) *client.Conn {
	if c == nil {
		return nil
	}
	return c.c
}

// Execute runs one statement, with args bound as a prepared statement's
// parameters when there are any, and reads its whole result. An error
// the server sent is a *mysql.MyError of go-mysql, as before.
func (c *Conn) Execute(query string, args ...any) (*Result, error) {
	r, err := c.c.Execute(query, args...)
	return wrapResult(r), err
}

// Close closes the connection.
func (c *Conn) Close() error { return c.c.Close() }

// GetServerVersion is the version string the server announced in its
// handshake, e.g. "8.4.3" or "11.4.4-MariaDB-log".
func (c *Conn) GetServerVersion() string { return c.c.GetServerVersion() }

// GetConnectionID is the server's id of this connection (the Id column of
// SHOW PROCESSLIST, the argument KILL takes).
func (c *Conn) GetConnectionID() uint32 { return c.c.GetConnectionID() }

// Result is the outcome of Execute: the rows of a query, or the counts of
// a statement that changed data. Rows and columns count from 0.
type Result struct {
	r *mysql.Result
}

func wrapResult(r *mysql.Result) *Result {
	if r == nil {
		return nil
	}
	return &Result{r: r}
}

// RawResult is the go-mysql result under r; nil stays nil.
func RawResult(r *Result) *mysql.Result {
	if r == nil {
		return nil
	}
	return r.r
}

// Close hands the result's buffers back for reuse: a string GetString
// returned may change after it (copy what you keep).
func (r *Result) Close() { r.r.Close() }

// AffectedRows is the number of rows the statement changed.
func (r *Result) AffectedRows() uint64 { return r.r.AffectedRows }

// RowNumber is the number of rows in the result.
func (r *Result) RowNumber() int { return r.r.RowNumber() }

// ColumnNumber is the number of columns in the result.
func (r *Result) ColumnNumber() int { return r.r.ColumnNumber() }

// ColumnName is the name of column col (its alias in the query, if any).
func (r *Result) ColumnName(col int) string { return string(r.r.Fields[col].Name) }

// IsNull reports whether the value at row, col is NULL.
func (r *Result) IsNull(row, col int) (bool, error) { return r.r.IsNull(row, col) }

// GetString is the value at row, col as text; NULL is "".
func (r *Result) GetString(row, col int) (string, error) { return r.r.GetString(row, col) }

// GetInt is the value at row, col as a signed integer; NULL is 0.
func (r *Result) GetInt(row, col int) (int64, error) { return r.r.GetInt(row, col) }

// GetUint is the value at row, col as an unsigned integer; NULL is 0.
func (r *Result) GetUint(row, col int) (uint64, error) { return r.r.GetUint(row, col) }

// GetStringByName is the value at row in the column named name, as text.
func (r *Result) GetStringByName(row int, name string) (string, error) {
	return r.r.GetStringByName(row, name)
}

// GetIntByName is the value at row in the column named name, as a signed
// integer.
func (r *Result) GetIntByName(row int, name string) (int64, error) {
	return r.r.GetIntByName(row, name)
}

// GetUintByName is the value at row in the column named name, as an
// unsigned integer.
func (r *Result) GetUintByName(row int, name string) (uint64, error) {
	return r.r.GetUintByName(row, name)
}
