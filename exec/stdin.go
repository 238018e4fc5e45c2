package exec

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"time"
)

// A client writing a process's stdin over a socket that drops cannot
// tell which of its bytes reached the process: those in flight when the
// socket went may or may not have. A named stdin stream answers that:
// the engine counts the bytes of each stream written to the pipe, and a
// writer that comes back under the same name learns the count and sends
// again from there, so every byte is written once.
//
// The writer that comes back supersedes the one it replaces (whose
// connection may not even have noticed the drop yet): a write of the
// old one in flight is interrupted, with its bytes counted, and later
// writes of it fail with ErrSuperseded.

// ErrSuperseded is returned by a StdinStream whose name another writer
// attached since.
var ErrSuperseded = errors.New("exec: stdin stream taken over by a newer writer")

// maxStdinStreams bounds the stream names a process remembers; past it
// the one attached longest ago is forgotten (its writer, if it comes
// back, starts again from 0 and finds the count below what it sent).
const maxStdinStreams = 64

// stdinStream is the count of one name's bytes written to the pipe.
type stdinStream struct {
	written  int64  // guarded by process.mu
	gen      uint64 // the writer attached last; older ones are superseded
	attached time.Time
}

// StdinStream writes one named stream of stdin bytes (see
// [Engine.AttachStdin]).
type StdinStream struct {
	p   *process
	st  *stdinStream
	gen uint64
}

// stdinState is a process's named streams and the write in flight.
type stdinState struct {
	streams  map[string]*stdinStream
	inflight *stdinStream // the stream of the write in flight, nil for none or an unnamed one
	cond     *sync.Cond   // on process.mu: signalled when a write returns
}

// AttachStdin starts (or takes over) the stdin stream named name of the
// process and returns it with the count of the stream's bytes written
// to the pipe so far: the writer sends again from there.
func (e *Engine) AttachStdin(id, name string) (*StdinStream, int64, error) {
	if name == "" {
		return nil, 0, fmt.Errorf("%w: an empty stdin stream name", ErrInvalid)
	}
	p, err := e.lookup(id)
	if err != nil {
		return nil, 0, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stdin == nil {
		return nil, 0, fmt.Errorf("%w: process %q", ErrNotWritable, id)
	}
	in := &p.stdinState
	if in.streams == nil {
		in.streams = map[string]*stdinStream{}
		in.cond = sync.NewCond(&p.mu)
	}
	st := in.streams[name]
	if st == nil {
		if len(in.streams) >= maxStdinStreams {
			forgetOldestStream(in)
		}
		st = &stdinStream{}
		in.streams[name] = st
	}
	st.gen++
	st.attached = time.Now()
	// The superseded writer's write in flight ends now, its bytes
	// counted; its later ones see the new generation and stop.
	for in.inflight == st {
		_ = p.stdin.SetWriteDeadline(time.Unix(1, 0)) // Best effort: the file may be closing.
		in.cond.Wait()
		if p.stdin == nil {
			break
		}
	}
	return &StdinStream{p: p, st: st, gen: st.gen}, st.written, nil
}

// forgetOldestStream drops the stream attached longest ago that no write
// is in flight on.
func forgetOldestStream(in *stdinState) {
	var oldest string
	var at time.Time
	for name, st := range in.streams {
		if st != in.inflight && (oldest == "" || st.attached.Before(at)) {
			oldest, at = name, st.attached
		}
	}
	delete(in.streams, oldest)
}

// Write writes b to the process's stdin, blocking while the pipe is
// full. It fails with ErrSuperseded once a newer writer attached under
// the same name (n counts what was written before).
func (s *StdinStream) Write(b []byte) (int, error) {
	return s.p.writeStdin(s, b)
}

// writeStdin writes b to stdin, for the named stream s or (nil) none.
// Writes are serialized (stdinWriter); each is interruptible by an
// AttachStdin that supersedes its stream.
func (p *process) writeStdin(s *StdinStream, b []byte) (int, error) {
	p.stdinWriter.Lock()
	defer p.stdinWriter.Unlock()
	n := 0
	for len(b) > 0 {
		p.mu.Lock()
		if s != nil && s.st.gen != s.gen {
			p.mu.Unlock()
			return n, ErrSuperseded
		}
		f := p.stdin
		if f == nil {
			p.mu.Unlock()
			return n, fmt.Errorf("%w: process %q", ErrNotWritable, p.id)
		}
		if s != nil {
			p.stdinState.inflight = s.st
		}
		p.mu.Unlock()

		k, err := f.Write(b)

		p.mu.Lock()
		if s != nil {
			s.st.written += int64(k)
			p.stdinState.inflight = nil
			if p.stdinState.cond != nil {
				p.stdinState.cond.Broadcast()
			}
		}
		p.mu.Unlock()
		n += k
		b = b[k:]
		if errors.Is(err, os.ErrDeadlineExceeded) {
			// An AttachStdin interrupted this write (or one before
			// it, and the deadline outlived it): the generation check
			// above decides whether this writer goes on.
			_ = f.SetWriteDeadline(time.Time{}) // Best effort: the file may be closing.
			continue
		}
		if err != nil {
			return n, fmt.Errorf("%w: %v", ErrNotWritable, err)
		}
	}
	return n, nil
}
