package binlog

import "github.com/sluice-cdc/sluice/internal/charset"

// namesToUTF8 converts ENUM and SET member names, which TABLE_MAP carries
// in the column's character set, to UTF-8 (as information_schema and the
// snapshot give them), as CONVERT(... USING utf8mb4) does.
func namesToUTF8(names []string, charsetName string) []string {
	cs := charset.Lookup(charsetName)
	if len(names) == 0 || cs == nil || cs.IsUTF8() {
		return names
	}
	out := make([]string, len(names))
	for i, n := range names {
		b, _ := cs.AppendUTF8(nil, []byte(n))
		out[i] = string(b)
	}
	return out
}
