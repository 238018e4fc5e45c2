package exec

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/muxd/muxd/internal/proc"
)

func TestSessionStatePersists(t *testing.T) {
	e := newTestEngine(t)
	dir := t.TempDir()
	sid := newSession(t, e, SessionOptions{})
	steps := []struct{ cmd, want string }{
		{"cd " + dir, ""},
		{"export A=1; B=2", ""},
		{"f() { echo f$1; }", ""},
		{"shopt -s expand_aliases; alias hi='echo hi'", ""},
		{"pwd; echo $A $B; f 3; hi", dir + "\n1 2\nf3\nhi\n"},
		{"cat <<'EOF'\nheredoc $A\nEOF", "heredoc $A\n"},
		{"echo 'unbalanced", ""}, // a syntax error must not wedge the parser
		{"echo still here", "still here\n"},
	}
	for _, st := range steps {
		r := mustExec(t, e, ExecRequest{SessionID: sid, Command: st.cmd})
		if st.want != "" && string(r.Stdout) != st.want {
			t.Errorf("%q: stdout = %q, want %q", st.cmd, r.Stdout, st.want)
		}
	}
}

// A session starts in $HOME without a cwd, and refuses a cwd it cannot
// use: quietly starting elsewhere, its commands would run where no one
// expects. No session is left behind by the refusal.
func TestSessionCwdIsHomeOrMustExist(t *testing.T) {
	e := newTestEngine(t)
	home := t.TempDir()
	info, err := e.CreateSession(ctxT(t, 5*time.Second), SessionOptions{Env: map[string]*string{"HOME": &home}})
	if err != nil {
		t.Fatal(err)
	}
	r := mustExec(t, e, ExecRequest{SessionID: info.ID, Command: "pwd"})
	if string(r.Stdout) != home+"\n" || info.Cwd != home {
		t.Errorf("cwd = %q (info %q), want %q", r.Stdout, info.Cwd, home)
	}
	for _, bad := range []string{"/does/not/exist", "/etc/passwd"} {
		_, err := e.CreateSession(ctxT(t, 5*time.Second), SessionOptions{ID: "bad", Cwd: bad, Env: map[string]*string{"HOME": &home}})
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), bad) {
			t.Errorf("session with cwd %s: %v, want ErrInvalid naming it", bad, err)
		}
	}
	if n := len(e.ListSessions()); n != 1 {
		t.Errorf("%d sessions after the refusals, want 1", n)
	}
}

func TestSessionPerCommandOverridesDoNotPersist(t *testing.T) {
	e := newTestEngine(t)
	dir := t.TempDir()
	sid := newSession(t, e, SessionOptions{Env: map[string]*string{"KEEP": strp("k")}})
	mustExec(t, e, ExecRequest{SessionID: sid, Command: "cd /; export X=orig"})
	r := mustExec(t, e, ExecRequest{SessionID: sid, Command: "pwd; echo $X ${KEEP-unset}; env | grep -c '^X=over$'",
		Cwd: dir, Env: map[string]*string{"X": strp("over"), "KEEP": nil}})
	if want := dir + "\nover unset\n1\n"; string(r.Stdout) != want {
		t.Errorf("with overrides: %q, want %q", r.Stdout, want)
	}
	r = mustExec(t, e, ExecRequest{SessionID: sid, Command: "pwd; echo $X $KEEP"})
	if want := "/\norig k\n"; string(r.Stdout) != want {
		t.Errorf("after overrides: %q, want %q", r.Stdout, want)
	}
	// Under set -k, an assignment after `export` went to its environment:
	// the override was lost and export listed every variable instead.
	// A relative cwd is the session's: resolved against its cwd.
	mustExec(t, e, ExecRequest{SessionID: sid, Command: "set -k; cd " + dir + "; mkdir -p sub; mkdir -p cdpath/sub; CDPATH=" + dir + "/cdpath"})
	r = mustExec(t, e, ExecRequest{SessionID: sid, Command: "pwd; echo $X", Cwd: "sub", Env: map[string]*string{"X": strp("over")}})
	if want := dir + "/sub\nover\n"; string(r.Stdout) != want {
		t.Errorf("overrides under set -k, relative cwd: %q, want %q", r.Stdout, want)
	}
	r, err := e.Exec(ctxT(t, 5*time.Second), ExecRequest{SessionID: sid, Command: "echo ran", Cwd: "nosuch"})
	if err != nil || code(r) != 1 || string(r.Stdout) != "" || !strings.Contains(string(r.Stderr), "nosuch") {
		t.Errorf("a relative cwd the session lacks: %q %q %v; want exit 1 with cd's message", r.Stdout, r.Stderr, err)
	}
	// The way back is read before the env overrides (a client forwarding
	// its whole environment sends PWD), and without PWD from pwd.
	mustExec(t, e, ExecRequest{SessionID: sid, Command: "set +k; cd " + dir})
	mustExec(t, e, ExecRequest{SessionID: sid, Command: "true", Cwd: "/", Env: map[string]*string{"PWD": strp("/etc")}})
	if r = mustExec(t, e, ExecRequest{SessionID: sid, Command: "pwd"}); string(r.Stdout) != dir+"\n" {
		t.Errorf("after an override of cwd and PWD: in %q, want %q", r.Stdout, dir)
	}
	mustExec(t, e, ExecRequest{SessionID: sid, Command: "unset PWD"})
	mustExec(t, e, ExecRequest{SessionID: sid, Command: "true", Cwd: "/"})
	if r = mustExec(t, e, ExecRequest{SessionID: sid, Command: "\\builtin pwd -P"}); string(r.Stdout) != dir+"\n" {
		t.Errorf("after an override of cwd with PWD unset: in %q, want %q", r.Stdout, dir)
	}
}

