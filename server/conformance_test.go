package server

import (
	"context"
	"errors"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/muxd/muxd/client"
	"github.com/muxd/muxd/mux"
)

// Conformance tests: each row checks one line of PROTOCOL.md against the
// real daemon over a real WebSocket, with the wire's own field names (raw
// JSON objects, not the Go client's structs).

// obj is a decoded JSON object as the wire carries it.
type obj = map[string]any

// rawConn dials the test server and returns its mux connection.
func rawConn(t *testing.T, url string, opts client.Options) *mux.Conn {
	t.Helper()
	c := dialClient(t, url, opts)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	conn, err := c.Conn(ctx)
	if err != nil {
		t.Fatalf("Conn: %v", err)
	}
	return conn
}

// call runs one RPC and returns its result as a JSON object.
func call(t *testing.T, conn *mux.Conn, method string, params any) (obj, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var res obj
	err := conn.Call(ctx, method, params, &res)
	return res, err
}

// mustCall is call that fails the test on an error.
func mustCall(t *testing.T, conn *mux.Conn, method string, params any) obj {
	t.Helper()
	res, err := call(t, conn, method, params)
	if err != nil {
		t.Fatalf("%s %v: %v", method, params, err)
	}
	return res
}

// keysOf returns the sorted keys of m.
func keysOf(m obj) string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return strings.Join(ks, ",")
}

// wantKeys fails unless m has exactly the given keys.
func wantKeys(t *testing.T, what string, m obj, keys string) {
	t.Helper()
	want := strings.Split(keys, ",")
	sort.Strings(want)
	if got := keysOf(m); got != strings.Join(want, ",") {
		t.Fatalf("%s keys: got %s, want %s", what, got, strings.Join(want, ","))
	}
}

