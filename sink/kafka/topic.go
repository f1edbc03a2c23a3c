package kafka

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"unicode/utf8"

	"github.com/sluice-cdc/sluice/sink"
)

// topicTemplate is a parsed Config.Topic.
type topicTemplate struct {
	parts sink.Template
	// pattern matches every topic the template can render, and is how
	// recovery finds topics created after the last checkpoint: each
	// placeholder becomes [A-Za-z0-9_-]+ (what render puts there).
	pattern *regexp.Regexp
}

// placeholderPattern matches what render puts in place of a placeholder.
const placeholderPattern = `[A-Za-z0-9_-]+`

// parseTopic parses a topic template such as "{db}.{table}".
func parseTopic(tmpl string) (topicTemplate, error) {
	var t topicTemplate
	if tmpl == "." || tmpl == ".." {
		return t, errors.New(`"." and ".." are not topic names`)
	}
	parts, err := sink.ParseTemplate(tmpl)
	if err != nil {
		return t, err
	}
	t.parts = parts
	var re strings.Builder
	re.WriteByte('^')
	for _, p := range parts {
		if p.Field != sink.FieldLiteral {
			re.WriteString(placeholderPattern)
			continue
		}
		if j := strings.IndexFunc(p.Lit, func(r rune) bool { return !topicChar(r) }); j >= 0 {
			r, _ := utf8.DecodeRuneInString(p.Lit[j:])
			return t, fmt.Errorf("contains %q: topic names take ASCII letters, digits, '.', '_' and '-' only", r)
		}
		re.WriteString(regexp.QuoteMeta(p.Lit))
	}
	if n := t.minLen(); n > MaxTopicLen {
		return t, fmt.Errorf("is longer than %d characters, Kafka's limit on topic names", MaxTopicLen)
	}
	re.WriteByte('$')
	t.pattern = regexp.MustCompile(re.String())
	return t, nil
}

// topicChar reports whether r may appear in a topic name.
func topicChar(r rune) bool {
	return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-'
}

// minLen is the length of the shortest topic the template renders.
func (t *topicTemplate) minLen() int {
	n := 0
	for _, p := range t.parts {
		if p.Field == sink.FieldLiteral {
			n += len(p.Lit)
		} else {
			n++
		}
	}
	return n
}

// fixed returns the template's only topic when it has no placeholders.
func (t *topicTemplate) fixed() (string, bool) {
	if !t.parts.HasPlaceholders() {
		return t.parts[0].Lit, true
	}
	return "", false
}

// matches reports whether the template could have rendered topic.
func (t *topicTemplate) matches(topic string) bool { return t.pattern.MatchString(topic) }

// render returns the topic of a table. A topic longer than Kafka allows
// (64 characters beyond ASCII are 384 once escaped) is cut to
// MaxTopicLen-9 characters followed by '_' and the first 8 hex digits of
// the SHA-256 of the whole rendered name, so that it stays deterministic
// and two long names that share their start stay apart.
func (t *topicTemplate) render(source, db, table string) (string, error) {
	b := t.parts.Append(nil, db, table, source, appendName)
	if len(b) > MaxTopicLen {
		sum := sha256.Sum256(b)
		b = append(b[:MaxTopicLen-9], '_')
		b = hex.AppendEncode(b, sum[:4])
	}
	return string(b), nil
}

// appendName appends a name made safe for a topic (docs/SINKS-kafka.md,
// "Topic names"): ASCII letters, digits, '_' and '-' stay; every other
// ASCII character ('.', a space, a quote, a backtick, ...) becomes '_';
// a character beyond ASCII becomes "_u" and its code point in four
// lowercase hex digits ("Ü" is "_u00dc"; "_U" and eight digits beyond
// the BMP, which MySQL and MariaDB names do not reach); an empty name
// becomes "_". ASCII names render as they always have. The mapping is
// not one-to-one ("a b" and "a_b" are both "a_b"): sink.Names refuses two
// tables on one topic.
func appendName(dst []byte, s string) []byte {
	if s == "" {
		return append(dst, '_')
	}
	for _, r := range s {
		switch {
		case r >= utf8.RuneSelf && r <= 0xffff:
			dst = fmt.Appendf(dst, "_u%04x", r)
		case r >= utf8.RuneSelf:
			dst = fmt.Appendf(dst, "_U%08x", r)
		case r == '.' || !topicChar(r):
			dst = append(dst, '_')
		default:
			dst = append(dst, byte(r))
		}
	}
	return dst
}
