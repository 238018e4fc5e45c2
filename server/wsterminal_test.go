package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/muxd/muxd/client"

	"github.com/muxd/muxd/internal/termmodes"
	"github.com/muxd/muxd/pty"
)

const wstLimit = 10 * time.Second

// wstEnv is an httptest server with the /ws/terminal handler mounted as
// the daemon mounts it.
type wstEnv struct {
	m      *pty.Manager
	h      *terminalHandler
	srv    *httptest.Server
	exited chan pty.Info // every terminal exit
}

func newWSTEnv(t *testing.T, opts TerminalHandlerOptions) *wstEnv {
	t.Helper()
	return newWSTEnvWith(t, opts, pty.Config{})
}

func newWSTEnvWith(t *testing.T, opts TerminalHandlerOptions, cfg pty.Config) *wstEnv {
	t.Helper()
	// A fresh HOME: the shells must not depend on the machine's start-up files.
	t.Setenv("HOME", t.TempDir())
	e := &wstEnv{exited: make(chan pty.Info, 1024)}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	cfg.DefaultShell, cfg.Logger, cfg.KillGrace = "/bin/bash", quiet, 500*time.Millisecond
	cfg.OnExit = func(in pty.Info) { e.exited <- in }
	e.m = pty.NewManager(cfg)
	if opts.Logger == nil {
		opts.Logger = quiet
	}
	h := NewTerminalHandler(e.m, opts)
	e.h = h.(*terminalHandler)
	mux := http.NewServeMux()
	mux.Handle("/ws/terminal", h)
	mux.Handle("/ws/terminal/{id}", h)
	mux.Handle("/ws/pty", h)
	e.srv = httptest.NewServer(mux)
	t.Cleanup(func() {
		e.srv.Close()
		ctx, cancel := context.WithTimeout(context.Background(), wstLimit)
		defer cancel()
		if err := e.m.Close(ctx); err != nil {
			t.Errorf("close manager: %v", err)
		}
	})
	return e
}

// wstClient is a Go WebSocket client of /ws/terminal.
type wstClient struct {
	t     *testing.T
	c     *websocket.Conn
	out   bytes.Buffer      // binary frames received
	pre   bytes.Buffer      // binary frames received before ready
	texts []json.RawMessage // text frames received
	ready *int64
	close error // set once the socket ended
}

func (e *wstEnv) dial(t *testing.T, path string, hdr http.Header) *wstClient {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wstLimit)
	defer cancel()
	c, resp, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(e.srv.URL, "http")+path, &websocket.DialOptions{HTTPHeader: hdr})
	if err != nil {
		code := 0
		if resp != nil {
			code = resp.StatusCode
		}
		t.Fatalf("dial %s: %v (HTTP %d)", path, err, code)
	}
	c.SetReadLimit(1 << 20)
	wc := &wstClient{t: t, c: c}
	t.Cleanup(func() { _ = c.CloseNow() })
	return wc
}

// next reads one message; false once the socket ended.
func (wc *wstClient) next(ctx context.Context) bool {
	if wc.close != nil {
		return false
	}
	typ, data, err := wc.c.Read(ctx)
	if err != nil {
		wc.close = err
		return false
	}
	if typ == websocket.MessageBinary {
		wc.out.Write(data)
		if wc.ready == nil {
			wc.pre.Write(data)
		}
		return true
	}
	wc.texts = append(wc.texts, data)
	var m struct {
		Type   string `json:"type"`
		Cursor int64  `json:"cursor"`
	}
	if json.Unmarshal(data, &m) != nil {
		wc.t.Fatalf("text frame is not JSON: %q", data)
	}
	if m.Type == "ready" && wc.ready == nil {
		c := m.Cursor
		wc.ready = &c
	}
	return true
}

func (wc *wstClient) until(what string, cond func() bool) {
	wc.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wstLimit)
	defer cancel()
	for !cond() {
		if !wc.next(ctx) {
			tail := wc.out.String()
			wc.t.Fatalf("waiting for %s: socket ended (%v); output ends %q", what, wc.close, tail[max(0, len(tail)-1024):])
		}
	}
}

func (wc *wstClient) waitReady() int64 {
	wc.t.Helper()
	wc.until("ready", func() bool { return wc.ready != nil })
	return *wc.ready
}

func (wc *wstClient) waitOutput(s string) {
	wc.t.Helper()
	wc.until("output "+s, func() bool { return strings.Contains(wc.out.String(), s) })
}

