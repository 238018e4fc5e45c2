package proc

import (
	"bytes"
	"errors"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// procStat is what tree walks need from /proc/<pid>/stat.
type procStat struct {
	pid, ppid, pgid, sid int
	state                byte
	start                uint64 // clock ticks after boot
	cpu                  uint64 // user and system time, clock ticks
}

// readStat parses /proc/<pid>/stat. The command name is in parentheses and
// may itself contain spaces and parentheses, so fields are counted from the
// last ')'.
func readStat(pid int) (procStat, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procStat{}, false
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return procStat{}, false
	}
	f := bytes.Fields(b[i+2:])
	if len(f) < 20 || len(f[0]) != 1 {
		return procStat{}, false
	}
	st := procStat{pid: pid, state: f[0][0]}
	st.ppid, _ = strconv.Atoi(string(f[1]))
	st.pgid, _ = strconv.Atoi(string(f[2]))
	st.sid, _ = strconv.Atoi(string(f[3]))
	st.start, _ = strconv.ParseUint(string(f[19]), 10, 64) // field 22, starttime
	utime, _ := strconv.ParseUint(string(f[11]), 10, 64)   // field 14
	stime, _ := strconv.ParseUint(string(f[12]), 10, 64)   // field 15
	st.cpu = utime + stime
	return st, true
}

// scans counts full /proc scans (for benchmarks and tests).
var scans atomic.Int64

// snapshot reads every process of the system.
func snapshot() []procStat {
	scans.Add(1)
	d, err := os.Open("/proc")
	if err != nil {
		return nil
	}
	defer d.Close()
	names, _ := d.Readdirnames(-1) // Best effort: a partial list still helps.
	out := make([]procStat, 0, len(names))
	for _, n := range names {
		pid, err := strconv.Atoi(n)
		if err != nil {
			continue
		}
		if st, ok := readStat(pid); ok {
			out = append(out, st)
		}
	}
	return out
}

// sharedScans lets concurrent tree walks share /proc scans. Killing many
// trees at once (muxd's shutdown with hundreds of terminals) made every
// walk scan all of /proc, each scan costing more as the trees are more:
// 200 trees took seconds. A walk needs a scan that began after it asked
// (a freeze rescans to see what was forked before a stop), so callers
// that ask while a scan runs wait for it and share the next one.
var sharedScans = newScanShare(snapshot)

// scanShare is the state of the shared scans.
type scanShare struct {
	scan func() []procStat

	mu      sync.Mutex // guards the fields below
	idle    *sync.Cond // signalled when a scan ends
	running bool
	pending *scanBatch // callers waiting for the next scan, nil if none
}

// scanBatch is one scan and the callers that share it.
type scanBatch struct {
	started bool          // guarded by scanShare.mu
	joined  int           // callers sharing it, guarded by scanShare.mu
	done    chan struct{} // closed once procs is set
	procs   []procStat    // read-only once done
}

func newScanShare(scan func() []procStat) *scanShare {
	s := &scanShare{scan: scan}
	s.idle = sync.NewCond(&s.mu)
	return s
}

// snapshot returns every process of the system as a scan that began
// after the call; the result is shared and must not be modified.
func (s *scanShare) snapshot() []procStat {
	s.mu.Lock()
	b := s.pending
	if b == nil {
		b = &scanBatch{done: make(chan struct{})}
		s.pending = b
	}
	b.joined++
	for s.running && !b.started {
		s.idle.Wait()
	}
	if b.started { // another caller of the batch scans
		s.mu.Unlock()
		<-b.done
		return b.procs
	}
	b.started, s.pending, s.running = true, nil, true
	s.mu.Unlock()
	defer func() { // even if scan panics: later walks must not wait forever
		close(b.done)
		s.mu.Lock()
		s.running = false
		s.idle.Broadcast()
		s.mu.Unlock()
	}()
	b.procs = s.scan()
	return b.procs
}

// member is how a tree walk recognizes the members of a tree that are no
// longer linked to it: mark is the tree's environment mark ("" for none),
// since the root's start time (0 when unknown).
type member struct {
	mark  string
	since uint64
	until uint64 // when the reaped root ended (clock ticks after boot), 0 if unknown or running
}

