package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
)

// Server is muxd's HTTP server: the page, /healthz, /auth, /ws (wsmux/1)
// and /ws/terminal. Its lifecycle is net/http-shaped: New, Serve (or
// ListenAndServe), then Shutdown or Close. Resources (sessions, processes,
// terminals) belong to the Server, not to connections, and live until
// Shutdown.
type Server struct {
	cfg     Config
	log     *slog.Logger
	auth    *authorizer
	boot    string // fresh per process: tells clients the daemon restarted
	started time.Time
	run     *runDir // this run's private directory inside DataDir, locked
	handler http.Handler
	http    *http.Server
	slots   chan struct{} // one token per allowed concurrent socket

	backend *backend // exec engine, terminals and the wsmux router

	// mu guards listeners, sockets and closed.
	mu        sync.Mutex
	listeners map[net.Listener]struct{}
	sockets   map[*socket]struct{}
	closed    bool

	shutdownOnce sync.Once
	shutdownErr  error

	// refusedConns counts connections refused at the listener's cap;
	// refusedLogged is when that was last logged (Unix ns).
	refusedConns, refusedLogged atomic.Int64
}

// New validates cfg, creates the run directory and the engines, and
// returns a Server ready to Serve.
func New(cfg Config) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	if cfg.DataDir == "" {
		cfg.DataDir = DefaultDataDir()
	}
	if cfg.ShutdownTimeout <= 0 {
		cfg.ShutdownTimeout = DefaultConfig().ShutdownTimeout
	}
	run, err := makeRunDir(cfg.DataDir)
	if err != nil {
		return nil, err
	}
	s := &Server{
		cfg: cfg,
		log: cfg.Logger,
		auth: newAuthorizer(cfg.Token, cfg.AllowedOrigins, newGuessLimiter(func(source string, wait time.Duration) {
			cfg.Logger.Warn("token guesses refused", "source", source, "for", wait.Round(time.Millisecond),
				"reason", "too many wrong tokens")
		})),
		boot:      uuid.NewString(),
		started:   time.Now(),
		run:       run,
		slots:     make(chan struct{}, cfg.MaxConnections),
		listeners: make(map[net.Listener]struct{}),
		sockets:   make(map[*socket]struct{}),
	}
	s.backend, err = newBackend(s)
	if err != nil {
		_ = run.remove() // Best effort.
		return nil, err
	}
	go removeStaleRuns(run.data, run.path, s.log)
	s.handler = s.routes()
	s.http = &http.Server{
		Handler:           s.handler,
		ReadHeaderTimeout: 10 * time.Second,
		// Idle keep-alive connections (health checks, the page's assets)
		// would otherwise stay open for ever, each an fd: 300 of them ran
		// a daemon with a 300-fd limit out of descriptors. WebSockets are
		// hijacked and not affected.
		IdleTimeout: time.Minute,
		ConnContext: withNetConn,
		ErrorLog:    slog.NewLogLogger(cfg.Logger.Handler(), slog.LevelDebug),
	}
	return s, nil
}

// Boot is this run's id (HELLO boot, server.info boot).
func (s *Server) Boot() string { return s.boot }

// DataDir is this run's private directory (removed on shutdown).
func (s *Server) DataDir() string { return s.run.path }

// Handler returns the routes, for tests that serve them with httptest.
func (s *Server) Handler() http.Handler { return s.handler }

// ListenAndServe binds cfg.Listen and serves until Shutdown or Close.
func (s *Server) ListenAndServe() error {
	l, err := net.Listen("tcp", s.cfg.Listen)
	if err != nil {
		return fmt.Errorf("listen on %s: %w (is another muxd running? pick another --listen)", s.cfg.Listen, err)
	}
	return s.Serve(l)
}

// Serve accepts connections on l until Shutdown or Close, then returns
// ErrServerClosed.
func (s *Server) Serve(l net.Listener) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		_ = l.Close() // Best effort.
		return ErrServerClosed
	}
	s.listeners[l] = struct{}{}
	s.mu.Unlock()
	s.log.Info("listening", "addr", l.Addr().String(), "boot", s.boot, "pid", os.Getpid(),
		"auth", s.cfg.Token != "", "dataDir", s.run.path)
	err := s.http.Serve(newCapListener(l, s.cfg.MaxConnections+tcpHeadroom, s.noteRefusedConn))
	if errors.Is(err, http.ErrServerClosed) {
		return ErrServerClosed
	}
	return err
}

// noteRefusedConn logs connections refused at the listener's cap, at
// most one line a second (a flood of them must not flood the log).
func (s *Server) noteRefusedConn() {
	n := s.refusedConns.Add(1)
	now := time.Now().UnixNano()
	last := s.refusedLogged.Load()
	if now-last < int64(time.Second) || !s.refusedLogged.CompareAndSwap(last, now) {
		return
	}
	s.log.Warn("connection refused", "reason", "too many open TCP connections",
		"max", s.cfg.MaxConnections+tcpHeadroom, "refusedSoFar", n)
}

