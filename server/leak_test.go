package server

import (
	"context"
	"fmt"
	"io"
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/muxd/muxd/client"
	"github.com/muxd/muxd/mux"
)

func openFDs() int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return -1
	}
	return len(ents)
}

// settle waits (bounded) until f() drops to at most want, returning the
// last value.
func settle(f func() int, want int, d time.Duration) int {
	deadline := time.Now().Add(d)
	n := f()
	for n > want && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond) // polling: goroutine exit has no event
		n = f()
	}
	return n
}

func TestConnectionsAndChannelsLeaveNoGoroutinesOrFDs(t *testing.T) {
	_, url := testServer(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// Warm up once so lazily started helpers are not counted as leaks.
	warm := dialClient(t, url, client.Options{NoReconnect: true})
	if _, err := warm.Exec(ctx, "true", client.ExecOptions{}); err != nil {
		t.Fatal(err)
	}
	_ = warm.Close()
	g0, fd0 := runtime.NumGoroutine(), openFDs()
	for i := 0; i < 20; i++ {
		c, err := client.Dial(ctx, url, client.Options{NoReconnect: true})
		if err != nil {
			t.Fatal(err)
		}
		r, err := c.Exec(ctx, fmt.Sprintf("echo %d", i), client.ExecOptions{OnOutput: func(string, []byte) {}})
		if err != nil || string(r.Stdout) != fmt.Sprintf("%d\n", i) {
			t.Fatalf("exec: %+v %v", r, err)
		}
		p, err := c.StartProcess(ctx, "echo hi", client.ProcessOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadAll(p.Stdout()); err != nil {
			t.Fatal(err)
		}
		if _, err := p.Wait(ctx); err != nil {
			t.Fatal(err)
		}
		if err := p.Remove(ctx); err != nil {
			t.Fatal(err)
		}
		term, err := c.CreateTerminal(ctx, client.TerminalOptions{Shell: "bash"})
		if err != nil {
			t.Fatal(err)
		}
		if err := term.Destroy(ctx); err != nil {
			t.Fatal(err)
		}
		_ = c.Close()
	}
	if g := settle(runtime.NumGoroutine, g0+2, 10*time.Second); g > g0+2 {
		buf := make([]byte, 1<<20)
		t.Fatalf("goroutines: %d before, %d after 20 connections\n%s", g0, g, buf[:runtime.Stack(buf, true)])
	}
	if fd := settle(openFDs, fd0+2, 10*time.Second); fd > fd0+2 {
		t.Fatalf("open fds: %d before, %d after 20 connections", fd0, fd)
	}
}

// heapAlloc is the live heap after a collection.
func heapAlloc() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// TestIdleChannelsHoldNoBuffers: channels open on a process with nothing
// to send, or with a client that grants no more credit, hold no read
// buffer (each held 2 × 256 KiB: a connection with a thousand of them
// held half a GiB, outside the connection's budget).
func TestIdleChannelsHoldNoBuffers(t *testing.T) {
	_, url := testServer(t, nil)
	conn := rawConn(t, url, client.Options{NoReconnect: true})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	mustCall(t, conn, "process.start", obj{"id": "idle", "command": "exec sleep 60"})
	mustCall(t, conn, "process.start", obj{"id": "full", "command": "yes | head -c 2000000; exec sleep 60"})
	mustCall(t, conn, "process.waitForLog", obj{"id": "full", "pattern": "^y$", "timeoutMs": 5000})
	before := heapAlloc()
	const n = 200
	var chans []*mux.Channel
	for i := range n {
		id := "idle"
		if i%2 == 1 {
			id = "full" // 1 KiB of credit, never read: stalled after it
		}
		ch, _, err := conn.Open(ctx, "process", 1024, obj{"id": id})
		if err != nil {
			t.Fatal(err)
		}
		chans = append(chans, ch)
	}
	time.Sleep(200 * time.Millisecond) // the pumps reach their waits
	grew := int64(heapAlloc()) - int64(before)
	for _, ch := range chans {
		_ = ch.Close()
	}
	mustCall(t, conn, "process.kill", obj{"id": "idle", "signal": "KILL"})
	mustCall(t, conn, "process.kill", obj{"id": "full", "signal": "KILL"})
	// Goroutines, channel state and one small frame each remain: well
	// under 32 KiB a channel (it was over 512 KiB).
	if per := grew / n; per > 32<<10 {
		t.Fatalf("%d channels grew the heap by %d KiB: %d bytes each", n, grew>>10, per)
	}
	t.Logf("%d channels: %d bytes each", n, grew/n)
}

// A client that asks for large answers and stops reading its socket
// keeps the handlers waiting for room (mux.Conn.ReserveAnswer), not
// their answers in memory: the heap grows by about the connection's
// budget, not by every answer the in-flight requests could make.
func TestAClientThatDoesNotReadHoldsAboutItsBudgetOfAnswers(t *testing.T) {
	const budget = 4 << 20
	// Room for every request at once: without the holds, each would
	// build its answer in memory (about 70 MiB), far over the bound.
	_, url := testServer(t, func(c *Config) { c.ConnBudget, c.MaxRPCInflight = budget, 128 })
	conn := rawConn(t, url, client.Options{NoReconnect: true})
	mustCall(t, conn, "process.start", obj{"id": "out", "command": "head -c 524288 /dev/zero | tr '\\0' x"})
	mustCall(t, conn, "process.wait", obj{"id": "out", "timeoutMs": 10000})
	before := heapAlloc()
	r := dialRaw(t, url)
	const n = 100 // each answer ~700 KB of base64
	for i := range n {
		r.send(0x09, 0, fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%d,"method":"process.read","params":{"id":"out","stream":"stdout","encoding":"base64"}}`, i))
	}
	// Never read: let the handlers get as far as they can (bounded).
	var grew int64
	for range 20 {
		time.Sleep(50 * time.Millisecond) // sampling the heap, not synchronizing
		grew = max(grew, int64(heapAlloc())-int64(before))
	}
	// An answer is built in a few copies (the output, its encoding, the
	// JSON, the frame) before it is queued and charged: the handlers
	// building theirs at once add to the budget (10-16 MiB were seen).
	if grew > 6*budget {
		t.Fatalf("the heap grew by %d MiB while a client did not read; its budget is %d MiB", grew>>20, budget>>20)
	}
	t.Logf("heap grew by %.1f MiB", float64(grew)/(1<<20))
}
