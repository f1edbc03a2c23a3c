package sqlstmt

import (
	"regexp"
	"strings"

	"vitess.io/vitess/go/vt/sqlparser"
)

// Redacted stands where Redact took a secret out.
const Redacted = "<redacted>"

// Redact returns q with the credentials a table definition can hold
// replaced by Redacted, and q itself when it holds none. They are in the
// string literals of three table options:
//
//   - CONNECTION (FEDERATED, FederatedX, CONNECT and Spider tables): the
//     password of a URL (mysql://user:secret@host/db/t), and the value of
//     a password, pwd or passwd key ("password 'secret'", "PWD=secret;");
//     a string that still names a password after that is replaced whole;
//   - PASSWORD (a table option MySQL accepts and ignores): the whole value;
//   - COMMENT (Spider reads its connection from the table's comment): the
//     values of password keys, as in CONNECTION.
//
// The DDL statements sluice delivers and the CREATE TABLE texts its schema
// history keeps go through Redact, so neither an output nor a stored
// history carries such a password. A statement Redact changed no longer
// recreates a working connection: the consumer that replays it must give
// the password again.
func Redact(q string) string {
	if !mayHoldSecret(q) {
		return q
	}
	tk := parser.NewStringTokenizer(q)
	var (
		b      strings.Builder
		copied int    // q[:copied] is in b
		option string // the table option whose value may come next
	)
	for {
		pre := tk.Pos
		typ, val := tk.Scan()
		if typ == 0 || typ == sqlparser.LEX_ERROR {
			break
		}
		switch {
		case typ == sqlparser.COMMENT:
			continue
		case typ == '=' && option != "":
			continue // CONNECTION = '...'
		case typ == sqlparser.STRING && option != "":
			end := tk.Pos
			start := pre + strings.IndexAny(q[pre:end], `'"`)
			if start < pre || start >= end {
				option = ""
				continue
			}
			if clean := scrub(option, val); clean != val {
				b.WriteString(q[copied:start])
				b.WriteString(quoteLiteral(clean))
				copied = end
			}
			option = ""
			continue
		}
		option = ""
		switch up := strings.ToUpper(val); up {
		case "CONNECTION", "PASSWORD", "COMMENT":
			option = up
		}
	}
	if copied == 0 {
		return q
	}
	b.WriteString(q[copied:])
	return b.String()
}

// mayHoldSecret is the cheap test that spares Redact's tokenizer to every
// statement without the words it looks for.
func mayHoldSecret(q string) bool {
	for _, w := range [...]string{"connection", "password", "comment"} {
		if indexFold(q, w) >= 0 {
			return true
		}
	}
	return false
}

// indexFold is strings.Index ignoring ASCII case, for a lower-case word.
func indexFold(s, word string) int {
	for i := 0; i+len(word) <= len(s); i++ {
		if strings.EqualFold(s[i:i+len(word)], word) {
			return i
		}
	}
	return -1
}

var (
	// urlPassword is the password of a URL's user information.
	urlPassword = regexp.MustCompile(`(://[^:/@\s]*:)[^@\s]*@`)
	// keyPassword is a password key and its value: password="x",
	// pwd=x; (CONNECT's ODBC strings) or password "x" (Spider's
	// parameters; the value quoted, so that prose such as "the password
	// hash" is left alone).
	keyPassword = regexp.MustCompile(`(?i)\b(password|passwd|pwd)(\s*=\s*(?:"[^"]*"|'[^']*'|[^\s;,"']+)|\s+(?:"[^"]*"|'[^']*'))`)
	// keyRedacted is a password key whose value scrub replaced.
	keyRedacted = regexp.MustCompile(`(?i)\b(password|passwd|pwd)(\s*=\s*|\s+)` + regexp.QuoteMeta(Redacted))
	// namesPassword tells a string that still names a password.
	namesPassword = regexp.MustCompile(`(?i)pass|pwd`)
)

// scrub returns the value of option with its secrets replaced.
func scrub(option, v string) string {
	if option == "PASSWORD" {
		if v == "" || v == Redacted {
			return v
		}
		return Redacted
	}
	out := urlPassword.ReplaceAllString(v, "${1}"+Redacted+"@")
	out = keyPassword.ReplaceAllStringFunc(out, func(m string) string {
		sub := keyPassword.FindStringSubmatch(m)
		return sub[1] + leadingSep(sub[2]) + Redacted
	})
	if option == "CONNECTION" && out != Redacted && namesPassword.MatchString(keyRedacted.ReplaceAllString(out, "")) {
		return Redacted
	}
	return out
}

// leadingSep is the separator at the start of a keyPassword match's
// second group: the blanks and '=' before the value.
func leadingSep(s string) string {
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case ' ', '\t', '\r', '\n', '=':
		default:
			return s[:i]
		}
	}
	return s
}

// quoteLiteral writes s as a single-quoted SQL string.
func quoteLiteral(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `'`, `\'`)
	return "'" + r.Replace(s) + "'"
}
