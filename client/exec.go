package client

import (
	"context"
	"encoding/base64"
	"errors"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/muxd/muxd/mux"
)

// ExecOptions are the optional params of exec.
type ExecOptions struct {
	// ID names the exec (default: a fresh uuid), so its output can be
	// streamed and its result fetched after a reconnect. An ID that an
	// ended exec or process still holds may be reused: Exec then asks
	// for its instance first (one more round trip), so that live output
	// and a result fetched after a reconnect are this command's.
	ID  string
	Cwd string
	Env map[string]*string
	// Timeout kills the command when it runs longer. In a session that
	// ends the session too (its shell is killed with the command: its
	// cwd and exports are gone, and later calls get session_dead), as
	// does cancelling ctx when the command does not stop on SIGINT.
	Timeout   time.Duration
	Stdin     []byte
	SessionID string
	// MaxOutput caps each stream in the result (daemon default 256 KiB,
	// at most 512 KiB); the full output stays readable by ID.
	MaxOutput int
	// OnOutput, when set, receives the output live through a process
	// channel, every byte once and in order within each stream. data is
	// valid only during the call: copy it to keep it. Where the output
	// cannot be followed live (the record left retention first, many
	// other execs ending at once; the daemon refused the channel, at its
	// --max-channels), OnOutput gets the rest from the result once the
	// exec ends, up to MaxOutput per stream.
	OnOutput func(stream string, data []byte)
	// OnGap, with OnOutput, is told where the live output lost bytes:
	// the daemon keeps the last outputLimit bytes of each stream, and a
	// reader that falls further behind skips the rest.
	OnGap func(stream string, bytes int64)
}

// ExecResult is the result of exec.
type ExecResult struct {
	ID              string
	ExitCode        *int // nil when killed by a signal or timed out
	Signal          string
	TimedOut        bool
	Stdout, Stderr  []byte
	StdoutTruncated bool
	StderrTruncated bool
	Duration        time.Duration
	// SessionEnded, for a session command that ended its session (exit,
	// set -e then a failure, exec, a timeout), says why: later calls
	// there fail with session_dead until it is deleted or recreated.
	// Empty otherwise, and when the result was read back after a drop.
	SessionEnded string
}

type execParams struct {
	Command       string             `json:"command"`
	ID            string             `json:"id"`
	Cwd           string             `json:"cwd,omitempty"`
	Env           map[string]*string `json:"env,omitempty"`
	TimeoutMs     int64              `json:"timeoutMs,omitempty"`
	Stdin         string             `json:"stdin,omitempty"`
	StdinEncoding string             `json:"stdinEncoding,omitempty"`
	SessionID     string             `json:"sessionId,omitempty"`
	Encoding      string             `json:"encoding"`
	MaxOutput     int                `json:"maxOutput,omitempty"`
}

type execWire struct {
	ID              string `json:"id"`
	ExitCode        *int   `json:"exitCode"`
	Signal          string `json:"signal"`
	TimedOut        bool   `json:"timedOut"`
	Stdout          string `json:"stdout"`
	Stderr          string `json:"stderr"`
	StdoutTruncated bool   `json:"stdoutTruncated"`
	StderrTruncated bool   `json:"stderrTruncated"`
	DurationMs      int64  `json:"durationMs"`
	SessionEnded    string `json:"sessionEnded"`
}

