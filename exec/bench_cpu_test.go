package exec

import (
	"context"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// cpuOf is a process's user+system CPU time from /proc (clock ticks,
// assumed 100 Hz: fine over thousands of commands).
func cpuOf(pid int) time.Duration {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	u, _ := strconv.Atoi(f[11])
	st, _ := strconv.Atoi(f[12])
	return time.Duration(u+st) * 10 * time.Millisecond
}

func selfCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkSessionExecCPUShare splits a session `true` into bash's CPU
// and the Go side's CPU per command, beside the same split for the bare
// persistent-bash round trip (the baseline of BenchmarkSessionExecTrue):
// where the remaining latency is spent.
func BenchmarkSessionExecCPUShare(b *testing.B) {
	n := 3000
	if testing.Short() {
		n = 300
	}
	per := func(d time.Duration) float64 { return us(d / time.Duration(n)) }
	for range b.N {
		bb := startBareBash(b)
		b0, g0 := cpuOf(bb.cmd.Process.Pid), selfCPU()
		for i := range n {
			bb.roundTrip(b, i)
		}
		b.ReportMetric(per(cpuOf(bb.cmd.Process.Pid)-b0), "baseline-bash-cpu-µs")
		b.ReportMetric(per(selfCPU()-g0), "baseline-go-cpu-µs")
		bb.close()

		e := newTestEngine(b, func(c *Config) { c.RetainCount = 16 })
		sid := newSession(b, e, SessionOptions{})
		s, _ := e.session(sid)
		b0, g0 = cpuOf(s.child.Pid), selfCPU()
		for range n {
			if _, err := e.Exec(context.Background(), ExecRequest{SessionID: sid, Command: "true"}); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(per(cpuOf(s.child.Pid)-b0), "bash-cpu-µs")
		b.ReportMetric(per(selfCPU()-g0), "go-cpu-µs")
	}
}
