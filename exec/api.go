package exec

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/muxd/muxd/internal/proc"
)

// Exec runs one command and waits for it. Without SessionID it is a fresh
// `bash -c`; with one it runs in that session's shell, in arrival order.
// Cancelling ctx kills the command (a session command is interrupted
// first, then its session killed if it does not stop within KillGrace).
// The record stays readable by ID (GetProcess, ReadOutput, OpenOutput)
// until retention drops it.
func (e *Engine) Exec(ctx context.Context, req ExecRequest) (ExecResult, error) {
	id, err := newID(req.ID)
	if err != nil {
		return ExecResult{}, err
	}
	if err := checkCommand(req.Command); err != nil {
		return ExecResult{}, err
	}
	if err := e.checkTimeout(req.Timeout); err != nil {
		return ExecResult{}, err
	}
	if req.MaxOutput < 0 {
		return ExecResult{}, fmt.Errorf("%w: negative maxOutput", ErrInvalid)
	}
	if req.SessionID != "" {
		return e.execSession(ctx, req, id)
	}
	return e.execStateless(ctx, req, id)
}

// StartProcess starts a command and returns once it runs. With SessionID
// it starts, in a fresh bash, from a snapshot of the session's state taken
// in the session's turn; the process does not belong to the session and
// outlives it.
func (e *Engine) StartProcess(ctx context.Context, req ProcessRequest) (ProcessInfo, error) {
	id, err := newID(req.ID)
	if err != nil {
		return ProcessInfo{}, err
	}
	if err := checkCommand(req.Command); err != nil {
		return ProcessInfo{}, err
	}
	if err := e.checkTimeout(req.Timeout); err != nil {
		return ProcessInfo{}, err
	}
	if req.OutputLimit < 0 {
		return ProcessInfo{}, fmt.Errorf("%w: negative outputLimit", ErrInvalid)
	}
	limit := req.OutputLimit
	if limit == 0 {
		limit = e.cfg.DefaultOutputLimit
	}
	if err := checkDir(req.Cwd); err != nil {
		return ProcessInfo{}, err
	}
	var (
		spec  childSpec
		files []string
		q     *queuedExec // a session's start, while it waits for the turn
	)
	if req.SessionID == "" {
		env, err := e.buildEnv(e.cfg.BaseEnv, req.Env)
		if err != nil {
			return ProcessInfo{}, err
		}
		args, file, err := e.bashArgs(req.Command)
		if err != nil {
			return ProcessInfo{}, err
		}
		spec = childSpec{args: args, dir: req.Cwd, env: env}
		if file != "" {
			files = append(files, file)
		}
	} else {
		s, err := e.startedSession(ctx, req.SessionID)
		if err != nil {
			return ProcessInfo{}, err
		}
		// Queued under its id while it waits for the session's turn: a
		// kill drops it, and the same id sent again meanwhile (a client
		// that lost the answer, found nothing under the id and sent the
		// start again) is refused, not run a second time after it.
		qctx, queued, release, err := e.enqueue(ctx, id, true)
		if err != nil {
			return ProcessInfo{}, err
		}
		defer release()
		q = queued
		spec, files, err = e.fromSnapshot(qctx, s, req)
		if err != nil {
			return ProcessInfo{}, killedQueued(qctx, err)
		}
	}
	p := e.newProcess(id, req.Command, req.SessionID, false, limit)
	p.extraFiles = files
	// A start whose caller went away before it ran (the server cancels
	// the request when the client's socket ends) does not run: the
	// client, back on a new socket, finds no record under the ID and
	// sends it again.
	if err := ctx.Err(); err != nil {
		removeFiles(files)
		return ProcessInfo{}, fmt.Errorf("%w: %w", ErrAbandoned, err)
	}
	if err := e.registerQueued(p, q); err != nil {
		removeFiles(files)
		return ProcessInfo{}, err
	}
	if testHookRegistered != nil {
		testHookRegistered(p)
	}
	if err := e.launch(p, spec, req.Timeout, req.Stdin); err != nil {
		e.unregister(p)
		removeFiles(files)
		return ProcessInfo{}, err
	}
	return p.info(), nil
}

