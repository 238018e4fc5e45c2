package pty

import (
	"bytes"
	"strings"
	"testing"

	"github.com/muxd/muxd/internal/termmodes"
)

func TestRingKeepsLastBytesWithAbsoluteOffsets(t *testing.T) {
	tests := []struct {
		name       string
		size       int
		writes     []string
		first, end int64
		from       int64
		want       string
	}{
		{"empty", 8, nil, 0, 0, 0, ""},
		{"partial", 8, []string{"abc"}, 0, 3, 0, "abc"},
		{"exactly full", 4, []string{"ab", "cd"}, 0, 4, 1, "bcd"},
		{"wraps", 4, []string{"abc", "def"}, 2, 6, 2, "cdef"},
		{"write larger than ring", 4, []string{"0123456789"}, 6, 10, 7, "789"},
		{"before first reads nothing", 4, []string{"abcdef"}, 2, 6, 1, ""},
		{"at end reads nothing", 4, []string{"abcdef"}, 2, 6, 6, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := newRing(tc.size)
			for _, w := range tc.writes {
				r.write([]byte(w))
			}
			if r.first() != tc.first || r.end != tc.end {
				t.Fatalf("got first %d end %d, want %d %d", r.first(), r.end, tc.first, tc.end)
			}
			dst := make([]byte, 16)
			n := r.read(tc.from, dst)
			if got := string(dst[:n]); got != tc.want {
				t.Fatalf("read(%d) = %q, want %q", tc.from, got, tc.want)
			}
		})
	}
}

func TestRingReadRespectsDestinationSize(t *testing.T) {
	r := newRing(8)
	r.write([]byte("abcdefghij")) // first 2, wraps
	dst := make([]byte, 3)
	var got bytes.Buffer
	for off := r.first(); off < r.end; {
		n := r.read(off, dst)
		if n == 0 {
			t.Fatalf("read at %d returned nothing", off)
		}
		got.Write(dst[:n])
		off += int64(n)
	}
	if got.String() != "cdefghij" {
		t.Fatalf("got %q, want %q", got.String(), "cdefghij")
	}
}

func TestRingGrowsThenWrapsLikeAFlatBuffer(t *testing.T) {
	const size = 3*initialRing + 123
	r := newRing(size)
	if len(r.buf) != initialRing {
		t.Fatalf("initial allocation %d, want %d", len(r.buf), initialRing)
	}
	var all []byte
	for i := 0; len(all) < 5*size; i++ {
		chunk := bytes.Repeat([]byte{byte(i)}, 1+(i*7919)%5000)
		r.write(chunk)
		all = append(all, chunk...)
		if r.end != int64(len(all)) {
			t.Fatalf("end %d, want %d", r.end, len(all))
		}
		first := max(0, len(all)-size)
		if r.first() != int64(first) {
			t.Fatalf("after %d bytes: first %d, want %d (buf %d)", len(all), r.first(), first, len(r.buf))
		}
		got := make([]byte, len(all)-first)
		if n := r.read(int64(first), got); n != len(got) || !bytes.Equal(got, all[first:]) {
			t.Fatalf("after %d bytes: retained bytes differ (read %d)", len(all), n)
		}
	}
	if len(r.buf) != size {
		t.Fatalf("grew to %d, want %d", len(r.buf), size)
	}
}

// The ring's head follows exactly the bytes it overwrote, however the
// writes fall: split sequences, wraps, writes larger than the ring.
func TestRingHeadHoldsTheModesOfOverwrittenBytes(t *testing.T) {
	small := "\x1b[?1049h" + "abcdefghijklmnopq" + "\x1b[?2004h" + "0123456789012345678" + "\x1b[?1049l" + "xyz"
	// Larger than a new ring's allocation: the ring grows while it
	// overwrites.
	large := strings.Repeat("\x1b[?1h"+strings.Repeat("x", 5000)+"\x1b[?1l\x1b[?1000h"+strings.Repeat("y", 7000)+"\x1b[?1000l", 20)
	tests := []struct {
		stream string
		size   int
		chunks []int
	}{
		{small, 16, nil}, // every chunk size
		{large, 3 * initialRing, []int{1000, 4093, 16 << 10, 50000, 300000}},
	}
	for _, tc := range tests {
		chunks := tc.chunks
		if chunks == nil {
			for c := 1; c <= len(tc.stream); c++ {
				chunks = append(chunks, c)
			}
		}
		for _, chunk := range chunks {
			r := newRing(tc.size)
			for i := 0; i < len(tc.stream); i += chunk {
				r.write([]byte(tc.stream[i:min(len(tc.stream), i+chunk)]))
			}
			var want termmodes.Modes
			want.Feed([]byte(tc.stream[:r.first()]))
			if got, w := string(r.head.AppendRestore(nil)), string(want.AppendRestore(nil)); got != w {
				t.Fatalf("ring of %d, chunks of %d: head restores %q, want %q (first %d)", tc.size, chunk, got, w, r.first())
			}
			if r.first() == 0 {
				t.Fatalf("ring of %d, chunks of %d: nothing overwritten", tc.size, chunk)
			}
		}
	}
}
