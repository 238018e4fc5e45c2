package mux

import (
	"context"
	"time"

	"github.com/coder/websocket"
)

// Frames reach the socket through one write token (Conn.writing): the
// writer goroutine takes it whenever frames wait; a producer that queues
// a frame while the token is free (nothing in flight, so nothing queued
// ahead of it) takes it and writes at once, saving a goroutine handoff
// on the keystroke path. Either way one frame is written at a time,
// chosen by the same priority rules, so order and fairness do not
// depend on who writes. The read goroutine never takes the token: it
// must not block on the socket.

// writeLoop is the goroutine that writes queued frames.
func (c *Conn) writeLoop() {
	defer c.wg.Done()
	c.mu.Lock()
	for {
		for !c.closed && c.writeErr == nil && (c.writing || !c.hasWorkLocked()) {
			c.writerCond.Wait()
		}
		if c.closed || c.writeErr != nil {
			err := c.writeErr
			c.mu.Unlock()
			if err != nil {
				c.shutdown(err)
			}
			return
		}
		c.writeOneLocked()
	}
}

// flushLocked is the producers' fast path: with the token free it writes
// the next frame itself, else it leaves the work to the writer goroutine.
func (c *Conn) flushLocked() {
	if c.writing || c.closed || c.writeErr != nil {
		return
	}
	c.writeOneLocked()
	if c.hasWorkLocked() || c.writeErr != nil {
		c.writerCond.Signal()
	}
}

// hasWorkLocked reports whether a frame waits.
func (c *Conn) hasWorkLocked() bool {
	if !c.windowReady.empty() || !c.urgent.empty() {
		return true
	}
	for cl := range c.rings {
		if !c.rings[cl].empty() && !c.classHeldLocked(Class(cl)) {
			return true
		}
	}
	return false
}

// writeOneLocked takes the token, writes the next frame with c.mu
// released, and gives the token back. A write error is kept in writeErr
// for the writer goroutine to end the connection (the caller may hold
// locks shutdown needs).
func (c *Conn) writeOneLocked() {
	var f *outFrame
	var msg []byte
	if ch := c.nextWindowLocked(); ch != nil {
		c.window = appendWindow(c.window[:0], ch.id, uint32(ch.pendingWindow))
		ch.pendingWindow = 0
		msg = c.window
	} else if f = c.nextFrameLocked(); f != nil {
		msg = f.b
	} else {
		return
	}
	c.writing = true
	c.mu.Unlock()

	c.writeStart.Store(time.Now().UnixNano())
	err := c.ws.Write(context.Background(), websocket.MessageBinary, msg)
	c.writeStart.Store(0)
	if f != nil && f.sent != nil {
		close(f.sent)
	}

	c.mu.Lock()
	c.writing = false
	if f != nil {
		c.used -= f.cost
		c.budgetFreedLocked()
		putFrame(f)
	}
	if err != nil && c.writeErr == nil {
		c.writeErr = err
		c.writerCond.Signal()
	}
	if len(c.drainWaiters) > 0 && (err != nil || !c.hasWorkLocked()) {
		for _, w := range c.drainWaiters {
			close(w)
		}
		c.drainWaiters = nil
	}
}

// nextWindowLocked returns a channel with credit to return, if any.
func (c *Conn) nextWindowLocked() *Channel {
	for !c.windowReady.empty() {
		ch := c.windowReady.pop()
		ch.inWindowReady = false
		if ch.pendingWindow > 0 && !ch.closed {
			return ch
		}
	}
	return nil
}

// nextFrameLocked picks the next frame: urgent first, then each class in
// order, round-robin within a class. A picked DATA frame frees its
// channel's output slot (the pump may prepare the next one while this
// one is written).
func (c *Conn) nextFrameLocked() *outFrame {
	if !c.urgent.empty() {
		f := c.urgent.pop()
		if f.pong {
			c.pongs--
		}
		c.urgentBytes -= int64(len(f.b))
		if c.urgentBytes <= c.urgentLimit() {
			c.readerCond.Signal()
		}
		return f
	}
	for cl := range c.rings {
		if c.classHeldLocked(Class(cl)) {
			break // classes after it are held too
		}
		ring := &c.rings[cl]
		for !ring.empty() {
			q := ring.pop()
			q.inRing = false
			if q.frames.empty() || q.held {
				continue
			}
			f := q.frames.pop()
			c.scheduleLocked(q) // back of the ring if more frames wait
			if f.notify {
				c.notifies--
			}
			if f.ch != nil {
				f.ch.frameTakenLocked(f)
			}
			return f
		}
	}
	return nil
}

// pushUrgentLocked queues a first-class frame.
func (c *Conn) pushUrgentLocked(f *outFrame) {
	c.urgent.push(f)
	c.urgentBytes += int64(len(f.b))
	c.wakeWriterLocked()
}

// pushUrgentFlushLocked queues a first-class frame and writes it at once
// if the token is free.
func (c *Conn) pushUrgentFlushLocked(f *outFrame) {
	c.urgent.push(f)
	c.urgentBytes += int64(len(f.b))
	c.flushLocked()
}

// urgentLimit bounds the first-class frames (mostly answers to the
// peer's requests) a server queues: past it, the server stops reading
// until they drain, so a client that sends without reading cannot make
// the server queue answers without bound (1 MiB by default).
func (c *Conn) urgentLimit() int64 { return c.cfg.ConnBudget / 16 }

// waitUrgentDrained blocks the server's read loop while too many answers
// wait for a peer that does not read. Clients never wait here: a server
// sends no requests, so the two read loops cannot wait on each other.
func (c *Conn) waitUrgentDrained() {
	if !c.server {
		return
	}
	c.mu.Lock()
	for !c.closed && c.urgentBytes > c.urgentLimit() {
		c.readerCond.Wait()
	}
	c.mu.Unlock()
}
