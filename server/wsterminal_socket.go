package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/coder/websocket"
	"golang.org/x/sys/unix"

	"github.com/muxd/muxd/internal/proc"
	"github.com/muxd/muxd/mux"
	"github.com/muxd/muxd/pty"
)

// termSocket is one /ws/terminal connection: an attachment pumped to the
// socket as binary frames, and keystrokes and JSON control read from it.
type termSocket struct {
	h      *terminalHandler
	q      terminalQuery
	remote string
	raw    syscall.RawConn // the TCP connection under the socket; nil if unknown

	// mu guards conn and closing, for goAway (which may run before the
	// upgrade completed).
	mu      sync.Mutex
	conn    *websocket.Conn
	closing bool

	// typingSince is when the read loop began typing the message it is
	// typing (UnixNano; 0 when it is not), and blockedAt when a typing
	// that kept it from reading for half a ping interval or more ended. A
	// pong is only seen by a reading socket, so a ping unanswered while
	// the loop was blocked on a program that does not read its input says
	// nothing about the peer.
	typingSince atomic.Int64
	blockedAt   atomic.Int64

	// readySent is set once ready went out, and lastSent is when a frame
	// last did (UnixNano): an idle socket gets a heartbeat (see ping).
	readySent atomic.Bool
	lastSent  atomic.Int64
}

// heartbeatMessage keeps a proxied socket from looking idle: WebSocket
// pings are answered hop by hop, and Cloudflare's proxy forwards only
// messages, so pings never reach the browser's side, which is cut after
// about 100 s without one. The SDK's addon ignores message types it does
// not know.
var heartbeatMessage = []byte(`{"type":"heartbeat"}`)

// Server → client control messages.
type termReady struct {
	Type   string `json:"type"`
	Cursor int64  `json:"cursor"`
}

type termExit struct {
	Type   string  `json:"type"`
	Code   int     `json:"code"`
	Signal *string `json:"signal"`
	Cursor int64   `json:"cursor"`
}

type termError struct {
	Type    string `json:"type"`
	Message string `json:"message"`
}

// termControl is a client → server text message.
type termControl struct {
	Type string `json:"type"`
	Cols *int   `json:"cols"`
	Rows *int   `json:"rows"`
}

func (s *termSocket) serve(ctx context.Context, conn *websocket.Conn, t *pty.Terminal, created bool) {
	h := s.h
	s.mu.Lock()
	s.conn = conn
	closing := s.closing
	s.mu.Unlock()
	idless := s.q.id == ""
	defer func() {
		if idless {
			h.m.DestroyTerminal(t) // id-less terminals die with their socket
		}
	}()
	if closing {
		_ = conn.Close(websocket.StatusGoingAway, "muxd is shutting down") // Best effort.
		return
	}
	start := time.Now()
	// The SandboxAddon keeps its xterm.js across reconnects, in whatever
	// modes the last terminal left it (alternate screen, mouse), and its
	// clear() keeps the cursor's line: without a cursor, reset the modes
	// and clear the screen ahead of the replay, or the replay is drawn
	// over what the addon left (the addon clears only when no byte came
	// before ready, and the reset is such a byte).
	// A cursor counts bytes of one terminal instance: one past the end,
	// or given for a terminal this socket has just created (the one it
	// was seen on had exited), is another's, and the viewer is new here.
	from := s.q.cursor
	if created || from > t.Info().End {
		from = -1
	}
	a, _, err := t.Attach(pty.AttachOptions{From: from, ResetModes: true, ClearScreen: true})
	if err != nil {
		_ = conn.Close(websocket.StatusInternalError, "terminal gone") // Best effort.
		return
	}
	h.log.Info("terminal socket opened", "remote", s.remote, "id", t.ID(), "instance", t.Instance(), "created", created, "cursor", s.q.cursor)

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if s.raw != nil {
		a.SetInline(func(p []byte) bool { return s.sendNow(ctx, conn, p) })
		// A peer that vanished without a reset (a network cut) leaves the
		// pings unacknowledged: the kernel then fails the socket, which
		// ends the wait of a ping the read loop cannot see answered.
		if ms := 2 * h.opts.PingInterval.Milliseconds(); ms > 0 {
			_ = s.raw.Control(func(fd uintptr) {
				_ = unix.SetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_USER_TIMEOUT, int(ms)) // Best effort.
			})
		}
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		s.pump(ctx, conn, a)
		cancel()
	})
	wg.Go(func() {
		s.ping(ctx, conn)
		cancel() // a dead peer also ends a keystroke write the program does not read
	})
	reason := s.read(ctx, conn, a)
	cancel()
	a.Detach()
	wg.Wait()
	_ = conn.CloseNow() // Best effort: usually closed already.
	h.log.Info("terminal socket closed", "remote", s.remote, "id", t.ID(), "instance", t.Instance(),
		"duration", time.Since(start).Round(time.Millisecond).String(), "reason", reason)
}

