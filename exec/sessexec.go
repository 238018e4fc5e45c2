package exec

import (
	"context"
	"fmt"
	"os"
	osexec "os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/muxd/muxd/internal/proc"
	"golang.org/x/sys/unix"
)

// shellName matches names a shell can assign (per-command overrides in a
// session are shell assignments, not an exec environment).
var shellName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// overrideScript wraps a session command so that its cwd and env
// overrides hold for this command only. It records what it changes, one
// assignment-only command per variable (a trap cannot run halfway
// through one), and the wrapper's loop undoes exactly that after the
// command, outside it (restoreText), so that an interrupt landing
// anywhere, even before the command began, never leaves an override in
// place.
func overrideScript(userPath, cwd string, env map[string]*string) (string, error) {
	names := make([]string, 0, len(env))
	for k := range env {
		if !shellName.MatchString(k) {
			return "", fmt.Errorf("%w: env name %.40q", ErrInvalid, k)
		}
		if k == proc.MarkVar {
			continue // muxd's, as for every child (proc.Start)
		}
		if strings.HasPrefix(k, "__muxd_") {
			return "", fmt.Errorf("%w: env name %.40q: the __muxd_ prefix is the session wrapper's", ErrInvalid, k)
		}
		names = append(names, k)
	}
	sort.Strings(names)
	var b strings.Builder
	if cwd != "" {
		// Where to come back to, read before the env overrides, which may
		// set PWD (a client forwarding its whole environment), and without
		// PWD from the directory itself (`cd .` sets PWD; OLDPWD is
		// restored with the rest). No $( in the text: bash 5.2 parses a
		// command substitution with a parser of its own, and an INT trap
		// that runs during that parse (an interrupt landing there) fails
		// with a syntax error, and so does the line: the interrupt was
		// lost and the way back not recorded, so the override stayed.
		b.WriteString("__muxd_od=${OLDPWD-} __muxd_os=${OLDPWD+1} __muxd_wd=${PWD-}\n" +
			"[[ -n $__muxd_wd ]]||{ \\builtin cd . && __muxd_wd=$PWD;}\n")
	}
	for _, k := range names {
		// The old value, whether it was set, its attributes (x: exported).
		fmt.Fprintf(&b, "__muxd_u+=(\"${%s-}\") __muxd_w+=(\"${%s+1${%s@a}}\") __muxd_v+=(%s)\n", k, k, k, k)
		if v := env[k]; v != nil {
			if strings.IndexByte(*v, 0) >= 0 {
				return "", fmt.Errorf("%w: NUL in env %s", ErrInvalid, k)
			}
			// Assigned, then exported: under set -k an assignment word
			// after `export` would go to its environment instead.
			fmt.Fprintf(&b, "%s=%s;\\builtin export %s\n", k, shQuote(*v), k)
		} else {
			fmt.Fprintf(&b, "\\builtin unset -v %s\n", k)
		}
	}
	if cwd != "" {
		// cd, not pushd: the directory stack is the user's. PWD and
		// OLDPWD come back as they were.
		if !filepath.IsAbs(cwd) {
			cwd = "./" + cwd // never through the session's CDPATH (which also prints)
		}
		fmt.Fprintf(&b, "\\builtin cd -- %s||\\builtin return 1\n", shQuote(cwd))
	}
	fmt.Fprintf(&b, "\\builtin source %s\n", shQuote(userPath))
	return b.String(), nil
}

// errKilledQueued ends a session exec, or a session process.start, that
// KillProcess dropped while it waited for its turn.
var errKilledQueued = fmt.Errorf("%w: killed while waiting for the session's turn", context.Canceled)

// enqueue enters a request that waits for a session's turn under id
// (Engine.queued), so that KillProcess can drop it before it runs: a
// client that gave up on it (its socket dropped, so rpc.cancel went
// nowhere) can still stop it by id. The wait must use qctx. With
// exclusive, an id that something already waits under is refused: a
// process.start sent again after a drop must not queue a second run
// behind the first (see StartProcess). The entry stays until
// registerQueued ends it; release ends it on the paths that never
// register, and must be called either way.
func (e *Engine) enqueue(ctx context.Context, id string, exclusive bool) (qctx context.Context, q *queuedExec, release func(), err error) {
	qctx, cancel := context.WithCancelCause(ctx)
	q = &queuedExec{cancel: cancel}
	e.mu.Lock()
	if exclusive {
		if err := e.notWaitingLocked(id); err != nil {
			e.mu.Unlock()
			cancel(nil)
			return nil, nil, nil, err
		}
	}
	if e.queued == nil {
		e.queued = make(map[string][]*queuedExec)
	}
	e.queued[id] = append(e.queued[id], q)
	e.mu.Unlock()
	release = func() {
		e.mu.Lock()
		e.dequeueLocked(id, q)
		e.mu.Unlock()
		cancel(nil)
	}
	return qctx, q, release, nil
}

