package mux

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"testing"
	"time"
)

// Close from inside an OnNotify callback returns well before the close
// timeout and ends the connection (it used to wait for itself).
func TestCloseFromNotifyCallback(t *testing.T) {
	for _, tr := range transports {
		t.Run(string(tr), func(t *testing.T) {
			ts := newTestServer(t, tr, Config{}, echoRouter())
			cfg := Config{CloseTimeout: 10 * time.Second}
			c, s := ts.dial(t, cfg)
			closed := make(chan error, 1)
			c.OnNotify(func(method string, params json.RawMessage) {
				start := time.Now()
				err := c.Close()
				if d := time.Since(start); d > 5*time.Second {
					t.Errorf("Close from the callback took %v", d)
				}
				closed <- err
			})
			if err := s.Notify("process.exited", map[string]any{"id": "p1"}); err != nil {
				t.Fatal(err)
			}
			if err := recvOrTimeout(t, closed, 8*time.Second, "Close in callback"); err != nil {
				t.Fatalf("Close: %v", err)
			}
			recvOrTimeout(t, c.Done(), 5*time.Second, "client done")
			recvOrTimeout(t, s.Done(), 5*time.Second, "server done")
			// A second Close, from outside, waits for the callback's end.
			if err := c.Close(); err != nil {
				t.Fatalf("second Close: %v", err)
			}
		})
	}
}

// DATA sent right after OPEN, before the open handler has decided
// whether the channel takes input, gets CLOSE not_writable on a channel
// without input (flow_control on one with input: it had no credit yet).
func TestDataBeforeOpenOK(t *testing.T) {
	cases := []struct {
		name   string
		input  bool
		reason string
	}{
		{"no input", false, "not_writable"},
		{"input", true, "flow_control"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			entered, release := make(chan struct{}), make(chan struct{})
			rt := echoRouter()
			rt.HandleOpen("gated", func(ctx context.Context, ch *Channel, p json.RawMessage) (any, error) {
				close(entered)
				<-release // the DATA arrives while the handler runs
				ch.SetInputEnabled(tc.input)
				return nil, nil
			})
			ts := newTestServer(t, tcpTransport, Config{}, rt)
			rc := rawDial(t, ts, true)
			rc.send(typeOpen, 1, []byte(`{"kind":"gated","window":4096}`))
			recvOrTimeout(t, entered, 5*time.Second, "open handler")
			rc.send(typeData, 1, []byte("x"))
			// The read loop handles frames in order: once the echo
			// answer is back, the DATA has been seen.
			rc.send(typeRPC, 0, []byte(`{"jsonrpc":"2.0","id":1,"method":"echo","params":{}}`))
			rc.recvType(typeRPC)
			close(release)
			h, p := rc.recv()
			if h.Type() != typeClose || h.Channel() != 1 {
				t.Fatalf("got %v %s, want CLOSE on 1", h, p)
			}
			e, err := parseErrorPayload(p)
			if err != nil || e == nil || e.Reason != tc.reason {
				t.Fatalf("CLOSE %s, want %s", p, tc.reason)
			}
		})
	}
}

