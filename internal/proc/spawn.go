package proc

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Spec describes a child to start.
type Spec struct {
	// Path is the executable. A name without a slash is looked up in the
	// PATH of Env (not muxd's own PATH).
	Path string
	// Args is argv, Args[0] included. Empty means {Path}.
	Args []string
	// Dir is the working directory; "" keeps muxd's.
	Dir string
	// Env is the child's whole environment; build it with [Env]. Start
	// adds the tree mark ([MarkVar]).
	Env []string
	// Stdin, Stdout and Stderr become fds 0, 1 and 2; nil means /dev/null.
	Stdin, Stdout, Stderr *os.File
	// ExtraFiles become fds 3, 4, ... in order.
	ExtraFiles []*os.File
	// Terminal starts the child as a session leader with Stdin (a PTY
	// slave) as its controlling terminal, instead of in a new process group.
	Terminal bool
}

// Status is how a child ended.
type Status struct {
	// Code is the exit code; -1 when the child was ended by a signal.
	Code int
	// Signal is the signal that ended the child, or 0.
	Signal syscall.Signal
}

// SignalName is the signal's name without "SIG" ("TERM"), or "".
func (s Status) SignalName() string {
	if s.Signal == 0 {
		return ""
	}
	return SignalName(s.Signal)
}

func (s Status) String() string {
	if s.Signal != 0 {
		return "signal " + s.SignalName()
	}
	return fmt.Sprintf("exit %d", s.Code)
}

// Process is a started child. Its pid is also its process group id (or
// session id, for a Terminal child).
type Process struct {
	// Pid is the child's process id.
	Pid int

	mark   string        // the tree's MarkVar value
	start  atomic.Uint64 // start time (clock ticks after boot), 0 until known
	ended  atomic.Uint64 // when it was reaped (clock ticks after boot), 0 until then or unknown
	done   chan struct{}
	status Status // written once before done is closed
	err    error  // a wait failure (never expected); written before done
}

// ErrWait reports that a child's exit status could not be collected; the
// status then reads as killed by SIGKILL so that it is never mistaken for
// success.
var ErrWait = errors.New("proc: lost the exit status of a child")

// ErrNotFound reports an executable that is not in PATH.
var ErrNotFound = errors.New("proc: executable not found")

// ErrTooBig reports arguments and environment the kernel refused (E2BIG):
// one string over 128 KiB, or all of them over a quarter of the stack
// limit.
var ErrTooBig = errors.New("proc: arguments and environment too large for the kernel (at most 128 KiB per variable)")

var (
	devNullOnce sync.Once
	devNull     *os.File
	devNullErr  error

	signalsOnce sync.Once
)

func openDevNull() (*os.File, error) {
	devNullOnce.Do(func() {
		devNull, devNullErr = os.OpenFile(os.DevNull, os.O_RDWR, 0)
	})
	return devNull, devNullErr
}

