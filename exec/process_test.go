package exec

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	osexec "os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func startProc(t testing.TB, e *Engine, req ProcessRequest) ProcessInfo {
	t.Helper()
	p, err := e.StartProcess(ctxT(t, 10*time.Second), req)
	if err != nil {
		t.Fatalf("StartProcess(%q): %v", req.Command, err)
	}
	return p
}

func waitProc(t testing.TB, e *Engine, id string) ProcessInfo {
	t.Helper()
	info, err := e.WaitProcess(ctxT(t, 20*time.Second), id)
	if err != nil {
		t.Fatalf("WaitProcess(%s): %v", id, err)
	}
	return info
}

func TestProcessLifecycle(t *testing.T) {
	e := newTestEngine(t)
	events := make(chan Event, 16)
	defer e.Subscribe(func(ev Event) { events <- ev })()
	p := startProc(t, e, ProcessRequest{ID: "p1", Command: "echo out; echo err >&2; exit 4"})
	if p.Pid <= 0 || p.Instance == "" || p.ID != "p1" {
		t.Fatalf("started: %+v", p)
	}
	info := waitProc(t, e, "p1")
	if info.Status != StatusExited || info.ExitCode == nil || *info.ExitCode != 4 ||
		info.StdoutBytes != 4 || info.StderrBytes != 4 || info.EndedAt == nil {
		t.Fatalf("ended: %+v", info)
	}
	if ev := recvOrTimeout(t, events, 5*time.Second, "started"); ev.Kind != "process.started" {
		t.Errorf("first event %q", ev.Kind)
	}
	if ev := recvOrTimeout(t, events, 5*time.Second, "exited"); ev.Kind != "process.exited" || ev.Process.StdoutBytes != 4 {
		t.Errorf("second event %+v", ev)
	}
	if l := e.ListProcesses(""); len(l) != 1 || l[0].ID != "p1" {
		t.Errorf("list = %+v", l)
	}
	// A reused id of an ended process is a new instance.
	p2 := startProc(t, e, ProcessRequest{ID: "p1", Command: "true"})
	if p2.Instance == p.Instance {
		t.Errorf("reused id kept instance %q", p.Instance)
	}
	waitProc(t, e, "p1")
	if err := e.RemoveProcess("p1"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.GetProcess("p1"); !errors.Is(err, ErrNotFound) {
		t.Errorf("after remove: %v", err)
	}
}

func TestProcessFollowReaderGetsEveryByteThenEOF(t *testing.T) {
	e := newTestEngine(t)
	p := startProc(t, e, ProcessRequest{Command: "for i in $(seq 1 2000); do echo line$i; done; printf tail"})
	r, err := e.OpenOutput(p.ID, Stdout, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	got, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	var want bytes.Buffer
	for i := 1; i <= 2000; i++ {
		fmt.Fprintf(&want, "line%d\n", i)
	}
	want.WriteString("tail")
	if !bytes.Equal(got, want.Bytes()) {
		t.Fatalf("followed %d bytes, want %d", len(got), want.Len())
	}
}

func TestProcessOutputLimitDropsOldestAsGap(t *testing.T) {
	e := newTestEngine(t)
	p := startProc(t, e, ProcessRequest{Command: "seq 1 10000", OutputLimit: 1000})
	info := waitProc(t, e, p.ID)
	data, first, end, err := e.ReadOutput(p.ID, Stdout, 0, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if end != info.StdoutBytes || first != end-1000 || len(data) != 1000 || !strings.HasSuffix(string(data), "9999\n10000\n") {
		t.Fatalf("window [%d,%d) len %d, want the last 1000 of %d", first, end, len(data), info.StdoutBytes)
	}
	r, _ := e.OpenOutput(p.ID, Stdout, 0)
	defer r.Close()
	_, err = r.Read(make([]byte, 10))
	var gap *GapError
	if !errors.As(err, &gap) || gap.Bytes != first {
		t.Fatalf("first read from 0: %v, want a gap of %d", err, first)
	}
	rest, err := io.ReadAll(r)
	if err != nil || !bytes.Equal(rest, data) {
		t.Fatalf("after the gap: %d bytes, %v", len(rest), err)
	}
}

func TestProcessStdinWriteAndClose(t *testing.T) {
	e := newTestEngine(t)
	p := startProc(t, e, ProcessRequest{Command: "cat; echo done", Stdin: true})
	if !e.HasStdin(p.ID) {
		t.Fatal("HasStdin = false")
	}
	if _, err := e.WriteStdin(p.ID, []byte("hello\x00\n")); err != nil {
		t.Fatal(err)
	}
	if err := e.CloseStdin(p.ID); err != nil {
		t.Fatal(err)
	}
	waitProc(t, e, p.ID)
	data, _, _, _ := e.ReadOutput(p.ID, Stdout, 0, 100)
	if string(data) != "hello\x00\ndone\n" {
		t.Errorf("stdout = %q", data)
	}
	if _, err := e.WriteStdin(p.ID, []byte("x")); !errors.Is(err, ErrNotWritable) {
		t.Errorf("write after close: %v", err)
	}
	q := startProc(t, e, ProcessRequest{Command: "true"})
	if _, err := e.WriteStdin(q.ID, []byte("x")); !errors.Is(err, ErrNotWritable) {
		t.Errorf("write without stdin: %v", err)
	}
}

func TestKillLeavesNoDescendantAlive(t *testing.T) {
	e := newTestEngine(t)
	// The last one double-forks through setsid (a daemon): its parent is
	// gone and it leads its own session, so only the tree mark finds it.
	p := startProc(t, e, ProcessRequest{Command: "sleep 100 & echo $!; setsid sleep 100 & echo $!; nohup sleep 100 >/dev/null 2>&1 & echo $!; bash -c 'sleep 100 & echo $!; wait' & " +
		"(setsid sh -c 'echo $$ >&3; exec sleep 100 3>&-' 3>&1 >/dev/null 2>&1 </dev/null &); sleep 100"})
	waitLines(t, e, p.ID, 5)
	data, _, _, _ := e.ReadOutput(p.ID, Stdout, 0, 1000)
	var pids []int
	for _, f := range strings.Fields(string(data)) {
		pids = append(pids, atoi(t, f))
	}
	if err := e.KillProcess(p.ID, unix.SIGTERM, time.Second); err != nil {
		t.Fatal(err)
	}
	info := waitProc(t, e, p.ID)
	if info.Status != StatusKilled || info.ExitCode != nil || info.Signal == "" {
		t.Errorf("killed: %+v", info)
	}
	for _, pid := range pids {
		if pidAlive(pid) {
			t.Errorf("descendant %d survived", pid)
			killPid(pid)
		}
	}
}

// A process that ends cleanly on process.kill's TERM was still ended by
// it: status killed, with the exit code it chose.
func TestKillOfAProcessThatExitsCleanlyIsKilled(t *testing.T) {
	e := newTestEngine(t)
	p := startProc(t, e, ProcessRequest{Command: "trap 'exit 0' TERM; echo ready; sleep 100 & wait"})
	waitLines(t, e, p.ID, 1)
	if err := e.KillProcess(p.ID, unix.SIGTERM, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	info := waitProc(t, e, p.ID)
	if info.Status != StatusKilled || info.ExitCode == nil || *info.ExitCode != 0 {
		t.Errorf("after process.kill: %+v, want killed with exit code 0", info)
	}
}

// A process that exited by itself, while its record waits for output of
// what it left running, was not ended by a kill that comes then.
func TestKillAfterTheExitIsNotTheEnd(t *testing.T) {
	e := newTestEngine(t, func(c *Config) { c.TrailGrace = 2 * time.Second })
	p := startProc(t, e, ProcessRequest{Command: "echo ready; sleep 30 & exit 0"})
	waitLines(t, e, p.ID, 1)
	time.Sleep(300 * time.Millisecond) // it has exited; its record waits for the sleep's output
	if err := e.KillProcess(p.ID, unix.SIGTERM, time.Second); err != nil {
		t.Fatal(err)
	}
	if info := waitProc(t, e, p.ID); info.Status != StatusExited || info.ExitCode == nil || *info.ExitCode != 0 {
		t.Errorf("got %+v, want exited 0", info)
	}
}

// A launcher that starts a daemon and exits: killing the ended process
// ends the daemon, and its recorded end stays.
func TestKillEndedProcessEndsWhatItLeft(t *testing.T) {
	e := newTestEngine(t)
	fifo := filepath.Join(t.TempDir(), "pid")
	p := startProc(t, e, ProcessRequest{Command: "mkfifo " + fifo + "; (setsid sh -c 'echo $$ >" + fifo + "; exec sleep 100' >/dev/null 2>&1 </dev/null &); cat " + fifo})
	info := waitProc(t, e, p.ID)
	data, _, _, _ := e.ReadOutput(p.ID, Stdout, 0, 100)
	daemon := atoi(t, strings.TrimSpace(string(data)))
	if !pidAlive(daemon) {
		t.Fatalf("daemon %d not running after its launcher ended", daemon)
	}
	if err := e.KillProcess(p.ID, unix.SIGTERM, time.Second); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(5 * time.Second); pidAlive(daemon) && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond) // no event to wait on for a foreign pid
	}
	if pidAlive(daemon) {
		killPid(daemon)
		t.Fatalf("daemon %d survived the kill of its ended launcher", daemon)
	}
	if after, _ := e.GetProcess(p.ID); after.Status != info.Status || *after.ExitCode != 0 {
		t.Errorf("record after the kill: %+v, was %+v", after, info)
	}
}

// waitLines waits until a process printed n lines on stdout.
func waitLines(t *testing.T, e *Engine, id string, n int) {
	t.Helper()
	m, err := e.WaitForLog(ctxT(t, 10*time.Second), id, "", Stdout, 0)
	_ = m
	if err != nil {
		t.Fatal(err)
	}
	r, _ := e.OpenOutput(id, Stdout, 0)
	defer r.Close()
	timer := time.AfterFunc(10*time.Second, func() { _ = r.Close() })
	defer timer.Stop()
	var got []byte
	buf := make([]byte, 256)
	for bytes.Count(got, []byte("\n")) < n {
		k, err := r.Read(buf)
		if err != nil {
			t.Fatalf("waiting for %d lines: %q %v", n, got, err)
		}
		got = append(got, buf[:k]...)
	}
}

func TestProcessTimeout(t *testing.T) {
	e := newTestEngine(t)
	p := startProc(t, e, ProcessRequest{Command: "echo hi; sleep 100", Timeout: 200 * time.Millisecond})
	info := waitProc(t, e, p.ID)
	if info.Status != StatusTimedOut || info.ExitCode != nil || info.StdoutBytes != 3 {
		t.Errorf("timed out: %+v", info)
	}
}

func TestProcessFromSessionSnapshot(t *testing.T) {
	e := newTestEngine(t)
	dir := t.TempDir()
	sid := newSession(t, e, SessionOptions{Env: map[string]*string{"GONE": strp("x")}})
	mustExec(t, e, ExecRequest{SessionID: sid, Command: "cd " + dir + "; export V=1; unset GONE; f() { echo fn; }; " +
		"shopt -s expand_aliases; alias al='echo alias'; umask 027; set -o pipefail"})
	p := startProc(t, e, ProcessRequest{SessionID: sid, Command: "pwd; echo $V ${GONE-unset}; f; al; umask; [[ -o pipefail ]] && echo pf; env | grep -c '^V=1$'"})
	info := waitProc(t, e, p.ID)
	data, _, _, _ := e.ReadOutput(p.ID, Stdout, 0, 1000)
	want := dir + "\n1 unset\nfn\nalias\n0027\npf\n1\n"
	if string(data) != want || info.SessionID != sid {
		errOut, _, _, _ := e.ReadOutput(p.ID, Stderr, 0, 1000)
		t.Errorf("snapshot process: %q (stderr %q), want %q", data, errOut, want)
	}
	if l := e.ListProcesses(sid); len(l) != 1 {
		t.Errorf("ListProcesses(session) = %d", len(l))
	}
}

// A session's state comes back in a fresh bash whatever the user did to
// the names the restore uses: shell options functions need, functions
// and aliases named like the restore's commands, set -e over a vanished
// cwd, an unset PWD, or an unset locale.
func TestSnapshotRestoresHostileStates(t *testing.T) {
	tests := []struct {
		name, setup, command, want string
	}{
		{"a function needing extglob", "shopt -s extglob\nf() { case $1 in +(a|b)) echo ab;; esac; }", "f a; shopt -q extglob && echo on", "ab\non\n"},
		{"a cd function", `cd() { builtin cd "$@" && echo "entered $PWD"; }`, "echo cmd; type -t cd", "cmd\nfunction\n"},
		{"aliases of restore commands", "shopt -s expand_aliases; alias cd='echo nope' set='echo nope' declare='echo nope'", "echo cmd; alias set", "cmd\nalias set='echo nope'\n"},
		{"functions named set and declare", "set() { echo hijacked; }; declare() { echo hijacked; }", "echo cmd; type -t set", "cmd\nfunction\n"},
		{"an alias named like a function", "shopt -s expand_aliases; g() { echo fn-g; }; alias g='echo alias-g'", "g; \\g", "alias-g\nfn-g\n"},
		{"set -u with PWD unset", "set -u; unset PWD", "echo cmd; [[ -o nounset ]] && echo nounset", "cmd\nnounset\n"},
		{"set -e and set -u", "set -eu", "echo cmd; [[ -o errexit ]] && echo errexit", "cmd\nerrexit\n"},
		{"the locale unset", "unset LANG LC_ALL", "echo ${LANG-unset} ${LC_ALL-unset}", "unset unset\n"},
		{"a value with a newline and quotes", `export Q=$'a\n"b\' c'`, `printf '%s|' "$Q"`, "a\n\"b' c|"},
	}
	e := newTestEngine(t)
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			sid := newSession(t, e, SessionOptions{Cwd: dir})
			mustExec(t, e, ExecRequest{SessionID: sid, Command: tc.setup})
			p := startProc(t, e, ProcessRequest{ID: fmt.Sprintf("snap%d", i), SessionID: sid, Command: "pwd; " + tc.command})
			waitProc(t, e, p.ID)
			data, _, _, _ := e.ReadOutput(p.ID, Stdout, 0, 1000)
			if want := dir + "\n" + tc.want; string(data) != want {
				errOut, _, _, _ := e.ReadOutput(p.ID, Stderr, 0, 1000)
				t.Errorf("snapshot process: %q (stderr %q), want %q", data, errOut, want)
			}
			if r := mustExec(t, e, ExecRequest{SessionID: sid, Command: "echo alive"}); string(r.Stdout) != "alive\n" {
				t.Errorf("the session after the snapshot: %q", r.Stdout)
			}
		})
	}
}

