package mux

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
)

// Subprotocol is the WebSocket subprotocol of wsmux/1.
const Subprotocol = "wsmux.v1"

// Class is the scheduling class of a channel's output, served in order:
// terminal channels before process channels.
type Class int

// The channel classes.
const (
	ClassTerminal Class = iota // keystroke echo: served first
	ClassProcess               // bulk output: served after terminals
	numClasses
)

// WebSocket close statuses of docs/protocol.md.
const (
	StatusProtocol  = 4000 // malformed frame, bad id, first frame not HELLO
	StatusVersion   = 4001 // unsupported HELLO version
	StatusStalled   = 4002 // server: the peer stopped reading (Config.WriteStallTimeout)
	StatusTooBig    = 1009 // message over the read limit
	StatusGoingAway = 1001 // shutdown, after GOAWAY
	StatusNormal    = 1000
)

// Internal bounds on small queues.
const (
	maxPendingPongs   = 16  // PONGs queued; a PING flood loses some
	maxPendingNotify  = 256 // notifications queued; more are dropped
	maxCtrlBacklog    = 16  // server: CTRL ops kept until OnCtrl is set
	maxQueuedSmall    = 8   // CTRL/EOF frames a channel may queue beyond its one DATA frame
	notifyQueueLength = 64  // client: notifications waiting for the OnNotify goroutine
)

// Conn is one wsmux/1 connection, on either end. Its methods are safe
// for concurrent use.
type Conn struct {
	ws     *websocket.Conn
	cfg    Config
	server bool
	router *Router
	peer   HelloInfo

	sendMaxFrame int // largest DATA payload this end may send
	recvMaxFrame int // largest DATA payload this end accepts

	ctx    context.Context // ends when the connection ends
	cancel context.CancelFunc
	done   chan struct{}
	wg     sync.WaitGroup // reader, writer, liveness goroutines
	// notifyWG is the client's OnNotify goroutine, waited for apart:
	// Close called from a callback must not wait for itself.
	notifyWG sync.WaitGroup
	inNotify atomic.Bool // an OnNotify callback is running

	writeStart  atomic.Int64 // unix nanos at which the current socket write began; 0 when idle
	closing     atomic.Bool  // a close handshake was started
	onNotify    atomic.Pointer[NotifyHandler]
	notifyQ     chan rpcMsg  // client: notifications for the OnNotify goroutine
	jobs        chan rpcJob  // server: requests for parked workers (unbuffered)
	idleWorkers atomic.Int32 // server: workers parked on jobs
	scratch     [512]byte    // the read loop's discard buffer

	// mu guards the fields below and the mutable state of every Channel.
	// It is never held across a socket write or a user callback.
	mu            sync.Mutex
	writerCond    sync.Cond // the writer waits here for frames
	readerCond    sync.Cond // the server's read loop waits here (waitUrgentDrained)
	answerCond    sync.Cond // handlers wait here for room for their answers (ReserveAnswer)
	urgentBytes   int64     // bytes in urgent
	err           error     // why the connection ended; set once
	closed        bool
	channels      map[uint32]*Channel
	lastID        uint32 // server: highest client id opened; client: last id allocated
	used          int64  // budget bytes held by queued output, RPC requests and reserved answers
	bodies        int64  // the part of used held by the bodies of requests in flight
	answerWaiters int    // handlers waiting in ReserveAnswer
	inputGranted  int64  // budget bytes granted as input credit
	budgetWaiters []*Channel
	drainWaiters  []chan struct{} // Close waiting for the queue to empty
	urgent        fifo[*outFrame] // PONG, small RPC, client CTRL, GOAWAY, OPEN_FAIL
	windowReady   fifo[*Channel]  // channels with credit to return
	rings         [numClasses]fifo[*sendQueue]
	rpcBulk       sendQueue              // RPC messages over maxFrame, and notifications
	pongs         int                    // PONGs queued
	notifies      int                    // notifications queued
	pending       map[string]*pendingReq // server: requests in flight by id
	orderTail     map[string]*pendingReq // server: the last ordered request by key, until placed
	shortInflight int
	longInflight  int
	calls         map[int64]chan rpcMsg // client: Calls waiting by id
	nextCall      int64
	goaway        *Error
	writing       bool   // the write token: a frame is being written
	writeErr      error  // a socket write failed; the writer goroutine ends the conn
	window        []byte // WINDOW scratch, used by the token holder
	nextPing      uint64
	pingWaiters   map[uint64]chan struct{} // Ping calls waiting for their PONG
	holdOn        bool                     // server: bulk classes are held for an echo (hold.go)
	holdNext      time.Time                // server: earliest start of the next hold
	holdTimer     *time.Timer              // server: ends a hold after bulkHold
}

