package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"regexp"
	"runtime"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
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
	if r, err := call(t, conn, "exec", obj{"command": "exit 7", "sessionId": "s-dead"}); err != nil || r["exitCode"] != 7.0 {
		t.Fatalf("exec exit 7 in a session: got %v, %v; want exitCode 7", r, err)
	}
	mustCall(t, conn, "session.create", obj{"id": "s-errexit"})
	mustCall(t, conn, "exec", obj{"command": "set -e", "sessionId": "s-errexit"})
	mustCall(t, conn, "exec", obj{"command": "false", "sessionId": "s-errexit"})
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
		{"process.kill signal 0", "process.kill", obj{"id": "p-run", "signal": 0}, mux.CodeInvalidParams},
		{"process.kill signal a float", "process.kill", obj{"id": "p-run", "signal": 1.5}, mux.CodeInvalidParams},
		{"process.kill signal an object", "process.kill", obj{"id": "p-run", "signal": obj{}}, mux.CodeInvalidParams},
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
		{"exec after set -e and a failure", "exec", obj{"command": "true", "sessionId": "s-errexit"}, mux.CodeSessionDead},
		{"terminal.create from a dead session", "terminal.create", obj{"sessionId": "s-dead"}, mux.CodeSessionDead},
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
		{"kill by JSON number", obj{"command": "sleep 30"}, obj{"signal": 15}, "killed", nil, "TERM", false},
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
	t.Setenv("MUXD_AUDIT_SECRET", "leak")
	t.Setenv("BASH_ENV", "/nonexistent/bash_env")
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
		{"daemon variables hidden", obj{"command": "echo ${MUXD_AUDIT_SECRET-none}:${BASH_ENV-none}"},
			func(r obj) bool { return r["stdout"] == "none:none\n" }},
		{"unless given explicitly", obj{"command": "echo $MUXD_X", "env": obj{"MUXD_X": "1"}},
			func(r obj) bool { return r["stdout"] == "1\n" }},
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
	want := obj{"maxFrame": 32768.0, "maxChannels": 1024.0, "maxRpcRequest": 1048576.0, "maxRpcResponse": 4194304.0,
		"maxRpcInflight": 32.0, "inputWindow": 65536.0}
	for k, v := range want {
		if limits[k] != v {
			t.Fatalf("default limit %s: got %v, want %v", k, limits[k], v)
		}
	}
	if info["protocol"] != "wsmux/1" || info["pid"] == 0.0 || info["dataDir"] == "" {
		t.Fatalf("server.info: got %v", info)
	}
	if info["boot"] != conn.Hello().Boot {
		t.Fatalf("boot: got %v, HELLO said %v", info["boot"], conn.Hello().Boot)
	}
	_, err := call(t, conn, "rpc.cancel", obj{"id": 12345})
	wantErr(t, "rpc.cancel of nothing pending", err, mux.CodeNotFound)
}

// chEvent is one thing read from a channel: DATA, a CTRL op, or the end
// (io.EOF or the close error).
type chEvent struct {
	data []byte
	ctrl obj
	err  error
}

// events reads ch in the background, in order, until EOF or an error.
func events(ch *mux.Channel) <-chan chEvent {
	out := make(chan chEvent, 1024)
	go func() {
		defer close(out)
		buf := make([]byte, 64<<10)
		for range 100000 {
			n, ctrl, err := ch.ReadFrame(buf)
			switch {
			case err != nil:
				out <- chEvent{err: err}
				return
			case ctrl != nil:
				var m obj
				_ = json.Unmarshal(ctrl, &m)
				out <- chEvent{ctrl: m}
			default:
				out <- chEvent{data: append([]byte(nil), buf[:n]...)}
			}
		}
	}()
	return out
}

// untilCtrl collects DATA until a CTRL op named op arrives (returned with
// the data before it), failing after d or at the end of the channel.
func untilCtrl(t *testing.T, evs <-chan chEvent, op string, d time.Duration) (obj, []byte) {
	t.Helper()
	var data []byte
	deadline := time.After(d)
	for {
		select {
		case ev, ok := <-evs:
			switch {
			case !ok || ev.err != nil:
				t.Fatalf("channel ended (%v) before CTRL %s; data %q", ev.err, op, data)
			case ev.ctrl != nil && ev.ctrl["op"] == op:
				return ev.ctrl, data
			case ev.ctrl != nil:
				t.Logf("CTRL %v", ev.ctrl)
			default:
				data = append(data, ev.data...)
			}
		case <-deadline:
			t.Fatalf("no CTRL %s within %v; data %q", op, d, data)
		}
	}
}

// wantEOF fails unless the next event is the end of the channel by EOF.
func wantEOF(t *testing.T, evs <-chan chEvent) {
	t.Helper()
	select {
	case ev := <-evs:
		if ev.err != io.EOF {
			t.Fatalf("after exit: got %+v, want EOF", ev)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no EOF within 5s")
	}
}

// terminalKeys are Terminal's fields.
const terminalKeys = "id,instance,title,pid,cols,rows,attachments,exited,exitCode,signal,end"

func TestTerminalRPCConforms(t *testing.T) {
	_, url := testServer(t, nil)
	conn := rawConn(t, url, client.Options{NoReconnect: true})
	tests := []struct {
		name       string
		params     obj
		cols, rows float64
	}{
		{"defaults 80x24", obj{"shell": "bash"}, 80, 24},
		{"smallest", obj{"shell": "bash", "cols": 1, "rows": 1}, 1, 1},
		{"largest", obj{"shell": "bash", "cols": 1000, "rows": 1000}, 1000, 1000},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			term := mustCall(t, conn, "terminal.create", tt.params)
			wantKeys(t, "Terminal", term, terminalKeys)
			if term["cols"] != tt.cols || term["rows"] != tt.rows || term["exited"] != false ||
				term["exitCode"] != nil || term["signal"] != nil || term["instance"] == "" || term["title"] == "" {
				t.Fatalf("Terminal: got %v", term)
			}
			mustCall(t, conn, "terminal.destroy", obj{"id": term["id"]})
		})
	}

	term := mustCall(t, conn, "terminal.create", obj{"id": "t1", "shell": "bash", "title": "mine"})
	upd := mustCall(t, conn, "terminal.update", obj{"id": "t1", "cols": 100})
	if upd["cols"] != 100.0 || upd["rows"] != 24.0 || upd["title"] != "mine" || upd["instance"] != term["instance"] {
		t.Fatalf("terminal.update cols: got %v", upd)
	}
	upd = mustCall(t, conn, "terminal.update", obj{"id": "t1", "title": "renamed", "rows": 50})
	if upd["cols"] != 100.0 || upd["rows"] != 50.0 || upd["title"] != "renamed" {
		t.Fatalf("terminal.update title/rows: got %v", upd)
	}
	for _, bad := range []obj{{"id": "t1", "cols": 1001}, {"id": "t1", "rows": -1}} {
		_, err := call(t, conn, "terminal.update", bad)
		wantErr(t, "terminal.update out of range", err, mux.CodeInvalidParams)
	}
	_, err := call(t, conn, "terminal.create", obj{"id": "t1"})
	wantErr(t, "terminal.create existing id", err, mux.CodeAlreadyExists)
	list := mustCall(t, conn, "terminal.list", nil)
	ts, _ := list["terminals"].([]any)
	if len(ts) != 1 {
		t.Fatalf("terminal.list: got %v", list)
	}
	wantKeys(t, "listed Terminal", ts[0].(obj), terminalKeys)
}

