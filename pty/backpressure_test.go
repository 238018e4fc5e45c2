package pty

import (
	"context"
	"errors"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestSlowAttachmentLosesNothing(t *testing.T) {
	m := newTestManager(t, Config{RingSize: 64 << 10, StallTimeout: time.Minute})
	term := startBash(t, m, "")
	a, _, err := term.Attach(AttachOptions{From: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Detach()
	typeLine(t, term, `seq 1 200000; echo seq-$((1+1))`)
	var out strings.Builder
	buf := make([]byte, 100) // small pulls: many round trips per ring
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	for !strings.Contains(out.String(), "seq-2") {
		ev, err := a.Next(ctx, buf)
		if err != nil {
			t.Fatalf("next: %v (got %d bytes)", err, out.Len())
		}
		if ev.Kind == EventGap {
			t.Fatalf("gap of %d bytes while keeping up", ev.Bytes)
		}
		if ev.Kind == EventData {
			out.Write(ev.Data)
		}
	}
	text := strings.ReplaceAll(out.String(), "\r\n", "\n")
	var want strings.Builder
	for i := 1; i <= 200000; i++ {
		want.WriteString(strconv.Itoa(i))
		want.WriteByte('\n')
	}
	if !strings.Contains(text, want.String()) {
		t.Fatalf("output of seq is not complete and in order (%d bytes)", len(text))
	}
}

func TestStalledAttachmentDoesNotStallOthers(t *testing.T) {
	const stall = 300 * time.Millisecond
	m := newTestManager(t, Config{RingSize: 64 << 10, StallTimeout: stall})
	term := startBash(t, m, "")
	stalled, info, err := term.Attach(AttachOptions{From: 1 << 40}) // from the end
	if err != nil {
		t.Fatal(err)
	}
	defer stalled.Detach()
	active := attach(t, term, AttachOptions{From: -1})
	start := time.Now()
	typeLine(t, term, `head -c 1500000 /dev/zero | base64; echo fin-$((1+1))`)
	active.waitFor(t, "fin-2")
	elapsed := time.Since(start)
	for _, k := range active.kinds() {
		if k == EventGap {
			t.Fatalf("the active attachment got a gap")
		}
	}
	if term.Info().End-info.End < 2_000_000 {
		t.Fatalf("output smaller than expected: %d", term.Info().End-info.End)
	}
	t.Logf("2 MB through a 64 KiB ring with a stalled viewer in %v (stall bound %v)", elapsed, stall)

	// The stalled attachment, resuming, learns what it lost and then
	// continues at a boundary with live bytes.
	buf := make([]byte, 4096)
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	ev, err := stalled.Next(ctx, buf)
	if err != nil || ev.Kind != EventSync || ev.Offset != info.End {
		t.Fatalf("first event: %+v %v, want sync at %d", ev, err, info.End)
	}
	ev, err = stalled.Next(ctx, buf)
	if err != nil || ev.Kind != EventGap || ev.Bytes <= 0 || ev.Offset != info.End+ev.Bytes {
		t.Fatalf("second event: %+v %v, want a gap", ev, err)
	}
	typeLine(t, term, `echo late-$((3+4))`)
	var got strings.Builder
	for !strings.Contains(got.String(), "late-7") {
		ev, err := stalled.Next(ctx, buf)
		if err != nil {
			t.Fatalf("next after gap: %v", err)
		}
		got.Write(ev.Data)
	}
}

func TestDetachReleasesTheReader(t *testing.T) {
	// With an hour-long stall bound, output flows only if Detach stops
	// the stalled attachment from holding the reader.
	m := newTestManager(t, Config{RingSize: 64 << 10, StallTimeout: time.Hour})
	term := startBash(t, m, "")
	stalled, _, err := term.Attach(AttachOptions{From: 1 << 40})
	if err != nil {
		t.Fatal(err)
	}
	active := attach(t, term, AttachOptions{From: -1})
	typeLine(t, term, `head -c 300000 /dev/zero | base64; echo fin-$((1+1))`)
	// The reader stops at a ring minus one read (32 KiB) past the stalled
	// attachment; get close to that before detaching.
	active.waitUntil(t, "output", func() bool { return active.live.Len() > 24<<10 })
	stalled.Detach()
	active.waitFor(t, "fin-2")
	if _, err := stalled.Next(context.Background(), make([]byte, 16)); !errors.Is(err, ErrDetached) {
		t.Fatalf("next after detach: got %v, want ErrDetached", err)
	}
}

func TestNextHonoursContextAndDetach(t *testing.T) {
	m := newTestManager(t, Config{DefaultShell: "/bin/cat"})
	term, err := m.Create(CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	a, _, err := term.Attach(AttachOptions{From: 1 << 40})
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64)
	if ev, err := a.Next(context.Background(), buf); err != nil || ev.Kind != EventSync {
		t.Fatalf("first: %+v %v", ev, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { _, err := a.Next(ctx, buf); errc <- err }()
	cancel()
	if err := recvOrTimeout(t, errc, "cancelled next"); !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v, want context.Canceled", err)
	}
	go func() { _, err := a.Next(context.Background(), buf); errc <- err }()
	a.Detach()
	if err := recvOrTimeout(t, errc, "detached next"); !errors.Is(err, ErrDetached) {
		t.Fatalf("got %v, want ErrDetached", err)
	}
}

// Attachments whose reader never takes the replay hold no copy of the
// ring: a client opening many channels it never reads must not grow the
// daemon by a ring each.
func TestUnreadAttachmentsHoldNoReplayCopy(t *testing.T) {
	m := newTestManager(t, Config{RingSize: 1 << 20})
	term := startBash(t, m, "")
	c := attach(t, term, AttachOptions{From: -1})
	typeLine(t, term, `head -c 1100000 /dev/zero | tr '\0' a; echo do''ne`)
	c.waitFor(t, "done")
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	atts := make([]*Attachment, 0, 100)
	for range 100 {
		a, _, err := term.Attach(AttachOptions{From: -1})
		if err != nil {
			t.Fatal(err)
		}
		atts = append(atts, a)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	if grew := int64(after.HeapInuse) - int64(before.HeapInuse); grew > 16<<20 {
		t.Errorf("100 unread attachments of a 1 MiB ring grew the heap by %d MiB", grew>>20)
	}
	// Each still replays the whole ring when read.
	got := collect(t, atts[99])
	got.waitSync(t)
	if r := got.replayString(); strings.Count(r, "a") < 1<<20-4096 {
		t.Errorf("replay of an attachment read late: %d bytes of output", strings.Count(r, "a"))
	}
	runtime.KeepAlive(atts)
}

// A viewer that stalls during its replay while the ring moves past all of
// it gets the lost replay as a gap: Next must not fail (it panicked).
func TestReplayOverrunWhileStalledIsAGap(t *testing.T) {
	m := newTestManager(t, Config{RingSize: 64 << 10, StallTimeout: 50 * time.Millisecond})
	term := startBash(t, m, "")
	c := attach(t, term, AttachOptions{From: -1})
	typeLine(t, term, `head -c 20000 /dev/zero | tr '\0' a; echo; echo one-$((1+1))`)
	c.waitFor(t, "one-2")
	late, _, err := term.Attach(AttachOptions{From: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer late.Detach()
	typeLine(t, term, `head -c 400000 /dev/zero | tr '\0' b; echo; echo two-$((1+1))`)
	c.waitFor(t, "two-2")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	buf := make([]byte, 4096)
	gaps := 0
	for range 1000 {
		ev, err := late.Next(ctx, buf)
		if err != nil {
			t.Fatal(err)
		}
		if ev.Kind == EventGap {
			gaps++
		}
		if ev.Kind == EventSync {
			break
		}
	}
	if gaps == 0 {
		t.Fatal("a replay the ring overran: no gap")
	}
}
