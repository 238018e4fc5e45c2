package exec

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// The output FIFOs are reused between commands; these runs mix the paths
// that keep them (fast, clean exits), give them to drains (slow commands)
// and replace them (a writer left behind), and check every result.
func TestSessionFIFOReuseNeverMixesOutputs(t *testing.T) {
	runs := 500
	if testing.Short() {
		runs = 100
	}
	e := newTestEngine(t, func(c *Config) { c.RetainCount = 8 })
	sid := newSession(t, e, SessionOptions{})
	deadline := time.Now().Add(60 * time.Second)
	for i := range runs {
		if time.Now().After(deadline) {
			t.Fatalf("only %d runs in 60 s", i)
		}
		n := strconv.Itoa(i)
		cmd, wantOut, wantErr := "printf o"+n+"; printf 'e"+n+"\\0' >&2", "o"+n, "e"+n+"\x00"
		accept := func(out, errOut string) bool { return out == wantOut && errOut == wantErr }
		switch i % 50 {
		case 10: // leaves a writer on both FIFOs that writes soon after: its output is the
			// command's, unless a loaded machine delays it past TrailGrace;
			// either way it reaches no later result
			cmd = "(sleep 0.05; echo LATE; echo LATE >&2) & " + cmd
			accept = func(out, errOut string) bool {
				return (out == wantOut || out == wantOut+"LATE\n") && (errOut == wantErr || errOut == wantErr+"LATE\n")
			}
		case 40: // leaves a writer that writes past TrailGrace: in no result
			cmd = "(sleep 0.5; echo LATER; echo LATER >&2) & " + cmd
		case 20: // slow: drained by goroutines
			cmd = "sleep 0.01; " + cmd
		case 30: // more than a pipe buffer, fast
			cmd = "head -c 200000 /dev/zero | tr '\\0' a; " + cmd
			wantOut = strings.Repeat("a", 200000) + wantOut
		}
		r := mustExec(t, e, ExecRequest{SessionID: sid, Command: cmd, MaxOutput: 1 << 20})
		if !accept(string(r.Stdout), string(r.Stderr)) || code(r) != 0 {
			t.Fatalf("run %d (%s): stdout %.60q stderr %q code %d", i, cmd, r.Stdout, r.Stderr, code(r))
		}
	}
}

func TestSnapshotAcrossFilesystems(t *testing.T) {
	e := newTestEngine(t)
	sid := newSession(t, e, SessionOptions{})
	s, _ := e.session(sid)
	other := t.TempDir()
	var a, b syscall.Stat_t
	if syscall.Stat(s.dir, &a) != nil || syscall.Stat(other, &b) != nil || a.Dev == b.Dev {
		t.Skip("the session dir and the temp dir are on one filesystem here")
	}
	mustExec(t, e, ExecRequest{SessionID: sid, Command: "export SNAP=across; cd /tmp"})
	path := filepath.Join(other, "snap")
	if err := s.snapshot(ctxT(t, 5*time.Second), path); err != nil {
		t.Fatalf("snapshot to another filesystem: %v", err)
	}
	body, err := os.ReadFile(path)
	if err != nil || !strings.Contains(string(body), "SNAP=") || !strings.Contains(string(body), "cd -- /tmp") {
		t.Fatalf("snapshot %q (%v), want the export and the cwd", body, err)
	}
}

// Traps run at the top level too (between the wrapper's commands), where
// stdout is the control pipe: what they print must never pass for a
// status, nor shift a marker onto the next command.
func TestSessionTopLevelTrapOutputIsNotAMarker(t *testing.T) {
	tests := []struct{ name, setup string }{
		{"DEBUG trap printing numbers", "trap 'echo 0; echo 1 >&2' DEBUG"},
		{"ERR trap printing numbers", "trap 'echo 3' ERR"},
		{"RETURN trap", "trap 'echo 7' RETURN"},
	}
	e := newTestEngine(t)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sid := newSession(t, e, SessionOptions{})
			defer e.DeleteSession(sid)
			mustExec(t, e, ExecRequest{SessionID: sid, Command: tc.setup})
			for i := range 3 {
				r := mustExec(t, e, ExecRequest{SessionID: sid, Command: "echo ok" + strconv.Itoa(i) + "; (exit 10)"})
				if code(r) != 10 || !strings.Contains(string(r.Stdout), "ok"+strconv.Itoa(i)+"\n") {
					t.Fatalf("run %d: stdout %q code %d, want ok%d and 10", i, r.Stdout, code(r), i)
				}
			}
		})
	}
}

// The session loop must survive what a command can do to loops and to
// the loop's read: every command still gets its own marker and result.
func TestSessionLoopSurvivesBreakContinueAndTMOUT(t *testing.T) {
	tests := []struct {
		name, cmd string
		idle      time.Duration // pause before the next command
	}{
		{"break", "echo a; break; echo b", 0},
		{"continue", "echo a; continue; echo b", 0},
		{"break 2", "echo a; break 2", 0},
		{"break 3", "echo a; break 3", 0},
		{"break 9", "echo a; break 9", 0},
		{"continue 2", "echo a; continue 2", 0},
		{"continue 3", "echo a; continue 3", 0},
		{"return", "echo a; return 4; echo b", 0},
		{"TMOUT", "echo a; TMOUT=1", 1300 * time.Millisecond},
		{"alias keywords", "shopt -s expand_aliases; alias if=false while=false for=false; echo a", 0},
		{"loop vars changed", "echo a; __muxd_i=x __muxd_x=i", 0},
		{"nounset, loop vars unset", "echo a; set -u; unset __muxd_p __muxd_x __muxd_rc __muxd_i", 0},
	}
	e := newTestEngine(t)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sid := newSession(t, e, SessionOptions{})
			defer e.DeleteSession(sid)
			r := mustExec(t, e, ExecRequest{SessionID: sid, Command: tc.cmd})
			if !strings.HasPrefix(string(r.Stdout), "a\n") || strings.Contains(string(r.Stdout), "b") {
				t.Fatalf("stdout %q, want a and not b", r.Stdout)
			}
			if tc.idle > 0 {
				time.Sleep(tc.idle) // the condition under test is the shell idling
			}
			for i := range 3 {
				r := mustExec(t, e, ExecRequest{SessionID: sid, Command: "echo next" + strconv.Itoa(i) + "; (exit 6)"})
				if string(r.Stdout) != "next"+strconv.Itoa(i)+"\n" || code(r) != 6 {
					t.Fatalf("after %q, run %d: stdout %q code %d", tc.cmd, i, r.Stdout, code(r))
				}
			}
		})
	}
}

