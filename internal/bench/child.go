package bench

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/go-mysql-org/go-mysql/replication"

	"github.com/sluice-cdc/sluice/binlog"
	"github.com/sluice-cdc/sluice/position"
)

// Child reads the range from..to of the server at url with a peer reader:
// "go-mysql" decodes rows with go-mysql's default decoder, "raw" transfers
// events without decoding them. It returns the summary line.
func Child(ctx context.Context, mode, url, from, to string) (string, error) {
	cfg, err := binlog.ParseSourceURL(url)
	if err != nil {
		return "", err
	}
	start, err := position.ParseFilePos(from)
	if err != nil {
		return "", err
	}
	stop, err := position.ParseFilePos(to)
	if err != nil {
		return "", err
	}
	host, portStr, _ := net.SplitHostPort(cfg.Addr)
	port, _ := strconv.Atoi(portStr)
	sc := replication.BinlogSyncerConfig{
		ServerID: 77001, Flavor: "mariadb", Host: host, Port: uint16(port),
		User: cfg.User, Password: cfg.Password, DisableRetrySync: true,
	}
	switch mode {
	case "go-mysql":
	case "raw":
		sc.RawModeEnabled = true
	default:
		return "", fmt.Errorf("bench child: unknown mode %q (want go-mysql or raw)", mode)
	}
	syncer := replication.NewBinlogSyncer(sc)
	defer syncer.Close()
	t0 := time.Now()
	s, err := syncer.StartSync(mysql.Position{Name: start.File, Pos: start.Offset})
	if err != nil {
		return "", err
	}
	var rows, bytes, firstRows int64
	var first time.Time
	file := start.File
	for {
		ev, err := s.GetEvent(ctx)
		if err != nil {
			return "", err
		}
		bytes += int64(len(ev.RawData))
		switch e := ev.Event.(type) {
		case *replication.RotateEvent:
			file = string(e.NextLogName)
		case *replication.RowsEvent:
			n := int64(len(e.Rows))
			if e.Type() == replication.EnumRowsEventTypeUpdate {
				n /= 2
			}
			rows += n
			if first.IsZero() {
				first, firstRows = time.Now(), n
			}
		case *replication.GenericEvent: // raw mode: rows are not decoded
			if first.IsZero() && ev.Header.EventType >= replication.WRITE_ROWS_EVENTv1 && ev.Header.EventType <= replication.DELETE_ROWS_EVENTv2 {
				first = time.Now()
			}
		}
		if file > stop.File || file == stop.File && ev.Header.LogPos >= stop.Offset {
			break
		}
	}
	now := time.Now()
	steady := 0.0
	if d := now.Sub(first).Seconds(); !first.IsZero() && d > 0 {
		steady = float64(rows-firstRows) / d
	}
	return fmt.Sprintf("rows=%d bytes=%d seconds=%.3f steady_rows_per_sec=%.0f steady_seconds=%.3f first_rows=%d", rows, bytes, now.Sub(t0).Seconds(), steady, now.Sub(first).Seconds(), firstRows), nil
}
