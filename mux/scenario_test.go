package mux

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"
)

// scenarioRouter adds kinds for the scenario tests to echoRouter:
// "flood" writes process output until closed, "ordered" writes params.n
// bytes then exit then EOF, "sink" never reads, and ctrl ops of "sink"
// channels go to ctrls.
func scenarioRouter(ctrls chan json.RawMessage) *Router {
	rt := echoRouter()
	rt.HandleOpen("flood", func(ctx context.Context, ch *Channel, p json.RawMessage) (any, error) {
		ch.SetInputEnabled(false)
		go func() {
			buf := bytes.Repeat([]byte("f"), 32<<10)
			for {
				if _, err := ch.WriteStream(ctx, 1, buf); err != nil {
					return
				}
			}
		}()
		return nil, nil
	})
	rt.HandleOpen("ordered", func(ctx context.Context, ch *Channel, p json.RawMessage) (any, error) {
		var params struct{ N int }
		_ = json.Unmarshal(p, &params)
		go func() {
			buf := make([]byte, params.N)
			for i := range buf {
				buf[i] = byte(i)
			}
			if _, err := ch.WriteStream(ctx, 1, buf); err != nil {
				return
			}
			_ = ch.SendCtrl(map[string]any{"op": "exit", "code": 0})
			_ = ch.CloseWrite()
		}()
		return nil, nil
	})
	rt.HandleOpen("sink", func(ctx context.Context, ch *Channel, p json.RawMessage) (any, error) {
		ch.OnCtrl(func(op json.RawMessage) {
			select {
			case ctrls <- op:
			default:
			}
		})
		return nil, nil
	})
	return rt
}

// drain reads ch until it ends, discarding.
func drain(ch *Channel) {
	buf := make([]byte, 64<<10)
	for {
		if _, err := ch.Read(buf); err != nil {
			return
		}
	}
}

// floodedConn returns a client whose connection carries n process
// channels of bulk output, drained as fast as the client can.
func floodedConn(t *testing.T, n int) (*Conn, context.Context) {
	ts := newTestServer(t, tcpTransport, Config{}, scenarioRouter(nil))
	c, _ := ts.dial(t, Config{})
	ctx := ctx5(t)
	for range n {
		f, _, err := c.Open(ctx, "flood", 0, nil)
		if err != nil {
			t.Fatal(err)
		}
		go drain(f)
	}
	return c, ctx
}