// inGroup reports whether p, in the process group or session that the
// reaped root led, is the root's: the kernel does not recycle a group or
// session id while in use, but once its last member ended the root's pid
// may go to an unrelated process that leads a group of its own. The
// root's members started before it ended, or carry the mark; such a
// newcomer does neither. Knowing neither, p is taken as the root's.
func (m *member) inGroup(p procStat) bool {
	if m == nil || m.until == 0 && m.mark == "" {
		return true
	}
	if m.until != 0 && p.start <= m.until {
		return true
	}
	return m.mark != "" && m.marked(p)
}

// candidate reports whether p, not linked to the tree, may be an unlinked
// member whose environment is worth reading. Members start after the root;
// one that left the tree was reparented to a reaper (muxd, init, or a
// subreaper above muxd), which started before the root. So only the tops
// of trees started since the root qualify, and a kill reads few
// environments (a read can wait on the target's memory lock).
// self is muxd's pid.
func (m *member) candidate(p procStat, byPid map[int]procStat, self int) bool {
	if m.since == 0 {
		return true
	}
	if p.start < m.since {
		return false
	}
	parent, ok := byPid[p.ppid]
	return !ok || p.ppid == 1 || p.ppid == self || parent.start <= m.since
}

// marked reports whether p carries the mark (its environment is read once
// for every walk: see cachedMark).
func (m *member) marked(p procStat) bool { return cachedMark(p) == m.mark }

// tree returns the live (non-zombie) members of root's tree in procs: root
// (if withRoot), members of the process group and session that root leads
// (which keeps nohup'ed children whose parent already exited), processes
// carrying the tree's mark (orphans that double-forked through setsid and
// were reparented away), and their descendants by parent pid. Without
// withRoot, root's pid is trusted only as a group or session id, which the
// kernel does not recycle while in use.
func tree(root int, procs []procStat, withRoot bool, m *member) []int {
	children := make(map[int][]int, len(procs))
	for _, p := range procs {
		children[p.ppid] = append(children[p.ppid], p.pid)
	}
	in := map[int]bool{}
	var queue []int
	add := func(pid int) {
		if !in[pid] {
			in[pid] = true
			queue = append(queue, pid)
		}
	}
	if withRoot {
		add(root)
	}
	self := os.Getpid()
	for _, p := range procs {
		if (p.pgid == root || p.sid == root) && (withRoot || m.inGroup(p)) {
			add(p.pid)
		}
	}
	walk := func() {
		for len(queue) > 0 {
			pid := queue[0]
			queue = queue[1:]
			for _, c := range children[pid] {
				add(c)
			}
		}
	}
	walk()
	if m != nil && m.mark != "" {
		byPid := make(map[int]procStat, len(procs))
		for _, p := range procs {
			byPid[p.pid] = p
		}
		for _, p := range procs {
			if !in[p.pid] && p.pid > 1 && p.pid != self && m.candidate(p, byPid, self) && m.marked(p) {
				add(p.pid)
			}
		}
		walk()
	}
	live := make(map[int]bool, len(procs))
	for _, p := range procs {
		if p.state != 'Z' && p.state != 'X' {
			live[p.pid] = true
		}
	}
	out := make([]int, 0, len(in))
	for pid := range in {
		if pid > 1 && pid != self && live[pid] {
			out = append(out, pid)
		}
	}
	return out
}

// Descendants returns the live members of root's tree other than root.
func Descendants(root int) []int {
	all := tree(root, sharedScans.snapshot(), true, nil)
	out := all[:0]
	for _, pid := range all {
		if pid != root {
			out = append(out, pid)
		}
	}
	return out
}

// maxFreezeRounds bounds the stop-and-rescan loop: each round catches
// children forked before their parent was stopped; a tree that keeps
// growing past this many rounds is killed with what was found.
const maxFreezeRounds = 16

