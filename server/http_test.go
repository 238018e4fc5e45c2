package server

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/muxd/muxd/client"
	"github.com/muxd/muxd/mux"
)

func TestOpenRoutesNeedNoTokenAndOthersDo(t *testing.T) {
	_, url := testServer(t, func(c *Config) { c.Token = "s3cret" })
	tests := []struct {
		path   string
		header map[string]string
		want   int
	}{
		{"/healthz", nil, http.StatusOK},
		{"/", nil, http.StatusOK},
		{"/auth", nil, http.StatusUnauthorized},
		{"/auth", map[string]string{"Authorization": "Bearer s3cret"}, http.StatusOK},
		{"/auth?token=s3cret", nil, http.StatusOK},
		{"/auth?token=wrong", nil, http.StatusUnauthorized},
		{"/ws", nil, http.StatusUnauthorized},
		{"/ws/terminal", nil, http.StatusUnauthorized},
		{"/ws/pty", nil, http.StatusUnauthorized},
		{"/ws/terminal/abc", nil, http.StatusUnauthorized},
		{"/ws", map[string]string{"Authorization": "Bearer wrong"}, http.StatusUnauthorized},
	}
	for _, tt := range tests {
		if got := httpGet(t, url+tt.path, tt.header); got != tt.want {
			t.Errorf("GET %s %v: got %d, want %d", tt.path, tt.header, got, tt.want)
		}
	}
}

func TestWebSocketAuthAndOrigin(t *testing.T) {
	tests := []struct {
		name    string
		token   string
		origins []string
		opts    client.Options
		ok      bool
	}{
		{"loopback without token", "", nil, client.Options{}, true},
		{"token required, bearer", "s3cret", nil, client.Options{Token: "s3cret"}, true},
		{"token required, missing", "s3cret", nil, client.Options{}, false},
		{"proxy: browser origin plus bearer", "s3cret", nil,
			client.Options{Token: "s3cret", Header: http.Header{"Origin": {"https://browser.example"}}}, true},
		{"foreign origin without token", "", nil,
			client.Options{Header: http.Header{"Origin": {"https://evil.example"}}}, false},
		{"allowed origin without token", "", []string{"https://app.example"},
			client.Options{Header: http.Header{"Origin": {"https://app.example"}}}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, url := testServer(t, func(c *Config) { c.Token, c.AllowedOrigins = tt.token, tt.origins })
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			tt.opts.NoReconnect = true
			c, err := client.Dial(ctx, url, tt.opts)
			if (err == nil) != tt.ok {
				t.Fatalf("Dial: got %v, want ok=%v", err, tt.ok)
			}
			if err != nil {
				return
			}
			defer c.Close()
			info, err := c.ServerInfo(ctx)
			if err != nil || info.Protocol != "wsmux/1" || info.Boot != c.Boot() {
				t.Fatalf("server.info: got %+v, %v", info, err)
			}
		})
	}
}