func TestTerminalChannelConforms(t *testing.T) {
	_, url := testServer(t, nil)
	notes := make(chan [2]any, 64)
	conn := rawConn(t, url, client.Options{NoReconnect: true, OnNotify: func(m string, p json.RawMessage) {
		var o obj
		_ = json.Unmarshal(p, &o)
		select {
		case notes <- [2]any{m, o}:
		default:
		}
	}})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	term := mustCall(t, conn, "terminal.create", obj{"id": "t1", "shell": "bash"})
	created := waitNote(t, notes, "terminal.created")
	wantKeys(t, "terminal.created", created, terminalKeys)

	// Wrong instance and unknown ids fail to open.
	for _, tt := range []struct {
		params obj
		code   mux.Code
	}{
		{obj{"id": "t1", "instance": "other"}, mux.CodeGone},
		{obj{"id": "nope"}, mux.CodeNotFound},
		{obj{}, mux.CodeProtocol}, // bad params: channel codes only
		{obj{"id": 5}, mux.CodeProtocol},
	} {
		_, _, err := conn.Open(ctx, "terminal", 64<<10, tt.params)
		wantErr(t, "OPEN terminal", err, tt.code)
	}
	_, _, err := conn.Open(ctx, "nosuchkind", 64<<10, obj{})
	wantErr(t, "OPEN unknown kind", err, mux.CodeProtocol)

	ch, meta, err := conn.Open(ctx, "terminal", 64<<10, obj{"id": "t1", "instance": term["instance"]})
	if err != nil {
		t.Fatalf("OPEN: %v", err)
	}
	var m obj
	_ = json.Unmarshal(meta, &m)
	wantKeys(t, "terminal OPEN_OK meta", m, "cols,rows,first,end,instance")
	if m["cols"] != 80.0 || m["rows"] != 24.0 || m["instance"] != term["instance"] {
		t.Fatalf("meta: got %v", m)
	}
	evs := events(ch)
	sync, _ := untilCtrl(t, evs, "sync", 5*time.Second)
	wantKeys(t, "sync", sync, "op,offset")
	ro, _, err := conn.Open(ctx, "terminal", 64<<10, obj{"id": "t1", "readOnly": true})
	if err != nil {
		t.Fatalf("OPEN readOnly: %v", err)
	}
	roEvs := events(ro)
	// A read-only channel's keys, resize and signal are dropped.
	if _, err := ro.Write([]byte("echo READONLY-$((1+1))\n")); err != nil {
		t.Fatal(err)
	}
	_ = ro.SendCtrl(obj{"op": "resize", "cols": 33, "rows": 11})
	if _, err := ch.Write([]byte("stty size; exit 5\n")); err != nil {
		t.Fatal(err)
	}
	exit, data := untilCtrl(t, evs, "exit", 10*time.Second)
	if strings.Contains(string(data), "READONLY-2") || strings.Contains(string(data), "11 33") {
		t.Fatalf("read-only input reached the terminal: %q", data)
	}
	wantKeys(t, "exit CTRL", exit, "op,code,signal")
	if exit["code"] != 5.0 || exit["signal"] != nil {
		t.Fatalf("exit CTRL: got %v", exit)
	}
	wantEOF(t, evs)
	untilCtrl(t, roEvs, "exit", 5*time.Second)
	wantEOF(t, roEvs)
	exited := waitNote(t, notes, "terminal.exited")
	wantKeys(t, "terminal.exited", exited, "id,exitCode,signal")
	if exited["id"] != "t1" || exited["exitCode"] != 5.0 || exited["signal"] != nil {
		t.Fatalf("terminal.exited: got %v", exited)
	}

	// An exited terminal: listed as exited; opening it replays, then
	// exit, then EOF.
	got := mustCall(t, conn, "terminal.list", nil)["terminals"].([]any)[0].(obj)
	if got["exited"] != true || got["exitCode"] != 5.0 || got["signal"] != nil {
		t.Fatalf("exited Terminal: got %v", got)
	}
	_, err = call(t, conn, "terminal.update", obj{"id": "t1", "cols": 90})
	wantErr(t, "resize of an exited terminal", err, mux.CodeNotWritable)
	if u := mustCall(t, conn, "terminal.update", obj{"id": "t1", "title": "done"}); u["title"] != "done" || u["exited"] != true {
		t.Fatalf("retitle of an exited terminal: got %v", u)
	}
	again, _, err := conn.Open(ctx, "terminal", 64<<10, obj{"id": "t1"})
	if err != nil {
		t.Fatalf("OPEN exited: %v", err)
	}
	againEvs := events(again)
	exit, data = untilCtrl(t, againEvs, "exit", 5*time.Second)
	if !strings.Contains(string(data), "24 80") || exit["code"] != 5.0 {
		t.Fatalf("replay of an exited terminal: exit %v, data %q", exit, data)
	}
	wantEOF(t, againEvs)
}

// waitNote returns the params of the next notification named method.
func waitNote(t *testing.T, notes <-chan [2]any, method string) obj {
	t.Helper()
	deadline := time.After(5 * time.Second)
	for {
		select {
		case n := <-notes:
			if n[0] == method {
				return n[1].(obj)
			}
		case <-deadline:
			t.Fatalf("no %s notification within 5s", method)
		}
	}
}

// procOut splits process channel events by stream until exit or EOF.
type procOut struct {
	stdout, stderr []byte
	ctrls          []obj
	end            error
}

