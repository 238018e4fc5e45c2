package mux

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// rawClient is a hand-driven wsmux/1 client for protocol tests.
type rawClient struct {
	t  testing.TB
	ws *websocket.Conn
}

func rawDial(t testing.TB, ts *testServer, hello bool) *rawClient {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ws, _, err := websocket.Dial(ctx, ts.url, &websocket.DialOptions{HTTPClient: ts.client, Subprotocols: []string{Subprotocol}})
	if err != nil {
		t.Fatalf("raw dial: %v", err)
	}
	ws.SetReadLimit(8 << 20)
	rc := &rawClient{t: t, ws: ws}
	t.Cleanup(func() { _ = ws.CloseNow() })
	if hello {
		rc.send(typeHello, 0, []byte(`{"v":1,"client":"raw"}`))
		if h, _ := rc.recv(); h.Type() != typeHello {
			t.Fatalf("first server frame %v, want HELLO", h)
		}
	}
	return rc
}

func (rc *rawClient) sendRaw(msg []byte) {
	rc.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := rc.ws.Write(ctx, websocket.MessageBinary, msg); err != nil {
		rc.t.Fatalf("raw write: %v", err)
	}
}

func (rc *rawClient) send(ft frameType, ch uint32, p []byte) {
	rc.t.Helper()
	rc.sendRaw(appendFrame(nil, ft, ch, p))
}

// recv reads the next frame, failing on error.
func (rc *rawClient) recv() (header, []byte) {
	rc.t.Helper()
	h, p, err := rc.tryRecv()
	if err != nil {
		rc.t.Fatalf("raw read: %v", err)
	}
	return h, p
}

func (rc *rawClient) tryRecv() (header, []byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, msg, err := rc.ws.Read(ctx)
	if err != nil {
		return header{}, nil, err
	}
	h, p, err := decodeFrame(msg)
	return h, p, err
}

// recvType skips frames until one of type ft.
func (rc *rawClient) recvType(ft frameType) (header, []byte) {
	rc.t.Helper()
	for range 10000 {
		h, p := rc.recv()
		if h.Type() == ft {
			return h, p
		}
	}
	rc.t.Fatalf("no %v frame", ft)
	return header{}, nil
}

// closeStatus reads until the socket closes and returns the status.
func (rc *rawClient) closeStatus() websocket.StatusCode {
	rc.t.Helper()
	for range 10000 {
		_, _, err := rc.tryRecv()
		if err != nil {
			return websocket.CloseStatus(err)
		}
	}
	rc.t.Fatal("socket did not close")
	return 0
}

func (rc *rawClient) open(id uint32, kind string, window int) {
	rc.t.Helper()
	p, _ := json.Marshal(map[string]any{"kind": kind, "window": window})
	rc.send(typeOpen, id, p)
	h, _ := rc.recvType(typeOpenOK)
	if h.Channel() != id {
		rc.t.Fatalf("OPEN_OK for %d, want %d", h.Channel(), id)
	}
}

func windowPayload(n uint32) []byte { return binary.BigEndian.AppendUint32(nil, n) }

