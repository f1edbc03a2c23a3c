// Package mysqlconn holds sluice's connection to a MySQL or MariaDB server
// and the result of a statement run on it: the types binlog.Dial returns
// and binlog's and snapshot's position and table functions take.
//
// sluice speaks the MySQL protocol through go-mysql. This package exists so
// that go-mysql's types stay out of sluice's public API: a program using
// sluice depends on sluice's Conn, whose few methods are all a caller needs
// (run a statement, read its result, close), and sluice can change or
// upgrade the driver underneath without breaking it.
//
//	c, err := binlog.Dial(ctx, cfg)
//	if err != nil {
//		return err
//	}
//	defer c.Close()
//	rs, err := c.Execute("SELECT @@server_id")
//	if err != nil {
//		return err
//	}
//	id, err := rs.GetUint(0, 0)
//
// An error the server sent back keeps the server's error code and message,
// as errors.As finds them in go-mysql's error type.
package mysqlconn

import "github.com/sluice-cdc/sluice/internal/rawconn"

// Conn is an open connection to a MySQL or MariaDB server, made by
// binlog.Dial or binlog.DialFirst. It is not safe for concurrent use: one
// statement at a time. Its methods:
//
//	Execute(query string, args ...any) (*Result, error) // run one statement, args bound as parameters
//	Close() error
//	GetServerVersion() string // the handshake's version, e.g. "11.4.4-MariaDB-log"
//	GetConnectionID() uint32  // the server's id of this connection (for KILL)
type Conn = rawconn.Conn

// Result is what Conn.Execute read: the rows of a query or the count of
// rows a statement changed. Rows and columns count from 0. Its methods:
//
//	RowNumber() int
//	ColumnNumber() int
//	ColumnName(col int) string
//	AffectedRows() uint64
//	IsNull(row, col int) (bool, error)
//	GetString(row, col int) (string, error)          // NULL is ""
//	GetInt(row, col int) (int64, error)              // NULL is 0
//	GetUint(row, col int) (uint64, error)            // NULL is 0
//	GetStringByName(row int, name string) (string, error)
//	GetIntByName(row int, name string) (int64, error)
//	GetUintByName(row int, name string) (uint64, error)
//	Close() // hands the buffers back: copy the strings you keep first
type Result = rawconn.Result
