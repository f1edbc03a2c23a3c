package checkpoint

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/sluice-cdc/sluice/binlog"
	"github.com/sluice-cdc/sluice/internal/historytest"
)

func TestFileSchemaStore(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ckpt.json.schema.main")
	historytest.Check(t, &FileSchemaStore{Path: path}, func() binlog.HistoryStore { return &FileSchemaStore{Path: path} })
	// A line cut short by a crash is dropped; the rest loads.
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(`{"entry":{"pos":{"file":"mysql-bin.0000`)
	f.Close()
	s := &FileSchemaStore{Path: path}
	if _, entries, err := s.LoadSchema(context.Background()); err != nil || len(entries) != 1 {
		t.Fatalf("torn line: %+v %v", entries, err)
	}
	os.WriteFile(path, []byte("{not json\n"), 0o644)
	if _, _, err := s.LoadSchema(context.Background()); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("garbage: %v", err)
	}
}
