package exec

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestStatelessExecOutputIsByteExact(t *testing.T) {
	e := newTestEngine(t)
	tests := []struct {
		name, cmd      string
		stdout, stderr string
		code           int
		stdin          []byte
	}{
		{"separate streams", "echo out; echo err >&2", "out\n", "err\n", 0, nil},
		{"no trailing newline", "printf abc", "abc", "", 0, nil},
		{"NUL and CR kept", `printf 'a\0b\r\nc'`, "a\x00b\r\nc", "", 0, nil},
		{"exit code", "exit 42", "", "", 42, nil},
		{"silent", "true", "", "", 0, nil},
		{"stdin bytes", "cat", "in\x00put", "", 0, []byte("in\x00put")},
		{"stdin defaults to /dev/null (EOF)", "cat; read x; echo rc=$?", "rc=1\n", "", 0, nil},
		{"syntax error", "echo 'unbalanced", "", "", 2, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := mustExec(t, e, ExecRequest{Command: tc.cmd, Stdin: tc.stdin})
			if got := string(r.Stdout); got != tc.stdout {
				t.Errorf("stdout = %q, want %q", got, tc.stdout)
			}
			if tc.name != "syntax error" && string(r.Stderr) != tc.stderr {
				t.Errorf("stderr = %q, want %q", r.Stderr, tc.stderr)
			}
			if code(r) != tc.code {
				t.Errorf("exit code = %d, want %d", code(r), tc.code)
			}
		})
	}
}

func TestStatelessExecRandomMegabyteIsExact(t *testing.T) {
	e := newTestEngine(t)
	f := filepath.Join(t.TempDir(), "rand")
	r := mustExec(t, e, ExecRequest{Command: "head -c 1M /dev/urandom > " + f + "; cat " + f, MaxOutput: 2 << 20})
	want, err := os.ReadFile(f)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(r.Stdout, want) || len(want) != 1<<20 {
		t.Fatalf("got %d bytes, want the file's %d bytes exactly", len(r.Stdout), len(want))
	}
}

func TestStatelessExecEnvCwdAndSignal(t *testing.T) {
	t.Setenv("MUXD_SECRET", "s3cret")
	t.Setenv("KEEP_ME", "1")
	t.Setenv("DROP_ME", "1")
	e := newTestEngine(t)
	dir := t.TempDir()
	r := mustExec(t, e, ExecRequest{
		Command: `echo "$PWD|${MUXD_SECRET-none}|${FOO}|${KEEP_ME}|${DROP_ME-unset}|$LANG"`,
		Cwd:     dir, Env: map[string]*string{"FOO": strp("bar"), "DROP_ME": nil},
	})
	if got, want := string(r.Stdout), dir+"|none|bar|1|unset|C.UTF-8\n"; got != want {
		t.Errorf("stdout = %q, want %q", got, want)
	}
	// A PATH without bash in it is the command's: the shell is still found.
	r = mustExec(t, e, ExecRequest{Command: `echo "$PATH|${LANG-unset}|${LC_ALL-unset}"`,
		Env: map[string]*string{"PATH": strp("/opt/tools/bin:rel"), "LANG": nil, "LC_ALL": nil}})
	if got, want := string(r.Stdout), "/opt/tools/bin:rel|unset|unset\n"; got != want {
		t.Errorf("with PATH=/opt/tools/bin and the locale unset: stdout = %q, want %q", got, want)
	}
	r = mustExec(t, e, ExecRequest{Command: "kill -KILL $$"})
	if r.ExitCode != nil || r.Signal != "KILL" {
		t.Errorf("killed by signal: exitCode=%v signal=%q, want nil, KILL", r.ExitCode, r.Signal)
	}
}