func (wc *wstClient) send(typ websocket.MessageType, data string) {
	wc.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wstLimit)
	defer cancel()
	if err := wc.c.Write(ctx, typ, []byte(data)); err != nil {
		wc.t.Fatalf("send: %v", err)
	}
}

func (wc *wstClient) typeLine(line string) { wc.send(websocket.MessageBinary, line+"\r") }

// lastText waits for a text frame of the given type and decodes it.
func (wc *wstClient) waitText(typ string) map[string]any {
	wc.t.Helper()
	var found map[string]any
	seen := 0
	wc.until("text "+typ, func() bool {
		for ; seen < len(wc.texts); seen++ {
			var m map[string]any
			_ = json.Unmarshal(wc.texts[seen], &m)
			if m["type"] == typ {
				found = m
				seen++
				return true
			}
		}
		return false
	})
	return found
}

func (wc *wstClient) waitClosed() error {
	wc.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wstLimit)
	defer cancel()
	for wc.next(ctx) {
	}
	if ctx.Err() != nil {
		wc.t.Fatalf("socket not closed in time")
	}
	return wc.close
}

func TestWSTerminalEchoAndIdlessTerminalDiesWithSocket(t *testing.T) {
	e := newWSTEnv(t, TerminalHandlerOptions{})
	wc := e.dial(t, "/ws/terminal?cols=100&rows=30", nil)
	// The addon types before ready; input must not be lost.
	wc.typeLine(`echo "hi-$((6*7)) $(stty size)"`)
	wc.waitReady()
	wc.waitOutput("hi-42 30 100")
	if n := len(e.m.List()); n != 1 {
		t.Fatalf("terminals: got %d, want 1", n)
	}
	_ = wc.c.Close(websocket.StatusNormalClosure, "")
	select {
	case <-e.exited:
	case <-time.After(wstLimit):
		t.Fatal("id-less terminal outlived its socket")
	}
}

func TestWSTerminalIDFromEveryPlace(t *testing.T) {
	tests := []struct{ path, id string }{
		{"/ws/terminal?id=a1", "a1"},
		{"/ws/terminal?sessionId=a2", "a2"},
		{"/ws/terminal?terminalId=a3", "a3"},
		{"/ws/terminal/a4", "a4"},
		{"/ws/pty?sessionId=a5&cols=80&rows=24", "a5"},
	}
	e := newWSTEnv(t, TerminalHandlerOptions{})
	for _, tc := range tests {
		wc := e.dial(t, tc.path, nil)
		wc.waitReady()
		if _, err := e.m.Get(tc.id); err != nil {
			t.Errorf("%s: terminal %q: %v", tc.path, tc.id, err)
		}
		_ = wc.c.Close(websocket.StatusNormalClosure, "")
	}
	// Closing the sockets killed none of them.
	for _, tc := range tests {
		term, err := e.m.Get(tc.id)
		if err != nil || term.Exited() {
			t.Errorf("%s: terminal gone after its socket closed: %v", tc.path, err)
		}
	}
}

func TestWSTerminalSessionStateSeedsNewTerminal(t *testing.T) {
	dir := t.TempDir()
	e := newWSTEnv(t, TerminalHandlerOptions{SessionState: func(id string) (string, []string, bool) {
		if id != "sess" {
			return "", nil, false
		}
		return dir, []string{"PATH=/usr/bin:/bin", "FROM_SESSION=yes"}, true
	}})
	wc := e.dial(t, "/ws/terminal?sessionId=sess", nil)
	wc.waitReady()
	wc.typeLine(`echo "s:$FROM_SESSION:$(pwd)"`)
	wc.waitOutput("s:yes:" + dir)
}

