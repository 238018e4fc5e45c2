package integration

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/muxd/muxd/client"
)

// readUntil reads r until want appears; it fails after d.
func readUntil(t testing.TB, r io.Reader, want string, d time.Duration) string {
	t.Helper()
	got := make(chan string, 1)
	var mu sync.Mutex
	var buf bytes.Buffer // what was read so far, for the failure message
	go func() {
		p := make([]byte, 32<<10)
		for {
			n, err := r.Read(p)
			mu.Lock()
			buf.Write(p[:n])
			s := buf.String()
			mu.Unlock()
			if strings.Contains(s, want) || err != nil {
				got <- s
				return
			}
		}
	}()
	select {
	case s := <-got:
		if !strings.Contains(s, want) {
			t.Fatalf("output ended without %q: %q", want, tail(s))
		}
		return s
	case <-time.After(d):
		mu.Lock()
		defer mu.Unlock()
		t.Fatalf("no %q within %v; read so far: %q", want, d, tail(buf.String()))
		return ""
	}
}

func tail(s string) string {
	if len(s) > 300 {
		return "…" + s[len(s)-300:]
	}
	return s
}

func TestTerminalResumesAfterDroppedSocketWithoutDuplicates(t *testing.T) {
	d := startDaemon(t, []string{"MUXD_TEST_HOOKS=1"})
	c := d.dial(t, client.Options{})
	ctx := ctxT(t, 30*time.Second)
	term, err := c.CreateTerminal(ctx, client.TerminalOptions{ID: "resume", Shell: "bash"})
	if err != nil {
		t.Fatal(err)
	}
	// Print numbered lines, drop the socket mid-stream, and check every
	// line arrives exactly once.
	if _, err := term.Write([]byte("stty -echo; for i in $(seq 1 3000); do echo line-$i; done; echo DONE-$((1+1))\n")); err != nil {
		t.Fatal(err)
	}
	seen := readUntil(t, term, "line-50", 10*time.Second)
	resp, err := http.Post(d.URL+"/_test/drop", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	seen += readUntil(t, term, "DONE-2", 20*time.Second)
	for i := 1; i <= 3000; i++ {
		if n := strings.Count(seen, fmt.Sprintf("line-%d\r\n", i)); n != 1 {
			t.Fatalf("line-%d seen %d times across the reconnect", i, n)
		}
	}
	// A fresh attachment replays the same history.
	term2, err := c.AttachTerminal(ctx, "resume", client.AttachOptions{})
	if err != nil {
		t.Fatal(err)
	}
	all := readUntil(t, term2, "DONE-2", 10*time.Second)
	if n := strings.Count(all, "line-1500\r\n"); n != 1 {
		t.Errorf("line-1500 seen %d times in the replay", n)
	}
	_ = term2.Close()
	_ = term.Destroy(ctx)
}

func TestManyTerminalsAndSocketsAtOnce(t *testing.T) {
	terminals, sockets := 50, 50
	if testing.Short() {
		terminals, sockets = 10, 10
	}
	if longRun() {
		terminals, sockets = 200, 200
	}
	d := startDaemon(t, nil, "--max-terminals", "256", "--max-connections", "512")
	ctx := ctxT(t, 120*time.Second)
	conns := make([]*client.Client, sockets)
	for i := range conns {
		conns[i] = d.dial(t, client.Options{NoReconnect: true})
	}
	var wg sync.WaitGroup
	errs := make(chan error, terminals)
	for i := 0; i < terminals; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := conns[i%len(conns)]
			term, err := c.CreateTerminal(ctx, client.TerminalOptions{ID: fmt.Sprintf("m%d", i), Shell: "bash"})
			if err != nil {
				errs <- err
				return
			}
			if _, err := fmt.Fprintf(term, "echo ok-%d-$((40+2))\n", i); err != nil {
				errs <- err
				return
			}
			done := make(chan struct{})
			go func() {
				defer close(done)
				var buf bytes.Buffer
				p := make([]byte, 4096)
				want := fmt.Sprintf("ok-%d-42", i)
				for !strings.Contains(buf.String(), want) {
					n, err := term.Read(p)
					buf.Write(p[:n])
					if err != nil {
						errs <- fmt.Errorf("terminal %d: %v", i, err)
						return
					}
				}
			}()
			select {
			case <-done:
			case <-ctx.Done():
				errs <- fmt.Errorf("terminal %d: no echo", i)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	list, err := conns[0].ListTerminals(ctx)
	if err != nil || len(list) != terminals {
		t.Fatalf("terminal.list: %d terminals, %v; want %d", len(list), err, terminals)
	}
	for _, c := range conns {
		if _, err := c.ServerInfo(ctx); err != nil {
			t.Fatalf("a socket stopped answering: %v", err)
		}
	}
}

func longRun() bool { return strings.TrimSpace(getenv("MUXD_TEST_LONG")) == "1" }

func TestHundredSessionsAtOnce(t *testing.T) {
	n := 100 // past maxRpcInflight (32): the client must absorb busy
	if testing.Short() {
		n = 25
	}
	d := startDaemon(t, nil, "--max-sessions", "128")
	c := d.dial(t, client.Options{})
	ctx := ctxT(t, 3*time.Minute)
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := c.CreateSession(ctx, client.SessionOptions{ID: fmt.Sprintf("s%d", i)})
			if err != nil {
				errs <- err
				return
			}
			if _, err := s.Exec(ctx, fmt.Sprintf("X=%d", i), client.ExecOptions{}); err != nil {
				errs <- err
				return
			}
			r, err := s.Exec(ctx, "echo $X", client.ExecOptions{})
			if err != nil || string(r.Stdout) != fmt.Sprintf("%d\n", i) {
				errs <- fmt.Errorf("session %d: %+v %v", i, r, err)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if l, err := c.ListSessions(ctx); err != nil || len(l) != n {
		t.Fatalf("session.list: %d sessions, %v", len(l), err)
	}
}
