package proc

import (
	"bufio"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// helperCatchInt leaves its parent's process group and catches SIGINT
// (started as a background job, it had it ignored): a SIGINT ends it.
func helperCatchInt() {
	_ = unix.Setpgid(0, 0)
	c := make(chan os.Signal, 1)
	signal.Notify(c, os.Interrupt)
	select {
	case <-c:
		os.Exit(3)
	case <-time.After(60 * time.Second):
	}
}

// pollUntil retries cond every 10 ms for up to 10 s.
func pollUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for range 1000 {
		if cond() {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("gave up waiting: %s", what)
}

// startScript runs a bash script with $SELF a helper that catches SIGINT
// (helperCatchInt); it returns the script's stdin and its stdout lines.
func startScript(t *testing.T, script string) (*Process, *os.File, *bufio.Scanner) {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	env, _ := Env(os.Environ(), map[string]*string{"PROC_TEST_HELPER": ptr("catch-int"), "SELF": &self})
	inR, inW, _ := os.Pipe()
	outR, outW, _ := os.Pipe()
	t.Cleanup(func() { inW.Close(); outR.Close() })
	p, err := Start(Spec{Path: "bash", Args: []string{"bash", "-c", script}, Env: env, Stdin: inR, Stdout: outW})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.KillTree(unix.SIGKILL, 0) })
	inR.Close()
	outW.Close()
	_ = outR.SetReadDeadline(time.Now().Add(20 * time.Second))
	return p, inW, bufio.NewScanner(outR)
}

func TestSignalNewChildGroupsReachesWhatTheCommandStarted(t *testing.T) {
	// An older job that left the group and catches SIGINT, a background
	// job that ignores it, then (once told) a foreground GNU timeout,
	// which leaves the group too.
	p, inW, sc := startScript(t, `"$SELF" & echo $!; sleep 60 & echo $!; read -r _; timeout 60 sleep 60; echo "rc=$?"`)
	var old, bg int
	for _, pid := range []*int{&old, &bg} {
		if !sc.Scan() {
			t.Fatalf("no pid: %v", sc.Err())
		}
		*pid, _ = strconv.Atoi(sc.Text())
	}
	pollUntil(t, "the old job in its own group, catching SIGINT", func() bool {
		st, ok := readStat(old)
		return ok && st.pgid == old && !ignores(old, syscall.SIGINT)
	})
	if !ignores(bg, syscall.SIGINT) {
		t.Errorf("a background job of a non-interactive bash should ignore SIGINT")
	}
	time.Sleep(50 * time.Millisecond) // start times are in 10 ms ticks
	since := Ticks()
	if _, err := inW.WriteString("go\n"); err != nil {
		t.Fatal(err)
	}
	var timeoutPid int
	pollUntil(t, "timeout in its own group", func() bool {
		for _, st := range snapshot() {
			if st.ppid == p.Pid && st.pgid == st.pid && st.pid != old && st.pid != p.Pid {
				timeoutPid = st.pid
				return true
			}
		}
		return false
	})
	if n := p.SignalNewChildGroups(syscall.SIGINT, since); n != 1 {
		t.Errorf("signalled %d groups, want 1 (timeout's)", n)
	}
	if !sc.Scan() || !strings.HasPrefix(sc.Text(), "rc=") {
		t.Fatalf("bash did not go on after timeout %d got SIGINT: %q %v", timeoutPid, sc.Text(), sc.Err())
	}
	if !alive(old) || !alive(bg) {
		t.Errorf("an older job or a background job got the SIGINT: old alive %v, bg alive %v", alive(old), alive(bg))
	}
}

