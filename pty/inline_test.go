package pty

import (
	"bytes"
	"context"
	"math/rand/v2"
	"sync"
	"testing"
	"time"
)

// inlineViewer is one attachment of the inline tests: what it received,
// inline or through Next, in order.
type inlineViewer struct {
	mu             sync.Mutex
	got            []byte
	taken, refused int
}

func (v *inlineViewer) add(p []byte) {
	v.mu.Lock()
	v.got = append(v.got, p...)
	v.mu.Unlock()
}

func (v *inlineViewer) snapshot() []byte {
	v.mu.Lock()
	defer v.mu.Unlock()
	return bytes.Clone(v.got)
}

// Keys typed in bursts reach three viewers of one terminal: one whose
// inline function refuses every third piece, one that takes pieces inline
// but reads Next slowly, and one without an inline function. Each gets
// exactly what cat echoed, in order, nothing lost or repeated, whichever
// way each piece came.
func TestInlineDeliveryKeepsEveryViewersStream(t *testing.T) {
	m := newTestManager(t, Config{})
	term := startBash(t, m, "")
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	type setup struct {
		refuseEvery int  // 0: never refuse
		slowNext    bool // pause now and then between Next calls
		inline      bool
	}
	setups := []setup{{refuseEvery: 3, inline: true}, {slowNext: true, inline: true}, {}}
	viewers := make([]*inlineViewer, len(setups))
	var wg sync.WaitGroup
	for i, s := range setups {
		v := &inlineViewer{}
		viewers[i] = v
		a, _, err := term.Attach(AttachOptions{From: 1 << 40}) // live output only
		if err != nil {
			t.Fatal(err)
		}
		if s.inline {
			a.SetInline(func(p []byte) bool {
				v.mu.Lock()
				defer v.mu.Unlock()
				if s.refuseEvery > 0 && (v.taken+v.refused)%s.refuseEvery == s.refuseEvery-1 {
					v.refused++
					return false
				}
				v.taken++
				v.got = append(v.got, p...)
				return true
			})
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer a.Detach()
			rng := rand.New(rand.NewPCG(uint64(i), 1))
			buf := make([]byte, 4096)
			for {
				ev, err := a.Next(ctx, buf)
				if err != nil {
					return
				}
				if ev.Kind == EventData {
					v.add(ev.Data)
				}
				if s.slowNext && rng.IntN(4) == 0 {
					time.Sleep(time.Duration(rng.IntN(200)) * time.Microsecond)
				}
			}
		}()
	}
	typeLine(t, term, "stty raw -echo; echo READY; exec cat")
	waitAll := func(what string, done func([]byte) bool) {
		t.Helper()
		for _, v := range viewers {
			for deadline := time.Now().Add(waitLimit); !done(v.snapshot()); {
				if time.Now().After(deadline) {
					t.Fatalf("waiting for %s; a viewer has %d bytes", what, len(v.snapshot()))
				}
				time.Sleep(time.Millisecond) // polling test buffers, bounded
			}
		}
	}
	const ready = "READY\n"
	waitAll("READY", func(b []byte) bool { return bytes.Contains(b, []byte(ready)) })
	var typed []byte
	rng := rand.New(rand.NewPCG(7, 7))
	for i := range 3000 {
		burst := make([]byte, 1+rng.IntN(3))
		for j := range burst {
			burst[j] = byte('a' + (i+j)%26)
		}
		typed = append(typed, burst...)
		if _, err := term.Write(burst); err != nil {
			t.Fatal(err)
		}
		if rng.IntN(8) == 0 {
			time.Sleep(time.Duration(rng.IntN(100)) * time.Microsecond)
		}
	}
	waitAll("every echo", func(b []byte) bool { return len(b) >= bytes.Index(b, []byte(ready))+len(ready)+len(typed) })
	for i, v := range viewers {
		out := v.snapshot()
		if rest := out[bytes.Index(out, []byte(ready))+len(ready):]; !bytes.Equal(rest, typed) {
			t.Errorf("viewer %d: %d bytes after READY, want the %d typed, in order", i, len(rest), len(typed))
		}
	}
	cancel()
	wg.Wait()
	if v := viewers[0]; v.taken == 0 || v.refused == 0 {
		t.Errorf("the refusing viewer took %d pieces inline and refused %d: want both", v.taken, v.refused)
	}
	if v := viewers[1]; v.taken == 0 {
		t.Error("the slow viewer took nothing inline")
	}
}
