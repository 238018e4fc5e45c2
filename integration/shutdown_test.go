package integration

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/muxd/muxd/client"
	"github.com/muxd/muxd/mux"
)

func TestSIGTERMLeavesNoDescendantAlive(t *testing.T) {
	d := startDaemon(t, nil)
	c := d.dial(t, client.Options{})
	ctx := ctxT(t, 30*time.Second)
	// A terminal with a background job and a setsid'ed grandchild.
	term, err := c.CreateTerminal(ctx, client.TerminalOptions{Shell: "bash"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := term.Write([]byte("sleep 1000 & setsid sleep 1001 & echo STARTED\n")); err != nil {
		t.Fatal(err)
	}
	readUntil(t, term, "STARTED", 10*time.Second)
	startMore(t, ctx, c)
	before := descendants(d.Pid())
	if len(before) < 3 {
		t.Fatalf("expected the daemon's children, found %v", before)
	}
	took, err := d.Terminate(exitLimit())
	if err != nil {
		t.Fatalf("%v\n%s", err, d.Logs())
	}
	t.Logf("muxd exited %v after SIGTERM", took)
	// Killed orphans are reaped by init; give it a moment (bounded).
	deadline := time.Now().Add(3 * time.Second)
	for _, pid := range before {
		for alive(pid) && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond) // polling /proc: there is no event to wait on
		}
		if alive(pid) {
			cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
			t.Errorf("pid %d (a descendant of muxd: %q) is alive after SIGTERM", pid, cmdline)
		}
	}
	if resp, err := http.Get(d.URL + "/healthz"); err == nil {
		_ = resp.Body.Close()
		t.Error("muxd still answers after SIGTERM")
	}
}

// Hundreds of trees that ignore TERM, some with setsid'ed children: the
// daemon still ends them all within its budget (a kill per tree took
// longer than the budget, and muxd exited leaving them running, some
// frozen mid-kill).
func TestSIGTERMUnderLoadLeavesNothing(t *testing.T) {
	long(t)
	d := startDaemon(t, nil, "--max-processes", "1000")
	c := d.dial(t, client.Options{})
	ctx := ctxT(t, 2*time.Minute)
	trees := 600 // 300 ran within the budget before, 600 left 600 processes behind
	if raceBuild {
		trees = 200 // a race-built daemon spends its budget on the race detector
	}
	for i := range trees {
		cmd := `trap '' TERM INT HUP; while :; do sleep 1; done`
		if i%2 == 1 {
			cmd = `setsid bash -c 'trap "" TERM; while :; do sleep 1; done' & sleep 1000`
		}
		if _, err := c.StartProcess(ctx, cmd, client.ProcessOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(500 * time.Millisecond) // the setsid'ed children start
	before := descendants(d.Pid())
	if len(before) < 2*trees {
		t.Fatalf("expected the daemon's trees, found %d processes", len(before))
	}
	took, err := d.Terminate(exitLimit())
	if err != nil {
		t.Fatalf("%v\n%s", err, d.Logs())
	}
	t.Logf("muxd exited %v after SIGTERM, with %d processes below it", took, len(before))
	deadline := time.Now().Add(5 * time.Second)
	left := 0
	for _, pid := range before {
		for alive(pid) && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond) // polling /proc: there is no event to wait on
		}
		if alive(pid) {
			left++
		}
	}
	if left > 0 {
		t.Fatalf("%d of %d processes outlived muxd", left, len(before))
	}
}

// A daemon killed with SIGKILL cannot end its processes; they run on,
// their output going to files no one can reach. The next daemon on the
// same data dir ends them, double forks included, as it removes the
// files.
func TestTheNextDaemonEndsWhatAKilledOneLeft(t *testing.T) {
	dir := t.TempDir()
	a := startDaemon(t, nil, "--data-dir", dir)
	c := a.dial(t, client.Options{NoReconnect: true})
	ctx := ctxT(t, 30*time.Second)
	if _, err := c.StartProcess(ctx, "(setsid sleep 1002 &); sleep 1003 & echo STARTED; wait", client.ProcessOptions{}); err != nil {
		t.Fatal(err)
	}
	var left []int
	for deadline := time.Now().Add(10 * time.Second); len(left) < 2 && time.Now().Before(deadline); {
		left = nil
		for _, pid := range descendants(a.Pid()) {
			if cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid)); strings.HasPrefix(string(cmdline), "sleep\x00100") {
				left = append(left, pid)
			}
		}
		time.Sleep(10 * time.Millisecond) // polling /proc: there is no event to wait on
	}
	if len(left) < 2 {
		t.Fatalf("the two sleeps did not start: %v", left)
	}
	t.Cleanup(func() {
		for _, pid := range left {
			if alive(pid) {
				_ = syscall.Kill(pid, syscall.SIGKILL) // ours, by pid
			}
		}
	})
	_ = a.cmd.Process.Kill() // our own child, by pid
	<-a.exited
	for _, pid := range left {
		if !alive(pid) {
			t.Fatalf("pid %d ended with the killed daemon: nothing left to test", pid)
		}
	}
	b := startDaemon(t, nil, "--data-dir", dir)
	deadline := time.Now().Add(10 * time.Second)
	for _, pid := range left {
		for alive(pid) && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		if alive(pid) {
			t.Errorf("pid %d, left by the killed daemon, is alive after the next one started", pid)
		}
	}
	if !strings.Contains(b.Logs(), "killed the processes a previous run left behind") {
		t.Errorf("the next daemon did not say what it killed:\n%s", b.Logs())
	}
}

// A daemon that shuts down fails the reads in flight with its GOAWAY,
// which a caller can tell from other errors (errors.Is ErrGoAway).
func TestSIGTERMFailsReadsWithGoAway(t *testing.T) {
	d := startDaemon(t, nil)
	c := d.dial(t, client.Options{})
	ctx := ctxT(t, 30*time.Second)
	p, err := c.StartProcess(ctx, "echo up; exec sleep 100", client.ProcessOptions{})
	if err != nil {
		t.Fatal(err)
	}
	term, err := c.CreateTerminal(ctx, client.TerminalOptions{Shell: "bash"})
	if err != nil {
		t.Fatal(err)
	}
	errs := make(chan error, 2)
	reading := make(chan struct{}, 2)
	read := func(r io.Reader) {
		buf := make([]byte, 4096)
		for first := true; ; first = false {
			if _, err := r.Read(buf); err != nil {
				errs <- err
				return
			}
			if first {
				reading <- struct{}{}
			}
		}
	}
	go read(p.Stdout())
	go read(term)
	// Both reads have their channels (each read bytes): a read that had
	// not opened one yet when the daemon went waits for a reconnect
	// instead (for Options.Unreachable), and the test failed under load.
	for range 2 {
		recvOrTimeout(t, reading, 10*time.Second)
	}
	if _, err := d.Terminate(exitLimit()); err != nil {
		t.Fatalf("%v\n%s", err, d.Logs())
	}
	for range 2 { // each read in flight ends, with the GOAWAY
		if err := recvOrTimeout(t, errs, 10*time.Second); !errors.Is(err, mux.ErrGoAway) {
			t.Errorf("a read in flight at shutdown failed with %v, not ErrGoAway", err)
		}
	}
}
