package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"

	"github.com/muxd/muxd/client"
	"github.com/muxd/muxd/mux"
)

// muxdCmd runs a client subcommand against d with a deadline.
func muxdCmd(t *testing.T, d *daemon, stdin string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := exec.Command(muxdBin, args...)
	cmd.Env = append(os.Environ(), "MUXD_URL="+d.URL, "MUXD_TOKEN="+d.Token)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	cmd.Stdin = strings.NewReader(stdin)
	done := make(chan error, 1)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill() // Best effort: our child, by pid.
		<-done
		t.Fatalf("muxd %v did not finish", args)
	}
	return out.String(), errb.String(), cmd.ProcessState.ExitCode()
}

func TestCLIExecPsLogsKill(t *testing.T) {
	d := startDaemon(t, []string{"MUXD_TOKEN=cli-token"})
	tests := []struct {
		name      string
		stdin     string
		args      []string
		stdout    string
		stderr    string
		code      int
		errSubstr string
	}{
		{"exit code and streams", "", []string{"exec", "--", "echo out; echo err >&2; exit 3"}, "out\n", "err\n", 3, ""},
		{"argv is quoted", "", []string{"exec", "--", "printf", "%s|", "a b", "c'd"}, "a b|c'd|", "", 0, ""},
		{"stdin", "piped\n", []string{"exec", "--stdin", "--", "cat"}, "piped\n", "", 0, ""},
		{"env and cwd", "", []string{"exec", "--env", "A=1", "--cwd", "/tmp", "--", "echo $A $(pwd)"}, "1 /tmp\n", "", 0, ""},
		{"signal", "", []string{"exec", "--", "kill -9 $$"}, "", "", 137, "the command was killed by SIGKILL"},
		{"timeout", "", []string{"exec", "--timeout", "300ms", "--", "sleep 5"}, "", "", 124, "timed out after 300ms and was killed\n"},
		{"a broken pipe, quietly", "", []string{"exec", "--", "kill -PIPE $$"}, "", "", 141, ""},
		{"session created on first use", "", []string{"exec", "--session", "cli", "--", "cd /tmp && export B=2"}, "", "", 0, ""},
		{"session keeps cwd and exports", "", []string{"exec", "--session", "cli", "--", "echo $B $(pwd)"}, "2 /tmp\n", "", 0, ""},
		{"a command ends the session's shell, and is told so", "", []string{"exec", "--session", "cli", "--", "exit 4"}, "", "", 4, `the command ended session "cli" (shell ended: exit 4)`},
		{"the next exec starts it anew, and says so", "", []string{"exec", "--session", "cli", "--", "echo ${B-unset}"}, "unset\n", "", 0, `session "cli" had ended`},
		{"no command", "", []string{"exec"}, "", "", 2, "no command"},
		{"an empty command is a usage error", "", []string{"exec", "--", " "}, "", "", 2, "the command is empty"},
		// Only --url and --token-file have MUXD_* twins in client commands:
		// MUXD_TIMEOUT (say, for a health check) leaves exec alone.
		{"MUXD_TIMEOUT is not exec's", "", []string{"exec", "--", "sleep 0.3; echo fine"}, "fine\n", "", 0, ""},
		// muxd exec's own failures are 125, apart from the command's 1.
		{"a bad url says so", "", []string{"exec", "--url", "127.0.0.1:1", "--", "true"}, "", "", 125, "want e.g. http://"},
		{"a refused command is muxd's failure", "", []string{"exec", "--cwd", "/nonexistent-dir", "--", "pwd"}, "", "", 125, "/nonexistent-dir"},
	}
	t.Setenv("MUXD_TIMEOUT", "100ms")
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, errOut, code := muxdCmd(t, d, tt.stdin, tt.args...)
			if code != tt.code || out != tt.stdout || (tt.errSubstr == "" && errOut != tt.stderr) || !strings.Contains(errOut, tt.errSubstr) {
				t.Fatalf("muxd %v: got code %d stdout %q stderr %q; want %d %q %q", tt.args, code, out, errOut, tt.code, tt.stdout, tt.stderr)
			}
		})
	}

	c := d.dial(t, client.Options{})
	ctx := ctxT(t, 30*time.Second)
	p, err := c.StartProcess(ctx, "echo first; sleep 0.3; echo second; sleep 60", client.ProcessOptions{ID: "svc"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.WaitForLog(ctx, "^second$"); err != nil {
		t.Fatal(err)
	}
	out, _, code := muxdCmd(t, d, "", "ps")
	if code != 0 || !strings.Contains(out, "svc") || !strings.Contains(out, "running") {
		t.Fatalf("muxd ps: %d %q", code, out)
	}
	// --json gives the protocol's shapes: null, not "", for no signal.
	out, _, code = muxdCmd(t, d, "", "ps", "--json")
	var listed struct {
		Processes []map[string]any `json:"processes"`
		Terminals []map[string]any `json:"terminals"`
		Sessions  []map[string]any `json:"sessions"`
	}
	if err := json.Unmarshal([]byte(out), &listed); code != 0 || err != nil || len(listed.Processes) != 1 ||
		listed.Processes[0]["id"] != "svc" || listed.Processes[0]["signal"] != nil || listed.Terminals == nil || listed.Sessions == nil {
		t.Fatalf("muxd ps --json: %d %v %q", code, err, out)
	}
	if v, ok := listed.Processes[0]["exitCode"]; !ok || v != nil {
		t.Fatalf("muxd ps --json: exitCode of a running process %v, want null", v)
	}
	out, _, code = muxdCmd(t, d, "", "logs", "svc")
	if code != 0 || out != "first\nsecond\n" {
		t.Fatalf("muxd logs: %d %q", code, out)
	}
	// logs -f follows until the process ends; kill ends it.
	follow := make(chan string, 1)
	go func() {
		cmd := exec.Command(muxdBin, "logs", "-f", "svc")
		cmd.Env = append(os.Environ(), "MUXD_URL="+d.URL, "MUXD_TOKEN="+d.Token)
		b, _ := cmd.Output()
		follow <- string(b)
	}()
	if _, _, code := muxdCmd(t, d, "", "kill", "--grace", "500ms", "svc"); code != 0 {
		t.Fatalf("muxd kill: %d", code)
	}
	if got := recvOrTimeout(t, follow, 20*time.Second); got != "first\nsecond\n" {
		t.Fatalf("muxd logs -f: %q", got)
	}
	// A kill of an ended process kills what it left running and removes
	// it from muxd ps.
	launcher, err := c.StartProcess(ctx, `(setsid sleep 300 >/dev/null 2>&1 & echo $! >&3) 3>&1; echo launched`, client.ProcessOptions{ID: "launcher"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := launcher.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	launched, _, _, _ := launcher.Read(ctx, "stdout", 0, 100)
	left, _ := strconv.Atoi(strings.Fields(string(launched))[0])
	if left <= 1 || !alive(left) {
		t.Fatalf("the launcher's daemon: %q", launched)
	}
	for _, id := range []string{"svc", "launcher"} {
		if out, errOut, code := muxdCmd(t, d, "", "kill", id); code != 0 || !strings.Contains(out, id+" had already ended") {
			t.Fatalf("muxd kill of an ended process: %d %q %q", code, out, errOut)
		}
	}
	for deadline := time.Now().Add(5 * time.Second); alive(left) && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	if alive(left) {
		_ = syscall.Kill(left, syscall.SIGKILL) // ours, by pid
		t.Fatalf("muxd kill of the ended launcher left its daemon %d running", left)
	}
	if out, _, _ := muxdCmd(t, d, "", "ps"); strings.Contains(out, "svc") || strings.Contains(out, "launcher") {
		t.Fatalf("muxd ps still lists the removed processes:\n%s", out)
	}
	if _, errOut, code := muxdCmd(t, d, "", "kill", "nope"); code == 0 || !strings.Contains(errOut, `no process, terminal or session has the ID "nope"`) {
		t.Fatalf("muxd kill of an unknown id: %d %q", code, errOut)
	}
	// --grace 0 is KILL right after the TERM, not the daemon's 2 s default.
	stubborn, err := c.StartProcess(ctx, `trap "" TERM; echo ready; sleep 60`, client.ProcessOptions{ID: "stubborn"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := stubborn.WaitForLog(ctx, "^ready$"); err != nil {
		t.Fatal(err)
	}
	if _, errOut, code := muxdCmd(t, d, "", "kill", "--grace", "0", "stubborn"); code != 0 {
		t.Fatalf("muxd kill --grace 0: %d %q", code, errOut)
	}
	wctx, wcancel := context.WithTimeout(ctx, time.Second)
	info, err := stubborn.Wait(wctx)
	wcancel()
	if err != nil || info.Signal != "KILL" {
		t.Fatalf("after muxd kill --grace 0 of a tree that ignores TERM: %+v, %v; want ended by KILL at once", info, err)
	}
	// --id names the command, for muxd kill or logs while it runs.
	if out, errOut, code := muxdCmd(t, d, "", "exec", "--id", "named-exec", "--", "echo hi"); code != 0 || out != "hi\n" {
		t.Fatalf("muxd exec --id: %d %q %q", code, out, errOut)
	}
	if named, err := c.Process(ctx, "named-exec"); err != nil || named.Info().ExitCode == nil || *named.Info().ExitCode != 0 {
		t.Fatalf("the exec's record under its --id: %v", err)
	}
	if _, errOut, code := muxdCmd(t, d, "", "logs", "svc", "-f"); code != 2 || !strings.Contains(errOut, "flags go before the ID: muxd logs -f svc") {
		t.Fatalf("muxd logs ID -f: %d %q", code, errOut)
	}
	// start prints the ID; logs says where the daemon dropped output.
	id, errOut, code := muxdCmd(t, d, "", "start", "--output-limit", "1000", "--", "head -c 5000 /dev/zero")
	id = strings.TrimSpace(id)
	if code != 0 || id == "" {
		t.Fatalf("muxd start: %d %q %q", code, id, errOut)
	}
	if _, err := c.Process(ctx, id); err != nil {
		t.Fatal(err)
	}
	pr, err := c.Process(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pr.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	out, errOut, code = muxdCmd(t, d, "", "logs", id)
	if code != 0 || len(out) != 1000 || !strings.Contains(errOut, "4000 bytes of stdout were dropped") {
		t.Fatalf("muxd logs past the output limit: %d, %d bytes, %q", code, len(out), errOut)
	}
	// start --stdin keeps stdin open for a client to write to.
	id, errOut, code = muxdCmd(t, d, "", "start", "--stdin", "--", "wc -c")
	if id = strings.TrimSpace(id); code != 0 || id == "" {
		t.Fatalf("muxd start --stdin: %d %q %q", code, id, errOut)
	}
	if pr, err = c.Process(ctx, id); err != nil {
		t.Fatal(err)
	}
	if _, err := pr.Stdin().Write([]byte("abc")); err != nil {
		t.Fatalf("writing to a process started with --stdin: %v", err)
	}
	if err := pr.Stdin().Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := pr.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	if out, _, _, _ := pr.Read(ctx, "stdout", 0, 100); strings.TrimSpace(string(out)) != "3" {
		t.Fatalf("wc -c of what was written: %q", out)
	}
	// Without the token, the error says what to do.
	cmd := exec.Command(muxdBin, "ps", "--url", d.URL)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
	b, _ := cmd.CombinedOutput()
	if !strings.Contains(string(b), "MUXD_TOKEN") {
		t.Fatalf("muxd ps without a token: %q", b)
	}
}

// TestCLIExecStoppedKillsTheCommand: Ctrl-C, SIGTERM or a closed stdout
// (`| head -1`) ends muxd exec, and the command with it: it must not run
// on, unseen, on the daemon.
func TestCLIExecStoppedKillsTheCommand(t *testing.T) {
	d := startDaemon(t, nil)
	for _, tc := range []struct {
		name string
		sig  syscall.Signal // 0: close the read end of stdout (or stderr)
		// closeStderr closes stderr's read end instead of stdout's; block
		// stops reading stdout (a paused pager) before the signal.
		closeStderr, block bool
		code               int
	}{
		{"SIGINT", syscall.SIGINT, false, false, 130},
		{"SIGTERM", syscall.SIGTERM, false, false, 143},
		{"SIGHUP", syscall.SIGHUP, false, false, 129},
		{"SIGINT while stdout is not read", syscall.SIGINT, false, true, 130},
		{"stdout closed", 0, false, false, 141},
		{"stderr closed", 0, true, false, 141},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pidFile := t.TempDir() + "/pid"
			loop := "while :; do echo y; echo e >&2; sleep 0.01; done"
			if tc.block {
				loop = "while :; do echo y; done"
			}
			cmd := exec.Command(muxdBin, "exec", "--", "echo $$ >"+pidFile+"; "+loop)
			cmd.Env = append(os.Environ(), "MUXD_URL="+d.URL)
			r, w, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			er, ew, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			defer er.Close()
			cmd.Stdout, cmd.Stderr = w, ew
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			_ = w.Close()
			_ = ew.Close()
			if _, err := r.Read(make([]byte, 1)); err != nil { // the command runs
				t.Fatal(err)
			}
			if tc.block {
				time.Sleep(time.Second) // the pipe fills and muxd exec blocks writing it
			}
			switch {
			case tc.sig != 0:
				_ = cmd.Process.Signal(tc.sig)
				if !tc.block {
					go func() { _, _ = io.Copy(io.Discard, r) }()
				}
				go func() { _, _ = io.Copy(io.Discard, er) }()
			case tc.closeStderr:
				_ = er.Close()
				go func() { _, _ = io.Copy(io.Discard, r) }()
			default:
				_ = r.Close()
				go func() { _, _ = io.Copy(io.Discard, er) }()
			}
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			select {
			case <-done:
			case <-time.After(20 * time.Second):
				_ = cmd.Process.Kill() // Best effort: our child, by pid.
				t.Fatal("muxd exec did not end")
			}
			if code := cmd.ProcessState.ExitCode(); code != tc.code {
				t.Errorf("exit code %d, want %d", code, tc.code)
			}
			b, _ := os.ReadFile(pidFile)
			pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
			if pid <= 0 {
				t.Fatalf("pid file: %q", b)
			}
			for range 100 { // the daemon's kill is done when exec returns; a moment for the kernel to reap
				if unix.Kill(pid, 0) != nil {
					return
				}
				time.Sleep(20 * time.Millisecond)
			}
			t.Fatalf("the command (pid %d) still runs after muxd exec ended", pid)
		})
	}
}

// A session that ended with its timed-out command is named: its state
// is gone.
func TestCLIExecSaysTheSessionEndedWithItsCommand(t *testing.T) {
	d := startDaemon(t, nil)
	_, stderr, code := muxdCmd(t, d, "", "exec", "--session", "s", "--timeout", "200ms", "--", "sleep 5")
	if code != 124 || !strings.Contains(stderr, `session "s" ended with it`) {
		t.Errorf("exit %d, stderr %q; want 124 naming the session", code, stderr)
	}
}

// TestCLIAttachWithPipedStdin: the bytes are typed in; on a terminal the
// command created, stdin's end ends the shell (exit code passed on), and
// on an attached one it detaches, leaving the terminal running.
func TestCLIAttachWithPipedStdin(t *testing.T) {
	d := startDaemon(t, nil)
	out, _, code := muxdCmd(t, d, "echo piped-$((6*7)); exit 5\n", "attach")
	if code != 5 || !strings.Contains(out, "piped-42") {
		t.Fatalf("muxd attach < script: code %d, output %q", code, out)
	}
	out, _, code = muxdCmd(t, d, "", "attach")
	if code != 0 {
		t.Fatalf("muxd attach < /dev/null on a new terminal: code %d %q (its shell should end at EOF)", code, out)
	}
	c := d.dial(t, client.Options{})
	ctx := ctxT(t, 30*time.Second)
	term, err := c.CreateTerminal(ctx, client.TerminalOptions{ID: "kept", Shell: "bash"})
	if err != nil {
		t.Fatal(err)
	}
	defer term.Destroy(ctx)
	_, errOut, code := muxdCmd(t, d, "echo typed\n", "attach", "kept")
	if code != 0 || !strings.Contains(errOut, "detached from kept") {
		t.Fatalf("muxd attach kept < input: code %d %q", code, errOut)
	}
	if got := readUntil(t, term, "typed", 10*time.Second); !strings.Contains(got, "typed") {
		t.Fatalf("the piped bytes were not typed: %q", got)
	}
	list, err := c.ListTerminals(ctx)
	if err != nil || len(list) == 0 {
		t.Fatalf("terminals: %v %v", list, err)
	}
	for _, l := range list {
		if l.ID == "kept" && l.Exited {
			t.Fatal("detaching at stdin's end ended the attached terminal")
		}
	}
}

// attachCLI starts muxd attach with args on a new pty of size ws (nil:
// one whose size was never set). exited gets its Wait result.
func attachCLI(t *testing.T, d *daemon, ws *pty.Winsize, args ...string) (ptmx *os.File, cmd *exec.Cmd, exited chan error) {
	t.Helper()
	cmd = exec.Command(muxdBin, append([]string{"attach", "--url", d.URL}, args...)...)
	var err error
	if ws == nil {
		ptmx, err = pty.Start(cmd)
	} else {
		ptmx, err = pty.StartWithSize(cmd, ws)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ptmx.Close() })
	exited = make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	return ptmx, cmd, exited
}

// waitDetached waits for muxd attach to end, successfully, after Ctrl-].
func waitDetached(t *testing.T, cmd *exec.Cmd, exited chan error) {
	t.Helper()
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("muxd attach after detach: %v", err)
		}
	case <-time.After(10 * time.Second):
		_ = cmd.Process.Kill()
		<-exited
		t.Fatal("Ctrl-] did not detach muxd attach (was the local terminal in raw mode?)")
	}
}

// A terminal whose size nobody set (0x0: a bare pty, some container
// runtimes before their first resize) is still a terminal: raw mode, so
// Ctrl-] detaches at once. A new terminal gets 80x24; an existing one
// keeps its size (other viewers share it).
func TestCLIAttachOnATerminalWithoutASize(t *testing.T) {
	d := startDaemon(t, nil)
	c := d.dial(t, client.Options{})
	term, err := c.CreateTerminal(ctxT(t, 10*time.Second), client.TerminalOptions{Cols: 100, Rows: 30, Shell: "bash"})
	if err != nil {
		t.Fatal(err)
	}
	_ = term.Close() // Best effort: the terminal lives on.
	tests := []struct {
		name string
		args []string
		size string
	}{
		{"new terminal", []string{"--shell", "bash"}, "24 80"},
		{"existing terminal", []string{term.ID()}, "30 100"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ptmx, cmd, exited := attachCLI(t, d, nil, tc.args...)
			if _, err := ptmx.Write([]byte("stty size; echo nosize-$((40+2))\r")); err != nil {
				t.Fatal(err)
			}
			if out := readUntil(t, ptmx, "nosize-42", 15*time.Second); !strings.Contains(out, tc.size) {
				t.Fatalf("terminal size: %q, want %q", out, tc.size)
			}
			if _, err := ptmx.Write([]byte{0x1d}); err != nil { // no newline: raw mode or nothing
				t.Fatal(err)
			}
			waitDetached(t, cmd, exited)
		})
	}
}

