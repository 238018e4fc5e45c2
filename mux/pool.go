package mux

import "sync"

// outFrame is one encoded frame waiting for the writer. Frames come from
// pools so the steady state of a DATA pump allocates nothing.
type outFrame struct {
	b      []byte
	cost   int64         // bytes charged to the connection budget while queued
	data   bool          // a DATA frame: frees the channel's one output slot
	ch     *Channel      // owning channel for DATA, CTRL, EOF, CLOSE; nil otherwise
	pong   bool          // counted in Conn.pongs
	notify bool          // counted in Conn.notifies
	sent   chan struct{} // closed once written, for callers that wait
}

const smallFrame = 512

var (
	smallPool = sync.Pool{New: func() any { return &outFrame{b: make([]byte, 0, smallFrame)} }}
	bigPool   = sync.Pool{New: func() any { return &outFrame{b: make([]byte, 0, headerLen+32<<10+1)} }}
)

// getFrame returns an empty frame with room for size bytes.
func getFrame(size int) *outFrame {
	var f *outFrame
	if size <= smallFrame {
		f = smallPool.Get().(*outFrame)
	} else {
		f = bigPool.Get().(*outFrame)
		if cap(f.b) < size {
			f.b = make([]byte, 0, size)
		}
	}
	f.b = f.b[:0]
	return f
}

// putFrame recycles f; oversized buffers (large RPC messages) are left
// to the garbage collector.
func putFrame(f *outFrame) {
	*f = outFrame{b: f.b}
	switch c := cap(f.b); {
	case c <= smallFrame:
		smallPool.Put(f)
	case c <= headerLen+64<<10:
		bigPool.Put(f)
	}
}

// fifo is a queue that reuses its backing array, so a steady flow of
// pushes and pops does not allocate.
type fifo[T any] struct {
	items []T
	head  int
}

func (q *fifo[T]) len() int { return len(q.items) - q.head }

func (q *fifo[T]) push(v T) { q.items = append(q.items, v) }

// pushFront puts v before every queued item.
func (q *fifo[T]) pushFront(v T) {
	if q.head > 0 {
		q.head--
		q.items[q.head] = v
		return
	}
	var zero T
	q.items = append(q.items, zero)
	copy(q.items[1:], q.items)
	q.items[0] = v
}

func (q *fifo[T]) peek() T { return q.items[q.head] }

func (q *fifo[T]) pop() T {
	var zero T
	v := q.items[q.head]
	q.items[q.head] = zero
	q.head++
	if q.head == len(q.items) {
		q.items, q.head = q.items[:0], 0
	}
	return v
}

func (q *fifo[T]) empty() bool { return q.len() == 0 }
