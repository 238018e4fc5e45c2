package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"github.com/muxd/muxd/mux"
)

// Options configure Dial. The zero value works for a local daemon
// without a token.
type Options struct {
	// Token is sent as Authorization: Bearer.
	Token string
	// Header adds request headers (e.g. Origin behind a proxy).
	Header http.Header
	// Name is the client name in HELLO (default "muxd-go-client").
	Name string
	// NoReconnect disables automatic reconnection.
	NoReconnect bool
	// MaxBackoff caps the wait between reconnect attempts (default 2 s).
	MaxBackoff time.Duration
	// Unreachable is how long the client keeps calls waiting for a
	// daemon it cannot reach (default 60 s; negative: for ever). Past
	// it, calls waiting for a connection and new ones fail at once with
	// ErrUnreachable, rather than hang on a daemon that died; the client
	// keeps dialing, and calls work again once it connects.
	Unreachable time.Duration
	// OnNotify receives the daemon's notifications (process.exited, ...);
	// it runs on one goroutine per connection and must not block long.
	OnNotify func(method string, params json.RawMessage)
	// OnDisconnect is called when the connection drops, with why, before
	// the client dials again; OnReconnect after each reconnection, with
	// the daemon's boot id and whether it changed (the daemon restarted:
	// its processes, sessions and terminals are gone). Both run on one
	// goroutine of their own (they may call Close), a call at a time, in
	// order.
	OnDisconnect func(err error)
	OnReconnect  func(boot string, restarted bool)
	// Logger receives reconnect events (default: discard).
	Logger *slog.Logger
	// Config tunes the wsmux connection (default mux.DefaultConfig()).
	Config *mux.Config
	// StreamWindow is the credit granted per output channel in bytes
	// (default 4 MiB): larger windows stream faster, smaller ones hold
	// less memory.
	StreamWindow int
	// ReceiveBuffer caps the socket's kernel receive buffer in bytes when
	// the daemon is on loopback (default 64 KiB; negative leaves the OS
	// default). Bytes queued in the kernel cannot be overtaken, so a small
	// buffer keeps terminal echo quick while bulk output streams on the
	// same socket. Over a network the OS default stays: a capped buffer
	// would cap throughput at buffer/RTT.
	ReceiveBuffer int
	// HTTPClient dials the WebSocket (default: one with ReceiveBuffer).
	HTTPClient *http.Client
}

// Client is a connection to one muxd daemon that reconnects by itself.
type Client struct {
	url  string
	opts Options
	log  *slog.Logger

	// mu guards the fields below; never held across network I/O.
	mu      sync.Mutex
	conn    *mux.Conn     // current connection; nil while reconnecting
	changed chan struct{} // closed (and replaced) whenever conn or unreachable changes
	// unreachable is set while reconnecting has failed for longer than
	// Options.Unreachable.
	unreachable error
	boot        string
	closing     bool // Close began: no new background work
	closed      bool
	ctx         context.Context // ends on Close
	cancel      context.CancelFunc
	wg          sync.WaitGroup
	bg          sync.WaitGroup // background work Close lets finish (see background)
	closeDone   chan struct{}  // closed when the first Close returns

	// events feeds the goroutine of OnDisconnect and OnReconnect:
	// outside wg, so the callbacks may call Close.
	events chan connEvent
}

// connEvent is a disconnection (err set) or a reconnection.
type connEvent struct {
	err       error
	boot      string
	restarted bool
}

// callEvents calls OnDisconnect and OnReconnect in order until Close.
func (c *Client) callEvents() {
	for {
		select {
		case ev := <-c.events:
			switch {
			case ev.err != nil && c.opts.OnDisconnect != nil:
				c.opts.OnDisconnect(ev.err)
			case ev.err == nil && c.opts.OnReconnect != nil:
				c.opts.OnReconnect(ev.boot, ev.restarted)
			}
		case <-c.ctx.Done():
			return
		}
	}
}

// event queues ev for the callbacks, unless the client closes first.
func (c *Client) event(ev connEvent) {
	if c.events == nil {
		return
	}
	select {
	case c.events <- ev:
	case <-c.ctx.Done():
	}
}

// DefaultURL is where muxd serves by default.
const DefaultURL = "http://127.0.0.1:3000"

