package exec

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/muxd/muxd/internal/proc"
	"golang.org/x/sys/unix"
)

// session is one persistent bash fed through a stdin pipe.
type session struct {
	e         *Engine
	id, cwd   string
	createdAt time.Time
	timeout   time.Duration // default per command; 0 = none
	env       []string      // the environment the shell started with
	dir       string        // command files, FIFOs and exit records
	child     *proc.Process
	stdin     *os.File // command lines; written only by the turn holder
	ctl       *os.File // read end of the control pipe (the shell's stdout); read only by the turn holder
	mark      string   // the marker lines' random token (see wrapper.go)
	shellOut  *tail    // the shell's own stderr (traces, dying words)
	// stray is what the shell printed on its own stdout, the control
	// pipe, during the command at hand (lines that are not its marker),
	// up to maxStray: kept for a command that ends the shell, whose EXIT
	// trap runs after the command's redirections were undone.
	stray []byte

	// The turn holder's files: the command file D/c, kept open and
	// rewritten in place (tmpfs), and the output FIFOs D/o and D/e.
	cmdFile *os.File
	cmdLen  int // bytes of the last command written to cmdFile
	fifos   *cmdFIFOs

	// ready is set once the shell answered; before that the session is
	// invisible (its fields are still being written). started is closed
	// when its creation ended, ready or not.
	ready   atomic.Bool
	started chan struct{}

	// turn is the session lock: one command at a time, arrival order. Kill,
	// interrupt and list never take it.
	turn      fifoLock
	ctlBroken bool // the control pipe ended while the shell lives; turn holder only

	// sigMu serializes interrupt with setBusy (see interrupt).
	sigMu sync.Mutex
	late  lateInterrupt // the running command's interrupt follow-up; sigMu
	// mu guards the fields below; never held across a kill or a write.
	mu         sync.Mutex
	busy       bool
	busySince  uint64 // when the command began, in proc.Ticks
	lastJob    int    // the shell's $! after the last command (0: none)
	gen        uint64 // counts commands, so a follow-up knows its own
	flagged    bool   // the interrupt flag file D/n exists (see wrapper.go)
	jobControl bool   // the last marker's $- had m (set -m), or the command may turn it on
	ownTrap    bool   // the running command's text may set a trap
	dead       bool
	deadReason string
	killing    string // why the engine is killing the shell, if it is
	filesGone  bool   // removeFiles ran: the last turn holder closes the fds
}

// CreateSession starts a session shell and waits until it answers.
func (e *Engine) CreateSession(ctx context.Context, o SessionOptions) (SessionInfo, error) {
	id, err := newID(o.ID)
	if err != nil {
		return SessionInfo{}, err
	}
	if err := e.checkTimeout(o.CommandTimeout); err != nil {
		return SessionInfo{}, err
	}
	env, err := e.buildEnv(e.cfg.BaseEnv, o.Env)
	if err != nil {
		return SessionInfo{}, err
	}
	// A cwd given must be usable, as for every other command: a session
	// that quietly started elsewhere would run its commands (rm -rf
	// build) where no one expects.
	cwd := o.Cwd
	if cwd == "" {
		cwd = homeOf(env)
	} else if err := checkDir(cwd); err != nil {
		return SessionInfo{}, err
	}
	s := &session{e: e, id: id, cwd: cwd, createdAt: time.Now(), timeout: o.CommandTimeout, env: env,
		shellOut: newTail(), started: make(chan struct{})}

	e.pruneDeadSession()
	e.mu.Lock()
	switch {
	case e.closed:
		e.mu.Unlock()
		return SessionInfo{}, ErrClosed
	case e.sessions[id] != nil:
		e.mu.Unlock()
		return SessionInfo{}, fmt.Errorf("%w: session %q", ErrAlreadyExists, id)
	case len(e.sessions) >= e.cfg.MaxSessions:
		e.mu.Unlock()
		return SessionInfo{}, &LimitError{Setting: "MaxSessions", Max: e.cfg.MaxSessions, What: "live sessions"}
	}
	e.sessions[id] = s // reserve the id while the shell starts
	e.creating.Add(1)  // Close waits for it (under mu: before Close's Wait)
	e.mu.Unlock()
	defer e.creating.Done()
	defer close(s.started) // after ready is set, or the id is freed

	if err := s.start(env); err != nil {
		e.mu.Lock()
		delete(e.sessions, id)
		e.mu.Unlock()
		s.removeFiles()
		return SessionInfo{}, err
	}
	// One round trip proves the shell reads its commands.
	if err := s.turn.lock(ctx); err != nil {
		e.mu.Lock()
		delete(e.sessions, id)
		e.mu.Unlock()
		s.kill("start cancelled")
		s.removeFiles()
		return SessionInfo{}, err
	}
	res, err := s.roundTrip(ctx, ":", wrapperLine(false, false), 0, [2]*outputLog{})
	s.endTurn()
	if err == nil && res.died {
		// What ends a fresh bash here is what the request gave it: an
		// env (BASH_ENV, a startup file that exits) or a cwd.
		err = fmt.Errorf("%w: the session's shell ended at start (%s): check its env and cwd", ErrInvalid, s.info().DeadReason)
	}
	if err != nil {
		e.mu.Lock()
		delete(e.sessions, id)
		e.mu.Unlock()
		s.kill("start failed")
		s.removeFiles()
		return SessionInfo{}, err
	}
	// Ready under mu: Close kills the ready sessions it lists and leaves
	// the others to their creator, here.
	e.mu.Lock()
	closed := e.closed
	if !closed {
		s.ready.Store(true)
	}
	e.mu.Unlock()
	if closed {
		s.kill("engine closed")
		s.removeFiles()
		return SessionInfo{}, ErrClosed
	}
	return s.info(), nil
}

