package server

import (
	"bytes"
	"io"
	"net"
	"strings"
	"testing"
	"time"
)

// A capped connection keeps the TCP connection's half close and its
// ReadFrom, which net/http reaches for, and gives its slot back once
// however often it is closed.
func TestCappedConnKeepsTCPFeatures(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	capped := newCapListener(ln, 1, nil)
	defer capped.Close()
	peer, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer peer.Close()
	_ = peer.SetDeadline(time.Now().Add(10 * time.Second))
	c, err := capped.Accept()
	if err != nil {
		t.Fatal(err)
	}
	if capped.open.Load() != 1 {
		t.Fatalf("open = %d, want 1", capped.open.Load())
	}
	if tcpConnOf(c) == nil {
		t.Fatal("tcpConnOf finds no TCP connection under the capped one")
	}

	rf, ok := c.(io.ReaderFrom)
	if !ok {
		t.Fatal("a capped connection is no io.ReaderFrom")
	}
	if n, err := rf.ReadFrom(strings.NewReader("through ReadFrom")); n != 16 || err != nil {
		t.Fatalf("ReadFrom = %d, %v", n, err)
	}
	cw, ok := c.(interface{ CloseWrite() error })
	if !ok {
		t.Fatal("a capped connection has no CloseWrite")
	}
	if err := cw.CloseWrite(); err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(peer) // ends at the half close
	if err != nil || string(got) != "through ReadFrom" {
		t.Fatalf("peer read %q, %v", got, err)
	}
	// Half closed: the other way still works.
	if _, err := peer.Write([]byte("back")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4)
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.ReadFull(c, buf); err != nil || !bytes.Equal(buf, []byte("back")) {
		t.Fatalf("read after the half close: %q, %v", buf, err)
	}

	_ = c.Close()
	_ = c.Close()
	if capped.open.Load() != 0 {
		t.Fatalf("open = %d after two Closes, want 0", capped.open.Load())
	}
}