// sendQueue is the FIFO of frames of one channel (or of large RPC
// messages) and its place in the writer's round-robin.
type sendQueue struct {
	frames fifo[*outFrame]
	class  Class
	inRing bool
	held   bool // not served until OPEN_OK is queued
}

func newConn(ws *websocket.Conn, cfg Config, server bool, rt *Router) *Conn {
	c := &Conn{
		ws:       ws,
		cfg:      cfg,
		server:   server,
		router:   rt,
		done:     make(chan struct{}),
		channels: map[uint32]*Channel{},
		pending:  map[string]*pendingReq{},
		calls:    map[int64]chan rpcMsg{},
		jobs:     make(chan rpcJob),
	}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	c.writerCond.L = &c.mu
	c.readerCond.L = &c.mu
	c.answerCond.L = &c.mu
	c.rpcBulk.class = ClassProcess
	c.sendMaxFrame, c.recvMaxFrame = cfg.MaxFrame, cfg.MaxFrame
	return c
}

// start runs the connection's goroutines.
func (c *Conn) start() {
	if !c.server {
		// Before the reader starts: it hands notifications to notifyQ.
		c.notifyQ = make(chan rpcMsg, notifyQueueLength)
		c.notifyWG.Add(1)
		go c.notifyLoop()
	}
	c.wg.Add(3)
	go c.readLoop()
	go c.writeLoop()
	go c.watchdog()
}

// Hello returns the peer's HELLO.
func (c *Conn) Hello() HelloInfo { return c.peer }

// Done is closed when the connection has ended.
func (c *Conn) Done() <-chan struct{} { return c.done }

// Context returns a context that ends with the connection.
func (c *Conn) Context() context.Context { return c.ctx }

// Err returns why the connection ended, or nil while it is up.
func (c *Conn) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// Close ends the connection with a normal close handshake bounded by
// Config.CloseTimeout, drops every channel and pending request, and
// waits (as long again) for the connection's goroutines to return. It
// may be called from an OnNotify callback; while a callback runs, Close
// does not wait for it to return (no callback starts after Close).
func (c *Conn) Close() error {
	c.drain(c.cfg.CloseTimeout)
	c.closeWS(StatusNormal, "", c.cfg.CloseTimeout)
	c.shutdown(ErrConnClosed)
	return c.wait()
}

// drain waits, at most limit, until the frames already queued are
// written: what was written just before Close (a CLI's last keystrokes,
// an EOF, an rpc.cancel) reaches the peer. A peer that is not reading
// (a write stalled for stalledWrite) is not waited for.
func (c *Conn) drain(limit time.Duration) {
	const stalledWrite = 100 * time.Millisecond
	c.mu.Lock()
	started := c.writeStart.Load()
	if c.closed || c.writeErr != nil || !c.writing && !c.hasWorkLocked() ||
		started != 0 && time.Since(time.Unix(0, started)) > stalledWrite {
		c.mu.Unlock()
		return
	}
	done := make(chan struct{})
	c.drainWaiters = append(c.drainWaiters, done)
	c.mu.Unlock()
	t := time.NewTimer(limit)
	defer t.Stop()
	select {
	case <-done:
	case <-c.done:
	case <-t.C:
	}
}

// GoAway tells the peer the server is shutting down (GOAWAY), then closes
// with 1001. Queued output is not waited for beyond the GOAWAY frame.
func (c *Conn) GoAway(code Code, msg string) {
	f := getFrame(headerLen + 128)
	payload, _ := json.Marshal(&Error{Code: code, Reason: code.Reason(), Message: msg})
	f.b = appendFrame(f.b, typeGoAway, 0, payload)
	f.sent = make(chan struct{})
	sent := f.sent
	c.mu.Lock()
	if !c.closed {
		c.pushUrgentLocked(f)
	}
	c.mu.Unlock()
	t := time.NewTimer(c.cfg.CloseTimeout)
	select {
	case <-sent:
	case <-c.done:
	case <-t.C:
	}
	t.Stop()
	c.closeWS(StatusGoingAway, "going away", c.cfg.CloseTimeout)
	c.shutdown(ErrGoAway)
	_ = c.wait() // Best effort: goroutines are bounded by the close timeout.
}

// wait waits, bounded, for the connection's goroutines.
func (c *Conn) wait() error {
	inNotify := c.inNotify.Load()
	ch := make(chan struct{})
	go func() {
		c.wg.Wait()
		if !inNotify {
			c.notifyWG.Wait()
		}
		close(ch)
	}()
	t := time.NewTimer(2*c.cfg.CloseTimeout + time.Second)
	defer t.Stop()
	select {
	case <-ch:
		return nil
	case <-t.C:
		return errors.New("mux: connection goroutines did not return in time")
	}
}

