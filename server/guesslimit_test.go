package server

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"
)

// fakeClock is a settable time for guessLimiter.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time { return c.t }

func tokenRequest(remote, token string) *http.Request {
	r := httptest.NewRequest("GET", "http://daemon:3000/ws", nil)
	r.RemoteAddr = remote
	if token != "" {
		r.Header.Set("Authorization", "Bearer "+token)
	}
	return r
}

func TestWrongTokensAreLimitedPerSource(t *testing.T) {
	clock := &fakeClock{t: time.Unix(1e9, 0)}
	var limited []string
	g := newGuessLimiter(func(source string, _ time.Duration) { limited = append(limited, source) })
	g.now = clock.now
	a := newAuthorizer("s3cret", nil, g)
	const guesser = "192.0.2.7:5000"
	for i := range guessBurst {
		if err := a.authorize(tokenRequest(guesser, fmt.Sprint("guess", i))); !errors.Is(err, ErrUnauthorized) {
			t.Fatalf("wrong token %d: %v, want ErrUnauthorized", i, err)
		}
	}
	// One more wrong one goes over: from then on the source's tokens are
	// not compared, the right one included.
	if err := a.authorize(tokenRequest(guesser, "one more")); !errors.Is(err, ErrUnauthorized) {
		t.Fatalf("the wrong token past the burst: %v, want ErrUnauthorized", err)
	}
	for _, tok := range []string{"s3cret", "another"} {
		err := a.authorize(tokenRequest(guesser, tok))
		var ge *guessError
		if !errors.Is(err, ErrTooManyGuesses) || !errors.As(err, &ge) || ge.seconds() != 1 {
			t.Fatalf("token %q from a source over the limit: %v, want ErrTooManyGuesses, retry in 1 s", tok, err)
		}
	}
	if len(limited) != 1 || limited[0] != "192.0.2.7" {
		t.Fatalf("onLimit calls: %q, want one for 192.0.2.7", limited)
	}
	// No token guesses nothing: a plain 401. Other sources are not held.
	if err := a.authorize(tokenRequest(guesser, "")); !errors.Is(err, ErrUnauthorized) {
		t.Fatalf("no token from the limited source: %v, want ErrUnauthorized", err)
	}
	if err := a.authorize(tokenRequest("192.0.2.8:5000", "s3cret")); err != nil {
		t.Fatalf("the right token from another source: %v", err)
	}
	// A second later one guess is paid for again.
	clock.t = clock.t.Add(guessEvery)
	if err := a.authorize(tokenRequest(guesser, "s3cret")); err != nil {
		t.Fatalf("the right token once the wait is over: %v", err)
	}
	if err := a.authorize(tokenRequest(guesser, "wrong again")); !errors.Is(err, ErrUnauthorized) {
		t.Fatalf("a wrong token once the wait is over: %v", err)
	}
	if err := a.authorize(tokenRequest(guesser, "s3cret")); !errors.Is(err, ErrTooManyGuesses) {
		t.Fatalf("after it: %v, want ErrTooManyGuesses", err)
	}
	// Quiet for the whole burst: forgotten.
	clock.t = clock.t.Add(guessBurst*guessEvery + guessEvery)
	g.mu.Lock()
	g.sweepLocked(clock.t)
	n := len(g.paid)
	g.mu.Unlock()
	if n != 0 {
		t.Fatalf("%d sources kept after a quiet burst's time, want 0", n)
	}
}

func TestGuessSourceGroupsAnIPv6Slash64(t *testing.T) {
	for _, tt := range []struct{ remote, want string }{
		{"192.0.2.7:1", "192.0.2.7"},
		{"[::ffff:192.0.2.7]:1", "192.0.2.7"},
		{"[2001:db8:1:2:aaaa::1]:1", "2001:db8:1:2::/64"},
		{"[2001:db8:1:2:bbbb::9]:1", "2001:db8:1:2::/64"},
		{"[2001:db8:1:3::1]:1", "2001:db8:1:3::/64"},
		{"not an address", "not an address"},
	} {
		if got := guessSource(tokenRequest(tt.remote, "")); got != tt.want {
			t.Errorf("guessSource(%s) = %q, want %q", tt.remote, got, tt.want)
		}
	}
}

// With the table full of sources that guessed recently, a new source's
// token is compared and not counted: refusing it let one host with many
// addresses lock every new client out.
func TestGuessTableFullComparesNewSources(t *testing.T) {
	clock := &fakeClock{t: time.Unix(1e9, 0)}
	g := newGuessLimiter(nil)
	g.now = clock.now
	a := newAuthorizer("s3cret", nil, g)
	for i := range maxGuessSources {
		g.wrong("10.0." + strconv.Itoa(i/256) + "." + strconv.Itoa(i%256))
	}
	if err := a.authorize(tokenRequest("192.0.2.1:1", "s3cret")); err != nil {
		t.Fatalf("the right token from a new source with the table full: %v", err)
	}
	if err := a.authorize(tokenRequest("192.0.2.1:1", "wrong")); !errors.Is(err, ErrUnauthorized) {
		t.Fatalf("a wrong token from a new source with the table full: %v, want ErrUnauthorized", err)
	}
	g.mu.Lock()
	n := len(g.paid)
	g.mu.Unlock()
	if n != maxGuessSources {
		t.Fatalf("%d sources kept, want the bound %d", n, maxGuessSources)
	}
	clock.t = clock.t.Add(guessEvery)
	a.authorize(tokenRequest("192.0.2.1:1", "wrong"))
	g.mu.Lock()
	_, counted := g.paid["192.0.2.1"]
	g.mu.Unlock()
	if !counted {
		t.Fatal("once the others were paid up, the new source was not counted")
	}
}

// Over real sockets: /auth, /ws and /ws/terminal answer 429 with
// Retry-After to a source past the limit, even with the right token,
// while another loopback address still gets in.
func TestWrongTokensGet429OverHTTP(t *testing.T) {
	_, url := testServer(t, func(c *Config) { c.Token = "right-token-of-some-length" })
	get := func(from, path, token string) *http.Response {
		t.Helper()
		d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: 5 * time.Second}
		hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
			DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
				return d.DialContext(ctx, network, addr)
			},
		}}
		defer hc.CloseIdleConnections()
		req, err := http.NewRequest("GET", url+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatalf("GET %s from %s: %v", path, from, err)
		}
		_ = resp.Body.Close()
		return resp
	}
	for i := range guessBurst + 1 {
		if resp := get("127.0.0.1", "/auth", fmt.Sprint("wrong", i)); resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("wrong token %d: %s, want 401", i, resp.Status)
		}
	}
	for _, path := range []string{"/auth", "/ws", "/ws/terminal"} {
		resp := get("127.0.0.1", path, "right-token-of-some-length")
		if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" {
			t.Fatalf("%s with the right token past the limit: %s, Retry-After %q; want 429 with it",
				path, resp.Status, resp.Header.Get("Retry-After"))
		}
	}
	if resp := get("127.0.0.2", "/auth", "right-token-of-some-length"); resp.StatusCode != http.StatusOK {
		t.Fatalf("the right token from 127.0.0.2: %s, want 200", resp.Status)
	}
}
