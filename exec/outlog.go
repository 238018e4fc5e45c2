package exec

import (
	"fmt"
	"io"
	"os"
	"sync"
)

// outputLog is one stream of one process: a ring file that keeps the last
// limit bytes, addressed by absolute offsets counted from 0. One goroutine
// appends (the stream's drain); any number read concurrently. The file is
// created on the first byte, so silent commands touch no disk.
type outputLog struct {
	path  string
	limit int64

	// mu guards the fields below. It is held only for bookkeeping, never
	// across file I/O.
	mu       sync.Mutex
	f        *os.File // the appender's descriptor; closed at finish
	created  bool     // the file exists
	end      int64    // bytes durably in the file (readable)
	reserved int64    // end plus the append in progress: bytes below reserved-limit may be overwritten
	done     bool     // no more appends
	removed  bool
	waited   bool          // someone holds wake: replace it on the next change
	wake     chan struct{} // closed on append or finish
	lostTo   int64         // bytes below it are gone: a write failed (disk full, say)
	lossTold bool          // onLoss was called

	// onLoss, if set, is told of the first failed write (not under mu).
	onLoss func(error)
}

func newOutputLog(path string, limit int64) *outputLog {
	return &outputLog{path: path, limit: limit, wake: make(chan struct{})}
}

// append writes p at the end of the log, overwriting the oldest bytes once
// the ring is full. Only the drain goroutine calls it.
func (l *outputLog) append(p []byte) error {
	if l == nil { // output nobody keeps (internal session round trips)
		return nil
	}
	// More than the ring holds: only the tail survives, so only the tail
	// is written; the bytes before it take their offsets, dropped (a
	// small outputLimit cost a write per limit bytes).
	var skip int64
	if over := int64(len(p)) - l.limit; over > 0 {
		skip, p = over, p[over:]
	}
	if len(p) == 0 {
		return nil
	}
	return l.appendChunk(p, skip)
}

// errOutputRemoved ends a read of output whose record went away under
// it: a reader gets not_found, not an internal error.
var errOutputRemoved = fmt.Errorf("%w: its output was removed (process.remove, the id used again, or retention)", ErrNotFound)

