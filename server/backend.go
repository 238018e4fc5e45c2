package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/muxd/muxd/mux"
	"github.com/muxd/muxd/pty"
)

// backend holds the engines behind the routes and the wsmux router that
// maps RPC methods and channel kinds onto them.
type backend struct {
	s      *Server
	terms  *pty.Manager
	router *mux.Router
	muxCfg mux.Config
	notify *notifier
	engine execEngine
	// info is server.info's answer, encoded once (see rpc_server.go).
	info func() (json.RawMessage, error)
}

func newBackend(s *Server) (*backend, error) {
	b := &backend{s: s, notify: newNotifier(s.log)}
	b.muxCfg = mux.DefaultConfig()
	b.muxCfg.MaxChannels = s.cfg.MaxChannels
	b.muxCfg.ConnBudget = s.cfg.ConnBudget
	b.muxCfg.MaxRPCRequest = s.cfg.MaxRPCRequest
	b.muxCfg.MaxRPCResponse = s.cfg.MaxRPCResponse
	b.muxCfg.MaxRPCInflight = s.cfg.MaxRPCInflight
	b.muxCfg.MaxLongInflight = s.cfg.MaxLongInflight
	b.muxCfg.CloseTimeout = time.Second // shutdown must finish within 5 s
	b.muxCfg.LimitNames = map[string]string{
		"maxChannels":    "muxd serve --max-channels",
		"maxRpcRequest":  "muxd serve --max-rpc-request",
		"maxRpcResponse": "muxd serve --max-rpc-response",
	}

	b.terms = pty.NewManager(pty.Config{
		MaxTerminals: s.cfg.MaxTerminals,
		DefaultShell: s.cfg.Shell,
		Logger:       s.log,
		OnCreate:     func(i pty.Info) { b.notify.send("terminal.created", terminalToWire(i)) },
		OnExit: func(i pty.Info) {
			b.notify.send("terminal.exited", map[string]any{"id": i.ID, "exitCode": i.ExitCode, "signal": nullIfEmpty(i.Signal)})
		},
	})
	var err error
	if b.engine, err = newExecEngine(s, b.notify); err != nil {
		return nil, err
	}
	b.info = sync.OnceValues(b.encodeServerInfo)
	b.router = mux.NewRouter()
	b.register()
	return b, nil
}

func nullIfEmpty(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// close kills every process tree and terminal.
func (b *backend) close(ctx context.Context) {
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		if err := b.terms.Close(ctx); err != nil {
			b.s.log.Warn("closing terminals", "err", err)
		}
	}()
	go func() {
		defer wg.Done()
		if err := b.engine.close(ctx, b.s.log); err != nil {
			b.s.log.Warn("closing exec engine", "err", err)
		}
	}()
	wg.Wait()
}

// serveWS runs one wsmux/1 connection until it ends.
func (b *backend) serveWS(w http.ResponseWriter, r *http.Request) {
	s := b.s
	k := &socket{kind: "ws", netConn: netConnOf(r), settled: make(chan struct{})}
	limitSendBuffer(k.netConn)
	if !s.track(k) {
		http.Error(w, "muxd is shutting down", http.StatusServiceUnavailable)
		return
	}
	defer s.untrack(k)
	start := time.Now()
	conn, err := mux.Accept(w, r, b.muxCfg, b.router, mux.ServerInfo{
		Name: "muxd/" + s.cfg.Version, Boot: s.boot, SkipOriginCheck: true, // checked by protect
		OnAccept: b.notify.add,
	})
	if err != nil {
		s.log.Info("connection failed", "remote", r.RemoteAddr, "err", err)
		return
	}
	k.setGoAway(func(limit time.Duration) {
		conn.GoAway(mux.CodeInternal, "muxd is shutting down")
	})
	defer b.notify.remove(conn)
	// The client's name is the peer's to choose: a line per connection
	// must not carry 500 KB of it.
	name := conn.Hello().Client
	if len(name) > 128 {
		name = fmt.Sprintf("%.128q…", name)
	}
	s.log.Info("connection opened", "remote", r.RemoteAddr, "client", name)
	<-conn.Done()
	s.log.Info("connection closed", "remote", r.RemoteAddr, "client", name,
		"duration", time.Since(start).Round(time.Millisecond).String(), "reason", errString(conn.Err()))
}

// sendBuffer bounds what the kernel holds of a /ws socket's output (64
// KiB). The writer serves keystroke echo before bulk output, but bytes
// already handed to the kernel cannot be reordered: with the default
// autotuned buffer (several MiB on loopback) an echo could wait behind
// ~10 ms of bulk.
//   - On loopback the send buffer itself is capped (the kernel doubles
//     it): with no round trip to cover, it costs no throughput, and
//     measured with make bench against 256 KiB the echo p99 under a flood
//     was about a fifth lower (TCP_NOTSENT_LOWAT alone did worse there).
//   - Over a network a capped send buffer would cap throughput at
//     buffer/RTT, so only unsent bytes are bounded (TCP_NOTSENT_LOWAT):
//     bytes in flight are left to the congestion window.
const sendBuffer = 64 << 10

func limitSendBuffer(c net.Conn) {
	if tc := tcpConnOf(c); tc != nil {
		a, _ := tc.RemoteAddr().(*net.TCPAddr)
		boundSendQueue(tc, a != nil && a.IP.IsLoopback())
	}
}

// boundSendQueue applies sendBuffer to tc, the loopback way or the
// network way.
func boundSendQueue(tc *net.TCPConn, loopback bool) {
	if loopback {
		_ = tc.SetWriteBuffer(sendBuffer) // Best effort: the default only costs latency.
		return
	}
	if rc, err := tc.SyscallConn(); err == nil {
		_ = rc.Control(func(fd uintptr) {
			_ = unix.SetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_NOTSENT_LOWAT, sendBuffer) // Best effort, as above.
		})
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// terminalHandler is the /ws/terminal compatibility endpoint, with the
// server's auth, socket tracking and session lookup.
func (b *backend) terminalHandler() http.Handler {
	s := b.s
	return NewTerminalHandler(b.terms, TerminalHandlerOptions{
		Authorize: s.auth.authorize,
		SessionState: func(id string) (string, []string, bool) {
			cwd, env, err := b.sessionState(id)
			return cwd, env, err == nil && (cwd != "" || env != nil)
		},
		Track: func(r *http.Request, goAway func(limit time.Duration)) (func(), bool) {
			k := &socket{kind: "terminal", netConn: netConnOf(r)}
			k.setGoAway(goAway)
			if !s.track(k) {
				return nil, false
			}
			return func() { s.untrack(k) }, true
		},
		Logger: s.log,
	})
}

// register maps every docs/protocol.md method and channel kind.
func (b *backend) register() {
	rt := b.router
	rt.Handle("server.info", b.serverInfo)
	rt.Handle("terminal.create", b.terminalCreate)
	rt.Handle("terminal.list", b.terminalList)
	rt.Handle("terminal.update", b.terminalUpdate)
	rt.Handle("terminal.destroy", b.terminalDestroy)
	rt.HandleOpen("terminal", channelCodes(b.openTerminal))
	b.registerExec()
}