func TestShutdownSendsGoAwayAndEndsSockets(t *testing.T) {
	s, url := testServer(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, url, client.Options{NoReconnect: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	conn, err := c.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := s.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	recvOrTimeout(t, conn.Done(), 5*time.Second)
	var me *mux.Error
	if !errors.Is(conn.Err(), mux.ErrGoAway) && !(errors.As(conn.Err(), &me) && strings.Contains(me.Message, "shutting down")) {
		t.Errorf("connection ended with %v, want GOAWAY", conn.Err())
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("shutdown took %v, want < 5 s", d)
	}
}

func TestConnectionLimitRefusesClearly(t *testing.T) {
	_, url := testServer(t, func(c *Config) { c.MaxConnections = 1 })
	first := dialClient(t, url, client.Options{NoReconnect: true})
	_ = first
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := client.Dial(ctx, url, client.Options{NoReconnect: true})
	if err == nil || !strings.Contains(err.Error(), "503") {
		t.Fatalf("second Dial: got %v, want HTTP 503", err)
	}
}

// Connections that send nothing hold a slot each until ReadHeaderTimeout:
// past MaxConnections+tcpHeadroom open ones, a new connection is answered
// 503 at once, and a slot freed is usable again.
func TestOpenTCPConnectionsAreCapped(t *testing.T) {
	_, url := testServer(t, func(c *Config) { c.MaxConnections = 1 })
	addr := strings.TrimPrefix(url, "http://")
	idle := make([]net.Conn, 0, 1+tcpHeadroom)
	defer func() {
		for _, c := range idle {
			_ = c.Close()
		}
	}()
	for range 1 + tcpHeadroom {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		idle = append(idle, c)
	}
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	get := func() (int, string, error) {
		resp, err := hc.Get(url + "/healthz")
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), err
	}
	code, body, err := get()
	if err != nil || code != http.StatusServiceUnavailable || !strings.Contains(body, "--max-connections") {
		t.Fatalf("past the cap: got %d %q %v, want 503 naming --max-connections", code, body, err)
	}
	_ = idle[0].Close()
	deadline := time.Now().Add(5 * time.Second)
	for {
		code, _, err = get()
		if code == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after a slot was freed: got %d %v, want 200", code, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestTestHookDropCutsSocketsAndClientReconnects(t *testing.T) {
	_, url := testServer(t, func(c *Config) { c.TestHooks = true })
	reconnected := make(chan bool, 1)
	c := dialClient(t, url, client.Options{OnReconnect: func(boot string, restarted bool) { reconnected <- restarted }})
	resp, err := http.Post(url+"/_test/drop", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("drop: %s", resp.Status)
	}
	if restarted := recvOrTimeout(t, reconnected, 5*time.Second); restarted {
		t.Error("reconnect reported a restart; the daemon did not restart")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := c.ServerInfo(ctx); err != nil {
		t.Fatalf("after reconnect: %v", err)
	}
}

func TestTestHookAbsentByDefault(t *testing.T) {
	_, url := testServer(t, nil)
	resp, err := http.Post(url+"/_test/drop", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode == http.StatusOK {
		t.Fatal("/_test/drop answered without MUXD_TEST_HOOKS")
	}
}

// A socket tracked before its handshake finished is still ended with its
// GOAWAY once the handler sets it, not cut.
func TestShutdownWaitsForAHandshakeInFlight(t *testing.T) {
	k := &socket{kind: "ws", settled: make(chan struct{})}
	called := make(chan struct{})
	ended := make(chan struct{})
	go func() {
		k.end(true, 5*time.Second)
		close(ended)
	}()
	k.setGoAway(func(time.Duration) { close(called) })
	recvOrTimeout(t, called, 5*time.Second)
	recvOrTimeout(t, ended, 5*time.Second)

	// A handler that gave up (untracked without a goAway) releases end at once.
	s := &Server{sockets: map[*socket]struct{}{}}
	k2 := &socket{kind: "ws", settled: make(chan struct{})}
	s.track(k2)
	ended2 := make(chan struct{})
	start := time.Now()
	go func() {
		k2.end(true, 5*time.Second)
		close(ended2)
	}()
	s.untrack(k2)
	recvOrTimeout(t, ended2, 5*time.Second)
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("end waited %v for a socket whose handler gave up", d)
	}
}

// lockedBuffer is an io.Writer for a logger that tests read.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// A shutdown logs each process it kills and each session it ends, as
// any other end of them is logged.
func TestShutdownLogsWhatItEnds(t *testing.T) {
	var logs lockedBuffer
	s, url := testServer(t, func(c *Config) { c.Logger = slog.New(slog.NewTextHandler(&logs, nil)) })
	conn := rawConn(t, url, client.Options{NoReconnect: true})
	mustCall(t, conn, "process.start", obj{"command": "sleep 30", "id": "p1"})
	mustCall(t, conn, "session.create", obj{"id": "s1"})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	out := logs.String()
	for _, want := range []string{`msg="process exited" id=p1 `, `msg="session deleted" id=s1 reason=shutdown`} {
		if !strings.Contains(out, want) {
			t.Errorf("the log lacks %q:\n%s", want, out)
		}
	}
}
