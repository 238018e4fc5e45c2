package server

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/muxd/muxd/client"
	"github.com/muxd/muxd/mux"
)

// Conformance of server.info, exec and session.* methods, and of what
// outlives a socket (see conformance_helpers_test.go).

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
		{"process.start negative outputLimit", "process.start", obj{"command": "true", "outputLimit": -1}, mux.CodeInvalidParams},
		{"exec no command", "exec", obj{}, mux.CodeInvalidParams},
		{"exec maxOutput over 512 KiB", "exec", obj{"command": "true", "maxOutput": 512<<10 + 1}, mux.CodeInvalidParams},
		{"exec bad encoding", "exec", obj{"command": "true", "encoding": "hex"}, mux.CodeInvalidParams},
		{"exec bad stdinEncoding", "exec", obj{"command": "true", "stdin": "x", "stdinEncoding": "hex"}, mux.CodeInvalidParams},
		{"exec bad stdinEncoding without stdin", "exec", obj{"command": "true", "stdinEncoding": "str"}, mux.CodeInvalidParams},
		{"exec bad base64 stdin", "exec", obj{"command": "true", "stdin": "!!", "stdinEncoding": "base64"}, mux.CodeInvalidParams},
		{"exec negative timeout", "exec", obj{"command": "true", "timeoutMs": -5}, mux.CodeInvalidParams},
		{"exec unknown session", "exec", obj{"command": "true", "sessionId": "nope"}, mux.CodeNotFound},
		{"exec dead session", "exec", obj{"command": "true", "sessionId": "s-dead"}, mux.CodeSessionDead},
		{"exec after set -e and a failure", "exec", obj{"command": "true", "sessionId": "s-errexit"}, mux.CodeSessionDead},
		{"terminal.create from a dead session", "terminal.create", obj{"sessionId": "s-dead"}, mux.CodeSessionDead},
		{"exec reused running id", "exec", obj{"command": "true", "id": "p-run"}, mux.CodeAlreadyExists},
		{"session.create existing id", "session.create", obj{"id": "s-ok"}, mux.CodeAlreadyExists},
		{"session.create missing cwd", "session.create", obj{"cwd": "/nonexistent"}, mux.CodeInvalidParams},
		{"session.interrupt unknown", "session.interrupt", obj{"id": "nope"}, mux.CodeNotFound},
		{"session.delete unknown", "session.delete", obj{"id": "nope"}, mux.CodeNotFound},
		{"session.delete no id", "session.delete", obj{}, mux.CodeInvalidParams},
		{"terminal.create cols over 1000", "terminal.create", obj{"cols": 1001}, mux.CodeInvalidParams},
		{"terminal.create negative rows", "terminal.create", obj{"rows": -1}, mux.CodeInvalidParams},
		{"terminal.create cwd not a directory", "terminal.create", obj{"cwd": "/etc/passwd"}, mux.CodeInvalidParams},
		{"terminal.create missing cwd", "terminal.create", obj{"cwd": "/nonexistent"}, mux.CodeInvalidParams},
		{"terminal.create shell not found", "terminal.create", obj{"shell": "/nonexistent/sh"}, mux.CodeInvalidParams},
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

// A refusal at a limit names the flag that raises it.
func TestLimitRefusalsNameTheirFlag(t *testing.T) {
	_, url := testServer(t, func(c *Config) { c.MaxSessions, c.MaxProcesses, c.MaxTerminals = 1, 1, 1 })
	conn := rawConn(t, url, client.Options{NoReconnect: true})
	mustCall(t, conn, "session.create", obj{"id": "s"})
	mustCall(t, conn, "process.start", obj{"command": "sleep 30", "id": "p"})
	t.Cleanup(func() { _, _ = call(t, conn, "process.kill", obj{"id": "p", "signal": "KILL"}) })
	mustCall(t, conn, "terminal.create", obj{"id": "t", "shell": "bash"})
	tests := []struct {
		method string
		params obj
		want   string
	}{
		{"session.create", obj{}, "1 live sessions (muxd serve --max-sessions)"},
		{"process.start", obj{"command": "true"}, "1 processes running (muxd serve --max-processes)"},
		{"exec", obj{"command": "true"}, "(muxd serve --max-processes)"},
		{"terminal.create", obj{"shell": "bash"}, "1 held, live or exited (muxd serve --max-terminals)"},
	}
	for _, tt := range tests {
		_, err := call(t, conn, tt.method, tt.params)
		wantErr(t, tt.method, err, mux.CodeLimitReached)
		if msg := err.(*mux.Error).Message; !strings.Contains(msg, tt.want) {
			t.Errorf("%s: message %q lacks %q", tt.method, msg, tt.want)
		}
	}
}

