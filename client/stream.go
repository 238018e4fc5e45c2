package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/muxd/muxd/mux"
)

// Stream bytes of the process channel.
const (
	streamStdout byte = 1
	streamStderr byte = 2
)

func streamName(s byte) string {
	if s == streamStderr {
		return "stderr"
	}
	return "stdout"
}

// ExitInfo is the exit CTRL of a process channel.
type ExitInfo struct {
	Status      string `json:"status"`
	Code        *int   `json:"code"`
	Signal      string `json:"signal"`
	StdoutBytes int64  `json:"stdoutBytes"`
	StderrBytes int64  `json:"stderrBytes"`
}

// follower reads a process channel and reopens it at the current offsets
// after a reconnect, so its reader sees every byte exactly once.
type follower struct {
	c        *Client
	id       string
	instance string
	offs     [3]int64 // next offset per stream (index 1 stdout, 2 stderr)
	follow   bool
	ch       *mux.Channel
	conn     *mux.Conn
	buf      []byte
	exit     *ExitInfo
	done     bool
	// stdinWriter names the stdin stream this channel writes, if any;
	// stdinWritten is how many of its bytes the daemon had written when
	// the channel opened (nil from a daemon that does not count them).
	stdinWriter  string
	stdinWritten *int64

	// ctx ends with close, from any goroutine: it closes the open
	// channel and ends a (re)open waiting for the daemon. unwatch drops
	// that for a channel the follower left (a lost one, or at EOF), which
	// would otherwise keep it and its connection until close.
	ctx     context.Context
	cancel  context.CancelFunc
	unwatch func() bool
}

// drop forgets the open channel.
func (f *follower) drop() {
	if f.unwatch != nil {
		f.unwatch()
		f.unwatch = nil
	}
	f.ch = nil
}

func newFollower(c *Client, id, instance string, follow bool) *follower {
	f := &follower{c: c, id: id, instance: instance, follow: follow}
	f.ctx, f.cancel = context.WithCancel(context.Background())
	return f
}

type processOpenParams struct {
	ID          string `json:"id"`
	Instance    string `json:"instance,omitempty"`
	Stdout      int64  `json:"stdout"`
	Stderr      int64  `json:"stderr"`
	Follow      bool   `json:"follow"`
	StdinWriter string `json:"stdinWriter,omitempty"`
}

func (f *follower) open(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(f.ctx, cancel)()
	for {
		conn, err := f.c.Conn(ctx)
		if err != nil {
			return closedOr(f.ctx, err)
		}
		ch, meta, err := conn.Open(ctx, "process", f.c.opts.StreamWindow, processOpenParams{
			ID: f.id, Instance: f.instance, Stdout: f.offs[1], Stderr: f.offs[2], Follow: f.follow,
			StdinWriter: f.stdinWriter})
		if err != nil {
			if lost(conn, err) && f.ctx.Err() == nil {
				continue
			}
			return closedOr(f.ctx, err)
		}
		f.unwatch = context.AfterFunc(f.ctx, func() { _ = ch.Close() }) // close, from any goroutine
		var m struct {
			Instance     string `json:"instance"`
			StdinWritten *int64 `json:"stdinWritten"`
		}
		_ = json.Unmarshal(meta, &m) // Best effort: the instance only pins later reopens.
		f.stdinWritten = m.StdinWritten
		if f.instance == "" {
			f.instance = m.Instance
		}
		if f.buf == nil {
			f.buf = make([]byte, conn.Hello().Limits.MaxFrame+1)
		}
		f.ch, f.conn = ch, conn
		return nil
	}
}

// next returns the next chunk of output (data aliases an internal buffer
// until the next call), a *GapError, or io.EOF once the output ended.
func (f *follower) next(ctx context.Context) (stream byte, data []byte, err error) {
	for {
		if f.ctx.Err() != nil {
			return 0, nil, ErrClosed
		}
		if f.done {
			return 0, nil, io.EOF
		}
		if f.ch == nil {
			if err := f.open(ctx); err != nil {
				return 0, nil, err
			}
		}
		n, ctrl, err := f.readFrame(ctx)
		switch {
		case err != nil && f.ctx.Err() != nil:
			return 0, nil, ErrClosed
		case err == nil && ctrl != nil:
			if gap := f.ctrl(ctrl); gap != nil {
				return 0, nil, gap
			}
		case err == nil && n > 0:
			s := f.buf[0]
			if s != streamStdout && s != streamStderr {
				return 0, nil, fmt.Errorf("client: bad stream byte %d on process channel", s)
			}
			f.offs[s] += int64(n - 1)
			return s, f.buf[1:n], nil
		case err != nil && lost(f.conn, err):
			// Checked before EOF: a dropped socket can surface as io.EOF.
			f.drop() // reopen at the current offsets
		case errors.Is(err, io.EOF):
			f.done = true
			_ = f.ch.Close() // Best effort: done with it.
			f.drop()
			return 0, nil, io.EOF
		case err != nil:
			return 0, nil, err
		}
	}
}

