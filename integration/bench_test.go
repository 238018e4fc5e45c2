package integration

import (
	"bufio"
	"context"
	"encoding/hex"
	"fmt"
	"hash/crc32"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/muxd/muxd/client"
	muxexec "github.com/muxd/muxd/exec"
	"golang.org/x/sys/unix"
)

// End-to-end benchmarks: the targets of issue 5, through the real daemon
// over loopback, each with a baseline measured in the same run. Run with
// `make bench` (go test -run '^$' -bench . -benchtime 1x ./integration/);
// each benchmark repeats internally, so one iteration is enough. The
// figures are written to docs/benchmarks.md by TestMain.

// figure is one line of docs/benchmarks.md.
type figure struct {
	name, value, baseline, ratio, target string
}

var (
	// figuresMu guards figures.
	figuresMu sync.Mutex
	figures   []figure
)

func record(f figure) {
	figuresMu.Lock()
	figures = append(figures, f)
	figuresMu.Unlock()
}

func percentile(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	i := int(p * float64(len(s)-1))
	return s[i]
}

func us(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 }

// benchN is the repetitions per latency benchmark (MUXD_BENCH_N).
func benchN(def int) int {
	if n, err := strconv.Atoi(os.Getenv("MUXD_BENCH_N")); err == nil && n > 0 {
		return n
	}
	return def
}

func BenchmarkSessionExecTrue(b *testing.B) {
	d := startDaemon(b, nil)
	c := d.dial(b, client.Options{})
	ctx := ctxT(b, 5*time.Minute)
	s, err := c.CreateSession(ctx, client.SessionOptions{})
	if err != nil {
		b.Fatal(err)
	}
	n := benchN(2000)
	for b.Loop() {
		base := bashRoundTrips(b, n)
		rpc := make([]time.Duration, 0, n)
		for i := 0; i < n; i++ {
			t0 := time.Now()
			if _, err := c.ServerInfo(ctx); err != nil {
				b.Fatal(err)
			}
			rpc = append(rpc, time.Since(t0))
		}
		lat := make([]time.Duration, 0, n)
		for i := 0; i < n; i++ {
			t0 := time.Now()
			r, err := s.Exec(ctx, "true", client.ExecOptions{})
			if err != nil || r.ExitCode == nil || *r.ExitCode != 0 {
				b.Fatalf("exec true: %+v %v", r, err)
			}
			lat = append(lat, time.Since(t0))
		}
		p50, p99, b50 := percentile(lat, 0.5), percentile(lat, 0.99), percentile(base, 0.5)
		b.ReportMetric(us(p50), "p50-µs")
		b.ReportMetric(us(p99), "p99-µs")
		b.ReportMetric(us(b50), "baseline-p50-µs")
		b.ReportMetric(float64(p50)/float64(b50), "ratio-p50")
		r50 := percentile(rpc, 0.5)
		b.ReportMetric(us(r50), "rpc-p50-µs")
		one := ""
		if o := oneCPUSessionExecs(b, n); o != nil {
			o50 := percentile(o, 0.5)
			b.ReportMetric(us(o50), "one-cpu-p50-µs")
			one = fmt.Sprintf("; client, daemon and shell all on one CPU p50 %.0f µs", us(o50))
		}
		record(figure{"session exec `true` (p50 / p99)", fmt.Sprintf("%.0f µs / %.0f µs", us(p50), us(p99)),
			fmt.Sprintf("bare persistent bash round trip p50 %.0f µs; the RPC alone (server.info) p50 %.0f µs%s", us(b50), us(r50), one),
			fmt.Sprintf("%.1f×", float64(p50)/float64(b50)), "p50 ≤ 150 µs, p99 ≤ 1 ms"})
	}
}

