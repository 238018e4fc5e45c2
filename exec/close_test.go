package exec

import (
	"context"
	"errors"
	"syscall"
	"testing"
	"time"
)

func TestCloseWithManySessionsFitsItsBudget(t *testing.T) {
	const n = 100
	e := newTestEngine(t, func(c *Config) { c.MaxSessions = n })
	pids := make([]int, 0, n)
	for range n {
		sid := newSession(t, e, SessionOptions{})
		s, _ := e.session(sid)
		pids = append(pids, s.child.Pid)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	start := time.Now()
	if err := e.Close(ctx); err != nil {
		t.Logf("Close: %v (the kills go on in the background)", err)
	}
	// The slack is for loaded machines (a hundred kills in parallel under
	// -race); waiting for every tree would take far longer.
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("Close took %v with a 3 s budget", d)
	}
	waitGone(t, pids, 20*time.Second)
}

func TestCloseStopsWaitingWhenCtxEnds(t *testing.T) {
	e := newTestEngine(t, func(c *Config) { c.KillGrace = 2 * time.Second })
	p, err := e.StartProcess(ctxT(t, 5*time.Second), ProcessRequest{Command: "trap '' TERM; echo ready; while :; do sleep 0.05; done"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.WaitForLog(ctxT(t, 5*time.Second), p.ID, "ready", Stdout, 0); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	err = e.Close(ctx)
	if d := time.Since(start); d > 1500*time.Millisecond {
		t.Errorf("Close took %v; want it to return soon after its 200 ms ctx", d)
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Close = %v, want DeadlineExceeded (the process ignores TERM for 2 s)", err)
	}
	waitGone(t, []int{p.Pid}, 10*time.Second) // SIGKILL after the grace
}

// waitGone waits until none of pids exists (SIGKILLed and reaped).
func waitGone(t *testing.T, pids []int, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for _, pid := range pids {
		for syscall.Kill(pid, 0) == nil {
			if time.Now().After(deadline) {
				t.Fatalf("pid %d still exists %v after Close", pid, d)
			}
			time.Sleep(10 * time.Millisecond) // polling a pid: no event to wait on
		}
	}
}
