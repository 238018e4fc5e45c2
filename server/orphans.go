package server

import (
	"github.com/muxd/muxd/internal/proc"
)

// killLeftovers ends, at once, every process of this run still alive once
// the engines shut down (their TERM and grace are over, or the budget
// ran out): orphans that double-forked or setsid'ed away from their tree
// and were reparented to muxd (a subreaper) or init, and trees whose own
// kills were still running. One sweep (proc.KillAll): with hundreds of
// trees, a kill per tree took longer than the budget, and muxd exited
// leaving them running, some frozen mid-kill.
func (s *Server) killLeftovers() int {
	n := proc.KillAll()
	if n > 0 {
		s.log.Info("killed leftover processes", "count", n)
	}
	return n
}

// Abort ends every process of this run at once (SIGKILL, no grace) and
// removes its run directory, without the shutdown's handshakes or waits:
// for a second SIGTERM while a shutdown is still under way.
func (s *Server) Abort() {
	s.killLeftovers()
	_ = s.run.remove() // Best effort: the sweep above may race a write.
}
