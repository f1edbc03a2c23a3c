package snapshot

import (
	"os"
	"testing"
	"time"

	"github.com/sluice-cdc/sluice/internal/testenv"
)

func TestZZScratchServer(t *testing.T) {
	if os.Getenv("SCRATCH") == "" {
		t.Skip()
	}
	db := testenv.StartT(t, testenv.MariaDBOptions{})
	os.WriteFile("/tmp/scratch_port", []byte(db.Addr()+" "+db.Socket()), 0o644)
	time.Sleep(3 * time.Hour)
}
