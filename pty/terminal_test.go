package pty

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

func startBash(t *testing.T, m *Manager, id string) *Terminal {
	t.Helper()
	term, err := m.Create(CreateOptions{ID: id, Env: quietShell()})
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	return term
}

func attach(t *testing.T, term *Terminal, opts AttachOptions) *collector {
	t.Helper()
	a, _, err := term.Attach(opts)
	if err != nil {
		t.Fatalf("attach: %v", err)
	}
	return collect(t, a)
}

func typeLine(t *testing.T, w io.Writer, line string) {
	t.Helper()
	if _, err := w.Write([]byte(line + "\r")); err != nil {
		t.Fatalf("write %q: %v", line, err)
	}
}

func TestEchoAndEnvironment(t *testing.T) {
	m := newTestManager(t, Config{})
	term := startBash(t, m, "echo")
	c := attach(t, term, AttachOptions{From: -1})
	typeLine(t, term, `echo "got:$((6*7)):$TERM:$LANG:${MUXD_SECRET-unset}"`)
	c.waitFor(t, "got:42:xterm-256color:C.UTF-8:unset")
}

func TestResizeSeenByStty(t *testing.T) {
	m := newTestManager(t, Config{})
	term, err := m.Create(CreateOptions{Cols: 91, Rows: 31, Env: quietShell()})
	if err != nil {
		t.Fatal(err)
	}
	c := attach(t, term, AttachOptions{From: -1})
	typeLine(t, term, `echo "size:$(stty size)"`)
	c.waitFor(t, "size:31 91")
	if err := term.Resize(132, 43); err != nil {
		t.Fatal(err)
	}
	typeLine(t, term, `echo "size:$(stty size)"`)
	c.waitFor(t, "size:43 132")
	if in := term.Info(); in.Cols != 132 || in.Rows != 43 {
		t.Fatalf("info size: got %dx%d, want 132x43", in.Cols, in.Rows)
	}
	for _, sz := range [][2]int{{0, 10}, {10, 0}, {1001, 10}, {10, 1001}} {
		if err := term.Resize(sz[0], sz[1]); !errors.Is(err, ErrInvalidSize) {
			t.Errorf("Resize(%d, %d): got %v, want ErrInvalidSize", sz[0], sz[1], err)
		}
	}
}

func TestUTF8RoundTrip(t *testing.T) {
	m := newTestManager(t, Config{})
	term := startBash(t, m, "")
	c := attach(t, term, AttachOptions{From: -1})
	s := "héllo→世界😀"
	typeLine(t, term, `printf 'out:%s:%s\n' '`+s+`' "$(printf %s '`+s+`' | od -An -tx1 | tr -d ' \n')"`)
	c.waitFor(t, fmt.Sprintf("out:%s:%x", s, s))
}

func TestReplayOnReattachDropsQueries(t *testing.T) {
	m := newTestManager(t, Config{})
	term := startBash(t, m, "replay")
	c := attach(t, term, AttachOptions{From: -1})
	// The queries a program sends (CPR, DA, OSC 11, XTVERSION) must not be
	// replayed; the text and colours around them must.
	typeLine(t, term, `printf 'before\033[6n\033[c\033]11;?\007\033[>0q\033[31m%s\033[0m\n' after-$((1+2))`)
	c.waitFor(t, "after-3")
	if !strings.Contains(c.liveString(), "\x1b[6n") {
		t.Fatalf("live output lost the query: %q", c.liveString())
	}

	c2 := attach(t, term, AttachOptions{From: -1})
	c2.waitSync(t)
	replay := c2.replayString()
	if !strings.Contains(replay, "before\x1b[31mafter-3\x1b[0m") {
		t.Fatalf("replay lacks the output: %q", replay)
	}
	for _, q := range []string{"\x1b[6n", "\x1b[c", "\x1b]11;?", "\x1b[>0q"} {
		if strings.Contains(replay, q) {
			t.Errorf("replay contains query %q", q)
		}
	}

	// Resuming at the sync offset replays nothing and loses nothing.
	syncAt := c2.syncOffset()
	// The prompt may still be arriving, so the end can move past the sync
	// offset; c3 below checks that resuming there loses and repeats nothing.
	if end := term.Info().End; syncAt <= 0 || syncAt > end {
		t.Fatalf("sync offset %d, want within (0, %d]", syncAt, end)
	}
	c3 := attach(t, term, AttachOptions{From: syncAt})
	typeLine(t, term, `echo next-$((2+3))`)
	c3.waitFor(t, "next-5")
	c2.waitFor(t, "next-5")
	// Whatever c3 got as replay (a late prompt) plus live must be exactly
	// what c2 got live after its sync: no byte lost, none repeated.
	upTo := func(s string) string { // the prompt after next-5 may still be arriving
		return s[:strings.LastIndex(s, "next-5")]
	}
	if got, want := upTo(c3.replayString()+c3.liveString()), upTo(c2.liveString()); got != want {
		t.Fatalf("resume at sync differs:\n got %q\nwant %q", got, want)
	}
}