// maxArgCommand is the longest command passed to bash -c as an argument:
// Linux refuses a single argument over 128 KiB (MAX_ARG_STRLEN), with
// E2BIG. A longer one is sourced from a file instead.
const maxArgCommand = 64 << 10

// bashArgs returns the argv that runs command in a fresh bash, and the
// file holding it when it is too long for an argument (removed with the
// record). $0 is "bash" either way.
func (e *Engine) bashArgs(command string) (args []string, file string, err error) {
	if len(command) <= maxArgCommand {
		return []string{"bash", "-c", command}, "", nil
	}
	file = filepath.Join(e.sessDir, "c"+e.nextName()+".cmd")
	if err := os.WriteFile(file, []byte(command), 0o600); err != nil {
		return nil, "", fmt.Errorf("exec: command file: %w", err)
	}
	return []string{"bash", "-c", "\\builtin source " + shQuote(file)}, file, nil
}

func removeFiles(files []string) {
	for _, f := range files {
		_ = os.Remove(f) // Best effort.
	}
}

// fromSnapshot prepares a fresh bash that restores a session's state and
// then runs the command (with the request's cwd and env on top).
func (e *Engine) fromSnapshot(ctx context.Context, s *session, req ProcessRequest) (childSpec, []string, error) {
	for k, v := range req.Env {
		if !shellName.MatchString(k) || (v != nil && containsNUL(*v)) {
			return childSpec{}, nil, fmt.Errorf("%w: env %.40q", ErrInvalid, k)
		}
	}
	name := e.nextName()
	// Beside the session dirs (the session shell writes the snapshot here
	// itself, no rename), but not inside one: the process outlives its session.
	snap := filepath.Join(e.sessDir, "p"+name+".snap")
	cmd := filepath.Join(e.sessDir, "p"+name+".cmd")
	files := []string{snap, cmd}
	if err := os.WriteFile(cmd, []byte(req.Command), 0o600); err != nil {
		return childSpec{}, nil, fmt.Errorf("exec: command file: %w", err)
	}
	if err := s.snapshot(ctx, snap); err != nil {
		removeFiles(files)
		return childSpec{}, nil, err
	}
	script := "\\builtin source " + shQuote(snap) + " 2>/dev/null\n"
	for k, v := range req.Env {
		if k == proc.MarkVar {
			continue // muxd's, as for every child (proc.Start)
		}
		if v == nil {
			script += "\\builtin unset -v " + k + "\n"
		} else {
			script += k + "=" + shQuote(*v) + ";\\builtin export " + k + "\n" // see overrideScript
		}
	}
	if !filepath.IsAbs(req.Cwd) {
		// The session's directory is gone (the snapshot's cd failed, its
		// message hidden with the rest): run nowhere else, not even
		// relative to it, and say why.
		script += `[[ -z ${__muxd_nocd+1} ]]||{ \builtin printf 'muxd: the session'\''s working directory %s no longer exists\n' "$__muxd_nocd" >&2;\builtin exit 1;}` + "\n"
	}
	if req.Cwd != "" {
		script += "\\builtin cd -- " + shQuote(req.Cwd) + " || \\builtin exit 1\n"
	}
	script += "\\builtin unset -v __muxd_nocd\n"
	script += "\\builtin source " + shQuote(cmd) + "\n"
	// The snapshot's exports rebuild the environment; start from nothing,
	// not even the locale defaults, so variables the session unset stay
	// unset.
	env, err := proc.Env(nil, map[string]*string{"LANG": nil, "LC_ALL": nil})
	if err != nil {
		removeFiles(files)
		return childSpec{}, nil, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	return childSpec{args: []string{"bash", "--noprofile", "--norc", "-c", script}, env: env}, files, nil
}

func containsNUL(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] == 0 {
			return true
		}
	}
	return false
}

// portPollInterval is how often WaitForPort retries a connect: ports have
// no event to wait on.
const portPollInterval = 20 * time.Millisecond
