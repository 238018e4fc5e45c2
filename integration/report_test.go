package integration

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"time"
)

// writeBenchmarks writes docs/benchmarks.md from the figures this run
// recorded (only when benchmarks ran).
func writeBenchmarks() error {
	figuresMu.Lock()
	defer figuresMu.Unlock()
	if len(figures) == 0 {
		return nil
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "# muxd end-to-end benchmarks\n\n")
	fmt.Fprintf(&b, "Measured through the real daemon over loopback by `make bench`\n")
	fmt.Fprintf(&b, "(`go test -run '^$' -bench . -benchtime 1x ./integration/`), each with its\n")
	fmt.Fprintf(&b, "baseline measured in the same run. Regenerated on every run.\n\n")
	fmt.Fprintf(&b, "Machine: %s; %d CPUs (`nproc`: %s); %s; %s; %s.\n", cpuModel(), runtime.NumCPU(),
		strings.TrimSpace(run("nproc")), strings.TrimSpace(run("uname", "-sr")), runtime.Version(),
		time.Now().UTC().Format("2006-01-02 15:04 UTC"))
	fmt.Fprintf(&b, "The machine is shared (other builds and tests may run at the same time):\n")
	fmt.Fprintf(&b, "load average when the benchmarks ended: %s; latency tails in particular\n", loadAvg())
	fmt.Fprintf(&b, "are noisy under load. Compare each figure with its same-run baseline.\n\n")
	fmt.Fprintf(&b, "| what | muxd | baseline (same run) | ratio | target |\n| --- | --- | --- | --- | --- |\n")
	for _, f := range figures {
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s |\n", f.name, f.value, f.baseline, f.ratio, f.target)
	}
	fmt.Fprintf(&b, "\nThe package benchmarks of exec/, mux/ and pty/ (same `make bench`)\nprint their own figures and ratios.\n")
	return os.WriteFile("../docs/benchmarks.md", b.Bytes(), 0o644)
}

func cpuModel() string {
	data, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return "unknown CPU"
	}
	for _, line := range strings.Split(string(data), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown CPU"
}

func run(name string, args ...string) string {
	out, err := exec.Command(name, args...).Output()
	if err != nil {
		return "?"
	}
	return string(out)
}

func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}
