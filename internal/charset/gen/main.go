// Command gen writes internal/charset's tables from the servers themselves.
//
// It starts a throwaway MariaDB and a throwaway MySQL (internal/testenv's
// servers, installed when missing), and for every character set either
// lists (except the UTF and UCS families, decoded by rule, and binary)
// asks CONVERT(CONVERT(b USING cs) USING utf8mb4) of every byte sequence
// of the set's shapes: each byte, each lead byte 0x80-0xFF with each
// trail byte, EUC-JP's 0x8F with two bytes 0x80-0xFF (three-byte sets),
// and GB18030's four-byte sequences. A sequence the server does not
// accept as a character of the set (CONVERT(b USING cs) changes it) is
// not one; one converted to a single '?' is a character without a Unicode
// mapping. The two servers' answers are merged (they must agree wherever
// both store a sequence) and written as tables/NAME.bin, the format
// table.go reads.
//
//	go generate ./internal/charset
package main

import (
	"context"
	"encoding/binary"
	"flag"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"slices"

	"github.com/go-mysql-org/go-mysql/client"

	"github.com/sluice-cdc/sluice/internal/charset/probe"
	"github.com/sluice-cdc/sluice/internal/testenv/throwaway"
)

const (
	doubleBase = probe.DoubleBase
	longBase   = probe.LongBase
	unmapped   = probe.Unmapped
)

// dumpServer is probe.Dump on a new connection to db.
func dumpServer(db *throwaway.Server) (map[string]map[uint32]rune, error) {
	c, err := client.Connect(db.Addr(), db.User, db.Password, "")
	if err != nil {
		return nil, err
	}
	defer c.Close()
	return probe.Dump(c)
}

func main() {
	out := flag.String("o", "tables", "directory to write NAME.bin into")
	flag.Parse()
	ctx := context.Background()
	merged := map[string]map[uint32]rune{}
	var notes []string
	for _, f := range throwaway.AllFlavors {
		db, err := throwaway.Start(ctx, throwaway.Options{Flavor: f})
		if err != nil {
			log.Fatal(err)
		}
		sets, err := dumpServer(db)
		db.Close()
		if err != nil {
			log.Fatalf("%s: %v", f, err)
		}
		for cs, m := range sets {
			have, ok := merged[cs]
			if !ok {
				merged[cs] = m
				continue
			}
			n, err := probe.Merge(have, m)
			if err != nil {
				log.Fatalf("%s: %v", cs, err)
			}
			if n > 0 {
				notes = append(notes, fmt.Sprintf("%s: %d sequences only one server stores", cs, n))
			}
		}
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		log.Fatal(err)
	}
	names := slices.Sorted(func(yield func(string) bool) {
		for k := range merged {
			if !yield(k) {
				return
			}
		}
	})
	for _, cs := range names {
		data, runs := encode(merged[cs])
		if err := os.WriteFile(filepath.Join(*out, cs+".bin"), data, 0o644); err != nil {
			log.Fatal(err)
		}
		log.Printf("%s: %d characters, %d runs, %d bytes", cs, len(merged[cs]), runs, len(data))
	}
	for _, n := range notes {
		log.Print(n)
	}
}

// encode writes m as runs (see table.go).
func encode(m map[uint32]rune) ([]byte, int) {
	keys := make([]uint32, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var out []byte
	var end uint32 // key after the last run
	var next rune  // code point after the last mapped run
	runs := 0
	for i := 0; i < len(keys); {
		k0, r0 := keys[i], m[keys[i]]
		j := i + 1
		for j < len(keys) && keys[j] == k0+uint32(j-i) && (k0+uint32(j-i) != doubleBase && k0+uint32(j-i) != longBase) &&
			(r0 == unmapped && m[keys[j]] == unmapped || r0 >= 0 && m[keys[j]] == r0+rune(j-i)) {
			j++
		}
		count := uint64(j - i)
		out = binary.AppendUvarint(out, uint64(k0-end))
		if r0 == unmapped {
			out = binary.AppendUvarint(out, count<<1|1)
		} else {
			out = binary.AppendUvarint(out, count<<1)
			out = binary.AppendVarint(out, int64(r0-next))
			next = r0 + rune(count)
		}
		end = k0 + uint32(count)
		runs++
		i = j
	}
	return out, runs
}
