package server

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/muxd/muxd/client"
	"github.com/muxd/muxd/mux"
)

// Conformance of terminal.* methods, the terminal channel kind and the
// terminal limit (see conformance_helpers_test.go).

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
	// A shell that cannot run is the caller's mistake, said plainly.
	_, err = call(t, conn, "terminal.create", obj{"shell": "no-such-shell"})
	wantErr(t, "terminal.create with a missing shell", err, mux.CodeInvalidParams)
	_, err = call(t, conn, "terminal.create", obj{"shell": "bash --norc"})
	wantErr(t, "terminal.create with arguments in shell", err, mux.CodeInvalidParams)
	if !strings.Contains(err.Error(), "one program") {
		t.Errorf("terminal.create with arguments in shell: %v does not say the shell is one program", err)
	}
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
		{obj{"id": "t1", "from": -5}, mux.CodeProtocol},
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