// drainProcess reads a process channel to its end (EOF or close).
func drainProcess(t *testing.T, evs <-chan chEvent, d time.Duration) procOut {
	t.Helper()
	var out procOut
	deadline := time.After(d)
	for {
		select {
		case ev, ok := <-evs:
			switch {
			case !ok:
				return out
			case ev.err != nil:
				out.end = ev.err
				return out
			case ev.ctrl != nil:
				out.ctrls = append(out.ctrls, ev.ctrl)
			case len(ev.data) == 0:
				t.Fatal("empty DATA payload")
			case ev.data[0] == 1:
				out.stdout = append(out.stdout, ev.data[1:]...)
			case ev.data[0] == 2:
				out.stderr = append(out.stderr, ev.data[1:]...)
			default:
				t.Fatalf("DATA with stream byte %d", ev.data[0])
			}
		case <-deadline:
			t.Fatalf("process channel did not end within %v: %+v", d, out)
		}
	}
}

func TestProcessChannelConforms(t *testing.T) {
	_, url := testServer(t, nil)
	notes := make(chan [2]any, 64)
	conn := rawConn(t, url, client.Options{NoReconnect: true, OnNotify: func(m string, p json.RawMessage) {
		var o obj
		_ = json.Unmarshal(p, &o)
		select {
		case notes <- [2]any{m, o}:
		default:
		}
	}})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	// exec records are not announced: the first notifications are done's.
	mustCall(t, conn, "exec", obj{"id": "quiet", "command": "exit 1"})
	p := mustCall(t, conn, "process.start", obj{"id": "done", "command": "printf 0123456789; printf EE >&2; exit 2"})
	started := waitNote(t, notes, "process.started")
	if started["id"] != "done" || started["instance"] != p["instance"] {
		t.Fatalf("process.started: got %v", started)
	}
	exited := waitNote(t, notes, "process.exited")
	wantKeys(t, "process.exited", exited, "id,status,exitCode,signal")
	if exited["id"] != "done" || exited["status"] != "exited" || exited["exitCode"] != 2.0 || exited["signal"] != nil {
		t.Fatalf("process.exited: got %v", exited)
	}
	mustCall(t, conn, "process.wait", obj{"id": "done"})

	for _, tt := range []struct {
		params obj
		code   mux.Code
	}{
		{obj{"id": "done", "instance": "other"}, mux.CodeGone},
		{obj{"id": "nope"}, mux.CodeNotFound},
		{obj{"id": "done", "stdout": -1}, mux.CodeProtocol}, // bad params: channel codes only
		{obj{"id": "done", "follow": "yes"}, mux.CodeProtocol},
	} {
		_, _, err := conn.Open(ctx, "process", 64<<10, tt.params)
		wantErr(t, "OPEN process", err, tt.code)
	}

	tests := []struct {
		name           string
		params         obj
		stdout, stderr string
	}{
		{"from 0", obj{"id": "done", "instance": p["instance"]}, "0123456789", "EE"},
		{"resume at offsets", obj{"id": "done", "stdout": 4, "stderr": 1}, "456789", "E"},
		{"offsets past the end", obj{"id": "done", "stdout": 10, "stderr": 2}, "", ""},
		{"follow false on an ended process still exits", obj{"id": "done", "follow": false}, "0123456789", "EE"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ch, meta, err := conn.Open(ctx, "process", 64<<10, tt.params)
			if err != nil {
				t.Fatalf("OPEN: %v", err)
			}
			defer ch.Close()
			var m obj
			_ = json.Unmarshal(meta, &m)
			wantKeys(t, "process OPEN_OK meta", m, "instance,stdout,stderr")
			wantKeys(t, "meta.stdout", m["stdout"].(obj), "first,end")
			if m["stdout"].(obj)["end"] != 10.0 || m["stderr"].(obj)["end"] != 2.0 || m["instance"] != p["instance"] {
				t.Fatalf("meta: got %v", m)
			}
			out := drainProcess(t, events(ch), 5*time.Second)
			if string(out.stdout) != tt.stdout || string(out.stderr) != tt.stderr || out.end != io.EOF {
				t.Fatalf("got stdout %q stderr %q end %v, want %q %q EOF", out.stdout, out.stderr, out.end, tt.stdout, tt.stderr)
			}
			if len(out.ctrls) != 1 {
				t.Fatalf("CTRLs: got %v, want one exit", out.ctrls)
			}
			exit := out.ctrls[0]
			wantKeys(t, "exit CTRL", exit, "op,status,code,signal,stdoutBytes,stderrBytes")
			if exit["op"] != "exit" || exit["status"] != "exited" || exit["code"] != 2.0 || exit["signal"] != nil ||
				exit["stdoutBytes"] != 10.0 || exit["stderrBytes"] != 2.0 {
				t.Fatalf("exit CTRL: got %v", exit)
			}
		})
	}
}

func TestProcessChannelLiveConforms(t *testing.T) {
	_, url := testServer(t, nil)
	conn := rawConn(t, url, client.Options{NoReconnect: true})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	t.Run("follow false on a running process: EOF at the end, no exit", func(t *testing.T) {
		mustCall(t, conn, "process.start", obj{"id": "run", "command": "echo ready; exec sleep 30"})
		mustCall(t, conn, "process.waitForLog", obj{"id": "run", "pattern": "ready", "timeoutMs": 5000})
		ch, _, err := conn.Open(ctx, "process", 64<<10, obj{"id": "run", "follow": false})
		if err != nil {
			t.Fatal(err)
		}
		defer ch.Close()
		out := drainProcess(t, events(ch), 5*time.Second)
		if string(out.stdout) != "ready\n" || len(out.ctrls) != 0 || out.end != io.EOF {
			t.Fatalf("got %+v, want ready then EOF", out)
		}
	})

	t.Run("signal CTRL", func(t *testing.T) {
		ch, _, err := conn.Open(ctx, "process", 64<<10, obj{"id": "run"})
		if err != nil {
			t.Fatal(err)
		}
		defer ch.Close()
		if err := ch.SendCtrl(obj{"op": "signal", "signal": "SIGUSR1"}); err != nil {
			t.Fatal(err)
		}
		out := drainProcess(t, events(ch), 5*time.Second)
		if len(out.ctrls) != 1 || out.ctrls[0]["signal"] != "USR1" || out.ctrls[0]["code"] != nil || out.end != io.EOF {
			t.Fatalf("got %+v, want exit by USR1 then EOF", out)
		}
	})

	t.Run("stdin DATA and EOF", func(t *testing.T) {
		mustCall(t, conn, "process.start", obj{"id": "cat", "command": "cat; echo closed", "stdin": true})
		ch, _, err := conn.Open(ctx, "process", 64<<10, obj{"id": "cat"})
		if err != nil {
			t.Fatal(err)
		}
		defer ch.Close()
		if _, err := ch.Write([]byte("hello\n")); err != nil {
			t.Fatal(err)
		}
		if err := ch.CloseWrite(); err != nil {
			t.Fatal(err)
		}
		out := drainProcess(t, events(ch), 5*time.Second)
		if string(out.stdout) != "hello\nclosed\n" || len(out.ctrls) != 1 || out.ctrls[0]["code"] != 0.0 {
			t.Fatalf("got %+v", out)
		}
	})

	t.Run("gap where output was dropped", func(t *testing.T) {
		mustCall(t, conn, "process.start", obj{"id": "gap", "command": "head -c 100000 /dev/zero | tr '\\0' x; printf END",
			"outputLimit": 1024})
		mustCall(t, conn, "process.wait", obj{"id": "gap"})
		ch, meta, err := conn.Open(ctx, "process", 64<<10, obj{"id": "gap"})
		if err != nil {
			t.Fatal(err)
		}
		defer ch.Close()
		var m obj
		_ = json.Unmarshal(meta, &m)
		first := m["stdout"].(obj)["first"].(float64)
		out := drainProcess(t, events(ch), 5*time.Second)
		if len(out.ctrls) != 2 || out.ctrls[0]["op"] != "gap" || out.ctrls[1]["op"] != "exit" {
			t.Fatalf("CTRLs: got %v, want gap then exit", out.ctrls)
		}
		wantKeys(t, "gap CTRL", out.ctrls[0], "op,stream,bytes")
		if out.ctrls[0]["stream"] != "stdout" || out.ctrls[0]["bytes"] != first || first < 100000-1024 ||
			float64(len(out.stdout))+first != 100003 || !strings.HasSuffix(string(out.stdout), "END") {
			t.Fatalf("gap %v, first %v, %d bytes after it", out.ctrls[0], first, len(out.stdout))
		}
		r := mustCall(t, conn, "process.read", obj{"id": "gap", "stream": "stdout", "from": 0, "length": 10})
		if r["from"] != first || r["first"] != first || r["end"] != 100003.0 || r["data"] != "xxxxxxxxxx" {
			t.Fatalf("process.read before first: got %v", r)
		}
	})
}