func TestSessionWrapperSurvivesUserShellChanges(t *testing.T) {
	tests := []struct{ name, setup string }{
		{"alias printf", "shopt -s expand_aliases; alias printf='echo hijacked'; alias builtin='echo no'"},
		{"function printf", "printf() { echo hijacked; }; source() { echo no; }"},
		{"functions named like the loop's builtins", "read() { echo no; }; trap() { echo no; }; eval() { echo no; }; unset() { echo no; }; command() { echo no; }; cd() { echo no; }; export() { echo no; }"},
		{"noclobber", "set -o noclobber"},
		{"nounset", "set -u"},
		{"xtrace", "set -x"},
		{"close fd 3", "exec 3>&-"},
		{"IFS", "IFS=0123456789"},
		{"IFS of the loop's mode letters", "IFS='niob '"},
		{"trap INT", "trap 'echo trapped' INT"},
		{"stdout redirected", "exec >/dev/null 2>&1"},
		{"stdout closed", "exec >&- 2>&-"},
		// The loop reads fd 50 and marks on fd 51 (bash's copies).
		{"fds 10 to 12 used", "exec 10</dev/null 11>/dev/null 12>&-"},
		{"fds 50 to 52 replaced", "exec 50</dev/null 51>/dev/null 52>&-"},
		{"fd 51 closed (markers fall back to exit records)", "exec 51>&-"},
		{"fd variables", "exec {a}>/dev/null {b}</dev/null; echo $a $b >&2"},
		{"stdin closed", "exec <&-"},
		{"low descriptor limit", "ulimit -n 5"},
	}
	e := newTestEngine(t)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sid := newSession(t, e, SessionOptions{})
			defer e.DeleteSession(sid)
			mustExec(t, e, ExecRequest{SessionID: sid, Command: tc.setup})
			// Each of the loop's branches: plain, with stdin, with an
			// override, with both.
			v := "v"
			for i := range 4 {
				req := ExecRequest{SessionID: sid, Command: fmt.Sprintf("cat; echo ok%d${V-}; (exit 10)", i)}
				in, over := "", ""
				if i&1 != 0 {
					req.Stdin, in = []byte("in\n"), "in\n"
				}
				if i&2 != 0 {
					req.Env, over = map[string]*string{"V": &v}, v
				}
				want := fmt.Sprintf("%sok%d%s\n", in, i, over)
				r := mustExec(t, e, req)
				if string(r.Stdout) != want || code(r) != 10 {
					t.Fatalf("after %q, run %d: stdout %q code %d, want %q and 10", tc.setup, i, r.Stdout, code(r), want)
				}
			}
		})
	}
}

// TestSessionUserDEBUGTrapPrinting: a DEBUG trap that prints runs before
// each command, as in a terminal (its output is the command's), and never
// reaches the loop's marker.
func TestSessionUserDEBUGTrapPrinting(t *testing.T) {
	e := newTestEngine(t)
	sid := newSession(t, e, SessionOptions{})
	mustExec(t, e, ExecRequest{SessionID: sid, Command: "trap 'printf D' DEBUG"})
	for i := range 3 {
		r := mustExec(t, e, ExecRequest{SessionID: sid, Command: fmt.Sprintf("echo ok%d; (exit 10)", i)})
		if want := fmt.Sprintf("ok%d\n", i); !strings.HasSuffix(string(r.Stdout), want) || code(r) != 10 {
			t.Fatalf("run %d: stdout %q code %d, want it to end with %q, and 10", i, r.Stdout, code(r), want)
		}
	}
}

// TestSessionUserFDsFromTen: fds 10 and up are the user's, as in any
// shell: scripts lock with `exec 10>file; flock 10`, and `{fd}>` starts at
// 10 (bash's own copies sit at 50-52, see setupLine).
func TestSessionUserFDsFromTen(t *testing.T) {
	e := newTestEngine(t)
	sid := newSession(t, e, SessionOptions{})
	lock := filepath.Join(t.TempDir(), "lock")
	steps := []struct{ cmd, want string }{
		{"exec 10>" + lock + " && flock -n 10 && echo locked", "locked\n"},
		{"echo kept >&10; cat " + lock, "kept\n"},
		{"exec {v}</dev/null; echo $v; exec {v}<&-", "11\n"},
		{"exec 10>&-; echo closed", "closed\n"},
	}
	for _, st := range steps {
		r := mustExec(t, e, ExecRequest{SessionID: sid, Command: st.cmd})
		if string(r.Stdout) != st.want || code(r) != 0 {
			t.Fatalf("%q: stdout %q stderr %q code %d, want %q and 0", st.cmd, r.Stdout, r.Stderr, code(r), st.want)
		}
	}
}

// TestSessionDeadReasonKeepsBashsWords: a shell whose loop can no longer
// read (here `read` was disabled) ends with bash's own message in the
// reason, not a bare status.
func TestSessionDeadReasonKeepsBashsWords(t *testing.T) {
	e := newTestEngine(t)
	sid := newSession(t, e, SessionOptions{})
	mustExec(t, e, ExecRequest{SessionID: sid, Command: "enable -n read"})
	awaitShellEnd(t, e, sid)
	_, err := e.Exec(ctxT(t, 5*time.Second), ExecRequest{SessionID: sid, Command: "true"})
	if !errors.Is(err, ErrSessionDead) || !strings.Contains(err.Error(), "read") || !strings.Contains(err.Error(), "exit 1") {
		t.Errorf("next exec: %v, want ErrSessionDead with exit 1 and bash's words about read", err)
	}
}

// TestSessionLoopWithoutItsBuiltinsEndsTheShell: the loop needs
// `builtin`, `read` and `printf`. A function named builtin, or a builtin
// disabled with enable -n, takes them away; no shell code can get them
// back, so the shell ends at once with words saying why, where the loop
// used to wait for ever or run the last command again and again.
func TestSessionLoopWithoutItsBuiltinsEndsTheShell(t *testing.T) {
	tests := []struct{ setup, words string }{
		{"builtin() { echo fake; }", "cannot read commands"},
		{"builtin() { :; }", "cannot read commands"}, // a "read" that reads nothing
		{"enable -n printf", "cannot report command ends"},
		{"enable -n builtin", "cannot report command ends"},
	}
	e := newTestEngine(t)
	for _, tc := range tests {
		t.Run(tc.setup, func(t *testing.T) {
			sid := newSession(t, e, SessionOptions{})
			defer e.DeleteSession(sid)
			ctx := ctxT(t, 20*time.Second) // bounds the old hang; the shell ends at once
			ran := filepath.Join(t.TempDir(), "ran")
			if _, err := e.Exec(ctx, ExecRequest{SessionID: sid, Command: tc.setup + "; echo x >>" + shQuote(ran)}); err != nil && !errors.Is(err, ErrSessionDead) {
				t.Fatalf("setup: %v", err)
			}
			_, err := e.Exec(ctx, ExecRequest{SessionID: sid, Command: "echo x >>" + shQuote(ran)})
			if !errors.Is(err, ErrSessionDead) || !strings.Contains(err.Error(), tc.words) {
				t.Errorf("next exec: %v, want ErrSessionDead with %q", err, tc.words)
			}
			if b, _ := os.ReadFile(ran); len(b) > 2 {
				t.Errorf("the command ran %d times, want once", len(b)/2)
			}
		})
	}
}

