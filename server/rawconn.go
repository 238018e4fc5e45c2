package server

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"syscall"

	"golang.org/x/sys/unix"
)

// rawConnHijacker keeps the descriptor of the connection the WebSocket
// library hijacks, so the server can ask the kernel whether a write would
// wait (see writable).
type rawConnHijacker struct {
	http.ResponseWriter
	raw syscall.RawConn // set by Hijack for TCP connections
}

// Hijack implements http.Hijacker.
func (h *rawConnHijacker) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	conn, brw, err := http.NewResponseController(h.ResponseWriter).Hijack()
	if err != nil {
		return nil, nil, fmt.Errorf("server: hijack: %w", err)
	}
	if tc := tcpConnOf(conn); tc != nil {
		if raw, err := tc.SyscallConn(); err == nil {
			h.raw = raw
		}
	}
	return conn, brw, nil
}

// Unwrap lets http.ResponseController reach the original writer.
func (h *rawConnHijacker) Unwrap() http.ResponseWriter { return h.ResponseWriter }

// writable reports whether the socket's send buffer has room now: the
// kernel sets POLLOUT on a TCP socket while at least a third of it is
// free, far more than an echo needs, so a small write then never waits.
func writable(raw syscall.RawConn) bool {
	if raw == nil {
		return false
	}
	ok := false
	_ = raw.Control(func(fd uintptr) { // Best effort: a closed socket reads as not writable.
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLOUT}}
		n, err := unix.Poll(fds, 0)
		ok = err == nil && n == 1 && fds[0].Revents&unix.POLLOUT != 0
	})
	return ok
}