func TestSIGINTReachesProcessStartedFromSession(t *testing.T) {
	e := newTestEngine(t)
	sid := newSession(t, e, SessionOptions{})
	p := startProc(t, e, ProcessRequest{SessionID: sid, Command: "trap 'echo got INT; exit 5' INT; echo ready; sleep 100 & wait"})
	if _, err := e.WaitForLog(ctxT(t, 10*time.Second), p.ID, "^ready$", Stdout, 0); err != nil {
		t.Fatal(err)
	}
	if err := e.SignalProcess(p.ID, unix.SIGINT); err != nil {
		t.Fatal(err)
	}
	info := waitProc(t, e, p.ID)
	data, _, _, _ := e.ReadOutput(p.ID, Stdout, 0, 100)
	if info.ExitCode == nil || *info.ExitCode != 5 || !strings.Contains(string(data), "got INT") {
		t.Errorf("after SIGINT: %+v %q", info, data)
	}
}

func TestWaitForLog(t *testing.T) {
	e := newTestEngine(t)
	p := startProc(t, e, ProcessRequest{Command: "echo boot; echo 'listening on port 8123' >&2; printf partial", Stdin: false})
	tests := []struct {
		pattern string
		stream  Stream
		from    int64
		line    string
		group   string
		off     int64
		err     error
	}{
		{`port (\d+)`, 0, 0, "listening on port 8123", "8123", 0, nil},
		{`port (\d+)`, Stdout, 0, "", "", 0, ErrEnded},
		{`^boot$`, Stdout, 0, "boot", "", 0, nil},
		{`^part`, Stdout, 0, "partial", "", 5, nil},
		{`o`, Stdout, 1, "oot", "", 1, nil},
		{`(`, 0, 0, "", "", 0, ErrInvalid},
	}
	waitProc(t, e, p.ID)
	for _, tc := range tests {
		m, err := e.WaitForLog(ctxT(t, 5*time.Second), p.ID, tc.pattern, tc.stream, tc.from)
		if tc.err != nil {
			if !errors.Is(err, tc.err) {
				t.Errorf("%q: err %v, want %v", tc.pattern, err, tc.err)
			}
			continue
		}
		if err != nil || m.Line != tc.line || m.Offset != tc.off || (tc.group != "" && m.Groups[1] != tc.group) {
			t.Errorf("%q: %+v %v, want line %q at %d", tc.pattern, m, err, tc.line, tc.off)
		}
	}
	// Live: the match arrives after the call.
	q := startProc(t, e, ProcessRequest{Command: "read x; echo got $x", Stdin: true})
	done := make(chan LogMatch, 1)
	go func() {
		m, _ := e.WaitForLog(context.Background(), q.ID, "^got", 0, 0)
		done <- m
	}()
	_, _ = e.WriteStdin(q.ID, []byte("it\n"))
	if m := recvOrTimeout(t, done, 5*time.Second, "live match"); m.Line != "got it" {
		t.Errorf("live match %+v", m)
	}
}

