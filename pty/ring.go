package pty

import "github.com/muxd/muxd/internal/termmodes"

// initialRing is a new ring's allocation; it grows by doubling up to its
// size, so idle terminals cost little memory.
const initialRing = 16 << 10 // 16 KiB

// ring keeps the last size bytes of a stream, addressed by absolute
// offsets counted from the stream's first byte. It is not safe for
// concurrent use: the terminal's mutex guards it.
//
// Invariant: while len(buf) < size the ring has never wrapped (end <=
// len(buf)), so growing only copies buf[:end] in place.
type ring struct {
	buf  []byte
	size int
	end  int64 // offset one past the last byte written
	// head is the terminal modes in effect at the oldest retained byte:
	// the bytes the ring overwrites are fed to it first, so a replay
	// from first can begin by setting them (see Attach).
	head termmodes.Modes
}

func newRing(size int) ring { return ring{buf: make([]byte, min(size, initialRing)), size: size} }

// first is the offset of the oldest retained byte.
func (r *ring) first() int64 {
	if n := int64(len(r.buf)); r.end > n {
		return r.end - n
	}
	return 0
}

// write appends p, overwriting the oldest bytes when full.
func (r *ring) write(p []byte) {
	if len(r.buf) < r.size && r.end+int64(len(p)) > int64(len(r.buf)) {
		n := min(r.size, max(2*len(r.buf), int(r.end)+len(p)))
		buf := make([]byte, n)
		copy(buf, r.buf[:r.end])
		r.buf = buf
	}
	r.evict(r.end + int64(len(p)) - int64(len(r.buf)))
	if len(p) > len(r.buf) {
		r.head.Feed(p[:len(p)-len(r.buf)])
		r.end += int64(len(p) - len(r.buf))
		p = p[len(p)-len(r.buf):]
	}
	for len(p) > 0 {
		i := int(r.end % int64(len(r.buf)))
		n := copy(r.buf[i:], p)
		r.end += int64(n)
		p = p[n:]
	}
}

// evict feeds head the retained bytes before offset to, which a write is
// about to overwrite (bytes of the write itself are fed by write).
func (r *ring) evict(to int64) {
	from := r.first()
	to = min(to, r.end)
	for from < to {
		i := int(from % int64(len(r.buf)))
		n := min(int(to-from), len(r.buf)-i)
		r.head.Feed(r.buf[i : i+n])
		from += int64(n)
	}
}

// read copies retained bytes starting at off into dst and returns how
// many; off must lie within [first, end].
func (r *ring) read(off int64, dst []byte) int {
	if off < r.first() || off > r.end {
		return 0
	}
	if rest := r.end - off; int64(len(dst)) > rest {
		dst = dst[:rest]
	}
	total := 0
	for len(dst) > 0 {
		i := int(off % int64(len(r.buf)))
		n := copy(dst, r.buf[i:])
		dst = dst[n:]
		off += int64(n)
		total += n
	}
	return total
}
