package exec

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"time"
)

// WaitForPort returns once a TCP connect to 127.0.0.1 or ::1 on port
// succeeds. With id, it fails with ErrEnded if that process ends first.
// ctx bounds the wait (ctx.Err()).
func (e *Engine) WaitForPort(ctx context.Context, port int, id string) error {
	if port < 1 || port > 65535 {
		return fmt.Errorf("%w: port %d", ErrInvalid, port)
	}
	var done <-chan struct{}
	if id != "" {
		p, err := e.lookup(id)
		if err != nil {
			return err
		}
		done = p.done
	}
	addrs := []string{
		net.JoinHostPort("127.0.0.1", strconv.Itoa(port)),
		net.JoinHostPort("::1", strconv.Itoa(port)),
	}
	var d net.Dialer
	// One attempt whatever ctx says: a wait with no time left (timeoutMs
	// 0) asks whether the port is open now.
	if dialAny(context.WithoutCancel(ctx), &d, addrs) {
		return nil
	}
	t := time.NewTimer(portPollInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-done:
			if dialAny(ctx, &d, addrs) {
				return nil
			}
			return fmt.Errorf("%w: process %q ended before port %d opened", ErrEnded, id, port)
		case <-t.C:
		}
		if dialAny(ctx, &d, addrs) {
			return nil
		}
		t.Reset(portPollInterval)
	}
}

func dialAny(ctx context.Context, d *net.Dialer, addrs []string) bool {
	for _, a := range addrs {
		cctx, cancel := context.WithTimeout(ctx, 250*time.Millisecond)
		c, err := d.DialContext(cctx, "tcp", a)
		cancel()
		if err == nil {
			_ = c.Close() // Best effort.
			return true
		}
	}
	return false
}