// closeWS runs the WebSocket close handshake once, bounded by d; past
// it the caller drops the socket (shutdown).
func (c *Conn) closeWS(status int, reason string, d time.Duration) {
	if c.closing.Swap(true) {
		return
	}
	ch := make(chan struct{})
	go func() {
		_ = c.ws.Close(websocket.StatusCode(status), reason) // Best effort: the peer may be gone.
		close(ch)
	}()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ch:
	case <-t.C:
		// The handshake is stuck (usually behind a stalled write): the
		// goroutine above returns once the library's own timeouts fire.
	}
}

// fail closes the connection for a protocol violation.
func (c *Conn) fail(status int, reason string) {
	c.closeWS(status, reason, c.cfg.CloseTimeout)
	c.shutdown(&ProtocolError{Status: status, Reason: reason})
}

// shutdown ends the connection once: every channel, call and request is
// failed with err, every waiter wakes, and the socket is dropped.
func (c *Conn) shutdown(err error) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	c.closed = true
	c.err = err
	if c.holdTimer != nil {
		c.holdTimer.Stop()
	}
	for _, ch := range c.channels {
		ch.dropLocked(err, false)
	}
	for id, call := range c.calls {
		close(call)
		delete(c.calls, id)
	}
	for !c.urgent.empty() {
		putFrame(c.urgent.pop())
	}
	c.urgentBytes = 0
	c.wakeBudgetLocked()
	c.writerCond.Broadcast()
	c.readerCond.Broadcast()
	c.mu.Unlock()
	c.cancel()
	close(c.done)
	go func() {
		// Unblocks the reader and any stuck write; no-op after a close
		// handshake completed.
		if !c.closing.Swap(true) {
			_ = c.ws.CloseNow() // Best effort.
		}
	}()
}

// budgetFreedLocked wakes what waits for budget, after used went down.
func (c *Conn) budgetFreedLocked() {
	if len(c.budgetWaiters) > 0 || c.answerWaiters > 0 {
		c.wakeBudgetLocked()
	}
}

// wakeBudgetLocked wakes the pumps and handlers waiting for budget.
func (c *Conn) wakeBudgetLocked() {
	if c.answerWaiters > 0 {
		c.answerCond.Broadcast()
	}
	for _, ch := range c.budgetWaiters {
		ch.cond.Broadcast()
	}
	clear(c.budgetWaiters)
	c.budgetWaiters = c.budgetWaiters[:0]
}

// outputCapLocked is the budget available to queued output and RPC
// bodies: what input grants leave, never under a quarter of the budget.
func (c *Conn) outputCapLocked() int64 {
	return max(c.cfg.ConnBudget-c.inputGranted, c.cfg.ConnBudget/4)
}

// inputGrantLocked is the input credit for a writable channel opened now:
// the full InputWindow while grants stay within half the budget, then a
// small window (4 KiB) so later channels still work, and 0 once grants
// would eat into the last quarter of the budget (kept for output).
func (c *Conn) inputGrantLocked() int64 {
	win := int64(c.cfg.InputWindow)
	g := min(win, max(c.cfg.ConnBudget/2-c.inputGranted, min(win, 4<<10)))
	return max(0, min(g, c.cfg.ConnBudget*3/4-c.inputGranted))
}

// enqueueLocked queues a frame of q and schedules q.
// The writer goroutine is woken only when no producer is about to write:
// a producer that queues and then flushes (flushLocked) writes the frame
// itself or leaves it to whoever holds the token, so waking the writer
// as well would cost a context switch for nothing.
func (c *Conn) enqueueLocked(q *sendQueue, f *outFrame) {
	q.frames.push(f)
	c.scheduleLocked(q)
	c.wakeWriterLocked()
}

// enqueueFlushLocked queues a frame of q and writes it at once if the
// token is free.
func (c *Conn) enqueueFlushLocked(q *sendQueue, f *outFrame) {
	q.frames.push(f)
	c.scheduleLocked(q)
	c.flushLocked()
}

// wakeWriterLocked wakes the writer goroutine for queued work, unless a
// write is in flight: its writer looks for more work when it ends.
func (c *Conn) wakeWriterLocked() {
	if !c.writing {
		c.writerCond.Signal()
	}
}

func (c *Conn) scheduleLocked(q *sendQueue) {
	if !q.inRing && !q.held && q.frames.len() > 0 {
		q.inRing = true
		c.rings[q.class].push(q)
	}
}