// Exec runs command (bash -c, or in a session's shell) and returns its
// result. The command survives a dropped socket: Exec then waits for it
// by id on the new socket and reads its output back.
func (c *Client) Exec(ctx context.Context, command string, opts ExecOptions) (*ExecResult, error) {
	if err := checkTimeout("Timeout", opts.Timeout); err != nil {
		return nil, err
	}
	var stale string // the instance an earlier holder of a caller's ID has
	if opts.ID == "" {
		opts.ID = uuid.NewString()
	} else {
		var old ProcessInfo
		err := c.callIdempotent(ctx, "process.get", map[string]string{"id": opts.ID}, &old)
		switch {
		case err == nil:
			stale = old.Instance
		case !IsCode(err, mux.CodeNotFound):
			return nil, err
		}
	}
	p := execParams{Command: command, ID: opts.ID, Cwd: opts.Cwd, Env: opts.Env,
		TimeoutMs: ceilMs(opts.Timeout), SessionID: opts.SessionID, Encoding: "base64", MaxOutput: opts.MaxOutput}
	if opts.Stdin != nil {
		p.Stdin, p.StdinEncoding = base64.StdEncoding.EncodeToString(opts.Stdin), "base64"
	}
	var live *liveOutput
	if opts.OnOutput != nil {
		live = startLive(ctx, c, opts.ID, stale, opts.OnOutput, opts.OnGap)
	}
	var w execWire
	boot := c.Boot()
	err := c.Call(ctx, "exec", p, &w)
	var res *ExecResult
	fromStart := true // the result's output starts at each stream's byte 0
	switch {
	case err == nil:
		res, err = decodeExec(w)
	case errors.Is(err, ErrDisconnected):
		// Read back from the log: past its limit, its head is gone.
		fromStart = false
		res, err = c.execAfterDrop(ctx, opts, stale)
		if IsCode(err, mux.CodeNotFound) && c.Boot() != boot {
			err = mux.NewError(mux.CodeNotFound, "exec %q: the daemon restarted while it ran: its result is lost", opts.ID)
		}
		if err != nil && ctx.Err() != nil {
			// Cancelled while waiting on the new socket: the request's
			// rpc.cancel went down with the old one, so kill by id, in
			// the background: the caller asked to stop waiting.
			c.background(func() { c.killExec(opts, stale) })
		}
	}
	if live != nil {
		if err != nil {
			live.stop()
		} else if lerr := live.finish(ctx, res, fromStart); lerr != nil && ctx.Err() != nil {
			return res, lerr
		}
	}
	return res, err
}

func decodeExec(w execWire) (*ExecResult, error) {
	out, err := base64.StdEncoding.DecodeString(w.Stdout)
	if err != nil {
		return nil, err
	}
	errb, err := base64.StdEncoding.DecodeString(w.Stderr)
	if err != nil {
		return nil, err
	}
	return &ExecResult{ID: w.ID, ExitCode: w.ExitCode, Signal: w.Signal, TimedOut: w.TimedOut,
		Stdout: out, Stderr: errb, StdoutTruncated: w.StdoutTruncated, StderrTruncated: w.StderrTruncated,
		Duration: time.Duration(w.DurationMs) * time.Millisecond, SessionEnded: w.SessionEnded}, nil
}

// execAfterDrop waits for an exec by id after the socket dropped, and
// rebuilds its result from process.wait and process.read.
func (c *Client) execAfterDrop(ctx context.Context, opts ExecOptions, stale string) (*ExecResult, error) {
	p := newProcess(c, ProcessInfo{ID: opts.ID})
	info, err := c.awaitExec(ctx, p, opts.SessionID, stale)
	if err != nil {
		return nil, err
	}
	limit := int64(opts.MaxOutput)
	if limit <= 0 {
		limit = 256 << 10
	}
	res := &ExecResult{ID: info.ID, ExitCode: info.ExitCode, Signal: info.Signal, TimedOut: info.Status == "timed_out"}
	if info.EndedAt != nil {
		start, err1 := time.Parse(time.RFC3339Nano, info.StartedAt)
		end, err2 := time.Parse(time.RFC3339Nano, *info.EndedAt)
		if err1 == nil && err2 == nil && !end.Before(start) {
			res.Duration = end.Sub(start)
		}
	}
	if res.Stdout, err = p.readAll(ctx, "stdout", limit); err != nil {
		return nil, err
	}
	if res.Stderr, err = p.readAll(ctx, "stderr", limit); err != nil {
		return nil, err
	}
	res.StdoutTruncated = info.StdoutBytes > int64(len(res.Stdout))
	res.StderrTruncated = info.StderrBytes > int64(len(res.Stderr))
	return res, nil
}

