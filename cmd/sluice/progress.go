package main

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/sluice-cdc/sluice/snapshot"
)

// progressReporter shows snapshot progress: a live bar per table on a
// terminal, a log line otherwise.
type progressReporter struct {
	w     io.Writer
	tty   bool
	lines int // lines drawn last time, to redraw in place
}

func newProgressReporter() *progressReporter {
	fi, err := os.Stderr.Stat()
	return &progressReporter{w: os.Stderr, tty: err == nil && fi.Mode()&os.ModeCharDevice != 0}
}

func (p *progressReporter) every() time.Duration {
	if p.tty {
		return 500 * time.Millisecond
	}
	return 5 * time.Second
}

func (p *progressReporter) report(tables []snapshot.TableProgress) {
	if !p.tty {
		for _, t := range tables {
			rate, eta := rateETA(t)
			slog.Info("snapshot progress", "table", t.Table, "rows", t.Rows, "estimated", t.Estimated, "rows_per_sec", int64(rate), "eta", eta, "done", t.Done)
		}
		return
	}
	var b strings.Builder
	if p.lines > 0 {
		fmt.Fprintf(&b, "\x1b[%dA", p.lines) // back to the first line drawn
	}
	for _, t := range tables {
		b.WriteString("\x1b[2K")
		b.WriteString(progressLine(t))
		b.WriteByte('\n')
	}
	p.lines = len(tables)
	io.WriteString(p.w, b.String())
}

// progressLine renders one table: name, bar, rows done / estimated, rate, ETA.
func progressLine(t snapshot.TableProgress) string {
	const width = 24
	frac := 0.0
	if t.Done {
		frac = 1
	} else if t.Estimated > 0 {
		frac = min(float64(t.Rows)/float64(t.Estimated), 0.99)
	}
	filled := int(frac * width)
	bar := strings.Repeat("█", filled) + strings.Repeat("░", width-filled)
	rate, eta := rateETA(t)
	state := "ETA " + eta
	if t.Done {
		state = "done"
	}
	return fmt.Sprintf("%-32s %s %10d / ~%-10d %9.0f rows/s  %s", t.Table, bar, t.Rows, t.Estimated, rate, state)
}

func rateETA(t snapshot.TableProgress) (float64, string) {
	end := time.Now()
	if t.Done && !t.Finished.IsZero() {
		end = t.Finished
	}
	secs := end.Sub(t.Started).Seconds()
	if secs <= 0 || t.Rows == 0 {
		return 0, "?"
	}
	rate := float64(t.Rows) / secs
	if t.Done {
		return rate, "0s"
	}
	left := t.Estimated - t.Rows
	if left <= 0 {
		return rate, "soon"
	}
	return rate, (time.Duration(float64(left)/rate) * time.Second).Round(time.Second).String()
}