func homeOf(env []string) string {
	for _, kv := range env {
		if len(kv) > 5 && kv[:5] == "HOME=" && checkDir(kv[5:]) == nil {
			return kv[5:]
		}
	}
	if h, err := os.UserHomeDir(); err == nil && checkDir(h) == nil {
		return h
	}
	return "/"
}

// start spawns the shell with its command pipe, control pipe and output.
func (s *session) start(env []string) error {
	s.dir = filepath.Join(s.e.sessDir, s.e.nextName())
	if err := os.MkdirAll(filepath.Join(s.dir, "x"), 0o700); err != nil {
		return fmt.Errorf("exec: session dir: %w", err)
	}
	cf, err := os.OpenFile(s.path("c"), os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("exec: command file: %w", err)
	}
	s.cmdFile = cf
	s.fifos = newFIFOs(s.path("o"), s.path("e"))
	s.mark = rand.Text()
	inR, inW, err := os.Pipe()
	if err != nil {
		return fmt.Errorf("exec: pipe: %w", err)
	}
	ctlR, ctlW, err := os.Pipe()
	if err != nil {
		closeAll(inR, inW)
		return fmt.Errorf("exec: pipe: %w", err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		closeAll(inR, inW, ctlR, ctlW)
		return fmt.Errorf("exec: pipe: %w", err)
	}
	// The control pipe is the shell's stdout: every command runs with its
	// stdout on a FIFO (bash keeps the pipe in a close-on-exec copy), and
	// the marker needs no redirection of its own.
	child, err := proc.Start(proc.Spec{
		Path: s.e.cfg.Shell, Args: []string{"bash", "--noprofile", "--norc", "-c", setupReader},
		Dir: s.cwd, Env: env, Stdin: inR, Stdout: ctlW, Stderr: outW,
	})
	closeAll(inR, ctlW, outW)
	if err != nil {
		closeAll(inW, ctlR, outR)
		if errors.Is(err, proc.ErrTooBig) {
			return fmt.Errorf("%w: %v", ErrInvalid, err)
		}
		return fmt.Errorf("exec: start session shell: %w", err)
	}
	s.mu.Lock() // kill (from Close) may look at child concurrently
	s.child, s.stdin, s.ctl = child, inW, ctlR
	s.mu.Unlock()
	if _, err := inW.WriteString(setupLine(s.dir, s.mark, s.e.testSetup) + "\x00"); err != nil {
		_ = child.KillTree(unix.SIGKILL, 0) // Best effort.
		closeAll(inW, ctlR, outR)
		if errors.Is(err, unix.EPIPE) {
			// Gone before it read a byte: what ends a fresh bash that
			// soon is what the request gave it (a BASH_ENV that exits).
			return fmt.Errorf("%w: the session's shell ended at start: check its env and cwd", ErrInvalid)
		}
		return fmt.Errorf("exec: start session shell: %w", err)
	}
	s.e.watcher.addDir(filepath.Join(s.dir, "x"))
	go copyTail(s.shellOut, outR)
	return nil
}

// outcome of one command in the shell.
type outcome struct {
	code     int            // $? of the group, or the shell's exit code
	sig      syscall.Signal // the shell's signal when it died of one
	died     bool           // the shell ended
	timedOut bool
}

// path names a file of the session: c (command text), u (user command
// under overrides), i (stdin), o and e (output FIFOs), s (state), or x/x
// (the exit record, in its own watched dir).
func (s *session) path(name string) string {
	return filepath.Join(s.dir, name)
}

// writeCommand puts text in the command file, in place: the file stays
// open, and it is never truncated to zero (ext4's auto_da_alloc would
// flush it on close, when RuntimeDir is not a tmpfs).
func (s *session) writeCommand(text string) error {
	if _, err := s.cmdFile.WriteAt([]byte(text), 0); err != nil {
		return fmt.Errorf("exec: command file: %w", err)
	}
	if len(text) < s.cmdLen {
		if err := s.cmdFile.Truncate(int64(len(text))); err != nil {
			return fmt.Errorf("exec: command file: %w", err)
		}
	}
	s.cmdLen = len(text)
	return nil
}

// endTurn ends the caller's turn. A dead session's descriptors are
// released by whoever holds its last turn (removeFiles cannot close them
// under a running command).
func (s *session) endTurn() {
	s.mu.Lock()
	gone := s.dead || s.filesGone
	if !gone {
		s.turn.unlock() // under mu: removeFiles either sees it free or sees gone here
	}
	s.mu.Unlock()
	if gone {
		s.closeFDs()
		s.turn.unlock()
	}
}

// closeFDs releases the command file and the FIFOs; the caller holds the
// turn.
func (s *session) closeFDs() {
	if s.cmdFile != nil {
		_ = s.cmdFile.Close() // Best effort.
		s.cmdFile = nil
	}
	if s.fifos != nil {
		s.fifos.close()
		s.fifos = nil
	}
}

// roundTrip runs text in the shell and waits for its end; its output goes
// to logs (nil: discarded). The caller holds the turn and has written the
// stdin file when withStdin.
//
// Fast commands are read synchronously after their marker; one that runs
// for lazyDrainDelay gets drain goroutines (a full FIFO blocks bash until
// then).
func (s *session) roundTrip(ctx context.Context, text, line string, timeout time.Duration, logs [2]*outputLog) (outcome, error) {
	if err := s.alive(); err != nil {
		return outcome{}, err
	}
	if s.fifos == nil {
		return outcome{}, fmt.Errorf("%w: session %q", ErrSessionDead, s.id)
	}
	if err := s.fifos.ready(); err != nil {
		return outcome{}, err
	}
	if err := s.writeCommand(text); err != nil {
		return outcome{}, err
	}
	exitPath := s.path("x/x")
	if s.ctlBroken {
		_ = os.Remove(exitPath) // Best effort: the previous record was consumed.
	}
	s.stray = s.stray[:0]
	o, err := s.await(ctx, exitPath, line, timeout, func() { s.fifos.startDrains(logs) })
	var extra [2][]byte
	if o.died {
		extra[0] = s.stray // after the command's own output: its EXIT trap's
	}
	grace := s.e.cfg.TrailGrace
	if o.timedOut || o.died {
		grace = 0
	}
	s.fifos.finish(logs, extra, grace)
	return o, err
}

// await sends the command's mode byte (wrapperLine) and waits for its end.
func (s *session) await(ctx context.Context, exitPath, line string, timeout time.Duration, slow func()) (outcome, error) {
	if _, err := s.stdin.WriteString(line); err != nil {
		// Nobody reads the command pipe: the shell ended (or is ending)
		// before this command reached it, so the command never ran.
		// waitDeath marks the session dead, so alive says why.
		s.waitDeath()
		return outcome{}, s.alive()
	}
	if !s.ctlBroken {
		if o, ok := s.awaitMarker(ctx, timeout, slow); ok {
			return o, nil
		}
		// The control pipe ended but the shell may live: from now on the
		// exit records decide.
		s.ctlBroken = true
	}
	return s.awaitRecord(ctx, exitPath, timeout, slow), nil
}

// awaitMarker reads the marker straight from the control pipe in the
// caller's goroutine (no hand-off: this is the hot path). Deadlines on the
// pipe serve the lazy drains, the timeout and cancellation. It reports
// false if the pipe ended while the shell lives on.
func (s *session) awaitMarker(ctx context.Context, timeout time.Duration, slow func()) (outcome, bool) {
	start := time.Now()
	fast := lazyDrainDelay
	if timeout > 0 && timeout < fast {
		fast = timeout
	}
	line, complete, _ := fastMarker(s.ctl, nil, fast)
	if complete {
		code, flags, rest, ok := takeMarker(line, s.mark, &s.stray)
		if ok {
			s.noteFlags(flags)
			return outcome{code: code}, true
		}
		line = rest
	}
	var cancelled atomic.Bool
	stop := context.AfterFunc(ctx, func() {
		cancelled.Store(true)
		_ = s.ctl.SetReadDeadline(time.Now()) // Best effort: wakes the read.
	})
	defer stop()
	// The shell's end wakes the read too: a background subshell of the
	// command may hold a copy of the pipe, so EOF may never come.
	var died atomic.Bool
	watchDone := make(chan struct{})
	defer close(watchDone)
	go func() {
		select {
		case <-s.child.Done():
			died.Store(true)
			_ = s.ctl.SetReadDeadline(time.Now()) // Best effort: wakes the read.
		case <-watchDone:
		}
	}()
	defer func() { _ = s.ctl.SetReadDeadline(time.Time{}) }() // Best effort: reset for the next command.
	var timeoutAt, slowAt, graceAt time.Time
	if timeout > 0 {
		timeoutAt = start.Add(timeout)
	}
	if slow != nil {
		slowAt = start.Add(lazyDrainDelay)
	}
	handled := false
	var buf [32]byte
	for range 1 << 40 { // bounded by the deadlines below and the shell's life
		if cancelled.Load() && !handled {
			// rpc.cancel: Ctrl-C first; a command that ignores it costs
			// the session after the grace.
			handled = true
			s.interrupt()
			graceAt = time.Now().Add(s.e.cfg.KillGrace)
		}
		_ = s.ctl.SetReadDeadline(earliest(slowAt, timeoutAt, graceAt)) // Best effort.
		if cancelled.Load() && !handled {
			continue // the cancel's deadline may have been overwritten
		}
		if died.Load() {
			if o, ok := s.lastMarker(line); ok {
				return o, true
			}
			keepStray(&s.stray, line)
			return s.waitDeath(), true
		}
		n, err := s.ctl.Read(buf[:])
		if n > 0 {
			line = append(line, buf[:n]...)
			code, flags, rest, ok := takeMarker(line, s.mark, &s.stray)
			if ok {
				s.noteFlags(flags)
				return outcome{code: code}, true
			}
			line = rest
			continue
		}
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			// EOF: only the shell holds the pipe's write end (commands
			// run with stdout on a FIFO), so it is dying, or it lost it.
			select {
			case <-s.child.Done():
				keepStray(&s.stray, line)
				return s.waitDeath(), true
			case <-time.After(s.e.cfg.KillGrace):
				return outcome{}, false
			}
		}
		now := time.Now()
		graceOver := !graceAt.IsZero() && !now.Before(graceAt)
		timedOut := !timeoutAt.IsZero() && !now.Before(timeoutAt)
		if graceOver || timedOut {
			// A read past its deadline reads nothing: the marker may have
			// come just in time.
			if o, ok := s.lastMarker(line); ok {
				return o, true
			}
		}
		switch {
		case graceOver:
			s.kill("command cancelled and did not stop on SIGINT")
			return s.waitDeath(), true
		case timedOut:
			s.kill("command timed out after " + timeout.String())
			o := s.waitDeath()
			o.timedOut = true
			return o, true
		case !slowAt.IsZero() && !now.Before(slowAt):
			slowAt = time.Time{}
			slow()
		}
	}
	return outcome{}, false
}

