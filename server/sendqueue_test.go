package server

import (
	"net"
	"testing"

	"golang.org/x/sys/unix"
)

// sockopt reads an int socket option of c.
func sockopt(t *testing.T, c *net.TCPConn, level, opt int) int {
	t.Helper()
	rc, err := c.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var v int
	var gerr error
	if err := rc.Control(func(fd uintptr) { v, gerr = unix.GetsockoptInt(int(fd), level, opt) }); err != nil {
		t.Fatal(err)
	}
	if gerr != nil {
		t.Fatal(gerr)
	}
	return v
}

// A loopback socket gets a small send buffer; a network one keeps its
// buffer (throughput over a long path) and bounds only unsent bytes.
func TestSendQueueBound(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for _, loopback := range []bool{true, false} {
		c, err := net.Dial("tcp", l.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		tc := c.(*net.TCPConn)
		before := sockopt(t, tc, unix.SOL_SOCKET, unix.SO_SNDBUF)
		boundSendQueue(tc, loopback)
		snd := sockopt(t, tc, unix.SOL_SOCKET, unix.SO_SNDBUF)
		lowat := sockopt(t, tc, unix.IPPROTO_TCP, unix.TCP_NOTSENT_LOWAT)
		if loopback && snd != 2*sendBuffer {
			t.Errorf("loopback: SO_SNDBUF %d, want %d (the kernel doubles it)", snd, 2*sendBuffer)
		}
		if !loopback && (snd != before || lowat != sendBuffer) {
			t.Errorf("network: SO_SNDBUF %d (was %d), TCP_NOTSENT_LOWAT %d; want the buffer kept and lowat %d", snd, before, lowat, sendBuffer)
		}
		c.Close()
	}
}
