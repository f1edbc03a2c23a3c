package binlog_test

import (
	"testing"
	"time"

	"github.com/sluice-cdc/sluice/binlog"
)

// The calendar arithmetic agrees with Go's time package from year 1 to
// 9999, both ways.
func TestCivilDays(t *testing.T) {
	start := time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC)
	end := time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC)
	for tm := start; !tm.After(end); tm = tm.AddDate(0, 0, 7) {
		days := tm.Unix() / 86400
		if tm.Unix()%86400 != 0 {
			days--
		}
		y, m, d := binlog.CivilFromDays(days)
		if y != int64(tm.Year()) || m != int(tm.Month()) || d != tm.Day() {
			t.Fatalf("CivilFromDays(%d) = %d-%d-%d, want %s", days, y, m, d, tm.Format(time.DateOnly))
		}
		if got := binlog.DaysFromCivil(y, m, d); got != days {
			t.Fatalf("DaysFromCivil(%s) = %d, want %d", tm.Format(time.DateOnly), got, days)
		}
	}
	ts := time.Date(2024, 2, 29, 23, 59, 58, 123456000, time.UTC)
	want := binlog.DateTime{Date: binlog.Date{Year: 2024, Month: 2, Day: 29}, Hour: 23, Minute: 59, Second: 58, Micro: 123456}
	if got := binlog.UTCDateTime(ts.Unix(), 123456); got != want {
		t.Fatalf("UTCDateTime = %+v, want %+v", got, want)
	}
	if got := binlog.UTCDateTime(0, 0); got != (binlog.DateTime{}) {
		t.Fatalf("UTCDateTime(0, 0) = %+v, want the zero DATETIME", got)
	}
}
