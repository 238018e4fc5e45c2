package mux

import (
	"context"
	"encoding/json"
	"errors"
)

// pendingReq is an inbound request being served.
type pendingReq struct {
	cancel   context.CancelCauseFunc
	long     bool
	cost     int64 // budget held by the request body
	reserved int64 // budget held for the answer (ReserveAnswer), until it is queued
	// Ordered requests (Router.Order) form a line per key, linked under
	// Conn.mu: turn (nil for the first in line) is closed when the one
	// before takes its place; prev is nil once the turn came.
	c        *Conn
	orderKey string
	turn     chan struct{}
	prev     *pendingReq
	next     *pendingReq
	done     bool // placed, returned, or left the line
}

// awaitTurn waits until the ordered request before pr took its place.
// It reports false for a request that rpc.cancel ended first: it leaves
// the line without running, and the request after it waits for the one
// before it. When the connection ends instead, it waits on: a request
// that outlives its connection (an exec) still starts in its turn, and
// each one before it does too, or returns.
func (c *Conn) awaitTurn(ctx context.Context, pr *pendingReq) bool {
	if pr.turn == nil {
		return true
	}
	select {
	case <-pr.turn:
	case <-ctx.Done():
	}
	if !errors.Is(context.Cause(ctx), ErrCancelledByPeer) {
		<-pr.turn
		return true
	}
	pr.leaveLine()
	return false
}

// Placed tells the connection that the request whose handler context is
// ctx took its place (in a queue of its own): the next request with its
// order key (Router.Order) may start. A handler that never calls it
// frees the next one when it returns. Outside an ordered request's
// handler it does nothing.
func Placed(ctx context.Context) {
	if pr, _ := ctx.Value(reqKey{}).(*pendingReq); pr != nil {
		pr.leaveLine()
	}
}

// leaveLine is leaveLineLocked for an ordered request; others have no line.
func (pr *pendingReq) leaveLine() {
	if pr.orderKey == "" {
		return
	}
	c := pr.c
	c.mu.Lock()
	c.leaveLineLocked(pr)
	c.mu.Unlock()
}

// leaveLineLocked takes pr out of its line, once: a request still
// waiting is spliced out (the next waits for the one before), one that
// had its turn gives it to the next.
func (c *Conn) leaveLineLocked(pr *pendingReq) {
	if pr.done {
		return
	}
	pr.done = true
	prev, next := pr.prev, pr.next
	pr.prev, pr.next = nil, nil
	switch {
	case prev != nil: // still waiting
		prev.next = next
		if next != nil {
			next.prev = prev
		}
	case next != nil:
		next.prev = nil
		close(next.turn)
	}
	if next == nil && c.orderTail[pr.orderKey] == pr {
		if prev != nil {
			c.orderTail[pr.orderKey] = prev
		} else {
			delete(c.orderTail, pr.orderKey)
		}
	}
}

// reqKey is the context key of a request's *pendingReq.
type reqKey struct{}

// handleRPC dispatches one JSON-RPC object from the read loop; it never
// blocks on a handler.
func (c *Conn) handleRPC(p []byte) {
	m, kind, perr := parseRPC(p)
	if perr != nil {
		if m.ID != nil || perr.Code == CodeParseError || m.Method == "" {
			c.reject(m.ID, perr)
		}
		return
	}
	switch kind {
	case rpcResponse:
		c.deliverResponse(m)
	case rpcNotification:
		c.deliverNotification(m)
	case rpcRequest:
		if !c.server {
			c.reject(m.ID, NewError(CodeMethodNotFound, "the client serves no methods"))
			return
		}
		if len(p) > c.cfg.MaxRPCRequest {
			c.reject(m.ID, NewError(CodeInvalidRequest, "request exceeds maxRpcRequest (%d bytes)%s", c.cfg.MaxRPCRequest, c.cfg.limitHint("maxRpcRequest")))
			return
		}
		c.serveRequest(m, int64(len(p)))
	}
}

// serveRequest starts a request on its own goroutine within the caps.
func (c *Conn) serveRequest(m rpcMsg, size int64) {
	if m.Method == "rpc.cancel" {
		c.cancelRequest(m)
		return
	}
	rt, ok := c.router.method(m.Method)
	if !ok {
		c.reject(m.ID, NewError(CodeMethodNotFound, "method %q not found", m.Method))
		return
	}
	long := rt.isLong != nil && rt.isLong(m.Params)
	var orderKey string // read before the lock: it parses params
	if rt.orderKey != nil {
		orderKey = rt.orderKey(m.Params)
	}
	key := string(m.ID)
	c.mu.Lock()
	var busy *Error
	switch {
	case c.closed:
		c.mu.Unlock()
		return
	case c.pending[key] != nil:
		busy = NewError(CodeInvalidRequest, "id %s is already in flight", key)
	case long && c.longInflight >= c.cfg.MaxLongInflight:
		busy = ErrBusy(busyLong)
	case !long && c.shortInflight >= c.cfg.MaxRPCInflight:
		busy = ErrBusy(busyShort)
	case c.used+size > c.outputCapLocked():
		busy = ErrBusy(busyBudget)
	}
	if busy != nil {
		c.mu.Unlock()
		c.reject(m.ID, busy)
		return
	}
	ctx, cancel := context.WithCancelCause(c.ctx)
	pr := &pendingReq{cancel: cancel, long: long, cost: size, c: c}
	ctx = context.WithValue(ctx, reqKey{}, pr)
	c.pending[key] = pr
	if orderKey != "" {
		pr.orderKey = orderKey
		if tail := c.orderTail[orderKey]; tail != nil {
			pr.prev, pr.turn = tail, make(chan struct{})
			tail.next = pr
		}
		if c.orderTail == nil {
			c.orderTail = make(map[string]*pendingReq)
		}
		c.orderTail[orderKey] = pr
	}
	c.used += size
	c.bodies += size
	if long {
		c.longInflight++
	} else {
		c.shortInflight++
	}
	c.mu.Unlock()
	c.dispatch(rpcJob{ctx: ctx, fn: rt.fn, m: m, pr: pr})
}