// Dial connects to the daemon at rawURL (http://host:port, or the /ws
// WebSocket URL; "" is DefaultURL) and keeps the connection up until
// Close.
func Dial(ctx context.Context, rawURL string, opts Options) (*Client, error) {
	if rawURL == "" {
		rawURL = DefaultURL
	}
	u, err := wsURL(rawURL)
	if err != nil {
		return nil, err
	}
	if opts.Name == "" {
		opts.Name = "muxd-go-client"
	}
	if opts.Unreachable == 0 {
		opts.Unreachable = 60 * time.Second
	}
	if opts.MaxBackoff <= 0 {
		opts.MaxBackoff = 2 * time.Second
	}
	if opts.StreamWindow < 1024 {
		opts.StreamWindow = 4 << 20
	}
	if opts.HTTPClient == nil {
		opts.HTTPClient = smallBufferClient(opts.ReceiveBuffer)
	}
	c := &Client{url: u, opts: opts, log: opts.Logger, changed: make(chan struct{}), closeDone: make(chan struct{})}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	conn, err := c.dial(ctx)
	if err != nil {
		return nil, err
	}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	c.conn, c.boot = conn, conn.Hello().Boot
	if opts.OnReconnect != nil || opts.OnDisconnect != nil {
		c.events = make(chan connEvent, 16) // before the supervisor reads it
		go c.callEvents()
	}
	c.wg.Add(1)
	go c.supervise(conn)
	return c, nil
}

// smallBufferClient returns an HTTP client whose loopback TCP connections
// have a receive buffer of size bytes (0: 64 KiB; negative: the OS
// default).
func smallBufferClient(size int) *http.Client {
	if size == 0 {
		size = 64 << 10
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	d := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}
	tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := d.DialContext(ctx, network, addr)
		if tc, ok := conn.(*net.TCPConn); ok && size > 0 {
			if a, ok := tc.RemoteAddr().(*net.TCPAddr); ok && a.IP.IsLoopback() {
				_ = tc.SetReadBuffer(size) // Best effort: the default only costs latency.
			}
		}
		return conn, err
	}
	return &http.Client{Transport: tr}
}

// wsURL turns http(s)://host[:port][/path] into ws(s)://host/ws.
func wsURL(raw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return "", fmt.Errorf("client: bad url %q: want e.g. http://127.0.0.1:3000", raw)
	}
	switch u.Scheme {
	case "http":
		u.Scheme = "ws"
	case "https":
		u.Scheme = "wss"
	case "ws", "wss":
	default:
		return "", fmt.Errorf("client: bad url %q: scheme must be http, https, ws or wss", raw)
	}
	if u.Path == "" || u.Path == "/" {
		u.Path = "/ws"
	}
	return u.String(), nil
}

func (c *Client) dial(ctx context.Context) (*mux.Conn, error) {
	h := http.Header{}
	for k, v := range c.opts.Header {
		h[k] = v
	}
	if c.opts.Token != "" {
		h.Set("Authorization", "Bearer "+c.opts.Token)
	}
	cfg := mux.DefaultConfig()
	if c.opts.Config != nil {
		cfg = *c.opts.Config
	}
	conn, err := mux.Dial(ctx, c.url, mux.DialOptions{Header: h, Client: c.opts.Name, Config: cfg, HTTPClient: c.opts.HTTPClient})
	if err != nil {
		return nil, fmt.Errorf("client: connect to %s: %w", c.url, err)
	}
	if fn := c.opts.OnNotify; fn != nil {
		conn.OnNotify(fn)
	}
	return conn, nil
}

// supervise waits for conn to end and dials again with backoff, until
// Close.
func (c *Client) supervise(conn *mux.Conn) {
	defer c.wg.Done()
	for {
		select {
		case <-conn.Done():
		case <-c.ctx.Done():
			_ = conn.Close() // Best effort.
			return
		}
		c.setConn(nil)
		err := conn.Err()
		if err == nil {
			err = ErrDisconnected
		}
		if c.opts.NoReconnect {
			c.log.Info("disconnected", "err", conn.Err())
			c.event(connEvent{err: err})
			return
		}
		c.log.Info("disconnected; reconnecting", "err", conn.Err())
		c.event(connEvent{err: err})
		next := c.redial(err)
		if next == nil {
			return
		}
		conn = next
	}
}