// rfc3339msRE is RFC 3339 with exactly three fractional digits.
var rfc3339msRE = regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}(Z|[+-]\d\d:\d\d)$`)

func wantTime(t *testing.T, what string, v any) {
	t.Helper()
	s, ok := v.(string)
	if !ok || !rfc3339msRE.MatchString(s) {
		t.Fatalf("%s: got %v, want RFC 3339 with milliseconds", what, v)
	}
}

// wantErr fails unless err is an RPC error with code and reason.
func wantErr(t *testing.T, what string, err error, code mux.Code) {
	t.Helper()
	var me *mux.Error
	if !errors.As(err, &me) {
		t.Fatalf("%s: got %v, want error %s (%d)", what, err, code.Reason(), code)
	}
	if me.Code != code || me.Reason != code.Reason() {
		t.Fatalf("%s: got %d %q (%s), want %d %q", what, me.Code, me.Reason, me.Message, code, code.Reason())
	}
}

func TestRPCErrorCodesConform(t *testing.T) {
	_, url := testServer(t, nil)
	conn := rawConn(t, url, client.Options{NoReconnect: true})
	mustCall(t, conn, "session.create", obj{"id": "s-dead"})
	if _, err := call(t, conn, "exec", obj{"command": "exit 7", "sessionId": "s-dead"}); err != nil {
		t.Fatalf("exec exit 7: %v", err)
	}
	mustCall(t, conn, "process.start", obj{"command": "sleep 30", "id": "p-run"})
	t.Cleanup(func() { _, _ = call(t, conn, "process.kill", obj{"id": "p-run", "signal": "KILL"}) })
	mustCall(t, conn, "session.create", obj{"id": "s-ok"})

	tests := []struct {
		name   string
		method string
		params any
		code   mux.Code
	}{
		{"unknown method", "no.such", obj{}, mux.CodeMethodNotFound},
		{"params not an object", "process.get", []int{1}, mux.CodeInvalidParams},
		{"wrong param type", "process.get", obj{"id": 5}, mux.CodeInvalidParams},
		{"process.get unknown", "process.get", obj{"id": "nope"}, mux.CodeNotFound},
		{"process.get no id", "process.get", obj{}, mux.CodeInvalidParams},
		{"process.read unknown", "process.read", obj{"id": "nope", "stream": "stdout", "from": 0, "length": 10}, mux.CodeNotFound},
		{"process.read length over 512 KiB", "process.read", obj{"id": "p-run", "stream": "stdout", "from": 0, "length": 512<<10 + 1}, mux.CodeInvalidParams},
		{"process.read bad stream", "process.read", obj{"id": "p-run", "stream": "both", "from": 0, "length": 10}, mux.CodeInvalidParams},
		{"process.read negative from", "process.read", obj{"id": "p-run", "stream": "stdout", "from": -1, "length": 10}, mux.CodeInvalidParams},
		{"process.read bad encoding", "process.read", obj{"id": "p-run", "stream": "stdout", "from": 0, "length": 10, "encoding": "hex"}, mux.CodeInvalidParams},
		{"process.wait unknown", "process.wait", obj{"id": "nope"}, mux.CodeNotFound},
		{"process.wait timeout", "process.wait", obj{"id": "p-run", "timeoutMs": 10}, mux.CodeTimeout},
		{"process.kill unknown", "process.kill", obj{"id": "nope"}, mux.CodeNotFound},
		{"process.kill bad signal", "process.kill", obj{"id": "p-run", "signal": "BOGUS"}, mux.CodeInvalidParams},
		{"process.kill negative grace", "process.kill", obj{"id": "p-run", "graceMs": -1}, mux.CodeInvalidParams},
		{"process.remove unknown", "process.remove", obj{"id": "nope"}, mux.CodeNotFound},
		{"process.waitForLog unknown", "process.waitForLog", obj{"id": "nope", "pattern": "x"}, mux.CodeNotFound},
		{"process.waitForLog bad pattern", "process.waitForLog", obj{"id": "p-run", "pattern": "("}, mux.CodeInvalidParams},
		{"process.waitForLog timeout", "process.waitForLog", obj{"id": "p-run", "pattern": "x", "timeoutMs": 10}, mux.CodeTimeout},
		{"process.waitForPort bad port", "process.waitForPort", obj{"port": 0}, mux.CodeInvalidParams},
		{"process.waitForPort unknown id", "process.waitForPort", obj{"port": 1, "id": "nope", "timeoutMs": 100}, mux.CodeNotFound},
		{"process.start no command", "process.start", obj{}, mux.CodeInvalidParams},
		{"process.start reused running id", "process.start", obj{"command": "true", "id": "p-run"}, mux.CodeAlreadyExists},
		{"process.start unknown session", "process.start", obj{"command": "true", "sessionId": "nope"}, mux.CodeNotFound},
		{"process.start bad cwd", "process.start", obj{"command": "true", "cwd": "/no/such/dir"}, mux.CodeInvalidParams},
		{"process.start dead session", "process.start", obj{"command": "true", "sessionId": "s-dead"}, mux.CodeSessionDead},
		{"exec no command", "exec", obj{}, mux.CodeInvalidParams},
		{"exec maxOutput over 512 KiB", "exec", obj{"command": "true", "maxOutput": 512<<10 + 1}, mux.CodeInvalidParams},
		{"exec bad encoding", "exec", obj{"command": "true", "encoding": "hex"}, mux.CodeInvalidParams},
		{"exec bad stdinEncoding", "exec", obj{"command": "true", "stdin": "x", "stdinEncoding": "hex"}, mux.CodeInvalidParams},
		{"exec bad base64 stdin", "exec", obj{"command": "true", "stdin": "!!", "stdinEncoding": "base64"}, mux.CodeInvalidParams},
		{"exec negative timeout", "exec", obj{"command": "true", "timeoutMs": -5}, mux.CodeInvalidParams},
		{"exec unknown session", "exec", obj{"command": "true", "sessionId": "nope"}, mux.CodeNotFound},
		{"exec dead session", "exec", obj{"command": "true", "sessionId": "s-dead"}, mux.CodeSessionDead},
		{"exec reused running id", "exec", obj{"command": "true", "id": "p-run"}, mux.CodeAlreadyExists},
		{"session.create existing id", "session.create", obj{"id": "s-ok"}, mux.CodeAlreadyExists},
		{"session.interrupt unknown", "session.interrupt", obj{"id": "nope"}, mux.CodeNotFound},
		{"session.delete unknown", "session.delete", obj{"id": "nope"}, mux.CodeNotFound},
		{"session.delete no id", "session.delete", obj{}, mux.CodeInvalidParams},
		{"terminal.create cols over 1000", "terminal.create", obj{"cols": 1001}, mux.CodeInvalidParams},
		{"terminal.create negative rows", "terminal.create", obj{"rows": -1}, mux.CodeInvalidParams},
		{"terminal.create unknown session", "terminal.create", obj{"sessionId": "nope"}, mux.CodeNotFound},
		{"terminal.update unknown", "terminal.update", obj{"id": "nope"}, mux.CodeNotFound},
		{"terminal.destroy unknown", "terminal.destroy", obj{"id": "nope"}, mux.CodeNotFound},
		{"terminal.destroy no id", "terminal.destroy", obj{}, mux.CodeInvalidParams},
		{"rpc.cancel no id", "rpc.cancel", obj{}, mux.CodeInvalidParams},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := call(t, conn, tt.method, tt.params)
			wantErr(t, tt.method, err, tt.code)
		})
	}
}

// processKeys are Process's fields; sessionId and endedAt are optional.
const processKeys = "id,instance,pid,command,status,exitCode,signal,startedAt,stdoutBytes,stderrBytes"

func TestProcessObjectConforms(t *testing.T) {
	_, url := testServer(t, nil)
	conn := rawConn(t, url, client.Options{NoReconnect: true})
	mustCall(t, conn, "session.create", obj{"id": "s1"})

	// Running: no endedAt, exitCode and signal null.
	run := mustCall(t, conn, "process.start", obj{"command": "sleep 30", "id": "run"})
	wantKeys(t, "running Process", run, processKeys)
	if run["status"] != "running" || run["exitCode"] != nil || run["signal"] != nil || run["instance"] == "" {
		t.Fatalf("running Process: got %v", run)
	}
	wantTime(t, "startedAt", run["startedAt"])
	mustCall(t, conn, "process.kill", obj{"id": "run", "signal": "KILL"})

	tests := []struct {
		name    string
		start   obj
		kill    obj // process.kill params, if any
		status  string
		code    any // float64 or nil
		signal  any // string or nil
		session bool
	}{
		{"exit code", obj{"command": "echo hi; exit 3"}, nil, "exited", 3.0, nil, false},
		{"exit 0 in a session", obj{"command": "true", "sessionId": "s1"}, nil, "exited", 0.0, nil, true},
		{"crash by signal is exited", obj{"command": "kill -KILL $$"}, nil, "exited", nil, "KILL", false},
		{"kill default TERM", obj{"command": "sleep 30"}, obj{}, "killed", nil, "TERM", false},
		{"kill SIGTERM", obj{"command": "sleep 30"}, obj{"signal": "SIGTERM"}, "killed", nil, "TERM", false},
		{"kill by number", obj{"command": "sleep 30"}, obj{"signal": "9"}, "killed", nil, "KILL", false},
		{"kill INT", obj{"command": "sleep 30"}, obj{"signal": "INT"}, "killed", nil, "INT", false},
		{"timeout", obj{"command": "sleep 30", "timeoutMs": 50}, nil, "timed_out", nil, "*", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := call(t, conn, "process.start", tt.start)
			if err != nil {
				t.Fatalf("process.start: %v", err)
			}
			id, _ := p["id"].(string)
			if id == "" {
				t.Fatalf("process.start: no id in %v", p)
			}
			if tt.kill != nil {
				tt.kill["id"] = id
				mustCall(t, conn, "process.kill", tt.kill)
			}
			got := mustCall(t, conn, "process.wait", obj{"id": id, "timeoutMs": 5000})
			want := processKeys + ",endedAt"
			if tt.session {
				want += ",sessionId"
			}
			wantKeys(t, "ended Process", got, want)
			wantTime(t, "endedAt", got["endedAt"])
			if got["status"] != tt.status {
				t.Fatalf("status: got %v, want %s (%v)", got["status"], tt.status, got)
			}
			if tt.code != "*" && got["exitCode"] != tt.code {
				t.Fatalf("exitCode: got %v, want %v", got["exitCode"], tt.code)
			}
			if tt.code == "*" && (got["exitCode"] == nil || got["exitCode"] == 0.0) {
				t.Fatalf("exitCode: got %v, want a nonzero code", got["exitCode"])
			}
			if tt.signal == "*" {
				if got["signal"] == nil || got["exitCode"] != nil {
					t.Fatalf("signal/exitCode: got %v/%v, want a signal and null", got["signal"], got["exitCode"])
				}
			} else if got["signal"] != tt.signal {
				t.Fatalf("signal: got %v, want %v", got["signal"], tt.signal)
			}
			if same := mustCall(t, conn, "process.get", obj{"id": id}); keysOf(same) != keysOf(got) || same["status"] != got["status"] {
				t.Fatalf("process.get: got %v, want %v", same, got)
			}
		})
	}
}

func TestExecResultAndRecordConform(t *testing.T) {
	_, url := testServer(t, nil)
	conn := rawConn(t, url, client.Options{NoReconnect: true})
	res := mustCall(t, conn, "exec", obj{"command": "printf out; printf err >&2; exit 4", "id": "e1"})
	wantKeys(t, "exec result", res, "id,exitCode,signal,timedOut,stdout,stderr,encoding,stdoutTruncated,stderrTruncated,durationMs")
	if res["id"] != "e1" || res["exitCode"] != 4.0 || res["signal"] != nil || res["timedOut"] != false ||
		res["stdout"] != "out" || res["stderr"] != "err" || res["encoding"] != "utf8" {
		t.Fatalf("exec result: got %v", res)
	}
	// Readable by id, not listed.
	p := mustCall(t, conn, "process.get", obj{"id": "e1"})
	if p["status"] != "exited" || p["exitCode"] != 4.0 || p["stdoutBytes"] != 3.0 || p["stderrBytes"] != 3.0 {
		t.Fatalf("process.get of an exec: got %v", p)
	}
	r := mustCall(t, conn, "process.read", obj{"id": "e1", "stream": "stdout", "from": 0, "length": 100})
	if r["data"] != "out" || r["from"] != 0.0 || r["first"] != 0.0 || r["end"] != 3.0 {
		t.Fatalf("process.read of an exec: got %v", r)
	}
	list := mustCall(t, conn, "process.list", nil)
	if ps, _ := list["processes"].([]any); len(ps) != 0 {
		t.Fatalf("process.list shows an exec: %v", ps)
	}

	tests := []struct {
		name   string
		params obj
		check  func(obj) bool
	}{
		{"timeout kills", obj{"command": "echo so-far; sleep 30", "timeoutMs": 100},
			func(r obj) bool { return r["timedOut"] == true && r["exitCode"] == nil && r["stdout"] == "so-far\n" }},
		{"signalled", obj{"command": "kill -TERM $$"},
			func(r obj) bool { return r["exitCode"] == nil && r["signal"] == "TERM" }},
		{"maxOutput cuts", obj{"command": "printf 0123456789", "maxOutput": 4},
			func(r obj) bool { return r["stdout"] == "0123" && r["stdoutTruncated"] == true }},
		{"base64", obj{"command": "printf '\\377'", "encoding": "base64"},
			func(r obj) bool { return r["stdout"] == "/w==" && r["encoding"] == "base64" }},
		{"invalid utf8 becomes U+FFFD", obj{"command": "printf 'a\\377b'"},
			func(r obj) bool { return r["stdout"] == "a\uFFFDb" }},
		{"stdin base64", obj{"command": "cat", "stdin": "aGk=", "stdinEncoding": "base64"},
			func(r obj) bool { return r["stdout"] == "hi" }},
		{"env null unsets", obj{"command": "echo ${HOME-unset}", "env": obj{"HOME": nil}},
			func(r obj) bool { return r["stdout"] == "unset\n" }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if r := mustCall(t, conn, "exec", tt.params); !tt.check(r) {
				t.Fatalf("exec %v: got %v", tt.params, r)
			}
		})
	}
}

func TestServerInfoConforms(t *testing.T) {
	_, url := testServer(t, nil)
	conn := rawConn(t, url, client.Options{NoReconnect: true})
	info := mustCall(t, conn, "server.info", nil)
	wantKeys(t, "server.info", info, "version,protocol,boot,limits,pid,dataDir")
	limits, _ := info["limits"].(obj)
	wantKeys(t, "limits", limits, "maxFrame,maxChannels,maxRpcRequest,maxRpcResponse,maxRpcInflight,inputWindow")
	if info["boot"] != conn.Hello().Boot {
		t.Fatalf("boot: got %v, HELLO said %v", info["boot"], conn.Hello().Boot)
	}
	_, err := call(t, conn, "rpc.cancel", obj{"id": 12345})
	wantErr(t, "rpc.cancel of nothing pending", err, mux.CodeNotFound)
}
