package exec

import (
	"errors"
	"os"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// drainBufSize is the read size of a stream drain: large enough that a
// 256 MiB stream costs few syscalls, pooled so idle commands cost nothing.
const drainBufSize = 128 << 10 // 128 KiB

var drainBufs = sync.Pool{New: func() any { b := make([]byte, drainBufSize); return &b }}

// drain copies one pipe or FIFO (non-blocking, on the netpoller) into an
// output log until EOF, or until stop asks it to take what is already
// buffered and finish. One type, two instances per command.
//
// After stop, writers that still hold the pipe (background jobs of the
// command) are not the command's output any more: the drain goroutine
// discards what they write until they close it, so they neither block on
// a full pipe nor die of SIGPIPE, and nothing leaks into a later result.
type drain struct {
	f        *os.File
	hold     int // our own write end of a FIFO (keeps EOF away until stop), or -1
	log      *outputLog
	captured chan struct{} // closed once the command's bytes are all in the log
	stopping chan struct{}
	once     sync.Once
	holdOnce sync.Once
}

func startDrain(f *os.File, l *outputLog) *drain {
	return startDrainHold(f, -1, l)
}

func startDrainHold(f *os.File, hold int, l *outputLog) *drain {
	d := &drain{f: f, hold: hold, log: l, captured: make(chan struct{}), stopping: make(chan struct{})}
	go d.run()
	return d
}

func (d *drain) run() {
	bp := drainBufs.Get().(*[]byte)
	buf := *bp
	eof := false
	for {
		n, err := d.f.Read(buf)
		if n > 0 {
			_ = d.log.append(buf[:n]) // a full disk loses output, not the exit status
		}
		if err == nil {
			continue
		}
		if errors.Is(err, os.ErrDeadlineExceeded) {
			eof = d.rest(buf)
		} else {
			eof = true
		}
		break
	}
	drainBufs.Put(bp)
	close(d.captured)
	if !eof {
		<-d.stopping
		d.discard()
	}
	_ = d.f.Close() // Best effort.
}

// rest reads what is buffered in the pipe right now, without waiting for
// more: the writes of a command that has completed are all in the buffer.
// It reports whether the pipe reached EOF (no writer left).
func (d *drain) rest(buf []byte) (eof bool) {
	rc, err := d.f.SyscallConn()
	if err != nil {
		return true
	}
	_ = rc.Control(func(fd uintptr) {
		for range 1 << 20 { // bounded: 128 GiB, far past any pipe buffer
			n, err := unix.Read(int(fd), buf)
			if n > 0 {
				_ = d.log.append(buf[:n])
				continue
			}
			eof = n == 0 && err == nil
			return
		}
	})
	return eof
}

// discard reads and drops until every writer closed the pipe.
func (d *drain) discard() {
	_ = d.f.SetReadDeadline(time.Time{}) // Best effort.
	buf := make([]byte, 4<<10)
	for {
		if _, err := d.f.Read(buf); err != nil {
			return
		}
	}
}

// discardAll (fifos.go) does the same for a FIFO no drain owned.

// release closes our own write end of a FIFO, once the command is known
// to have opened its own: EOF comes when the last writer goes.
func (d *drain) release() {
	d.holdOnce.Do(func() {
		if d.hold >= 0 {
			_ = unix.Close(d.hold) // Best effort: lets EOF through if nobody else writes.
		}
	})
}

// waitEOF waits until the drain reached EOF by itself (no writer left),
// or until deadline; it reports which.
func (d *drain) waitEOF(deadline time.Time) bool {
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	select {
	case <-d.captured:
		return true
	case <-t.C:
		return false
	}
}

// stop ends the capture once the writer side is known complete (the
// command's marker arrived, or its process was reaped): it takes what is
// buffered, never waiting for EOF, which background children holding the
// pipe may delay forever. When stop returns, the log holds every byte the
// command wrote.
func (d *drain) stop() {
	d.once.Do(func() {
		d.release()
		_ = d.f.SetReadDeadline(time.Now()) // Best effort: fails only once closed.
		<-d.captured
		close(d.stopping)
	})
}
