package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/muxd/muxd/client"
)

// stallFlood opens a process channel on a 1 GiB flood with the largest
// window and never reads the socket again. It returns the daemon's RSS
// growth (KiB) after settle.
func stallFlood(t testing.TB, d *daemon, settle time.Duration) (idleKB, grownKB int64) {
	idleKB, grownKB, r := stallFloodKeep(t, d, settle)
	_ = r.ws.CloseNow() // Best effort.
	return idleKB, grownKB
}

// stallFloodKeep is stallFlood that leaves the stalled socket open.
func stallFloodKeep(t testing.TB, d *daemon, settle time.Duration) (idleKB, grownKB int64, r *rawConn) {
	ctx := ctxT(t, 2*time.Minute)
	idleKB = rssKB(d.Pid())
	r = rawDial(t, ctx, d)
	_, _, _ = r.read(t, ctx) // HELLO
	r.call(t, ctx, 1, "process.start", map[string]any{"id": "flood", "command": "head -c 1G /dev/zero", "outputLimit": 8 << 20})
	r.send(t, ctx, 0x01, 1, map[string]any{"kind": "process", "window": 1<<31 - 1, "params": map[string]any{"id": "flood"}})
	// Never read again. Let the daemon fill every buffer it is allowed.
	deadline := time.Now().Add(settle)
	var peak int64
	for time.Now().Before(deadline) {
		peak = max(peak, rssKB(d.Pid()))
		time.Sleep(100 * time.Millisecond) // sampling interval, not synchronization
	}
	return idleKB, peak - idleKB, r
}

func TestClientThatNeverReadsDoesNotGrowTheDaemonOrStallOthers(t *testing.T) {
	d := startDaemon(t, nil)
	other := d.dial(t, client.Options{})
	ctx := ctxT(t, 60*time.Second)
	// While one client stalls a flood, another keeps working.
	errs := make(chan error, 1)
	go func() {
		for i := 0; i < 20; i++ {
			r, err := other.Exec(ctx, fmt.Sprintf("echo %d", i), client.ExecOptions{})
			if err != nil || string(r.Stdout) != fmt.Sprintf("%d\n", i) {
				errs <- fmt.Errorf("exec while another client stalls: %+v %v", r, err)
				return
			}
		}
		errs <- nil
	}()
	idle, grown, stalled := stallFloodKeep(t, d, 4*time.Second)
	defer func() { _ = stalled.ws.CloseNow() }()
	if err := recvOrTimeout(t, errs, 60*time.Second); err != nil {
		t.Fatal(err)
	}
	t.Logf("idle RSS %d KiB, growth while stalled %d KiB", idle, grown)
	if grown > 48<<10 {
		t.Errorf("daemon RSS grew %d KiB while a client stalled a flood; want bounded (≤ 48 MiB here, 16 MiB target)", grown)
	}
	if _, err := other.ServerInfo(ctx); err != nil {
		t.Fatal(err)
	}
	if !longRun() {
		return
	}
	// The daemon drops a peer that reads nothing (no pongs, no progress)
	// within 30 s or so, and frees it.
	const gone = `msg="connection closed" remote=`
	dropped := func() bool {
		for _, line := range strings.Split(d.Logs(), "\n") {
			if strings.Contains(line, gone) && strings.Contains(line, "client=raw-test") {
				return true
			}
		}
		return false
	}
	deadline := time.Now().Add(45 * time.Second)
	for !dropped() && time.Now().Before(deadline) {
		time.Sleep(250 * time.Millisecond) // polling the log: no other event to wait on
	}
	if !dropped() {
		t.Fatalf("the stalled client was not disconnected within 45 s:\n%s", d.Logs())
	}
}

func BenchmarkMemory(b *testing.B) {
	for b.Loop() {
		d := startDaemon(b, nil)
		// Idle: a fresh daemon after one client connected and left.
		c := d.dial(b, client.Options{})
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if _, err := c.ServerInfo(ctx); err != nil {
			b.Fatal(err)
		}
		cancel()
		_ = c.Close()
		idle, grown := stallFlood(b, d, 6*time.Second)
		b.ReportMetric(float64(idle)/1024, "idle-RSS-MiB")
		b.ReportMetric(float64(grown)/1024, "stall-growth-MiB")
		record(figure{"RSS idle", fmt.Sprintf("%.1f MiB", float64(idle)/1024), "seed system 51 MB", "", "≤ 15 MB"})
		record(figure{"RSS growth while a client stalls a 1 GiB flood channel", fmt.Sprintf("%.1f MiB", float64(grown)/1024),
			"seed system > 1 GB", "", "≤ 16 MB"})
	}
}

func recvOrTimeout[T any](t testing.TB, ch <-chan T, d time.Duration) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(d):
		t.Fatalf("nothing within %v", d)
		var zero T
		return zero
	}
}
