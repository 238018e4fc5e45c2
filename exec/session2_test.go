package exec

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func TestSessionOutputIsByteExact(t *testing.T) {
	e := newTestEngine(t)
	sid := newSession(t, e, SessionOptions{})
	f := filepath.Join(t.TempDir(), "rand")
	r := mustExec(t, e, ExecRequest{SessionID: sid, Command: "head -c 1M /dev/urandom > " + f + "; cat " + f + `; printf 'a\0b\r\nno-newline' >&2`, MaxOutput: 2 << 20})
	want, err := os.ReadFile(f)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(r.Stdout, want) {
		t.Errorf("stdout: %d bytes, want the file's %d exactly", len(r.Stdout), len(want))
	}
	if string(r.Stderr) != "a\x00b\r\nno-newline" {
		t.Errorf("stderr = %q", r.Stderr)
	}
	r = mustExec(t, e, ExecRequest{SessionID: sid, Command: "cat; read x; echo rc=$?", Stdin: []byte("in\x00")})
	if string(r.Stdout) != "in\x00rc=1\n" {
		t.Errorf("stdin: %q", r.Stdout)
	}
}

func TestSessionExecCancelInterruptsAndKeepsSession(t *testing.T) {
	e := newTestEngine(t)
	sid := newSession(t, e, SessionOptions{})
	mustExec(t, e, ExecRequest{SessionID: sid, Command: "y=still"})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan ExecResult, 1)
	go func() {
		r, _ := e.Exec(ctx, ExecRequest{ID: "cx", SessionID: sid, Command: "echo go; while :; do :; done"})
		done <- r
	}()
	waitOutput(t, e, "cx", Stdout, "go\n")
	cancel()
	r := recvOrTimeout(t, done, 5*time.Second, "cancelled session exec")
	if code(r) != 130 {
		t.Errorf("cancelled exec code %d, want 130", code(r))
	}
	if r := mustExec(t, e, ExecRequest{SessionID: sid, Command: "echo $y"}); string(r.Stdout) != "still\n" {
		t.Errorf("session after cancel: %q", r.Stdout)
	}
}

