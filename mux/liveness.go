package mux

import (
	"context"
	"time"
)

// watchdog ends the connection when a socket write stalls past
// WriteStallTimeout (the peer stopped reading) and sends WebSocket pings
// every PingInterval, ending it when one gets no pong within two
// intervals (see dropStalled).
func (c *Conn) watchdog() {
	defer c.wg.Done()
	tick := min(c.cfg.WriteStallTimeout/8, time.Second)
	if c.cfg.PingInterval > 0 {
		tick = min(tick, c.cfg.PingInterval)
	}
	t := time.NewTicker(tick)
	defer t.Stop()
	lastPing := time.Now()
	pingDone := make(chan struct{}, 1)
	pinging := false
	for {
		select {
		case <-c.done:
			return
		case <-pingDone:
			pinging = false
		case now := <-t.C:
			if s := c.writeStart.Load(); s != 0 && now.Sub(time.Unix(0, s)) > c.cfg.WriteStallTimeout {
				c.dropStalled(ErrWriteStalled)
				return
			}
			if c.cfg.PingInterval > 0 && !pinging && now.Sub(lastPing) >= c.cfg.PingInterval {
				pinging, lastPing = true, now
				c.wg.Add(1)
				go c.ping(pingDone)
			}
		}
	}
}

// ping sends one WebSocket ping and waits two intervals for the pong.
func (c *Conn) ping(done chan<- struct{}) {
	defer c.wg.Done()
	ctx, cancel := context.WithTimeout(c.ctx, 2*c.cfg.PingInterval)
	defer cancel()
	err := c.ws.Ping(ctx)
	// Behind a write that does not complete, the ping could not be sent
	// (the library waits at most 5 s for the socket): the peer is not
	// reading, and WriteStallTimeout, counted from that write, decides.
	if err != nil && c.ctx.Err() == nil && c.writeStart.Load() == 0 {
		c.dropStalled(ErrPingTimeout)
	}
	done <- struct{}{}
}

// stalledCloseTimeout bounds the attempt to send 4002 to a peer that
// stopped reading: the frame usually cannot get through (it waits behind
// the stalled write), so the socket is dropped soon after.
const stalledCloseTimeout = time.Second

// dropStalled ends the connection of a peer that stopped reading or
// answering: a server first attempts a close frame 4002, for at most
// stalledCloseTimeout (or CloseTimeout if shorter); then the socket is
// dropped, so the peer sees a disconnect.
func (c *Conn) dropStalled(err error) {
	if c.server {
		c.closeWS(StatusStalled, "not reading", min(stalledCloseTimeout, c.cfg.CloseTimeout))
	}
	c.shutdown(err)
}
