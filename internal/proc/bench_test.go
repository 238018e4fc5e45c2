package proc

import (
	"os"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// BenchmarkKillManyTreesAtOnce is muxd's shutdown with many terminals:
// 200 trees (a bash and its sleep) killed at the same time, each KillTree
// scanning /proc. It reports the wall time and the /proc scans made.
func BenchmarkKillManyTreesAtOnce(b *testing.B) {
	const trees = 200
	env, err := Env(os.Environ(), nil)
	if err != nil {
		b.Fatal(err)
	}
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		ps := make([]*Process, 0, trees)
		for range trees {
			p, err := Start(Spec{Path: "bash", Args: []string{"bash", "-c", "sleep 100 & wait"}, Env: env})
			if err != nil {
				b.Fatal(err)
			}
			ps = append(ps, p)
		}
		// Each bash has forked its sleep.
		deadline := time.Now().Add(30 * time.Second)
		for _, p := range ps {
			for len(Descendants(p.Pid)) == 0 && time.Now().Before(deadline) {
				time.Sleep(time.Millisecond)
			}
		}
		scans0 := scans.Load()
		b.StartTimer()
		t0 := time.Now()
		var wg sync.WaitGroup
		for _, p := range ps {
			wg.Go(func() { _ = p.KillTree(unix.SIGTERM, time.Second) })
		}
		wg.Wait()
		b.ReportMetric(float64(time.Since(t0).Milliseconds()), "wall-ms")
		b.ReportMetric(float64(scans.Load()-scans0), "proc-scans")
		b.StopTimer()
		for _, p := range ps {
			<-p.Done()
		}
		b.StartTimer()
	}
}
