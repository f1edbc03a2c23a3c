package main

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// sluice read of files that are damaged, not binlogs, pre-v4 or encrypted
// exits 1 with the file, the offset and what is wrong in words, and the
// summary line; never Go panic text or a struct dump.
func TestReadBadFilesInWords(t *testing.T) {
	bin := buildSluice(t)
	dir := t.TempDir()
	good, err := os.ReadFile("../../binlog/testdata/mysql9-full.bin")
	if err != nil {
		t.Fatal(err)
	}
	fdeEnd := 4 + int(binary.LittleEndian.Uint32(good[4+9:]))
	withEvent := func(typ byte, body []byte) []byte {
		f := bytes.Clone(good[:fdeEnd])
		size := 19 + len(body) + 4
		h := make([]byte, 19)
		h[4] = typ
		binary.LittleEndian.PutUint32(h[9:], uint32(size))
		binary.LittleEndian.PutUint32(h[13:], uint32(len(f)+size))
		ev := append(h, body...)
		return binary.LittleEndian.AppendUint32(append(f, ev...), crc32.ChecksumIEEE(ev))
	}
	flipped := bytes.Clone(good)
	flipped[fdeEnd+30] ^= 0x40
	v3 := []byte{0xfe, 'b', 'i', 'n', 0, 0, 0, 0, 1, 1, 0, 0, 0, 75, 0, 0, 0, 0, 0, 0, 0, 0, 0}
	for _, c := range []struct {
		name string
		data []byte
		want string
	}{
		{"notes.txt", []byte("SELECT 1;\n"), "notes.txt is not a binlog file"},
		{"empty.000001", nil, "empty.000001 is not a binlog file"},
		{"cut.000001", good[:fdeEnd+10], "cut.000001: event at offset " + itoa(fdeEnd) + ": truncated event header"},
		{"flip.000001", flipped, "flip.000001: event at offset " + itoa(fdeEnd) + ": "},
		{"old-bin.001", v3, "START_EVENT_V3 at offset 4"},
		{"enc.000001", withEvent(164, make([]byte, 20)), "START_ENCRYPTION_EVENT (type code 164) at enc.000001:" + itoa(fdeEnd)},
		{"new.000001", withEvent(77, make([]byte, 8)), "event type 77 (type code 77) at new.000001:" + itoa(fdeEnd)},
		{"mysqlenc.000001", append([]byte{0xfd, 'b', 'i', 'n', 1}, make([]byte, 507)...), "encrypted MySQL binlog"},
	} {
		path := filepath.Join(dir, c.name)
		if err := os.WriteFile(path, c.data, 0o644); err != nil {
			t.Fatal(err)
		}
		var stdout, stderr bytes.Buffer
		cmd := exec.Command(bin, "read", path)
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		msg := stderr.String()
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 || !strings.Contains(msg, c.want) || !strings.Contains(msg, "rows=") {
			t.Errorf("sluice read %s: %v\n%s\nwant exit 1 and %q", c.name, err, msg, c.want)
		}
		for _, bad := range []string{"panic", "goroutine", "runtime error", "EventHeader", "Header &", "rows_per_sec=-"} {
			if strings.Contains(msg, bad) {
				t.Errorf("sluice read %s shows %q:\n%s", c.name, bad, msg)
			}
		}
	}
}

func itoa(n int) string { return strconv.Itoa(n) }