// Every method takes an object (or nothing) as params, including those
// that read none of it.
func TestParamsThatAreNotAnObjectAreRefusedByEveryMethod(t *testing.T) {
	_, url := testServer(t, nil)
	conn := rawConn(t, url, client.Options{NoReconnect: true})
	methods := []string{"server.info", "exec", "session.create", "session.list", "session.interrupt", "session.delete",
		"process.start", "process.list", "process.get", "process.read", "process.wait", "process.kill",
		"process.waitForLog", "process.waitForPort", "process.remove",
		"terminal.create", "terminal.list", "terminal.update", "terminal.destroy", "rpc.cancel"}
	for _, m := range methods {
		for _, params := range []any{[]int{}, []string{"id"}} {
			_, err := call(t, conn, m, params)
			wantErr(t, fmt.Sprintf("%s with params %v", m, params), err, mux.CodeInvalidParams)
		}
	}
	// (Scalar params are not JSON-RPC: the mux refuses them as
	// invalid_request before any method sees them.)
	for _, m := range []string{"server.info", "session.list", "process.list", "terminal.list"} {
		for _, params := range []any{nil, obj{}, obj{"unknown": 1}} {
			if _, err := call(t, conn, m, params); err != nil {
				t.Fatalf("%s with params %v: %v", m, params, err)
			}
		}
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
		{"each invalid byte becomes one U+FFFD", obj{"command": "printf 'a\\377\\376b\\342\\202'"},
			func(r obj) bool { return r["stdout"] == "a\uFFFD\uFFFDb\uFFFD\uFFFD" }},
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
		// A long command is cut in lists (4 KiB and "…"), whole in process.get.
		long := ": '" + strings.Repeat("é", 3000) + "'; exec sleep 30"
		mustCall(t, conn, "process.start", obj{"command": long, "id": "long"})
		l := mustCall(t, conn, "process.list", obj{"sessionId": ""})["processes"].([]any)
		for _, p := range l {
			if p.(map[string]any)["id"] == "long" {
				c := p.(map[string]any)["command"].(string)
				if len(c) > 4<<10+len("…") || !strings.HasSuffix(c, "…") || !strings.HasPrefix(long, strings.TrimSuffix(c, "…")) {
					t.Fatalf("a long command in process.list: %d bytes, %q…", len(c), c[:20])
				}
			}
		}
		if p := mustCall(t, conn, "process.get", obj{"id": "long"}); p["command"] != long {
			t.Fatalf("process.get of a long command: cut")
		}
		mustCall(t, conn, "process.kill", obj{"id": "long", "signal": "KILL"})
		mustCall(t, conn, "session.delete", obj{"id": "s1"})
		if p := mustCall(t, conn, "process.get", obj{"id": "bg"}); p["status"] != "running" {
			t.Fatalf("after session.delete: got %v", p)
		}
		mustCall(t, conn, "process.kill", obj{"id": "bg", "signal": "KILL"})
	})
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
	// Bytes that JSON escapes: control bytes take six (\u0001), so the
	// cut counts escapes; < > & are not escaped at all.
	r = mustCall(t, conn, "exec", obj{"command": "head -c 100000 /dev/zero | tr '\\0' '<'; head -c 100000 /dev/zero | tr '\\0' '\\001' >&2", "maxOutput": 512 << 10})
	out, _ := r["stdout"].(string)
	errOut, _ := r["stderr"].(string)
	if len(out) == 0 || len(errOut) == 0 || strings.Trim(out, "<") != "" || strings.Trim(errOut, "\x01") != "" || r["stdoutTruncated"] != true || r["stderrTruncated"] != true {
		t.Fatalf("exec of escaped bytes under a 64 KiB response limit: stdout %d bytes, stderr %d, truncated %v %v", len(out), len(errOut), r["stdoutTruncated"], r["stderrTruncated"])
	}
	// A title is bounded: it goes to every client in lists and notifications.
	big := strings.Repeat("<", 5000)
	_, err = call(t, conn, "terminal.create", obj{"title": big})
	wantErr(t, "terminal.create with a 5000-byte title", err, mux.CodeInvalidParams)
	// And printable: an ESC in it is an escape on a client that prints it.
	for _, title := range []string{"a\x1b]0;pwned\x07", "two\nlines", "nul\x00"} {
		_, err = call(t, conn, "terminal.create", obj{"title": title})
		wantErr(t, fmt.Sprintf("terminal.create with title %q", title), err, mux.CodeInvalidParams)
	}
	r = mustCall(t, conn, "terminal.create", obj{"title": "build ✓ 日本"})
	_, err = call(t, conn, "terminal.update", obj{"id": r["id"], "title": "x\ty"})
	wantErr(t, "terminal.update with a tab in the title", err, mux.CodeInvalidParams)
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

// A refusal at a connection limit says which flag sets it.
func TestLimitRefusalsNameTheirFlags(t *testing.T) {
	_, url := testServer(t, func(c *Config) {
		c.MaxChannels = 1
		c.MaxRPCResponse = 64 << 10
	})
	conn := rawConn(t, url, client.Options{NoReconnect: true})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	wantFlag := func(what string, err error, code mux.Code, flag string) {
		t.Helper()
		wantErr(t, what, err, code)
		if !strings.Contains(err.Error(), "(muxd serve "+flag+")") {
			t.Errorf("%s: %q names no %s", what, err, flag)
		}
	}

	mustCall(t, conn, "process.start", obj{"id": "out", "command": "head -c 200000 /dev/zero"})
	mustCall(t, conn, "process.wait", obj{"id": "out", "timeoutMs": 5000})
	_, err := call(t, conn, "process.read", obj{"id": "out", "stream": "stdout", "offset": 0, "length": 200000, "encoding": "base64"})
	wantFlag("process.read past maxRpcResponse", err, mux.CodeLimitReached, "--max-rpc-response")

	mustCall(t, conn, "process.start", obj{"id": "big", "command": "sleep 30"})
	ch, _, err := conn.Open(ctx, "process", 0, obj{"id": "big"})
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	_, _, err = conn.Open(ctx, "process", 0, obj{"id": "big"})
	wantFlag("a channel past maxChannels", err, mux.CodeLimitReached, "--max-channels")
}