// oneCPUSessionExecs measures n session execs with this process, a
// second daemon and its shell all on CPU 0, each with GOMAXPROCS 1 (what
// `taskset -c 0` gives them): the same work without wake-ups from one
// CPU to another, which on a small VM cost more than the work itself.
// It returns nil on a machine with one CPU.
func oneCPUSessionExecs(b *testing.B, n int) []time.Duration {
	var all unix.CPUSet
	if err := unix.SchedGetaffinity(0, &all); err != nil || all.Count() < 2 || !all.IsSet(0) {
		return nil
	}
	var cpu0 unix.CPUSet
	cpu0.Set(0)
	d := startDaemon(b, []string{"GOMAXPROCS=1"})
	if err := setAffinity(d.cmd.Process.Pid, &cpu0); err != nil {
		b.Fatal(err)
	}
	runtime.GOMAXPROCS(1)
	defer runtime.SetDefaultGOMAXPROCS()
	if err := setAffinity(os.Getpid(), &cpu0); err != nil {
		b.Fatal(err)
	}
	defer func() {
		if err := setAffinity(os.Getpid(), &all); err != nil {
			b.Fatal(err)
		}
	}()
	c := d.dial(b, client.Options{})
	ctx := ctxT(b, 5*time.Minute)
	s, err := c.CreateSession(ctx, client.SessionOptions{}) // its shell starts on CPU 0
	if err != nil {
		b.Fatal(err)
	}
	lat := make([]time.Duration, 0, n)
	for range n {
		t0 := time.Now()
		if _, err := s.Exec(ctx, "true", client.ExecOptions{}); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(t0))
	}
	return lat
}

// setAffinity sets the CPU affinity of every thread of process pid.
func setAffinity(pid int, set *unix.CPUSet) error {
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		return err
	}
	for _, t := range tasks {
		tid, err := strconv.Atoi(t.Name())
		if err != nil {
			continue
		}
		if err := unix.SchedSetaffinity(tid, set); err != nil && err != unix.ESRCH {
			return fmt.Errorf("affinity of thread %d: %w", tid, err)
		}
	}
	return nil
}

// bashRoundTrips measures a bare persistent bash: write `true; echo m`,
// read the marker line.
func bashRoundTrips(b *testing.B, n int) []time.Duration {
	cmd := exec.Command("bash", "--noprofile", "--norc")
	in, _ := cmd.StdinPipe()
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() { _ = in.Close(); _ = cmd.Wait() }()
	r := bufio.NewReader(out)
	lat := make([]time.Duration, 0, n)
	for i := 0; i < n; i++ {
		t0 := time.Now()
		if _, err := io.WriteString(in, "true; echo m\n"); err != nil {
			b.Fatal(err)
		}
		if _, err := r.ReadString('\n'); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(t0))
	}
	return lat
}

func BenchmarkStatelessExecTrue(b *testing.B) {
	d := startDaemon(b, nil)
	c := d.dial(b, client.Options{})
	ctx := ctxT(b, 5*time.Minute)
	n := benchN(300)
	for b.Loop() {
		var base, lat []time.Duration
		for i := 0; i < n; i++ { // interleaved, so load affects both alike
			t0 := time.Now()
			if err := exec.Command("bash", "-c", "true").Run(); err != nil {
				b.Fatal(err)
			}
			base = append(base, time.Since(t0))
			t0 = time.Now()
			r, err := c.Exec(ctx, "true", client.ExecOptions{})
			if err != nil || r.ExitCode == nil || *r.ExitCode != 0 {
				b.Fatalf("exec true: %+v %v", r, err)
			}
			lat = append(lat, time.Since(t0))
		}
		p50, b50 := percentile(lat, 0.5), percentile(base, 0.5)
		ratio := float64(p50) / float64(b50)
		b.ReportMetric(us(p50), "p50-µs")
		b.ReportMetric(us(b50), "baseline-p50-µs")
		b.ReportMetric(ratio, "ratio")
		record(figure{"stateless exec `true` (p50)", fmt.Sprintf("%.0f µs", us(p50)),
			fmt.Sprintf("`bash -c true` via os/exec p50 %.0f µs", us(b50)), fmt.Sprintf("%.2f×", ratio), "≤ 1.3×"})
	}
}

