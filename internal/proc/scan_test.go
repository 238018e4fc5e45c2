package proc

import (
	"sync"
	"testing"
	"time"
)

// Callers that ask for a scan while one runs must not get it (it may have
// missed what they just did): they share the next one, which begins after
// the running one ends.
func TestSharedScansBeginAfterTheCall(t *testing.T) {
	release := make(chan struct{})
	var mu sync.Mutex
	n := 0
	started := make(chan int, 10)
	s := newScanShare(func() []procStat {
		mu.Lock()
		n++
		id := n
		mu.Unlock()
		started <- id
		if id == 1 {
			<-release
		}
		return []procStat{{pid: id}}
	})
	got := make(chan int, 10)
	ask := func() { got <- s.snapshot()[0].pid }
	go ask()
	if id := recvWithin(t, started); id != 1 {
		t.Fatalf("first scan is %d", id)
	}
	// Three callers while scan 1 runs.
	var wg sync.WaitGroup
	for range 3 {
		wg.Go(ask)
	}
	waitWaiters(t, s, 3)
	close(release)
	if id := recvWithin(t, got); id != 1 {
		t.Fatalf("the first caller got scan %d, want 1", id)
	}
	if id := recvWithin(t, started); id != 2 {
		t.Fatalf("second scan is %d", id)
	}
	for range 3 {
		if id := recvWithin(t, got); id != 2 {
			t.Fatalf("a caller that asked during scan 1 got scan %d, want 2", id)
		}
	}
	wg.Wait()
	if n != 2 {
		t.Fatalf("%d scans for 4 callers, want 2", n)
	}
	// Alone, a caller scans at once.
	ask()
	if id := recvWithin(t, got); id != 3 {
		t.Fatalf("a lone caller got scan %d, want 3", id)
	}
}

func recvWithin(t *testing.T, ch chan int) int {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatal("timed out")
		return 0
	}
}

// waitWaiters waits until n callers joined the next scan.
func waitWaiters(t *testing.T, s *scanShare, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		s.mu.Lock()
		joined := s.pending != nil && s.pending.joined >= n
		s.mu.Unlock()
		if joined {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d callers did not join the next scan", n)
		}
		time.Sleep(time.Millisecond)
	}
}
