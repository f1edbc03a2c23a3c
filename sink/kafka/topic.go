package kafka

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"unicode/utf8"
)

// Placeholders of the topic template.
const (
	partLiteral = iota
	partDB
	partTable
	partSource
)

// topicTemplate is a parsed Config.Topic.
type topicTemplate struct {
	parts []topicPart
	// pattern matches every topic the template can render, and is how
	// recovery finds topics created after the last checkpoint: each
	// placeholder becomes [A-Za-z0-9_-]+ (what render puts there).
	pattern *regexp.Regexp
}

type topicPart struct {
	kind int
	lit  string
}

// placeholderPattern matches what render puts in place of a placeholder.
const placeholderPattern = `[A-Za-z0-9_-]+`

// parseTopic parses a topic template such as "{db}.{table}".
func parseTopic(tmpl string) (topicTemplate, error) {
	var t topicTemplate
	if tmpl == "." || tmpl == ".." {
		return t, errors.New(`"." and ".." are not topic names`)
	}
	var re strings.Builder
	re.WriteByte('^')
	rest := tmpl
	for rest != "" {
		i := strings.IndexByte(rest, '{')
		if i < 0 {
			i = len(rest)
		}
		lit := rest[:i]
		if strings.Contains(lit, "}") {
			return t, errors.New("has a '}' without '{'")
		}
		if lit != "" {
			if j := strings.IndexFunc(lit, func(r rune) bool { return !topicChar(r) }); j >= 0 {
				r, _ := utf8.DecodeRuneInString(lit[j:])
				return t, fmt.Errorf("contains %q: topic names take ASCII letters, digits, '.', '_' and '-' only", r)
			}
			t.parts = append(t.parts, topicPart{kind: partLiteral, lit: lit})
			re.WriteString(regexp.QuoteMeta(lit))
		}
		if i == len(rest) {
			break
		}
		j := strings.IndexByte(rest[i:], '}')
		if j < 0 {
			return t, errors.New("has a '{' without '}'")
		}
		switch name := rest[i+1 : i+j]; name {
		case "db":
			t.parts = append(t.parts, topicPart{kind: partDB})
		case "table":
			t.parts = append(t.parts, topicPart{kind: partTable})
		case "source":
			t.parts = append(t.parts, topicPart{kind: partSource})
		default:
			return t, fmt.Errorf("unknown placeholder {%s}: use {db}, {table} or {source}", name)
		}
		re.WriteString(placeholderPattern)
		rest = rest[i+j+1:]
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
		if p.kind == partLiteral {
			n += len(p.lit)
		} else {
			n++
		}
	}
	return n
}

// fixed returns the template's only topic when it has no placeholders.
func (t *topicTemplate) fixed() (string, bool) {
	if len(t.parts) == 1 && t.parts[0].kind == partLiteral {
		return t.parts[0].lit, true
	}
	return "", false
}

// matches reports whether the template could have rendered topic.
func (t *topicTemplate) matches(topic string) bool { return t.pattern.MatchString(topic) }

// render returns the topic of a table, or an error when it would be longer
// than Kafka allows.
func (t *topicTemplate) render(source, db, table string) (string, error) {
	var b []byte
	for _, p := range t.parts {
		switch p.kind {
		case partLiteral:
			b = append(b, p.lit...)
		case partDB:
			b = appendName(b, db)
		case partTable:
			b = appendName(b, table)
		case partSource:
			b = appendName(b, source)
		}
	}
	if len(b) > MaxTopicLen {
		return "", fmt.Errorf("the topic of table %s.%s (source %s) would be %q, longer than Kafka's limit of %d characters: use a shorter topic template", db, table, source, b, MaxTopicLen)
	}
	return string(b), nil
}

// appendName appends a name made safe for a topic: every character but
// ASCII letters, digits, '_' and '-' becomes '_'; an empty name becomes "_".
func appendName(dst []byte, s string) []byte {
	if s == "" {
		return append(dst, '_')
	}
	for _, r := range s {
		if r == '.' || !topicChar(r) {
			r = '_'
		}
		dst = append(dst, byte(r))
	}
	return dst
}
