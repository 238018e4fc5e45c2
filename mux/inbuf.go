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

// putData appends a DATA payload; limit is the most the ring may hold.
func (b *inbuf) putData(p []byte, limit int) {
	if b.n+len(p) > len(b.ring) {
		b.grow(b.n+len(p), limit)
	}
	w := (b.r + b.n) % len(b.ring)
	k := copy(b.ring[w:], p)
	copy(b.ring, p[k:])
	b.n += len(p)
	b.recs.push(inRec{n: len(p)})
}

func (b *inbuf) grow(need, limit int) {
	size := max(len(b.ring)*2, 4<<10)
	for size < need {
		size *= 2
	}
	size = max(min(size, limit), need)
	nr := make([]byte, size)
	b.copyOut(nr[:b.n])
	b.ring, b.r = nr, 0
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
	if b.n == 0 {
		b.r = 0
	}
	return n
}

// putCtrl appends an in-band CTRL op.
func (b *inbuf) putCtrl(op json.RawMessage) { b.recs.push(inRec{ctrl: op}) }

// reset drops everything.
func (b *inbuf) reset() { *b = inbuf{} }
