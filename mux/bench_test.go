package mux

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"runtime/pprof"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// The benchmarks compare mux with raw coder/websocket over TCP loopback,
// the server in a helper process (this test binary re-executed with
// benchServerEnv set), the baseline measured in the same run.

const benchServerEnv = "MUXD_MUX_BENCH_SERVER"

func TestMain(m *testing.M) {
	if os.Getenv(benchServerEnv) == "1" {
		runBenchServer()
		return
	}
	os.Exit(m.Run())
}

// benchRouter serves "bulk" (writes 32 KiB frames until closed) and
// "terminal" (echo).
func benchRouter() *Router {
	rt := echoRouter()
	rt.Handle("noop", func(context.Context, *Conn, json.RawMessage) (any, error) { return nil, nil })
	rt.HandleOpen("bulk", func(ctx context.Context, ch *Channel, p json.RawMessage) (any, error) {
		ch.SetInputEnabled(false)
		go func() {
			buf := make([]byte, 32<<10)
			for {
				if _, err := ch.WriteContext(ctx, buf); err != nil {
					return
				}
			}
		}()
		return nil, nil
	})
	return rt
}

// benchHandler serves /ws (mux), /raw/push (32 KiB messages until the
// client goes) and /raw/echo (echo every message).
func benchHandler() http.Handler {
	rt := benchRouter()
	mux := http.NewServeMux()
	mux.HandleFunc("/ws", func(w http.ResponseWriter, r *http.Request) {
		c, err := Accept(w, r, Config{}, rt, ServerInfo{Name: "bench/1", Boot: "b"})
		if err == nil {
			<-c.Done()
		}
	})
	mux.HandleFunc("/raw/push", func(w http.ResponseWriter, r *http.Request) {
		ws, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		defer ws.CloseNow()
		ctx := ws.CloseRead(context.Background())
		buf := make([]byte, 32<<10)
		for ws.Write(ctx, websocket.MessageBinary, buf) == nil {
		}
	})
	mux.HandleFunc("/raw/echo", func(w http.ResponseWriter, r *http.Request) {
		ws, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		defer ws.CloseNow()
		for {
			typ, msg, err := ws.Read(context.Background())
			if err != nil || ws.Write(context.Background(), typ, msg) != nil {
				return
			}
		}
	})
	return mux
}

// runBenchServer is the helper process: it prints its address and
// serves until stdin closes.
func runBenchServer() {
	srv := &http.Server{Handler: benchHandler()}
	l, err := listenLoopback()
	if err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	if path := os.Getenv("MUXD_BENCH_SERVER_CPUPROFILE"); path != "" {
		if f, err := os.Create(path); err == nil {
			_ = pprof.StartCPUProfile(f)
			defer pprof.StopCPUProfile()
		}
	}
	fmt.Println("addr", l.Addr().String())
	go func() { _ = srv.Serve(l) }()
	_, _ = io.Copy(io.Discard, os.Stdin)
	_ = srv.Close()
}

// startBenchServer starts the helper process and returns its address.
func startBenchServer(b *testing.B) string {
	b.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), benchServerEnv+"=1")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		_ = stdin.Close()
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			_ = cmd.Process.Kill() // our own child, by pid
			<-done
		}
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	addr, ok := strings.CutPrefix(strings.TrimSpace(line), "addr ")
	if err != nil || !ok {
		b.Fatalf("bench server: %q %v", line, err)
	}
	return addr
}

func benchDial(b *testing.B, addr string) *Conn {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := Dial(ctx, "ws://"+addr+"/ws", DialOptions{Client: "bench/1"})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = c.Close() })
	return c
}

func rawDialAddr(b *testing.B, url string) *websocket.Conn {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ws, _, err := websocket.Dial(ctx, url, nil)
	if err != nil {
		b.Fatal(err)
	}
	ws.SetReadLimit(1 << 20)
	b.Cleanup(func() { _ = ws.CloseNow() })
	return ws
}

// benchRounds alternates raw and mux measurements so both see the same
// machine load (the host is shared); medians are reported.
const benchRounds = 9

func median(xs []float64) float64 {
	slices.Sort(xs)
	return xs[len(xs)/2]
}

// BenchmarkBulkThroughput: one channel of 32 KiB frames vs raw
// WebSocket push of 32 KiB messages (target: mux ≥ 80% of raw). The
// client grants the bulk channel bulkWindow of credit.
func BenchmarkBulkThroughput(b *testing.B) {
	addr := startBenchServer(b)
	total := int64(max(b.N, 1024)) * 32 << 10 // at least 32 MiB per round
	buf := make([]byte, 64<<10)
	rawRound := func() float64 {
		ws := rawDialAddr(b, "ws://"+addr+"/raw/push")
		defer ws.CloseNow()
		start := time.Now()
		var got int64
		for got < total {
			_, r, err := ws.Reader(context.Background())
			if err != nil {
				b.Fatal(err)
			}
			n, err := io.CopyBuffer(io.Discard, r, buf)
			if err != nil {
				b.Fatal(err)
			}
			got += n
		}
		return float64(got) / time.Since(start).Seconds() / 1e6
	}
	c := benchDial(b, addr)
	muxRound := func() float64 {
		ch, _, err := c.Open(context.Background(), "bulk", bulkWindow, nil)
		if err != nil {
			b.Fatal(err)
		}
		defer ch.Close()
		start := time.Now()
		var got int64
		for got < total {
			n, err := ch.Read(buf)
			if err != nil {
				b.Fatal(err)
			}
			got += int64(n)
		}
		return float64(got) / time.Since(start).Seconds() / 1e6
	}
	var raws, muxes []float64
	b.ResetTimer()
	for range benchRounds {
		raws = append(raws, rawRound())
		muxes = append(muxes, muxRound())
	}
	b.StopTimer()
	raw, m := median(raws), median(muxes)
	b.ReportMetric(raw, "raw_MB/s")
	b.ReportMetric(m, "mux_MB/s")
	b.ReportMetric(m/raw, "mux/raw")
}

