package pty

import (
	"bytes"
	"context"
	"sync"
	"testing"
	"time"
)

// Echoes taken inline by the reader and those refused (then delivered by
// Next) interleave into one stream, in order, with nothing lost or
// repeated.
func TestInlineDeliveryKeepsOrderAndFallsBack(t *testing.T) {
	m := newTestManager(t, Config{})
	term := startBash(t, m, "")
	a, _, err := term.Attach(AttachOptions{From: 1 << 40}) // live output only
	if err != nil {
		t.Fatal(err)
	}
	defer a.Detach()
	var (
		mu             sync.Mutex
		got            []byte
		taken, refused int
	)
	a.SetInline(func(p []byte) bool {
		mu.Lock()
		defer mu.Unlock()
		if (taken+refused)%3 == 2 {
			refused++
			return false
		}
		taken++
		got = append(got, p...)
		return true
	})
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	pumped := make(chan struct{})
	go func() {
		defer close(pumped)
		buf := make([]byte, 4096)
		for {
			ev, err := a.Next(ctx, buf)
			if err != nil {
				return
			}
			if ev.Kind == EventData {
				mu.Lock()
				got = append(got, ev.Data...)
				mu.Unlock()
			}
		}
	}()
	snapshot := func() []byte {
		mu.Lock()
		defer mu.Unlock()
		return bytes.Clone(got)
	}
	waitFor := func(what string, cond func([]byte) bool) {
		t.Helper()
		for deadline := time.Now().Add(waitLimit); !cond(snapshot()); {
			if time.Now().After(deadline) {
				t.Fatalf("waiting for %s; got %q", what, snapshot())
			}
			time.Sleep(time.Millisecond) // polling a test buffer, bounded
		}
	}
	typeLine(t, term, "stty raw -echo; echo READY; exec cat")
	waitFor("READY", func(b []byte) bool { return bytes.Contains(b, []byte("READY\n")) })
	var typed []byte
	for i := range 120 {
		key := byte('a' + i%26)
		typed = append(typed, key)
		if _, err := term.Write([]byte{key}); err != nil {
			t.Fatal(err)
		}
		// One echo at a time: each comes as its own small read.
		waitFor("the echo", func(b []byte) bool { return bytes.HasSuffix(b, typed) })
	}
	out := snapshot()
	if rest := out[bytes.Index(out, []byte("READY\n"))+len("READY\n"):]; !bytes.Equal(rest, typed) {
		t.Fatalf("after READY got %q, want %q", rest, typed)
	}
	mu.Lock()
	defer mu.Unlock()
	if taken == 0 || refused == 0 {
		t.Fatalf("taken inline %d, refused %d: want both", taken, refused)
	}
	cancel()
	<-pumped
}