func TestStatelessExecTimeoutKillsTreeKeepsOutput(t *testing.T) {
	e := newTestEngine(t)
	start := time.Now()
	r := mustExec(t, e, ExecRequest{Command: "echo before; sleep 100 & echo $! >&2; sleep 100", Timeout: 300 * time.Millisecond})
	if !r.TimedOut || r.ExitCode != nil {
		t.Fatalf("timedOut=%v exitCode=%v, want true, nil", r.TimedOut, r.ExitCode)
	}
	if string(r.Stdout) != "before\n" {
		t.Errorf("stdout = %q, want the output so far", r.Stdout)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("took %v, want well under 5 s", d)
	}
	bg := strings.TrimSpace(string(r.Stderr))
	if pid := atoi(t, bg); pidAlive(pid) {
		t.Errorf("background child %d survived the timeout", pid)
	}
	info, err := e.GetProcess(r.ID)
	if err != nil || info.Status != StatusTimedOut {
		t.Errorf("record status = %q (%v), want timed_out", info.Status, err)
	}
}

func TestStatelessExecBackgroundChildDoesNotHang(t *testing.T) {
	e := newTestEngine(t)
	start := time.Now()
	r := mustExec(t, e, ExecRequest{Command: "sleep 100 & echo $!"})
	pid := atoi(t, strings.TrimSpace(string(r.Stdout)))
	defer killPid(pid)
	if d := time.Since(start); d > 5*time.Second || code(r) != 0 {
		t.Fatalf("exec with a background child: %v, code %d; want prompt 0", d, code(r))
	}
}

