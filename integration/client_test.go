package integration

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/muxd/muxd/client"
	"github.com/muxd/muxd/mux"
)

// The Go client across dropped sockets and a daemon out of reach: what
// a harness does with it mid-flight must finish, fail clearly or stop
// when asked, never hang or mix up commands.

// dropSockets cuts every socket of d (its test hook); the client redials.
func dropSockets(t *testing.T, d *daemon) {
	t.Helper()
	resp, err := http.Post(d.URL+"/_test/drop", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
}

// cutProxy forwards 127.0.0.1 TCP to the daemon until cut, which closes
// its listener and every connection: the daemon is out of reach.
type cutProxy struct {
	ln       net.Listener
	mu       sync.Mutex
	conns    []net.Conn
	wg       sync.WaitGroup
	muted    atomic.Bool // the daemon's bytes are dropped, not forwarded
	refusing atomic.Bool // new connections are closed at once
	// halfOpen: drop closes the client's side only, and the daemon's
	// side stays open and silent (a proxy or NAT that lost the path),
	// so the daemon does not notice the drop until its pings go unanswered.
	halfOpen atomic.Bool
	up       atomic.Int64 // bytes forwarded from clients to the daemon
	accepted atomic.Int64 // connections accepted
	target   atomic.Pointer[string]
}

func newCutProxy(t *testing.T, target string) *cutProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{ln: ln}
	p.target.Store(&target)
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			if p.refusing.Load() {
				_ = c.Close()
				continue
			}
			s, err := net.Dial("tcp", *p.target.Load())
			if err != nil {
				_ = c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, s) // the client's side at even indexes
			p.mu.Unlock()
			p.accepted.Add(1)
			p.wg.Add(2)
			go func() {
				defer p.wg.Done()
				_, _ = io.Copy(countingWriter{s, &p.up}, c)
				if !p.halfOpen.Load() {
					_ = s.Close()
				}
			}()
			go func() {
				defer p.wg.Done()
				buf := make([]byte, 32<<10)
				for {
					n, err := s.Read(buf)
					if n > 0 && !p.muted.Load() {
						if _, werr := c.Write(buf[:n]); werr != nil {
							break
						}
					}
					if err != nil {
						break
					}
				}
				_ = c.Close()
			}()
		}
	}()
	t.Cleanup(p.cut)
	return p
}

func (p *cutProxy) URL() string { return "http://" + p.ln.Addr().String() }

// drop closes every connection but keeps listening: clients reconnect.
// With halfOpen, the daemon's sides stay open (closed by cut).
func (p *cutProxy) drop() {
	p.mu.Lock()
	var kept []net.Conn
	for i, c := range p.conns {
		if i%2 == 1 && p.halfOpen.Load() {
			kept = append(kept, c)
			continue
		}
		_ = c.Close()
	}
	p.conns = kept
	p.mu.Unlock()
}

// countingWriter counts the bytes written through it in n.
type countingWriter struct {
	w io.Writer
	n *atomic.Int64
}

func (c countingWriter) Write(b []byte) (int, error) {
	k, err := c.w.Write(b)
	c.n.Add(int64(k))
	return k, err
}

