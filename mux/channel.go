package mux

import (
	"context"
	"encoding/json"
	"io"
	"sync"
)

// Channel is one wsmux/1 channel: a byte pipe in each direction with its
// own credit window, plus CTRL ops. See the package doc for the rules.
type Channel struct {
	c    *Conn
	id   uint32
	kind string

	ctx    context.Context // ends when the channel is closed or the conn ends
	cancel context.CancelFunc
	cond   sync.Cond // on c.mu: readers, writers and Open wait here

	// Guarded by c.mu.
	q             sendQueue
	opened        bool  // server: OPEN_OK queued; client: OPEN_OK received
	openErr       error // client: OPEN_FAIL or failure while opening
	openDone      bool  // client: the open ended (ok or not)
	meta          json.RawMessage
	closed        bool  // either side closed, or the conn ended
	closedHere    bool  // closed by this side (Close, a refused frame): reads end at once
	closeErr      error // what Read and Write return once closed
	localEOF      bool  // we sent EOF
	dataQueued    bool  // a DATA frame of ours waits for the writer
	filling       bool  // a FillStream is filling a frame (credit and budget reserved)
	smallQueued   int   // CTRL/EOF frames of ours waiting
	sendCredit    int64 // DATA bytes we may still send
	returned      int64 // credit the peer gave back with WINDOW, in all
	inputEnabled  bool
	granted       int64 // input window granted to the peer (budget held)
	recvAvail     int64 // credit the peer may still use
	unreturned    int64 // consumed bytes whose credit is not yet returned
	pendingWindow int64 // credit to return in the next WINDOW
	inWindowReady bool
	readWaiters   int // Reads waiting for DATA
	// Direct delivery (see Conn.readData): a Read waiting on an empty
	// channel offers its buffer; the read loop may claim it.
	waitBuf     []byte // the offered buffer, until claimed
	waitFrame   bool   // the offer is a ReadFrame's: one frame only
	waitSeq     uint64 // numbers offers, so a Read knows its own
	directBuf   []byte // the claimed buffer, until its Read returns
	directSeq   uint64 // the offer the read loop claimed
	directBusy  bool   // the read loop is filling the claimed buffer
	directFrame bool   // the claimed buffer takes one frame (ReadFrame)
	directN     int    // bytes delivered into the claimed buffer
	in          inbuf
	peerEOF     bool
	noInput     bool // client: OPEN_OK granted no credit, so none can ever come
	earlyData   bool // server: DATA came before OPEN_OK (see runOpen)
	onCtrl      func(op json.RawMessage)
	ctrlBacklog []json.RawMessage // server: CTRL that came before OnCtrl
	wctx        context.Context   // the ctx whose end wakes writers (see watchLocked)
	wstop       func() bool
}

func (c *Conn) newChannel(id uint32, kind string) *Channel {
	ch := &Channel{c: c, id: id, kind: kind, inputEnabled: true}
	ch.ctx, ch.cancel = context.WithCancel(c.ctx)
	ch.cond.L = &c.mu
	ch.q.class = ClassProcess
	if kind == "terminal" {
		ch.q.class = ClassTerminal
	}
	return ch
}

// ID returns the channel id.
func (ch *Channel) ID() uint32 { return ch.id }

// Kind returns the channel kind from OPEN.
func (ch *Channel) Kind() string { return ch.kind }

// Conn returns the channel's connection.
func (ch *Channel) Conn() *Conn { return ch.c }

// Done is closed when the channel is closed by either side or the
// connection ends.
func (ch *Channel) Done() <-chan struct{} { return ch.ctx.Done() }

// Context returns a context that ends with the channel.
func (ch *Channel) Context() context.Context { return ch.ctx }

// Meta returns the OPEN_OK meta (client side).
func (ch *Channel) Meta() json.RawMessage {
	ch.c.mu.Lock()
	defer ch.c.mu.Unlock()
	return ch.meta
}

// Err returns why the channel closed, or nil while it is open.
func (ch *Channel) Err() error {
	ch.c.mu.Lock()
	defer ch.c.mu.Unlock()
	if !ch.closed {
		return nil
	}
	return ch.closeErr
}

