// Package confdef reads the definition of a YAML block from the struct
// tags of its Go fields, so that a block's defaults, the rules on its
// values and its documentation come from one place:
//
//	type Align struct {
//		MaxWait time.Duration `yaml:"max_wait" default:"30s" min:"0"`
//		OnStall string        `yaml:"on_stall" default:"proceed" enum:"proceed,fail"`
//	}
//
// The tags besides yaml:
//
//   - default:"V" is the default, in YAML spelling ("30s", "1MiB", "true",
//     "{db}.{table}"). ApplyDefaults sets a field that holds its zero value
//     to V, decoded as the YAML decoder would decode the key.
//   - computed:"TEXT" documents a default that code works out (from the
//     pipeline's name, from another key): ApplyDefaults leaves the field
//     alone, Describe reports TEXT.
//   - enum:"a,b,c" lists the values a string key takes. The empty string
//     (the key left out) is always allowed: it means the default.
//   - want:"TEXT" words an enum violation instead of the generated
//     "a, b or c" (for values that need a word of explanation).
//   - min:"N" is the lowest value of a number or a duration; "0" reads
//     "must not be negative".
//
// Rules between keys (this one needs that one) stay in code beside the
// block; Check finds the first violation of the per-key rules, in the
// order of the fields.
package confdef

