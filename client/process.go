package client

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/muxd/muxd/mux"
)

// ProcessInfo is docs/protocol.md's Process.
type ProcessInfo struct {
	ID          string  `json:"id"`
	Instance    string  `json:"instance"`
	Pid         int     `json:"pid"`
	Command     string  `json:"command"`
	SessionID   string  `json:"sessionId,omitempty"`
	Status      string  `json:"status"` // running, exited, killed, timed_out, failed_to_start
	ExitCode    *int    `json:"exitCode"`
	Signal      string  `json:"signal"`
	StartedAt   string  `json:"startedAt"`
	EndedAt     *string `json:"endedAt,omitempty"`
	StdoutBytes int64   `json:"stdoutBytes"`
	StderrBytes int64   `json:"stderrBytes"`
}

// Running reports whether the process has not ended.
func (p ProcessInfo) Running() bool { return p.Status == "running" }

// ProcessOptions are the optional params of process.start.
type ProcessOptions struct {
	// ID names it (default: a fresh uuid, made here, so that a create
	// whose answer a dropped socket lost finds what it made by that id,
	// or is sent again when nothing has it; with a caller's own id such
	// a create fails with ErrDisconnected, as before).
	ID        string
	Cwd       string
	Env       map[string]*string
	SessionID string
	// Stdin keeps the process's stdin open for Process.Stdin.
	Stdin       bool
	Timeout     time.Duration
	OutputLimit int64
}

type processStartParams struct {
	Command     string             `json:"command"`
	ID          string             `json:"id,omitempty"`
	Cwd         string             `json:"cwd,omitempty"`
	Env         map[string]*string `json:"env,omitempty"`
	SessionID   string             `json:"sessionId,omitempty"`
	Stdin       bool               `json:"stdin,omitempty"`
	TimeoutMs   int64              `json:"timeoutMs,omitempty"`
	OutputLimit int64              `json:"outputLimit,omitempty"`
}

// Process is a handle on a daemon process. Its output readers are bound
// to the process instance it names; its other calls (Wait, Kill, Remove,
// WaitForLog, ...) go by id, so once the process ended and its id was
// given to a new one, they act on the new one: take a new handle then.
type Process struct {
	c        *Client
	id       string
	instance string

	// mu guards info and stdin.
	mu    sync.Mutex
	info  ProcessInfo
	stdin *stdinWriter
}

func newProcess(c *Client, info ProcessInfo) *Process {
	return &Process{c: c, id: info.ID, instance: info.Instance, info: info}
}

// setInfo keeps info as the latest state seen.
func (p *Process) setInfo(info ProcessInfo) {
	p.mu.Lock()
	p.info = info
	p.mu.Unlock()
}

// StartProcess starts command (bash -c) and returns once it runs.
func (c *Client) StartProcess(ctx context.Context, command string, opts ProcessOptions) (*Process, error) {
	if err := checkTimeout("Timeout", opts.Timeout); err != nil {
		return nil, err
	}
	made := opts.ID == ""
	if made {
		opts.ID = uuid.NewString() // so that a lost answer can be found again
	}
	var info ProcessInfo
	err := c.callCreate(ctx, "process.start", made, true, processStartParams{
		Command: command, ID: opts.ID, Cwd: opts.Cwd, Env: opts.Env, SessionID: opts.SessionID,
		Stdin: opts.Stdin, TimeoutMs: ceilMs(opts.Timeout), OutputLimit: opts.OutputLimit,
	}, &info, func(ctx context.Context) (bool, error) {
		err := c.callIdempotent(ctx, "process.get", map[string]string{"id": opts.ID}, &info)
		if IsCode(err, mux.CodeNotFound) {
			return false, nil
		}
		return err == nil, err
	})
	if err != nil {
		return nil, err
	}
	return newProcess(c, info), nil
}

// Process returns a handle on an existing process (or exec) by id.
func (c *Client) Process(ctx context.Context, id string) (*Process, error) {
	var info ProcessInfo
	if err := c.callIdempotent(ctx, "process.get", map[string]string{"id": id}, &info); err != nil {
		return nil, err
	}
	return newProcess(c, info), nil
}