func TestAttachBeforeRetainedOutputReportsGap(t *testing.T) {
	m := newTestManager(t, Config{RingSize: 64 << 10})
	term := startBash(t, m, "")
	c := attach(t, term, AttachOptions{From: -1})
	typeLine(t, term, `head -c 300000 /dev/zero | tr '\0' x; echo; echo done-$((1+1))`)
	c.waitFor(t, "done-2")
	// The prompt after done-2 may still be arriving, so the oldest retained
	// byte at attach time lies between the ends read before and after.
	before := term.Info().End
	c2 := attach(t, term, AttachOptions{From: 0})
	c2.waitSync(t)
	after := term.Info().End
	ks, gap := c2.kinds(), c2.first()
	if gap.Kind != EventGap || gap.Bytes <= 0 {
		t.Fatalf("events: got %v (first %+v), want a gap first", ks, gap)
	}
	if got, lo, hi := gap.Bytes, before-64<<10, after-64<<10; got < lo || got > hi {
		t.Fatalf("gap: got %d bytes, want within [%d, %d]", got, lo, hi)
	}
}

// attachAll makes n attachments from the oldest retained byte.
func attachAll(t *testing.T, term *Terminal, n int) []*Attachment {
	t.Helper()
	as := make([]*Attachment, n)
	for i := range as {
		a, _, err := term.Attach(AttachOptions{From: -1})
		if err != nil {
			t.Fatal(err)
		}
		as[i] = a
	}
	return as
}

func TestTwoAttachmentsSeeAllAndBothType(t *testing.T) {
	m := newTestManager(t, Config{})
	term := startBash(t, m, "two")
	as := attachAll(t, term, 2)
	a1, a2 := as[0], as[1]
	c1, c2 := collect(t, a1), collect(t, a2)
	typeLine(t, a1, `echo one-$((1+1))`)
	c1.waitFor(t, "one-2")
	c2.waitFor(t, "one-2")
	typeLine(t, a2, `echo two-$((2+2))`)
	c1.waitFor(t, "two-4")
	c2.waitFor(t, "two-4")
	if n := term.Info().Attachments; n != 2 {
		t.Fatalf("attachments: got %d, want 2", n)
	}
}

// A query is answered by every viewer's emulator; only one answer may
// reach the program: the first, and while its viewer goes on answering,
// only that viewer's. A viewer that types but never answers (a script)
// takes nothing from it; focus reports and keys of the others are typed.
func TestOnlyTheFirstAnswerReachesTheProgram(t *testing.T) {
	m := newTestManager(t, Config{})
	term := startBash(t, m, "answers")
	as := attachAll(t, term, 3)
	a1, a2, script := as[0], as[1], as[2]
	c1 := collect(t, a1)
	collect(t, a2)
	collect(t, script)
	query := func(tag, want string, typist *Attachment, answers ...func()) {
		t.Helper()
		typeLine(t, typist, `read -rs -d R -t 2 ans; echo "`+tag+`=${ans#*[}R"; read -rs -t 0.3 more; echo "more=${more:-none}"`)
		for _, answer := range answers {
			answer()
		}
		c1.waitFor(t, tag+"=5;5R\r\nmore="+want+"\r\n")
	}
	answer := func(a *Attachment, b string) func() {
		return func() {
			if _, err := a.Write([]byte(b)); err != nil {
				t.Fatal(err)
			}
		}
	}
	// a1 answers first, then a2 (with a focus report, as xterm.js sends
	// when a program turns focus reporting on): a1's answer, a2's report.
	query("first", "\x1b[I", a1, answer(a1, "\x1b[5;5R"), answer(a2, "\x1b[I\x1b[9;9R"))
	// a2 answers first now, but a1 answered a moment ago: still a1's.
	query("second", "none", a2, answer(a2, "\x1b[9;9R"), answer(a1, "\x1b[5;5R"))
	// The script types the query; only a1 answers, and is heard.
	query("third", "none", script, answer(a1, "\x1b[5;5R"))
	if strings.Contains(c1.liveString(), "9;9") {
		t.Errorf("a second answer reached the program:\n%q", c1.liveString())
	}
}

