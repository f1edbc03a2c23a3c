package binlog

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/go-mysql-org/go-mysql/client"
	"github.com/go-mysql-org/go-mysql/mysql"

	"github.com/sluice-cdc/sluice/internal/rawconn"
	"github.com/sluice-cdc/sluice/mysqlconn"
	"github.com/sluice-cdc/sluice/position"
)

// Positions on the server: where the binlog ends now, the GTID state at a
// file position, and whether a saved position can still be resumed.

// BinlogPosition reads the server's current binlog file and offset (and,
// on MySQL, Executed_Gtid_Set) with the status statement of its release
// (SHOW BINARY LOG STATUS on MySQL 8.2 and later, SHOW MASTER STATUS
// before and on MariaDB).
//
// On MySQL the GTID set and the offset are read one after the other, not
// together: under concurrent commits the set can lack a transaction the
// offset already includes. Use CurrentPosition for a position whose GTID
// state matches its offset, unless writes are blocked (FLUSH TABLES WITH
// READ LOCK) while reading.
func BinlogPosition(conn *mysqlconn.Conn) (position.Position, error) {
	c := rawconn.Raw(conn)
	v, err := ParseServerVersion(c.GetServerVersion())
	if err != nil {
		return position.Position{}, err
	}
	return binlogStatus(c, v)
}

// ServerIdentity returns the identity of c's server as positions name it
// (position.Position.Server): MySQL's server_uuid, MariaDB's server_id in
// decimal.
func ServerIdentity(c *mysqlconn.Conn) (string, error) { return serverIdentity(rawconn.Raw(c)) }

func serverIdentity(c *client.Conn) (string, error) {
	v, err := ParseServerVersion(c.GetServerVersion())
	if err != nil {
		return "", err
	}
	q := "SELECT @@server_id"
	if v.mysql() {
		q = "SELECT @@server_uuid"
	}
	rs, err := c.Execute(q)
	if err != nil {
		return "", fmt.Errorf("binlog: reading the server's identity (%s): %w", q, brief(err))
	}
	defer rs.Close()
	return strings.TrimSpace(resultString(rs, 0, 0)), nil
}

func binlogStatus(c *client.Conn, v ServerVersion) (position.Position, error) {
	var p position.Position
	stmt := v.BinlogStatusStatement()
	rs, err := c.Execute(stmt)
	if err != nil {
		var myErr *mysql.MyError
		if errors.As(err, &myErr) && myErr.Code == mysql.ER_SPECIFIC_ACCESS_DENIED_ERROR {
			return p, fmt.Errorf("%w: the user needs %s to read the current binlog position (%s): %s (the server said: %s)",
				ErrPrivilege, v.monitorPrivilege(), stmt, v.replicationGrant("<user>"), myErr.Message)
		}
		return p, fmt.Errorf("binlog: reading the current binlog position (%s): %w", stmt, brief(err))
	}
	defer rs.Close()
	if rs.RowNumber() == 0 {
		return p, fmt.Errorf("%w: %s is empty: binary logging is off", ErrServerConfig, stmt)
	}
	p.File = resultString(rs, 0, 0)
	off, _ := rs.GetUint(0, 1)
	p.Offset = uint32(off)
	if len(rs.Fields) >= 5 { // MySQL's Executed_Gtid_Set (MariaDB has 4 columns)
		p.GTIDs = position.CompactGTIDs(resultString(rs, 0, 4))
	}
	p.Flavor = v.Flavor
	return p, nil
}

// CurrentPosition returns the server's current end of binlog as a whole
// position: file, offset, and the GTID state there, consistent with each
// other, in the server's flavor.
//
// MySQL: performance_schema.log_status, which reads the binlog position
// and gtid_executed together while commits wait (MySQL 8.0.17 and later,
// with BACKUP_ADMIN); without that privilege, the status statement's
// offset and the GTID state at that offset as GTIDAt computes it.
// MariaDB: SHOW MASTER STATUS and BINLOG_GTID_POS.
func CurrentPosition(conn *mysqlconn.Conn) (position.Position, error) {
	c := rawconn.Raw(conn)
	v, err := ParseServerVersion(c.GetServerVersion())
	if err != nil {
		return position.Position{}, err
	}
	return currentPosition(c, v)
}