// ListRunningExecs lists the execs running now (muxd's extension of
// process.list): a command whose caller lost its id can be found there,
// to kill it or read its output.
func (c *Client) ListRunningExecs(ctx context.Context) ([]ProcessInfo, error) {
	var r struct {
		Execs []ProcessInfo `json:"execs"`
	}
	err := c.callIdempotent(ctx, "process.list", map[string]bool{"execs": true}, &r)
	return r.Execs, err
}

// ListProcesses lists processes started with process.start (all, or
// those of one session).
func (c *Client) ListProcesses(ctx context.Context, sessionID string) ([]ProcessInfo, error) {
	var r struct {
		Processes []ProcessInfo `json:"processes"`
	}
	var params any
	if sessionID != "" {
		params = map[string]string{"sessionId": sessionID}
	}
	err := c.callIdempotent(ctx, "process.list", params, &r)
	return r.Processes, err
}

// ID is the process id.
func (p *Process) ID() string { return p.id }

// Info is the process as last seen (at start, or the last Wait/Refresh).
func (p *Process) Info() ProcessInfo {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.info
}

// Refresh fetches the current state.
func (p *Process) Refresh(ctx context.Context) (ProcessInfo, error) {
	var info ProcessInfo
	err := p.c.callIdempotent(ctx, "process.get", map[string]string{"id": p.id}, &info)
	if err == nil {
		p.setInfo(info)
	}
	return info, err
}

// Stdout returns a reader of the process's stdout from its first byte,
// following it live until the process ends.
func (p *Process) Stdout() *StreamReader { return p.StdoutFrom(0) }

// StdoutFrom is Stdout starting at byte offset from.
func (p *Process) StdoutFrom(from int64) *StreamReader {
	f := newFollower(p.c, p.id, p.instance, true)
	f.offs[streamStdout], f.offs[streamStderr] = from, skipOffset
	return &StreamReader{f: f, want: streamStdout}
}

// skipOffset is where a channel starts a stream it does not want: past
// any output, so the daemon sends none of it (a stream's pump waits for
// that offset and ends with the process).
const skipOffset = 1 << 62

// Stderr returns a reader of the process's stderr, like Stdout.
func (p *Process) Stderr() *StreamReader { return p.StderrFrom(0) }

// StderrFrom is Stderr starting at byte offset from.
func (p *Process) StderrFrom(from int64) *StreamReader {
	f := newFollower(p.c, p.id, p.instance, true)
	f.offs[streamStdout], f.offs[streamStderr] = skipOffset, from
	return &StreamReader{f: f, want: streamStderr}
}

// Output calls fn with every chunk of stdout and stderr, in the order the
// daemon read them, until the process ended (it returns nil then) or ctx
// ends. Gaps are skipped.
func (p *Process) Output(ctx context.Context, fn func(stream string, data []byte)) error {
	return p.Follow(ctx, true, fn, nil)
}

// OutputSoFar is Output without following: it returns at the output's
// current end, even while the process runs.
func (p *Process) OutputSoFar(ctx context.Context, fn func(stream string, data []byte)) error {
	return p.Follow(ctx, false, fn, nil)
}

// Follow is Output (follow true) or OutputSoFar (false) that also calls
// gap, when not nil, where the daemon dropped output (past the process's
// outputLimit), in order with the chunks.
func (p *Process) Follow(ctx context.Context, follow bool, fn func(stream string, data []byte), gap func(*GapError)) error {
	f := newFollower(p.c, p.id, p.instance, follow)
	defer f.close()
	return drainGaps(ctx, f, fn, gap)
}

// drainGaps hands f's output to fn, and its gaps to gapFn (nil: skipped),
// until the stream ends.
func drainGaps(ctx context.Context, f *follower, fn func(stream string, data []byte), gapFn func(*GapError)) error {
	for {
		s, data, err := f.next(ctx)
		var gap *GapError
		switch {
		case errors.Is(err, io.EOF):
			return nil
		case errors.As(err, &gap):
			if gapFn != nil {
				gapFn(gap)
			}
			continue
		case err != nil:
			return err
		}
		fn(streamName(s), data)
	}
}

// Stdin returns the process's stdin (started with Stdin: true). Close
// sends EOF. Writes resume on a new socket after a reconnect, each byte
// reaching the process once.
func (p *Process) Stdin() io.WriteCloser {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stdin == nil {
		p.stdin = &stdinWriter{p: p, name: uuid.NewString()}
	}
	return p.stdin
}

