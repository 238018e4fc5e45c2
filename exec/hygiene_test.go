package exec

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/muxd/muxd/internal/proc"
)

// countFiles counts the entries under dir.
func countFiles(t *testing.T, dir string) int {
	t.Helper()
	n := 0
	_ = filepath.Walk(dir, func(string, os.FileInfo, error) error { n++; return nil })
	return n
}

func TestManyCommandsLeakNoFDsFIFOsOrTempFiles(t *testing.T) {
	n := 200
	if isLong() {
		n = 3000
	}
	e := newTestEngine(t, func(c *Config) { c.RetainCount = 8 })
	sid := newSession(t, e, SessionOptions{})
	s, _ := e.session(sid)
	// Warm up, then measure.
	mustExec(t, e, ExecRequest{SessionID: sid, Command: "true"})
	mustExec(t, e, ExecRequest{Command: "true"})
	fds, files, sessFiles := openFDs(t), countFiles(t, e.cfg.DataDir), countFiles(t, s.dir)
	for i := range n {
		stdin := []byte(nil)
		if i%3 == 0 {
			stdin = []byte("in")
		}
		mustExec(t, e, ExecRequest{SessionID: sid, Command: "echo " + strconv.Itoa(i) + "; cat >&2", Stdin: stdin,
			Env: map[string]*string{"I": strp(strconv.Itoa(i))}, Cwd: os.TempDir()})
		mustExec(t, e, ExecRequest{Command: "echo " + strconv.Itoa(i), Stdin: stdin})
	}
	if got := openFDs(t); got > fds+2 {
		t.Errorf("fds: %d before, %d after %d commands", fds, got, 2*n)
	}
	if got := countFiles(t, s.dir); got > sessFiles+1 {
		t.Errorf("session dir: %d entries before, %d after", sessFiles, got)
	}
	if got := countFiles(t, e.cfg.DataDir); got > files+2*8+2 {
		t.Errorf("data dir: %d entries before, %d after (retain 8)", files, got)
	}
}

func TestCloseKillsEveryTreeAndRemovesFiles(t *testing.T) {
	cfg := Config{DataDir: filepath.Join(t.TempDir(), "data"), KillGrace: 100 * time.Millisecond}
	e, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	sid := newSession(t, e, SessionOptions{})
	r := mustExec(t, e, ExecRequest{SessionID: sid, Command: "sleep 100 & echo $!"})
	bg := atoi(t, string(r.Stdout[:len(r.Stdout)-1]))
	p := startProc(t, e, ProcessRequest{Command: "trap '' TERM; sleep 100"})
	busy := make(chan error, 1)
	go func() {
		_, err := e.Exec(context.Background(), ExecRequest{SessionID: sid, Command: "sleep 100"})
		busy <- err
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	start := time.Now()
	if err := e.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("Close took %v", d)
	}
	recvOrTimeout(t, busy, 5*time.Second, "running session exec")
	for _, pid := range []int{bg, p.Pid} {
		if pidAlive(pid) {
			t.Errorf("pid %d survived Close", pid)
			killPid(pid)
		}
	}
	if got := countFiles(t, cfg.DataDir); got > 1 {
		t.Errorf("data dir keeps %d entries after Close", got)
	}
	if _, err := e.Exec(ctx, ExecRequest{Command: "true"}); err == nil {
		t.Errorf("Exec after Close succeeded")
	}
}

// TestExitCodesSurviveOrphanReaping runs commands while internal/proc's
// orphan reaper runs as a subreaper: no exit status may be lost.
func TestExitCodesSurviveOrphanReaping(t *testing.T) {
	if err := proc.BecomeSubreaper(); err != nil {
		t.Skipf("subreaper: %v", err)
	}
	e := newTestEngine(t)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
				proc.ReapOrphans()
				time.Sleep(time.Millisecond) // a reaper loop, not synchronization
			}
		}
	})
	defer func() { close(stop); wg.Wait() }()
	for i := range 50 {
		want := i % 7
		r := mustExec(t, e, ExecRequest{Command: "(sleep 0.01 &) ; exit " + strconv.Itoa(want)})
		if code(r) != want {
			t.Fatalf("run %d: exit %d, want %d", i, code(r), want)
		}
	}
}

func TestCloseLeavesNoGoroutines(t *testing.T) {
	before := runtime.NumGoroutine()
	cfg := Config{DataDir: filepath.Join(t.TempDir(), "data"), KillGrace: 100 * time.Millisecond}
	e, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	sid := newSession(t, e, SessionOptions{})
	mustExec(t, e, ExecRequest{SessionID: sid, Command: "sleep 100 & echo started; sleep 0.01"})
	mustExec(t, e, ExecRequest{Command: "echo hi"})
	startProc(t, e, ProcessRequest{Command: "sleep 100", Stdin: true})
	p := startProc(t, e, ProcessRequest{Command: "echo x"})
	r, _ := e.OpenOutput(p.ID, Stdout, 0)
	defer r.Close()
	if err := e.Close(ctxT(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before+1 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond) // bounded wait for exiting goroutines
	}
	if n := runtime.NumGoroutine(); n > before+1 {
		buf := make([]byte, 1<<16)
		t.Errorf("%d goroutines before, %d after Close:\n%s", before, n, buf[:runtime.Stack(buf, true)])
	}
}

// Programs a session command starts see fds 0-2 only: not the command
// pipe, the control pipe or the saved copies bash keeps, whether the
// command has stdin bytes or not.
func TestSessionCommandsInheritOnlyStdio(t *testing.T) {
	if err := proc.CloseInheritedOnExec(); err != nil { // what the daemon does at start
		t.Fatal(err)
	}
	e := newTestEngine(t)
	sid := newSession(t, e, SessionOptions{})
	for _, stdin := range [][]byte{nil, []byte("x")} {
		// ls opens /proc/self/fd itself, as fd 3.
		r, err := e.Exec(ctxT(t, 10*time.Second), ExecRequest{SessionID: sid, Command: "ls /proc/self/fd | tr '\\n' ' '", Stdin: stdin})
		if err != nil {
			t.Fatal(err)
		}
		if got := string(r.Stdout); got != "0 1 2 3 " {
			t.Errorf("stdin %q: fds %q, want 0 1 2 3", stdin, got)
		}
	}
}
