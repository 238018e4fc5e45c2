// Package integration drives the real muxd binary over loopback with the
// Go client and raw WebSockets.
package integration

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/muxd/muxd/client"
)

// muxdBin is the binary built once by TestMain.
var muxdBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "muxd-integration-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	muxdBin = filepath.Join(dir, "muxd")
	args := []string{"build", "-o", muxdBin}
	if raceBuild && os.Getenv("MUXD_BENCH") == "" && !benchRun() {
		args = append(args, "-race")
	}
	build := exec.Command("go", append(args, "../cmd/muxd")...)
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building muxd:", err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	if err := writeBenchmarks(); err != nil {
		fmt.Fprintln(os.Stderr, "writing docs/benchmarks.md:", err)
		code = 1
	}
	os.RemoveAll(dir)
	os.Exit(code)
}

// benchRun reports whether -test.bench was given: benchmarks measure an
// optimized daemon, never a -race one.
func benchRun() bool {
	for _, a := range os.Args[1:] {
		if strings.HasPrefix(a, "-test.bench=") && a != "-test.bench=" {
			return true
		}
	}
	return false
}

// exitLimit is how long muxd may take to exit after SIGTERM: 5 s, plus
// slack for the race detector's own exit work in -race builds.
func exitLimit() time.Duration {
	if raceBuild {
		return 15 * time.Second
	}
	return 5 * time.Second
}

// daemon is one running muxd.
type daemon struct {
	t       testing.TB
	cmd     *exec.Cmd
	URL     string // http://127.0.0.1:port
	Addr    string
	DataDir string
	Token   string

	// mu guards logs.
	mu     sync.Mutex
	logs   strings.Builder
	exited chan struct{}
}

var listenRE = regexp.MustCompile(`msg=listening addr=(\S+)`)

// startDaemon runs muxd serve on a free loopback port with a fresh data
// dir; extra args and env are appended. It is stopped (SIGTERM, then
// KILL) at the end of the test.
func startDaemon(t testing.TB, env []string, args ...string) *daemon {
	t.Helper()
	d := &daemon{t: t, DataDir: t.TempDir(), exited: make(chan struct{})}
	argv := append([]string{"serve", "--listen", "127.0.0.1:0", "--data-dir", d.DataDir}, args...)
	d.cmd = exec.Command(muxdBin, argv...)
	// A fresh HOME keeps the machine's ~/.bashrc out of terminals.
	d.cmd.Env = append(append(os.Environ(), "HOME="+t.TempDir()), env...)
	for _, e := range env {
		if tok, ok := strings.CutPrefix(e, "MUXD_TOKEN="); ok {
			d.Token = tok
		}
	}
	stderr, err := d.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		sent := false
		for sc.Scan() {
			line := sc.Text()
			d.mu.Lock()
			d.logs.WriteString(line + "\n")
			d.mu.Unlock()
			if m := listenRE.FindStringSubmatch(line); m != nil && !sent {
				addr <- m[1]
				sent = true
			}
		}
		_, _ = io.Copy(io.Discard, stderr)
	}()
	go func() {
		_ = d.cmd.Wait()
		close(d.exited)
	}()
	select {
	case a := <-addr:
		d.Addr, d.URL = a, "http://"+a
	case <-d.exited:
		t.Fatalf("muxd exited at start:\n%s", d.Logs())
	case <-time.After(10 * time.Second):
		_ = d.cmd.Process.Kill()
		t.Fatalf("muxd did not listen within 10 s:\n%s", d.Logs())
	}
	t.Cleanup(d.stop)
	return d
}

// Logs returns what the daemon logged so far.
func (d *daemon) Logs() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.logs.String()
}

// Pid is the daemon's pid.
func (d *daemon) Pid() int { return d.cmd.Process.Pid }

// Terminate sends SIGTERM and waits for the exit, returning how long it took.
func (d *daemon) Terminate(limit time.Duration) (time.Duration, error) {
	start := time.Now()
	if err := d.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return 0, err
	}
	select {
	case <-d.exited:
		return time.Since(start), nil
	case <-time.After(limit):
		return time.Since(start), fmt.Errorf("muxd still running %v after SIGTERM", limit)
	}
}

func (d *daemon) stop() {
	select {
	case <-d.exited:
	default:
		if _, err := d.Terminate(exitLimit()); err != nil {
			d.t.Errorf("%v\n%s", err, d.Logs())
			_ = d.cmd.Process.Kill() // Best effort: our own child, by pid.
			<-d.exited
		}
	}
	if logs := d.Logs(); strings.Contains(logs, "WARNING: DATA RACE") || strings.Contains(logs, "panic:") {
		d.t.Errorf("the daemon reported a data race or panic:\n%s", logs)
	}
}

// dial connects a Go client to d.
func (d *daemon) dial(t testing.TB, opts client.Options) *client.Client {
	t.Helper()
	if opts.Token == "" {
		opts.Token = d.Token
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, d.URL, opts)
	if err != nil {
		t.Fatalf("Dial: %v\n%s", err, d.Logs())
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func ctxT(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func long(t testing.TB) {
	if os.Getenv("MUXD_TEST_LONG") != "1" {
		t.Skip("soak-size case: set MUXD_TEST_LONG=1 (make test-long)")
	}
}