func ctx5(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestDataExitEOFInOrderUnderBulk(t *testing.T) {
	c, ctx := floodedConn(t, 4)
	const n = 1 << 20
	ch, _, err := c.Open(ctx, "ordered", 0, map[string]int{"n": n})
	if err != nil {
		t.Fatal(err)
	}
	type event struct {
		data int
		ctrl string
		eof  bool
	}
	events := make(chan []event, 1)
	go func() {
		var ev []event
		buf := make([]byte, 64<<10)
		got := 0
		for {
			k, ctrl, err := ch.ReadFrame(buf)
			switch {
			case err == io.EOF:
				ev = append(ev, event{data: got}, event{eof: true})
				events <- ev
				return
			case err != nil:
				events <- append(ev, event{ctrl: err.Error()})
				return
			case ctrl != nil:
				ev = append(ev, event{data: got}, event{ctrl: string(ctrl)})
				got = 0
			default:
				if buf[0] != 1 {
					events <- append(ev, event{ctrl: "bad stream byte"})
					return
				}
				got += k - 1
			}
		}
	}()
	ev := recvOrTimeout(t, events, 10*time.Second, "ordered stream")
	want := []event{{data: n}, {ctrl: `{"code":0,"op":"exit"}`}, {data: 0}, {eof: true}}
	if !slices.Equal(ev, want) {
		t.Fatalf("got %+v, want %+v", ev, want)
	}
}

func TestKeystrokeEchoFastUnderBulkFlood(t *testing.T) {
	c, ctx := floodedConn(t, 4)
	term, _, err := c.Open(ctx, "terminal", 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	var rtts []time.Duration
	buf := make([]byte, 16)
	for i := range 50 {
		start := time.Now()
		if _, err := term.Write([]byte{byte('a' + i%26)}); err != nil {
			t.Fatal(err)
		}
		if n, err := term.Read(buf); err != nil || n != 1 {
			t.Fatalf("echo read: %d %v", n, err)
		}
		rtts = append(rtts, time.Since(start))
	}
	slices.Sort(rtts)
	// Behaviour, not speed: a keystroke waits behind at most a few bulk
	// frames, never behind the flood (which would take seconds).
	if p50 := rtts[len(rtts)/2]; p50 > 200*time.Millisecond {
		t.Fatalf("echo p50 %v under flood, want < 200ms (all: %v)", p50, rtts)
	}
}

func TestStalledChannelDoesNotDelayOthersAndStaysBounded(t *testing.T) {
	cfg := Config{ConnBudget: 1 << 20}
	ts := newTestServer(t, tcpTransport, cfg, scenarioRouter(nil))
	c, s := ts.dial(t, Config{})
	ctx := ctx5(t)
	// Stalled: credit is never returned.
	stalled, _, err := c.Open(ctx, "flood", 64<<10, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer stalled.Close()
	other, _, err := c.Open(ctx, "process", 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	msg := bytes.Repeat([]byte("0123456789abcdef"), 1<<16) // 1 MiB
	go func() { _, _ = other.Write(msg) }()
	got := readN(t, other, len(msg), 10*time.Second)
	if !bytes.Equal(got, msg) {
		t.Fatal("echo corrupted")
	}
	s.mu.Lock()
	used := s.used
	s.mu.Unlock()
	if used > cfg.ConnBudget {
		t.Fatalf("server holds %d bytes, budget %d", used, cfg.ConnBudget)
	}
	c.mu.Lock()
	held := len(stalled.in.ring)
	c.mu.Unlock()
	if held > 64<<10 {
		t.Fatalf("stalled channel buffers %d bytes, window 64 KiB", held)
	}
}

func TestNoDeadlockSmallWindowsBothWays(t *testing.T) {
	cfg := Config{InputWindow: 1024, MaxFrame: 1024}
	ts := newTestServer(t, tcpTransport, cfg, scenarioRouter(nil))
	c, _ := ts.dial(t, cfg)
	ch, _, err := c.Open(ctx5(t), "process", 1024, nil)
	if err != nil {
		t.Fatal(err)
	}
	msg := make([]byte, 10<<20)
	for i := range msg {
		msg[i] = byte(i * 7)
	}
	werr := make(chan error, 1)
	go func() { _, err := ch.Write(msg); werr <- err }()
	got := readN(t, ch, len(msg), 60*time.Second)
	if err := recvOrTimeout(t, werr, 5*time.Second, "write"); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, msg) {
		t.Fatal("echo corrupted")
	}
}

func TestCtrlGetsThroughWithZeroCredit(t *testing.T) {
	ctrls := make(chan json.RawMessage, 4)
	ts := newTestServer(t, pipeTransport, Config{InputWindow: 1024}, scenarioRouter(ctrls))
	c, _ := ts.dial(t, Config{})
	ch, _, err := c.Open(ctx5(t), "sink", 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	go func() { _, _ = ch.Write(make([]byte, 4096)) }() // blocks after 1024 bytes
	for range 1000 {
		if ch.Credit() == 0 {
			break
		}
		runtime.Gosched()
	}
	if err := ch.SendCtrl(map[string]any{"op": "resize", "cols": 100, "rows": 40}); err != nil {
		t.Fatal(err)
	}
	if err := ch.SendCtrl(map[string]any{"op": "signal", "signal": "INT"}); err != nil {
		t.Fatal(err)
	}
	got := []string{
		string(recvOrTimeout(t, ctrls, 5*time.Second, "resize")),
		string(recvOrTimeout(t, ctrls, 5*time.Second, "signal")),
	}
	want := []string{`{"cols":100,"op":"resize","rows":40}`, `{"op":"signal","signal":"INT"}`}
	if !slices.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	_ = ch.Close()
}

func TestNonReadingClientIsDisconnected(t *testing.T) {
	for _, tr := range transports {
		t.Run(string(tr), func(t *testing.T) {
			before := runtime.NumGoroutine()
			cfg := Config{WriteStallTimeout: 300 * time.Millisecond}
			ts := newTestServer(t, tr, cfg, scenarioRouter(nil))
			rc := rawDial(t, ts, true)
			s := recvOrTimeout(t, ts.conns, 5*time.Second, "server conn")
			for i := uint32(1); i < 16; i += 2 {
				p, _ := json.Marshal(map[string]any{"kind": "flood", "window": 1 << 30})
				rc.send(typeOpen, i, p)
			}
			// Never read again.
			recvOrTimeout(t, s.Done(), 10*time.Second, "server disconnect")
			if err := s.Err(); !errors.Is(err, ErrWriteStalled) {
				t.Fatalf("server ended with %v, want ErrWriteStalled", err)
			}
			_ = rc.ws.CloseNow()
			ts.close()
			waitGoroutines(t, before)
		})
	}
}

// waitGoroutines waits (bounded) until the goroutine count is back to
// at most n.
func waitGoroutines(t testing.TB, n int) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		if runtime.NumGoroutine() <= n {
			return
		}
		time.Sleep(20 * time.Millisecond) // polling a count, not synchronizing
	}
	buf := make([]byte, 1<<20)
	t.Fatalf("goroutines: %d, want <= %d\n%s", runtime.NumGoroutine(), n, buf[:runtime.Stack(buf, true)])
}

func TestThousandChannels(t *testing.T) {
	ts := newTestServer(t, tcpTransport, Config{MaxChannels: 1000}, scenarioRouter(nil))
	c, _ := ts.dial(t, Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	chans := make([]*Channel, 1000)
	for i := range chans {
		ch, _, err := c.Open(ctx, "process", 0, nil)
		if err != nil {
			t.Fatalf("open %d: %v", i, err)
		}
		chans[i] = ch
	}
	_, _, err := c.Open(ctx, "process", 0, nil)
	var e *Error
	if !errors.As(err, &e) || e.Code != CodeLimitReached {
		t.Fatalf("open 1001: got %v, want limit_reached", err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, len(chans))
	for i, ch := range chans {
		wg.Go(func() {
			msg := []byte{byte(i), byte(i >> 8)}
			if _, err := ch.Write(msg); err != nil {
				errs <- err
				return
			}
			buf := make([]byte, 2)
			if _, err := io.ReadFull(ch, buf); err != nil || !bytes.Equal(buf, msg) {
				errs <- errors.Join(err, errors.New("echo mismatch"))
			}
			_ = ch.Close()
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

func TestCloseEOFDataRaces(t *testing.T) {
	ts := newTestServer(t, pipeTransport, Config{}, scenarioRouter(nil))
	c, s := ts.dial(t, Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for i := range 300 {
		ch, _, err := c.Open(ctx, "process", 0, nil)
		if err != nil {
			t.Fatalf("iteration %d: %v", i, err)
		}
		var wg sync.WaitGroup
		wg.Go(func() { _, _ = ch.Write([]byte("some data")) })
		wg.Go(func() { _ = ch.CloseWrite() })
		wg.Go(func() {
			buf := make([]byte, 64)
			_, _ = ch.Read(buf)
		})
		if i%2 == 0 {
			wg.Go(func() { _ = ch.Close() })
		} else {
			// Server side closes.
			s.mu.Lock()
			sch := s.channels[ch.ID()]
			s.mu.Unlock()
			if sch != nil {
				wg.Go(func() { _ = sch.CloseWithError(NewError(CodeNotFound, "gone")) })
			}
		}
		wg.Wait()
		_ = ch.Close()
		recvOrTimeout(t, ch.Done(), 5*time.Second, "channel done")
	}
	// Everything is dropped on both sides once the CLOSEs crossed.
	if err := c.Call(ctx, "echo", nil, nil); err != nil {
		t.Fatal(err)
	}
}

func TestStreamExactWithAnyReadSize(t *testing.T) {
	for _, kind := range []string{"terminal", "process"} {
		t.Run(kind, func(t *testing.T) {
			ts := newTestServer(t, tcpTransport, Config{InputWindow: 8 << 10}, scenarioRouter(nil))
			c, _ := ts.dial(t, Config{})
			ch, _, err := c.Open(ctx5(t), kind, 16<<10, nil)
			if err != nil {
				t.Fatal(err)
			}
			msg := make([]byte, 4<<20)
			for i := range msg {
				msg[i] = byte(i*31 + i>>11)
			}
			go func() {
				// Writes of odd sizes, so frames and reads never line up.
				for p := msg; len(p) > 0; {
					n := min(len(p), 1+len(p)%40000)
					if _, err := ch.Write(p[:n]); err != nil {
						return
					}
					p = p[n:]
				}
			}()
			got := make(chan []byte, 1)
			go func() {
				out := make([]byte, 0, len(msg))
				buf := make([]byte, 70000)
				for i := 0; len(out) < len(msg); i++ {
					size := []int{1, 7, 100, 4096, 32 << 10, 32<<10 + 1, 70000}[i%7]
					n, err := ch.Read(buf[:min(size, len(msg)-len(out))])
					out = append(out, buf[:n]...)
					if err != nil {
						break
					}
				}
				got <- out
			}()
			out := recvOrTimeout(t, got, 60*time.Second, "echo")
			if !bytes.Equal(out, msg) {
				i := 0
				for i < len(out) && out[i] == msg[i] {
					i++
				}
				t.Fatalf("got %d bytes, want %d; first difference at %d", len(out), len(msg), i)
			}
		})
	}
}

func TestConcurrentReadsLoseNothing(t *testing.T) {
	ts := newTestServer(t, pipeTransport, Config{}, scenarioRouter(nil))
	c, _ := ts.dial(t, Config{})
	ch, _, err := c.Open(ctx5(t), "process", 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	const total = 1 << 20
	go func() {
		_, _ = ch.Write(make([]byte, total))
		_ = ch.CloseWrite() // the echo ends with EOF
	}()
	sums := make(chan int, 3)
	for i := range 3 {
		go func() {
			buf := make([]byte, 1000*(i+1))
			n := 0
			for {
				k, err := ch.Read(buf)
				n += k
				if err != nil {
					sums <- n
					return
				}
			}
		}()
	}
	got := 0
	for range 3 {
		got += recvOrTimeout(t, sums, 20*time.Second, "readers")
	}
	if got != total {
		t.Fatalf("readers got %d bytes together, want %d", got, total)
	}
}
