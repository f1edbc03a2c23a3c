package binlog

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/go-mysql-org/go-mysql/client"
	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/go-mysql-org/go-mysql/replication"

	"github.com/sluice-cdc/sluice/position"
)

// XA transactions.
//
// Both servers binlog an XA transaction in two parts, each with a GTID of
// its own. The prepared part holds the changes and ends in an
// XA_PREPARE_LOG_EVENT; the outcome comes later as a query event
// "XA COMMIT xid" or "XA ROLLBACK xid", with any number of transactions
// in between:
//
//	MySQL:   GTID · XA START xid · rows... · XA END xid · XA_PREPARE   ...   GTID · XA COMMIT xid
//	MariaDB: GTID (FL_PREPARED_XA) · rows... · XA END xid · XA_PREPARE ...   GTID (FL_COMPLETED_XA) · XA COMMIT xid
//
// MySQL writes XA COMMIT ... ONE PHASE as one part whose XA_PREPARE event
// has its one-phase flag set; MariaDB writes it as an ordinary
// transaction.
//
// The reader does not hold a prepared part: on the stream it passes it
// over like a transaction that touched no selected table (its GTID goes
// into the positions after it), remembering only where it starts. At the
// XA COMMIT it re-reads the prepared part from the binlog (a replication
// connection at the part's file position, ended at its XA_PREPARE event),
// decodes it in chunks like any transaction, and delivers it as the
// commit's transaction (Txn.GTID the commit's, Txn.PrepareGTID the
// prepared part's, End after the XA COMMIT); then it streams on after the
// XA COMMIT. A rolled back part is never read again. After a restart, or
// when the part was prepared before the start position, the reader finds
// the part with SHOW BINLOG EVENTS, scanning the binlog files back from
// the commit. So a position saved between PREPARE and COMMIT resumes
// correctly: nothing of the prepared part was delivered, and it is read
// again when its commit arrives. Memory stays bounded by ChunkBytes.

// mariadbFlPreparedXA is the MariaDB GTID event flag of an XA
// transaction's prepared part (FL_PREPARED_XA).
const mariadbFlPreparedXA = 0x40

// xaPrepared is a prepared part seen on the stream.
type xaPrepared struct {
	start   position.Position // file and offset of its first event
	gtid    string
	touched bool // it changes a selected table
}

// xaFetch is a re-read of a prepared part, delivered as the commit's
// transaction.
type xaFetch struct {
	xid        string
	from       position.Position // the prepared part's first event
	gtid       string            // the commit's
	prepare    string            // the prepared part's GTID
	serverID   uint32
	commitTime time.Time
	end        position.Position // after the commit
	gset       position.GTIDSet  // the GTID state at end
	done       bool
}

// errXAFetch ends a stream so that the loop re-reads a prepared part
// (r.fetch set), or streams on after one was delivered.
var errXAFetch = errors.New("binlog: re-reading an XA transaction's prepared part")

// xaPrepareEvent is the body of an XA_PREPARE_LOG_EVENT (MySQL and
// MariaDB alike): one_phase (1 byte), then the XID: formatID (4),
// gtrid_length (4), bqual_length (4), gtrid and bqual bytes.
type xaPrepareEvent struct {
	onePhase bool
	xid      string // as the server writes it in XA statements: X'..',X'..',N
}

func parseXAPrepare(body []byte) (xaPrepareEvent, error) {
	if len(body) < 13 {
		return xaPrepareEvent{}, fmt.Errorf("XA_PREPARE event of %d bytes, want at least 13", len(body))
	}
	formatID := int32(binary.LittleEndian.Uint32(body[1:]))
	gl, bl := binary.LittleEndian.Uint32(body[5:]), binary.LittleEndian.Uint32(body[9:])
	if gl > 64 || bl > 64 || uint64(len(body)-13) < uint64(gl)+uint64(bl) {
		return xaPrepareEvent{}, fmt.Errorf("XA_PREPARE event: an XID of %d+%d bytes in %d bytes (at most 64+64)", gl, bl, len(body)-13)
	}
	data := body[13:]
	return xaPrepareEvent{onePhase: body[0] != 0, xid: formatXID(data[:gl], data[gl:gl+bl], formatID)}, nil
}

