package mux

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// recvOrTimeout receives from ch or fails the test after d.
func recvOrTimeout[T any](t testing.TB, ch <-chan T, d time.Duration, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(d):
		t.Fatalf("timed out after %v waiting for %s", d, what)
		panic("unreachable")
	}
}

// pipeListener is an in-memory net.Listener: Dial hands one end of a
// net.Pipe to Accept.
type pipeListener struct {
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
}

func newPipeListener() *pipeListener {
	return &pipeListener{conns: make(chan net.Conn), done: make(chan struct{})}
}

func (l *pipeListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *pipeListener) Close() error { l.once.Do(func() { close(l.done) }); return nil }

func (l *pipeListener) Addr() net.Addr { return pipeAddr{} }

func (l *pipeListener) dial(ctx context.Context, _, _ string) (net.Conn, error) {
	a, b := net.Pipe()
	select {
	case l.conns <- a:
		return b, nil
	case <-l.done:
		return nil, net.ErrClosed
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

type pipeAddr struct{}

func (pipeAddr) Network() string { return "pipe" }
func (pipeAddr) String() string  { return "pipe" }

// transport names how a test connects: an in-memory pipe or TCP on
// 127.0.0.1.
type transport string

const (
	pipeTransport transport = "pipe"
	tcpTransport  transport = "tcp"
)

var transports = []transport{pipeTransport, tcpTransport}

// testServer is a mux server with its accepted connections.
type testServer struct {
	url    string
	client *http.Client
	conns  chan *Conn
	rt     *Router
	close  func()
}

// newTestServer serves rt over tr; each accepted Conn is sent on conns.
func newTestServer(t testing.TB, tr transport, cfg Config, rt *Router) *testServer {
	t.Helper()
	ts := &testServer{conns: make(chan *Conn, 16), rt: rt}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := Accept(w, r, cfg, rt, ServerInfo{Name: "test/1", Boot: "boot-1"})
		if err != nil {
			return
		}
		select {
		case ts.conns <- c:
		default:
		}
	})
	switch tr {
	case pipeTransport:
		l := newPipeListener()
		srv := &http.Server{Handler: h}
		go func() { _ = srv.Serve(l) }()
		ts.url = "ws://pipe/ws"
		ts.client = &http.Client{Transport: &http.Transport{DialContext: l.dial}}
		ts.close = func() { _ = srv.Close(); _ = l.Close() }
	default:
		srv := httptest.NewServer(h)
		ts.url = "ws" + strings.TrimPrefix(srv.URL, "http") + "/ws"
		ts.client = srv.Client()
		ts.close = srv.Close
	}
	t.Cleanup(ts.close)
	return ts
}

// dial connects a client and returns both ends.
func (ts *testServer) dial(t testing.TB, cfg Config) (client, server *Conn) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := Dial(ctx, ts.url, DialOptions{HTTPClient: ts.client, Client: "test/1", Config: cfg})
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	s := recvOrTimeout(t, ts.conns, 5*time.Second, "server conn")
	t.Cleanup(func() { _ = c.Close(); _ = s.Close() })
	return c, s
}

// echoRouter serves "echo" (returns params), "sleep" (long: waits for
// cancel), and channel kinds "terminal" and "process" that echo DATA.
func echoRouter() *Router {
	rt := NewRouter()
	rt.Handle("echo", func(ctx context.Context, c *Conn, p json.RawMessage) (any, error) {
		return p, nil
	})
	rt.Handle("fail", func(ctx context.Context, c *Conn, p json.RawMessage) (any, error) {
		return nil, ErrNotFound("no such thing")
	})
	block := func(ctx context.Context, c *Conn, p json.RawMessage) (any, error) {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	rt.Handle("block", block)
	rt.HandleLong("wait", nil, block)
	echo := func(ctx context.Context, ch *Channel, p json.RawMessage) (any, error) {
		go func() {
			buf := make([]byte, 64<<10)
			for {
				n, err := ch.Read(buf)
				if n > 0 {
					if _, werr := ch.Write(buf[:n]); werr != nil {
						return
					}
				}
				if err != nil {
					_ = ch.CloseWrite()
					return
				}
			}
		}()
		return map[string]string{"kind": ch.Kind()}, nil
	}
	rt.HandleOpen("terminal", echo)
	rt.HandleOpen("process", echo)
	return rt
}

// readAll reads ch until EOF or error, bounded by d.
func readN(t testing.TB, ch *Channel, n int, d time.Duration) []byte {
	t.Helper()
	type res struct {
		b   []byte
		err error
	}
	out := make(chan res, 1)
	go func() {
		buf := make([]byte, 0, n)
		tmp := make([]byte, 64<<10)
		for len(buf) < n {
			k, err := ch.Read(tmp[:min(len(tmp), n-len(buf))])
			buf = append(buf, tmp[:k]...)
			if err != nil {
				out <- res{buf, err}
				return
			}
		}
		out <- res{buf, nil}
	}()
	r := recvOrTimeout(t, out, d, "channel read")
	if r.err != nil {
		t.Fatalf("read %d of %d bytes: %v", len(r.b), n, r.err)
	}
	return r.b
}

func listenLoopback() (net.Listener, error) { return net.Listen("tcp", "127.0.0.1:0") }
