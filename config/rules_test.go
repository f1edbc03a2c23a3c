package config

import (
	"reflect"
	"slices"
	"testing"

	"github.com/sluice-cdc/sluice/binlog"
	"github.com/sluice-cdc/sluice/internal/confdef"
	"github.com/sluice-cdc/sluice/pipeline"
	"github.com/sluice-cdc/sluice/snapshot"
)

// TestLibraryRulesAgree: where a library package also checks a key for
// its Go callers (binlog, snapshot, pipeline), it takes exactly the values
// of the key's enum tag, so that the file and the library cannot drift.
func TestLibraryRulesAgree(t *testing.T) {
	src := reflect.TypeOf(Source{})
	for _, v := range confdef.Enum(src, "on_statement_change") {
		if err := binlog.CheckOnStatementChange(v); err != nil {
			t.Errorf("on_statement_change %s: binlog refuses it: %v", v, err)
		}
	}
	if binlog.CheckOnStatementChange("halt") == nil {
		t.Error("binlog takes on_statement_change halt, which the definition does not")
	}
	for _, v := range confdef.Enum(src, "snapshot.mode") {
		if _, err := snapshot.ParseMode(v); err != nil {
			t.Errorf("snapshot.mode %s: package snapshot refuses it: %v", v, err)
		}
	}
	if _, err := snapshot.ParseMode("sometimes"); err == nil {
		t.Error("package snapshot takes mode sometimes, which the definition does not")
	}
	if got, want := confdef.Enum(reflect.TypeOf(Align{}), "on_stall"), []string{pipeline.StallProceed, pipeline.StallFail}; !slices.Equal(got, want) {
		t.Errorf("align.on_stall: the definition takes %v, package pipeline %v", got, want)
	}
	// The static defaults the file gets are the ones the libraries would
	// fill in for a zero value.
	c, err := Parse("x.yaml", []byte("pipeline: p\nsource: {url: mysql://u:p@h:1}\n"), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if s := c.Source; s.Heartbeat.String() != "1s" || s.CatchUpWait.String() != "30s" || s.Start != binlog.StartCurrent ||
		s.OnStatementChange != binlog.StatementStop || snapshot.Mode(s.Snapshot.Mode) != snapshot.ModeInitial {
		t.Errorf("source defaults: %+v", s)
	}
	if n := c.Source.Snapshot.ChunkRows; n != 0 {
		t.Errorf("snapshot.chunk_rows %d: its default is computed by package snapshot (16384, 4096 while streaming), so it must stay 0", n)
	}
	if a := c.Align; a.MaxWait.String() != "30s" || a.OnStall != pipeline.StallProceed || a.SampleEvery.String() != "250ms" || a.MaxSkew != 0 {
		t.Errorf("align defaults: %+v", a)
	}
	if c.Buffer.BatchBytes != 1<<20 || c.Buffer.MaxBytes != 64<<20 || c.Checkpoint.Interval.String() != "1s" || c.Log != (Log{Level: "info", Format: "text"}) {
		t.Errorf("buffer %+v, checkpoint %+v, log %+v", c.Buffer, c.Checkpoint, c.Log)
	}
}