// streamFile writes size bytes of deterministic pseudo-random data (so
// reordering or loss changes the hash) and returns the command that
// prints them: cat is far faster than any generator, so the stream, not
// the producer, is measured.
func streamFile(t testing.TB, size int64) string {
	path := filepath.Join(t.TempDir(), "stream.bin")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.NewChaCha8([32]byte{'m', 'u', 'x', 'd'})
	buf := make([]byte, 1<<20)
	for left := size; left > 0; left -= int64(len(buf)) {
		_, _ = rng.Read(buf) // Never fails.
		n := min(left, int64(len(buf)))
		if _, err := f.Write(buf[:n]); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return "cat " + path
}

// rawPipe runs command locally and returns its throughput and checksum
// (CRC-32C: hardware-fast, so hashing does not bound the figure).
func rawPipe(b testing.TB, command string) (float64, string) {
	cmd := exec.Command("bash", "-c", command)
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	h := crc32.New(crc32.MakeTable(crc32.Castagnoli))
	t0 := time.Now()
	buf := make([]byte, 256<<10)
	n, err := io.CopyBuffer(h, out, buf)
	el := time.Since(t0)
	if err != nil {
		b.Fatal(err)
	}
	_ = cmd.Wait()
	return float64(n) / el.Seconds() / 1e6, hex.EncodeToString(h.Sum(nil))
}

func BenchmarkProcessStream(b *testing.B) {
	size := int64(256 << 20)
	d := startDaemon(b, nil, "--output-limit", "300MiB")
	c := d.dial(b, client.Options{})
	ctx := ctxT(b, 5*time.Minute)
	command := streamFile(b, size)
	for b.Loop() {
		var rates, bases, engines []float64
		for run := 0; run < 3; run++ {
			base, want := rawPipe(b, command)
			bases = append(bases, base)
			engines = append(engines, engineOnly(b, command, size, want))
			p, err := c.StartProcess(ctx, command, client.ProcessOptions{OutputLimit: size + 1<<20})
			if err != nil {
				b.Fatal(err)
			}
			h := crc32.New(crc32.MakeTable(crc32.Castagnoli))
			t0 := time.Now()
			n, err := io.CopyBuffer(h, p.Stdout(), make([]byte, 256<<10))
			el := time.Since(t0)
			if err != nil || n != size {
				b.Fatalf("stream: %d bytes, %v; want %d", n, err, size)
			}
			if got := hex.EncodeToString(h.Sum(nil)); got != want {
				b.Fatalf("stream not byte-exact: crc32c %s, want %s", got, want)
			}
			rates = append(rates, float64(n)/el.Seconds()/1e6)
			_ = p.Remove(ctx) // Best effort: frees the retained output.
		}
		slices.Sort(rates)
		slices.Sort(bases)
		slices.Sort(engines)
		rate, base, eng := rates[len(rates)/2], bases[len(bases)/2], engines[len(engines)/2]
		b.ReportMetric(eng, "engine-only-MB/s")
		b.ReportMetric(rate, "MB/s")
		b.ReportMetric(base, "baseline-MB/s")
		b.ReportMetric(rate/base, "ratio")
		record(figure{"process stream, 256 MiB followed live (median of 3, CRC-32C-exact)", fmt.Sprintf("%.0f MB/s", rate),
			fmt.Sprintf("raw pipe read of the same command %.0f MB/s; exec/ capture and follow alone, in process, %.0f MB/s", base, eng),
			fmt.Sprintf("%.0f%%", 100*rate/base),
			"≥ 40% and ≥ 300 MB/s"})
	}
}

func BenchmarkKeystrokeEchoUnderFlood(b *testing.B) {
	d := startDaemon(b, nil, "--output-limit", "64MiB")
	c := d.dial(b, client.Options{})
	ctx := ctxT(b, 5*time.Minute)
	n := benchN(500)
	for b.Loop() {
		quiet := echoLatencies(b, ctx, c, n/2)
		flood, err := c.StartProcess(ctx, "head -c 500M /dev/zero", client.ProcessOptions{})
		if err != nil {
			b.Fatal(err)
		}
		streamed := make(chan int64, 1)
		go func() {
			n, _ := io.Copy(io.Discard, flood.Stdout())
			streamed <- n
		}()
		lat := echoLatencies(b, ctx, c, n)
		_ = flood.Kill(ctx, "KILL", 0)
		<-streamed
		p50, p99 := percentile(lat, 0.5), percentile(lat, 0.99)
		q50, q99 := percentile(quiet, 0.5), percentile(quiet, 0.99)
		b.ReportMetric(us(p50), "p50-µs")
		b.ReportMetric(us(p99), "p99-µs")
		b.ReportMetric(us(q50), "quiet-p50-µs")
		b.ReportMetric(us(q99), "quiet-p99-µs")
		record(figure{"keystroke echo while a 500 MB log streams on the same socket (p50 / p99)",
			fmt.Sprintf("%.0f µs / %.0f µs", us(p50), us(p99)), fmt.Sprintf("same echo without the flood p50 %.0f µs, p99 %.0f µs", us(q50), us(q99)),
			fmt.Sprintf("%.1f×", float64(p99)/float64(q99)), "p99 ≤ 2 ms"})
	}
}

// echoLatencies types one byte at a time into a fresh terminal (raw mode,
// cat echoes) and times each echo.
func echoLatencies(b testing.TB, ctx context.Context, c *client.Client, n int) []time.Duration {
	term, err := c.CreateTerminal(ctx, client.TerminalOptions{Shell: "bash"})
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = term.Destroy(context.Background()) }()
	if _, err := term.Write([]byte("stty raw -echo; echo READY; exec cat\n")); err != nil {
		b.Fatal(err)
	}
	readUntil(b, term, "READY", 10*time.Second)
	// Let cat start: its first echo proves it.
	waitEcho(b, term, 'z')
	buf := make([]byte, 64)
	lat := make([]time.Duration, 0, n)
	for i := 0; i < n; i++ {
		t0 := time.Now()
		if _, err := term.Write([]byte{'x'}); err != nil {
			b.Fatal(err)
		}
		for got := false; !got; {
			k, err := term.Read(buf)
			if err != nil {
				b.Fatal(err)
			}
			got = strings.IndexByte(string(buf[:k]), 'x') >= 0
		}
		lat = append(lat, time.Since(t0))
	}
	return lat
}

