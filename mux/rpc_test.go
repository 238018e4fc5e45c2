package mux

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// blockingRouter has "block" (short) and "wait" (long) handlers that
// report when they start and end.
func blockingRouter(started, ended chan string) *Router {
	rt := NewRouter()
	h := func(ctx context.Context, c *Conn, p json.RawMessage) (any, error) {
		var params struct{ Name string }
		_ = json.Unmarshal(p, &params)
		name := params.Name
		started <- name
		<-ctx.Done()
		ended <- name
		return nil, ctx.Err()
	}
	rt.Handle("block", h)
	rt.HandleLong("wait", nil, h)
	rt.HandleLong("maybe", func(p json.RawMessage) bool { return string(p) == `{"name":"long"}` }, h)
	rt.Handle("echo", func(ctx context.Context, c *Conn, p json.RawMessage) (any, error) { return p, nil })
	// As a server's handler does: its errors already mapped to the wire.
	rt.HandleLong("mapped", nil, func(ctx context.Context, c *Conn, p json.RawMessage) (any, error) {
		started <- "mapped"
		<-ctx.Done()
		ended <- "mapped"
		return nil, NewError(CodeCancelled, "%s", ctx.Err().Error())
	})
	return rt
}

func TestBusyPastShortCapWhileLongRequestsWait(t *testing.T) {
	started, ended := make(chan string, 16), make(chan string, 16)
	names := map[string]string{"maxRpcInflight": "muxd serve --max-rpc-inflight"}
	ts := newTestServer(t, pipeTransport, Config{MaxRPCInflight: 2, MaxLongInflight: 3, LimitNames: names}, blockingRouter(started, ended))
	// LimitNames leaves busy answers as they are: clients match them.
	c, _ := ts.dial(t, Config{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errs := make(chan error, 16)
	call := func(method, name string) {
		go func() { errs <- c.Call(ctx, method, map[string]string{"name": name}, nil) }()
		recvOrTimeout(t, started, 5*time.Second, method+" start")
	}
	call("block", "s1")
	call("block", "s2")
	call("wait", "l1")
	call("maybe", "long")
	cctx := ctx5(t)
	var e *Error
	err := c.Call(cctx, "block", map[string]string{"name": "s3"}, nil)
	if !errors.As(err, &e) || e.Code != CodeBusy {
		t.Fatalf("third short call: got %v, want busy", err)
	}
	if e.Message != "too many requests in flight" || !IsOverload(err) {
		t.Fatalf("third short call: %q (IsOverload %v): want the words clients match, and an overload", e.Message, IsOverload(err))
	}
	if err := c.Call(cctx, "maybe", map[string]string{"name": "short"}, nil); !errors.As(err, &e) || e.Code != CodeBusy {
		t.Fatalf("short 'maybe': got %v, want busy", err)
	}
	call("wait", "l3")
	if err := c.Call(cctx, "wait", map[string]string{"name": "l4"}, nil); !errors.As(err, &e) || e.Code != CodeBusy {
		t.Fatalf("fourth long call: got %v, want busy", err)
	}
	// rpc.cancel is served even when every slot is taken.
	if err := c.Call(cctx, "rpc.cancel", map[string]any{"id": 12345}, nil); !errors.As(err, &e) || e.Code != CodeNotFound {
		t.Fatalf("cancel unknown id: got %v, want not_found", err)
	}
}

func TestCancelledCallCancelsHandler(t *testing.T) {
	started, ended := make(chan string, 4), make(chan string, 4)
	ts := newTestServer(t, tcpTransport, Config{}, blockingRouter(started, ended))
	c, _ := ts.dial(t, Config{})
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- c.Call(ctx, "wait", map[string]string{"name": "w"}, nil) }()
	recvOrTimeout(t, started, 5*time.Second, "handler start")
	cancel()
	if got := recvOrTimeout(t, ended, 5*time.Second, "handler cancelled"); got != "w" {
		t.Fatalf("ended %q", got)
	}
	if err := recvOrTimeout(t, errc, 5*time.Second, "call return"); !errors.Is(err, context.Canceled) {
		t.Fatalf("call: got %v, want context.Canceled", err)
	}
	// The slot is free again and the connection still works.
	if err := c.Call(ctx5(t), "echo", []int{1}, nil); err != nil {
		t.Fatal(err)
	}
}

// TestCancelThenCloseStaysACancel: a client that gives up on a request
// and closes the connection at once (a CLI on Ctrl-C) still cancels it:
// Call returns only once rpc.cancel is written, and the handler's context
// says the peer cancelled it, not that the connection dropped it.
func TestCancelThenCloseStaysACancel(t *testing.T) {
	for _, tr := range []transport{pipeTransport, tcpTransport} {
		causes := make(chan error, 1)
		started := make(chan struct{}, 1)
		rt := NewRouter()
		rt.HandleLong("wait", nil, func(ctx context.Context, c *Conn, p json.RawMessage) (any, error) {
			started <- struct{}{}
			<-ctx.Done()
			causes <- context.Cause(ctx)
			return nil, ctx.Err()
		})
		ts := newTestServer(t, tr, Config{}, rt)
		c, _ := ts.dial(t, Config{})
		ctx, cancel := context.WithCancel(context.Background())
		errc := make(chan error, 1)
		go func() { errc <- c.Call(ctx, "wait", nil, nil) }()
		recvOrTimeout(t, started, 5*time.Second, "handler start")
		cancel()
		recvOrTimeout(t, errc, 5*time.Second, "call return")
		_ = c.Close()
		if cause := recvOrTimeout(t, causes, 5*time.Second, "handler end"); !errors.Is(cause, ErrCancelledByPeer) {
			t.Errorf("handler's cause: %v, want ErrCancelledByPeer", cause)
		}
	}
}

func TestRPCCancelByIDAnswersCancelled(t *testing.T) {
	started, ended := make(chan string, 4), make(chan string, 4)
	ts := newTestServer(t, pipeTransport, Config{}, blockingRouter(started, ended))
	rc := rawDial(t, ts, true)
	rc.send(typeRPC, 0, []byte(`{"jsonrpc":"2.0","id":"x","method":"wait","params":{"name":"w"}}`))
	rc.send(typeRPC, 0, []byte(`{"jsonrpc":"2.0","id":"y","method":"mapped"}`))
	recvOrTimeout(t, started, 5*time.Second, "handler start")
	recvOrTimeout(t, started, 5*time.Second, "handler start")
	rc.send(typeRPC, 0, []byte(`{"jsonrpc":"2.0","id":"c","method":"rpc.cancel","params":{"id":"x"}}`))
	rc.send(typeRPC, 0, []byte(`{"jsonrpc":"2.0","id":"d","method":"rpc.cancel","params":{"id":"y"}}`))
	got := map[string]string{}
	for range 4 {
		_, p := rc.recvType(typeRPC)
		var m rpcMsg
		_ = json.Unmarshal(p, &m)
		got[string(m.ID)] = string(p)
	}
	want := map[string]string{
		`"c"`: `{"jsonrpc":"2.0","id":"c","result":{}}`,
		`"x"`: `{"jsonrpc":"2.0","id":"x","error":{"code":13,"message":"cancelled by rpc.cancel","data":{"reason":"cancelled"}}}`,
		`"d"`: `{"jsonrpc":"2.0","id":"d","result":{}}`,
		`"y"`: `{"jsonrpc":"2.0","id":"y","error":{"code":13,"message":"cancelled by rpc.cancel","data":{"reason":"cancelled"}}}`,
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("response %s:\n got %s\nwant %s", k, got[k], v)
		}
	}
}

