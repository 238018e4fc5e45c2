package exec

import (
	"bytes"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// fastMarker waits up to d for the marker line with ppoll(2) on the
// control pipe's raw fd, in this goroutine's thread. Most commands end
// within it, and a thread blocked in the kernel is woken by bash's write
// directly: going through the netpoller instead (park, epoll wake-up,
// hand the goroutine to a P, plus a deadline timer per command) cost
// more than the whole bash side of a `true` on a 2-core machine.
//
// It appends what it read to line and reports whether line now holds a
// newline, or whether the pipe reached EOF. Slower commands continue in
// awaitMarker's netpoller loop, so no thread stays blocked for them, and
// os.File.Close of the pipe (which waits for Control to return) waits at
// most d.
func fastMarker(f *os.File, line []byte, d time.Duration) (out []byte, complete, eof bool) {
	rc, err := f.SyscallConn()
	if err != nil {
		return line, false, false
	}
	end := time.Now().Add(d)
	var buf [32]byte
	_ = rc.Control(func(fd uintptr) {
		pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		for range 1 << 20 { // bounded by end
			n, err := unix.Read(int(fd), buf[:])
			if n > 0 {
				line = append(line, buf[:n]...)
				if bytes.IndexByte(line, '\n') >= 0 {
					complete = true
					return
				}
				continue
			}
			if n == 0 && err == nil {
				eof = true
				return
			}
			if err != unix.EAGAIN && err != unix.EINTR {
				return
			}
			left := time.Until(end)
			if left <= 0 {
				return
			}
			ts := unix.NsecToTimespec(int64(left))
			if _, err := unix.Ppoll(pfd, &ts, nil); err != nil && err != unix.EINTR {
				return
			}
		}
	})
	return line, complete, eof
}
