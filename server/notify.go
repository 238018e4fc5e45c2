package server

import (
	"log/slog"
	"sync"

	"github.com/muxd/muxd/mux"
)

// notifier sends notifications to every connection, best effort: mux's
// Notify never blocks and drops under pressure; a client can always ask.
type notifier struct {
	log *slog.Logger
	// mu guards conns; held only to copy the set, never while sending.
	mu    sync.Mutex
	conns map[*mux.Conn]struct{}
}

func newNotifier(log *slog.Logger) *notifier {
	return &notifier{log: log, conns: map[*mux.Conn]struct{}{}}
}

func (n *notifier) add(c *mux.Conn) {
	n.mu.Lock()
	n.conns[c] = struct{}{}
	n.mu.Unlock()
}

func (n *notifier) remove(c *mux.Conn) {
	n.mu.Lock()
	delete(n.conns, c)
	n.mu.Unlock()
}

func (n *notifier) send(method string, params any) {
	n.mu.Lock()
	list := make([]*mux.Conn, 0, len(n.conns))
	for c := range n.conns {
		list = append(list, c)
	}
	n.mu.Unlock()
	for _, c := range list {
		_ = c.Notify(method, params) // Best effort: dropped under pressure by design.
	}
}