// SetClass sets the scheduling class of the channel's output. The default
// is ClassTerminal for kind "terminal", ClassProcess otherwise.
func (ch *Channel) SetClass(cl Class) {
	if cl < 0 || cl >= numClasses {
		return
	}
	ch.c.mu.Lock()
	defer ch.c.mu.Unlock()
	ch.q.class = cl // takes effect the next time the queue is scheduled
}

// SetInputEnabled chooses, before the open handler returns, whether the
// peer may send DATA: a disabled channel grants 0 credit (a read-only
// viewer, a process without stdin) and holds no input budget.
func (ch *Channel) SetInputEnabled(on bool) {
	ch.c.mu.Lock()
	defer ch.c.mu.Unlock()
	ch.inputEnabled = on
}

// OnCtrl sets the function that receives the peer's CTRL ops. On the
// server, client CTRL (resize, signal) is out of band: fn runs on the
// connection's read goroutine as soon as the frame arrives, even when
// input is blocked by credit, so it must not block; ops that arrived
// before OnCtrl are delivered at once. On the client, server CTRL (exit,
// gap, sync) is in band: Read calls fn when the stream reaches it.
func (ch *Channel) OnCtrl(fn func(op json.RawMessage)) {
	ch.c.mu.Lock()
	ch.onCtrl = fn
	backlog := ch.ctrlBacklog
	ch.ctrlBacklog = nil
	ch.c.mu.Unlock()
	for _, op := range backlog {
		fn(op)
	}
}

// Credit returns the DATA bytes this end may send now without blocking.
func (ch *Channel) Credit() int {
	ch.c.mu.Lock()
	defer ch.c.mu.Unlock()
	return int(ch.sendCredit)
}

// Returned is the credit the peer has given back with WINDOW since the
// channel opened. A peer that returns credit once its sink took the
// bytes (a process's stdin) has taken at least that many.
func (ch *Channel) Returned() int64 {
	ch.c.mu.Lock()
	defer ch.c.mu.Unlock()
	return ch.returned
}

// Read reads DATA and returns the credit to the peer once the bytes are
// taken. It returns io.EOF after the peer's EOF and the buffered bytes,
// and the channel's error after a CLOSE (buffered bytes first when the
// peer closed).
func (ch *Channel) Read(p []byte) (int, error) {
	n, _, err := ch.read(p, true, false)
	return n, err
}

// ReadNoCredit is Read without returning credit: call Consumed once the
// sink took the bytes (a PTY or stdin write returned).
func (ch *Channel) ReadNoCredit(p []byte) (int, error) {
	n, _, err := ch.read(p, false, false)
	return n, err
}

// ReadFrame returns the next DATA payload whole (p must hold maxFrame
// bytes, or io.ErrShortBuffer is returned), or the next in-band CTRL op
// (client side) with n == 0. It returns credit like Read. Process
// channels use it to keep the stream byte at the start of each payload.
func (ch *Channel) ReadFrame(p []byte) (n int, ctrl json.RawMessage, err error) {
	return ch.read(p, true, true)
}

// Consumed returns n bytes of credit taken with ReadNoCredit.
func (ch *Channel) Consumed(n int) {
	if n <= 0 {
		return
	}
	ch.c.mu.Lock()
	defer ch.c.mu.Unlock()
	ch.consumedLocked(int64(n))
	ch.c.flushLocked()
}

// consumedLocked returns credit, coalesced until at least half the
// window is owed. The caller flushes (flushLocked) afterwards.
func (ch *Channel) consumedLocked(n int64) {
	if ch.closed {
		return
	}
	ch.unreturned += n
	if ch.unreturned*2 < ch.granted {
		return
	}
	ch.pendingWindow += ch.unreturned
	ch.recvAvail += ch.unreturned
	ch.unreturned = 0
	if !ch.inWindowReady {
		ch.inWindowReady = true
		ch.c.windowReady.push(ch) // the caller flushes
	}
}

