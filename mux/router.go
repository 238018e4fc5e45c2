package mux

import (
	"context"
	"encoding/json"
	"sync"
)

// Handler serves one RPC method. ctx ends when the request is cancelled
// by rpc.cancel or the connection ends. The result is marshalled as the
// JSON-RPC result; a returned *Error chooses the code (other errors map to
// internal, context errors to cancelled and timeout).
type Handler func(ctx context.Context, c *Conn, params json.RawMessage) (any, error)

// OpenHandler accepts an OPEN of one channel kind and returns the OPEN_OK
// meta, or an error sent as OPEN_FAIL. It runs off the read loop. It may
// start goroutines that use ch; writes on ch block until OPEN_OK is
// queued, so the handler itself must not write to ch before returning.
// ctx ends when the channel closes.
type OpenHandler func(ctx context.Context, ch *Channel, params json.RawMessage) (meta any, err error)

// NotifyHandler receives a JSON-RPC notification.
type NotifyHandler func(c *Conn, method string, params json.RawMessage)

// Router holds the RPC methods and channel kinds a server offers. One
// Router is shared by all connections; register before serving.
type Router struct {
	mu      sync.RWMutex // guards the maps; held only to look up or register
	methods map[string]route
	opens   map[string]OpenHandler
}

type route struct {
	fn       Handler
	isLong   func(params json.RawMessage) bool   // nil: short
	orderKey func(params json.RawMessage) string // nil or "": unordered
}

// NewRouter returns an empty Router.
func NewRouter() *Router {
	return &Router{methods: map[string]route{}, opens: map[string]OpenHandler{}}
}

// Handle registers a short method: it counts toward maxRpcInflight.
func (r *Router) Handle(method string, fn Handler) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.methods[method] = route{fn: fn}
}

// HandleLong registers a method that may wait long (exec, process.wait);
// it counts toward Config.MaxLongInflight instead. isLong decides per
// request (process.start is long only with a sessionId); nil means always.
func (r *Router) HandleLong(method string, isLong func(params json.RawMessage) bool, fn Handler) {
	if isLong == nil {
		isLong = func(json.RawMessage) bool { return true }
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.methods[method] = route{fn: fn, isLong: isLong}
}

// Order makes the requests of method start in the order they arrived
// among all requests of ordered methods with the same key (key returns
// it from the params; "" leaves a request unordered): a request waits,
// before its handler runs, until the one before it with its key took
// its place (its handler called Placed) or returned. Handlers run on
// their own goroutines, so without it two requests sent back to back
// could reach a queue in either order (session commands). Register the
// method first.
func (r *Router) Order(method string, key func(params json.RawMessage) string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	rt := r.methods[method]
	rt.orderKey = key
	r.methods[method] = rt
}

// HandleOpen registers the handler of a channel kind ("terminal",
// "process"). OPEN of an unregistered kind gets OPEN_FAIL protocol.
func (r *Router) HandleOpen(kind string, fn OpenHandler) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.opens[kind] = fn
}

func (r *Router) method(name string) (route, bool) {
	if r == nil {
		return route{}, false
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	rt, ok := r.methods[name]
	return rt, ok
}

func (r *Router) open(kind string) OpenHandler {
	if r == nil {
		return nil
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.opens[kind]
}