// notWaitingLocked refuses id (ErrAlreadyExists) while a request waits
// for a session's turn under it and no kill dropped it (one that did may
// not have woken yet).
func (e *Engine) notWaitingLocked(id string) error {
	for _, q := range e.queued[id] {
		if !q.killed {
			return fmt.Errorf("%w: %q is waiting for a session's turn", ErrAlreadyExists, id)
		}
	}
	return nil
}

// killedQueued returns errKilledQueued in place of err when KillProcess
// dropped the request that waited with qctx.
func killedQueued(qctx context.Context, err error) error {
	if context.Cause(qctx) == errKilledQueued {
		return errKilledQueued
	}
	return err
}

// awaitTurn takes s's turn for exec id, as an entry of Engine.queued
// (see enqueue) while it waits.
func (e *Engine) awaitTurn(ctx context.Context, s *session, id string) (q *queuedExec, release func(), err error) {
	qctx, q, release, _ := e.enqueue(ctx, id, false)
	if err := s.turn.lock(qctx); err != nil {
		release()
		return nil, nil, killedQueued(qctx, err)
	}
	return q, release, nil
}

// execSession runs a command in a session's shell, in its turn.
func (e *Engine) execSession(ctx context.Context, req ExecRequest, id string) (ExecResult, error) {
	s, err := e.startedSession(ctx, req.SessionID)
	if err != nil {
		return ExecResult{}, err
	}
	// A relative cwd is the session's business: its shell's cd resolves
	// it against the session's cwd (and a missing one fails the command
	// with cd's message).
	if req.Cwd != "" && filepath.IsAbs(req.Cwd) {
		if err := checkDir(req.Cwd); err != nil {
			return ExecResult{}, err
		}
	}
	timeout := req.Timeout
	if timeout == 0 {
		timeout = s.timeout
	}
	q, release, err := e.awaitTurn(ctx, s, id)
	if err != nil {
		return ExecResult{}, err
	}
	// The command's files (u, i) have the session's fixed names: they go
	// within the turn, before the next command may write its own.
	var files []string
	held := true
	endTurn := func() {
		if held {
			held = false
			for _, f := range files {
				_ = os.Remove(f) // Best effort.
			}
			s.endTurn()
		}
	}
	defer endTurn()
	defer release()
	if err := s.alive(); err != nil {
		return ExecResult{}, err
	}
	start := time.Now()
	text := req.Command
	overrides := req.Cwd != "" || len(req.Env) > 0
	if overrides {
		userPath := s.path("u")
		files = append(files, userPath)
		if err := os.WriteFile(userPath, []byte(req.Command), 0o600); err != nil {
			return ExecResult{}, fmt.Errorf("exec: command file: %w", err)
		}
		var err error
		if text, err = overrideScript(userPath, req.Cwd, req.Env); err != nil {
			return ExecResult{}, err
		}
	}
	if req.Stdin != nil {
		in := s.path("i")
		files = append(files, in)
		if err := os.WriteFile(in, req.Stdin, 0o600); err != nil {
			return ExecResult{}, fmt.Errorf("exec: stdin: %w", err)
		}
	}
	p := e.newProcess(id, req.Command, s.id, true, e.cfg.DefaultOutputLimit)
	p.pid = s.child.Pid
	// The command's generation once startCommand returned; 0 before,
	// when a running command can only be this one (it holds the turn):
	// the session is busy before the generation is stored here.
	var gen atomic.Uint64
	p.signal = func(sig syscall.Signal) error {
		if sig == unix.SIGINT { // Ctrl-C, as session.interrupt, to this command only
			s.interruptCommand(gen.Load())
			return nil
		}
		return s.child.SignalGroup(sig)
	}
	p.killTree = func(sig syscall.Signal, _ time.Duration) error {
		if sig == unix.SIGINT {
			return p.signal(sig)
		}
		s.kill("session command killed")
		return nil
	}
	p.pinned = 1 // until the result is read (not listed yet: no lock needed)
	if err := e.registerQueued(p, q); err != nil {
		return ExecResult{}, err
	}
	defer e.releaseResult(p, req.Detached)
	gen.Store(s.startCommand(req.Command))
	line := wrapperLine(req.Stdin != nil, overrides)
	o, rtErr := s.roundTrip(ctx, text, line, timeout, p.logs)
	s.setBusy(false)
	if rtErr != nil {
		p.failStart()
		e.retire(p)
		return ExecResult{}, rtErr
	}
	switch {
	case o.timedOut:
		p.mu.Lock()
		p.timedOut = true
		p.mu.Unlock()
		p.finish(-1, 0, "")
	case o.died && o.sig != 0:
		p.finish(-1, o.sig, proc.SignalName(o.sig))
	default:
		p.finish(o.code, 0, "")
	}
	if o.died && !o.timedOut {
		s.noteDeath(p)
	}
	e.retire(p)
	p.end()
	d := time.Since(start)
	// The output is the record's: the session's next command need not
	// wait while this result is read (or waits for room to be answered).
	endTurn()
	res, err := e.result(p, req, d)
	if err == nil && o.died {
		res.SessionEnded = s.info().DeadReason
	}
	return res, err
}

