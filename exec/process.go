package exec

import (
	"fmt"
	"io"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/google/uuid"
	"golang.org/x/sys/unix"
)

const killTERM = syscall.SIGTERM

// process is one record: a started process or an exec (stateless or in a
// session). Its output lives in two logs; done is closed once the exit is
// recorded, which happens only after both logs are complete.
type process struct {
	id, instance, command, sessionID string
	isExec                           bool
	startedAt                        time.Time
	logs                             [2]*outputLog // Stdout, Stderr
	done                             chan struct{}
	keptBytes                        int64     // retained output once ended; written by retire before the record is listed as ended
	pinned                           int       // exec calls still to read the result: retention keeps it (guarded by Engine.mu)
	heldUntil                        time.Time // retention keeps it before others until then: its caller went away (guarded by Engine.mu)
	// mu guards the fields below. Never held across a kill or a write to
	// stdin (a pipe that may be full).
	mu sync.Mutex
	// killTree ends the record's tree; signal sends one signal to it. Set
	// once the child runs; nil before.
	killTree func(sig syscall.Signal, grace time.Duration) error
	// ownTree: the tree is the record's own, so a kill after the process
	// ended still ends what it left running (background jobs, daemons). A
	// session command's shell is the session's.
	ownTree bool
	// members lists the live processes of the record's own tree (nil
	// for a session command, whose shell is the session's); launchTicks
	// is when its child was started (proc.Ticks, a lower bound).
	members     func() []int
	launchTicks uint64
	signal      func(sig syscall.Signal) error
	pid         int
	status      string
	exitCode    *int
	sigName     string
	endedAt     *time.Time
	stdin       *os.File // nil when not writable
	killed      bool     // a kill was requested while it ran: its end reads "killed"
	reaped      bool     // it exited; its record ends once its output is in
	timedOut    bool
	extraFiles  []string // command and snapshot files to remove with the record
	filesGone   bool
	stdinWriter sync.Mutex // serializes stdin writes; taken before mu, never under it
	stdinState  stdinState // named stdin streams (stdin.go), guarded by mu
	// pendingKill is a user's kill that came between the record's
	// registration and its child's start: launch carries it out.
	pendingKill *pendingKill
	// pendingSignals are signals (channel CTRL) that came in the same
	// window: launch sends them, in order, once the child runs.
	pendingSignals []syscall.Signal
}

// maxPendingSignals bounds the signals kept for a child not yet started.
const maxPendingSignals = 16

// testHookRegistered, when a test sets it, runs between a record's
// registration and its child's start.
var testHookRegistered func(p *process)

// pendingKill is a kill waiting for its record's tree to exist.
type pendingKill struct {
	sig   syscall.Signal
	grace time.Duration
	done  chan error // the kill's result, once launch made it
}

func (e *Engine) newProcess(id, command, sessionID string, isExec bool, limit int64) *process {
	name := e.nextName()
	base := e.procDir + "/" + name
	p := &process{
		id: id, instance: uuid.NewString(), command: command, sessionID: sessionID,
		isExec: isExec, startedAt: time.Now(), status: StatusRunning,
		logs: [2]*outputLog{
			newOutputLog(base+".out", limit),
			newOutputLog(base+".err", limit),
		},
		done: make(chan struct{}),
	}
	for i, l := range p.logs {
		stream := Stream(i + 1).String()
		l.onLoss = func(err error) {
			e.cfg.Logger.Warn("process output lost: the data dir cannot take it; readers get a gap",
				"id", id, "stream", stream, "err", err)
		}
	}
	return p
}

func (p *process) log(s Stream) *outputLog {
	if s == Stderr {
		return p.logs[1]
	}
	return p.logs[0]
}

func (p *process) ended() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

func (p *process) info() ProcessInfo {
	_, outEnd, _ := p.logs[0].bounds()
	_, errEnd, _ := p.logs[1].bounds()
	p.mu.Lock()
	defer p.mu.Unlock()
	in := ProcessInfo{
		ID: p.id, Instance: p.instance, Pid: p.pid, Command: p.command,
		SessionID: p.sessionID, Status: p.status, Signal: p.sigName,
		StartedAt: p.startedAt, StdoutBytes: outEnd, StderrBytes: errEnd,
	}
	if p.exitCode != nil {
		c := *p.exitCode
		in.ExitCode = &c
	}
	if p.endedAt != nil {
		t := *p.endedAt
		in.EndedAt = &t
	}
	return in
}

