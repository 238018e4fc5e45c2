package mux

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"sync"
)

// UnmarshalExact is json.Unmarshal of a JSON object into the struct v,
// except that member names match v's fields exactly. encoding/json
// matches them case-insensitively (with Unicode folding: "ſ" is an "s"),
// so {"id":5,"Id":6} was read as id 6 (the answer went to an id the
// client never used) and an exec's "COMMAND" member ran in place of its
// "command". Every member whose name is not exactly a field's is dropped
// before decoding, as encoding/json ignores unknown members anyway. Only
// v's own members are checked, not nested objects'.
func UnmarshalExact(p []byte, v any) error {
	if names := exactNames(reflect.TypeOf(v)); names != nil {
		exact, err := keepExact(p, names)
		if err != nil {
			return err
		}
		p = exact
	}
	return json.Unmarshal(p, v)
}

// fieldNames are the member names of a struct type.
type fieldNames struct {
	exact map[string]bool
}

var namesCache sync.Map // reflect.Type → *fieldNames (nil: not a struct)

func exactNames(t reflect.Type) *fieldNames {
	if t == nil {
		return nil
	}
	if n, ok := namesCache.Load(t); ok {
		return n.(*fieldNames)
	}
	st := t
	for st.Kind() == reflect.Pointer {
		st = st.Elem()
	}
	var names *fieldNames
	if st.Kind() == reflect.Struct {
		names = &fieldNames{exact: map[string]bool{}}
		addFields(st, names)
	}
	namesCache.Store(t, names)
	return names
}

// addFields adds the JSON member names of t's fields, those of embedded
// structs included.
func addFields(t reflect.Type, names *fieldNames) {
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		if name == "" && f.Anonymous {
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				addFields(ft, names)
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		names.exact[name] = true
	}
}

// keepExact returns p with only the top-level members whose names are
// exactly field names: p itself when it has no other, and when it is
// not well-formed JSON (json.Unmarshal then says why).
func keepExact(p []byte, names *fieldNames) ([]byte, error) {
	var keep [][2][]byte // kept members: raw name, raw value
	dropped := false
	switch walkMembers(p, func(name, value []byte) {
		if n, ok := memberName(name); ok && names.exact[n] {
			keep = append(keep, [2][]byte{name, value})
		} else {
			dropped = true
		}
	}) {
	case walkDeep:
		return exactByMap(p, names)
	case walkBad:
		return p, nil
	}
	if !dropped {
		return p, nil
	}
	out := make([]byte, 0, len(p))
	out = append(out, '{')
	for i, m := range keep {
		if i > 0 {
			out = append(out, ',')
		}
		out = append(append(append(out, m[0]...), ':'), m[1]...)
	}
	return append(out, '}'), nil
}

// StringMember returns the string value of p's top-level member name
// (matched exactly; the last one, as a decoder takes it), or "" when
// there is none, it is not a string, or p is not an object (or one
// nested past 1000 levels). It walks the members without decoding their
// values: a cheap look at one param of a request that may carry
// megabytes of others.
func StringMember(p []byte, name string) string {
	var found []byte
	if walkMembers(p, func(n, value []byte) {
		// A later null leaves a decoded string as it was: so here.
		if k, ok := memberName(n); ok && k == name && string(value) != "null" {
			found = value
		}
	}) != walkOK {
		return ""
	}
	var v string
	if len(found) == 0 || found[0] != '"' || json.Unmarshal(found, &v) != nil {
		return ""
	}
	return v
}

// walkResult says how walkMembers ended.
type walkResult int

const (
	walkOK   walkResult = iota
	walkBad             // not an object, or not well-formed JSON
	walkDeep            // well-formed, but nested past maxScanDepth
)

// walkMembers calls fn with each top-level member of the JSON object p,
// its raw name (quoted) and raw value, in order, without decoding them.
func walkMembers(p []byte, fn func(name, value []byte)) walkResult {
	s := jsonScan{p: p}
	s.space()
	if !s.eat('{') {
		return walkBad
	}
	s.space()
	closed := s.eat('}')
	for range len(p) { // bounded: each member consumes bytes
		if closed {
			if !s.end() {
				return walkBad
			}
			return walkOK
		}
		s.space()
		start := s.i
		if !s.str() {
			return walkBad
		}
		name := p[start:s.i]
		s.space()
		if !s.eat(':') {
			return walkBad
		}
		s.space()
		vstart := s.i
		if !s.value(0) {
			if json.Valid(p) {
				return walkDeep
			}
			return walkBad
		}
		fn(name, p[vstart:s.i])
		s.space()
		if closed = s.eat('}'); !closed && !s.eat(',') {
			return walkBad
		}
	}
	return walkBad
}

// memberName is a raw (quoted) member name, unquoted.
func memberName(raw []byte) (string, bool) {
	if bytes.IndexByte(raw, '\\') < 0 {
		return string(raw[1 : len(raw)-1]), true
	}
	var un string
	return un, json.Unmarshal(raw, &un) == nil
}

// exactByMap is keepExact for what the scanner does not walk (nesting
// past maxScanDepth): a map's keys are exact, and a later duplicate wins
// in it as in a struct.
func exactByMap(p []byte, names *fieldNames) ([]byte, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(p, &m); err != nil {
		return p, nil // json.Unmarshal of p says why
	}
	for k := range m {
		if !names.exact[k] {
			delete(m, k)
		}
	}
	return json.Marshal(m)
}
