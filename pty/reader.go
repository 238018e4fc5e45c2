package pty

import (
	"errors"
	"os"
	"runtime"
	"syscall"
	"time"
)

const (
	// wakeBytes, wakeReads and smallRead batch wakeups of attachments
	// while output streams. A small read (an echo, a prompt) wakes them at
	// once, so another core can send it while the reader goes back to the
	// PTY; large reads (a PTY read returns up to ~4 KiB) wake them when
	// the reader is about to wait for the PTY, or after this many bytes or
	// reads, so bulk output goes out in large frames with a fraction of
	// the wakeups and socket writes.
	wakeBytes = 32 << 10 // 32 KiB
	wakeReads = 8
	smallRead = 1 << 10 // 1 KiB
)

// readLoop copies PTY output into the ring until the PTY hangs up, then
// records the exit status. It is the terminal's only reader.
func (t *Terminal) readLoop() {
	buf := make([]byte, readChunk)
	rc, err := t.master.SyscallConn()
	pending, reads := 0, 0 // appended since attachments were last woken
	for err == nil {
		t.waitRoom()
		var n int
		var rerr error
		err = rc.Read(func(fd uintptr) bool {
			for {
				n, rerr = syscall.Read(int(fd), buf)
				if rerr != syscall.EINTR {
					break
				}
			}
			if rerr == syscall.EAGAIN {
				// About to wait for the PTY: deliver what is pending.
				if pending > 0 {
					t.mu.Lock()
					t.wakeLocked()
					t.mu.Unlock()
					pending, reads = 0, 0
				}
				return false
			}
			return true
		})
		if err == nil && rerr != nil {
			err = rerr // EIO once every slave descriptor is closed
		}
		if err == nil && n <= 0 {
			err = os.ErrClosed
		}
		if n > 0 {
			pending += n
			reads++
			t.mu.Lock()
			start := t.ring.end
			t.ring.write(buf[:n])
			var inline []inlineClaim
			if n < smallRead {
				inline = t.claimInlineLocked(start)
			}
			woke := false
			if len(inline) > 0 && len(inline) == len(t.atts) {
				pending, reads = 0, 0 // every attachment takes it inline
			} else if n < smallRead || pending >= wakeBytes || reads >= wakeReads {
				woke = t.wakeLocked()
				pending, reads = 0, 0
			}
			t.mu.Unlock()
			t.deliverInline(inline, start, buf[:n])
			if woke && n < smallRead {
				// An echo: its sender runs at once on this thread rather
				// than after a futex wake of another (as mux does for a
				// keystroke's consumer).
				runtime.Gosched()
			}
		}
	}
	if errors.Is(err, os.ErrDeadlineExceeded) {
		t.drain(buf)
	}
	<-t.proc.Done()
	st := t.proc.Status()
	t.closeMaster()
	t.mu.Lock()
	t.exited = true
	t.ended = time.Now()
	t.status = ExitStatus{Code: st.Code, Signal: st.SignalName()}
	t.wakeLocked()
	info := t.infoLocked()
	t.mu.Unlock()
	close(t.done)
	t.cfg.Logger.Info("terminal exited", "id", t.id, "instance", t.instance, "pid", t.proc.Pid, "status", st.String(), "bytes", info.End)
	if t.cfg.OnExit != nil {
		t.cfg.OnExit(info)
	}
}

// inlineClaim is an attachment that takes a piece of output inline, and
// its function (read under t.mu).
type inlineClaim struct {
	a  *Attachment
	fn func(p []byte) bool
}

// claimInlineLocked returns the attachments that take the bytes from
// start to the ring's end inline (see Attachment.SetInline) and moves
// them past those bytes, so that Next does not deliver them too.
func (t *Terminal) claimInlineLocked(start int64) []inlineClaim {
	var out []inlineClaim
	for a := range t.atts {
		if a.inline != nil && a.waiting && !a.detached && a.pos == start {
			a.pos = t.ring.end
			out = append(out, inlineClaim{a, a.inline})
		}
	}
	return out
}

// deliverInline hands p (the bytes from start) to the claimed attachments;
// one that cannot take it now gets it back through Next. Only the reader
// appends to the ring, so no byte came after p meanwhile.
func (t *Terminal) deliverInline(claimed []inlineClaim, start int64, p []byte) {
	for _, c := range claimed {
		if c.fn(p) {
			continue
		}
		t.mu.Lock()
		if c.a.pos == start+int64(len(p)) {
			c.a.pos = start
		}
		t.wakeLocked()
		t.mu.Unlock()
	}
}

// drain reads what the kernel still buffers after the drain deadline
// passed (the reader may have been held back meanwhile), without waiting
// and at most a ring's worth.
func (t *Terminal) drain(buf []byte) {
	rc, err := t.master.SyscallConn()
	if err != nil {
		return
	}
	total := 0
	_ = rc.Control(func(fd uintptr) { // Best effort.
		for total < t.ring.size {
			n, err := syscall.Read(int(fd), buf)
			if n <= 0 || err != nil {
				return
			}
			total += n
			t.mu.Lock()
			t.ring.write(buf[:n])
			t.mu.Unlock()
		}
	})
}

// watchExit bounds the drain: once the shell is gone, output still
// buffered is read, but a leftover process holding the PTY open must not
// keep the terminal from reporting its exit.
func (t *Terminal) watchExit() {
	<-t.proc.Done()
	_ = t.master.SetReadDeadline(time.Now().Add(t.cfg.DrainTimeout)) // Best effort: closed masters fail.
}

// waitRoom holds the reader back while an attachment that keeps up would
// lose unread bytes to the next read, for at most StallTimeout; attachments
// still behind after that are left behind (marked lagging) until they
// catch up.
func (t *Terminal) waitRoom() {
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		t.mu.Lock()
		limit := t.ring.end + readChunk - int64(t.ring.size)
		if t.destroyed || t.exited || !t.holdsLocked(limit) {
			t.mu.Unlock()
			return
		}
		// Attachments must see what is pending to make room.
		t.wakeLocked()
		t.readerWaiting = true
		ch := t.progress
		t.mu.Unlock()
		if timer == nil {
			timer = time.NewTimer(t.cfg.StallTimeout)
		}
		select {
		case <-ch:
		case <-timer.C:
			t.mu.Lock()
			for a := range t.atts {
				if !a.lagging && a.pos < limit {
					a.lagging = true
					t.cfg.Logger.Info("terminal attachment left behind", "id", t.id, "offset", a.pos, "end", t.ring.end)
				}
			}
			t.readerWaiting = false
			t.mu.Unlock()
			return
		}
	}
}

func (t *Terminal) holdsLocked(limit int64) bool {
	for a := range t.atts {
		if !a.lagging && a.pos < limit {
			return true
		}
	}
	return false
}