func TestWaitForPort(t *testing.T) {
	e := newTestEngine(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	if err := e.WaitForPort(ctxT(t, 5*time.Second), port, ""); err != nil {
		t.Errorf("open port: %v", err)
	}
	ln.Close()
	p := startProc(t, e, ProcessRequest{Command: "exit 0"})
	if err := e.WaitForPort(ctxT(t, 5*time.Second), port, p.ID); !errors.Is(err, ErrEnded) {
		t.Errorf("closed port, ended process: %v, want ErrEnded", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if err := e.WaitForPort(ctx, port, ""); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("closed port: %v, want deadline", err)
	}
	if err := e.WaitForPort(ctx, 0, ""); !errors.Is(err, ErrInvalid) {
		t.Errorf("port 0: %v", err)
	}
}

// freePort returns a port nothing listens on (a moment ago).
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// With a process id, the port's listener must be the process's: another
// program's (an old server still on the port, so that the new one fails
// with EADDRINUSE) does not pass for it, and the error names it. What the
// process's tree runs counts, also after a double fork; without an id any
// listener does.
func TestWaitForPortWithAnIDWantsTheProcesssListener(t *testing.T) {
	e := newTestEngine(t)
	held, err := net.Listen("tcp", "127.0.0.1:0") // another program's: this test's
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	port := held.Addr().(*net.TCPAddr).Port
	self := shQuote(os.Args[0])
	// The new server finds the port taken and fails.
	p := startProc(t, e, ProcessRequest{Command: fmt.Sprintf("%s=%d exec %s", listenHelperEnv, port, self)})
	err = e.WaitForPort(ctxT(t, 10*time.Second), port, p.ID)
	if !errors.Is(err, ErrEnded) || !strings.Contains(err.Error(), fmt.Sprintf("held by pid %d", os.Getpid())) {
		t.Fatalf("a port another program holds, the process failed: %v, want ErrEnded naming pid %d", err, os.Getpid())
	}
	// One that runs on without listening: the wait ends with its time,
	// saying who holds the port.
	idle := startProc(t, e, ProcessRequest{Command: "sleep 30"})
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if err := e.WaitForPort(ctx, port, idle.ID); !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "held by") {
		t.Fatalf("a port another program holds, the process runs: %v, want the deadline naming the holder", err)
	}
	_ = e.KillProcess(idle.ID, unix.SIGKILL, 0)
	if err := e.WaitForPort(ctxT(t, 5*time.Second), port, ""); err != nil {
		t.Fatalf("without an id, any listener: %v", err)
	}
	// A listener started after the process, outside its tree (the way a
	// daemon the command asked for runs one, such as docker-proxy): it
	// may be the process's doing, and counts.
	t.Run("started since, elsewhere", func(t *testing.T) {
		port := freePort(t)
		p := startProc(t, e, ProcessRequest{Command: "sleep 30"})
		defer func() { _ = e.KillProcess(p.ID, unix.SIGKILL, 0) }()
		time.Sleep(30 * time.Millisecond) // start times count in 10 ms ticks
		helper := osexec.Command(os.Args[0])
		helper.Env = append(os.Environ(), fmt.Sprintf("%s=%d", listenHelperEnv, port))
		if err := helper.Start(); err != nil {
			t.Fatal(err)
		}
		defer func() { _ = helper.Process.Kill(); _ = helper.Wait() }()
		if err := e.WaitForPort(ctxT(t, 10*time.Second), port, p.ID); err != nil {
			t.Fatalf("a listener started since: %v", err)
		}
	})
	for _, tc := range []struct{ name, command string }{
		{"its own", "%s=%d exec %s"},
		{"a double fork's", "setsid -f env %s=%d %s; sleep 30"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			port := freePort(t)
			p := startProc(t, e, ProcessRequest{Command: fmt.Sprintf(tc.command, listenHelperEnv, port, self)})
			defer func() { _ = e.KillProcess(p.ID, unix.SIGKILL, 0) }()
			if err := e.WaitForPort(ctxT(t, 10*time.Second), port, p.ID); err != nil {
				t.Fatalf("the process's listener: %v", err)
			}
		})
	}
}