// Wait waits for the process to end and returns its final state.
func (p *Process) Wait(ctx context.Context) (ProcessInfo, error) {
	var info ProcessInfo
	err := p.c.callIdempotent(ctx, "process.wait", map[string]string{"id": p.id}, &info)
	if err == nil {
		p.setInfo(info)
	}
	return info, err
}

// Kill signals the whole tree (default TERM), then KILL after grace
// (0 = the daemon's default, 2 s; negative = KILL as soon as the signal
// is sent).
func (p *Process) Kill(ctx context.Context, signal string, grace time.Duration) error {
	params := map[string]any{"id": p.id}
	if signal != "" {
		params["signal"] = signal
	}
	switch {
	case grace > 0:
		params["graceMs"] = ceilMs(grace)
	case grace < 0:
		params["graceMs"] = 0
	}
	return p.c.callIdempotent(ctx, "process.kill", params, nil)
}

// Remove forgets an ended process and its output.
func (p *Process) Remove(ctx context.Context) error {
	return p.c.callRemove(ctx, "process.remove", map[string]string{"id": p.id})
}

// LogMatch is the result of WaitForLog.
type LogMatch struct {
	Line   string   `json:"line"`
	Groups []string `json:"groups"`
	Stream string   `json:"stream"`
	Offset int64    `json:"offset"`
}

// WaitForLog waits for a complete output line matching the RE2 pattern
// (both streams, from the first byte).
func (p *Process) WaitForLog(ctx context.Context, pattern string) (LogMatch, error) {
	return p.WaitForLogFrom(ctx, pattern, LogOptions{})
}

// LogOptions narrow WaitForLogFrom.
type LogOptions struct {
	// Stream is "stdout" or "stderr" ("" = both).
	Stream string
	// From is the offset in the stream(s) to search from: a match's
	// Offset plus the length of its line and newline searches past it,
	// for the next "compiled" after a rebuild rather than the last one.
	From int64
}

// WaitForLogFrom is WaitForLog in one stream, or from an offset.
func (p *Process) WaitForLogFrom(ctx context.Context, pattern string, opts LogOptions) (LogMatch, error) {
	params := map[string]any{"id": p.id, "pattern": pattern}
	if opts.Stream != "" {
		params["stream"] = opts.Stream
	}
	if opts.From != 0 {
		params["from"] = opts.From
	}
	var m LogMatch
	err := p.c.callIdempotent(ctx, "process.waitForLog", params, &m)
	return m, err
}

// WaitForPort waits until a TCP connect to port on loopback succeeds,
// to a listener that a program running before the process started does
// not hold (an old server still on the port does not count, and the
// timeout's message names it; see docs/protocol.md); it fails with
// timeout if the process ends first.
func (p *Process) WaitForPort(ctx context.Context, port int) error {
	params := map[string]any{"id": p.id, "port": port}
	if dl, ok := ctx.Deadline(); ok {
		// The daemon ends the wait a moment before ctx does, so that its
		// answer, which says what it found on the port, comes back.
		if ms := time.Until(dl).Milliseconds() - portAnswerMargin.Milliseconds(); ms >= 1 {
			params["timeoutMs"] = ms
		}
	}
	return p.c.callIdempotent(ctx, "process.waitForPort", params, nil)
}

// portAnswerMargin is how long before the caller's deadline the daemon
// ends a WaitForPort.
const portAnswerMargin = 100 * time.Millisecond

// Read returns a slice of retained output (at most 512 KiB) starting at
// offset from, and the retained range [first, end).
func (p *Process) Read(ctx context.Context, stream string, from, length int64) (data []byte, first, end int64, err error) {
	var r struct {
		Data  string `json:"data"`
		From  int64  `json:"from"`
		First int64  `json:"first"`
		End   int64  `json:"end"`
	}
	err = p.c.callIdempotent(ctx, "process.read", map[string]any{"id": p.id, "stream": stream,
		"from": from, "length": length, "encoding": "base64"}, &r)
	if err != nil {
		return nil, 0, 0, err
	}
	data, err = base64.StdEncoding.DecodeString(r.Data)
	if err != nil {
		return nil, 0, 0, fmt.Errorf("client: process.read: %w", err)
	}
	return data, r.First, r.End, nil
}

