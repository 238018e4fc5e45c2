package exec

import (
	"fmt"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// cmdFIFOs are a session's output FIFOs, stdout and stderr, at fixed
// paths that the wrapper opens for each command. They are reused from one
// command to the next while nobody else holds them: a command that leaves
// a writer behind (a background job) gets its FIFO replaced by a fresh one
// at the same path before the next command, and the old one is drained to
// nowhere, so the job's later output never reaches another result.
//
// The read ends are raw non-blocking fds until a command turns out slow
// (startDrains), so a fast command costs no goroutine and no netpoller
// registration, and only two reads once its marker came. A drain gets our
// own write end (hold) with the read end, which keeps EOF away until the
// marker, whatever bash has opened or closed by then. Only the session's
// turn holder touches a cmdFIFOs.
type cmdFIFOs struct {
	paths  [2]string
	read   [2]int // -1: (re)create before the next command
	hold   [2]int // -1 when not open (only while a drain starts)
	drains [2]*drain
}

func newFIFOs(outPath, errPath string) *cmdFIFOs {
	return &cmdFIFOs{paths: [2]string{outPath, errPath}, read: [2]int{-1, -1}, hold: [2]int{-1, -1}}
}

// ready makes both FIFOs usable for the next command: open for reading by
// us alone. A FIFO whose read end we gave away (to a drain or a
// discarder) is unlinked and made anew at the same path.
func (c *cmdFIFOs) ready() error {
	for i, path := range c.paths {
		if c.read[i] >= 0 {
			continue
		}
		c.closeFD(i)
		if err := unix.Unlink(path); err != nil && err != unix.ENOENT {
			return fmt.Errorf("exec: fifo: %w", err)
		}
		if err := unix.Mkfifo(path, 0o600); err != nil {
			return fmt.Errorf("exec: fifo: %w", err)
		}
		rfd, err := unix.Open(path, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("exec: fifo: %w", err)
		}
		c.read[i] = rfd
	}
	return nil
}

// startDrains hands both FIFOs to drain goroutines (a slow command). The
// drains own the read ends from now on: the next command gets fresh FIFOs.
func (c *cmdFIFOs) startDrains(logs [2]*outputLog) {
	for i := range c.read {
		if c.read[i] < 0 || c.drains[i] != nil {
			continue
		}
		// Our read end is open, so this open cannot block. Without it
		// (it failed) the drain may end at EOF early: bash may not have
		// opened the FIFO yet.
		if wfd, err := unix.Open(c.paths[i], unix.O_WRONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0); err == nil {
			c.hold[i] = wfd
		}
		f := os.NewFile(uintptr(c.read[i]), c.paths[i])
		c.drains[i] = startDrainHold(f, c.hold[i], logs[i])
		c.read[i], c.hold[i] = -1, -1
	}
}

// finish captures everything the completed command wrote and completes
// the logs (nil logs: discarded). A FIFO that reaches EOF has no writer
// left and is kept for the next command; writers left behind (background
// jobs) are drained to nowhere until they close theirs.
func (c *cmdFIFOs) finish(logs [2]*outputLog, extra [2][]byte, grace time.Duration) {
	deadline := time.Now().Add(grace)
	for i := range c.read {
		if d := c.drains[i]; d != nil {
			d.release()
			d.waitEOF(deadline)
			d.stop()
			c.drains[i] = nil
			_ = logs[i].append(extra[i]) // a full disk loses output, not the status
			logs[i].finish()
			continue
		}
		if c.read[i] < 0 {
			_ = logs[i].append(extra[i])
			logs[i].finish()
			continue
		}
		bp := drainBufs.Get().(*[]byte)
		eof := readTrailing(c.read[i], *bp, logs[i], deadline)
		drainBufs.Put(bp)
		_ = logs[i].append(extra[i])
		logs[i].finish()
		if !eof {
			f := os.NewFile(uintptr(c.read[i]), c.paths[i])
			c.read[i] = -1
			go discardAll(f)
		}
	}
}

// readTrailing appends what a non-blocking fd holds, and what comes
// until EOF or deadline (a background job of the command writing on);
// it reports EOF. Without such a writer EOF is there at once.
func readTrailing(fd int, buf []byte, l *outputLog, deadline time.Time) (eof bool) {
	for {
		if readAvailable(fd, buf, l) {
			return true
		}
		wait := time.Until(deadline)
		if wait <= 0 {
			return false
		}
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		if _, err := unix.Poll(fds, int(wait/time.Millisecond)+1); err != nil && err != unix.EINTR {
			return false
		}
	}
}

// readAvailable appends what a non-blocking fd holds now; it reports EOF.
func readAvailable(fd int, buf []byte, l *outputLog) (eof bool) {
	for range 1 << 20 { // bounded: 128 GiB, far past any pipe buffer
		n, err := unix.Read(fd, buf)
		if n > 0 {
			_ = l.append(buf[:n]) // a full disk loses output, not the status
			continue
		}
		return n == 0 && err == nil
	}
	return false
}

// discardAll reads f until every writer closed it, then closes it.
func discardAll(f *os.File) {
	buf := make([]byte, 4<<10)
	for {
		if _, err := f.Read(buf); err != nil {
			_ = f.Close() // Best effort.
			return
		}
	}
}

// closeFD closes what we hold of FIFO i.
func (c *cmdFIFOs) closeFD(i int) {
	if c.read[i] >= 0 {
		_ = unix.Close(c.read[i]) // Best effort.
		c.read[i] = -1
	}
	if c.hold[i] >= 0 {
		_ = unix.Close(c.hold[i]) // Best effort.
		c.hold[i] = -1
	}
}

// close releases what drains did not take over and unlinks the FIFOs.
func (c *cmdFIFOs) close() {
	for i, path := range c.paths {
		c.closeFD(i)
		_ = os.Remove(path) // Best effort.
	}
}