func (p *cutProxy) cut() {
	_ = p.ln.Close()
	p.mu.Lock()
	for _, c := range p.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

// waitUntil polls cond every step until it holds, and fails the test
// with what if it does not within 10 s.
func waitUntil(t testing.TB, step time.Duration, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(step) {
		if time.Now().After(deadline) {
			t.Fatal(what)
		}
	}
}

// droppable starts a daemon whose sockets the test can drop
// (dropSockets), and a client of it, with a 30 s context.
func droppable(t *testing.T) (*daemon, *client.Client, context.Context) {
	d := startDaemon(t, []string{"MUXD_TEST_HOOKS=1"})
	return d, d.dial(t, client.Options{}), ctxT(t, 30*time.Second)
}

// behindProxy starts a daemon and a client that reaches it through a
// cutProxy (reconnecting every 50 ms at most while it is cut).
func behindProxy(t *testing.T) (*daemon, *cutProxy, *client.Client) {
	d := startDaemon(t, nil)
	proxy := newCutProxy(t, d.Addr)
	c, err := client.Dial(ctxT(t, 10*time.Second), proxy.URL(), client.Options{MaxBackoff: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return d, proxy, c
}

// within runs f and fails the test if it has not returned after d.
func within(t *testing.T, what string, d time.Duration, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { defer close(done); f() }()
	select {
	case <-done:
	case <-time.After(d):
		t.Fatalf("%s did not return within %v", what, d)
	}
}

// awaitBusy waits, up to a second, until the client's one session runs
// a command.
func awaitBusy(ctx context.Context, c *client.Client) {
	for range 200 {
		if l, _ := c.ListSessions(ctx); len(l) == 1 && l[0].Busy {
			return
		}
		time.Sleep(5 * time.Millisecond) // polling session.list: no busy event
	}
}

// wantClosed waits for a Read's result after Close: ErrClosed, soon.
func wantClosed(t *testing.T, readErr <-chan error) {
	t.Helper()
	select {
	case err := <-readErr:
		if !errors.Is(err, client.ErrClosed) {
			t.Errorf("Read after Close: %v, want ErrClosed", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Read still blocked 5 s after Close")
	}
}

func TestClientStdinAcrossADroppedSocket(t *testing.T) {
	d, c, ctx := droppable(t)

	t.Run("Close after a reconnect sends EOF", func(t *testing.T) {
		p, err := c.StartProcess(ctx, "cat; echo eof", client.ProcessOptions{Stdin: true})
		if err != nil {
			t.Fatal(err)
		}
		in := p.Stdin()
		if _, err := in.Write([]byte("hello\n")); err != nil {
			t.Fatal(err)
		}
		dropSockets(t, d)
		if err := in.Close(); err != nil {
			t.Fatalf("Close after the drop: %v", err)
		}
		info, err := p.Wait(ctx)
		if err != nil || info.Status != "exited" {
			t.Fatalf("Wait: %+v %v: cat never read EOF", info, err)
		}
		out, _, _, _ := p.Read(ctx, "stdout", 0, 100)
		if string(out) != "hello\neof\n" {
			t.Errorf("stdout %q", out)
		}
	})

	t.Run("Write counts every byte across the drop", func(t *testing.T) {
		p, err := c.StartProcess(ctx, "sleep 1; wc -c", client.ProcessOptions{Stdin: true})
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			time.Sleep(300 * time.Millisecond) // Write is blocked on credit by then
			dropSockets(t, d)
		}()
		buf := make([]byte, 4<<20)
		n, err := p.Stdin().Write(buf)
		if n != len(buf) || err != nil {
			t.Fatalf("Write = %d, %v; want %d, nil (io.Writer counts all of p)", n, err, len(buf))
		}
		_ = p.Stdin().Close()
		_, _ = p.Wait(ctx)
		if out, _, _, _ := p.Read(ctx, "stdout", 0, 100); strings.TrimSpace(string(out)) != "4194304" {
			t.Errorf("wc -c read %q bytes, want 4194304: each byte once", out)
		}
	})

	t.Run("every byte once across several drops", func(t *testing.T) {
		sha256AcrossDrops(t, ctx, c, 200, 50, func() { dropSockets(t, d) })
	})
}

// A socket cut on the way (the daemon reads a plain end of stream, FIN,
// no close handshake) is no EOF of the process's stdin: the writer comes
// back and goes on. The daemon took it for the client's EOF, and cat
// ended with the first line.
func TestClientStdinAcrossAProxyCut(t *testing.T) {
	_, proxy, c := behindProxy(t)
	ctx := ctxT(t, 30*time.Second)

	t.Run("lines", func(t *testing.T) {
		p, err := c.StartProcess(ctx, "cat", client.ProcessOptions{Stdin: true})
		if err != nil {
			t.Fatal(err)
		}
		in := p.Stdin()
		if _, err := in.Write([]byte("first\n")); err != nil {
			t.Fatal(err)
		}
		if _, err := p.WaitForLog(ctx, "first"); err != nil {
			t.Fatal(err)
		}
		proxy.drop()
		for _, line := range []string{"second\n", "third\n"} {
			if _, err := in.Write([]byte(line)); err != nil {
				t.Fatalf("Write %q after the cut: %v", line, err)
			}
		}
		if err := in.Close(); err != nil {
			t.Fatal(err)
		}
		if _, err := p.Wait(ctx); err != nil {
			t.Fatal(err)
		}
		if out, _, _, _ := p.Read(ctx, "stdout", 0, 100); string(out) != "first\nsecond\nthird\n" {
			t.Fatalf("cat printed %q across the cut", out)
		}
	})

	t.Run("every byte once across several cuts", func(t *testing.T) {
		sha256AcrossDrops(t, ctx, c, 64, 16, proxy.drop)
	})
}

// sha256AcrossDrops writes rounds × 64 KiB to sha256sum's stdin, calling
// drop before one write in every every, and checks the sum: each byte
// once across the drops, none lost or doubled.
func sha256AcrossDrops(t *testing.T, ctx context.Context, c *client.Client, rounds, every int, drop func()) {
	t.Helper()
	p, err := c.StartProcess(ctx, "sha256sum", client.ProcessOptions{Stdin: true})
	if err != nil {
		t.Fatal(err)
	}
	data := make([]byte, 64<<10)
	sum := sha256.New()
	in := p.Stdin()
	for i := range rounds {
		for j := range data {
			data[j] = byte(i*7 + j*13)
		}
		sum.Write(data)
		if i%every == every/2 {
			drop()
		}
		if _, err := in.Write(data); err != nil {
			t.Fatalf("Write %d: %v", i, err)
		}
	}
	if err := in.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	out, _, _, _ := p.Read(ctx, "stdout", 0, 200)
	if want := hex.EncodeToString(sum.Sum(nil)); !strings.HasPrefix(string(out), want) {
		t.Errorf("sha256sum of stdin %.64s, want %s: bytes lost or doubled across the drops", out, want)
	}
}

// A create whose answer a dropped socket lost finds what it made by its
// id and returns it: nothing is made twice, nothing is left under an id
// the caller never learned. It failed with "disconnected while the
// request was pending" and left the resource.
func TestClientCreateWhoseAnswerWasLost(t *testing.T) {
	d, proxy, c := behindProxy(t)
	direct := d.dial(t, client.Options{})
	ctx := ctxT(t, 30*time.Second)
	for _, tc := range []struct {
		name   string
		create func() (string, error)
		count  func() int
	}{
		{"process", func() (string, error) {
			p, err := c.StartProcess(ctx, "sleep 30", client.ProcessOptions{})
			if err != nil {
				return "", err
			}
			t.Cleanup(func() { _ = p.Kill(context.Background(), "KILL", 0) })
			return p.ID(), nil
		}, func() int { l, _ := direct.ListProcesses(ctx, ""); return len(l) }},
		{"session", func() (string, error) {
			s, err := c.CreateSession(ctx, client.SessionOptions{})
			if err != nil {
				return "", err
			}
			return s.ID(), nil
		}, func() int { l, _ := direct.ListSessions(ctx); return len(l) }},
		{"terminal", func() (string, error) {
			term, err := c.CreateTerminal(ctx, client.TerminalOptions{})
			if err != nil {
				return "", err
			}
			t.Cleanup(func() { _ = term.Close() })
			return term.ID(), nil
		}, func() int { l, _ := direct.ListTerminals(ctx); return len(l) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := tc.count()
			proxy.muted.Store(true) // the daemon's answers go nowhere
			type result struct {
				id  string
				err error
			}
			done := make(chan result, 1)
			go func() {
				id, err := tc.create()
				done <- result{id, err}
			}()
			waitUntil(t, 5*time.Millisecond, "the create never reached the daemon", func() bool { return tc.count() != before })
			// The answer is gone; the socket goes too.
			proxy.muted.Store(false)
			proxy.drop()
			res := recvOrTimeout(t, done, 20*time.Second)
			if res.err != nil || res.id == "" {
				t.Fatalf("create across the lost answer: %q, %v", res.id, res.err)
			}
			if n := tc.count(); n != before+1 {
				t.Fatalf("%d made, want 1", n-before)
			}
		})
	}
	// A process that ended before the client was back is not started
	// again (the daemon replaces an ended holder of an id, so a blind
	// resend ran it twice).
	t.Run("process that ended meanwhile", func(t *testing.T) {
		file := filepath.Join(t.TempDir(), "runs")
		proxy.muted.Store(true)
		type result struct {
			p   *client.Process
			err error
		}
		done := make(chan result, 1)
		go func() {
			p, err := c.StartProcess(ctx, "echo run >> "+file, client.ProcessOptions{})
			done <- result{p, err}
		}()
		started := func() string {
			l, _ := direct.ListProcesses(ctx, "")
			for _, p := range l {
				if strings.Contains(p.Command, file) {
					return p.ID
				}
			}
			return ""
		}
		id := started()
		for deadline := time.Now().Add(10 * time.Second); id == ""; id = started() {
			if time.Now().After(deadline) {
				t.Fatal("the process never started")
			}
			time.Sleep(5 * time.Millisecond)
		}
		p, err := direct.Process(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := p.Wait(ctx); err != nil { // ended, its record final
			t.Fatal(err)
		}
		proxy.muted.Store(false)
		proxy.drop()
		res := recvOrTimeout(t, done, 20*time.Second)
		if res.err != nil {
			t.Fatalf("StartProcess across the lost answer: %v", res.err)
		}
		if _, err := res.p.Wait(ctx); err != nil {
			t.Fatal(err)
		}
		if b, _ := os.ReadFile(file); string(b) != "run\n" {
			t.Fatalf("the command ran %d times, want once", strings.Count(string(b), "run"))
		}
	})
}

// A process.start whose answer was lost while the daemon restarted is
// not sent to the new daemon: its child may outlive the old one, and a
// second send would run the command twice. The call fails saying so.
func TestClientStartProcessAcrossARestartIsNotSentAgain(t *testing.T) {
	a, proxy, c := behindProxy(t)
	ctx := ctxT(t, 30*time.Second)
	direct := a.dial(t, client.Options{})
	proxy.muted.Store(true)
	done := make(chan error, 1)
	go func() {
		_, err := c.StartProcess(ctx, "sleep 30", client.ProcessOptions{})
		done <- err
	}()
	waitUntil(t, 5*time.Millisecond, "the process never started", func() bool {
		l, _ := direct.ListProcesses(ctx, "")
		return len(l) == 1
	})
	b := startDaemon(t, nil) // "restarted": another boot behind the same address
	proxy.target.Store(&b.Addr)
	proxy.muted.Store(false)
	proxy.drop()
	err := recvOrTimeout(t, done, 20*time.Second)
	if !errors.Is(err, client.ErrDisconnected) || !strings.Contains(err.Error(), "restarted") {
		t.Fatalf("StartProcess across a restart: %v, want ErrDisconnected saying the daemon restarted", err)
	}
	if l, _ := b.dial(t, client.Options{}).ListProcesses(ctx, ""); len(l) != 0 {
		t.Fatalf("the new daemon runs %d processes, want none", len(l))
	}
}

// A large request that reached the daemon whole just before the socket
// ended is read and decoded after the end: an exec or process.start that
// had not started by then does not start, since the client, back on a
// new socket, finds nothing under its id. Before, the exec ran and the
// client said it was lost (30 in 30 with 600 KB of stdin), and a start
// the client sent again ran twice.
func TestClientLargeRequestCutAfterSendingRunsAtMostOnce(t *testing.T) {
	_, proxy, c := behindProxy(t)
	ctx := ctxT(t, 30*time.Second)
	dir := t.TempDir()
	big := bytes.Repeat([]byte("x"), 600<<10)
	for i := range 4 {
		runs := filepath.Join(dir, fmt.Sprint("runs", i))
		// cut sends the request and drops both sides once it has gone
		// through the proxy whole.
		cut := func(call func() error) error {
			sent := proxy.up.Load()
			done := make(chan error, 1)
			go func() { done <- call() }()
			waitUntil(t, 100*time.Microsecond, "the request never went through", func() bool { return proxy.up.Load()-sent >= int64(len(big)) })
			proxy.drop()
			return recvOrTimeout(t, done, 20*time.Second)
		}
		var err error
		if i%2 == 0 {
			err = cut(func() error {
				_, err := c.Exec(ctx, "cat >/dev/null; echo ran >> "+runs, client.ExecOptions{Stdin: big})
				return err
			})
		} else {
			err = cut(func() error {
				p, err := c.StartProcess(ctx, "echo ran >> "+runs+" # "+string(big), client.ProcessOptions{})
				if err == nil {
					_, err = p.Wait(ctx)
				}
				return err
			})
		}
		// What the daemon decodes after the end runs (if it does) a
		// moment after the client gave its answer: watch for a while.
		var b []byte
		for end := time.Now().Add(time.Second); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
			if b, _ = os.ReadFile(runs); len(b) > 0 && err != nil || len(b) > len("ran\n") {
				break
			}
		}
		switch {
		case err == nil && string(b) != "ran\n":
			t.Fatalf("round %d: succeeded, and ran %d times", i, strings.Count(string(b), "ran"))
		case err != nil && len(b) != 0:
			t.Fatalf("round %d: %v, but it ran %d times", i, err, strings.Count(string(b), "ran"))
		}
	}
}

// A process.start from a busy session waits on the daemon for the turn.
// If the client's socket drops while the daemon's side stays open (so
// the daemon keeps the request), the client finds nothing under the id
// and sends the start again: the daemon refuses that id while the first
// waits, the client waits for the first to appear, and the command runs
// once.
func TestClientSessionStartSentAgainOverAHalfOpenSocketRunsOnce(t *testing.T) {
	d, proxy, c := behindProxy(t)
	ctx := ctxT(t, 30*time.Second)
	direct := d.dial(t, client.Options{})
	s, err := direct.CreateSession(ctx, client.SessionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	gate, runs := filepath.Join(dir, "gate"), filepath.Join(dir, "runs")
	busy := make(chan error, 1)
	go func() {
		// Holds the session's turn until the gate file exists (~10 s at most).
		_, err := s.Exec(ctx, "for i in $(seq 1000); do [[ -e "+gate+" ]] && break; sleep 0.01; done", client.ExecOptions{})
		busy <- err
	}()
	waitUntil(t, 5*time.Millisecond, "the session never got busy", func() bool {
		l, _ := direct.ListSessions(ctx)
		return len(l) == 1 && l[0].Busy
	})
	type result struct {
		p   *client.Process
		err error
	}
	done := make(chan result, 1)
	sent := proxy.up.Load()
	go func() {
		p, err := c.StartProcess(ctx, "echo run >> "+runs, client.ProcessOptions{SessionID: s.ID()})
		done <- result{p, err}
	}()
	waitUntil(t, time.Millisecond, "the start never reached the daemon", func() bool { return proxy.up.Load() != sent })
	// Behind the start in the session's queue, a command that lets the
	// start's run end before a second send's turn would come.
	time.Sleep(50 * time.Millisecond) // let the start take its place first
	spacer := make(chan error, 1)
	go func() {
		_, err := s.Exec(ctx, "sleep 0.3", client.ExecOptions{})
		spacer <- err
	}()
	proxy.halfOpen.Store(true)
	conns := proxy.accepted.Load()
	proxy.drop()
	waitUntil(t, time.Millisecond, "the client never came back", func() bool { return proxy.accepted.Load() != conns })
	// Time to look the id up and send the start again, while the first
	// still waits (without the daemon's refusal, the second send queued
	// behind the first, and both ran).
	time.Sleep(300 * time.Millisecond)
	if err := os.WriteFile(gate, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, ch := range []chan error{busy, spacer} {
		if err := recvOrTimeout(t, ch, 20*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	res := recvOrTimeout(t, done, 20*time.Second)
	if res.err != nil {
		t.Fatalf("StartProcess across the half-open drop: %v", res.err)
	}
	if _, err := res.p.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	// A second start, had it been queued, took its turn before this
	// exec: once this returns, it is listed (and it ends at once).
	if _, err := s.Exec(ctx, "sleep 0.2", client.ExecOptions{}); err != nil {
		t.Fatal(err)
	}
	l, err := direct.ListProcesses(ctx, s.ID())
	if err != nil {
		t.Fatal(err)
	}
	for _, info := range l {
		p, err := direct.Process(ctx, info.ID)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := p.Wait(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if b, _ := os.ReadFile(runs); string(b) != "run\n" {
		t.Fatalf("the command ran %d times, want once", strings.Count(string(b), "run"))
	}
}

func TestClientTerminalAnswersWhileTheDaemonIsOutOfReach(t *testing.T) {
	d, proxy, c := behindProxy(t)
	ctx := ctxT(t, 30*time.Second)
	term, err := c.CreateTerminal(ctx, client.TerminalOptions{Shell: "bash"})
	if err != nil {
		t.Fatal(err)
	}
	id := term.ID()
	readErr := make(chan error, 1)
	go func() {
		buf := make([]byte, 4096)
		for {
			if _, err := term.Read(buf); err != nil {
				readErr <- err
				return
			}
		}
	}()
	_, _ = term.Write([]byte("echo hi\n"))
	time.Sleep(200 * time.Millisecond) // some output read
	proxy.cut()                        // Read now waits for a daemon it cannot reach
	time.Sleep(200 * time.Millisecond)
	within(t, "Offset", 2*time.Second, func() { _ = term.Offset() })
	within(t, "Exit", 2*time.Second, func() { _, _, _ = term.Exit() })
	within(t, "Close", 2*time.Second, func() { _ = term.Close() })
	wantClosed(t, readErr)
	// The terminal lives on in the daemon: end it there.
	c2 := d.dial(t, client.Options{})
	if err := c2.DestroyTerminal(ctx, id); err != nil {
		t.Fatal(err)
	}
}

func TestClientStreamReaderClosedFromAnotherGoroutine(t *testing.T) {
	ctx, p := runningProcess(t, 30*time.Second, "echo start; exec sleep 30", client.ProcessOptions{})
	r := p.Stdout()
	if got := readUntil(t, r, "start", 5*time.Second); !strings.Contains(got, "start") {
		t.Fatal(got)
	}
	readErr := make(chan error, 1)
	go func() {
		_, err := r.Read(make([]byte, 64))
		readErr <- err
	}()
	time.Sleep(100 * time.Millisecond) // the Read waits for output
	_ = r.Close()
	wantClosed(t, readErr)
	// Info while Wait updates it (the race detector watches).
	waited := make(chan struct{})
	go func() { _, _ = p.Wait(ctx); close(waited) }()
	_ = p.Kill(ctx, "KILL", 0)
	for i := 0; i < 1e6; i++ {
		_ = p.Info()
		select {
		case <-waited:
			_ = p.Info()
			return
		default:
		}
	}
}

func TestClientExecWithAReusedID(t *testing.T) {
	_, c, ctx := droppable(t)
	s, err := c.CreateSession(ctx, client.SessionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Exec(ctx, "echo OLD", client.ExecOptions{ID: "step"}); err != nil {
		t.Fatal(err)
	}
	// Queued behind a busy session, the new exec is not registered yet
	// while the old one still holds the id.
	go func() { _, _ = s.Exec(ctx, "sleep 0.5", client.ExecOptions{}) }()
	awaitBusy(ctx, c)
	var mu sync.Mutex
	var live strings.Builder
	r, err := s.Exec(ctx, "echo NEW", client.ExecOptions{ID: "step", OnOutput: func(_ string, b []byte) {
		mu.Lock()
		live.Write(b)
		mu.Unlock()
	}})
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if string(r.Stdout) != "NEW\n" || live.String() != "NEW\n" {
		t.Errorf("result %q, live output %q; want NEW only", r.Stdout, live.String())
	}
}

func TestClientQueuedSessionExecSurvivesADroppedSocket(t *testing.T) {
	d, c, ctx := droppable(t)
	s, err := c.CreateSession(ctx, client.SessionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	first := make(chan error, 1)
	go func() {
		_, err := s.Exec(ctx, "sleep 1", client.ExecOptions{})
		first <- err
	}()
	awaitBusy(ctx, c)
	queued := make(chan error, 1)
	var res *client.ExecResult
	go func() {
		var err error
		res, err = s.Exec(ctx, "echo queued", client.ExecOptions{ID: "queued"})
		queued <- err
	}()
	time.Sleep(200 * time.Millisecond) // the second exec waits its turn
	dropSockets(t, d)
	if err := <-first; err != nil {
		t.Errorf("first exec: %v", err)
	}
	if err := <-queued; err != nil || string(res.Stdout) != "queued\n" {
		t.Fatalf("queued exec after the drop: %v (it was queued, not lost)", err)
	}
}

func TestClientCloseFromOnReconnect(t *testing.T) {
	d := startDaemon(t, []string{"MUXD_TEST_HOOKS=1"})
	ctx := ctxT(t, 30*time.Second)
	closed := make(chan struct{})
	self := make(chan *client.Client, 1)
	c, err := client.Dial(ctx, d.URL, client.Options{OnReconnect: func(string, bool) {
		_ = (<-self).Close()
		close(closed)
	}})
	if err != nil {
		t.Fatal(err)
	}
	self <- c
	dropSockets(t, d)
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("Close called from OnReconnect did not return")
	}
}

func TestClientExecCancelledAfterADropIsKilled(t *testing.T) {
	d, c, ctx := droppable(t)
	cctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		_, err := c.Exec(cctx, "sleep 30", client.ExecOptions{ID: "long"})
		done <- err
	}()
	for range 500 { // until it runs
		if _, err := c.Process(ctx, "long"); err == nil {
			break
		}
		time.Sleep(5 * time.Millisecond) // polling process.get: no start event
	}
	dropSockets(t, d)
	time.Sleep(300 * time.Millisecond) // Exec now waits for it on the new socket
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Exec: %v, want context.Canceled", err)
	}
	// A harness closes its client right after: the kill still goes out.
	_ = c.Close()
	other := d.dial(t, client.Options{})
	p, err := other.Process(ctx, "long")
	if err != nil {
		t.Fatal(err)
	}
	wctx, wcancel := context.WithTimeout(ctx, 5*time.Second)
	defer wcancel()
	if info, err := p.Wait(wctx); err != nil || info.Status == "exited" {
		t.Fatalf("after the cancel: %+v %v, want it killed", info, err)
	}
}

// TestClientExecWhoseIDARunningProcessHolds: the daemon refuses such an
// exec (already_exists) when its turn comes; with that answer lost to a
// dropped socket, Exec must say so, not wait on (or, cancelled, kill) the
// process that holds the ID.
func TestClientExecWhoseIDARunningProcessHolds(t *testing.T) {
	d, c, ctx := droppable(t)
	holder, err := c.StartProcess(ctx, "sleep 30", client.ProcessOptions{ID: "step"})
	if err != nil {
		t.Fatal(err)
	}
	s, err := c.CreateSession(ctx, client.SessionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	go func() { _, _ = s.Exec(ctx, "sleep 1", client.ExecOptions{}) }()
	awaitBusy(ctx, c)
	done := make(chan error, 1)
	go func() {
		_, err := s.Exec(ctx, "echo mine", client.ExecOptions{ID: "step"})
		done <- err
	}()
	time.Sleep(200 * time.Millisecond) // queued behind the sleep
	dropSockets(t, d)
	select {
	case err := <-done:
		if !client.IsCode(err, mux.CodeAlreadyExists) {
			t.Fatalf("Exec: %v, want already_exists", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Exec waited on the process that holds its ID")
	}
	if info, err := holder.Refresh(ctx); err != nil || !info.Running() {
		t.Fatalf("the holder: %+v %v, want it running", info, err)
	}
	_ = holder.Kill(ctx, "KILL", 0)
}

// TestClientRemoveThatRanBeforeADropSucceeds: a delete the daemon did,
// whose answer was lost with the socket, is sent again and finds nothing:
// that is success, not not_found.
func TestClientRemoveThatRanBeforeADropSucceeds(t *testing.T) {
	d, proxy, c := behindProxy(t)
	ctx := ctxT(t, 30*time.Second)
	direct := d.dial(t, client.Options{})
	s, err := c.CreateSession(ctx, client.SessionOptions{ID: "gone"})
	if err != nil {
		t.Fatal(err)
	}
	proxy.muted.Store(true) // the answer to the delete never arrives
	done := make(chan error, 1)
	go func() { done <- s.Delete(ctx) }()
	for range 500 { // until the daemon did it
		if l, _ := direct.ListSessions(ctx); len(l) == 0 {
			break
		}
		time.Sleep(5 * time.Millisecond) // polling session.list: no event for a delete
	}
	proxy.muted.Store(false)
	proxy.drop()
	if err := <-done; err != nil {
		t.Fatalf("Delete whose answer was lost: %v, want nil", err)
	}
}

// TestClientRemoveOfARunningProcessAnswersBusy: the daemon's busy for a
// process still running is an answer, not an overloaded socket to retry.
func TestClientRemoveOfARunningProcessAnswersBusy(t *testing.T) {
	ctx, p := runningProcess(t, 20*time.Second, "sleep 30", client.ProcessOptions{})
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := p.Remove(rctx); !client.IsCode(err, mux.CodeBusy) || rctx.Err() != nil {
		t.Fatalf("Remove of a running process: %v (ctx %v), want busy at once", err, rctx.Err())
	}
	if err := p.Kill(ctx, "KILL", 0); err != nil {
		t.Fatal(err)
	}
}

// TestClientStdinChannelsEndWithTheirProcess: a process's stdin channel
// is closed once the process ended, so a connection that starts many
// processes with stdin does not reach its channel limit.
func TestClientStdinChannelsEndWithTheirProcess(t *testing.T) {
	d := startDaemon(t, nil, "--max-channels", "8")
	c := d.dial(t, client.Options{})
	ctx := ctxT(t, 60*time.Second)
	for i := range 16 {
		p, err := c.StartProcess(ctx, "cat >/dev/null", client.ProcessOptions{Stdin: true})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := p.Stdin().Write([]byte("x\n")); err != nil {
			t.Fatalf("process %d: stdin: %v", i, err)
		}
		if err := p.Stdin().Close(); err != nil {
			t.Fatalf("process %d: stdin close: %v", i, err)
		}
		if _, err := p.Wait(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// TestClientTerminalOffsetCountsWhatReadReturned: Offset is where the
// next byte Read returns sits, not past bytes still buffered.
func TestClientTerminalOffsetCountsWhatReadReturned(t *testing.T) {
	c, ctx, term := bashTerminal(t)
	tm, err := c.AttachTerminal(ctx, term.ID(), client.AttachOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer tm.Close()
	if _, err := tm.Write([]byte("stty -echo; echo 0123456789ABCDEF-$((1+1))\r")); err != nil {
		t.Fatal(err)
	}
	var got []byte
	b := make([]byte, 1)
	for !bytes.Contains(got, []byte("0123456789ABCDEF-2")) {
		if _, err := tm.Read(b); err != nil {
			t.Fatal(err)
		}
		got = append(got, b[0])
		if len(got) > 1<<16 {
			t.Fatalf("no marker in %q", got)
		}
	}
	// Read a few more bytes one at a time; a second attachment from
	// Offset must start with what this one reads next.
	off := tm.Offset()
	next := make([]byte, 0, 3)
	for len(next) < 3 {
		if _, err := tm.Read(b); err != nil {
			t.Fatal(err)
		}
		next = append(next, b[0])
	}
	if off < 0 {
		t.Fatal("Offset -1 after live bytes")
	}
	other, err := c.AttachTerminal(ctx, term.ID(), client.AttachOptions{From: &off})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	first := make([]byte, 3)
	if _, err := io.ReadFull(other, first); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(first, next) {
		t.Fatalf("from Offset %d: %q, want %q", off, first, next)
	}
}

// TestClientNoReconnectStillTellsOnDisconnect: without reconnects, the
// drop is still reported to OnDisconnect.
func TestClientNoReconnectStillTellsOnDisconnect(t *testing.T) {
	d := startDaemon(t, nil)
	told := make(chan error, 1)
	d.dial(t, client.Options{NoReconnect: true, OnDisconnect: func(err error) {
		select {
		case told <- err:
		default:
		}
	}})
	if err := d.cmd.Process.Kill(); err != nil { // our child, by pid
		t.Fatal(err)
	}
	<-d.exited
	select {
	case <-told:
	case <-time.After(10 * time.Second):
		t.Fatal("OnDisconnect was not called")
	}
}

// TestClientTerminalMisuseIsAnError: what the daemon would drop or
// ignore is refused by the client with an error, not a silent nil.
func TestClientTerminalMisuseIsAnError(t *testing.T) {
	c, ctx, term := bashTerminal(t)
	for _, size := range [][2]int{{0, 0}, {5000, 10}, {80, -1}} {
		if err := term.Resize(size[0], size[1]); err == nil {
			t.Errorf("Resize(%d, %d): nil, want an error", size[0], size[1])
		}
	}
	if err := term.Resize(100, 30); err != nil {
		t.Fatalf("Resize(100, 30): %v", err)
	}
	ro, err := c.AttachTerminal(ctx, term.ID(), client.AttachOptions{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	if _, err := ro.Write([]byte("x")); !errors.Is(err, client.ErrReadOnly) {
		t.Errorf("read-only Write: %v", err)
	}
	if err := ro.Resize(90, 20); !errors.Is(err, client.ErrReadOnly) {
		t.Errorf("read-only Resize: %v", err)
	}
	if err := ro.Signal("INT"); !errors.Is(err, client.ErrReadOnly) {
		t.Errorf("read-only Signal: %v", err)
	}
}

// TestClientQueuedExecCancelledAfterADropNeverRuns: an exec queued behind
// its session's command, cancelled after the socket dropped (its
// rpc.cancel went down with the socket), is dropped by id: it must not
// run once the session is free. Also with an id an ended exec held.
func TestClientQueuedExecCancelledAfterADropNeverRuns(t *testing.T) {
	for _, reused := range []bool{false, true} {
		t.Run(fmt.Sprintf("reused id %v", reused), func(t *testing.T) {
			d, c, ctx := droppable(t)
			s, err := c.CreateSession(ctx, client.SessionOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if reused {
				if _, err := s.Exec(ctx, "true", client.ExecOptions{ID: "queued-cancel"}); err != nil {
					t.Fatal(err)
				}
			}
			cctx, cancel := context.WithCancel(ctx)
			mark, first, queued := queueBehindASleep(t, ctx, cctx, c, s, "queued-cancel")
			dropSockets(t, d)
			time.Sleep(300 * time.Millisecond) // Exec now waits for it on the new socket
			cancel()
			if err := <-queued; !errors.Is(err, context.Canceled) {
				t.Fatalf("Exec: %v, want context.Canceled", err)
			}
			if err := <-first; err != nil {
				t.Fatalf("first exec: %v", err)
			}
			if _, err := s.Exec(ctx, "true", client.ExecOptions{}); err != nil { // after the dropped one's turn
				t.Fatal(err)
			}
			if _, err := os.Stat(mark); !os.IsNotExist(err) {
				t.Fatalf("the cancelled exec ran: %v", err)
			}
		})
	}
}

// TestClientStdinCloseEndsABlockedWrite: a process that does not read its
// stdin yet leaves a large Write waiting for credit; Close sends the EOF
// after what was written, and the Write returns: the process then reads
// exactly the bytes the Write reported. A Close after the process ended
// (its stdin with it) is not an error.
func TestClientStdinCloseEndsABlockedWrite(t *testing.T) {
	ctx, p := runningProcess(t, 30*time.Second, "sleep 1; wc -c", client.ProcessOptions{Stdin: true})
	type result struct {
		n   int
		err error
	}
	wrote := make(chan result, 1)
	go func() {
		n, err := p.Stdin().Write(make([]byte, 8<<20))
		wrote <- result{n, err}
	}()
	time.Sleep(300 * time.Millisecond) // the write waits for credit
	closed := make(chan error, 1)
	go func() { closed <- p.Stdin().Close() }()
	if err := recvOrTimeout(t, closed, 5*time.Second); err != nil {
		t.Fatalf("Close: %v", err)
	}
	w := recvOrTimeout(t, wrote, 5*time.Second)
	if w.err == nil || w.n <= 0 || w.n >= 8<<20 {
		t.Fatalf("the blocked Write: %d bytes, %v; want part of it and an error", w.n, w.err)
	}
	out, err := io.ReadAll(p.Stdout())
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(string(out)); got != strconv.Itoa(w.n) {
		t.Fatalf("the process read %s bytes, the Write reported %d", got, w.n)
	}
	q, err := p.Wait(ctx)
	if err != nil || q.Running() {
		t.Fatalf("wait: %+v %v", q, err)
	}
	time.Sleep(300 * time.Millisecond) // the daemon ends the stdin channel
	if err := p.Stdin().Close(); err != nil {
		t.Fatalf("Close after the process ended: %v", err)
	}
}

// runningProcess starts a daemon and, from a client of it, command; ctx
// ends after limit.
func runningProcess(t *testing.T, limit time.Duration, command string, opts client.ProcessOptions) (context.Context, *client.Process) {
	t.Helper()
	d := startDaemon(t, nil)
	c := d.dial(t, client.Options{})
	ctx := ctxT(t, limit)
	p, err := c.StartProcess(ctx, command, opts)
	if err != nil {
		t.Fatal(err)
	}
	return ctx, p
}

// bashTerminal starts a daemon and, from a client of it, a bash terminal.
func bashTerminal(t *testing.T) (*client.Client, context.Context, *client.Terminal) {
	t.Helper()
	d := startDaemon(t, nil)
	c := d.dial(t, client.Options{})
	ctx := ctxT(t, 20*time.Second)
	term, err := c.CreateTerminal(ctx, client.TerminalOptions{Shell: "bash"})
	if err != nil {
		t.Fatal(err)
	}
	return c, ctx, term
}

// queueBehindASleep runs `sleep 1.5` in session s and, once it runs, an
// exec with id (and ctx qctx) that would create the file mark: that one
// waits its turn when this returns. first and queued get their errors.
func queueBehindASleep(t *testing.T, ctx, qctx context.Context, c *client.Client, s *client.Session, id string) (mark string, first, queued chan error) {
	t.Helper()
	mark = t.TempDir() + "/ran"
	first, queued = make(chan error, 1), make(chan error, 1)
	go func() {
		_, err := s.Exec(ctx, "sleep 1.5", client.ExecOptions{})
		first <- err
	}()
	awaitBusy(ctx, c)
	go func() {
		_, err := s.Exec(qctx, "touch "+mark, client.ExecOptions{ID: id})
		queued <- err
	}()
	time.Sleep(200 * time.Millisecond) // the second exec waits its turn
	return mark, first, queued
}

// An exec whose output cannot be followed live (the daemon refuses the
// channel at its --max-channels) still gives OnOutput every byte, from
// the result.
func TestClientExecOnOutputWithoutALiveChannel(t *testing.T) {
	d := startDaemon(t, nil, "--max-channels", "1")
	c := d.dial(t, client.Options{})
	ctx := ctxT(t, 30*time.Second)
	p := startSleeper(t, ctx, c)
	held := make(chan struct{})
	go func() {
		r := p.Stdout()
		close(held)
		_, _ = io.Copy(io.Discard, r) // holds the one channel
	}()
	<-held
	var mu sync.Mutex
	got := map[string]string{}
	res, err := c.Exec(ctx, "echo live-output; echo oops >&2", client.ExecOptions{OnOutput: func(s string, b []byte) {
		mu.Lock()
		got[s] += string(b)
		mu.Unlock()
	}})
	if err != nil || string(res.Stdout) != "live-output\n" {
		t.Fatalf("Exec: %+v %v", res, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if got["stdout"] != "live-output\n" || got["stderr"] != "oops\n" {
		t.Errorf("OnOutput got %q, want the whole output once", got)
	}
}

// A daemon that died and stays away fails the calls waiting for it
// after Options.Unreachable, and new calls at once, instead of hanging
// them; when a daemon answers again, calls work again.
func TestClientGivesUpOnADaemonThatStaysAway(t *testing.T) {
	a := startDaemon(t, nil)
	// The backoff (20 ms doubling, up to 4 s) tries again at ~2.5 s and
	// then at ~5.1 s: calls must fail at 3 s, not at the next attempt.
	const unreachable = 3 * time.Second
	c := a.dial(t, client.Options{Unreachable: unreachable, MaxBackoff: 4 * time.Second})
	ctx := ctxT(t, 30*time.Second)
	done := make(chan error, 1)
	go func() {
		_, err := c.Exec(ctx, "sleep 30", client.ExecOptions{})
		done <- err
	}()
	for deadline := time.Now().Add(10 * time.Second); len(descendants(a.Pid())) == 0 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond) // polling /proc: there is no event to wait on
	}
	_ = a.cmd.Process.Kill() // our own child, by pid
	<-a.exited
	start := time.Now()
	if err := recvOrTimeout(t, done, 10*time.Second); !errors.Is(err, client.ErrUnreachable) {
		t.Fatalf("Exec across the daemon's death: %v, want ErrUnreachable", err)
	}
	took := time.Since(start)
	t.Logf("Exec gave up %v after the daemon died", took.Round(time.Millisecond))
	if took > unreachable+1500*time.Millisecond {
		t.Errorf("Exec gave up %v after the daemon died, with Unreachable %v: it waited for the next dial", took, unreachable)
	}
	if _, err := c.ServerInfo(ctx); !errors.Is(err, client.ErrUnreachable) {
		t.Fatalf("a new call while unreachable: %v, want ErrUnreachable at once", err)
	}
	b := startDaemon(t, nil, "--listen", strings.TrimPrefix(a.URL, "http://"))
	for deadline := time.Now().Add(10 * time.Second); ; {
		info, err := c.ServerInfo(ctx)
		if err == nil {
			if info.Boot == c.Boot() && c.Boot() != "" {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("calls did not work again once a daemon answered (%s): %v", b.URL, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Writing the stdin of a process started without it says how to start it.
func TestClientStdinOfAProcessWithoutIt(t *testing.T) {
	d := startDaemon(t, nil)
	c := d.dial(t, client.Options{})
	ctx := ctxT(t, 20*time.Second)
	p := startSleeper(t, ctx, c)
	_, err := p.Stdin().Write([]byte("x"))
	if !client.IsCode(err, mux.CodeNotWritable) || !strings.Contains(err.Error(), "Stdin: true") {
		t.Fatalf("Write: %v, want not_writable saying to start it with Stdin: true", err)
	}
}

// startSleeper starts a process that sleeps, killed at the test's end.
func startSleeper(t *testing.T, ctx context.Context, c *client.Client) *client.Process {
	t.Helper()
	p, err := c.StartProcess(ctx, "sleep 30", client.ProcessOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Kill(context.Background(), "KILL", 0) })
	return p
}

// An exec whose socket dropped while it ran keeps its result for the
// client to fetch once back, even when many processes ended meanwhile:
// retention dropped exec records first, and the client found nothing.
func TestClientExecResultOutlastsRetentionAcrossADrop(t *testing.T) {
	d := startDaemon(t, nil, "--retain-count", "4")
	proxy := newCutProxy(t, d.Addr)
	ctx := ctxT(t, 30*time.Second)
	c, err := client.Dial(ctx, proxy.URL(), client.Options{MaxBackoff: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	direct := d.dial(t, client.Options{})
	type result struct {
		r   *client.ExecResult
		err error
	}
	done := make(chan result, 1)
	go func() {
		r, err := c.Exec(ctx, "sleep 0.3; echo done", client.ExecOptions{ID: "dropped-exec"})
		done <- result{r, err}
	}()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		execs, err := direct.ListRunningExecs(ctx)
		if err == nil && len(execs) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the exec never ran: %v %v", execs, err)
		}
	}
	// The client loses its socket and cannot come back until the exec
	// ended and more processes than retention keeps ended after it.
	proxy.refusing.Store(true)
	proxy.drop()
	p, err := direct.Process(ctx, "dropped-exec")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	for range 8 {
		q, err := direct.StartProcess(ctx, "true", client.ProcessOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := q.Wait(ctx); err != nil {
			t.Fatal(err)
		}
	}
	proxy.refusing.Store(false)
	res := recvOrTimeout(t, done, 20*time.Second)
	if res.err != nil || res.r == nil || string(res.r.Stdout) != "done\n" {
		t.Fatalf("Exec across the drop: %+v, %v: want its result", res.r, res.err)
	}
	// The record is kept, not pinned: its id is free for the next command.
	if r, err := c.Exec(ctx, "echo again", client.ExecOptions{ID: "dropped-exec"}); err != nil || string(r.Stdout) != "again\n" {
		t.Fatalf("an exec reusing the id: %v", err)
	}
}