func TestExitedTerminalsDoNotBlockNewOnes(t *testing.T) {
	_, url := testServer(t, func(c *Config) { c.MaxTerminals = 2 })
	notes := make(chan [2]any, 64)
	conn := rawConn(t, url, client.Options{NoReconnect: true, OnNotify: func(m string, p json.RawMessage) {
		var o obj
		_ = json.Unmarshal(p, &o)
		select {
		case notes <- [2]any{m, o}:
		default:
		}
	}})
	listIDs := func() string {
		var ids []string
		for _, v := range mustCall(t, conn, "terminal.list", nil)["terminals"].([]any) {
			ids = append(ids, v.(obj)["id"].(string))
		}
		return strings.Join(ids, ",")
	}
	mustCall(t, conn, "terminal.create", obj{"id": "live", "shell": "bash"})
	mustCall(t, conn, "terminal.create", obj{"id": "old", "shell": "true"})
	if n := waitNote(t, notes, "terminal.exited"); n["id"] != "old" {
		t.Fatalf("terminal.exited: got %v", n)
	}
	// At the limit with one exited: the exited one makes room.
	mustCall(t, conn, "terminal.create", obj{"id": "new", "shell": "true"})
	if got := listIDs(); got != "live,new" {
		t.Fatalf("after pruning: got %s, want live,new", got)
	}
	if n := waitNote(t, notes, "terminal.exited"); n["id"] != "new" {
		t.Fatalf("terminal.exited: got %v", n)
	}
	// The same through /ws/terminal.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ws, _, err := websocket.Dial(ctx, strings.Replace(url, "http://", "ws://", 1)+"/ws/terminal?id=compat", nil)
	if err != nil {
		t.Fatalf("/ws/terminal at the limit with an exited terminal: %v", err)
	}
	defer ws.CloseNow()
	if got := listIDs(); got != "live,compat" {
		t.Fatalf("after /ws/terminal: got %s, want live,compat", got)
	}
	// Running terminals are never pruned: the limit still holds.
	_, err = call(t, conn, "terminal.create", obj{"id": "third", "shell": "bash"})
	wantErr(t, "terminal.create past the limit", err, mux.CodeLimitReached)
}