func currentPosition(c *client.Conn, v ServerVersion) (position.Position, error) {
	if v.hasLogStatus() {
		if p, err := logStatus(c); err == nil {
			p.Flavor = v.Flavor
			return p, nil
		}
		// Most likely no BACKUP_ADMIN: compute the state instead.
	}
	p, err := binlogStatus(c, v)
	if err != nil {
		return p, err
	}
	if p.GTIDs, err = gtidAt(c, v, p); err != nil {
		return p, err
	}
	return p, nil
}

// logStatus reads MySQL's performance_schema.log_status.
func logStatus(c *client.Conn) (position.Position, error) {
	rs, err := c.Execute("SELECT LOCAL FROM performance_schema.log_status")
	if err != nil {
		return position.Position{}, err
	}
	defer rs.Close()
	if rs.RowNumber() == 0 {
		return position.Position{}, errors.New("performance_schema.log_status is empty")
	}
	var local struct {
		GTIDs  string `json:"gtid_executed"`
		File   string `json:"binary_log_file"`
		Offset uint32 `json:"binary_log_position"`
	}
	if err := json.Unmarshal([]byte(resultString(rs, 0, 0)), &local); err != nil {
		return position.Position{}, fmt.Errorf("performance_schema.log_status: %w", err)
	}
	if local.File == "" {
		return position.Position{}, fmt.Errorf("%w: performance_schema.log_status names no binlog file: binary logging is off", ErrServerConfig)
	}
	return position.Position{File: local.File, Offset: local.Offset, GTIDs: position.CompactGTIDs(local.GTIDs)}, nil
}

// GTIDAt returns the server's whole GTID state at the file position p:
// every transaction the server had executed when it wrote p, not only
// those of p's file. p must be the start of a binlog file (offset 4) or
// the end of a whole transaction; elsewhere GTIDAt fails with
// ErrPositionUnknown.
//
// MariaDB: BINLOG_GTID_POS(file, pos). MySQL has no such function: the
// state is the file's Previous_gtids (the state when the file was
// started) plus the GTID of every transaction that ends at or before p in
// the file, read with SHOW BINLOG EVENTS (REPLICATION SLAVE), page by
// page, so its cost grows with p's offset in its file (a 1 GiB binlog
// takes some seconds). On MySQL with gtid_mode=OFF the state is empty.
//
// The connection stays usable (a transaction open on it stays open), so a
// snapshot can call it on its coordinating connection.
func GTIDAt(conn *mysqlconn.Conn, p position.Position) (string, error) {
	c := rawconn.Raw(conn)
	v, err := ParseServerVersion(c.GetServerVersion())
	if err != nil {
		return "", err
	}
	return gtidAt(c, v, p)
}

func gtidAt(c *client.Conn, v ServerVersion, p position.Position) (string, error) {
	if v.mysql() {
		return mysqlGTIDAt(c, p)
	}
	rs, err := c.Execute("SELECT BINLOG_GTID_POS(?, ?)", p.File, p.Offset)
	if err != nil {
		return "", fmt.Errorf("binlog: BINLOG_GTID_POS(%s): %w", p, brief(err))
	}
	defer rs.Close()
	if null, _ := rs.IsNull(0, 0); null {
		return "", fmt.Errorf("%w: %s:%d is not a position in the server's binlogs (BINLOG_GTID_POS is NULL: no such file, or the offset is past its end or not where an event starts)", ErrPositionUnknown, p.File, p.Offset)
	}
	return resultString(rs, 0, 0), nil
}