// pump sends replay and live output as binary frames, ready after the
// replay, and exit (then close 1000) after the last byte.
func (s *termSocket) pump(ctx context.Context, conn *websocket.Conn, a *pty.Attachment) {
	buf := make([]byte, terminalFrame)
	for {
		ev, err := a.Next(ctx, buf)
		if err != nil {
			return
		}
		switch ev.Kind {
		case pty.EventData:
			err = conn.Write(ctx, websocket.MessageBinary, ev.Data)
		case pty.EventSync:
			err = s.writeJSON(ctx, conn, termReady{Type: "ready", Cursor: ev.Offset})
			s.readySent.Store(true)
		case pty.EventGap:
			// The protocol has no gap message: the client's cursor simply
			// jumps (ready.cursor and exit.cursor stay exact).
		case pty.EventExit:
			if err := s.writeJSON(ctx, conn, exitMessage(ev)); err == nil {
				_ = conn.Close(websocket.StatusNormalClosure, "") // Best effort.
			}
			return
		}
		if err != nil {
			_ = conn.CloseNow() // Best effort: ends the read loop.
			return
		}
		s.lastSent.Store(time.Now().UnixNano())
	}
}

// sendNow sends an echo from the terminal's reader (pty's SetInline),
// sparing a hand-off to pump, but only when the socket takes it without
// waiting and is not closing: the reader must never wait for a slow
// client or a close handshake. It reports whether it sent p.
func (s *termSocket) sendNow(ctx context.Context, conn *websocket.Conn, p []byte) bool {
	s.mu.Lock()
	closing := s.closing
	s.mu.Unlock()
	if closing || !writable(s.raw) {
		return false
	}
	if err := conn.Write(ctx, websocket.MessageBinary, p); err != nil {
		// Not here: during a close handshake CloseNow waits for it.
		go conn.CloseNow() // Best effort: ends the read loop, and so the socket.
	}
	s.lastSent.Store(time.Now().UnixNano())
	return true
}

// exitMessage reports the shell's status: for a signal, code is 128+n as a
// shell would show it, and signal its name.
func exitMessage(ev pty.Event) termExit {
	m := termExit{Type: "exit", Code: ev.Exit.Code, Cursor: ev.Offset}
	if ev.Exit.Signal != "" {
		sig := ev.Exit.Signal
		m.Signal = &sig
		if n, err := proc.ParseSignal(sig); err == nil {
			m.Code = 128 + int(n)
		}
	}
	return m
}

func (s *termSocket) writeJSON(ctx context.Context, conn *websocket.Conn, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return conn.Write(ctx, websocket.MessageText, b)
}

// read types binary frames into the terminal and applies text control
// messages until the socket ends; it returns why.
func (s *termSocket) read(ctx context.Context, conn *websocket.Conn, a *pty.Attachment) string {
	// A spare byte so that a full-size control message reads to its EOF.
	buf := make([]byte, max(terminalFrame, maxControlMessage+1))
	for {
		typ, rd, err := conn.Reader(ctx)
		if err != nil {
			return closeReason(err)
		}
		if typ == websocket.MessageBinary {
			// Read whole before any of it is typed: a message over the
			// read limit closes the socket with 1009 (coder/websocket),
			// and none of it may reach the shell. A paste larger than
			// buf is held only while it is typed, in pieces. Best
			// effort: an exited terminal drops input; the context ends
			// the wait when the socket goes while the program does not
			// read.
			msg, err := readMessage(rd, buf)
			if err != nil {
				return closeReason(err)
			}
			began := time.Now()
			s.typingSince.Store(began.UnixNano())
			for len(msg) > 0 {
				n := min(len(msg), terminalFrame)
				_, _ = a.WriteContext(ctx, msg[:n])
				msg = msg[n:]
			}
			s.typingSince.Store(0)
			if time.Since(began) >= s.h.opts.PingInterval/2 {
				s.blockedAt.Store(time.Now().UnixNano())
			}
			continue
		}
		n, err := io.ReadFull(rd, buf[:maxControlMessage+1])
		if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
			return closeReason(err)
		}
		msg := buf[:n]
		problem := ""
		if n > maxControlMessage {
			if _, err := io.Copy(io.Discard, rd); err != nil {
				return closeReason(err)
			}
			problem = fmt.Sprintf("control message over %d bytes", maxControlMessage)
		} else {
			problem = s.control(a, msg)
		}
		if problem != "" {
			if err := s.writeJSON(ctx, conn, termError{Type: "error", Message: problem}); err != nil {
				return closeReason(err)
			}
		}
	}
}