// lastMarker looks for the command's marker in what a shell that ended
// left in the control pipe: a command that ends the shell at its next
// read (`exec 50<&-`) wrote its marker first, and the shell's end may be
// seen before the marker is read. line is what was read before.
func (s *session) lastMarker(line []byte) (outcome, bool) {
	for range 1 << 12 { // bounded: each turn reads, and a pipe holds 64 KiB
		var complete bool
		line, complete, _ = fastMarker(s.ctl, line, 0)
		code, flags, rest, ok := takeMarker(line, s.mark, &s.stray)
		if ok {
			s.noteFlags(flags)
			return outcome{code: code}, true
		}
		if !complete {
			return outcome{}, false
		}
		line = rest
	}
	return outcome{}, false
}

// takeMarker parses the complete lines of line for "MARK STATUS FLAGS"
// (FLAGS is the shell's $-): the wrapper writes one per command, one
// command at a time, so a marker is this command's; other lines (the
// user's top-level trap output) are dropped. rest is the incomplete tail.
func takeMarker(line []byte, mark string, stray *[]byte) (code int, flags string, rest []byte, ok bool) {
	for range len(line) + 1 { // bounded: each turn drops a line
		i := bytes.IndexByte(line, '\n')
		if i < 0 {
			return 0, "", line, false
		}
		// The marker ends a line; a command that wrote a partial line of
		// its own to the marker's descriptor put that ahead of it.
		if j := bytes.Index(line[:i], []byte(mark+" ")); j >= 0 {
			st, flags, _ := strings.Cut(string(line[j+len(mark)+1:i]), " ")
			if code, ok := parseMarker(st); ok {
				keepStray(stray, line[:j])
				return code, flags, nil, true
			}
		}
		keepStray(stray, line[:i+1])
		line = line[i+1:]
	}
	return 0, "", line, false
}