// showEventsPage is the number of events one SHOW BINLOG EVENTS reads
// (a variable for tests, which page in threes).
var showEventsPage = 10000

// mysqlGTIDAt computes the GTID state at p from the events of p's file.
func mysqlGTIDAt(c *client.Conn, p position.Position) (string, error) {
	if p.Offset < 4 {
		return "", fmt.Errorf("%w: %s:%d: a binlog position is 4 or more", ErrPositionUnknown, p.File, p.Offset)
	}
	st := gtidScan{}
	set, _ := position.ParseGTIDSet(position.MySQL, "")
	st.set = set
	next := uint32(4) // where the next event must start
	page := showEventsPage
	for {
		q := fmt.Sprintf("SHOW BINLOG EVENTS IN '%s' FROM %d LIMIT %d", mysql.Escape(p.File), next, page)
		rs, err := c.Execute(q)
		if err != nil {
			var myErr *mysql.MyError
			if errors.As(err, &myErr) && myErr.Code == mysql.ER_ERROR_WHEN_EXECUTING_COMMAND && strings.Contains(strings.ToLower(myErr.Message), "could not find target log") {
				return "", fmt.Errorf("%w: the server has no binlog file %s", ErrPositionUnknown, p.File)
			}
			if errors.As(err, &myErr) && myErr.Code == mysql.ER_ERROR_WHEN_EXECUTING_COMMAND && strings.Contains(strings.ToLower(myErr.Message), "truncated in the middle of event") && page > 1 {
				// A page reaching past p into the active file's tail,
				// which the server is still writing: the events up to p
				// are whole, so read them in smaller pages.
				page = max(1, page/16)
				continue
			}
			return "", fmt.Errorf("binlog: reading the events of %s to find the GTID state at %s:%d: %w", p.File, p.File, p.Offset, brief(err))
		}
		rows := rs.RowNumber()
		for i := 0; i < rows; i++ {
			pos, _ := rs.GetUint(i, 1)
			end, _ := rs.GetUint(i, 4)
			typ := resultString(rs, i, 2)
			if pos == end && uint32(pos) == next && pos > 4 {
				continue // an event inside a Transaction_payload, shown after it
			}
			if uint32(pos) != next {
				rs.Close()
				return "", fmt.Errorf("%w: SHOW BINLOG EVENTS of %s listed an event at %d where one should start at %d", ErrCorrupt, p.File, pos, next)
			}
			if st.reached || uint32(pos) == p.Offset {
				if !st.reached && st.inTxn {
					rs.Close()
					return "", fmt.Errorf("%w: %s:%d is inside a transaction (it began at %d); a start position must be where a transaction ends", ErrPositionUnknown, p.File, p.Offset, st.began)
				}
				st.reached = true
				if typ != "Format_desc" && typ != "Previous_gtids" {
					rs.Close()
					return st.set.String(), nil
				}
			}
			if !st.reached && uint32(pos) > p.Offset {
				rs.Close()
				return "", fmt.Errorf("%w: %s:%d is inside the %s event that spans %d to %d, not where an event starts", ErrPositionUnknown, p.File, p.Offset, typ, pos, end)
			}
			if err := st.event(typ, resultString(rs, i, 5), uint32(pos)); err != nil {
				rs.Close()
				return "", fmt.Errorf("%w: event at %s:%d: %v", ErrCorrupt, p.File, pos, err)
			}
			next = uint32(end)
		}
		rs.Close()
		if rows < showEventsPage {
			break // the end of the file (so far)
		}
	}
	switch {
	case st.reached || next == p.Offset && !st.inTxn:
		return st.set.String(), nil
	case next == p.Offset:
		return "", fmt.Errorf("%w: %s:%d is inside a transaction that is still being written (it began at %d)", ErrPositionUnknown, p.File, p.Offset, st.began)
	}
	return "", fmt.Errorf("%w: %s:%d is past the end of the file, which has %d bytes", ErrPositionUnknown, p.File, p.Offset, next)
}

