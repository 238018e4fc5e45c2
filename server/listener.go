package server

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// A TCP connection costs the daemon an fd and a goroutine from the moment
// it is accepted, before any header or token arrives (ReadHeaderTimeout
// bounds each one to 10 s, not how many there are). capListener bounds
// how many accepted connections are open at once: past the cap a new one
// is answered 503 and closed (a few at a time; past those, closed
// unanswered), so a client can still tell the daemon is busy, and the fds
// stay bounded whoever connects.

// tcpHeadroom is how many connections beyond MaxConnections (WebSockets)
// are allowed for plain HTTP: /healthz, /auth, the page's assets and
// idle keep-alives.
const tcpHeadroom = 64

// busyResponse is what a connection past the cap reads.
var busyResponse = func() []byte {
	body := "muxd: too many open connections (see --max-connections)\n"
	return fmt.Appendf(nil, "HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain; charset=utf-8\r\n"+
		"Connection: close\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
}()

// capListener is a net.Listener that keeps at most max accepted
// connections open.
type capListener struct {
	net.Listener
	max      int64
	open     atomic.Int64
	onRefuse func() // called for each refused connection
	// refusing bounds the connections being answered 503 at once.
	refusing chan struct{}
}

func newCapListener(l net.Listener, maxOpen int, onRefuse func()) *capListener {
	return &capListener{Listener: l, max: int64(maxOpen), onRefuse: onRefuse, refusing: make(chan struct{}, 16)}
}

// Accept returns the next connection under the cap; those past it are
// answered and closed here.
func (l *capListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if l.open.Add(1) <= l.max {
			return &cappedConn{Conn: c, l: l}, nil
		}
		l.open.Add(-1)
		if l.onRefuse != nil {
			l.onRefuse()
		}
		select {
		case l.refusing <- struct{}{}:
			go l.refuse(c)
		default:
			_ = c.Close() // too many being refused already: no answer
		}
	}
}

// refuse answers a connection past the cap with 503 once its request
// head has arrived (an HTTP client takes an answer sent before its
// request for a broken connection), within a second.
func (l *capListener) refuse(c net.Conn) {
	defer func() { <-l.refusing }()
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Second))
	buf := make([]byte, 4096)
	for n := 0; n < len(buf); {
		k, err := c.Read(buf[n:])
		n += k
		if err != nil || bytes.Contains(buf[:n], []byte("\r\n\r\n")) {
			break
		}
	}
	_, _ = c.Write(busyResponse) // Best effort: the peer may be gone.
}

// cappedConn gives its slot back on the first Close.
type cappedConn struct {
	net.Conn
	l    *capListener
	once sync.Once
}

func (c *cappedConn) Close() error {
	c.once.Do(func() { c.l.open.Add(-1) })
	return c.Conn.Close()
}

// CloseWrite and ReadFrom are the TCP connection's, which net/http uses
// when it finds them (a graceful close; sendfile).
func (c *cappedConn) CloseWrite() error {
	if tc, ok := c.Conn.(*net.TCPConn); ok {
		return tc.CloseWrite()
	}
	return nil
}

func (c *cappedConn) ReadFrom(r io.Reader) (int64, error) {
	if rf, ok := c.Conn.(io.ReaderFrom); ok {
		return rf.ReadFrom(r)
	}
	return io.Copy(struct{ io.Writer }{c.Conn}, r)
}

// tcpConnOf returns the TCP connection under c, if there is one.
func tcpConnOf(c net.Conn) *net.TCPConn {
	if cc, ok := c.(*cappedConn); ok {
		c = cc.Conn
	}
	tc, _ := c.(*net.TCPConn)
	return tc
}
