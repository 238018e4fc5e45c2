package mux

import (
	"context"
	"encoding/json"
	"fmt"
)

// handleOpen checks a client's OPEN on the read loop and runs the kind's
// handler on its own goroutine.
func (c *Conn) handleOpen(id uint32, p []byte) *ProtocolError {
	c.mu.Lock()
	if id%2 == 0 || id <= c.lastID {
		c.mu.Unlock()
		return protoErr(fmt.Sprintf("OPEN id %d is even or not above %d", id, c.lastID))
	}
	c.lastID = id
	full := len(c.channels) >= c.cfg.MaxChannels
	c.mu.Unlock()
	if full {
		c.openFail(id, NewError(CodeLimitReached, "maxChannels (%d) channels are open%s", c.cfg.MaxChannels, c.cfg.limitHint("maxChannels")))
		return nil
	}
	o, err := parseOpen(p)
	if err != nil {
		c.openFail(id, NewError(CodeProtocol, "%v", err))
		return nil
	}
	fn := c.router.open(o.Kind)
	if fn == nil {
		c.openFail(id, NewError(CodeProtocol, "unknown channel kind %q", o.Kind))
		return nil
	}
	ch := c.newChannel(id, o.Kind)
	ch.sendCredit = o.Window
	ch.q.held = true
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.channels[id] = ch
	c.mu.Unlock()
	go c.runOpen(fn, ch, o.Params)
	return nil
}

func (c *Conn) runOpen(fn OpenHandler, ch *Channel, params json.RawMessage) {
	meta, err := c.callOpen(fn, ch, params)
	var payload []byte
	if err == nil && meta != nil {
		payload, err = json.Marshal(meta)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if ch.closed {
		return // closed by the client or the handler meanwhile
	}
	if err != nil {
		e := asError(err)
		ch.dropLocked(e, true)
		c.queueOpenFailLocked(ch.id, e)
		return
	}
	if ch.earlyData {
		// The client wrote before it had credit: on a channel that takes
		// no input that is not_writable (PROTOCOL), else flow_control.
		e := NewError(CodeFlowControl, "DATA before OPEN_OK, without credit")
		if !ch.inputEnabled {
			e = NewError(CodeNotWritable, "this channel takes no input")
		}
		ch.queueCloseLocked(e)
		ch.dropLocked(e, true)
		c.flushLocked()
		return
	}
	if ch.inputEnabled {
		ch.granted = c.inputGrantLocked()
		c.inputGranted += ch.granted
		ch.recvAvail = ch.granted
	}
	ok, _ := json.Marshal(openOKMsg{Window: ch.granted, Meta: payload}) // Cannot fail: meta is valid JSON.
	f := getFrame(headerLen + len(ok))
	f.b = appendFrame(f.b, typeOpenOK, ch.id, ok)
	ch.q.frames.pushFront(f)
	ch.q.held = false
	ch.opened = true
	c.scheduleLocked(&ch.q)
	c.flushLocked()
	ch.cond.Broadcast()
}

func (c *Conn) callOpen(fn OpenHandler, ch *Channel, params json.RawMessage) (meta any, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = NewError(CodeInternal, "open handler panic: %v", r)
		}
	}()
	return fn(ch.ctx, ch, params)
}

func (c *Conn) openFail(id uint32, e *Error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.queueOpenFailLocked(id, e)
}

func (c *Conn) queueOpenFailLocked(id uint32, e *Error) {
	if c.closed {
		return
	}
	payload, _ := json.Marshal(e) // Cannot fail.
	f := getFrame(headerLen + len(payload))
	f.b = appendFrame(f.b, typeOpenFail, id, payload)
	c.pushUrgentLocked(f)
}

// Open opens a channel of kind (client side). window is the DATA credit
// granted to the server (0: Config.InputWindow; at least 1024). It
// returns the channel and the OPEN_OK meta, or the OPEN_FAIL as *Error.
func (c *Conn) Open(ctx context.Context, kind string, window int, params any) (*Channel, json.RawMessage, error) {
	if c.server {
		return nil, nil, fmt.Errorf("mux: open %s: servers open no channels in wsmux/1", kind)
	}
	if window == 0 {
		window = c.cfg.InputWindow
	}
	if window < minOpenWindow || window > maxWindow {
		return nil, nil, fmt.Errorf("mux: open %s: window %d out of range", kind, window)
	}
	var raw json.RawMessage
	if params != nil {
		b, err := json.Marshal(params)
		if err != nil {
			return nil, nil, fmt.Errorf("mux: open %s: %w", kind, err)
		}
		raw = b
	}
	payload, err := json.Marshal(openMsg{Kind: kind, Window: int64(window), Params: raw})
	if err != nil {
		return nil, nil, fmt.Errorf("mux: open %s: %w", kind, err)
	}
	c.mu.Lock()
	if c.closed {
		err := c.err
		c.mu.Unlock()
		return nil, nil, fmt.Errorf("mux: open %s: %w", kind, err)
	}
	c.lastID += 2
	if c.lastID == 2 {
		c.lastID = 1
	}
	ch := c.newChannel(c.lastID, kind)
	ch.opened = true // the OPEN frame goes first in the queue
	ch.granted = int64(window)
	ch.recvAvail = ch.granted
	c.inputGranted += ch.granted
	c.channels[ch.id] = ch
	f := getFrame(headerLen + len(payload))
	f.b = appendFrame(f.b, typeOpen, ch.id, payload)
	c.enqueueFlushLocked(&ch.q, f)

	stop := context.AfterFunc(ctx, func() {
		c.mu.Lock()
		ch.cond.Broadcast()
		c.mu.Unlock()
	})
	defer stop()
	for !ch.openDone && ctx.Err() == nil {
		ch.cond.Wait()
	}
	switch {
	case ch.openErr != nil:
		err := ch.openErr
		c.mu.Unlock()
		return nil, nil, fmt.Errorf("mux: open %s: %w", kind, err)
	case ch.closed:
		err := ch.closeErr
		c.mu.Unlock()
		return nil, nil, fmt.Errorf("mux: open %s: %w", kind, err)
	case !ch.openDone:
		// Cancelled: CLOSE makes the server drop the channel if it opens.
		ch.queueCloseLocked(nil)
		ch.dropLocked(ctx.Err(), true)
		c.mu.Unlock()
		return nil, nil, ctx.Err()
	}
	meta := ch.meta
	c.mu.Unlock()
	return ch, meta, nil
}

// handleOpenReply applies OPEN_OK or OPEN_FAIL on the client.
func (c *Conn) handleOpenReply(t frameType, id uint32, p []byte) *ProtocolError {
	var ok openOKMsg
	var fail *Error
	var err error
	if t == typeOpenOK {
		ok, err = parseOpenOK(p)
	} else {
		fail, err = parseErrorPayload(p)
		if fail == nil && err == nil {
			err = errBadJSON
		}
	}
	if err != nil {
		return protoErr("malformed " + t.String())
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	ch := c.channels[id]
	if ch == nil || ch.openDone {
		return nil // cancelled or closed meanwhile: dropped
	}
	ch.openDone = true
	if fail != nil {
		ch.openErr = fail
		ch.dropLocked(fail, false)
		return nil
	}
	ch.sendCredit = ok.Window
	ch.noInput = ok.Window == 0
	ch.meta = ok.Meta
	ch.cond.Broadcast()
	return nil
}
