package proc

import (
	"bytes"
	"os"
	"slices"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

// userHZ is the unit of /proc/<pid>/stat's start time: USER_HZ, 100 on
// every architecture Linux ships for (the kernel converts to it).
const userHZ = 100

// Ticks is now in the unit of a process's start time in /proc (clock
// ticks after boot), to compare with the children's start times in
// [Process.SignalNewChildGroups].
func Ticks() uint64 {
	var ts unix.Timespec
	if unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts) != nil {
		return 0
	}
	return uint64(ts.Sec)*userHZ + uint64(ts.Nsec)/(1e9/userHZ)
}

// SignalNewChildGroups sends sig to the process group of each of the
// child's own children that leads a group of its own (setpgid(0, 0) or
// setsid), started at or after since (see [Ticks]) and does not ignore
// sig. It returns how many groups it signalled.
//
// This is what a terminal's Ctrl-C reaches that a signal to the child's
// group does not: an interactive shell makes each foreground job a group
// of its own, so a program that calls setpgid itself (GNU timeout does)
// still gets the terminal's SIGINT; under a non-interactive shell it
// leaves the shell's group and would not. Background jobs of a
// non-interactive shell start with SIGINT ignored, and older children
// are left alone, so only what the current command started is reached.
func (p *Process) SignalNewChildGroups(sig syscall.Signal, since uint64) int {
	if p.Exited() || sig <= 0 || sig > 64 {
		return 0
	}
	own := unix.Getpgrp()
	n := 0
	for _, st := range snapshot() {
		// Only a group the child leads: one that joined another group
		// (muxd's, another shell's) does not take the signal there.
		if st.ppid != p.Pid || st.pgid != st.pid || st.pgid == p.Pid || st.pgid <= 1 || st.pgid == own || st.state == 'Z' {
			continue
		}
		if since > 0 && st.start+1 < since { // a tick of slack: start times are floored
			continue
		}
		if ignores(st.pid, sig) {
			continue
		}
		if unix.Kill(-st.pgid, sig) == nil {
			n++
		}
	}
	return n
}

// ignores reports whether pid ignores sig (SigIgn in /proc/<pid>/status);
// false when it cannot tell.
func ignores(pid int, sig syscall.Signal) bool {
	m, ok := readSigMasks(pid)
	return ok && m.ign&sigBit(sig) != 0
}

// sigMasks are a process's signal masks from /proc/<pid>/status.
type sigMasks struct{ blk, ign, cgt uint64 }

func sigBit(sig syscall.Signal) uint64 { return 1 << (uint(sig) - 1) }

func readSigMasks(pid int) (sigMasks, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return sigMasks{}, false
	}
	field := func(name string) (uint64, bool) {
		_, rest, ok := bytes.Cut(b, []byte("\n"+name+":"))
		if !ok {
			return 0, false
		}
		line, _, _ := bytes.Cut(rest, []byte("\n"))
		v, err := strconv.ParseUint(string(bytes.TrimSpace(line)), 16, 64)
		return v, err == nil
	}
	var m sigMasks
	var ok1, ok2, ok3 bool
	m.blk, ok1 = field("SigBlk")
	m.ign, ok2 = field("SigIgn")
	m.cgt, ok3 = field("SigCgt")
	return m, ok1 && ok2 && ok3
}

// Forking is a child that was still inside its parent's fork when a
// signal went (see [Process.ForkingChildren]).
type Forking struct {
	Pid   int
	start uint64 // its start time, against pid reuse
}

// ForkingChildren lists the child's own children that may still be
// inside their fork as far as sig goes: copies of the child (same
// executable and command line: not exec'd yet) that started in the ticks
// around since (see [Ticks]) and block sig (bash blocks SIGINT, SIGCHLD
// and SIGTERM around fork, and the new process inherits that mask) or
// catch it (the parent's handler, not reset yet). Read just before a
// signal to the group, it tells which children may lose it: bash 5.2
// unblocks the signals in a new child before it marks it as one that
// must not run the parent's traps, so a SIGINT pending there sets a trap
// flag in the child, and the exec forgets it. The parent got the SIGINT
// too, and waits for that child to end before it runs its trap.
//
// A program that blocks or catches sig for itself is no copy, and an
// older copy (a subshell that waits for a program, catching SIGINT
// meanwhile) is not recent: neither is listed. A subshell that started
// just before is, and [Process.LeftFork] lists it only once it exec'd.
func (p *Process) ForkingChildren(sig syscall.Signal, since uint64) []Forking {
	if p.Exited() || since == 0 {
		return nil
	}
	var out []Forking
	var img image // read at the first candidate
	for _, pid := range p.Children() {
		st, ok := readStat(pid)
		if !ok || st.state == 'Z' || st.start+lateChildTicks < since {
			continue
		}
		m, ok := readSigMasks(pid)
		if !ok || (m.blk|m.cgt)&sigBit(sig) == 0 {
			continue
		}
		if img.exe == "" {
			img = imageOf(p.Pid)
		}
		if img.same(pid) {
			out = append(out, Forking{Pid: pid, start: st.start})
		}
	}
	return out
}