// redial dials until it succeeds or the client closes; lost is why the
// connection ended. Calls fail with ErrUnreachable once
// Options.Unreachable has passed, on time rather than at the next
// attempt (the backoff may be seconds away).
func (c *Client) redial(lost error) *mux.Conn {
	backoff := 20 * time.Millisecond
	var lastErr atomic.Pointer[error]
	lastErr.Store(&lost) // until a dial fails
	if c.opts.Unreachable > 0 {
		giveUp := time.AfterFunc(c.opts.Unreachable, func() {
			c.setUnreachable(fmt.Errorf("%w for %v: %v", ErrUnreachable, c.opts.Unreachable, *lastErr.Load()))
		})
		defer giveUp.Stop()
	}
	for attempt := 1; ; attempt++ {
		ctx, cancel := context.WithTimeout(c.ctx, 10*time.Second)
		conn, err := c.dial(ctx)
		cancel()
		if err != nil {
			lastErr.Store(&err)
		}
		if err == nil {
			boot := conn.Hello().Boot
			c.mu.Lock()
			restarted := boot != c.boot
			c.boot = boot
			c.mu.Unlock()
			c.setConn(conn)
			c.log.Info("reconnected", "attempt", attempt, "restarted", restarted)
			c.event(connEvent{boot: boot, restarted: restarted})
			return conn
		}
		t := time.NewTimer(backoff)
		select {
		case <-c.ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
		backoff = min(backoff*2, c.opts.MaxBackoff)
	}
}

// setUnreachable fails the calls that wait for a connection with err,
// unless one has just been made.
func (c *Client) setUnreachable(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.conn != nil {
		return
	}
	first := c.unreachable == nil
	c.unreachable = err
	if first {
		c.log.Warn("giving up waiting for the daemon", "err", err)
		close(c.changed)
		c.changed = make(chan struct{})
	}
}

func (c *Client) setConn(conn *mux.Conn) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.conn = conn
	c.unreachable = nil
	close(c.changed)
	c.changed = make(chan struct{})
}

// Conn waits for a live connection (while reconnecting) and returns it.
func (c *Client) Conn(ctx context.Context) (*mux.Conn, error) {
	for {
		c.mu.Lock()
		if c.closed {
			c.mu.Unlock()
			return nil, ErrClosed
		}
		conn, changed, unreachable := c.conn, c.changed, c.unreachable
		c.mu.Unlock()
		if conn != nil {
			select {
			case <-conn.Done():
			default:
				return conn, nil
			}
		}
		if unreachable != nil {
			return nil, unreachable
		}
		if c.opts.NoReconnect && conn == nil {
			return nil, ErrDisconnected
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-changed:
		case <-c.ctx.Done():
			return nil, ErrClosed
		}
	}
}

// Boot returns the daemon's boot id as of the last connection.
func (c *Client) Boot() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.boot
}

// background runs fn (a kill of a cancelled exec, bounded in time) on
// a goroutine that Close lets finish first, unless the client is closing.
func (c *Client) background(fn func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closing {
		return
	}
	c.bg.Add(1)
	go func() {
		defer c.bg.Done()
		fn()
	}()
}

// Close ends the connection and stops reconnecting. A kill of a
// cancelled exec still under way goes out first (within 3 s).
func (c *Client) Close() error {
	c.mu.Lock()
	if c.closing {
		c.mu.Unlock()
		<-c.closeDone // the first Close's work is done when this returns
		return nil
	}
	c.closing = true
	c.mu.Unlock()
	defer close(c.closeDone)
	done := make(chan struct{})
	go func() {
		c.bg.Wait()
		close(done)
	}()
	t := time.NewTimer(3 * time.Second)
	select {
	case <-done:
	case <-t.C:
	}
	t.Stop()
	c.mu.Lock()
	c.closed = true
	conn := c.conn
	c.mu.Unlock()
	c.cancel()
	if conn != nil {
		_ = conn.Close() // Best effort.
	}
	c.wg.Wait()
	return nil
}

// Call sends one JSON-RPC request. If the socket drops while it is
// pending, Call returns ErrDisconnected (it is not resent: it may have
// run). Errors from the daemon are *mux.Error.
//
// A request the daemon refused as busy (too many in flight on this
// socket) was not run: Call sends it again after a short backoff.
func (c *Client) Call(ctx context.Context, method string, params, result any) error {
	for backoff := time.Millisecond; ; backoff = min(backoff*2, 100*time.Millisecond) {
		conn, err := c.Conn(ctx)
		if err != nil {
			return err
		}
		err = conn.Call(ctx, method, params, result)
		if err != nil && lost(conn, err) {
			if c.ctx.Err() != nil {
				return ErrClosed // Close ended the socket
			}
			return fmt.Errorf("%s: %w", method, ErrDisconnected)
		}
		if !mux.IsOverload(err) || !sleepCtx(ctx, backoff) {
			return err
		}
	}
}

// callIdempotent is Call that also resends the request after a
// reconnect: for requests that may safely run twice (reads, waits, kills).
func (c *Client) callIdempotent(ctx context.Context, method string, params, result any) error {
	_, err := c.callRetrying(ctx, method, params, result)
	return err
}