// appendChunk writes p (at most limit bytes) after skip dropped bytes.
func (l *outputLog) appendChunk(p []byte, skip int64) error {
	l.mu.Lock()
	if l.removed {
		l.mu.Unlock()
		return os.ErrClosed
	}
	if l.f == nil {
		f, err := os.OpenFile(l.path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
		if err != nil {
			l.reserved = l.end + skip + int64(len(p))
			return l.lostLocked(fmt.Errorf("exec: output log: %w", err)) // unlocks
		}
		l.f, l.created = f, true
	}
	// Readers see nothing of [end, reserved) until end moves, and first
	// (reserved - limit) already covers the skipped bytes.
	f, start := l.f, l.end+skip
	l.reserved = start + int64(len(p))
	l.mu.Unlock()

	pos := start % l.limit
	first := p
	if rest := l.limit - pos; int64(len(p)) > rest {
		first = p[:rest]
	}
	_, err := f.WriteAt(first, pos)
	if err == nil && len(first) < len(p) {
		_, err = f.WriteAt(p[len(first):], 0)
	}

	l.mu.Lock()
	if err != nil {
		return l.lostLocked(fmt.Errorf("exec: output log: %w", err)) // unlocks
	}
	l.end = l.reserved
	l.notifyLocked()
	l.mu.Unlock()
	return nil
}

// lostLocked accounts for an append that could not be written (a full
// disk, an unwritable data dir): its bytes still take their offsets, and
// everything before them counts as dropped, so readers get a gap where
// the stream would otherwise close up over the hole. The process's exit
// status is not lost with them. Callers hold mu; it is released.
func (l *outputLog) lostLocked(err error) error {
	tell := !l.lossTold
	l.lossTold = true
	l.end = l.reserved
	l.lostTo = l.end
	l.notifyLocked()
	onLoss := l.onLoss
	l.mu.Unlock()
	if tell && onLoss != nil {
		onLoss(err)
	}
	return err
}

// notifyLocked wakes waiters. Callers hold mu.
func (l *outputLog) notifyLocked() {
	if l.waited {
		close(l.wake)
		l.wake = make(chan struct{})
		l.waited = false
	}
}

// finish marks the log complete: followers get EOF once they reach end.
func (l *outputLog) finish() {
	if l == nil {
		return
	}
	l.mu.Lock()
	f := l.f
	l.f = nil
	l.done = true
	l.waited = true
	l.notifyLocked()
	l.mu.Unlock()
	if f != nil {
		_ = f.Close() // Best effort: readers use descriptors of their own.
	}
}

// state returns the retained window [first, end), whether the log is
// complete, and a channel closed at the next change.
func (l *outputLog) state() (first, end int64, done bool, wake <-chan struct{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.waited = true
	return l.firstLocked(), l.end, l.done, l.wake
}

// bounds returns the retained window and completion without arming a wake.
// While an append longer than the ring is written, the oldest byte that
// may still be read runs ahead of end (see append): the window is then
// empty, [end, end), never first > end.
func (l *outputLog) bounds() (first, end int64, done bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return min(l.firstLocked(), l.end), l.end, l.done
}

func (l *outputLog) firstLocked() int64 {
	if l.reserved > l.limit {
		return max(l.reserved-l.limit, l.lostTo)
	}
	if l.lostTo > 0 {
		return l.lostTo
	}
	return 0
}

// retained is the number of bytes the log keeps on disk.
func (l *outputLog) retained() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return min(l.end, l.limit)
}

// readHandle is a reader's own descriptor on a log file, opened on the
// first read: the appender's descriptor is closed once the log is done, so
// retained logs cost no descriptors.
type readHandle struct{ f *os.File }

func (h *readHandle) close() {
	if h.f != nil {
		_ = h.f.Close() // Best effort: read-only.
		h.f = nil
	}
}

// readAt copies retained bytes starting at off into p through h. It
// returns the number of bytes copied and the first retained offset; if
// off < first, nothing is copied (the caller reports a gap). It never
// blocks.
func (l *outputLog) readAt(h *readHandle, p []byte, off int64) (n int, first int64, err error) {
	l.mu.Lock()
	created, end, removed := l.created, l.end, l.removed
	first = l.firstLocked()
	l.mu.Unlock()
	if removed {
		return 0, first, errOutputRemoved
	}
	if off < first || off >= end || !created {
		return 0, first, nil
	}
	if h.f == nil {
		f, err := os.Open(l.path)
		if err != nil {
			return 0, first, fmt.Errorf("exec: output log: %w", err)
		}
		h.f = f
	}
	want := min(int64(len(p)), end-off)
	pos := off % l.limit
	head := want
	if rest := l.limit - pos; head > rest {
		head = rest
	}
	if _, err := h.f.ReadAt(p[:head], pos); err != nil && err != io.EOF {
		return 0, first, fmt.Errorf("exec: output log: %w", err)
	}
	if head < want {
		if _, err := h.f.ReadAt(p[head:want], 0); err != nil && err != io.EOF {
			return 0, first, fmt.Errorf("exec: output log: %w", err)
		}
	}
	// The appender may have overwritten the oldest part while we read.
	l.mu.Lock()
	first2 := l.firstLocked()
	l.mu.Unlock()
	if off < first2 {
		// Overwritten while we read: report the new window; the caller
		// sees off < first and reports a gap.
		return 0, first2, nil
	}
	return int(want), first, nil
}

// readOnce is readAt with a descriptor of its own, for one-shot reads.
func (l *outputLog) readOnce(p []byte, off int64) (int, int64, error) {
	var h readHandle
	defer h.close()
	return l.readAt(&h, p, off)
}

// remove deletes the file; later reads fail.
func (l *outputLog) remove() {
	l.mu.Lock()
	f, created := l.f, l.created
	l.f = nil
	l.removed = true
	l.done = true
	l.waited = true
	l.notifyLocked()
	l.mu.Unlock()
	if f != nil {
		_ = f.Close() // Best effort.
	}
	if created {
		_ = os.Remove(l.path) // Best effort.
	}
}
