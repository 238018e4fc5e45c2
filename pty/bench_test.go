package pty_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	cpty "github.com/creack/pty"

	"github.com/coder/websocket"

	"github.com/muxd/muxd/pty"
	"github.com/muxd/muxd/server"
)

// Benchmarks compare muxd's /ws/terminal path with a raw creack/pty read
// of the same command, interleaving runs so both see the same machine
// load, and report medians and their ratio.

// benchEnv serves /ws/terminal on loopback.
type benchEnv struct {
	m   *pty.Manager
	srv *httptest.Server
}

func newBenchEnv(b *testing.B) *benchEnv {
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	m := pty.NewManager(pty.Config{Logger: quiet, KillGrace: 200 * time.Millisecond})
	mux := http.NewServeMux()
	mux.Handle("/ws/terminal", server.NewTerminalHandler(m, server.TerminalHandlerOptions{Logger: quiet}))
	e := &benchEnv{m: m, srv: httptest.NewServer(mux)}
	b.Cleanup(func() {
		e.srv.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = m.Close(ctx) // Best effort.
	})
	return e
}

// open creates a terminal running sh -c script and connects a socket to
// it, returning once ready arrived.
func (e *benchEnv) open(b *testing.B, id, script string) *websocket.Conn {
	c, _ := e.openReplay(b, id, script)
	return c
}

// openReplay is open that also returns the replayed output: what the
// program printed before the socket attached.
func (e *benchEnv) openReplay(b *testing.B, id, script string) (*websocket.Conn, string) {
	if _, err := e.m.Create(pty.CreateOptions{ID: id, Shell: "/bin/sh", Args: []string{"-c", script}}); err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(e.srv.URL, "http")+"/ws/terminal?id="+id, nil)
	if err != nil {
		b.Fatal(err)
	}
	c.SetReadLimit(1 << 20)
	var replay strings.Builder
	for {
		typ, data, err := c.Read(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if typ == websocket.MessageText && strings.Contains(string(data), `"ready"`) {
			return c, replay.String()
		}
		if typ == websocket.MessageBinary {
			replay.Write(data)
		}
	}
}

// wsDrain counts binary bytes until the exit message.
func wsDrain(b *testing.B, c *websocket.Conn) int64 {
	buf := make([]byte, 64<<10)
	var total int64
	ctx := context.Background()
	for {
		typ, r, err := c.Reader(ctx)
		if err != nil {
			b.Fatalf("read: %v", err)
		}
		if typ == websocket.MessageText {
			msg, _ := io.ReadAll(r)
			var m struct{ Type string }
			_ = json.Unmarshal(msg, &m)
			if m.Type == "exit" {
				return total
			}
			continue
		}
		for {
			n, err := r.Read(buf)
			total += int64(n)
			if err != nil {
				break
			}
		}
	}
}

func benchSize() string {
	if v := os.Getenv("MUXD_BENCH_MB"); v != "" {
		return v + "M"
	}
	return "64M"
}

func benchRuns() int {
	if n, err := strconv.Atoi(os.Getenv("MUXD_BENCH_RUNS")); err == nil && n > 0 {
		return n
	}
	return 5
}

// rawStart runs sh -c script on a creack/pty PTY.
func rawStart(b *testing.B, script string) (*os.File, *exec.Cmd) {
	cmd := exec.Command("/bin/sh", "-c", script)
	cmd.Env = append(os.Environ(), "TERM=xterm-256color", "LANG=C.UTF-8", "LC_ALL=C.UTF-8")
	f, err := cpty.StartWithSize(cmd, &cpty.Winsize{Cols: 80, Rows: 24})
	if err != nil {
		b.Fatal(err)
	}
	return f, cmd
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}

func BenchmarkTerminalThroughput(b *testing.B) {
	script := "read x; head -c " + benchSize() + " /dev/zero | base64"
	e := newBenchEnv(b)
	runs := benchRuns()
	for range b.N {
		var raw, ws, rawCPU, wsCPU []float64
		for i := range runs {
			// Raw: read the master directly.
			f, cmd := rawStart(b, script)
			buf := make([]byte, 32<<10)
			cpu0 := cpuTime()
			start := time.Now()
			_, _ = f.Write([]byte("\n"))
			var n int64
			for {
				k, err := f.Read(buf)
				n += int64(k)
				if err != nil {
					break
				}
			}
			d := time.Since(start)
			rawCPU = append(rawCPU, (cpuTime()-cpu0).Seconds()*1e3/(float64(n)/1e6))
			_ = cmd.Wait()
			_ = f.Close()
			raw = append(raw, float64(n)/d.Seconds()/1e6)

			// muxd: the same command through the ring and /ws/terminal.
			id := fmt.Sprintf("tp-%d", i)
			c := e.open(b, id, script)
			cpu0 = cpuTime()
			start = time.Now()
			if err := c.Write(context.Background(), websocket.MessageBinary, []byte("\n")); err != nil {
				b.Fatal(err)
			}
			n = wsDrain(b, c)
			d = time.Since(start)
			wsCPU = append(wsCPU, (cpuTime()-cpu0).Seconds()*1e3/(float64(n)/1e6))
			_ = c.CloseNow()
			_ = e.m.Destroy(id)
			ws = append(ws, float64(n)/d.Seconds()/1e6)
		}
		mr, mw := median(raw), median(ws)
		b.ReportMetric(mr, "raw-MB/s")
		b.ReportMetric(mw, "ws-MB/s")
		b.ReportMetric(mw/mr, "ratio")
		// CPU spent in this process (server and client) per MB: less
		// sensitive to machine load than MB/s.
		b.ReportMetric(median(rawCPU), "raw-cpu-ms/MB")
		b.ReportMetric(median(wsCPU), "ws-cpu-ms/MB")
		b.Logf("raw MB/s %v; ws MB/s %v; median ratio %.3f", fmtAll(raw), fmtAll(ws), mw/mr)
	}
}

