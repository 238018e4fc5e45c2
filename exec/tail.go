package exec

import (
	"bytes"
	"io"
	"strings"
	"sync"
	"time"
)

// tailSize is how much of a session shell's own stdout/stderr is kept: set
// -x traces and bash's dying words land there, and only the end matters.
const tailSize = 2 << 10 // 2 KiB

// tail keeps the last tailSize bytes written to it.
type tail struct {
	// mu guards buf.
	mu  sync.Mutex
	buf []byte
	eof chan struct{} // closed when copyTail has read everything
}

func newTail() *tail { return &tail{eof: make(chan struct{})} }

// waitEOF waits up to d for copyTail to reach EOF: a shell's last words
// may still be in the pipe when its exit is seen. A forked subshell may
// hold the pipe open, hence the bound.
func (t *tail) waitEOF(d time.Duration) {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-t.eof:
	case <-timer.C:
	}
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if len(t.buf) > tailSize {
		t.buf = append(t.buf[:0], t.buf[len(t.buf)-tailSize:]...)
	}
	return len(p), nil
}

// lastLine returns the last non-empty line.
func (t *tail) lastLine() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return lastLine(t.buf)
}

func lastLine(b []byte) string {
	b = bytes.TrimRight(b, "\r\n ")
	if i := bytes.LastIndexByte(b, '\n'); i >= 0 {
		b = b[i+1:]
	}
	return strings.TrimSpace(string(b))
}

// copyTail drains r into t until EOF (the shell's stdout/stderr).
func copyTail(t *tail, r io.ReadCloser) {
	defer close(t.eof)
	buf := make([]byte, 1024)
	for {
		n, err := r.Read(buf)
		if n > 0 {
			_, _ = t.Write(buf[:n]) // never fails
		}
		if err != nil {
			_ = r.Close() // Best effort.
			return
		}
	}
}