// awaitShellEnd waits up to 5 s for session sid's shell to end.
func awaitShellEnd(t *testing.T, e *Engine, sid string) {
	t.Helper()
	s, err := e.session(sid)
	if err != nil {
		return // already gone
	}
	select {
	case <-s.child.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the shell did not end within 5 s")
	}
}

// A command that ends the shell at its next read (closing the loop's fd
// 50) wrote its marker first: its status is the marker's, even when the
// shell's end is seen before the marker is read (after the first few
// milliseconds, it was in about 4 runs of 10 under a 2-core machine's
// scheduling).
func TestShellEndingRightAfterItsMarkerKeepsTheStatus(t *testing.T) {
	e := newTestEngine(t)
	for i := range 30 {
		sid := newSession(t, e, SessionOptions{})
		r := mustExec(t, e, ExecRequest{SessionID: sid, Command: "sleep 0.005; exec 50<&-", Timeout: 30 * time.Second})
		e.DeleteSession(sid)
		if code(r) != 0 {
			t.Fatalf("run %d: exit code = %d, want the marker's 0", i, code(r))
		}
	}
}

// A command that writes a partial line to the marker's descriptor (fd
// 51) still ends when its marker comes after it on that line: it used to
// wait for its timeout, and the session died with it.
func TestSessionPartialLineOnTheMarkerFD(t *testing.T) {
	e := newTestEngine(t)
	sid := newSession(t, e, SessionOptions{})
	r := mustExec(t, e, ExecRequest{SessionID: sid, Command: "printf abc >&51; echo hi", Timeout: 10 * time.Second})
	if r.TimedOut || code(r) != 0 || string(r.Stdout) != "hi\n" {
		t.Fatalf("got %+v, want hi and exit 0", r)
	}
	if r := mustExec(t, e, ExecRequest{SessionID: sid, Command: "echo still"}); string(r.Stdout) != "still\n" {
		t.Fatalf("the next command: %q", r.Stdout)
	}
}

func TestSessionEndingCommandsReturnAndMarkDead(t *testing.T) {
	tests := []struct {
		name, cmd string
		code      int
		reason    string
	}{
		{"exit 7", "echo bye; exit 7", 7, "exit 7"},
		{"set -e then false", "set -e; false", 1, "exit 1"},
		{"exec true", "exec true", 0, "exit 0"},
		{"exec bash", "exec bash", 0, "exit 0"},
		{"exec sleep", "exec sleep 1", 0, "exit 0"},
		{"exec bash running a command", "exec bash -c 'sleep 0.3; exit 4'", 4, "exit 4"},
		{"exit leaving a subshell", "(sleep 10; echo late) & exit 5", 5, "exit 5"},
		{"unset parameter", "echo ${X:?must be set}", 127, "must be set"},
		{"close the loop's fd 50", "echo bye; exec 50<&-", 0, "closed fd 50"},
		// noexec: nothing runs any more, the loop included (it spun a CPU
		// and the command never completed).
		{"set -n", "echo bye; set -n; echo never", 0, "exit 0"},
		{"set -o noexec", "set -o noexec", 0, "exit 0"},
	}
	e := newTestEngine(t)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sid := newSession(t, e, SessionOptions{})
			defer e.DeleteSession(sid)
			start := time.Now()
			r := mustExec(t, e, ExecRequest{SessionID: sid, Command: tc.cmd, Timeout: 30 * time.Second})
			if d := time.Since(start); d > 5*time.Second {
				t.Errorf("took %v, want the shell's end to complete the command before 5 s", d)
			}
			if tc.code != 127 && code(r) != tc.code {
				t.Errorf("exit code = %d, want %d", code(r), tc.code)
			}
			if tc.code == 127 && code(r) == 0 {
				t.Errorf("exit code = 0, want failure")
			}
			// The shell may end just after its last marker (closing fd
			// 50 ends it at its next read).
			awaitShellEnd(t, e, sid)
			_, err := e.Exec(ctxT(t, 5*time.Second), ExecRequest{SessionID: sid, Command: "true"})
			if !errors.Is(err, ErrSessionDead) || !strings.Contains(err.Error(), tc.reason) {
				t.Errorf("next exec: %v, want ErrSessionDead mentioning %q", err, tc.reason)
			}
			for _, s := range e.ListSessions() {
				if s.ID == sid && s.Alive {
					t.Errorf("session listed alive")
				}
			}
		})
	}
}

// A command that ends the shell keeps what its EXIT trap prints on
// stdout: bash runs the trap after it undid the command's redirections,
// so the output came on the shell's own stdout, where it was dropped.
func TestSessionExitTrapOutputIsKept(t *testing.T) {
	e := newTestEngine(t)
	sid := newSession(t, e, SessionOptions{})
	r := mustExec(t, e, ExecRequest{SessionID: sid, Command: `trap 'echo cleaned up; printf partial' EXIT; echo working; exit 4`})
	if code(r) != 4 || string(r.Stdout) != "working\ncleaned up\npartial" {
		t.Fatalf("exit %d, stdout %q; want 4 and the trap's output after the command's", code(r), r.Stdout)
	}
	// A command that does not end the shell keeps its output as ever.
	sid = newSession(t, e, SessionOptions{})
	if r = mustExec(t, e, ExecRequest{SessionID: sid, Command: "echo one"}); string(r.Stdout) != "one\n" {
		t.Fatalf("stdout %q", r.Stdout)
	}
}

func TestSessionCommandLeavingBackgroundJobsCompletes(t *testing.T) {
	tests := []struct{ name, cmd string }{
		{"sleep &", "sleep 100 &"},
		{"nohup", "nohup sleep 100 &"},
		{"setsid", "setsid sleep 100 &"},
		{"late writer", "(sleep 0.5; echo LATE; echo LATE >&2) &"}, // past TrailGrace
	}
	e := newTestEngine(t)
	sid := newSession(t, e, SessionOptions{})
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			r := mustExec(t, e, ExecRequest{SessionID: sid, Command: tc.cmd + " echo started"})
			if d := time.Since(start); d > 5*time.Second || string(r.Stdout) != "started\n" {
				t.Fatalf("took %v, stdout %q; want prompt 'started'", d, r.Stdout)
			}
			// Later output of the job must never reach the next result.
			r = mustExec(t, e, ExecRequest{SessionID: sid, Command: "sleep 0.7; echo next"})
			if string(r.Stdout) != "next\n" || len(r.Stderr) != 0 {
				t.Fatalf("next command: stdout %q stderr %q, want only 'next'", r.Stdout, r.Stderr)
			}
		})
	}
}