func TestSessionMethodsConform(t *testing.T) {
	_, url := testServer(t, nil)
	conn := rawConn(t, url, client.Options{NoReconnect: true})
	dir := t.TempDir()
	s := mustCall(t, conn, "session.create", obj{"id": "s1", "cwd": dir, "env": obj{"FOO": "bar"}})
	wantKeys(t, "session.create", s, "id,cwd")
	if s["id"] != "s1" || s["cwd"] != dir {
		t.Fatalf("session.create: got %v", s)
	}
	list := mustCall(t, conn, "session.list", nil)["sessions"].([]any)
	if len(list) != 1 {
		t.Fatalf("session.list: got %v", list)
	}
	wantKeys(t, "listed session", list[0].(obj), "id,cwd,alive,busy,createdAt")
	wantTime(t, "createdAt", list[0].(obj)["createdAt"])

	tests := []struct {
		name   string
		params obj
		check  func(obj) bool
	}{
		{"state persists", obj{"command": "cd /; X=1; echo $FOO"}, func(r obj) bool { return r["stdout"] == "bar\n" }},
		{"cwd persists", obj{"command": "pwd; echo $X"}, func(r obj) bool { return r["stdout"] == "/\n1\n" }},
		{"signalled command is 128+n", obj{"command": "sh -c 'kill -TERM $$'"}, func(r obj) bool { return r["exitCode"] == 143.0 }},
		{"daemon variables hidden", obj{"command": "env | grep -c '^MUXD_\\|^BASH_ENV=\\|^ENV=' || true"},
			func(r obj) bool { return r["stdout"] == "0\n" }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.params["sessionId"] = "s1"
			if r := mustCall(t, conn, "exec", tt.params); !tt.check(r) {
				t.Fatalf("exec %v: got %v", tt.params, r)
			}
		})
	}

	t.Run("interrupt aborts with 130 and keeps the shell", func(t *testing.T) {
		done := make(chan obj, 1)
		go func() {
			r, _ := call(t, conn, "exec", obj{"command": "echo go; while :; do :; done", "sessionId": "s1", "id": "loop"})
			done <- r
		}()
		waitLog(t, conn, "loop", "go")
		mustCall(t, conn, "session.interrupt", obj{"id": "s1"})
		if r := recvOrTimeout(t, done, 5*time.Second); r["exitCode"] != 130.0 {
			t.Fatalf("interrupted exec: got %v, want exitCode 130", r)
		}
		if r := mustCall(t, conn, "exec", obj{"command": "echo $X", "sessionId": "s1"}); r["stdout"] != "1\n" {
			t.Fatalf("after interrupt: got %v", r)
		}
	})

	t.Run("timeout kills the session", func(t *testing.T) {
		r := mustCall(t, conn, "exec", obj{"command": "sleep 30", "sessionId": "s1", "timeoutMs": 100})
		if r["timedOut"] != true || r["exitCode"] != nil {
			t.Fatalf("timed out exec: got %v", r)
		}
		_, err := call(t, conn, "exec", obj{"command": "true", "sessionId": "s1"})
		wantErr(t, "exec in a dead session", err, mux.CodeSessionDead)
		if l := mustCall(t, conn, "session.list", nil)["sessions"].([]any); l[0].(obj)["alive"] != false {
			t.Fatalf("dead session listed as %v", l[0])
		}
		mustCall(t, conn, "session.delete", obj{"id": "s1"})
		mustCall(t, conn, "session.create", obj{"id": "s1"})
		if r := mustCall(t, conn, "exec", obj{"command": "echo again", "sessionId": "s1"}); r["stdout"] != "again\n" {
			t.Fatalf("recreated session: got %v", r)
		}
	})

	t.Run("commandTimeoutMs applies to each command", func(t *testing.T) {
		mustCall(t, conn, "session.create", obj{"id": "short", "commandTimeoutMs": 100})
		r := mustCall(t, conn, "exec", obj{"command": "echo so-far; sleep 30", "sessionId": "short"})
		if r["timedOut"] != true || r["exitCode"] != nil || r["stdout"] != "so-far\n" {
			t.Fatalf("exec past commandTimeoutMs: got %v", r)
		}
		_, err := call(t, conn, "exec", obj{"command": "true", "sessionId": "short"})
		wantErr(t, "exec after a session timeout", err, mux.CodeSessionDead)
		mustCall(t, conn, "session.delete", obj{"id": "short"})
	})

	t.Run("process.start in a session outlives it", func(t *testing.T) {
		p := mustCall(t, conn, "process.start", obj{"command": "echo up; exec sleep 30", "sessionId": "s1", "id": "bg"})
		if p["sessionId"] != "s1" {
			t.Fatalf("Process: got %v", p)
		}
		if l := mustCall(t, conn, "process.list", obj{"sessionId": "other"})["processes"].([]any); len(l) != 0 {
			t.Fatalf("process.list of another session: got %v", l)
		}
		if l := mustCall(t, conn, "process.list", obj{"sessionId": "s1"})["processes"].([]any); len(l) != 1 {
			t.Fatalf("process.list of s1: got %v", l)
		}
		mustCall(t, conn, "session.delete", obj{"id": "s1"})
		if p := mustCall(t, conn, "process.get", obj{"id": "bg"}); p["status"] != "running" {
			t.Fatalf("after session.delete: got %v", p)
		}
		mustCall(t, conn, "process.kill", obj{"id": "bg", "signal": "KILL"})
	})
}

func TestRequestLifecycleConforms(t *testing.T) {
	_, url := testServer(t, nil)
	conn := rawConn(t, url, client.Options{NoReconnect: true})

	t.Run("rpc.cancel ends exec with cancelled and kills it", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- conn.Call(ctx, "exec", obj{"command": "echo go; exec sleep 30", "id": "c1"}, nil) }()
		waitLog(t, conn, "c1", "go")
		cancel() // Call sends rpc.cancel
		if err := recvOrTimeout(t, done, 5*time.Second); !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled Call: %v", err)
		}
		if p := mustCall(t, conn, "process.wait", obj{"id": "c1", "timeoutMs": 5000}); p["status"] == "running" || p["exitCode"] == 0.0 {
			t.Fatalf("cancelled exec: got %v", p)
		}
	})

	t.Run("kill escalates to KILL after the grace", func(t *testing.T) {
		mustCall(t, conn, "process.start", obj{"command": "trap '' TERM; echo ready; while :; do sleep 0.05; done", "id": "stubborn"})
		mustCall(t, conn, "process.waitForLog", obj{"id": "stubborn", "pattern": "ready", "timeoutMs": 5000})
		mustCall(t, conn, "process.kill", obj{"id": "stubborn", "graceMs": 100})
		p := mustCall(t, conn, "process.wait", obj{"id": "stubborn", "timeoutMs": 5000})
		if p["status"] != "killed" || p["signal"] != "KILL" || p["exitCode"] != nil {
			t.Fatalf("after grace: got %v", p)
		}
	})

	t.Run("remove forgets an ended process, not a running one", func(t *testing.T) {
		mustCall(t, conn, "process.start", obj{"command": "exec sleep 30", "id": "r1"})
		_, err := call(t, conn, "process.remove", obj{"id": "r1"})
		wantErr(t, "process.remove of a running process", err, mux.CodeBusy)
		mustCall(t, conn, "process.kill", obj{"id": "r1", "signal": "KILL"})
		mustCall(t, conn, "process.wait", obj{"id": "r1"})
		mustCall(t, conn, "process.remove", obj{"id": "r1"})
		_, err = call(t, conn, "process.get", obj{"id": "r1"})
		wantErr(t, "process.get after remove", err, mux.CodeNotFound)
	})

	t.Run("waitForLog", func(t *testing.T) {
		mustCall(t, conn, "process.start", obj{"command": "echo a=1; echo b=2 >&2; printf 'tail=3'", "id": "log"})
		mustCall(t, conn, "process.wait", obj{"id": "log"})
		for _, tt := range []struct {
			params obj
			want   obj
		}{
			{obj{"pattern": "a=(\\d)"}, obj{"line": "a=1", "groups": []any{"a=1", "1"}, "stream": "stdout", "offset": 0.0}},
			{obj{"pattern": "b=(\\d)"}, obj{"line": "b=2", "groups": []any{"b=2", "2"}, "stream": "stderr", "offset": 0.0}},
			{obj{"pattern": "^tail", "stream": "stdout"}, obj{"line": "tail=3", "groups": []any{"tail"}, "stream": "stdout", "offset": 4.0}},
			{obj{"pattern": "=", "stream": "stdout", "from": 4}, obj{"line": "tail=3", "groups": []any{"="}, "stream": "stdout", "offset": 4.0}},
		} {
			tt.params["id"] = "log"
			got := mustCall(t, conn, "process.waitForLog", tt.params)
			gj, _ := json.Marshal(got)
			wj, _ := json.Marshal(tt.want)
			if string(gj) != string(wj) {
				t.Fatalf("waitForLog %v: got %s, want %s", tt.params, gj, wj)
			}
		}
		_, err := call(t, conn, "process.waitForLog", obj{"id": "log", "pattern": "never"})
		wantErr(t, "waitForLog on an ended process without a match", err, mux.CodeTimeout)
	})

	t.Run("waitForPort", func(t *testing.T) {
		mustCall(t, conn, "process.start", obj{"command": "exit 0", "id": "noport"})
		_, err := call(t, conn, "process.waitForPort", obj{"port": 1, "id": "noport", "timeoutMs": 5000})
		wantErr(t, "waitForPort when the process ends first", err, mux.CodeTimeout)
		_, err = call(t, conn, "process.waitForPort", obj{"port": 1, "timeoutMs": 50})
		wantErr(t, "waitForPort past its timeout", err, mux.CodeTimeout)
	})

	t.Run("process.read", func(t *testing.T) {
		mustCall(t, conn, "process.start", obj{"command": "printf 'abc\\377'", "id": "rd"})
		mustCall(t, conn, "process.wait", obj{"id": "rd"})
		r := mustCall(t, conn, "process.read", obj{"id": "rd", "stream": "stdout", "from": 1, "length": 10, "encoding": "base64"})
		wantKeys(t, "process.read", r, "data,from,first,end")
		if r["data"] != "YmP/" || r["from"] != 1.0 || r["first"] != 0.0 || r["end"] != 4.0 {
			t.Fatalf("process.read: got %v", r)
		}
	})
}