// readMessage reads a whole message into buf, or into a larger buffer
// for a larger message (bounded by the socket's read limit).
func readMessage(rd io.Reader, buf []byte) ([]byte, error) {
	n, err := io.ReadFull(rd, buf)
	switch {
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return buf[:n], nil
	case err != nil:
		return nil, err
	}
	var big bytes.Buffer
	big.Write(buf)
	if _, err := big.ReadFrom(rd); err != nil {
		return nil, err
	}
	return big.Bytes(), nil
}

// control applies one text message and returns a problem to report, or "".
func (s *termSocket) control(a *pty.Attachment, msg []byte) string {
	var c termControl
	if err := mux.UnmarshalExact(msg, &c); err != nil {
		return "invalid control message: " + err.Error()
	}
	switch c.Type {
	case "resize":
		if c.Cols == nil || c.Rows == nil || *c.Cols < 1 || *c.Rows < 1 || *c.Cols > pty.MaxSize || *c.Rows > pty.MaxSize {
			return fmt.Sprintf("resize needs integer cols and rows from 1 to %d", pty.MaxSize)
		}
		if err := a.Resize(*c.Cols, *c.Rows); err != nil && !errors.Is(err, pty.ErrExited) {
			return "resize failed: " + err.Error()
		}
		return ""
	case "":
		return `control message without "type"`
	default:
		return fmt.Sprintf("unknown control message type %q", c.Type)
	}
}

// ping keeps the socket alive through idle-cutting intermediaries (with
// a heartbeat message after two intervals without a frame) and drops a
// peer that stopped answering.
func (s *termSocket) ping(ctx context.Context, conn *websocket.Conn) {
	every := s.h.opts.PingInterval
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		pctx, cancel := context.WithTimeout(ctx, 2*every)
		err := conn.Ping(pctx)
		cancel()
		if err != nil && ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) && s.blockedWithin(2*every) {
			// No pong, but none could be read: the read loop is typing a
			// paste the program does not take. A vanished peer still
			// fails the next ping's write.
			continue
		}
		if err != nil {
			if ctx.Err() == nil {
				s.h.log.Info("terminal socket: peer stopped answering pings", "remote", s.remote)
				_ = conn.CloseNow() // Best effort: ends the read loop.
			}
			return
		}
		if s.readySent.Load() && time.Since(time.Unix(0, s.lastSent.Load())) >= 2*every {
			// Bounded: a stalled socket must not stop the pings.
			hctx, cancel := context.WithTimeout(ctx, every)
			_ = conn.Write(hctx, websocket.MessageText, heartbeatMessage) // Best effort: pings find a dead peer.
			cancel()
			s.lastSent.Store(time.Now().UnixNano())
		}
	}
}

// blockedWithin reports whether the read loop was kept from reading, by
// a program not taking its input, for half a ping interval or more at
// some time in the last d.
func (s *termSocket) blockedWithin(d time.Duration) bool {
	if since := s.typingSince.Load(); since != 0 && time.Since(time.Unix(0, since)) >= s.h.opts.PingInterval/2 {
		return true
	}
	at := s.blockedAt.Load()
	return at != 0 && time.Since(time.Unix(0, at)) < d
}

// goAway closes the socket with 1001 for shutdown, within limit.
func (s *termSocket) goAway(limit time.Duration) {
	s.mu.Lock()
	s.closing = true
	conn := s.conn
	s.mu.Unlock()
	if conn == nil {
		return
	}
	done := make(chan struct{})
	go func() {
		_ = conn.Close(websocket.StatusGoingAway, "muxd is shutting down") // Best effort.
		close(done)
	}()
	t := time.NewTimer(limit)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
		_ = conn.CloseNow() // Best effort.
	}
}

func closeReason(err error) string {
	if st := websocket.CloseStatus(err); st != -1 {
		return fmt.Sprintf("closed %d", int(st))
	}
	return err.Error()
}