// gtidScan follows transactions through the events SHOW BINLOG EVENTS
// lists: a transaction starts at a GTID event and ends at its XID, its
// COMMIT, its DDL statement, its XA PREPARE, or with its compressed
// Transaction_payload.
type gtidScan struct {
	set     position.GTIDSet
	inTxn   bool
	begun   bool   // BEGIN (or XA START) seen
	gtid    string // of the open transaction ("" when anonymous)
	began   uint32 // where the open transaction began
	reached bool   // the position asked for was passed
}

func (s *gtidScan) event(typ, info string, pos uint32) error {
	switch {
	case typ == "Previous_gtids":
		g, err := position.ParseGTIDSet(position.MySQL, position.CompactGTIDs(strings.TrimSpace(info)))
		if err != nil {
			return err
		}
		s.set = g
	case typ == "Anonymous_Gtid":
		s.inTxn, s.begun, s.gtid, s.began = true, false, "", pos
	case strings.HasPrefix(typ, "Gtid"): // Gtid, Gtid_tagged_log_event
		// Info: SET @@SESSION.GTID_NEXT= 'uuid[:tag]:N'
		_, rest, ok := strings.Cut(info, "'")
		gtid, _, ok2 := strings.Cut(rest, "'")
		if !ok || !ok2 {
			return fmt.Errorf("GTID event without a GTID: %q", info)
		}
		s.inTxn, s.begun, s.gtid, s.began = true, false, gtid, pos
	case typ == "Query":
		q := strings.ToUpper(strings.TrimSpace(info))
		switch {
		case q == "BEGIN" || strings.HasPrefix(q, "XA START"):
			s.inTxn, s.begun = true, true
			if s.began == 0 {
				s.began = pos
			}
		case s.begun && !strings.HasPrefix(q, "COMMIT") && !strings.HasPrefix(q, "ROLLBACK"):
			// a statement inside the transaction
		default: // COMMIT, ROLLBACK, or a statement that is a transaction of its own
			return s.end()
		}
	case typ == "Xid" || typ == "XA_prepare" || typ == "Transaction_payload":
		return s.end()
	}
	return nil
}

func (s *gtidScan) end() error {
	if s.gtid != "" {
		if err := s.set.Add(s.gtid); err != nil {
			return err
		}
	}
	s.inTxn, s.begun, s.gtid, s.began = false, false, "", 0
	return nil
}

// binlogFiles lists the server's binlog files and their sizes, oldest first.
type binlogFile struct {
	name string
	size uint64
}

func binlogFiles(c *client.Conn) ([]binlogFile, error) {
	rs, err := c.Execute("SHOW BINARY LOGS")
	if err != nil {
		return nil, fmt.Errorf("binlog: SHOW BINARY LOGS: %w", brief(err))
	}
	defer rs.Close()
	files := make([]binlogFile, rs.RowNumber())
	for i := range files {
		files[i].name = resultString(rs, i, 0)
		files[i].size, _ = rs.GetUint(i, 1)
	}
	return files, nil
}

// splitBinlogName splits "mysql-bin.000012" into "mysql-bin" and 12.
func splitBinlogName(name string) (base string, n uint64, ok bool) {
	i := strings.LastIndexByte(name, '.')
	if i <= 0 {
		return name, 0, false
	}
	n, err := strconv.ParseUint(name[i+1:], 10, 64)
	return name[:i], n, err == nil
}

