package mux

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
)

// The WebSocket library writes a frame's header into the connection's
// bufio.Writer and then its payload: with net/http's 4 KiB writer, a
// 32 KiB DATA frame takes two write syscalls (the header and the first
// 4 KiB, then the rest). A writer that holds a whole frame sends each
// frame with one syscall.

// bigWriterHijacker hands the WebSocket library a bufio.Writer of size
// bytes in place of net/http's.
type bigWriterHijacker struct {
	http.ResponseWriter
	size int
}

// Hijack implements http.Hijacker.
func (h bigWriterHijacker) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	conn, brw, err := http.NewResponseController(h.ResponseWriter).Hijack()
	if err != nil {
		return nil, nil, fmt.Errorf("mux: hijack: %w", err)
	}
	if err := brw.Writer.Flush(); err != nil { // normally empty already
		_ = conn.Close()
		return nil, nil, err
	}
	return conn, bufio.NewReadWriter(brw.Reader, bufio.NewWriterSize(conn, h.size)), nil
}

// Unwrap lets http.ResponseController reach the original writer.
func (h bigWriterHijacker) Unwrap() http.ResponseWriter { return h.ResponseWriter }
