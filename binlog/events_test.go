package binlog_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluice-cdc/sluice/binlog"
	"github.com/sluice-cdc/sluice/internal/testenv"
	"github.com/sluice-cdc/sluice/position"
)

// fileHead is a real server's binlog file up to and with its
// FORMAT_DESCRIPTION event (CRC32 checksums on).
func fileHead(t testing.TB, name string) []byte {
	t.Helper()
	data, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	size := binary.LittleEndian.Uint32(data[4+9:])
	return bytes.Clone(data[:4+size])
}

// appendEvent appends an event of type typ at the end of file (with a CRC32).
func appendEvent(file []byte, typ byte, flags uint16, body []byte) []byte {
	size := 19 + len(body) + 4
	h := make([]byte, 19)
	h[4] = typ
	binary.LittleEndian.PutUint32(h[5:], 1)
	binary.LittleEndian.PutUint32(h[9:], uint32(size))
	binary.LittleEndian.PutUint32(h[13:], uint32(len(file)+size))
	binary.LittleEndian.PutUint16(h[17:], flags)
	ev := append(h, body...)
	return binary.LittleEndian.AppendUint32(append(file, ev...), crc32.ChecksumIEEE(ev))
}

// noGoText fails when an error's text is Go's rather than words.
func noGoText(t testing.TB, err error) {
	t.Helper()
	for _, s := range []string{"runtime error", "goroutine", "panic", "replication.EventHeader", "Header &", "%!"} {
		if err != nil && strings.Contains(err.Error(), s) {
			t.Errorf("error shows Go internals (%q): %v", s, err)
		}
	}
}

// Every event type that is not decoded is either passed over or stops
// the reader with its name, the file and the offset, in a real server's
// file of each flavor.
func TestFileEventTypesPassedOrStopped(t *testing.T) {
	stops := map[byte]string{
		0: "UNKNOWN_EVENT", 1: "START_EVENT_V3", 6: "LOAD_EVENT", 7: "SLAVE_EVENT", 8: "CREATE_FILE_EVENT",
		10: "EXEC_LOAD_EVENT", 12: "NEW_LOAD_EVENT", 20: "PRE_GA_WRITE_ROWS_EVENT", 21: "PRE_GA_UPDATE_ROWS_EVENT",
		22: "PRE_GA_DELETE_ROWS_EVENT", 26: "INCIDENT_EVENT", 164: "START_ENCRYPTION_EVENT",
		169: "WRITE_ROWS_COMPRESSED_EVENT", 170: "UPDATE_ROWS_COMPRESSED_EVENT", 171: "DELETE_ROWS_COMPRESSED_EVENT",
		43: "event type 43", 100: "event type 100", 159: "event type 159", 172: "event type 172", 255: "event type 255",
	}
	passes := []byte{3, 5, 9, 11, 13, 14, 17, 28, 29, 36, 37, 160}
	for _, name := range []string{"mariadb-full.bin", "mysql9-full.bin"} {
		head := fileHead(t, name)
		body := make([]byte, 16)
		body[0] = 4 // a length byte where the type has one
		for typ, want := range stops {
			f := appendEvent(head, typ, 0, body)
			_, err := readAll(t, "x.000001", f)
			wantText := fmt.Sprintf("%s (type code %d) at x.000001:%d", want, typ, len(head))
			if !errors.Is(err, binlog.ErrUnsupportedEvent) || !strings.Contains(err.Error(), wantText) {
				t.Errorf("%s + type %d: %v; want ErrUnsupportedEvent with %q", name, typ, err, wantText)
			}
			noGoText(t, err)
		}
		for _, typ := range passes {
			if _, err := readAll(t, "x.000001", appendEvent(head, typ, 0, body)); err != nil {
				t.Errorf("%s + type %d: %v, want it passed over", name, typ, err)
			}
		}
		// Unknown codes marked ignorable are passed over.
		for _, typ := range []byte{43, 100, 200} {
			if _, err := readAll(t, "x.000001", appendEvent(head, typ, 0x80, body)); err != nil {
				t.Errorf("%s + ignorable type %d: %v, want it passed over", name, typ, err)
			}
		}
		// An incident names itself.
		inc := append([]byte{1, 0, 11}, "error write"...)
		_, err := readAll(t, "x.000001", appendEvent(head, 26, 0, inc))
		if !errors.Is(err, binlog.ErrUnsupportedEvent) || !strings.Contains(err.Error(), `LOST_EVENTS ("error write")`) {
			t.Errorf("%s incident: %v", name, err)
		}
	}
}