func TestDropAnswers(t *testing.T) {
	tests := []struct{ in, kept string }{
		{"abc", "abc"},
		{"\x1b[5;10R", ""},
		{"\x1b[?1;2c", ""},
		{"\x1b[>0;276;0c", ""},
		{"\x1b[0n", ""},
		{"\x1b[?2004;1$y", ""},
		{"\x1b[8;24;80t", ""},
		{"\x1b[?1u", ""},
		{"\x1b]11;rgb:0000/0000/0000\x1b\\", ""},
		{"\x1b]10;rgb:ffff/ffff/ffff\x07", ""},
		{"\x1bP1$r0m\x1b\\", ""},
		{"\x1bP>|xterm.js(5.5.0)\x1b\\", ""},
		{"x\x1b[5;10Ry", "xy"},
		// keys stay
		{"\x1b[A\x1b[1;5C\x1bOR\x1b[200~hi\x1b[201~", "\x1b[A\x1b[1;5C\x1bOR\x1b[200~hi\x1b[201~"},
		{"\x1b[<0;10;5M\x1b[I\x1b", "\x1b[<0;10;5M\x1b[I\x1b"},
		{"\x1b]0;title\x07", "\x1b]0;title\x07"},
		{"\x1b[5;10", "\x1b[5;10"}, // cut: not a whole answer
	}
	for _, tt := range tests {
		if kept := dropAnswers([]byte(tt.in)); string(kept) != tt.kept {
			t.Errorf("dropAnswers(%q) = %q; want %q", tt.in, kept, tt.kept)
		}
	}
}

func TestReadOnlyAttachmentInputDropped(t *testing.T) {
	m := newTestManager(t, Config{})
	term := startBash(t, m, "ro")
	ro, _, err := term.Attach(AttachOptions{From: -1, ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	c := collect(t, ro)
	typeLine(t, ro, `echo ro-$((1+1))`)
	if err := ro.Resize(10, 10); err != nil {
		t.Fatal(err)
	}
	if err := ro.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	typeLine(t, term, `echo rw-$((2+2)) $(stty size)`)
	c.waitFor(t, "rw-4 24 80")
	if strings.Contains(c.liveString(), "ro-2") {
		t.Fatalf("read-only input reached the shell: %q", c.liveString())
	}
}

func TestExitCodeAndSignalReachEveryAttachment(t *testing.T) {
	tests := []struct {
		name string
		cmd  string
		want ExitStatus
	}{
		{"exit code", "exit 7", ExitStatus{Code: 7}},
		{"killed", "kill -9 $$", ExitStatus{Code: -1, Signal: "KILL"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := newTestManager(t, Config{})
			term := startBash(t, m, "")
			c1 := attach(t, term, AttachOptions{From: -1})
			c2 := attach(t, term, AttachOptions{From: -1, ReadOnly: true})
			typeLine(t, term, tc.cmd)
			for _, c := range []*collector{c1, c2} {
				if got := c.waitExit(t); got != tc.want {
					t.Fatalf("exit: got %+v, want %+v", got, tc.want)
				}
				c.waitUntil(t, "EOF", func() bool { return errors.Is(c.err, io.EOF) })
			}
			in := term.Info()
			if !in.Exited || in.Signal != tc.want.Signal || (tc.want.Signal == "" && (in.ExitCode == nil || *in.ExitCode != tc.want.Code)) || (tc.want.Signal != "" && in.ExitCode != nil) {
				t.Fatalf("info: %+v", in)
			}
			// A late attachment replays, then gets the exit.
			c3 := attach(t, term, AttachOptions{From: -1})
			if got := c3.waitExit(t); got != tc.want {
				t.Fatalf("late exit: got %+v, want %+v", got, tc.want)
			}
			if _, err := term.Write([]byte("x")); !errors.Is(err, ErrExited) {
				t.Fatalf("write after exit: got %v, want ErrExited", err)
			}
		})
	}
}

func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	// A zombie waits for its (re)parent to reap it; it runs no more.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}

// wantGone waits for pid to end (a kill's SIGKILL is finished by the
// kernel soon after KillTree returns) and fails, killing it, if it lives.
func wantGone(t *testing.T, pid int, what string) {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	for alive(pid) && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond) // no event to wait on for a foreign pid
	}
	if alive(pid) {
		t.Errorf("pid %d survived %s", pid, what)
		_ = syscall.Kill(pid, syscall.SIGKILL) // ours: do not leave it running
	}
}