// Shutdown stops accepting, sends GOAWAY and closes every socket with 1001
// (in parallel, each handshake bounded), kills every process tree and
// terminal (short grace, then KILL), and removes the run directory. It
// returns when done or when ctx ends, whichever is first; the work
// continues in the background in the second case.
func (s *Server) Shutdown(ctx context.Context) error {
	s.shutdownOnce.Do(func() {
		s.mu.Lock()
		s.closed = true
		s.mu.Unlock()
		done := make(chan error, 1)
		go func() { done <- s.shutdown(true) }()
		select {
		case s.shutdownErr = <-done:
		case <-ctx.Done():
			s.shutdownErr = ctx.Err()
		}
	})
	return s.shutdownErr
}

// Close is Shutdown without the GOAWAY and close handshakes: sockets are
// cut at once. Resources are still killed and files removed.
func (s *Server) Close() error {
	s.shutdownOnce.Do(func() {
		s.mu.Lock()
		s.closed = true
		s.mu.Unlock()
		s.shutdownErr = s.shutdown(false)
	})
	return s.shutdownErr
}

func (s *Server) shutdown(graceful bool) error {
	start := time.Now()
	budget := s.cfg.ShutdownTimeout
	// Stop accepting first; hijacked sockets are ours to close below.
	_ = s.http.Close() // Best effort: closes listeners and idle HTTP conns.

	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		s.closeSockets(graceful, budget/4)
	}()
	go func() {
		defer wg.Done()
		ctx, cancel := context.WithTimeout(context.Background(), budget*3/4)
		defer cancel()
		s.backend.close(ctx)
	}()
	wg.Wait()
	s.killLeftovers()
	err := s.run.remove()
	if err != nil {
		s.log.Warn("removing run directory", "dir", s.run.path, "err", err)
	}
	s.log.Info("shut down", "graceful", graceful, "took", time.Since(start).Round(time.Millisecond).String())
	return err
}

// closeSockets ends every tracked socket in parallel, each within limit.
func (s *Server) closeSockets(graceful bool, limit time.Duration) {
	s.mu.Lock()
	list := make([]*socket, 0, len(s.sockets))
	for k := range s.sockets {
		list = append(list, k)
	}
	s.mu.Unlock()
	var wg sync.WaitGroup
	for _, k := range list {
		wg.Add(1)
		go func() {
			defer wg.Done()
			k.end(graceful, limit)
		}()
	}
	wg.Wait()
}

// socket is one tracked WebSocket (/ws or /ws/terminal).
type socket struct {
	kind    string   // "ws" or "terminal"
	netConn net.Conn // the hijacked TCP connection, for abrupt drops

	// mu guards goAway, set once the WebSocket handshake completed, and
	// settledDone.
	mu sync.Mutex
	// goAway sends GOAWAY and closes with 1001; nil for sockets that are
	// closed by cutting netConn.
	goAway func(limit time.Duration)
	// settled, when not nil, is closed once the socket's handler knows
	// whether it will have a goAway: it set one, or it gave up. A socket
	// tracked before its handshake (the client may already hold the HELLO
	// answer) is waited for, so it too is ended with GOAWAY.
	settled     chan struct{}
	settledDone bool
}

func (k *socket) setGoAway(fn func(limit time.Duration)) {
	k.mu.Lock()
	k.goAway = fn
	k.settleLocked()
	k.mu.Unlock()
}

func (k *socket) settleLocked() {
	if k.settled != nil && !k.settledDone {
		k.settledDone = true
		close(k.settled)
	}
}

// end closes the socket: gracefully through goAway when it has one, by
// cutting the TCP connection otherwise or when that does not finish
// within limit.
func (k *socket) end(graceful bool, limit time.Duration) {
	t := time.NewTimer(limit)
	defer t.Stop()
	k.mu.Lock()
	goAway := k.goAway
	k.mu.Unlock()
	if graceful && goAway == nil && k.settled != nil {
		select { // mid-handshake: its goAway may be a moment away
		case <-k.settled:
		case <-t.C:
		}
		k.mu.Lock()
		goAway = k.goAway
		k.mu.Unlock()
	}
	if graceful && goAway != nil {
		done := make(chan struct{})
		go func() {
			goAway(limit)
			close(done)
		}()
		select {
		case <-done:
			return
		case <-t.C:
		}
	}
	if k.netConn != nil {
		_ = k.netConn.Close() // Best effort: the peer sees an abrupt close.
	}
}

// track registers a socket; it fails when the server is closing.
func (s *Server) track(k *socket) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.sockets[k] = struct{}{}
	return true
}

func (s *Server) untrack(k *socket) {
	s.mu.Lock()
	delete(s.sockets, k)
	s.mu.Unlock()
	k.mu.Lock()
	k.settleLocked()
	k.mu.Unlock()
}

// acquireSlot takes one of MaxConnections slots without waiting.
func (s *Server) acquireSlot() bool {
	select {
	case s.slots <- struct{}{}:
		return true
	default:
		return false
	}
}

func (s *Server) releaseSlot() { <-s.slots }

type netConnKey struct{}

// withNetConn stores the TCP connection in each request's context, so a
// socket can be cut abruptly after coder/websocket hijacked it.
func withNetConn(ctx context.Context, c net.Conn) context.Context {
	return context.WithValue(ctx, netConnKey{}, c)
}

func netConnOf(r *http.Request) net.Conn {
	c, _ := r.Context().Value(netConnKey{}).(net.Conn)
	return c
}

// dataDirFor returns a path inside the run directory.
func (s *Server) dataDirFor(name string) string { return filepath.Join(s.run.path, name) }

func pid() int { return os.Getpid() }
