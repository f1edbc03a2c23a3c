package snapshot

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/go-mysql-org/go-mysql/client"
	"github.com/go-mysql-org/go-mysql/mysql"

	"github.com/sluice-cdc/sluice/binlog"
	"github.com/sluice-cdc/sluice/internal/rawconn"
	"github.com/sluice-cdc/sluice/position"
)

// server is what the snapshot needs to know of the source: its flavor and
// version, and on MySQL whether every transaction has a GTID.
type server struct {
	flavor position.Flavor
	// gtids: MySQL's gtid_mode is ON, so every transaction has a GTID and
	// gtid_executed says which are committed. (MariaDB always has GTIDs.)
	gtids bool
}

// probeServer learns what the snapshot needs of the server behind c.
func probeServer(c *client.Conn) (server, error) {
	v, err := binlog.ParseServerVersion(c.GetServerVersion())
	if err != nil {
		return server{}, fmt.Errorf("snapshot: %w", err)
	}
	s := server{flavor: v.Flavor}
	if s.flavor == position.MariaDB {
		s.gtids = true
		return s, nil
	}
	rs, err := c.Execute("SELECT @@GLOBAL.gtid_mode")
	if err != nil {
		return s, fmt.Errorf("snapshot: reading gtid_mode: %w", err)
	}
	s.gtids = strings.EqualFold(cell(rs, 0, 0), "ON")
	rs.Close()
	return s, nil
}

// position reads the server's current binlog position: file and offset,
// and the GTID state there (MySQL: the executed GTID set, read by the same
// statement, which is exact while writes are blocked or for a watermark
// that only needs a bound; MariaDB: BINLOG_GTID_POS of the file and
// offset).
func (s server) position(c *client.Conn) (position.Position, error) {
	p, err := binlog.BinlogPosition(rawconn.Wrap(c))
	if err != nil {
		return p, fmt.Errorf("snapshot: %w", err)
	}
	if s.flavor == position.MySQL {
		if !s.gtids {
			p.GTIDs = ""
		}
		return p, nil
	}
	if p.GTIDs, err = binlog.GTIDAt(rawconn.Wrap(c), p); err != nil {
		return p, fmt.Errorf("snapshot: %w", err)
	}
	return p, nil
}

// gtidExecuted reads MySQL's @@GLOBAL.gtid_executed: every transaction
// whose GTID is in it has been committed in the storage engine (the
// server adds a GTID after the engine commit, whether binlog_order_commits
// is ON, where the commit stage's leader commits the group in the engine
// and then adds its GTIDs, or OFF, where each session does both itself),
// so a read view opened after reading the set sees all of them.
func gtidExecuted(c *client.Conn) (position.GTIDSet, error) {
	rs, err := c.Execute("SELECT @@GLOBAL.gtid_executed")
	if err != nil {
		return position.GTIDSet{}, fmt.Errorf("snapshot: reading gtid_executed: %w", err)
	}
	text := position.CompactGTIDs(cell(rs, 0, 0))
	rs.Close()
	return position.ParseGTIDSet(position.MySQL, text)
}

// Errors of the lock statements.
const (
	errLockWaitTimeout  = 1205 // ER_LOCK_WAIT_TIMEOUT
	errQueryInterrupted = 1317 // ER_QUERY_INTERRUPTED
)

// refused reports whether err is the server refusing a statement for want
// of a privilege: RELOAD for FLUSH TABLES WITH READ LOCK, LOCK TABLES for
// LOCK TABLES. (Amazon RDS and Aurora refuse FLUSH TABLES WITH READ LOCK
// with an access error even to users having RELOAD.)
func refused(err error) bool {
	var me *mysql.MyError
	if !errors.As(err, &me) {
		return false
	}
	switch me.Code {
	case mysql.ER_SPECIFIC_ACCESS_DENIED_ERROR, mysql.ER_ACCESS_DENIED_ERROR, mysql.ER_DBACCESS_DENIED_ERROR,
		mysql.ER_TABLEACCESS_DENIED_ERROR:
		return true
	}
	return false
}

func serverCode(err error) uint16 {
	var me *mysql.MyError
	if errors.As(err, &me) {
		return me.Code
	}
	return 0
}

// lockStatement runs q, a statement that waits for locks, on c, for at
// most d: the server gives up after lock_wait_timeout (the session's is
// set to d, in whole seconds, beforehand), and should it still not answer
// a second after d (a wait lock_wait_timeout does not bound), or should
// ctx end, another connection kills the statement (KILL QUERY, which a
// user may do to its own connections without any privilege). A statement
// killed that way fails with errQueryInterrupted even if it had just
// succeeded.
func lockStatement(ctx context.Context, dial func(context.Context) (*client.Conn, error), c *client.Conn, q string, d time.Duration) error {
	secs := max(int64((d+time.Second-1)/time.Second), 1)
	if _, err := c.Execute(fmt.Sprintf("SET SESSION lock_wait_timeout = %d", secs)); err != nil {
		return fmt.Errorf("snapshot: setting lock_wait_timeout: %w", err)
	}
	id := c.GetConnectionID()
	var (
		mu     sync.Mutex
		done   bool
		killed bool
		wg     sync.WaitGroup
	)
	stop := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTimer(d + time.Second)
		defer t.Stop()
		select {
		case <-stop:
			return
		case <-t.C:
		case <-ctx.Done():
		}
		kctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		k, err := dial(kctx)
		if err != nil {
			return
		}
		defer k.Close()
		mu.Lock()
		defer mu.Unlock()
		if done {
			return
		}
		killed = true
		_, _ = k.Execute(fmt.Sprintf("KILL QUERY %d", id))
	}()
	_, err := c.Execute(q)
	mu.Lock()
	done = true
	wasKilled := killed
	mu.Unlock()
	close(stop)
	wg.Wait()
	if wasKilled && err == nil {
		err = &mysql.MyError{Code: errQueryInterrupted, Message: "killed after the lock timeout"}
	}
	if err != nil && ctx.Err() != nil {
		return fmt.Errorf("%w (%s: %v)", ctx.Err(), q, err)
	}
	return err
}
