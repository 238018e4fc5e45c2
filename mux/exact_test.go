package mux

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func TestUnmarshalExactIgnoresCaseFoldedNames(t *testing.T) {
	type params struct {
		Command string `json:"command"`
		ID      string `json:"id"`
		N       int    `json:"n"`
		Plain   string
	}
	for _, tt := range []struct {
		in   string
		want params
		err  bool
	}{
		{`{"command":"real","COMMAND":"shadow"}`, params{Command: "real"}, false},
		{`{"COMMAND":"shadow","command":"real"}`, params{Command: "real"}, false},
		{`{"Command":"x","Id":"y","N":3}`, params{}, false},
		{`{"\u0069d":"escaped but exact","iD":"folded"}`, params{ID: "escaped but exact"}, false},
		{`{"Plain":"field name","plain":"folded"}`, params{Plain: "field name"}, false},
		// encoding/json folds Unicode too: the long s is an s to it.
		{`{"command":"real","ſommand":"x","ID":"y","ıd":"z"}`, params{Command: "real"}, false},
		{`{"\u0053ommand":"escaped capital"}`, params{}, false},
		{`{"command":"a","pad":` + strings.Repeat("[", 1005) + strings.Repeat("]", 1005) + `,"COMMAND":"b"}`, params{Command: "a"}, false},
		{`{"other":{"Command":"nested, not checked"},"n":1}`, params{N: 1}, false},
		{` { } `, params{}, false},
		{`{"command":"a",}`, params{}, true},
		{`{"n":"not a number"}`, params{}, true},
		{`[1]`, params{}, true},
	} {
		var got params
		err := UnmarshalExact([]byte(tt.in), &got)
		if (err != nil) != tt.err || (!tt.err && got != tt.want) {
			t.Errorf("%s: got %+v, %v; want %+v, error %v", tt.in, got, err, tt.want, tt.err)
		}

	}
}

// An envelope with a case-folded "Id" next to "id" is answered on "id":
// encoding/json took the later "Id", and the answer went to an id the
// client never used.
func TestEnvelopeMembersAreCaseSensitive(t *testing.T) {
	ts := newTestServer(t, tcpTransport, Config{}, echoRouter())
	rc := rawDial(t, ts, true)
	rc.send(typeRPC, 0, []byte(`{"jsonrpc":"2.0","id":5,"Id":6,"method":"echo","params":{"a":1},"Method":"fail"}`))
	_, p := rc.recvType(typeRPC)
	var m struct {
		ID     int             `json:"id"`
		Result json.RawMessage `json:"result"`
	}
	if err := json.Unmarshal(p, &m); err != nil || m.ID != 5 || string(m.Result) != `{"a":1}` {
		t.Fatalf("answer %s: want id 5 with echo's result", p)
	}
	// Nested past the scanner's depth: still exact, still answered on id.
	deep := strings.Repeat("[", 1005) + strings.Repeat("]", 1005)
	rc.send(typeRPC, 0, []byte(`{"jsonrpc":"2.0","id":7,"Id":8,"method":"echo","params":{"pad":`+deep+`}}`))
	_, p = rc.recvType(typeRPC)
	if err := json.Unmarshal(p, &m); err != nil || m.ID != 7 {
		t.Fatalf("answer %.80s: want id 7", p)
	}
}

// exactRef decodes like UnmarshalExact, the slow and obvious way: the
// object's members by exact name, then each field from its own member.
func exactRef(p []byte, v *fuzzParams) error {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(p, &m); err != nil {
		return err
	}
	if m == nil {
		return nil // null
	}
	for name, dst := range map[string]any{"sessionId": &v.SessionID, "n": &v.N, "params": &v.Params, "Plain": &v.Plain} {
		if raw, ok := m[name]; ok {
			if err := json.Unmarshal(raw, dst); err != nil {
				return err
			}
		}
	}
	return nil
}

type fuzzParams struct {
	SessionID string          `json:"sessionId"`
	N         int             `json:"n"`
	Params    json.RawMessage `json:"params"`
	Plain     string
}

// FuzzUnmarshalExact: UnmarshalExact agrees with the reference on every
// well-formed document it accepts, and fails where the reference fails
// to parse.
func FuzzUnmarshalExact(f *testing.F) {
	for _, s := range []string{
		`{"sessionId":"a","SessionId":"b","n":1,"N":2}`,
		`{"ſessionId":"x","sessionId":"y"}`,
		`{"params":{"Id":1},"Plain":"p","plain":"q"}`,
		`{"sessionId":"a","sessionId":"b"}`,
		`{"\u0073essionId":"esc"}`,
		`null`, `[]`, `{}`, `{"n":1.5}`, `{"n":"x"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, p []byte) {
		var got, want fuzzParams
		err := UnmarshalExact(p, &got)
		refErr := exactRef(p, &want)
		var syn *json.SyntaxError
		if errors.As(refErr, &syn) && err == nil {
			t.Fatalf("%q: accepted, but it is not JSON (%v)", p, refErr)
		}
		if err == nil && refErr == nil && (got.SessionID != want.SessionID || got.N != want.N || string(got.Params) != string(want.Params) || got.Plain != want.Plain) {
			t.Fatalf("%q: got %+v, want %+v", p, got, want)
		}
	})
}

func TestStringMember(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{`{"sessionId":"s1","stdin":"` + strings.Repeat("x", 1000) + `"}`, "s1"},
		{`{"SessionId":"folded","ſessionId":"long s"}`, ""},
		{`{"sessionId":"first","sessionId":"last"}`, "last"},
		{`{"\u0073essionId":"escaped name"}`, "escaped name"},
		{`{"sessionId":"with \"quote\""}`, `with "quote"`},
		{`{"nested":{"sessionId":"inner"}}`, ""},
		{`{"sessionId":5}`, ""},
		{`{"sessionId":"a",}`, ""},
		{`{"sessionId":"a","sessionId":null}`, "a"}, // as the handler's decode
		{`["sessionId","a"]`, ""},
		{``, ""},
	} {
		if got := StringMember([]byte(tt.in), "sessionId"); got != tt.want {
			t.Errorf("StringMember(%.60s) = %q, want %q", tt.in, got, tt.want)
		}
	}
}
