package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/muxd/muxd/client"
	"github.com/muxd/muxd/mux"
)

// Conformance of process.* methods, the Process object and the process
// channel kind (see conformance_helpers_test.go).

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

// stdinWriter (muxd's extension) names a client's stdin stream: the meta
// counts its bytes written, a second channel under the name takes over
// (the first is closed with gone), and a bad name is refused.
func TestProcessChannelStdinWriter(t *testing.T) {
	_, url := testServer(t, nil)
	conn := rawConn(t, url, client.Options{NoReconnect: true})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	mustCall(t, conn, "process.start", obj{"id": "cat", "command": "cat", "stdin": true})
	open := func(params obj) (*mux.Channel, obj) {
		t.Helper()
		ch, meta, err := conn.Open(ctx, "process", 64<<10, params)
		if err != nil {
			t.Fatalf("OPEN %v: %v", params, err)
		}
		var m obj
		_ = json.Unmarshal(meta, &m)
		return ch, m
	}
	plain, m := open(obj{"id": "cat"})
	if _, ok := m["stdinWritten"]; ok {
		t.Errorf("meta without stdinWriter: %v, want no stdinWritten", m)
	}
	_ = plain.Close()
	first, m := open(obj{"id": "cat", "stdinWriter": "w"})
	if m["stdinWritten"] != 0.0 {
		t.Fatalf("meta: %v, want stdinWritten 0", m)
	}
	if _, err := first.Write([]byte("hello\n")); err != nil {
		t.Fatal(err)
	}
	out := events(first)
	readUntilData(t, out, "hello\n", 5*time.Second) // written: the count is final

	second, m := open(obj{"id": "cat", "stdinWriter": "w"})
	defer second.Close()
	if m["stdinWritten"] != 6.0 {
		t.Fatalf("meta of the writer's second channel: %v, want stdinWritten 6", m)
	}
	_, _ = first.Write([]byte("late\n")) // it may fail at once: the channel is closed
	var end error
	for ev := range out {
		if ev.err != nil {
			end = ev.err
			break
		}
	}
	wantErr(t, "the superseded channel", end, mux.CodeGone)
	if _, err := second.Write([]byte("next\n")); err != nil {
		t.Fatal(err)
	}
	if got := readUntilData(t, events(second), "next\n", 5*time.Second); got != "\x01hello\n\x01next\n" {
		t.Errorf("cat read %q, want hello and next only: the superseded channel wrote nothing more", got)
	}
	_, _, err := conn.Open(ctx, "process", 64<<10, obj{"id": "cat", "stdinWriter": "a\u202eb"})
	wantErr(t, "OPEN with a bad stdinWriter", err, mux.CodeProtocol)
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

	t.Run("follow false from dropped bytes: the gap, the retained bytes, EOF", func(t *testing.T) {
		mustCall(t, conn, "process.start", obj{"id": "big", "command": "head -c 200000 /dev/zero", "outputLimit": 1000})
		mustCall(t, conn, "process.wait", obj{"id": "big", "timeoutMs": 5000})
		for _, params := range []obj{{"id": "big", "follow": false}, {"id": "big", "follow": false, "stdout": 150000}} {
			ch, meta, err := conn.Open(ctx, "process", 64<<10, params)
			if err != nil {
				t.Fatal(err)
			}
			var m struct{ Stdout struct{ First, End int64 } }
			_ = json.Unmarshal(meta, &m)
			out := drainProcess(t, events(ch), 5*time.Second)
			_ = ch.Close()
			from, _ := params["stdout"].(int)
			if m.Stdout.End != 200000 || m.Stdout.First <= int64(from) || int64(len(out.stdout)) != m.Stdout.End-m.Stdout.First || out.end != io.EOF ||
				len(out.ctrls) != 2 || out.ctrls[0]["op"] != "gap" || out.ctrls[0]["bytes"] != float64(m.Stdout.First-int64(from)) || out.ctrls[1]["op"] != "exit" {
				t.Fatalf("from %d: range %+v, got %d bytes, CTRLs %v, end %v; want the gap to first, every retained byte, exit, EOF",
					from, m.Stdout, len(out.stdout), out.ctrls, out.end)
			}
		}
	})

	t.Run("output removed under a channel: CLOSE with why, not a stall", func(t *testing.T) {
		mustCall(t, conn, "process.start", obj{"id": "gone", "command": "head -c 300000 /dev/zero"})
		mustCall(t, conn, "process.wait", obj{"id": "gone", "timeoutMs": 5000})
		ch, _, err := conn.Open(ctx, "process", 1024, obj{"id": "gone"})
		if err != nil {
			t.Fatal(err)
		}
		defer ch.Close()
		mustCall(t, conn, "process.remove", obj{"id": "gone"})
		out := drainProcess(t, events(ch), 10*time.Second)
		var me *mux.Error
		if !errors.As(out.end, &me) || len(out.stdout) >= 300000 {
			t.Fatalf("after process.remove: %d bytes, end %v; want a CLOSE with a code before the end", len(out.stdout), out.end)
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
		// Another program's listener (this test's) is not the process's:
		// the timeout says who holds the port.
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		mustCall(t, conn, "process.start", obj{"command": "sleep 30", "id": "portless"})
		defer mustCall(t, conn, "process.kill", obj{"id": "portless", "signal": "KILL"})
		_, err = call(t, conn, "process.waitForPort", obj{"port": ln.Addr().(*net.TCPAddr).Port, "id": "portless", "timeoutMs": 300})
		wantErr(t, "waitForPort on another program's port", err, mux.CodeTimeout)
		if want := fmt.Sprintf("held by pid %d", os.Getpid()); !strings.Contains(err.Error(), want) {
			t.Fatalf("waitForPort on another program's port: %v, want it to say %q", err, want)
		}
	})

	// timeoutMs 0 answers at once, from what holds now: never a timeout
	// when the answer is already there.
	t.Run("timeoutMs 0", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		port := ln.Addr().(*net.TCPAddr).Port
		mustCall(t, conn, "process.start", obj{"command": "echo hello", "id": "zero", "outputLimit": 0}) // 0: the default
		mustCall(t, conn, "process.wait", obj{"id": "zero", "timeoutMs": 5000})
		for range 20 { // a coin toss each time before the fix
			if p := mustCall(t, conn, "process.wait", obj{"id": "zero", "timeoutMs": 0}); p["status"] != "exited" {
				t.Fatalf("process.wait: %v", p)
			}
			mustCall(t, conn, "process.waitForLog", obj{"id": "zero", "pattern": "hel+o", "timeoutMs": 0})
			mustCall(t, conn, "process.waitForPort", obj{"port": port, "timeoutMs": 0})
		}
		_, err = call(t, conn, "process.waitForPort", obj{"port": 1, "timeoutMs": 0})
		wantErr(t, "waitForPort with timeoutMs 0 on a closed port", err, mux.CodeTimeout)
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

// --max-long-inflight reaches the connection: past it a long request
// gets busy at once, while short requests still go through.
func TestLongRequestCapFollowsItsFlag(t *testing.T) {
	_, url := testServer(t, func(c *Config) { c.MaxLongInflight = 1 })
	conn := rawConn(t, url, client.Options{NoReconnect: true})
	mustCall(t, conn, "process.start", obj{"command": "exec sleep 30", "id": "w"})
	// Two waits: whichever comes second is refused, the other waits.
	ended := make(chan error, 2)
	for range 2 {
		go func() {
			_, err := call(t, conn, "process.wait", obj{"id": "w", "timeoutMs": 10000})
			ended <- err
		}()
	}
	wantErr(t, "a second long request past --max-long-inflight 1", recvOrTimeout(t, ended, 5*time.Second), mux.CodeBusy)
	mustCall(t, conn, "process.get", obj{"id": "w"})
	mustCall(t, conn, "process.kill", obj{"id": "w", "signal": "KILL"})
	if err := recvOrTimeout(t, ended, 10*time.Second); err != nil {
		t.Fatalf("the first wait: %v", err)
	}
}
