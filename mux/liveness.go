package mux

import (
	"context"
	"time"
)

// watchdog ends the connection when a socket write stalls past
// WriteStallTimeout (the peer stopped reading) and sends WebSocket pings
// every PingInterval, dropping a peer that answers none within two.
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
				// The close frame cannot get through a stalled socket:
				// drop it; the peer sees the disconnect.
				c.shutdown(ErrWriteStalled)
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
	if err != nil && c.ctx.Err() == nil {
		c.shutdown(ErrPingTimeout) // drops the socket without a handshake
	}
	done <- struct{}{}
}