// formatXID renders an XID the way both servers write it into XA
// statements in the binlog: X'6131',X”,1.
func formatXID(gtrid, bqual []byte, formatID int32) string {
	return "X'" + strings.ToUpper(hex.EncodeToString(gtrid)) + "',X'" + strings.ToUpper(hex.EncodeToString(bqual)) + "'," + strconv.FormatInt(int64(formatID), 10)
}

// xaStatement recognises XA statements in query events: the verb (START,
// END, COMMIT, ROLLBACK, PREPARE) and the XID as written in the binlog.
func xaStatement(q string) (verb, xid string, ok bool) {
	if len(q) < 3 || !strings.EqualFold(q[:3], "XA ") {
		return "", "", false
	}
	verb, rest, _ := strings.Cut(strings.TrimSpace(q[3:]), " ")
	verb = strings.ToUpper(verb)
	rest = strings.TrimSpace(rest)
	if i := strings.LastIndex(strings.ToUpper(rest), " ONE PHASE"); i >= 0 {
		rest = rest[:i]
	}
	return verb, normalizeXID(rest), true
}

// normalizeXID upper-cases the hex digits of X'..' literals.
func normalizeXID(x string) string {
	b := []byte(x)
	in := false
	for i, c := range b {
		switch {
		case c == '\'':
			in = !in
		case in && c >= 'a' && c <= 'f':
			b[i] = c - 'a' + 'A'
		}
	}
	return string(b)
}

// xaPrepare handles an XA_PREPARE_LOG_EVENT.
func (r *Reader) xaPrepare(hdr *replication.EventHeader, body []byte, h *eventHandler) error {
	ev, err := parseXAPrepare(body)
	if err != nil {
		return fmt.Errorf("%w: at %s:%d: %v", ErrCorrupt, r.file, hdr.LogPos-hdr.EventSize, err)
	}
	if !r.asm.open {
		return nil
	}
	if r.fetch != nil {
		// The end of the prepared part being re-read: deliver it as the
		// commit's transaction.
		r.fetch.done = true
		if err := r.commit(hdr, h); err != nil {
			return err
		}
		return errXAFetch
	}
	if ev.onePhase && r.asm.xaTouched {
		// MySQL's XA COMMIT ... ONE PHASE: committed here. Its changes
		// were passed over (whether it would be one phase was not known
		// at its start): read them again.
		end := r.here(hdr.LogPos)
		return r.startFetch(ev.xid, r.asm.start, "", end)
	}
	if !ev.onePhase {
		if r.prepared == nil {
			r.prepared = map[string]xaPrepared{}
		}
		r.prepared[ev.xid] = xaPrepared{start: r.asm.start, gtid: r.asm.gtid, touched: r.asm.xaTouched}
	}
	// Not delivered now: like a transaction without selected changes.
	r.asm.txn = nil
	return r.commit(hdr, h)
}

// xaOutcome handles XA COMMIT and XA ROLLBACK query events.
func (r *Reader) xaOutcome(hdr *replication.EventHeader, verb, xid string, h *eventHandler) error {
	p, known := r.prepared[xid]
	delete(r.prepared, xid)
	if verb == "ROLLBACK" || known && !p.touched {
		return r.commit(hdr, h)
	}
	end := r.here(hdr.LogPos)
	if !known {
		// Prepared before this reader's start (a restart, or a position
		// saved between PREPARE and COMMIT): find it in the binlog.
		if r.emit != nil {
			return fmt.Errorf("binlog: %s:%d: XA COMMIT %s of a transaction prepared before the files given (its XA PREPARE is in none of them), so its changes cannot be read: give the files from the one holding its XA PREPARE on, or read from the server (sluice tail), which finds it", r.file, hdr.LogPos-hdr.EventSize, xid)
		}
		start, err := r.locatePrepared(xid, position.Position{File: r.file, Offset: hdr.LogPos - hdr.EventSize})
		if err != nil {
			return err
		}
		p = xaPrepared{start: start}
	}
	return r.startFetch(xid, p.start, p.gtid, end)
}