// What a command leaves running may write after the command's shell
// exited: `bash -c … | cat` has that output, and so must the result and
// the log, for a process too; a writer that stays (a server) is cut off
// after TrailGrace. A session command's background job likewise.
func TestOutputWrittenJustAfterTheCommandIsKept(t *testing.T) {
	e := newTestEngine(t, func(c *Config) { c.TrailGrace = time.Second })
	sid := newSession(t, e, SessionOptions{})
	for i := range 50 {
		r := mustExec(t, e, ExecRequest{Command: "echo lead; (echo child; echo err >&2) &"})
		if string(r.Stdout) != "lead\nchild\n" || string(r.Stderr) != "err\n" {
			t.Fatalf("exec run %d: stdout %q stderr %q, want the child's output too", i, r.Stdout, r.Stderr)
		}
		r = mustExec(t, e, ExecRequest{SessionID: sid, Command: "(echo child; echo err >&2) & echo lead; wait_not=1"})
		if !strings.Contains(string(r.Stdout), "child\n") || !strings.Contains(string(r.Stdout), "lead\n") || string(r.Stderr) != "err\n" {
			t.Fatalf("session run %d: stdout %q stderr %q, want the job's output too", i, r.Stdout, r.Stderr)
		}
	}
	p, err := e.StartProcess(ctxT(t, 5*time.Second), ProcessRequest{Command: "echo lead; (sleep 0.1; echo child) &"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.WaitProcess(ctxT(t, 10*time.Second), p.ID); err != nil {
		t.Fatal(err)
	}
	if out, _, _, err := e.ReadOutput(p.ID, Stdout, 0, 100); err != nil || string(out) != "lead\nchild\n" {
		t.Fatalf("process log %q %v, want the child's output too", out, err)
	}
	// A writer that stays is cut off after the grace, not waited for.
	start := time.Now()
	r := mustExec(t, e, ExecRequest{Command: "sleep 100 & echo $!; echo started"})
	defer killPid(atoi(t, strings.Fields(string(r.Stdout))[0]))
	if d := time.Since(start); d > 5*time.Second || !strings.HasSuffix(string(r.Stdout), "started\n") {
		t.Fatalf("exec with a server left running: %v, %q", d, r.Stdout)
	}
}

func TestStatelessExecTruncatesButKeepsFullOutput(t *testing.T) {
	e := newTestEngine(t)
	r := mustExec(t, e, ExecRequest{Command: "head -c 1000 /dev/zero", MaxOutput: 10})
	if len(r.Stdout) != 10 || !r.StdoutTruncated || r.StderrTruncated {
		t.Fatalf("len=%d truncated=%v/%v, want 10 true/false", len(r.Stdout), r.StdoutTruncated, r.StderrTruncated)
	}
	data, first, end, err := e.ReadOutput(r.ID, Stdout, 0, 4096)
	if err != nil || len(data) != 1000 || first != 0 || end != 1000 {
		t.Fatalf("ReadOutput: %d bytes [%d,%d) %v, want 1000 [0,1000)", len(data), first, end, err)
	}
	if list := e.ListProcesses(""); len(list) != 0 {
		t.Errorf("exec records listed by ListProcesses: %d", len(list))
	}
}

func TestStatelessExecCancelKillsCommand(t *testing.T) {
	e := newTestEngine(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan ExecResult, 1)
	go func() {
		r, _ := e.Exec(ctx, ExecRequest{ID: "c1", Command: "echo go; exec sleep 100"})
		done <- r
	}()
	waitOutput(t, e, "c1", Stdout, "go\n")
	cancel()
	r := recvOrTimeout(t, done, 5*time.Second, "cancelled exec")
	if r.ExitCode != nil || r.Signal == "" {
		t.Errorf("cancelled: exitCode=%v signal=%q, want nil and a signal", r.ExitCode, r.Signal)
	}
}

func TestBadInputIsRejected(t *testing.T) {
	e := newTestEngine(t)
	sid := newSession(t, e, SessionOptions{})
	tests := []struct {
		name string
		req  ExecRequest
		want error
	}{
		{"NUL in command", ExecRequest{Command: "echo \x00"}, ErrInvalid},
		{"env name with =", ExecRequest{Command: "true", Env: map[string]*string{"A=B": strp("x")}}, ErrInvalid},
		{"empty env name", ExecRequest{Command: "true", Env: map[string]*string{"": strp("x")}}, ErrInvalid},
		{"missing cwd", ExecRequest{Command: "true", Cwd: "/nonexistent/dir"}, ErrInvalid},
		{"negative timeout", ExecRequest{Command: "true", Timeout: -time.Second}, ErrInvalid},
		{"huge timeout", ExecRequest{Command: "true", Timeout: 1 << 62}, ErrInvalid},
		{"unknown session", ExecRequest{Command: "true", SessionID: "nope"}, ErrNotFound},
		{"session env name not a shell name", ExecRequest{Command: "true", SessionID: sid, Env: map[string]*string{"a-b": strp("x")}}, ErrInvalid},
		{"session missing cwd", ExecRequest{Command: "true", SessionID: sid, Cwd: "/nonexistent"}, ErrInvalid},
		{"id with newline", ExecRequest{ID: "a\nb", Command: "true"}, ErrInvalid},
	}
	fds := openFDs(t)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := e.Exec(ctxT(t, 5*time.Second), tc.req)
			if !errors.Is(err, tc.want) {
				t.Errorf("err = %v, want %v", err, tc.want)
			}
		})
	}
	if _, err := e.StartProcess(ctxT(t, 5*time.Second), ProcessRequest{Command: "true", OutputLimit: -1}); !errors.Is(err, ErrInvalid) {
		t.Errorf("negative outputLimit: %v", err)
	}
	for _, id := range []string{"nope"} {
		if _, err := e.GetProcess(id); !errors.Is(err, ErrNotFound) {
			t.Errorf("GetProcess(unknown) = %v", err)
		}
		if err := e.KillProcess(id, 0, 0); !errors.Is(err, ErrNotFound) {
			t.Errorf("KillProcess(unknown) = %v", err)
		}
		if err := e.DeleteSession(id); !errors.Is(err, ErrNotFound) {
			t.Errorf("DeleteSession(unknown) = %v", err)
		}
		if err := e.InterruptSession(id); !errors.Is(err, ErrNotFound) {
			t.Errorf("InterruptSession(unknown) = %v", err)
		}
	}
	// An id reused while running.
	if _, err := e.StartProcess(ctxT(t, 5*time.Second), ProcessRequest{ID: "dup", Command: "sleep 100"}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Exec(ctxT(t, 5*time.Second), ExecRequest{ID: "dup", Command: "true"}); !errors.Is(err, ErrAlreadyExists) {
		t.Errorf("reused running id: %v, want ErrAlreadyExists", err)
	}
	if err := e.RemoveProcess("dup"); !errors.Is(err, ErrBusy) {
		t.Errorf("RemoveProcess(running) = %v, want ErrBusy", err)
	}
	if err := e.KillProcess("dup", 0, time.Second); err != nil {
		t.Fatal(err)
	}
	if _, err := e.WaitProcess(ctxT(t, 5*time.Second), "dup"); err != nil {
		t.Fatal(err)
	}
	if got := openFDs(t); got > fds+2 {
		t.Errorf("fds: %d before, %d after rejected requests", fds, got)
	}
}

