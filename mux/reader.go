package mux

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"runtime"

	"github.com/coder/websocket"
)

// readLoop is the one goroutine that reads the socket. It never blocks
// on a consumer: DATA goes to the channel's buffer, RPC requests to
// their own goroutines, CTRL callbacks must not block.
func (c *Conn) readLoop() {
	defer c.wg.Done()
	buf := make([]byte, 0, headerLen+c.recvMaxFrame)
	var h header
	for {
		c.waitUrgentDrained()
		pe, err := c.readFrame(&buf, &h)
		switch {
		case pe != nil:
			c.fail(pe.Status, pe.Reason)
			return
		case err != nil:
			c.shutdown(c.readErr(err))
			return
		}
	}
}

// readFrame reads and applies one message. DATA payloads are read
// straight into the channel's buffer (readData); other frames are read
// whole into *buf and decoded.
func (c *Conn) readFrame(buf *[]byte, h *header) (*ProtocolError, error) {
	typ, r, err := c.ws.Reader(context.Background())
	if err != nil {
		return nil, err
	}
	if typ != websocket.MessageBinary {
		return protoErr("text message"), nil
	}
	if _, err := io.ReadFull(r, h[:]); err != nil {
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			return protoErr(errShortFrame.Error()), nil
		}
		return nil, err
	}
	if h.Type() == typeData && h.Flags() == 0 && h.Channel() != 0 {
		return c.readData(h.Channel(), r)
	}
	msg, err := readRest(r, append((*buf)[:0], h[:]...))
	if err != nil {
		return nil, err
	}
	if cap(msg) <= 256<<10 {
		*buf = msg[:0] // keep a grown buffer unless it is huge
	}
	hd, p, err := decodeFrame(msg)
	if err != nil {
		return protoErr(err.Error()), nil
	}
	return c.handleFrame(hd, p), nil
}

