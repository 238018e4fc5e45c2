package mux

import (
	"context"
	"time"

	"github.com/coder/websocket"
)

// writeLoop is the one goroutine that writes to the socket. It takes the
// next frame by priority under c.mu, then writes it without the lock.
func (c *Conn) writeLoop() {
	defer c.wg.Done()
	var window []byte // scratch for WINDOW frames
	for {
		c.mu.Lock()
		var f *outFrame
		var msg []byte
		for {
			if c.closed {
				c.mu.Unlock()
				return
			}
			if ch := c.nextWindowLocked(); ch != nil {
				window = appendWindow(window[:0], ch.id, uint32(ch.pendingWindow))
				ch.pendingWindow = 0
				msg = window
				break
			}
			if f = c.nextFrameLocked(); f != nil {
				msg = f.b
				break
			}
			c.writerCond.Wait()
		}
		c.mu.Unlock()

		c.writeStart.Store(time.Now().UnixNano())
		err := c.ws.Write(context.Background(), websocket.MessageBinary, msg)
		c.writeStart.Store(0)

		if f != nil {
			c.mu.Lock()
			c.used -= f.cost
			if len(c.budgetWaiters) > 0 {
				c.wakeBudgetLocked()
			}
			c.mu.Unlock()
			if f.sent != nil {
				close(f.sent)
			}
			putFrame(f)
		}
		if err != nil {
			c.shutdown(err)
			return
		}
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
		return f
	}
	for cl := range c.rings {
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
