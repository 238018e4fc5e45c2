package client

import (
	"context"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// A Close that comes while a reconnect's resend is about to start waits
// for the resend: an EOF sent first would end the process's input before
// bytes the earlier Writes reported written.
func TestStdinCloseWaitsForTheResend(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	url := os.Getenv("MUXD_URL") // the daemon of TestMain
	c, err := Dial(ctx, url, Options{MaxBackoff: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Close() }()
	// wc reads nothing for a while: bytes stay unconfirmed, to be sent
	// again after the drop.
	p, err := c.StartProcess(ctx, "sleep 0.5; wc -c", ProcessOptions{Stdin: true})
	if err != nil {
		t.Fatal(err)
	}
	var opens, closedEarly atomic.Int32
	testHookResend = func(w *stdinWriter) {
		if opens.Add(1) < 2 {
			return // the first open: nothing sent yet
		}
		// As a concurrent Close would, here: the channel is published.
		if resent, done, _ := w.closeUnderWrite(); done || resent == nil {
			closedEarly.Add(1) // or it would not wait for the resend
		}
	}
	defer func() { testHookResend = nil }()

	in := p.Stdin()
	first := make([]byte, 128<<10) // past the pipe, so some stays unconfirmed
	if _, err := in.Write(first); err != nil {
		t.Fatal(err)
	}
	resp, err := http.Post(url+"/_test/drop", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if err := in.Close(); err != nil {
		t.Fatalf("Close after the drop: %v", err)
	}
	if _, err := p.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	if opens.Load() < 2 {
		t.Fatalf("the stdin channel was opened %d times: the drop went unnoticed", opens.Load())
	}
	if closedEarly.Load() != 0 {
		t.Error("a Close during the resend sent EOF before it")
	}
	out, _, _, err := p.Read(ctx, "stdout", 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(string(out)); got != strconv.Itoa(len(first)) {
		t.Errorf("wc -c read %q bytes, want %d: each byte once", got, len(first))
	}
}

// A Close that comes during a reconnect's resend, which waits for credit
// a process that stopped reading will never give, returns at once: its
// EOF goes once the resend went (bytes Writes reported written go
// first). It used to wait for the Write, that is for ever.
func TestStdinCloseDuringAResendReturns(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	url := os.Getenv("MUXD_URL") // the daemon of TestMain
	c, err := Dial(ctx, url, Options{MaxBackoff: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Close() }()
	p, err := c.StartProcess(ctx, "exec sleep 30", ProcessOptions{Stdin: true}) // never reads
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = p.Kill(context.Background(), "KILL", 0) }()
	in := p.Stdin()
	closed := make(chan error, 1)
	var opens atomic.Int32
	testHookResend = func(*stdinWriter) {
		if opens.Add(1) < 2 {
			return
		}
		done := make(chan error, 1)
		go func() { done <- in.Close() }()
		select {
		case err := <-done:
			closed <- err
		case <-time.After(5 * time.Second):
			// Close waits for this Write, which waits here: the bug.
		}
	}
	defer func() { testHookResend = nil }()
	// Past the pipe, within the credit: it returns, some of it unconfirmed.
	if _, err := in.Write(make([]byte, 100<<10)); err != nil {
		t.Fatal(err)
	}
	resp, err := http.Post(url+"/_test/drop", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	wrote := make(chan error, 1)
	go func() {
		_, err := in.Write(make([]byte, 1<<20)) // finds the socket gone, reopens, resends
		wrote <- err
	}()
	select {
	case err := <-closed:
		if err != nil {
			t.Errorf("Close: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not return during the resend")
	}
	// The Write waits for credit until its process ends.
	if err := p.Kill(ctx, "KILL", 0); err != nil {
		t.Fatal(err)
	}
	select {
	case <-wrote:
	case <-time.After(10 * time.Second):
		t.Fatal("the Write did not end with its process")
	}
}