func TestRetentionConforms(t *testing.T) {
	_, url := testServer(t, func(c *Config) { c.RetainCount = 3 })
	conn := rawConn(t, url, client.Options{NoReconnect: true})
	for _, id := range []string{"p1", "p2", "p3", "p4"} {
		mustCall(t, conn, "process.start", obj{"command": "echo " + id, "id": id})
		mustCall(t, conn, "process.wait", obj{"id": id})
	}
	_, err := call(t, conn, "process.get", obj{"id": "p1"})
	wantErr(t, "oldest ended process past the count", err, mux.CodeNotFound)
	for _, id := range []string{"p2", "p3", "p4"} {
		if r := mustCall(t, conn, "process.read", obj{"id": id, "stream": "stdout", "from": 0, "length": 100}); r["data"] != id+"\n" {
			t.Fatalf("retained %s: got %v", id, r)
		}
	}
	// A finished exec id may be reused (the old record is replaced).
	mustCall(t, conn, "exec", obj{"command": "echo one", "id": "e"})
	r := mustCall(t, conn, "exec", obj{"command": "echo two", "id": "e"})
	if r["stdout"] != "two\n" {
		t.Fatalf("reused exec id: got %v", r)
	}
}

// waitLog waits for a line matching pattern in the output of an exec
// that another goroutine is starting: until the exec registers its id,
// waitForLog answers not_found, and is asked again (bounded).
func waitLog(t *testing.T, conn *mux.Conn, id, pattern string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for range 10000 {
		_, err := call(t, conn, "process.waitForLog", obj{"id": id, "pattern": pattern, "timeoutMs": 5000})
		var me *mux.Error
		if err == nil || !errors.As(err, &me) || me.Code != mux.CodeNotFound || time.Now().After(deadline) {
			if err != nil {
				t.Fatalf("waitForLog %s: %v", id, err)
			}
			return
		}
	}
	t.Fatalf("exec %s never registered", id)
}

