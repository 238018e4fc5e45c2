package pty

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"
)

func TestConcurrentWritesArriveWholeAndInOrder(t *testing.T) {
	const writers, each, size = 8, 4, 8 << 10
	out := filepath.Join(t.TempDir(), "in")
	m := newTestManager(t, Config{})
	total := writers * each * size
	term, err := m.Create(CreateOptions{Shell: "/bin/sh", Args: []string{"-c",
		"stty raw -echo; echo go; head -c " + strconv.Itoa(total) + " > " + out}})
	if err != nil {
		t.Fatal(err)
	}
	c := attach(t, term, AttachOptions{From: -1})
	c.waitFor(t, "go")
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			block := bytes.Repeat([]byte{byte('a' + w)}, size)
			for range each {
				if _, err := term.Write(block); err != nil {
					t.Errorf("write: %v", err)
				}
			}
		})
	}
	wg.Wait()
	if st := c.waitExit(t); st.Code != 0 {
		t.Fatalf("exit: %+v", st)
	}
	got, err := os.ReadFile(out)
	if err != nil || len(got) != total {
		t.Fatalf("read %d bytes (%v), want %d", len(got), err, total)
	}
	for i := 0; i < total; i += size {
		if blk := got[i : i+size]; !bytes.Equal(blk, bytes.Repeat(blk[:1], size)) {
			t.Fatalf("block at %d is interleaved", i)
		}
	}
}

// A write given up on (its context ended) while queued behind a program
// that does not read is dropped, but for the piece being written then:
// the program, once it reads, gets a few KiB, not the whole megabyte.
func TestCancelledWriteIsNotTypedLater(t *testing.T) {
	m := newTestManager(t, Config{})
	out := filepath.Join(t.TempDir(), "got")
	term, err := m.Create(CreateOptions{Shell: "/bin/sh", Args: []string{"-c", "stty raw -echo; echo go; sleep 0.5; exec cat >" + out}})
	if err != nil {
		t.Fatal(err)
	}
	c := attach(t, term, AttachOptions{From: -1})
	c.waitFor(t, "go")
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { _, err := term.WriteContext(ctx, bytes.Repeat([]byte("z"), 1<<20)); errc <- err }()
	time.Sleep(100 * time.Millisecond) // the writer goroutine has the request by then
	cancel()
	if err := recvOrTimeout(t, errc, "cancelled write"); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled write: %v", err)
	}
	time.Sleep(time.Second) // cat reads what the PTY still had
	m.DestroyTerminal(term)
	got, _ := os.ReadFile(out)
	if len(got) > 64<<10 {
		t.Fatalf("the program read %d bytes of the cancelled write, want a few KiB at most", len(got))
	}
}

func TestWriteToProgramNotReadingEndsWithContextOrDetach(t *testing.T) {
	m := newTestManager(t, Config{KillGrace: 200 * time.Millisecond})
	goroutines := runtimeGoroutines()
	term, err := m.Create(CreateOptions{Shell: "/bin/sh", Args: []string{"-c", "stty raw -echo; echo go; exec sleep 1000"}})
	if err != nil {
		t.Fatal(err)
	}
	c := attach(t, term, AttachOptions{From: -1})
	c.waitFor(t, "go")
	big := make([]byte, 1<<20)

	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { _, err := term.WriteContext(ctx, big); errc <- err }()
	// The PTY takes a few KiB; the rest waits for a reader that never
	// comes. The writer must still return once its context ends.
	cancel()
	if err := recvOrTimeout(t, errc, "cancelled write"); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled write: got %v, want context.Canceled", err)
	}

	a, _, err := term.Attach(AttachOptions{From: -1})
	if err != nil {
		t.Fatal(err)
	}
	go func() { _, err := a.Write(big); errc <- err }()
	a.Detach()
	if err := recvOrTimeout(t, errc, "write of a detached attachment"); !errors.Is(err, ErrDetached) {
		t.Fatalf("detached write: got %v, want ErrDetached", err)
	}

	// Destroying the terminal ends the writer stuck in the PTY.
	m.DestroyTerminal(term)
	c.a.Detach()
	<-c.done
	settleGoroutines(t, goroutines)
}