// LeftFork lists those of forking (see [Process.ForkingChildren]) that
// still run and have left their fork: they exec'd a program (maybe the
// same shell running a script) and do not block sig. A signal sent to
// them now is not lost the way the one to their group may have been. A
// copy that never execs (a subshell) is never listed.
func (p *Process) LeftFork(forking []Forking, sig syscall.Signal) []int {
	if p.Exited() || len(forking) == 0 {
		return nil
	}
	img := imageOf(p.Pid)
	var out []int
	for _, f := range forking {
		st, ok := readStat(f.Pid)
		if !ok || st.start != f.start || st.ppid != p.Pid || st.state == 'Z' {
			continue // ended, reaped or another process now
		}
		if m, ok := readSigMasks(f.Pid); !ok || m.blk&sigBit(sig) != 0 {
			continue
		}
		if o := imageOf(f.Pid); o.exe == "" || o == img {
			continue // gone, or still a copy
		}
		out = append(out, f.Pid)
	}
	return out
}

// image is what tells a forked copy of a process from a program it
// exec'd: the executable and the command line (a copy keeps both; a
// script run by the same shell binary has its own command line).
type image struct{ exe, cmdline string }

// imageOf reads pid's image; exe is "" when it cannot tell.
func imageOf(pid int) image {
	id := strconv.Itoa(pid)
	exe, _ := os.Readlink("/proc/" + id + "/exe")
	cmd, _ := os.ReadFile("/proc/" + id + "/cmdline")
	return image{exe: exe, cmdline: string(cmd)}
}

// same reports whether pid runs the image (false when it cannot tell).
func (img image) same(pid int) bool {
	return img.exe != "" && imageOf(pid) == img
}

// LastPID is the pid the kernel handed out last in muxd's pid namespace
// (the last field of /proc/loadavg), or 0 when it cannot tell. Read just
// before a signal to a process group, it tells the processes forked after
// the signal went (see [Process.LateChildren]).
func LastPID() int {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	f := bytes.Fields(b)
	if len(f) < 5 {
		return 0
	}
	pid, err := strconv.Atoi(string(f[4]))
	if err != nil {
		return 0
	}
	return pid
}

// Children lists the child's own children, zombies included.
func (p *Process) Children() []int {
	if p.Exited() {
		return nil
	}
	id := strconv.Itoa(p.Pid)
	if b, err := os.ReadFile("/proc/" + id + "/task/" + id + "/children"); err == nil {
		// The main thread's children: a shell forks from its only thread.
		var out []int
		for _, f := range bytes.Fields(b) {
			if pid, err := strconv.Atoi(string(f)); err == nil {
				out = append(out, pid)
			}
		}
		return out
	}
	var out []int // a kernel without the children file
	for _, st := range snapshot() {
		if st.ppid == p.Pid {
			out = append(out, st.pid)
		}
	}
	return out
}

// LateChildren lists what the child forked after a signal to its process
// group went, and so never got it: its own children with a pid above
// lastPID (see [LastPID]) started in the ticks right after since (see
// [Ticks]; the two together rule out a pid that wrapped around), and
// what they started since, through late parents; parents first, the
// order to signal them in.
//
// This mends a race of a shell that traps the signal: bash blocks
// signals while it forks, so a SIGINT to its group in that window reaches
// the shell but not the child it is forking, and the shell runs its trap
// only once that child ends by itself. Such a child starts within
// microseconds of the signal.
func (p *Process) LateChildren(lastPID int, since uint64) []int {
	if p.Exited() || lastPID <= 0 || since == 0 {
		return nil
	}
	first := false
	for _, pid := range p.Children() {
		if st, ok := readStat(pid); ok && lateChild(st, lastPID, since) {
			first = true
			break
		}
	}
	if !first {
		return nil // the common case: no scan of /proc
	}
	late := map[int]procStat{}
	for _, st := range snapshot() {
		if st.pid > lastPID && st.start+1 >= since && st.state != 'Z' && st.pid != p.Pid {
			late[st.pid] = st
		}
	}
	// The late children and, through late parents, what they started.
	reached := map[int]bool{}
	for range len(late) + 1 { // bounded: each pass adds a level or ends
		grew := false
		for pid, st := range late {
			if !reached[pid] && (reached[st.ppid] || st.ppid == p.Pid && lateChild(st, lastPID, since)) {
				reached[pid] = true
				grew = true
			}
		}
		if !grew {
			break
		}
	}
	out := make([]int, 0, len(reached))
	for pid := range reached {
		out = append(out, pid)
	}
	// Parents first (pids grow, bar a wrap): a shell whose child dies of
	// SIGINT before the shell got its own goes on with its next command.
	slices.Sort(out)
	return out
}