// Killed from outside (kill, a timeout wrapper), muxd attach still leaves
// its terminal as it found it: cooked mode, and the modes a program inside
// set undone.
func TestCLIAttachKilledRestoresTheTerminal(t *testing.T) {
	d := startDaemon(t, nil)
	ptmx, tty, err := pty.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer ptmx.Close()
	defer tty.Close()
	lflag := func() uint32 {
		tio, err := unix.IoctlGetTermios(int(tty.Fd()), unix.TCGETS)
		if err != nil {
			t.Fatal(err)
		}
		return tio.Lflag
	}
	cooked := lflag()
	cmd := exec.Command(muxdBin, "attach", "--url", d.URL, "--shell", "bash")
	cmd.Stdin, cmd.Stdout, cmd.Stderr = tty, tty, tty
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	if _, err := ptmx.Write([]byte("printf '\\033[?1049h'; echo killed-$((1+2))\r")); err != nil {
		t.Fatal(err)
	}
	readUntil(t, ptmx, "killed-3", 15*time.Second)
	if l := lflag(); l&unix.ICANON != 0 {
		t.Fatalf("attached: lflag %#x, want raw mode", l)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	out := readUntil(t, ptmx, "keeps running", 10*time.Second)
	if !strings.Contains(out, "\x1b[?1049l") {
		t.Fatalf("the program's modes were not undone: %q", out)
	}
	select {
	case <-exited:
	case <-time.After(10 * time.Second):
		_ = cmd.Process.Kill()
		<-exited
		t.Fatal("muxd attach did not end on SIGTERM")
	}
	if code := cmd.ProcessState.ExitCode(); code != 128+int(syscall.SIGTERM) {
		t.Errorf("exit code %d, want %d", code, 128+int(syscall.SIGTERM))
	}
	if l := lflag(); l != cooked {
		t.Fatalf("after SIGTERM: lflag %#x, want %#x as before", l, cooked)
	}
}

func TestCLIAttachRawModeResizeAndDetach(t *testing.T) {
	d := startDaemon(t, nil)
	ptmx, cmd, exited := attachCLI(t, d, &pty.Winsize{Cols: 100, Rows: 30}, "--shell", "bash")
	if _, err := ptmx.Write([]byte("stty size; echo attach-$((40+2))\r")); err != nil {
		t.Fatal(err)
	}
	readUntil(t, ptmx, "attach-42", 15*time.Second)
	// Resize the local window: SIGWINCH reaches muxd attach.
	if err := pty.Setsize(ptmx, &pty.Winsize{Cols: 120, Rows: 40}); err != nil {
		t.Fatal(err)
	}
	var out string
	for i := 0; i < 20 && !strings.Contains(out, "40 120"); i++ {
		if _, err := ptmx.Write([]byte("stty size; echo SZ-$((1+1))\r")); err != nil {
			t.Fatal(err)
		}
		out = readUntil(t, ptmx, "SZ-2", 5*time.Second)
	}
	if !strings.Contains(out, "40 120") {
		t.Fatalf("resize did not reach the terminal: %q", out)
	}
	// A program leaves this terminal in its alternate screen with
	// bracketed paste on; Ctrl-] detaches (the terminal lives on) and
	// puts this one back.
	if _, err := ptmx.Write([]byte("printf '\\033[?1049h\\033[?2004h'; echo modes-$((1+2))\r")); err != nil {
		t.Fatal(err)
	}
	readUntil(t, ptmx, "modes-3", 15*time.Second)
	if _, err := ptmx.Write([]byte{0x1d}); err != nil {
		t.Fatal(err)
	}
	if out := readUntil(t, ptmx, "[detached from", 10*time.Second); !strings.Contains(out, "\x1b[?2004l\x1b[?1049l") {
		t.Fatalf("detach did not undo the program's modes: %q", out)
	}
	waitDetached(t, cmd, exited)
	c := d.dial(t, client.Options{})
	list, err := c.ListTerminals(ctxT(t, 10*time.Second))
	if err != nil || len(list) != 1 || list[0].Exited {
		t.Fatalf("after detach: %+v %v", list, err)
	}
}

// TestCLIExecSaysWhereOutputWasDropped: a reader slower than the command
// falls more than --output-limit behind; muxd exec says on stderr how
// much was dropped, where, rather than join the pieces silently.
func TestCLIExecSaysWhereOutputWasDropped(t *testing.T) {
	d := startDaemon(t, nil, "--output-limit", "64KiB")
	cmd := exec.Command(muxdBin, "exec", "--", "head -c 4000000 /dev/zero")
	cmd.Env = append(os.Environ(), "MUXD_URL="+d.URL)
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = w, &errOut
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	_ = w.Close()
	time.Sleep(time.Second) // the command ends while muxd exec waits on the full pipe
	n, err := io.Copy(io.Discard, r)
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("muxd exec: %v (%s)", err, errOut.String())
	}
	if n >= 4000000 || !strings.Contains(errOut.String(), "bytes of stdout were dropped here") {
		t.Fatalf("read %d of 4000000 bytes; stderr %q: want fewer and a notice", n, errOut.String())
	}
}

