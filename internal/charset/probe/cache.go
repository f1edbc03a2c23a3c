package probe

import (
	"crypto/sha256"
	_ "embed"
	"encoding/gob"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"

	"github.com/go-mysql-org/go-mysql/client"
)

//go:embed probe.go
var source []byte

// DumpCached is Dump, its answer kept in dir under the server's exact
// version and a hash of this package's probing code, so that a test that
// only needs to know which sequences a server stores asks a server build
// once (MySQL's gb18030 alone is 1.6 million sequences, half a minute).
// The tests of the tables themselves (internal/charset) ask the server
// every time.
func DumpCached(c *client.Conn, dir string) (map[string]map[uint32]rune, error) {
	r, err := c.Execute("SELECT CONCAT(VERSION(), ' ', @@version_comment)")
	if err != nil {
		return nil, err
	}
	version, _ := r.GetString(0, 0)
	sum := sha256.Sum256(append(append([]byte(nil), source...), version...))
	path := filepath.Join(dir, "charset-dump-"+hex.EncodeToString(sum[:8])+".gob")
	if f, err := os.Open(path); err == nil {
		defer f.Close()
		var m map[string]map[uint32]rune
		if gob.NewDecoder(f).Decode(&m) == nil {
			return m, nil
		}
	}
	m, err := Dump(c)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	tmp, err := os.CreateTemp(dir, ".charset-dump-*")
	if err != nil {
		return nil, err
	}
	defer os.Remove(tmp.Name())
	if err := gob.NewEncoder(tmp).Encode(m); err != nil {
		tmp.Close()
		return nil, fmt.Errorf("probe: caching the dump: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return nil, err
	}
	return m, os.Rename(tmp.Name(), path)
}