func TestWSTerminalReplayOnReconnectWithoutQueries(t *testing.T) {
	e := newWSTEnv(t, TerminalHandlerOptions{})
	wc := e.dial(t, "/ws/terminal?id=rp", nil)
	wc.waitReady()
	// The output ends with the new prompt (which the typed line does not
	// spell out): then the terminal is quiet, and the end stays put.
	wc.typeLine(`PS1='r''dy> '; printf 'q\033[6n\033[c\033]11;?\007%s\n' mark-$((1+2))`)
	wc.waitOutput("mark-3")
	wc.waitOutput("rdy> ")
	_ = wc.c.Close(websocket.StatusNormalClosure, "")

	// The addon reconnects without a cursor: the whole ring is replayed
	// before ready, without the queries.
	wc2 := e.dial(t, "/ws/terminal?id=rp", nil)
	cursor := wc2.waitReady()
	replay := wc2.pre.String()
	if !strings.Contains(replay, "qmark-3") {
		t.Fatalf("replay lacks the output: %q", replay)
	}
	for _, q := range []string{"\x1b[6n", "\x1b[c", "\x1b]11;?"} {
		if strings.Contains(replay, q) {
			t.Fatalf("replay contains query %q", q)
		}
	}
	term, _ := e.m.Get("rp")
	if end := term.Info().End; cursor != end {
		t.Fatalf("ready cursor %d, want %d", cursor, end)
	}
	_ = wc2.c.Close(websocket.StatusNormalClosure, "")

	// With the cursor, nothing is replayed and nothing is lost.
	wc3 := e.dial(t, "/ws/terminal?id=rp&cursor="+strconv.FormatInt(cursor, 10), nil)
	if got := wc3.waitReady(); got != cursor {
		t.Fatalf("ready cursor %d, want %d", got, cursor)
	}
	if wc3.pre.Len() != 0 {
		t.Fatalf("replayed %q past the cursor", wc3.pre.String())
	}
	wc3.typeLine(`echo after-$((2+2))`)
	wc3.waitOutput("after-4")
}

func TestWSTerminalControlMessages(t *testing.T) {
	e := newWSTEnv(t, TerminalHandlerOptions{})
	wc := e.dial(t, "/ws/terminal?id=ctl", nil)
	wc.waitReady()
	bad := []string{
		`not json`,
		`{"type":"bogus"}`,
		`{"cols":10}`,
		`{"type":"resize","cols":0,"rows":10}`,
		`{"type":"resize","cols":10,"rows":1001}`,
		`{"type":"resize","cols":"80","rows":24}`,
		`{"type":"resize","cols":80}`,
	}
	for _, msg := range bad {
		wc.send(websocket.MessageText, msg)
		if m := wc.waitText("error"); m["message"] == "" || m["message"] == nil {
			t.Fatalf("%s: error without message: %v", msg, m)
		}
	}
	wc.send(websocket.MessageText, `{"type":"resize","cols":123,"rows":45}`)
	wc.typeLine(`echo "size:$(stty size)"`)
	wc.waitOutput("size:45 123")
	for _, raw := range wc.texts {
		if !json.Valid(raw) {
			t.Fatalf("text frame is not JSON: %q", raw)
		}
	}
}

// TestWSTerminalAcceptsAPasteUpTo1MiB: the addon sends a paste as one
// frame. docs/protocol.md promises 64 KiB; a larger paste closed the socket
// and was lost, so muxd takes up to 1 MiB, typed in pieces.
func TestWSTerminalAcceptsAPasteUpTo1MiB(t *testing.T) {
	e := newWSTEnv(t, TerminalHandlerOptions{})
	wc := e.dial(t, "/ws/terminal?id=big", nil)
	wc.waitReady()
	wc.typeLine(`stty -icanon -echo; echo go-$((1+1)); head -c 1048576 | wc -c; stty sane`)
	wc.waitOutput("go-2")
	wc.send(websocket.MessageBinary, strings.Repeat("a", 1<<20))
	wc.waitOutput("1048576")

	// A larger frame is refused with 1009, on that socket only.
	wc.send(websocket.MessageBinary, strings.Repeat("b", 1<<20+1))
	if err := wc.waitClosed(); websocket.CloseStatus(err) != websocket.StatusMessageTooBig {
		t.Fatalf("oversized frame: got %v, want close 1009", err)
	}
	// A control message over 64 KiB gets an error; the socket stays.
	wc2 := e.dial(t, "/ws/terminal?id=big", nil)
	wc2.waitReady()
	wc2.send(websocket.MessageText, `{"type":"resize","pad":"`+strings.Repeat("x", 64<<10)+`"}`)
	if m := wc2.waitText("error"); !strings.Contains(fmt.Sprint(m["message"]), "over 65536 bytes") {
		t.Fatalf("oversized control message: %v", m)
	}
	wc2.typeLine(`echo still-$((2+2))`)
	wc2.waitOutput("still-4")
}