func (c *Conn) runRequest(ctx context.Context, fn Handler, m rpcMsg, pr *pendingReq) {
	var res any
	var err error
	if c.awaitTurn(ctx, pr) {
		res, err = c.callHandler(ctx, fn, m.Params)
		pr.leaveLine()
	} else {
		err = ctx.Err() // cancelled in line: never run
	}
	if err == nil && ctx.Err() != nil {
		err = ctx.Err() // cancelled: the answer is cancelled, whatever the handler said
	}
	c.mu.Lock()
	delete(c.pending, string(m.ID))
	c.used -= pr.cost
	c.bodies -= pr.cost
	if pr.long {
		c.longInflight--
	} else {
		c.shortInflight--
	}
	c.budgetFreedLocked()
	c.mu.Unlock()
	if err != nil && context.Cause(ctx) == ErrCancelledByPeer {
		err = cancelledByPeer(err)
	}
	pr.cancel(nil)
	if err != nil {
		c.respondError(m.ID, asError(err))
	} else {
		c.respondResult(m.ID, res)
	}
	// The answer is queued and charged itself: the hold ends.
	c.mu.Lock()
	if pr.reserved > 0 {
		c.used -= pr.reserved
		pr.reserved = 0
		c.budgetFreedLocked()
	}
	c.mu.Unlock()
}

// ReserveAnswer holds n bytes of the connection's budget for the answer
// to the request whose handler context is ctx, waiting while queued
// output and other held answers fill the budget. A handler whose answer
// may be large (command output) calls it before it reads what goes in
// the answer: a client that sends such requests without reading its
// socket then keeps the handlers waiting here, not their answers in the
// daemon's memory. One answer always goes ahead when nothing else is
// queued or held, however large. The hold ends once the answer is
// queued. It returns ctx's error, or ErrConnClosed if the connection
// ends first; outside a request's handler it does nothing.
func (c *Conn) ReserveAnswer(ctx context.Context, n int) error {
	pr, _ := ctx.Value(reqKey{}).(*pendingReq)
	if pr == nil || n <= 0 {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	var stop func() bool
	defer func() {
		if stop != nil {
			stop()
		}
	}()
	for {
		if c.closed {
			return ErrConnClosed
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		// Request bodies are not waited for: their handlers may be the
		// ones waiting here.
		if c.used+int64(n) <= c.outputCapLocked() || c.used-c.bodies <= 0 {
			c.used += int64(n)
			pr.reserved += int64(n)
			return nil
		}
		if stop == nil {
			stop = context.AfterFunc(ctx, func() {
				c.mu.Lock()
				c.answerCond.Broadcast()
				c.mu.Unlock()
			})
		}
		c.answerWaiters++
		c.answerCond.Wait()
		c.answerWaiters--
	}
}

// cancelledByPeer words the answer to a request that rpc.cancel ended:
// Go's "context canceled" says nothing to a client.
// Handlers that map their errors to the wire pass context.Canceled on as
// an *Error of code cancelled with that text: it is worded here too.
func cancelledByPeer(err error) error {
	var e *Error
	switch {
	case errors.As(err, &e) && e.Code == CodeCancelled:
	case errors.As(err, &e), !errors.Is(err, context.Canceled):
		return err // another outcome, whatever the cancel
	}
	msg := "cancelled by rpc.cancel"
	if s := err.Error(); e == nil && s != context.Canceled.Error() {
		msg += ": " + s
	} else if e != nil && e.Message != context.Canceled.Error() && e.Message != "" {
		msg += ": " + e.Message
	}
	return NewError(CodeCancelled, "%s", msg)
}

// callHandler runs fn, turning a panic into an internal error so one bad
// request does not take the daemon down.
func (c *Conn) callHandler(ctx context.Context, fn Handler, params json.RawMessage) (res any, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = NewError(CodeInternal, "handler panic: %v", r)
		}
	}()
	return fn(ctx, c, params)
}