func TestTerminalChannelCtrlConforms(t *testing.T) {
	_, url := testServer(t, nil)
	conn := rawConn(t, url, client.Options{NoReconnect: true})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	mustCall(t, conn, "terminal.create", obj{"id": "t", "shell": "bash"})
	ch, _, err := conn.Open(ctx, "terminal", 64<<10, obj{"id": "t"})
	if err != nil {
		t.Fatal(err)
	}
	evs := events(ch)
	untilCtrl(t, evs, "sync", 5*time.Second)
	type op = obj
	for _, c := range []op{
		{"op": "resize", "cols": 120, "rows": 40},
		{"op": "resize", "cols": 100, "rows": 30}, // latest wins
		{"op": "resize", "cols": 0, "rows": 30},   // out of range: ignored
		{"op": "resize", "cols": 1001, "rows": 30},
	} {
		if err := ch.SendCtrl(c); err != nil {
			t.Fatal(err)
		}
	}
	// Client EOF is ignored: the terminal keeps reading keys from other
	// channels, and this one keeps receiving output.
	if err := ch.CloseWrite(); err != nil {
		t.Fatal(err)
	}
	in, inMeta, err := conn.Open(ctx, "terminal", 64<<10, obj{"id": "t", "from": 1 << 40})
	if err != nil {
		t.Fatal(err)
	}
	var im obj
	_ = json.Unmarshal(inMeta, &im)
	inEvs := events(in)
	if s, data := untilCtrl(t, inEvs, "sync", 5*time.Second); s["offset"] != im["end"] || len(data) != 0 {
		t.Fatalf("from past the end: sync %v after %q, want offset %v and no replay", s, data, im["end"])
	}
	if _, err := in.Write([]byte("stty size; sh -c 'echo start-$((1)); exec sleep 30'\n")); err != nil {
		t.Fatal(err)
	}
	if got := readUntilData(t, evs, "start-1", 5*time.Second); !strings.Contains(got, "30 100") {
		t.Fatalf("stty size after resizes: got %q, want 30 100", got)
	}
	if l := mustCall(t, conn, "terminal.list", nil)["terminals"].([]any)[0].(obj); l["cols"] != 100.0 || l["rows"] != 30.0 {
		t.Fatalf("after resize: got %v", l)
	}
	// signal INT reaches the foreground job: sleep 30 ends at once.
	if err := in.SendCtrl(op{"op": "signal", "signal": 2}); err != nil { // SIGINT, as a JSON number
		t.Fatal(err)
	}
	if _, err := in.Write([]byte("echo done-$((2+3))\n")); err != nil {
		t.Fatal(err)
	}
	readUntilData(t, evs, "done-5", 5*time.Second)

	// Output older than the ring: from 0 gets a gap CTRL first.
	if _, err := in.Write([]byte("head -c 1500000 /dev/zero | tr '\\0' x; echo; echo END-$((7*6))\n")); err != nil {
		t.Fatal(err)
	}
	readUntilData(t, evs, "END-42", 20*time.Second)
	late, meta, err := conn.Open(ctx, "terminal", 64<<10, obj{"id": "t", "from": 0})
	if err != nil {
		t.Fatal(err)
	}
	defer late.Close()
	var m obj
	_ = json.Unmarshal(meta, &m)
	first, _ := m["first"].(float64)
	if first <= 0 {
		t.Fatalf("meta first %v: the ring should have dropped bytes", m)
	}
	lateEvs := events(late)
	select {
	case ev := <-lateEvs:
		if ev.ctrl == nil || ev.ctrl["op"] != "gap" {
			t.Fatalf("first event: got %+v, want gap", ev)
		}
		wantKeys(t, "gap CTRL", ev.ctrl, "op,bytes")
		if b := ev.ctrl["bytes"].(float64); b < first {
			t.Fatalf("gap of %v bytes, want at least first %v", b, first)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no event on a late channel")
	}
	mustCall(t, conn, "terminal.destroy", obj{"id": "t"})
	exit, _ := untilCtrl(t, evs, "exit", 5*time.Second)
	if exit["code"] != nil || exit["signal"] == nil {
		t.Fatalf("exit after destroy: got %v, want a signal", exit)
	}
}

// readUntilData reads DATA (skipping CTRL) until it contains want, and
// returns what it read (the last 1 MiB at most).
func readUntilData(t *testing.T, evs <-chan chEvent, want string, d time.Duration) string {
	t.Helper()
	var data []byte
	deadline := time.After(d)
	for !strings.Contains(string(data), want) {
		select {
		case ev, ok := <-evs:
			if !ok || ev.err != nil {
				t.Fatalf("channel ended (%v) before %q", ev.err, want)
			}
			data = append(data, ev.data...)
			if len(data) > 1<<20 {
				data = data[len(data)-4096:]
			}
		case <-deadline:
			t.Fatalf("no %q within %v", want, d)
		}
	}
	return string(data)
}

func TestExecOutputLimitsConform(t *testing.T) {
	_, url := testServer(t, nil)
	conn := rawConn(t, url, client.Options{NoReconnect: true})
	tests := []struct {
		name      string
		params    obj
		wantLen   int
		truncated bool
	}{
		{"default 256 KiB", obj{"command": "head -c 300000 /dev/zero | tr '\\0' x"}, 256 << 10, true},
		{"at most 512 KiB", obj{"command": "head -c 600000 /dev/zero | tr '\\0' x", "maxOutput": 512 << 10}, 512 << 10, true},
		{"under the limit", obj{"command": "head -c 1000 /dev/zero | tr '\\0' x", "maxOutput": 1000}, 1000, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := mustCall(t, conn, "exec", tt.params)
			if s, _ := r["stdout"].(string); len(s) != tt.wantLen || r["stdoutTruncated"] != tt.truncated {
				t.Fatalf("got %d bytes, truncated %v; want %d, %v", len(s), r["stdoutTruncated"], tt.wantLen, tt.truncated)
			}
		})
	}
	// The whole output stays readable by id.
	mustCall(t, conn, "exec", obj{"command": "head -c 600000 /dev/zero | tr '\\0' x", "id": "big"})
	if p := mustCall(t, conn, "process.get", obj{"id": "big"}); p["stdoutBytes"] != 600000.0 {
		t.Fatalf("process.get of a cut exec: got %v", p)
	}
	// A running exec can be attached by id.
	done := make(chan obj, 1)
	go func() {
		r, _ := call(t, conn, "exec", obj{"command": "echo live; read x; echo after", "id": "att", "stdin": ""})
		done <- r
	}()
	waitLog(t, conn, "att", "live")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ch, _, err := conn.Open(ctx, "process", 64<<10, obj{"id": "att"})
	if err != nil {
		t.Fatalf("OPEN a running exec: %v", err)
	}
	defer ch.Close()
	out := drainProcess(t, events(ch), 5*time.Second)
	if string(out.stdout) != "live\nafter\n" || len(out.ctrls) != 1 || out.ctrls[0]["op"] != "exit" {
		t.Fatalf("attached exec: got %+v", out)
	}
	if r := recvOrTimeout(t, done, 5*time.Second); r["stdout"] != "live\nafter\n" {
		t.Fatalf("exec result: got %v", r)
	}
}

func TestResourcesOutliveTheSocketConform(t *testing.T) {
	closed := make(chan struct{}, 16)
	_, url := testServer(t, func(c *Config) {
		c.Logger = slog.New(msgHook{"connection closed", closed})
	})
	notes := make(chan [2]any, 64)
	watcher := rawConn(t, url, client.Options{NoReconnect: true, OnNotify: func(m string, p json.RawMessage) {
		var o obj
		_ = json.Unmarshal(p, &o)
		select {
		case notes <- [2]any{m, o}:
		default:
		}
	}})
	r := dialRaw(t, url)
	r.send(0x09, 0, []byte(`{"jsonrpc":"2.0","id":1,"method":"exec","params":{"id":"survivor","command":"echo up; exec sleep 30"}}`))
	r.send(0x09, 0, []byte(`{"jsonrpc":"2.0","id":2,"method":"process.start","params":{"id":"other","command":"exit 3"}}`))
	// Notifications reach every connection.
	if n := waitNote(t, notes, "process.exited"); n["id"] != "other" || n["exitCode"] != 3.0 {
		t.Fatalf("process.exited on another connection: got %v", n)
	}
	waitLog(t, watcher, "survivor", "up")
	_ = r.ws.CloseNow() // abandons the pending exec, which goes on
	recvOrTimeout(t, closed, 5*time.Second)
	if p := mustCall(t, watcher, "process.get", obj{"id": "survivor"}); p["status"] != "running" {
		t.Fatalf("exec after its socket closed: got %v", p)
	}
	mustCall(t, watcher, "process.kill", obj{"id": "survivor", "signal": "INT"})
	p := mustCall(t, watcher, "process.wait", obj{"id": "survivor", "timeoutMs": 5000})
	if p["status"] != "killed" || p["signal"] != "INT" || p["stdoutBytes"] != 3.0 {
		t.Fatalf("abandoned exec after kill: got %v", p)
	}

	// terminal.create from a session's cwd and env; attachments counted.
	dir := t.TempDir()
	mustCall(t, watcher, "session.create", obj{"id": "s", "cwd": dir, "env": obj{"FOO": "from-session"}})
	mustCall(t, watcher, "terminal.create", obj{"id": "t", "shell": "bash", "sessionId": "s"})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ch, _, err := watcher.Open(ctx, "terminal", 64<<10, obj{"id": "t"})
	if err != nil {
		t.Fatal(err)
	}
	evs := events(ch)
	if l := mustCall(t, watcher, "terminal.list", nil)["terminals"].([]any)[0].(obj); l["attachments"] != 1.0 {
		t.Fatalf("attachments: got %v", l)
	}
	if _, err := ch.Write([]byte("echo \"$(pwd)|$FOO|${MUXD_TOKEN-none}\"\n")); err != nil {
		t.Fatal(err)
	}
	readUntilData(t, evs, dir+"|from-session|none", 5*time.Second)
	ch.Close()
}