// lateChildTicks is how long after the signal a late child may start, in
// ticks: start times are floored to 10 ms, and a forking shell may be
// preempted.
const lateChildTicks = 5

func lateChild(st procStat, lastPID int, since uint64) bool {
	return st.pid > lastPID && st.start+1 >= since && st.start <= since+lateChildTicks && st.state != 'Z'
}

// ZombieChildren lists the child's own children that ended and that it
// has not reaped yet.
func (p *Process) ZombieChildren() []int {
	var out []int
	for _, pid := range p.Children() {
		if st, ok := readStat(pid); ok && st.state == 'Z' {
			out = append(out, pid)
		}
	}
	return out
}

// CPUTicks is the CPU time the child has used (user and system), in
// clock ticks; 0 when it cannot tell.
func (p *Process) CPUTicks() uint64 {
	st, _ := readStat(p.Pid)
	return st.cpu
}

// SignalForeground sends sig to what the command that began at since (see
// [Ticks]) runs in the child's process group: the child itself and the
// members started at or after since, except what older members started.
// It is a terminal's Ctrl-C for a non-interactive shell, whose commands
// all share its group: a background job of an earlier command (`server &`)
// is in that group too, and a signal to the whole group reached it. Bash
// starts such jobs with SIGINT ignored, but node, Python, Perl and Go
// programs install their own handlers and died of it.
//
// Start times count in clock ticks (10 ms), so a job started by the
// previous command just before this one began cannot be told apart by
// them: job, the last job the shell started before the command (its $!;
// 0 if none), counts as older whatever its start time, unless it started
// after since (then the pid is another process's now).
//
// When no older member is found it signals the whole group, as
// [Process.SignalGroup] does, so nothing forked during the scan is
// missed; else each chosen member by pid, twice over (a second scan
// catches what they forked meanwhile). since 0 means the whole group.
func (p *Process) SignalForeground(sig syscall.Signal, since uint64, job int) error {
	if since == 0 {
		return p.SignalGroup(sig)
	}
	procs := snapshot()
	fg, older := foreground(p.Pid, procs, since, job)
	if !older {
		return p.SignalGroup(sig)
	}
	sent := map[int]bool{}
	for round := 0; round < 2; round++ {
		for _, pid := range fg {
			if !sent[pid] && unix.Kill(pid, sig) == nil {
				sent[pid] = true
			}
		}
		if round == 0 {
			fg, _ = foreground(p.Pid, snapshot(), since, job)
		}
	}
	return nil
}

// foreground returns the members of leader's group that the command begun
// at since runs (see SignalForeground), and whether any member predates
// it. A member is the command's when neither it nor any ancestor in the
// group up to the leader started before since (a tick of slack: start
// times are floored) or is job. An ancestor outside the group (muxd or
// init, which adopted an orphan) ends the walk: it says nothing of when
// the command began.
func foreground(leader int, procs []procStat, since uint64, job int) (fg []int, older bool) {
	byPid := make(map[int]procStat, len(procs))
	for _, st := range procs {
		byPid[st.pid] = st
	}
	isOld := func(st procStat) bool {
		return st.start+1 < since || (st.pid == job && st.start <= since+1)
	}
	for _, st := range procs {
		if st.pgid != leader || st.state == 'Z' {
			continue
		}
		if st.pid == leader {
			fg = append(fg, st.pid)
			continue
		}
		mine := true
		cur := st
		for range 1 << 10 { // bounded: pid chains are short, a cycle impossible
			if isOld(cur) {
				mine = false
				break
			}
			parent, ok := byPid[cur.ppid]
			if !ok || parent.pid == leader || parent.pgid != leader {
				break // up to the shell, or an orphan's adopter outside the group
			}
			cur = parent
		}
		if mine {
			fg = append(fg, st.pid)
		} else {
			older = true
		}
	}
	return fg, older
}
