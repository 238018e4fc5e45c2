package exec

import (
	"io"
	"sync"
)

// OutputReader follows one stream of a process from an offset. Read blocks
// until bytes arrive (the appender wakes it; there is no polling), returns
// a [*GapError] when bytes it should deliver were dropped (and skips
// ahead), and io.EOF once the process ended and every byte was delivered.
// Close unblocks a pending Read. Read and Close may be called from
// different goroutines; Read must not be called concurrently with itself.
type OutputReader struct {
	log    *outputLog
	stream Stream
	off    int64
	// hmu guards h, the reader's own descriptor. Held only across a
	// non-blocking file read, never while waiting for bytes.
	hmu sync.Mutex
	h   readHandle

	closeOnce sync.Once
	closed    chan struct{}
}

func newOutputReader(l *outputLog, s Stream, from int64) *OutputReader {
	return &OutputReader{log: l, stream: s, off: from, closed: make(chan struct{})}
}

// Offset is the stream offset of the next byte Read returns.
func (r *OutputReader) Offset() int64 { return r.off }

// Stream is the stream this reader follows.
func (r *OutputReader) Stream() Stream { return r.stream }

// Read implements io.Reader with the follow semantics described on the type.
func (r *OutputReader) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	for {
		select {
		case <-r.closed:
			return 0, io.ErrClosedPipe
		default:
		}
		first, end, done, wake := r.log.state()
		if r.off < first {
			gap := &GapError{Stream: r.stream, Offset: r.off, Bytes: first - r.off}
			r.off = first
			return 0, gap
		}
		if r.off < end {
			r.hmu.Lock()
			n, first2, err := r.log.readAt(&r.h, p, r.off)
			r.hmu.Unlock()
			if err != nil {
				return 0, err
			}
			if n == 0 && r.off < first2 {
				continue // overwritten during the read: report the gap
			}
			r.off += int64(n)
			return n, nil
		}
		if done {
			r.closeHandle()
			return 0, io.EOF
		}
		select {
		case <-wake:
		case <-r.closed:
			return 0, io.ErrClosedPipe
		}
	}
}

// Wait blocks until Read would not: bytes, a gap or the end are there. It
// returns io.ErrClosedPipe once the reader is closed. A pump waits before
// it takes a buffer, so a stream with nothing new holds none.
func (r *OutputReader) Wait() error {
	for {
		first, end, done, wake := r.log.state()
		if r.off < first || r.off < end || done {
			return nil
		}
		select {
		case <-wake:
		case <-r.closed:
			return io.ErrClosedPipe
		}
	}
}

// Close stops the reader; a blocked Read returns io.ErrClosedPipe.
func (r *OutputReader) Close() error {
	r.closeOnce.Do(func() { close(r.closed) })
	r.closeHandle()
	return nil
}

func (r *OutputReader) closeHandle() {
	r.hmu.Lock()
	r.h.close()
	r.hmu.Unlock()
}