import (
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Key is one YAML key of a block, as Describe reports it.
type Key struct {
	// Path is the key's dotted path under the block described
	// ("snapshot.mode"); the elements of a list of blocks add no index.
	Path string
	// Type is the Go type of the field ("string", "time.Duration").
	Type string
	// Default is the default tag's value (in YAML spelling) or, when
	// Computed is set, the computed tag's text; "" when neither is given.
	Default  string
	Computed bool
	// Enum lists the allowed values; Min is the min tag.
	Enum []string
	Min  string
	// Block reports a key whose value is a block of keys (its own keys
	// follow it in Describe's list).
	Block bool
}

// Violation is a value that breaks its key's rule.
type Violation struct {
	// Key is the dotted path of the key under the block checked, with
	// [i] for an element of a list ("sources[1].heartbeat").
	Key string
	// Value is the value as written; Allowed lists the key's values when
	// the rule broken is its enum, Min its min when it is that.
	Value   string
	Allowed []string
	Min     string
	// Want is, for an enum, what the key takes in words: the want tag,
	// else the allowed values listed ("a, b or c"). For packages whose
	// messages are worded their own way.
	Want string
	// Msg says what is wrong, in the words of the config's errors:
	// `"wait": want proceed or fail`, "must not be negative".
	Msg string
}

func (v *Violation) Error() string { return v.Key + ": " + v.Msg }

var (
	durationType    = reflect.TypeOf(time.Duration(0))
	nodeType        = reflect.TypeOf(yaml.Node{})
	unmarshalerType = reflect.TypeOf((*yaml.Unmarshaler)(nil)).Elem()
	// valueUnmarshalerType is the other UnmarshalYAML the YAML decoder
	// calls, the one given a function that decodes the value: sluice's
	// public types take that one, whose signature names no YAML type.
	valueUnmarshalerType = reflect.TypeOf((*interface {
		UnmarshalYAML(func(any) error) error
	})(nil)).Elem()
)

// Node returns the YAML node that the decoder gives an
// UnmarshalYAML(unmarshal func(any) error), the form of the method that
// sluice's public types take, for code that needs the node itself (its
// kind, its line).
func Node(unmarshal func(any) error) (*yaml.Node, error) {
	var h nodeHolder
	if err := unmarshal(&h); err != nil {
		return nil, err
	}
	if h.n == nil { // a null value, which the decoder passes to no UnmarshalYAML
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!null"}, nil
	}
	return h.n, nil
}

// nodeHolder keeps the node it is decoded from (decoding into a
// *yaml.Node from inside UnmarshalYAML would decode its fields instead).
type nodeHolder struct{ n *yaml.Node }

func (h *nodeHolder) UnmarshalYAML(n *yaml.Node) error {
	h.n = n
	return nil
}

// Unmarshals reports whether values of t decode themselves: *t has an
// UnmarshalYAML method (of either form the YAML decoder calls).
func Unmarshals(t reflect.Type) bool {
	p := reflect.PointerTo(t)
	return p.Implements(unmarshalerType) || p.Implements(valueUnmarshalerType)
}

// field is one tagged field of a struct, inlined fields flattened.
type field struct {
	key   string
	index []int
	sf    reflect.StructField
}

// fields lists the YAML keys of struct t in field order.
func fields(t reflect.Type) []field {
	var out []field
	for i := 0; i < t.NumField(); i++ {
		sf := t.Field(i)
		tag := strings.Split(sf.Tag.Get("yaml"), ",")
		if slices.Contains(tag[1:], "inline") && sf.Type.Kind() == reflect.Struct {
			for _, f := range fields(sf.Type) {
				f.index = append([]int{i}, f.index...)
				out = append(out, f)
			}
			continue
		}
		if tag[0] == "" || tag[0] == "-" || !sf.IsExported() {
			continue
		}
		out = append(out, field{key: tag[0], index: []int{i}, sf: sf})
	}
	return out
}

// Field is one YAML key of a block and the Go type of its value.
type Field struct {
	Key  string
	Type reflect.Type
}

// Fields lists the YAML keys of struct type t in field order, with those
// of its inlined structs (`yaml:",inline"`), as the YAML decoder takes
// them: the one reading of a block's keys (config's check of unknown keys
// uses it too).
func Fields(t reflect.Type) []Field {
	fs := fields(t)
	out := make([]Field, len(fs))
	for i, f := range fs {
		out[i] = Field{Key: f.key, Type: f.sf.Type}
	}
	return out
}

// isBlock reports whether values of t are blocks whose keys confdef
// follows: structs other than durations, yaml.Node and structs without
// keys (config.Block, which keeps a block for another package to decode).
func isBlock(t reflect.Type) bool {
	return t.Kind() == reflect.Struct && t != durationType && t != nodeType && len(fields(t)) > 0
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// ApplyDefaults sets every field of the struct ptr points to that holds
// its zero value and has a default tag to that default, in nested blocks
// too (a nil pointer to a block stays nil; every element of a list of
// blocks gets its defaults). A default that does not decode as its field
// is a mistake in the definition and panics (the tests of every block
// apply its defaults).
func ApplyDefaults(ptr any) {
	v := reflect.ValueOf(ptr)
	if v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct {
		panic(fmt.Sprintf("confdef: ApplyDefaults needs a pointer to a struct, not %T", ptr))
	}
	applyDefaults(v.Elem())
}

func applyDefaults(v reflect.Value) {
	for _, f := range fields(v.Type()) {
		fv := v.FieldByIndex(f.index)
		if def, ok := f.sf.Tag.Lookup("default"); ok && fv.IsZero() {
			d, err := decode(def, f.sf.Type)
			if err != nil {
				panic(fmt.Sprintf("confdef: %s.%s: default %q: %v", v.Type(), f.sf.Name, def, err))
			}
			fv.Set(d)
		}
		switch {
		case isBlock(fv.Type()):
			applyDefaults(fv)
		case fv.Kind() == reflect.Pointer && !fv.IsNil() && isBlock(fv.Type().Elem()):
			applyDefaults(fv.Elem())
		case fv.Kind() == reflect.Slice && isBlock(fv.Type().Elem()):
			for i := 0; i < fv.Len(); i++ {
				applyDefaults(fv.Index(i))
			}
		}
	}
}

// decode reads s, a value in YAML spelling, as a value of type t. A
// string is taken as it is (no YAML quoting needed for "{db}.{table}").
func decode(s string, t reflect.Type) (reflect.Value, error) {
	p := reflect.New(t)
	if t.Kind() == reflect.String && !Unmarshals(t) {
		p.Elem().SetString(s)
		return p.Elem(), nil
	}
	if err := yaml.Unmarshal([]byte(s), p.Interface()); err != nil {
		return reflect.Value{}, err
	}
	return p.Elem(), nil
}

// Check returns the first value of the struct ptr points to that breaks
// its key's enum or min rule, in field order and through nested blocks
// and lists of blocks, or nil. With keys, only those keys of the block
// itself are checked (not its nested blocks' unless named, as
// "snapshot"), in the order given: for a caller whose other rules sit
// between them.
func Check(ptr any, keys ...string) *Violation {
	v := reflect.ValueOf(ptr)
	if v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct {
		panic(fmt.Sprintf("confdef: Check needs a pointer to a struct, not %T", ptr))
	}
	v = v.Elem()
	if len(keys) == 0 {
		return check(v, "")
	}
	byKey := map[string]field{}
	for _, f := range fields(v.Type()) {
		byKey[f.key] = f
	}
	for _, k := range keys {
		f, ok := byKey[k]
		if !ok {
			panic(fmt.Sprintf("confdef: Check: %s has no key %q", v.Type(), k))
		}
		if bad := checkField(v.FieldByIndex(f.index), f, ""); bad != nil {
			return bad
		}
	}
	return nil
}

func check(v reflect.Value, path string) *Violation {
	for _, f := range fields(v.Type()) {
		if bad := checkField(v.FieldByIndex(f.index), f, path); bad != nil {
			return bad
		}
	}
	return nil
}

func checkField(fv reflect.Value, f field, path string) *Violation {
	key := join(path, f.key)
	if enum, ok := f.sf.Tag.Lookup("enum"); ok && fv.Kind() == reflect.String {
		allowed := strings.Split(enum, ",")
		if s := fv.String(); s != "" && !slices.Contains(allowed, s) {
			want, ok := f.sf.Tag.Lookup("want")
			if !ok {
				want = List(allowed)
			}
			return &Violation{Key: key, Value: s, Allowed: allowed, Want: want, Msg: fmt.Sprintf("%q: want %s", s, want)}
		}
	}
	if m, ok := f.sf.Tag.Lookup("min"); ok {
		if bad := checkMin(fv, m); bad != "" {
			return &Violation{Key: key, Value: valueString(fv), Min: m, Msg: bad}
		}
	}
	switch {
	case isBlock(fv.Type()):
		return check(fv, key)
	case fv.Kind() == reflect.Pointer && !fv.IsNil() && isBlock(fv.Type().Elem()):
		return check(fv.Elem(), key)
	case fv.Kind() == reflect.Slice && isBlock(fv.Type().Elem()):
		for i := 0; i < fv.Len(); i++ {
			if bad := check(fv.Index(i), fmt.Sprintf("%s[%d]", key, i)); bad != nil {
				return bad
			}
		}
	}
	return nil
}

// checkMin says how v breaks min m ("" when it does not).
func checkMin(v reflect.Value, m string) string {
	var below bool
	switch v.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		var lo int64
		if v.Type() == durationType {
			d, err := time.ParseDuration(m)
			if err != nil {
				panic(fmt.Sprintf("confdef: min %q is not a duration", m))
			}
			lo = int64(d)
		} else {
			n, err := strconv.ParseInt(m, 10, 64)
			if err != nil {
				panic(fmt.Sprintf("confdef: min %q is not an integer", m))
			}
			lo = n
		}
		below = v.Int() < lo
	case reflect.Float32, reflect.Float64:
		f, err := strconv.ParseFloat(m, 64)
		if err != nil {
			panic(fmt.Sprintf("confdef: min %q is not a number", m))
		}
		below = v.Float() < f
	default:
		return "" // unsigned numbers are never negative; other kinds take no min
	}
	switch {
	case !below:
		return ""
	case m == "0":
		return "must not be negative"
	default:
		return "must be at least " + m
	}
}

func valueString(v reflect.Value) string {
	if v.Type() == durationType {
		return time.Duration(v.Int()).String()
	}
	return fmt.Sprint(v.Interface())
}

// List words values as the config's messages do: "a", "a or b",
// "a, b or c".
func List(values []string) string {
	switch len(values) {
	case 0:
		return ""
	case 1:
		return values[0]
	}
	return strings.Join(values[:len(values)-1], ", ") + " or " + values[len(values)-1]
}

// Enum returns the allowed values of key (a dotted path) of struct type
// t, nil when it has no enum tag. It panics on a key t does not have.
func Enum(t reflect.Type, key string) []string {
	for _, k := range Describe(t) {
		if k.Path == key {
			return k.Enum
		}
	}
	panic(fmt.Sprintf("confdef: Enum: %s has no key %q", t, key))
}

// Describe lists the keys of struct type t (or a pointer to one) and of
// its nested blocks, depth first in field order. A list of blocks
// (sources:) is followed by its element's keys under the list's key; a
// yaml.Node or config.Block field (a block decoded elsewhere) is listed
// without keys.
func Describe(t reflect.Type) []Key {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		panic(fmt.Sprintf("confdef: Describe needs a struct type, not %s", t))
	}
	var out []Key
	describe(t, "", &out)
	return out
}

func describe(t reflect.Type, path string, out *[]Key) {
	for _, f := range fields(t) {
		ft := f.sf.Type
		k := Key{Path: join(path, f.key), Type: ft.String(), Min: f.sf.Tag.Get("min")}
		if d, ok := f.sf.Tag.Lookup("default"); ok {
			k.Default = d
		} else if c, ok := f.sf.Tag.Lookup("computed"); ok {
			k.Default, k.Computed = c, true
		}
		if e, ok := f.sf.Tag.Lookup("enum"); ok {
			k.Enum = strings.Split(e, ",")
		}
		inner := ft
		for inner.Kind() == reflect.Pointer || inner.Kind() == reflect.Slice {
			inner = inner.Elem()
		}
		k.Block = isBlock(inner)
		*out = append(*out, k)
		if k.Block {
			describe(inner, k.Path, out)
		}
	}
}