// readRest appends the rest of a message to buf.
func readRest(r io.Reader, buf []byte) ([]byte, error) {
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

// readMessage reads one whole binary message (the handshake's HELLO).
func (c *Conn) readMessage(buf []byte) ([]byte, error) {
	typ, r, err := c.ws.Reader(context.Background())
	if err != nil {
		return nil, err
	}
	if typ != websocket.MessageBinary {
		return nil, &ProtocolError{Status: StatusProtocol, Reason: "text message"}
	}
	return readRest(r, buf[:0])
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
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		// The TCP stream ended without a close handshake (a client that
		// crashed, a proxy that cut it). Not wrapped: every channel fails
		// with this error, and one that matched io.EOF would read as the
		// peer's EOF on that channel, so a process lost its stdin with the
		// socket.
		return fmt.Errorf("%w: the socket ended without a close handshake (%v)", ErrConnClosed, err)
	}
	return err
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
		if e != nil {
			e.goAway = true // errors.Is(err, ErrGoAway)
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
		// Only malformed DATA gets here (readData takes the rest);
		// decodeFrame has rejected it already.
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
	c.pushUrgentLocked(f)
}

// readData reads a DATA payload from r straight into the channel: into
// the buffer of a Read waiting on an empty channel (direct delivery, one
// copy less), then into the free space of the channel's ring. It then
// checks it: over maxFrame closes the channel with frame_size, beyond
// credit with flow_control, after EOF with protocol. Frames for unknown
// channels are read and dropped.
//
// The copy runs without c.mu: only this goroutine writes the ring, the
// consumer only reads the filled part and advances r (r+n, the write
// position, does not move), and a local Close swaps the ring out (the
// bytes then go to the orphaned array and are dropped below). A claimed
// Read buffer stays the reader's until directBusy is cleared: the waiting
// Read does not return before.
func (c *Conn) readData(id uint32, r io.Reader) (*ProtocolError, error) {
	c.mu.Lock()
	ch := c.channels[id]
	if ch == nil {
		c.mu.Unlock()
		_, err := c.discard(r)
		return nil, err // unknown or closed: dropped
	}
	b := &ch.in
	if len(b.ring) < int(ch.granted) {
		b.resize(int(ch.granted))
	}
	limit := c.recvMaxFrame + 1 // one more than allowed, to see a violation
	var direct []byte
	if ch.waitBuf != nil && b.recs.empty() {
		ch.directBuf, ch.waitBuf = ch.waitBuf, nil
		ch.directSeq, ch.directN, ch.directFrame = ch.waitSeq, 0, ch.waitFrame
	}
	if free := len(ch.directBuf) - ch.directN; free > 0 && b.recs.empty() && !(ch.directFrame && ch.directN > 0) {
		// Frames keep filling the claimed buffer until its Read runs.
		direct = ch.directBuf[ch.directN : ch.directN+min(free, limit)]
		ch.directBusy = true
	}
	var seg1, seg2 []byte
	if size := len(b.ring); size > 0 {
		w := (b.r + b.n) % size
		room := min(size-b.n, limit-len(direct))
		seg1 = b.ring[w:min(size, w+room)]
		seg2 = b.ring[:room-len(seg1)]
	}
	c.mu.Unlock()

	n, err := readInto(r, direct, seg1, seg2)
	extra := 0
	if err == nil {
		extra, err = c.discard(r) // anything past the space: a violation
	}
	total := n + extra
	kd := min(n, len(direct))

	c.mu.Lock()
	if direct != nil {
		ch.directBusy = false
	}
	var e *Error
	switch {
	case err != nil || total == 0 || ch.closed:
	case c.server && !ch.opened:
		// Sent before OPEN_OK, so without credit; whether the channel
		// takes input at all is known once the open handler returns
		// (runOpen answers not_writable or flow_control then).
		ch.earlyData = true
	case !ch.inputEnabled:
		e = NewError(CodeNotWritable, "this channel takes no input")
	case total > c.recvMaxFrame:
		e = NewError(CodeFrameSize, "DATA of %d bytes exceeds maxFrame (%d)", total, c.recvMaxFrame)
	case int64(total) > ch.recvAvail:
		e = NewError(CodeFlowControl, "DATA of %d bytes with %d bytes of credit", total, ch.recvAvail)
	case ch.peerEOF:
		e = NewError(CodeProtocol, "DATA after EOF")
	default:
		ch.recvAvail -= int64(total)
		ch.directN += kd // the claimed Read returns these bytes too
		if n > kd {
			b.commit(n - kd)
		}
	}
	if e != nil {
		ch.queueCloseLocked(e)
		ch.dropLocked(e, true)
	}
	waiting, yield := ch.readWaiters > 0, ch.q.class == ClassTerminal && e == nil
	if yield {
		c.holdBulkLocked() // a keystroke: leave the CPUs to its echo (hold.go)
	}
	c.mu.Unlock()
	if waiting {
		// Woken after the unlock, the consumer does not block on c.mu.
		ch.cond.Broadcast()
		if yield {
			// A keystroke's consumer runs at once on this thread rather
			// than being stolen by another after a futex wake (~10 µs
			// per echo leg on a 2-core host). Bulk channels skip it.
			runtime.Gosched()
		}
	}
	switch {
	case err != nil:
		return nil, err
	case total == 0:
		return protoErr(errBadPayload.Error()), nil
	}
	return nil, nil
}

// readInto reads the message into the segments in turn until they are
// full or the message ends.
func readInto(r io.Reader, a, b, c []byte) (int, error) {
	n := 0
	for _, seg := range [3][]byte{a, b, c} {
		if len(seg) == 0 {
			continue
		}
		k, err := io.ReadFull(r, seg)
		n += k
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			return n, nil
		}
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// discard reads r to its end, returning the byte count.
func (c *Conn) discard(r io.Reader) (int, error) {
	total := 0
	for {
		n, err := r.Read(c.scratch[:])
		total += n
		if err == io.EOF {
			return total, nil
		}
		if err != nil {
			return total, err
		}
	}
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
	ch.returned += int64(n)
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