// killExec ends a cancelled exec by id, best effort: a session's command
// as Ctrl-C would, a stateless one with its tree.
func (c *Client) killExec(opts ExecOptions, stale string) {
	// Short: the caller gave up, and a daemon out of reach would only
	// keep it waiting.
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	// Only this exec: not the earlier holder of a reused ID, or what it
	// left running. A session exec waiting for its turn is not
	// registered yet (not_found, or the earlier holder), and a kill by its
	// id drops it: the daemon takes a kill of an id that execs wait
	// under as theirs. (Had this exec never reached the daemon, a kill of
	// an ended earlier holder ends what that one left running.)
	var info ProcessInfo
	err := c.callIdempotent(ctx, "process.get", map[string]string{"id": opts.ID}, &info)
	switch {
	case err != nil && !IsCode(err, mux.CodeNotFound):
		return
	case err == nil && info.Instance == stale && (opts.SessionID == "" || info.Running()):
		return
	}
	params := map[string]any{"id": opts.ID}
	if opts.SessionID != "" {
		params["signal"] = "INT"
	}
	_ = c.callIdempotent(ctx, "process.kill", params, nil) // Best effort: it may have ended.
}

// awaitExec waits for the exec p after a drop. The daemon registers an
// exec when it starts, and a session exec only when its turn comes: while
// the session is busy, an exec not found yet may be queued behind its
// command, so the wait goes on until the session is idle. An exec the
// daemon never registered (the request was lost with the socket) is
// not_found; so is the ended holder of a reused ID (instance stale). A
// holder still running means the daemon refused this exec (already_exists,
// an answer lost with the socket): it is not waited for.
func (c *Client) awaitExec(ctx context.Context, p *Process, sessionID, stale string) (ProcessInfo, error) {
	notFound := mux.NewError(mux.CodeNotFound, "exec %q was not registered by the daemon: the request was lost with the socket", p.id)
	backoff := 5 * time.Millisecond
	for idle := 0; idle < 2; { // idle twice: a turn may begin between the two calls
		info, err := p.Refresh(ctx)
		switch {
		case err == nil && (stale == "" || info.Instance != stale):
			return p.Wait(ctx) // this exec
		case err == nil && info.Running():
			return ProcessInfo{}, mux.NewError(mux.CodeAlreadyExists, "exec %q: a running process holds the ID", p.id)
		case err != nil && !IsCode(err, mux.CodeNotFound):
			return ProcessInfo{}, err
		case sessionID == "":
			return ProcessInfo{}, notFound
		}
		busy, err := c.sessionBusy(ctx, sessionID)
		if err != nil {
			return ProcessInfo{}, err
		}
		if !busy {
			idle++
		}
		if !sleepCtx(ctx, backoff) {
			return ProcessInfo{}, ctx.Err()
		}
		backoff = min(backoff*2, 100*time.Millisecond)
	}
	return ProcessInfo{}, notFound
}

// sessionBusy reports whether session id runs a command now (false once
// it is gone).
func (c *Client) sessionBusy(ctx context.Context, id string) (bool, error) {
	list, err := c.ListSessions(ctx)
	if err != nil {
		return false, err
	}
	for _, s := range list {
		if s.ID == id {
			return s.Busy && s.Alive, nil
		}
	}
	return false, nil
}

// liveOutput follows an exec's output through a process channel while
// the exec request runs.
type liveOutput struct {
	done   chan struct{}
	cancel context.CancelFunc
	fn     func(string, []byte)
	// sent counts the bytes of each stream given to fn, and gapped says
	// the live reader skipped bytes (only its goroutine writes them
	// before done closes).
	sent   map[string]int
	gapped bool
	// mu guards err, res and fromStart.
	mu        sync.Mutex
	err       error
	res       *ExecResult // the exec's result, once it came
	fromStart bool        // res's output starts at each stream's byte 0
}

