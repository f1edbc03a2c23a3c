package binlog

import (
	"bytes"
	"compress/zlib"
	"fmt"
	"io"
)

// maxZlibRatio bounds how much zlib can expand data (its theoretical
// maximum is about 1032:1); a header claiming more is corrupt.
const maxZlibRatio = 1040

// checkMariaDBCompressed validates the header of a MariaDB compressed
// payload (log_bin_compress): one byte 0x80|n, then the uncompressed size
// in n big-endian bytes, then zlib data. It returns the declared size.
func checkMariaDBCompressed(data []byte) (int, error) {
	if len(data) < 1 {
		return 0, fmt.Errorf("empty compressed payload")
	}
	n := int(data[0] & 0x07)
	if n == 0 || n > 4 || len(data) < 1+n {
		return 0, fmt.Errorf("bad compressed payload header %#x", data[0])
	}
	var size int
	for _, b := range data[1 : 1+n] {
		size = size<<8 | int(b)
	}
	if size > maxZlibRatio*(len(data)-1-n)+64 {
		return 0, fmt.Errorf("compressed payload of %d bytes claims %d bytes uncompressed", len(data)-1-n, size)
	}
	return size, nil
}

// decompressMariaDB inflates a MariaDB compressed payload, refusing
// headers that no real payload can have instead of allocating for them.
func decompressMariaDB(data []byte) ([]byte, error) {
	size, err := checkMariaDBCompressed(data)
	if err != nil {
		return nil, err
	}
	zr, err := zlib.NewReader(bytes.NewReader(data[1+int(data[0]&0x07):]))
	if err != nil {
		return nil, fmt.Errorf("compressed payload: %w", err)
	}
	defer zr.Close()
	out := make([]byte, size)
	if _, err := io.ReadFull(zr, out); err != nil {
		return nil, fmt.Errorf("compressed payload: %w", err)
	}
	return out, nil
}

// checkQueryCompressed validates a MARIADB_QUERY_COMPRESSED_EVENT body
// (without checksum) before go-mysql decodes it.
func checkQueryCompressed(body []byte) error {
	const postHeader = 13
	if len(body) < postHeader {
		return fmt.Errorf("compressed query event too short")
	}
	schemaLen := int(body[8])
	statusLen := int(body[11]) | int(body[12])<<8
	pos := postHeader + statusLen + schemaLen + 1
	if pos > len(body) {
		return fmt.Errorf("compressed query event: header lengths exceed the event")
	}
	_, err := checkMariaDBCompressed(body[pos:])
	return err
}