// read serves Read, ReadNoCredit and ReadFrame. While the channel is
// empty, a Read offers p to the read loop (see Conn.readData) and waits;
// bytes delivered into p are returned first, then buffered records in
// order, then EOF or the close error.
func (ch *Channel) read(p []byte, credit, frame bool) (int, json.RawMessage, error) {
	c := ch.c
	c.mu.Lock()
	var mine uint64 // our offer of p to the read loop, if any
	withdraw := func() {
		if mine != 0 && ch.waitSeq == mine && ch.waitBuf != nil {
			ch.waitBuf = nil
		}
	}
	for {
		if mine != 0 && ch.directSeq == mine {
			if ch.directBusy { // the read loop is writing into p
				ch.readWaiters++
				ch.cond.Wait()
				ch.readWaiters--
				continue
			}
			n := ch.directN
			ch.directBuf, ch.directN, ch.directSeq = nil, 0, 0
			if n > 0 {
				return ch.finishRead(n, credit)
			}
			mine = 0 // nothing delivered (the frame was refused)
		}
		if !ch.in.recs.empty() {
			withdraw()
			break
		}
		switch {
		// Buffered input stays readable after the peer's CLOSE; after its
		// EOF and then its CLOSE (the protocol's order) a read sees EOF,
		// not the close: a stdin consumer must still see its input end.
		case ch.closed && (ch.closedHere || !ch.peerEOF):
			withdraw()
			err := ch.closeErr
			c.mu.Unlock()
			return 0, nil, err
		case ch.peerEOF:
			withdraw()
			c.mu.Unlock()
			return 0, nil, io.EOF
		}
		if mine == 0 && len(p) > 0 && (!frame || len(p) >= c.recvMaxFrame) && ch.waitBuf == nil && ch.directBuf == nil {
			// Offer p: one offer at a time, so concurrent Reads never
			// take each other's bytes. A ReadFrame offers a buffer that
			// holds any frame, for one frame.
			ch.waitSeq++
			mine, ch.waitBuf, ch.waitFrame = ch.waitSeq, p, frame
		}
		ch.readWaiters++
		ch.cond.Wait()
		ch.readWaiters--
	}
	rec := ch.in.recs.peek()
	if rec.ctrl != nil {
		ch.in.recs.pop()
		if frame {
			c.mu.Unlock()
			return 0, rec.ctrl, nil
		}
		fn := ch.onCtrl
		c.mu.Unlock()
		if fn != nil {
			fn(rec.ctrl)
		}
		return ch.read(p, credit, frame)
	}
	if frame && rec.n > len(p) {
		c.mu.Unlock()
		return 0, nil, io.ErrShortBuffer
	}
	n := 0
	for n < len(p) && !ch.in.recs.empty() && ch.in.recs.peek().ctrl == nil {
		n += ch.in.take(p[n:])
		if frame {
			break
		}
	}
	return ch.finishRead(n, credit)
}

// finishRead returns credit for n bytes taken (unless the caller will
// call Consumed) and unlocks c.mu.
func (ch *Channel) finishRead(n int, credit bool) (int, json.RawMessage, error) {
	c := ch.c
	if credit {
		ch.consumedLocked(int64(n))
		c.flushLocked() // a due WINDOW goes out from here when the socket is idle
	}
	c.mu.Unlock()
	return n, nil, nil
}

// Write sends p as DATA frames of at most maxFrame bytes, blocking for
// credit; it returns when p is queued, or early with the channel's error.
// Frames leave FIFO with SendCtrl and CloseWrite. On a client channel
// whose OPEN_OK granted no credit (a process without stdin, a channel
// that takes no input) it fails at once with *Error not_writable.
func (ch *Channel) Write(p []byte) (int, error) {
	return ch.write(nil, -1, p)
}

// WriteContext is Write that gives up when ctx ends, returning the bytes
// queued so far and ctx's error.
func (ch *Channel) WriteContext(ctx context.Context, p []byte) (int, error) {
	return ch.write(ctx, -1, p)
}

// WriteStream writes p on a process channel: every DATA payload starts
// with the stream byte (1 stdout, 2 stderr). n counts bytes of p.
func (ch *Channel) WriteStream(ctx context.Context, stream byte, p []byte) (int, error) {
	return ch.write(ctx, int(stream), p)
}

func (ch *Channel) write(ctx context.Context, prefix int, p []byte) (int, error) {
	c := ch.c
	extra := 0
	if prefix >= 0 {
		extra = 1
	}
	total := 0
	c.mu.Lock()
	defer c.mu.Unlock()
	for len(p) > 0 {
		n, size, err := ch.awaitRoomLocked(ctx, len(p), extra)
		if err != nil {
			return total, err
		}
		f := getFrame(int(size))
		f.b = appendFrame(f.b, typeData, ch.id, nil)
		if extra == 1 {
			f.b = append(f.b, byte(prefix))
		}
		f.b = append(f.b, p[:n]...)
		f.cost, f.data, f.ch = size, true, ch
		c.used += size
		ch.sendCredit -= int64(n + extra)
		ch.dataQueued = true
		c.enqueueFlushLocked(&ch.q, f)
		p = p[n:]
		total += n
	}
	return total, nil
}