// readFrame reads one frame, giving up when ctx ends.
func (f *follower) readFrame(ctx context.Context) (int, json.RawMessage, error) {
	if ctx.Done() == nil {
		return f.ch.ReadFrame(f.buf)
	}
	ch := f.ch
	stop := context.AfterFunc(ctx, func() { _ = ch.Close() })
	n, ctrl, err := ch.ReadFrame(f.buf)
	if !stop() {
		f.drop()
		return 0, nil, ctx.Err()
	}
	return n, ctrl, err
}

// ctrl applies a server CTRL; a gap is returned to the reader.
func (f *follower) ctrl(raw json.RawMessage) *GapError {
	var op struct {
		Op     string `json:"op"`
		Stream string `json:"stream"`
		Bytes  int64  `json:"bytes"`
	}
	if json.Unmarshal(raw, &op) != nil {
		return nil
	}
	switch op.Op {
	case "gap":
		s := streamStdout
		if op.Stream == "stderr" {
			s = streamStderr
		}
		f.offs[s] += op.Bytes
		return &GapError{Stream: op.Stream, Bytes: op.Bytes}
	case "exit":
		var e ExitInfo
		if json.Unmarshal(raw, &e) == nil {
			f.exit = &e
		}
	}
	return nil
}

// close stops the follower; any goroutine may call it.
func (f *follower) close() { f.cancel() }

// closedOr is ErrClosed once closed (the owner's ctx, which its Close
// cancels, has ended), else err.
func closedOr(closed context.Context, err error) error {
	if closed.Err() != nil {
		return ErrClosed
	}
	return err
}

// StreamReader reads one stream of a process, resuming across reconnects.
// Read returns io.EOF once the process ended and every retained byte was
// read, and a *GapError (once) where the daemon dropped output.
type StreamReader struct {
	f       *follower
	want    byte
	pending []byte
}

// Read implements io.Reader.
func (r *StreamReader) Read(p []byte) (int, error) {
	if err := r.fill(); err != nil {
		return 0, err
	}
	n := copy(p, r.pending)
	r.pending = r.pending[n:]
	return n, nil
}

// errInvalidWrite is io.Copy's answer to a writer that reports more bytes
// than it was given, or a negative count.
var errInvalidWrite = errors.New("client: invalid write result")

// WriteTo implements io.WriterTo: io.Copy writes each received frame to w
// straight from the receive buffer, without a copy through its own.
func (r *StreamReader) WriteTo(w io.Writer) (int64, error) {
	var total int64
	for {
		if err := r.fill(); err != nil {
			if errors.Is(err, io.EOF) {
				return total, nil
			}
			return total, err
		}
		n, err := w.Write(r.pending)
		if n < 0 || n > len(r.pending) {
			return total, errInvalidWrite
		}
		total += int64(n)
		r.pending = r.pending[n:]
		switch {
		case err != nil:
			return total, err
		case len(r.pending) > 0:
			return total, io.ErrShortWrite
		}
	}
}

// fill makes pending hold the stream's next bytes, or returns why not:
// io.EOF, a *GapError of this stream, or a failure.
func (r *StreamReader) fill() error {
	for len(r.pending) == 0 {
		s, data, err := r.f.next(context.Background())
		if err != nil {
			var gap *GapError
			if errors.As(err, &gap) && gap.Stream != streamName(r.want) {
				continue
			}
			return err
		}
		if s == r.want {
			r.pending = data
		}
	}
	return nil
}

// Offset is the stream offset of the next byte Read returns.
func (r *StreamReader) Offset() int64 { return r.f.offs[r.want] - int64(len(r.pending)) }

// Close stops reading: a Read in another goroutine, or waiting for a
// reconnect, returns ErrClosed.
func (r *StreamReader) Close() error {
	r.f.close()
	return nil
}