// noteDeath adds bash's last words (the command's last stderr line, e.g.
// "X: parameter null or not set") to the dead session's reason.
func (s *session) noteDeath(p *process) {
	errOut, _ := headOf(p.logs[1], tailSize)
	l := lastLine(errOut)
	if l == "" {
		return
	}
	s.mu.Lock()
	if !strings.Contains(s.deadReason, l) {
		s.deadReason += ": " + l
	}
	s.mu.Unlock()
}

// snapshot captures the session's state as a restore script, in its turn.
func (s *session) snapshot(ctx context.Context, path string) error {
	if err := s.turn.lock(ctx); err != nil {
		return err
	}
	defer s.endTurn()
	if err := s.alive(); err != nil {
		return err
	}
	o, err := s.roundTrip(ctx, snapshotScript(path), wrapperLine(false, false), 0, [2]*outputLog{})
	if err != nil {
		return err
	}
	if o.died {
		return fmt.Errorf("%w: session %q ended during the snapshot", ErrSessionDead, s.id)
	}
	if err := ctx.Err(); err != nil {
		return err // cancelled: the script may have been interrupted midway
	}
	if _, err := os.Stat(path); err != nil {
		return fmt.Errorf("exec: snapshot: %w", err)
	}
	return nil
}

// envProgram is env(1) by its absolute path, found in muxd's PATH.
var envProgram = sync.OnceValue(func() string {
	if p, err := osexec.LookPath("env"); err == nil && filepath.IsAbs(p) {
		return p
	}
	return "/usr/bin/env"
})

// SessionState returns a session's cwd and exported environment, for a
// terminal started from it. While a command runs (or waits), it does not
// queue: it reads the shell's cwd from /proc and returns the environment
// the session was created with, as it does when env(1) cannot run in
// the session (a variable over 128 KiB, a ulimit).
func (e *Engine) SessionState(id string) (cwd string, env []string, err error) {
	s, err := e.session(id)
	if err != nil {
		return "", nil, err
	}
	if err := s.alive(); err != nil {
		return "", nil, err
	}
	if !s.turn.tryLock() {
		cwd, err := os.Readlink(fmt.Sprintf("/proc/%d/cwd", s.child.Pid))
		if err != nil {
			cwd = s.cwd
		}
		return cwd, slices.Clone(s.env), nil
	}
	defer s.endTurn()
	path := s.path("s")
	defer os.Remove(path)
	o, err := s.roundTrip(context.Background(), stateScript(path, envProgram()), wrapperLine(false, false), 5*time.Second, [2]*outputLog{})
	if err != nil {
		return "", nil, err
	}
	if o.died {
		return "", nil, fmt.Errorf("%w: session %q", ErrSessionDead, id)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", nil, fmt.Errorf("exec: session state: %w", err)
	}
	parts := strings.Split(strings.TrimSuffix(string(b), "\x00"), "\x00")
	if o.code != 0 || parts[len(parts)-1] == "\x01" {
		// env(1) could not run: a variable past the kernel's 128 KiB per
		// string (E2BIG), a ulimit -v. Its output is partial or none, and
		// a terminal started with it lost HOME, PATH and the rest: the
		// environment the session was created with, as while it is busy.
		return parts[0], slices.Clone(s.env), nil
	}
	return parts[0], parts[1:], nil
}