// Ctrl-C landing while the shell is idle in the loop's read (the command
// just ended) must not end the loop.
func TestSessionInterruptWhileIdleKeepsLoop(t *testing.T) {
	e := newTestEngine(t)
	sid := newSession(t, e, SessionOptions{})
	s, _ := e.session(sid)
	for range 5 {
		if err := s.child.SignalGroup(syscall.SIGINT); err != nil {
			t.Fatal(err)
		}
		r := mustExec(t, e, ExecRequest{SessionID: sid, Command: "echo alive"})
		if string(r.Stdout) != "alive\n" || code(r) != 0 {
			t.Fatalf("after SIGINT while idle: stdout %q code %d", r.Stdout, code(r))
		}
	}
}

// A command that changes the shell's stdin keeps the change to itself:
// the next commands read /dev/null again.
func TestSessionStdinChangesDoNotCarryOver(t *testing.T) {
	file := filepath.Join(t.TempDir(), "in")
	if err := os.WriteFile(file, []byte("leaked\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	e := newTestEngine(t)
	for _, cmd := range []string{"exec <" + file, "exec 0<&-", "exec 0<" + file + "; read x; echo $x"} {
		t.Run(cmd, func(t *testing.T) {
			sid := newSession(t, e, SessionOptions{})
			defer e.DeleteSession(sid)
			mustExec(t, e, ExecRequest{SessionID: sid, Command: cmd})
			for range 2 {
				r := mustExec(t, e, ExecRequest{SessionID: sid, Command: "cat; read x; echo rc=$?"})
				if string(r.Stdout) != "rc=1\n" || len(r.Stderr) != 0 {
					t.Fatalf("after %q: stdout %q stderr %q, want rc=1 from /dev/null", cmd, r.Stdout, r.Stderr)
				}
			}
			r := mustExec(t, e, ExecRequest{SessionID: sid, Command: "cat", Stdin: []byte("given")})
			if string(r.Stdout) != "given" {
				t.Fatalf("with stdin bytes: %q", r.Stdout)
			}
		})
	}
}

// Interrupts in a flood (every 20-100 µs, some of them stray SIGINTs to
// the idle shell) over many short commands: each command either runs in
// full or reports 130, and afterwards the session is as it was: no
// unwinding trap or functrace left over, the user's own DEBUG trap (with
// set -T) kept, its state snapshotted whole for a process.
func TestSessionInterruptFloodKeepsSessionsClean(t *testing.T) {
	e := newTestEngine(t)
	var wg sync.WaitGroup
	for k := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sid := newSession(t, e, SessionOptions{})
			s, _ := e.session(sid)
			setup, want := `g() { echo g1; echo g2; }; export X=kept`, "g1\ng2\nT= X=kept\n"
			if k%2 == 1 {
				setup += `; dbg() { :; }; set -T; trap dbg DEBUG`
				want = "g1\ng2\ntrap -- 'dbg' DEBUG\nT=T X=kept\n"
			}
			mustExec(t, e, ExecRequest{SessionID: sid, Command: setup})
			var stop atomic.Bool
			flooded := make(chan struct{})
			go func() {
				defer close(flooded)
				for i := 0; !stop.Load() && i < 100000; i++ {
					if i%4 == 0 {
						_ = s.child.SignalGroup(syscall.SIGINT) // a stray one
					} else {
						_ = e.InterruptSession(sid)
					}
					time.Sleep(time.Duration(20+i%80) * time.Microsecond)
				}
			}()
			for i := range 80 {
				r, err := e.Exec(context.Background(), ExecRequest{SessionID: sid, Command: "g"})
				if err != nil || !(code(r) == 130 || code(r) == 0 && string(r.Stdout) == "g1\ng2\n") {
					t.Errorf("session %d, command %d: code %d, stdout %q, stderr %q, %v", k, i, code(r), r.Stdout, r.Stderr, err)
					break
				}
			}
			stop.Store(true)
			<-flooded
			_, _ = e.Exec(context.Background(), ExecRequest{SessionID: sid, Command: "true"}) // where a last SIGINT may land
			r := mustExec(t, e, ExecRequest{SessionID: sid, Command: `g; trap -p DEBUG; echo "T=${-//[^T]/} X=$X"`})
			if string(r.Stdout) != want || code(r) != 0 {
				t.Errorf("session %d after the flood: %q, code %d; want %q", k, r.Stdout, code(r), want)
			}
			p, err := e.StartProcess(context.Background(), ProcessRequest{ID: fmt.Sprintf("flood-snap%d", k), SessionID: sid, Command: `echo "X=$X"`})
			if err != nil {
				t.Errorf("session %d: start from snapshot: %v", k, err)
				return
			}
			waitOutput(t, e, p.ID, Stdout, "X=kept\n")
		}()
	}
	wg.Wait()
}