// locateFile checks that the file position p is on the server: ErrPurged
// when its file was purged (older than the oldest the server has),
// ErrPositionUnknown when the server never wrote that file (a later
// number, another server's name) or the file is shorter than p's offset.
func locateFile(files []binlogFile, p position.Position) error {
	if len(files) == 0 {
		return fmt.Errorf("%w: the server has no binary logs", ErrServerConfig)
	}
	for _, f := range files {
		if f.name == p.File {
			if uint64(p.Offset) > f.size {
				return fmt.Errorf("%w: %s:%d is past the end of %s, which has %d bytes", ErrPositionUnknown, p.File, p.Offset, f.name, f.size)
			}
			return nil
		}
	}
	first, last := files[0].name, files[len(files)-1].name
	have := "files are " + first + " to " + last
	if first == last {
		have = "only file is " + first
	}
	base, n, ok := splitBinlogName(p.File)
	fbase, fn, fok := splitBinlogName(first)
	_, ln, lok := splitBinlogName(last)
	switch {
	case !ok || !fok || !lok || base != fbase:
		return fmt.Errorf("%w: the server never wrote the binlog file %s: its %s (a position of another server?)", ErrPositionUnknown, p.File, have)
	case n > ln:
		return fmt.Errorf("%w: the server never wrote the binlog file %s: its newest is %s (a position of another server, or of this one before RESET BINARY LOGS?)", ErrPositionUnknown, p.File, last)
	case n < fn:
		return fmt.Errorf("%w: the binlog file %s of %s was purged; the oldest position the server still has is %s:4", ErrPurged, p.File, p, first)
	}
	return fmt.Errorf("%w: the binlog file %s of %s is missing from the server's files %s to %s (deleted by hand?); the oldest position it still has is %s:4", ErrPurged, p.File, p, first, last, first)
}

// checkGTIDs checks a saved GTID state against the server: ErrPositionUnknown
// when it holds transactions the server never executed (it is ahead of the
// server, or from another topology), ErrPurged when the server no longer
// has transactions it lacks.
func checkGTIDs(c *client.Conn, v ServerVersion, saved position.GTIDSet, oldest string) error {
	if saved.Flavor != v.Flavor {
		return fmt.Errorf("%w: the GTID state %s is a %s position, but the server is %s", ErrPositionUnknown, saved, saved.Flavor, v)
	}
	s := saved.String()
	if v.mysql() {
		lit := "'" + mysql.Escape(s) + "'"
		rs, err := c.Execute("SELECT GTID_SUBTRACT(" + lit + ", @@GLOBAL.gtid_executed), GTID_SUBTRACT(@@GLOBAL.gtid_purged, " + lit + ")")
		if err != nil {
			return fmt.Errorf("binlog: comparing the GTID state %s with the server's: %w", s, brief(err))
		}
		defer rs.Close()
		ahead := position.CompactGTIDs(resultString(rs, 0, 0))
		missing := position.CompactGTIDs(resultString(rs, 0, 1))
		if ahead != "" {
			return &behindError{missing: ahead, err: fmt.Errorf("%w: the GTID state %s holds transactions this server never executed (%s): the position is ahead of the server (its binlog lost transactions, or it was restored from a backup) or from another server; compare gtid_executed and start from a position of this server", ErrPositionUnknown, s, ahead)}
		}
		if missing != "" {
			return fmt.Errorf("%w: the server purged transactions the GTID state %s lacks (%s); the oldest position it still has is %s", ErrPurged, s, missing, oldest)
		}
		return nil
	}
	rs, err := c.Execute("SELECT @@GLOBAL.gtid_binlog_pos, @@GLOBAL.gtid_binlog_state")
	if err != nil {
		return fmt.Errorf("binlog: reading gtid_binlog_pos: %w", brief(err))
	}
	cur, state := resultString(rs, 0, 0), resultString(rs, 0, 1)
	rs.Close()
	if missing := mariaDBMissing(saved.String(), state); missing != "" {
		return &behindError{missing: missing, err: fmt.Errorf("%w: the GTID state %s is ahead of the server's binlog (gtid_binlog_pos %s): %s. The position is from another server, or this one lost transactions; start from a position of this server", ErrPositionUnknown, s, cur, missing)}
	}
	if oldest == "" {
		return nil
	}
	first, _ := position.ParseFilePos(oldest)
	start, err := gtidAt(c, v, first)
	if err != nil {
		return err
	}
	old, err := position.ParseGTIDSet(position.MariaDB, start)
	if err != nil {
		return fmt.Errorf("binlog: the GTID state of %s: %w", oldest, err)
	}
	if !saved.Contains(old) {
		return fmt.Errorf("%w: the GTID state %s is older than the server's oldest binlog, which starts at %s (gtid %s)", ErrPurged, s, oldest, start)
	}
	return nil
}

