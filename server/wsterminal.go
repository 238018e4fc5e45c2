package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/coder/websocket"

	"github.com/muxd/muxd/pty"
)

// The /ws/terminal compatibility endpoint (aliases /ws/pty and
// /ws/terminal/{id}) speaks the PTY protocol of @cloudflare/sandbox@0.12.10:
// its Durable Object proxy and its xterm.js SandboxAddon use muxd
// unchanged. See docs/protocol.md, "Compatibility endpoint".

// TerminalHandlerOptions configures NewTerminalHandler.
type TerminalHandlerOptions struct {
	// Authorize admits or refuses a request before the upgrade. An error
	// wrapping ErrUnauthorized answers 401, ErrTooManyGuesses 429, any
	// other error 403. Nil
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
	// peer that does not answer within two intervals is dropped, and one
	// that stopped reading while output waits sooner, at the first ping
	// its socket does not take within 5 s (coder/websocket's bound on a
	// ping's write). Pings also keep intermediaries that cut idle
	// sockets from doing so.
	PingInterval time.Duration
}

const (
	// maxInputMessage is the largest message accepted from the client.
	// The addon sends one binary frame per input event, and a paste is
	// one event: docs/protocol.md promises 64 KiB, and a larger paste closed
	// the socket (1009) and was lost, so muxd takes up to 1 MiB (about
	// Cloudflare's own per-message limit), typed in 32 KiB pieces.
	maxInputMessage = 1 << 20 // 1 MiB
	// maxControlMessage is the largest text (JSON control) message.
	maxControlMessage = 64 << 10 // 64 KiB
	// terminalFrame is the largest output frame sent, and the piece of
	// input written to the terminal at a time.
	terminalFrame = 32 << 10 // 32 KiB
	defaultPing   = 15 * time.Second
	// quickExit is how long a shell must run for its terminal to be
	// replaced when a socket asks for its id again: a shell that keeps
	// exiting at once (a broken shell or startup file) is not respawned
	// on every reconnect of the addon, which resets its retry count on
	// each ready. See terminalHandler.respawnRefused.
	quickExit = 2 * time.Second
	// quickExitHold is how long a refused respawn stays refused.
	quickExitHold = 30 * time.Second
)

// terminalHandler serves /ws/terminal; see NewTerminalHandler.
type terminalHandler struct {
	m    *pty.Manager
	opts TerminalHandlerOptions
	log  *slog.Logger

	// mu guards quick: per id, how many instances in a row exited within
	// quickExit, as seen when a socket asked for the id again.
	mu    sync.Mutex
	quick map[string]quickExits
}

// quickExits counts an id's instances that exited at once, each once
// (several sockets may see the same exited instance).
type quickExits struct {
	n    int
	last string // the instance counted last
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
	return &terminalHandler{m: m, opts: opts, log: opts.Logger, quick: map[string]quickExits{}}
}

// terminalQuery is what the URL asks for.
type terminalQuery struct {
	id         string
	cols, rows int
	shell      []string // the program and its arguments ("bash -l"), split at spaces
	cursor     int64    // -1: from the oldest retained byte
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
	tq.cols, tq.rows = sizeParam(q, "cols"), sizeParam(q, "rows")
	tq.shell = strings.Fields(q.Get("shell"))
	if v := q.Get("cursor"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return tq, fmt.Errorf("cursor must be a byte offset, got %q", v)
		}
		tq.cursor = n
	}
	return tq, nil
}

// sizeParam reads cols or rows leniently, since the SDK's container
// takes any size (a parseInt, no checks): what is not a positive integer
// leaves the default (0), and a size past pty.MaxSize is cut to it. A refusal would leave the
// browser behind the Durable Object retrying for ever over a size its
// addon corrects with a resize as soon as it is ready.
func sizeParam(q url.Values, name string) int {
	n, err := strconv.Atoi(strings.TrimSpace(q.Get(name)))
	if err != nil || n < 1 {
		return 0
	}
	return min(n, pty.MaxSize)
}

func (h *terminalHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	authorize := h.opts.Authorize
	if authorize == nil {
		authorize = sameOrigin
	}
	if err := authorize(r); err != nil {
		code := refusalStatus(err)
		h.log.Info("terminal socket refused", "remote", r.RemoteAddr, "err", err)
		msg := http.StatusText(code)
		if code == http.StatusTooManyRequests {
			setRetryAfter(w, err)
			msg = err.Error()
		}
		http.Error(w, msg, code)
		return
	}
	if !isUpgrade(r) {
		// Nothing may happen before the upgrade: a plain GET (an <img>
		// or a link on any web page sends one, without an Origin) would
		// otherwise start the terminal, and the query's shell with it.
		w.Header().Set("Connection", "Upgrade")
		w.Header().Set("Upgrade", "websocket")
		http.Error(w, "a WebSocket upgrade is required", http.StatusUpgradeRequired)
		return
	}
	tq, qerr := parseTerminalQuery(r)
	s := &termSocket{h: h, q: tq, remote: r.RemoteAddr}
	if h.opts.Track != nil {
		untrack, ok := h.opts.Track(r, s.goAway)
		if !ok {
			http.Error(w, "muxd is shutting down", http.StatusServiceUnavailable)
			return
		}
		defer untrack()
	}
	var t *pty.Terminal
	var created bool
	err := qerr
	if err == nil {
		t, created, err = h.terminal(tq)
	}
	hj := &rawConnHijacker{ResponseWriter: w}
	conn, aerr := websocket.Accept(hj, r, &websocket.AcceptOptions{
		InsecureSkipVerify: true, // Origin checked by authorize above
		CompressionMode:    websocket.CompressionDisabled,
	})
	if aerr != nil {
		h.log.Info("terminal socket upgrade failed", "remote", r.RemoteAddr, "err", aerr)
		if err == nil && tq.id == "" {
			h.m.DestroyTerminal(t)
		}
		return
	}
	if err != nil {
		// Refused after the upgrade, as the SDK's container refuses a
		// PTY it cannot have: behind the Durable Object a browser sees no
		// HTTP status, only this message (the addon shows it) and the
		// close.
		h.log.Warn("terminal socket refused", "remote", r.RemoteAddr, "id", tq.id, "err", err)
		refuse(r.Context(), conn, err, qerr != nil || errors.Is(err, pty.ErrInvalidID) || errors.Is(err, pty.ErrInvalidSize))
		return
	}
	conn.SetReadLimit(maxInputMessage)
	s.raw = hj.raw
	s.serve(r.Context(), conn, t, created)
}

