package mux

import (
	"context"
	"encoding/binary"
	"time"
)

// Ping sends a mux PING and waits for its PONG, returning the round trip
// (the client's own RTT measurement of docs/protocol.md).
func (c *Conn) Ping(ctx context.Context) (time.Duration, error) {
	c.mu.Lock()
	if c.closed {
		err := c.err
		c.mu.Unlock()
		return 0, err
	}
	c.nextPing++
	id := c.nextPing
	wait := make(chan struct{})
	if c.pingWaiters == nil {
		c.pingWaiters = map[uint64]chan struct{}{}
	}
	c.pingWaiters[id] = wait
	f := getFrame(headerLen + 8)
	f.b = binary.BigEndian.AppendUint64(appendFrame(f.b, typePing, 0, nil), id)
	c.pushUrgentLocked(f)
	c.mu.Unlock()
	start := time.Now()
	defer func() {
		c.mu.Lock()
		delete(c.pingWaiters, id)
		c.mu.Unlock()
	}()
	select {
	case <-wait:
		return time.Since(start), nil
	case <-c.done:
		return 0, c.Err()
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}

// handlePong wakes the Ping waiting for p, if any.
func (c *Conn) handlePong(p []byte) {
	if len(p) != 8 {
		return
	}
	id := binary.BigEndian.Uint64(p)
	c.mu.Lock()
	defer c.mu.Unlock()
	if w := c.pingWaiters[id]; w != nil {
		close(w)
		delete(c.pingWaiters, id)
	}
}