func TestProtocolViolationsClose4000(t *testing.T) {
	cases := []struct {
		name   string
		hello  bool
		send   func(rc *rawClient)
		status websocket.StatusCode
	}{
		{"first frame not HELLO", false, func(rc *rawClient) { rc.send(typeRPC, 0, []byte(`{}`)) }, 4000},
		{"unsupported version", false, func(rc *rawClient) { rc.send(typeHello, 0, []byte(`{"v":2}`)) }, 4001},
		{"version 1.5", false, func(rc *rawClient) { rc.send(typeHello, 0, []byte(`{"v":1.5}`)) }, 4001},
		{"HELLO without v", false, func(rc *rawClient) { rc.send(typeHello, 0, []byte(`{"client":"x"}`)) }, 4000},
		{"HELLO with v a string", false, func(rc *rawClient) { rc.send(typeHello, 0, []byte(`{"v":"1"}`)) }, 4000},
		{"short frame", true, func(rc *rawClient) { rc.sendRaw([]byte{4, 0, 0}) }, 4000},
		{"nonzero flags", true, func(rc *rawClient) { rc.sendRaw([]byte{9, 1, 0, 0, 0, 0, '{', '}'}) }, 4000},
		{"unknown type", true, func(rc *rawClient) { rc.sendRaw([]byte{0x33, 0, 0, 0, 0, 0}) }, 4000},
		{"text message", true, func(rc *rawClient) {
			_ = rc.ws.Write(context.Background(), websocket.MessageText, []byte("hi"))
		}, 4000},
		{"DATA on channel 0", true, func(rc *rawClient) { rc.send(typeData, 0, []byte("x")) }, 4000},
		{"even OPEN id", true, func(rc *rawClient) { rc.send(typeOpen, 2, []byte(`{"kind":"process","window":4096}`)) }, 4000},
		{"OPEN id not increasing", true, func(rc *rawClient) {
			rc.open(5, "process", 4096)
			rc.send(typeOpen, 3, []byte(`{"kind":"process","window":4096}`))
		}, 4000},
		{"second HELLO", true, func(rc *rawClient) { rc.send(typeHello, 0, []byte(`{"v":1}`)) }, 4000},
		{"bad WINDOW", true, func(rc *rawClient) { rc.send(typeWindow, 1, []byte{0, 0, 0, 0}) }, 4000},
		{"oversized message", true, func(rc *rawClient) {
			rc.send(typeRPC, 0, make([]byte, 1<<20+1))
		}, 1009},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ts := newTestServer(t, tcpTransport, Config{}, echoRouter())
			rc := rawDial(t, ts, tc.hello)
			tc.send(rc)
			if got := rc.closeStatus(); got != tc.status {
				t.Fatalf("close status %d, want %d", got, tc.status)
			}
		})
	}
}

func TestChannelErrorsCloseOnlyThatChannel(t *testing.T) {
	cases := []struct {
		name   string
		send   func(rc *rawClient)
		reason string
	}{
		{"DATA over maxFrame", func(rc *rawClient) { rc.send(typeData, 1, make([]byte, 32<<10+1)) }, "frame_size"},
		{"DATA beyond credit", func(rc *rawClient) {
			rc.send(typeData, 1, make([]byte, 32<<10))
			rc.send(typeData, 1, make([]byte, 32<<10))
			rc.send(typeData, 1, make([]byte, 1))
		}, "flow_control"},
		{"DATA on a channel without input", func(rc *rawClient) { rc.send(typeData, 3, []byte("x")) }, "not_writable"},
		{"credit past 2^31-1", func(rc *rawClient) {
			rc.send(typeWindow, 1, windowPayload(maxWindow))
		}, "flow_control"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rt := echoRouter()
			rt.HandleOpen("sink", func(ctx context.Context, ch *Channel, p json.RawMessage) (any, error) {
				return nil, nil // never reads: credit never returns
			})
			rt.HandleOpen("readonly", func(ctx context.Context, ch *Channel, p json.RawMessage) (any, error) {
				ch.SetInputEnabled(false)
				return nil, nil
			})
			ts := newTestServer(t, tcpTransport, Config{}, rt)
			rc := rawDial(t, ts, true)
			rc.open(1, "sink", 4096)
			rc.open(3, "readonly", 4096)
			tc.send(rc)
			h, p := rc.recvType(typeClose)
			e, err := parseErrorPayload(p)
			if err != nil || e == nil || e.Reason != tc.reason {
				t.Fatalf("got CLOSE %v %s, want %s", h, p, tc.reason)
			}
			// The connection lives on.
			rc.send(typeRPC, 0, []byte(`{"jsonrpc":"2.0","id":7,"method":"echo","params":{"ok":true}}`))
			_, p = rc.recvType(typeRPC)
			if string(p) != `{"jsonrpc":"2.0","id":7,"result":{"ok":true}}` {
				t.Fatalf("echo after channel error: %s", p)
			}
		})
	}
}