// The credit a client grants a bulk channel: 1 MiB where one channel
// should go as fast as the socket, the default 64 KiB where keystrokes
// share the connection (credit in flight is what a keystroke may queue
// behind). MUXD_BENCH_WINDOW (KiB) overrides both to explore.
var (
	bulkWindow        = benchWindow(1 << 20)
	interactiveWindow = benchWindow(64 << 10)
)

// percentile returns the p-th percentile (0..1) of sorted ds.
func percentile(ds []time.Duration, p float64) time.Duration {
	return ds[min(len(ds)-1, int(float64(len(ds))*p))]
}

func rawRTTs(b *testing.B, addr string, n int) []time.Duration {
	ws := rawDialAddr(b, "ws://"+addr+"/raw/echo")
	defer ws.CloseNow()
	msg := []byte{'a'}
	out := make([]time.Duration, 0, n)
	for range n {
		start := time.Now()
		if err := ws.Write(context.Background(), websocket.MessageBinary, msg); err != nil {
			b.Fatal(err)
		}
		if _, _, err := ws.Read(context.Background()); err != nil {
			b.Fatal(err)
		}
		out = append(out, time.Since(start))
	}
	slices.Sort(out)
	return out
}

func muxRTTs(b *testing.B, term *Channel, n int) []time.Duration {
	msg, buf := []byte{'a'}, make([]byte, 16)
	out := make([]time.Duration, 0, n)
	for range n {
		start := time.Now()
		if _, err := term.Write(msg); err != nil {
			b.Fatal(err)
		}
		if _, err := term.Read(buf); err != nil {
			b.Fatal(err)
		}
		out = append(out, time.Since(start))
	}
	slices.Sort(out)
	return out
}

// BenchmarkEchoRTT: 1-byte terminal echo round trip vs raw WebSocket
// echo (target: p50 ≤ raw + 15 µs).
func BenchmarkEchoRTT(b *testing.B) {
	addr := startBenchServer(b)
	n := max(b.N, 5000)
	c := benchDial(b, addr)
	term, _, err := c.Open(context.Background(), "terminal", 0, nil)
	if err != nil {
		b.Fatal(err)
	}
	muxRTTs(b, term, 500) // warm up
	var raw, m []time.Duration
	b.ResetTimer()
	for range benchRounds {
		raw = append(raw, rawRTTs(b, addr, n/benchRounds)...)
		m = append(m, muxRTTs(b, term, n/benchRounds)...)
	}
	b.StopTimer()
	slices.Sort(raw)
	slices.Sort(m)
	rp50, mp50 := percentile(raw, .5), percentile(m, .5)
	b.ReportMetric(float64(rp50.Microseconds()), "raw_p50_µs")
	b.ReportMetric(float64(mp50.Microseconds()), "mux_p50_µs")
	b.ReportMetric(float64((mp50 - rp50).Microseconds()), "delta_p50_µs")
	b.ReportMetric(float64(percentile(m, .99).Microseconds()), "mux_p99_µs")
}

// BenchmarkEchoRTTUnderBulk: the same echo while 4 bulk channels
// saturate the connection (target: p99 ≤ 2 ms).
func BenchmarkEchoRTTUnderBulk(b *testing.B) {
	addr := startBenchServer(b)
	n := max(b.N, 2000)
	raw := rawRTTs(b, addr, n)
	c := benchDial(b, addr)
	var bulk atomic.Int64
	for range 4 {
		ch, _, err := c.Open(context.Background(), "bulk", interactiveWindow, nil)
		if err != nil {
			b.Fatal(err)
		}
		go func() {
			buf := make([]byte, 64<<10)
			for {
				n, err := ch.Read(buf)
				bulk.Add(int64(n))
				if err != nil {
					return
				}
			}
		}()
	}
	term, _, err := c.Open(context.Background(), "terminal", 0, nil)
	if err != nil {
		b.Fatal(err)
	}
	muxRTTs(b, term, 200)
	b.ResetTimer()
	start, before := time.Now(), bulk.Load()
	m := muxRTTs(b, term, n)
	rate := float64(bulk.Load()-before) / time.Since(start).Seconds() / 1e6
	b.StopTimer()
	b.ReportMetric(float64(percentile(raw, .99).Microseconds()), "raw_idle_p99_µs")
	b.ReportMetric(float64(percentile(m, .5).Microseconds()), "mux_p50_µs")
	b.ReportMetric(float64(percentile(m, .99).Microseconds()), "mux_p99_µs")
	b.ReportMetric(rate, "bulk_MB/s")
}