func TestCloseAbandonsPendingRequestsAndLeaksNothing(t *testing.T) {
	before := runtime.NumGoroutine()
	started, ended := make(chan string, 4), make(chan string, 4)
	ts := newTestServer(t, tcpTransport, Config{}, blockingRouter(started, ended))
	c, s := ts.dial(t, Config{})
	errc := make(chan error, 1)
	go func() { errc <- c.Call(context.Background(), "wait", map[string]string{"name": "w"}, nil) }()
	recvOrTimeout(t, started, 5*time.Second, "handler start")
	ch, _, err := c.Open(ctx5(t), "nokind", 0, nil)
	if err == nil {
		_ = ch.Close()
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := recvOrTimeout(t, errc, 5*time.Second, "call return"); err == nil {
		t.Fatal("call succeeded on a closed connection")
	}
	recvOrTimeout(t, s.Done(), 5*time.Second, "server conn end")
	recvOrTimeout(t, ended, 5*time.Second, "handler end")
	_ = s.Close()
	ts.close()
	waitGoroutines(t, before)
}

func TestGoAwayOnShutdown(t *testing.T) {
	before := runtime.NumGoroutine()
	ts := newTestServer(t, tcpTransport, Config{}, echoRouter())
	c, s := ts.dial(t, Config{})
	ch, _, err := c.Open(ctx5(t), "process", 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	readErr := make(chan error, 1)
	go func() {
		_, err := ch.Read(make([]byte, 8))
		readErr <- err
	}()
	s.GoAway(CodeInternal, "shutting down")
	recvOrTimeout(t, c.Done(), 5*time.Second, "client conn end")
	var e *Error
	if err := c.Err(); !errors.As(err, &e) || e.Message != "shutting down" || !errors.Is(err, ErrGoAway) {
		t.Fatalf("client error %v, want the GOAWAY, as ErrGoAway", err)
	}
	if err := recvOrTimeout(t, readErr, 5*time.Second, "blocked read"); err == nil {
		t.Fatal("blocked Read returned no error")
	}
	if _, err := ch.Write([]byte("x")); err == nil {
		t.Fatal("Write after GOAWAY succeeded")
	}
	_ = c.Close()
	ts.close()
	waitGoroutines(t, before)
}

func TestUnansweredPingsDropThePeer(t *testing.T) {
	cfg := Config{PingInterval: 50 * time.Millisecond}
	ts := newTestServer(t, tcpTransport, cfg, echoRouter()) // TCP buffers the ping: only the pong is missing
	rc := rawDial(t, ts, true)                              // the raw client never reads: no pongs
	s := recvOrTimeout(t, ts.conns, 5*time.Second, "server conn")
	recvOrTimeout(t, s.Done(), 5*time.Second, "drop")
	if err := s.Err(); !errors.Is(err, ErrPingTimeout) {
		t.Fatalf("server ended with %v, want ErrPingTimeout", err)
	}
	_ = rc
}

func TestNotifyReachesClient(t *testing.T) {
	ts := newTestServer(t, pipeTransport, Config{}, echoRouter())
	c, s := ts.dial(t, Config{})
	got := make(chan string, 1)
	c.OnNotify(func(method string, params json.RawMessage) { got <- method + " " + string(params) })
	if err := s.Notify("process.exited", map[string]any{"id": "p1"}); err != nil {
		t.Fatal(err)
	}
	if g := recvOrTimeout(t, got, 5*time.Second, "notification"); g != `process.exited {"id":"p1"}` {
		t.Fatalf("got %s", g)
	}
}

// A client that sends requests with large answers and does not read its
// socket keeps their handlers waiting in ReserveAnswer: the answers in
// the daemon's memory stay within the budget, and every one arrives once
// the client reads.
func TestLargeAnswersWaitForBudget(t *testing.T) {
	const answer = 512 << 10
	var reserved atomic.Int32
	rt := NewRouter()
	rt.HandleLong("big", nil, func(ctx context.Context, c *Conn, p json.RawMessage) (any, error) {
		if err := c.ReserveAnswer(ctx, answer); err != nil {
			return nil, err
		}
		reserved.Add(1)
		return strings.Repeat("x", answer), nil
	})
	cfg := Config{ConnBudget: 4 << 20, MaxRPCResponse: 1 << 20}
	ts := newTestServer(t, pipeTransport, cfg, rt)
	rc := rawDial(t, ts, true)
	const n = 40
	for i := range n {
		rc.send(typeRPC, 0, []byte(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"big"}`, i)))
	}
	// Nothing is read: wait until the count stops moving (bounded).
	last, still := int32(-1), 0
	for range 200 {
		if got := reserved.Load(); got != last {
			last, still = got, 0
		} else if still++; still >= 20 {
			break
		}
		time.Sleep(10 * time.Millisecond) // sampling a counter, not synchronizing
	}
	// The budget's 4 MiB of queued and held answers, one being written,
	// and one that went ahead of an empty queue.
	if max := int32(4<<20/answer + 2); last > max {
		t.Fatalf("%d answers of %d bytes made while the client did not read; want at most %d", last, answer, max)
	}
	got := map[string]bool{}
	for len(got) < n {
		_, p := rc.recvType(typeRPC)
		var m rpcMsg
		if err := json.Unmarshal(p, &m); err != nil {
			t.Fatal(err)
		}
		got[string(m.ID)] = true
	}
}
