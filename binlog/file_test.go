package binlog_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/sluice-cdc/sluice/binlog"
	"github.com/sluice-cdc/sluice/position"
)

func readAll(t testing.TB, name string, data []byte) (changes int, err error) {
	err = binlog.ReadStream(context.Background(), name, bytes.NewReader(data), binlog.FileConfig{}, func(txn *binlog.Txn) error {
		changes += len(txn.Changes)
		return nil
	})
	return changes, err
}

func TestReadTestdataFiles(t *testing.T) {
	for name, f := range testdataFiles {
		data, err := os.ReadFile("testdata/" + name)
		if err != nil {
			t.Fatal(err)
		}
		n, err := readAll(t, name, data)
		if err != nil || n != f.changes {
			t.Errorf("%s: %d changes, %v; want %d", name, n, err, f.changes)
		}
		if f.opts.Flavor != position.MySQL {
			continue
		}
		// The partial JSON update comes out with the whole document.
		var docs []string
		err = binlog.ReadStream(context.Background(), name, bytes.NewReader(data), binlog.FileConfig{}, func(txn *binlog.Txn) error {
			for _, ch := range txn.Changes {
				if ch.Op == binlog.OpUpdate {
					if i := 8; len(ch.After) > i && ch.After[i].Kind() == binlog.KindJSON { // doc
						docs = append(docs, string(ch.After[i].Bytes()))
					}
				}
			}
			return nil
		})
		if err != nil || len(docs) != 2 || docs[1] != testdataPartialDoc {
			t.Errorf("%s: documents after the updates %q (%v), want the last one %s", name, docs, err, testdataPartialDoc)
		}
	}
}

func TestCorruptFiles(t *testing.T) {
	data, err := os.ReadFile("testdata/mariadb-full.bin")
	if err != nil {
		t.Fatal(err)
	}
	// A flipped byte inside a rows event fails its checksum.
	flipped := bytes.Clone(data)
	i := bytes.Index(flipped, []byte("Yo-yo"))
	flipped[i] ^= 0x20
	if _, err := readAll(t, "flipped.bin", flipped); !errors.Is(err, binlog.ErrCorrupt) || !strings.Contains(err.Error(), "checksum") || !strings.Contains(err.Error(), "flipped.bin") {
		t.Errorf("flipped byte: want ErrCorrupt naming the checksum and file, got %v", err)
	}
	// A file cut inside a transaction.
	cut := data[:bytes.Index(data, []byte("bulk-25"))]
	if _, err := readAll(t, "cut.bin", cut); !errors.Is(err, binlog.ErrCorrupt) {
		t.Errorf("truncated file: want ErrCorrupt, got %v", err)
	}
	// Not a binlog at all.
	if _, err := readAll(t, "text.txt", []byte("hello world")); !errors.Is(err, binlog.ErrCorrupt) || !strings.Contains(err.Error(), "not a binlog") {
		t.Errorf("not a binlog: %v", err)
	}
}

// FuzzReadStream feeds mutated binlog files to the decoder: it must return
// an error or changes, never panic or hang.
func FuzzReadStream(f *testing.F) {
	for name := range testdataFiles {
		data, err := os.ReadFile("testdata/" + name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	// Event types that are passed over or stop, a pre-v4 binlog and an
	// encrypted MySQL one.
	for _, name := range []string{"mariadb-full.bin", "mysql9-full.bin"} {
		head := fileHead(f, name)
		f.Add(appendEvent(head, 26, 0, append([]byte{1, 0, 11}, "error write"...)))
		f.Add(appendEvent(head, 164, 0, make([]byte, 20)))
		f.Add(appendEvent(appendEvent(head, 29, 0, append([]byte{5}, "hello"...)), 43, 0x80, []byte{1}))
	}
	f.Add(appendEvent([]byte{0xfe, 'b', 'i', 'n'}, 1, 0, append([]byte{3, 0}, "4.1.22-log"...)))
	f.Add(append([]byte{0xfd, 'b', 'i', 'n', 1}, make([]byte, 60)...))
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 1<<20 {
			return
		}
		_, err := readAll(t, "fuzz.bin", data)
		noGoText(t, err)
		restore := binlog.SkipChecksums() // reach the decoders behind the checksum too
		_, err = readAll(t, "fuzz.bin", data)
		restore()
		noGoText(t, err)
	})
}
