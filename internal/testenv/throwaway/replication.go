package throwaway

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/go-mysql-org/go-mysql/mysql"

	"github.com/sluice-cdc/sluice/position"
)

// ReplicateFrom makes m a GTID replica of primary (both of one flavor)
// and waits until its replication threads run. Both servers log the
// transactions they apply (MariaDB's log_slave_updates, MySQL's
// log_replica_updates), so a replica's binlog holds the primary's
// transactions with their GTIDs, as a promoted replica's does in
// production. m must have its own server_id (Options.ServerID).
func (m *Server) ReplicateFrom(ctx context.Context, primary *Server) error {
	if m.Flavor != primary.Flavor {
		return fmt.Errorf("testenv: a %s server cannot replicate from a %s one", m.Flavor, primary.Flavor)
	}
	if m.ServerID == primary.ServerID {
		return fmt.Errorf("testenv: the replica and its primary both have server_id %d", m.ServerID)
	}
	host, port := "'"+primary.Host+"'", strconv.Itoa(primary.Port)
	user, pw := "'"+mysql.Escape(primary.User)+"'", "'"+mysql.Escape(primary.Password)+"'"
	var stmts []string
	if m.Flavor == position.MySQL {
		stmts = []string{
			"CHANGE REPLICATION SOURCE TO SOURCE_HOST=" + host + ", SOURCE_PORT=" + port + ", SOURCE_USER=" + user + ", SOURCE_PASSWORD=" + pw +
				", SOURCE_AUTO_POSITION=1, GET_SOURCE_PUBLIC_KEY=1, SOURCE_CONNECT_RETRY=1, SOURCE_RETRY_COUNT=86400",
			"START REPLICA",
		}
	} else {
		stmts = []string{
			"CHANGE MASTER TO MASTER_HOST=" + host + ", MASTER_PORT=" + port + ", MASTER_USER=" + user + ", MASTER_PASSWORD=" + pw +
				", MASTER_USE_GTID=slave_pos, MASTER_CONNECT_RETRY=1",
			"START SLAVE",
		}
	}
	if err := m.Exec(ctx, stmts...); err != nil {
		return err
	}
	return m.waitReplicating(ctx)
}

// replicaStatus is the part of SHOW REPLICA STATUS the tests need.
type replicaStatus struct {
	io, sql string // Replica_IO_Running / Replica_SQL_Running (Yes, No, Connecting)
	lastErr string
}

func (m *Server) replicaStatus(ctx context.Context) (replicaStatus, error) {
	stmt, prefix := "SHOW REPLICA STATUS", "Replica"
	if m.Flavor == position.MariaDB {
		stmt, prefix = "SHOW SLAVE STATUS", "Slave"
	}
	rs, err := m.Query(ctx, stmt)
	if err != nil {
		return replicaStatus{}, err
	}
	defer rs.Close()
	if rs.RowNumber() == 0 {
		return replicaStatus{}, fmt.Errorf("testenv: %s: %s is not a replica", stmt, m.Name())
	}
	col := func(name string) string {
		s, _ := rs.GetStringByName(0, name)
		return strings.Clone(s) // rs's buffer is reused once it is closed
	}
	st := replicaStatus{io: col(prefix + "_IO_Running"), sql: col(prefix + "_SQL_Running")}
	for _, c := range []string{"Last_IO_Error", "Last_SQL_Error"} {
		if e := col(c); e != "" {
			st.lastErr += c + ": " + e + " "
		}
	}
	return st, nil
}