func TestFastExitNeverReportedBeforeOutput(t *testing.T) {
	e := newTestEngine(t)
	runs := 500
	if testing.Short() {
		runs = 100
	}
	sid := newSession(t, e, SessionOptions{})
	for i := range runs {
		want := "x" + strconv.Itoa(i) + "\n"
		r := mustExec(t, e, ExecRequest{Command: "echo x" + strconv.Itoa(i)})
		if string(r.Stdout) != want {
			t.Fatalf("stateless run %d: %q, want %q", i, r.Stdout, want)
		}
		r = mustExec(t, e, ExecRequest{SessionID: sid, Command: "echo x" + strconv.Itoa(i)})
		if string(r.Stdout) != want {
			t.Fatalf("session run %d: %q, want %q", i, r.Stdout, want)
		}
		p := startProc(t, e, ProcessRequest{Command: "echo x" + strconv.Itoa(i)})
		info := waitProc(t, e, p.ID)
		if info.StdoutBytes != int64(len(want)) {
			t.Fatalf("process run %d: %d bytes at exit, want %d", i, info.StdoutBytes, len(want))
		}
	}
}

func TestManyProcessesLeaveNoZombiesOrFDs(t *testing.T) {
	n := 1000
	if testing.Short() {
		n = 200
	}
	e := newTestEngine(t, func(c *Config) { c.RetainCount = 50 })
	fds := openFDs(t)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 16)
	for i := range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			p, err := e.StartProcess(context.Background(), ProcessRequest{Command: "echo " + strconv.Itoa(i)})
			if err != nil {
				t.Error(err)
				return
			}
			_, _ = e.WaitProcess(context.Background(), p.ID)
		}()
	}
	wg.Wait()
	if got := len(e.ListProcesses("")); got > 50 {
		t.Errorf("retained %d ended processes, want ≤ 50", got)
	}
	if z := zombies(t); z != 0 {
		t.Errorf("%d zombie children", z)
	}
	if got := openFDs(t); got > fds+4 {
		t.Errorf("fds: %d before, %d after %d processes", fds, got, n)
	}
}

