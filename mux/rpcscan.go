package mux

import "encoding/json"

// scanRPC is parseRPC's fast path: one pass over a JSON-RPC object that
// validates the whole text and slices out the members, with no
// reflection and no allocation beyond the method string. encoding/json
// scans a message twice (validate, then decode) and was about a sixth of
// the CPU of an RPC round trip. It handles the common shape only and
// reports ok=false for anything else (a member name other than the five
// exact ones, duplicates, escapes or non-ASCII in jsonrpc or method, a
// non-string jsonrpc or method, an error member, syntax errors), which
// parseRPC then decodes with encoding/json, so both paths give the same
// result (FuzzParsePayloads checks it).
func scanRPC(p []byte) (m rpcMsg, ok bool) {
	s := jsonScan{p: p}
	s.space()
	if !s.eat('{') {
		return rpcMsg{}, false
	}
	var seen [5]bool
	var spans [5][2]int // where id, params and result lie in p
	s.space()
	if s.eat('}') {
		return m, s.end()
	}
	for range len(p) { // bounded: each member consumes bytes
		s.space()
		key, ok := s.plainString()
		if !ok {
			return rpcMsg{}, false
		}
		s.space()
		if !s.eat(':') {
			return rpcMsg{}, false
		}
		s.space()
		start := s.i
		if !s.value(0) {
			return rpcMsg{}, false
		}
		var k int
		switch string(key) {
		case "jsonrpc":
			k = 0
		case "id":
			k = 1
		case "method":
			k = 2
		case "params":
			k = 3
		case "result":
			k = 4
		default:
			return rpcMsg{}, false // "error", unknown or case-folded names
		}
		if seen[k] {
			return rpcMsg{}, false
		}
		seen[k] = true
		switch k {
		case 0, 2:
			str, ok := plainStringValue(p[start:s.i])
			if !ok {
				return rpcMsg{}, false
			}
			if k == 0 {
				m.JSONRPC = str
			} else {
				m.Method = str
			}
		default:
			spans[k] = [2]int{start, s.i}
		}
		s.space()
		if s.eat('}') {
			if !s.end() {
				return rpcMsg{}, false
			}
			// The caller reuses p for the next frame: the raw members get
			// one copy of their own.
			keep := make([]byte, 0, spans[1][1]-spans[1][0]+spans[3][1]-spans[3][0]+spans[4][1]-spans[4][0])
			for _, k := range [...]int{1, 3, 4} {
				if !seen[k] {
					continue
				}
				from := len(keep)
				keep = append(keep, p[spans[k][0]:spans[k][1]]...)
				raw := json.RawMessage(keep[from:len(keep):len(keep)])
				switch k {
				case 1:
					m.ID = raw
				case 3:
					m.Params = raw
				case 4:
					m.Result = raw
				}
			}
			return m, true
		}
		if !s.eat(',') {
			return rpcMsg{}, false
		}
	}
	return rpcMsg{}, false
}

// plainStringValue returns the text of a JSON string without escapes
// and with ASCII characters only (what encoding/json would decode to
// the same bytes); "2.0" and method names always are.
func plainStringValue(raw []byte) (string, bool) {
	if len(raw) < 2 || raw[0] != '"' {
		return "", false
	}
	body := raw[1 : len(raw)-1]
	for _, c := range body {
		if c == '\\' || c >= 0x80 {
			return "", false
		}
	}
	switch string(body) { // the common values, without allocating
	case "2.0":
		return "2.0", true
	}
	return string(body), true
}

// maxScanDepth bounds nesting; deeper documents go to encoding/json,
// which has its own limit.
const maxScanDepth = 1000

// jsonScan is a cursor over a JSON text.
type jsonScan struct {
	p []byte
	i int
}

func (s *jsonScan) space() {
	for s.i < len(s.p) {
		switch s.p[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

func (s *jsonScan) eat(c byte) bool {
	if s.i < len(s.p) && s.p[s.i] == c {
		s.i++
		return true
	}
	return false
}

// end reports whether only whitespace follows.
func (s *jsonScan) end() bool {
	s.space()
	return s.i == len(s.p)
}

// plainString reads a member name without escapes.
func (s *jsonScan) plainString() ([]byte, bool) {
	start := s.i
	if !s.str() {
		return nil, false
	}
	raw := s.p[start:s.i]
	for _, c := range raw[1 : len(raw)-1] {
		if c == '\\' {
			return nil, false
		}
	}
	return raw[1 : len(raw)-1], true
}

// value skips one JSON value, reporting whether it is well-formed.
func (s *jsonScan) value(depth int) bool {
	if s.i >= len(s.p) || depth > maxScanDepth {
		return false
	}
	switch c := s.p[s.i]; {
	case c == '{':
		s.i++
		return s.seq('}', func() bool {
			if !s.str() {
				return false
			}
			s.space()
			if !s.eat(':') {
				return false
			}
			s.space()
			return s.value(depth + 1)
		})
	case c == '[':
		s.i++
		return s.seq(']', func() bool { return s.value(depth + 1) })
	case c == '"':
		return s.str()
	case c == '-' || (c >= '0' && c <= '9'):
		return s.number()
	default:
		return s.literal("true") || s.literal("false") || s.literal("null")
	}
}

// seq skips the rest of an object or an array, after its opening byte:
// items separated by commas, up to end.
func (s *jsonScan) seq(end byte, item func() bool) bool {
	s.space()
	if s.eat(end) {
		return true
	}
	for range len(s.p) { // bounded: each item consumes bytes
		s.space()
		if !item() {
			return false
		}
		s.space()
		if s.eat(end) {
			return true
		}
		if !s.eat(',') {
			return false
		}
	}
	return false
}

// str skips a string: no control characters, valid escapes.
func (s *jsonScan) str() bool {
	if !s.eat('"') {
		return false
	}
	for s.i < len(s.p) {
		c := s.p[s.i]
		s.i++
		switch {
		case c == '"':
			return true
		case c < 0x20:
			return false
		case c == '\\':
			if s.i >= len(s.p) {
				return false
			}
			e := s.p[s.i]
			s.i++
			switch e {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if s.i+4 > len(s.p) {
					return false
				}
				for _, h := range s.p[s.i : s.i+4] {
					if !isHex(h) {
						return false
					}
				}
				s.i += 4
			default:
				return false
			}
		}
	}
	return false
}

func isHex(c byte) bool {
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')
}

// number skips a number per the JSON grammar.
func (s *jsonScan) number() bool {
	s.eat('-')
	switch {
	case s.eat('0'):
	case s.i < len(s.p) && s.p[s.i] >= '1' && s.p[s.i] <= '9':
		s.digits()
	default:
		return false
	}
	if s.eat('.') {
		if !s.digits() {
			return false
		}
	}
	if s.eat('e') || s.eat('E') {
		if !s.eat('+') {
			s.eat('-')
		}
		if !s.digits() {
			return false
		}
	}
	return true
}

// digits skips one or more digits.
func (s *jsonScan) digits() bool {
	start := s.i
	for s.i < len(s.p) && s.p[s.i] >= '0' && s.p[s.i] <= '9' {
		s.i++
	}
	return s.i > start
}

func (s *jsonScan) literal(word string) bool {
	if len(s.p)-s.i >= len(word) && string(s.p[s.i:s.i+len(word)]) == word {
		s.i += len(word)
		return true
	}
	return false
}
