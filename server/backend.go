package server

import (
	"context"
	"net/http"
)

// backend holds the engines behind the routes. Placeholder until exec/,
// pty/ and mux/ land.
type backend struct {
	s *Server
}

func newBackend(s *Server) (*backend, error) { return &backend{s: s}, nil }

func (b *backend) close(ctx context.Context) {}

func (b *backend) serveWS(w http.ResponseWriter, r *http.Request) {
	http.Error(w, "not yet", http.StatusServiceUnavailable)
}

func (b *backend) terminalHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "not yet", http.StatusServiceUnavailable)
	})
}