// refuse sends the error message and closes the socket: 1008 for a bad
// request, 1011 when the terminal could not be had.
func refuse(ctx context.Context, conn *websocket.Conn, err error, bad bool) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	code := websocket.StatusInternalError
	if bad {
		code = websocket.StatusPolicyViolation
	}
	b, _ := json.Marshal(termError{Type: "error", Message: err.Error()})
	if conn.Write(ctx, websocket.MessageText, b) == nil {
		_ = conn.Close(code, closeText(err.Error())) // Best effort.
	}
	_ = conn.CloseNow() // Best effort: usually closed already.
}

// closeText cuts s to fit a close frame's reason (123 bytes), on a
// character boundary.
func closeText(s string) string {
	if len(s) <= 123 {
		return s
	}
	s = s[:123]
	for len(s) > 0 && !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s
}

// terminal finds or creates the socket's terminal: a new one without an
// id, else the one with the id (created from the session of that id if
// there is one, replaced if it has exited).
func (h *terminalHandler) terminal(tq terminalQuery) (*pty.Terminal, bool, error) {
	opts := pty.CreateOptions{ID: tq.id, Cols: tq.cols, Rows: tq.rows}
	if len(tq.shell) > 0 {
		opts.Shell, opts.Args = tq.shell[0], tq.shell[1:]
	}
	if tq.id == "" {
		t, err := createPruning(h.m, func() (*pty.Terminal, error) { return h.m.Create(opts) })
		return t, err == nil, err
	}
	if h.opts.SessionState != nil {
		if cwd, env, ok := h.opts.SessionState(tq.id); ok {
			opts.Cwd, opts.BaseEnv = cwd, env
		}
	}
	if err := h.respawnRefused(tq.id); err != nil {
		return nil, false, err
	}
	var created bool
	t, err := createPruning(h.m, func() (*pty.Terminal, error) {
		t, c, err := h.m.GetOrCreate(opts, true)
		created = c
		return t, err
	})
	return t, created, err
}

// errQuickExits refuses to replace a terminal whose shell keeps exiting
// right after it starts.
var errQuickExits = errors.New("not restarting it")

// respawnRefused decides whether the exited terminal with id may be
// replaced. A shell that exits at once (a broken shell or startup file)
// would otherwise be respawned on every reconnect, about once a second
// for ever: the addon reconnects after any close and resets its retry
// count on each ready. Two instances in a row that lived under quickExit
// refuse the third for quickExitHold after the last one ended; a shell
// that ran longer (a user who typed exit) is always replaced.
func (h *terminalHandler) respawnRefused(id string) error {
	t, err := h.m.Get(id)
	if err != nil {
		return nil
	}
	lived, ended, ok := t.Lifetime()
	if !ok {
		return nil // running: attach
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if lived >= quickExit {
		delete(h.quick, id)
		return nil
	}
	q := h.quick[id]
	if q.last != t.Instance() {
		// First seen exited: this instance counts (a failed replacement,
		// or a second socket asking meanwhile, does not count it again).
		q.n++
		q.last = t.Instance()
		if len(h.quick) >= 4096 {
			clear(h.quick) // bounded: ids come from clients
		}
		h.quick[id] = q
	}
	if q.n >= 2 && time.Since(ended) < quickExitHold {
		st, _ := t.ExitStatus()
		how := fmt.Sprintf("code %d", st.Code)
		if st.Signal != "" {
			how = "signal " + st.Signal
		}
		return fmt.Errorf("terminal %q: its shell exited %v after it started (%s), again: %w for %v",
			id, lived.Round(time.Millisecond), how, errQuickExits, quickExitHold)
	}
	return nil
}

// sameOrigin admits requests without an Origin (not a browser) or from
// the daemon's own host, named outright (see literalHost: under a DNS
// name a rebinding site's page would pass).
func sameOrigin(r *http.Request) error {
	origin := r.Header.Get("Origin")
	if origin == "" {
		return nil
	}
	u, err := url.Parse(origin)
	if err != nil || !strings.EqualFold(u.Host, r.Host) || !literalHost(u.Hostname()) {
		return fmt.Errorf("%w: %q", ErrOrigin, origin)
	}
	return nil
}

// isUpgrade reports whether r asks for a WebSocket (RFC 6455 §4.2.1):
// a browser sends such a request only from new WebSocket(), with its
// Origin, which authorize has checked.
func isUpgrade(r *http.Request) bool {
	return r.Method == http.MethodGet &&
		headerHasToken(r.Header, "Connection", "upgrade") &&
		headerHasToken(r.Header, "Upgrade", "websocket") &&
		r.Header.Get("Sec-WebSocket-Key") != ""
}

// headerHasToken reports whether a comma-separated header has token,
// case-insensitively.
func headerHasToken(h http.Header, name, token string) bool {
	for _, v := range h.Values(name) {
		for _, t := range strings.Split(v, ",") {
			if strings.EqualFold(strings.TrimSpace(t), token) {
				return true
			}
		}
	}
	return false
}
