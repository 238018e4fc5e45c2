package exec

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strconv"
	"time"

	"github.com/muxd/muxd/internal/proc"
)

// WaitForPort returns once a TCP connect to 127.0.0.1 or ::1 on port
// succeeds. With id, it fails with ErrEnded if that process ends first,
// and the listener must not be an older program's (see process.listens):
// an old dev server still on the port, which made the new one fail with
// EADDRINUSE, is waited past, and named in the error.
// ctx bounds the wait (ctx.Err()).
func (e *Engine) WaitForPort(ctx context.Context, port int, id string) error {
	if port < 1 || port > 65535 {
		return fmt.Errorf("%w: port %d", ErrInvalid, port)
	}
	var p *process
	var done <-chan struct{}
	if id != "" {
		var err error
		if p, err = e.lookup(id); err != nil {
			return err
		}
		done = p.done
	}
	addrs := []string{
		net.JoinHostPort("127.0.0.1", strconv.Itoa(port)),
		net.JoinHostPort("::1", strconv.Itoa(port)),
	}
	var d net.Dialer
	var last listenCheck
	// open reports whether the port answers (with id, the process's
	// listener); held names another program's listener.
	open := func(ctx context.Context) (ok bool, held string) {
		if !dialAny(ctx, &d, addrs) {
			return false, ""
		}
		if p == nil {
			return true, ""
		}
		return p.listens(port, &last)
	}
	// One attempt whatever ctx says: a wait with no time left (timeoutMs
	// 0) asks whether the port is open now.
	ok, held := open(context.WithoutCancel(ctx))
	if ok {
		return nil
	}
	t := time.NewTimer(portPollInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			if held != "" {
				return fmt.Errorf("%w: %s", ctx.Err(), held)
			}
			return ctx.Err()
		case <-done:
			if ok, held = open(ctx); ok {
				return nil
			}
			if held != "" {
				return fmt.Errorf("%w: process %q ended, and %s", ErrEnded, id, held)
			}
			return fmt.Errorf("%w: process %q ended before port %d opened", ErrEnded, id, port)
		case <-t.C:
		}
		if ok, held = open(ctx); ok {
			return nil
		}
		t.Reset(portPollInterval)
	}
}

// listenCheck is the last answer of process.listens: while the port's
// listeners stay the same sockets, it stands (a full look scans /proc).
type listenCheck struct {
	inodes []uint64
	ok     bool
	held   string
}

// listens reports whether port's listener may be the record's. It is not
// when a process outside the record's tree that holds one of the port's
// listening sockets (among those muxd may look into) started before the
// record's child: another program, such
// as an old dev server still on the port, which made the new one fail
// with EADDRINUSE. Otherwise it may be: a process of the record's tree
// holds it, or one started since (a daemon's helper the command asked
// for, such as docker-proxy), or no one muxd can see (a process it may
// not look into, a port forwarded from another network namespace). A
// session command's port counts (its shell is the session's). held names
// the older program.
func (p *process) listens(port int, last *listenCheck) (ok bool, held string) {
	p.mu.Lock()
	members, pid, since := p.members, p.pid, p.launchTicks
	p.mu.Unlock()
	if members == nil {
		return pid != 0, "" // a session command's, or not started yet
	}
	inodes := proc.ListenInodes(port)
	if len(inodes) == 0 {
		return true, ""
	}
	if last.inodes != nil && slices.Equal(inodes, last.inodes) {
		return last.ok, last.held
	}
	*last = listenCheck{inodes: inodes, ok: true}
	if proc.HoldsSocket(members(), inodes) {
		return true, ""
	}
	// A tick of slack: start times are floored to 10 ms.
	if h, found := proc.SocketHolder(inodes); found && since > 0 && h.Start+1 < since {
		last.ok = false
		last.held = fmt.Sprintf("port %d is held by pid %d (%.200q), which was running before process %q started", port, h.Pid, h.Cmd, p.id)
	}
	return last.ok, last.held
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