// startFetch ends the stream to re-read the prepared part at from as the
// transaction that ends at end (the current one, whose GTID it takes).
// Reading files, the file reader reads the part again from its file
// (fileReader.fetchPrepared).
func (r *Reader) startFetch(xid string, from position.Position, prepare string, end position.Position) error {
	gset := r.gset.Clone()
	if r.asm.gtid != "" {
		if gset.IsZero() {
			gset, _ = position.ParseGTIDSet(r.flavor, "")
		}
		if err := gset.Add(r.asm.gtid); err != nil {
			return err
		}
	}
	end.GTIDs = gset.String()
	r.fetch = &xaFetch{xid: xid, from: from, gtid: r.asm.gtid, prepare: prepare, serverID: r.asm.serverID, commitTime: r.asm.commit, end: end, gset: gset}
	r.asm = assembly{}
	return errXAFetch
}

// locatePrepared finds where the prepared part of xid starts, scanning
// the binlog back from before (the commit's position) with SHOW BINLOG
// EVENTS, a page at a time.
func (r *Reader) locatePrepared(xid string, before position.Position) (position.Position, error) {
	ctx, cancel := context.WithTimeout(r.ctx, 10*time.Minute)
	defer cancel()
	c, err := r.dial(ctx)
	if err != nil {
		return position.Position{}, err
	}
	defer c.Close()
	files, err := binlogFiles(c)
	if err != nil {
		return position.Position{}, err
	}
	want := "XA PREPARE " + xid
	for i := len(files) - 1; i >= 0; i-- {
		name := files[i].name
		if name > before.File {
			continue
		}
		found, err := scanPrepared(c, name, want, before)
		if err != nil {
			return position.Position{}, err
		}
		if found != 0 {
			r.log().Info("found an XA transaction's prepared part in the binlog", "xid", xid, "at", name+":"+strconv.FormatUint(uint64(found), 10), "commit", before.String())
			return position.Position{File: name, Offset: found, Flavor: r.flavor, Server: r.server.Identity}, nil
		}
	}
	return position.Position{}, fmt.Errorf("%w: XA COMMIT %s at %s: its prepared part (XA PREPARE) is in no binlog file the server still has (oldest: %s); its changes cannot be read. Take a new snapshot of the tables it changed", ErrPurged, xid, before, files[0].name)
}

// scanPrepared returns the start of the last prepared part named want
// ("XA PREPARE xid") in file before the position before (0: none).
func scanPrepared(c *client.Conn, file, want string, before position.Position) (uint32, error) {
	page := showEventsPage
	var from uint64 = 4
	var lastStart, found uint32
	for {
		rs, err := c.Execute(fmt.Sprintf("SHOW BINLOG EVENTS IN '%s' FROM %d LIMIT %d", mysql.Escape(file), from, page))
		if err != nil {
			return 0, fmt.Errorf("binlog: looking for an XA transaction's prepared part: SHOW BINLOG EVENTS IN '%s': %w", file, brief(err))
		}
		n := rs.RowNumber()
		for i := 0; i < n; i++ {
			pos, _ := rs.GetUint(i, 1)
			if file == before.File && pos >= uint64(before.Offset) {
				rs.Close()
				return found, nil
			}
			typ := resultString(rs, i, 2)
			switch {
			case strings.HasPrefix(typ, "Gtid") || strings.HasPrefix(typ, "Anonymous_Gtid"):
				lastStart = uint32(pos)
			case typ == "XA_prepare" && strings.EqualFold(normalizeXID(resultString(rs, i, 5)), want):
				found = lastStart
			}
			end, _ := rs.GetUint(i, 4)
			from = end
		}
		rs.Close()
		if n < page || from == 0 {
			return found, nil
		}
	}
}