// A command longer than one argument may be (128 KiB) runs all the same,
// as the same bash -c would, and its file goes with the command.
func TestCommandsLongerThanAnArgumentRun(t *testing.T) {
	e := newTestEngine(t)
	long := ": '" + strings.Repeat("x", 200<<10) + "'\necho ok $0; exit 4"
	r := mustExec(t, e, ExecRequest{Command: long})
	if string(r.Stdout) != "ok bash\n" || code(r) != 4 {
		t.Errorf("exec of a 200 KiB command: %q %q, exit %d", r.Stdout, r.Stderr, code(r))
	}
	p := startProc(t, e, ProcessRequest{Command: long})
	waitProc(t, e, p.ID)
	out, _, _, _ := e.ReadOutput(p.ID, Stdout, 0, 100)
	if string(out) != "ok bash\n" {
		t.Errorf("process of a 200 KiB command: %q", out)
	}
	if left, _ := filepath.Glob(filepath.Join(e.sessDir, "c*.cmd")); len(left) != 0 {
		t.Errorf("command files left: %v", left)
	}
}

// BeforeOutput learns how much output the result will carry, before it
// is read; its error ends Exec, and the record stays readable by ID.
func TestExecBeforeOutput(t *testing.T) {
	e := newTestEngine(t)
	sid := newSession(t, e, SessionOptions{})
	for _, session := range []string{"", sid} {
		var got [2]int
		req := ExecRequest{Command: "head -c 1000 /dev/zero; echo oops >&2", MaxOutput: 100, SessionID: session,
			BeforeOutput: func(stdout, stderr int) error { got = [2]int{stdout, stderr}; return nil }}
		if r := mustExec(t, e, req); len(r.Stdout) != 100 || got != [2]int{100, 5} {
			t.Fatalf("session %q: BeforeOutput(%v), stdout %d bytes; want (100, 5) and 100", session, got, len(r.Stdout))
		}
		stop := errors.New("no room")
		req.ID = "before-" + session
		req.BeforeOutput = func(int, int) error { return stop }
		if _, err := e.Exec(ctxT(t, 10*time.Second), req); !errors.Is(err, stop) {
			t.Fatalf("session %q: Exec = %v, want BeforeOutput's error", session, err)
		}
		if info, err := e.GetProcess(req.ID); err != nil || info.ExitCode == nil || *info.ExitCode != 0 {
			t.Fatalf("session %q: the record after a failed BeforeOutput: %+v %v", session, info, err)
		}
	}
}

// A command whose caller is gone before it starts does not start: the
// caller, back later, finds no record under its id (and may send it
// again). A start likewise, when its request was cancelled.
func TestAbandonedRequestsDoNotStart(t *testing.T) {
	e := newTestEngine(t)
	dir := t.TempDir()
	_, err := e.Exec(context.Background(), ExecRequest{ID: "gone", Command: "touch " + dir + "/exec", Abandoned: func() bool { return true }})
	if !errors.Is(err, ErrAbandoned) || !errors.Is(err, context.Canceled) {
		t.Fatalf("abandoned exec: %v, want ErrAbandoned", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := e.StartProcess(ctx, ProcessRequest{ID: "gone2", Command: "touch " + dir + "/start"}); !errors.Is(err, ErrAbandoned) {
		t.Fatalf("start with its request cancelled: %v, want ErrAbandoned", err)
	}
	for _, id := range []string{"gone", "gone2"} {
		if _, err := e.GetProcess(id); !errors.Is(err, ErrNotFound) {
			t.Fatalf("%s: %v, want no record", id, err)
		}
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Fatalf("an abandoned request ran: %v", ents)
	}
	if r := mustExec(t, e, ExecRequest{ID: "gone", Command: "echo ok", Abandoned: func() bool { return false }}); string(r.Stdout) != "ok\n" {
		t.Fatalf("a caller still there: %q", r.Stdout)
	}
}
