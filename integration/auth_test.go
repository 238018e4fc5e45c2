package integration

import (
	"context"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/muxd/muxd/client"
)

func TestAuthOriginAndProxyShapedRequests(t *testing.T) {
	d := startDaemon(t, []string{"MUXD_TOKEN=tok-123"})
	get := func(path string, h map[string]string) int {
		req, _ := http.NewRequest("GET", d.URL+path, nil)
		for k, v := range h {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		return resp.StatusCode
	}
	tests := []struct {
		path string
		h    map[string]string
		want int
	}{
		{"/healthz", nil, 200},
		{"/", nil, 200},
		{"/auth", nil, 401},
		{"/auth", map[string]string{"Authorization": "Bearer tok-123"}, 200},
		{"/ws", nil, 401},
		{"/ws?token=nope", nil, 401},
		{"/ws/terminal", map[string]string{"Origin": "https://browser.example"}, 401},
	}
	for _, tt := range tests {
		if got := get(tt.path, tt.h); got != tt.want {
			t.Errorf("GET %s %v: got %d, want %d", tt.path, tt.h, got, tt.want)
		}
	}
	if strings.Contains(d.Logs(), "tok-123") {
		t.Error("the token appears in the daemon's log")
	}

	// The Durable Object proxy: the browser's Origin plus a bearer token,
	// no query token, on /ws/terminal.
	ctx := ctxT(t, 10*time.Second)
	h := http.Header{"Origin": {"https://browser.example"}, "Authorization": {"Bearer tok-123"}}
	ws, _, err := websocket.Dial(ctx, strings.Replace(d.URL, "http", "ws", 1)+"/ws/terminal?id=proxied&cols=80&rows=24", &websocket.DialOptions{HTTPHeader: h})
	if err != nil {
		t.Fatalf("proxy-shaped /ws/terminal: %v\n%s", err, d.Logs())
	}
	waitReady(t, ctx, ws)
	_ = ws.Close(websocket.StatusNormalClosure, "")

	// The Go client with the same shape on /ws.
	c := d.dial(t, client.Options{Header: http.Header{"Origin": {"https://browser.example"}}})
	if _, err := c.ServerInfo(ctx); err != nil {
		t.Fatal(err)
	}
	// Query token (browsers cannot set headers on WebSockets).
	ws2, _, err := websocket.Dial(ctx, strings.Replace(d.URL, "http", "ws", 1)+"/ws?token=tok-123", &websocket.DialOptions{Subprotocols: []string{"wsmux.v1"}})
	if err != nil {
		t.Fatalf("?token= on /ws: %v", err)
	}
	_ = ws2.CloseNow()
}

// waitReady reads /ws/terminal messages until the ready text frame.
func waitReady(t *testing.T, ctx context.Context, ws *websocket.Conn) {
	t.Helper()
	for i := 0; i < 1000; i++ {
		typ, msg, err := ws.Read(ctx)
		if err != nil {
			t.Fatalf("waiting for ready: %v", err)
		}
		if typ == websocket.MessageText && strings.Contains(string(msg), `"ready"`) {
			return
		}
	}
	t.Fatal("no ready frame")
}

func TestNonLoopbackBindNeedsTokenOrInsecureFlag(t *testing.T) {
	out, err := exec.Command(muxdBin, "serve", "--listen", "0.0.0.0:0", "--data-dir", t.TempDir()).CombinedOutput()
	if err == nil {
		t.Fatal("muxd serve on 0.0.0.0 without a token started")
	}
	if !strings.Contains(string(out), "MUXD_TOKEN") || !strings.Contains(string(out), "--insecure-no-auth") {
		t.Errorf("refusal does not say what to do: %s", out)
	}
}

func TestServeHelpShowsDefaultsAndEnvTwins(t *testing.T) {
	out, err := exec.Command(muxdBin, "serve", "--help").CombinedOutput()
	if err != nil {
		t.Fatalf("serve --help: %v", err)
	}
	for _, want := range []string{"--listen", "MUXD_LISTEN", "127.0.0.1:3000", "--token-file", "--allowed-origins",
		"--insecure-no-auth", "--data-dir", "--shell", "--log-format", "--max-connections", "--max-channels",
		"--conn-buffer", "--max-sessions", "--max-terminals", "--max-processes", "--output-limit", "--retain-bytes",
		"--max-rpc-request", "--max-rpc-response"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("serve --help lacks %q", want)
		}
	}
	// Help asked for is the output, on stdout (muxd exec --help | less).
	for _, sub := range []string{"exec", "ps", "logs", "kill", "attach", "health", "start", "serve"} {
		if out, err := exec.Command(muxdBin, sub, "--help").Output(); err != nil || !strings.Contains(string(out), "Usage: muxd "+sub) {
			t.Errorf("muxd %s --help: %v %s", sub, err, out)
		}
	}
	if out, err := exec.Command(muxdBin, "help", "logs").Output(); err != nil || !strings.Contains(string(out), "Usage: muxd logs") {
		t.Errorf("muxd help logs: %v %s", err, out)
	}
}

