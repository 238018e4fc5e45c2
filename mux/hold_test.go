package mux

import (
	"context"
	"encoding/json"
	"testing"
	"time"
)

// holdPair opens a process channel (1) and a terminal channel (3) on a
// raw client and returns the server's ends.
func holdPair(t *testing.T) (*rawClient, *Channel, *Channel) {
	t.Helper()
	opened := make(chan *Channel, 2)
	rt := echoRouter()
	keep := func(ctx context.Context, ch *Channel, p json.RawMessage) (any, error) {
		go func() { opened <- ch }() // after OPEN_OK is queued
		return nil, nil
	}
	rt.HandleOpen("process", keep)
	rt.HandleOpen("terminal", keep)
	ts := newTestServer(t, pipeTransport, Config{}, rt)
	rc := rawDial(t, ts, true)
	rc.open(1, "process", 1<<30)
	bulk := recvOrTimeout(t, opened, 5*time.Second, "process open")
	rc.open(3, "terminal", 1<<30)
	term := recvOrTimeout(t, opened, 5*time.Second, "terminal open")
	return rc, bulk, term
}

func TestKeystrokeHoldsBulkUntilTheEchoIsOut(t *testing.T) {
	rc, bulk, term := holdPair(t)
	sent := time.Now()
	rc.send(typeData, 3, []byte("x"))
	buf := make([]byte, 8)
	if _, err := term.Read(buf); err != nil { // the server saw the key: a hold is on
		t.Fatal(err)
	}
	// Bulk queued first must still go out after the echo, and not before
	// the hold ends. The writes may write the socket themselves: off the
	// goroutine that reads it.
	wrote := make(chan error, 1)
	held := make(chan bool, 1)
	go func() {
		_, err := bulk.Write([]byte("bulk"))
		c := bulk.c
		c.mu.Lock()
		held <- c.holdOn // else a slow host let the hold end first
		c.mu.Unlock()
		if err == nil {
			_, err = term.Write([]byte("x"))
		}
		wrote <- err
	}()
	var got []uint32
	for range 100 {
		h, _ := rc.recv()
		if h.Type() == typeData {
			got = append(got, h.Channel())
		}
		if len(got) == 2 {
			break
		}
	}
	el := time.Since(sent)
	if len(got) != 2 || el < bulkHold {
		t.Fatalf("DATA on channels %v after %v, want 2 frames after at least %v", got, el, bulkHold)
	}
	if recvOrTimeout(t, held, 5*time.Second, "hold state") && (got[0] != 3 || got[1] != 1) {
		t.Fatalf("DATA on channels %v, want [3 1]: the echo before bulk held back", got)
	}
	if err := recvOrTimeout(t, wrote, 5*time.Second, "writes"); err != nil {
		t.Fatal(err)
	}
}

func TestKeystrokesNeverStarveBulk(t *testing.T) {
	rc, bulk, term := holdPair(t)
	stop := make(chan struct{})
	typed := make(chan struct{})
	go func() { // keys as fast as the server takes them
		defer close(typed)
		buf := make([]byte, 64)
		for range 100000 {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := term.Read(buf); err != nil {
				return
			}
		}
	}()
	const frames = 200
	wrote := make(chan error, 1)
	go func() {
		p := make([]byte, 1024)
		for range frames {
			if _, err := bulk.Write(p); err != nil {
				wrote <- err
				return
			}
		}
		wrote <- nil
	}()
	deadline := time.Now().Add(5 * time.Second)
	for n := 0; n < frames; {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d bulk frames in 5 s while keys arrive", n, frames)
		}
		rc.send(typeData, 3, []byte("k"))
		h, _ := rc.recv()
		if h.Type() == typeData && h.Channel() == 1 {
			n++
		}
	}
	close(stop)
	if err := recvOrTimeout(t, wrote, 5*time.Second, "bulk writes"); err != nil {
		t.Fatal(err)
	}
}
