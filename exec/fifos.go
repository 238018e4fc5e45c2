package exec

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// cmdFIFOs are one session command's output FIFOs, stdout and stderr. The
// read ends are raw non-blocking fds until the command turns out slow
// (startDrains), so a fast command costs no goroutine and no netpoller
// registration. Our own write ends keep EOF away until the command is done.
type cmdFIFOs struct {
	paths  [2]string
	read   [2]int // -1 once handed to a drain or closed
	hold   [2]int
	drains [2]*drain
}

func makeFIFOs(outPath, errPath string) (*cmdFIFOs, error) {
	c := &cmdFIFOs{read: [2]int{-1, -1}, hold: [2]int{-1, -1}}
	for i, path := range []string{outPath, errPath} {
		if err := unix.Mkfifo(path, 0o600); err != nil {
			c.close()
			return nil, fmt.Errorf("exec: fifo: %w", err)
		}
		c.paths[i] = path
		rfd, err := unix.Open(path, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
		if err != nil {
			c.close()
			return nil, fmt.Errorf("exec: fifo: %w", err)
		}
		c.read[i] = rfd
		wfd, err := unix.Open(path, unix.O_WRONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
		if err != nil {
			c.close()
			return nil, fmt.Errorf("exec: fifo: %w", err)
		}
		c.hold[i] = wfd
	}
	return c, nil
}

// startDrains hands both FIFOs to drain goroutines (a slow command).
func (c *cmdFIFOs) startDrains(logs [2]*outputLog) {
	for i := range c.read {
		if c.read[i] < 0 || c.drains[i] != nil {
			continue
		}
		f := os.NewFile(uintptr(c.read[i]), c.paths[i])
		c.drains[i] = startDrainHold(f, c.hold[i], logs[i])
		c.read[i], c.hold[i] = -1, -1
	}
}

// finish captures everything the completed command wrote and completes
// the logs. Writers left behind (background jobs) are drained to nowhere
// until they close the FIFO.
func (c *cmdFIFOs) finish(logs [2]*outputLog) {
	for i := range c.read {
		if d := c.drains[i]; d != nil {
			d.stop()
			logs[i].finish()
			continue
		}
		if c.read[i] < 0 {
			logs[i].finish()
			continue
		}
		_ = unix.Close(c.hold[i]) // Best effort: lets EOF through if nobody else writes.
		c.hold[i] = -1
		bp := drainBufs.Get().(*[]byte)
		eof := readAvailable(c.read[i], *bp, logs[i])
		drainBufs.Put(bp)
		logs[i].finish()
		if !eof {
			f := os.NewFile(uintptr(c.read[i]), c.paths[i])
			c.read[i] = -1
			go discardAll(f)
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

// close releases what drains did not take over and unlinks the FIFOs.
func (c *cmdFIFOs) close() {
	for i := range c.paths {
		if c.read[i] >= 0 {
			_ = unix.Close(c.read[i]) // Best effort.
			c.read[i] = -1
		}
		if c.hold[i] >= 0 {
			_ = unix.Close(c.hold[i]) // Best effort.
			c.hold[i] = -1
		}
		if c.paths[i] != "" {
			_ = os.Remove(c.paths[i]) // Best effort.
		}
	}
}