func TestSessionExecCancelIgnoringSIGINTKillsSession(t *testing.T) {
	e := newTestEngine(t, func(c *Config) { c.KillGrace = 100 * time.Millisecond })
	sid := newSession(t, e, SessionOptions{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan ExecResult, 1)
	go func() {
		r, _ := e.Exec(ctx, ExecRequest{ID: "ig", SessionID: sid, Command: "trap '' INT; echo go; sleep 100"})
		done <- r
	}()
	waitOutput(t, e, "ig", Stdout, "go\n")
	cancel()
	r := recvOrTimeout(t, done, 5*time.Second, "cancelled exec ignoring SIGINT")
	if r.ExitCode != nil && *r.ExitCode == 0 {
		t.Errorf("cancelled exec reported success")
	}
	if _, err := e.Exec(ctxT(t, 5*time.Second), ExecRequest{SessionID: sid, Command: "true"}); !errors.Is(err, ErrSessionDead) {
		t.Errorf("after a cancel that SIGINT could not stop: %v, want ErrSessionDead", err)
	}
}

func TestKillAndSignalSessionExecRecord(t *testing.T) {
	e := newTestEngine(t)
	sid := newSession(t, e, SessionOptions{})
	done := goExec(e, sid, "k1", "echo go; sleep 100")
	waitOutput(t, e, "k1", Stdout, "go\n")
	if err := e.KillProcess("k1", unix.SIGINT, 0); err != nil { // INT = Ctrl-C, the session lives
		t.Fatal(err)
	}
	if r := recvOrTimeout(t, done, 5*time.Second, "interrupted record"); code(r) != 130 {
		t.Errorf("INT via KillProcess: code %d, want 130", code(r))
	}
	done = goExec(e, sid, "k2", "echo go; sleep 100")
	waitOutput(t, e, "k2", Stdout, "go\n")
	if err := e.KillProcess("k2", unix.SIGTERM, 100*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	recvOrTimeout(t, done, 5*time.Second, "killed record")
	if info, _ := e.GetProcess("k2"); info.Status == StatusRunning || (info.ExitCode != nil && *info.ExitCode == 0) {
		t.Errorf("killed session record: %+v", info)
	}
	if _, err := e.Exec(ctxT(t, 5*time.Second), ExecRequest{SessionID: sid, Command: "true"}); !errors.Is(err, ErrSessionDead) {
		t.Errorf("after killing its command: %v, want ErrSessionDead", err)
	}
}

func TestRetentionByteBudgetDropsOldestEnded(t *testing.T) {
	e := newTestEngine(t, func(c *Config) { c.RetainBytes = 2500 })
	var ids []string
	for range 5 {
		r := mustExec(t, e, ExecRequest{Command: "head -c 1000 /dev/zero"})
		ids = append(ids, r.ID)
	}
	for i, id := range ids {
		_, err := e.GetProcess(id)
		if kept := err == nil; kept != (i >= 3) {
			t.Errorf("record %d kept=%v, want only the newest two (2000 B ≤ 2500 B)", i, kept)
		}
	}
	// A record larger than the whole budget is not dropped by its own
	// retire: the exec's caller gets its output, a waiter its end.
	if r := mustExec(t, e, ExecRequest{Command: "head -c 4000 /dev/zero"}); len(r.Stdout) != 4000 || r.StdoutTruncated {
		t.Errorf("an exec larger than the retention budget: %d bytes, truncated %v; want all 4000", len(r.Stdout), r.StdoutTruncated)
	}
	big := startProc(t, e, ProcessRequest{Command: "head -c 4000 /dev/zero"})
	if info := waitProc(t, e, big.ID); info.ExitCode == nil || *info.ExitCode != 0 || info.StdoutBytes != 4000 {
		t.Errorf("a process larger than the retention budget, after its end: %+v", info)
	}
	// A running process is never dropped by retention.
	p := startProc(t, e, ProcessRequest{Command: "head -c 3000 /dev/zero; sleep 100"})
	waitOutputLen(t, e, p.ID, 3000)
	mustExec(t, e, ExecRequest{Command: "true"})
	if info, err := e.GetProcess(p.ID); err != nil || info.Status != StatusRunning {
		t.Errorf("running process dropped: %v", err)
	}
	_ = e.KillProcess(p.ID, unix.SIGKILL, 0)
}

// An agent starts a build, then polls with execs: the build's end must
// outlast any number of exec records.
func TestRetentionDropsExecRecordsBeforeStartedProcesses(t *testing.T) {
	e := newTestEngine(t, func(c *Config) { c.RetainCount = 4 })
	build := startProc(t, e, ProcessRequest{Command: "echo build-ok; exit 3"})
	waitProc(t, e, build.ID)
	var last string
	for range 10 {
		last = mustExec(t, e, ExecRequest{Command: "true"}).ID
	}
	info, err := e.GetProcess(build.ID)
	if err != nil || info.ExitCode == nil || *info.ExitCode != 3 {
		t.Fatalf("the build's record after 10 execs (retain count 4): %+v, %v", info, err)
	}
	if _, err := e.GetProcess(last); err != nil {
		t.Errorf("the newest exec record: %v", err)
	}
	e.mu.Lock()
	n := len(e.ended)
	e.mu.Unlock()
	if n > 4 {
		t.Errorf("%d records kept, want ≤ 4", n)
	}
}

// waitOutputLen waits until a stream of id has n bytes.
func waitOutputLen(t *testing.T, e *Engine, id string, n int64) {
	t.Helper()
	r, err := e.OpenOutput(id, Stdout, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	timer := time.AfterFunc(10*time.Second, func() { _ = r.Close() })
	defer timer.Stop()
	buf := make([]byte, 4096)
	for r.Offset() < n {
		if _, err := r.Read(buf); err != nil {
			t.Fatalf("waiting for %d bytes: %v", n, err)
		}
	}
}

func TestSessionCreateErrors(t *testing.T) {
	e := newTestEngine(t, func(c *Config) { c.MaxSessions = 2 })
	newSession(t, e, SessionOptions{ID: "a"})
	tests := []struct {
		name string
		o    SessionOptions
		want error
	}{
		{"duplicate id", SessionOptions{ID: "a"}, ErrAlreadyExists},
		{"bad env name", SessionOptions{Env: map[string]*string{"A=B": strp("x")}}, ErrInvalid},
		{"negative timeout", SessionOptions{CommandTimeout: -1}, ErrInvalid},
		// The kernel's limit per string (E2BIG): the client's fault.
		{"env value over 128 KiB", SessionOptions{Env: map[string]*string{"BIG": strp(strings.Repeat("a", 200_000))}}, ErrInvalid},
		// A BASH_ENV that exits ends the shell before its first command.
		{"a shell that ends at start", SessionOptions{Env: map[string]*string{"BASH_ENV": strp(exitScript(t))}}, ErrInvalid},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := e.CreateSession(ctxT(t, 5*time.Second), tc.o); !errors.Is(err, tc.want) {
				t.Errorf("err = %v, want %v", err, tc.want)
			}
		})
	}
	newSession(t, e, SessionOptions{ID: "b"})
	if _, err := e.CreateSession(ctxT(t, 5*time.Second), SessionOptions{}); !errors.Is(err, ErrLimit) {
		t.Errorf("past MaxSessions: %v, want ErrLimit", err)
	}
	if err := e.DeleteSession("a"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Exec(ctxT(t, 5*time.Second), ExecRequest{SessionID: "a", Command: "true"}); !errors.Is(err, ErrNotFound) {
		t.Errorf("exec on deleted session: %v, want ErrNotFound", err)
	}
	if l := e.ListSessions(); len(l) != 1 || l[0].ID != "b" || !l[0].Alive || l[0].Busy {
		t.Errorf("ListSessions = %+v", l)
	}
	// At the limit, the oldest dead session makes room: it is listed until
	// then, but must not keep a live one from starting.
	newSession(t, e, SessionOptions{ID: "c"})
	mustExec(t, e, ExecRequest{SessionID: "b", Command: "exit 3"})
	if _, err := e.CreateSession(ctxT(t, 5*time.Second), SessionOptions{ID: "d"}); err != nil {
		t.Fatalf("with one of two sessions dead: %v", err)
	}
	if _, err := e.Exec(ctxT(t, 5*time.Second), ExecRequest{SessionID: "b", Command: "true"}); !errors.Is(err, ErrNotFound) {
		t.Errorf("the pruned dead session: %v, want ErrNotFound", err)
	}
	if _, err := e.CreateSession(ctxT(t, 5*time.Second), SessionOptions{}); !errors.Is(err, ErrLimit) {
		t.Errorf("with two live sessions: %v, want ErrLimit", err)
	}
	if l := e.ListSessions(); len(l) != 2 || l[0].ID != "c" || l[1].ID != "d" || !l[0].Alive || l[0].Busy {
		t.Errorf("ListSessions = %+v", l)
	}
}

func TestSessionCommandTimeoutDefault(t *testing.T) {
	e := newTestEngine(t)
	sid := newSession(t, e, SessionOptions{CommandTimeout: 200 * time.Millisecond})
	r := mustExec(t, e, ExecRequest{SessionID: sid, Command: "sleep 100"})
	if !r.TimedOut {
		t.Errorf("session default timeout not applied: %+v", r)
	}
}

func TestSnapshotProcessOverridesAndStdin(t *testing.T) {
	e := newTestEngine(t)
	dir := t.TempDir()
	sid := newSession(t, e, SessionOptions{})
	mustExec(t, e, ExecRequest{SessionID: sid, Command: "export A=session B=kept; cd /"})
	p := startProc(t, e, ProcessRequest{SessionID: sid, Command: "read x; echo $x $A ${B-unset} $PWD", Stdin: true,
		Cwd: dir, Env: map[string]*string{"A": strp("over"), "B": nil}})
	if _, err := e.WriteStdin(p.ID, []byte("in\n")); err != nil {
		t.Fatal(err)
	}
	waitProc(t, e, p.ID)
	data, _, _, _ := e.ReadOutput(p.ID, Stdout, 0, 100)
	if want := "in over unset " + dir + "\n"; string(data) != want {
		t.Errorf("stdout %q, want %q", data, want)
	}
	// The session itself is unchanged.
	if r := mustExec(t, e, ExecRequest{SessionID: sid, Command: "echo $A $B $PWD"}); string(r.Stdout) != "session kept /\n" {
		t.Errorf("session after snapshot process: %q", r.Stdout)
	}
}

// An ID is not taken over while its exec has yet to read the result it
// answers with (the record is pinned between its end and the answer).
func TestReusedIDWaitsForTheExecStillAnswering(t *testing.T) {
	e := newTestEngine(t)
	mustExec(t, e, ExecRequest{ID: "x", Command: "echo one"})
	e.mu.Lock()
	e.procs["x"].pinned++ // as between p.end() and the result's read
	e.mu.Unlock()
	if _, err := e.Exec(ctxT(t, 5*time.Second), ExecRequest{ID: "x", Command: "echo two"}); !errors.Is(err, ErrAlreadyExists) {
		t.Fatalf("reusing the ID of an exec still answering: %v, want ErrAlreadyExists", err)
	}
	e.mu.Lock()
	e.procs["x"].pinned--
	e.mu.Unlock()
	if r := mustExec(t, e, ExecRequest{ID: "x", Command: "echo two"}); string(r.Stdout) != "two\n" {
		t.Fatalf("reusing the ID once answered: %q", r.Stdout)
	}
}

// TestSessionFirstUsesInParallel: clients that each create a session by
// name on first use (already_exists meaning "someone else made it") and
// run a command in it: those whose create lost the race wait for the
// shell instead of finding no session.
func TestSessionFirstUsesInParallel(t *testing.T) {
	e := newTestEngine(t)
	const n = 8
	errs := make(chan error, 2*n)
	for i := range n {
		go func() {
			ctx := ctxT(t, 10*time.Second)
			if _, err := e.CreateSession(ctx, SessionOptions{ID: "shared"}); err != nil && !errors.Is(err, ErrAlreadyExists) {
				errs <- err
				return
			}
			r, err := e.Exec(ctx, ExecRequest{SessionID: "shared", Command: fmt.Sprintf("echo run%d", i)})
			if err == nil && string(r.Stdout) != fmt.Sprintf("run%d\n", i) {
				err = fmt.Errorf("stdout %q", r.Stdout)
			}
			errs <- err
		}()
		go func() {
			_, err := e.StartProcess(ctxT(t, 10*time.Second), ProcessRequest{SessionID: "shared", Command: "true"})
			if errors.Is(err, ErrNotFound) {
				err = nil // asked before any create began: fair
			}
			errs <- err
		}()
	}
	for range 2 * n {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}

// TestKillDropsAQueuedSessionExec: session execs waiting for their turn
// are not registered yet, but a kill by their id drops them: they never
// run. A running process that holds the id is the kill's target instead.
func TestKillDropsAQueuedSessionExec(t *testing.T) {
	e := newTestEngine(t)
	sid := newSession(t, e, SessionOptions{})
	dir := t.TempDir()
	busy := make(chan error, 1)
	go func() {
		_, err := e.Exec(ctxT(t, 10*time.Second), ExecRequest{SessionID: sid, Command: "sleep 1"})
		busy <- err
	}()
	waitQueued := func(id string, n int) { waitQueuedID(t, e, id, n) }
	queue := func(id, file string) chan error {
		done := make(chan error, 1)
		go func() {
			_, err := e.Exec(ctxT(t, 10*time.Second), ExecRequest{ID: id, SessionID: sid, Command: "touch " + dir + "/" + file})
			done <- err
		}()
		return done
	}
	for range 500 { // the sleep has the turn first
		if s, _ := e.session(sid); s != nil && s.info().Busy {
			break
		}
		time.Sleep(2 * time.Millisecond)
	}
	// Two execs queued under one id: the kill drops both.
	q1 := queue("q1", "ran1")
	waitQueued("q1", 1)
	q2 := queue("q1", "ran2")
	waitQueued("q1", 2)
	// A running process holds id "held": a kill of it is the process's.
	held, err := e.StartProcess(ctxT(t, 10*time.Second), ProcessRequest{ID: "held", Command: "sleep 30"})
	if err != nil {
		t.Fatal(err)
	}
	q3 := queue("held", "ran3")
	waitQueued("held", 1)
	if err := e.KillProcess("q1", unix.SIGTERM, 0); err != nil {
		t.Fatalf("kill of queued execs: %v", err)
	}
	for i, q := range []chan error{q1, q2} {
		if err := <-q; !errors.Is(err, context.Canceled) {
			t.Fatalf("queued exec %d: %v, want it cancelled", i+1, err)
		}
	}
	if err := e.KillProcess("held", unix.SIGKILL, 0); err != nil {
		t.Fatal(err)
	}
	if info, err := e.WaitProcess(ctxT(t, 10*time.Second), held.ID); err != nil || info.Status != "killed" {
		t.Fatalf("the running holder of the id after the kill: %+v %v", info, err)
	}
	if err := <-busy; err != nil {
		t.Fatal(err)
	}
	<-q3 // its turn came: it ran (the holder had ended) or was refused
	for _, f := range []string{"ran1", "ran2"} {
		if _, err := os.Stat(dir + "/" + f); !os.IsNotExist(err) {
			t.Fatalf("a dropped exec ran (%s): %v", f, err)
		}
	}
}

// waitQueuedID waits until n requests wait for a session's turn under id.
func waitQueuedID(t *testing.T, e *Engine, id string, n int) {
	t.Helper()
	for i := 0; ; i++ {
		e.mu.Lock()
		got := len(e.queued[id])
		e.mu.Unlock()
		if got >= n {
			return
		}
		if i > 2000 {
			t.Fatalf("%d requests of id %q never queued", n, id)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestQueuedSessionStartRunsOnce: a process.start from a busy session
// waits for the turn under its id. The same id sent again meanwhile (a
// client that lost the first answer with its socket and found nothing
// under the id) is refused, so the command runs once; a kill by the id
// drops the waiting start, which then never runs.
func TestQueuedSessionStartRunsOnce(t *testing.T) {
	e := newTestEngine(t)
	sid := newSession(t, e, SessionOptions{})
	dir := t.TempDir()
	gate := filepath.Join(dir, "gate")
	busy := make(chan error, 1)
	go func() {
		// Holds the turn until the gate file exists (at most ~10 s).
		_, err := e.Exec(ctxT(t, 20*time.Second), ExecRequest{SessionID: sid,
			Command: "for i in $(seq 1000); do [[ -e " + gate + " ]] && break; sleep 0.01; done"})
		busy <- err
	}()
	for range 500 {
		if s, _ := e.session(sid); s != nil && s.info().Busy {
			break
		}
		time.Sleep(2 * time.Millisecond)
	}
	start := func(id string) chan error {
		done := make(chan error, 1)
		go func() {
			_, err := e.StartProcess(ctxT(t, 20*time.Second), ProcessRequest{ID: id, SessionID: sid,
				Command: "echo ran >> " + dir + "/" + id})
			done <- err
		}()
		return done
	}
	first := start("once")
	waitQueuedID(t, e, "once", 1)
	if _, err := e.StartProcess(ctxT(t, 10*time.Second), ProcessRequest{ID: "once", SessionID: sid, Command: "echo again >> " + dir + "/once"}); !errors.Is(err, ErrAlreadyExists) {
		t.Fatalf("the same id again while the first waits: %v, want ErrAlreadyExists", err)
	}
	// Nor does a start that would run at once, nor an exec.
	if _, err := e.StartProcess(ctxT(t, 10*time.Second), ProcessRequest{ID: "once", Command: "echo stateless >> " + dir + "/once"}); !errors.Is(err, ErrAlreadyExists) {
		t.Fatalf("a start without session under the waiting id: %v, want ErrAlreadyExists", err)
	}
	if _, err := e.Exec(ctxT(t, 10*time.Second), ExecRequest{ID: "once", Command: "echo exec >> " + dir + "/once"}); !errors.Is(err, ErrAlreadyExists) {
		t.Fatalf("an exec under the waiting id: %v, want ErrAlreadyExists", err)
	}
	dropped := start("dropped")
	waitQueuedID(t, e, "dropped", 1)
	if err := e.KillProcess("dropped", unix.SIGTERM, 0); err != nil {
		t.Fatalf("kill of a waiting start: %v", err)
	}
	// Started again at once: the dropped one no longer holds the id,
	// even before its goroutine woke.
	again := start("dropped")
	if err := <-dropped; !errors.Is(err, context.Canceled) {
		t.Fatalf("the killed start: %v, want it cancelled", err)
	}
	waitQueuedID(t, e, "dropped", 1)
	if err := os.WriteFile(gate, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := <-busy; err != nil {
		t.Fatal(err)
	}
	if err := <-first; err != nil {
		t.Fatalf("the first start: %v", err)
	}
	if err := <-again; err != nil {
		t.Fatalf("the start sent again after the kill: %v", err)
	}
	if info := waitProc(t, e, "dropped"); info.ExitCode == nil || *info.ExitCode != 0 {
		t.Fatalf("the start sent again after the kill: %+v", info)
	}
	if info := waitProc(t, e, "once"); info.ExitCode == nil || *info.ExitCode != 0 {
		t.Fatalf("the first start: %+v", info)
	}
	if b, err := os.ReadFile(dir + "/once"); err != nil || string(b) != "ran\n" {
		t.Fatalf("runs of the start: %q %v, want one", b, err)
	}
	if b, err := os.ReadFile(dir + "/dropped"); err != nil || string(b) != "ran\n" {
		t.Fatalf("runs of the killed start and the one sent after it: %q %v, want one", b, err)
	}
	e.mu.Lock()
	left := len(e.queued)
	e.mu.Unlock()
	if left != 0 {
		t.Fatalf("%d ids still queued", left)
	}
}

// session.interrupt reaches only a running command, never muxd's own
// round trips: an interrupt that came as a command ended hit the state
// snapshot of a process.start that took the turn next, and the process
// started without the session's functions, aliases and options, or
// failed with an internal error (a chaos trial: up to 94 in 300 starts
// with 4 goroutines interrupting while 3 ran execs).
func TestInterruptsNeverCutASnapshot(t *testing.T) {
	e := newTestEngine(t)
	sid := newSession(t, e, SessionOptions{})
	// Many functions: a snapshot long enough to be hit.
	mustExec(t, e, ExecRequest{SessionID: sid, Command: `umask 0027; alias ll='ls -l'; set -C; ` +
		`for i in $(seq 2000); do eval "f$i() { echo $i; }"; done`})
	const show = `echo "$(umask)|$(type -t f2000)|$(alias ll 2>/dev/null)|${-//[^C]/}"`
	const want = "0027|function|alias ll='ls -l'|C\n"
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(2)
		go func() { // short commands, each ending under the interrupts
			defer wg.Done()
			repeatUntil(stop, 2000, func() {
				_, _ = e.Exec(ctxT(t, 20*time.Second), ExecRequest{SessionID: sid, Command: "true"})
			})
		}()
		go func() {
			defer wg.Done()
			repeatUntil(stop, 200000, func() { _ = e.InterruptSession(sid); runtime.Gosched() })
		}()
	}
	bad := 0
	for i := range 60 {
		p, err := e.StartProcess(ctxT(t, 20*time.Second), ProcessRequest{SessionID: sid, Command: show})
		if err != nil {
			t.Errorf("start %d: %v", i, err)
			bad++
			continue
		}
		waitProc(t, e, p.ID)
		if out, _, _, _ := e.ReadOutput(p.ID, Stdout, 0, 4096); string(out) != want {
			t.Errorf("start %d saw %q, want %q", i, out, want)
			bad++
		}
		if bad > 5 {
			break
		}
	}
	close(stop)
	wg.Wait()
}

// A process started from a session whose directory is gone does not run
// somewhere else (muxd's own cwd): it fails, saying why, unless it was
// given a cwd of its own.
func TestSnapshotProcessOfASessionInADeletedDirectory(t *testing.T) {
	e := newTestEngine(t)
	gone := filepath.Join(t.TempDir(), "gone")
	sid := newSession(t, e, SessionOptions{})
	mustExec(t, e, ExecRequest{SessionID: sid, Command: "mkdir " + gone + " && cd " + gone + " && rmdir " + gone})
	p := startProc(t, e, ProcessRequest{SessionID: sid, Command: "echo ran in $(pwd)"})
	info := waitProc(t, e, p.ID)
	out, _, _, _ := e.ReadOutput(p.ID, Stdout, 0, 4096)
	errOut, _, _, _ := e.ReadOutput(p.ID, Stderr, 0, 4096)
	if info.ExitCode == nil || *info.ExitCode != 1 || len(out) != 0 || !strings.Contains(string(errOut), gone+" no longer exists") {
		t.Fatalf("exit %v, stdout %q, stderr %q; want 1 and the reason", info.ExitCode, out, errOut)
	}
	p = startProc(t, e, ProcessRequest{SessionID: sid, Command: "pwd", Cwd: "."})
	if info = waitProc(t, e, p.ID); info.ExitCode == nil || *info.ExitCode != 1 {
		t.Fatalf("with a relative cwd: exit %v, want 1", info.ExitCode)
	}
	dir := t.TempDir()
	p = startProc(t, e, ProcessRequest{SessionID: sid, Command: "pwd", Cwd: dir})
	waitProc(t, e, p.ID)
	if out, _, _, _ = e.ReadOutput(p.ID, Stdout, 0, 4096); string(out) != dir+"\n" {
		t.Fatalf("with a cwd of its own: %q, want %q", out, dir)
	}
}

// Execs with stdin and overrides, two at a time on one session: each
// command's files are its own until its turn ends (they were removed
// after it, when the next command had written its own).
func TestSessionCommandFilesStayTheirsUntilTheTurnEnds(t *testing.T) {
	e := newTestEngine(t)
	sid := newSession(t, e, SessionOptions{})
	const n = 150
	errs := make(chan error, 2*n)
	var wg sync.WaitGroup
	for g := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range n {
				want := fmt.Sprintf("%d-%d", g, i)
				r, err := e.Exec(ctxT(t, 20*time.Second), ExecRequest{SessionID: sid, Command: "cat; pwd", Stdin: []byte(want + "\n"), Cwd: "/"})
				if err != nil || string(r.Stdout) != want+"\n/\n" {
					errs <- fmt.Errorf("exec %s: %q %q %v", want, r.Stdout, r.Stderr, err)
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// exitScript writes a bash file that exits 9, for BASH_ENV.
func exitScript(t *testing.T) string {
	path := filepath.Join(t.TempDir(), "exit9")
	if err := os.WriteFile(path, []byte("exit 9\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// Arguments and environment the kernel refuses (E2BIG) are the caller's
// fault, in stateless execs and processes too: invalid, not internal.
func TestEnvTooBigForTheKernelIsInvalid(t *testing.T) {
	e := newTestEngine(t)
	env := map[string]*string{"BIG": strp(strings.Repeat("a", 200_000))}
	if _, err := e.Exec(ctxT(t, 5*time.Second), ExecRequest{Command: "true", Env: env}); !errors.Is(err, ErrInvalid) {
		t.Errorf("Exec: %v, want ErrInvalid", err)
	}
	if _, err := e.StartProcess(ctxT(t, 5*time.Second), ProcessRequest{Command: "true", Env: env}); !errors.Is(err, ErrInvalid) {
		t.Errorf("StartProcess: %v, want ErrInvalid", err)
	}
}

// A command that ends its session says so in its own result (it looked
// like any other, and only the next call failed), and why.
func TestExecResultSaysTheSessionEnded(t *testing.T) {
	e := newTestEngine(t)
	for _, tt := range []struct {
		command string
		ended   string // in the reason; "" = the session lives
	}{
		{"false", ""},
		{"exit 3", "exit 3"},
		{"set -e; false", "exit 1"},
		{"set -u; echo $UNSET_ZZ", "UNSET_ZZ"},
	} {
		sid := newSession(t, e, SessionOptions{})
		r := mustExec(t, e, ExecRequest{SessionID: sid, Command: tt.command})
		if tt.ended == "" && r.SessionEnded != "" || tt.ended != "" && !strings.Contains(r.SessionEnded, tt.ended) {
			t.Errorf("%q: SessionEnded %q, want it to hold %q", tt.command, r.SessionEnded, tt.ended)
		}
	}
}