// awaitRoomLocked waits until ch may queue a DATA frame of up to want
// bytes (plus extra, the stream byte): it is open, has credit, has no
// frame of its own waiting or being filled, and the connection's budget
// has room. It returns the payload bytes allowed and the frame's size.
func (ch *Channel) awaitRoomLocked(ctx context.Context, want, extra int) (n int, size int64, err error) {
	c := ch.c
	if ctx != nil && ctx.Done() != nil && ctx != ch.wctx {
		ch.watchLocked(ctx)
	}
	for {
		if err := ch.writeErrLocked(ctx); err != nil {
			return 0, 0, err
		}
		if ch.noInput {
			// Credit only returns what was used: waiting would be forever.
			return 0, 0, NewError(CodeNotWritable, "the server granted this channel no credit: it takes no input")
		}
		if !ch.opened || ch.dataQueued || ch.filling || ch.sendCredit <= int64(extra) {
			ch.cond.Wait()
			continue
		}
		n = min(want, int(ch.sendCredit)-extra, c.sendMaxFrame-extra)
		size = int64(headerLen + extra + n)
		if c.used+size > c.outputCapLocked() && c.used > 0 {
			c.budgetWaiters = append(c.budgetWaiters, ch)
			ch.cond.Wait()
			continue
		}
		return n, size, nil
	}
}

// FillStream sends one DATA frame of stream whose bytes fill writes: once
// the channel has credit, no frame of its own waiting and room in the
// connection's budget, it reserves a frame of up to limit bytes (never more
// than the credit or a frame) and calls fill with it, without the
// connection's lock. What fill wrote is queued; nothing is when it wrote
// nothing. It returns fill's count and error, or why the channel cannot
// be written.
//
// A pump reads its source straight into the frame: no buffer of its own
// waits for credit, so a channel the peer does not read holds no memory
// beyond its one queued frame, within the budget. fill must not block
// long: it holds the channel's turn.
func (ch *Channel) FillStream(ctx context.Context, stream byte, limit int, fill func(p []byte) (int, error)) (int, error) {
	c := ch.c
	c.mu.Lock()
	n, size, err := ch.awaitRoomLocked(ctx, limit, 1)
	if err != nil {
		c.mu.Unlock()
		return 0, err
	}
	// Reserved while fill runs: the budget for others, the channel's
	// turn for its other writers.
	c.used += size
	ch.filling = true
	c.mu.Unlock()

	f := getFrame(int(size))
	f.b = appendFrame(f.b, typeData, ch.id, nil)
	f.b = append(f.b, stream)
	start := len(f.b)
	k, ferr := fill(f.b[start : start+n])
	k = max(0, min(k, n))
	f.b = f.b[:start+k]

	c.mu.Lock()
	defer c.mu.Unlock()
	ch.filling = false
	c.used -= size
	ch.cond.Broadcast()
	c.budgetFreedLocked()
	if k == 0 {
		putFrame(f)
		return 0, ferr
	}
	if err := ch.writeErrLocked(ctx); err != nil {
		putFrame(f)
		return 0, err
	}
	f.cost, f.data, f.ch = int64(len(f.b)), true, ch
	c.used += f.cost
	ch.sendCredit -= int64(k + 1)
	ch.dataQueued = true
	c.enqueueFlushLocked(&ch.q, f)
	return k, ferr
}

// watchLocked makes ctx's end wake ch's waiters. A pump writes with the
// same ctx every time, so the registration is kept (and replaced only
// for another ctx) rather than made per call: no allocation per frame.
func (ch *Channel) watchLocked(ctx context.Context) {
	if ch.wstop != nil {
		ch.wstop()
	}
	ch.wctx = ctx
	ch.wstop = context.AfterFunc(ctx, func() {
		ch.c.mu.Lock()
		ch.cond.Broadcast()
		ch.c.mu.Unlock()
	})
}

