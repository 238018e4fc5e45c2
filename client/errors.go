package client

import (
	"errors"
	"fmt"
	"time"

	"github.com/muxd/muxd/mux"
)

var (
	// ErrClosed is returned after Close.
	ErrClosed = errors.New("client: closed")
	// ErrDisconnected is returned by a request whose socket dropped while
	// it was pending and that cannot safely be sent again.
	ErrDisconnected = errors.New("client: disconnected while the request was pending")
	// ErrUnreachable is returned by calls made, or waiting for a
	// connection, while the daemon has been out of reach for longer than
	// Options.Unreachable.
	ErrUnreachable = errors.New("client: the daemon has been unreachable")
	// ErrReadOnly is returned by a read-only terminal attachment's Write,
	// Resize and Signal: the daemon drops them.
	ErrReadOnly = errors.New("client: read-only attachment")
	// ErrExited is returned by a terminal attachment's Write, Resize and
	// Signal once its Read saw the shell exit: nothing reads them.
	ErrExited = errors.New("client: the terminal's shell exited")
)

// GapError reports output the daemon no longer retained: Bytes bytes of
// Stream were skipped. Reading may continue after it.
type GapError struct {
	Stream string
	Bytes  int64
}

func (e *GapError) Error() string {
	return fmt.Sprintf("client: %d bytes of %s were dropped by the daemon (raise outputLimit to keep them)", e.Bytes, e.Stream)
}

// IsCode reports whether err is a muxd error with the given code, e.g.
// client.IsCode(err, mux.CodeNotFound).
func IsCode(err error, code mux.Code) bool {
	var e *mux.Error
	return errors.As(err, &e) && e.Code == code
}

// checkTimeout refuses a negative timeout, which would otherwise go out
// as none (0).
func checkTimeout(name string, d time.Duration) error {
	if d < 0 {
		return fmt.Errorf("client: %s %v is negative (0 means none)", name, d)
	}
	return nil
}
