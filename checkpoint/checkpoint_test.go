package checkpoint

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"
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
	for _, e := range entries {
		if n := e.Name(); n != "cp.json" && n != "cp.json.lock" {
			t.Fatalf("temporary file left behind: %s", n)
		}
	}
}

// TestFileStoreConcurrentSaves: of many savers expecting the same version,
// exactly one succeeds and the file holds its checkpoint. Without the lock
// two could read the same version and both write, the later silently
// replacing the earlier (a fenced writer would go on).
func TestFileStoreConcurrentSaves(t *testing.T) {
	ctx := context.Background()
	s := &FileStore{Path: filepath.Join(t.TempDir(), "cp.json")}
	for round := 0; round < 50; round++ {
		cur, err := s.Load(ctx)
		if err != nil {
			t.Fatal(err)
		}
		const savers = 8
		var (
			wg      sync.WaitGroup
			mu      sync.Mutex
			winners []uint64
		)
		for i := 0; i < savers; i++ {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				cp := cur
				cp.Epoch = uint64(round*savers + i + 1)
				// Each saver its own store value, as two processes would.
				st := &FileStore{Path: s.Path}
				if _, err := st.Save(ctx, cp, cur.Version); err == nil {
					mu.Lock()
					winners = append(winners, cp.Epoch)
					mu.Unlock()
				} else if !errors.Is(err, ErrConflict) {
					t.Errorf("save: %v", err)
				}
			}(i)
		}
		wg.Wait()
		if len(winners) != 1 {
			t.Fatalf("round %d: %d savers succeeded with the same expected version, want 1", round, len(winners))
		}
		got, err := s.Load(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if got.Version != cur.Version+1 || got.Epoch != winners[0] {
			t.Fatalf("round %d: file holds version %d epoch %d, want version %d epoch %d", round, got.Version, got.Epoch, cur.Version+1, winners[0])
		}
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

// TestFileStoreUpgradesOpen: the one open transaction of an older
// checkpoint is read into Opens.
func TestFileStoreUpgradesOpen(t *testing.T) {
	s := &FileStore{Path: filepath.Join(t.TempDir(), "cp.json")}
	old := `{"version":3,"sources":{"a":{"file":"mysql-bin.000001","pos":4}},"open":{"source":"a","begin":{"file":"mysql-bin.000001","pos":993},"first_seq":17},"saved_at":"2026-11-30T00:00:00Z"}`
	if err := os.WriteFile(s.Path, []byte(old), 0o644); err != nil {
		t.Fatal(err)
	}
	cp, err := s.Load(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	want := Open{Source: "a", Begin: position.Position{File: "mysql-bin.000001", Offset: 993}, FirstSeq: 17}
	if cp.Open != nil || len(cp.Opens) != 1 || cp.Opens[0] != want {
		t.Fatalf("loaded Open %v, Opens %+v; want Opens [%+v]", cp.Open, cp.Opens, want)
	}
}
