package mux

import "encoding/json"

// inbuf holds a channel's received DATA until the consumer takes it. Its
// size is bounded by the credit the channel granted; bytes live in one
// ring (allocated on demand, grown up to the grant), so small frames do
// not pin large buffers. recs keeps frame boundaries and in-band CTRL.
type inbuf struct {
	ring []byte
	r, n int // read position and buffered byte count in ring
	recs fifo[inRec]
}

// inRec is one received DATA frame (n bytes, possibly partly read) or
// one in-band CTRL op.
type inRec struct {
	n    int
	ctrl json.RawMessage
}

// resize makes the ring size bytes, keeping the buffered bytes.
func (b *inbuf) resize(size int) {
	nr := make([]byte, size)
	b.copyOut(nr[:b.n])
	b.ring, b.r = nr, 0
}

// commit records n bytes written at the write position (r+n) as one
// DATA frame.
func (b *inbuf) commit(n int) {
	b.n += n
	b.recs.push(inRec{n: n})
}

// copyOut copies the first len(p) buffered bytes into p without
// consuming them.
func (b *inbuf) copyOut(p []byte) {
	if len(p) == 0 {
		return
	}
	k := copy(p, b.ring[b.r:min(b.r+len(p), len(b.ring))])
	copy(p[k:], b.ring)
}

// take moves up to len(p) bytes of the head DATA record into p.
func (b *inbuf) take(p []byte) int {
	rec := &b.recs.items[b.recs.head]
	n := min(len(p), rec.n)
	b.copyOut(p[:n])
	b.r = (b.r + n) % len(b.ring)
	b.n -= n
	rec.n -= n
	if rec.n == 0 {
		b.recs.pop()
	}
	// r is not rewound when the ring empties: the read loop may be
	// filling the ring at r+n without the lock.
	return n
}

// putCtrl appends an in-band CTRL op.
func (b *inbuf) putCtrl(op json.RawMessage) { b.recs.push(inRec{ctrl: op}) }

// reset drops everything.
func (b *inbuf) reset() { *b = inbuf{} }