// TestWSTerminalShellThatExitsAtOnceIsNotRespawnedForEver: the addon
// reconnects after every close and resets its retries on each ready, so
// a shell that exits at once was respawned about once a second for ever.
// The second quick exit in a row refuses the next respawn, in band.
func TestWSTerminalShellThatExitsAtOnceIsNotRespawnedForEver(t *testing.T) {
	e := newWSTEnv(t, TerminalHandlerOptions{})
	for i := range 2 { // created, then replaced once
		if i == 1 {
			// Each exited instance counts once, however many sockets
			// ask about it (two pages reconnecting together).
			for range 3 {
				if err := e.h.respawnRefused("broken"); err != nil {
					t.Fatalf("the first quick exit, seen again: %v", err)
				}
			}
		}
		wc := e.dial(t, "/ws/terminal?id=broken&shell=/bin/true", nil)
		if m := wc.waitText("exit"); m["code"] != 0.0 {
			t.Fatalf("round %d: exit %v", i, m)
		}
		wc.waitClosed()
	}
	wc := e.dial(t, "/ws/terminal?id=broken&shell=/bin/true", nil)
	m := wc.waitText("error")
	if msg := fmt.Sprint(m["message"]); !strings.Contains(msg, "not restarting it") {
		t.Fatalf("third round: %v", m)
	}
	if err := wc.waitClosed(); websocket.CloseStatus(err) != websocket.StatusInternalError || wc.ready != nil {
		t.Fatalf("third round: close %v, ready %v; want 1011 and no ready", err, wc.ready)
	}
	// A shell that ran a while is replaced whenever asked.
	wc = e.dial(t, "/ws/terminal?id=fine", nil)
	wc.waitReady()
	time.Sleep(quickExit) // a shell that lived past quickExit
	wc.typeLine("exit 2")
	wc.waitText("exit")
	wc.waitClosed()
	wc = e.dial(t, "/ws/terminal?id=fine", nil)
	wc.waitReady()
}

func TestWSTerminalExitThenFreshTerminalOnReconnect(t *testing.T) {
	tests := []struct {
		name, cmd string
		code      float64
		signal    any
	}{
		{"exit code", "exit 3", 3, nil},
		{"killed", "kill -9 $$", 137, "KILL"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newWSTEnv(t, TerminalHandlerOptions{})
			wc := e.dial(t, "/ws/terminal?id=ex", nil)
			wc.waitReady()
			old, _ := e.m.Get("ex")
			wc.typeLine(tc.cmd)
			m := wc.waitText("exit")
			if m["code"] != tc.code || m["signal"] != tc.signal {
				t.Fatalf("exit: got %v, want code %v signal %v", m, tc.code, tc.signal)
			}
			if c, ok := m["cursor"].(float64); !ok || int64(c) != old.Info().End {
				t.Fatalf("exit cursor: got %v, want %d", m["cursor"], old.Info().End)
			}
			if err := wc.waitClosed(); websocket.CloseStatus(err) != websocket.StatusNormalClosure {
				t.Fatalf("close after exit: got %v, want 1000", err)
			}
			wc2 := e.dial(t, "/ws/terminal?id=ex", nil)
			wc2.waitReady()
			fresh, _ := e.m.Get("ex")
			if fresh == old || fresh.Exited() {
				t.Fatalf("reconnect did not get a fresh terminal")
			}
			wc2.typeLine(`echo again-$((1+1))`)
			wc2.waitOutput("again-2")
		})
	}
}

func TestWSTerminalConcurrentOpensShareOnePTY(t *testing.T) {
	e := newWSTEnv(t, TerminalHandlerOptions{})
	const n = 8
	var wg sync.WaitGroup
	clients := make([]*wstClient, n)
	for i := range n {
		wg.Go(func() { clients[i] = e.dial(t, "/ws/terminal?id=shared", nil) })
	}
	wg.Wait()
	for _, wc := range clients {
		wc.waitReady()
	}
	if got := len(e.m.List()); got != 1 {
		t.Fatalf("terminals: got %d, want 1", got)
	}
	clients[0].typeLine(`echo all-$((3*3))`)
	for _, wc := range clients {
		wc.waitOutput("all-9")
	}
}