// finish records the exit. code < 0 means ended by sig. Callers have
// completed both logs first, so the byte counts are final; they close
// done (end) after filing the record for retention.
func (p *process) finish(code int, sig syscall.Signal, sigName string) {
	now := time.Now()
	p.mu.Lock()
	p.endedAt = &now
	switch {
	case p.timedOut:
		p.status = StatusTimedOut
	case p.killed:
		p.status = StatusKilled
	default:
		p.status = StatusExited
	}
	if code >= 0 && !p.timedOut {
		c := code
		p.exitCode = &c
	} else if sig != 0 {
		p.sigName = sigName
	}
	stdin := p.stdin
	p.stdin = nil
	p.mu.Unlock()
	if stdin != nil {
		_ = stdin.Close() // Best effort: the reader is gone.
	}
}

// failStart records a start failure: never running, never exit 0.
func (p *process) failStart() {
	now := time.Now()
	p.mu.Lock()
	p.status = StatusFailedToStart
	p.endedAt = &now
	p.mu.Unlock()
	p.logs[0].finish()
	p.logs[1].finish()
	p.end()
}

// end publishes the recorded exit to waiters.
func (p *process) end() { close(p.done) }

func (p *process) retained() int64 {
	return p.logs[0].retained() + p.logs[1].retained()
}

func (p *process) removeExtraFiles() {
	p.mu.Lock()
	files := p.extraFiles
	p.extraFiles = nil
	p.mu.Unlock()
	for _, f := range files {
		_ = os.Remove(f) // Best effort.
	}
}

func (p *process) removeFiles() {
	p.mu.Lock()
	files := p.extraFiles
	p.extraFiles = nil
	p.filesGone = true
	p.mu.Unlock()
	p.logs[0].remove()
	p.logs[1].remove()
	for _, f := range files {
		_ = os.Remove(f) // Best effort.
	}
}

// kill ends the record's tree; byUser marks an end by signal as "killed".
// A user's kill of an ended process ends what it left running; its
// recorded end stays as it was.
func (p *process) kill(sig syscall.Signal, grace time.Duration, byUser bool) error {
	p.mu.Lock()
	ended := p.ended()
	if ended && (!byUser || !p.ownTree) {
		p.mu.Unlock()
		return nil
	}
	if byUser && !ended && !p.reaped {
		p.killed = true // not when it exited before: it awaits only its output
	}
	kill := p.killTree
	if kill == nil && !ended {
		// Registered, its child not started yet (the id is visible from
		// registration on): the kill waits for launch, which makes it.
		// Before, it answered success and the process ran on.
		pk := p.pendingKill
		if pk == nil {
			pk = &pendingKill{sig: sig, grace: grace, done: make(chan error, 1)}
			p.pendingKill = pk
		} else {
			// Two kills came early: the later signal (KILL stays), the
			// shorter grace.
			if pk.sig != unix.SIGKILL {
				pk.sig = sig
			}
			pk.grace = min(pk.grace, grace)
		}
		p.mu.Unlock()
		select {
		case err := <-pk.done:
			pk.done <- err // for another kill waiting on it
			return err
		case <-p.done: // it failed to start
			return nil
		}
	}
	p.mu.Unlock()
	if kill == nil {
		return nil
	}
	return kill(sig, grace)
}

// KillProcess ends the whole tree of a process: sig to every member, then
// SIGKILL after grace. It returns once the tree is gone or SIGKILLed. An
// ended process is not an error: what it left running (its process group
// and the daemons carrying its tree mark) is ended.
func (e *Engine) KillProcess(id string, sig syscall.Signal, grace time.Duration) error {
	// Session execs still waiting for their turn under id must not run.
	e.mu.Lock()
	cancels := e.killQueuedLocked(id)
	e.mu.Unlock()
	if len(cancels) > 0 {
		for _, cancel := range cancels {
			cancel(errKilledQueued)
		}
		return nil
	}
	p, err := e.lookup(id)
	if err != nil {
		return err
	}
	if sig == 0 {
		sig = killTERM
	}
	if grace < 0 {
		return fmt.Errorf("%w: negative grace", ErrInvalid)
	}
	return p.kill(sig, grace, true)
}

