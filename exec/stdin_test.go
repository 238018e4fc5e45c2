package exec

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"
)

// A writer that comes back under its stream's name takes over from the
// one it replaces, even mid-write on a full pipe, and learns how many of
// its bytes the process got: sending the rest from there, every byte is
// written once.
func TestStdinStreamTakeOverWritesEveryByteOnce(t *testing.T) {
	e := newTestEngine(t)
	p := startProc(t, e, ProcessRequest{Command: "sleep 0.3; wc -c", Stdin: true})
	old, written, err := e.AttachStdin(p.ID, "w1")
	if err != nil || written != 0 {
		t.Fatalf("AttachStdin: %d %v", written, err)
	}
	data := bytes.Repeat([]byte("x"), 1<<20)
	type result struct {
		n   int
		err error
	}
	done := make(chan result, 1)
	go func() {
		n, err := old.Write(data) // blocks: wc does not read for 0.3 s
		done <- result{n, err}
	}()
	time.Sleep(50 * time.Millisecond) // the write is blocked on the full pipe by then
	cur, written, err := e.AttachStdin(p.ID, "w1")
	if err != nil {
		t.Fatal(err)
	}
	r := <-done
	if !errors.Is(r.err, ErrSuperseded) || int64(r.n) != written || written >= int64(len(data)) {
		t.Fatalf("the superseded write: %d %v; the count %d; want ErrSuperseded having written the count", r.n, r.err, written)
	}
	if _, err := old.Write([]byte("late")); !errors.Is(err, ErrSuperseded) {
		t.Fatalf("a later write of the superseded writer: %v", err)
	}
	if n, err := cur.Write(data[written:]); err != nil || n != len(data)-int(written) {
		t.Fatalf("the rest: %d %v", n, err)
	}
	// Another name has its own count; the unnamed writes count in none.
	other, w2, err := e.AttachStdin(p.ID, "w2")
	if err != nil || w2 != 0 {
		t.Fatalf("a second name: %d %v", w2, err)
	}
	if _, err := other.Write([]byte("12345")); err != nil {
		t.Fatal(err)
	}
	if _, err := e.WriteStdin(p.ID, []byte("678")); err != nil {
		t.Fatal(err)
	}
	if _, w2, _ := e.AttachStdin(p.ID, "w2"); w2 != 5 {
		t.Fatalf("w2's count: %d, want 5", w2)
	}
	if err := e.CloseStdin(p.ID); err != nil {
		t.Fatal(err)
	}
	waitProc(t, e, p.ID)
	out, _, _, _ := e.ReadOutput(p.ID, Stdout, 0, 100)
	if got := strings.TrimSpace(string(out)); got != "1048584" {
		t.Fatalf("wc -c read %s bytes, want 1048584 (1 MiB + 8, each once)", got)
	}
	if _, _, err := e.AttachStdin(p.ID, "w3"); !errors.Is(err, ErrNotWritable) {
		t.Fatalf("AttachStdin after stdin closed: %v", err)
	}
}