// A peer that stops reading is sent close 4002 (best effort, bounded)
// before its socket is dropped: after missed pings the frame gets
// through and the peer sees 4002; behind a stalled write it cannot, and
// the write-stall bound ends the connection anyway.
func TestStalledPeerGets4002(t *testing.T) {
	t.Run("missed pings", func(t *testing.T) {
		const every = 100 * time.Millisecond
		ts := newTestServer(t, tcpTransport, Config{PingInterval: every}, echoRouter())
		start := time.Now()
		rc := rawDial(t, ts, true) // reads HELLO, then nothing: no pongs
		s := recvOrTimeout(t, ts.conns, 5*time.Second, "server conn")
		recvOrTimeout(t, s.Done(), 10*time.Second, "server to drop the peer")
		if d := time.Since(start); d < 2*every {
			t.Errorf("dropped after %v, before two ping intervals", d)
		}
		if err := s.Err(); !errors.Is(err, ErrPingTimeout) {
			t.Fatalf("server conn error %v, want ErrPingTimeout", err)
		}
		if got := rc.closeStatus(); got != StatusStalled {
			t.Fatalf("close status %d, want %d", got, StatusStalled)
		}
	})
	t.Run("stalled write", func(t *testing.T) {
		const stall = 300 * time.Millisecond
		cfg := Config{WriteStallTimeout: stall, PingInterval: -1, CloseTimeout: 5 * time.Second}
		ts := newTestServer(t, tcpTransport, cfg, benchRouter())
		rc := rawDial(t, ts, true)
		s := recvOrTimeout(t, ts.conns, 5*time.Second, "server conn")
		rc.open(1, "bulk", maxWindow) // then never read: the server's writes stall
		start := time.Now()
		recvOrTimeout(t, s.Done(), 10*time.Second, "server to drop the peer")
		if err := s.Err(); !errors.Is(err, ErrWriteStalled) {
			t.Fatalf("server conn error %v, want ErrWriteStalled", err)
		}
		// The 4002 attempt is bounded by 1 s, not CloseTimeout.
		if d := time.Since(start); d > stall+4*time.Second {
			t.Errorf("dropped %v after the flood began", d)
		}
	})
	// A ping cannot get out behind a stalled write (the library bounds
	// its wait for the socket): that failure is not a missed pong, and
	// the peer keeps the whole write-stall bound.
	t.Run("stalled write with pings", func(t *testing.T) {
		// Over stalledCloseTimeout past the first ping, so an early drop
		// (bounded 4002 attempt, then shutdown) ends before it.
		// The first ping goes out 300 ms in: by then the flood has
		// stalled a write, even on a loaded machine.
		const stall = 3 * time.Second
		cfg := Config{WriteStallTimeout: stall, PingInterval: 300 * time.Millisecond, CloseTimeout: 5 * time.Second}
		ts := newTestServer(t, tcpTransport, cfg, benchRouter())
		rc := rawDial(t, ts, true)
		s := recvOrTimeout(t, ts.conns, 5*time.Second, "server conn")
		start := time.Now()
		rc.open(1, "bulk", maxWindow) // then never read: the server's writes stall
		recvOrTimeout(t, s.Done(), 10*time.Second, "server to drop the peer")
		if err := s.Err(); !errors.Is(err, ErrWriteStalled) {
			t.Fatalf("server conn error %v, want ErrWriteStalled", err)
		}
		if d := time.Since(start); d < stall {
			t.Errorf("dropped %v after the flood began, before the write-stall bound", d)
		}
	})
}

// ReadFrame returns each DATA payload whole and alone, in order with the
// CTRL ops between them, whether the frames land in a waiting
// ReadFrame's buffer (direct delivery) or in the channel's buffer first.
func TestReadFrameWholeFramesInOrder(t *testing.T) {
	sizes := []int{1, 100, 32<<10 - 1, 7, 32<<10 - 1, 4096, 1, 32<<10 - 1, 2}
	type item struct {
		size int
		ctrl string
	}
	var want []item
	for i, n := range sizes {
		want = append(want, item{size: n})
		if i%3 == 2 {
			want = append(want, item{ctrl: fmt.Sprintf(`{"i":%d}`, i)})
		}
	}
	cases := []struct {
		name    string
		waitAll bool // read only once everything is buffered
	}{
		{"waiting reader", false},
		{"buffered", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			written := make(chan struct{})
			rt := echoRouter()
			rt.HandleOpen("frames", func(ctx context.Context, ch *Channel, p json.RawMessage) (any, error) {
				ch.SetInputEnabled(false)
				go func() {
					defer close(written)
					for _, it := range want {
						var err error
						if it.ctrl != "" {
							err = ch.SendCtrl(json.RawMessage(it.ctrl))
						} else {
							_, err = ch.WriteStream(ctx, 1, bytes.Repeat([]byte{byte(it.size)}, it.size))
						}
						if err != nil {
							return
						}
					}
					_ = ch.CloseWrite()
				}()
				return nil, nil
			})
			ts := newTestServer(t, tcpTransport, Config{}, rt)
			c, _ := ts.dial(t, Config{})
			ch, _, err := c.Open(context.Background(), "frames", 1<<20, nil)
			if err != nil {
				t.Fatal(err)
			}
			if tc.waitAll {
				recvOrTimeout(t, written, 5*time.Second, "server writes")
			}
			buf := make([]byte, 64<<10)
			var got []item
			for range 100 {
				n, ctrl, err := ch.ReadFrame(buf)
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				if ctrl != nil {
					got = append(got, item{ctrl: string(ctrl)})
					continue
				}
				size := n - 1
				if buf[0] != 1 || !bytes.Equal(buf[1:n], bytes.Repeat([]byte{byte(size)}, size)) {
					t.Fatalf("frame %d: bad payload of %d bytes", len(got), n)
				}
				got = append(got, item{size: size})
			}
			if !slices.Equal(got, want) {
				t.Fatalf("got %v, want %v", got, want)
			}
		})
	}
}