// freeze stops every member of root's tree and returns them. Stopped
// parents cannot fork, so rescanning until no new member appears yields the
// whole tree.
func freeze(root int, withRoot bool, m *member, stopped map[int]bool) []int {
	return freezeRounds(func() []int { return tree(root, sharedScans.snapshot(), withRoot, m) }, stopped)
}

// freezeRounds stops what members returns, a fresh scan each round, until
// a round finds nobody new, and returns every process it stopped
// (stopped holds them, and those stopped before).
func freezeRounds(members func() []int, stopped map[int]bool) []int {
	for range maxFreezeRounds {
		fresh := 0
		for _, pid := range members() {
			if !stopped[pid] {
				stopped[pid] = true
				fresh++
				_ = unix.Kill(pid, unix.SIGSTOP) // Best effort: it may be gone.
			}
		}
		if fresh == 0 {
			break
		}
	}
	out := make([]int, 0, len(stopped))
	for pid := range stopped {
		out = append(out, pid)
	}
	return out
}

// ErrBadRoot reports a pid that must never be treated as a tree root.
var ErrBadRoot = errors.New("proc: refusing to kill pid <= 1 or muxd itself")

// KillTree ends the tree rooted at root: root, its descendants, and the
// members of the process group and session it leads. It first stops every
// member so that no script runs its next command mid-kill, then sends sig
// to all of them and continues them; whatever is still alive after grace
// is frozen again (catching anything forked meanwhile) and SIGKILLed.
// sig == SIGKILL skips the grace. KillTree returns once the tree has been
// SIGKILLed or is gone; it signals only members of the tree.
func KillTree(root int, sig syscall.Signal, grace time.Duration) error {
	return killTree(root, true, "", 0, 0, sig, grace)
}

// killTree is KillTree that also ends the processes carrying mark (see
// [Process.KillTree]); since is the root's start time, 0 if unknown, and
// until when the reaped root ended (see member.inGroup).
func killTree(root int, withRoot bool, mark string, since, until uint64, sig syscall.Signal, grace time.Duration) error {
	if root <= 1 || root == os.Getpid() {
		return ErrBadRoot
	}
	m := &member{mark: mark, since: since, until: until}
	if mark != "" && withRoot && since == 0 {
		if st, ok := readStat(root); ok {
			m.since = st.start
		}
	}
	stopped := map[int]bool{}
	members := freeze(root, withRoot, m, stopped)
	if sig != unix.SIGKILL {
		for _, pid := range members {
			_ = unix.Kill(pid, sig) // Best effort: it may be gone.
		}
		for _, pid := range members {
			_ = unix.Kill(pid, unix.SIGCONT) // Best effort.
		}
		if waitGone(members, grace) {
			return nil
		}
		// Survivors (and anything they forked) are frozen again below;
		// their stopped marks must not hide them.
		clear(stopped)
	}
	for _, pid := range freeze(root, withRoot, m, stopped) {
		_ = unix.Kill(pid, unix.SIGKILL) // Best effort.
	}
	return nil
}

// markCache holds the marks of the processes tree walks have read, by pid
// and start time (a pid may be reused), for every kill at once: many
// trees killed together (a shutdown) read each environment once, not once
// per tree. It is cleared whole when it grows past markCacheMax.
var markCache = struct {
	sync.Mutex
	m map[[2]uint64]string
}{m: map[[2]uint64]string{}}

const markCacheMax = 1 << 14

// cachedMark returns p's tree mark, read once.
func cachedMark(p procStat) string {
	key := [2]uint64{uint64(p.pid), p.start}
	markCache.Lock()
	v, ok := markCache.m[key]
	markCache.Unlock()
	if ok {
		return v
	}
	v = markOf(p.pid)
	markCache.Lock()
	if len(markCache.m) >= markCacheMax {
		clear(markCache.m)
	}
	markCache.m[key] = v
	markCache.Unlock()
	return v
}

// KillAll SIGKILLs, with no grace, every process of this muxd's trees:
// its descendants, and whatever carries a mark of this run (a double fork
// through setsid took it away), with their descendants; frozen first,
// round after round, so that none forks past the kill. It is a shutdown's
// last sweep. It returns how many it killed; it never signals muxd itself
// or pid 1.
func KillAll() int { return killFrozen(func() []int { return runMembers(runMark, true) }) }