// readAll reads stream from offset 0 to end (up to limit bytes).
func (p *Process) readAll(ctx context.Context, stream string, limit int64) ([]byte, error) {
	var out []byte
	var from int64
	for int64(len(out)) < limit {
		n := min(limit-int64(len(out)), 512<<10)
		data, first, end, err := p.Read(ctx, stream, from, n)
		if err != nil {
			return out, err
		}
		if from < first {
			from = first
		}
		out = append(out, data...)
		from += int64(len(data))
		if len(data) == 0 || from >= end {
			break
		}
	}
	return out, nil
}

// stdinWriter writes to a process channel's DATA.
type stdinWriter struct {
	p *Process
	// mu guards f and the stream's accounting below; held across a
	// write so writes stay ordered.
	mu sync.Mutex
	f  *follower
	// cur is f's open channel, for a Close that comes while a Write
	// holds mu, waiting for credit.
	cur atomic.Pointer[mux.Channel]
	// ended is set when the daemon ended the channel (the process
	// exited): a Close after it has nothing left to do.
	ended atomic.Bool
	// resending is set while a reconnect's resend runs (see Close).
	resending atomic.Bool

	// name is this writer's stdin stream at the daemon, which counts
	// the stream's bytes written to the process. sent counts the bytes
	// handed to channels; unsure holds those from base on that the daemon
	// may not have written yet (a drop may have lost them); chanStart is
	// where the open channel's bytes begin in the stream.
	name                  string
	sent, base, chanStart int64
	unsure                []byte
}

// stdinChunk is how much of a Write goes to the channel at a time, so the
// bytes kept for a resend stay about a window.
const stdinChunk = 32 << 10

func (w *stdinWriter) channel(ctx context.Context) (*mux.Channel, error) {
	for w.f == nil || w.f.ch == nil {
		w.f = newFollower(w.p.c, w.p.id, w.p.instance, true)
		w.f.offs[1], w.f.offs[2] = skipOffset, skipOffset // no output: stdin only
		w.f.stdinWriter = w.name
		if err := w.f.open(ctx); err != nil {
			return nil, err
		}
		ch := w.f.ch
		go w.discard(ch)
		// Known before the resend, which may wait for credit from a
		// process that does not read: a Close then sends its EOF here,
		// but only after the resend (resending is set first, so a Close
		// that sees the channel sees the flag too).
		w.resending.Store(true)
		w.cur.Store(ch)
		if testHookResend != nil {
			testHookResend(w)
		}
		err := w.resend(ch)
		if err != nil {
			w.cur.Store(nil) // before the flag: a Close must not take this channel
		}
		w.resending.Store(false)
		if err != nil {
			if lost(w.f.conn, err) {
				w.f.drop()
				continue
			}
			_ = ch.Close() // Best effort.
			return nil, err
		}
	}
	return w.f.ch, nil
}

// resend sends again, on a channel just opened, what the daemon had not
// written of this stream: it says how much it wrote.
func (w *stdinWriter) resend(ch *mux.Channel) error {
	n := w.f.stdinWritten
	if n == nil {
		// A daemon that does not count the stream: bytes that were in
		// flight on a socket that dropped may be lost.
		w.base, w.chanStart, w.unsure = w.sent, w.sent, w.unsure[:0]
		return nil
	}
	if *n < w.base || *n > w.sent {
		return fmt.Errorf("client: stdin of %s: the daemon has written %d bytes of this writer's %d, and it kept only those from %d on to send again (the daemon forgot the stream)", w.p.id, *n, w.sent, w.base)
	}
	w.unsure = w.unsure[*n-w.base:]
	w.base, w.chanStart = *n, *n
	if len(w.unsure) == 0 {
		return nil
	}
	_, err := ch.Write(w.unsure)
	return err
}

// sentOn records b as sent on ch, and forgets what the daemon is known
// to have written: the credit it gave back, which it returns only once
// the bytes are in the process's stdin.
func (w *stdinWriter) sentOn(ch *mux.Channel, b []byte) {
	w.sent += int64(len(b))
	w.unsure = append(w.unsure, b...)
	if known := w.chanStart + ch.Returned(); known > w.base {
		// A reslice, not a copy: append moves what is left when it
		// grows the array, so each byte is copied a bounded number of
		// times.
		drop := min(known-w.base, int64(len(w.unsure)))
		w.unsure = w.unsure[drop:]
		w.base += drop
	}
}