func TestUnknownChannelFramesIgnored(t *testing.T) {
	ts := newTestServer(t, pipeTransport, Config{}, echoRouter())
	rc := rawDial(t, ts, true)
	rc.send(typeData, 99, []byte("x"))
	rc.send(typeWindow, 77, windowPayload(5))
	rc.send(typeEOF, 3, nil)
	rc.send(typeClose, 5, nil)
	rc.send(typeCtrl, 9, []byte(`{"op":"resize"}`))
	rc.send(typeRPC, 0, []byte(`{"jsonrpc":"2.0","id":"a","method":"echo","params":[1]}`))
	_, p := rc.recvType(typeRPC)
	if string(p) != `{"jsonrpc":"2.0","id":"a","result":[1]}` {
		t.Fatalf("got %s", p)
	}
}

func TestRPCParseErrors(t *testing.T) {
	cases := []struct{ in, want string }{
		{`{"jsonrpc":"2.0","id":1,`, `{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"invalid JSON","data":{"reason":"parse_error"}}}`},
		{`[1,2]`, `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"not a JSON-RPC object","data":{"reason":"invalid_request"}}}`},
		{`{"jsonrpc":"1.0","id":3,"method":"echo"}`, `{"jsonrpc":"2.0","id":3,"error":{"code":-32600,"message":"jsonrpc must be \"2.0\"","data":{"reason":"invalid_request"}}}`},
		{`{"jsonrpc":"2.0","id":4,"method":"nope"}`, `{"jsonrpc":"2.0","id":4,"error":{"code":-32601,"message":"method \"nope\" not found","data":{"reason":"method_not_found"}}}`},
		// An id of the wrong type is answered with id null, never dropped.
		{`{"jsonrpc":"2.0","id":{"a":1},"method":"echo"}`, `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"id must be a string, a number or null","data":{"reason":"invalid_request"}}}`},
		{`{"jsonrpc":"2.0","id":[1],"method":"echo"}`, `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"id must be a string, a number or null","data":{"reason":"invalid_request"}}}`},
		{`{"jsonrpc":"2.0","id":true,"method":"echo"}`, `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"id must be a string, a number or null","data":{"reason":"invalid_request"}}}`},
		// A readable id is kept when another member has the wrong type.
		{`{"jsonrpc":"2.0","id":9,"method":5}`, `{"jsonrpc":"2.0","id":9,"error":{"code":-32600,"message":"not a JSON-RPC object","data":{"reason":"invalid_request"}}}`},
	}
	ts := newTestServer(t, pipeTransport, Config{}, echoRouter())
	rc := rawDial(t, ts, true)
	for _, tc := range cases {
		rc.send(typeRPC, 0, []byte(tc.in))
		_, p := rc.recvType(typeRPC)
		if string(p) != tc.want {
			t.Errorf("%s:\n got %s\nwant %s", tc.in, p, tc.want)
		}
	}
}

// JSON's 1.0 is the number 1: some encoders write every number so.
func TestHelloVersionOnePointZero(t *testing.T) {
	ts := newTestServer(t, pipeTransport, Config{}, echoRouter())
	rc := rawDial(t, ts, false)
	rc.send(typeHello, 0, []byte(`{"v":1.0,"client":"x"}`))
	if h, p := rc.recv(); h.Type() != typeHello {
		t.Fatalf("got %v %s, want HELLO", h, p)
	}
}

func TestPingPong(t *testing.T) {
	ts := newTestServer(t, pipeTransport, Config{}, echoRouter())
	rc := rawDial(t, ts, true)
	rc.send(typePing, 0, []byte("12345678"))
	_, p := rc.recvType(typePong)
	if string(p) != "12345678" {
		t.Fatalf("PONG %q", p)
	}
}