func TestSessionTimeoutKillsTreeAndMarksDead(t *testing.T) {
	e := newTestEngine(t)
	sid := newSession(t, e, SessionOptions{})
	r := mustExec(t, e, ExecRequest{SessionID: sid, Command: "echo before; sleep 100 & echo $! >&2; sleep 100", Timeout: 300 * time.Millisecond})
	if !r.TimedOut || r.ExitCode != nil || string(r.Stdout) != "before\n" {
		t.Fatalf("timedOut=%v code=%v stdout=%q, want true nil 'before'", r.TimedOut, r.ExitCode, r.Stdout)
	}
	if pid := atoi(t, strings.TrimSpace(string(r.Stderr))); pidAlive(pid) {
		t.Errorf("background job %d survived the timeout", pid)
	}
	if _, err := e.Exec(ctxT(t, 5*time.Second), ExecRequest{SessionID: sid, Command: "true"}); !errors.Is(err, ErrSessionDead) {
		t.Errorf("after timeout: %v, want ErrSessionDead", err)
	}
}

func TestSessionInterruptAbortsCommandKeepsShell(t *testing.T) {
	// Each command prints "go" once what is to be interrupted runs.
	tests := []struct{ name, cmd string }{
		{"builtin loop", "echo go; while :; do :; done"},
		{"external sleep", "echo go; sleep 100"},
		{"loop of externals", "echo go; while :; do sleep 0.05; done"},
		// GNU timeout leaves the shell's group; a terminal's Ctrl-C
		// reaches it as the foreground job's group.
		{"program in a group of its own", "timeout 100 bash -c 'echo go; exec sleep 100'"},
	}
	e := newTestEngine(t)
	sid := newSession(t, e, SessionOptions{})
	mustExec(t, e, ExecRequest{SessionID: sid, Command: "x=kept"})
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := interruptAtGo(t, e, sid, fmt.Sprintf("int%d", i), tc.cmd)
			if code(r) != 130 {
				t.Errorf("exit code = %d, want 130", code(r))
			}
			r = mustExec(t, e, ExecRequest{SessionID: sid, Command: "echo $x"})
			if string(r.Stdout) != "kept\n" {
				t.Errorf("state after interrupt: %q, want kept", r.Stdout)
			}
		})
	}
}

// Ctrl-C reaches the running command, not a server an earlier command
// left in the background: bash starts it with SIGINT ignored, but many
// programs (node, Python, Perl, Go) install their own handler, and a
// SIGINT to the shell's whole group killed them. What such a server
// forks later is spared too.
func TestSessionInterruptSparesEarlierBackgroundJobs(t *testing.T) {
	if _, err := exec0("perl", "-e", "1"); err != nil {
		t.Skip("needs perl:", err)
	}
	e := newTestEngine(t)
	// The server forks a child every 50 ms. Started just before the next
	// command (the same clock tick, often), only the shell's $! tells it
	// from that command's own processes.
	for i, after := range []string{"sleep 0.1", "true"} {
		t.Run(after, func(t *testing.T) {
			sid := newSession(t, e, SessionOptions{})
			mustExec(t, e, ExecRequest{SessionID: sid, Command: `perl -e '$SIG{INT} = sub { exit 3 }; while (1) { my $p = fork; exec "sleep", "0.05" if $p == 0; waitpid $p, 0 }' >/dev/null 2>&1 & srv=$!; ` + after})
			r := interruptAtGo(t, e, sid, fmt.Sprintf("fg%d", i), `perl -e '$SIG{INT} = sub { exit 5 }; $| = 1; print "go\n"; sleep 60'`)
			if code(r) != 5 && code(r) != 130 {
				t.Errorf("the interrupted command: exit code %d, want its handler's 5 or 130", code(r))
			}
			r = mustExec(t, e, ExecRequest{SessionID: sid, Command: `sleep 0.2; if kill -0 $srv 2>/dev/null; then echo alive; kill -9 $srv; else wait $srv; echo "ended: $?"; fi`})
			if string(r.Stdout) != "alive\n" {
				t.Errorf("the background server after an interrupt of a later command: %q, want alive", r.Stdout)
			}
		})
	}
}