// What an exited shell left running (`server & exit`, nohup'd or not)
// goes with the terminal: nothing else can reach it.
func TestDestroyAfterExitKillsWhatTheShellLeft(t *testing.T) {
	for _, job := range []string{"sleep 1000 &", "nohup sleep 1001 >/dev/null 2>&1 &"} {
		t.Run(job, func(t *testing.T) {
			m := newTestManager(t, Config{KillGrace: 300 * time.Millisecond})
			term := startBash(t, m, "left")
			c := attach(t, term, AttachOptions{From: -1})
			typeLine(t, term, job+` echo "pid:$!:x$((1+1))"; exit 0`)
			c.waitFor(t, ":x2")
			c.waitExit(t)
			out := c.liveString()
			out = out[:strings.LastIndex(out, ":x2")]
			pid, err := strconv.Atoi(out[strings.LastIndex(out, "pid:")+len("pid:"):])
			if err != nil {
				t.Fatalf("parse the job's pid in %q", out)
			}
			if !alive(pid) {
				t.Fatalf("the job %d ended with the shell; the test proves nothing", pid)
			}
			if err := m.Destroy("left"); err != nil {
				t.Fatal(err)
			}
			wantGone(t, pid, "the destroy of its exited terminal")
		})
	}
}

func TestDestroyKillsChildren(t *testing.T) {
	m := newTestManager(t, Config{KillGrace: 500 * time.Millisecond})
	term := startBash(t, m, "tree")
	c := attach(t, term, AttachOptions{From: -1})
	typeLine(t, term, `sleep 1000 & (trap '' HUP; exec sleep 1001) & echo "pids:$!:$(jobs -p | head -1):end-$((1+1))"`)
	c.waitFor(t, ":end-2")
	out := c.liveString()
	out = out[:strings.Index(out, ":end-2")]
	i := strings.LastIndex(out, "pids:")
	fields := strings.Split(out[i+len("pids:"):], ":")
	var pids []int
	for _, f := range fields[:2] {
		pid, err := strconv.Atoi(f)
		if err != nil {
			t.Fatalf("parse pid %q in %q", f, out)
		}
		pids = append(pids, pid)
	}
	// A daemon: double-forked through setsid, no parent, group or session
	// link left to the shell.
	typeLine(t, term, `(setsid sh -c 'echo "orph:$$:x$((3+3))"; exec sleep 1002' </dev/null &)`)
	c.waitFor(t, ":x6")
	out = c.liveString()
	out = out[:strings.LastIndex(out, ":x6")]
	orphan, err := strconv.Atoi(out[strings.LastIndex(out, "orph:")+len("orph:"):])
	if err != nil {
		t.Fatalf("parse the daemon's pid in %q", out)
	}
	pids = append(pids, orphan)
	shell := term.Pid()
	if err := m.Destroy("tree"); err != nil {
		t.Fatal(err)
	}
	// KillTree returns once the survivors of the grace were sent SIGKILL;
	// the kernel finishes them soon after.
	for _, pid := range append(pids, shell) {
		wantGone(t, pid, "destroy")
	}
	if got := c.waitExit(t); got.Signal == "" {
		t.Fatalf("exit after destroy: got %+v, want a signal", got)
	}
	if err := term.Resize(10, 10); !errors.Is(err, ErrExited) {
		t.Errorf("resize after destroy: got %v, want ErrExited", err)
	}
	if _, err := term.Write([]byte("x")); !errors.Is(err, ErrExited) {
		t.Errorf("write after destroy: got %v, want ErrExited", err)
	}
	if _, err := m.Get("tree"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("get after destroy: got %v, want ErrNotFound", err)
	}
}

