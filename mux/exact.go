package mux

import (
	"encoding/json"
	"reflect"
	"strings"
	"sync"
)

// UnmarshalExact is json.Unmarshal of a JSON object into the struct v,
// except that member names match v's fields exactly. encoding/json
// matches them case-insensitively, so {"id":5,"Id":6} was read as id 6
// (the answer went to an id the client never used) and an exec's
// "COMMAND" member ran in place of its "command". A member whose name
// matches a field only with its case folded is ignored, like any other
// unknown member. Only v's own members are checked, not nested objects.
func UnmarshalExact(p []byte, v any) error {
	if names := exactNames(reflect.TypeOf(v)); names != nil {
		p = dropFolded(p, names)
	}
	return json.Unmarshal(p, v)
}

// fieldNames are the member names of a struct type: exact, and folded
// to lower case.
type fieldNames struct {
	exact, lower map[string]bool
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
		names = &fieldNames{exact: map[string]bool{}, lower: map[string]bool{}}
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
		names.lower[strings.ToLower(name)] = true
	}
}

// dropFolded returns p without the top-level members whose names match
// a field only with case folded; p itself when there are none, or when
// it is not a well-formed object (json.Unmarshal then says why).
func dropFolded(p []byte, names *fieldNames) []byte {
	s := jsonScan{p: p}
	s.space()
	if !s.eat('{') {
		return p
	}
	var members [][2]int // every member's span, name to value
	var drop []bool
	folded := false
	s.space()
	if s.eat('}') {
		return p
	}
	for range len(p) { // bounded: each member consumes bytes
		s.space()
		start := s.i
		if !s.str() {
			return p
		}
		name := p[start+1 : s.i-1]
		if strings.IndexByte(string(name), '\\') >= 0 {
			var un string
			if json.Unmarshal(p[start:s.i], &un) != nil {
				return p
			}
			name = []byte(un)
		}
		s.space()
		if !s.eat(':') {
			return p
		}
		s.space()
		if !s.value(0) {
			return p
		}
		members = append(members, [2]int{start, s.i})
		n := string(name)
		d := !names.exact[n] && names.lower[strings.ToLower(n)]
		drop = append(drop, d)
		folded = folded || d
		s.space()
		if s.eat('}') {
			break
		}
		if !s.eat(',') {
			return p
		}
	}
	if !folded || !s.end() {
		return p
	}
	out := make([]byte, 0, len(p))
	out = append(out, '{')
	for i, m := range members {
		if drop[i] {
			continue
		}
		if len(out) > 1 {
			out = append(out, ',')
		}
		out = append(out, p[m[0]:m[1]]...)
	}
	return append(out, '}')
}