// RunMark is what every tree mark of this run begins with: a later muxd
// given it can end what this run leaves behind (see KillRun).
func RunMark() string { return runMark }

// KillRun SIGKILLs, as KillAll does, every process carrying a mark of an
// earlier run (one that ended without its shutdown: SIGKILL, a crash)
// and their descendants. It refuses this run's own mark and anything
// that is not a run mark. It returns how many it killed.
func KillRun(mark string) int {
	if !isRunMark(mark) || mark == runMark {
		return 0
	}
	return killFrozen(func() []int { return runMembers(mark, false) })
}

// isRunMark reports whether s has a run mark's form (8 lowercase hex).
func isRunMark(s string) bool {
	if len(s) != len(runMark) {
		return false
	}
	for _, c := range []byte(s) {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// killFrozen freezes members round after round, then SIGKILLs them.
func killFrozen(members func() []int) int {
	stopped := freezeRounds(members, map[int]bool{})
	for _, pid := range stopped {
		_ = unix.Kill(pid, unix.SIGKILL) // Best effort.
	}
	return len(stopped)
}

// runMembers returns, from a fresh scan, the live processes carrying a
// mark that begins with mark, with their descendants, and with
// ownChildren muxd's own descendants too.
func runMembers(mark string, ownChildren bool) []int {
	self := os.Getpid()
	procs := sharedScans.snapshot()
	children := make(map[int][]int, len(procs))
	for _, p := range procs {
		children[p.ppid] = append(children[p.ppid], p.pid)
	}
	var queue []int
	// Another run's processes: never muxd itself, what it started, or
	// those it descends from (a muxd started from a terminal of the dead
	// run carries its mark too, and so does the shell it runs under).
	spared := map[int]bool{}
	if ownChildren {
		queue = append(queue, self)
	} else {
		parent := make(map[int]int, len(procs))
		for _, p := range procs {
			parent[p.pid] = p.ppid
		}
		for pid := self; pid > 1 && !spared[pid]; pid = parent[pid] {
			spared[pid] = true
		}
		// And the rest of its job, such as a tee it writes its log to:
		// killing it would kill muxd by SIGPIPE.
		own := unix.Getpgrp()
		for _, p := range procs {
			if p.pgid == own && !descends(parent, p.pid, self) {
				spared[p.pid] = true
			}
		}
	}
	for _, p := range procs {
		if p.pid > 1 && p.pid != self && !spared[p.pid] && p.state != 'Z' && p.state != 'X' && strings.HasPrefix(cachedMark(p), mark) {
			queue = append(queue, p.pid)
		}
	}
	in := map[int]bool{}
	for len(queue) > 0 {
		pid := queue[0]
		queue = queue[1:]
		if !in[pid] && (!spared[pid] || pid == self && ownChildren) {
			in[pid] = true
			queue = append(queue, children[pid]...)
		}
	}
	var out []int
	for _, p := range procs {
		if in[p.pid] && p.pid > 1 && p.pid != self && p.state != 'Z' && p.state != 'X' {
			out = append(out, p.pid)
		}
	}
	return out
}

// descends reports whether pid descends from root, by the parent links.
func descends(parent map[int]int, pid, root int) bool {
	for range len(parent) + 1 { // bounded: a cycle is impossible, but cheap to rule out
		if pid <= 1 {
			return false
		}
		if pid = parent[pid]; pid == root {
			return true
		}
	}
	return false
}

// waitGone polls until every pid is gone or a zombie, or grace passes.
func waitGone(pids []int, grace time.Duration) bool {
	deadline := time.Now().Add(grace)
	delay := time.Millisecond
	for {
		alive := false
		for _, pid := range pids {
			if st, ok := readStat(pid); ok && st.state != 'Z' && st.state != 'X' {
				alive = true
				break
			}
		}
		if !alive {
			return true
		}
		if !time.Now().Before(deadline) {
			return false
		}
		time.Sleep(min(delay, time.Until(deadline)))
		delay = min(delay*2, 50*time.Millisecond)
	}
}
