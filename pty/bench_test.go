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
	for {
		typ, data, err := c.Read(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if typ == websocket.MessageText && strings.Contains(string(data), `"ready"`) {
			return c
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

func BenchmarkKeystrokeEcho(b *testing.B) {
	const trips = 2000
	e := newBenchEnv(b)
	for range b.N {
		// Raw baseline: write a byte to the master, read cat's echo.
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
		raw := make([]float64, 0, trips)
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
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		_ = f.Close()

		c := e.open(b, "echo", echoScript)
		ctx := context.Background()
		got.Reset()
		for !strings.Contains(got.String(), "READY") {
			_, data, err := c.Read(ctx)
			if err != nil {
				b.Fatal(err)
			}
			got.Write(data)
		}
		ws := make([]float64, 0, trips)
		for range trips {
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
					break
				}
			}
			ws = append(ws, float64(time.Since(start).Nanoseconds())/1e3)
		}
		_ = c.CloseNow()
		_ = e.m.Destroy("echo")
		slices.Sort(raw)
		slices.Sort(ws)
		b.ReportMetric(ws[len(ws)/2], "p50-µs")
		b.ReportMetric(ws[len(ws)*99/100], "p99-µs")
		b.ReportMetric(raw[len(raw)/2], "raw-p50-µs")
		b.ReportMetric(raw[len(raw)*99/100], "raw-p99-µs")
	}
}