func TestLateChildrenAreWhatWasForkedRightAfterTheMark(t *testing.T) {
	// An older child that catches SIGINT (one would end it), then (once
	// told) a foreground bash with a child of its own: the late ones.
	p, inW, sc := startScript(t, `"$SELF" & echo $!; read -r _; bash -c 'sleep 60; echo never'; echo "rc=$?"`)
	if !sc.Scan() {
		t.Fatalf("no pid: %v", sc.Err())
	}
	old, _ := strconv.Atoi(sc.Text())
	pollUntil(t, "the old child catching SIGINT", func() bool { return alive(old) && !ignores(old, syscall.SIGINT) })

	lastPID, since := LastPID(), Ticks()
	if lastPID < old {
		t.Fatalf("LastPID() = %d, below a pid handed out before: %d", lastPID, old)
	}
	if _, err := inW.WriteString("go\n"); err != nil {
		t.Fatal(err)
	}
	// Until sleep exec'd, the late bash may still be inside its fork,
	// where bash 5.2 can lose a SIGINT.
	pollUntil(t, "the late bash and its sleep", func() bool {
		for _, st := range snapshot() {
			if c, ok := readStat(st.ppid); ok && c.ppid == p.Pid && c.pid != old && st.state != 'Z' {
				comm, err := os.ReadFile("/proc/" + strconv.Itoa(st.pid) + "/comm")
				return err == nil && string(comm) == "sleep\n"
			}
		}
		return false
	})
	if late := p.LateChildren(lastPID, since-10); len(late) != 0 {
		t.Errorf("children started 100 ms after the mark counted as late: %v", late)
	}
	if late := p.LateChildren(0, since); len(late) != 0 {
		t.Errorf("with no mark: %v", late)
	}
	late := p.LateChildren(lastPID, since)
	if len(late) != 2 || slices.Contains(late, old) {
		t.Fatalf("late: %v, want the late bash and its sleep (old %d)", late, old)
	}
	for _, pid := range late {
		if err := unix.Kill(pid, syscall.SIGINT); err != nil {
			t.Fatal(err)
		}
	}
	if !sc.Scan() || sc.Text() != "rc=130" {
		t.Fatalf("after the late children got SIGINT: %q %v, want rc=130", sc.Text(), sc.Err())
	}
	if !alive(old) {
		t.Errorf("the older child got SIGINT too")
	}
}

func TestZombieChildrenAndCPUTicks(t *testing.T) {
	// exec leaves bash's child unreaped: perl never waits, and burns CPU.
	p := bash(t, `sleep 0.01 & exec perl -e '$t = time + 20; 1 while time < $t'`, nil)
	pollUntil(t, "an unreaped child", func() bool { return len(p.ZombieChildren()) == 1 })
	if kids := p.Children(); len(kids) != 1 {
		t.Errorf("children %v, want the zombie", kids)
	}
	c0 := p.CPUTicks()
	pollUntil(t, "CPU time growing", func() bool { return p.CPUTicks() > c0+5 })
}

func TestTicksIsAProcessStartTime(t *testing.T) {
	before := Ticks()
	p := bash(t, "sleep 5", nil)
	st, ok := readStat(p.Pid)
	after := Ticks()
	if !ok || st.start+1 < before || st.start > after+1 {
		t.Fatalf("a child started at tick %d, between Ticks() %d and %d", st.start, before, after)
	}
}