// zombies counts zombie children of this process.
func zombies(t *testing.T) int {
	out, err := exec0("ps", "-o", "stat=", "--ppid", strconv.Itoa(unix.Getpid()))
	if err != nil {
		return 0
	}
	return strings.Count(out, "Z")
}

func TestLargeOutputCapturedCompletely(t *testing.T) {
	size := 8 << 20
	if isLong() {
		size = 100 << 20
	}
	e := newTestEngine(t)
	p := startProc(t, e, ProcessRequest{Command: fmt.Sprintf("f=$(mktemp); head -c %d /dev/urandom >$f; sha256sum <$f >&2; cat $f; rm $f", size), OutputLimit: int64(size) + 1})
	info := waitProc(t, e, p.ID)
	if info.StdoutBytes != int64(size) {
		t.Fatalf("captured %d bytes, want %d", info.StdoutBytes, size)
	}
	r, _ := e.OpenOutput(p.ID, Stdout, 0)
	defer r.Close()
	h := sha256.New()
	if _, err := io.Copy(h, r); err != nil {
		t.Fatal(err)
	}
	errOut, _, _, _ := e.ReadOutput(p.ID, Stderr, 0, 200)
	if got := fmt.Sprintf("%x", h.Sum(nil)); !strings.HasPrefix(string(errOut), got) {
		t.Fatalf("sha256 of captured = %s, command's = %q", got, errOut)
	}
}