// checkResumable checks that the server can still stream from p: by its
// GTID state where it has one, else by its file. It returns the oldest
// position the server has (for messages) with the error.
func checkResumable(c *client.Conn, v ServerVersion, p position.Position) (oldest string, err error) {
	if p.Flavor != "" && p.Flavor != v.Flavor {
		return "", fmt.Errorf("%w: %s is a %s position, but the server is %s", ErrPositionUnknown, p, p.Flavor, v)
	}
	files, err := binlogFiles(c)
	if err != nil {
		return "", err
	}
	if len(files) == 0 {
		return "", fmt.Errorf("%w: the server has no binary logs", ErrServerConfig)
	}
	oldest = files[0].name + ":4"
	if p.GTIDs != "" {
		saved, err := position.ParseGTIDSet(v.Flavor, p.GTIDs)
		if err != nil {
			return oldest, err
		}
		return oldest, checkGTIDs(c, v, saved, oldest)
	}
	return oldest, locateFile(files, p)
}

// newTransactions names the transactions c's server has logged that the
// GTID state saved (of another server: the source failed over) lacks:
// errant transactions (written on the server while it was a replica, never
// on the server saved was read from) and those written since it was
// promoted. The server sends them after the saved state, so they are
// delivered.
//
// On MariaDB the server's state is the last GTID of each domain and
// server_id pair: a domain saved lacks, or a pair numbered after saved's
// GTID of its domain. A pair of another server_id numbered before it is
// not named: it is the shared history of an earlier failover, or (without
// gtid_strict_mode) an errant transaction logged before the resume point,
// which MariaDB, streaming each domain from one GTID on, does not send;
// the two cannot be told apart here (see docs/SOURCES.md).
func newTransactions(c *client.Conn, v ServerVersion, saved position.GTIDSet) (string, error) {
	s := saved.String()
	if v.mysql() {
		rs, err := c.Execute("SELECT GTID_SUBTRACT(@@GLOBAL.gtid_executed, '" + mysql.Escape(s) + "')")
		if err != nil {
			return "", fmt.Errorf("binlog: comparing the server's GTIDs with the GTID state %s: %w", s, brief(err))
		}
		defer rs.Close()
		return position.CompactGTIDs(resultString(rs, 0, 0)), nil
	}
	rs, err := c.Execute("SELECT @@GLOBAL.gtid_binlog_state")
	if err != nil {
		return "", fmt.Errorf("binlog: reading gtid_binlog_state: %w", brief(err))
	}
	defer rs.Close()
	return mariaDBNew(s, resultString(rs, 0, 0)), nil
}

