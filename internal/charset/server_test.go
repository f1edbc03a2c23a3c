package charset_test

import (
	"testing"

	"github.com/go-mysql-org/go-mysql/client"

	"github.com/sluice-cdc/sluice/internal/charset"
	"github.com/sluice-cdc/sluice/internal/charset/probe"
	"github.com/sluice-cdc/sluice/internal/testenv"
	"github.com/sluice-cdc/sluice/position"
)

// TestAgainstServer asks each server how it converts every byte sequence of
// every character set it has (internal/charset/probe) and checks that Next
// decodes each one it stores exactly so: the same code point over the same
// bytes, or '?' over them when the server has no mapping. It also finds a
// set the server has and Lookup does not (a new server version), and
// tables that no longer match the server (regenerate: go generate).
func TestAgainstServer(t *testing.T) {
	testenv.ForEachFlavor(t, func(t *testing.T, flavor position.Flavor) {
		db := testenv.StartT(t, testenv.Options{Flavor: flavor})
		c, err := client.Connect(db.Addr(), db.User, db.Password, "")
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		r, err := c.Execute("SELECT character_set_name, maxlen FROM information_schema.character_sets ORDER BY 1")
		if err != nil {
			t.Fatal(err)
		}
		maxlen := map[string]int{}
		for i := range r.Values {
			name, _ := r.GetString(i, 0)
			n, _ := r.GetInt(i, 1)
			maxlen[name] = int(n)
			if name == "binary" {
				continue
			}
			cs := charset.Lookup(name)
			if cs == nil {
				t.Errorf("%s has character set %s, which charset.Lookup does not know", flavor, name)
			}
		}
		sets, err := probe.Dump(c)
		if err != nil {
			t.Fatal(err)
		}
		for name, m := range sets {
			cs := charset.Lookup(name)
			if cs == nil {
				continue
			}
			seqs, keys := probe.Candidates(name, maxlen[name])
			wrong := 0
			for j, seq := range seqs {
				want, stored := m[keys[j]]
				if !stored {
					continue
				}
				r, n, ok := cs.Next(seq)
				switch {
				case n != len(seq):
					wrong++
					if wrong <= 5 {
						t.Errorf("%s %X: Next read %d bytes, want %d", name, seq, n, len(seq))
					}
				case want == probe.Unmapped && (ok || r != '?'), want != probe.Unmapped && (!ok || r != want):
					wrong++
					if wrong <= 5 {
						t.Errorf("%s %X: Next = %U (ok %v), the server converts it to %U (-1: no mapping)", name, seq, r, ok, want)
					}
				}
			}
			if wrong > 5 {
				t.Errorf("%s: %d sequences converted differently from %s", name, wrong, flavor)
			}
		}
	})
}