func TestProcessLimitCountsOnlyRunning(t *testing.T) {
	e := newTestEngine(t, func(c *Config) { c.MaxProcesses = 2 })
	ctx := ctxT(t, 20*time.Second)
	// Ended records (an exec, a finished process) do not count.
	if _, err := e.Exec(ctx, ExecRequest{Command: "true"}); err != nil {
		t.Fatal(err)
	}
	done, err := e.StartProcess(ctx, ProcessRequest{Command: "true"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.WaitProcess(ctx, done.ID); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for range 2 {
		p, err := e.StartProcess(ctx, ProcessRequest{Command: "sleep 30"})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, p.ID)
	}
	if _, err := e.StartProcess(ctx, ProcessRequest{Command: "sleep 30"}); !errors.Is(err, ErrLimit) {
		t.Fatalf("third running process: got %v, want ErrLimit", err)
	}
	if _, err := e.Exec(ctx, ExecRequest{Command: "true"}); !errors.Is(err, ErrLimit) {
		t.Fatalf("exec at the limit: got %v, want ErrLimit", err)
	}
	if err := e.KillProcess(ids[0], unix.SIGKILL, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := e.WaitProcess(ctx, ids[0]); err != nil {
		t.Fatal(err)
	}
	if _, err := e.StartProcess(ctx, ProcessRequest{Command: "sleep 30"}); err != nil {
		t.Fatalf("after one ended: %v", err)
	}
}

// A kill that comes between a record's registration (its id is visible)
// and its child's start kills the child once it runs, and returns then.
// It used to answer success and leave the process running.
func TestKillBeforeTheChildStarts(t *testing.T) {
	for _, isExec := range []bool{false, true} {
		name := "process.start"
		if isExec {
			name = "exec"
		}
		t.Run(name, func(t *testing.T) {
			e := newTestEngine(t)
			killed := make(chan error, 1)
			testHookRegistered = func(p *process) {
				go func() { killed <- e.KillProcess(p.id, unix.SIGKILL, 0) }()
				// Hold the launch until the kill waits for it, or (as it
				// did) returned without killing anything.
				for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); runtime.Gosched() {
					p.mu.Lock()
					waiting := p.pendingKill != nil
					p.mu.Unlock()
					if waiting || len(killed) > 0 {
						return
					}
				}
			}
			defer func() { testHookRegistered = nil }()
			if isExec {
				res, err := e.Exec(ctxT(t, 20*time.Second), ExecRequest{ID: "early", Command: "sleep 30"})
				if err != nil || res.Signal != "KILL" {
					t.Fatalf("Exec: %+v, %v: want it killed", res, err)
				}
			} else {
				startProc(t, e, ProcessRequest{ID: "early", Command: "sleep 30"})
			}
			status := waitProc(t, e, "early").Status
			if err := recvOrTimeout(t, killed, 10*time.Second, "KillProcess's return"); err != nil {
				t.Fatalf("KillProcess: %v", err)
			}
			if status != StatusKilled {
				t.Errorf("status %q, want %q", status, StatusKilled)
			}
		})
	}
}

// A signal (channel CTRL) that comes between a record's registration
// and its child's start reaches the child once it runs; it was dropped.
func TestSignalBeforeTheChildStarts(t *testing.T) {
	e := newTestEngine(t)
	testHookRegistered = func(p *process) {
		if err := e.SignalProcess(p.id, unix.SIGTERM); err != nil {
			t.Errorf("SignalProcess: %v", err)
		}
	}
	defer func() { testHookRegistered = nil }()
	startProc(t, e, ProcessRequest{ID: "early", Command: "exec sleep 30"})
	info, err := e.WaitProcess(ctxT(t, 5*time.Second), "early")
	if err != nil || info.Signal != "TERM" {
		t.Fatalf("WaitProcess: %+v, %v; want it ended by TERM at once", info, err)
	}
}

// The record of an exec whose caller went away while it ran is the last
// that retention drops for DetachedHold, so the caller finds the result
// by ID once back; a caller that stayed gets no such preference. It is
// no pin: the id can be used again at once, and records held that way
// alone past retention's limits are dropped too.
func TestDetachedExecResultOutlastsRetention(t *testing.T) {
	e := newTestEngine(t, func(c *Config) {
		c.RetainCount = 2
		c.DetachedHold = 300 * time.Millisecond
	})
	ctx := ctxT(t, 20*time.Second)
	gone := func() bool { return true }
	for _, r := range []ExecRequest{
		{ID: "stayed", Command: "echo stayed"},
		{ID: "detached", Command: "echo detached", Detached: gone},
		{ID: "detached-in-session", Command: "echo in session", SessionID: "s", Detached: gone},
	} {
		if r.SessionID != "" {
			if _, err := e.CreateSession(ctx, SessionOptions{ID: r.SessionID}); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := e.Exec(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	churn := func() { // more ended records than retention keeps
		for range 4 {
			waitProc(t, e, startProc(t, e, ProcessRequest{Command: "true"}).ID)
		}
	}
	churn()
	if _, err := e.GetProcess("stayed"); !errors.Is(err, ErrNotFound) {
		t.Errorf("an exec whose caller took the result: %v, want it dropped first", err)
	}
	for _, id := range []string{"detached", "detached-in-session"} {
		if _, err := e.GetProcess(id); err != nil {
			t.Errorf("%s: %v: the result was dropped before its caller came back", id, err)
		}
	}
	// The id is free for a new command at once.
	if _, err := e.Exec(ctx, ExecRequest{ID: "detached", Command: "true", Detached: gone}); err != nil {
		t.Fatalf("an exec reusing a held record's id: %v", err)
	}
	// Held records alone do not exceed retention.
	for i := range 6 {
		if _, err := e.Exec(ctx, ExecRequest{ID: fmt.Sprintf("many-%d", i), Command: "true", Detached: gone}); err != nil {
			t.Fatal(err)
		}
	}
	churn()
	kept := 0
	for i := range 6 {
		if _, err := e.GetProcess(fmt.Sprintf("many-%d", i)); err == nil {
			kept++
		}
	}
	if kept > 2 {
		t.Errorf("%d held records kept, past RetainCount 2", kept)
	}
	// Past the hold, retention drops them again.
	for deadline := time.Now().Add(10 * time.Second); ; {
		churn()
		_, err1 := e.GetProcess("detached")
		_, err2 := e.GetProcess("detached-in-session")
		if errors.Is(err1, ErrNotFound) && errors.Is(err2, ErrNotFound) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("held records were never dropped: %v %v", err1, err2)
		}
	}
}

// WaitForLog refuses patterns whose compiled form would be huge (counted
// repetitions expand: "(?:[a-z]{1000})" 3000 times over took ~500 MB to
// compile) or that are long, before anything else; ordinary ones pass.
func TestWaitForLogPatternBounds(t *testing.T) {
	e := newTestEngine(t)
	for _, tt := range []struct {
		pattern string
		ok      bool
	}{
		{`listening on port (\d+)`, true},
		{`^ERROR\b.*$`, true},
		{`[a-z]{1000}`, true},
		{`x{2,}y{0,9}`, true},
		{strings.Repeat("a", maxPatternLen), true},
		{strings.Repeat("a", maxPatternLen+1), false},
		{strings.Repeat(`(?:[a-z]{1000})`, 200), false},
		{strings.Repeat(`\w{500}`, 250), false},
		{`(?:a{1000}){1000}`, false}, // Go's parser refuses this one itself
		{`(unclosed`, false},
	} {
		_, err := e.WaitForLog(ctxT(t, 5*time.Second), "no-such-process", tt.pattern, 0, 0)
		if tt.ok && !errors.Is(err, ErrNotFound) || !tt.ok && !errors.Is(err, ErrInvalid) {
			t.Errorf("%.40q: %v, want ok=%v (not found for a good pattern, invalid for a bad one)", tt.pattern, err, tt.ok)
		}
	}
}
