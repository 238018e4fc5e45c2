package exec

import (
	"context"
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"

	"github.com/muxd/muxd/internal/proc"
)

// childSpec is what the engine needs to start one bash child.
type childSpec struct {
	args  []string
	dir   string
	env   []string
	stdin *os.File // nil = /dev/null
}

// buildEnv validates and builds a child environment.
func (e *Engine) buildEnv(base []string, set map[string]*string) ([]string, error) {
	env, err := proc.Env(base, set)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	return env, nil
}

// checkDir reports a missing or non-directory cwd as ErrInvalid.
func checkDir(dir string) error {
	if err := proc.CheckDir(dir); err != nil {
		return fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	return nil
}

// launch starts a registered record's child with its output drained into
// the record's logs, and supervises it until its exit is recorded. The
// record must not have been started before; on error it is recorded as
// failed_to_start.
func (e *Engine) launch(p *process, spec childSpec, timeout time.Duration, keepStdin bool) error {
	outR, outW, err := os.Pipe()
	if err != nil {
		p.failStart()
		return fmt.Errorf("exec: pipe: %w", err)
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		closeAll(outR, outW)
		p.failStart()
		return fmt.Errorf("exec: pipe: %w", err)
	}
	stdin := spec.stdin
	var inW *os.File
	if keepStdin {
		var inR *os.File
		inR, inW, err = os.Pipe()
		if err != nil {
			closeAll(outR, outW, errR, errW)
			p.failStart()
			return fmt.Errorf("exec: pipe: %w", err)
		}
		defer inR.Close() // the child has its copy
		stdin = inR
	}
	launched := proc.Ticks() // before the child: its start is not earlier
	child, err := proc.Start(proc.Spec{
		Path: e.cfg.Shell, Args: spec.args, Dir: spec.dir, Env: spec.env,
		Stdin: stdin, Stdout: outW, Stderr: errW,
	})
	closeAll(outW, errW) // the child has its copies
	if err != nil {
		closeAll(outR, errR, inW)
		p.failStart()
		if errors.Is(err, proc.ErrNotFound) || errors.Is(err, proc.ErrTooBig) {
			return fmt.Errorf("%w: %v", ErrInvalid, err)
		}
		return fmt.Errorf("exec: start: %w", err)
	}
	drains := [2]*drain{startDrain(outR, p.logs[0]), startDrain(errR, p.logs[1])}
	p.mu.Lock()
	p.pid = child.Pid
	p.stdin = inW
	p.killTree, p.ownTree, p.members, p.launchTicks = child.KillTree, true, child.Members, launched
	p.signal = child.SignalGroup
	pk := p.pendingKill
	sigs := p.pendingSignals
	p.pendingKill, p.pendingSignals = nil, nil
	p.mu.Unlock()
	for _, sig := range sigs {
		_ = child.SignalGroup(sig) // Best effort, as SignalProcess: it may be gone.
	}
	if pk != nil {
		// A kill came before the child ran (see process.kill); its
		// caller waits for this. Not here: supervise must reap.
		go func() { pk.done <- child.KillTree(pk.sig, pk.grace) }()
	}
	// Close may have listed p before it had a tree to kill: then the kill
	// is ours (see Close; the two locks order it either way).
	e.mu.Lock()
	closed := e.closed
	e.mu.Unlock()
	if closed {
		go func() { _ = child.KillTree(killTERM, e.cfg.KillGrace) }() // Best effort: supervise reaps it
	}
	e.emit("process.started", p) // before supervise can emit the exit
	go e.supervise(p, child, drains, timeout)
	return nil
}

// supervise records the exit once the child is reaped and every byte it
// wrote was captured; it enforces the timeout.
func (e *Engine) supervise(p *process, child *proc.Process, drains [2]*drain, timeout time.Duration) {
	var timer <-chan time.Time
	if timeout > 0 {
		t := time.NewTimer(timeout)
		defer t.Stop()
		timer = t.C
	}
	timedOut := false
	select {
	case <-child.Done():
	case <-timer:
		timedOut = true
		p.mu.Lock()
		p.timedOut = true
		p.mu.Unlock()
		_ = child.KillTree(killTERM, e.cfg.KillGrace) // Best effort: it may be gone.
		<-child.Done()
	}
	p.mu.Lock()
	p.reaped = true
	p.mu.Unlock()
	// The child is reaped: everything it wrote is in the pipes. What it
	// left running may write on (a background job): give that a moment
	// to reach EOF, then take what is there, without waiting on
	// descendants that hold the pipes open for good.
	if !timedOut {
		deadline := time.Now().Add(e.cfg.TrailGrace)
		for _, d := range drains {
			if !d.waitEOF(deadline) {
				break
			}
		}
	}
	for _, d := range drains {
		d.stop()
	}
	for i := range drains {
		p.logs[i].finish()
	}
	st := child.Status()
	p.finish(st.Code, st.Signal, st.SignalName())
	p.removeExtraFiles() // the snapshot and command files were read at start
	e.retire(p)
	p.end()
	e.emit("process.exited", p)
}

func closeAll(fs ...*os.File) {
	for _, f := range fs {
		if f != nil {
			_ = f.Close() // Best effort.
		}
	}
}

// stdinFile returns a file holding b for a child's stdin, already
// unlinked, or nil for /dev/null.
func (e *Engine) stdinFile(b []byte) (*os.File, error) {
	if b == nil {
		return nil, nil
	}
	f, err := os.CreateTemp(e.procDir, "stdin-")
	if err != nil {
		return nil, fmt.Errorf("exec: stdin: %w", err)
	}
	_ = os.Remove(f.Name()) // Best effort: unlinked, it goes with the fd.
	if _, err := f.Write(b); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("exec: stdin: %w", err)
	}
	if _, err := f.Seek(0, 0); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("exec: stdin: %w", err)
	}
	return f, nil
}

