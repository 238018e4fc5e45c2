package server

import (
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/muxd/muxd/internal/proc"
)

// killOrphans ends every process still below muxd once the engines shut
// down: orphans that double-forked or setsid'ed away from their tree and
// were reparented to muxd (a subreaper) belong to no resource any more.
// TERM, then KILL after grace; returns when done.
func (s *Server) killOrphans(grace time.Duration) int {
	left := proc.Descendants(os.Getpid())
	var wg sync.WaitGroup
	for _, pid := range left {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = proc.KillTree(pid, syscall.SIGTERM, grace) // Best effort: it may be gone already.
		}()
	}
	wg.Wait()
	if len(left) > 0 {
		s.log.Info("killed leftover processes", "count", len(left))
	}
	return len(left)
}
