package mux

import (
	"encoding/json"
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
		if tt.err {
			var std params
			if json.Unmarshal([]byte(tt.in), &std) == nil {
				t.Errorf("%s: encoding/json accepts it", tt.in)
			}
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
}