// TestCLIAttachDetachesWhileTheDaemonIsAway: with the daemon gone, a
// keystroke's write waits for a reconnect; Ctrl-] typed after it still
// detaches (the local terminal must not stay captured in raw mode).
func TestCLIAttachDetachesWhileTheDaemonIsAway(t *testing.T) {
	d := startDaemon(t, nil)
	ptmx, cmd, exited := attachCLI(t, d, &pty.Winsize{Cols: 80, Rows: 24}, "--shell", "bash")
	if _, err := ptmx.Write([]byte("echo up-$((20+1))\r")); err != nil {
		t.Fatal(err)
	}
	readUntil(t, ptmx, "up-21", 15*time.Second)
	if err := d.cmd.Process.Kill(); err != nil { // our child, by pid
		t.Fatal(err)
	}
	<-d.exited
	go func() { _, _ = io.Copy(io.Discard, ptmx) }() // the notices
	// More keystrokes than a small queue holds, each read alone.
	for range 120 {
		if _, err := ptmx.Write([]byte("k")); err != nil {
			t.Fatal(err)
		}
		time.Sleep(3 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond) // the first write is under way, waiting
	if _, err := ptmx.Write([]byte{0x1d}); err != nil {
		t.Fatal(err)
	}
	waitDetached(t, cmd, exited)
}

// TestCLIKillSignalOnATerminal: --signal is for processes; given for a
// terminal it is refused, and the terminal is not destroyed behind it.
func TestCLIKillSignalOnATerminal(t *testing.T) {
	d := startDaemon(t, nil)
	c := d.dial(t, client.Options{})
	ctx := ctxT(t, 30*time.Second)
	if _, err := c.CreateTerminal(ctx, client.TerminalOptions{ID: "kt"}); err != nil {
		t.Fatal(err)
	}
	_, errOut, code := muxdCmd(t, d, "", "kill", "--signal", "INT", "kt")
	if code != 2 || !strings.Contains(errOut, "is a terminal") {
		t.Fatalf("muxd kill --signal INT on a terminal: %d %q", code, errOut)
	}
	if list, err := c.ListTerminals(ctx); err != nil || len(list) != 1 || list[0].Exited {
		t.Fatalf("the terminal after a refused kill: %+v %v", list, err)
	}
	if _, _, code := muxdCmd(t, d, "", "kill", "kt"); code != 0 {
		t.Fatalf("muxd kill on a terminal: %d", code)
	}
}

// TestCLIAttachSaysTheTerminalEnded: on a terminal, the end of the shell
// is told (it may come from elsewhere: muxd kill, or before the attach).
func TestCLIAttachSaysTheTerminalEnded(t *testing.T) {
	d := startDaemon(t, nil)
	ptmx, cmd, exited := attachCLI(t, d, &pty.Winsize{Cols: 80, Rows: 24}, "--shell", "bash")
	if _, err := ptmx.Write([]byte("echo up-$((2+3)); exit 3\r")); err != nil {
		t.Fatal(err)
	}
	readUntil(t, ptmx, "ended: exit code 3]", 15*time.Second)
	select {
	case <-exited:
	case <-time.After(10 * time.Second):
		_ = cmd.Process.Kill() // our child, by pid
		t.Fatal("muxd attach did not end with its shell")
	}
	if code := cmd.ProcessState.ExitCode(); code != 3 {
		t.Fatalf("exit code %d, want 3", code)
	}
}

// TestCLIKillDropsAQueuedSessionExec: muxd kill of the id of a session
// exec still waiting for its turn drops it (it is no process yet).
func TestCLIKillDropsAQueuedSessionExec(t *testing.T) {
	d := startDaemon(t, nil)
	c := d.dial(t, client.Options{})
	ctx := ctxT(t, 30*time.Second)
	s, err := c.CreateSession(ctx, client.SessionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	mark, first, queued := queueBehindASleep(t, ctx, ctx, c, s, "qk")
	if _, errOut, code := muxdCmd(t, d, "", "kill", "qk"); code != 0 {
		t.Fatalf("muxd kill of a queued exec: %d %q", code, errOut)
	}
	if err := <-queued; !client.IsCode(err, mux.CodeCancelled) {
		t.Fatalf("the queued exec: %v, want cancelled", err)
	}
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(mark); !os.IsNotExist(err) {
		t.Fatalf("the dropped exec ran: %v", err)
	}
}

// Sessions never expire: muxd kill deletes one by its ID, so a CLI user
// at --max-sessions can free a slot.
func TestCLIKillDeletesASession(t *testing.T) {
	d := startDaemon(t, nil, "--max-sessions", "1")
	if _, errOut, code := muxdCmd(t, d, "", "exec", "--session", "a", "--", "true"); code != 0 {
		t.Fatalf("exec in session a: %d %q", code, errOut)
	}
	if _, _, code := muxdCmd(t, d, "", "exec", "--session", "b", "--", "true"); code == 0 {
		t.Fatal("a second session past --max-sessions 1 was created")
	}
	if _, errOut, code := muxdCmd(t, d, "", "kill", "a"); code != 0 {
		t.Fatalf("muxd kill of a session: %d %q", code, errOut)
	}
	if _, errOut, code := muxdCmd(t, d, "", "exec", "--session", "b", "--", "true"); code != 0 {
		t.Fatalf("exec in session b once a was deleted: %d %q", code, errOut)
	}
	if _, errOut, code := muxdCmd(t, d, "", "kill", "nosuch"); code != 1 || !strings.Contains(errOut, "no process, terminal or session") {
		t.Fatalf("muxd kill of an unknown ID: %d %q", code, errOut)
	}
}

// Usage errors say what is wrong in a line, not under the whole usage.
func TestCLIUsageErrorsAreOneLine(t *testing.T) {
	d := startDaemon(t, nil)
	for _, args := range [][]string{{"ps", "extra"}, {"exec", "--env", "BAD", "--", "true"}, {"logs", "--bogus", "x"}} {
		_, stderr, code := muxdCmd(t, d, "", args...)
		if code != 2 || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, "--help") {
			t.Errorf("muxd %v: exit %d, stderr %q; want 2 and one line pointing at --help", args, code, stderr)
		}
	}
}

// A command queued behind another of its session says what it waits for.
func TestCLIExecSaysItWaitsForABusySession(t *testing.T) {
	d := startDaemon(t, nil)
	if _, _, code := muxdCmd(t, d, "", "exec", "--session", "q", "--", "true"); code != 0 {
		t.Fatal("creating the session failed")
	}
	busy := exec.Command(muxdBin, "exec", "--session", "q", "--", "sleep 2.5")
	busy.Env = append(os.Environ(), "MUXD_URL="+d.URL)
	if err := busy.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = busy.Wait() }()
	c := d.dial(t, client.Options{})
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		list, err := c.ListSessions(ctxT(t, 5*time.Second))
		if err == nil && len(list) == 1 && list[0].Busy {
			break // the sleep holds the session
		}
		if time.Now().After(deadline) {
			t.Fatalf("the session never got busy: %+v %v", list, err)
		}
	}
	out, stderr, code := muxdCmd(t, d, "", "exec", "--session", "q", "--", "echo queued")
	if code != 0 || out != "queued\n" || !strings.Contains(stderr, `waiting for session "q"`) {
		t.Errorf("exit %d, stdout %q, stderr %q; want the command's output after a notice of the wait", code, out, stderr)
	}
}