// A client Write on a channel granted no credit fails with not_writable
// instead of waiting forever; CTRL still works there.
func TestWriteWithoutCreditFails(t *testing.T) {
	ctrls := make(chan string, 1)
	rt := echoRouter()
	rt.HandleOpen("readonly", func(ctx context.Context, ch *Channel, p json.RawMessage) (any, error) {
		ch.SetInputEnabled(false)
		ch.OnCtrl(func(op json.RawMessage) { ctrls <- string(op) })
		return nil, nil
	})
	ts := newTestServer(t, tcpTransport, Config{}, rt)
	c, _ := ts.dial(t, Config{})
	ch, _, err := c.Open(context.Background(), "readonly", 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { _, err := ch.Write([]byte("x")); done <- err }()
	err = recvOrTimeout(t, done, 5*time.Second, "Write to return")
	var e *Error
	if !errors.As(err, &e) || e.Reason != "not_writable" {
		t.Fatalf("Write: %v, want not_writable", err)
	}
	if err := ch.SendCtrl(map[string]string{"op": "signal", "signal": "INT"}); err != nil {
		t.Fatal(err)
	}
	if got := recvOrTimeout(t, ctrls, 5*time.Second, "CTRL"); got != `{"op":"signal","signal":"INT"}` {
		t.Fatalf("CTRL %s", got)
	}
}

// A socket whose TCP stream just ends (FIN, no close handshake: a client
// that crashed, a proxy that cut it) fails the server's channels with
// ErrConnClosed, never with an error that reads as io.EOF: a stdin
// consumer took that for the client's EOF and closed the process's
// input, which a reconnecting writer then could not resume.
func TestSocketEndIsNoChannelEOF(t *testing.T) {
	ended := make(chan error, 1)
	rt := NewRouter()
	rt.HandleOpen("process", func(ctx context.Context, ch *Channel, p json.RawMessage) (any, error) {
		go func() {
			buf := make([]byte, 64)
			for {
				if _, err := ch.ReadNoCredit(buf); err != nil {
					ended <- err
					return
				}
			}
		}()
		return map[string]any{}, nil
	})
	ts := newTestServer(t, tcpTransport, Config{}, rt)
	var raw net.Conn
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		raw = c
		return c, err
	}}}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := Dial(ctx, ts.url, DialOptions{HTTPClient: hc, Client: "test/1"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s := recvOrTimeout(t, ts.conns, 5*time.Second, "server conn")
	defer s.Close()
	if _, _, err := c.Open(ctx, "process", 0, nil); err != nil {
		t.Fatal(err)
	}
	_ = raw.Close() // FIN, no close frame
	err = recvOrTimeout(t, ended, 5*time.Second, "the server channel's read error")
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || !errors.Is(err, ErrConnClosed) {
		t.Fatalf("read after the socket ended: %v; want ErrConnClosed, not io.EOF", err)
	}
}
