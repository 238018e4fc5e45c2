package exec

import (
	"bufio"
	"context"
	"io"
	"os"
	osexec "os/exec"
	"runtime"
	"slices"
	"strconv"
	"testing"
	"time"
)

// The benchmarks do their own repetition (make bench runs -benchtime 1x)
// and report percentiles and the ratio to a baseline measured in the same
// run. Sizes shrink with -short.

func percentile(d []time.Duration, p float64) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[int(float64(len(s)-1)*p)]
}

func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

// bareBash is the floor: a persistent bash running `true` and answering
// with an in-band marker on a control pipe, without any engine.
type bareBash struct {
	cmd *osexec.Cmd
	in  io.WriteCloser
	ctl *os.File
	br  *bufio.Reader
}

func startBareBash(b *testing.B) *bareBash {
	cmd := osexec.Command("bash", "--noprofile", "--norc")
	in, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	ctlR, ctlW, err := os.Pipe()
	if err != nil {
		b.Fatal(err)
	}
	cmd.ExtraFiles = []*os.File{ctlW}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	ctlW.Close()
	return &bareBash{cmd: cmd, in: in, ctl: ctlR, br: bufio.NewReader(ctlR)}
}

// roundTrip runs command i and waits for its marker.
func (bb *bareBash) roundTrip(b *testing.B, i int) {
	if _, err := io.WriteString(bb.in, "true; printf '%s %s\\n' "+strconv.Itoa(i)+" \"$?\" >&3\n"); err != nil {
		b.Fatal(err)
	}
	if _, err := bb.br.ReadString('\n'); err != nil {
		b.Fatal(err)
	}
}

func (bb *bareBash) close() {
	bb.in.Close()
	_ = bb.cmd.Wait()
	bb.ctl.Close()
}

// bareBashRoundTrip times n round trips of a bare bash.
func bareBashRoundTrip(b *testing.B, n int) []time.Duration {
	bb := startBareBash(b)
	defer bb.close()
	lat := make([]time.Duration, 0, n)
	for i := range n {
		start := time.Now()
		bb.roundTrip(b, i)
		lat = append(lat, time.Since(start))
	}
	return lat
}

// BenchmarkSessionExecTrue: target p50 ≤ 100 µs.
func BenchmarkSessionExecTrue(b *testing.B) {
	n := 2000
	if testing.Short() {
		n = 200
	}
	e := newTestEngine(b, func(c *Config) {
		c.RetainCount = 16
		if d := os.Getenv("MUXD_BENCH_DATADIR"); d != "" {
			c.DataDir = d
		}
	})
	sid := newSession(b, e, SessionOptions{})
	ctx := context.Background()
	for range b.N {
		base := bareBashRoundTrip(b, n)
		lat := make([]time.Duration, 0, n)
		for range n {
			start := time.Now()
			if _, err := e.Exec(ctx, ExecRequest{SessionID: sid, Command: "true"}); err != nil {
				b.Fatal(err)
			}
			lat = append(lat, time.Since(start))
		}
		p50, bp50 := percentile(lat, 0.5), percentile(base, 0.5)
		b.ReportMetric(us(p50), "p50-µs")
		b.ReportMetric(us(percentile(lat, 0.99)), "p99-µs")
		b.ReportMetric(us(bp50), "baseline-p50-µs")
		b.ReportMetric(float64(p50)/float64(bp50), "ratio-p50")
	}
}

// BenchmarkStatelessExecTrue: target ≤ 1.2× `bash -c true` via os/exec.
func BenchmarkStatelessExecTrue(b *testing.B) {
	n := 300
	if testing.Short() {
		n = 50
	}
	e := newTestEngine(b, func(c *Config) { c.RetainCount = 16 })
	ctx := context.Background()
	for range b.N {
		var base, lat []time.Duration
		// Interleave so both see the same machine load.
		for range n {
			start := time.Now()
			if err := osexec.Command("bash", "-c", "true").Run(); err != nil {
				b.Fatal(err)
			}
			base = append(base, time.Since(start))
			start = time.Now()
			if _, err := e.Exec(ctx, ExecRequest{Command: "true"}); err != nil {
				b.Fatal(err)
			}
			lat = append(lat, time.Since(start))
		}
		p50, bp50 := percentile(lat, 0.5), percentile(base, 0.5)
		b.ReportMetric(us(p50), "p50-µs")
		b.ReportMetric(us(percentile(lat, 0.99)), "p99-µs")
		b.ReportMetric(us(bp50), "baseline-p50-µs")
		b.ReportMetric(float64(p50)/float64(bp50), "ratio-p50")
	}
}

