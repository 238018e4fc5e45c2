package exec

import (
	"bufio"
	"context"
	"io"
	"os"
	osexec "os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

func cpuOf(pid int) time.Duration {
	b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
	u, _ := strconv.Atoi(f[11])
	s, _ := strconv.Atoi(f[12])
	return time.Duration(u+s) * 10 * time.Millisecond
}

func selfCPU() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(0, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func TestZZProbeCPU(t *testing.T) {
	n := 5000
	// baseline
	cmd := osexec.Command("bash", "--noprofile", "--norc")
	in, _ := cmd.StdinPipe()
	ctlR, ctlW, _ := os.Pipe()
	cmd.ExtraFiles = []*os.File{ctlW}
	cmd.Start()
	ctlW.Close()
	br := bufio.NewReader(ctlR)
	b0, g0, w0 := cpuOf(cmd.Process.Pid), selfCPU(), time.Now()
	for i := range n {
		io.WriteString(in, "true; printf '%s %s\\n' "+strconv.Itoa(i)+" \"$?\" >&3\n")
		br.ReadString('\n')
	}
	b1, g1, w1 := cpuOf(cmd.Process.Pid), selfCPU(), time.Now()
	t.Logf("baseline per cmd: wall %v bash cpu %v go cpu %v", w1.Sub(w0)/time.Duration(n), (b1-b0)/time.Duration(n), (g1-g0)/time.Duration(n))
	in.Close()
	cmd.Wait()

	e := newTestEngine(t, func(c *Config) { c.RetainCount = 16 })
	sid := newSession(t, e, SessionOptions{})
	s, _ := e.session(sid)
	b0, g0, w0 = cpuOf(s.child.Pid), selfCPU(), time.Now()
	for range n {
		if _, err := e.Exec(context.Background(), ExecRequest{SessionID: sid, Command: "true"}); err != nil {
			t.Fatal(err)
		}
	}
	b1, g1, w1 = cpuOf(s.child.Pid), selfCPU(), time.Now()
	t.Logf("engine per cmd: wall %v bash cpu %v go cpu %v", w1.Sub(w0)/time.Duration(n), (b1-b0)/time.Duration(n), (g1-g0)/time.Duration(n))
}
