package server

import (
	"net"
	"testing"
	"time"
)

// writable turns false once the peer stops reading and the send buffer
// fills, and true again once the peer read it.
func TestWritableFollowsTheSendBuffer(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := l.Accept()
		if err == nil {
			accepted <- c
		}
		close(accepted)
	}()
	c, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	peer, ok := <-accepted
	if !ok {
		t.Fatal("accept failed")
	}
	defer peer.Close()
	raw, err := c.(*net.TCPConn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	if !writable(raw) {
		t.Fatal("a fresh connection is not writable")
	}
	// Fill the send buffer and the peer's receive buffer: until a write
	// that timed out moved nothing.
	chunk := make([]byte, 64<<10)
	for range 1 << 12 { // bounded: 256 MiB, far past any socket buffers
		_ = c.SetWriteDeadline(time.Now().Add(50 * time.Millisecond))
		if n, err := c.Write(chunk); err != nil && n == 0 {
			break
		}
	}
	if writable(raw) {
		t.Fatal("writable with the send buffer full")
	}
	// The peer reads: room comes back.
	go func() {
		buf := make([]byte, 1<<20)
		for {
			if _, err := peer.Read(buf); err != nil {
				return
			}
		}
	}()
	for deadline := time.Now().Add(5 * time.Second); !writable(raw); {
		if time.Now().After(deadline) {
			t.Fatal("not writable after the peer read")
		}
		time.Sleep(time.Millisecond) // no event to wait on: polling the kernel's view
	}
	if writable(nil) {
		t.Fatal("writable without a connection")
	}
}