// execStateless runs bash -c for Exec and waits for it.
func (e *Engine) execStateless(ctx context.Context, req ExecRequest, id string) (ExecResult, error) {
	env, err := e.buildEnv(e.cfg.BaseEnv, req.Env)
	if err != nil {
		return ExecResult{}, err
	}
	if err := checkDir(req.Cwd); err != nil {
		return ExecResult{}, err
	}
	in, err := e.stdinFile(req.Stdin)
	if err != nil {
		return ExecResult{}, err
	}
	if in != nil {
		defer in.Close()
	}
	args, file, err := e.bashArgs(req.Command)
	if err != nil {
		return ExecResult{}, err
	}
	p := e.newProcess(id, req.Command, "", true, e.cfg.DefaultOutputLimit)
	p.pinned = 1 // until the result is read (not listed yet: no lock needed)
	if file != "" {
		p.extraFiles = []string{file}
	}
	if req.Abandoned != nil && req.Abandoned() {
		removeFiles(p.extraFiles)
		return ExecResult{}, ErrAbandoned
	}
	if err := e.register(p); err != nil {
		removeFiles(p.extraFiles)
		return ExecResult{}, err
	}
	defer e.releaseResult(p, req.Detached)
	if testHookRegistered != nil {
		testHookRegistered(p)
	}
	start := time.Now()
	spec := childSpec{args: args, dir: req.Cwd, env: env, stdin: in}
	if err := e.launch(p, spec, req.Timeout, false); err != nil {
		e.unregister(p)
		removeFiles(p.extraFiles)
		return ExecResult{}, err
	}
	select {
	case <-p.done:
	case <-ctx.Done():
		_ = p.kill(killTERM, e.cfg.KillGrace, true) // rpc.cancel: the command goes
		<-p.done
	}
	return e.result(p, req, time.Since(start))
}

// result builds an ExecResult from an ended record.
func (e *Engine) result(p *process, req ExecRequest, d time.Duration) (ExecResult, error) {
	maxOut := req.MaxOutput
	if maxOut <= 0 {
		maxOut = defaultMaxOutput
	}
	if req.BeforeOutput != nil {
		var n [2]int
		for i, l := range p.logs {
			first, end, _ := l.bounds()
			n[i] = int(min(end-first, int64(maxOut)))
		}
		if err := req.BeforeOutput(n[0], n[1]); err != nil {
			return ExecResult{}, err
		}
	}
	in := p.info()
	r := ExecResult{ID: p.id, ExitCode: in.ExitCode, Signal: in.Signal,
		TimedOut: in.Status == StatusTimedOut, Duration: d}
	r.Stdout, r.StdoutTruncated = headOf(p.logs[0], maxOut)
	r.Stderr, r.StderrTruncated = headOf(p.logs[1], maxOut)
	return r, nil
}

// defaultMaxOutput is the per-stream result size of Exec when the request
// does not say (docs/protocol.md: 256 KiB).
const defaultMaxOutput = 256 << 10

var _ = syscall.SIGKILL