// Ctrl-C aborts the whole command, as in a terminal: not just the
// innermost function or sourced file it lands in. Afterwards the user's
// own DEBUG trap and functrace setting are as they were, and functions
// run normally again.
func TestSessionInterruptAbortsTheWholeCommand(t *testing.T) {
	e := newTestEngine(t)
	sid := newSession(t, e, SessionOptions{})
	inner := filepath.Join(t.TempDir(), "inner.sh")
	if err := os.WriteFile(inner, []byte("while :; do :; done; echo inner-after\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	mustExec(t, e, ExecRequest{SessionID: sid, Command: `spin() { while :; do :; done; echo spin-after; }
nap() { sleep 100; echo nap-after; }
outer() { spin; echo outer-after; }
dbg() { :; }
tidy() { trap 'echo tidy; trap - RETURN' RETURN; sleep 100; echo tidy-after; }
clean() { /bin/true && echo cleaned; }
messy() { trap 'clean; sleep 0.01 && echo tidied; trap - RETURN' RETURN; echo go; nap; echo messy-after; }
under() { messy; echo under-after; }`})
	tests := []struct{ name, cmd, want string }{
		{"loop in a function", "echo go; spin; echo after", "go\n"},
		{"function in a function", "echo go; outer; echo after", "go\n"},
		{"external in a function in a loop", "echo go; for i in 1 2 3; do nap; echo after $i; done; echo after", "go\n"},
		{"nested source", "echo go; source " + shQuote(inner) + "; echo after", "go\n"},
		{"function in a subshell", "echo go; (spin; echo sub-after); echo after", "go\n"},
		// Its RETURN trap runs (it is the function's cleanup), then the
		// unwinding goes on.
		{"function with a RETURN trap in a loop", "echo go; for i in 1 2 3; do tidy; echo after $i; done", "go\ntidy\n"},
		// A cleanup that runs programs and functions runs whole, too (the
		// unwinding once returned from it again, and the shell spun).
		{"RETURN trap running programs", "under; echo after", "go\ncleaned\ntidied\n"},
	}
	states := []struct{ name, setup, want string }{
		{"plain", "set +T; trap - DEBUG", "T=\n"},
		// A DEBUG trap without set -T never runs inside the commands.
		{"user DEBUG trap without functrace", "trap dbg DEBUG", "T=\n"},
	}
	for _, st := range states {
		mustExec(t, e, ExecRequest{SessionID: sid, Command: st.setup})
		for i, tc := range tests {
			t.Run(st.name+"/"+tc.name, func(t *testing.T) {
				r := interruptAtGo(t, e, sid, fmt.Sprintf("whole-%s-%d", st.name, i), tc.cmd)
				if code(r) != 130 || string(r.Stdout) != tc.want {
					t.Errorf("got code %d, stdout %q; want 130 and %q", code(r), r.Stdout, tc.want)
				}
				r = mustExec(t, e, ExecRequest{SessionID: sid, Command: `f() { echo in-f; }; f; trap -p DEBUG; echo "T=${-//[^T]/}"`})
				if want := "in-f\n" + st.want; string(r.Stdout) != want {
					t.Errorf("after the interrupt: %q, want %q", r.Stdout, want)
				}
			})
		}
	}
}

// With functrace on (the user's own DEBUG or RETURN traps at work), the
// interrupt does not unwind: it leaves the user's traps and set -T
// alone, and returns from the innermost function only. (So a DEBUG trap
// that calls a function may swallow the interrupt: landing there, it
// returns from that function. Hence a trap without one here.)
func TestSessionInterruptLeavesFunctraceAlone(t *testing.T) {
	e := newTestEngine(t)
	sid := newSession(t, e, SessionOptions{})
	mustExec(t, e, ExecRequest{SessionID: sid, Command: `set -T; trap ': dbg' DEBUG`})
	if r := interruptAtGo(t, e, sid, "ft", "echo go; sleep 100"); code(r) != 130 {
		t.Errorf("code %d, want 130", code(r))
	}
	r := mustExec(t, e, ExecRequest{SessionID: sid, Command: `f() { echo in-f; }; f; trap -p DEBUG; echo "T=${-//[^T]/}"`})
	if want := "in-f\ntrap -- ': dbg' DEBUG\nT=T\n"; string(r.Stdout) != want {
		t.Errorf("after the interrupt: %q, want %q", r.Stdout, want)
	}
}

// Ctrl-C pressed twice: the second SIGINT may land while the first one's
// trap is still arming the unwinding. The command is aborted all the
// same, and the shell's state is clean afterwards (functrace off, no
// DEBUG trap, functions run to their end).
func TestSessionDoubleInterruptAbortsTheWholeCommand(t *testing.T) {
	e := newTestEngine(t)
	sid := newSession(t, e, SessionOptions{})
	mustExec(t, e, ExecRequest{SessionID: sid, Command: `spin() { while :; do :; done; echo spin-after; }
outer() { spin; echo outer-after; }`})
	for i := range 30 {
		id := fmt.Sprintf("twice%d", i)
		done := goExec(e, sid, id, "echo go; outer; echo after")
		waitOutput(t, e, id, Stdout, "go\n")
		if err := e.InterruptSession(sid); err != nil {
			t.Fatal(err)
		}
		// 0 to 290 µs apart: inside the first trap's arming, or after.
		for end := time.Now().Add(time.Duration(i%30) * 10 * time.Microsecond); time.Now().Before(end); {
			runtime.Gosched()
		}
		_ = e.InterruptSession(sid) // may come after the command ended: then it is dropped
		r := recvOrTimeout(t, done, 5*time.Second, fmt.Sprintf("command interrupted twice (round %d)", i))
		if code(r) != 130 || string(r.Stdout) != "go\n" {
			t.Fatalf("round %d: code %d, stdout %q; want 130 and only go", i, code(r), r.Stdout)
		}
		r = mustExec(t, e, ExecRequest{SessionID: sid, Command: `f() { echo in-f; }; f; trap -p DEBUG; echo "T=${-//[^T]/}"`})
		if string(r.Stdout) != "in-f\nT=\n" {
			t.Fatalf("round %d: after the interrupts: %q, want in-f and T= alone", i, r.Stdout)
		}
	}
}

func TestSessionCommandsRunOneAtATimeInArrivalOrder(t *testing.T) {
	e := newTestEngine(t)
	sid := newSession(t, e, SessionOptions{})
	s, _ := e.session(sid)
	mustExec(t, e, ExecRequest{SessionID: sid, Command: "n=0"})
	const N = 20
	base := s.turn.arrivals()
	var wg sync.WaitGroup
	results := make([]string, N)
	for i := range N {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := e.Exec(context.Background(), ExecRequest{SessionID: sid,
				Command: fmt.Sprintf("n=$((n+1)); echo %d:$n", i)})
			if err != nil {
				t.Error(err)
			}
			results[i] = string(r.Stdout)
		}()
		// Arrival order is the order of queueing: wait for this one to
		// hold or await the turn before sending the next.
		waitQueued(t, &s.turn, base, i)
	}
	wg.Wait()
	for i, got := range results {
		if want := fmt.Sprintf("%d:%d\n", i, i+1); got != want {
			t.Errorf("command %d saw %q, want %q", i, got, want)
		}
	}
}

// waitQueued waits until the n-th (0-based) command took or awaits the
// turn (completes before 5 s).
func waitQueued(t *testing.T, l *fifoLock, base uint64, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for l.arrivals() < base+uint64(n)+1 {
		if time.Now().After(deadline) {
			t.Fatalf("command %d never queued", n)
		}
		runtime.Gosched()
	}
}

func TestTwoSessionsRunInParallel(t *testing.T) {
	e := newTestEngine(t)
	a := newSession(t, e, SessionOptions{})
	b := newSession(t, e, SessionOptions{})
	fifo := filepath.Join(t.TempDir(), "f")
	if err := unix.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	// a blocks reading the FIFO until b writes it: serialized sessions
	// would deadlock (and time out).
	done := make(chan ExecResult, 1)
	go func() {
		r, _ := e.Exec(context.Background(), ExecRequest{SessionID: a, Command: "cat " + fifo, Timeout: 10 * time.Second})
		done <- r
	}()
	mustExec(t, e, ExecRequest{SessionID: b, Command: "echo hello > " + fifo, Timeout: 10 * time.Second})
	r := recvOrTimeout(t, done, 10*time.Second, "session a")
	if string(r.Stdout) != "hello\n" {
		t.Errorf("a read %q, want hello", r.Stdout)
	}
}

func TestDeleteSessionKillsItsJobsNotSnapshotProcesses(t *testing.T) {
	e := newTestEngine(t)
	sid := newSession(t, e, SessionOptions{})
	// The last job double-forks through setsid (a daemon) and reports its
	// pid through a FIFO, so the command waits for it.
	fifo := filepath.Join(t.TempDir(), "pid")
	r := mustExec(t, e, ExecRequest{SessionID: sid, Command: "sleep 100 & echo $!; setsid sleep 100 & echo $!; " +
		"mkfifo " + fifo + "; (setsid sh -c 'echo $$ >" + fifo + "; exec sleep 100' >/dev/null 2>&1 </dev/null &); cat " + fifo})
	var pids []int
	for _, f := range strings.Fields(string(r.Stdout)) {
		pids = append(pids, atoi(t, f))
	}
	if len(pids) != 3 {
		t.Fatalf("pids %q", r.Stdout)
	}
	// The snapshot process's own child carries the session's exports, but
	// not the session's tree mark.
	p, err := e.StartProcess(ctxT(t, 5*time.Second), ProcessRequest{SessionID: sid, Command: "sleep 100 & echo $!; wait"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.WaitForLog(ctxT(t, 5*time.Second), p.ID, `^\d+$`, Stdout, 0); err != nil {
		t.Fatal(err)
	}
	if err := e.DeleteSession(sid); err != nil {
		t.Fatal(err)
	}
	for _, pid := range pids {
		if pidAlive(pid) {
			t.Errorf("session job %d survived deletion", pid)
			killPid(pid)
		}
	}
	if info, _ := e.GetProcess(p.ID); info.Status != StatusRunning || !pidAlive(p.Pid) {
		t.Errorf("snapshot process status %q after session deletion, want running", info.Status)
	}
	out, _, _, _ := e.ReadOutput(p.ID, Stdout, 0, 100)
	if child := atoi(t, strings.TrimSpace(string(out))); !pidAlive(child) {
		t.Errorf("the snapshot process's child %d died with the session", child)
	}
	_ = e.KillProcess(p.ID, unix.SIGKILL, 0)
}

// Whatever the session did to its tree mark, a process started from its
// snapshot has its own: the session's deletion must not end it, and a
// session under set -e must not break the restore.
func TestSnapshotProcessKeepsItsOwnTreeMark(t *testing.T) {
	tests := []string{"true", "readonly " + proc.MarkVar, "set -e; readonly " + proc.MarkVar, "declare -x " + proc.MarkVar + "=forged"}
	for _, setup := range tests {
		t.Run(setup, func(t *testing.T) {
			e := newTestEngine(t)
			sid := newSession(t, e, SessionOptions{})
			sessionMark := strings.TrimSpace(string(mustExec(t, e, ExecRequest{SessionID: sid, Command: "echo $" + proc.MarkVar}).Stdout))
			mustExec(t, e, ExecRequest{SessionID: sid, Command: setup})
			p, err := e.StartProcess(ctxT(t, 5*time.Second), ProcessRequest{SessionID: sid, Command: "echo $" + proc.MarkVar + "; sleep 100 & echo $!; wait"})
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = e.KillProcess(p.ID, unix.SIGKILL, 0) }()
			waitLines(t, e, p.ID, 2)
			out, _, _, _ := e.ReadOutput(p.ID, Stdout, 0, 200)
			lines := strings.Fields(string(out))
			if len(lines) != 2 || len(lines[0]) != 32 || lines[0] == sessionMark {
				t.Fatalf("snapshot process printed %q; the session's mark is %q", out, sessionMark)
			}
			if err := e.DeleteSession(sid); err != nil {
				t.Fatal(err)
			}
			if child := atoi(t, lines[1]); !pidAlive(child) {
				t.Errorf("the snapshot process's child %d died with the session", child)
			}
		})
	}
}

// The tree mark is muxd's: env overrides cannot forge it, or a command
// could hide its daemons from kills.
func TestEnvCannotForgeTheTreeMark(t *testing.T) {
	e := newTestEngine(t)
	forged := "forged"
	env := map[string]*string{proc.MarkVar: &forged}
	show := "echo $" + proc.MarkVar
	sid := newSession(t, e, SessionOptions{Env: env})
	sessionMark := strings.TrimSpace(string(mustExec(t, e, ExecRequest{SessionID: sid, Command: show}).Stdout))
	if len(sessionMark) != 32 {
		t.Fatalf("session mark %q", sessionMark)
	}
	if got := strings.TrimSpace(string(mustExec(t, e, ExecRequest{SessionID: sid, Command: show, Env: env}).Stdout)); got != sessionMark {
		t.Errorf("session command with an override: mark %q, want the session's %q", got, sessionMark)
	}
	if got := strings.TrimSpace(string(mustExec(t, e, ExecRequest{Command: show, Env: env}).Stdout)); len(got) != 32 || got == sessionMark {
		t.Errorf("stateless exec with an override: mark %q", got)
	}
	p := startProc(t, e, ProcessRequest{SessionID: sid, Command: show, Env: env})
	waitProc(t, e, p.ID)
	out, _, _, _ := e.ReadOutput(p.ID, Stdout, 0, 100)
	if got := strings.TrimSpace(string(out)); len(got) != 32 || got == sessionMark {
		t.Errorf("snapshot process with an override: mark %q", got)
	}
}

func TestSessionState(t *testing.T) {
	e := newTestEngine(t)
	dir := t.TempDir()
	sid := newSession(t, e, SessionOptions{})
	mustExec(t, e, ExecRequest{SessionID: sid, Command: "cd " + dir + "; export ST=1"})
	cwd, env, err := e.SessionState(sid)
	if err != nil || cwd != dir || !contains(env, "ST=1") {
		t.Errorf("SessionState = %q, ST in env %v, %v; want %q", cwd, contains(env, "ST=1"), err, dir)
	}
	// A PATH that no longer finds env(1), and no PWD under set -u: the
	// state is still whole, and the shell lives.
	mustExec(t, e, ExecRequest{SessionID: sid, Command: "export PATH=/nonexistent; set -u; unset PWD"})
	cwd, env, err = e.SessionState(sid)
	if err != nil || cwd != dir || !contains(env, "ST=1") || !contains(env, "PATH=/nonexistent") {
		t.Errorf("SessionState with PATH=/nonexistent = %q, %d vars, %v; want %q with ST and PATH", cwd, len(env), err, dir)
	}
	if r := mustExec(t, e, ExecRequest{SessionID: sid, Command: "echo alive"}); string(r.Stdout) != "alive\n" {
		t.Errorf("the session after SessionState: %q", r.Stdout)
	}
	_ = os.Remove(dir)
}

// With env(1) unable to run in the session (a variable past the
// kernel's 128 KiB per string), SessionState gives the environment the
// session was created with, not an empty one (a terminal started with
// it lost HOME and PATH), and the real cwd.
func TestSessionStateWhenEnvCannotRun(t *testing.T) {
	e := newTestEngine(t)
	dir := t.TempDir()
	sid := newSession(t, e, SessionOptions{Env: map[string]*string{"MARKER": strp("kept")}})
	mustExec(t, e, ExecRequest{SessionID: sid, Command: "cd " + dir + "; export BIG=$(head -c 200000 /dev/zero | tr '\\0' a)"})
	// Under set -e too: env's failure must not end the session.
	mustExec(t, e, ExecRequest{SessionID: sid, Command: "set -e"})
	cwd, env, err := e.SessionState(sid)
	if err != nil || cwd != dir || !contains(env, "MARKER=kept") || !slices.ContainsFunc(env, func(v string) bool { return strings.HasPrefix(v, "PATH=") }) {
		t.Fatalf("SessionState = %q, %d vars (MARKER kept: %v), %v; want %q and the creation env", cwd, len(env), contains(env, "MARKER=kept"), err, dir)
	}
	if r := mustExec(t, e, ExecRequest{SessionID: sid, Command: "echo alive"}); string(r.Stdout) != "alive\n" {
		t.Fatalf("the session after SessionState: %q", r.Stdout)
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func TestSessionListShowsCurrentCwd(t *testing.T) {
	e := newTestEngine(t)
	dir := t.TempDir()
	sid := newSession(t, e, SessionOptions{})
	if _, err := e.Exec(ctxT(t, 5*time.Second), ExecRequest{SessionID: sid, Command: "cd " + dir}); err != nil {
		t.Fatal(err)
	}
	for _, s := range e.ListSessions() {
		if s.ID == sid && s.Cwd != dir {
			t.Fatalf("session.list cwd = %q, want %q after cd", s.Cwd, dir)
		}
	}
}

// An interrupt sent as soon as the session is busy may reach the shell
// before it began the command (still in `read`, or just past it); it is
// not lost: the command is aborted all the same.
func TestSessionInterruptRightAfterStartIsNotLost(t *testing.T) {
	e := newTestEngine(t)
	sid := newSession(t, e, SessionOptions{})
	mustExec(t, e, ExecRequest{SessionID: sid, Command: "x=kept"})
	for i := range 40 {
		id := fmt.Sprintf("early%d", i)
		done := goExec(e, sid, id, "while :; do :; done")
		deadline := time.Now().Add(5 * time.Second)
		for !busy(e, sid) && time.Now().Before(deadline) {
			runtime.Gosched() // no sleep: the interrupt is to come as early as it can
		}
		// Later rounds wait a little: in `read`, opening the
		// redirections, starting the source, running.
		for end := time.Now().Add(time.Duration(i%10) * 30 * time.Microsecond); time.Now().Before(end); {
			runtime.Gosched()
		}
		// Odd rounds: a SIGINT on the exec's process (a process channel's
		// signal CTRL), which is the same Ctrl-C.
		if i%2 == 0 {
			if err := e.InterruptSession(sid); err != nil {
				t.Fatal(err)
			}
		} else if err := e.SignalProcess(id, syscall.SIGINT); err != nil {
			t.Fatal(err)
		}
		r := recvOrTimeout(t, done, 5*time.Second, fmt.Sprintf("command interrupted at once (round %d)", i))
		if code(r) != 130 {
			t.Fatalf("round %d: exit code = %d, want 130", i, code(r))
		}
	}
	if r := mustExec(t, e, ExecRequest{SessionID: sid, Command: "echo $x"}); string(r.Stdout) != "kept\n" {
		t.Errorf("state after interrupts: %q, want kept", r.Stdout)
	}
}

// An interrupt that arrives as a command ends, or a SIGINT from elsewhere
// while the shell is idle, never aborts the next command.
func TestSessionLateInterruptDoesNotAbortTheNextCommand(t *testing.T) {
	e := newTestEngine(t)
	sid := newSession(t, e, SessionOptions{})
	s, _ := e.session(sid)
	for i := range 100 {
		stop := make(chan struct{})
		spammed := make(chan struct{})
		go func() {
			defer close(spammed)
			// Bounded; stops with the command.
			repeatUntil(stop, 1000, func() { _ = e.InterruptSession(sid); runtime.Gosched() })
		}()
		mustExec(t, e, ExecRequest{SessionID: sid, Command: "true"})
		close(stop)
		<-spammed
		if i%10 == 0 {
			_ = s.child.SignalGroup(syscall.SIGINT) // a stray one, while idle
		}
		if r := mustExec(t, e, ExecRequest{SessionID: sid, Command: "echo ran"}); string(r.Stdout) != "ran\n" || code(r) != 0 {
			t.Fatalf("round %d: the command after an interrupted one: stdout %q code %d", i, r.Stdout, code(r))
		}
	}
}

// With job control on (set -m) bash makes each job a process group, and a
// foreground job killed by SIGINT in a loop throws bash out of the
// wrapper's loop: an interrupt then signals only the shell's group (the
// job ends on its own, as it did before muxd signalled new groups), and
// the session stays usable. Also when the interrupted command itself
// turns job control on.
func TestSessionInterruptUnderJobControl(t *testing.T) {
	for _, tc := range []struct{ name, before, cmd string }{
		{"set -m before", "set -m", "echo go; sleep 1"},
		{"set -m in the command", "", "set -m; echo go; sleep 1"},
		{"set -o monitor in the command", "", "set -o monitor; echo go; sleep 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newTestEngine(t)
			sid := newSession(t, e, SessionOptions{})
			if tc.before != "" {
				mustExec(t, e, ExecRequest{SessionID: sid, Command: tc.before})
			}
			done := make(chan ExecResult, 1)
			go func() {
				r, _ := e.Exec(context.Background(), ExecRequest{ID: "jc", SessionID: sid, Command: tc.cmd, Timeout: 8 * time.Second})
				done <- r
			}()
			waitOutput(t, e, "jc", Stdout, "go\n")
			if err := e.InterruptSession(sid); err != nil {
				t.Fatal(err)
			}
			if r := recvOrTimeout(t, done, 10*time.Second, "interrupted command under job control"); r.TimedOut {
				t.Fatalf("the interrupted command hung until its timeout: %+v", r)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if r, err := e.Exec(ctx, ExecRequest{SessionID: sid, Command: "echo ok"}); err != nil || string(r.Stdout) != "ok\n" {
				t.Fatalf("the session after an interrupt under job control: %q %v", r.Stdout, err)
			}
		})
	}
}

func busy(e *Engine, sid string) bool {
	for _, s := range e.ListSessions() {
		if s.ID == sid {
			return s.Busy
		}
	}
	return false
}

// Per-command cwd and env overrides are undone whenever the interrupt
// lands: before the command began, while it runs, or as it ends.
func TestSessionOverridesSurviveInterrupts(t *testing.T) {
	e := newTestEngine(t)
	dir := t.TempDir()
	sid := newSession(t, e, SessionOptions{Cwd: "/", Env: map[string]*string{"KEEP": strp("k")}})
	pushd := mustExec(t, e, ExecRequest{SessionID: sid, Command: "pushd /tmp >/dev/null; cd /; dirs -p | wc -l"})
	const want = "/|unset|k"
	show := `echo "$PWD|${FOO-unset}|${KEEP-unset}"`
	for i := range 150 {
		id := fmt.Sprintf("ov%d", i)
		done := make(chan ExecResult, 1)
		go func() {
			r, _ := e.Exec(context.Background(), ExecRequest{ID: id, SessionID: sid, Command: "while :; do :; done",
				Cwd: dir, Env: map[string]*string{"FOO": strp("over"), "KEEP": nil}})
			done <- r
		}()
		deadline := time.Now().Add(5 * time.Second)
		for !busy(e, sid) && time.Now().Before(deadline) {
			runtime.Gosched()
		}
		for end := time.Now().Add(time.Duration(i%15) * 10 * time.Microsecond); time.Now().Before(end); {
			runtime.Gosched()
		}
		if err := e.InterruptSession(sid); err != nil {
			t.Fatal(err)
		}
		if r := recvOrTimeout(t, done, 5*time.Second, fmt.Sprintf("round %d", i)); code(r) != 130 {
			t.Fatalf("round %d: exit code %d, want 130", i, code(r))
		}
		if got := strings.TrimSpace(string(mustExec(t, e, ExecRequest{SessionID: sid, Command: show}).Stdout)); got != want {
			t.Fatalf("round %d: the overrides stayed: %q, want %q", i, got, want)
		}
	}
	if r := mustExec(t, e, ExecRequest{SessionID: sid, Command: "dirs -p | wc -l"}); string(r.Stdout) != string(pushd.Stdout) {
		t.Errorf("directory stack: %q entries after, %q before", r.Stdout, pushd.Stdout)
	}
}

// The override script has no command substitution that bash parses with
// the command (one is eval'd, only when PWD is empty): an interrupt
// landing in such a parse made the INT trap fail, and the line with it,
// so the interrupt was lost and the cwd override stayed.
func TestOverrideScriptParsesNoCommandSubstitution(t *testing.T) {
	text, err := overrideScript("/d/u", "/tmp", map[string]*string{"FOO": strp("x"), "BAR": nil})
	if err != nil {
		t.Fatal(err)
	}
	// Drop single-quoted text (not parsed with the command), then look.
	var parsed strings.Builder
	for i, part := range strings.Split(text, "'") {
		if i%2 == 0 {
			parsed.WriteString(part)
		}
	}
	if p := strings.ReplaceAll(parsed.String(), "$((", ""); strings.Contains(p, "$(") || strings.Contains(p, "`") {
		t.Fatalf("a command substitution in the override script:\n%s", text)
	}
}

// Whatever the command does to what it overrides, and whatever the user
// did to the shell before, the overrides are undone exactly.
func TestSessionOverridesAreUndoneExactly(t *testing.T) {
	dir := t.TempDir()
	tests := []struct{ name, setup, cmd string }{
		{"plain", "", "true"},
		{"command changes the override", "", "export FOO=changed KEEP=changed"},
		{"command unsets the override", "", "unset FOO"},
		{"command cds away", "", "cd /tmp"},
		{"command uses the directory stack", "", "pushd /tmp >/dev/null; popd >/dev/null"},
		{"command unsets DIRSTACK", "", "unset DIRSTACK"},
		{"nounset, command unsets DIRSTACK", "set -u", "unset DIRSTACK"},
		{"break 2", "", "break 2"},
		{"continue 2", "", "continue 2"},
		{"not exported before", "FOO=shell", "true"},
		{"exported before", "export FOO=env", "true"},
		{"OLDPWD set", "cd /tmp; cd /", "true"},
		{"command fails", "", "false"},
		{"nounset", "set -u", "true"},
		{"errexit", "set -e", "true"},
		{"IFS", "IFS=0123456789_", "true"},
		{"xtrace", "set -x", "true"},
		{"own directory stack", "pushd /tmp >/dev/null; cd /", "true"},
	}
	e := newTestEngine(t)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sid := newSession(t, e, SessionOptions{Cwd: "/", Env: map[string]*string{"KEEP": strp("k")}})
			defer e.DeleteSession(sid)
			if tc.setup != "" {
				mustExec(t, e, ExecRequest{SessionID: sid, Command: tc.setup})
			}
			show := `echo "$PWD|${FOO-unset}|${FOO+${FOO@a}}|${KEEP-unset}|${KEEP+${KEEP@a}}|${OLDPWD-unset}|$(dirs -p | wc -l)"`
			before := mustExec(t, e, ExecRequest{SessionID: sid, Command: show}).Stdout
			r := mustExec(t, e, ExecRequest{SessionID: sid, Command: `echo "$PWD|$FOO|${KEEP-unset}"; ` + tc.cmd,
				Cwd: dir, Env: map[string]*string{"FOO": strp("over"), "KEEP": nil}})
			if want := dir + "|over|unset\n"; !strings.HasPrefix(string(r.Stdout), want) {
				t.Errorf("inside the command: %q, want %q", r.Stdout, want)
			}
			if after := mustExec(t, e, ExecRequest{SessionID: sid, Command: show}).Stdout; string(after) != string(before) {
				t.Errorf("after the command: %q, before: %q", after, before)
			}
		})
	}
	sid := newSession(t, e, SessionOptions{})
	if _, err := e.Exec(context.Background(), ExecRequest{SessionID: sid, Command: "true",
		Env: map[string]*string{"__muxd_v": strp("x")}}); !errors.Is(err, ErrInvalid) {
		t.Errorf("an env name with the wrapper's prefix: %v, want ErrInvalid", err)
	}
}