func (m *Server) waitReplicating(ctx context.Context) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		st, err := m.replicaStatus(ctx)
		if err != nil {
			return err
		}
		if st.io == "Yes" && st.sql == "Yes" {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("testenv: %s does not replicate after 30 s (io %s, sql %s) %s", m.Name(), st.io, st.sql, st.lastErr)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// GTIDExecuted returns the transactions the server has: MySQL's
// gtid_executed, MariaDB's gtid_binlog_pos.
func (m *Server) GTIDExecuted(ctx context.Context) (string, error) {
	q := "SELECT @@GLOBAL.gtid_executed"
	if m.Flavor == position.MariaDB {
		q = "SELECT @@GLOBAL.gtid_binlog_pos"
	}
	rs, err := m.Query(ctx, q)
	if err != nil {
		return "", err
	}
	defer rs.Close()
	s, _ := rs.GetString(0, 0)
	return position.CompactGTIDs(strings.Clone(s)), nil
}

// WaitCaughtUp waits until the replica m has applied everything primary
// has logged.
func (m *Server) WaitCaughtUp(ctx context.Context, primary *Server) error {
	want, err := primary.GTIDExecuted(ctx)
	if err != nil {
		return err
	}
	wantSet, err := position.ParseGTIDSet(m.Flavor, want)
	if err != nil {
		return err
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		have, err := m.GTIDExecuted(ctx)
		if err != nil {
			return err
		}
		if haveSet, err := position.ParseGTIDSet(m.Flavor, have); err == nil && haveSet.Contains(wantSet) {
			return nil
		}
		if time.Now().After(deadline) {
			st, _ := m.replicaStatus(ctx)
			return fmt.Errorf("testenv: %s has %s after 60 s; its primary has %s %s", m.Name(), have, want, st.lastErr)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// StopReplication stops m's replication threads (or, with sqlOnly, only
// the applier: the replica goes on receiving and falls behind).
func (m *Server) StopReplication(ctx context.Context, sqlOnly bool) error {
	stmt := "STOP REPLICA"
	if m.Flavor == position.MariaDB {
		stmt = "STOP SLAVE"
	}
	if sqlOnly {
		stmt += " SQL_THREAD"
	}
	return m.Exec(ctx, stmt)
}

// StartReplication starts m's replication threads again.
func (m *Server) StartReplication(ctx context.Context) error {
	stmt := "START REPLICA"
	if m.Flavor == position.MariaDB {
		stmt = "START SLAVE"
	}
	return m.Exec(ctx, stmt)
}

// Promote makes the replica m a primary, as a failover tool does: the
// receiver stopped, every transaction it received applied (up to 30 s;
// not when the test stopped the applier, to promote a replica that lags),
// replication stopped and its configuration removed, writes allowed.
// What the replica never received is lost, as it is in production without
// semi-synchronous replication.
func (m *Server) Promote(ctx context.Context) error {
	if err := m.applyReceived(ctx); err != nil {
		return fmt.Errorf("testenv: promoting %s: %w", m.Name(), err)
	}
	stmts := []string{"STOP REPLICA", "RESET REPLICA ALL"}
	if m.Flavor == position.MariaDB {
		stmts = []string{"STOP SLAVE", "RESET SLAVE ALL"}
	}
	stmts = append(stmts, "SET GLOBAL read_only = OFF")
	if err := m.Exec(ctx, stmts...); err != nil {
		return fmt.Errorf("testenv: promoting %s: %w", m.Name(), err)
	}
	return nil
}

// applyReceived stops the replica's receiver and waits until its applier
// has applied every transaction received (MySQL's
// RECEIVED_TRANSACTION_SET, MariaDB's Gtid_IO_Pos).
func (m *Server) applyReceived(ctx context.Context) error {
	if st, err := m.replicaStatus(ctx); err != nil || st.sql != "Yes" {
		return nil // the applier was stopped on purpose (or m is no replica)
	}
	stop, query := "STOP REPLICA IO_THREAD", "SELECT RECEIVED_TRANSACTION_SET FROM performance_schema.replication_connection_status"
	wait := "SELECT WAIT_FOR_EXECUTED_GTID_SET(?, 30)" // 0 when applied, 1 on timeout
	if m.Flavor == position.MariaDB {
		stop, query = "STOP SLAVE IO_THREAD", "SHOW SLAVE STATUS"
		wait = "SELECT MASTER_GTID_WAIT(?, 30)" // 0 when applied, -1 on timeout
	}
	if err := m.Exec(ctx, stop); err != nil {
		return err
	}
	rs, err := m.Query(ctx, query)
	if err != nil {
		return err
	}
	var received string
	if rs.RowNumber() > 0 {
		if m.Flavor == position.MariaDB {
			received, _ = rs.GetStringByName(0, "Gtid_IO_Pos")
		} else {
			received, _ = rs.GetString(0, 0)
		}
		received = strings.Clone(received)
	}
	rs.Close()
	received = strings.TrimSpace(received)
	if received == "" {
		return nil
	}
	rs, err = m.Query(ctx, wait, received)
	if err != nil {
		return err
	}
	defer rs.Close()
	if r, _ := rs.GetInt(0, 0); r != 0 {
		return fmt.Errorf("the applier has not applied the received transactions %s after 30 s", received)
	}
	return nil
}

// ServerUUID returns MySQL's server_uuid, or on MariaDB the server_id as
// text (MariaDB servers have no UUID).
func (m *Server) ServerUUID(ctx context.Context) (string, error) {
	q := "SELECT @@server_uuid"
	if m.Flavor == position.MariaDB {
		q = "SELECT @@server_id"
	}
	rs, err := m.Query(ctx, q)
	if err != nil {
		return "", err
	}
	defer rs.Close()
	// A copy: go-mysql's GetString points into a buffer that is reused
	// once the result is closed (TestSourceFailover saw a later query's
	// text in place of the UUID).
	s, _ := rs.GetString(0, 0)
	return strings.Clone(strings.TrimSpace(s)), nil
}
