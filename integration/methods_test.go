package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/muxd/muxd/client"
	"github.com/muxd/muxd/mux"
)

func TestEveryMethodThroughTheDaemon(t *testing.T) {
	d := startDaemon(t, nil)
	notes := make(chan string, 256)
	c := d.dial(t, client.Options{OnNotify: func(method string, params json.RawMessage) {
		select {
		case notes <- method:
		default:
		}
	}})
	ctx := ctxT(t, 60*time.Second)

	// server.info
	info, err := c.ServerInfo(ctx)
	if err != nil || info.Boot == "" || info.Pid != d.Pid() || info.Protocol != "wsmux/1" {
		t.Fatalf("server.info: %+v %v", info, err)
	}

	// exec: stateless, exit code, stderr, stdin, env, cwd, timeout.
	r, err := c.Exec(ctx, "echo out; echo err >&2; exit 3", client.ExecOptions{})
	if err != nil || string(r.Stdout) != "out\n" || string(r.Stderr) != "err\n" || r.ExitCode == nil || *r.ExitCode != 3 {
		t.Fatalf("exec: %+v %v", r, err)
	}
	v := "muxd"
	r, err = c.Exec(ctx, "cat; echo $X; pwd", client.ExecOptions{Stdin: []byte("in\x00put\n"), Env: map[string]*string{"X": &v}, Cwd: "/tmp"})
	if err != nil || string(r.Stdout) != "in\x00put\nmuxd\n/tmp\n" {
		t.Fatalf("exec with stdin/env/cwd: %q %v", r.Stdout, err)
	}
	r, err = c.Exec(ctx, "sleep 10", client.ExecOptions{Timeout: 200 * time.Millisecond})
	if err != nil || !r.TimedOut || r.ExitCode != nil {
		t.Fatalf("exec timeout: %+v %v", r, err)
	}
	r, err = c.Exec(ctx, "env", client.ExecOptions{})
	if err != nil || strings.Contains(string(r.Stdout), "MUXD_") {
		t.Fatalf("MUXD_* reached a child: %v %s", err, r.Stdout)
	}

	// exec with live output through its process channel.
	var live bytes.Buffer
	r, err = c.Exec(ctx, "for i in 1 2 3; do echo $i; sleep 0.05; done", client.ExecOptions{
		OnOutput: func(stream string, data []byte) { live.Write(data) }})
	if err != nil || live.String() != "1\n2\n3\n" || string(r.Stdout) != "1\n2\n3\n" {
		t.Fatalf("exec live: %q / %+v %v", live.String(), r, err)
	}
	// Its output stays readable by id.
	p, err := c.Process(ctx, r.ID)
	if err != nil {
		t.Fatalf("process.get of an exec: %v", err)
	}
	data, _, end, err := p.Read(ctx, "stdout", 2, 4)
	if err != nil || string(data) != "2\n3\n" || end != 6 {
		t.Fatalf("process.read: %q end=%d %v", data, end, err)
	}

	// sessions: state persists; interrupt; delete; session_dead.
	s, err := c.CreateSession(ctx, client.SessionOptions{ID: "s1", Cwd: "/tmp"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Exec(ctx, "cd / && export K=v && f() { echo fn-$K; }", client.ExecOptions{}); err != nil {
		t.Fatal(err)
	}
	r, err = s.Exec(ctx, "pwd; f", client.ExecOptions{})
	if err != nil || string(r.Stdout) != "/\nfn-v\n" {
		t.Fatalf("session state: %q %v", r.Stdout, err)
	}
	if _, err := c.CreateSession(ctx, client.SessionOptions{ID: "s1"}); !client.IsCode(err, mux.CodeAlreadyExists) {
		t.Fatalf("duplicate session: %v, want already_exists", err)
	}
	sessions, err := c.ListSessions(ctx)
	if err != nil || len(sessions) != 1 || sessions[0].ID != "s1" || !sessions[0].Alive {
		t.Fatalf("session.list: %+v %v", sessions, err)
	}
	interrupted := make(chan *client.ExecResult, 1)
	go func() {
		r, _ := s.Exec(ctx, "while true; do :; done", client.ExecOptions{})
		interrupted <- r
	}()
	for i := 0; i < 200; i++ {
		if l, _ := c.ListSessions(ctx); len(l) == 1 && l[0].Busy {
			break
		}
		time.Sleep(10 * time.Millisecond) // polling session.list: busy has no event
	}
	if err := s.Interrupt(ctx); err != nil {
		t.Fatalf("session.interrupt: %v", err)
	}
	if r := recvOrTimeout(t, interrupted, 10*time.Second); r == nil || r.ExitCode == nil || *r.ExitCode != 130 {
		t.Fatalf("interrupted exec: %+v, want exit 130", r)
	}
	if r, err := s.Exec(ctx, "f", client.ExecOptions{}); err != nil || string(r.Stdout) != "fn-v\n" {
		t.Fatalf("session after interrupt: %+v %v", r, err)
	}
	// A process from the session's snapshot outlives the session.
	sp, err := s.StartProcess(ctx, "f; sleep 30", client.ProcessOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sp.WaitForLog(ctx, "^fn-v$"); err != nil {
		t.Fatalf("snapshot process: %v", err)
	}
	if err := s.Delete(ctx); err != nil {
		t.Fatal(err)
	}
	if info, err := sp.Refresh(ctx); err != nil || !info.Running() {
		t.Fatalf("snapshot process after session.delete: %+v %v", info, err)
	}
	dead, _ := c.CreateSession(ctx, client.SessionOptions{ID: "dead"})
	if r, err := dead.Exec(ctx, "exit 7", client.ExecOptions{}); err != nil || !strings.Contains(r.SessionEnded, "exit 7") {
		t.Fatalf("exec of exit 7: %+v %v, want SessionEnded to say so", r, err)
	}
	if _, err := dead.Exec(ctx, "true", client.ExecOptions{}); !client.IsCode(err, mux.CodeSessionDead) {
		t.Fatalf("exec on a dead session: %v, want session_dead", err)
	}

	// processes: stdin, wait, kill, list, waitForLog, waitForPort, remove.
	cat, err := c.StartProcess(ctx, "cat; echo done >&2", client.ProcessOptions{ID: "cat", Stdin: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(cat.Stdin(), "hello stdin\n"); err != nil {
		t.Fatal(err)
	}
	if err := cat.Stdin().Close(); err != nil {
		t.Fatal(err)
	}
	fin, err := cat.Wait(ctx)
	if err != nil || fin.Status != "exited" || fin.ExitCode == nil || *fin.ExitCode != 0 || fin.StdoutBytes != 12 || fin.StderrBytes != 5 {
		t.Fatalf("process.wait: %+v %v", fin, err)
	}
	out, _ := io.ReadAll(cat.Stdout())
	if string(out) != "hello stdin\n" {
		t.Fatalf("stdout reader: %q", out)
	}
	// waitForLog from an offset and in one stream: the next match, not
	// the last one seen.
	builds, err := c.StartProcess(ctx, "echo compiled 1; echo compiled 2 >&2; sleep 0.2; echo compiled 3; sleep 30", client.ProcessOptions{})
	if err != nil {
		t.Fatal(err)
	}
	m1, err := builds.WaitForLogFrom(ctx, "^compiled", client.LogOptions{Stream: "stdout"})
	if err != nil || m1.Line != "compiled 1" {
		t.Fatalf("waitForLog in stdout: %+v %v", m1, err)
	}
	next := m1.Offset + int64(len(m1.Line)) + 1
	if m3, err := builds.WaitForLogFrom(ctx, "^compiled", client.LogOptions{Stream: "stdout", From: next}); err != nil || m3.Line != "compiled 3" {
		t.Fatalf("waitForLog in stdout from %d: %+v %v", next, m3, err)
	}
	if m2, err := builds.WaitForLogFrom(ctx, "^compiled", client.LogOptions{Stream: "stderr"}); err != nil || m2.Line != "compiled 2" || m2.Stream != "stderr" {
		t.Fatalf("waitForLog in stderr: %+v %v", m2, err)
	}
	_ = builds.Kill(ctx, "KILL", 0)
	list, err := c.ListProcesses(ctx, "")
	if err != nil || len(list) < 2 {
		t.Fatalf("process.list: %+v %v", list, err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	_ = ln.Close()
	srv, err := c.StartProcess(ctx, fmt.Sprintf("python3 -m http.server %d --bind 127.0.0.1 2>&1 || exec nc -l 127.0.0.1 %d", port, port), client.ProcessOptions{})
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	if err := srv.WaitForPort(wctx, port); err != nil {
		t.Fatalf("process.waitForPort: %v", err)
	}
	cancel()
	if err := srv.Kill(ctx, "TERM", time.Second); err != nil {
		t.Fatal(err)
	}
	if fin, err := srv.Wait(ctx); err != nil || fin.Status != "killed" {
		t.Fatalf("after process.kill: %+v %v", fin, err)
	}
	// An older program on the port (this test) is not the process's
	// listener: the wait ends before ctx does, naming it.
	held, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	idle, err := c.StartProcess(ctx, "sleep 30", client.ProcessOptions{})
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel = context.WithTimeout(ctx, time.Second)
	err = idle.WaitForPort(wctx, held.Addr().(*net.TCPAddr).Port)
	cancel()
	_ = held.Close()
	if want := fmt.Sprintf("held by pid %d", os.Getpid()); !client.IsCode(err, mux.CodeTimeout) || !strings.Contains(err.Error(), want) {
		t.Fatalf("process.waitForPort on an older program's port: %v, want a timeout saying %q", err, want)
	}
	_ = idle.Kill(ctx, "KILL", 0)
	if err := cat.Remove(ctx); err != nil {
		t.Fatalf("process.remove: %v", err)
	}
	if _, err := c.Process(ctx, "cat"); !client.IsCode(err, mux.CodeNotFound) {
		t.Fatalf("get after remove: %v, want not_found", err)
	}
	// Errors are typed.
	if err := c.Call(ctx, "no.such", nil, nil); !client.IsCode(err, mux.CodeMethodNotFound) {
		t.Fatalf("unknown method: %v", err)
	}
	if err := c.Call(ctx, "exec", map[string]any{}, nil); !client.IsCode(err, mux.CodeInvalidParams) {
		t.Fatalf("exec without command: %v", err)
	}

	// terminals: create, update, list, destroy; notifications.
	term, err := c.CreateTerminal(ctx, client.TerminalOptions{ID: "tt", Title: "one", Cols: 100, Rows: 30})
	if err != nil {
		t.Fatal(err)
	}
	var ti client.TerminalInfo
	if err := c.Call(ctx, "terminal.update", map[string]any{"id": "tt", "title": "two", "cols": 90, "rows": 20}, &ti); err != nil || ti.Title != "two" || ti.Cols != 90 {
		t.Fatalf("terminal.update: %+v %v", ti, err)
	}
	if _, err := term.Write([]byte("stty size\n")); err != nil {
		t.Fatal(err)
	}
	readUntil(t, term, "20 90", 10*time.Second)
	if _, err := term.Write([]byte("exit 5\n")); err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, term)
	if code, _, ok := term.Exit(); !ok || code == nil || *code != 5 {
		t.Fatalf("terminal exit: %v %v", code, ok)
	}
	// Input to an exited shell is refused, not dropped without a word.
	if _, err := term.Write([]byte("echo lost\n")); !errors.Is(err, client.ErrExited) {
		t.Fatalf("Write after the exit: %v, want ErrExited", err)
	}
	if err := term.Resize(80, 24); !errors.Is(err, client.ErrExited) {
		t.Fatalf("Resize after the exit: %v, want ErrExited", err)
	}
	if err := c.DestroyTerminal(ctx, "tt"); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	deadline := time.After(5 * time.Second)
	for !(seen["process.started"] && seen["process.exited"] && seen["terminal.created"] && seen["terminal.exited"]) {
		select {
		case m := <-notes:
			seen[m] = true
		case <-deadline:
			t.Fatalf("notifications seen: %v", seen)
		}
	}
}

func TestProcessStreamByteExactAndResumesAfterKilledConnection(t *testing.T) {
	size := int64(16 << 20)
	if longRun() {
		size = 256 << 20
	}
	d := startDaemon(t, []string{"MUXD_TEST_HOOKS=1"}, "--output-limit", fmt.Sprint(size+1<<20))
	c := d.dial(t, client.Options{})
	ctx := ctxT(t, 4*time.Minute)
	command := streamFile(t, size)
	_, want := rawPipe(t, command)
	// Read by hand, and by io.Copy (which takes the reader's WriteTo).
	for _, viaCopy := range []bool{false, true} {
		t.Run(fmt.Sprintf("io.Copy=%v", viaCopy), func(t *testing.T) {
			p, err := c.StartProcess(ctx, command, client.ProcessOptions{OutputLimit: size + 1<<20})
			if err != nil {
				t.Fatal(err)
			}
			// Kill the socket mid-stream; the reader must resume at its offset.
			w := &dropAfter{t: t, url: d.URL + "/_test/drop", at: size / 3, h: crc32.New(crc32.MakeTable(crc32.Castagnoli))}
			r := p.Stdout()
			if viaCopy {
				if _, err := io.Copy(w, r); err != nil {
					t.Fatalf("after %d bytes: %v", w.n, err)
				}
			} else {
				buf := make([]byte, 64<<10)
				for {
					k, err := r.Read(buf)
					_, _ = w.Write(buf[:k])
					if err == io.EOF {
						break
					}
					if err != nil {
						t.Fatalf("after %d bytes: %v", w.n, err)
					}
				}
			}
			if w.n != size {
				t.Fatalf("got %d bytes, want %d", w.n, size)
			}
			if got := fmt.Sprintf("%x", w.h.Sum(nil)); got != want {
				t.Fatal("stream is not byte-exact across the reconnect")
			}
			_ = p.Remove(ctx) // Best effort: frees the retained output.
		})
	}
}

// dropAfter hashes what is written to it and drops the client's socket
// (through the daemon's test hook) once at bytes have passed.
type dropAfter struct {
	t       *testing.T
	url     string
	at, n   int64
	h       hash.Hash
	dropped bool
}

func (w *dropAfter) Write(p []byte) (int, error) {
	w.h.Write(p)
	w.n += int64(len(p))
	if !w.dropped && w.n > w.at {
		resp, err := http.Post(w.url, "", nil)
		if err != nil {
			w.t.Fatal(err)
		}
		_ = resp.Body.Close()
		w.dropped = true
	}
	return len(p), nil
}

func TestKeystrokeEchoUnderFloodOnTheSameSocket(t *testing.T) {
	d := startDaemon(t, nil)
	c := d.dial(t, client.Options{})
	ctx := ctxT(t, 2*time.Minute)
	flood, err := c.StartProcess(ctx, "head -c 300M /dev/zero", client.ProcessOptions{})
	if err != nil {
		t.Fatal(err)
	}
	go func() { _, _ = io.Copy(io.Discard, flood.Stdout()) }()
	lat := echoLatencies(t, ctx, c, 100)
	_ = flood.Kill(ctx, "KILL", 0)
	// Generous bounds: this asserts that echo is not starved by the bulk
	// stream (the seed system froze); the 2 ms target is for make bench.
	if p50, p99 := percentile(lat, 0.5), percentile(lat, 0.99); p50 > 50*time.Millisecond || p99 > time.Second {
		t.Errorf("keystroke echo p50 %v p99 %v under a flood on the same socket; want p50 ≤ 50 ms, p99 ≤ 1 s", p50, p99)
	}
}

func TestExecSurvivesDroppedSocket(t *testing.T) {
	d := startDaemon(t, []string{"MUXD_TEST_HOOKS=1"})
	c := d.dial(t, client.Options{})
	ctx := ctxT(t, 30*time.Second)
	res := make(chan *client.ExecResult, 1)
	errs := make(chan error, 1)
	go func() {
		r, err := c.Exec(ctx, "sleep 0.5; echo finished", client.ExecOptions{ID: "survivor"})
		if err != nil {
			errs <- err
			return
		}
		res <- r
	}()
	// Wait until the exec runs, then cut every socket.
	for i := 0; i < 500; i++ {
		if _, err := c.Process(ctx, "survivor"); err == nil {
			break
		}
		time.Sleep(5 * time.Millisecond) // polling process.get: the exec has no start event
	}
	resp, err := http.Post(d.URL+"/_test/drop", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	select {
	case r := <-res:
		if string(r.Stdout) != "finished\n" || r.ExitCode == nil || *r.ExitCode != 0 {
			t.Fatalf("exec after a dropped socket: %+v", r)
		}
	case err := <-errs:
		t.Fatalf("exec after a dropped socket: %v", err)
	case <-ctx.Done():
		t.Fatal("exec never returned")
	}
}