func TestWSTerminalOriginAndAuthorize(t *testing.T) {
	e := newWSTEnv(t, TerminalHandlerOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), wstLimit)
	defer cancel()
	url := "ws" + strings.TrimPrefix(e.srv.URL, "http") + "/ws/terminal"
	_, resp, err := websocket.Dial(ctx, url, &websocket.DialOptions{HTTPHeader: http.Header{"Origin": {"https://evil.example"}}})
	if err == nil || resp == nil || resp.StatusCode != http.StatusForbidden {
		t.Fatalf("foreign origin: got %v, want 403", err)
	}
	wc := e.dial(t, "/ws/terminal", http.Header{"Origin": {e.srv.URL}})
	wc.waitReady()
	// DNS rebinding: a site that points its own name at the daemon sends
	// an Origin that matches Host; only a host named outright passes.
	req, _ := http.NewRequest("GET", e.srv.URL+"/ws/terminal", nil)
	req.Host = "rebind.example:" + e.srv.URL[strings.LastIndex(e.srv.URL, ":")+1:]
	req.Header.Set("Origin", "http://"+req.Host)
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusForbidden {
		t.Fatalf("rebound origin: got %v %v, want 403", resp, err)
	} else {
		_ = resp.Body.Close()
	}

	e2 := newWSTEnv(t, TerminalHandlerOptions{Authorize: func(r *http.Request) error {
		if r.Header.Get("Authorization") != "Bearer good" {
			return ErrUnauthorized
		}
		return nil
	}})
	url2 := "ws" + strings.TrimPrefix(e2.srv.URL, "http") + "/ws/terminal"
	_, resp, err = websocket.Dial(ctx, url2, nil)
	if err == nil || resp == nil || resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("no token: got %v, want 401", err)
	}
	wc2 := e2.dial(t, "/ws/terminal", http.Header{"Authorization": {"Bearer good"}})
	wc2.waitReady()
}

// TestWSTerminalBadQuery: refused after the upgrade, with the reason in
// band (behind the Durable Object the browser sees no HTTP status).
func TestWSTerminalBadQuery(t *testing.T) {
	e := newWSTEnv(t, TerminalHandlerOptions{})
	for _, q := range []string{"?cursor=-1", "?cursor=abc", "?id=" + strings.Repeat("x", 300)} {
		wc := e.dial(t, "/ws/terminal"+q, nil)
		m := wc.waitText("error")
		if err := wc.waitClosed(); websocket.CloseStatus(err) != websocket.StatusPolicyViolation || m["message"] == "" || wc.ready != nil {
			t.Errorf("%s: error %v, close %v; want a message, then close 1008", q, m, err)
		}
	}
	if n := len(e.m.List()); n != 0 {
		t.Fatalf("bad queries created %d terminals", n)
	}
}

// TestWSTerminalClearsAheadOfAFullReplay: the mode reset ahead of ready
// keeps the addon from clearing the screen itself (it does when no byte
// came first), and its clear() before a reconnect keeps the cursor's
// line: so a socket without a cursor gets its screen cleared ahead of
// the replay, which then draws on a clean screen, and one with a cursor
// gets neither reset nor clear. A cursor past the end, or for a
// terminal that exited and is replaced, is another instance's: it gets
// what a new viewer gets.
func TestWSTerminalClearsAheadOfAFullReplay(t *testing.T) {
	e := newWSTEnv(t, TerminalHandlerOptions{})
	clear := append(termmodes.AppendResetAll(nil), "\x1b[H\x1b[2J\x1b[3J"...)
	wc := e.dial(t, "/ws/terminal?id=cl", nil)
	wc.waitReady()
	if !bytes.HasPrefix(wc.pre.Bytes(), clear) {
		t.Fatalf("a new terminal's bytes before ready: %q, want a mode reset and a clear first", wc.pre.Bytes())
	}
	wc.typeLine("echo replay-$((6*7))")
	wc.waitOutput("replay-42")
	_ = wc.c.Close(websocket.StatusNormalClosure, "")
	wc = e.dial(t, "/ws/terminal?id=cl", nil)
	cursor := wc.waitReady()
	if pre := wc.pre.Bytes(); !bytes.HasPrefix(pre, clear) || !bytes.Contains(pre, []byte("replay-42")) {
		t.Fatalf("a reattach's bytes before ready: %q, want a reset, a clear, then the replay", pre)
	}
	_ = wc.c.Close(websocket.StatusNormalClosure, "")
	wc = e.dial(t, "/ws/terminal?id=cl&cursor="+strconv.FormatInt(cursor, 10), nil)
	wc.waitReady()
	// Only what the shell wrote since, if anything (its prompt may come
	// late): no reset, no clear, no replay.
	if pre := wc.pre.Bytes(); bytes.Contains(pre, []byte("replay-")) || bytes.Contains(pre, []byte("\x1b[2J")) {
		t.Fatalf("a resume at the end: %q before ready, want no reset and no replay", pre)
	}
	_ = wc.c.Close(websocket.StatusNormalClosure, "")
	for _, q := range []string{"cursor=" + strconv.FormatInt(cursor+1000, 10)} {
		wc = e.dial(t, "/ws/terminal?id=cl&"+q, nil)
		wc.waitReady()
		if pre := wc.pre.Bytes(); !bytes.HasPrefix(pre, clear) || !bytes.Contains(pre, []byte("replay-42")) {
			t.Fatalf("%s: %q before ready, want a reset, a clear, then the replay", q, pre)
		}
		_ = wc.c.Close(websocket.StatusNormalClosure, "")
	}
	// The terminal exits; a viewer of it comes back with its cursor.
	wc = e.dial(t, "/ws/terminal?id=cl", nil)
	wc.waitReady()
	wc.typeLine("exit")
	wc.waitText("exit")
	wc = e.dial(t, "/ws/terminal?id=cl&cursor="+strconv.FormatInt(cursor, 10), nil)
	wc.waitReady()
	if pre := wc.pre.Bytes(); !bytes.HasPrefix(pre, clear) {
		t.Fatalf("the cursor of an exited terminal, on its replacement: %q before ready, want a reset and a clear", pre)
	}
}

