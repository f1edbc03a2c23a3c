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

// queryText returns a Query event's statement as UTF-8. The server logs it
// in the character set of the client that sent it (character_set_client,
// the first collation of the event's Q_CHARSET_CODE status variable): a
// client that ran SET NAMES gbk logs gbk bytes, names, defaults and
// comments included. Statements of a UTF-8 client, and events without the
// variable, are returned as they are.
func queryText(query, statusVars []byte) string {
	coll, ok := clientCollation(statusVars)
	if !ok {
		return string(query)
	}
	cs := charset.Lookup(CharsetOfCollation(uint64(coll)))
	if cs == nil || cs.IsUTF8() || cs.ASCIICompatible() && isASCII(query) {
		return string(query)
	}
	b, _ := cs.AppendUTF8(make([]byte, 0, len(query)+len(query)/2), query)
	return string(b)
}

// clientCollation finds the character_set_client collation id in a Query
// event's status variables (the first collation of Q_CHARSET_CODE).
func clientCollation(vars []byte) (uint16, bool) {
	v, ok := statusVar(vars, 4)
	if !ok || len(v) < 2 {
		return 0, false
	}
	return uint16(v[0]) | uint16(v[1])<<8, true
}

// modeANSIQuotes is sql_mode's ANSI_QUOTES bit in Q_SQL_MODE_CODE.
const modeANSIQuotes = 1 << 2

// ansiQuotes reports whether a Query event's statement ran with sql_mode
// ANSI_QUOTES (a double-quoted text in it is a name, not a string).
func ansiQuotes(vars []byte) bool {
	v, ok := statusVar(vars, 1)
	return ok && len(v) == 8 && v[0]&modeANSIQuotes != 0
}

// statusVar finds the value of status variable code in a Query event's
// status variables. They are a sequence of (code, value) pairs whose
// lengths follow from the code; the walk stops at the first code it does
// not know (a newer server's, after every variable this knows: the server
// writes them in the order of their codes) and reports the variable is
// not there.
func statusVar(vars []byte, want byte) ([]byte, bool) {
	for i := 0; i < len(vars); {
		code := vars[i]
		i++
		n := 0
		switch code {
		case 0, 3, 10: // Q_FLAGS2_CODE, Q_AUTO_INCREMENT, Q_MASTER_DATA_WRITTEN_CODE
			n = 4
		case 1, 9: // Q_SQL_MODE_CODE, Q_TABLE_MAP_FOR_UPDATE_CODE
			n = 8
		case 2: // Q_CATALOG_CODE: length, text, NUL
			if i >= len(vars) {
				return nil, false
			}
			n = 1 + int(vars[i]) + 1
		case 4: // Q_CHARSET_CODE: client charset, connection and server collations
			n = 6
		case 5, 6: // Q_TIME_ZONE_CODE, Q_CATALOG_NZ_CODE: length, text
			if i >= len(vars) {
				return nil, false
			}
			n = 1 + int(vars[i])
		case 7, 8: // Q_LC_TIME_NAMES_CODE, Q_CHARSET_DATABASE_CODE
			n = 2
		default:
			return nil, false
		}
		if i+n > len(vars) {
			return nil, false
		}
		if code == want {
			return vars[i : i+n], true
		}
		i += n
	}
	return nil, false
}

func isASCII(b []byte) bool {
	for _, c := range b {
		if c >= 0x80 {
			return false
		}
	}
	return true
}