// maxStray bounds session.stray.
const maxStray = 64 << 10

// keepStray appends b to *stray, within maxStray.
func keepStray(stray *[]byte, b []byte) {
	if stray != nil {
		*stray = append(*stray, b[:min(len(b), max(0, maxStray-len(*stray)))]...)
	}
}

// noteFlags keeps what the marker's "$- $!" says: whether job control
// (set -m) is on, and the last background job the shell started (0:
// none), which an interrupt of the next command must spare even when it
// started too close to that command for start times to tell (see
// interrupt).
func (s *session) noteFlags(flags string) {
	dash, bang, _ := strings.Cut(flags, " ")
	jc := strings.IndexByte(dash, 'm') >= 0
	job, _ := strconv.Atoi(bang) // Best effort: 0 when none
	s.mu.Lock()
	s.jobControl = jc
	s.lastJob = job
	s.mu.Unlock()
}

// earliest returns the earliest non-zero time, or zero (no deadline).
func earliest(ts ...time.Time) time.Time {
	var e time.Time
	for _, t := range ts {
		if !t.IsZero() && (e.IsZero() || t.Before(e)) {
			e = t
		}
	}
	return e
}

// awaitRecord waits for the exit record when the control pipe is gone.
func (s *session) awaitRecord(ctx context.Context, exitPath string, timeout time.Duration, slow func()) outcome {
	exitCh, cancelWatch := s.e.watcher.watch(exitPath)
	defer cancelWatch()
	var timer, slowC, graceC <-chan time.Time
	if timeout > 0 {
		t := time.NewTimer(timeout)
		defer t.Stop()
		timer = t.C
	}
	if slow != nil {
		t := time.NewTimer(lazyDrainDelay)
		defer t.Stop()
		slowC = t.C
	}
	cancelled := ctx.Done()
	for {
		select {
		case code := <-exitCh:
			_ = os.Remove(exitPath) // Best effort.
			return outcome{code: code}
		case <-s.child.Done():
			return s.waitDeath()
		case <-timer:
			s.kill("command timed out after " + timeout.String())
			o := s.waitDeath()
			o.timedOut = true
			return o
		case <-slowC:
			slowC = nil
			slow()
		case <-cancelled:
			cancelled = nil
			s.interrupt()
			grace := time.NewTimer(s.e.cfg.KillGrace)
			defer grace.Stop()
			graceC = grace.C
		case <-graceC:
			s.kill("command cancelled and did not stop on SIGINT")
			return s.waitDeath()
		}
	}
}

