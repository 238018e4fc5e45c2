package integration

import (
	"fmt"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/muxd/muxd/client"
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