// BenchmarkDataFrameAllocs counts heap allocations per 32 KiB DATA frame
// in steady state, both ends in this process (target: ~0).
func BenchmarkDataFrameAllocs(b *testing.B) {
	ts := newTestServer(b, tcpTransport, Config{}, benchRouter())
	c, _ := ts.dial(b, Config{})
	ch, _, err := c.Open(context.Background(), "bulk", 1<<20, nil)
	if err != nil {
		b.Fatal(err)
	}
	buf := make([]byte, 32<<10)
	read := func(frames int) {
		for range frames {
			if _, err := io.ReadFull(ch, buf); err != nil {
				b.Fatal(err)
			}
		}
	}
	read(1000) // warm the pools
	frames := max(b.N, 20000)
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	b.ResetTimer()
	read(frames)
	b.StopTimer()
	runtime.ReadMemStats(&m1)
	b.ReportMetric(float64(m1.Mallocs-m0.Mallocs)/float64(frames), "allocs/frame")
	b.ReportMetric(float64(m1.TotalAlloc-m0.TotalAlloc)/float64(frames), "B/frame")
}

// benchWindow returns MUXD_BENCH_WINDOW (KiB) if set, else def.
func benchWindow(def int) int {
	var k int
	if _, err := fmt.Sscan(os.Getenv("MUXD_BENCH_WINDOW"), &k); err == nil && k > 0 {
		return k << 10
	}
	return def
}

func callRTTs(b *testing.B, c *Conn, n int) []time.Duration {
	out := make([]time.Duration, 0, n)
	var res struct{}
	for range n {
		start := time.Now()
		if err := c.Call(context.Background(), "noop", nil, &res); err != nil {
			b.Fatal(err)
		}
		out = append(out, time.Since(start))
	}
	slices.Sort(out)
	return out
}

// BenchmarkRPCRoundTrip: a no-op RPC (Call → server reader → handler →
// response → client) vs a raw WebSocket echo of a message of the same
// size, measured alternately in the same run (target: tens of µs over raw).
func BenchmarkRPCRoundTrip(b *testing.B) {
	addr := startBenchServer(b)
	n := max(b.N, 5000)
	c := benchDial(b, addr)
	callRTTs(b, c, 500) // warm up
	var raw, m []time.Duration
	b.ResetTimer()
	for range benchRounds {
		raw = append(raw, rawRTTs(b, addr, n/benchRounds)...)
		m = append(m, callRTTs(b, c, n/benchRounds)...)
	}
	b.StopTimer()
	slices.Sort(raw)
	slices.Sort(m)
	rp50, mp50 := percentile(raw, .5), percentile(m, .5)
	b.ReportMetric(float64(rp50.Nanoseconds())/1e3, "raw_p50_µs")
	b.ReportMetric(float64(mp50.Nanoseconds())/1e3, "rpc_p50_µs")
	b.ReportMetric(float64(percentile(m, .99).Nanoseconds())/1e3, "rpc_p99_µs")
	b.ReportMetric(float64(mp50)/float64(rp50), "rpc/raw")
}

// BenchmarkParseRPC compares the one-pass envelope scanner with the
// encoding/json decode it replaces, on a request and a response of
// typical size (ns per parse, repeated inside so -benchtime 1x works).
func BenchmarkParseRPC(b *testing.B) {
	msgs := []struct {
		name string
		p    []byte
	}{
		{"request", []byte(`{"jsonrpc":"2.0","id":17,"method":"exec","params":{"command":"true","sessionId":"s1","id":"0b9d5c62-5a0e-4a43-8a8e-58f2a4d1e9b1","encoding":"base64"}}`)},
		{"response", []byte(`{"jsonrpc":"2.0","id":17,"result":{"id":"0b9d5c62-5a0e-4a43-8a8e-58f2a4d1e9b1","exitCode":0,"signal":null,"timedOut":false,"stdout":"","stderr":"","stdoutTruncated":false,"stderrTruncated":false,"durationMs":0}}`)},
	}
	const n = 20000
	per := func(f func()) float64 {
		start := time.Now()
		for range n {
			f()
		}
		return float64(time.Since(start).Nanoseconds()) / n
	}
	for _, msg := range msgs {
		b.Run(msg.name, func(b *testing.B) {
			for b.Loop() {
				scan := per(func() {
					if _, _, err := parseRPC(msg.p); err != nil {
						b.Fatal(err)
					}
				})
				std := per(func() {
					m, err := decodeRPC(msg.p)
					if err == nil {
						_, _, err = classifyRPC(m)
					}
					if err != nil {
						b.Fatal(err)
					}
				})
				b.ReportMetric(scan, "scan-ns/parse")
				b.ReportMetric(std, "encoding-json-ns/parse")
				b.ReportMetric(std/scan, "speedup")
			}
		})
	}
}
