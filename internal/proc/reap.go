package proc

import (
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// registry is the set of children proc owns.
type registry struct {
	// mu is held for reading while forking and registering a child, and for
	// writing while the orphan reaper scans, so that a scan never sees an
	// owned child that is not yet registered.
	mu sync.RWMutex
	// pmu guards pids (taken under mu.RLock by concurrent forks).
	pmu  sync.Mutex
	pids map[int]bool
}

var reg = &registry{pids: map[int]bool{}}

func (r *registry) add(pid int) {
	r.pmu.Lock()
	r.pids[pid] = true
	r.pmu.Unlock()
}

func (r *registry) remove(pid int) {
	r.pmu.Lock()
	delete(r.pids, pid)
	r.pmu.Unlock()
}

func (r *registry) owned(pid int) bool {
	r.pmu.Lock()
	defer r.pmu.Unlock()
	return r.pids[pid]
}

var subreaperOnce sync.Once

// reapInterval is the backstop scan period: SIGCHLD can coalesce, and an
// orphan that is reparented to muxd sends no SIGCHLD until it exits.
const reapInterval = 2 * time.Second

// BecomeSubreaper makes muxd a child subreaper, so orphans of its children
// are reparented to it rather than to init, and starts reaping those
// orphans (also when muxd is PID 1). Owned children are never waited for
// here: orphans are reaped one by one, by pid. Once enabled, every child
// of muxd must be started through [Start].
func BecomeSubreaper() error {
	var err error
	subreaperOnce.Do(func() {
		if os.Getpid() != 1 {
			err = unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
			if err != nil {
				return
			}
		}
		go reapOrphans()
	})
	return err
}

func reapOrphans() {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, unix.SIGCHLD)
	t := time.NewTicker(reapInterval)
	defer t.Stop()
	for {
		select {
		case <-sigs:
		case <-t.C:
		}
		ReapOrphans()
	}
}

// ReapOrphans reaps every zombie child of muxd that proc does not own and
// returns how many it reaped. It runs on SIGCHLD after [BecomeSubreaper];
// it is exported for tests.
func ReapOrphans() int {
	reg.mu.Lock()
	defer reg.mu.Unlock()
	n := 0
	for _, pid := range childPids() {
		if reg.owned(pid) {
			continue
		}
		if st, ok := readStat(pid); !ok || st.state != 'Z' {
			continue
		}
		var ws unix.WaitStatus
		if got, err := unix.Wait4(pid, &ws, unix.WNOHANG, nil); err == nil && got == pid {
			n++
		}
	}
	return n
}

// childPids lists muxd's children from /proc/self/task/*/children.
func childPids() []int {
	tasks, _ := filepath.Glob("/proc/self/task/*/children")
	var out []int
	for _, t := range tasks {
		b, err := os.ReadFile(t)
		if err != nil {
			continue
		}
		for _, f := range strings.Fields(string(b)) {
			if pid, err := strconv.Atoi(f); err == nil {
				out = append(out, pid)
			}
		}
	}
	return out
}
