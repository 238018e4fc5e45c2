package exec

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestOutputLogRingKeepsLastLimitBytes(t *testing.T) {
	tests := []struct {
		name   string
		limit  int64
		writes []string
		first  int64
		kept   string
	}{
		{"under limit", 10, []string{"abc", "def"}, 0, "abcdef"},
		{"exactly full", 6, []string{"abc", "def"}, 0, "abcdef"},
		{"wraps", 4, []string{"abc", "def"}, 2, "cdef"},
		{"one write past limit", 3, []string{"abcdefgh"}, 5, "fgh"},
		{"many wraps", 5, []string{"0123", "4567", "89ab", "cd"}, 9, "9abcd"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l := newOutputLog(filepath.Join(t.TempDir(), "log"), tc.limit)
			defer l.remove()
			for _, w := range tc.writes {
				if err := l.append([]byte(w)); err != nil {
					t.Fatal(err)
				}
			}
			l.finish()
			first, end, done := l.bounds()
			buf := make([]byte, 64)
			n, _, err := l.readOnce(buf, first)
			if err != nil || first != tc.first || !done || string(buf[:n]) != tc.kept || end != tc.first+int64(len(tc.kept)) {
				t.Fatalf("first=%d end=%d kept=%q err=%v, want first=%d kept=%q", first, end, buf[:n], err, tc.first, tc.kept)
			}
		})
	}
}

func TestOutputReaderWakesOnAppendAndEndsAtFinish(t *testing.T) {
	l := newOutputLog(filepath.Join(t.TempDir(), "log"), 1<<20)
	defer l.remove()
	r := newOutputReader(l, Stdout, 0)
	got := make(chan []byte, 1)
	go func() {
		b, _ := io.ReadAll(r)
		got <- b
	}()
	var want bytes.Buffer
	for i := range 100 {
		chunk := bytes.Repeat([]byte{byte(i)}, 1000)
		want.Write(chunk)
		if err := l.append(chunk); err != nil {
			t.Fatal(err)
		}
	}
	l.finish()
	if b := recvOrTimeout(t, got, 5*time.Second, "follower EOF"); !bytes.Equal(b, want.Bytes()) {
		t.Fatalf("follower got %d bytes, want %d", len(b), want.Len())
	}
}

func TestOutputReaderCloseUnblocksRead(t *testing.T) {
	l := newOutputLog(filepath.Join(t.TempDir(), "log"), 1<<20)
	defer l.remove()
	r := newOutputReader(l, Stdout, 0)
	errc := make(chan error, 1)
	go func() {
		_, err := r.Read(make([]byte, 10))
		errc <- err
	}()
	_ = r.Close()
	if err := recvOrTimeout(t, errc, 5*time.Second, "unblocked read"); !errors.Is(err, io.ErrClosedPipe) {
		t.Errorf("Read after Close: %v", err)
	}
}

// TestOutputReaderUnderConcurrentWrapNeverReturnsWrongBytes appends a
// counting pattern through a small ring while a follower reads: every
// byte it returns must be the byte at that offset, with gaps reported.
func TestOutputReaderUnderConcurrentWrapNeverReturnsWrongBytes(t *testing.T) {
	l := newOutputLog(filepath.Join(t.TempDir(), "log"), 4096)
	defer l.remove()
	const total = 4 << 20
	go func() {
		buf := make([]byte, 1500)
		for off := 0; off < total; off += len(buf) {
			for i := range buf {
				buf[i] = byte((off + i) % 251)
			}
			_ = l.append(buf)
		}
		l.finish()
	}()
	r := newOutputReader(l, Stdout, 0)
	buf := make([]byte, 3000)
	gaps := 0
	for range 1 << 24 {
		off := r.Offset()
		n, err := r.Read(buf)
		for i := range n {
			if buf[i] != byte((off+int64(i))%251) {
				t.Fatalf("byte at %d = %d, want %d", off+int64(i), buf[i], (off+int64(i))%251)
			}
		}
		var gap *GapError
		if errors.As(err, &gap) {
			gaps++
			continue
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("%d gaps", gaps)
}

// A write that fails (a full disk, an unwritable data dir) loses its
// bytes, not their place: readers get a gap over them instead of a
// stream that closes up over the hole, and the owner hears of it once.
func TestOutputLogWriteFailureIsAGap(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "later")
	l := newOutputLog(filepath.Join(dir, "log"), 1<<20)
	defer l.remove()
	var losses []error
	l.onLoss = func(err error) { losses = append(losses, err) }
	if err := l.append([]byte("kept-before|")); err == nil {
		t.Fatal("append with no directory for the file: no error")
	}
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := l.append([]byte("first|")); err != nil {
		t.Fatal(err)
	}
	// The descriptor goes bad under the log (as writes fail on ENOSPC).
	l.mu.Lock()
	good := l.f
	ro, err := os.Open(l.path)
	if err != nil {
		t.Fatal(err)
	}
	l.f = ro
	l.mu.Unlock()
	if err := l.append([]byte("lost|")); err == nil {
		t.Fatal("append through a read-only descriptor: no error")
	}
	l.mu.Lock()
	l.f = good
	l.mu.Unlock()
	_ = ro.Close()
	if err := l.append([]byte("after")); err != nil {
		t.Fatal(err)
	}
	l.finish()
	first, end, _ := l.bounds()
	if first != 23 || end != 28 {
		t.Fatalf("bounds after two failed writes: [%d, %d), want [23, 28)", first, end)
	}
	r := newOutputReader(l, Stdout, 0)
	var gap *GapError
	if _, err := r.Read(make([]byte, 64)); !errors.As(err, &gap) || gap.Bytes != 23 {
		t.Fatalf("reading from 0: %v, want a gap of 23 bytes", err)
	}
	b, err := io.ReadAll(r)
	if err != nil || string(b) != "after" {
		t.Fatalf("after the gap: %q %v, want %q", b, err, "after")
	}
	if len(losses) != 1 {
		t.Fatalf("the owner was told %d times, want once: %v", len(losses), losses)
	}
}

// A reader whose record is removed under it ends with ErrNotFound, not
// an unmapped "file already closed" (which a client saw as internal).
func TestOutputReaderOfARemovedRecord(t *testing.T) {
	e := newTestEngine(t)
	p := startProc(t, e, ProcessRequest{Command: "head -c 2000000 /dev/zero"})
	waitProc(t, e, p.ID)
	r, err := e.OpenOutput(p.ID, Stdout, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if _, err := io.ReadFull(r, make([]byte, 100<<10)); err != nil {
		t.Fatal(err)
	}
	if err := e.RemoveProcess(p.ID); err != nil {
		t.Fatal(err)
	}
	_, err = io.Copy(io.Discard, r)
	if !errors.Is(err, ErrNotFound) {
		t.Fatalf("reading on after the record was removed: %v, want ErrNotFound", err)
	}
}