// BenchmarkOutputCapture: `head -c 256M /dev/zero | base64` captured into
// the log and read back, against a raw pipe read of the same command;
// target ≥ 50% of the raw rate, median of 5.
func BenchmarkOutputCapture(b *testing.B) {
	size := "256M"
	if testing.Short() {
		size = "16M"
	}
	command := "head -c " + size + " /dev/zero | base64"
	e := newTestEngine(b, func(c *Config) { c.DefaultOutputLimit = 1 << 30; c.RetainCount = 1 })
	ctx := context.Background()
	for range b.N {
		var raw, ours []float64 // MB/s
		for range 5 {
			start := time.Now()
			cmd := osexec.Command("bash", "-c", command)
			out, err := cmd.StdoutPipe()
			if err != nil {
				b.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				b.Fatal(err)
			}
			n, _ := io.Copy(io.Discard, out)
			_ = cmd.Wait()
			raw = append(raw, float64(n)/1e6/time.Since(start).Seconds())

			start = time.Now()
			p, err := e.StartProcess(ctx, ProcessRequest{Command: command, OutputLimit: 1 << 30})
			if err != nil {
				b.Fatal(err)
			}
			r, err := e.OpenOutput(p.ID, Stdout, 0)
			if err != nil {
				b.Fatal(err)
			}
			m, err := io.Copy(io.Discard, r)
			r.Close()
			if err != nil || m != n {
				b.Fatalf("read back %d bytes (%v), want %d", m, err, n)
			}
			ours = append(ours, float64(m)/1e6/time.Since(start).Seconds())
			_ = e.RemoveProcess(p.ID)
		}
		slices.Sort(raw)
		slices.Sort(ours)
		b.ReportMetric(ours[2], "MB/s")
		b.ReportMetric(raw[2], "baseline-MB/s")
		b.ReportMetric(ours[2]/raw[2], "ratio")
	}
}

// BenchmarkIdleSessionMemory: target ≤ 100 KB of muxd memory per idle
// session (the bash process itself not counted).
func BenchmarkIdleSessionMemory(b *testing.B) {
	const n = 20
	for range b.N {
		e := newTestEngine(b, func(c *Config) { c.MaxSessions = n })
		mustExec(b, e, ExecRequest{Command: "true"}) // warm pools and the watcher
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		g0 := runtime.NumGoroutine()
		for range n {
			newSession(b, e, SessionOptions{})
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		// Heap growth plus the goroutines' stacks (8 KiB minimum each:
		// StackInuse reuses freed stacks and would hide them).
		goroutines := runtime.NumGoroutine() - g0
		heap := int64(after.HeapInuse) - int64(before.HeapInuse)
		used := max(heap, 0) + int64(goroutines)*8<<10
		b.ReportMetric(float64(used)/n/1024, "KB/session")
		b.ReportMetric(float64(goroutines)/n, "goroutines/session")
	}
}

// BenchmarkOutputReader: following a log (the process channel pump's
// source) against reading the same bytes from a plain file; target
// ≥ 300 MB/s.
func BenchmarkOutputReader(b *testing.B) {
	size := 256 << 20
	if testing.Short() {
		size = 32 << 20
	}
	dir := b.TempDir()
	l := newOutputLog(dir+"/log", 1<<30)
	defer l.remove()
	chunk := make([]byte, 128<<10)
	for i := range chunk {
		chunk[i] = byte(i)
	}
	for off := 0; off < size; off += len(chunk) {
		if err := l.append(chunk); err != nil {
			b.Fatal(err)
		}
	}
	l.finish()
	buf := make([]byte, 64<<10)
	for range b.N {
		var ours, raw []float64
		for range 5 {
			f, err := os.Open(dir + "/log")
			if err != nil {
				b.Fatal(err)
			}
			start := time.Now()
			n, _ := io.CopyBuffer(io.Discard, struct{ io.Reader }{f}, buf)
			raw = append(raw, float64(n)/1e6/time.Since(start).Seconds())
			f.Close()

			r := newOutputReader(l, Stdout, 0)
			start = time.Now()
			m, err := io.CopyBuffer(io.Discard, struct{ io.Reader }{r}, buf)
			if err != nil || m != int64(size) {
				b.Fatalf("read %d (%v), want %d", m, err, size)
			}
			ours = append(ours, float64(m)/1e6/time.Since(start).Seconds())
			r.Close()
		}
		slices.Sort(raw)
		slices.Sort(ours)
		b.ReportMetric(ours[2], "MB/s")
		b.ReportMetric(raw[2], "baseline-MB/s")
		b.ReportMetric(ours[2]/raw[2], "ratio")
	}
}
