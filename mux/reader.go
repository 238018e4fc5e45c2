package mux

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/coder/websocket"
)

// readLoop is the one goroutine that reads the socket. It never blocks
// on a consumer: DATA goes to the channel's buffer, RPC requests to
// their own goroutines, CTRL callbacks must not block.
func (c *Conn) readLoop() {
	defer c.wg.Done()
	buf := make([]byte, 0, headerLen+c.recvMaxFrame)
	for {
		msg, err := c.readMessage(buf)
		if err != nil {
			var pe *ProtocolError
			if errors.As(err, &pe) {
				c.fail(pe.Status, pe.Reason)
			} else {
				c.shutdown(c.readErr(err))
			}
			return
		}
		if cap(msg) > cap(buf) && cap(msg) <= 256<<10 {
			buf = msg[:0] // keep a grown buffer unless it is huge
		}
		h, p, err := decodeFrame(msg)
		if err != nil {
			c.fail(StatusProtocol, err.Error())
			return
		}
		if pe := c.handleFrame(h, p); pe != nil {
			c.fail(pe.Status, pe.Reason)
			return
		}
	}
}

// readErr maps a socket read error to the connection's error.
func (c *Conn) readErr(err error) error {
	switch websocket.CloseStatus(err) {
	case StatusNormal:
		return fmt.Errorf("%w: peer closed the socket", ErrConnClosed)
	case StatusTooBig:
		return &ProtocolError{Status: StatusTooBig, Reason: "message too big"}
	case StatusGoingAway:
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.goaway != nil {
			return c.goaway
		}
		return ErrGoAway
	}
	if errors.Is(err, websocket.ErrMessageTooBig) {
		return &ProtocolError{Status: StatusTooBig, Reason: "message too big"}
	}
	return err
}

// readMessage reads one binary message into buf (growing it).
func (c *Conn) readMessage(buf []byte) ([]byte, error) {
	typ, r, err := c.ws.Reader(context.Background())
	if err != nil {
		return nil, err
	}
	if typ != websocket.MessageBinary {
		return nil, &ProtocolError{Status: StatusProtocol, Reason: "text message"}
	}
	buf = buf[:0]
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

func protoErr(reason string) *ProtocolError {
	return &ProtocolError{Status: StatusProtocol, Reason: reason}
}

// handleFrame applies one decoded frame. A returned error closes the
// connection.
func (c *Conn) handleFrame(h header, p []byte) *ProtocolError {
	id := h.Channel()
	switch t := h.Type(); t {
	case typeHello:
		return protoErr("duplicate HELLO")
	case typeRPC:
		c.handleRPC(p)
	case typePing:
		c.queuePong(p)
	case typePong:
		c.handlePong(p)
	case typeGoAway:
		if c.server {
			return protoErr("GOAWAY from client")
		}
		e, err := parseErrorPayload(p)
		if err != nil {
			return protoErr("malformed GOAWAY")
		}
		c.mu.Lock()
		c.goaway = e
		c.mu.Unlock()
	case typeOpen:
		if !c.server {
			return protoErr("OPEN from server")
		}
		return c.handleOpen(id, p)
	case typeOpenOK, typeOpenFail:
		if c.server {
			return protoErr(t.String() + " from client")
		}
		return c.handleOpenReply(t, id, p)
	case typeData:
		c.handleData(id, p)
	case typeWindow:
		c.handleWindow(id, windowIncrement(p))
	case typeEOF:
		c.mu.Lock()
		if ch := c.channels[id]; ch != nil {
			ch.peerEOF = true
			ch.cond.Broadcast()
		}
		c.mu.Unlock()
	case typeClose:
		e, err := parseErrorPayload(p)
		if err != nil {
			return protoErr("malformed CLOSE")
		}
		var cerr error = ErrChannelClosed
		if e != nil {
			cerr = e
		}
		c.mu.Lock()
		if ch := c.channels[id]; ch != nil {
			if !ch.openDone {
				ch.openErr = cerr
			}
			ch.dropLocked(cerr, false)
		}
		c.mu.Unlock()
	case typeCtrl:
		return c.handleCtrl(id, p)
	}
	return nil
}

// queuePong answers a mux PING; a peer flooding PINGs loses some PONGs.
func (c *Conn) queuePong(p []byte) {
	f := getFrame(headerLen + len(p))
	f.b = appendFrame(f.b, typePong, 0, p)
	f.pong = true
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed || c.pongs >= maxPendingPongs {
		putFrame(f)
		return
	}
	c.pongs++
	c.urgent.push(f)
	c.writerCond.Signal()
}

// handleData stores DATA in the channel's buffer, or closes the channel
// for a frame over maxFrame, beyond credit, or after EOF.
func (c *Conn) handleData(id uint32, p []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch := c.channels[id]
	if ch == nil {
		return // unknown or closed: dropped
	}
	var e *Error
	switch {
	case len(p) > c.recvMaxFrame:
		e = NewError(CodeFrameSize, "DATA of %d bytes exceeds maxFrame (%d)", len(p), c.recvMaxFrame)
	case int64(len(p)) > ch.recvAvail:
		e = NewError(CodeFlowControl, "DATA of %d bytes with %d bytes of credit", len(p), ch.recvAvail)
	case ch.peerEOF:
		e = NewError(CodeProtocol, "DATA after EOF")
	}
	if e != nil {
		ch.queueCloseLocked(e)
		ch.dropLocked(e, true)
		return
	}
	ch.recvAvail -= int64(len(p))
	ch.in.putData(p, int(ch.granted))
	ch.cond.Broadcast()
}

// handleWindow adds send credit; credit past 2^31-1 closes the channel.
func (c *Conn) handleWindow(id uint32, n uint32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch := c.channels[id]
	if ch == nil {
		return
	}
	ch.sendCredit += int64(n)
	if ch.sendCredit > maxWindow {
		e := NewError(CodeFlowControl, "credit exceeds 2^31-1")
		ch.queueCloseLocked(e)
		ch.dropLocked(e, true)
		return
	}
	ch.cond.Broadcast()
}

// handleCtrl delivers a CTRL op: out of band on the server (the callback
// runs here), in band on the client (queued with the DATA).
func (c *Conn) handleCtrl(id uint32, p []byte) *ProtocolError {
	if !json.Valid(p) {
		return protoErr("malformed CTRL")
	}
	c.mu.Lock()
	ch := c.channels[id]
	if ch == nil {
		c.mu.Unlock()
		return nil
	}
	op := json.RawMessage(append([]byte(nil), p...))
	if !c.server {
		ch.in.putCtrl(op)
		ch.cond.Broadcast()
		c.mu.Unlock()
		return nil
	}
	fn := ch.onCtrl
	if fn == nil {
		if len(ch.ctrlBacklog) < maxCtrlBacklog {
			ch.ctrlBacklog = append(ch.ctrlBacklog, op)
		}
		c.mu.Unlock()
		return nil
	}
	c.mu.Unlock()
	fn(op)
	return nil
}
