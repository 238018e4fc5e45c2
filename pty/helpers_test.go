package pty

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestMain gives the shells a fresh HOME: the tests must not depend on
// (or wait for) the machine's shell start-up files.
func TestMain(m *testing.M) {
	home, err := os.MkdirTemp("", "pty-test-home-")
	if err != nil {
		panic(err)
	}
	_ = os.Setenv("HOME", home) // Best effort: only the children read it.
	code := m.Run()
	_ = os.RemoveAll(home) // Best effort.
	os.Exit(code)
}

// waitLimit is the generous deadline for anything a test waits for.
const waitLimit = 10 * time.Second

func newTestManager(t testing.TB, cfg Config) *Manager {
	t.Helper()
	if cfg.DefaultShell == "" {
		cfg.DefaultShell = "/bin/bash"
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	m := NewManager(cfg)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
		defer cancel()
		if err := m.Close(ctx); err != nil {
			t.Errorf("close manager: %v", err)
		}
	})
	return m
}

// quietShell is the environment for a bash with a predictable prompt.
func quietShell() map[string]*string {
	ps1, hist := "$ ", ""
	return map[string]*string{"PS1": &ps1, "HISTFILE": &hist, "PROMPT_COMMAND": nil}
}

// collector pulls an attachment's events in a goroutine and records them.
type collector struct {
	a *Attachment

	mu      sync.Mutex // guards the fields below
	replay  bytes.Buffer
	live    bytes.Buffer
	events  []Event // without Data
	exit    *ExitStatus
	err     error
	changed chan struct{} // closed and replaced on every event

	done chan struct{}
}

func collect(t testing.TB, a *Attachment) *collector {
	c := &collector{a: a, changed: make(chan struct{}), done: make(chan struct{})}
	go c.run()
	t.Cleanup(func() {
		a.Detach()
		<-c.done
	})
	return c
}

func (c *collector) run() {
	defer close(c.done)
	buf := make([]byte, 4096)
	synced := false
	for {
		ev, err := c.a.Next(context.Background(), buf)
		c.mu.Lock()
		if err != nil {
			c.err = err
			close(c.changed)
			c.mu.Unlock()
			return
		}
		switch ev.Kind {
		case EventData:
			if synced {
				c.live.Write(ev.Data)
			} else {
				c.replay.Write(ev.Data)
			}
		case EventSync:
			synced = true
		case EventExit:
			st := ev.Exit
			c.exit = &st
		}
		ev.Data = nil
		c.events = append(c.events, ev)
		close(c.changed)
		c.changed = make(chan struct{})
		c.mu.Unlock()
	}
}

// waitUntil waits until cond (called with c.mu held) holds.
func (c *collector) waitUntil(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.NewTimer(waitLimit)
	defer deadline.Stop()
	for {
		c.mu.Lock()
		ok, ch, err := cond(), c.changed, c.err
		c.mu.Unlock()
		if ok {
			return
		}
		if err != nil {
			t.Fatalf("waiting for %s: attachment ended: %v\nlive ends: %q", what, err, c.tail())
		}
		select {
		case <-ch:
		case <-deadline.C:
			t.Fatalf("waiting for %s: timed out\nlive ends: %q", what, c.tail())
		}
	}
}

func (c *collector) waitFor(t testing.TB, s string) {
	t.Helper()
	// Output that came before the attachment arrives as replay.
	c.waitUntil(t, "output "+strings.TrimSpace(s), func() bool {
		return strings.Contains(c.live.String(), s) || strings.Contains(c.replay.String()+c.live.String(), s)
	})
}

// waitSync waits until the replay ended.
func (c *collector) waitSync(t testing.TB) {
	t.Helper()
	c.waitUntil(t, "sync", func() bool {
		for _, ev := range c.events {
			if ev.Kind == EventSync {
				return true
			}
		}
		return false
	})
}

func (c *collector) waitExit(t testing.TB) ExitStatus {
	t.Helper()
	c.waitUntil(t, "exit", func() bool { return c.exit != nil })
	c.mu.Lock()
	defer c.mu.Unlock()
	return *c.exit
}

func (c *collector) liveString() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.live.String()
}

// tail is the end of the live output, for failure messages.
func (c *collector) tail() string {
	s := c.liveString()
	return s[max(0, len(s)-2048):]
}

func (c *collector) replayString() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.replay.String()
}

// syncOffset is the offset of the sync event, 0 before it.
func (c *collector) syncOffset() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, ev := range c.events {
		if ev.Kind == EventSync {
			return ev.Offset
		}
	}
	return 0
}

// first is the first event recorded (the zero Event if none yet).
func (c *collector) first() Event {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.events) == 0 {
		return Event{}
	}
	return c.events[0]
}

func (c *collector) kinds() []EventKind {
	c.mu.Lock()
	defer c.mu.Unlock()
	var ks []EventKind
	for _, ev := range c.events {
		if len(ks) == 0 || ks[len(ks)-1] != ev.Kind || ev.Kind != EventData {
			ks = append(ks, ev.Kind)
		}
	}
	return ks
}

func recvOrTimeout[T any](t testing.TB, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(waitLimit):
		t.Fatalf("timed out waiting for %s", what)
		panic("unreachable")
	}
}

func openFDs(t testing.TB) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatalf("read fds: %v", err)
	}
	return len(ents)
}

// settleGoroutines waits (bounded) for the goroutine count to drop to at
// most want, and fails with a dump otherwise.
func settleGoroutines(t testing.TB, want int) {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	for i := 0; ; i++ {
		n := runtime.NumGoroutine()
		if n <= want {
			return
		}
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			buf = buf[:runtime.Stack(buf, true)]
			t.Fatalf("goroutines: got %d, want <= %d\n%s", n, want, buf)
		}
		runtime.Gosched()
		time.Sleep(time.Millisecond) // polling a count that has no event to wait on
	}
}

func runtimeGoroutines() int { return runtime.NumGoroutine() }
