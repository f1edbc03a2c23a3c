package checkpoint

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/sluice-cdc/sluice/position"
)

func TestFileStoreVersions(t *testing.T) {
	ctx := context.Background()
	s := &FileStore{Path: filepath.Join(t.TempDir(), "cp.json")}
	cp, err := s.Load(ctx)
	if err != nil || cp.Version != 0 {
		t.Fatalf("empty load: %+v %v", cp, err)
	}
	cp.Sources = map[string]position.Position{"main": {File: "mysql-bin.000001", Offset: 1234, GTIDs: "0-1-5", Flavor: position.MariaDB}}
	v, err := s.Save(ctx, cp, 0)
	if err != nil || v != 1 {
		t.Fatalf("save: %d %v", v, err)
	}
	if _, err := s.Save(ctx, cp, 0); !errors.Is(err, ErrConflict) {
		t.Fatalf("stale save: want ErrConflict, got %v", err)
	}
	got, err := s.Load(ctx)
	if err != nil || got.Version != 1 || got.Sources["main"] != cp.Sources["main"] {
		t.Fatalf("load: %+v %v", got, err)
	}
	if v, err := s.Save(ctx, got, 1); err != nil || v != 2 {
		t.Fatalf("second save: %d %v", v, err)
	}
	entries, _ := os.ReadDir(filepath.Dir(s.Path))
	if len(entries) != 1 {
		t.Fatalf("temporary files left behind: %v", entries)
	}
}

func TestFileStoreCorrupt(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cp.json")
	os.WriteFile(path, []byte("{not json"), 0o644)
	_, err := (&FileStore{Path: path}).Load(context.Background())
	if !errors.Is(err, ErrCorrupt) {
		t.Fatalf("want ErrCorrupt, got %v", err)
	}
}