func TestHandshakeRules(t *testing.T) {
	t.Run("no HELLO in time", func(t *testing.T) {
		ts := newTestServer(t, tcpTransport, Config{HandshakeTimeout: 100 * time.Millisecond}, echoRouter())
		rc := rawDial(t, ts, false)
		if _, _, err := rc.tryRecv(); err == nil {
			t.Fatal("got a frame before HELLO")
		}
	})
	t.Run("no subprotocol", func(t *testing.T) {
		ts := newTestServer(t, tcpTransport, Config{}, echoRouter())
		ws, _, err := websocket.Dial(ctx5(t), ts.url, &websocket.DialOptions{HTTPClient: ts.client})
		if err != nil {
			t.Fatal(err)
		}
		defer ws.CloseNow()
		_, _, err = ws.Read(ctx5(t))
		if got := websocket.CloseStatus(err); got != StatusProtocol {
			t.Fatalf("close status %d, want 4000", got)
		}
	})
}

func TestServerStopsReadingWhenAnswersPileUp(t *testing.T) {
	cfg := Config{ConnBudget: 160 << 10} // answers limit: 10 KiB
	ts := newTestServer(t, pipeTransport, cfg, echoRouter())
	rc := rawDial(t, ts, true)
	s := recvOrTimeout(t, ts.conns, 5*time.Second, "server conn")
	const n = 2000
	sent := make(chan int, 1)
	go func() {
		i := 0
		for ; i < n; i++ {
			msg := appendFrame(nil, typeRPC, 0, []byte(`{"jsonrpc":"2.0","id":1,"method":"nope"}`))
			if rc.ws.Write(context.Background(), websocket.MessageBinary, msg) != nil {
				break
			}
		}
		sent <- i
	}()
	limit := s.urgentLimit()
	deadline := time.Now().Add(5 * time.Second)
	var queued int64
	for time.Now().Before(deadline) {
		s.mu.Lock()
		queued = s.urgentBytes
		s.mu.Unlock()
		if queued > limit {
			break
		}
		time.Sleep(time.Millisecond) // polling a gauge, not synchronizing
	}
	if queued <= limit || queued > limit+512 {
		t.Fatalf("server queues %d bytes of answers, want just over %d", queued, limit)
	}
	select {
	case i := <-sent:
		t.Fatalf("all %d of %d requests were read by a server that should have stopped", i, n)
	default:
	}
	_ = rc.ws.CloseNow()
	recvOrTimeout(t, sent, 5*time.Second, "sender end")
	recvOrTimeout(t, s.Done(), 5*time.Second, "server end")
}

// OnAccept runs before the connection serves its first request, even one
// pipelined right behind HELLO.
func TestOnAcceptRunsBeforeTheFirstRequest(t *testing.T) {
	var registered sync.Map
	rt := NewRouter()
	rt.Handle("registered", func(ctx context.Context, c *Conn, p json.RawMessage) (any, error) {
		_, ok := registered.Load(c)
		return ok, nil
	})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := Accept(w, r, Config{}, rt, ServerInfo{Name: "test/1", Boot: "b", OnAccept: func(c *Conn) { registered.Store(c, true) }})
		if err == nil {
			<-c.Done()
		}
	}))
	defer srv.Close()
	ts := &testServer{url: "ws" + strings.TrimPrefix(srv.URL, "http") + "/ws", client: srv.Client()}
	for range 20 {
		rc := rawDial(t, ts, false)
		rc.send(typeHello, 0, []byte(`{"v":1}`))
		rc.send(typeRPC, 0, []byte(`{"jsonrpc":"2.0","id":1,"method":"registered"}`))
		if h, _ := rc.recv(); h.Type() != typeHello {
			t.Fatalf("first frame %v, want HELLO", h)
		}
		if _, p := rc.recvType(typeRPC); string(p) != `{"jsonrpc":"2.0","id":1,"result":true}` {
			t.Fatalf("got %s, want the connection registered before its first request", p)
		}
		_ = rc.ws.CloseNow()
	}
}

// A refused dial carries the server's own words, not only the status.
func TestDialErrorCarriesTheServersMessage(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "too many connections (limit 3, see --max-connections)", http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	_, err := Dial(ctx5(t), "ws"+strings.TrimPrefix(srv.URL, "http")+"/ws", DialOptions{HTTPClient: srv.Client()})
	if err == nil || !strings.Contains(err.Error(), "(HTTP 503: too many connections (limit 3, see --max-connections))") {
		t.Fatalf("dial: %v, want the server's message", err)
	}
}