func TestConcurrentGetOrCreateMakesOnePTY(t *testing.T) {
	runs := 200
	if testing.Short() {
		runs = 20
	}
	m := newTestManager(t, Config{DefaultShell: "/bin/cat", KillGrace: 200 * time.Millisecond})
	// Warm up lazily opened descriptors (/dev/null, the pidfd poller):
	// run alone, the test counted them as a leak.
	if _, _, err := m.GetOrCreate(CreateOptions{ID: "warm"}, true); err != nil {
		t.Fatal(err)
	}
	if err := m.Destroy("warm"); err != nil {
		t.Fatal(err)
	}
	fds := openFDs(t)
	const callers = 8
	for run := range runs {
		id := "race-" + strconv.Itoa(run)
		var wg sync.WaitGroup
		terms := make([]*Terminal, callers)
		created := make([]bool, callers)
		errs := make([]error, callers)
		start := make(chan struct{})
		for i := range callers {
			wg.Go(func() {
				<-start
				terms[i], created[i], errs[i] = m.GetOrCreate(CreateOptions{ID: id}, true)
			})
		}
		close(start)
		wg.Wait()
		n := 0
		for i := range callers {
			if errs[i] != nil {
				t.Fatalf("run %d: %v", run, errs[i])
			}
			if terms[i] != terms[0] {
				t.Fatalf("run %d: callers got different terminals", run)
			}
			if created[i] {
				n++
			}
		}
		if n != 1 {
			t.Fatalf("run %d: %d callers created, want 1", run, n)
		}
		if got := len(m.List()); got != 1 {
			t.Fatalf("run %d: %d terminals listed, want 1", run, got)
		}
		if err := m.Destroy(id); err != nil {
			t.Fatal(err)
		}
	}
	if got := openFDs(t); got > fds {
		t.Fatalf("fds: got %d, want <= %d", got, fds)
	}
}

func TestGetOrCreateReplacesExited(t *testing.T) {
	m := newTestManager(t, Config{})
	t1, created, err := m.GetOrCreate(CreateOptions{ID: "re", Env: quietShell()}, true)
	if err != nil || !created {
		t.Fatalf("first: %v %v", created, err)
	}
	c := attach(t, t1, AttachOptions{From: -1})
	typeLine(t, t1, "exit 3")
	c.waitExit(t)
	if t2, created, err := m.GetOrCreate(CreateOptions{ID: "re"}, false); err != nil || created || t2 != t1 {
		t.Fatalf("without replace: got %p %v %v, want the exited one", t2, created, err)
	}
	t3, created, err := m.GetOrCreate(CreateOptions{ID: "re"}, true)
	if err != nil || !created || t3 == t1 || t3.Instance() == t1.Instance() {
		t.Fatalf("with replace: got created=%v err=%v same=%v", created, err, t3 == t1)
	}
	if _, _, err := t1.Attach(AttachOptions{Instance: t1.Instance()}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("attach to replaced: got %v", err)
	}
	if _, _, err := t3.Attach(AttachOptions{Instance: t1.Instance()}); !errors.Is(err, ErrGone) {
		t.Fatalf("attach with old instance: got %v, want ErrGone", err)
	}
}

