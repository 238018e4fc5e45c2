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

// reconnectingClient dials the daemon of TestMain, reconnecting quickly.
func reconnectingClient(t *testing.T) (context.Context, *Client) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	c, err := Dial(ctx, os.Getenv("MUXD_URL"), Options{MaxBackoff: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return ctx, c
}

// dropSockets has the daemon of TestMain cut every /ws socket.
func dropSockets(t *testing.T) {
	resp, err := http.Post(os.Getenv("MUXD_URL")+"/_test/drop", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
}

// A Close that comes while a reconnect's resend is about to start waits
// for the resend: an EOF sent first would end the process's input before
// bytes the earlier Writes reported written.
func TestStdinCloseWaitsForTheResend(t *testing.T) {
	ctx, c := reconnectingClient(t)
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
		if done, _ := w.closeUnderWrite(); done {
			closedEarly.Add(1)
		}
	}
	defer func() { testHookResend = nil }()

	in := p.Stdin()
	first := make([]byte, 128<<10) // past the pipe, so some stays unconfirmed
	if _, err := in.Write(first); err != nil {
		t.Fatal(err)
	}
	dropSockets(t)
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
