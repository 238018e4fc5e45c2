package mux

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"strconv"
	"time"
)

// Call sends a JSON-RPC request and waits for its response, decoding the
// result into result (when non-nil). An error response is returned as
// *Error. When ctx ends first, Call sends rpc.cancel for the request and
// returns ctx's error.
func (c *Conn) Call(ctx context.Context, method string, params, result any) error {
	c.mu.Lock()
	if c.closed {
		err := c.err
		c.mu.Unlock()
		return fmt.Errorf("call %s: %w", method, err)
	}
	c.nextCall++
	id := c.nextCall
	resp := make(chan rpcMsg, 1)
	c.calls[id] = resp
	c.mu.Unlock()

	var b []byte
	pb, err := marshalValue(params)
	if err == nil {
		b = appendRequest(make([]byte, 0, len(pb)+len(method)+48), id, method, pb)
	}
	if err == nil && c.peer.Limits.MaxRPCRequest > 0 && len(b) > c.peer.Limits.MaxRPCRequest {
		err = fmt.Errorf("%w: request of %d bytes, server takes %d", ErrTooLarge, len(b), c.peer.Limits.MaxRPCRequest)
	}
	if err != nil {
		c.forgetCall(id)
		return fmt.Errorf("call %s: %w", method, err)
	}
	c.sendRPC(b, false)

	select {
	case m, ok := <-resp:
		if !ok {
			return fmt.Errorf("call %s: %w", method, c.Err())
		}
		if m.Error != nil {
			e := &Error{Code: m.Error.Code, Message: m.Error.Message}
			if m.Error.Data != nil {
				e.Reason = m.Error.Data.Reason
			}
			if e.Reason == "" {
				e.Reason = e.Code.Reason()
			}
			return e
		}
		if result != nil {
			if err := json.Unmarshal(m.Result, result); err != nil {
				return fmt.Errorf("call %s: decode result: %w", method, err)
			}
		}
		return nil
	case <-ctx.Done():
		c.forgetCall(id)
		c.sendCancel(id)
		return ctx.Err()
	}
}

func (c *Conn) forgetCall(id int64) {
	c.mu.Lock()
	delete(c.calls, id)
	c.mu.Unlock()
}

// sendCancel sends rpc.cancel for call id, best effort; its own response
// (id 0 is never used by Call) is ignored. It returns once the frame is
// written (or the connection ends, or CloseTimeout passes): a caller that
// gives up on a request and closes the connection right after (a CLI on
// Ctrl-C) must not take the cancel down with it unsent, or the server
// treats the request as abandoned, not cancelled, and lets it run.
func (c *Conn) sendCancel(id int64) {
	payload := `{"jsonrpc":"2.0","id":0,"method":"rpc.cancel","params":{"id":` + strconv.FormatInt(id, 10) + `}}`
	f := getFrame(headerLen + len(payload))
	f.b = appendFrame(f.b, typeRPC, 0, []byte(payload))
	f.sent = make(chan struct{})
	sent := f.sent
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		putFrame(f)
		return
	}
	c.pushUrgentFlushLocked(f)
	c.mu.Unlock()
	t := time.NewTimer(c.cfg.CloseTimeout)
	defer t.Stop()
	select {
	case <-sent:
	case <-c.done:
	case <-t.C:
	}
}

// deliverResponse hands a response to its Call without blocking.
func (c *Conn) deliverResponse(m rpcMsg) {
	id, err := strconv.ParseInt(string(m.ID), 10, 64)
	if err != nil {
		return // not one of ours: dropped
	}
	c.mu.Lock()
	resp := c.calls[id]
	delete(c.calls, id)
	c.mu.Unlock()
	if resp != nil {
		resp <- m // buffered 1, one response per id
		// The caller runs at once on this thread, as for a keystroke
		// (see readData), instead of waiting for another thread to wake.
		runtime.Gosched()
	}
}

// OnNotify sets the function that receives notifications. It runs on a
// goroutine of its own, in order; notifications that arrive while it is
// behind by 64 are dropped (they are best effort). fn may
// call any Conn method, Call and Close included (a Call from fn waits
// for its response, during which later notifications queue or drop);
// none is delivered once the connection has ended.
func (c *Conn) OnNotify(fn func(method string, params json.RawMessage)) {
	h := NotifyHandler(func(_ *Conn, method string, params json.RawMessage) { fn(method, params) })
	c.onNotify.Store(&h)
}

func (c *Conn) deliverNotification(m rpcMsg) {
	if c.server || c.notifyQ == nil {
		return // clients send no notifications in v1
	}
	select {
	case c.notifyQ <- m:
	default: // behind: dropped, notifications are best effort
	}
}

func (c *Conn) notifyLoop() {
	defer c.notifyWG.Done()
	for {
		select {
		case <-c.done:
			return
		case m := <-c.notifyQ:
			fn := c.onNotify.Load()
			if fn == nil {
				continue
			}
			// Set before checking done, so a Close that finds no
			// callback running can wait for this goroutine.
			c.inNotify.Store(true)
			if c.ctx.Err() == nil {
				(*fn)(c, m.Method, m.Params)
			}
			c.inNotify.Store(false)
		}
	}
}