// msgHook is a slog handler that signals each record with message msg:
// tests wait on the daemon's own log instead of sleeping.
type msgHook struct {
	msg string
	c   chan<- struct{}
}

func (h msgHook) Enabled(context.Context, slog.Level) bool { return true }
func (h msgHook) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h msgHook) WithGroup(string) slog.Handler            { return h }
func (h msgHook) Handle(_ context.Context, r slog.Record) error {
	if r.Message == h.msg {
		select {
		case h.c <- struct{}{}:
		default:
		}
	}
	return nil
}

func TestPrunedTerminalsLeaveNoGoroutinesOrFDs(t *testing.T) {
	_, url := testServer(t, func(c *Config) { c.MaxTerminals = 2 })
	exited := make(chan string, 64)
	conn := rawConn(t, url, client.Options{NoReconnect: true, OnNotify: func(m string, p json.RawMessage) {
		var o obj
		if m == "terminal.exited" && json.Unmarshal(p, &o) == nil {
			exited <- o["id"].(string)
		}
	}})
	mustCall(t, conn, "terminal.create", obj{"id": "live", "shell": "bash"})
	create := func(id string) {
		t.Helper()
		mustCall(t, conn, "terminal.create", obj{"id": id, "shell": "true"})
		if got := recvOrTimeout(t, exited, 5*time.Second); got != id {
			t.Fatalf("terminal.exited for %s, want %s", got, id)
		}
	}
	create("warm")
	g0, fd0 := runtime.NumGoroutine(), openFDs()
	for i := range 20 {
		create(fmt.Sprintf("x%d", i)) // prunes the one before
	}
	if l := mustCall(t, conn, "terminal.list", nil)["terminals"].([]any); len(l) != 2 {
		t.Fatalf("terminal.list: got %d terminals, want 2", len(l))
	}
	if g := settle(runtime.NumGoroutine, g0+2, 10*time.Second); g > g0+2 {
		t.Fatalf("goroutines: %d before, %d after 20 pruned terminals", g0, g)
	}
	if fd := settle(openFDs, fd0+2, 10*time.Second); fd > fd0+2 {
		t.Fatalf("open fds: %d before, %d after 20 pruned terminals", fd0, fd)
	}
}

func TestReusedIDsGetANewInstance(t *testing.T) {
	_, url := testServer(t, nil)
	conn := rawConn(t, url, client.Options{NoReconnect: true})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	tests := []struct {
		kind   string
		create func() obj
	}{
		{"process", func() obj {
			p := mustCall(t, conn, "process.start", obj{"id": "x", "command": "true"})
			mustCall(t, conn, "process.wait", obj{"id": "x"})
			return p
		}},
		{"terminal", func() obj {
			_, _ = call(t, conn, "terminal.destroy", obj{"id": "x"})
			return mustCall(t, conn, "terminal.create", obj{"id": "x", "shell": "bash"})
		}},
	}
	for _, tt := range tests {
		t.Run(tt.kind, func(t *testing.T) {
			old := tt.create()
			cur := tt.create()
			if old["instance"] == cur["instance"] {
				t.Fatalf("instance reused: %v", cur["instance"])
			}
			_, _, err := conn.Open(ctx, tt.kind, 64<<10, obj{"id": "x", "instance": old["instance"]})
			wantErr(t, "OPEN with the old instance", err, mux.CodeGone)
			ch, _, err := conn.Open(ctx, tt.kind, 64<<10, obj{"id": "x", "instance": cur["instance"]})
			if err != nil {
				t.Fatalf("OPEN with the current instance: %v", err)
			}
			_ = ch.Close()
		})
	}
	mustCall(t, conn, "terminal.destroy", obj{"id": "x"})
}

func TestTimeoutZeroAndResponseLimitConform(t *testing.T) {
	_, url := testServer(t, func(c *Config) { c.MaxRPCResponse = 64 << 10 })
	conn := rawConn(t, url, client.Options{NoReconnect: true})
	// timeoutMs 0 on a command: no timeout.
	if r := mustCall(t, conn, "exec", obj{"command": "sleep 0.2; echo ok", "timeoutMs": 0}); r["stdout"] != "ok\n" || r["timedOut"] != false {
		t.Fatalf("exec timeoutMs 0: got %v", r)
	}
	// timeoutMs 0 on a wait: answered at once.
	mustCall(t, conn, "process.start", obj{"id": "w", "command": "exec sleep 30"})
	_, err := call(t, conn, "process.wait", obj{"id": "w", "timeoutMs": 0})
	wantErr(t, "process.wait timeoutMs 0 on a running process", err, mux.CodeTimeout)
	mustCall(t, conn, "process.kill", obj{"id": "w", "signal": "KILL"})
	// An answer never exceeds maxRpcResponse: output is cut further.
	r := mustCall(t, conn, "exec", obj{"command": "head -c 400000 /dev/zero | tr '\\0' x", "maxOutput": 512 << 10})
	if s, _ := r["stdout"].(string); len(s) >= 64<<10 || len(s) == 0 || r["stdoutTruncated"] != true {
		t.Fatalf("exec under a 64 KiB response limit: %d bytes, truncated %v", len(s), r["stdoutTruncated"])
	}
}

func TestSessionDeleteKillsWhatItsCommandsStarted(t *testing.T) {
	_, url := testServer(t, nil)
	conn := rawConn(t, url, client.Options{NoReconnect: true})
	mustCall(t, conn, "session.create", obj{"id": "s"})
	r := mustCall(t, conn, "exec", obj{"command": "sleep 300 >/dev/null 2>&1 & echo $!", "sessionId": "s"})
	pid := strings.TrimSpace(r["stdout"].(string))
	if pid == "" {
		t.Fatalf("no pid: %v", r)
	}
	if l := mustCall(t, conn, "session.list", nil)["sessions"].([]any)[0].(obj); l["alive"] != true || l["busy"] != false {
		t.Fatalf("idle session: got %v", l)
	}
	mustCall(t, conn, "session.delete", obj{"id": "s"})
	// Reaped or at least gone from the process table once delete returned
	// (a zombie would still answer kill -0, so check its state too).
	check := "if kill -0 " + pid + " 2>/dev/null && ! grep -q '^State:.*Z' /proc/" + pid + "/status 2>/dev/null; then echo alive; else echo gone; fi"
	if r := mustCall(t, conn, "exec", obj{"command": check}); r["stdout"] != "gone\n" {
		t.Fatalf("background job of a deleted session: %v", r["stdout"])
	}
	if l := mustCall(t, conn, "session.list", nil)["sessions"].([]any); len(l) != 0 {
		t.Fatalf("session.list after delete: got %v", l)
	}
}
