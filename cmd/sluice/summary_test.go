package main

import (
	"io"
	"strings"
	"testing"
	"time"

	"github.com/sluice-cdc/sluice/binlog"
)

// The summary line never shows a negative rate or NaN/Inf: DDL in the
// first chunk (it counted toward first_rows but not rows), no time
// elapsed, and a clock before the start.
func TestSummaryNeverNegative(t *testing.T) {
	bad := func(s string) bool {
		return strings.Contains(s, "=-") || strings.Contains(s, "NaN") || strings.Contains(s, "Inf")
	}
	p := newPrinter(io.Discard, outputOpts{format: "none"})
	ddl := binlog.Change{Op: binlog.OpDDL}
	if err := p.txn(&binlog.Txn{Changes: []binlog.Change{ddl, ddl, ddl}, Last: true}); err != nil {
		t.Fatal(err)
	}
	if err := p.txn(&binlog.Txn{Changes: []binlog.Change{{Op: binlog.OpInsert}}, Last: true}); err != nil {
		t.Fatal(err)
	}
	for _, now := range []time.Time{time.Now().Add(time.Second), p.start, p.start.Add(-time.Hour), p.first} {
		if s := p.summaryAt(now); bad(s) {
			t.Errorf("summary at %v: %s", now.Sub(p.start), s)
		}
	}
	s := p.summaryAt(p.first.Add(2 * time.Second))
	if !strings.Contains(s, "rows=1 txns=2 ") || !strings.Contains(s, "first_rows=1") || !strings.Contains(s, "steady_rows_per_sec=0 ") {
		t.Errorf("summary: %s", s)
	}
	// Rows after the first chunk give the steady rate.
	if err := p.txn(&binlog.Txn{Changes: []binlog.Change{{Op: binlog.OpInsert}, {Op: binlog.OpDelete}, ddl}, Last: true}); err != nil {
		t.Fatal(err)
	}
	if s := p.summaryAt(p.first.Add(2 * time.Second)); !strings.Contains(s, "rows=3 ") || !strings.Contains(s, "steady_rows_per_sec=1 ") {
		t.Errorf("summary: %s", s)
	}
	// Nothing read at all.
	if s := newPrinter(io.Discard, outputOpts{format: "none"}).summaryAt(time.Now()); bad(s) {
		t.Errorf("empty summary: %s", s)
	}
}