func TestHealthCommand(t *testing.T) {
	d := startDaemon(t, nil)
	if out, err := exec.Command(muxdBin, "health", "--url", d.URL).CombinedOutput(); err != nil {
		t.Fatalf("muxd health: %v %s", err, out)
	}
	// A token given to a daemon that takes none is not "accepted".
	cmd := exec.Command(muxdBin, "health", "--url", d.URL)
	cmd.Env = append(os.Environ(), "MUXD_TOKEN=any")
	if out, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(out), "takes no token") {
		t.Errorf("muxd health with a token, against a daemon without one: %v %q", err, out)
	}
	if err := exec.Command(muxdBin, "health", "--url", "http://127.0.0.1:1", "--timeout", "2s").Run(); err == nil {
		t.Fatal("muxd health succeeded against nothing")
	}
	// With a token, health also checks that the daemon takes it; without
	// one (the Docker HEALTHCHECK), it checks liveness only.
	dt := startDaemon(t, []string{"MUXD_TOKEN=good-token"})
	for _, tc := range []struct {
		token, want string
		ok          bool
	}{
		{"", "ok", true},
		{"good-token", "ok (token accepted)", true},
		{"bad-token", "refused the token", false},
	} {
		cmd := exec.Command(muxdBin, "health", "--url", dt.URL)
		cmd.Env = append(os.Environ(), "MUXD_TOKEN="+tc.token)
		out, err := cmd.CombinedOutput()
		if (err == nil) != tc.ok || !strings.Contains(string(out), tc.want) {
			t.Errorf("muxd health with token %q: %v %q, want ok=%v and %q", tc.token, err, out, tc.ok, tc.want)
		}
	}
}

func TestInsecureNoAuthBehindProxyChecksOrigin(t *testing.T) {
	d := startDaemon(t, nil, "--insecure-no-auth", "--allowed-origins", "https://browser.example")
	ctx := ctxT(t, 10*time.Second)
	base := strings.Replace(d.URL, "http", "ws", 1) + "/ws/terminal?id=p1"
	ws, _, err := websocket.Dial(ctx, base, &websocket.DialOptions{HTTPHeader: http.Header{"Origin": {"https://browser.example"}}})
	if err != nil {
		t.Fatalf("allowed origin refused: %v", err)
	}
	waitReady(t, ctx, ws)
	_ = ws.Close(websocket.StatusNormalClosure, "")
	_, resp, err := websocket.Dial(ctx, base, &websocket.DialOptions{HTTPHeader: http.Header{"Origin": {"https://evil.example"}}})
	if err == nil || resp == nil || resp.StatusCode != http.StatusForbidden {
		t.Fatalf("foreign origin: %v %v, want 403", err, resp)
	}
	if !strings.Contains(d.Logs(), "insecure-no-auth") {
		t.Error("no warning logged for --insecure-no-auth")
	}
}