// Damaged files, files that are not binlogs and binlogs of another format
// version stop with the file, the offset and what is wrong in words.
func TestDamagedFilesInWords(t *testing.T) {
	for _, name := range []string{"mariadb-full.bin", "mysql9-full.bin"} {
		data, err := os.ReadFile("testdata/" + name)
		if err != nil {
			t.Fatal(err)
		}
		head := fileHead(t, name)
		check := func(what string, f []byte, sentinel error, words ...string) {
			t.Helper()
			_, err := readAll(t, "d.000001", f)
			if !errors.Is(err, sentinel) {
				t.Errorf("%s %s: %v, want %v", name, what, err, sentinel)
				return
			}
			for _, w := range append(words, "d.000001") {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%s %s: %q lacks %q", name, what, err, w)
				}
			}
			noGoText(t, err)
		}
		// Every cut of the file inside its first events.
		for n := 5; n < min(len(data), 2000); n += 7 {
			_, err := readAll(t, "d.000001", data[:n])
			noGoText(t, err)
		}
		check("cut inside an event", data[:len(head)+25], binlog.ErrCorrupt, "truncated event", fmt.Sprintf("offset %d", len(head)))
		// Bytes of a rows event overwritten, checksums off: undecodable.
		skip := binlog.SkipChecksums()
		for i := len(head); i < min(len(data), 4000); i += 3 {
			g := bytes.Clone(data)
			for j := i; j < min(i+8, len(g)); j++ {
				g[j] = 0xff
			}
			_, err := readAll(t, "d.000001", g)
			noGoText(t, err)
		}
		skip()
		// A FORMAT_DESCRIPTION event of another binlog version.
		v3 := bytes.Clone(head)
		v3[4+19] = 3
		binary.LittleEndian.PutUint32(v3[len(v3)-4:], crc32.ChecksumIEEE(v3[4:len(v3)-4]))
		check("version 3 format description", v3, binlog.ErrUnsupportedEvent, "binlog format version 3", "only version 4")
		// The first event not a FORMAT_DESCRIPTION.
		notFirst := appendEvent([]byte{0xfe, 'b', 'i', 'n'}, 19, 0, make([]byte, 16))
		check("no format description", notFirst, binlog.ErrCorrupt, "the first event (at offset 4) is TABLE_MAP_EVENT")
	}
	// A MySQL 4.x binlog (format version 3): magic, then START_EVENT_V3.
	v3 := appendEvent([]byte{0xfe, 'b', 'i', 'n'}, 1, 0, append([]byte{3, 0}, "4.1.22-log"...))
	if _, err := readAll(t, "old-bin.001", v3); !errors.Is(err, binlog.ErrUnsupportedEvent) || !strings.Contains(err.Error(), "START_EVENT_V3 at offset 4") || !strings.Contains(err.Error(), "only version 4") {
		t.Errorf("pre-v4 binlog: %v", err)
	}
	// A MySQL binlog written with binlog_encryption=ON.
	enc := append([]byte{0xfd, 'b', 'i', 'n', 1}, make([]byte, 507)...)
	if _, err := readAll(t, "enc.000001", enc); !errors.Is(err, binlog.ErrUnsupportedEvent) || !strings.Contains(err.Error(), "encrypted MySQL binlog") {
		t.Errorf("MySQL encrypted binlog: %v", err)
	}
	for _, f := range [][]byte{nil, []byte("fe"), []byte("PK\x03\x04zip file"), []byte("-- MySQL dump 10.13\nCREATE TABLE t (a int);\n")} {
		if _, err := readAll(t, "n.txt", f); !errors.Is(err, binlog.ErrCorrupt) || !strings.Contains(err.Error(), "n.txt is not a binlog file") {
			t.Errorf("not a binlog %q: %v", f, err)
		}
	}
}

// A MariaDB server with encrypt_binlog (file_key_management plugin) writes
// a START_ENCRYPTION event and then encrypted events: reading the file
// stops at that event with its name, the file and the offset. MySQL's
// encrypted binlog (binlog_encryption, a keyring component) is covered
// by its file header in TestDamagedFilesInWords.
func TestEncryptedMariaDBBinlogFile(t *testing.T) {
	testenv.ForEachFlavor(t, func(t *testing.T, f position.Flavor) {
		if f != position.MariaDB {
			t.Skip("encrypt_binlog is MariaDB's; MySQL's encrypted files are recognised by their header (TestDamagedFilesInWords)")
		}
		if _, err := os.Stat("/usr/lib/mysql/plugin/file_key_management.so"); err != nil {
			t.Skip("MariaDB's file_key_management plugin is not installed")
		}
		keys := filepath.Join(t.TempDir(), "keys.txt")
		if err := os.WriteFile(keys, []byte("1;"+strings.Repeat("a1b2c3d4", 8)+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		db := testenv.StartT(t, testenv.Options{Flavor: f, Extra: []string{
			"--plugin-load-add=file_key_management", "--file-key-management-filename=" + keys, "--encrypt-binlog=ON",
		}})
		ctx := context.Background()
		if err := db.Exec(ctx, "CREATE DATABASE enc", "CREATE TABLE enc.t (id INT PRIMARY KEY, v VARCHAR(20))",
			"INSERT INTO enc.t VALUES (1, 'secret-value')", "FLUSH BINARY LOGS"); err != nil {
			t.Fatal(err)
		}
		files, _ := filepath.Glob(filepath.Join(db.DataDir(), "mysql-bin.0*"))
		if len(files) == 0 {
			t.Fatal("no binlog files")
		}
		data, err := os.ReadFile(files[0])
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(data, []byte("secret-value")) {
			t.Fatal("the binlog is not encrypted")
		}
		err = binlog.ReadFiles(ctx, files[:1], binlog.FileConfig{}, func(*binlog.Txn) error { return nil })
		base := filepath.Base(files[0])
		if !errors.Is(err, binlog.ErrUnsupportedEvent) || !strings.Contains(err.Error(), "START_ENCRYPTION_EVENT (type code 164) at "+base+":") ||
			!strings.Contains(err.Error(), "encrypt_binlog") {
			t.Fatalf("encrypted binlog: %v", err)
		}
		noGoText(t, err)
		// Through the server the same binlog is read: it decrypts what it
		// sends to a replica.
		r := newReader(t, db, func(c *binlog.Config) { c.StartAt = binlog.StartEarliest })
		txn := next(t, r)
		for txn.Changes[0].Op == binlog.OpDDL {
			txn = next(t, r)
		}
		if ch := txn.Changes[0]; ch.Op != binlog.OpInsert || string(ch.After[1].Bytes()) != "secret-value" {
			t.Fatalf("from the server: %+v", txn.Changes)
		}
	})
}
