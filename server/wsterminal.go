package server

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/coder/websocket"

	"github.com/muxd/muxd/pty"
)

// The /ws/terminal compatibility endpoint (aliases /ws/pty and
// /ws/terminal/{id}) speaks the PTY protocol of @cloudflare/sandbox@0.12.10:
// its Durable Object proxy and its xterm.js SandboxAddon use muxd
// unchanged. See PROTOCOL.md, "Compatibility endpoint".

// TerminalHandlerOptions configures NewTerminalHandler.
type TerminalHandlerOptions struct {
	// Authorize admits or refuses a request before the upgrade. An error
	// wrapping ErrUnauthorized answers 401, any other error 403. Nil
	// admits requests without an Origin or with the daemon's own (wrap
	// the handler with the server's own check instead when it has one).
	Authorize func(*http.Request) error
	// SessionState returns the cwd and environment of the exec session
	// with the terminal's id, if one exists, for a terminal created by id.
	SessionState func(id string) (cwd string, env []string, ok bool)
	// Track registers the socket for shutdown before the upgrade: goAway
	// closes it with 1001 within limit. ok false refuses the request (503);
	// untrack is called when the socket ends.
	Track func(r *http.Request, goAway func(limit time.Duration)) (untrack func(), ok bool)
	// Logger gets one line per socket (default slog.Default()).
	Logger *slog.Logger
	// PingInterval is how often the socket is pinged (default 15 s); a
	// peer that does not answer within two intervals is dropped. Pings
	// also keep intermediaries that cut idle sockets from doing so.
	PingInterval time.Duration
}

const (
	// maxKeystrokeFrame is the largest binary frame accepted from the
	// client: the addon sends one frame per input event, and a paste is
	// one frame. coder/websocket's default read limit is 32 KiB.
	maxKeystrokeFrame = 64 << 10 // 64 KiB
	// terminalFrame is the largest output frame sent.
	terminalFrame = 32 << 10 // 32 KiB
	defaultPing   = 15 * time.Second
)

// terminalHandler serves /ws/terminal; see NewTerminalHandler.
type terminalHandler struct {
	m    *pty.Manager
	opts TerminalHandlerOptions
	log  *slog.Logger
}

// NewTerminalHandler returns the /ws/terminal handler over m. Mount it at
// /ws/terminal, /ws/terminal/{id} and /ws/pty.
func NewTerminalHandler(m *pty.Manager, opts TerminalHandlerOptions) http.Handler {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.PingInterval <= 0 {
		opts.PingInterval = defaultPing
	}
	return &terminalHandler{m: m, opts: opts, log: opts.Logger}
}

// terminalQuery is what the URL asks for.
type terminalQuery struct {
	id         string
	cols, rows int
	shell      string
	cursor     int64 // -1: from the oldest retained byte
}

// parseTerminalQuery reads the id (id, sessionId, terminalId, or the path
// after /ws/terminal/), cols, rows, shell and cursor.
func parseTerminalQuery(r *http.Request) (terminalQuery, error) {
	q := r.URL.Query()
	tq := terminalQuery{cursor: -1}
	for _, k := range []string{"id", "sessionId", "terminalId"} {
		if v := q.Get(k); v != "" {
			tq.id = v
			break
		}
	}
	if tq.id == "" {
		if v := r.PathValue("id"); v != "" {
			tq.id = v
		} else if rest, ok := strings.CutPrefix(r.URL.Path, "/ws/terminal/"); ok && rest != "" {
			if v, err := url.PathUnescape(rest); err == nil {
				tq.id = v
			}
		}
	}
	var err error
	if tq.cols, err = sizeParam(q, "cols"); err != nil {
		return tq, err
	}
	if tq.rows, err = sizeParam(q, "rows"); err != nil {
		return tq, err
	}
	tq.shell = q.Get("shell")
	if v := q.Get("cursor"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return tq, fmt.Errorf("cursor must be a byte offset, got %q", v)
		}
		tq.cursor = n
	}
	return tq, nil
}

func sizeParam(q url.Values, name string) (int, error) {
	v := q.Get(name)
	if v == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > pty.MaxSize {
		return 0, fmt.Errorf("%s must be an integer from 1 to %d, got %q", name, pty.MaxSize, v)
	}
	return n, nil
}

func (h *terminalHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	authorize := h.opts.Authorize
	if authorize == nil {
		authorize = sameOrigin
	}
	if err := authorize(r); err != nil {
		code := http.StatusForbidden
		if errors.Is(err, ErrUnauthorized) {
			code = http.StatusUnauthorized
		}
		h.log.Info("terminal socket refused", "remote", r.RemoteAddr, "err", err)
		http.Error(w, http.StatusText(code), code)
		return
	}
	tq, err := parseTerminalQuery(r)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	s := &termSocket{h: h, q: tq, remote: r.RemoteAddr}
	if h.opts.Track != nil {
		untrack, ok := h.opts.Track(r, s.goAway)
		if !ok {
			http.Error(w, "muxd is shutting down", http.StatusServiceUnavailable)
			return
		}
		defer untrack()
	}
	t, created, err := h.terminal(tq)
	if err != nil {
		code := http.StatusInternalServerError
		switch {
		case errors.Is(err, pty.ErrLimit):
			code = http.StatusServiceUnavailable
		case errors.Is(err, pty.ErrInvalidID), errors.Is(err, pty.ErrInvalidSize):
			code = http.StatusBadRequest
		}
		h.log.Warn("terminal socket refused", "remote", r.RemoteAddr, "id", tq.id, "err", err)
		http.Error(w, err.Error(), code)
		return
	}
	hj := &rawConnHijacker{ResponseWriter: w}
	conn, err := websocket.Accept(hj, r, &websocket.AcceptOptions{
		InsecureSkipVerify: true, // Origin checked by authorize above
		CompressionMode:    websocket.CompressionDisabled,
	})
	if err != nil {
		h.log.Info("terminal socket upgrade failed", "remote", r.RemoteAddr, "err", err)
		if tq.id == "" {
			h.m.DestroyTerminal(t)
		}
		return
	}
	conn.SetReadLimit(maxKeystrokeFrame)
	s.raw = hj.raw
	s.serve(r.Context(), conn, t, created)
}

// terminal finds or creates the socket's terminal: a new one without an
// id, else the one with the id (created from the session of that id if
// there is one, replaced if it has exited).
func (h *terminalHandler) terminal(tq terminalQuery) (*pty.Terminal, bool, error) {
	opts := pty.CreateOptions{ID: tq.id, Shell: tq.shell, Cols: tq.cols, Rows: tq.rows}
	if tq.id == "" {
		t, err := createPruning(h.m, func() (*pty.Terminal, error) { return h.m.Create(opts) })
		return t, err == nil, err
	}
	if h.opts.SessionState != nil {
		if cwd, env, ok := h.opts.SessionState(tq.id); ok {
			opts.Cwd, opts.BaseEnv = cwd, env
		}
	}
	var created bool
	t, err := createPruning(h.m, func() (*pty.Terminal, error) {
		t, c, err := h.m.GetOrCreate(opts, true)
		created = c
		return t, err
	})
	return t, created, err
}

// sameOrigin admits requests without an Origin (not a browser) or from
// the daemon's own host.
func sameOrigin(r *http.Request) error {
	origin := r.Header.Get("Origin")
	if origin == "" {
		return nil
	}
	u, err := url.Parse(origin)
	if err != nil || !strings.EqualFold(u.Host, r.Host) {
		return fmt.Errorf("%w: %q", ErrOrigin, origin)
	}
	return nil
}
