package exec

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
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

// Close while a session or a process is still starting: what starts must
// not outlive Close (a shell spawned after Close listed the sessions, a
// process launched after it had no tree to kill), and the race detector
// must see no unguarded file state.
func TestCloseRacingWithStartsLeavesNothingRunning(t *testing.T) {
	rounds := 30
	if testing.Short() {
		rounds = 8
	}
	for i := range rounds {
		e, err := New(Config{DataDir: filepath.Join(t.TempDir(), "data"), KillGrace: 300 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		before := liveChildren(t)
		started := make(chan struct{}, 2)
		go func() {
			_, _ = e.CreateSession(context.Background(), SessionOptions{})
			started <- struct{}{}
		}()
		go func() {
			_, _ = e.StartProcess(context.Background(), ProcessRequest{Command: "exec sleep 30"})
			started <- struct{}{}
		}()
		time.Sleep(time.Duration(i%10) * 200 * time.Microsecond) // spread Close over the starts
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		if err := e.Close(ctx); err != nil {
			t.Errorf("round %d: Close: %v", i, err)
		}
		cancel()
		<-started
		<-started
		deadline := time.Now().Add(5 * time.Second)
		for {
			extra := 0
			for pid := range liveChildren(t) {
				if !before[pid] {
					extra++
				}
			}
			if extra == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("round %d: %d children outlive Close", i, extra)
			}
			time.Sleep(5 * time.Millisecond) // no event to wait on for a kill's end
		}
	}
}

// liveChildren returns this process's children that are not zombies.
func liveChildren(t *testing.T) map[int]bool {
	t.Helper()
	out := map[int]bool{}
	tasks, _ := filepath.Glob("/proc/self/task/*/children")
	for _, f := range tasks {
		b, _ := os.ReadFile(f) // Best effort: a task may have ended.
		for _, field := range strings.Fields(string(b)) {
			pid, err := strconv.Atoi(field)
			if err != nil {
				continue
			}
			st, err := os.ReadFile("/proc/" + field + "/stat")
			if err != nil {
				continue
			}
			if i := bytes.LastIndexByte(st, ')'); i > 0 && i+2 < len(st) && st[i+2] != 'Z' {
				out[pid] = true
			}
		}
	}
	return out
}