// SignalProcess sends one signal to a running process's process group
// (channel CTRL "signal"). An ended process is not an error.
func (e *Engine) SignalProcess(id string, sig syscall.Signal) error {
	p, err := e.lookup(id)
	if err != nil {
		return err
	}
	p.mu.Lock()
	signal := p.signal
	if signal == nil && !p.ended() {
		// Registered, its child not started yet: launch sends it (it
		// was dropped before). Past the bound, signals add nothing a
		// child can tell apart.
		if len(p.pendingSignals) < maxPendingSignals {
			p.pendingSignals = append(p.pendingSignals, sig)
		}
		p.mu.Unlock()
		return nil
	}
	p.mu.Unlock()
	if p.ended() || signal == nil {
		return nil
	}
	return signal(sig)
}

// HasStdin reports whether the process has a writable stdin now.
func (e *Engine) HasStdin(id string) bool {
	p, err := e.lookup(id)
	if err != nil {
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stdin != nil
}

// WriteStdin writes to a process started with Stdin. It may block while
// the pipe is full; writes are serialized. See AttachStdin for writes
// that survive a writer's reconnect.
func (e *Engine) WriteStdin(id string, b []byte) (int, error) {
	p, err := e.lookup(id)
	if err != nil {
		return 0, err
	}
	return p.writeStdin(nil, b)
}

// CloseStdin closes a process's stdin: its readers get EOF.
func (e *Engine) CloseStdin(id string) error {
	p, err := e.lookup(id)
	if err != nil {
		return err
	}
	p.mu.Lock()
	f := p.stdin
	p.stdin = nil
	p.mu.Unlock()
	if f == nil {
		return fmt.Errorf("%w: process %q", ErrNotWritable, id)
	}
	// Close unblocks a concurrent Write (it is on the netpoller).
	return f.Close()
}

// ReadOutput returns up to length retained bytes of a stream from offset
// from (clamped into the retained window), with the window [first, end).
// length 0 returns only the window.
func (e *Engine) ReadOutput(id string, stream Stream, from, length int64) (data []byte, first, end int64, err error) {
	p, err := e.lookup(id)
	if err != nil {
		return nil, 0, 0, err
	}
	if stream != Stdout && stream != Stderr {
		return nil, 0, 0, fmt.Errorf("%w: stream %d", ErrInvalid, stream)
	}
	if from < 0 || length < 0 {
		return nil, 0, 0, fmt.Errorf("%w: negative offset or length", ErrInvalid)
	}
	l := p.log(stream)
	for range 8 { // the window can move under a reader; retry a few times
		first, end, _ = l.bounds()
		if length == 0 {
			return nil, first, end, nil
		}
		off := max(from, first)
		if off >= end {
			return []byte{}, first, end, nil
		}
		buf := make([]byte, min(length, end-off))
		n, first2, rerr := l.readOnce(buf, off)
		if rerr != nil {
			return nil, first, end, fmt.Errorf("%w: output of %q removed", ErrNotFound, id)
		}
		if n == 0 && off < first2 {
			continue
		}
		return buf[:n], first2, end, nil
	}
	return []byte{}, first, end, nil
}

// OpenOutput follows a stream from offset from; see [OutputReader].
func (e *Engine) OpenOutput(id string, stream Stream, from int64) (*OutputReader, error) {
	p, err := e.lookup(id)
	if err != nil {
		return nil, err
	}
	if stream != Stdout && stream != Stderr {
		return nil, fmt.Errorf("%w: stream %d", ErrInvalid, stream)
	}
	if from < 0 {
		return nil, fmt.Errorf("%w: negative offset", ErrInvalid)
	}
	return newOutputReader(p.log(stream), stream, from), nil
}

// headOf returns the first max bytes of a stream (or the retained start,
// if the head was dropped) and whether more bytes exist.
func headOf(l *outputLog, max int) ([]byte, bool) {
	first, end, _ := l.bounds()
	n := min(end-first, int64(max))
	buf := make([]byte, n)
	got := 0
	for got < int(n) {
		k, _, err := l.readOnce(buf[got:], first+int64(got))
		if err != nil || k == 0 {
			break
		}
		got += k
	}
	return buf[:got], int64(got) < end
}

var _ io.Reader = (*OutputReader)(nil)