// startLive opens the exec's process channel as soon as the exec is
// registered (retrying not_found while it waits its turn) and delivers
// output to fn until the exec ends.
func startLive(ctx context.Context, c *Client, id, stale string, fn func(string, []byte), gapFn func(string, int64)) *liveOutput {
	ctx, cancel := context.WithCancel(ctx)
	l := &liveOutput{done: make(chan struct{}), cancel: cancel, fn: fn, sent: map[string]int{}}
	fn = func(stream string, data []byte) {
		l.sent[stream] += len(data)
		l.fn(stream, data)
	}
	go func() {
		defer close(l.done)
		backoff := time.Millisecond
		var f *follower
		defer func() { f.close() }()
		for {
			f = newFollower(c, id, "", true)
			err := f.open(ctx)
			if err == nil && f.instance == stale {
				f.close() // the earlier holder of the id: not this exec yet
				err = mux.NewError(mux.CodeNotFound, "exec %q not registered yet", id)
			}
			if err == nil {
				break
			}
			if !IsCode(err, mux.CodeNotFound) || ctx.Err() != nil {
				l.setErr(err)
				return
			}
			if res := l.result(); res != nil {
				// The exec ended and its record is gone already (other
				// records pushed it out of retention): its output is
				// what the result holds.
				l.deliverRest(res)
				return
			}
			t := time.NewTimer(backoff)
			select {
			case <-ctx.Done():
				t.Stop()
				l.setErr(ctx.Err())
				return
			case <-t.C:
			}
			// An exec queued behind a long command of its session waits
			// here: a few tries a second, not a busy loop of opens. Its
			// output is not lost meanwhile: the channel starts at byte 0.
			backoff = min(backoff*2, 250*time.Millisecond)
		}
		onGap := func(g *GapError) {
			l.gapped = true
			if gapFn != nil {
				gapFn(g.Stream, g.Bytes)
			}
		}
		l.setErr(drainGaps(ctx, f, fn, onGap))
	}()
	return l
}

func (l *liveOutput) setErr(err error) {
	l.mu.Lock()
	l.err = err
	l.mu.Unlock()
}

func (l *liveOutput) result() *ExecResult {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.res
}

// finish waits until every byte was delivered (the channel reaches the
// exec's end), or ctx ends. res is the exec's result, delivered instead
// if its record is gone before its output could be followed.
func (l *liveOutput) finish(ctx context.Context, res *ExecResult, fromStart bool) error {
	l.mu.Lock()
	l.res, l.fromStart = res, fromStart
	l.mu.Unlock()
	select {
	case <-l.done:
	case <-ctx.Done():
		l.cancel()
		<-l.done
	}
	l.mu.Lock()
	err := l.err
	l.mu.Unlock()
	if err != nil && ctx.Err() == nil {
		l.deliverRest(res) // the live path failed: the result has the output
		return nil
	}
	return err
}

// deliverRest gives fn what res holds past the bytes fn already had.
// The counts line up with the result's bytes only while both start at the
// stream's byte 0: not after a gap (the live reader skipped bytes), nor
// in a cut result read back from a log that lost its head.
func (l *liveOutput) deliverRest(res *ExecResult) {
	l.mu.Lock()
	fromStart := l.fromStart
	l.mu.Unlock()
	if l.gapped {
		return
	}
	for _, s := range []struct {
		name      string
		data      []byte
		truncated bool
	}{{"stdout", res.Stdout, res.StdoutTruncated}, {"stderr", res.Stderr, res.StderrTruncated}} {
		if n := l.sent[s.name]; n < len(s.data) && (n == 0 || fromStart || !s.truncated) {
			l.sent[s.name] = len(s.data)
			l.fn(s.name, s.data[n:])
		}
	}
}

func (l *liveOutput) stop() {
	l.cancel()
	<-l.done
}
