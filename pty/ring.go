package pty

// ring keeps the last len(buf) bytes of a stream, addressed by absolute
// offsets counted from the stream's first byte. It is not safe for
// concurrent use: the terminal's mutex guards it.
type ring struct {
	buf []byte
	end int64 // offset one past the last byte written
}

func newRing(size int) ring { return ring{buf: make([]byte, size)} }

// first is the offset of the oldest retained byte.
func (r *ring) first() int64 {
	if n := int64(len(r.buf)); r.end > n {
		return r.end - n
	}
	return 0
}

// write appends p, overwriting the oldest bytes when full.
func (r *ring) write(p []byte) {
	if len(p) > len(r.buf) {
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