// Start starts a child described by spec. The child runs until it exits
// or is killed; its status is collected by proc whether or not anyone
// calls Wait.
func Start(spec Spec) (*Process, error) {
	signalsOnce.Do(resetIgnoredSignals)
	path, err := lookPath(spec.Path, spec.Env)
	if err != nil {
		return nil, err
	}
	args := spec.Args
	if len(args) == 0 {
		args = []string{spec.Path}
	}
	null, err := openDevNull()
	if err != nil {
		return nil, fmt.Errorf("proc: open %s: %w", os.DevNull, err)
	}
	files := make([]uintptr, 0, 3+len(spec.ExtraFiles))
	for _, f := range []*os.File{spec.Stdin, spec.Stdout, spec.Stderr} {
		if f == nil {
			f = null
		}
		files = append(files, f.Fd())
	}
	for _, f := range spec.ExtraFiles {
		files = append(files, f.Fd())
	}
	pidfd := -1
	sys := &syscall.SysProcAttr{PidFD: &pidfd}
	if spec.Terminal {
		sys.Setsid = true
		sys.Setctty = true
		sys.Ctty = 0
	} else {
		sys.Setpgid = true
	}
	mark := newMark()
	attr := &syscall.ProcAttr{Dir: spec.Dir, Env: withMark(spec.Env, mark), Files: files, Sys: sys}

	// Fork under the registry's read lock so the orphan reaper, which holds
	// the write lock while it scans, never sees an owned child unregistered.
	reg.mu.RLock()
	pid, _, err := syscall.StartProcess(path, args, attr)
	if err == nil {
		reg.add(pid)
	}
	reg.mu.RUnlock()
	// Keep the caller's files alive until the fork has duplicated them.
	for _, f := range []*os.File{spec.Stdin, spec.Stdout, spec.Stderr} {
		keepAlive(f)
	}
	for _, f := range spec.ExtraFiles {
		keepAlive(f)
	}
	if errors.Is(err, syscall.E2BIG) {
		return nil, fmt.Errorf("%w: start %s: %v", ErrTooBig, spec.Path, err)
	}
	if err != nil {
		return nil, fmt.Errorf("proc: start %s: %w", spec.Path, err)
	}
	p := &Process{Pid: pid, mark: mark, done: make(chan struct{})}
	go p.wait(pidfd)
	return p, nil
}

//go:noinline
func keepAlive(f *os.File) { _ = f }

// CheckDir says why dir cannot be a child's working directory (missing,
// or not a directory) in words for a client; "" is muxd's own and fine.
// Start would only fail with the child's ENOENT or ENOTDIR, which reads
// as if the program were missing.
func CheckDir(dir string) error {
	if dir == "" {
		return nil
	}
	st, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("cwd: %v", err)
	}
	if !st.IsDir() {
		return fmt.Errorf("cwd %q is not a directory", dir)
	}
	if err := unix.Access(dir, unix.X_OK); err != nil {
		return fmt.Errorf("cwd %q: %v", dir, err)
	}
	return nil
}

// lookPath resolves the program to start (a shell, mostly) against the
// PATH in env, then muxd's own PATH, then the usual directories: a
// request's PATH is for the commands it runs, and one without bash in it
// must not make the shell that runs them impossible to find. Relative
// and empty PATH entries are skipped: they would resolve against muxd's
// working directory, not the command's.
func lookPath(name string, env []string) (string, error) {
	if name == "" {
		return "", fmt.Errorf("%w: empty name", ErrNotFound)
	}
	if strings.Contains(name, "/") {
		return name, nil
	}
	var dirs []string
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			dirs = filepath.SplitList(v)
		}
	}
	dirs = append(dirs, filepath.SplitList(os.Getenv("PATH"))...)
	dirs = append(dirs, "/usr/local/bin", "/usr/bin", "/bin")
	for _, dir := range dirs {
		if !filepath.IsAbs(dir) {
			continue
		}
		p := filepath.Join(dir, name)
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("%w: %q", ErrNotFound, name)
}

// Done is closed once the child has been reaped.
func (p *Process) Done() <-chan struct{} { return p.done }

// Status is the child's exit status; valid once Done is closed.
func (p *Process) Status() Status { return p.status }

// Wait blocks until the child has been reaped or ctx ends.
func (p *Process) Wait(ctx context.Context) (Status, error) {
	select {
	case <-p.done:
		return p.status, p.err
	case <-ctx.Done():
		return Status{}, ctx.Err()
	}
}

// Exited reports whether the child has been reaped.
func (p *Process) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Signal sends sig to the child alone. It is a no-op once the child has
// been reaped, so a recycled pid is never signalled.
func (p *Process) Signal(sig syscall.Signal) error {
	if p.Exited() {
		return nil
	}
	return ignoreESRCH(unix.Kill(p.Pid, sig))
}

// SignalGroup sends sig to the child's process group. Members of the group
// may outlive the leader; the group id stays reserved while any exists.
func (p *Process) SignalGroup(sig syscall.Signal) error {
	return ignoreESRCH(unix.Kill(-p.Pid, sig))
}