func waitEcho(b testing.TB, term *client.Terminal, ch byte) {
	deadline := time.Now().Add(10 * time.Second)
	buf := make([]byte, 4096)
	for time.Now().Before(deadline) {
		if _, err := term.Write([]byte{ch}); err != nil {
			b.Fatal(err)
		}
		k, err := term.Read(buf)
		if err != nil {
			b.Fatal(err)
		}
		if strings.IndexByte(string(buf[:k]), ch) >= 0 {
			return
		}
	}
	b.Fatal("cat never echoed")
}

// rssKB reads a process's resident set from /proc.
func rssKB(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return -1
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			f := strings.Fields(v)
			if len(f) > 0 {
				n, _ := strconv.ParseInt(f[0], 10, 64)
				return n
			}
		}
	}
	return -1
}

// engineOnly runs command through exec/ in this process and follows its
// output to the end: what the daemon's stream costs before mux and the
// socket.
func engineOnly(b testing.TB, command string, size int64, want string) float64 {
	e, err := muxexec.New(muxexec.Config{DataDir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = e.Close(context.Background()) }()
	ctx := context.Background()
	t0 := time.Now()
	p, err := e.StartProcess(ctx, muxexec.ProcessRequest{Command: command, OutputLimit: size + 1<<20})
	if err != nil {
		b.Fatal(err)
	}
	r, err := e.OpenOutput(p.ID, muxexec.Stdout, 0)
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	h := crc32.New(crc32.MakeTable(crc32.Castagnoli))
	n, err := io.CopyBuffer(h, r, make([]byte, 256<<10))
	el := time.Since(t0)
	if err != nil || n != size || hex.EncodeToString(h.Sum(nil)) != want {
		b.Fatalf("engine-only stream: %d bytes, %v", n, err)
	}
	return float64(n) / el.Seconds() / 1e6
}
