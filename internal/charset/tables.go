package charset

import (
	"embed"
	"strings"
)

// tableFiles holds one generated table per character set (see table.go
// for the format, gen/ for how they are made).
//
//go:embed tables/*.bin
var tableFiles embed.FS

// tableNames lists the sets that have a table.
func tableNames() []string {
	entries, err := tableFiles.ReadDir("tables")
	if err != nil {
		panic("charset: the embedded tables are missing: " + err.Error())
	}
	var out []string
	for _, e := range entries {
		if n, ok := strings.CutSuffix(e.Name(), ".bin"); ok {
			out = append(out, n)
		}
	}
	return out
}

// tableData returns the table of the named set.
func tableData(name string) []byte {
	b, err := tableFiles.ReadFile("tables/" + name + ".bin")
	if err != nil {
		panic("charset: the embedded table of " + name + " is missing: " + err.Error())
	}
	return b
}
