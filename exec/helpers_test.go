package exec

import (
	"context"
	"fmt"
	"os"
	osexec "os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// newTestEngine returns an engine on a temp data dir, closed at cleanup.
func newTestEngine(t testing.TB, mod ...func(*Config)) *Engine {
	t.Helper()
	cfg := Config{DataDir: filepath.Join(t.TempDir(), "data"), KillGrace: 200 * time.Millisecond}
	for _, m := range mod {
		m(&cfg)
	}
	e, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := e.Close(ctx); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return e
}

func ctxT(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// recvOrTimeout receives from ch or fails the test after d.
func recvOrTimeout[T any](t testing.TB, ch <-chan T, d time.Duration, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(d):
		t.Fatalf("timed out after %v waiting for %s", d, what)
		var zero T
		return zero
	}
}

func mustExec(t testing.TB, e *Engine, req ExecRequest) ExecResult {
	t.Helper()
	r, err := e.Exec(ctxT(t, 20*time.Second), req)
	if err != nil {
		t.Fatalf("Exec(%q): %v", req.Command, err)
	}
	return r
}

func code(r ExecResult) int {
	if r.ExitCode == nil {
		return -1
	}
	return *r.ExitCode
}

func newSession(t testing.TB, e *Engine, o SessionOptions) string {
	t.Helper()
	info, err := e.CreateSession(ctxT(t, 10*time.Second), o)
	if err != nil {
		t.Fatalf("CreateSession: %v", err)
	}
	return info.ID
}

// sessionOf returns the engine's session sid, for tests that look at its
// shell.
func sessionOf(t testing.TB, e *Engine, sid string) *session {
	t.Helper()
	s, err := e.session(sid)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func strp(s string) *string { return &s }

// openFDs counts this process's open file descriptors.
func openFDs(t testing.TB) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

// pidAlive reports whether pid exists and is not a zombie.
func pidAlive(pid int) bool {
	b, err := os.ReadFile("/proc/" + itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i >= 0 && i+2 < len(s) && s[i+2] != 'Z'
}

func itoa(n int) string { return strconv.Itoa(n) }

func isLong() bool { return os.Getenv("MUXD_TEST_LONG") == "1" }

func atoi(t testing.TB, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatalf("atoi(%q): %v", s, err)
	}
	return n
}

func killPid(pid int) {
	if pid > 1 {
		_ = syscall.Kill(pid, syscall.SIGKILL) // Best effort: test cleanup.
	}
}

// waitOutput follows a stream until it has produced exactly want's bytes
// as a prefix (completes before 10 s).
func waitOutput(t testing.TB, e *Engine, id string, s Stream, want string) {
	t.Helper()
	if err := awaitStream(e, id, s, want, 10*time.Second); err != nil {
		t.Fatal(err)
	}
}

// awaitOutput is waitOutput on stdout for goroutines other than the
// test's: it returns the failure.
func awaitOutput(e *Engine, id, want string, within time.Duration) error {
	return awaitStream(e, id, Stdout, want, within)
}

func awaitStream(e *Engine, id string, s Stream, want string, within time.Duration) error {
	deadline := time.Now().Add(within)
	var r *OutputReader
	var err error
	for time.Now().Before(deadline) { // the record may not exist yet
		if r, err = e.OpenOutput(id, s, 0); err == nil {
			break
		}
		time.Sleep(time.Millisecond)
	}
	if err != nil {
		return fmt.Errorf("OpenOutput(%s): %w", id, err)
	}
	defer r.Close()
	got := make([]byte, 0, len(want))
	buf := make([]byte, 4096)
	timer := time.AfterFunc(time.Until(deadline), func() { _ = r.Close() })
	defer timer.Stop()
	for len(got) < len(want) {
		n, err := r.Read(buf)
		got = append(got, buf[:n]...)
		if err != nil {
			return fmt.Errorf("waiting for %q on %s: got %q, %w", want, id, got, err)
		}
	}
	if string(got[:len(want)]) != want {
		return fmt.Errorf("output of %s = %q, want prefix %q", id, got, want)
	}
	return nil
}

// exec0 runs a tool for a test observation (ps); not a child of the engine.
func exec0(name string, args ...string) (string, error) {
	out, err := osexec.Command(name, args...).Output()
	return string(out), err
}

// interruptAtGo runs cmd (which prints "go" once what is to be
// interrupted runs) in session sid as exec id, interrupts it at the "go",
// and returns its result (within 5 s).
func interruptAtGo(t *testing.T, e *Engine, sid, id, cmd string) ExecResult {
	t.Helper()
	done := goExec(e, sid, id, cmd)
	waitOutput(t, e, id, Stdout, "go\n")
	if err := e.InterruptSession(sid); err != nil {
		t.Fatal(err)
	}
	return recvOrTimeout(t, done, 5*time.Second, "interrupted command")
}

// goExec runs cmd in session sid as exec id on a goroutine; the result
// (zero on error) arrives on the returned channel.
func goExec(e *Engine, sid, id, cmd string) <-chan ExecResult {
	done := make(chan ExecResult, 1)
	go func() {
		r, _ := e.Exec(context.Background(), ExecRequest{ID: id, SessionID: sid, Command: cmd})
		done <- r
	}()
	return done
}

// repeatUntil calls fn up to n times, until stop is closed.
func repeatUntil(stop <-chan struct{}, n int, fn func()) {
	for range n {
		select {
		case <-stop:
			return
		default:
		}
		fn()
	}
}
