package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	"github.com/muxd/muxd/exec"
	"github.com/muxd/muxd/mux"
	"github.com/muxd/muxd/pty"
)

// A param of the wrong type is named in the protocol's terms, without
// Go's type names.
func TestParamTypeErrorsNameTheParam(t *testing.T) {
	tests := []struct{ params, want string }{
		{`{"command":5}`, "command: expected a string, not a number"},
		{`{"command":"x","env":{"A":5}}`, "env: expected a string, not a number"},
		{`{"command":"x","env":[1]}`, "env: expected an object, not an array"},
		{`{"command":"x","timeoutMs":1.5}`, "timeoutMs: expected an integer, not a number 1.5"},
		{`{"command":"x","stdin":true}`, "stdin: expected a string, not a boolean"},
		{`[1]`, "params must be an object"},
	}
	for _, tc := range tests {
		var p execParams
		err := decodeParams(json.RawMessage(tc.params), &p)
		var me *mux.Error
		if !errors.As(err, &me) || me.Code != mux.CodeInvalidParams || me.Message != tc.want {
			t.Errorf("%s: got %v, want invalid_params %q", tc.params, err, tc.want)
		}
	}
}

// A kill counts as long only past the default grace: short, it stays
// possible while long waits fill their cap.
func TestKillIsLongOnlyPastTheDefaultGrace(t *testing.T) {
	for params, want := range map[string]bool{
		`{"id":"a"}`:                  false,
		`{"id":"a","graceMs":2000}`:   false,
		`{"id":"a","graceMs":0}`:      false,
		`{"id":"a","graceMs":60000}`:  true,
		`{"id":"a","graceMs":"slow"}`: false,
	} {
		if got := killIsLong(json.RawMessage(params)); got != want {
			t.Errorf("killIsLong(%s) = %v, want %v", params, got, want)
		}
	}
}

// Param names match exactly: a member whose name matches a param only
// with its case folded is an unknown member, ignored (encoding/json took
// "COMMAND" for "command", and the later one won). The order key reads
// the same way as the handler.
func TestParamNamesAreCaseSensitive(t *testing.T) {
	var p execParams
	err := decodeParams([]byte(`{"command":"echo real","COMMAND":"echo shadow","SessionId":"s"}`), &p)
	if err != nil || p.Command != "echo real" || p.SessionID != "" {
		t.Fatalf("decodeParams: %+v, %v; want command \"echo real\" and no session", p, err)
	}
	if k := sessionOrderKey("sessionId")([]byte(`{"SessionId":"s"}`)); k != "" {
		t.Fatalf("order key of a folded sessionId: %q, want none", k)
	}
}

// An engine error's text on the wire drops what its code says already:
// a client printed "mux: not_found: exec: not found: process \"x\"".
func TestWireMessagesDoNotRestateTheirCode(t *testing.T) {
	for _, tt := range []struct {
		err  error
		want string
	}{
		{fmt.Errorf("%w: process %q", exec.ErrNotFound, "x"), `process "x"`},
		{fmt.Errorf("%w: session %q", exec.ErrAlreadyExists, "s"), `session "s"`},
		{fmt.Errorf("%w: pattern of 5000 bytes, at most 4096", exec.ErrInvalid), "pattern of 5000 bytes, at most 4096"},
		{fmt.Errorf("%w: %q", pty.ErrNotFound, "t"), `terminal not found: "t"`},
		{exec.ErrNotFound, "not found"},
		{fmt.Errorf("%w: proc: arguments too large", exec.ErrInvalid), "arguments too large"},
		{errors.New("something else"), "something else"},
	} {
		var me *mux.Error
		if err := execError(tt.err); !errors.As(err, &me) || me.Message != tt.want {
			t.Errorf("%v: wire message %q, want %q", tt.err, me.Message, tt.want)
		}
	}
}
