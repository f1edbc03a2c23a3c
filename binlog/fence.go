package binlog

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/go-mysql-org/go-mysql/client"
	"github.com/go-mysql-org/go-mysql/mysql"
)

// fence keeps one binlog dump per consumer on MySQL.
//
// MariaDB ends a binlog dump when another replica connects with the same
// server_id (ErrReplaced on the older side), which is what lets a
// failed-over process of a pipeline take the stream over from one that
// did not notice it was replaced. MySQL matches dumps by the replica's
// replica_uuid instead, and go-mysql sets a new one for every connection,
// so two dumps with one server_id both run. The fence does on MySQL what
// MariaDB does: each dump connection of a Reader with a ReplicaHost
// carries two user variables,
//
//	@sluice_replica = '<ReplicaHost>/<ServerID>'   the consumer
//	@sluice_epoch   = '<server time at the Reader's start>-<its connection id>'
//
// and before it asks for the binlog it looks for other connections with
// the same consumer in performance_schema.user_variables_by_thread: one
// with an older epoch is killed (its reader then finds the newer one and
// stops with ErrReplaced instead of reconnecting); one with a newer epoch
// means this Reader is the older one, and it stops with ErrReplaced.
// Epochs come from the server's clock, so readers on different machines
// compare by one clock.
//
// Without SELECT on performance_schema the fence is off (logged once),
// and MySQL keeps both dumps as it does for other clients.
type fence struct {
	identity string
	serverID uint32
	epoch    string
	log      *slog.Logger

	mu  sync.Mutex
	off bool // performance_schema could not be read
}

// newFence returns the fence of a MySQL reader with a ReplicaHost (nil
// otherwise), its epoch read from the server on c.
func newFence(c *client.Conn, v ServerVersion, cfg Config, log *slog.Logger) (*fence, error) {
	if !v.mysql() || cfg.ReplicaHost == "" {
		return nil, nil
	}
	rs, err := c.Execute("SELECT CAST(UNIX_TIMESTAMP(NOW(6)) * 1000000 AS UNSIGNED), CONNECTION_ID()")
	if err != nil {
		return nil, fmt.Errorf("binlog: reading the server's clock: %w", brief(err))
	}
	defer rs.Close()
	micros, _ := rs.GetUint(0, 0)
	id, _ := rs.GetUint(0, 1)
	return &fence{
		identity: cfg.ReplicaHost + "/" + strconv.FormatUint(uint64(cfg.ServerID), 10),
		serverID: cfg.ServerID,
		epoch:    fmt.Sprintf("%020d-%020d", micros, id),
		log:      log,
	}, nil
}

// others lists the connections of the same consumer other than c's own,
// with their epochs.
func (f *fence) others(c *client.Conn) (map[uint64]string, error) {
	rs, err := c.Execute(`SELECT t.PROCESSLIST_ID, e.VARIABLE_VALUE
		FROM performance_schema.user_variables_by_thread r
		JOIN performance_schema.user_variables_by_thread e ON e.THREAD_ID = r.THREAD_ID AND e.VARIABLE_NAME = 'sluice_epoch'
		JOIN performance_schema.threads t ON t.THREAD_ID = r.THREAD_ID
		WHERE r.VARIABLE_NAME = 'sluice_replica' AND r.VARIABLE_VALUE = '` + mysql.Escape(f.identity) + `'
		AND t.PROCESSLIST_ID IS NOT NULL AND t.PROCESSLIST_ID <> CONNECTION_ID()`)
	if err != nil {
		f.mu.Lock()
		if !f.off {
			f.off = true
			f.log.Warn("cannot read performance_schema.user_variables_by_thread: a newer process of this pipeline will not end an older one's binlog dump on this MySQL server", "error", brief(err).Error(), "grant", "GRANT SELECT ON performance_schema.* TO <user>")
		}
		f.mu.Unlock()
		return nil, err
	}
	defer rs.Close()
	out := make(map[uint64]string, rs.RowNumber())
	for i := 0; i < rs.RowNumber(); i++ {
		id, _ := rs.GetUint(i, 0)
		out[id] = resultString(rs, i, 1)
	}
	return out, nil
}

func (f *fence) replacedError(epoch string) error {
	return fmt.Errorf("%w (server_id %d): a newer reader with the same ReplicaHost and server_id (%s) started at %s and holds the binlog dump", ErrReplaced, f.serverID, f.identity, epochTime(epoch))
}

// epochTime renders an epoch's time for messages.
func epochTime(epoch string) string {
	if len(epoch) < 20 {
		return epoch
	}
	us, err := strconv.ParseInt(epoch[:20], 10, 64)
	if err != nil {
		return epoch
	}
	return time.UnixMicro(us).UTC().Format(time.RFC3339Nano)
}

// dumpOption runs on each new dump connection before it registers as a
// replica (go-mysql's BinlogSyncerConfig.Option): it sets the connection's
// character set (ConnCollation; go-mysql's handshake asks for one MariaDB
// may not know) and then the fence (option).
func (f *fence) dumpOption(c *client.Conn) error {
	if _, err := c.Execute(setNames); err != nil {
		return fmt.Errorf("binlog: setting the connection's character set (%s): %w", setNames, err)
	}
	return f.option(c)
}

// option marks the dump connection as this process's and ends older dumps
// of the same identity.
func (f *fence) option(c *client.Conn) error {
	if f == nil {
		return nil
	}
	if _, err := c.Execute("SET @sluice_replica = '" + mysql.Escape(f.identity) + "', @sluice_epoch = '" + f.epoch + "'"); err != nil {
		return err
	}
	others, err := f.others(c)
	if err != nil {
		return nil // the fence is off
	}
	for _, epoch := range others {
		if epoch > f.epoch {
			return f.replacedError(epoch)
		}
	}
	for id := range others {
		if _, err := c.Execute("KILL CONNECTION " + strconv.FormatUint(id, 10)); err != nil {
			var myErr *mysql.MyError
			switch {
			case errors.As(err, &myErr) && myErr.Code == mysql.ER_NO_SUCH_THREAD:
				// it ended by itself
			case errors.As(err, &myErr) && myErr.Code == mysql.ER_KILL_DENIED_ERROR:
				return fmt.Errorf("%w: ending the older binlog dump of %s (connection %d, another user's) needs CONNECTION_ADMIN: GRANT CONNECTION_ADMIN ON *.* TO <user>, or run both processes as one user", ErrPrivilege, f.identity, id)
			default:
				return fmt.Errorf("binlog: ending the older binlog dump of %s (connection %d): %w", f.identity, id, brief(err))
			}
		}
	}
	return nil
}

// replaced reports ErrReplaced when a newer reader of the same consumer
// holds a dump (checked after this one's stream ended, before
// reconnecting).
func (f *fence) replaced(ctx context.Context, cfg Config) error {
	if f == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	c, err := dial(ctx, cfg)
	if err != nil {
		return nil // the reconnection will tell
	}
	defer c.Close()
	others, err := f.others(c)
	if err != nil {
		return nil
	}
	for _, epoch := range others {
		if epoch > f.epoch {
			return f.replacedError(epoch)
		}
	}
	return nil
}
