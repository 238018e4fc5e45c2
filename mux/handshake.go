package mux

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/coder/websocket"
)

// ServerInfo is what a server says in its HELLO, and how it accepts.
type ServerInfo struct {
	Name string // "muxd/ver"
	Boot string // uuid, new each time the daemon starts
	// OriginPatterns are passed to the WebSocket library's origin check.
	// A server that checks Origin itself (muxd does, only for requests
	// without a valid token) sets SkipOriginCheck instead.
	OriginPatterns  []string
	SkipOriginCheck bool
	// OnAccept, if set, runs once the client's HELLO is read, before the
	// connection serves anything: a server registers the connection
	// there for events, so a notification caused by its first request
	// (process.started after process.start) cannot come before it is
	// registered and miss it.
	OnAccept func(*Conn)
}

// Accept upgrades an HTTP request to a wsmux/1 connection: it negotiates
// the wsmux.v1 subprotocol, reads the client's HELLO (within
// HandshakeTimeout), answers with the server HELLO and starts the reader
// and writer. It returns once the connection is established; wait on
// Conn.Done for its end. Authentication happens before Accept.
func Accept(w http.ResponseWriter, r *http.Request, cfg Config, rt *Router, info ServerInfo) (*Conn, error) {
	cfg = cfg.withDefaults()
	// Room for a whole DATA frame and its WebSocket header (see hijack.go).
	w = bigWriterHijacker{ResponseWriter: w, size: headerLen + cfg.MaxFrame + 16}
	ws, err := websocket.Accept(w, r, &websocket.AcceptOptions{
		Subprotocols:       []string{Subprotocol},
		OriginPatterns:     info.OriginPatterns,
		InsecureSkipVerify: info.SkipOriginCheck,
	})
	if err != nil {
		return nil, fmt.Errorf("mux: accept: %w", err)
	}
	c := newConn(ws, cfg, true, rt)
	if ws.Subprotocol() != Subprotocol {
		c.fail(StatusProtocol, "subprotocol wsmux.v1 required")
		return nil, c.err
	}
	ws.SetReadLimit(cfg.serverReadLimit())

	hello, err := c.readHello()
	if err != nil {
		return nil, err
	}
	c.peer = HelloInfo{V: hello.V, Client: hello.Client}
	lim := cfg.Limits()
	payload, _ := json.Marshal(helloMsg{V: 1, Server: info.Name, Boot: info.Boot, Limits: &lim}) // Cannot fail.
	f := getFrame(headerLen + len(payload))
	f.b = appendFrame(f.b, typeHello, 0, payload)
	c.pushUrgentLocked(f) // first frame: the writer is not running yet
	if info.OnAccept != nil {
		info.OnAccept(c)
	}
	c.start()
	return c, nil
}

// readHello reads the peer's first frame, which must be HELLO; on error
// the connection is already closed (4000, 4001 or the socket error).
func (c *Conn) readHello() (helloMsg, error) {
	done := make(chan struct{})
	t := time.AfterFunc(c.cfg.HandshakeTimeout, func() {
		select {
		case <-done:
		default:
			c.closing.Store(true)
			_ = c.ws.CloseNow() // Best effort: unblocks the read below.
		}
	})
	defer func() { close(done); t.Stop() }()

	msg, err := c.readMessage(nil)
	if err != nil {
		var pe *ProtocolError
		if errors.As(err, &pe) {
			c.fail(pe.Status, pe.Reason)
		} else {
			c.shutdown(c.readErr(err))
		}
		return helloMsg{}, c.Err()
	}
	h, p, err := decodeFrame(msg)
	if err != nil {
		c.fail(StatusProtocol, err.Error())
		return helloMsg{}, c.Err()
	}
	if h.Type() != typeHello {
		c.fail(StatusProtocol, "first frame is not HELLO")
		return helloMsg{}, c.Err()
	}
	hello, err := parseHello(p)
	switch {
	case errors.Is(err, errVersion):
		c.fail(StatusVersion, "unsupported version")
		return hello, c.Err()
	case err != nil:
		c.fail(StatusProtocol, "malformed HELLO")
		return hello, c.Err()
	}
	return hello, nil
}

// DialOptions configure Dial.
type DialOptions struct {
	Header     http.Header  // e.g. Authorization: Bearer T
	HTTPClient *http.Client // nil: http.DefaultClient
	Client     string       // "name/ver" sent in HELLO
	Config     Config       // zero fields take DefaultConfig values
}

// Dial connects to a wsmux/1 server at url (ws:// or wss://), sends
// HELLO, waits for the server's HELLO and starts the connection. ctx
// bounds the dial and the handshake only.
func Dial(ctx context.Context, url string, opts DialOptions) (*Conn, error) {
	cfg := opts.Config.withDefaults()
	ws, resp, err := websocket.Dial(ctx, url, &websocket.DialOptions{
		HTTPHeader:   opts.Header,
		HTTPClient:   opts.HTTPClient,
		Subprotocols: []string{Subprotocol},
	})
	if err != nil {
		if resp != nil {
			// The server's own words (a 503's "too many connections
			// (limit 3, see --max-connections)") say more than the status.
			var why string
			if resp.Body != nil {
				b, _ := io.ReadAll(io.LimitReader(resp.Body, 512)) // Best effort.
				if line, _, _ := strings.Cut(strings.TrimSpace(string(b)), "\n"); line != "" && resp.StatusCode != http.StatusSwitchingProtocols {
					why = ": " + line
				}
			}
			return nil, fmt.Errorf("mux: dial %s: %w (HTTP %d%s)", url, err, resp.StatusCode, why)
		}
		return nil, fmt.Errorf("mux: dial %s: %w", url, err)
	}
	c := newConn(ws, cfg, false, nil)
	ws.SetReadLimit(int64(max(cfg.MaxRPCResponse, cfg.MaxFrame)) + headerLen)
	client := opts.Client
	if client == "" {
		client = "muxd-go"
	}
	payload, _ := json.Marshal(helloMsg{V: 1, Client: client}) // Cannot fail.
	if err := ws.Write(ctx, websocket.MessageBinary, appendFrame(nil, typeHello, 0, payload)); err != nil {
		c.shutdown(err)
		return nil, fmt.Errorf("mux: dial %s: send HELLO: %w", url, err)
	}
	if d, ok := ctx.Deadline(); ok {
		c.cfg.HandshakeTimeout = min(c.cfg.HandshakeTimeout, time.Until(d))
	}
	hello, err := c.readHello()
	if err != nil {
		return nil, fmt.Errorf("mux: dial %s: %w", url, err)
	}
	c.cfg.HandshakeTimeout = cfg.HandshakeTimeout
	c.peer = HelloInfo{V: hello.V, Server: hello.Server, Boot: hello.Boot}
	if hello.Limits != nil {
		c.peer.Limits = *hello.Limits
		if l := hello.Limits; l.MaxFrame > 0 {
			c.sendMaxFrame, c.recvMaxFrame = l.MaxFrame, l.MaxFrame
		}
		ws.SetReadLimit(int64(max(hello.Limits.MaxRPCResponse, c.recvMaxFrame)) + headerLen)
	}
	c.start()
	return c, nil
}
