package mux

import "time"

// Keystroke echo under a bulk flood. The writer already serves terminal
// frames first, yet on a small host an echo under a flood was measured
// slow at every hand-off (the read loop, the PTY and the program, the PTY
// reader, the peer's reader): the bulk pipeline (output log, pump,
// socket writes, the peer's reads) keeps every CPU busy, so each wakeup
// on the echo path waits for one. So a server that receives DATA on a
// terminal channel (a keystroke) holds its bulk classes back for
// bulkHold, leaving the CPUs to the echo. A hold starts at most once per
// 2 × bulkHold: however fast keys arrive, bulk keeps at least half of
// the time, and only while someone types.

// bulkHold is how long one keystroke holds bulk output back (2 ms: an
// echo round trip is ~0.2 ms when a CPU is free; a longer hold measured
// no better).
const bulkHold = 2 * time.Millisecond

// holdBulkLocked starts a hold, unless one is on or ended too recently.
// Server only: what a client sends besides keystrokes is its own input.
func (c *Conn) holdBulkLocked() {
	if !c.server || c.closed {
		return
	}
	now := time.Now()
	if c.holdOn || now.Before(c.holdNext) {
		return
	}
	c.holdOn = true
	c.holdNext = now.Add(2 * bulkHold)
	if c.holdTimer == nil {
		c.holdTimer = time.AfterFunc(bulkHold, c.holdExpired)
	} else {
		c.holdTimer.Reset(bulkHold)
	}
}

// holdExpired ends a hold and wakes the writer for the held frames.
func (c *Conn) holdExpired() {
	c.mu.Lock()
	c.holdOn = false
	c.writerCond.Signal()
	c.mu.Unlock()
}

// classHeldLocked reports whether frames of class cl must wait.
func (c *Conn) classHeldLocked(cl Class) bool {
	return c.holdOn && cl > ClassTerminal
}