// A command whose muxd exec was killed (no chance to kill it) is listed
// by muxd ps while it runs, so it can be found and killed.
func TestCLIPsListsRunningExecs(t *testing.T) {
	d := startDaemon(t, nil)
	run := exec.Command(muxdBin, "exec", "--", "sleep 30 # lost-exec")
	run.Env = append(os.Environ(), "MUXD_URL="+d.URL)
	if err := run.Start(); err != nil {
		t.Fatal(err)
	}
	var id string
	for deadline := time.Now().Add(10 * time.Second); id == ""; time.Sleep(20 * time.Millisecond) {
		out, _, _ := muxdCmd(t, d, "", "ps")
		for _, line := range strings.Split(out, "\n") {
			if f := strings.Fields(line); len(f) > 2 && f[0] == "exec" && strings.Contains(line, "lost-exec") {
				id = f[1]
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("muxd ps never listed the exec:\n%s", out)
		}
	}
	_ = run.Process.Kill() // our own child, by pid: muxd exec dies, its command runs on
	_ = run.Wait()
	if _, errOut, code := muxdCmd(t, d, "", "kill", "--grace", "0", id); code != 0 {
		t.Fatalf("muxd kill %s: %d %s", id, code, errOut)
	}
	if out, _, _ := muxdCmd(t, d, "", "ps"); strings.Contains(out, "lost-exec") {
		t.Fatalf("still listed after the kill:\n%s", out)
	}
}