// cancelRequest serves rpc.cancel {id}: it cancels the pending request's
// context; the request answers cancelled.
func (c *Conn) cancelRequest(m rpcMsg) {
	var p struct {
		ID json.RawMessage `json:"id"`
	}
	if err := UnmarshalExact(m.Params, &p); err != nil || !validID(p.ID) || len(p.ID) == 0 {
		c.reject(m.ID, ErrInvalidParams("rpc.cancel needs the id of a pending request"))
		return
	}
	c.mu.Lock()
	pr := c.pending[string(p.ID)]
	c.mu.Unlock()
	if pr == nil {
		c.reject(m.ID, ErrNotFound("no pending request with id "+string(p.ID)))
		return
	}
	pr.cancel(ErrCancelledByPeer)
	c.queueRPC([]byte(`{"jsonrpc":"2.0","id":` + string(m.ID) + `,"result":{}}`))
}

type rpcResponseOut struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  any             `json:"result,omitempty"`
	Error   *rpcError       `json:"error,omitempty"`
}

// respondResult answers a request from a handler goroutine.
func (c *Conn) respondResult(id json.RawMessage, res any) {
	body, err := marshalValue(res)
	if body == nil && err == nil {
		body = []byte("{}")
	}
	b := appendResult(make([]byte, 0, len(id)+len(body)+32), id, body)
	if err != nil {
		c.respondError(id, NewError(CodeInternal, "marshal result: %v", err))
		return
	}
	if len(b) > c.cfg.MaxRPCResponse {
		c.respondError(id, NewError(CodeLimitReached, "response of %d bytes exceeds maxRpcResponse (%d)%s", len(b), c.cfg.MaxRPCResponse, c.cfg.limitHint("maxRpcResponse")))
		return
	}
	c.sendRPC(b, false)
}

// respondError answers a request with an error from a handler goroutine.
func (c *Conn) respondError(id json.RawMessage, e *Error) { c.sendRPC(encodeError(id, e), false) }

// reject answers from the read loop, which only queues.
func (c *Conn) reject(id json.RawMessage, e *Error) { c.queueRPC(encodeError(id, e)) }

// encodeError encodes a JSON-RPC error response; data.reason carries the
// reason string.
func encodeError(id json.RawMessage, e *Error) []byte {
	if id == nil {
		id = json.RawMessage("null")
	}
	out := rpcResponseOut{JSONRPC: "2.0", ID: id, Error: &rpcError{Code: e.Code, Message: e.Message}}
	r := e.Reason
	if r == "" {
		r = e.Code.Reason()
	}
	if r != "" {
		out.Error.Data = &rpcErrorData{Reason: r}
	}
	if out.Error.Message == "" {
		out.Error.Message = r
	}
	b, _ := json.Marshal(out) // Cannot fail: plain strings and numbers.
	return b
}

// sendRPC queues one RPC message (see queueRPC) and, for responses and
// calls, writes it at once if the socket is idle.
func (c *Conn) sendRPC(payload []byte, notify bool) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	// Notify must never block its caller on the socket; answers and
	// calls are written at once when the socket is idle.
	return c.queueRPCLocked(payload, notify, !notify)
}

// queueRPC queues one RPC message from the read loop, which never writes.
func (c *Conn) queueRPC(payload []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.queueRPCLocked(payload, false, false)
}

// queueRPCLocked queues one RPC message: up to maxFrame with the urgent frames,
// larger ones (and notifications) in the bulk class. Budget is charged
// for large messages only; small ones are bounded by the request caps.
// With flush, the caller writes it at once if the socket is idle.
func (c *Conn) queueRPCLocked(payload []byte, notify, flush bool) bool {
	f := getFrame(headerLen + len(payload))
	f.b = appendFrame(f.b, typeRPC, 0, payload)
	if c.closed || notify && c.notifies >= maxPendingNotify {
		putFrame(f)
		return false
	}
	if !notify && len(payload) <= c.cfg.MaxFrame {
		if flush {
			c.pushUrgentFlushLocked(f)
		} else {
			c.pushUrgentLocked(f)
		}
		return true
	}
	f.notify = notify
	f.cost = int64(len(f.b))
	c.used += f.cost
	if notify {
		c.notifies++
	}
	if flush {
		c.enqueueFlushLocked(&c.rpcBulk, f)
	} else {
		c.enqueueLocked(&c.rpcBulk, f)
	}
	return true
}

// Notify sends a notification, best effort: it never blocks and returns
// ErrDropped when too many notifications are already queued.
func (c *Conn) Notify(method string, params any) error {
	b, err := marshalPlain(struct {
		JSONRPC string `json:"jsonrpc"`
		Method  string `json:"method"`
		Params  any    `json:"params,omitempty"`
	}{"2.0", method, params})
	if err != nil {
		return err
	}
	if len(b) > c.cfg.MaxRPCResponse {
		// Past the peer's read limit (sized from maxRpcResponse) it
		// would end the connection with 1009: one notification lost
		// instead.
		return ErrDropped
	}
	if !c.sendRPC(b, true) {
		if c.Err() != nil {
			return ErrConnClosed
		}
		return ErrDropped
	}
	return nil
}