func TestForkingChildrenAreThoseThatMayLoseASignal(t *testing.T) {
	// A perl parent plays the shell. Its children: a copy that blocks
	// SIGINT and, once told, unblocks it and execs sleep (bash's child
	// inside its fork); a copy that catches SIGINT and stays a copy (a
	// subshell); and a program of its own that blocks SIGINT (what
	// posix_spawn does for a moment), which got its signal: no copy.
	since := Ticks()
	env, _ := Env(os.Environ(), nil)
	outR, outW, _ := os.Pipe()
	t.Cleanup(func() { outR.Close() })
	p, err := Start(Spec{Path: "perl", Args: []string{"perl", "-MPOSIX", "-e", `$| = 1;
sub kid { my $pid = fork(); die "fork" unless defined $pid; if ($pid == 0) { $_[0]->(); exit 0 } }
kid(sub { sigprocmask(SIG_BLOCK, POSIX::SigSet->new(SIGINT)) or die; $go = 0; $SIG{USR1} = sub { $go = 1 };
  print "blocked $$\n"; for (1 .. 12000) { last if $go; select(undef, undef, undef, 0.005) }
  sigprocmask(SIG_UNBLOCK, POSIX::SigSet->new(SIGINT)) or die; exec "sleep", "60" });
kid(sub { $SIG{INT} = sub {}; print "catching $$\n"; sleep 60 });
kid(sub { exec "perl", "-MPOSIX", "-e", 'sigprocmask(SIG_BLOCK, POSIX::SigSet->new(SIGINT)) or die; $| = 1; print "other $$\n"; sleep 60' });
sleep 60`}, Env: env, Stdout: outW})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.KillTree(unix.SIGKILL, 0) })
	outW.Close()
	_ = outR.SetReadDeadline(time.Now().Add(20 * time.Second))
	sc := bufio.NewScanner(outR)
	pids := map[string]int{}
	for len(pids) < 3 && sc.Scan() {
		name, pid, _ := strings.Cut(sc.Text(), " ")
		pids[name], _ = strconv.Atoi(pid)
	}
	blocked, catching, other := pids["blocked"], pids["catching"], pids["other"]
	if blocked == 0 || catching == 0 || other == 0 {
		t.Fatalf("children %v: %v", pids, sc.Err())
	}
	pollUntil(t, "the copy catching SIGINT and the program blocking it", func() bool {
		c, ok1 := readSigMasks(catching)
		o, ok2 := readSigMasks(other)
		return ok1 && ok2 && c.cgt&sigBit(unix.SIGINT) != 0 && o.blk&sigBit(unix.SIGINT) != 0
	})
	pidsOf := func(fs []Forking) []int {
		out := []int{}
		for _, f := range fs {
			out = append(out, f.Pid)
		}
		slices.Sort(out)
		return out
	}
	forking := p.ForkingChildren(unix.SIGINT, since)
	want := []int{blocked, catching}
	slices.Sort(want)
	if got := pidsOf(forking); !slices.Equal(got, want) {
		t.Fatalf("forking children %v, want the two copies %v (not the program %d)", got, want, other)
	}
	if late := p.ForkingChildren(unix.SIGINT, since+100); len(late) != 0 {
		t.Errorf("copies started a second before the mark listed: %v", pidsOf(late))
	}
	if left := p.LeftFork(forking, unix.SIGINT); len(left) != 0 {
		t.Errorf("left the fork while still copies: %v", left)
	}
	if err := unix.Kill(blocked, unix.SIGUSR1); err != nil {
		t.Fatal(err)
	}
	pollUntil(t, "the blocking copy past its exec", func() bool {
		return slices.Equal(p.LeftFork(forking, unix.SIGINT), []int{blocked})
	})
	if err := unix.Kill(blocked, unix.SIGKILL); err != nil {
		t.Fatal(err)
	}
	pollUntil(t, "the killed child gone from the list", func() bool {
		return len(p.LeftFork(forking, unix.SIGINT)) == 0
	})
}

// foreground picks what a session's running command started in the
// shell's group (leader 100): not earlier commands' jobs nor what they
// fork, not the shell's last job ($!) even in the command's clock tick,
// and the command's own orphans whatever adopted them.
func TestForegroundPicksTheRunningCommandsProcesses(t *testing.T) {
	const since = 1000
	st := func(pid, ppid, pgid int, start uint64) procStat {
		return procStat{pid: pid, ppid: ppid, pgid: pgid, start: start, state: 'S'}
	}
	tests := []struct {
		name  string
		procs []procStat
		job   int
		fg    []int
		older bool
	}{
		{"the command alone", []procStat{st(100, 50, 100, 900), st(200, 100, 100, 1005)}, 0, []int{100, 200}, false},
		{"an old job and its new child", []procStat{st(100, 50, 100, 900), st(150, 100, 100, 800), st(151, 150, 100, 1005), st(200, 100, 100, 1005)}, 0, []int{100, 200}, true},
		{"the last job, in the command's tick", []procStat{st(100, 50, 100, 900), st(190, 100, 100, 1000), st(191, 190, 100, 1003), st(200, 100, 100, 1000)}, 190, []int{100, 200}, true},
		{"a pid like the last job's, started later", []procStat{st(100, 50, 100, 900), st(190, 100, 100, 1010)}, 190, []int{100, 190}, false},
		{"an orphan adopted by muxd", []procStat{st(50, 1, 50, 10), st(100, 50, 100, 900), st(200, 100, 100, 1005), st(300, 50, 100, 1006)}, 0, []int{100, 200, 300}, false},
		{"other groups and zombies", []procStat{st(100, 50, 100, 900), st(400, 100, 400, 1005), {pid: 201, ppid: 100, pgid: 100, start: 1005, state: 'Z'}}, 0, []int{100}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fg, older := foreground(100, tt.procs, since, tt.job)
			slices.Sort(fg)
			if !slices.Equal(fg, tt.fg) || older != tt.older {
				t.Fatalf("foreground = %v, older %v; want %v, %v", fg, older, tt.fg, tt.older)
			}
		})
	}
}