// writeErrLocked is the error a write or CTRL on ch gets now, if any.
func (ch *Channel) writeErrLocked(ctx context.Context) error {
	switch {
	case ch.closed:
		return ch.closeErr
	case ch.localEOF:
		return ErrWriteClosed
	case ch.openErr != nil:
		return ch.openErr
	case ctx != nil && ctx.Err() != nil:
		return ctx.Err()
	}
	return nil
}

// frameTakenLocked runs when the writer takes a frame of ch.
func (ch *Channel) frameTakenLocked(f *outFrame) {
	if f.data {
		ch.dataQueued = false
	} else {
		ch.smallQueued--
	}
	ch.cond.Broadcast()
}

// SendCtrl sends a CTRL op (marshalled from v). From the server it is FIFO
// with DATA (exit after the last byte); from the client it jumps ahead
// (resize and signal work while input is blocked).
func (ch *Channel) SendCtrl(v any) error {
	payload, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return ch.sendSmall(typeCtrl, payload, !ch.c.server)
}

// CloseWrite sends EOF after the queued DATA: no more DATA will follow.
func (ch *Channel) CloseWrite() error {
	return ch.sendSmall(typeEOF, nil, false)
}

// sendSmall queues a CTRL or EOF frame: urgent, or FIFO in the channel
// (waiting while the channel already queues maxQueuedSmall of them).
func (ch *Channel) sendSmall(t frameType, payload []byte, urgent bool) error {
	if len(payload) > ch.c.sendMaxFrame {
		return ErrTooLarge
	}
	c := ch.c
	c.mu.Lock()
	defer c.mu.Unlock()
	for {
		if err := ch.writeErrLocked(nil); err != nil {
			return err
		}
		if ch.opened && (urgent || ch.smallQueued < maxQueuedSmall) {
			break
		}
		ch.cond.Wait()
	}
	if t == typeEOF {
		// Before the frame is queued: queuing may write it at once,
		// with c.mu released, and a Write waking meanwhile must not
		// queue DATA after the EOF.
		ch.localEOF = true
		ch.cond.Broadcast() // a Write waiting for credit ends (ErrWriteClosed)
	}
	f := getFrame(headerLen + len(payload))
	f.b = appendFrame(f.b, t, ch.id, payload)
	if urgent {
		c.pushUrgentFlushLocked(f)
	} else {
		f.ch = ch
		ch.smallQueued++
		c.enqueueFlushLocked(&ch.q, f)
	}
	return nil
}

// Close sends CLOSE after the queued frames and drops the channel's
// state; blocked Reads and Writes return ErrChannelClosed.
func (ch *Channel) Close() error { return ch.CloseWithError(nil) }

// CloseWithError is Close with a code, reason and message in the CLOSE.
func (ch *Channel) CloseWithError(e *Error) error {
	c := ch.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if ch.closed {
		return nil
	}
	ch.queueCloseLocked(e)
	ch.dropLocked(ErrChannelClosed, true)
	c.flushLocked()
	return nil
}

// queueCloseLocked queues a CLOSE frame at the end of ch's queue.
func (ch *Channel) queueCloseLocked(e *Error) {
	var payload []byte
	if e != nil {
		payload, _ = json.Marshal(asError(e))
	}
	f := getFrame(headerLen + len(payload))
	f.b = appendFrame(f.b, typeClose, ch.id, payload)
	ch.q.held = false
	ch.c.enqueueLocked(&ch.q, f)
}

// dropLocked marks ch closed with err, frees its budget and wakes its
// waiters. After a local Close (local), queued frames, the CLOSE
// included, still go out and buffered input is dropped; after the peer's
// CLOSE or the end of the connection, queued output is dropped and
// buffered input stays readable.
func (ch *Channel) dropLocked(err error, local bool) {
	c := ch.c
	if ch.closed {
		return
	}
	ch.closed = true
	ch.closedHere = local
	ch.closeErr = err
	if c.channels[ch.id] == ch {
		delete(c.channels, ch.id)
	}
	c.inputGranted -= ch.granted
	ch.granted = 0
	if local {
		ch.in.reset()
	} else {
		for !ch.q.frames.empty() {
			f := ch.q.frames.pop()
			c.used -= f.cost
			putFrame(f)
		}
	}
	ch.openDone = true
	if ch.wstop != nil {
		ch.wstop()
	}
	ch.cond.Broadcast()
	c.wakeBudgetLocked()
	ch.cancel()
}