// discard drains a stdin channel's output so its credit keeps flowing,
// and closes the channel once the daemon ended it (the process exited):
// a connection holds a bounded number of open channels.
func (w *stdinWriter) discard(ch *mux.Channel) {
	buf := make([]byte, ch.Conn().Hello().Limits.MaxFrame)
	exited := false
	for {
		_, ctrl, err := ch.ReadFrame(buf)
		if err == nil {
			var op struct {
				Op string `json:"op"`
			}
			if ctrl != nil && json.Unmarshal(ctrl, &op) == nil && op.Op == "exit" {
				exited = true
			}
			continue
		}
		// The process ended, its stdin with it: only an EOF after its
		// exit says so (a dropped socket can surface as EOF too).
		if exited && errors.Is(err, io.EOF) {
			w.ended.Store(true)
		}
		_ = ch.Close() // Best effort: the channel or its socket is over.
		return
	}
}

// Write sends p to the process's stdin, blocking for credit. After a
// disconnect the rest goes out on the new socket, after what the daemon
// had not written yet: every byte reaches the process once.
func (w *stdinWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	done := 0 // across sockets: io.Writer counts all of p
	for len(p) > 0 {
		ch, err := w.channel(context.Background())
		if err != nil {
			return done, err
		}
		chunk := p[:min(len(p), stdinChunk)]
		n, err := ch.Write(chunk)
		w.sentOn(ch, chunk[:n])
		done += n
		p = p[n:]
		if err != nil {
			if IsCode(err, mux.CodeNotWritable) && w.sent == 0 {
				return done, fmt.Errorf("client: process %s takes no stdin: start it with ProcessOptions{Stdin: true} (%w)", w.p.id, err)
			}
			if !lost(w.f.conn, err) {
				return done, err
			}
			w.cur.Store(nil)
			w.f.drop()
		}
	}
	return done, nil
}

// Close sends EOF: the process reads end of file. After a disconnect it
// goes out on the new socket.
func (w *stdinWriter) Close() error {
	if w.ended.Load() {
		return nil // the process ended: its stdin with it
	}
	if !w.mu.TryLock() {
		if done, err := w.closeUnderWrite(); done {
			return err
		}
		w.mu.Lock()
	}
	defer w.mu.Unlock()
	for range 3 { // a socket lost between the open and the EOF, then again
		ch, err := w.channel(context.Background())
		if err != nil {
			return err
		}
		err = ch.CloseWrite()
		if err == nil {
			err = eofArrived(ch.Conn())
		}
		if err == nil || !lost(w.f.conn, err) {
			return err
		}
		w.cur.Store(nil)
		w.f.drop()
	}
	return ErrDisconnected
}

// closeUnderWrite sends EOF while a Write holds mu, maybe waiting for
// credit the process may never give (it does not read): the EOF goes
// after what that Write queued so far, and ends it. Not while the Write
// sends again what earlier Writes reported written (after a reconnect):
// all of that goes first, and done is false (Close waits for mu).
func (w *stdinWriter) closeUnderWrite() (done bool, err error) {
	ch := w.cur.Load()
	if ch == nil || w.resending.Load() {
		return false, nil
	}
	if err := ch.CloseWrite(); err == nil || !lost(ch.Conn(), err) {
		return true, err
	}
	return false, nil
}

// testHookResend, when set by a test, runs as a channel opened for a
// stdin writer is published, before the resend.
var testHookResend func(w *stdinWriter)

// eofArrived returns once the daemon has read what went before on conn
// (the EOF just queued): its answer to a PING comes after it, frames
// being read in order. An EOF written to a socket that was dropped
// before the client noticed is not lost then: the PING fails, and Close
// sends the EOF again on the next socket.
func eofArrived(conn *mux.Conn) error {
	ctx, cancel := context.WithTimeout(context.Background(), eofConfirmTimeout)
	defer cancel()
	if _, err := conn.Ping(ctx); err != nil {
		if conn.Err() == nil && ctx.Err() != nil {
			return nil // a slow daemon, not a lost one: the EOF is on its way
		}
		return err
	}
	return nil
}

// eofConfirmTimeout bounds eofArrived's wait for a PONG.
const eofConfirmTimeout = 10 * time.Second