// KillTree ends the child's whole tree; see the package function. It also
// ends the processes that carry the child's tree mark ([MarkVar]) and
// their descendants: orphans that double-forked away through setsid. Once
// the child itself has been reaped its pid may be recycled, so only the
// members of its process group or session, the marked processes, and their
// descendants are signalled.
func (p *Process) KillTree(sig syscall.Signal, grace time.Duration) error {
	return killTree(p.Pid, !p.Exited(), p.mark, p.start.Load(), p.ended.Load(), sig, grace)
}

func ignoreESRCH(err error) error {
	if errors.Is(err, unix.ESRCH) {
		return nil
	}
	return err
}

// siginfo is the part of Linux's siginfo_t that waitid fills for a child.
type siginfo struct {
	signo  int32
	errno  int32
	code   int32
	_      int32
	pid    int32
	uid    uint32
	status int32
	_      [100]byte
}

const pPIDFD = 3 // P_PIDFD, Linux 5.4

// wait collects the child's status through its pidfd, parked on the
// netpoller rather than on a thread.
func (p *Process) wait(pidfd int) {
	defer close(p.done)
	defer func() { p.ended.Store(Ticks()) }() // before done: KillTree reads it once Exited
	defer reg.remove(p.Pid)
	// The pid is ours until reaped below: its start time bounds the tree
	// (see member) even after that.
	if st, ok := readStat(p.Pid); ok {
		p.start.Store(st.start)
	}
	if pidfd < 0 {
		// Kernels without pidfd support: a blocking wait on the pid.
		var ws unix.WaitStatus
		for {
			_, err := unix.Wait4(p.Pid, &ws, 0, nil)
			if err == unix.EINTR {
				continue
			}
			if err != nil {
				p.status, p.err = Status{Code: -1, Signal: unix.SIGKILL}, fmt.Errorf("%w: %v", ErrWait, err)
				return
			}
			break
		}
		p.status = fromWaitStatus(ws)
		return
	}
	if err := unix.SetNonblock(pidfd, true); err != nil {
		_ = unix.Close(pidfd) // Best effort.
		p.status, p.err = Status{Code: -1, Signal: unix.SIGKILL}, fmt.Errorf("%w: %v", ErrWait, err)
		return
	}
	f := os.NewFile(uintptr(pidfd), "pidfd")
	defer f.Close()
	var (
		info    siginfo
		waitErr error
	)
	collect := func(fd uintptr) bool {
		for {
			info = siginfo{}
			_, _, e := unix.Syscall6(unix.SYS_WAITID, pPIDFD, fd, uintptr(unsafe.Pointer(&info)), unix.WEXITED|unix.WNOHANG, 0, 0)
			switch e {
			case 0:
				return info.pid != 0
			case unix.EINTR:
				continue
			case unix.EAGAIN:
				return false
			default:
				waitErr = e
				return true
			}
		}
	}
	rc, err := f.SyscallConn()
	if err == nil {
		err = rc.Read(collect)
	}
	if err != nil {
		// Not pollable (should not happen on Linux ≥ 5.3): block a thread.
		for !collect(uintptr(pidfd)) {
			var pfd = []unix.PollFd{{Fd: int32(pidfd), Events: unix.POLLIN}}
			_, _ = unix.Poll(pfd, -1) // Best effort: collect decides.
		}
	}
	if waitErr != nil {
		p.status, p.err = Status{Code: -1, Signal: unix.SIGKILL}, fmt.Errorf("%w: %v", ErrWait, waitErr)
		return
	}
	switch info.code {
	case 1: // CLD_EXITED
		p.status = Status{Code: int(info.status)}
	default: // CLD_KILLED, CLD_DUMPED
		p.status = Status{Code: -1, Signal: syscall.Signal(info.status)}
	}
}

func fromWaitStatus(ws unix.WaitStatus) Status {
	if ws.Signaled() {
		return Status{Code: -1, Signal: ws.Signal()}
	}
	return Status{Code: ws.ExitStatus()}
}
