package sink

import (
	"errors"
	"fmt"
	"strings"
)

// Field is what a part of a Template stands for.
type Field uint8

// The fields of a template.
const (
	FieldLiteral Field = iota // Part.Lit as written
	FieldDB                   // {db}: the message's database
	FieldTable                // {table}: the message's table
	FieldSource               // {source}: the message's source name
)

// Part is one piece of a Template: literal text or a placeholder.
type Part struct {
	Field Field
	Lit   string
}

// Template is a sink's name template, such as Kafka's topic "{db}.{table}"
// or a Redis key: literal text with the placeholders {db}, {table} and
// {source}. Sinks parse it with ParseTemplate and add their own rules on
// its parts (the characters a topic or subject may hold).
type Template []Part

// ParseTemplate splits s into literal text and placeholders.
func ParseTemplate(s string) (Template, error) {
	var t Template
	for s != "" {
		i := strings.IndexByte(s, '{')
		lit := s
		if i >= 0 {
			lit = s[:i]
		}
		if strings.Contains(lit, "}") {
			return nil, errors.New("has a '}' without '{'")
		}
		if lit != "" {
			t = append(t, Part{Lit: lit})
		}
		if i < 0 {
			break
		}
		j := strings.IndexByte(s[i:], '}')
		if j < 0 {
			return nil, errors.New("has a '{' without '}'")
		}
		var f Field
		switch name := s[i+1 : i+j]; name {
		case "db":
			f = FieldDB
		case "table":
			f = FieldTable
		case "source":
			f = FieldSource
		default:
			return nil, fmt.Errorf("unknown placeholder {%s}: use {db}, {table} or {source}", name)
		}
		t = append(t, Part{Field: f})
		s = s[i+j+1:]
	}
	if len(t) == 0 {
		return nil, errors.New("must not be empty")
	}
	return t, nil
}

// HasPlaceholders reports whether t names anything but literal text.
func (t Template) HasPlaceholders() bool {
	for _, p := range t {
		if p.Field != FieldLiteral {
			return true
		}
	}
	return false
}

// Append appends t filled in for (db, table, source); escape, when not
// nil, writes each filled-in name (literal text is written as it is).
func (t Template) Append(dst []byte, db, table, source string, escape func([]byte, string) []byte) []byte {
	for _, p := range t {
		var v string
		switch p.Field {
		case FieldLiteral:
			dst = append(dst, p.Lit...)
			continue
		case FieldDB:
			v = db
		case FieldTable:
			v = table
		case FieldSource:
			v = source
		}
		if escape != nil {
			dst = escape(dst, v)
		} else {
			dst = append(dst, v...)
		}
	}
	return dst
}