// cpuTime is the user and system CPU time of this process so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func fmtAll(xs []float64) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = fmt.Sprintf("%.1f", x)
	}
	return "[" + strings.Join(parts, " ") + "]"
}

const echoScript = "stty raw -echo; echo READY; exec cat"

// echoTrip sends one byte and waits for the first binary frame back.
func echoTrip(b *testing.B, c *websocket.Conn) float64 {
	ctx := context.Background()
	start := time.Now()
	if err := c.Write(ctx, websocket.MessageBinary, []byte{'x'}); err != nil {
		b.Fatal(err)
	}
	for {
		typ, data, err := c.Read(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if typ == websocket.MessageBinary && len(data) > 0 {
			return float64(time.Since(start).Nanoseconds()) / 1e3
		}
	}
}

// wsEchoFloor serves a WebSocket that echoes each message: the cost of
// the socket alone, for comparison.
func wsEchoFloor(b *testing.B) *websocket.Conn {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := websocket.Accept(w, r, &websocket.AcceptOptions{CompressionMode: websocket.CompressionDisabled})
		if err != nil {
			return
		}
		ctx := context.Background()
		for {
			typ, d, err := c.Read(ctx)
			if err != nil || c.Write(ctx, typ, d) != nil {
				return
			}
		}
	}))
	b.Cleanup(srv.Close)
	c, _, err := websocket.Dial(context.Background(), "ws"+strings.TrimPrefix(srv.URL, "http"), nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = c.CloseNow() })
	return c
}

func pct(xs []float64, p int) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)*p/100]
}

// BenchmarkKeystrokeEcho measures a keystroke's round trip through
// /ws/terminal to a program that echoes it (cat on a raw-mode PTY), in
// rounds interleaved with the same round trip on a raw creack/pty PTY and
// with a bare WebSocket echo over loopback.
func BenchmarkKeystrokeEcho(b *testing.B) {
	const rounds, trips = 5, 400
	e := newBenchEnv(b)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for range b.N {
		f, cmd := rawStart(b, echoScript)
		buf := make([]byte, 4096)
		var got strings.Builder
		for !strings.Contains(got.String(), "READY") {
			n, err := f.Read(buf)
			if err != nil {
				b.Fatal(err)
			}
			got.Write(buf[:n])
		}
		c, replay := e.openReplay(b, "echo", echoScript)
		got.Reset()
		got.WriteString(replay) // READY may have come before the socket
		for !strings.Contains(got.String(), "READY") {
			_, data, err := c.Read(ctx)
			if err != nil {
				b.Fatal(err)
			}
			got.Write(data)
		}
		floor := wsEchoFloor(b)
		var raw, ws, fl []float64
		for range rounds {
			for range trips {
				start := time.Now()
				if _, err := f.Write([]byte{'x'}); err != nil {
					b.Fatal(err)
				}
				if _, err := f.Read(buf); err != nil {
					b.Fatal(err)
				}
				raw = append(raw, float64(time.Since(start).Nanoseconds())/1e3)
			}
			for range trips {
				ws = append(ws, echoTrip(b, c))
			}
			for range trips {
				fl = append(fl, echoTrip(b, floor))
			}
		}
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		_ = f.Close()
		_ = c.CloseNow()
		_ = e.m.Destroy("echo")
		b.ReportMetric(pct(ws, 50), "p50-µs")
		b.ReportMetric(pct(ws, 99), "p99-µs")
		b.ReportMetric(pct(raw, 50), "raw-pty-p50-µs")
		b.ReportMetric(pct(raw, 99), "raw-pty-p99-µs")
		b.ReportMetric(pct(fl, 50), "ws-floor-p50-µs")
		b.ReportMetric(pct(fl, 99), "ws-floor-p99-µs")
	}
}