// TestWSTerminalLenientQuery: sizes and shells the SDK's container would
// take are taken (a size past the limit is cut to it; one that is not a
// number leaves the default), and a shell may have arguments.
func TestWSTerminalLenientQuery(t *testing.T) {
	e := newWSTEnv(t, TerminalHandlerOptions{})
	for _, tc := range []struct{ q, size string }{
		{"?id=l1&cols=5000&rows=0", "24 1000"},
		{"?id=l2&cols=abc&rows=-3", "24 80"},
		{"?id=l3&cols=+120&rows=%2040", "40 120"},
	} {
		wc := e.dial(t, "/ws/terminal"+tc.q, nil)
		wc.waitReady()
		wc.typeLine(`echo "size-$(stty size)-"`)
		wc.waitOutput("size-" + tc.size + "-")
		_ = wc.c.Close(websocket.StatusNormalClosure, "")
	}
	wc := e.dial(t, "/ws/terminal?id=l4&shell="+url.QueryEscape("env ARG_SEEN=args-ok bash --norc --noprofile"), nil)
	wc.waitReady()
	wc.typeLine(`echo "[$ARG_SEEN]"`)
	wc.waitOutput("[args-ok]")
}

func TestWSTerminalShutdownGoAway(t *testing.T) {
	var mu sync.Mutex
	var goAways []func(time.Duration)
	e := newWSTEnv(t, TerminalHandlerOptions{Track: func(r *http.Request, g func(time.Duration)) (func(), bool) {
		mu.Lock()
		goAways = append(goAways, g)
		mu.Unlock()
		return func() {}, true
	}})
	wc := e.dial(t, "/ws/terminal?id=sd", nil)
	wc.waitReady()
	mu.Lock()
	g := goAways[0]
	mu.Unlock()
	go g(2 * time.Second)
	if err := wc.waitClosed(); websocket.CloseStatus(err) != websocket.StatusGoingAway {
		t.Fatalf("goAway: got %v, want 1001", err)
	}
	if _, err := e.m.Get("sd"); err != nil || errors.Is(err, pty.ErrNotFound) {
		t.Fatalf("shutdown of the socket killed the terminal: %v", err)
	}
}

func TestWSTerminalSocketsEndWithoutLeaks(t *testing.T) {
	ended := make(chan struct{}, 64)
	e := newWSTEnv(t, TerminalHandlerOptions{Track: func(r *http.Request, g func(time.Duration)) (func(), bool) {
		return func() { ended <- struct{}{} }, true
	}})
	// Warm up: the first socket creates the terminal that later sockets
	// attach to, and lazily started goroutines.
	wc := e.dial(t, "/ws/terminal?id=leak", nil)
	wc.waitReady()
	_ = wc.c.Close(websocket.StatusNormalClosure, "")
	<-ended
	goroutines := runtime.NumGoroutine()
	const n = 20
	for i := range n {
		path := "/ws/terminal?id=leak"
		if i%2 == 1 {
			path = "/ws/terminal" // id-less: its terminal dies too
		}
		wc := e.dial(t, path, nil)
		wc.waitReady()
		if i%4 == 0 {
			_ = wc.c.CloseNow() // abrupt
		} else {
			_ = wc.c.Close(websocket.StatusNormalClosure, "")
		}
		select {
		case <-ended:
		case <-time.After(wstLimit):
			t.Fatalf("socket %d: handler did not return", i)
		}
	}
	if got := len(e.m.List()); got != 1 {
		t.Fatalf("terminals: got %d, want 1", got)
	}
	deadline := time.Now().Add(wstLimit)
	for runtime.NumGoroutine() > goroutines && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond) // polling a count that has no event to wait on
	}
	if got := runtime.NumGoroutine(); got > goroutines {
		buf := make([]byte, 1<<20)
		t.Fatalf("goroutines: got %d, want <= %d\n%s", got, goroutines, buf[:runtime.Stack(buf, true)])
	}
}

