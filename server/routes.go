package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/muxd/muxd/web"
)

// routes builds the mux. Only the page, its assets, /healthz and /auth are
// served without a token.
func (s *Server) routes() http.Handler {
	m := http.NewServeMux()
	m.Handle("/", web.Handler())
	m.HandleFunc("GET /healthz", s.serveHealth)
	m.HandleFunc("GET /auth", s.serveAuth)
	ws := s.limitSockets(s.protect(http.HandlerFunc(s.backend.serveWS)))
	m.Handle("/ws", ws)
	term := s.limitSockets(s.backend.terminalHandler()) // authorizes itself
	m.Handle("/ws/terminal", term)
	m.Handle("/ws/terminal/{id}", term)
	m.Handle("/ws/pty", term)
	if s.cfg.TestHooks {
		m.HandleFunc("POST /_test/drop", s.serveTestDrop)
	}
	return m
}

// serveHealth answers liveness probes (the Dockerfile's HEALTHCHECK).
func (s *Server) serveHealth(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{"status": "ok"})
}

// serveAuth answers 200 or 401 for the presented credentials, so a page
// (which cannot see a WebSocket's 401) can tell it needs a token.
func (s *Server) serveAuth(w http.ResponseWriter, r *http.Request) {
	if err := s.auth.credentials(r); err != nil {
		if errors.Is(err, ErrTooManyGuesses) {
			setRetryAfter(w, err)
			writeJSON(w, http.StatusTooManyRequests, map[string]any{"ok": false, "error": err.Error()})
			return
		}
		w.Header().Set("WWW-Authenticate", `Bearer realm="muxd"`)
		writeJSON(w, http.StatusUnauthorized, map[string]any{"ok": false, "error": "token required"})
		return
	}
	// tokenRequired: a client that sent a token learns whether it was
	// checked at all (muxd health says so).
	writeJSON(w, http.StatusOK, map[string]any{"ok": true, "tokenRequired": s.auth.hasToken})
}

// limitSockets refuses a WebSocket upgrade past MaxConnections and holds
// the slot while the socket's handler runs.
func (s *Server) limitSockets(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !s.acquireSlot() {
			s.log.Warn("connection refused", "remote", r.RemoteAddr, "reason", "limit_reached", "max", s.cfg.MaxConnections)
			http.Error(w, fmt.Sprintf("too many connections (limit %d, see --max-connections)", s.cfg.MaxConnections),
				http.StatusServiceUnavailable)
			return
		}
		defer s.releaseSlot()
		h.ServeHTTP(w, r)
	})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v) // Best effort: the client may be gone.
}