// callRemove is callIdempotent for a call that removes what it names: a
// not_found answer to a call sent again after a drop means the first one
// did it, and is success.
func (c *Client) callRemove(ctx context.Context, method string, params any) error {
	resent, err := c.callRetrying(ctx, method, params, nil)
	if resent && IsCode(err, mux.CodeNotFound) {
		return nil
	}
	return err
}

// callCreate sends a create call. With an id made up here for this call
// (made), a create whose answer a dropped socket lost is not lost with
// it: before the call goes again, find looks the id up, and what the
// first send made is the answer (no one else used that id). The call
// goes again only when nothing has the id; if it then finds the id taken
// (the first send was still on its way), find waits for what that makes,
// and the call goes once more if nothing appears. A caller's own id gets
// one send, as before: a daemon replaces an ended holder of an id, so
// sending again could run a command twice. So may a send to a restarted
// daemon when the first one's child outlived its daemon: with
// onceAcrossRestarts (a process), that is an error instead.
func (c *Client) callCreate(ctx context.Context, method string, made, onceAcrossRestarts bool, params, result any, find func(context.Context) (bool, error)) error {
	if !made {
		return c.Call(ctx, method, params, result)
	}
	dropped, sentTo := false, "" // a send's socket dropped; its daemon's boot
	for backoff := time.Millisecond; ; {
		if dropped {
			found, err := find(ctx)
			if err != nil || found {
				return err
			}
			if onceAcrossRestarts && c.Boot() != sentTo {
				return fmt.Errorf("%s: %w, and the daemon restarted: it may have started there, and is not sent again", method, ErrDisconnected)
			}
		}
		conn, err := c.Conn(ctx)
		if err != nil {
			return err
		}
		err = conn.Call(ctx, method, params, result)
		switch {
		case err != nil && lost(conn, err):
			dropped, sentTo = true, conn.Hello().Boot
			continue
		case mux.IsOverload(err) && sleepCtx(ctx, backoff):
			backoff = min(backoff*2, 100*time.Millisecond)
			continue
		case dropped && IsCode(err, mux.CodeAlreadyExists):
			if found, err := awaitFound(ctx, find); err != nil || found {
				return err
			}
			continue // made and gone, or never made: send again
		}
		return err
	}
}

// awaitFound calls find until it finds what a create made (a session is
// listed once its shell runs), for up to 10 s.
func awaitFound(ctx context.Context, find func(context.Context) (bool, error)) (bool, error) {
	deadline := time.Now().Add(10 * time.Second)
	for backoff := 5 * time.Millisecond; ; backoff = min(backoff*2, 200*time.Millisecond) {
		found, err := find(ctx)
		if err != nil || found || time.Now().After(deadline) {
			return found, err
		}
		if !sleepCtx(ctx, backoff) {
			return false, ctx.Err()
		}
	}
}

// callRetrying sends the call until a socket answers it (see
// callIdempotent); resent reports whether a socket that took it dropped
// first (so it may have run).
func (c *Client) callRetrying(ctx context.Context, method string, params, result any) (resent bool, err error) {
	for backoff := time.Millisecond; ; {
		conn, err := c.Conn(ctx)
		if err != nil {
			return resent, err
		}
		err = conn.Call(ctx, method, params, result)
		switch {
		case err != nil && lost(conn, err):
			resent = true
			continue
		case mux.IsOverload(err) && sleepCtx(ctx, backoff):
			backoff = min(backoff*2, 100*time.Millisecond)
			continue
		}
		return resent, err
	}
}

// sleepCtx waits d, or returns false when ctx ends first.
// ceilMs is d in whole milliseconds, rounded up: a timeout under 1 ms
// must not become 0, which the daemon reads as none.
func ceilMs(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return int64((d + time.Millisecond - 1) / time.Millisecond)
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// lost reports whether err came from the connection ending rather than
// from the daemon's answer.
func lost(conn *mux.Conn, err error) bool {
	var e *mux.Error
	if errors.As(err, &e) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	// Err is set before the connection fails its channels and calls;
	// Done closes a moment later.
	return conn.Err() != nil
}

// ServerInfo is the result of server.info.
type ServerInfo struct {
	Version  string          `json:"version"`
	Protocol string          `json:"protocol"`
	Boot     string          `json:"boot"`
	Limits   json.RawMessage `json:"limits"`
	Pid      int             `json:"pid"`
	DataDir  string          `json:"dataDir"`
}

// ServerInfo asks the daemon who it is.
func (c *Client) ServerInfo(ctx context.Context) (ServerInfo, error) {
	var r ServerInfo
	err := c.callIdempotent(ctx, "server.info", nil, &r)
	return r, err
}