func TestWSTerminalDeadPeerEndsSocketWhileProgramIgnoresInput(t *testing.T) {
	ended := make(chan struct{}, 4)
	e := newWSTEnv(t, TerminalHandlerOptions{
		PingInterval: 50 * time.Millisecond,
		Track: func(r *http.Request, g func(time.Duration)) (func(), bool) {
			return func() { ended <- struct{}{} }, true
		},
	})
	wc := e.dial(t, "/ws/terminal?id=deaf", nil)
	wc.waitReady()
	wc.typeLine(`stty raw -echo; echo dea$((1+1))f; exec sleep 1000`)
	wc.waitOutput("dea2f")
	// More than the PTY's input buffer: the handler's write blocks.
	chunk := strings.Repeat("z", 60<<10)
	for range 4 {
		wc.send(websocket.MessageBinary, chunk)
	}
	_ = wc.c.CloseNow() // the peer vanishes
	select {
	case <-ended:
	case <-time.After(wstLimit):
		t.Fatal("the handler did not end after its peer vanished")
	}
	if term, err := e.m.Get("deaf"); err != nil || term.Exited() {
		t.Fatalf("the terminal did not survive its socket: %v", err)
	}
}

func TestWSTerminalStalledViewerDoesNotStallOthers(t *testing.T) {
	tests := []struct {
		name, program string
		unit          string // what the program prints, count times
		count         int
	}{
		// Far more than the ring and the stalled socket's buffers; well
		// within the limit unless the stalled viewer holds the program
		// until the liveness ping drops it (15 s and more).
		{"large writes", `head -c 40000000 /dev/zero | tr '\0' '\171'`, "y", 40_000_000}, // \171: y, which the typed line then lacks
		// Small writes come as small reads, which the reader may send on
		// its own (pty's SetInline): never to a socket that is not
		// taking them. The line is built so the typed command lacks it.
		{"small writes", `s=0123456789; s=$s$s$s; i=0; while [ $i -lt 100000 ]; do echo $s; i=$((i+1)); done`, "012345678901234567890123456789\r\n", 100000},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newWSTEnvWith(t, TerminalHandlerOptions{}, pty.Config{StallTimeout: 300 * time.Millisecond})
			stalled := e.dial(t, "/ws/terminal?id=st", nil)
			stalled.waitReady() // then never reads again
			wc := e.dial(t, "/ws/terminal?id=st", nil)
			wc.waitReady()
			wc.typeLine(tt.program + `; echo; echo end-$((2+3))`)
			ctx, cancel := context.WithTimeout(context.Background(), wstLimit)
			defer cancel()
			// Counted as it comes (keeping 40 MB would slow this reader
			// down until it lagged too). A unit or the end mark may span
			// two frames: each frame is seen with what ended the last one
			// (less than a unit after the last unit counted, and less than
			// the mark).
			unit, mark := []byte(tt.unit), []byte("end-5")
			var carry, last []byte
			n, total := 0, 0
			for done := false; !done; {
				typ, data, err := wc.c.Read(ctx)
				if err != nil {
					t.Fatalf("after %d bytes: %v", total, err)
				}
				if typ != websocket.MessageBinary {
					continue
				}
				total += len(data)
				seen := append(carry, data...)
				n += bytes.Count(seen, unit)
				if i := bytes.LastIndex(seen, unit); i >= 0 {
					seen = seen[i+len(unit):]
				}
				carry = bytes.Clone(seen[max(0, len(seen)-(len(unit)-1)):])
				withLast := append(last, data...)
				done = bytes.Contains(withLast, mark)
				last = bytes.Clone(withLast[max(0, len(withLast)-(len(mark)-1)):])
			}
			// The terminal also echoes the typed command.
			if n -= strings.Count(tt.program, tt.unit); n != tt.count {
				t.Fatalf("got %d of the %d %q the program printed", n, tt.count, tt.unit)
			}
		})
	}
}

