package server

import "net/http"

// serveTestDrop cuts every /ws socket without GOAWAY, so browser tests can
// exercise the page's reconnect. Mounted only with Config.TestHooks, and
// only answers loopback clients.
func (s *Server) serveTestDrop(w http.ResponseWriter, r *http.Request) {
	if !isLoopbackRemote(r) {
		http.Error(w, "test hooks answer loopback clients only", http.StatusForbidden)
		return
	}
	s.mu.Lock()
	var cut []*socket
	for k := range s.sockets {
		if k.kind == "ws" {
			cut = append(cut, k)
		}
	}
	s.mu.Unlock()
	for _, k := range cut {
		k.end(false, 0)
	}
	s.log.Info("test hook: dropped sockets", "count", len(cut))
	writeJSON(w, http.StatusOK, map[string]any{"dropped": len(cut)})
}
