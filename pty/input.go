package pty

import (
	"context"
	"errors"
	"os"
	"sync"
	"syscall"
)

// input carries keystrokes to the PTY in arrival order. A write goes
// straight to the PTY when nothing is queued and the PTY takes it whole
// without blocking (the common case: no goroutine handoff); otherwise the
// rest is queued for a per-terminal writer goroutine, and the caller waits
// for it or for its context. So a program that stops reading its input
// blocks that goroutine, never a socket's read loop past its context.
type input struct {
	// mu guards the fields below; never held across a PTY write.
	mu      sync.Mutex
	queue   []*inputReq
	busy    bool // a direct write or the writer goroutine owns the PTY
	running bool // the writer goroutine is running
}

type inputReq struct {
	p    []byte
	done chan struct{} // closed once written (or failed)
	// Written by the writer goroutine before done is closed.
	n   int
	err error
	// cancelled is set (under input.mu) by a caller that stopped waiting
	// before the writer took the request.
	cancelled bool
}

// WriteContext types p into the terminal. Concurrent writes are not
// interleaved (each p is written whole, in arrival order). It returns
// when p was written, or with ctx.Err() when ctx ends first (the part not
// yet taken by the PTY is dropped, but for up to 4 KiB being written
// then).
func (t *Terminal) WriteContext(ctx context.Context, p []byte) (int, error) {
	return t.write(ctx, nil, p)
}

// write is WriteContext that also gives up with ErrDetached once stop is
// closed.
func (t *Terminal) write(ctx context.Context, stop <-chan struct{}, p []byte) (int, error) {
	if t.Exited() {
		return 0, ErrExited
	}
	in := &t.in
	written, front := 0, false
	in.mu.Lock()
	if len(in.queue) == 0 && !in.busy {
		in.busy = true
		in.mu.Unlock()
		n, err := t.tryWrite(p)
		in.mu.Lock()
		in.busy = false
		if err != nil || n == len(p) {
			t.kickLocked()
			in.mu.Unlock()
			return n, err
		}
		// The rest goes before what others queued meanwhile.
		written, p, front = n, p[n:], true
	}
	// A copy: the caller may give up waiting and reuse its buffer.
	req := &inputReq{p: append([]byte(nil), p...), done: make(chan struct{})}
	if front {
		in.queue = append([]*inputReq{req}, in.queue...)
	} else {
		in.queue = append(in.queue, req)
	}
	t.kickLocked()
	in.mu.Unlock()
	var cause error
	select {
	case <-req.done:
		return written + req.n, req.err
	case <-ctx.Done():
		cause = ctx.Err()
	case <-stop:
		cause = ErrDetached
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	select {
	case <-req.done: // finished meanwhile
		return written + req.n, req.err
	default:
	}
	req.cancelled = true
	return written, cause
}

// tryWrite writes what the PTY takes without blocking.
func (t *Terminal) tryWrite(p []byte) (int, error) {
	rc, err := t.master.SyscallConn()
	if err != nil {
		return 0, ErrExited
	}
	written := 0
	var werr error
	err = rc.Write(func(fd uintptr) bool {
		for written < len(p) {
			n, err := syscall.Write(int(fd), p[written:])
			if n > 0 {
				written += n
			}
			switch err {
			case nil, syscall.EINTR:
				continue
			case syscall.EAGAIN:
				return true // the rest is queued; never wait here
			default:
				werr = err
				return true
			}
		}
		return true
	})
	if err == nil {
		err = werr
	}
	return written, t.writeErr(err)
}

// writeErr reports a write to a closed or hung-up PTY as ErrExited.
func (t *Terminal) writeErr(err error) error {
	if err != nil && (t.closed.Load() || errors.Is(err, os.ErrClosed) || errors.Is(err, syscall.EIO)) {
		return ErrExited
	}
	return err
}

// kickLocked starts the writer goroutine if requests wait and the PTY is
// free. Called with t.in.mu held.
func (t *Terminal) kickLocked() {
	in := &t.in
	if len(in.queue) > 0 && !in.busy && !in.running {
		in.running = true
		in.busy = true
		go t.writeQueued()
	}
}

// writeQueued writes queued requests in order until none is left. It may
// block in a PTY write as long as the program does not read; destroying
// the terminal closes the PTY and ends it.
func (t *Terminal) writeQueued() {
	in := &t.in
	for {
		in.mu.Lock()
		var req *inputReq
		for len(in.queue) > 0 && req == nil {
			req = in.queue[0]
			in.queue[0] = nil
			in.queue = in.queue[1:]
			if req.cancelled {
				req = nil
			}
		}
		if req == nil {
			in.busy = false
			in.running = false
			in.queue = nil
			in.mu.Unlock()
			return
		}
		in.mu.Unlock()
		// A piece at a time, so that a caller that gave up (its context
		// ended) has the rest dropped, as WriteContext says: only the
		// piece being written when it gave up still goes in.
		n := 0
		var err error
		for n < len(req.p) && err == nil {
			in.mu.Lock()
			cancelled := req.cancelled
			in.mu.Unlock()
			if cancelled {
				break
			}
			var k int
			k, err = t.master.Write(req.p[n:min(len(req.p), n+inputPiece)])
			n += k
		}
		req.n, req.err = n, t.writeErr(err)
		close(req.done)
	}
}

// inputPiece is the most of a queued write that goes to the PTY after its
// caller may have given up: about what a terminal's input queue holds.
const inputPiece = 4 << 10