// While one viewer's socket goes through a close handshake that its peer
// never answers, the terminal's reader must not wait on it: another
// viewer's echoes stay fast.
func TestWSTerminalClosingViewerDoesNotStallEchoes(t *testing.T) {
	goAways := make(chan func(time.Duration), 4)
	opts := TerminalHandlerOptions{Track: func(r *http.Request, goAway func(time.Duration)) (func(), bool) {
		goAways <- goAway
		return func() {}, true
	}}
	e := newWSTEnvWith(t, opts, pty.Config{})
	closing := e.dial(t, "/ws/terminal?id=ga", nil)
	closing.waitReady() // then never reads: it never answers the close frame
	goAway := <-goAways
	wc := e.dial(t, "/ws/terminal?id=ga", nil)
	wc.waitReady()
	wc.typeLine(`stty raw -echo; echo READY; exec cat`)
	wc.until("READY", func() bool { return bytes.Contains(wc.out.Bytes(), []byte("READY\n")) })
	go goAway(wstLimit)               // the handshake would run up to its own timeout
	time.Sleep(50 * time.Millisecond) // let it begin; the checks below hold either way
	ctx, cancel := context.WithTimeout(context.Background(), wstLimit)
	defer cancel()
	for i := range 5 {
		key := []byte{byte('a' + i)}
		start := time.Now()
		if err := wc.c.Write(ctx, websocket.MessageBinary, key); err != nil {
			t.Fatal(err)
		}
		wc.until("the echo", func() bool { return bytes.HasSuffix(wc.out.Bytes(), key) })
		if d := time.Since(start); d > time.Second {
			t.Fatalf("echo %d took %v while the other socket was closing", i, d)
		}
	}
}

// An idle socket gets a heartbeat message, which Cloudflare's proxy
// forwards (its WebSocket pings it answers itself); never before ready,
// and not while output flows.
func TestWSTerminalIdleSocketGetsHeartbeats(t *testing.T) {
	e := newWSTEnv(t, TerminalHandlerOptions{PingInterval: 50 * time.Millisecond})
	wc := e.dial(t, "/ws/terminal", nil)
	wc.waitReady()
	if m := wc.waitText("heartbeat"); len(m) != 1 {
		t.Fatalf("heartbeat %v, want only its type", m)
	}
	var firstText map[string]any
	_ = json.Unmarshal(wc.texts[0], &firstText)
	if firstText["type"] != "ready" {
		t.Fatalf("the first text message: %s, want ready before any heartbeat", wc.texts[0])
	}
}

// A paste into a program that does not read (raw mode, busy) blocks the
// read loop, so the peer's pongs are not read: that must not pass for a
// dead peer, drop the socket and, without an id, kill the terminal.
func TestWSTerminalPasteIntoABusyProgramKeepsTheSocket(t *testing.T) {
	e := newWSTEnv(t, TerminalHandlerOptions{PingInterval: 100 * time.Millisecond})
	wc := e.dial(t, "/ws/terminal", nil)
	wc.waitReady()
	wc.typeLine(`stty raw -echo; echo bu$((1+1))sy; sleep 1.5; stty sane; echo alive-$((3+4))`)
	wc.waitOutput("bu2sy")
	wc.send(websocket.MessageBinary, strings.Repeat("z", 200<<10))
	wc.waitOutput("alive-7")
	if wc.close != nil {
		t.Fatalf("socket closed: %v", wc.close)
	}
}

// A request that is not a WebSocket upgrade (a plain GET, which any web
// page can send to a loopback daemon without an Origin: an <img>, a
// link) gets 426 and starts nothing: no terminal, no program.
func TestWSTerminalPlainGETStartsNothing(t *testing.T) {
	_, base := testServer(t, nil)
	dir := t.TempDir()
	for i, path := range []string{"/ws/terminal?id=get1&", "/ws/pty?", "/ws/terminal/get2?", "/ws/terminal?"} {
		file := filepath.Join(dir, fmt.Sprint(i))
		u := base + path + "shell=" + url.QueryEscape("touch "+file)
		for _, h := range []map[string]string{nil, {"Upgrade": "websocket"}, {"Connection": "Upgrade"}} {
			if code := httpGet(t, u, h); code != http.StatusUpgradeRequired {
				t.Errorf("GET %s with %v: %d, want 426", path, h, code)
			}
		}
		time.Sleep(100 * time.Millisecond) // a started program would have run by now
		if _, err := os.Stat(file); err == nil {
			t.Errorf("GET %s ran the shell of its query", path)
		}
	}
	conn := rawConn(t, base, client.Options{NoReconnect: true})
	if r := mustCall(t, conn, "terminal.list", nil); len(r["terminals"].([]any)) != 0 {
		t.Fatalf("plain GETs left terminals: %v", r["terminals"])
	}
}