func TestCreateErrors(t *testing.T) {
	m := newTestManager(t, Config{MaxTerminals: 1, DefaultShell: "/bin/cat"})
	if _, err := m.Create(CreateOptions{ID: "a"}); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		opts CreateOptions
		want error
	}{
		{"exists", CreateOptions{ID: "a"}, ErrExists},
		{"limit", CreateOptions{ID: "b"}, ErrLimit},
		{"bad id", CreateOptions{ID: "a\nb"}, ErrInvalidID},
	}
	for _, tc := range tests {
		if _, err := m.Create(tc.opts); !errors.Is(err, tc.want) {
			t.Errorf("%s: got %v, want %v", tc.name, err, tc.want)
		}
	}
	m.Destroy("a")
	big := strings.Repeat("a", 200_000)
	if _, err := m.Create(CreateOptions{Cols: 2000}); !errors.Is(err, ErrInvalidSize) {
		t.Errorf("size: got %v", err)
	}
	for _, o := range []CreateOptions{
		{Shell: "/nonexistent/shell"},
		{Shell: "/etc/passwd"}, // not executable
		{Cwd: "/nonexistent"},
		{Cwd: "/etc/passwd"},
		{Env: map[string]*string{"A=B": nil}},
		{Env: map[string]*string{"BIG": &big}}, // past the kernel's 128 KiB per string
	} {
		_, err := m.Create(o)
		if !errors.Is(err, ErrInvalid) {
			t.Errorf("Create(%+v): got %v, want ErrInvalid", o, err)
		}
		if err != nil && o.Cwd != "" && !strings.Contains(err.Error(), "cwd") {
			t.Errorf("Create(%+v): %v, want the cwd named", o, err)
		}
	}
	if n := len(m.List()); n != 0 {
		t.Errorf("failed creates left %d terminals", n)
	}
}

func TestNoLeaksAfter500Terminals(t *testing.T) {
	n := 500
	if testing.Short() {
		n = 50
	}
	m := newTestManager(t, Config{KillGrace: 200 * time.Millisecond})
	// Warm up lazily opened descriptors (/dev/null, the pidfd poller).
	w, err := m.Create(CreateOptions{Shell: "/bin/true"})
	if err != nil {
		t.Fatal(err)
	}
	recvOrTimeout(t, w.Done(), "warm-up exit")
	m.DestroyTerminal(w)
	fds := openFDs(t)
	goroutines := runtimeGoroutines()
	for i := range n {
		if i%2 == 0 {
			term, err := m.Create(CreateOptions{Shell: "/bin/true"})
			if err != nil {
				t.Fatal(err)
			}
			a, _, err := term.Attach(AttachOptions{From: -1})
			if err != nil {
				t.Fatal(err)
			}
			buf := make([]byte, 512)
			for {
				_, err := a.Next(context.Background(), buf)
				if err != nil {
					break
				}
			}
			m.DestroyTerminal(term)
		} else {
			term, err := m.Create(CreateOptions{Shell: "/bin/cat"})
			if err != nil {
				t.Fatal(err)
			}
			m.DestroyTerminal(term)
		}
	}
	if got := openFDs(t); got > fds {
		t.Fatalf("fds: got %d after %d terminals, want <= %d", got, n, fds)
	}
	settleGoroutines(t, goroutines)
	if kids := children(t); len(kids) > 0 {
		t.Fatalf("child processes left: %v", kids)
	}
}

// children lists this process's children (zombies included).
func children(t *testing.T) []string {
	t.Helper()
	ents, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	self := strconv.Itoa(os.Getpid())
	var out []string
	for _, e := range ents {
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		if f := strings.Fields(s[i+1:]); len(f) > 1 && f[1] == self {
			out = append(out, s[:i+1])
		}
	}
	return out
}

// A shell's file name becomes the default title, which every client
// shows: control characters in it are replaced.
func TestShellTitleHasNoControlCharacters(t *testing.T) {
	for in, want := range map[string]string{
		"/bin/bash":           "bash",
		"/opt/x/evil\x1b]0;t": "evil?]0;t",
		"/tmp/a\nb":           "a?b",
		"/tmp/\xff":           "?",
		"/usr/bin/zsh-5.9":    "zsh-5.9",
	} {
		if got := shellTitle(in); got != want {
			t.Errorf("shellTitle(%q) = %q, want %q", in, got, want)
		}
	}
}