// waitDeath collects the shell's end after it died (or is dying).
func (s *session) waitDeath() outcome {
	<-s.child.Done()
	s.shellOut.waitEOF(deathWordsWait)
	st := s.child.Status()
	s.markDead(st)
	return outcome{code: st.Code, sig: st.Signal, died: true}
}

// deathWordsWait bounds how long a dead shell's reason waits for its
// last words to be read from its stderr.
const deathWordsWait = 100 * time.Millisecond

func (s *session) markDead(st proc.Status) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.dead {
		return
	}
	s.dead = true
	if s.killing != "" {
		s.deadReason = s.killing
		return
	}
	s.deadReason = "shell ended: " + st.String()
	switch {
	case st.Signal != 0:
	case st.Code == lostFDStatus:
		s.deadReason += ": a command closed fd 50, the session's command pipe"
	case st.Code == badSetupStatus && !s.ready.Load():
		s.deadReason += ": bash did not keep its pipes at fds 50-52 (bash 5 and a descriptor limit of at least 64 are needed)"
	}
	if l := s.shellOut.lastLine(); l != "" {
		s.deadReason += ": " + l
	}
}

func (s *session) alive() error {
	s.mu.Lock()
	child, dead := s.child, s.dead
	s.mu.Unlock()
	if !dead && child != nil {
		select {
		case <-child.Done():
			s.waitDeath() // marks it dead, with its last words
		default:
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.dead {
		return fmt.Errorf("%w: session %q: %s", ErrSessionDead, s.id, s.deadReason)
	}
	return nil
}

// kill ends the shell and every descendant; the session is dead.
func (s *session) kill(reason string) {
	s.mu.Lock()
	if s.killing == "" && !s.dead {
		s.killing = reason
	}
	child, stdin := s.child, s.stdin
	s.mu.Unlock()
	if child == nil {
		return
	}
	_ = child.KillTree(killTERM, s.e.cfg.KillGrace) // Best effort: it may be gone.
	<-child.Done()
	s.markDead(child.Status())
	_ = stdin.Close() // Best effort.
}

// interrupt is Ctrl-C: SIGINT to the shell and what the running command
// started in its process group (background jobs of earlier commands, in
// that group too, are spared: see proc.SignalForeground); the wrapper's
// trap returns from the command.
// While a command runs (busy) the flag file goes first: it tells the
// wrapper that a SIGINT reaching the shell before the command began is
// meant for it (see wrapper.go). And the groups its new children made
// get SIGINT too, as a terminal's Ctrl-C reaches the foreground job's
// group (GNU timeout makes one). Unless the shell has job control on:
// bash then makes every job a group, and a foreground job killed by
// SIGINT inside a loop throws bash out of the wrapper's loop for good,
// so only the shell gets it (its trap runs once the job ends).
// sigMu keeps setBusy out until both signals went, so a late interrupt
// never reaches the next command's children. A follow-up mends a race of
// bash's (see recheckInterrupt).
func (s *session) interrupt() { s.interruptIf(false, 0) }

// interruptCommand is a user's Ctrl-C (session.interrupt, or SIGINT to
// a session exec): it reaches only a command that runs, gen's if gen is
// not 0, never the idle shell. The shell may be idle because it runs
// muxd's own round trip (a process.start's snapshot, a terminal's
// state), and a SIGINT there returned from the sourced script halfway: a
// process started from a cut snapshot, without the session's functions,
// aliases and options. The check and the signal hold sigMu, which the
// command's end takes before the next round trip may begin.
func (s *session) interruptCommand(gen uint64) { s.interruptIf(true, gen) }

// interruptIf sends the interrupt, with onlyCommand only to a running
// command (gen's, if not 0).
func (s *session) interruptIf(onlyCommand bool, want uint64) {
	s.sigMu.Lock()
	defer s.sigMu.Unlock()
	if onlyCommand {
		s.mu.Lock()
		running := s.busy && (want == 0 || s.gen == want)
		s.mu.Unlock()
		if !running {
			return
		}
	}
	busy, jobControl, since, gen := s.flagLocked()
	if jobControl {
		// The shell alone: a job it just forked may still be in its
		// group, on its way to its own, and killing that throws too.
		_ = s.child.Signal(unix.SIGINT) // Best effort: it may have ended.
		return
	}
	if !busy {
		_ = s.child.Signal(unix.SIGINT) // Best effort: no command to reach; the loop drops it.
		return
	}
	mark := lateMark{children: s.child.Children(), lastPID: proc.LastPID(), at: proc.Ticks()}
	mark.forking = s.child.ForkingChildren(unix.SIGINT, mark.at) // last: closest to the signal
	// The command's processes, not the background jobs of earlier ones
	// that share the shell's group.
	s.mu.Lock()
	lastJob := s.lastJob
	s.mu.Unlock()
	_ = s.child.SignalForeground(unix.SIGINT, since, lastJob) // Best effort: it may have ended.
	s.child.SignalNewChildGroups(unix.SIGINT, since)
	s.followUpLocked(gen, mark)
}

// flagLocked creates the interrupt flag file D/n if a command runs (see
// wrapper.go), and returns what interrupt needs to know of the session:
// whether a command runs, with job control on, since when, and which.
// The caller holds sigMu.
func (s *session) flagLocked() (busy, jobControl bool, since, gen uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.busy {
		// The trap acknowledges each SIGINT it takes: an earlier one's
		// acknowledgement must not pass for this one's.
		_ = os.Remove(s.path("n.t")) // Best effort: it may not exist.
	}
	if s.busy && !s.flagged {
		if f, err := os.OpenFile(s.path("n"), os.O_WRONLY|os.O_CREATE, 0o600); err == nil {
			_ = f.Close() // Best effort: empty, and the SIGINT still goes.
			s.flagged = true
		}
	}
	return s.busy, s.jobControl, s.busySince, s.gen
}

// lateRounds are when, after an interrupt, recheckInterrupt looks for
// children that missed it: soon, and again in case the shell was slow to
// fork; then every 2 s (for a livelock) until the command ends or the
// trap acknowledges.
var lateRounds = [...]time.Duration{10 * time.Millisecond, 50 * time.Millisecond, 250 * time.Millisecond, time.Second, 2 * time.Second}

// lateMark is what interrupt noted just before its SIGINT went.
type lateMark struct {
	children []int          // the shell's children then
	lastPID  int            // proc.LastPID
	at       uint64         // proc.Ticks
	forking  []proc.Forking // the children still inside their fork
}

// lateInterrupt is the follow-up of the running command's interrupt.
type lateInterrupt struct {
	gen     uint64 // the command's
	seq     int    // the chain of rounds: a restart makes a new one
	mark    lateMark
	round   int          // index into lateRounds
	timer   *time.Timer  // the next round
	sent    map[int]bool // the pids the follow-up signalled
	zombies []int        // the shell's unreaped children at the last round
	cpu     uint64       // and the CPU ticks it had used
	ownTrap bool         // the command may set its own INT trap: no late SIGINTs
}

// followUpLocked (re)starts the rounds of recheckInterrupt after an
// interrupt of command gen; the caller holds sigMu.
func (s *session) followUpLocked(gen uint64, mark lateMark) {
	l := &s.late
	if l.timer != nil {
		l.timer.Stop() // a round already waiting for sigMu sees the new seq
	}
	if l.gen != gen || l.sent == nil {
		s.mu.Lock()
		ownTrap := s.ownTrap
		s.mu.Unlock()
		*l = lateInterrupt{gen: gen, seq: l.seq, sent: map[int]bool{}, ownTrap: ownTrap}
	}
	l.seq++
	l.mark, l.round, l.zombies, l.cpu = mark, 0, nil, 0
	seq := l.seq
	l.timer = time.AfterFunc(lateRounds[0], func() { s.recheckInterrupt(gen, seq) })
}

// recheckInterrupt mends a race of bash's. Bash blocks signals while it
// forks, so a SIGINT to the group in that window reaches the shell but not
// the child it is forking, and the shell runs its trap only once that
// child ends (`sleep 100`: 100 s). So while the command runs on, and the
// trap has not acknowledged the interrupt (it creates D/n.t), what the
// shell forked right after the SIGINT went gets one of its own, as if it
// had come a moment later. So does a child that was still inside its
// fork when the SIGINT went (bash 5.2 loses the signal there; see
// proc.ForkingChildren), once it exec'd. Nothing else older gets a
// second: a program that takes its time over a Ctrl-C is left to it.
// Nor does what a user's own INT trap starts (it takes the SIGINT
// instead of ours, and does not acknowledge): once the shell reaped a
// child it had when the SIGINT went, it was waiting, not forking, and
// what it forks then is the trap's; and a command whose text may set a
// trap gets no late SIGINTs.
// A trap that a sourced script sets, run in a loop of builtins, is the
// case left: its programs started in the first 50 ms get one.
func (s *session) recheckInterrupt(gen uint64, seq int) {
	s.sigMu.Lock()
	defer s.sigMu.Unlock()
	s.mu.Lock()
	current := s.busy && s.gen == gen && !s.jobControl
	s.mu.Unlock()
	l := &s.late
	if !current || l.gen != gen || l.seq != seq {
		return
	}
	// Look first, then check the acknowledgement: what the shell forks
	// after it acknowledged (a RETURN-trap cleanup) must not be taken for
	// late.
	var late []int
	if !l.ownTrap {
		late = s.child.LateChildren(l.mark.lastPID, l.mark.at)
		// Reaping comes before what a trap forks: read the children
		// after the late ones, or a trap's child could pass for late.
		if reapedAny(l.mark.children, s.child.Children()) {
			late = nil
		}
		// A child still inside its fork when the SIGINT went lost it
		// (bash 5.2), or soon will: it gets one once it exec'd.
		late = append(late, s.child.LeftFork(l.mark.forking, unix.SIGINT)...)
	}
	zombies := s.child.ZombieChildren()
	cpu := s.child.CPUTicks()
	if _, err := os.Stat(s.path("n.t")); err == nil {
		return // the trap ran: the shell is on its way out
	}
	for _, pid := range late {
		if !l.sent[pid] {
			l.sent[pid] = true
			_ = unix.Kill(pid, unix.SIGINT) // Best effort: it may have ended.
		}
	}
	// Bash can also livelock on the SIGINT: its handler raises it again,
	// forever, and the child it was waiting for stays a zombie. A zombie
	// the shell leaves unreaped from one late round to the next (750 ms
	// or more: bash reaps in its SIGCHLD handler) while it burns CPU, and
	// no acknowledgement, mean that: the shell ends, so the command does
	// not hang. (A stopped or frozen shell burns none.)
	if l.round >= 3 && cpu >= l.cpu+livelockTicks &&
		slices.ContainsFunc(zombies, func(z int) bool { return slices.Contains(l.zombies, z) }) {
		s.kill("the shell stopped responding after an interrupt (a bash livelock on SIGINT)")
		return
	}
	l.zombies, l.cpu = zombies, cpu
	// The rounds go on, every 2 s after the last, while the command runs
	// unacknowledged: a livelock never ends by itself.
	l.round++
	next := 2 * time.Second
	if l.round < len(lateRounds) {
		next = lateRounds[l.round] - lateRounds[l.round-1]
	}
	l.timer = time.AfterFunc(next, func() { s.recheckInterrupt(gen, seq) })
}

// livelockTicks is the least CPU time (10 ms ticks) a livelocked shell
// burns between two late rounds 750 ms or more apart: it spins, while a
// stopped or waiting shell burns none; on a busy machine it may get
// little.
const livelockTicks = 2

// reapedAny reports whether a pid of before is missing from now.
func reapedAny(before, now []int) bool {
	for _, pid := range before {
		if !slices.Contains(now, pid) {
			return true
		}
	}
	return false
}

func (s *session) info() SessionInfo {
	s.mu.Lock()
	defer s.mu.Unlock()
	alive := !s.dead
	if alive && s.child != nil {
		select {
		case <-s.child.Done():
			alive = false
		default:
		}
	}
	cwd := s.cwd
	if alive && s.child != nil {
		// The shell's current directory, as `cd` left it.
		if d, err := os.Readlink("/proc/" + strconv.Itoa(s.child.Pid) + "/cwd"); err == nil {
			cwd = d
		}
	}
	return SessionInfo{ID: s.id, Cwd: cwd, Alive: alive, Busy: s.busy,
		CreatedAt: s.createdAt, DeadReason: s.deadReason}
}

// setsMonitor matches command text that may turn job control on (set -m,
// set -o monitor): the marker's $- tells only after the command.
var setsMonitor = regexp.MustCompile(`\bset\b[^;&|\n]*(\s-[A-Za-z]*m|-o\s+monitor)`)

// startCommand marks the session busy with command.
func (s *session) startCommand(command string) (gen uint64) {
	// The regexps run only when they may match.
	monitor := strings.Contains(command, "set") && setsMonitor.MatchString(command)
	// A command that may set its own INT trap: what that trap starts
	// right after an interrupt must not pass for a child that missed it
	// (see recheckInterrupt). A trap set by a script it sources is not
	// seen.
	ownTrap := strings.Contains(command, "trap") && setsTrap.MatchString(command)
	s.mu.Lock()
	s.jobControl = s.jobControl || monitor
	s.ownTrap = ownTrap
	s.mu.Unlock()
	return s.setBusy(true)
}

// setsTrap matches command text that may set a trap.
var setsTrap = regexp.MustCompile(`\btrap\b`)

// setBusy marks a command running or over; it returns the command's
// generation (0 when over).
func (s *session) setBusy(b bool) (gen uint64) {
	var since uint64
	if b {
		since = proc.Ticks()
	}
	s.sigMu.Lock()
	defer s.sigMu.Unlock()
	if !b && s.late.timer != nil {
		s.late.timer.Stop()
		s.late = lateInterrupt{}
	}
	s.mu.Lock()
	s.busy = b
	s.busySince = since
	if b {
		s.gen++
		gen = s.gen
	}
	if !b && s.flagged {
		// The command is over: a SIGINT still on its way to the shell
		// must not count for the next one.
		_ = os.Remove(s.path("n"))   // Best effort: the dir may be gone.
		_ = os.Remove(s.path("n.t")) // Best effort: as above.
		s.flagged = false
	}
	s.mu.Unlock()
	return gen
}

func (s *session) removeFiles() {
	s.mu.Lock()
	ctl := s.ctl // set once at start, never cleared: readers may hold it
	s.mu.Unlock()
	if ctl != nil {
		_ = ctl.Close() // Best effort: a reader in awaitMarker sees the end.
	}
	s.mu.Lock()
	s.filesGone = true
	free := s.turn.tryLock()
	s.mu.Unlock()
	if free {
		s.closeFDs()
		s.turn.unlock()
	} // else the turn holder releases them (endTurn)
	if s.dir != "" {
		s.e.watcher.removeDir(filepath.Join(s.dir, "x"))
		_ = os.RemoveAll(s.dir) // Best effort.
	}
}

// startedSession is session for a command that names one: a session
// still starting (another client's first use of the name) is waited for
// rather than not found.
func (e *Engine) startedSession(ctx context.Context, id string) (*session, error) {
	e.mu.Lock()
	s := e.sessions[id]
	e.mu.Unlock()
	if s != nil && !s.ready.Load() {
		select {
		case <-s.started:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return e.session(id)
}

func (e *Engine) session(id string) (*session, error) {
	e.mu.Lock()
	s := e.sessions[id]
	e.mu.Unlock()
	if s == nil || !s.ready.Load() {
		return nil, fmt.Errorf("%w: session %.80q", ErrNotFound, id)
	}
	return s, nil
}

// ListSessions lists sessions, oldest first.
func (e *Engine) ListSessions() []SessionInfo {
	e.mu.Lock()
	ss := make([]*session, 0, len(e.sessions))
	for _, s := range e.sessions {
		ss = append(ss, s)
	}
	e.mu.Unlock()
	out := make([]SessionInfo, 0, len(ss))
	for _, s := range ss {
		if s.ready.Load() {
			out = append(out, s.info())
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].CreatedAt.Before(out[j].CreatedAt) })
	return out
}

// InterruptSession is Ctrl-C for the running command: it is aborted (its
// exec returns 130), the shell survives with its state. Idle: no-op.
func (e *Engine) InterruptSession(id string) error {
	s, err := e.session(id)
	if err != nil {
		return err
	}
	if err := s.alive(); err != nil {
		return err
	}
	s.interruptCommand(0) // an idle shell gets no SIGINT
	return nil
}

// pruneDeadSession makes room at the session limit by forgetting the
// oldest dead session: a dead shell stays listed so its client can learn
// why it ended, but must not keep a live one from starting (as exited
// terminals are pruned).
func (e *Engine) pruneDeadSession() {
	e.mu.Lock()
	if len(e.sessions) < e.cfg.MaxSessions {
		e.mu.Unlock()
		return
	}
	list := make([]*session, 0, len(e.sessions))
	for _, s := range e.sessions {
		if s.ready.Load() {
			list = append(list, s)
		}
	}
	e.mu.Unlock()
	var oldest *session
	for _, s := range list {
		if s.alive() != nil && (oldest == nil || s.createdAt.Before(oldest.createdAt)) {
			oldest = s
		}
	}
	if oldest == nil {
		return
	}
	e.mu.Lock()
	ours := e.sessions[oldest.id] == oldest
	if ours {
		delete(e.sessions, oldest.id)
	}
	e.mu.Unlock()
	if ours {
		oldest.kill("pruned at the session limit") // dead already: reaps what is left
		oldest.removeFiles()
	}
}

// DeleteSession kills the shell and everything its commands started (not
// the processes started from its snapshots) and removes its files.
func (e *Engine) DeleteSession(id string) error {
	e.mu.Lock()
	s := e.sessions[id]
	if s != nil && s.ready.Load() {
		delete(e.sessions, id)
	}
	e.mu.Unlock()
	if s == nil || !s.ready.Load() {
		return fmt.Errorf("%w: session %.80q", ErrNotFound, id)
	}
	s.kill("session deleted")
	s.removeFiles()
	return nil
}

// lazyDrainDelay is how long a session command runs before its output
// gets drain goroutines: most commands end sooner and are read in one go.
const lazyDrainDelay = 2 * time.Millisecond