// mariaDBNew is newTransactions on MariaDB, from the saved GTID state (one
// GTID per domain) and the server's gtid_binlog_state.
func mariaDBNew(saved, state string) string {
	type gtid struct {
		domain, server string
		seq            uint64
	}
	parse := func(g string) (gtid, bool) {
		f := strings.Split(strings.TrimSpace(g), "-")
		if len(f) != 3 {
			return gtid{}, false
		}
		n, err := strconv.ParseUint(f[2], 10, 64)
		return gtid{f[0], f[1], n}, err == nil
	}
	at := map[string]gtid{} // domain -> saved GTID
	for g := range strings.SplitSeq(saved, ",") {
		if p, ok := parse(g); ok {
			at[p.domain] = p
		}
	}
	var out []string
	for g := range strings.SplitSeq(state, ",") {
		p, ok := parse(g)
		if !ok {
			continue
		}
		g = strings.TrimSpace(g)
		switch s, ok := at[p.domain]; {
		case !ok:
			out = append(out, "domain "+p.domain+" up to "+g)
		case p.seq <= s.seq:
		case p.server == s.server:
			out = append(out, fmt.Sprintf("%s-%s-%d to %s", p.domain, p.server, s.seq+1, g))
		default:
			out = append(out, fmt.Sprintf("server_id %s in domain %s, up to %s", p.server, p.domain, g))
		}
	}
	return strings.Join(out, "; ")
}

// behindError is a GTID state with transactions the server does not have
// (yet): missing names them.
type behindError struct {
	missing string
	err     error
}

func (e *behindError) Error() string { return e.err.Error() }
func (e *behindError) Unwrap() error { return e.err }

// mariaDBMissing names, per domain, the transactions of the GTID state
// saved that the server lacks, judged by its gtid_binlog_state (the last
// GTID of each domain and server_id pair it has logged): saved's GTID
// D-S-N is on the server when the server has logged D-S-M with M >= N.
// Sequence numbers alone do not tell: a promoted replica that missed
// transactions numbers its own writes on from the last it received.
func mariaDBMissing(saved, state string) string {
	type key struct{ domain, server string }
	logged := map[key]uint64{}
	last := map[string]string{} // domain -> its GTID with the highest sequence number
	var lastSeq = map[string]uint64{}
	for g := range strings.SplitSeq(state, ",") {
		if f := strings.Split(strings.TrimSpace(g), "-"); len(f) == 3 {
			n, _ := strconv.ParseUint(f[2], 10, 64)
			logged[key{f[0], f[1]}] = n
			if n >= lastSeq[f[0]] {
				lastSeq[f[0]], last[f[0]] = n, strings.TrimSpace(g)
			}
		}
	}
	var out []string
	for g := range strings.SplitSeq(saved, ",") {
		f := strings.Split(strings.TrimSpace(g), "-")
		if len(f) != 3 {
			continue
		}
		want, _ := strconv.ParseUint(f[2], 10, 64)
		have, ok := logged[key{f[0], f[1]}]
		switch {
		case ok && have >= want:
			continue
		case last[f[0]] == "":
			out = append(out, fmt.Sprintf("domain %s: up to %s (the server has logged nothing of this domain)", f[0], g))
		case ok:
			out = append(out, fmt.Sprintf("domain %s: %s-%s-%d to %s (the server's last of domain %s is %s)", f[0], f[0], f[1], have+1, g, f[0], last[f[0]]))
		default:
			out = append(out, fmt.Sprintf("domain %s: up to %s (the server has no transaction of server_id %s in this domain; its last is %s)", f[0], g, f[1], last[f[0]]))
		}
	}
	return strings.Join(out, "; ")
}

// PositionPurged reports whether the server can no longer stream from p
// because it purged binlogs p needs, and names the oldest position it
// still has. A position with a GTID state is judged by it (its file may
// be gone while every transaction after it is still on the server); one
// without, by its file. A position the server never had (a GTID state
// ahead of the server, a file it never wrote, an offset past a file's
// end) is an error wrapping ErrPositionUnknown, not "purged".
func PositionPurged(ctx context.Context, cfg Config, p position.Position) (purged bool, oldest string, err error) {
	c, err := dial(ctx, cfg)
	if err != nil {
		return false, "", err
	}
	defer c.Close()
	v, err := ParseServerVersion(c.GetServerVersion())
	if err != nil {
		return false, "", err
	}
	oldest, err = checkResumable(c, v, p)
	if errors.Is(err, ErrPurged) {
		return true, oldest, nil
	}
	return false, oldest, err
}
